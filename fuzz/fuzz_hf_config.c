/* libFuzzer target: HF config.json parsing (lp_hf_config_parse) over arbitrary bytes;
 * an accepted config must satisfy the invariants the model builder relies on. */
#include <stdint.h>
#include <stdlib.h>

#include "loupe/io.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    lp_model_config c;
    if (lp_hf_config_parse((const char *)data, size, "fuzz/config.json", &c) == LP_OK) {
        if (c.hidden_size < 1 || c.num_layers < 1 || c.num_heads < 1 || c.num_kv_heads < 1 || c.head_dim < 1 ||
            c.num_heads % c.num_kv_heads || c.num_labels < 1 || !c.id2label)
            abort();
        for (int64_t i = 0; i < c.num_labels; i++)
            if (!c.id2label[i])
                abort();
        lp_model_config_free(&c);
    }
    return 0;
}
