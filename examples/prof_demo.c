/* prof_demo: a synthetic training loop (data loading, a few matmul "layers" forward and
 * backward with an OpenMP parallel region, an optimizer step, memory in every category)
 * run under the profiler's schedule. Writes the Kineto trace, key_averages.txt/.csv,
 * stacks.txt, memory_timeline.json/.html, summary.json and sampler.csv into
 * reports/demo/profiler/ (relative to the working directory) unless --out says otherwise.
 *
 *   prof_demo [--steps N] [--wait W --warmup U --active A --repeat R] [--out DIR] [--no-gzip]
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <getopt.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loupe/prof.h"

enum { BATCH = 32, HIDDEN = 192, LAYERS = 4 };

typedef struct layer {
    float *w, *gw, *m, *v; /* weight, gradient, AdamW moments */
    float *act;            /* saved input activation (forward -> backward) */
} layer;

static float *alloc_cat(size_t n, lp_mem_category cat)
{
    float *p = calloc(n, sizeof *p);
    if (!p) {
        fprintf(stderr, "prof_demo: out of memory\n");
        exit(1);
    }
    lp_prof_mem_alloc(p, n * sizeof *p, cat);
    return p;
}

static void free_cat(float *p, size_t n, lp_mem_category cat)
{
    lp_prof_mem_free(p, n * sizeof *p, cat);
    free(p);
}

/* y(m,n) = x(m,k) @ w(k,n), rows split over OpenMP threads; each thread's share is a
 * range on its own lane. */
static void matmul(const char *opname, const float *x, const float *w, float *y, int m, int k,
                   int n)
{
    static const lp_prof_op_desc mm = {"aten::mm", LP_PROF_CAT_CPU_OP, 2, {2, 2},
                                       {"float", "float"}};
    (void)opname;
    int64_t dims[4] = {m, k, k, n};
    LP_PROF_OP_SCOPE(&mm, dims, 2.0 * m * k * n, 4.0 * ((double)m * k + (double)k * n + (double)m * n));
#pragma omp parallel
    {
        static __thread int named;
        if (!named && omp_get_thread_num() > 0) { /* thread 0 is the caller, "main" */
            char nm[32];
            snprintf(nm, sizeof nm, "omp_worker_%d", omp_get_thread_num());
            lp_prof_set_thread_name(nm);
            named = 1;
        }
        LP_PROF_SCOPE("omp.mm_rows");
#pragma omp for schedule(static)
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++) {
                float s = 0;
                for (int p = 0; p < k; p++)
                    s += x[(size_t)i * k + p] * w[(size_t)p * n + j];
                y[(size_t)i * n + j] = s;
            }
    }
}

static void gelu_inplace(float *x, size_t n)
{
    static const lp_prof_op_desc d = {"aten::gelu", LP_PROF_CAT_CPU_OP, 1, {2}, {"float"}};
    int64_t dims[2] = {BATCH, (int64_t)(n / BATCH)};
    LP_PROF_OP_SCOPE(&d, dims, 8.0 * (double)n, 8.0 * (double)n);
    for (size_t i = 0; i < n; i++)
        x[i] = x[i] > 0 ? x[i] : 0.01f * x[i];
}

static void train_step(layer *L, float *qweights, unsigned seed)
{
    const size_t act_n = (size_t)BATCH * HIDDEN;
    float *x;
    {
        LP_PROF_SCOPE(LP_PROF_NAME_DATALOADER);
        x = alloc_cat(act_n, LP_MEM_CATEGORY_INPUT);
        for (size_t i = 0; i < act_n; i++)
            x[i] = (float)((i * 2654435761u + seed) % 1000) / 1000.0f - 0.5f;
        usleep(300); /* waiting on "I/O" */
    }
    float *h = x;
    {
        LP_PROF_SCOPE("forward");
        for (int l = 0; l < LAYERS; l++) {
            static const char *const names[LAYERS] = {"layer.0.forward", "layer.1.forward",
                                                      "layer.2.forward", "layer.3.forward"};
            LP_PROF_SCOPE(names[l]);
            L[l].act = h;
            float *y = alloc_cat(act_n, LP_MEM_CATEGORY_ACTIVATION);
            matmul("linear", h, L[l].w, y, BATCH, HIDDEN, HIDDEN);
            gelu_inplace(y, act_n);
            h = y;
        }
        /* the "dequantized" weight is a temporary, read from the quantized copy */
        float *tmp = alloc_cat((size_t)HIDDEN * HIDDEN, LP_MEM_CATEGORY_TEMPORARY);
        for (size_t i = 0; i < (size_t)HIDDEN * HIDDEN; i++)
            tmp[i] = qweights[i % ((size_t)HIDDEN * HIDDEN / 4)];
        free_cat(tmp, (size_t)HIDDEN * HIDDEN, LP_MEM_CATEGORY_TEMPORARY);
    }
    {
        LP_PROF_SCOPE("backward");
        float *g = alloc_cat(act_n, LP_MEM_CATEGORY_TEMPORARY);
        for (size_t i = 0; i < act_n; i++)
            g[i] = h[i] * 1e-3f;
        for (int l = LAYERS - 1; l >= 0; l--) {
            static const char *const names[LAYERS] = {"layer.0.backward", "layer.1.backward",
                                                      "layer.2.backward", "layer.3.backward"};
            LP_PROF_SCOPE(names[l]);
            /* dW = act^T @ g  (HIDDEN x BATCH) @ (BATCH x HIDDEN) */
            float *actT = alloc_cat(act_n, LP_MEM_CATEGORY_TEMPORARY);
            for (int i = 0; i < BATCH; i++)
                for (int j = 0; j < HIDDEN; j++)
                    actT[(size_t)j * BATCH + i] = L[l].act[(size_t)i * HIDDEN + j];
            matmul("grad_w", actT, g, L[l].gw, HIDDEN, BATCH, HIDDEN);
            free_cat(actT, act_n, LP_MEM_CATEGORY_TEMPORARY);
            float *gx = alloc_cat(act_n, LP_MEM_CATEGORY_TEMPORARY);
            matmul("grad_x", g, L[l].w, gx, BATCH, HIDDEN, HIDDEN);
            free_cat(g, act_n, LP_MEM_CATEGORY_TEMPORARY);
            g = gx;
        }
        free_cat(g, act_n, LP_MEM_CATEGORY_TEMPORARY);
    }
    {
        LP_PROF_SCOPE(LP_PROF_NAME_OPTIMIZER_STEP);
        static const lp_prof_op_desc adamw = {"loupe::adamw", LP_PROF_CAT_CPU_OP, 1, {2}, {"float"}};
        for (int l = 0; l < LAYERS; l++) {
            int64_t dims[2] = {HIDDEN, HIDDEN};
            size_t n = (size_t)HIDDEN * HIDDEN;
            LP_PROF_OP_SCOPE(&adamw, dims, 12.0 * (double)n, 16.0 * (double)n);
            for (size_t i = 0; i < n; i++) {
                L[l].m[i] = 0.9f * L[l].m[i] + 0.1f * L[l].gw[i];
                L[l].v[i] = 0.999f * L[l].v[i] + 0.001f * L[l].gw[i] * L[l].gw[i];
                L[l].w[i] -= 1e-3f * L[l].m[i] / (1e-8f + L[l].v[i]);
            }
        }
    }
    /* activations die at the end of the step (input included) */
    for (int l = 0; l < LAYERS; l++)
        free_cat(L[l].act, act_n, l == 0 ? LP_MEM_CATEGORY_INPUT : LP_MEM_CATEGORY_ACTIVATION);
    free_cat(h, act_n, LP_MEM_CATEGORY_ACTIVATION);
}

/* Old traces of this worker would make a directory hold several runs' windows. */
static void remove_old_traces(const char *dir, const char *worker)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *de;
    size_t wl = strlen(worker);
    while ((de = readdir(d))) {
        if (strncmp(de->d_name, worker, wl) == 0 && de->d_name[wl] == '.' &&
            strstr(de->d_name, ".pt.trace.json")) {
            char p[4096];
            snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
            unlink(p);
        }
    }
    closedir(d);
}

int main(int argc, char **argv)
{
    lp_prof_config cfg;
    lp_prof_config_init(&cfg);
    cfg.out_dir = "reports/demo/profiler";
    cfg.worker_name = "prof_demo";
    cfg.use_gzip = 1;
    cfg.record_shapes = cfg.profile_memory = cfg.with_flops = cfg.with_stack = 1;
    cfg.use_schedule = 1;
    cfg.schedule = (lp_prof_schedule){.wait = 1, .warmup = 1, .active = 3, .repeat = 1};
    int64_t steps = 6;
    static const struct option opts[] = {
        {"steps", required_argument, 0, 's'}, {"wait", required_argument, 0, 'w'},
        {"warmup", required_argument, 0, 'u'}, {"active", required_argument, 0, 'a'},
        {"repeat", required_argument, 0, 'r'}, {"out", required_argument, 0, 'o'},
        {"no-gzip", no_argument, 0, 'z'},      {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 's': steps = atoll(optarg); break;
        case 'w': cfg.schedule.wait = atoll(optarg); break;
        case 'u': cfg.schedule.warmup = atoll(optarg); break;
        case 'a': cfg.schedule.active = atoll(optarg); break;
        case 'r': cfg.schedule.repeat = atoll(optarg); break;
        case 'o': cfg.out_dir = optarg; break;
        case 'z': cfg.use_gzip = 0; break;
        case 'h':
            printf("usage: prof_demo [--steps N] [--wait W] [--warmup U] [--active A] "
                   "[--repeat R] [--out DIR] [--no-gzip]\n");
            return 0;
        default:
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "prof_demo: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    if (lp_prof_schedule_validate(&cfg.schedule) != LP_OK) {
        fprintf(stderr, "prof_demo: %s\n", lp_err_msg());
        return 2;
    }
    int64_t adj = lp_prof_schedule_adjust_max_steps(&cfg.schedule, steps);
    if (adj != steps)
        printf("prof_demo: --steps %lld raised to %lld so one profiling cycle fits\n",
               (long long)steps, (long long)adj);
    steps = adj;
    if (lp_mkdir_p(cfg.out_dir) != LP_OK) {
        fprintf(stderr, "prof_demo: %s\n", lp_err_msg());
        return 1;
    }
    remove_old_traces(cfg.out_dir, cfg.worker_name);
    lp_prof_set_thread_name("main");

    layer L[LAYERS];
    size_t wn = (size_t)HIDDEN * HIDDEN;
    for (int l = 0; l < LAYERS; l++) {
        L[l].w = alloc_cat(wn, LP_MEM_CATEGORY_PARAMETER);
        for (size_t i = 0; i < wn; i++)
            L[l].w[i] = (float)((i * 7 + (size_t)l) % 13) / 13.0f * 0.02f - 0.01f;
        L[l].gw = alloc_cat(wn, LP_MEM_CATEGORY_GRADIENT);
        L[l].m = alloc_cat(wn, LP_MEM_CATEGORY_OPTIMIZER_STATE);
        L[l].v = alloc_cat(wn, LP_MEM_CATEGORY_OPTIMIZER_STATE);
    }
    float *q = alloc_cat(wn / 4, LP_MEM_CATEGORY_QUANTIZED_WEIGHT);
    float *misc = alloc_cat(4096, LP_MEM_CATEGORY_OTHER);

    char sp[4096];
    snprintf(sp, sizeof sp, "%s/sampler.csv", cfg.out_dir);
    lp_prof_sampler *sampler = NULL;
    if (lp_prof_sampler_start(sp, 10, &sampler) != LP_OK)
        fprintf(stderr, "prof_demo: sampler: %s\n", lp_err_msg());

    if (lp_prof_start(&cfg) != LP_OK) {
        fprintf(stderr, "prof_demo: %s\n", lp_err_msg());
        return 1;
    }
    int rc = 0;
    for (int64_t s = 0; s < steps; s++) {
        train_step(L, q, (unsigned)s);
        if (lp_prof_step() != LP_OK) {
            fprintf(stderr, "prof_demo: export failed: %s\n", lp_err_msg());
            rc = 1;
        }
    }
    if (lp_prof_stop() != LP_OK) {
        fprintf(stderr, "prof_demo: export failed: %s\n", lp_err_msg());
        rc = 1;
    }
    if (sampler && lp_prof_sampler_stop(sampler) != LP_OK) {
        fprintf(stderr, "prof_demo: sampler: %s\n", lp_err_msg());
        rc = 1;
    }
    lp_mem_stats ms;
    lp_prof_mem_stats(&ms);
    printf("prof_demo: %lld steps, %lld trace(s) saved; last trace %s\n", (long long)steps,
           (long long)lp_prof_traces_saved(), lp_prof_last_trace_path());
    printf("prof_demo: peak memory %.2f MiB (parameters %.2f, activations %.2f, optimizer %.2f)\n",
           (double)ms.total_peak / 1048576, (double)ms.peak[LP_MEM_CATEGORY_PARAMETER] / 1048576,
           (double)ms.peak[LP_MEM_CATEGORY_ACTIVATION] / 1048576,
           (double)ms.peak[LP_MEM_CATEGORY_OPTIMIZER_STATE] / 1048576);
    for (int l = 0; l < LAYERS; l++) {
        free_cat(L[l].w, wn, LP_MEM_CATEGORY_PARAMETER);
        free_cat(L[l].gw, wn, LP_MEM_CATEGORY_GRADIENT);
        free_cat(L[l].m, wn, LP_MEM_CATEGORY_OPTIMIZER_STATE);
        free_cat(L[l].v, wn, LP_MEM_CATEGORY_OPTIMIZER_STATE);
    }
    free_cat(q, wn / 4, LP_MEM_CATEGORY_QUANTIZED_WEIGHT);
    free_cat(misc, 4096, LP_MEM_CATEGORY_OTHER);
    return rc;
}
