/* Chart output: the one drawing routine run on a cairo image surface (PNG), an SVG surface
 * or a recording surface (text boxes for tests); files are written through lp_atomic_file
 * so a chart appears complete or not at all. */
#include <cairo-svg.h>
#include <fontconfig/fontconfig.h>
#include <stdlib.h>
#include <string.h>

#include "chart_internal.h"

static cairo_status_t to_file(void *closure, const unsigned char *data, unsigned int len)
{
    return fwrite(data, 1, len, closure) == len ? CAIRO_STATUS_SUCCESS : CAIRO_STATUS_WRITE_ERROR;
}

static lp_status draw_on(cairo_surface_t *s, const lp_figure *f, lp_chart_ctx *c)
{
    if (cairo_surface_status(s) != CAIRO_STATUS_SUCCESS)
        return lp_err(LP_STATUS_NO_MEMORY, "chart: cairo surface: %s",
                      cairo_status_to_string(cairo_surface_status(s)));
    c->cr = cairo_create(s);
    lp_chart__draw(c, f);
    cairo_status_t cs = cairo_status(c->cr);
    cairo_destroy(c->cr);
    c->cr = NULL;
    if (cs != CAIRO_STATUS_SUCCESS)
        return lp_err(LP_STATUS_NO_MEMORY, "chart: drawing failed: %s", cairo_status_to_string(cs));
    return c->oom ? lp_err(LP_STATUS_NO_MEMORY, "chart: out of memory") : LP_OK;
}

lp_status lp_figure_write_png(const lp_figure *f, const char *path)
{
    lp_status st = lp_chart__validate(f);
    if (st != LP_OK)
        return lp_err_wrap(st, "%s", path);
    cairo_surface_t *s = cairo_image_surface_create(CAIRO_FORMAT_RGB24, f->width, f->height);
    lp_chart_ctx c = {0};
    if ((st = draw_on(s, f, &c)) != LP_OK) {
        cairo_surface_destroy(s);
        return lp_err_wrap(st, "%s", path);
    }
    lp_atomic_file af;
    if ((st = lp_atomic_open(&af, path)) != LP_OK) {
        cairo_surface_destroy(s);
        return st;
    }
    cairo_status_t cs = cairo_surface_write_to_png_stream(s, to_file, af.fp);
    cairo_surface_destroy(s);
    if (cs != CAIRO_STATUS_SUCCESS) {
        lp_atomic_abort(&af);
        return lp_err(LP_STATUS_IO, "%s: writing the PNG failed: %s", path, cairo_status_to_string(cs));
    }
    return lp_atomic_commit(&af);
}

lp_status lp_figure_write_svg(const lp_figure *f, const char *path)
{
    lp_status st = lp_chart__validate(f);
    if (st != LP_OK)
        return lp_err_wrap(st, "%s", path);
    lp_atomic_file af;
    if ((st = lp_atomic_open(&af, path)) != LP_OK)
        return st;
    cairo_surface_t *s = cairo_svg_surface_create_for_stream(to_file, af.fp, f->width, f->height);
    lp_chart_ctx c = {0};
    st = draw_on(s, f, &c);
    cairo_surface_finish(s); // writes the document's end through to_file
    cairo_status_t cs = cairo_surface_status(s);
    cairo_surface_destroy(s);
    if (st == LP_OK && cs != CAIRO_STATUS_SUCCESS)
        st = lp_err(LP_STATUS_IO, "%s: writing the SVG failed: %s", path, cairo_status_to_string(cs));
    if (st != LP_OK) {
        lp_atomic_abort(&af);
        return st == LP_STATUS_IO ? st : lp_err_wrap(st, "%s", path);
    }
    return lp_atomic_commit(&af);
}

typedef struct membuf {
    char *p;
    size_t len, cap;
    int oom;
} membuf;

static cairo_status_t to_mem(void *closure, const unsigned char *data, unsigned int len)
{
    membuf *m = closure;
    char *p = lp_grow(m->p, &m->cap, m->len + len + 1, 1, 1 << 16);
    if (!p) {
        m->oom = 1;
        return CAIRO_STATUS_WRITE_ERROR;
    }
    m->p = p;
    memcpy(m->p + m->len, data, len);
    m->len += len;
    m->p[m->len] = 0;
    return CAIRO_STATUS_SUCCESS;
}

lp_status lp_figure_svg(const lp_figure *f, char **out, size_t *len)
{
    *out = NULL;
    if (len)
        *len = 0;
    lp_status st = lp_chart__validate(f);
    if (st != LP_OK)
        return st;
    membuf m = {0};
    cairo_surface_t *s = cairo_svg_surface_create_for_stream(to_mem, &m, f->width, f->height);
    lp_chart_ctx c = {0};
    st = draw_on(s, f, &c);
    cairo_surface_finish(s);
    cairo_status_t cs = cairo_surface_status(s);
    cairo_surface_destroy(s);
    if (st == LP_OK && (m.oom || cs != CAIRO_STATUS_SUCCESS || !m.p))
        st = lp_err(LP_STATUS_NO_MEMORY, "chart: rendering the SVG failed: %s",
                    m.oom ? "out of memory" : cairo_status_to_string(cs));
    if (st != LP_OK) {
        free(m.p);
        return st;
    }
    *out = m.p;
    if (len)
        *len = m.len;
    return LP_OK;
}

lp_status lp_figure_text_boxes(const lp_figure *f, lp_chart_box **out, size_t *n, lp_chart_box *areas)
{
    *out = NULL;
    *n = 0;
    lp_status st = lp_chart__validate(f);
    if (st != LP_OK)
        return st;
    cairo_rectangle_t ext = {0, 0, f->width, f->height};
    cairo_surface_t *s = cairo_recording_surface_create(CAIRO_CONTENT_COLOR, &ext);
    lp_chart_ctx c = {.collect = 1, .areas = areas};
    st = draw_on(s, f, &c);
    cairo_surface_destroy(s);
    if (st != LP_OK) {
        free(c.boxes);
        return st;
    }
    *out = c.boxes;
    *n = c.n_boxes;
    return LP_OK;
}

void lp_chart_release_caches(void)
{
    cairo_debug_reset_static_data(); // drops cairo's font faces, which hold fontconfig patterns
    FcFini();
}
