/* libFuzzer target: a sharded checkpoint's model.safetensors.index.json over arbitrary
 * bytes. An accepted index names at least one shard, every shard a plain file name in the
 * index's directory (no '/', not "." or "..", distinct), and every tensor a valid shard. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../src/io/io_internal.h" /* the index parser is io-internal */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    lp_st_index ix;
    if (lp_st_index_parse((const char *)data, size, "fuzz/model.safetensors.index.json", &ix) != LP_OK) {
        if (ix.shards || ix.tensors || ix.shard_of || ix.n_shards || ix.n_tensors || !*lp_err_msg())
            abort();
        return 0;
    }
    if (ix.n_shards < 1 || ix.n_tensors < ix.n_shards)
        abort();
    for (size_t j = 0; j < ix.n_shards; j++) {
        const char *s = ix.shards[j];
        if (!s || !*s || strchr(s, '/') || !strcmp(s, ".") || !strcmp(s, ".."))
            abort();
        for (size_t k = 0; k < j; k++)
            if (!strcmp(s, ix.shards[k]))
                abort();
    }
    for (size_t i = 0; i < ix.n_tensors; i++)
        if (!ix.tensors[i] || ix.shard_of[i] >= ix.n_shards)
            abort();
    lp_st_index_free(&ix);
    return 0;
}
