/* libFuzzer target: a checkpoint's trainer_state.json (what --resume reads) over arbitrary
 * bytes, against the default training settings. An accepted state has integer counts in
 * [0, 9e15], a finite non-negative elapsed time, and was made with the same settings. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "../src/train/train_internal.h" /* the checkpoint reader is train-internal */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    lp_train_config c;
    lp_train_config_init(&c); // seed 42, batch 16, grad accum 1, max seq len 128: what the seeds hold
    lp_optim o = {0};
    lp_ckpt_state s = {0};
    lp_status st = lp_ckpt_state_parse((const char *)data, size, "fuzz/trainer_state.json", &c, &o, &s);
    if (st != LP_OK) {
        if ((st != LP_STATUS_FORMAT && st != LP_STATUS_INVALID_ARG) || !*lp_err_msg())
            abort();
        return 0;
    }
    const int64_t counts[4] = {s.step, o.t, s.pos.epoch, s.pos.batch};
    for (int i = 0; i < 4; i++)
        if (counts[i] < 0 || counts[i] > (int64_t)9e15)
            abort();
    if (!isfinite(s.elapsed_s) || s.elapsed_s < 0)
        abort();
    return 0;
}
