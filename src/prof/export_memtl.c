/* Memory timeline: bytes live per category over the window, from the baseline taken at
 * the window start plus every [memory] event. Written as torch's [times, sizes] JSON and
 * as a self-contained HTML page (inline SVG stacked areas, no scripts or external files). */
#include "prof_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct mev {
    int64_t t, bytes;
    int cat;
} mev;

static int mev_cmp(const void *a, const void *b)
{
    const mev *x = a, *y = b;
    return (x->t > y->t) - (x->t < y->t);
}

lp_status lp_prof__mem_series(const lp_prof_events *ev, lp_prof_mem_pt **pts, size_t *n)
{
    const lp_prof_events_info *in = lp_prof_events_info_get(ev);
    size_t total = lp_prof_events_count(ev), m = 0;
    mev *me = malloc((total ? total : 1) * sizeof *me);
    lp_prof_mem_pt *p = malloc((total + 1) * sizeof *p);
    if (!me || !p) {
        free(me);
        free(p);
        return lp_err(LP_STATUS_NO_MEMORY, "profiler: out of memory (memory timeline)");
    }
    for (size_t i = 0; i < total; i++) {
        const lp_prof_event *e = lp_prof_events_get(ev, i);
        if (e->ph == 'i' && strcmp(e->name, "[memory]") == 0 && e->mem_device_type == 0) {
            int c = e->mem_category;
            me[m++] = (mev){e->ts_ns, e->mem_bytes,
                            c >= 0 && c < LP_MEM_CATEGORY__COUNT ? c : LP_MEM_CATEGORY_OTHER};
        }
    }
    /* stable enough: events of one time are summed into one point anyway */
    qsort(me, m, sizeof *me, mev_cmp);
    size_t k = 0;
    memset(&p[0], 0, sizeof p[0]);
    p[0].t_ns = in->window_start_ns;
    if (m && me[0].t < p[0].t_ns)
        p[0].t_ns = me[0].t;
    if (in->has_mem_baseline)
        memcpy(p[0].by_cat, in->mem_baseline, sizeof p[0].by_cat);
    k = 1;
    for (size_t i = 0; i < m; i++) {
        if (me[i].t != p[k - 1].t_ns) {
            p[k] = p[k - 1];
            p[k].t_ns = me[i].t;
            k++;
        }
        p[k - 1].by_cat[me[i].cat] += me[i].bytes;
    }
    free(me);
    *pts = p;
    *n = k;
    return LP_OK;
}

/* loupe category -> torch _memory_profiler index (0 parameter, 1 optimizer_state, 2 input,
 * 3 temporary, 4 activation, 5 gradient, 6 autograd_detail, 7 unknown). Quantized base
 * weights are the model's (frozen) parameters; "other" is torch's unknown; a KV cache is what
 * torch's generate keeps as activations. */
static const int torch_index[LP_MEM_CATEGORY__COUNT] = {0, 5, 1, 4, 3, 2, 0, 7, 4};

static int ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

static lp_status write_json(const lp_prof_events *ev, const lp_prof_mem_pt *p, size_t n,
                            const char *path)
{
    const lp_prof_events_info *in = lp_prof_events_info_get(ev);
    lp_prof_out *o;
    lp_status st = lp_prof_out_open(&o, path, ends_with(path, ".gz"));
    if (st != LP_OK)
        return st;
    /* torch coalesces points with the same microsecond; do the same (last one wins) */
    lp_prof_out_puts(o, "[[");
    int64_t last = INT64_MIN;
    size_t nout = 0;
    size_t *keep = malloc((n ? n : 1) * sizeof *keep);
    if (!keep) {
        lp_prof_out_abort(o);
        return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", path);
    }
    for (size_t i = 0; i < n; i++) {
        int64_t us = (in->base_time_ns + p[i].t_ns) / 1000;
        if (nout && us == last)
            keep[nout - 1] = i;
        else
            keep[nout++] = i;
        last = us;
    }
    for (size_t j = 0; j < nout; j++)
        lp_prof_out_printf(o, "%s%lld", j ? ", " : "",
                           (long long)((in->base_time_ns + p[keep[j]].t_ns) / 1000));
    lp_prof_out_puts(o, "], [");
    for (size_t j = 0; j < nout; j++) {
        int64_t s[9] = {0};
        for (int c = 0; c < LP_MEM_CATEGORY__COUNT; c++)
            s[torch_index[c] + 1] += p[keep[j]].by_cat[c];
        lp_prof_out_printf(o, "%s[%lld, %lld, %lld, %lld, %lld, %lld, %lld, %lld, %lld]",
                           j ? ", " : "", (long long)s[0], (long long)s[1], (long long)s[2],
                           (long long)s[3], (long long)s[4], (long long)s[5], (long long)s[6],
                           (long long)s[7], (long long)s[8]);
    }
    lp_prof_out_puts(o, "]]\n");
    free(keep);
    return lp_prof_out_commit(o);
}

static const char *const colors[LP_MEM_CATEGORY__COUNT] = {
    "darkgreen", "mediumblue", "goldenrod", "red", "mediumpurple", "black", "seagreen", "grey", "darkorange"};

/* A "nice" tick step (1, 2 or 5 times a power of ten) giving about n ticks over span. */
static double nice_step(double span, int n)
{
    if (span <= 0)
        return 1;
    double raw = span / n, mag = pow(10, floor(log10(raw))), f = raw / mag;
    return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * mag;
}

static lp_status write_html(const lp_prof_events *ev, const lp_prof_mem_pt *p, size_t n,
                            const char *path)
{
    (void)ev;
    const double W = 1000, H = 520, L = 80, R = 190, T = 60, B = 60;
    const double pw = W - L - R, ph = H - T - B;
    int64_t peak = 0, t0 = p[0].t_ns, t1 = p[n - 1].t_ns;
    double peak_t = 0;
    for (size_t i = 0; i < n; i++) {
        int64_t s = 0;
        for (int c = 0; c < LP_MEM_CATEGORY__COUNT; c++)
            s += p[i].by_cat[c];
        if (s > peak) {
            peak = s;
            peak_t = (double)(p[i].t_ns - t0) / 1e6;
        }
    }
    if (t1 <= t0)
        t1 = t0 + 1000000;
    double span_ms = (double)(t1 - t0) / 1e6;
    int use_gb = peak >= (int64_t)1 << 30;
    double unit = use_gb ? 1073741824.0 : 1048576.0;
    double ymax = (double)peak / unit;
    double ystep = nice_step(ymax > 0 ? ymax : 1, 5);
    ymax = ceil((ymax > 0 ? ymax : 1) / ystep) * ystep;
    /* Thin very long series to about 2000 points, keeping each bucket's highest total so
     * the peak stays visible. */
    size_t maxpts = 2000, *idx = malloc((n ? n : 1) * sizeof *idx), m = 0;
    if (!idx)
        return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", path);
    if (n <= maxpts) {
        for (size_t i = 0; i < n; i++)
            idx[m++] = i;
    } else {
        size_t per = (n + maxpts - 1) / maxpts;
        for (size_t i = 0; i < n; i += per) {
            size_t best = i;
            int64_t bs = -1;
            for (size_t j = i; j < n && j < i + per; j++) {
                int64_t s = 0;
                for (int c = 0; c < LP_MEM_CATEGORY__COUNT; c++)
                    s += p[j].by_cat[c];
                if (s > bs) {
                    bs = s;
                    best = j;
                }
            }
            idx[m++] = best;
        }
    }
    lp_prof_out *o;
    lp_status st = lp_prof_out_open(&o, path, 0);
    if (st != LP_OK) {
        free(idx);
        return st;
    }
    double peak_gib = (double)peak / 1073741824.0;
    lp_prof_out_printf(o,
                       "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\" />"
                       "<title>Memory Timeline</title>\n<style>body{font-family:sans-serif;"
                       "margin:20px}svg text{font-size:12px}</style></head><body>\n"
                       "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
                       "viewBox=\"0 0 %.0f %.0f\">\n",
                       W, H, W, H);
    lp_prof_out_printf(o,
                       "<text x=\"%.0f\" y=\"24\" text-anchor=\"middle\" style=\"font-size:16px\">"
                       "Max memory allocated: %.2f %s at %.3f ms</text>\n",
                       L + pw / 2, use_gb ? peak_gib : (double)peak / 1048576.0,
                       use_gb ? "GiB" : "MiB", peak_t);
    /* areas: category c spans [sum of categories below c, that + c] */
    for (int c = 0; c < LP_MEM_CATEGORY__COUNT; c++) {
        int any = 0;
        for (size_t j = 0; j < m && !any; j++)
            any = p[idx[j]].by_cat[c] != 0;
        if (!any)
            continue;
        lp_prof_out_printf(o, "<polygon class=\"cat-%s\" fill=\"%s\" fill-opacity=\"0.7\" points=\"",
                           lp_mem_category_name((lp_mem_category)c), colors[c]);
        for (int pass = 0; pass < 2; pass++) { /* upper edge forward, lower edge back */
            for (size_t jj = 0; jj < m; jj++) {
                size_t j = pass ? m - 1 - jj : jj;
                const lp_prof_mem_pt *q = &p[idx[j]];
                double below = 0;
                for (int d = 0; d < c; d++)
                    below += (double)q->by_cat[d];
                double v = pass ? below : below + (double)q->by_cat[c];
                double y = T + ph - (v / unit) / ymax * ph;
                double xa = L + (double)(q->t_ns - t0) / 1e6 / span_ms * pw;
                double xb = j + 1 < m ? L + (double)(p[idx[j + 1]].t_ns - t0) / 1e6 / span_ms * pw
                                      : L + pw;
                if (pass)
                    lp_prof_out_printf(o, "%.1f,%.1f %.1f,%.1f ", xb, y, xa, y);
                else
                    lp_prof_out_printf(o, "%.1f,%.1f %.1f,%.1f ", xa, y, xb, y);
            }
        }
        lp_prof_out_puts(o, "\"/>\n");
    }
    /* axes, ticks, labels */
    lp_prof_out_printf(o,
                       "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"black\"/>\n"
                       "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"black\"/>\n",
                       L, T, L, T + ph, L, T + ph, L + pw, T + ph);
    double xs = nice_step(span_ms, 8);
    for (double x = 0; x <= span_ms + 1e-9; x += xs) {
        double px = L + x / span_ms * pw;
        lp_prof_out_printf(o,
                           "<line x1=\"%.1f\" y1=\"%.0f\" x2=\"%.1f\" y2=\"%.0f\" stroke=\"black\"/>"
                           "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\">%g</text>\n",
                           px, T + ph, px, T + ph + 5, px, T + ph + 20, x);
    }
    for (double y = 0; y <= ymax + 1e-9; y += ystep) {
        double py = T + ph - y / ymax * ph;
        lp_prof_out_printf(o,
                           "<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" stroke=\"#ddd\"/>"
                           "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n",
                           L, py, L + pw, py, L - 6, py + 4, y);
    }
    lp_prof_out_printf(o,
                       "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">Time (ms)</text>\n"
                       "<text transform=\"translate(20,%.0f) rotate(-90)\" text-anchor=\"middle\">"
                       "Memory (%s)</text>\n",
                       L + pw / 2, H - 15, T + ph / 2, use_gb ? "GB" : "MB");
    for (int c = 0; c < LP_MEM_CATEGORY__COUNT; c++) {
        double ly = T + 10 + c * 22;
        lp_prof_out_printf(o,
                           "<rect x=\"%.0f\" y=\"%.0f\" width=\"14\" height=\"14\" fill=\"%s\" "
                           "fill-opacity=\"0.7\"/><text x=\"%.0f\" y=\"%.0f\">%s</text>\n",
                           L + pw + 20, ly, colors[c], L + pw + 40, ly + 12,
                           lp_mem_category_name((lp_mem_category)c));
    }
    lp_prof_out_puts(o, "</svg>\n</body></html>\n");
    free(idx);
    return lp_prof_out_commit(o);
}

lp_status lp_prof_export_memory_timeline(const lp_prof_events *ev, const char *path)
{
    int html = ends_with(path, ".html") || ends_with(path, ".htm");
    if (!html && !ends_with(path, ".json") && !ends_with(path, ".json.gz"))
        return lp_err(LP_STATUS_INVALID_ARG,
                      "%s: memory timeline path must end in .json, .json.gz or .html", path);
    lp_prof_mem_pt *p;
    size_t n;
    lp_status st = lp_prof__mem_series(ev, &p, &n);
    if (st != LP_OK)
        return st;
    st = html ? write_html(ev, p, n, path) : write_json(ev, p, n, path);
    free(p);
    return st;
}
