/* loupe analyze: key averages (torch's key_averages().table() columns) and a per-step
 * time breakdown of any Kineto trace, loupe's or PyTorch's, plain or gzip. */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "loupe/prof.h"
#include "loupe/report.h"

static const char usage[] =
    "usage: loupe analyze TRACE [--sort COLUMN] [--top N] [--group-by-shape] [--csv FILE] [--all-steps]\n"
    "                     [--max-trace-bytes N]\n"
    "\n"
    "Key averages and per-step time breakdown of a Kineto trace (*.pt.trace.json or .json.gz),\n"
    "written by loupe's profiler or by PyTorch's (torch.profiler, any version). TRACE may also be\n"
    "a directory holding exactly one such trace (e.g. reports/<run>/profiler).\n"
    "\n"
    "  --sort COLUMN      sort rows by a torch sort_by key, descending (default self_cpu_time_total):\n"
    "                     self_cpu_time_total, cpu_time_total, cpu_time, self_cuda_time_total,\n"
    "                     cuda_time_total, cuda_time, cpu_memory_usage, self_cpu_memory_usage,\n"
    "                     cuda_memory_usage, self_cuda_memory_usage, count, flops\n"
    "                     (xpu_/device_ spellings of the cuda keys are accepted)\n"
    "  --top N            print the first N rows (default 100, as torch; 0 = all)\n"
    "  --group-by-shape   one row per (name, input shapes) (needs record_shapes in the trace)\n"
    "  --csv FILE         also write every row as CSV (times in us, memory in bytes)\n"
    "  --all-steps        list every step in the breakdown (default: first and last 10 of a long trace)\n"
    "  --max-trace-bytes N  refuse a trace whose (decompressed) text passes N bytes; K, M, G\n"
    "                     suffixes are powers of 1024 (default 8G)\n"
    "  -h, --help         this help\n"
    "\n"
    "Exit status: 0 ok, 1 the trace could not be read (the message names the file and the\n"
    "problem), 2 usage error.\n";

/* The single trace file in a directory (names ending .pt.trace.json or .pt.trace.json.gz).
 * Returns a malloc'd path, or NULL with a usage message printed. */
static char *trace_in_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "loupe analyze: %s: cannot open directory\n", dir);
        return NULL;
    }
    char *found = NULL;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        int hit = (len > 14 && !strcmp(e->d_name + len - 14, ".pt.trace.json")) ||
                  (len > 17 && !strcmp(e->d_name + len - 17, ".pt.trace.json.gz"));
        if (!hit)
            continue;
        n++;
        free(found);
        size_t need = strlen(dir) + len + 2;
        found = malloc(need);
        if (found)
            snprintf(found, need, "%s/%s", dir, e->d_name);
    }
    closedir(d);
    if (n != 1) {
        fprintf(stderr, "loupe analyze: %s: %s; name the trace file\n", dir,
                n == 0 ? "no *.pt.trace.json[.gz] in this directory" : "several traces in this directory");
        free(found);
        return NULL;
    }
    return found;
}

/* ns as milliseconds with 3 decimals (the breakdown table's one unit). */
static void fmt_ms(int64_t ns, char *buf, size_t cap) { snprintf(buf, cap, "%.3f", (double)ns / 1e6); }

/* Per-step table: one row per ProfilerStep#N, the time split into parts that sum to the
 * step (columns only for parts that occur). */
#define LP_ANALYZE_STEPS_SHOWN 20

static void print_step_row(const char *label, int64_t dur_ns, const int64_t *part_ns, const int *used)
{
    char a[32];
    fmt_ms(dur_ns, a, sizeof a);
    printf("%8s  %12s", label, a);
    for (int p = 0; p < LP_PROF_STEP_PART__COUNT; p++) {
        if (!used[p])
            continue;
        double pct = dur_ns > 0 ? 100.0 * (double)part_ns[p] / (double)dur_ns : 0;
        char cell[64];
        fmt_ms(part_ns[p], a, sizeof a);
        snprintf(cell, sizeof cell, "%s (%5.1f%%)", a, pct);
        printf("  %18s", cell);
    }
    printf("\n");
}

/* Per-step table: one row per ProfilerStep#N (the first and last LP_ANALYZE_STEPS_SHOWN/2
 * of a long trace unless all), the time split into parts that sum to the step (columns
 * only for parts that occur), and the mean over all steps. */
static void print_steps(const lp_prof_step_row *rows, size_t n, int all)
{
    if (n == 0)
        return;
    int used[LP_PROF_STEP_PART__COUNT] = {0};
    for (size_t i = 0; i < n; i++)
        for (int p = 0; p < LP_PROF_STEP_PART__COUNT; p++)
            if (rows[i].part_ns[p] > 0)
                used[p] = 1;
    printf("\nPer-step time breakdown (ms; %% of the step in brackets):\n");
    printf("%8s  %12s", "Step", "Step time");
    for (int p = 0; p < LP_PROF_STEP_PART__COUNT; p++)
        if (used[p])
            printf("  %18s", lp_prof_step_part_name((lp_prof_step_part)p));
    printf("\n");
    int64_t tot[LP_PROF_STEP_PART__COUNT] = {0}, tot_dur = 0;
    size_t half = LP_ANALYZE_STEPS_SHOWN / 2;
    for (size_t i = 0; i < n; i++) {
        tot_dur += rows[i].dur_ns;
        for (int p = 0; p < LP_PROF_STEP_PART__COUNT; p++)
            tot[p] += rows[i].part_ns[p];
        if (!all && n > LP_ANALYZE_STEPS_SHOWN && i >= half && i < n - half) {
            if (i == half)
                printf("%8s  (%zu more steps; --all-steps lists them)\n", "...", n - 2 * half);
            continue;
        }
        char label[32];
        snprintf(label, sizeof label, "%lld", (long long)rows[i].step);
        print_step_row(label, rows[i].dur_ns, rows[i].part_ns, used);
    }
    if (n > 1) {
        int64_t mean[LP_PROF_STEP_PART__COUNT];
        for (int p = 0; p < LP_PROF_STEP_PART__COUNT; p++)
            mean[p] = tot[p] / (int64_t)n;
        print_step_row("mean", tot_dur / (int64_t)n, mean, used);
    }
}

/* "512", "64K", "3G": a positive byte count, suffixes powers of 1024. 0 when valid. */
static int parse_bytes(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s || errno || s[0] == '-')
        return -1;
    int shift = 0;
    if (*end) {
        const char *u = strchr("KMGT", *end);
        if (!u || end[1])
            return -1;
        shift = 10 * (int)(u - "KMGT" + 1);
    }
    if (v == 0 || v > (UINT64_MAX >> shift))
        return -1;
    *out = (uint64_t)v << shift;
    return 0;
}

int lp_cmd_analyze(int argc, char **argv)
{
    static const struct option opts[] = {
        {"sort", required_argument, NULL, 's'},   {"top", required_argument, NULL, 't'},
        {"group-by-shape", no_argument, NULL, 'g'}, {"csv", required_argument, NULL, 'c'},
        {"all-steps", no_argument, NULL, 'a'},    {"help", no_argument, NULL, 'h'},
        {"max-trace-bytes", required_argument, NULL, 'm'},
        {NULL, 0, NULL, 0},
    };
    lp_prof_keyavg_opts ko;
    lp_prof_keyavg_opts_init(&ko);
    const char *csv = NULL;
    long top = 100;
    int c, all_steps = 0;
    uint64_t max_bytes = 0; /* 0: LP_TRACE_MAX_BYTES_DEFAULT */
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 's':
            if (lp_prof_sort_parse(optarg, &ko.sort_by) != LP_OK)
                return lp_cli_usage_error("analyze", "--sort: unknown column '%s'", optarg);
            break;
        case 't':
            if (lp_cli_parse_long("analyze", "--top", optarg, 0, 1000000000L, &top) != 0)
                return LP_EXIT_USAGE;
            break;
        case 'g':
            ko.group_by_input_shape = 1;
            break;
        case 'a':
            all_steps = 1;
            break;
        case 'c':
            csv = optarg;
            break;
        case 'm':
            if (parse_bytes(optarg, &max_bytes) != 0)
                return lp_cli_usage_error("analyze", "--max-trace-bytes must be a positive byte count "
                                                     "(K, M, G suffixes allowed), got '%s'", optarg);
            break;
        case 'h':
            fputs(usage, stdout);
            return LP_EXIT_OK;
        default:
            return lp_cli_usage_error("analyze", "unknown option");
        }
    }
    if (optind >= argc)
        return lp_cli_usage_error("analyze", "missing TRACE (a .pt.trace.json[.gz] file)");
    if (argc - optind > 1)
        return lp_cli_usage_error("analyze", "expected one TRACE, got %d arguments", argc - optind);
    ko.row_limit = top; /* 0 = all rows */

    const char *arg = argv[optind];
    char *dir_trace = NULL;
    struct stat sb;
    if (stat(arg, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        if (!(dir_trace = trace_in_dir(arg)))
            return LP_EXIT_USAGE;
        arg = dir_trace;
    }

    int rc = LP_EXIT_FAIL;
    lp_prof_events *ev = NULL;
    lp_trace_info info;
    lp_prof_keyavg ka;
    memset(&ka, 0, sizeof ka);
    char *table = NULL;
    lp_prof_step_row *steps = NULL;
    size_t n_steps = 0;
    if (lp_trace_load_max(arg, max_bytes, &ev, &info) != LP_OK)
        goto out;
    if (info.n_complete == 0) {
        lp_err(LP_STATUS_FORMAT, "%s: the trace has no complete (\"ph\": \"X\") events to analyze", arg);
        goto out;
    }
    if (ko.group_by_input_shape && !lp_prof_events_info_get(ev)->record_shapes)
        fprintf(stderr, "loupe analyze: note: %s has no input shapes (record_shapes was off); "
                        "rows are grouped by name only\n", arg);
    if (lp_prof_keyavg_build(ev, &ko, &ka) != LP_OK || lp_prof_keyavg_table(&ka, &ko, &table) != LP_OK ||
        lp_prof_step_breakdown(ev, &steps, &n_steps) != LP_OK)
        goto out;
    if (csv && lp_prof_keyavg_write_csv(&ka, csv) != LP_OK)
        goto out;

    printf("Trace: %s\n", arg);
    printf("%zu events (%zu complete, %zu memory), %zu steps, %s timestamps", info.n_items, info.n_complete,
           info.n_instants, n_steps,
           info.has_base_time ? "relative (baseTimeNanoseconds)" : info.absolute_ts ? "absolute epoch" : "raw");
    if (info.n_skipped || info.n_unsupported)
        printf("; ignored %zu malformed and %zu begin/end events", info.n_skipped, info.n_unsupported);
    printf("\n\n");
    fputs(table, stdout);
    print_steps(steps, n_steps, all_steps);
    if (csv)
        printf("\nWrote %s (%zu rows)\n", csv, ka.n);
    rc = LP_EXIT_OK;
out:
    if (rc != LP_EXIT_OK)
        lp_cli_fail("analyze");
    free(steps);
    free(table);
    lp_prof_keyavg_free(&ka);
    lp_prof_events_free(ev);
    free(dir_trace);
    return rc;
}
