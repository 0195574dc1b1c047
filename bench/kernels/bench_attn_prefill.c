/* Causal prefill attention (the fused forward) at generation shapes: one sequence of T
 * tokens, q/k/v packed as a model's fused projection leaves them ((H + 2 Hkv) D per token),
 * no mask: SmolLM2-135M (9 heads over 3 kv heads of 64) and Qwen2.5-0.5B (14 over 2), T =
 * 512 (pp512). GFLOP/s counts the visible half of the scores (4 D per query-key pair), best
 * of --reps, in the calling thread's CPU time with --cpu-time (one-thread figures on a
 * shared machine). A figure, never an assertion.
 * Usage: bench_attn_prefill [--reps N] [-T tokens] [--cpu-time] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "loupe/core.h"
#include "loupe/kernels.h"

static clockid_t clk = CLOCK_MONOTONIC;

static double now(void)
{
    struct timespec ts;
    clock_gettime(clk, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
    int reps = 5;
    int64_t T = 512;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--cpu-time"))
            clk = CLOCK_THREAD_CPUTIME_ID;
        else if (i + 1 < argc && !strcmp(argv[i], "--reps"))
            reps = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "-T"))
            T = atoll(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_attn_prefill [--reps N] [-T tokens] [--cpu-time]\n");
            return 2;
        }
    }
    static const struct {
        const char *name;
        int64_t H, Hkv, D;
    } shapes[] = {{"SmolLM2-135M", 9, 3, 64}, {"Qwen2.5-0.5B", 14, 2, 64}};
    printf("kernels %s, T = %lld, causal, one sequence\n", lp_kernels_active()->name, (long long)T);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int64_t H = shapes[s].H, Hkv = shapes[s].Hkv, D = shapes[s].D, ld = (H + 2 * Hkv) * D;
        float *qkv = lp_alloc((size_t)(T * ld) * sizeof(float), LP_MEM_CATEGORY_TEMPORARY, "bench qkv");
        float *out = lp_alloc((size_t)(T * H * D) * sizeof(float), LP_MEM_CATEGORY_TEMPORARY, "bench out");
        float *lse = lp_alloc((size_t)(T * H) * sizeof(float), LP_MEM_CATEGORY_TEMPORARY, "bench lse");
        if (!qkv || !out || !lse) {
            fprintf(stderr, "bench_attn_prefill: %s\n", lp_err_msg());
            return 1;
        }
        lp_rng r;
        lp_rng_init(&r, 7, 9);
        lp_rng_uniform(&r, qkv, T * ld, -1.0f, 1.0f);
        const lp_attn_geom g = {.B = 1, .T = T, .H = H, .Hkv = Hkv, .D = D, .ldq = ld, .ldkv = ld, .causal = true};
        lp_attention_fused_forward(out, lse, qkv, qkv + H * D, qkv + (H + Hkv) * D, NULL, &g, NULL); /* warm-up */
        double best = 1e30;
        for (int i = 0; i < reps; i++) {
            const double t0 = now();
            lp_attention_fused_forward(out, lse, qkv, qkv + H * D, qkv + (H + Hkv) * D, NULL, &g, NULL);
            const double dt = now() - t0;
            best = dt < best ? dt : best;
        }
        const double flops = 4.0 * (double)H * (0.5 * (double)T * (double)(T + 1)) * (double)D;
        printf("  %-14s H %2lld / Hkv %lld, D %lld: %8.3f ms  %7.1f GFLOP/s\n", shapes[s].name, (long long)H,
               (long long)Hkv, (long long)D, best * 1e3, flops / best * 1e-9);
        lp_free(qkv), lp_free(out), lp_free(lse);
    }
    return 0;
}
