/* The chart module: nice ticks and their labels; a six-panel figure plus a heatmap whose
 * placed text never overlaps and stays inside the figure (crowded axes and long titles
 * included); the PNG decoded back (size, ink in every panel's plot area, text in the title
 * band) and the SVG complete; bad figures and unwritable paths are clear errors that leave
 * no file. */
#include "lp_test_util.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cairo.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loupe/report.h"

static void nice_ticks(void **state)
{
    (void)state;
    double t[32], step;
    int32_t n = lp_chart_nice_ticks(0, 9.3, 6, t, &step);
    assert_int_equal(n, 6);
    assert_true(step == 2 && t[0] == 0 && t[5] == 10);
    /* properties over a table of awkward ranges: the ticks enclose the range, are at most
     * max_ticks, and sit on multiples of a 1/2/2.5/5 x 10^k step */
    static const double cases[][3] = {{0.013, 0.087, 5},   {-3.2, 7.9, 8}, {1, 1, 5},      {1e6, 3.7e6, 4},
                                      {0.5, 0.5000001, 6}, {-1e-3, 0, 3},  {12, 1000, 12}, {0, 1, 2}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        double lo = cases[i][0], hi = cases[i][1];
        int32_t m = (int32_t)cases[i][2];
        n = lp_chart_nice_ticks(lo, hi, m, t, &step);
        assert_true(n >= 2 && n <= m);
        assert_true(t[0] <= lo + 1e-12 && t[n - 1] >= hi - 1e-12);
        double mant = step / pow(10, floor(log10(step)));
        assert_true(fabs(mant - 1) < 1e-9 || fabs(mant - 2) < 1e-9 || fabs(mant - 2.5) < 1e-9 ||
                    fabs(mant - 5) < 1e-9);
        for (int32_t k = 0; k < n; k++) // each tick a whole number of steps (1e-6 relative)
            assert_true(fabs(t[k] / step - llround(t[k] / step)) < 1e-6);
    }
    char b[32];
    lp_chart_format_tick(2500, 500, b, sizeof b);
    assert_string_equal(b, "2500");
    lp_chart_format_tick(12000, 2000, b, sizeof b);
    assert_string_equal(b, "12k");
    lp_chart_format_tick(0.25, 0.25, b, sizeof b);
    assert_string_equal(b, "0.25");
    lp_chart_format_tick(1.5, 0.5, b, sizeof b);
    assert_string_equal(b, "1.5");
    lp_chart_format_tick(3e7, 1e7, b, sizeof b);
    assert_string_equal(b, "30M");
    lp_chart_format_tick(0, 250000, b, sizeof b); // not "0k"
    assert_string_equal(b, "0");
}

/* A figure like bench's: six panels over eleven batch sizes (crowded log2 axes), lines with
 * error bars, bars, two series with a legend, long titles; and a heatmap. */
enum { NB = 11 };
static double bx[NB], by[NB], be[NB], by2[NB];
static const char *hm_rows[NB], *hm_cols[] = {"latency/sample (ms)", "throughput (samples/s)",
                                              "peak RSS (MB)", "memory efficiency (samples/s/GB)"};
static double hm_vals[NB * 4];

static void fill_data(void)
{
    static char rl[NB][16];
    for (int i = 0; i < NB; i++) {
        bx[i] = 1 << i;
        by[i] = 100.0 / (i + 1) + i * i;
        be[i] = by[i] * 0.1;
        by2[i] = by[i] * 0.7;
        snprintf(rl[i], sizeof rl[i], "bs %d", 1 << i);
        hm_rows[i] = rl[i];
        for (int k = 0; k < 4; k++)
            hm_vals[i * 4 + k] = (k + 1) * by[i];
    }
}

static void make_figure(lp_figure *f, lp_chart_panel *p, lp_chart_series *s, lp_chart_heatmap *h, int w,
                        int hgt)
{
    fill_data();
    s[0] = (lp_chart_series){
        .name = "f32 run with a rather long legend entry", .x = bx, .y = by, .err = be, .n = NB};
    s[1] = (lp_chart_series){.name = "q8_0", .x = bx, .y = by2, .err = be, .n = NB};
    static const char *titles[] = {"Latency per sample (mean +- std) over every batch size in the sweep",
                                   "Throughput",
                                   "Memory",
                                   "Process memory",
                                   "Latency per batch",
                                   "Memory efficiency"};
    for (int i = 0; i < 6; i++)
        p[i] = (lp_chart_panel){.title = titles[i],
                                .xlabel = "batch size",
                                .ylabel = "milliseconds per sample",
                                .kind = i == 2 || i == 3 ? LP_CHART_BAR : LP_CHART_LINE,
                                .x_scale = LP_CHART_X_LOG2,
                                .y_from_zero = i > 0,
                                .series = s,
                                .n_series = i == 1 ? 2 : 1};
    *h = (lp_chart_heatmap){.rows = NB,
                            .cols = 4,
                            .values = hm_vals,
                            .row_labels = hm_rows,
                            .col_labels = hm_cols,
                            .normalise_columns = 1};
    p[6] =
        (lp_chart_panel){.title = "Metrics (normalised per column)", .kind = LP_CHART_HEATMAP, .heatmap = h};
    *f = (lp_figure){.title = "Batch-size comparison",
                     .rows = 3,
                     .cols = 3,
                     .width = w,
                     .height = hgt,
                     .panels = p,
                     .n_panels = 7};
}

static int overlap(const lp_chart_box *a, const lp_chart_box *b)
{
    const double tol = 0.5; // boxes may touch (shared edge), not intrude
    return a->x0 < b->x1 - tol && b->x0 < a->x1 - tol && a->y0 < b->y1 - tol && b->y0 < a->y1 - tol;
}

static void no_overlap_at(int w, int hgt)
{
    lp_figure f;
    lp_chart_panel p[7];
    lp_chart_series s[2];
    lp_chart_heatmap h;
    make_figure(&f, p, s, &h, w, hgt);
    lp_chart_box *b = NULL, areas[7];
    size_t n = 0;
    assert_int_equal(lp_figure_text_boxes(&f, &b, &n, areas), LP_OK);
    assert_true(n > 60); // titles, tick labels, axis labels, legends, heatmap labels
    for (size_t i = 0; i < n; i++) {
        assert_true(b[i].x0 >= -0.5 && b[i].y0 >= -0.5 && b[i].x1 <= w + 0.5 && b[i].y1 <= hgt + 0.5);
        for (size_t j = i + 1; j < n; j++)
            if (overlap(&b[i], &b[j])) {
                fprintf(stderr,
                        "%dx%d: text %zu (panel %d: %.1f,%.1f-%.1f,%.1f) overlaps %zu (panel %d: "
                        "%.1f,%.1f-%.1f,%.1f)\n",
                        w, hgt, i, b[i].panel, b[i].x0, b[i].y0, b[i].x1, b[i].y1, j, b[j].panel, b[j].x0,
                        b[j].y0, b[j].x1, b[j].y1);
                fail();
            }
        /* no text inside a plot area (the lines and bars are drawn there) */
        for (int k = 0; k < 6; k++)
            assert_false(overlap(&b[i], &areas[k]));
    }
    free(b);
}

static void text_never_overlaps(void **state)
{
    (void)state;
    no_overlap_at(1800, 1200);
    no_overlap_at(900, 600);  // crowded: ticks thinned, titles shortened
    no_overlap_at(640, 1400); // tall and narrow
}

static void png_and_svg(void **state)
{
    (void)state;
    char dir[128], png[256], svg[256];
    assert_int_equal(lp_test_tmpdir_make(dir, sizeof dir, "chart"), 0);
    snprintf(png, sizeof png, "%s/fig.png", dir);
    snprintf(svg, sizeof svg, "%s/fig.svg", dir);
    lp_figure f;
    lp_chart_panel p[7];
    lp_chart_series s[2];
    lp_chart_heatmap h;
    make_figure(&f, p, s, &h, 1500, 1000);
    assert_int_equal(lp_figure_write_png(&f, png), LP_OK);
    assert_int_equal(lp_figure_write_svg(&f, svg), LP_OK);
    const char *keep = getenv("LP_CHART_KEEP"); // a directory to look at the figure in
    if (keep) {
        char cmd[600];
        snprintf(cmd, sizeof cmd, "cp '%s' '%s' '%s'", png, svg, keep);
        assert_int_equal(system(cmd), 0);
    }
    lp_chart_box *b, areas[7];
    size_t n;
    assert_int_equal(lp_figure_text_boxes(&f, &b, &n, areas), LP_OK);

    cairo_surface_t *img = cairo_image_surface_create_from_png(png);
    assert_int_equal(cairo_surface_status(img), CAIRO_STATUS_SUCCESS);
    assert_int_equal(cairo_image_surface_get_width(img), 1500);
    assert_int_equal(cairo_image_surface_get_height(img), 1000);
    const unsigned char *px = cairo_image_surface_get_data(img);
    int stride = cairo_image_surface_get_stride(img);
    /* every panel's plot area holds drawing: the grey level varies (a blank area has
     * variance 0; grid lines alone give a little, lines/bars/cells much more) */
    for (int k = 0; k < 7; k++) {
        double sum = 0, sum2 = 0, cnt = 0;
        for (int y = (int)areas[k].y0 + 2; y < (int)areas[k].y1 - 2; y++)
            for (int x = (int)areas[k].x0 + 2; x < (int)areas[k].x1 - 2; x++) {
                uint32_t v = *(const uint32_t *)(px + y * stride + x * 4);
                double g = ((v >> 16 & 255) + (v >> 8 & 255) + (v & 255)) / 3.0;
                sum += g, sum2 += g * g, cnt++;
            }
        double var = sum2 / cnt - (sum / cnt) * (sum / cnt);
        if (var < 50)
            fprintf(stderr, "panel %d: pixel variance %.1f\n", k, var);
        assert_true(var >= 50);
    }
    /* text present: the figure title's box holds dark pixels */
    size_t dark = 0;
    for (size_t i = 0; i < n; i++)
        if (b[i].panel == -1)
            for (int y = (int)b[i].y0; y < (int)b[i].y1; y++)
                for (int x = (int)b[i].x0; x < (int)b[i].x1; x++)
                    dark += (*(const uint32_t *)(px + y * stride + x * 4) & 255) < 100;
    assert_true(dark > 50);
    cairo_surface_destroy(img);
    free(b);

    char *text = NULL;
    size_t len = 0;
    assert_int_equal(lp_file_read_all(svg, &text, &len), LP_OK);
    assert_non_null(strstr(text, "<svg"));
    assert_non_null(strstr(text, "width=\"1500\""));
    assert_non_null(strstr(text, "</svg>"));
    free(text);
    assert_int_equal(lp_test_tmpdir_remove(dir), 0);
}

static void bad_figures(void **state)
{
    (void)state;
    lp_figure f;
    lp_chart_panel p[7];
    lp_chart_series s[2];
    lp_chart_heatmap h;
    make_figure(&f, p, s, &h, 20, 600);
    char dir[128], png[256];
    assert_int_equal(lp_test_tmpdir_make(dir, sizeof dir, "chartbad"), 0);
    snprintf(png, sizeof png, "%s/x.png", dir);
    assert_int_equal(lp_figure_write_png(&f, png), LP_STATUS_INVALID_ARG);
    assert_non_null(strstr(lp_err_msg(), "x.png"));
    f.width = 600;
    f.n_panels = 10; // more than 3 x 3
    assert_int_equal(lp_figure_write_svg(&f, png), LP_STATUS_INVALID_ARG);
    f.n_panels = 7;
    h.values = NULL;
    assert_int_equal(lp_figure_write_png(&f, png), LP_STATUS_INVALID_ARG);
    assert_int_equal(access(png, F_OK), -1); // nothing written
    h.values = hm_vals;
    assert_int_equal(lp_figure_write_png(&f, "/nonexistent-dir/x.png"), LP_STATUS_IO);
    assert_non_null(strstr(lp_err_msg(), "/nonexistent-dir/x.png"));
    assert_int_equal(lp_test_tmpdir_remove(dir), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(nice_ticks),
        cmocka_unit_test(text_never_overlaps),
        cmocka_unit_test(png_and_svg),
        cmocka_unit_test(bad_figures),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    lp_chart_release_caches(); // cairo's font caches, so LeakSanitizer sees none
    return rc;
}
