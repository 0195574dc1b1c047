/* Throughput of the decoder ops at Qwen2-0.5B training shapes (B*T = 2048 tokens, C = 896,
 * FFN F = 4864, 14 query heads and 2 kv heads of D = 64): RMSNorm, SwiGLU over the fused
 * gate_up output (ld = 2F), RoPE on q and k inside the packed qkv row, last-token gather.
 * These ops are memory-bound: the figure to read is GB/s against the machine's triad
 * bandwidth. A figure, never a timed assertion. Usage: bench_decoder [--ref] [--quick] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "loupe/kernels.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int reps = 10;
static double triad;

/* best of reps, after one warm-up */
#define TIME(label, bytes, stmt)                                                                             \
    do {                                                                                                     \
        stmt;                                                                                                \
        double best_ = 1e30;                                                                                 \
        for (int r_ = 0; r_ < reps; r_++) {                                                                  \
            double t0_ = now_s();                                                                            \
            stmt;                                                                                            \
            double dt_ = now_s() - t0_;                                                                      \
            best_ = dt_ < best_ ? dt_ : best_;                                                               \
        }                                                                                                    \
        printf("%-34s %9.3f ms %8.1f GB/s %6.1f%% of triad\n", label, best_ * 1e3, (bytes) / best_ * 1e-9,   \
               100.0 * (bytes) / best_ * 1e-9 / triad);                                                      \
    } while (0)

static float *buf(int64_t n, float lo, float hi)
{
    float *p = lp_alloc((size_t)n * sizeof(float), LP_MEM_CATEGORY_TEMPORARY, "bench");
    if (!p) {
        fprintf(stderr, "bench_decoder: %s\n", lp_err_msg());
        exit(1);
    }
    lp_rng r;
    lp_rng_init(&r, (uint64_t)n, 9);
    lp_rng_uniform(&r, p, n, lo, hi);
    return p;
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--ref"))
            lp_kernels_select(LP_KERNELS_IMPL_REF);
        else if (!strcmp(argv[i], "--quick"))
            reps = 3;
        else {
            fprintf(stderr, "usage: bench_decoder [--ref] [--quick]\n");
            return 2;
        }
    }
    lp_threads_init();
    const int64_t N = 2048, C = 896, F = 4864, H = 14, Hkv = 2, D = 64, ld = (H + 2 * Hkv) * D;
    lp_peak_result pk;
    if (lp_peak_measure(&pk, reps < 10 ? 0.3 : 1.0, 256) != LP_OK) {
        fprintf(stderr, "bench_decoder: %s\n", lp_err_msg());
        return 1;
    }
    triad = pk.triad_gbs;
    printf("kernels: %s, threads: %d, widest vectors %d-bit, triad %.1f GB/s\n", lp_kernels_active()->name,
           pk.threads, pk.vector_bits, pk.triad_gbs);

    float *x = buf(N * C, -2, 2), *w = buf(C, 0.5f, 1.5f), *y = buf(N * C, 0, 0), *rstd = buf(N, 0, 0);
    float *dy = buf(N * C, -1, 1), *dx = buf(N * C, 0, 0), *dw = buf(C, 0, 0);
    TIME("rmsnorm fwd 2048x896", 4.0 * (2 * N * C + N), lp_rmsnorm_forward(y, rstd, x, w, N, C, 1e-6f));
    TIME("rmsnorm bwd 2048x896 (+dweight)", 4.0 * (5 * N * C),
         lp_rmsnorm_backward(dx, dw, dy, x, w, rstd, N, C));

    float *gu = buf(N * 2 * F, -4, 4), *a = buf(N * F, 0, 0), *da = buf(N * F, -1, 1),
          *dgu = buf(N * 2 * F, 0, 0);
    TIME("swiglu fwd 2048x4864 (ld 2F)", 4.0 * 3 * N * F, lp_swiglu_forward(a, gu, gu + F, N, F, 2 * F));
    TIME("swiglu bwd 2048x4864 (ld 2F)", 4.0 * 5 * N * F,
         lp_swiglu_backward(dgu, dgu + F, da, gu, gu + F, N, F, 2 * F));

    int32_t *pos = lp_alloc((size_t)N * 4, LP_MEM_CATEGORY_INPUT, "pos");
    for (int64_t n = 0; n < N; n++)
        pos[n] = (int32_t)(n % 512);
    float inv[32], af, *cs = buf(N * D / 2, 0, 0), *sn = buf(N * D / 2, 0, 0), *qkv = buf(N * ld, -1, 1);
    if (lp_rope_inv_freq(inv, D, 1e6, NULL, &af) != LP_OK)
        return 1;
    TIME("rope cache 2048x64", 4.0 * N * D, lp_rope_cache(cs, sn, pos, inv, af, N, D));
    TIME("rope fwd q+k 2048x(14+2)x64", 4.0 * (2 * N * (H + Hkv) * D + 2 * N * D),
         (lp_rope_forward(qkv, cs, sn, N, H, D, ld), lp_rope_forward(qkv + H * D, cs, sn, N, Hkv, D, ld)));

    int64_t idx[16];
    for (int i = 0; i < 16; i++)
        idx[i] = i * 128 + 127 - i;
    TIME("rows gather 16 of 2048x896", 4.0 * 2 * 16 * C, lp_rows_gather(y, x, idx, 16, C));
    return 0;
}
