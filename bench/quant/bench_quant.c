/* Quantized GEMM and LoRA linear throughput at DistilBERT shapes (M = B*T = 2048 tokens):
 * f32 sgemm (OpenBLAS) vs fused NF4 and int8 dequant-GEMM vs eager (whole weight
 * dequantized into a temporary, then sgemm), forward (y = x W^T) and input gradient
 * (dx = dy W); then the LoRA linear (in = out = 768, r = 8) fused vs eager, forward +
 * backward, over f32 and NF4 bases; and one few-token shape (M = 16). Each figure is the best of --reps runs
 * (default 3): the machine is shared. Prints GFLOP/s (2*M*N*K per GEMM) and ratios; asserts nothing. Usage:
 * bench_quant [--reps N] [--threads N] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "loupe/kernels.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int reps = 3;

static void fill(float *p, int64_t n, float a)
{
    lp_rng r;
    lp_rng_init(&r, 1234, LP_RNG_STREAM_INIT);
    lp_rng_uniform(&r, p, n, -a, a);
}

static void ok(lp_status st)
{
    if (st != LP_OK) {
        fprintf(stderr, "bench_quant: %s\n", lp_err_msg());
        exit(1);
    }
}

typedef enum { F32, FUSED, EAGER } mode;

/* Best seconds of one GEMM call (forward or backward) in mode m. */
static double time_gemm(mode m, bool bwd, const float *w, const lp_qweight *q, const float *a, float *c,
                        int64_t M, int64_t K, int64_t N)
{
    double best = 1e30;
    /* small GEMMs: time a batch of calls so one timing spans several milliseconds */
    int inner = (int)(4e8 / (2.0 * (double)M * (double)K * (double)N));
    inner = inner < 1 ? 1 : inner > 1000 ? 1000 : inner;
    for (int it = 0; it < reps + 1; it++) { /* +1: warm-up */
        double t0 = now();
        for (int j = 0; j < inner; j++)
            if (m == F32 && !bwd)
                lp_matmul_forward(c, a, w, NULL, M, K, N);
            else if (m == F32)
                lp_matmul_backward(c, NULL, NULL, a, NULL, w, M, K, N);
            else if (m == FUSED && !bwd)
                ok(lp_qmatmul_forward(c, a, q, NULL, M, K, N));
            else if (m == FUSED)
                ok(lp_qmatmul_backward(c, a, q, M, K, N));
            else if (!bwd)
                ok(lp_qmatmul_forward_eager(c, a, q, NULL, M, K, N));
            else
                ok(lp_qmatmul_backward_eager(c, a, q, M, K, N));
        double t = (now() - t0) / inner;
        if (it && t < best)
            best = t;
    }
    return best;
}

static void bench_gemm(int64_t M, int64_t K, int64_t N)
{
    float *w = malloc(sizeof(float) * (size_t)(N * K)), *x = malloc(sizeof(float) * (size_t)(M * K));
    float *y = malloc(sizeof(float) * (size_t)(M * N)), *dy = malloc(sizeof(float) * (size_t)(M * N));
    float *dx = malloc(sizeof(float) * (size_t)(M * K));
    fill(w, N * K, 0.05f), fill(x, M * K, 1.0f), fill(dy, M * N, 1.0f);
    lp_qweight nf4, i8;
    ok(lp_qweight_quantize(&nf4, LP_DTYPE_NF4, w, N, K, true, "bench nf4"));
    ok(lp_qweight_quantize(&i8, LP_DTYPE_INT8, w, N, K, false, "bench int8"));
    double gf = 2.0 * (double)M * (double)N * (double)K * 1e-9;
    for (int bwd = 0; bwd < 2; bwd++) {
        float *in = bwd ? dy : x, *out = bwd ? dx : y;
        double f32 = time_gemm(F32, bwd, w, NULL, in, out, M, K, N);
        double fn = time_gemm(FUSED, bwd, w, &nf4, in, out, M, K, N);
        double en = time_gemm(EAGER, bwd, w, &nf4, in, out, M, K, N);
        double fi = time_gemm(FUSED, bwd, w, &i8, in, out, M, K, N);
        double ei = time_gemm(EAGER, bwd, w, &i8, in, out, M, K, N);
        printf("%-8s M=%-5lld K=%-5lld N=%-5lld | f32 %6.1f | nf4 fused %6.1f (%.2fx f32) eager %6.1f (fused "
               "%.2fx eager)"
               " | int8 fused %6.1f (%.2fx f32) eager %6.1f  GFLOP/s\n",
               bwd ? "dx=dy.W" : "y=x.W^T", (long long)M, (long long)K, (long long)N, gf / f32, gf / fn,
               f32 / fn, gf / en, en / fn, gf / fi, f32 / fi, gf / ei);
    }
    printf("         bytes/param: nf4+dq %.4f, int8 %.4f\n", lp_qweight_bytes_per_param(&nf4),
           lp_qweight_bytes_per_param(&i8));
    lp_qweight_free(&nf4);
    lp_qweight_free(&i8);
    free(w), free(x), free(y), free(dy), free(dx);
}

static void bench_lora(int64_t M, int64_t C, int64_t OC, int64_t r, float p)
{
    float *w = malloc(sizeof(float) * (size_t)(OC * C)), *x = malloc(sizeof(float) * (size_t)(M * C));
    float *A = malloc(sizeof(float) * (size_t)(r * C)), *B = malloc(sizeof(float) * (size_t)(OC * r));
    float *y = malloc(sizeof(float) * (size_t)(M * OC)), *dy = malloc(sizeof(float) * (size_t)(M * OC));
    float *u = malloc(sizeof(float) * (size_t)(M * r)), *dx = malloc(sizeof(float) * (size_t)(M * C));
    float *dA = calloc((size_t)(r * C), sizeof(float)), *dB = calloc((size_t)(OC * r), sizeof(float));
    uint8_t *keep = malloc((size_t)(M * C));
    fill(w, OC * C, 0.05f), fill(x, M * C, 1.0f), fill(A, r * C, 0.05f), fill(B, OC * r, 0.05f),
        fill(dy, M * OC, 1.0f);
    lp_qweight nf4;
    ok(lp_qweight_quantize(&nf4, LP_DTYPE_NF4, w, OC, C, true, "bench nf4"));
    double gf = (2.0 * M * C * OC + 2.0 * M * C * r + 2.0 * M * r * OC) * 3.0 * 1e-9; /* fwd + bwd ~ 3x fwd */
    double t[2][2];
    for (int base = 0; base < 2; base++)
        for (int eager = 0; eager < 2; eager++) {
            lp_lora_base b = {.weight = base ? NULL : w, .q = base ? &nf4 : NULL};
            double best = 1e30;
            for (int it = 0; it < reps + 1; it++) {
                lp_rng rng;
                lp_rng_init(&rng, 5, LP_RNG_STREAM_DROPOUT);
                double t0 = now();
                if (eager) {
                    ok(lp_lora_forward_eager(y, u, keep, x, &b, A, B, 2.0f, p, &rng, M, C, OC, r));
                    ok(lp_lora_backward_eager(dx, dA, dB, dy, x, u, keep, &b, A, B, 2.0f, p, M, C, OC, r));
                } else {
                    ok(lp_lora_forward(y, u, keep, x, &b, A, B, 2.0f, p, &rng, M, C, OC, r));
                    ok(lp_lora_backward(dx, dA, dB, dy, x, u, keep, &b, A, B, 2.0f, p, M, C, OC, r));
                }
                double dt = now() - t0;
                if (it && dt < best)
                    best = dt;
            }
            t[base][eager] = best;
        }
    printf("lora fwd+bwd M=%lld in=%lld out=%lld r=%lld p=%.1f | f32 base: fused %.2f ms (%.1f GFLOP/s), "
           "eager %.2f ms"
           " -> fused %.2fx | nf4 base: fused %.2f ms (%.1f GFLOP/s), eager %.2f ms -> fused %.2fx | nf4 "
           "fused / f32 fused"
           " time %.2f\n",
           (long long)M, (long long)C, (long long)OC, (long long)r, (double)p, 1e3 * t[0][0], gf / t[0][0],
           1e3 * t[0][1], t[0][1] / t[0][0], 1e3 * t[1][0], gf / t[1][0], 1e3 * t[1][1], t[1][1] / t[1][0],
           t[1][0] / t[0][0]);
    lp_qweight_free(&nf4);
    free(w), free(x), free(A), free(B), free(y), free(dy), free(u), free(dx), free(dA), free(dB), free(keep);
}

int main(int argc, char **argv)
{
    int threads = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_quant [--reps N] [--threads N]\n");
            return 2;
        }
    }
    if (reps < 1)
        reps = 1;
    lp_threads_init();
    if (threads > 0)
        lp_threads_set(threads);
    lp_kernels_select(LP_KERNELS_IMPL_OPT);
    printf("bench_quant: %d threads, best of %d\n", lp_threads_get(), reps);
    bench_gemm(2048, 768, 768);
    bench_gemm(2048, 768, 3072);
    bench_gemm(2048, 3072, 768);
    /* few tokens (generation, small batches): the eager path's full dequantization pass
     * is then the bulk of the work, which is where fusing pays */
    bench_gemm(16, 768, 3072);
    bench_lora(2048, 768, 768, 8, 0.0f);
    bench_lora(2048, 768, 768, 8, 0.1f);
    return 0;
}
