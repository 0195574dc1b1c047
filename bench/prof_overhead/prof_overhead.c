/* prof_overhead: measures what a profiler range costs and what profiling costs a step.
 *   1. ns per range (push + pop): recording (active window), recording off (no session),
 *      outside the active window (session in its wait phase), and compiled out.
 *   2. step time of a synthetic workload (~5,000 ranges per step) with the profiler off
 *      and with every step recorded, as a percentage overhead.
 * Figures are minima over repetitions (the machine is shared). Never a pass/fail test.
 *
 *   prof_overhead [--json FILE]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loupe/prof.h"

void lp_bench_ranges_on(int n);
void lp_bench_ranges_compiled_out(int n);
double lp_bench_step_on(int n_ranges, int work);
double lp_bench_step_compiled_out(int n_ranges, int work);

static volatile double sink;

static lp_status discard(const lp_prof_events *ev, void *user)
{
    (void)user;
    sink += (double)lp_prof_events_count(ev);
    return LP_OK;
}

static void start(int schedule_wait)
{
    lp_prof_config cfg;
    lp_prof_config_init(&cfg);
    cfg.on_trace_ready = discard;
    cfg.record_shapes = 1;
    if (schedule_wait) {
        cfg.use_schedule = 1;
        cfg.schedule = (lp_prof_schedule){.wait = 1000000, .warmup = 1, .active = 1, .repeat = 1};
    }
    if (lp_prof_start(&cfg) != LP_OK) {
        fprintf(stderr, "prof_overhead: %s\n", lp_err_msg());
        exit(1);
    }
}

static void stop(void)
{
    if (lp_prof_stop() != LP_OK) {
        fprintf(stderr, "prof_overhead: %s\n", lp_err_msg());
        exit(1);
    }
}

/* mode: 0 off, 1 recording, 2 wait phase, 3 compiled out. Returns min ns per range. */
static double per_range(int mode, int n, int reps)
{
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        if (mode == 1)
            start(0);
        else if (mode == 2)
            start(1);
        int64_t t0 = lp_prof_now_ns();
        if (mode == 3)
            lp_bench_ranges_compiled_out(n);
        else
            lp_bench_ranges_on(n);
        int64_t t1 = lp_prof_now_ns();
        if (mode == 1 || mode == 2)
            stop();
        double ns = (double)(t1 - t0) / n;
        if (ns < best)
            best = ns;
    }
    return best;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Step times with the profiler off and recording, interleaved so that drift and
 * neighbours' load hit both alike: a schedule of wait 1 / active 1 makes even steps idle
 * and odd steps recorded (each window is collected inside lp_prof_step, outside the
 * timed region). Medians in ms into *off and *on. */
static void step_ms(int pairs, int n_ranges, int work, double *off, double *on)
{
    double *t_off = malloc((size_t)pairs * sizeof *t_off), *t_on = malloc((size_t)pairs * sizeof *t_on);
    lp_prof_config cfg;
    lp_prof_config_init(&cfg);
    cfg.on_trace_ready = discard;
    cfg.record_shapes = 1;
    cfg.use_schedule = 1;
    cfg.schedule = (lp_prof_schedule){.wait = 1, .warmup = 0, .active = 1, .repeat = 0};
    if (lp_prof_start(&cfg) != LP_OK)
        exit(1);
    for (int s = 0; s < 2 * pairs; s++) {
        int rec = lp_prof_current_action() != LP_PROF_ACTION_NONE;
        int64_t t0 = lp_prof_now_ns();
        sink += lp_bench_step_on(n_ranges, work);
        double ms = (double)(lp_prof_now_ns() - t0) / 1e6;
        if (rec)
            t_on[s / 2] = ms;
        else
            t_off[s / 2] = ms;
        if (lp_prof_step() != LP_OK)
            exit(1);
    }
    stop();
    qsort(t_off, (size_t)pairs, sizeof *t_off, cmp_d);
    qsort(t_on, (size_t)pairs, sizeof *t_on, cmp_d);
    *off = t_off[pairs / 2];
    *on = t_on[pairs / 2];
    free(t_off);
    free(t_on);
}

int main(int argc, char **argv)
{
    const char *json = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0 && i + 1 < argc)
            json = argv[++i];
        else {
            fprintf(stderr, "usage: prof_overhead [--json FILE]\n");
            return 2;
        }
    }
    const int n = 200000, reps = 7;
    per_range(1, n, 2); /* warm the allocator and caches */
    double rec = per_range(1, n, reps);
    double off = per_range(0, n, reps);
    double wait = per_range(2, n, reps);
    double out = per_range(3, n, reps);
    printf("ns per range (push + pop), min of %d x %d:\n", reps, n);
    printf("  recording              %8.2f ns\n", rec);
    printf("  off (no session)       %8.2f ns\n", off);
    printf("  outside active window  %8.2f ns\n", wait);
    printf("  compiled out           %8.2f ns\n", out);
    printf("  off minus compiled out %8.2f ns\n", off - out);

    /* Two densities: ops of a few us (a step of ~25 ms, like a small model's CPU
     * training step) and a worst case of near-empty ops (~60 ns each). */
    const int pairs = 41, n_ranges = 5000;
    const int works[2] = {1600, 100};
    double b_ms[2], p_ms[2], pct[2];
    for (int w = 0; w < 2; w++) {
        double base, prof;
        step_ms(3, n_ranges, works[w], &base, &prof); /* warm-up */
        step_ms(pairs, n_ranges, works[w], &base, &prof);
        b_ms[w] = base;
        p_ms[w] = prof;
        pct[w] = (prof - base) / base * 100.0;
        printf("synthetic step, %d ranges, %d work units per op (medians of %d interleaved "
               "pairs):\n", n_ranges, works[w], pairs);
        printf("  profiler off (wait)    %8.3f ms\n", base);
        printf("  recorded               %8.3f ms\n", prof);
        printf("  overhead               %8.2f %%  (%.1f ns per range)\n", pct[w],
               (prof - base) * 1e6 / n_ranges);
    }
    if (json) {
        FILE *fp = fopen(json, "w");
        if (!fp) {
            perror(json);
            return 1;
        }
        fprintf(fp,
                "{\"ns_per_range\": {\"recording\": %.3f, \"off\": %.3f, \"outside_window\": "
                "%.3f, \"compiled_out\": %.3f},\n \"steps\": [",
                rec, off, wait, out);
        for (int w = 0; w < 2; w++)
            fprintf(fp,
                    "%s{\"ranges\": %d, \"work\": %d, \"off_ms\": %.4f, \"recorded_ms\": %.4f, "
                    "\"overhead_pct\": %.3f}",
                    w ? ", " : "", n_ranges, works[w], b_ms[w], p_ms[w], pct[w]);
        fprintf(fp, "]}\n");
        fclose(fp);
    }
    return 0;
}
