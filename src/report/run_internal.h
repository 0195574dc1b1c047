/* Private to the run page files: the diagnosis (run_diag.c) and helpers the train, bench
 * and compare pages share (run_page.c). */
#ifndef LP_REPORT_RUN_INTERNAL_H
#define LP_REPORT_RUN_INTERNAL_H

#include "loupe/report.h"

struct cJSON;
/* dir/file read and parsed into *out (the caller's; cJSON_Delete). A file that cannot be read
 * is "<dir>: not a <what> (<why>)", so a wrong directory is named as such; bad JSON names the
 * file. */
lp_status lp_run__read_json(const char *dir, const char *file, const char *what, struct cJSON **out);
/* "12.3 MB", "1.20 GB" (decimal units, as summary.json's readers expect). */
void lp_run__fmt_bytes(double b, char *buf, size_t cap);
/* The op name without its "lp::" / "aten::" namespace, for chart labels. */
const char *lp_run__short_op(const char *name);
/* The diagnosis section: per-op roofline table and chart, top 3 bottlenecks, suggestions. */
void lp_run__diagnosis(lp_html *h, const lp_run_data *d, const lp_run_ceilings *c);
/* report.html of a bench run (bench_page.c). */
lp_status lp_run__bench_page(const lp_run_data *d, const lp_run_ceilings *c, const char *path,
                             const char *plots);
/* A one-panel figure of the given size. */
lp_figure lp_run__figure(const lp_chart_panel *p, const char *title, int32_t w, int32_t hgt);

#endif
