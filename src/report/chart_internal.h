/* Private to the chart files: the drawing context that both the PNG and the SVG writers
 * (and lp_figure_text_boxes) hand to the one drawing routine. */
#ifndef LP_REPORT_CHART_INTERNAL_H
#define LP_REPORT_CHART_INTERNAL_H

#include <cairo.h>

#include "loupe/report.h"

typedef struct lp_chart_ctx {
    cairo_t *cr;
    lp_chart_box *boxes; /* every text placed, when collecting (NULL otherwise) */
    size_t n_boxes, cap_boxes;
    int collect, oom;
    lp_chart_box *areas; /* plot area per panel, or NULL */
    int32_t panel;       /* panel being drawn; -1 for the figure title */
} lp_chart_ctx;

/* Checks what the drawing relies on (sizes, grid, data present). INVALID_ARG naming it. */
lp_status lp_chart__validate(const lp_figure *f);
/* Draws the whole figure on c->cr (white background). */
void lp_chart__draw(lp_chart_ctx *c, const lp_figure *f);

/* Text primitives shared by the panel kinds. ha, va: 0 left/top, 0.5 centre, 1 right/bottom
 * of the text's box; vertical: the text reads upwards, rotated about the anchor. */
double lp_chart__text_w(lp_chart_ctx *c, const char *s, double size, int bold);
double lp_chart__text_h(lp_chart_ctx *c, double size);
void lp_chart__text(lp_chart_ctx *c, const char *s, double size, int bold, double ax, double ay, double ha,
                    double va, int vertical);
/* The largest size in [min_size, max_size] at which s fits max_w; when even min_size does
 * not, out gets s shortened with "..." so it does. Returns the size. */
double lp_chart__fit(lp_chart_ctx *c, const char *s, int bold, double max_size, double min_size, double max_w,
                     char *out, size_t cap);

/* A heatmap panel inside the cell (x0, y0)-(x1, y1), title already drawn above y0. */
void lp_chart__heatmap(lp_chart_ctx *c, const lp_chart_panel *p, double x0, double y0, double x1, double y1);

#endif
