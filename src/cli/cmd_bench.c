/* loupe bench: the inference benchmark (batch-size sweep, full pass, profiled pass, plots)
 * and `loupe bench --compare RUN...`. One option table drives getopt_long and the --config
 * YAML (keys are the long flags; flags win). The run directory appears whole or not at all:
 * the bench fills a temporary sibling that is renamed when done (Ctrl-C included, with
 * baseline_metrics.json marked incomplete); a failure leaves nothing behind. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cli.h"
#include "cli_yaml.h"
#include "loupe/bench.h"
#include "loupe/report.h"

enum {
    O_MODEL = 1000,
    O_ADAPTER,
    O_DATA,
    O_LABEL_MAP,
    O_TEXT_COL,
    O_LABEL_COL,
    O_BATCH_SIZES,
    O_WARMUP,
    O_RUNS,
    O_MAXLEN,
    O_SAMPLES,
    O_DTYPE,
    O_THREADS,
    O_CONFIG,
    O_SEED,
    O_SORT,
    O_SYNTH,
    O_SEQ_LEN,
    O_SKIP_PROF,
    O_SKIP_PLOTS,
    O_SKIP_FULL,
    O_SAVE_PRED,
    O_SKIP_BAD,
    O_OUTDIR,
    O_RUNID,
    O_COMPARE,
    O_EXEC,
    O_QUIET,
    O_PROFILE_RUNS,
    O_HELP
};

static const struct option opts[] = {
    {"model", required_argument, NULL, O_MODEL},
    {"adapter", required_argument, NULL, O_ADAPTER},
    {"data", required_argument, NULL, O_DATA},
    {"label-map", required_argument, NULL, O_LABEL_MAP},
    {"text-column", required_argument, NULL, O_TEXT_COL},
    {"label-column", required_argument, NULL, O_LABEL_COL},
    {"batch-sizes", required_argument, NULL, O_BATCH_SIZES},
    {"warmup", required_argument, NULL, O_WARMUP},
    {"runs", required_argument, NULL, O_RUNS},
    {"max-length", required_argument, NULL, O_MAXLEN},
    {"samples", required_argument, NULL, O_SAMPLES},
    {"dtype", required_argument, NULL, O_DTYPE},
    {"threads", required_argument, NULL, O_THREADS},
    {"config", required_argument, NULL, O_CONFIG},
    {"seed", required_argument, NULL, O_SEED},
    {"sort-by-length", optional_argument, NULL, O_SORT},
    {"synthetic", optional_argument, NULL, O_SYNTH},
    {"seq-len", required_argument, NULL, O_SEQ_LEN},
    {"skip-profiling", optional_argument, NULL, O_SKIP_PROF},
    {"skip-plots", optional_argument, NULL, O_SKIP_PLOTS},
    {"skip-full-pass", optional_argument, NULL, O_SKIP_FULL},
    {"save-predictions", optional_argument, NULL, O_SAVE_PRED},
    {"skip-bad-rows", optional_argument, NULL, O_SKIP_BAD},
    {"output-dir", required_argument, NULL, O_OUTDIR},
    {"run-id", required_argument, NULL, O_RUNID},
    {"compare", no_argument, NULL, O_COMPARE},
    {"exec", required_argument, NULL, O_EXEC},
    {"quiet", optional_argument, NULL, O_QUIET},
    {"profile-runs", required_argument, NULL, O_PROFILE_RUNS},
    {"help", no_argument, NULL, O_HELP},
    {NULL, 0, NULL, 0},
};

static void usage(void)
{
    printf(
        "usage: loupe bench [options]\n"
        "       loupe bench --compare RUN_DIR RUN_DIR... [--output-dir DIR] [--run-id ID]\n\n"
        "Inference benchmark of a sequence classifier: a batch-size sweep (latency, throughput,\n"
        "memory, efficiency), a full-dataset pass at the best batch size (accuracy, macro-F1,\n"
        "per-class precision/recall, confusion matrix), a profiled pass (trace, key averages,\n"
        "stacks, the top ops against loupe peak's ceilings) and plots. With no options: the\n"
        "bundled models/default on " LP_BENCH_DEFAULT_DATA ".\n\n"
        "Model and data:\n"
        "  --model DIR            HF model directory (default models/default)\n"
        "  --adapter DIR          a PEFT LoRA adapter on the model\n"
        "  --data FILE            CSV/TSV/JSONL with text and labels/label_id (default the bundled set)\n"
        "  --label-map FILE       label_mappings.json (or a config.json); default: built from the data\n"
        "  --text-column NAME, --label-column NAME, --skip-bad-rows (drop malformed rows, counted)\n"
        "  --max-length N         truncation (512; capped at the model's positions)\n"
        "  --dtype f32|bf16|q8_0|int8|nf4|f32_packed  Linear weights: f32, bf16 (bf16 GEMM, f32 accumulation),\n"
        "                         q8_0 (int8 weights with a scale per 32-block, activations quantized per\n"
        "                         block per call, integer dot products: VNNI or AVX2 maddubs), int8\n"
        "                         (dynamic quantization as PyTorch's qint8: a scale per weight row and\n"
        "                         per activation row, int32 sums over the whole row; with --adapter the\n"
        "                         LoRA int8 base), NF4 (dequantizing GEMM), or f32 packed once for loupe's f32\n"
        "                         GEMM (the same values); converted at load. A quantized dtype's full pass\n"
        "                         runs again in f32 (untimed): the accuracy change vs f32 is reported\n"
        "  --synthetic[=BOOL], --seq-len N   random ids of N tokens: speed alone, no accuracy\n"
        "Sweep:\n"
        "  --batch-sizes LIST     (1,4,8,16,32,64), each in 1..%d\n"
        "  --warmup N (3), --runs N (10)   untimed and timed runs per batch size\n"
        "  --samples LIST         (100,500,1000) the sweep draws the largest from the data with --seed;\n"
        "                         accuracy and time are reported for the first N rows of each\n"
        "  --seed N (42), --sort-by-length[=BOOL] (off: dynamic padding per batch)\n"
        "  --threads N, --exec eager|fused (fused)\n"
        "  --skip-full-pass, --skip-profiling, --profile-runs N (3)\n"
        "  --skip-plots           no plots/ and no report.html\n"
        "  --save-predictions     predictions.csv of the full pass\n"
        "Output:\n"
        "  --output-dir DIR (reports), --run-id ID (bench-<time>)\n"
        "  --config FILE          YAML whose keys mirror the long flags (flags win)\n"
        "  --quiet                no progress lines\n"
        "\nExit status: 0 done, 1 failed, 2 usage error, 130 interrupted (what was measured is written).\n",
        LP_BENCH_MAX_BATCH);
}

typedef struct opts_ctx {
    lp_bench_config c;
    const char *output_dir, *run_id, *config_path;
    bool skip_plots, compare, quiet;
    char *pool[64]; /* YAML values, which must outlive the run */
    int n_pool;
} opts_ctx;

static int parse_bool(const char *flag, const char *v, bool *out)
{
    if (!v || !strcmp(v, "true") || !strcmp(v, "1") || !strcmp(v, "yes") || !strcmp(v, "on"))
        return *out = true, 0;
    if (!strcmp(v, "false") || !strcmp(v, "0") || !strcmp(v, "no") || !strcmp(v, "off"))
        return *out = false, 0;
    lp_cli_usage_error("bench", "%s expects true or false, got '%s'", flag, v);
    return -1;
}

/* Applies one option; 0 or the exit code for a bad value. */
static int apply(opts_ctx *o, int id, const char *flag, const char *v)
{
    lp_bench_config *c = &o->c;
    long n;
    bool b;
    int64_t list[LP_BENCH_MAX_BATCH_SIZES];
    int32_t nl;
#define LONG(lo, hi, dst)                                                                                    \
    do {                                                                                                     \
        if (lp_cli_parse_long("bench", flag, v, lo, hi, &n) != 0)                                            \
            return LP_EXIT_USAGE;                                                                            \
        dst = n;                                                                                             \
    } while (0)
#define BOOL(dst)                                                                                            \
    do {                                                                                                     \
        if (parse_bool(flag, v, &b) != 0)                                                                    \
            return LP_EXIT_USAGE;                                                                            \
        dst = b;                                                                                             \
    } while (0)
    switch (id) {
    case O_MODEL:
        c->model_dir = v;
        break;
    case O_ADAPTER:
        c->adapter_dir = v;
        break;
    case O_DATA:
        c->data_file = v;
        break;
    case O_LABEL_MAP:
        c->label_map_file = v;
        break;
    case O_TEXT_COL:
        c->text_column = v;
        break;
    case O_LABEL_COL:
        c->label_column = v;
        break;
    case O_BATCH_SIZES:
        if (lp_bench_parse_list(flag, v, 1, LP_BENCH_MAX_BATCH, list, LP_BENCH_MAX_BATCH_SIZES, &nl) != LP_OK)
            return lp_cli_usage_error("bench", "%s", lp_err_msg());
        c->n_batch_sizes = nl;
        for (int32_t i = 0; i < nl; i++)
            c->batch_sizes[i] = (int32_t)list[i];
        break;
    case O_SAMPLES:
        if (lp_bench_parse_list(flag, v, 1, 1000000000, c->sample_sizes, LP_BENCH_MAX_SAMPLE_SIZES,
                                &c->n_sample_sizes) != LP_OK)
            return lp_cli_usage_error("bench", "%s", lp_err_msg());
        break;
    case O_WARMUP:
        LONG(0, 100000, c->warmup);
        break;
    case O_RUNS:
        LONG(1, 1000000, c->runs);
        break;
    case O_PROFILE_RUNS:
        LONG(1, 1000, c->profile_runs);
        break;
    case O_MAXLEN:
        LONG(2, 1 << 20, c->max_length);
        break;
    case O_SEQ_LEN:
        LONG(1, 1 << 20, c->seq_len);
        break;
    case O_THREADS:
        LONG(1, 4096, c->threads);
        break;
    case O_DTYPE:
        if (lp_bench_dtype_parse(v, &c->dtype) != LP_OK)
            return lp_cli_usage_error("bench", "%s", lp_err_msg());
        break;
    case O_SEED: {
        char *end;
        errno = 0;
        unsigned long long s = strtoull(v, &end, 10);
        if (errno || end == v || *end || strchr(v, '-'))
            return lp_cli_usage_error("bench", "%s expects a non-negative integer, got '%s'", flag, v);
        c->seed = s;
        break;
    }
    case O_SORT:
        BOOL(c->sort_by_length);
        break;
    case O_SYNTH:
        BOOL(c->synthetic);
        break;
    case O_SKIP_PROF:
        BOOL(c->skip_profiling);
        break;
    case O_SKIP_PLOTS:
        BOOL(o->skip_plots);
        break;
    case O_SKIP_FULL:
        BOOL(c->skip_full);
        break;
    case O_SAVE_PRED:
        BOOL(c->save_predictions);
        break;
    case O_SKIP_BAD:
        BOOL(c->skip_bad_rows);
        break;
    case O_QUIET:
        BOOL(o->quiet);
        break;
    case O_OUTDIR:
        o->output_dir = v;
        break;
    case O_RUNID:
        if (!*v || strchr(v, '/') || !strcmp(v, ".") || !strcmp(v, ".."))
            return lp_cli_usage_error("bench", "%s must be a plain name (no '/'), got '%s'", flag, v);
        o->run_id = v;
        break;
    case O_EXEC:
        if (lp_exec_mode_parse(v, &c->exec) != LP_OK)
            return lp_cli_usage_error("bench", "%s", lp_err_msg());
        break;
    case O_COMPARE:
        o->compare = true;
        break;
    case O_CONFIG:
        break; /* read before the flags */
    default:
        return lp_cli_usage_error("bench", "unknown option %s", flag);
    }
    return 0;
#undef LONG
#undef BOOL
}

static int yaml_pair(void *vctx, const char *key, const char *value, size_t line)
{
    opts_ctx *o = vctx;
    const struct option *opt = NULL;
    for (const struct option *p = opts; p->name; p++)
        if (!strcmp(p->name, key))
            opt = p;
    if (!opt || opt->val == O_CONFIG || opt->val == O_HELP || opt->val == O_COMPARE) {
        fprintf(stderr, "loupe bench: %s:%zu: unknown key '%s' (keys are the long flags)\n", o->config_path,
                line, key);
        return LP_EXIT_USAGE;
    }
    if (o->n_pool >= (int)(sizeof o->pool / sizeof o->pool[0]) || !(o->pool[o->n_pool] = strdup(value))) {
        fprintf(stderr, "loupe bench: config: too many keys or out of memory\n");
        return LP_EXIT_FAIL;
    }
    char flag[300];
    snprintf(flag, sizeof flag, "%s (%s:%zu)", key, o->config_path, line);
    if (opt->has_arg == no_argument) {
        bool b;
        if (parse_bool(flag, value, &b) != 0)
            return LP_EXIT_USAGE;
        return b ? apply(o, opt->val, flag, NULL) : 0;
    }
    return apply(o, opt->val, flag, o->pool[o->n_pool++]);
}

typedef struct fill_ctx {
    const opts_ctx *o;
    const char *run_id;
    lp_bench_result *r;
    lp_status bench_st, plot_st;
} fill_ctx;

/* The plots of the run being written in run_dir (a temporary name), labelled with the
 * run's final name. */
static lp_status plots_for(const char *run_dir, const char *run_id, char *plot_err, size_t cap)
{
    const char *dirs[1] = {run_dir};
    lp_bench_curve *cv;
    lp_status st = lp_bench_curves_load(dirs, 1, &cv);
    if (st == LP_OK) {
        snprintf(cv->label, sizeof cv->label, "%.100s (%s)", run_id, cv->dtype);
        char plots[1200];
        snprintf(plots, sizeof plots, "%s/plots", run_dir);
        st = lp_bench_plots_write(cv, 1, plots);
        free(cv);
    }
    if (st != LP_OK)
        snprintf(plot_err, cap, "%s", lp_err_msg());
    return st;
}

static char plot_err[1024];

static lp_status fill(void *vctx, const char *dir)
{
    fill_ctx *f = vctx;
    f->bench_st = lp_bench_run(&f->o->c, dir, &f->r);
    if (f->bench_st != LP_OK && f->bench_st != LP_STATUS_INTERRUPTED)
        return f->bench_st; // the temporary directory goes, with anything in it
    if (!f->o->skip_plots)
        f->plot_st =
            plots_for(dir, f->run_id, plot_err, sizeof plot_err); // a plot failure keeps the measurements
    return LP_OK;
}

static void default_run_id(char *buf, size_t cap, const char *prefix)
{
    time_t t = time(NULL);
    struct tm tm;
    localtime_r(&t, &tm);
    snprintf(buf, cap, "%s-%04d%02d%02d-%02d%02d%02d", prefix, tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
             tm.tm_hour, tm.tm_min, tm.tm_sec);
}

static int run_compare(const opts_ctx *o, int n, char **dirs)
{
    if (n < 1)
        return lp_cli_usage_error("bench", "--compare needs one or more bench run directories");
    if (n > 8)
        return lp_cli_usage_error("bench", "--compare takes at most 8 runs, got %d", n);
    lp_bench_curve *cv;
    if (lp_bench_curves_load((const char *const *)dirs, n, &cv) != LP_OK)
        return lp_cli_fail("bench");
    lp_bench_compare_write_text(stdout, cv, n);
    int rc = LP_EXIT_OK;
    if (!o->skip_plots) {
        char id[128], out[1200];
        if (o->run_id)
            snprintf(id, sizeof id, "%s", o->run_id);
        else
            default_run_id(id, sizeof id, "compare");
        snprintf(out, sizeof out, "%s/%s/plots", o->output_dir, id);
        if (lp_bench_plots_write(cv, n, out) != LP_OK)
            rc = lp_cli_fail("bench");
        else
            printf("\nplots: %s/\n", out);
    }
    free(cv);
    return rc;
}

static int bench_main(opts_ctx *o)
{
    char id[128], run_dir[1200];
    if (o->run_id)
        snprintf(id, sizeof id, "%s", o->run_id);
    else
        default_run_id(id, sizeof id, "bench");
    snprintf(run_dir, sizeof run_dir, "%s/%s", o->output_dir, id);
    struct stat sb;
    if (stat(run_dir, &sb) == 0)
        return lp_cli_usage_error("bench", "run directory %s exists; choose another --run-id", run_dir);
    if (lp_bench_config_validate(&o->c) != LP_OK)
        return lp_cli_usage_error("bench", "%s", lp_err_msg());
    lp_bench_install_signal_handlers();
    fill_ctx f = {.o = o, .run_id = id};
    lp_status st = lp_dir_write_atomic(run_dir, fill, &f);
    if (st != LP_OK) {
        lp_bench_result_free(f.r);
        return st == LP_STATUS_INVALID_ARG ? lp_cli_usage_error("bench", "%s", lp_err_msg())
                                           : lp_cli_fail("bench");
    }
    const lp_bench_result *r = f.r;
    if (r && r->best >= 0) {
        const lp_bench_point *b = &r->points[r->best];
        printf("run: %s\noptimal batch size %d: %.1f samples/s, %.3f ms/sample", run_dir, b->batch_size,
               b->samples_per_s.mean, b->sample_latency_ms.mean);
        if (r->full.done)
            printf("; accuracy %.4f, macro-F1 %.4f on %lld rows", r->full.accuracy, r->full.macro_f1,
                   (long long)r->full.n);
        printf("\n");
    } else
        printf("run: %s\nno batch size was measured\n", run_dir);
    fflush(stdout);
    // --skip-plots skips the page too: its charts are plots (plots/ stays absent)
    if (!o->skip_plots && r && r->best >= 0 && lp_cli_write_report(run_dir, 0) != LP_EXIT_OK)
        fprintf(stderr, "loupe bench: report.html not written: %s\n", lp_err_msg()); // the run stands
    int rc = LP_EXIT_OK;
    if (f.plot_st != LP_OK) {
        fprintf(stderr, "loupe bench: plots: %s\n", plot_err);
        rc = LP_EXIT_FAIL;
    }
    if (f.bench_st == LP_STATUS_INTERRUPTED) {
        fprintf(stderr, "loupe bench: interrupted; %s holds what was measured (marked incomplete)\n",
                run_dir);
        rc = 130;
    }
    lp_bench_result_free(f.r);
    return rc;
}

int lp_cmd_bench(int argc, char **argv)
{
    opts_ctx o = {.output_dir = "reports"};
    lp_bench_config_init(&o.c);
    o.c.loupe_version = lp_cli_version();
    int rc = 0;
    for (int i = 1; i < argc && rc == 0; i++) { // the config file first, so flags override it
        if (!strcmp(argv[i], "--"))
            break;
        const char *cf = !strcmp(argv[i], "--config") && i + 1 < argc ? argv[i + 1]
                         : !strncmp(argv[i], "--config=", 9)          ? argv[i] + 9
                                                                      : NULL;
        if (cf && (o.config_path = cf))
            rc = lp_cli_yaml_each("bench", cf, yaml_pair, &o);
    }
    int opt;
    while (rc == 0 && (opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (opt == 'h' || opt == O_HELP) {
            usage();
            goto out;
        }
        if (opt == '?') {
            rc = lp_cli_usage_error("bench", "unknown or incomplete option '%s'", argv[optind - 1]);
            break;
        }
        char flag[64] = "--?";
        for (const struct option *p = opts; p->name; p++)
            if (p->val == opt)
                snprintf(flag, sizeof flag, "--%s", p->name);
        rc = apply(&o, opt, flag, optarg);
    }
    if (rc == 0) {
        o.c.progress = !o.quiet;
        if (o.compare)
            rc = run_compare(&o, argc - optind, argv + optind);
        else if (optind < argc)
            rc = lp_cli_usage_error("bench", "unexpected argument '%s'", argv[optind]);
        else
            rc = bench_main(&o);
    }
out:
    for (int i = 0; i < o.n_pool; i++)
        free(o.pool[i]);
    lp_chart_release_caches(); // the plots' font caches, so leak checkers see none
    return rc;
}
