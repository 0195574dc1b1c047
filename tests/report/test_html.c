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
    for (const char *p = page; (p = strstr(p, " id=\"")); ) {
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
    lp_chart_series loss[] = {{.name = "loss", .x = xs, .y = ya, .n = N}, {.name = "lr", .x = xs, .y = yb, .n = N}};
    lp_chart_series split[] = {{.name = "data", .x = xs, .y = yb, .n = 10},
                               {.name = "forward", .x = xs, .y = yc, .n = 10},
                               {.name = "backward <&>", .x = xs, .y = ya, .n = 10}};
    static const char *cats[] = {"full", "lora", "qlora"}, *rows[] = {"a", "b", "c"},
                      *cols[] = {"w", "x", "y", "z"};
    lp_chart_series bars[] = {{.name = "ms/step", .x = (double[]){0, 1, 2}, .y = (double[]){5, 3, 3.4}, .n = 3}};
    lp_chart_heatmap hm = {.rows = 3, .cols = 4, .values = hv, .row_labels = rows, .col_labels = cols};
    lp_chart_panel p[] = {
        {.title = "Loss and learning rate", .xlabel = "step", .kind = LP_CHART_LINE, .y_log = 1, .series = loss,
         .n_series = 2},
        {.title = "Step time split", .xlabel = "step", .ylabel = "ms", .kind = LP_CHART_STACKED,
         .y_from_zero = 1, .series = split, .n_series = 3},
        {.title = "Step time", .kind = LP_CHART_BAR, .x_scale = LP_CHART_X_CATEGORY, .x_categories = cats,
         .n_categories = 3, .y_from_zero = 1, .series = bars, .n_series = 1},
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
        lp_figure f = {.title = p[i].title, .rows = 1, .cols = 1, .width = 640, .height = 360, .panels = &p[i],
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
        cmocka_unit_test(errors_are_sticky),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    lp_chart_release_caches();
    return rc;
}
