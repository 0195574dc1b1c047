/* Text for the charts: measured before it is placed, fitted to the room it has, and
 * recorded (when asked) so a test can prove no two labels overlap. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chart_internal.h"

static void font(lp_chart_ctx *c, double size, int bold)
{
    cairo_select_font_face(c->cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL,
                           bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_font_size(c->cr, size);
}

double lp_chart__text_w(lp_chart_ctx *c, const char *s, double size, int bold)
{
    cairo_text_extents_t te;
    font(c, size, bold);
    cairo_text_extents(c->cr, s, &te);
    return te.x_advance;
}

double lp_chart__text_h(lp_chart_ctx *c, double size)
{
    cairo_font_extents_t fe;
    font(c, size, 0);
    cairo_font_extents(c->cr, &fe);
    return fe.ascent + fe.descent;
}

static void record(lp_chart_ctx *c, double x0, double y0, double x1, double y1)
{
    if (!c->collect || c->oom)
        return;
    lp_chart_box *nb = lp_grow(c->boxes, &c->cap_boxes, c->n_boxes + 1, sizeof *nb, 64);
    if (!nb) {
        c->oom = 1;
        return;
    }
    c->boxes = nb;
    c->boxes[c->n_boxes++] = (lp_chart_box){x0, y0, x1, y1, c->panel};
}

void lp_chart__text(lp_chart_ctx *c, const char *s, double size, int bold, double ax, double ay, double ha,
                    double va, int vertical)
{
    if (!s || !*s)
        return;
    cairo_font_extents_t fe;
    cairo_text_extents_t te;
    font(c, size, bold);
    cairo_font_extents(c->cr, &fe);
    cairo_text_extents(c->cr, s, &te);
    double w = te.x_advance, h = fe.ascent + fe.descent;
    cairo_save(c->cr);
    cairo_translate(c->cr, ax, ay);
    if (vertical)
        cairo_rotate(c->cr, -M_PI / 2);
    cairo_move_to(c->cr, -ha * w, -va * h + fe.ascent);
    cairo_show_text(c->cr, s);
    cairo_new_path(c->cr);
    cairo_restore(c->cr);
    if (vertical) // the rotated frame's (u, v) is the device's (ax + v, ay - u)
        record(c, ax - va * h, ay - (1 - ha) * w, ax + (1 - va) * h, ay + ha * w);
    else
        record(c, ax - ha * w, ay - va * h, ax + (1 - ha) * w, ay + (1 - va) * h);
}

double lp_chart__fit(lp_chart_ctx *c, const char *s, int bold, double max_size, double min_size, double max_w,
                     char *out, size_t cap)
{
    snprintf(out, cap, "%s", s ? s : "");
    double size = max_size;
    while (size > min_size && lp_chart__text_w(c, out, size, bold) > max_w)
        size = fmax(min_size, size * 0.92);
    size_t n = strlen(out);
    while (n > 0 && lp_chart__text_w(c, out, size, bold) > max_w) { // shorten, keep "..."
        n--;
        while (n > 0 && (out[n] & 0xC0) == 0x80) // never cut a UTF-8 sequence
            n--;
        if (n + 4 > cap)
            continue;
        memcpy(out + n, "...", 4);
        if (n == 0)
            out[0] = 0;
    }
    return size;
}
