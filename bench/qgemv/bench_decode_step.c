/* One decode-sized forward (B = 1, T = 1: every weight read once, no KV cache) of a whole
 * model in each weight format: f32 (a GGUF dequantized at load), kept as stored, and
 * converted at load to Q8_0 / Q4_0 / NF4; inference loads (no_grad), so the LM head gets
 * its quantized copy. Prints ms per step (best of --reps), the parameter and
 * quantized-weight memory, and the weight bytes one step reads per second. Without a KV
 * cache this is the weight-streaming cost of a token, which is what the formats change.
 * Usage: bench_decode_step --model DIR|FILE.gguf [--reps N] [--threads N] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "loupe/core.h"
#include "loupe/models.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
    const char *model = NULL;
    int reps = 10, threads = 1;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--model"))
            model = argv[i + 1];
        else if (!strcmp(argv[i], "--reps"))
            reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--threads"))
            threads = atoi(argv[i + 1]);
    }
    if (!model) {
        fprintf(stderr, "usage: bench_decode_step --model DIR|FILE.gguf [--reps N] [--threads N]\n");
        return 2;
    }
    lp_threads_set(threads);
    static const lp_weight_format fm[] = {LP_WEIGHT_FORMAT_F32, LP_WEIGHT_FORMAT_STORED, LP_WEIGHT_FORMAT_Q8_0,
                                          LP_WEIGHT_FORMAT_Q4_0, LP_WEIGHT_FORMAT_NF4};
    printf("%s, %d thread(s), B = 1, T = 1:\n", model, threads);
    double f32_ms = 0;
    for (size_t k = 0; k < sizeof fm / sizeof fm[0]; k++) {
        lp_alloc_stats s0, s1;
        lp_alloc_stats_get(&s0);
        lp_model_options o;
        lp_model_options_init(&o);
        o.quiet = true;
        o.no_grad = true;
        o.exec = LP_EXEC_MODE_FUSED;
        o.task = LP_MODEL_TASK_CAUSAL_LM;
        o.weights = fm[k];
        lp_model *m = NULL;
        if (lp_model_load(model, &o, &m) != LP_OK) {
            fprintf(stderr, "bench_decode_step: %s\n", lp_err_msg());
            return 1;
        }
        lp_alloc_stats_get(&s1);
        lp_model_info info;
        lp_model_info_get(m, &info);
        float *logits = malloc((size_t)info.vocab_size * sizeof *logits);
        int32_t id = 42;
        double best = 1e30;
        for (int r = 0; r < reps + 1; r++) {
            double t0 = now();
            if (lp_model_forward(m, &id, NULL, NULL, 1, 1, logits) != LP_OK) {
                fprintf(stderr, "bench_decode_step: %s\n", lp_err_msg());
                return 1;
            }
            double t = now() - t0;
            if (r && t < best)
                best = t;
        }
        const double pb = (double)(s1.live[LP_MEM_CATEGORY_PARAMETER] - s0.live[LP_MEM_CATEGORY_PARAMETER]),
                     qb = (double)(s1.live[LP_MEM_CATEGORY_QUANTIZED_WEIGHT] - s0.live[LP_MEM_CATEGORY_QUANTIZED_WEIGHT]);
        if (k == 0)
            f32_ms = best * 1e3;
        printf("  %-7s %8.2f ms/step (%.2fx f32)  parameters %7.1f MiB  quantized %7.1f MiB\n",
               lp_weight_format_name(fm[k]), best * 1e3, f32_ms / (best * 1e3), pb / 1048576.0, qb / 1048576.0);
        free(logits);
        lp_model_free(m);
    }
    return 0;
}
