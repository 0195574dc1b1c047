/* Token generation of one model in one weight format, for before/after pairs on a shared
 * machine: after a one-token prompt, --tokens decode steps with the KV cache, --reps times;
 * prints the best and median wall ms per token and the best process CPU ms per token. The
 * best of several short runs is what a time slice given to another job does not inflate
 * (bench-gen's mean ± sd is the figure for a quiet machine).
 * Usage: bench_tg --model FILE.gguf|DIR [--weights stored|f32|q8_0|...] [--threads N]
 *                 [--tokens N] [--reps R] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "loupe/core.h"
#include "loupe/kernels.h"
#include "loupe/models.h"

static double clk(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int die(void)
{
    fprintf(stderr, "bench_tg: %s\n", lp_err_msg());
    return 1;
}

int main(int argc, char **argv)
{
    const char *model = NULL, *weights = "stored";
    int threads = 1, tokens = 64, reps = 8;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--model"))
            model = argv[i + 1];
        else if (!strcmp(argv[i], "--weights"))
            weights = argv[i + 1];
        else if (!strcmp(argv[i], "--threads"))
            threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--tokens"))
            tokens = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps"))
            reps = atoi(argv[i + 1]);
    }
    if (!model || threads < 1 || tokens < 1 || reps < 1 || reps > 1000) {
        fprintf(stderr, "usage: bench_tg --model FILE.gguf|DIR [--weights stored|f32|q8_0|...] [--threads N] "
                        "[--tokens N] [--reps R]\n");
        return 2;
    }
    if (lp_kernels_init() != LP_OK)
        return die();
    lp_threads_init();
    lp_threads_set(threads);
    lp_model_options o;
    lp_model_options_init(&o);
    o.quiet = true;
    o.no_grad = true;
    o.exec = LP_EXEC_MODE_FUSED;
    o.task = LP_MODEL_TASK_CAUSAL_LM;
    lp_model *m = NULL;
    lp_kv_cache *kv = NULL;
    if (lp_weight_format_parse(weights, &o.weights) != LP_OK || lp_model_load(model, &o, &m) != LP_OK ||
        lp_model_kv_init(m, 1, tokens + 1, LP_DTYPE_F32, &kv) != LP_OK)
        return die();
    lp_model_info info;
    lp_model_info_get(m, &info);
    float *logits = malloc((size_t)info.vocab_size * sizeof *logits);
    double wall[1000], cpu_best = 1e30;
    int32_t id = 42;
    for (int r = 0; r <= reps; r++) { // run 0 warms up
        lp_kv_cache_reset(kv);
        if (!logits || lp_model_prefill(m, kv, &id, NULL, 1, 1, logits) != LP_OK)
            return die();
        const double w0 = clk(CLOCK_MONOTONIC), c0 = clk(CLOCK_PROCESS_CPUTIME_ID);
        for (int t = 0; t < tokens; t++)
            if (lp_model_decode(m, kv, &id, logits) != LP_OK)
                return die();
        const double w = (clk(CLOCK_MONOTONIC) - w0) * 1e3 / tokens, c = (clk(CLOCK_PROCESS_CPUTIME_ID) - c0) * 1e3 / tokens;
        if (r) {
            wall[r - 1] = w;
            cpu_best = c < cpu_best ? c : cpu_best;
        }
    }
    qsort(wall, (size_t)reps, sizeof *wall, cmp);
    printf("%s %s t=%d: best %.3f ms/token (%.1f tokens/s), median %.3f, best CPU %.3f ms/token [%s]\n", model,
           weights, threads, wall[0], 1e3 / wall[0], wall[reps / 2], cpu_best, lp_isa_name(lp_kernels_isa()));
    free(logits);
    lp_kv_cache_free(kv);
    lp_model_free(m);
    return 0;
}
