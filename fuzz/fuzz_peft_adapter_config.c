/* libFuzzer target: PEFT adapter_config.json (the file `--adapter DIR` reads) over arbitrary
 * bytes; an accepted config must hold what LoRA setup relies on: a rank in [1, 65536], a
 * finite alpha, dropout in [0, 1), a regex or a non-empty list of non-NULL targets. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../src/models/models_internal.h" /* the parser is models-internal (lp_model__*) */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    lp_model_adapter_cfg c;
    if (lp_model__adapter_cfg_parse((const char *)data, size, "fuzz/adapter_config.json", &c) != LP_OK) {
        // a refused file leaves nothing behind and says why
        if (c.targets || c.target_regex || c.mts || c.n_targets || c.n_mts || !*lp_err_msg())
            abort();
        return 0;
    }
    if (c.r < 1 || c.r > 65536 || !isfinite(c.alpha) || !(c.dropout >= 0.0 && c.dropout < 1.0))
        abort();
    if (c.target_regex ? c.n_targets != 0 : c.n_targets < 1 || !c.targets)
        abort();
    for (size_t i = 0; i < c.n_targets; i++)
        if (!c.targets[i])
            abort();
    if (c.n_mts && !c.mts)
        abort();
    for (size_t i = 0; i < c.n_mts; i++)
        if (!c.mts[i])
            abort();
    // the adapters keep scale as a float
    const double scale = c.rslora ? c.alpha / sqrt((double)c.r) : c.alpha / (double)c.r;
    if (!(fabs(scale) <= FLT_MAX))
        abort();
    lp_model__adapter_cfg_free(&c);
    return 0;
}
