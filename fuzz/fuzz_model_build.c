/* libFuzzer target: config.json bytes -> model construction -> one forward on a tiny batch,
 * the path every command that loads a model takes (lp_model_load on a config-only directory:
 * parameters initialized from the seed). A third of the inputs add LoRA adapters (PEFT setup).
 * Configs the parser refuses end there; accepted ones whose parameter count or position table
 * is large are skipped (a size limit of this target, not a finding: memory and speed), the
 * rest must load, run a forward and free without a crash, leak or sanitizer report. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loupe/io.h"
#include "loupe/models.h"

static char dir[64], path[96];

static int write_config(const uint8_t *data, size_t size)
{
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/lp_fuzz_model_%ld", (long)getpid());
        if (lp_mkdir_p(dir) != LP_OK)
            abort();
        snprintf(path, sizeof path, "%s/config.json", dir);
    }
    FILE *fp = fopen(path, "wb"); /* plain write: an fsync per input would cap the exec rate */
    if (!fp)
        abort();
    int ok = fwrite(data, 1, size, fp) == size;
    return fclose(fp) == 0 && ok;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    lp_model_config c;
    if (lp_hf_config_parse((const char *)data, size, "fuzz/config.json", &c) != LP_OK)
        return 0;
    int64_t H = c.hidden_size, P = c.max_position_embeddings;
    double params = (double)c.vocab_size * H + (double)P * H + (double)c.type_vocab_size * H +
                    (double)c.num_layers * (4.0 * H * H + 2.0 * H * c.intermediate_size) + (double)H * H;
    bool small = params < 2e6 && c.num_layers <= 8 && c.num_heads <= 64 && P <= 4096 && c.num_labels <= 64;
    lp_model_config_free(&c);
    if (!small || !write_config(data, size))
        return 0;
    lp_model_options o;
    lp_model_options_init(&o);
    o.task = LP_MODEL_TASK_SEQ_CLS;
    o.training = size % 2 == 0;
    o.quiet = true;
    if (size % 3 == 0) {
        o.lora.enabled = true;
        o.lora.rank = 1 + (int32_t)(size % 7);
    }
    lp_model *m = NULL;
    if (lp_model_load(dir, &o, &m) != LP_OK)
        return 0; /* refused (e.g. a llama-family config): with a message, which is the contract */
    lp_model_info mi;
    lp_model_info_get(m, &mi);
    enum { B = 2 };
    int32_t T = mi.max_positions < 5 ? (int32_t)mi.max_positions : 5;
    int32_t ids[B * 5], mask[B * 5], labels[B] = {0, (int32_t)(mi.num_labels - 1)};
    for (int32_t i = 0; i < B * T; i++) {
        ids[i] = (int32_t)((i * 7919) % mi.vocab_size);
        mask[i] = 1;
    }
    float logits[B * 64], loss;
    lp_status st = lp_model_loss_forward(m, ids, mask, NULL, labels, B, T, logits, &loss);
    if (st == LP_OK && o.training && !mi.has_head)
        abort(); /* a classifier was asked for */
    lp_model_free(m);
    return 0;
}
