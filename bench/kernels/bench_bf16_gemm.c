/* The bf16 weight GEMM (lp_qmatmul_forward on a packed bf16 weight) against the f32 GEMM
 * (lp_matmul_forward, OpenBLAS) at the Linear shapes of DistilBERT and Qwen2.5-0.5B, for
 * N = 1 (decode / batch-1 classifier row), 128, 1024 rows; GFLOP/s, and at N = 1 the weight
 * GB/s (against `loupe peak`'s triad for the 8192 x 8192 weight, 128 MiB as bf16, past L3). Best of --reps; the active ISA level (LP_ISA) and threads (LP_THREADS) as set.
 * Usage: bench_bf16_gemm [--reps N] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "loupe/core.h"
#include "loupe/kernels.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
    int reps = 5;
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--reps"))
            reps = atoi(argv[++i]);
    lp_threads_init();
    if (lp_kernels_init() != LP_OK)
        return 1;
    static const struct {
        const char *what;
        int64_t C, OC;
    } sh[] = {{"distilbert qkv/out", 768, 768}, {"distilbert ffn up", 768, 3072}, {"distilbert ffn down", 3072, 768},
              {"qwen0.5b q/o", 896, 896},       {"qwen0.5b k/v", 896, 128},       {"qwen0.5b mlp up", 896, 4864},
              {"qwen0.5b mlp down", 4864, 896}, {"8192x8192 (past L3)", 8192, 8192}};
    static const int64_t Ns[] = {1, 128, 1024};
    printf("isa %s, %d threads\n", lp_kernels_table(LP_KERNELS_IMPL_OPT)->isa, lp_threads_get());
    printf("%-22s %6s %10s %10s %7s %9s\n", "shape", "N", "f32 GF/s", "bf16 GF/s", "ratio", "bf16 GB/s");
    for (size_t s = 0; s < sizeof sh / sizeof sh[0]; s++)
        for (size_t n = 0; n < sizeof Ns / sizeof Ns[0]; n++) {
            const int64_t N = Ns[n], C = sh[s].C, OC = sh[s].OC;
            if (C * OC > (1 << 25) && N > 1) /* the large weight: decode streaming only */
                continue;
            float *w = malloc((size_t)(OC * C) * 4), *x = malloc((size_t)(N * C) * 4),
                  *y = malloc((size_t)(N * OC) * 4), *b = calloc((size_t)OC, 4);
            for (int64_t i = 0; i < OC * C; i++)
                w[i] = (float)((i * 7919) % 2001 - 1000) * 1e-3f;
            for (int64_t i = 0; i < N * C; i++)
                x[i] = (float)((i * 104729) % 2001 - 1000) * 1e-3f;
            lp_qweight q;
            if (lp_qweight_pack_bf16(&q, w, OC, C, "bench") != LP_OK)
                return 1;
            double tf = 1e30, tb = 1e30;
            int inner = N == 1 ? 50 : 1;
            for (int r = 0; r < reps + 1; r++) {
                double t0 = now();
                for (int k = 0; k < inner; k++)
                    lp_matmul_forward(y, x, w, b, N, C, OC);
                double t1 = now();
                for (int k = 0; k < inner; k++)
                    if (lp_qmatmul_forward(y, x, &q, b, N, C, OC) != LP_OK)
                        return 1;
                double t2 = now();
                if (r) { /* the first pass warms caches and threads */
                    tf = (t1 - t0) / inner < tf ? (t1 - t0) / inner : tf;
                    tb = (t2 - t1) / inner < tb ? (t2 - t1) / inner : tb;
                }
            }
            const double fl = 2.0 * N * C * OC;
            printf("%-22s %6lld %10.1f %10.1f %6.2fx %9.1f\n", sh[s].what, (long long)N, fl / tf * 1e-9,
                   fl / tb * 1e-9, tf / tb, (double)lp_qweight_nbytes(&q) / tb * 1e-9);
            lp_qweight_free(&q);
            free(w), free(x), free(y), free(b);
        }
    return 0;
}
