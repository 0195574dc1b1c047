/* The packed f32 weight GEMM (f32_gemm.c, weights packed once) against today's f32 Linear
 * (lp_matmul_forward: OpenBLAS sgemm, which re-packs W every call) at the Linear shapes of
 * DistilBERT and Qwen2.5-0.5B, N = 32, 256, 1024 rows (batch 1, 8, 32 at seq 32), at each
 * ISA level the CPU runs among avx512bf16, avx512 and avx2 (OpenBLAS picks its own kernels,
 * whatever the level), one and two threads, side by side in one process: GFLOP/s and the
 * percentage of the f32 FMA peak (lp_peak_fma_gflops: `loupe peak`'s probe, taken at that
 * level and thread count; OpenBLAS against the widest level's). Best of --reps, the two
 * GEMMs alternating within each repetition so a busy machine slows both alike.
 * --backward: the input gradient instead, dinp (N,C) = dout (N,OC) @ W: OpenBLAS on the f32
 * weight against f32_matmul_backward on the panels (LoRA's frozen base), and the time one
 * lp_qweight_pack_f32 of the weight takes (what re-packing after each optimizer step would
 * cost full fine-tuning), as ms and as a fraction of the OpenBLAS call.
 * --rows 1024,4096: the row counts instead of 32,256,1024 (a LoRA step's B*T rows: 4 x 256
 * for Qwen2.5-0.5B, 32 x 128 for DistilBERT); --shapes 0,5: only those shape indices.
 * Usage: bench_f32_gemm [--reps N] [--threads 1,2] [--backward] [--rows N,..] [--shapes i,..] */
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

/* "a,b,c" into v (at most max values, each >= lo; others skipped): the count */
static int list(const char *s, int64_t *v, int max, int64_t lo)
{
    int n = 0;
    for (char *e; n < max && *s; s = *e ? e + 1 : e) {
        v[n] = strtoll(s, &e, 10);
        if (e == s)
            break;
        n += v[n] >= lo;
    }
    return n;
}

static unsigned mask(const char *s)
{
    int64_t v[16];
    unsigned m = 0;
    for (int i = 0, n = list(s, v, 16, 0); i < n; i++)
        m |= v[i] < 32 ? 1u << v[i] : 0u;
    return m;
}

int main(int argc, char **argv)
{
    int reps = 5, nthr = 2, thr[2] = {1, 2}, nn = 3;
    int64_t Ns[8] = {32, 256, 1024};
    unsigned shmask = ~0u;
    bool bwd = false;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--backward"))
            bwd = true;
        else if (i + 1 == argc)
            break;
        else if (!strcmp(argv[i], "--reps"))
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads"))
            nthr = sscanf(argv[++i], "%d,%d", &thr[0], &thr[1]);
        else if (!strcmp(argv[i], "--rows"))
            nn = list(argv[++i], Ns, 8, 1);
        else if (!strcmp(argv[i], "--shapes"))
            shmask = mask(argv[++i]);
    lp_threads_init();
    if (lp_kernels_init() != LP_OK)
        return 1;
    static const struct {
        const char *what;
        int64_t C, OC;
    } sh[] = {{"distilbert qkv/out", 768, 768},   {"distilbert ffn up", 768, 3072},
              {"distilbert ffn down", 3072, 768}, {"qwen0.5b q/o", 896, 896},
              {"qwen0.5b k/v", 896, 128},         {"qwen0.5b mlp up", 896, 4864},
              {"qwen0.5b mlp down", 4864, 896},   {"smollm2 q/o", 576, 576},
              {"smollm2 k/v", 576, 192},          {"smollm2 mlp up", 576, 1536},
              {"smollm2 mlp down", 1536, 576},    {"smollm2 lm head", 576, 49152}};
    static const lp_isa want[] = {LP_ISA_AVX512BF16, LP_ISA_AVX512, LP_ISA_AVX2};
    lp_isa lv[3];
    int nl = 0;
    for (int i = 0; i < 3; i++)
        if (!lp_isa_missing(want[i]))
            lv[nl++] = want[i];
    if (!nl)
        return fprintf(stderr, "bench_f32_gemm: the CPU runs neither AVX2 nor AVX-512\n"), 77;
    double peak[3][2];
    for (int l = 0; l < nl; l++)
        for (int t = 0; t < nthr; t++) {
            lp_threads_set(thr[t]);
            if (lp_kernels_select_isa(lv[l]) != LP_OK)
                return 1;
            peak[l][t] = lp_peak_fma_gflops(0.5);
        }
    printf("f32 FMA peak (GFLOP/s):");
    for (int l = 0; l < nl; l++)
        for (int t = 0; t < nthr; t++)
            printf(" %s/%dt %.0f", lp_isa_name(lv[l]), thr[t], peak[l][t]);
    printf("\n%-20s %5s %3s %13s", "shape", "N", "thr", "OpenBLAS");
    for (int l = 0; l < nl; l++)
        printf(" %17s", lp_isa_name(lv[l]));
    printf("   (GFLOP/s and %% of that level's FMA peak)%s\n", bwd ? "  backward dinp = dout @ W; pack ms (/ OpenBLAS call)" : "");
    for (size_t s = 0; s < sizeof sh / sizeof sh[0]; s++)
        for (int n = 0; n < nn && (shmask >> s & 1u); n++)
            for (int t = 0; t < nthr; t++) {
                const int64_t N = Ns[n], C = sh[s].C, OC = sh[s].OC;
                lp_threads_set(thr[t]);
                float *w = malloc((size_t)(OC * C) * 4), *x = malloc((size_t)(N * C) * 4),
                      *y = malloc((size_t)(N * OC) * 4), *b = malloc((size_t)OC * 4);
                /* backward: x is dinp (N,C), y the incoming dout (N,OC) */
                for (int64_t i = 0; i < OC * C; i++)
                    w[i] = (float)((i * 7919) % 2001 - 1000) * 1e-3f;
                for (int64_t i = 0; i < N * C; i++)
                    x[i] = (float)((i * 104729) % 2001 - 1000) * 1e-3f;
                for (int64_t i = 0; i < OC; i++)
                    b[i] = (float)i * 1e-3f;
                for (int64_t i = 0; bwd && i < N * OC; i++)
                    y[i] = (float)((i * 15485863) % 2001 - 1000) * 1e-3f;
                lp_qweight q;
                double tpack = 1e30;
                for (int r = 0; r < (bwd ? 3 : 1); r++) {
                    if (r)
                        lp_qweight_free(&q);
                    double t0 = now();
                    if (lp_qweight_pack_f32(&q, w, OC, C, "bench") != LP_OK)
                        return 1;
                    tpack = now() - t0 < tpack ? now() - t0 : tpack;
                }
                const double fl = 2.0 * N * C * OC;
                const int inner = fl < 4e7 ? (int)(4e7 / fl) : 1;
                double tb = 1e30, tp[3] = {1e30, 1e30, 1e30};
                for (int r = 0; r < reps + 1; r++)
                    for (int l = 0; l <= nl; l++) {
                        if (l && lp_kernels_select_isa(lv[l - 1]) != LP_OK)
                            return 1;
                        const lp_kernel_table *T = lp_kernels_active();
                        double t0 = now();
                        for (int k = 0; k < inner; k++)
                            if (!l && bwd)
                                lp_sgemm(false, false, N, C, OC, 1.0f, y, OC, w, C, 0.0f, x, C);
                            else if (!l)
                                lp_matmul_forward(y, x, w, b, N, C, OC);
                            else if (bwd && T->f32_matmul_backward(x, y, &q, N, C, OC) != LP_OK)
                                return 1;
                            else if (!bwd && T->f32_matmul_forward(y, x, &q, b, N, C, OC) != LP_OK)
                                return 1;
                        double dt = (now() - t0) / inner;
                        if (r) { /* the first pass warms caches and threads */
                            double *best = l ? &tp[l - 1] : &tb;
                            *best = dt < *best ? dt : *best;
                        }
                    }
                printf("%-20s %5lld %3d %6.1f (%3.0f%%)", sh[s].what, (long long)N, thr[t], fl / tb * 1e-9,
                       100.0 * fl / tb * 1e-9 / peak[0][t]);
                for (int l = 0; l < nl; l++)
                    printf(" %6.1f (%3.0f%%) %4.2fx", fl / tp[l] * 1e-9, 100.0 * fl / tp[l] * 1e-9 / peak[l][t],
                           tb / tp[l]);
                if (bwd)
                    printf("  pack %.2f ms (%.2fx)", tpack * 1e3, tpack / tb);
                printf("\n");
                fflush(stdout);
                lp_qweight_free(&q);
                free(w), free(x), free(y), free(b);
            }
    return 0;
}
