/* The HTML toolkit: escaping; a page with tabs, headline figures, a sortable table and
 * charts of every kind holds each chart as an inline SVG whose ids are unique across the
 * page, with PNG and SVG copies under plots/; errors are sticky and leave no file. The
 * page's rendering in a browser is held by html_render (tests/report/html_check.py). */
#include "lp_test_util.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cairo.h>

#include "loupe/report.h"

static void escaping(void **state)
{
    (void)state;
    char *e = lp_html_escape("a<b & \"c\" 'd'>\x01\x7f\tz\n");
    assert_non_null(e);
    assert_string_equal(e, "a&lt;b &amp; &quot;c&quot; &#39;d&#39;&gt;\tz\n");
    free(e);
    e = lp_html_escape("");
    assert_string_equal(e, "");
    free(e);
    e = lp_html_escape("héllo ✓"); // UTF-8 goes through unchanged
    assert_string_equal(e, "héllo ✓");
    free(e);
}

static size_t count(const char *hay, const char *needle)
{
    size_t n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

/* Every id="..." in the page is unique (the same id in two inline SVGs would make the
 * browser draw the second chart with the first one's glyphs). Returns the number of ids. */
static size_t ids_unique(const char *page)
{
    size_t n = 0, cap = 0;
    char **ids = NULL;
    for (const char *p = page; (p = strstr(p, " id=\""));) {
        p += 5;
        const char *q = strchr(p, '"');
        assert_non_null(q);
        char *id = strndup(p, (size_t)(q - p));
        for (size_t i = 0; i < n; i++)
            if (strcmp(ids[i], id) == 0) {
                fprintf(stderr, "duplicate id '%s'\n", id);
                fail();
            }
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            ids = realloc(ids, cap * sizeof *ids);
        }
        ids[n++] = id;
        p = q;
    }
    for (size_t i = 0; i < n; i++)
        free(ids[i]);
    free(ids);
    return n;
}

enum { N = 40 };
static double xs[N], ya[N], yb[N], yc[N], hv[12];

/* The demo page: one chart of each kind the reports use (lines with a log axis, stacked
 * bars, grouped bars, heatmap). Also written by html_render's demo. */
static lp_status demo_page(const char *dir, char *path, size_t cap, int *n_charts)
{
    for (int i = 0; i < N; i++) {
        xs[i] = i + 1;
        ya[i] = 3 * exp(-i / 10.0) + 0.1;
        yb[i] = 1e-3 * (1 + i);
        yc[i] = 2 + (i % 3);
    }
    for (int i = 0; i < 12; i++)
        hv[i] = i * i;
    lp_chart_series loss[] = {{.name = "loss", .x = xs, .y = ya, .n = N},
                              {.name = "lr", .x = xs, .y = yb, .n = N}};
    lp_chart_series split[] = {{.name = "data", .x = xs, .y = yb, .n = 10},
                               {.name = "forward", .x = xs, .y = yc, .n = 10},
                               {.name = "backward <&>", .x = xs, .y = ya, .n = 10}};
    static const char *cats[] = {"full", "lora", "qlora"}, *rows[] = {"a", "b", "c"},
                      *cols[] = {"w", "x", "y", "z"};
    lp_chart_series bars[] = {
        {.name = "ms/step", .x = (double[]){0, 1, 2}, .y = (double[]){5, 3, 3.4}, .n = 3}};
    lp_chart_heatmap hm = {.rows = 3, .cols = 4, .values = hv, .row_labels = rows, .col_labels = cols};
    lp_chart_panel p[] = {
        {.title = "Loss and learning rate",
         .xlabel = "step",
         .kind = LP_CHART_LINE,
         .y_log = 1,
         .series = loss,
         .n_series = 2},
        {.title = "Step time split",
         .xlabel = "step",
         .ylabel = "ms",
         .kind = LP_CHART_STACKED,
         .y_from_zero = 1,
         .series = split,
         .n_series = 3},
        {.title = "Step time",
         .kind = LP_CHART_BAR,
         .x_scale = LP_CHART_X_CATEGORY,
         .x_categories = cats,
         .n_categories = 3,
         .y_from_zero = 1,
         .series = bars,
         .n_series = 1},
        {.title = "Heat", .kind = LP_CHART_HEATMAP, .heatmap = &hm},
    };
    static const char *names[] = {"loss", "split", "bars", "heat"};
    char plots[512];
    snprintf(plots, sizeof plots, "%s/plots", dir);
    snprintf(path, cap, "%s/page.html", dir);
    lp_html *h = lp_html_new("Demo <page>", plots);
    assert_non_null(h);
    lp_html_h(h, 1, "Demo & test");
    lp_html_stats_begin(h);
    lp_html_stat(h, "accuracy", "%.1f %%", 91.25);
    lp_html_stats_end(h);
    lp_html_tabs_begin(h);
    for (int i = 0; i < 4; i++) {
        char id[16];
        snprintf(id, sizeof id, "tab%d", i);
        lp_html_tab_begin(h, id, names[i]);
        lp_html_p(h, "Panel %d <b>not bold</b>", i);
        lp_figure f = {.title = p[i].title,
                       .rows = 1,
                       .cols = 1,
                       .width = 640,
                       .height = 360,
                       .panels = &p[i],
                       .n_panels = 1};
        lp_status st = lp_html_chart(h, names[i], &f);
        if (st != LP_OK) {
            lp_html_free(h);
            return st;
        }
        lp_html_tab_end(h);
    }
    lp_html_tabs_end(h);
    lp_html_table_begin(h, (const char *[]){"op", "#calls", "#self ms"}, 3);
    lp_html_tr(h);
    lp_html_td(h, "aten::mm<T>");
    lp_html_td_num(h, 12, "%.0f");
    lp_html_td_num(h, 3.25, "%.2f");
    lp_html_tr(h);
    lp_html_td(h, "aten::add");
    lp_html_td_num(h, 7, "%.0f");
    lp_html_td_num(h, NAN, "%.2f");
    lp_html_table_end(h);
    lp_status st = lp_html_write(h, path);
    lp_html_free(h);
    *n_charts = 4;
    return st;
}

static void page_with_charts(void **state)
{
    (void)state;
    char dir[128], path[256];
    int nc = 0;
    assert_int_equal(lp_test_tmpdir_make(dir, sizeof dir, "html"), 0);
    assert_int_equal(demo_page(dir, path, sizeof path, &nc), LP_OK);
    char *page;
    size_t len;
    assert_int_equal(lp_file_read_all(path, &page, &len), LP_OK);
    assert_true(strncmp(page, "<!DOCTYPE html>", 15) == 0);
    assert_non_null(strstr(page, "</html>\n"));
    assert_non_null(strstr(page, "<title>Demo &lt;page&gt;</title>"));
    assert_non_null(strstr(page, "Panel 0 &lt;b&gt;not bold&lt;/b&gt;"));
    assert_non_null(strstr(page, "<td>aten::mm&lt;T&gt;</td>"));
    assert_non_null(strstr(page, "data-v=\"3.25\">3.25</td>"));
    assert_non_null(strstr(page, "data-v=\"\">-</td>")); // NaN: shown as "-", sorts last
    assert_non_null(strstr(page, "<th class=\"num\">calls</th>"));
    assert_int_equal(count(page, "<figure class=\"lp-chart\""), nc);
    assert_int_equal(count(page, "<svg class=\"lp-svg\""), nc);
    assert_int_equal(count(page, "</svg>"), nc);
    assert_int_equal(count(page, "<?xml"), 0); // prologues stripped: not allowed mid-document
    assert_null(strstr(page, "http://") == NULL ? NULL : strstr(page, "src=\"http")); // nothing fetched
    assert_null(strstr(page, "<link"));
    /* cairo names glyphs and clips the same way in every SVG: after prefixing, > 20 ids
     * (glyphs of every chart) and none repeated */
    assert_true(ids_unique(page) > 20);
    assert_int_equal(count(page, "backward &lt;&amp;&gt;"), 0); // legend text is drawn, not text
    free(page);
    /* the copies: each PNG decodes to the figure's size; each SVG is a whole document */
    static const char *names[] = {"loss", "split", "bars", "heat"};
    for (int i = 0; i < nc; i++) {
        char f[512];
        snprintf(f, sizeof f, "%s/plots/%s.png", dir, names[i]);
        FILE *fp = fopen(f, "rb");
        assert_non_null(fp);
        unsigned char sig[24];
        assert_int_equal(fread(sig, 1, 24, fp), 24);
        fclose(fp);
        assert_memory_equal(sig + 1, "PNG", 3);
        assert_int_equal((sig[16] << 24 | sig[17] << 16 | sig[18] << 8 | sig[19]), 640);
        snprintf(f, sizeof f, "%s/plots/%s.svg", dir, names[i]);
        char *svg;
        assert_int_equal(lp_file_read_all(f, &svg, &len), LP_OK);
        assert_non_null(strstr(svg, "<svg"));
        assert_non_null(strstr(svg, "</svg>"));
        free(svg);
    }
    const char *keep = getenv("LP_HTML_KEEP"); // a directory to look at the page in
    if (keep) {
        char cmd[600];
        snprintf(cmd, sizeof cmd, "cp -r '%s'/* '%s'", dir, keep);
        assert_int_equal(system(cmd), 0);
    }
    assert_int_equal(lp_test_tmpdir_remove(dir), 0);
}

/* Pixels of the palette's colour k (exact: bars are filled without antialiasing at their
 * centre) in the column x of a PNG, between rows y0 and y1. */
static int column_count(cairo_surface_t *img, int x, int y0, int y1, int k)
{
    static const double pal[][3] = {{0.12, 0.47, 0.71}, {1.00, 0.50, 0.05}}; // chart_draw.c's first two
    const unsigned char *px = cairo_image_surface_get_data(img);
    int stride = cairo_image_surface_get_stride(img), n = 0;
    for (int y = y0; y < y1; y++) {
        const unsigned char *p = px + y * stride + 4 * x; // BGRx
        if (abs(p[2] - (int)(pal[k][0] * 255)) <= 2 && abs(p[1] - (int)(pal[k][1] * 255)) <= 2 &&
            abs(p[0] - (int)(pal[k][2] * 255)) <= 2)
            n++;
    }
    return n;
}

/* The two chart kinds the pages added: a stacked bar's segments are as tall as their
 * values (1 under 3: the top one three times the bottom one), and on a log axis bars of 10
 * and 100 over an axis of 1..100 reach half and all of its height (linear: 1/10 and all).
 * Tolerance: 3 % of the height, for the bars' antialiased edges. */
static void stacked_and_log(void **state)
{
    (void)state;
    char dir[128], png[256];
    assert_int_equal(lp_test_tmpdir_make(dir, sizeof dir, "html_kinds"), 0);
    snprintf(png, sizeof png, "%s/k.png", dir);
    double x0[] = {0}, lo[] = {1}, hi[] = {3}, xs3[] = {0, 1, 2}, ys3[] = {1, 10, 100};
    lp_chart_series st[] = {{.name = "a", .x = x0, .y = lo, .n = 1}, {.name = "b", .x = x0, .y = hi, .n = 1}};
    lp_chart_series lg = {.name = "v", .x = xs3, .y = ys3, .n = 3};
    lp_chart_panel p[] = {
        {.kind = LP_CHART_STACKED,
         .x_scale = LP_CHART_X_CATEGORY,
         .x_categories = (const char *[]){"r"},
         .n_categories = 1,
         .y_from_zero = 1,
         .series = st,
         .n_series = 2},
        {.kind = LP_CHART_BAR,
         .x_scale = LP_CHART_X_CATEGORY,
         .x_categories = (const char *[]){"1", "10", "100"},
         .n_categories = 3,
         .y_log = 1,
         .series = &lg,
         .n_series = 1},
    };
    lp_figure f = {.rows = 1, .cols = 2, .width = 800, .height = 400, .panels = p, .n_panels = 2};
    lp_chart_box *b, areas[2];
    size_t n;
    assert_int_equal(lp_figure_text_boxes(&f, &b, &n, areas), LP_OK);
    free(b);
    assert_int_equal(lp_figure_write_png(&f, png), LP_OK);
    cairo_surface_t *img = cairo_image_surface_create_from_png(png);
    assert_int_equal(cairo_surface_status(img), CAIRO_STATUS_SUCCESS);
    /* stacked: at the bar's centre column, "b" (orange) three times "a" (blue); together
     * they fill the axis (0..4: nice ticks end at 4) */
    const lp_chart_box *A = &areas[0];
    int cx = (int)((A->x0 + A->x1) / 2), h = (int)(A->y1 - A->y0);
    int na = column_count(img, cx, (int)A->y0, (int)A->y1, 0),
        nb = column_count(img, cx, (int)A->y0, (int)A->y1, 1);
    fprintf(stderr, "stacked: a %d px, b %d px of %d\n", na, nb, h);
    assert_true(fabs(na - h / 4.0) < 0.03 * h && fabs(nb - 3 * h / 4.0) < 0.03 * h);
    /* log axis: the three bars at x = 1/6, 1/2, 5/6 of the area (categories padded by 0.5) */
    const lp_chart_box *B = &areas[1];
    double w = B->x1 - B->x0;
    h = (int)(B->y1 - B->y0);
    int n10 = column_count(img, (int)(B->x0 + w / 2), (int)B->y0, (int)B->y1, 0);
    int n100 = column_count(img, (int)(B->x0 + w * 5 / 6), (int)B->y0, (int)B->y1, 0);
    fprintf(stderr, "log: 10 -> %d px, 100 -> %d px of %d\n", n10, n100, h);
    assert_true(fabs(n10 - h / 2.0) < 0.03 * h && fabs((double)n100 - h) < 0.03 * h);
    cairo_surface_destroy(img);
    assert_int_equal(lp_test_tmpdir_remove(dir), 0);
}

static void errors_are_sticky(void **state)
{
    (void)state;
    char dir[128], path[256];
    assert_int_equal(lp_test_tmpdir_make(dir, sizeof dir, "html_err"), 0);
    snprintf(path, sizeof path, "%s/bad.html", dir);
    lp_html *h = lp_html_new("t", NULL);
    lp_chart_panel p = {.kind = LP_CHART_LINE};
    lp_figure f = {.rows = 1, .cols = 1, .width = 10, .height = 10, .panels = &p, .n_panels = 1}; // too small
    assert_int_equal(lp_html_chart(h, "ok", &f), LP_STATUS_INVALID_ARG);
    assert_non_null(strstr(lp_err_msg(), "chart 'ok'"));
    lp_html_p(h, "after the error"); // ignored
    assert_null(strstr(lp_html_data(h, NULL), "after the error"));
    assert_int_equal(lp_html_write(h, path), LP_STATUS_INVALID_ARG);
    assert_non_null(strstr(lp_err_msg(), "bad.html"));
    assert_int_equal(access(path, F_OK), -1); // no half-written page
    lp_html_free(h);

    h = lp_html_new("t", NULL);
    f.width = f.height = 200;
    assert_int_equal(lp_html_chart(h, "../evil", &f), LP_STATUS_INVALID_ARG); // a name is a file name
    lp_html_free(h);
    h = lp_html_new("t", NULL);
    lp_html_tab_begin(h, "a b", "x");
    assert_int_equal(lp_html_status(h), LP_STATUS_INVALID_ARG);
    lp_html_free(h);
    /* an unwritable plots directory: IO naming it, no page */
    h = lp_html_new("t", "/proc/lp_no_such/plots");
    assert_int_equal(lp_html_chart(h, "c", &f), LP_STATUS_IO);
    assert_int_equal(lp_html_write(h, path), LP_STATUS_IO);
    assert_int_equal(access(path, F_OK), -1);
    lp_html_free(h);
    /* a table left open is a bug in the caller: refused */
    h = lp_html_new("t", NULL);
    lp_html_table_begin(h, (const char *[]){"a"}, 1);
    assert_int_equal(lp_html_write(h, path), LP_STATUS_INVALID_ARG);
    lp_html_free(h);
    assert_int_equal(lp_test_tmpdir_remove(dir), 0);
}

int main(int argc, char **argv)
{
    /* html_render calls "test_html --demo DIR" for a page to put in front of a browser */
    if (argc == 3 && strcmp(argv[1], "--demo") == 0) {
        char path[600];
        int nc;
        if (demo_page(argv[2], path, sizeof path, &nc) != LP_OK) {
            fprintf(stderr, "%s\n", lp_err_msg());
            return 1;
        }
        printf("%s %d\n", path, nc);
        lp_chart_release_caches();
        return 0;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(escaping),
        cmocka_unit_test(page_with_charts),
        cmocka_unit_test(stacked_and_log),
        cmocka_unit_test(errors_are_sticky),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    lp_chart_release_caches();
    return rc;
}
