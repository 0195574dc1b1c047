/* libFuzzer target: safetensors header and offset validation over arbitrary bytes
 * (lp_st_parse_buffer), then every accepted tensor's view is read end to end so ASan
 * catches any view that escapes the buffer. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "loupe/io.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* a private copy: views must stay inside exactly [copy, copy + size) */
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    lp_st_file *f = NULL;
    if (lp_st_parse_buffer(buf, size, "fuzz.safetensors", &f) == LP_OK) {
        volatile uint8_t sink = 0;
        for (size_t i = 0; i < lp_st_count(f); i++) {
            const lp_st_tensor *t = lp_st_at(f, i);
            const uint8_t *p = t->data;
            for (uint64_t k = 0; k < t->nbytes; k++)
                sink ^= p[k];
            if (lp_st_find(f, t->name) != t)
                abort();
        }
        for (size_t i = 0; i < lp_st_metadata_count(f); i++) {
            const char *k, *v;
            lp_st_metadata_at(f, i, &k, &v);
            if (!k || !v || lp_st_metadata_get(f, k) != v)
                abort();
        }
        (void)sink;
        lp_st_close(f);
    }
    free(buf);
    return 0;
}
