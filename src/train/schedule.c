/* Learning-rate schedules (transformers' get_*_schedule_with_warmup) and the names of the
 * enums the trainer's flags parse. */
#include <math.h>
#include <string.h>

#include "loupe/train.h"

const char *lp_train_method_name(lp_train_method m)
{
    switch (m) {
    case LP_TRAIN_METHOD_FULL: return "full";
    case LP_TRAIN_METHOD_LORA: return "lora";
    case LP_TRAIN_METHOD_QLORA: return "qlora";
    }
    return "?";
}

lp_status lp_train_method_parse(const char *s, lp_train_method *out)
{
    static const lp_train_method all[] = {LP_TRAIN_METHOD_FULL, LP_TRAIN_METHOD_LORA, LP_TRAIN_METHOD_QLORA};
    for (size_t i = 0; s && i < sizeof all / sizeof *all; i++)
        if (!strcmp(s, lp_train_method_name(all[i]))) {
            *out = all[i];
            return LP_OK;
        }
    return lp_err(LP_STATUS_INVALID_ARG, "unknown method '%s' (expected full, lora or qlora)", s ? s : "");
}

const char *lp_lr_schedule_name(lp_lr_schedule s)
{
    switch (s) {
    case LP_LR_SCHEDULE_LINEAR: return "linear";
    case LP_LR_SCHEDULE_COSINE: return "cosine";
    case LP_LR_SCHEDULE_CONSTANT: return "constant";
    }
    return "?";
}

lp_status lp_lr_schedule_parse(const char *s, lp_lr_schedule *out)
{
    static const lp_lr_schedule all[] = {LP_LR_SCHEDULE_LINEAR, LP_LR_SCHEDULE_COSINE, LP_LR_SCHEDULE_CONSTANT};
    for (size_t i = 0; s && i < sizeof all / sizeof *all; i++)
        if (!strcmp(s, lp_lr_schedule_name(all[i]))) {
            *out = all[i];
            return LP_OK;
        }
    return lp_err(LP_STATUS_INVALID_ARG, "unknown LR schedule '%s' (expected linear, cosine or constant)",
                  s ? s : "");
}

double lp_lr_at(lp_lr_schedule s, double lr, int64_t warmup, int64_t total, int64_t step)
{
    if (step < warmup)
        return lr * (double)step / (double)(warmup > 0 ? warmup : 1);
    if (s == LP_LR_SCHEDULE_CONSTANT)
        return lr;
    int64_t span = total - warmup;
    if (span < 1)
        span = 1;
    double progress = (double)(step - warmup) / (double)span;
    if (s == LP_LR_SCHEDULE_LINEAR)
        return lr * fmax(0.0, 1.0 - progress);
    /* cosine with num_cycles 0.5 */
    return lr * fmax(0.0, 0.5 * (1.0 + cos(M_PI * progress)));
}
