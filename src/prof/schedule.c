/* torch.profiler.schedule and profile.action_map, transcribed: which action each step
 * gets and what each transition between actions does. */
#include "prof_internal.h"

const char *lp_prof_action_name(lp_prof_action a)
{
    switch (a) {
    case LP_PROF_ACTION_NONE: return "NONE";
    case LP_PROF_ACTION_WARMUP: return "WARMUP";
    case LP_PROF_ACTION_RECORD: return "RECORD";
    case LP_PROF_ACTION_RECORD_AND_SAVE: return "RECORD_AND_SAVE";
    }
    return "?";
}

lp_status lp_prof_schedule_validate(const lp_prof_schedule *s)
{
    if (s->wait < 0)
        return lp_err(LP_STATUS_INVALID_ARG, "profiler schedule: wait must be >= 0 (got %lld)",
                      (long long)s->wait);
    if (s->warmup < 0)
        return lp_err(LP_STATUS_INVALID_ARG, "profiler schedule: warmup must be >= 0 (got %lld)",
                      (long long)s->warmup);
    if (s->active <= 0)
        return lp_err(LP_STATUS_INVALID_ARG, "profiler schedule: active must be > 0 (got %lld)",
                      (long long)s->active);
    if (s->repeat < 0)
        return lp_err(LP_STATUS_INVALID_ARG, "profiler schedule: repeat must be >= 0 (got %lld)",
                      (long long)s->repeat);
    if (s->skip_first < 0)
        return lp_err(LP_STATUS_INVALID_ARG,
                      "profiler schedule: skip_first must be >= 0 (got %lld)",
                      (long long)s->skip_first);
    return LP_OK;
}

lp_prof_action lp_prof_schedule_action(const lp_prof_schedule *s, int64_t step)
{
    if (step < 0 || s->active <= 0)
        return LP_PROF_ACTION_NONE;
    if (step < s->skip_first)
        return LP_PROF_ACTION_NONE;
    step -= s->skip_first;
    if (s->skip_first_wait != 0)
        step += s->wait;
    int64_t n = s->wait + s->warmup + s->active;
    /* torch: repeat > 0 and step / n >= repeat, true division: same as step >= repeat*n. */
    if (s->repeat > 0 && step >= s->repeat * n)
        return LP_PROF_ACTION_NONE;
    int64_t m = step % n;
    if (m < s->wait)
        return LP_PROF_ACTION_NONE;
    if (m < s->wait + s->warmup)
        return LP_PROF_ACTION_WARMUP;
    return m < n - 1 ? LP_PROF_ACTION_RECORD : LP_PROF_ACTION_RECORD_AND_SAVE;
}

lp_status lp_prof_schedule_from_frequency(int64_t frequency, int64_t warmup, int64_t active,
                                          lp_prof_schedule *out)
{
    if (active <= 0 || warmup < 0)
        return lp_err(LP_STATUS_INVALID_ARG,
                      "profiling_frequency: need active > 0 and warmup >= 0 (got %lld, %lld)",
                      (long long)active, (long long)warmup);
    if (frequency < warmup + active)
        return lp_err(LP_STATUS_INVALID_ARG,
                      "profiling_frequency %lld is shorter than warmup %lld + active %lld",
                      (long long)frequency, (long long)warmup, (long long)active);
    *out = (lp_prof_schedule){.wait = frequency - warmup - active,
                              .warmup = warmup,
                              .active = active,
                              .repeat = 0};
    return LP_OK;
}

int64_t lp_prof_schedule_cycle_steps(const lp_prof_schedule *s)
{
    return s->skip_first + (s->skip_first_wait ? 0 : s->wait) + s->warmup + s->active;
}

int64_t lp_prof_schedule_adjust_max_steps(const lp_prof_schedule *s, int64_t max_steps)
{
    if (max_steps <= 0)
        return max_steps;
    int64_t need = lp_prof_schedule_cycle_steps(s);
    return max_steps < need ? need : max_steps;
}

uint32_t lp_prof_transition(lp_prof_action prev, int next)
{
    enum { P = LP_PROF_DO_PREPARE, S = LP_PROF_DO_START, T = LP_PROF_DO_STOP,
           R = LP_PROF_DO_READY, W = LP_PROF_DO_WARN };
    const int RS = LP_PROF_ACTION_RECORD_AND_SAVE;
    if (next < 0) { /* exit */
        switch (prev) {
        case LP_PROF_ACTION_NONE: return 0;
        case LP_PROF_ACTION_WARMUP: return S | T;
        default: return T | R;
        }
    }
    if ((int)prev == next)
        return prev == LP_PROF_ACTION_RECORD_AND_SAVE ? (T | R | P | S) : 0;
    switch (prev) {
    case LP_PROF_ACTION_NONE:
        return next == LP_PROF_ACTION_WARMUP ? P : (P | S);
    case LP_PROF_ACTION_WARMUP:
        return next == LP_PROF_ACTION_NONE ? (W | S | T) : S;
    case LP_PROF_ACTION_RECORD:
        if (next == LP_PROF_ACTION_NONE || next == LP_PROF_ACTION_WARMUP)
            return W | T;
        return 0; /* RECORD -> RECORD_AND_SAVE: keep recording */
    case LP_PROF_ACTION_RECORD_AND_SAVE:
        if (next == LP_PROF_ACTION_NONE)
            return T | R;
        if (next == LP_PROF_ACTION_WARMUP)
            return T | R | P;
        return T | R | P | S;
    }
    (void)RS;
    return 0;
}
