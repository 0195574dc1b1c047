/* The one drawing routine behind every chart file: the figure title, a grid of panels,
 * and in each panel a title, a legend, axes with nice ticks and labels, and the series as
 * lines or grouped bars with error bars. Layout is measured first, so text never overlaps
 * (tick labels are thinned until they fit; titles shrink, then shorten). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "chart_internal.h"

enum { MAX_TICKS = 32 };

static const double palette[][3] = {
    {0.12, 0.47, 0.71}, {1.00, 0.50, 0.05}, {0.17, 0.63, 0.17}, {0.84, 0.15, 0.16},
    {0.58, 0.40, 0.74}, {0.55, 0.34, 0.29}, {0.89, 0.47, 0.76}, {0.50, 0.50, 0.50},
};
#define N_PALETTE (sizeof palette / sizeof palette[0])

lp_status lp_chart__validate(const lp_figure *f)
{
    if (!f || f->width < 64 || f->height < 64 || f->width > 16384 || f->height > 16384)
        return lp_err(LP_STATUS_INVALID_ARG, "figure size must be 64..16384 on each side");
    if (f->rows < 1 || f->cols < 1 || f->n_panels < 0 || f->n_panels > f->rows * f->cols ||
        (f->n_panels && !f->panels))
        return lp_err(LP_STATUS_INVALID_ARG, "figure: %d panels do not fit a %d x %d grid", f->n_panels,
                      f->rows, f->cols);
    for (int32_t i = 0; i < f->n_panels; i++) {
        const lp_chart_panel *p = &f->panels[i];
        if (p->kind == LP_CHART_HEATMAP) {
            const lp_chart_heatmap *h = p->heatmap;
            if (!h || h->rows < 1 || h->cols < 1 || !h->values)
                return lp_err(LP_STATUS_INVALID_ARG, "figure panel %d: a heatmap needs rows, cols and values",
                              i);
            continue;
        }
        if (p->n_series < 0 || (p->n_series && !p->series))
            return lp_err(LP_STATUS_INVALID_ARG, "figure panel %d: series missing", i);
        if (p->x_scale == LP_CHART_X_CATEGORY && p->n_categories > 0 && !p->x_categories)
            return lp_err(LP_STATUS_INVALID_ARG, "figure panel %d: category labels missing", i);
        for (int32_t s = 0; s < p->n_series; s++)
            if (p->series[s].n < 0 || (p->series[s].n && (!p->series[s].x || !p->series[s].y)))
                return lp_err(LP_STATUS_INVALID_ARG, "figure panel %d series %d: x or y missing", i, s);
    }
    return LP_OK;
}

/* ---- data ranges -------------------------------------------------------------------- */

static int point_ok(const lp_chart_panel *p, const lp_chart_series *s, int32_t i)
{
    if (!isfinite(s->x[i]) || !isfinite(s->y[i]))
        return 0;
    if (p->y_log && s->y[i] <= 0)
        return 0;
    return p->x_scale != LP_CHART_X_LOG2 || s->x[i] > 0;
}

static double xpos(const lp_chart_panel *p, double x)
{
    return p->x_scale == LP_CHART_X_LOG2 ? log2(x) : x;
}

/* y in axis units: log10 on a log axis, where the ticks are decades */
static double ypos(const lp_chart_panel *p, double y)
{
    return p->y_log ? log10(y) : y;
}

/* Stacked bars: the sum of the earlier series' finite values at the same x (bars stack
 * from 0 upwards, so a negative value is drawn as 0). */
static double stack_base(const lp_chart_panel *p, int32_t s, double x)
{
    double b = 0;
    for (int32_t t = 0; t < s; t++)
        for (int32_t j = 0; j < p->series[t].n; j++)
            if (p->series[t].x[j] == x && isfinite(p->series[t].y[j]))
                b += fmax(0, p->series[t].y[j]);
    return b;
}

/* x and y ranges over the drawable points (error bars included); 0 when there are none. */
static int data_range(const lp_chart_panel *p, double *xlo, double *xhi, double *ylo, double *yhi)
{
    int any = 0;
    *xlo = *ylo = INFINITY;
    *xhi = *yhi = -INFINITY;
    for (int32_t s = 0; s < p->n_series; s++) {
        const lp_chart_series *se = &p->series[s];
        for (int32_t i = 0; i < se->n; i++) {
            if (!point_ok(p, se, i))
                continue;
            double e = se->err && isfinite(se->err[i]) ? fabs(se->err[i]) : 0, x = xpos(p, se->x[i]);
            double lo = se->y[i] - e, hi = se->y[i] + e;
            if (p->kind == LP_CHART_STACKED) {
                lo = 0;
                hi = stack_base(p, s, se->x[i]) + fmax(0, se->y[i]);
            } else if (p->y_log) {
                lo = ypos(p, lo > 0 ? lo : se->y[i]); // an error bar reaching 0 is cut there
                hi = ypos(p, hi);
            }
            *xlo = fmin(*xlo, x);
            *xhi = fmax(*xhi, x);
            *ylo = fmin(*ylo, lo);
            *yhi = fmax(*yhi, hi);
            any = 1;
        }
    }
    if (p->x_scale == LP_CHART_X_CATEGORY && p->n_categories > 0) {
        *xlo = 0;
        *xhi = p->n_categories - 1;
    }
    return any;
}

/* ---- x ticks: positions (axis units) and labels, thinned until the labels fit --------- */

typedef struct xticks {
    int32_t n;
    double pos[MAX_TICKS];
    char label[MAX_TICKS][32];
} xticks;

static int xticks_fit(lp_chart_ctx *c, const xticks *t, double size, double px_per_unit)
{
    for (int32_t i = 1; i < t->n; i++) {
        double need =
            (lp_chart__text_w(c, t->label[i - 1], size, 0) + lp_chart__text_w(c, t->label[i], size, 0)) / 2;
        if ((t->pos[i] - t->pos[i - 1]) * px_per_unit < need + 6)
            return 0;
    }
    return 1;
}

static void make_xticks(lp_chart_ctx *c, const lp_chart_panel *p, double *lo, double *hi, double plot_w,
                        double size, xticks *t)
{
    t->n = 0;
    if (p->x_scale == LP_CHART_X_LINEAR) {
        double ticks[MAX_TICKS], step;
        for (int32_t m = MAX_TICKS; m >= 2; m--) {
            int32_t n = lp_chart_nice_ticks(*lo, *hi, m, ticks, &step);
            t->n = n;
            for (int32_t i = 0; i < n; i++) {
                t->pos[i] = ticks[i];
                lp_chart_format_tick(ticks[i], step, t->label[i], sizeof t->label[i]);
            }
            if (n >= 2 && xticks_fit(c, t, size, plot_w / (ticks[n - 1] - ticks[0])))
                break;
        }
        if (t->n >= 2) {
            *lo = fmin(*lo, t->pos[0]);
            *hi = fmax(*hi, t->pos[t->n - 1]);
        }
        return;
    }
    /* log2 and category axes: every k-th integer position, k doubling until the labels fit */
    double first = ceil(*lo - 1e-9), last = floor(*hi + 1e-9);
    for (int32_t k = 1; k <= 1 << 20; k *= 2) {
        t->n = 0;
        for (double v = first; v <= last + 1e-9 && t->n < MAX_TICKS; v += k) {
            t->pos[t->n] = v;
            if (p->x_scale == LP_CHART_X_LOG2)
                snprintf(t->label[t->n], sizeof t->label[0], "%.0f", exp2(v));
            else {
                int32_t ci = (int32_t)v;
                const char *l = ci >= 0 && ci < p->n_categories ? p->x_categories[ci] : NULL;
                if (l)
                    snprintf(t->label[t->n], sizeof t->label[0], "%s", l);
                else
                    snprintf(t->label[t->n], sizeof t->label[0], "%d", ci);
            }
            t->n++;
        }
        if ((last - first) / k < MAX_TICKS && xticks_fit(c, t, size, plot_w / (*hi - *lo)))
            return;
    }
}

/* ---- legend ------------------------------------------------------------------------- */

static int has_legend(const lp_chart_panel *p)
{
    for (int32_t s = 0; s < p->n_series; s++)
        if (p->series[s].name && *p->series[s].name)
            return 1;
    return 0;
}

/* Lays the legend out in rows of width w from (x, y); draws when draw. Returns its height. */
static double legend(lp_chart_ctx *c, const lp_chart_panel *p, double x, double y, double w, double size,
                     int draw)
{
    double h = lp_chart__text_h(c, size), cx = x, cy = y, sw = 16, gap = 12;
    int rows = 1;
    for (int32_t s = 0; s < p->n_series; s++) {
        const char *name = p->series[s].name;
        if (!name || !*name)
            continue;
        char buf[128];
        lp_chart__fit(c, name, 0, size, size, w - sw - 4, buf, sizeof buf);
        double ew = sw + 4 + lp_chart__text_w(c, buf, size, 0);
        if (cx > x && cx + ew > x + w) {
            cx = x;
            cy += h + 2;
            rows++;
        }
        if (draw) {
            const double *col = palette[s % N_PALETTE];
            cairo_set_source_rgb(c->cr, col[0], col[1], col[2]);
            if (p->kind == LP_CHART_BAR || p->kind == LP_CHART_STACKED)
                cairo_rectangle(c->cr, cx + 2, cy + h * 0.2, sw - 4, h * 0.6);
            else {
                cairo_move_to(c->cr, cx, cy + h / 2);
                cairo_line_to(c->cr, cx + sw, cy + h / 2);
                cairo_set_line_width(c->cr, 2);
                cairo_stroke(c->cr);
                cairo_arc(c->cr, cx + sw / 2, cy + h / 2, 3, 0, 2 * M_PI);
            }
            cairo_fill(c->cr);
            cairo_set_source_rgb(c->cr, 0.1, 0.1, 0.1);
            lp_chart__text(c, buf, size, 0, cx + sw + 4, cy, 0, 0, 0);
        }
        cx += ew + gap;
    }
    return rows * (h + 2);
}

/* ---- series ------------------------------------------------------------------------- */

typedef struct frame {
    double l, t, r, b;         /* plot area, device units */
    double xlo, xhi, ylo, yhi; /* axis ranges */
} frame;

static double fx(const frame *F, double x)
{
    return F->l + (x - F->xlo) / (F->xhi - F->xlo) * (F->r - F->l);
}
static double fy(const frame *F, double y)
{
    return F->b - (y - F->ylo) / (F->yhi - F->ylo) * (F->b - F->t);
}

static void error_bar(cairo_t *cr, double x, double y0, double y1, double cap)
{
    cairo_move_to(cr, x, y0);
    cairo_line_to(cr, x, y1);
    cairo_move_to(cr, x - cap, y0);
    cairo_line_to(cr, x + cap, y0);
    cairo_move_to(cr, x - cap, y1);
    cairo_line_to(cr, x + cap, y1);
    cairo_set_line_width(cr, 1.2);
    cairo_stroke(cr);
}

/* Smallest distance between distinct x positions of the panel, in pixels (bar width). */
static double min_gap_px(const lp_chart_panel *p, const frame *F)
{
    double g = F->r - F->l;
    for (int32_t s = 0; s < p->n_series; s++)
        for (int32_t i = 0; i < p->series[s].n; i++)
            for (int32_t t = 0; t < p->n_series; t++)
                for (int32_t j = 0; j < p->series[t].n; j++) {
                    if (!point_ok(p, &p->series[s], i) || !point_ok(p, &p->series[t], j))
                        continue;
                    double d = fabs(fx(F, xpos(p, p->series[s].x[i])) - fx(F, xpos(p, p->series[t].x[j])));
                    if (d > 0.5 && d < g)
                        g = d;
                }
    return g;
}

static void draw_series(lp_chart_ctx *c, const lp_chart_panel *p, const frame *F)
{
    cairo_t *cr = c->cr;
    cairo_save(cr);
    cairo_rectangle(cr, F->l, F->t, F->r - F->l, F->b - F->t);
    cairo_clip(cr);
    int bars = p->kind == LP_CHART_BAR || p->kind == LP_CHART_STACKED;
    double group = bars ? fmin(min_gap_px(p, F), (F->r - F->l) / 2) * 0.8 : 0;
    double bw = p->kind == LP_CHART_STACKED ? group : p->n_series > 0 ? group / p->n_series : 0;
    double base = fy(F, fmax(F->ylo, fmin(0, F->yhi)));
    for (int32_t s = 0; s < p->n_series; s++) {
        const lp_chart_series *se = &p->series[s];
        const double *col = palette[s % N_PALETTE];
        int started = 0;
        if (p->kind == LP_CHART_LINE) {
            cairo_set_source_rgb(cr, col[0], col[1], col[2]);
            for (int32_t i = 0; i < se->n; i++) {
                if (!point_ok(p, se, i)) {
                    started = 0; // a gap where a value is missing
                    continue;
                }
                double x = fx(F, xpos(p, se->x[i])), y = fy(F, ypos(p, se->y[i]));
                if (started)
                    cairo_line_to(cr, x, y);
                else
                    cairo_move_to(cr, x, y);
                started = 1;
            }
            cairo_set_line_width(cr, 2);
            cairo_stroke(cr);
        }
        for (int32_t i = 0; i < se->n; i++) {
            if (!point_ok(p, se, i))
                continue;
            double x = fx(F, xpos(p, se->x[i])), y = fy(F, ypos(p, se->y[i]));
            cairo_set_source_rgb(cr, col[0], col[1], col[2]);
            if (p->kind == LP_CHART_STACKED) {
                double b0 = stack_base(p, s, se->x[i]), y0 = fy(F, b0), y1 = fy(F, b0 + fmax(0, se->y[i]));
                cairo_rectangle(cr, x - bw * 0.45, y1, bw * 0.9, y0 - y1);
                cairo_fill(cr);
                continue; // a stack has no error bars: they would hide the segments above
            }
            if (p->kind == LP_CHART_BAR) {
                x = x - group / 2 + bw * s + bw / 2;
                cairo_rectangle(cr, x - bw * 0.45, fmin(y, base), bw * 0.9, fabs(base - y));
                cairo_fill(cr);
            } else {
                cairo_arc(cr, x, y, 3.2, 0, 2 * M_PI);
                cairo_fill(cr);
            }
            if (se->err && isfinite(se->err[i]) && se->err[i] != 0) {
                double e = fabs(se->err[i]);
                cairo_set_source_rgb(cr, 0.15, 0.15, 0.15);
                double lo = se->y[i] - e;
                if (p->y_log && lo <= 0)
                    lo = se->y[i];
                error_bar(cr, x, fy(F, ypos(p, lo)), fy(F, ypos(p, se->y[i] + e)), fmin(4, fmax(2, bw * 0.2)));
            }
        }
    }
    cairo_restore(cr);
}

/* ---- one panel ---------------------------------------------------------------------- */

/* Log-axis ticks: whole decades (log10 units) covering [lo, hi], every k-th decade so
 * that at most max fit; a range within one decade still gets its two bounding decades. */
static int32_t log_ticks(double lo, double hi, int32_t max, double *t)
{
    double first = floor(lo + 1e-9), last = ceil(hi - 1e-9);
    if (last <= first)
        last = first + 1;
    int32_t k = 1;
    while ((last - first) / k + 1 > max)
        k++;
    int32_t n = 0;
    for (double v = first; n < MAX_TICKS; v += k) {
        t[n++] = v;
        if (v >= last)
            break;
    }
    return n;
}

static void draw_panel(lp_chart_ctx *c, const lp_chart_panel *p, double x0, double y0, double x1, double y1)
{
    cairo_t *cr = c->cr;
    const double pad = 8, cw = x1 - x0, ch = y1 - y0;
    double size = fmin(13, fmax(7, fmin(cw, ch) * 0.035)), th = lp_chart__text_h(c, size);
    char buf[256];
    double y = y0 + pad;
    cairo_set_source_rgb(cr, 0.05, 0.05, 0.05);
    if (p->title && *p->title) {
        double ts = lp_chart__fit(c, p->title, 1, size * 1.25, size, cw - 2 * pad, buf, sizeof buf);
        lp_chart__text(c, buf, ts, 1, (x0 + x1) / 2, y, 0.5, 0, 0);
        y += lp_chart__text_h(c, ts) + 4;
    }
    if (p->kind == LP_CHART_HEATMAP) {
        lp_chart__heatmap(c, p, x0 + pad, y, x1 - pad, y1 - pad);
        return;
    }
    if (has_legend(p))
        y += legend(c, p, x0 + pad, y, cw - 2 * pad, size * 0.95, 1) + 2;

    double xlo, xhi, ylo, yhi;
    int any = data_range(p, &xlo, &xhi, &ylo, &yhi);
    if (!any) {
        xlo = ylo = 0;
        xhi = yhi = 1;
    }
    if (p->y_from_zero && !p->y_log) { // a quantity that cannot go negative: the axis starts at 0 and
        double ymin = INFINITY; // error bars reaching below it are cut there
        for (int32_t k = 0; k < p->n_series; k++)
            for (int32_t i = 0; i < p->series[k].n; i++)
                if (point_ok(p, &p->series[k], i))
                    ymin = fmin(ymin, p->series[k].y[i]);
        ylo = ymin >= 0 ? 0 : fmin(ylo, 0);
        yhi = fmax(yhi, 0);
    }
    /* vertical layout: x label, x tick labels (a gap of half a label below the plot, where
     * the lowest y tick label ends), the plot area */
    double bottom = y1 - pad;
    double xl_y = bottom;
    if (p->xlabel && *p->xlabel)
        bottom -= th + 3;
    double xt_y = bottom - th;
    double plot_b = xt_y - th / 2 - 4, plot_t = y + th / 2 + 2;
    if (plot_b - plot_t < 10)
        plot_b = plot_t + 10;
    /* y ticks: as many as the height holds two label heights apart */
    double yt[MAX_TICKS], ystep = 1;
    int32_t ny_max = (int32_t)fmin(MAX_TICKS, fmax(2, (plot_b - plot_t) / (th * 2.2)));
    int32_t ny = p->y_log ? log_ticks(ylo, yhi, ny_max, yt) : lp_chart_nice_ticks(ylo, yhi, ny_max, yt, &ystep);
    char ylab[MAX_TICKS][32];
    double yt_w = 0;
    for (int32_t i = 0; i < ny; i++) {
        if (p->y_log)
            lp_chart_format_tick(pow(10, yt[i]), pow(10, yt[i]), ylab[i], sizeof ylab[i]);
        else
            lp_chart_format_tick(yt[i], ystep, ylab[i], sizeof ylab[i]);
        yt_w = fmax(yt_w, lp_chart__text_w(c, ylab[i], size, 0));
    }
    double yl_w = p->ylabel && *p->ylabel ? th + 4 : 0;
    frame F = {.l = x0 + pad + yl_w + yt_w + 5, .t = plot_t, .b = plot_b, .r = x1 - pad};
    F.ylo = ny >= 2 ? yt[0] : ylo;
    F.yhi = ny >= 2 ? yt[ny - 1] : yhi;
    /* x axis: ranges padded so end markers and bars sit inside the frame */
    double padx = p->x_scale == LP_CHART_X_LINEAR ? 0 : 0.5;
    if (p->x_scale == LP_CHART_X_LOG2 && p->kind == LP_CHART_LINE)
        padx = 0.3;
    F.xlo = xlo - padx;
    F.xhi = xhi + padx;
    if (F.xhi - F.xlo < 1e-9) {
        F.xlo -= 0.5;
        F.xhi += 0.5;
    }
    xticks xt;
    make_xticks(c, p, &F.xlo, &F.xhi, F.r - F.l, size, &xt);
    if (p->x_scale == LP_CHART_X_LINEAR && (p->kind == LP_CHART_BAR || p->kind == LP_CHART_STACKED)) { // room for the outer bars
        double span = F.xhi - F.xlo;
        F.xlo -= span * 0.06;
        F.xhi += span * 0.06;
    }

    /* frame, grid, ticks */
    cairo_set_line_width(cr, 1);
    for (int32_t i = 0; i < ny; i++) {
        double py = fy(&F, yt[i]);
        cairo_set_source_rgb(cr, 0.88, 0.88, 0.88);
        cairo_move_to(cr, F.l, py);
        cairo_line_to(cr, F.r, py);
        cairo_stroke(cr);
        cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
        lp_chart__text(c, ylab[i], size, 0, F.l - 5, py, 1, 0.5, 0);
    }
    cairo_set_source_rgb(cr, 0.3, 0.3, 0.3);
    cairo_rectangle(cr, F.l, F.t, F.r - F.l, F.b - F.t);
    cairo_stroke(cr);
    for (int32_t i = 0; i < xt.n; i++) {
        double px = fx(&F, xt.pos[i]);
        if (px < F.l - 0.5 || px > F.r + 0.5)
            continue;
        cairo_set_source_rgb(cr, 0.3, 0.3, 0.3);
        cairo_move_to(cr, px, F.b);
        cairo_line_to(cr, px, F.b + 4);
        cairo_stroke(cr);
        /* keep the label inside the panel: an end label slides inwards */
        double w = lp_chart__text_w(c, xt.label[i], size, 0), lx = px;
        lx = fmax(lx, x0 + pad + w / 2);
        lx = fmin(lx, x1 - pad - w / 2);
        cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
        lp_chart__text(c, xt.label[i], size, 0, lx, xt_y, 0.5, 0, 0);
    }
    if (p->xlabel && *p->xlabel) {
        lp_chart__fit(c, p->xlabel, 0, size, size, F.r - F.l, buf, sizeof buf);
        lp_chart__text(c, buf, size, 0, (F.l + F.r) / 2, xl_y, 0.5, 1, 0);
    }
    if (yl_w > 0) {
        lp_chart__fit(c, p->ylabel, 0, size, size, F.b - F.t, buf, sizeof buf);
        lp_chart__text(c, buf, size, 0, x0 + pad, (F.t + F.b) / 2, 0.5, 0, 1);
    }
    if (c->areas)
        c->areas[c->panel] = (lp_chart_box){F.l, F.t, F.r, F.b, c->panel};
    draw_series(c, p, &F);
}

void lp_chart__draw(lp_chart_ctx *c, const lp_figure *f)
{
    cairo_t *cr = c->cr;
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_paint(cr);
    double top = 0;
    c->panel = -1;
    if (f->title && *f->title) {
        char buf[256];
        double s = lp_chart__fit(c, f->title, 1, fmin(22, fmax(10, f->height * 0.03)), 9, f->width - 20, buf,
                                 sizeof buf);
        cairo_set_source_rgb(cr, 0.05, 0.05, 0.05);
        lp_chart__text(c, buf, s, 1, f->width / 2.0, 8, 0.5, 0, 0);
        top = 8 + lp_chart__text_h(c, s) + 4;
    }
    double cw = (double)f->width / f->cols, ch = (f->height - top) / f->rows;
    for (int32_t i = 0; i < f->n_panels; i++) {
        int32_t r = i / f->cols, k = i % f->cols;
        c->panel = i;
        draw_panel(c, &f->panels[i], k * cw, top + r * ch, (k + 1) * cw, top + (r + 1) * ch);
    }
}
