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
    "usage: loupe analyze TRACE|DIR [--sort COLUMN] [--top N] [--group-by-shape] [--csv FILE.csv|DIR]\n"
    "                     [--all-steps] [--max-trace-bytes N] [--html FILE] [--group-by-stack N]\n"
    "                     [--memory-events K]\n"
    "\n"
    "Key averages, per-step time breakdown, device kernels, GPU utilisation and memory of a\n"
    "Kineto trace (*.json or .json.gz, any PyTorch version, loupe's or torch.profiler's; \"-\" reads\n"
    "stdin), read in one streaming pass. DIR: every trace in the directory as one multi-rank job\n"
    "(ranks from distributedInfo or the file names); a directory with one trace is that trace.\n"
    "\n"
    "  --sort COLUMN      sort rows by a torch sort_by key, descending (default self_cpu_time_total):\n"
    "                     self_cpu_time_total, cpu_time_total, cpu_time, self_cuda_time_total,\n"
    "                     cuda_time_total, cuda_time, count (xpu_/device_ spellings accepted)\n"
    "  --top N            print the first N rows (default 100, as torch; 0 = all)\n"
    "  --group-by-shape   one row per (name, input shapes) (needs record_shapes in the trace)\n"
    "  --group-by-stack N frames per call stack in the (op, stack) table, innermost first, as torch's\n"
    "                     key_averages(group_by_stack_n=N) (default 5; 1..64). Printed (as is its\n"
    "                     stacks.csv and the page's table) when the trace records stacks: \"Call stack\"\n"
    "                     args, python_function frames, or a with_stack trace's ranges (loupe's)\n"
    "  --memory-events K  the K largest allocations in the Memory events table (default 20,\n"
    "                     at most 1000): time, bytes, device, lifetime, allocating op; printed\n"
    "                     (and memory_events.csv) when the trace has [memory] events\n"
    "  --csv FILE.csv     also write the key-average rows as CSV (times in us)\n"
    "  --csv DIR          also write every table as CSV into DIR (ops, ops_by_shape, kernels,\n"
    "                     steps, gpu, memory, collectives, stacks, memory_events; ranks.csv and\n"
    "                     rankN/ for a job; ns)\n"
    "  --html FILE        also write one self-contained page: Overview, Operator, Kernel, Memory,\n"
    "                     Distributed and Trace views (open it in any browser)\n"
    "  --all-steps        list every step in the breakdown (default: first and last 10 of a long trace)\n"
    "  --max-trace-bytes N  refuse a trace whose (decompressed) text passes N bytes; K, M, G\n"
    "                     suffixes are powers of 1024 (default 8G)\n"
    "  -h, --help         this help\n"
    "\n"
    "Exit status: 0 ok, 1 the trace could not be read (the message names the file and the\n"
    "problem), 2 usage error.\n";

static int is_trace_file(const char *n)
{
    size_t len = strlen(n);
    return (len > 5 && !strcmp(n + len - 5, ".json")) || (len > 8 && !strcmp(n + len - 8, ".json.gz"));
}

static int is_pt_trace(const char *n)
{
    size_t len = strlen(n);
    return (len > 14 && !strcmp(n + len - 14, ".pt.trace.json")) || (len > 17 && !strcmp(n + len - 17, ".pt.trace.json.gz"));
}

/* Traces in a directory: the count, and the path of the last one met (malloc'd). Files named
 * *.pt.trace.json[.gz] when there are any (a run directory also holds summary.json and the
 * like), else every *.json[.gz] (HTA's rank-N.json.gz). lp_trace_job_load picks the same. */
static int traces_in_dir(const char *dir, char **one)
{
    *one = NULL;
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int pt = 0;
    for (struct dirent *e; (e = readdir(d));)
        pt |= e->d_name[0] != '.' && is_pt_trace(e->d_name);
    rewinddir(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.' || !(pt ? is_pt_trace(e->d_name) : is_trace_file(e->d_name)))
            continue;
        n++;
        free(*one);
        size_t need = strlen(dir) + strlen(e->d_name) + 2;
        if ((*one = malloc(need)))
            snprintf(*one, need, "%s/%s", dir, e->d_name);
    }
    closedir(d);
    return n;
}

static int ends_with(const char *s, const char *t)
{
    size_t a = strlen(s), b = strlen(t);
    return a >= b && !strcmp(s + a - b, t);
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
        {"html", required_argument, NULL, 'H'},
        {"group-by-stack", required_argument, NULL, 'S'},
        {"memory-events", required_argument, NULL, 'M'},
        {NULL, 0, NULL, 0},
    };
    lp_prof_keyavg_opts ko;
    lp_prof_keyavg_opts_init(&ko);
    const char *csv = NULL, *html = NULL;
    long top = 100;
    int c, all_steps = 0;
    long stack_n = 0, mem_k = 0; /* 0: the model's defaults */
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
        case 'H':
            html = optarg;
            break;
        case 'S':
            if (lp_cli_parse_long("analyze", "--group-by-stack", optarg, 1, 64, &stack_n) != 0)
                return LP_EXIT_USAGE;
            break;
        case 'M':
            if (lp_cli_parse_long("analyze", "--memory-events", optarg, 1, LP_TRACE_MEM_EVENTS_MAX, &mem_k) != 0)
                return LP_EXIT_USAGE;
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
    int is_job = 0;
    if (stat(arg, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        int n = traces_in_dir(arg, &dir_trace);
        if (n < 0) {
            fprintf(stderr, "loupe analyze: %s: cannot open directory\n", arg);
            return LP_EXIT_USAGE;
        }
        if (n == 0) {
            fprintf(stderr, "loupe analyze: %s: no *.pt.trace.json[.gz] (or other *.json[.gz]) in this directory; "
                            "name the trace file\n", arg);
            free(dir_trace);
            return LP_EXIT_USAGE;
        }
        if (n == 1)
            arg = dir_trace;
        else
            is_job = 1;
    }
    lp_trace_model_opts mo;
    lp_trace_model_opts_init(&mo);
    mo.max_bytes = max_bytes;
    mo.stack_frames = (int)stack_n;
    mo.mem_events = (int)mem_k;
    int rc = LP_EXIT_FAIL;
    lp_trace_model *m = NULL;
    lp_trace_job *job = NULL;
    if (is_job) {
        if (lp_trace_job_load(arg, &mo, &job) != LP_OK)
            goto out;
        for (size_t i = 0; i < job->n; i++) {
            lp_trace_model *r = job->ranks[i];
            printf("Rank %lld: %s: %zu key-average rows, %zu kernels, %llu malformed events skipped\n",
                   (long long)r->rank, r->path, r->n_ops, r->n_kernels, (unsigned long long)r->n_skipped);
        }
        lp_trace_job_write_text(stdout, job);
        if (csv && lp_trace_job_write_csv(job, csv) != LP_OK)
            goto out;
        if (csv)
            printf("\nWrote the tables of %zu ranks under %s\n", job->n, csv);
        if (html && lp_trace_html_write(job->ranks[0], job, html) != LP_OK)
            goto out;
        if (html)
            printf("Wrote %s\n", html);
        rc = LP_EXIT_OK;
        goto out;
    }
    if (lp_trace_model_load(arg, &mo, &m) != LP_OK)
        goto out;
    if (m->n_used == 0) {
        lp_err(LP_STATUS_FORMAT, "%s: the trace has no complete (\"ph\": \"X\") events to analyze", arg);
        goto out;
    }
    if (ko.group_by_input_shape && !m->has_shapes)
        fprintf(stderr, "loupe analyze: note: %s has no input shapes (record_shapes was off); "
                        "rows are grouped by name only\n", arg);
    if (csv && ends_with(csv, ".csv")) {
        lp_prof_keyavg ka;
        if (lp_trace_model_keyavg(m, ko.group_by_input_shape && m->has_shapes, &ka) != LP_OK)
            goto out;
        lp_prof_keyavg_sort(&ka, ko.sort_by);
        lp_status st = lp_prof_keyavg_write_csv(&ka, csv);
        size_t rows = ka.n;
        lp_prof_keyavg_free(&ka);
        if (st != LP_OK)
            goto out;
        if (lp_trace_model_write_text(stdout, m, &ko, all_steps) != LP_OK)
            goto out;
        printf("\nWrote %s (%zu rows)\n", csv, rows);
    } else {
        if (csv && lp_trace_model_write_csv(m, csv) != LP_OK)
            goto out;
        if (lp_trace_model_write_text(stdout, m, &ko, all_steps) != LP_OK)
            goto out;
        if (csv)
            printf("\nWrote every table as CSV under %s\n", csv);
    }
    if (html && lp_trace_html_write(m, NULL, html) != LP_OK)
        goto out;
    if (html)
        printf("Wrote %s\n", html);
    rc = LP_EXIT_OK;
out:
    if (rc != LP_EXIT_OK)
        lp_cli_fail("analyze");
    if (html)
        lp_chart_release_caches(); /* the page's font caches, so leak checkers see none */
    lp_trace_model_free(m);
    lp_trace_job_free(job);
    free(dir_trace);
    return rc;
}
