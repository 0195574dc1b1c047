/* The diagnosis of a run: each op's achieved GFLOP/s and GB/s against the machine's
 * ceilings (loupe peak's FMA peak and STREAM bandwidth), compute- or memory-bound by its
 * arithmetic intensity against the ridge point, the top three bottlenecks, and suggestions
 * that each state the measured number and the threshold that triggered them. */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "run_internal.h"

/* Thresholds, each printed beside the suggestion it triggers. */
#define DATA_SHARE 0.05   /* data loading above 5 % of the step: the input pipeline shows */
#define OPT_SHARE 0.10    /* optimizer above 10 % of the step */
#define LOW_PEAK 0.25     /* a compute-bound op under 25 % of the FMA peak */
#define LOW_BW 0.30       /* a memory-bound op under 30 % of the bandwidth */
#define ACT_SHARE 0.40    /* activations above 40 % of the tracked peak: checkpointing pays */
#define JITTER 1.30       /* slowest step over median step above 1.3: a noisy machine or warm-up */
#define OTHER_SHARE 0.15  /* time outside the four ranges above 15 % of the step */

typedef struct op_eff {
    const lp_run_op *op;
    double gflops, gbs, ai, peak_frac, bw_frac; /* NaN when unknown */
    int bound;                                  /* 1 compute, 2 memory, 0 unknown */
} op_eff;

static op_eff judge(const lp_run_op *op, const lp_run_ceilings *c)
{
    op_eff e = {.op = op, .gflops = NAN, .gbs = NAN, .ai = NAN, .peak_frac = NAN, .bw_frac = NAN};
    double s = op->total_ms / 1e3;
    if (s > 0 && isfinite(op->flops))
        e.gflops = op->flops / s / 1e9;
    if (s > 0 && isfinite(op->bytes) && op->bytes > 0)
        e.gbs = op->bytes / s / 1e9;
    if (isfinite(op->flops) && isfinite(op->bytes) && op->bytes > 0)
        e.ai = op->flops / op->bytes;
    if (c && isfinite(c->gflops) && c->gflops > 0)
        e.peak_frac = e.gflops / c->gflops;
    if (c && isfinite(c->gbs) && c->gbs > 0)
        e.bw_frac = e.gbs / c->gbs;
    if (c && isfinite(e.ai) && isfinite(c->gflops) && isfinite(c->gbs) && c->gbs > 0)
        e.bound = e.ai >= c->gflops / c->gbs ? 1 : 2; // the ridge point of the roofline
    return e;
}

static double step_mean(const lp_run_data *d, size_t off)
{
    double s = 0;
    int32_t k = 0;
    for (int32_t i = 0; i < d->n_steps; i++) {
        double v = *(const double *)((const char *)&d->steps[i] + off);
        if (isfinite(v)) {
            s += v;
            k++;
        }
    }
    return k ? s / k : NAN;
}

static void suggest(lp_html *h, int *n, const char *fmt, ...) LP_PRINTF(3, 4);
static void suggest(lp_html *h, int *n, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    lp_html_raw(h, "<li>");
    lp_html_text(h, buf);
    lp_html_raw(h, "</li>\n");
    (*n)++;
}

static void suggestions(lp_html *h, const lp_run_data *d, const op_eff *e, int32_t ne, const lp_run_ceilings *c)
{
    lp_html_h(h, 3, "Suggestions");
    lp_html_raw(h, "<ul class=\"lp-suggestions\">\n");
    int n = 0;
    double step = step_mean(d, offsetof(lp_run_step, step_ms)), data = step_mean(d, offsetof(lp_run_step, data_ms)),
           opt = step_mean(d, offsetof(lp_run_step, optimizer_ms)), fwd = step_mean(d, offsetof(lp_run_step, forward_ms)),
           bwd = step_mean(d, offsetof(lp_run_step, backward_ms));
    if (step > 0 && data / step > DATA_SHARE)
        suggest(h, &n,
                "Data loading takes %.1f %% of the step (%.2f of %.1f ms; threshold %.0f %%): pre-tokenize the "
                "data or raise the batch size so each step carries more compute per load.",
                100 * data / step, data, step, 100 * DATA_SHARE);
    if (step > 0 && opt / step > OPT_SHARE)
        suggest(h, &n,
                "The optimizer step takes %.1f %% of the step (%.1f ms; threshold %.0f %%): train fewer parameters "
                "(--method lora) or accumulate gradients (--grad-accum) so it runs less often per sample.",
                100 * opt / step, opt, 100 * OPT_SHARE);
    double other = step - (isfinite(data) ? data : 0) - (isfinite(fwd) ? fwd : 0) - (isfinite(bwd) ? bwd : 0) -
                   (isfinite(opt) ? opt : 0);
    if (step > 0 && other / step > OTHER_SHARE)
        suggest(h, &n,
                "%.1f %% of the step (%.1f ms; threshold %.0f %%) is outside data, forward, backward and "
                "optimizer: logging, checkpoints or evaluation inside the loop.",
                100 * other / step, other, 100 * OTHER_SHARE);
    for (int32_t i = 0; i < ne && i < 3; i++) {
        const op_eff *x = &e[i];
        if (x->bound == 1 && x->peak_frac < LOW_PEAK)
            suggest(h, &n,
                    "%s is compute-bound (%.1f FLOP/byte) yet reaches %.1f GFLOP/s, %.1f %% of the %.0f GFLOP/s "
                    "peak (threshold %.0f %%): larger batches or longer sequences give its matrices more work per "
                    "call; check --threads matches the free cores.",
                    x->op->name, x->ai, x->gflops, 100 * x->peak_frac, c->gflops, 100 * LOW_PEAK);
        else if (x->bound == 2 && x->bw_frac < LOW_BW)
            suggest(h, &n,
                    "%s is memory-bound (%.2f FLOP/byte) and moves %.1f GB/s, %.1f %% of the %.1f GB/s bandwidth "
                    "(threshold %.0f %%): --exec fused merges it with its neighbours so data is read once.",
                    x->op->name, x->ai, x->gbs, 100 * x->bw_frac, c->gbs, 100 * LOW_BW);
    }
    double act = lp_run_summary_mem(&d->sum, "activation");
    if (isfinite(act) && d->sum.peak_bytes > 0 && act / d->sum.peak_bytes > ACT_SHARE)
        suggest(h, &n,
                "Activations are %.0f %% of the tracked peak (%.1f of %.1f MB; threshold %.0f %%): "
                "--gradient-checkpointing keeps layer inputs only, trading recompute for memory.",
                100 * act / d->sum.peak_bytes, act / 1e6, d->sum.peak_bytes / 1e6, 100 * ACT_SHARE);
    if (d->n_steps >= 4) {
        double mx = 0, med;
        double v[4096];
        int32_t k = 0;
        for (int32_t i = 1; i < d->n_steps && k < 4096; i++) // step 1 warms caches: left out
            if (isfinite(d->steps[i].step_ms)) {
                v[k++] = d->steps[i].step_ms;
                mx = fmax(mx, d->steps[i].step_ms);
            }
        for (int32_t i = 1; i < k; i++) // insertion sort: a few thousand steps at most
            for (int32_t j = i; j > 0 && v[j - 1] > v[j]; j--) {
                double t = v[j];
                v[j] = v[j - 1];
                v[j - 1] = t;
            }
        med = k ? v[k / 2] : NAN;
        if (med > 0 && mx / med > JITTER)
            suggest(h, &n,
                    "The slowest step took %.2fx the median (%.1f vs %.1f ms, step 1 left out; threshold %.2fx): "
                    "other processes share the cores; time on a quiet machine or pin --threads.",
                    mx / med, mx, med, JITTER);
    }
    if (n == 0)
        lp_html_raw(h, "<li>Nothing crossed a threshold.</li>\n");
    lp_html_raw(h, "</ul>\n");
    lp_html_note(h,
                 "Thresholds: data > %.0f %%, optimizer > %.0f %%, untracked > %.0f %% of the step; a compute-bound "
                 "top op < %.0f %% of peak, a memory-bound one < %.0f %% of bandwidth; activations > %.0f %% of the "
                 "peak; slowest step > %.2fx the median.",
                 100 * DATA_SHARE, 100 * OPT_SHARE, 100 * OTHER_SHARE, 100 * LOW_PEAK, 100 * LOW_BW, 100 * ACT_SHARE,
                 JITTER);
}

void lp_run__diagnosis(lp_html *h, const lp_run_data *d, const lp_run_ceilings *c)
{
    lp_html_section_begin(h, "diagnosis", "Diagnosis");
    int have_c = c && isfinite(c->gflops) && isfinite(c->gbs);
    if (have_c)
        lp_html_p(h, "Ceilings (%s): %.1f GFLOP/s f32 FMA peak, %.1f GB/s memory bandwidth (STREAM triad); ridge "
                     "point %.1f FLOP/byte: an op doing more FLOPs per byte moved is compute-bound, fewer "
                     "memory-bound.",
                  c->source, c->gflops, c->gbs, c->gflops / c->gbs);
    else
        lp_html_p(h, "No machine ceilings known (run `loupe peak`): ops are shown without the roofline.");
    enum { MAXE = 64 };
    op_eff e[MAXE];
    int32_t ne = 0;
    for (int32_t i = 0; i < d->n_ops && ne < MAXE; i++)
        e[ne++] = judge(&d->ops[i], have_c ? c : NULL);
    double total = 0;
    for (int32_t i = 0; i < d->n_ops; i++)
        total += d->ops[i].self_ms;

    lp_html_h(h, 3, "Top 3 bottlenecks");
    if (ne == 0)
        lp_html_p(h, "No per-op timings in this run (profile it: loupe profile).");
    else {
        lp_html_raw(h, "<ol>\n");
        for (int32_t i = 0; i < ne && i < 3; i++) {
            char why[256] = "";
            if (e[i].bound)
                snprintf(why, sizeof why, "; %s-bound: %.1f GFLOP/s (%.1f %% of peak), %.1f GB/s (%.1f %% of bandwidth)",
                         e[i].bound == 1 ? "compute" : "memory", e[i].gflops, 100 * e[i].peak_frac, e[i].gbs,
                         100 * e[i].bw_frac);
            else if (isfinite(e[i].gflops))
                snprintf(why, sizeof why, "; %.1f GFLOP/s", e[i].gflops);
            lp_html_raw(h, "<li>");
            lp_html_textf(h, "%s: %.1f ms self time, %.1f %% of the profiled time, %.0f calls%s", e[i].op->name,
                          e[i].op->self_ms, total > 0 ? 100 * e[i].op->self_ms / total : 0, e[i].op->calls, why);
            lp_html_raw(h, "</li>\n");
        }
        lp_html_raw(h, "</ol>\n");
    }
    suggestions(h, d, e, ne, have_c ? c : NULL);

    int any_roof = 0;
    for (int32_t i = 0; i < ne; i++)
        any_roof |= isfinite(e[i].gflops) || isfinite(e[i].gbs);
    if (!any_roof) {
        lp_html_section_end(h);
        return;
    }
    lp_html_h(h, 3, "Per op against the ceilings");
    /* the chart: the top ops' share of the FMA peak and of the bandwidth */
    enum { TOP = 10 };
    double x[TOP], pk[TOP], bw[TOP];
    const char *names[TOP];
    int32_t k = 0;
    for (int32_t i = 0; i < ne && k < TOP; i++) {
        if (!isfinite(e[i].gflops) && !isfinite(e[i].gbs))
            continue;
        x[k] = k;
        pk[k] = 100 * e[i].peak_frac;
        bw[k] = 100 * e[i].bw_frac;
        names[k++] = lp_run__short_op(e[i].op->name);
    }
    if (have_c && k > 0) {
        lp_chart_series se[] = {{.name = "% of FMA peak", .x = x, .y = pk, .n = k},
                                {.name = "% of memory bandwidth", .x = x, .y = bw, .n = k}};
        lp_chart_panel p = {.title = "Top ops: achieved share of each ceiling", .ylabel = "%", .kind = LP_CHART_BAR,
                            .x_scale = LP_CHART_X_CATEGORY, .x_categories = names, .n_categories = k,
                            .y_from_zero = 1, .series = se, .n_series = 2};
        lp_figure f = lp_run__figure(&p, "Roofline: achieved vs ceilings", 1100, 380);
        lp_html_chart(h, "roofline", &f);
    }
    lp_html_table_begin(h,
                        (const char *[]){"op", "#self ms", "#GFLOP/s", "#% of peak", "#GB/s", "#% of bandwidth",
                                         "#FLOP/byte", "bound"},
                        8);
    for (int32_t i = 0; i < ne; i++) {
        lp_html_tr(h);
        lp_html_td(h, e[i].op->name);
        lp_html_td_num(h, e[i].op->self_ms, "%.2f");
        lp_html_td_num(h, e[i].gflops, "%.2f");
        lp_html_td_num(h, 100 * e[i].peak_frac, "%.1f");
        lp_html_td_num(h, e[i].gbs, "%.2f");
        lp_html_td_num(h, 100 * e[i].bw_frac, "%.1f");
        lp_html_td_num(h, e[i].ai, "%.2f");
        lp_html_td(h, e[i].bound == 1 ? "compute" : e[i].bound == 2 ? "memory" : "-");
    }
    lp_html_table_end(h);
    lp_html_note(h, "GFLOP/s and GB/s: the FLOPs and bytes moved that each op records, over its total time.");
    lp_html_section_end(h);
}
