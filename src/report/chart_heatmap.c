/* Heatmap panels: a matrix of cells coloured on a viridis-like scale (per column or over
 * the matrix), row labels at the left, column labels below (turned upright when they do
 * not fit side by side), and each cell's text when it fits the cell. */
#include <math.h>
#include <stdio.h>

#include "chart_internal.h"

/* Five stops of a perceptually even dark-blue -> green -> yellow scale. */
static void colour(double t, double *r, double *g, double *b)
{
    static const double stop[5][3] = {
        {0.27, 0.00, 0.33}, {0.23, 0.32, 0.55}, {0.13, 0.57, 0.55}, {0.37, 0.79, 0.38}, {0.99, 0.91, 0.14},
    };
    t = fmin(1, fmax(0, t)) * 4;
    int i = (int)fmin(3, floor(t));
    double f = t - i;
    *r = stop[i][0] + f * (stop[i + 1][0] - stop[i][0]);
    *g = stop[i][1] + f * (stop[i + 1][1] - stop[i][1]);
    *b = stop[i][2] + f * (stop[i + 1][2] - stop[i][2]);
}

static void range(const lp_chart_heatmap *h, int32_t col, double *lo, double *hi)
{
    *lo = INFINITY;
    *hi = -INFINITY;
    for (int32_t r = 0; r < h->rows; r++)
        for (int32_t k = 0; k < h->cols; k++) {
            double v = h->values[(int64_t)r * h->cols + k];
            if ((col < 0 || k == col) && isfinite(v)) {
                *lo = fmin(*lo, v);
                *hi = fmax(*hi, v);
            }
        }
}

void lp_chart__heatmap(lp_chart_ctx *c, const lp_chart_panel *p, double x0, double y0, double x1, double y1)
{
    const lp_chart_heatmap *h = p->heatmap;
    cairo_t *cr = c->cr;
    char buf[128];
    double size = fmin(12, fmax(7, fmin(x1 - x0, y1 - y0) * 0.03));
    /* row labels: the widest, within 30 % of the width */
    double rw = 0;
    for (int32_t r = 0; h->row_labels && r < h->rows; r++) {
        lp_chart__fit(c, h->row_labels[r], 0, size, size, (x1 - x0) * 0.3, buf, sizeof buf);
        rw = fmax(rw, lp_chart__text_w(c, buf, size, 0));
    }
    double gx0 = x0 + rw + 6, cell_w = (x1 - gx0) / h->cols;
    /* column labels side by side when each fits its cell, else upright */
    int upright = 0;
    double band = 0, th = lp_chart__text_h(c, size);
    for (int32_t k = 0; h->col_labels && k < h->cols; k++)
        if (lp_chart__text_w(c, h->col_labels[k], size, 0) > cell_w - 4)
            upright = 1;
    if (h->col_labels) {
        if (upright) {
            for (int32_t k = 0; k < h->cols; k++)
                band = fmax(band, lp_chart__text_w(c, h->col_labels[k], size, 0));
            band = fmin(band, (y1 - y0) * 0.35);
        } else
            band = th;
        band += 4;
    }
    double gy1 = y1 - band, cell_h = (gy1 - y0) / h->rows;
    if (cell_h < 2 || cell_w < 2)
        return;
    double rs = size; // row labels one per cell height
    while (rs > 5 && lp_chart__text_h(c, rs) > cell_h - 1)
        rs *= 0.9;
    double ulo, uhi;
    range(h, -1, &ulo, &uhi);
    for (int32_t k = 0; k < h->cols; k++) {
        double lo = ulo, hi = uhi;
        if (h->normalise_columns)
            range(h, k, &lo, &hi);
        for (int32_t r = 0; r < h->rows; r++) {
            double v = h->values[(int64_t)r * h->cols + k], R = 0.8, G = 0.8, B = 0.8;
            if (isfinite(v))
                colour(hi > lo ? (v - lo) / (hi - lo) : 0.5, &R, &G, &B);
            double cx = gx0 + k * cell_w, cy = y0 + r * cell_h;
            cairo_set_source_rgb(cr, R, G, B);
            cairo_rectangle(cr, cx, cy, cell_w - 1, cell_h - 1);
            cairo_fill(cr);
            const char *t = h->text ? h->text[(int64_t)r * h->cols + k] : NULL;
            if (!t || !*t)
                continue;
            double ts = fmin(size, cell_h * 0.6);
            while (ts > 6 && lp_chart__text_w(c, t, ts, 0) > cell_w - 4)
                ts *= 0.9;
            if (lp_chart__text_w(c, t, ts, 0) > cell_w - 4 || lp_chart__text_h(c, ts) > cell_h - 2)
                continue; // does not fit: the colour alone tells
            double lum = 0.3 * R + 0.59 * G + 0.11 * B;
            cairo_set_source_rgb(cr, lum < 0.5 ? 1 : 0, lum < 0.5 ? 1 : 0, lum < 0.5 ? 1 : 0);
            lp_chart__text(c, t, ts, 0, cx + cell_w / 2, cy + cell_h / 2, 0.5, 0.5, 0);
        }
    }
    cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
    for (int32_t r = 0; h->row_labels && r < h->rows; r++) {
        lp_chart__fit(c, h->row_labels[r], 0, rs, rs, rw + 1, buf, sizeof buf);
        lp_chart__text(c, buf, rs, 0, gx0 - 4, y0 + (r + 0.5) * cell_h, 1, 0.5, 0);
    }
    for (int32_t k = 0; h->col_labels && k < h->cols; k++) {
        double cs = size;
        if (upright) { // one label per column width, read upwards
            while (cs > 5 && lp_chart__text_h(c, cs) > cell_w - 1)
                cs *= 0.9;
            lp_chart__fit(c, h->col_labels[k], 0, cs, cs, band - 4, buf, sizeof buf);
            lp_chart__text(c, buf, cs, 0, gx0 + (k + 0.5) * cell_w, gy1 + 3, 1, 0.5, 1); // ends at the grid
        } else
            lp_chart__text(c, h->col_labels[k], cs, 0, gx0 + (k + 0.5) * cell_w, gy1 + 3, 0.5, 0, 0);
    }
    if (c->areas)
        c->areas[c->panel] = (lp_chart_box){gx0, y0, x1, gy1, c->panel};
}
