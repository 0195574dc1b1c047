/* Charts in a page: the figure drawn once more through cairo's SVG surface into memory and
 * inlined, its ids made unique to the chart (cairo names glyphs and clips "glyph-0-0",
 * "clip-1" in every document, and inline SVGs share one id space: without the prefix every
 * chart would draw the first chart's glyphs); and PNG + SVG copies under the plots folder. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "html_internal.h"

/* Appends the SVG document svg without its XML prologue, with every id, "#id" reference
 * and url(#id) prefixed by pre, and the root element given a class and a label. */
static void put_svg(lp_html *h, const char *svg, const char *pre, const char *label)
{
    const char *s = strstr(svg, "<svg");
    if (!s) {
        lp_html__fail(h, lp_err(LP_STATUS_FORMAT, "html: cairo wrote no <svg> element"));
        return;
    }
    lp_html__puts(h, "<svg class=\"lp-svg\" role=\"img\" aria-label=\"");
    lp_html__esc(h, label);
    lp_html__puts(h, "\"");
    s += 4;
    static const char *const pats[] = {" id=\"", "href=\"#", "url(#"};
    while (*s) {
        const char *best = NULL;
        size_t blen = 0;
        for (size_t k = 0; k < sizeof pats / sizeof pats[0]; k++) {
            const char *q = strstr(s, pats[k]);
            if (q && (!best || q < best)) {
                best = q;
                blen = strlen(pats[k]);
            }
        }
        if (!best) {
            lp_html__puts(h, s);
            break;
        }
        lp_html__put(h, s, (size_t)(best - s) + blen);
        lp_html__puts(h, pre);
        s = best + blen;
    }
}

static lp_status write_copies(lp_html *h, const char *name, const lp_figure *f)
{
    if (!h->plots_made) {
        lp_status st = lp_mkdir_p(h->plots_dir);
        if (st != LP_OK)
            return st;
        h->plots_made = 1;
    }
    size_t n = strlen(h->plots_dir) + strlen(name) + 8;
    char *path = malloc(n);
    if (!path)
        return lp_err(LP_STATUS_NO_MEMORY, "html: out of memory");
    snprintf(path, n, "%s/%s.png", h->plots_dir, name);
    lp_status st = lp_figure_write_png(f, path);
    if (st == LP_OK) {
        snprintf(path, n, "%s/%s.svg", h->plots_dir, name);
        st = lp_figure_write_svg(f, path);
    }
    free(path);
    return st;
}

lp_status lp_html_chart(lp_html *h, const char *name, const lp_figure *f)
{
    if (h->st != LP_OK)
        return h->st;
    if (!lp_html__name_ok(name))
        return lp_html__fail(
            h, lp_err(LP_STATUS_INVALID_ARG, "html: chart name '%.64s' is not letters, digits, '-', '_'",
                      name ? name : "(null)"));
    char *svg = NULL;
    lp_status st = lp_figure_svg(f, &svg, NULL);
    if (st != LP_OK)
        return lp_html__fail(h, lp_err_wrap(st, "chart '%s'", name));
    char pre[96];
    snprintf(pre, sizeof pre, "c%d-%s-", (int)h->n_charts++, name);
    lp_html__putf(h, "<figure class=\"lp-chart\" data-chart=\"%s\" style=\"max-width:%dpx\">\n", name,
                  (int)f->width);
    const char *cap = f->title                                   ? f->title
                      : f->n_panels > 0 && f->panels[0].title ? f->panels[0].title
                                                               : name;
    put_svg(h, svg, pre, cap);
    free(svg);
    lp_html__puts(h, "<figcaption>");
    lp_html__esc(h, cap);
    if (h->plots_dir) {
        const char *base = strrchr(h->plots_dir, '/'); // the folder as seen from the page beside it
        lp_html__puts(h, " <span class=\"lp-files\">(");
        lp_html__esc(h, base ? base + 1 : h->plots_dir);
        lp_html__puts(h, "/");
        lp_html__esc(h, name);
        lp_html__puts(h, ".png, .svg)</span>");
    }
    lp_html__puts(h, "</figcaption>\n</figure>\n");
    if (h->st == LP_OK && h->plots_dir && (st = write_copies(h, name, f)) != LP_OK)
        return lp_html__fail(h, st);
    return h->st;
}
