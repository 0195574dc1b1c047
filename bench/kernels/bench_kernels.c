/* Kernel throughput at DistilBERT training shapes (B*T = 2048, C = 768, FFN 3072; attention
 * B=16 H=12 T=128 D=64): sgemm in the three products of a linear layer, fused vs eager
 * attention forward+backward (MiniLM's heads of 32 too, and a decoder's: B4 T256, 14 query heads over 2 kv heads of 64,
 * causal), LayerNorm, GELU, softmax and cross-entropy bandwidth. Prints a table (or --json)
 * with each figure as a fraction of this machine's measured FMA peak / triad bandwidth.
 * A figure, never a timed assertion.  Usage: bench_kernels [--json] [--quick] [--ref] */
#include <math.h>
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

typedef struct row {
    const char *name;
    double ms, gflops, gbs;
} row;

static row rows[32];
static int nrows;
static int reps = 10;

#define TIME(label, flops, bytes, stmt)                                                                         \
    do {                                                                                                        \
        stmt; /* warm-up */                                                                                     \
        double best_ = 1e30;                                                                                    \
        for (int r_ = 0; r_ < reps; r_++) {                                                                     \
            double t0_ = now_s();                                                                               \
            stmt;                                                                                               \
            double dt_ = now_s() - t0_;                                                                         \
            if (dt_ < best_)                                                                                    \
                best_ = dt_;                                                                                    \
        }                                                                                                       \
        rows[nrows++] = (row){label, best_ * 1e3, (flops) / best_ * 1e-9, (bytes) / best_ * 1e-9};              \
    } while (0)

static float *buf(int64_t n, float lo, float hi)
{
    float *p = lp_alloc((size_t)n * sizeof(float), LP_MEM_CATEGORY_TEMPORARY, "bench");
    if (!p) {
        fprintf(stderr, "bench_kernels: %s\n", lp_err_msg());
        exit(1);
    }
    lp_rng r;
    lp_rng_init(&r, (uint64_t)n, 9);
    lp_rng_uniform(&r, p, n, lo, hi);
    return p;
}

int main(int argc, char **argv)
{
    int json = 0, quick = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json"))
            json = 1;
        else if (!strcmp(argv[i], "--quick"))
            quick = 1;
        else if (!strcmp(argv[i], "--ref"))
            lp_kernels_select(LP_KERNELS_IMPL_REF);
        else {
            fprintf(stderr, "usage: bench_kernels [--json] [--quick] [--ref]\n");
            return 2;
        }
    }
    lp_threads_init();
    if (quick)
        reps = 3;
    const int64_t N = 2048, C = 768, F = 3072, B = 16, H = 12, T = 128, D = 64;

    lp_peak_result pk;
    if (lp_peak_measure(&pk, quick ? 0.3 : 1.0, 1024) != LP_OK) {
        fprintf(stderr, "bench_kernels: %s\n", lp_err_msg());
        return 1;
    }

    float *x = buf(N * F, -1, 1), *w = buf(F * C, -0.05f, 0.05f), *y = buf(N * F, -1, 1), *dw = buf(F * C, 0, 0);
    float *dy = buf(N * F, -1, 1), *dx = buf(N * F, 0, 0);
    double f1 = 2.0 * N * C * C, f4 = 2.0 * N * C * F;
    TIME("sgemm fwd 2048x768 @ 768x768", f1, 4.0 * (2 * N * C + C * C), lp_matmul_forward(y, x, w, NULL, N, C, C));
    TIME("sgemm fwd 2048x768 @ 768x3072", f4, 4.0 * (N * C + N * F + F * C), lp_matmul_forward(y, x, w, NULL, N, C, F));
    TIME("sgemm fwd 2048x3072 @ 3072x768", f4, 4.0 * (N * C + N * F + F * C), lp_matmul_forward(y, x, w, NULL, N, F, C));
    TIME("sgemm bwd 2048x768x3072 (dx+dW)", 2 * f4, 4.0 * (2 * N * C + N * F + 2 * F * C),
         lp_matmul_backward(dx, dw, NULL, dy, x, w, N, C, F));

    /* attention: packed qkv (B,T,3C) as the model keeps it */
    int64_t nqkv = B * T * 3 * C;
    float *qkv = buf(nqkv, -1, 1), *dqkv = buf(nqkv, 0, 0), *out = buf(B * T * C, 0, 0), *dout = buf(B * T * C, -1, 1);
    const int64_t natt = 4 * 14 * 256 * 256; /* the decoder case's (B,H,T,T), above DistilBERT's */
    float *att = buf(natt, 0, 0), *datt = buf(natt, 0, 0), *lse = buf(B * H * T, 0, 0);
    int32_t *mask = lp_alloc((size_t)(B * T) * 4, LP_MEM_CATEGORY_INPUT, "mask");
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++)
            mask[b * T + t] = t < T - 3 * b; /* realistic padding */
    double fa = 4.0 * B * H * T * T * D, fb = 8.0 * B * H * T * T * D; /* useful FLOPs (no recompute) */
    const lp_attn_geom ga = lp_attn_geom_mha(B, T, H, D, 3 * C);
    TIME("attention eager fwd", fa, 0, lp_attention_eager_forward(out, att, qkv, qkv + C, qkv + 2 * C, mask, &ga));
    TIME("attention eager bwd", fb, 0,
         lp_attention_eager_backward(dqkv, dqkv + C, dqkv + 2 * C, datt, dout, att, qkv, qkv + C, qkv + 2 * C, &ga));
    TIME("attention fused fwd", fa, 0, lp_attention_fused_forward(out, lse, qkv, qkv + C, qkv + 2 * C, mask, &ga, NULL));
    TIME("attention fused bwd", fb, 0,
         lp_attention_fused_backward(dqkv, dqkv + C, dqkv + 2 * C, dout, out, lse, qkv, qkv + C, qkv + 2 * C, mask, &ga,
                                     NULL));
    {
        /* MiniLM's attention: 12 heads of 32, qkv packed as (B,T,3*384) */
        const int64_t Cm = H * 32;
        const lp_attn_geom gm = lp_attn_geom_mha(B, T, H, 32, 3 * Cm);
        const double fm = 4.0 * B * H * T * T * 32, fmb = 2.0 * fm;
        TIME("attention eager fwd d32", fm, 0, lp_attention_eager_forward(out, att, qkv, qkv + Cm, qkv + 2 * Cm, mask, &gm));
        TIME("attention eager bwd d32", fmb, 0,
             lp_attention_eager_backward(dqkv, dqkv + Cm, dqkv + 2 * Cm, datt, dout, att, qkv, qkv + Cm, qkv + 2 * Cm, &gm));
        TIME("attention fused fwd d32", fm, 0,
             lp_attention_fused_forward(out, lse, qkv, qkv + Cm, qkv + 2 * Cm, mask, &gm, NULL));
        TIME("attention fused bwd d32", fmb, 0,
             lp_attention_fused_backward(dqkv, dqkv + Cm, dqkv + 2 * Cm, dout, out, lse, qkv, qkv + Cm, qkv + 2 * Cm, mask,
                                         &gm, NULL));
    }
    {
        /* a decoder's attention (Qwen2-0.5B: 14 query heads over 2 kv heads of 64, causal),
         * qkv packed as (B,T,(H + 2 Hkv) D); useful FLOPs count the visible half only */
        const int64_t Bd = 4, Td = 256, Hd = 14, Hkv = 2, ldd = (Hd + 2 * Hkv) * D;
        const lp_attn_geom gd = {.B = Bd, .T = Td, .H = Hd, .Hkv = Hkv, .D = D, .ldq = ldd, .ldkv = ldd, .causal = true};
        const float *dq_ = qkv, *dk_ = qkv + Hd * D, *dv_ = qkv + (Hd + Hkv) * D;
        double pairs = 0.5 * Td * (Td + 1), fd = 4.0 * Bd * Hd * pairs * D, fdb = 8.0 * Bd * Hd * pairs * D;
        TIME("attention eager fwd gqa causal", fd, 0, lp_attention_eager_forward(out, att, dq_, dk_, dv_, NULL, &gd));
        TIME("attention eager bwd gqa causal", fdb, 0,
             lp_attention_eager_backward(dqkv, dqkv + Hd * D, dqkv + (Hd + Hkv) * D, datt, dout, att, dq_, dk_, dv_, &gd));
        TIME("attention fused fwd gqa causal", fd, 0, lp_attention_fused_forward(out, lse, dq_, dk_, dv_, NULL, &gd, NULL));
        TIME("attention fused bwd gqa causal", fdb, 0,
             lp_attention_fused_backward(dqkv, dqkv + Hd * D, dqkv + (Hd + Hkv) * D, dout, out, lse, dq_, dk_, dv_, NULL,
                                         &gd, NULL));
    }

    float *g = buf(C, 0.5f, 1.5f), *bb = buf(C, -1, 1), *mean = buf(N, 0, 0), *rstd = buf(N, 0, 0);
    float *dg = buf(C, 0, 0), *db = buf(C, 0, 0);
    TIME("layernorm fwd 2048x768", 8.0 * N * C, 4.0 * 2 * N * C, lp_layernorm_forward(y, mean, rstd, x, g, bb, N, C, 1e-12f));
    TIME("layernorm bwd 2048x768", 14.0 * N * C, 4.0 * 3 * N * C,
         lp_layernorm_backward(dx, dg, db, dy, x, g, mean, rstd, N, C));
    TIME("gelu fwd 2048x3072", 12.0 * N * F, 4.0 * 2 * N * F, lp_gelu_forward(y, x, N * F, LP_GELU_ERF));
    TIME("gelu bwd 2048x3072", 20.0 * N * F, 4.0 * 3 * N * F, lp_gelu_backward(dx, dy, x, N * F, LP_GELU_ERF));
    TIME("softmax fwd 192x128x128", 5.0 * B * H * T * T, 4.0 * 2 * B * H * T * T, lp_softmax_forward(att, datt, B * H * T, T));
    {
        /* a decoder LM head's loss: 128 tokens over SmolLM2's 49152-entry vocabulary (x's
         * 6.3 M values as logits); the forward reads the logits twice (max, then exp-sum) */
        const int64_t Nt = 128, V = 49152;
        int32_t *tg = lp_alloc((size_t)Nt * sizeof(int32_t), LP_MEM_CATEGORY_INPUT, "targets");
        for (int64_t i = 0; i < Nt; i++)
            tg[i] = (int32_t)((i * 7919) % V);
        float loss;
        TIME("cross-entropy fwd 128x49152", 0, 4.0 * 2 * Nt * V, {
            if (lp_cross_entropy_forward(&loss, lse, x, tg, Nt, V, -100) != LP_OK) {
                fprintf(stderr, "bench_kernels: %s\n", lp_err_msg());
                return 1;
            }
        });
        TIME("cross-entropy bwd 128x49152", 0, 4.0 * 2 * Nt * V,
             lp_cross_entropy_backward(dx, x, lse, tg, Nt, V, -100, 1.0f));
        lp_free(tg);
    }
    TIME("adamw 66M params (1/10)", 14.0 * F * C, 4.0 * 7 * F * C, lp_adamw_step(w, dy, x, dx, F * C, 1e-4, 0.9, 0.999, 1e-8, 0.01, 3));

    if (json) {
        printf("{\"kernels\": \"%s\", \"threads\": %d, \"fma_peak_gflops\": %.2f, \"triad_gbs\": %.2f, \"rows\": [",
               lp_kernels_active()->name, pk.threads, pk.fma_gflops, pk.triad_gbs);
        for (int i = 0; i < nrows; i++)
            printf("%s{\"name\": \"%s\", \"ms\": %.4f, \"gflops\": %.2f, \"gbs\": %.2f}", i ? ", " : "", rows[i].name,
                   rows[i].ms, rows[i].gflops, rows[i].gbs);
        printf("]}\n");
    } else {
        printf("kernels: %s, threads: %d, FMA peak %.1f GFLOP/s (%d-bit), triad %.1f GB/s\n",
               lp_kernels_active()->name, pk.threads, pk.fma_gflops, pk.vector_bits, pk.triad_gbs);
        printf("%-36s %10s %10s %8s %10s\n", "kernel", "ms", "GFLOP/s", "%peak", "GB/s");
        for (int i = 0; i < nrows; i++)
            printf("%-36s %10.3f %10.1f %7.1f%% %10.1f\n", rows[i].name, rows[i].ms, rows[i].gflops,
                   100.0 * rows[i].gflops / pk.fma_gflops, rows[i].gbs);
    }
    return 0;
}
