/* Decode is a GEMV per layer: every weight byte read once per token. This measures the
 * weight bytes per second each format's GEMV streams, against the machine's memory
 * bandwidth measured here by a STREAM-like triad (a = b + s c over three arrays larger than
 * the last-level cache), at each thread count. Working sets: "DRAM" = copies of a 4096 x
 * 4096 weight until the format's bytes reach --mib (default 512, past this machine's 260 MiB
 * L3: copies, so each is a separate stream, as a model's layers are) and "LLC" = 48 MiB (a
 * small model resident in L3). f32 goes through OpenBLAS sgemv; NF4 through the fused
 * dequant-GEMV and, for comparison, dequantize-then-sgemv (the whole f32 weight written and
 * read back). Then prefill: N = 512 activation rows through the same integer kernels
 * against f32 sgemm, in GFLOP/s. Best of --reps passes; asserts nothing.
 * Usage: bench_qgemv [--reps N] [--threads 1,2] [--mib M] [--prefill-only] (no triad, no GEMV)
 *        [--cpu-time] (thread CPU time: one-thread prefill on a busy machine)
 *        [--qwen] (only the prefill GEMMs of a Qwen2.5-0.5B layer at N = 128, Q8_0 tiles vs sgemm) */
#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "loupe/core.h"
#include "loupe/kernels.h"

enum { R = 4096, C = 4096 };

static int reps = 5;

/* --cpu-time: the calling thread's CPU time instead of wall time, for one-thread prefill
 * figures on a shared machine (time slices given to other processes do not count; their
 * cache pollution still does) */
static clockid_t clk = CLOCK_MONOTONIC;

static double now(void)
{
    struct timespec ts;
    clock_gettime(clk, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void ok(lp_status st)
{
    if (st != LP_OK) {
        fprintf(stderr, "bench_qgemv: %s\n", lp_err_msg());
        exit(1);
    }
}

/* STREAM triad over three arrays of n floats; GB/s counts 3 x 4 bytes per element. */
static double triad(int64_t n)
{
    float *a = malloc((size_t)n * 4), *b = malloc((size_t)n * 4), *c = malloc((size_t)n * 4);
    if (!a || !b || !c)
        exit(1);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++)
        a[i] = 0.0f, b[i] = 1.0f, c[i] = 2.0f;
    double best = 1e30;
    for (int r = 0; r < reps + 1; r++) {
        double t0 = now();
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < n; i++)
            a[i] = b[i] + 3.0f * c[i];
        double t = now() - t0;
        if (r && t < best)
            best = t;
    }
    volatile float sink = a[n / 2];
    (void)sink;
    free(a), free(b), free(c);
    return 12.0 * (double)n / best * 1e-9;
}

/* The 4096 x 4096 weight of type t (LP_GGML_TYPE_*), from w where loupe quantizes to t,
 * else random blocks with small f16 scale fields. */
static void base_weight(lp_qweight *q, lp_ggml_type t, const float *w)
{
    if (lp_ggml_can_quantize(t)) {
        ok(lp_qweight_quantize_ggml(q, t, w, R, C, "bench"));
        return;
    }
    const lp_ggml_type_traits *tt = lp_ggml_type_traits_get(t);
    const int64_t nb = (int64_t)R * C / tt->block;
    uint8_t *raw = malloc((size_t)(nb * tt->bytes));
    lp_rng rng;
    lp_rng_init(&rng, 7, LP_RNG_STREAM_INIT);
    for (int64_t i = 0; i < nb * tt->bytes; i += 4) {
        uint32_t u = lp_rng_u32(&rng);
        memcpy(raw + i, &u, nb * tt->bytes - i < 4 ? (size_t)(nb * tt->bytes - i) : 4);
    }
    const uint16_t h = lp_f32_to_f16(0.01f);
    for (int64_t b = 0; b < nb; b++) {
        uint8_t *p = raw + b * tt->bytes;
        if (t == LP_GGML_TYPE_Q6_K)
            memcpy(p + 208, &h, 2);
        else
            memcpy(p, &h, 2), memcpy(p + 2, &h, 2);
    }
    ok(lp_qweight_from_ggml(q, t, raw, R, C, "bench"));
    free(raw);
}

/* A copy of an NF4 weight (its one block duplicated and the pointers moved with it). */
static void nf4_copy(lp_qweight *dst, const lp_qweight *src)
{
    const size_t n = lp_qweight_nbytes(src);
    uint8_t *m = lp_alloc(n, LP_MEM_CATEGORY_QUANTIZED_WEIGHT, "bench nf4 copy");
    if (!m)
        exit(1);
    memcpy(m, src->mem, n);
    *dst = *src;
    const uint8_t *s = src->mem;
    dst->mem = m;
    dst->codes = m + (src->codes - s);
    dst->absmax = src->absmax ? (float *)(m + ((const uint8_t *)src->absmax - s)) : NULL;
    dst->absmax_q = src->absmax_q ? m + (src->absmax_q - s) : NULL;
    dst->nested_absmax = src->nested_absmax ? (float *)(m + ((const uint8_t *)src->nested_absmax - s)) : NULL;
}

typedef enum { K_GGML, K_F32, K_NF4_FUSED, K_NF4_DEQ } kind;

/* Best seconds of one GEMV over every copy (one token through `copies` layers). */
static double pass(kind k, lp_qweight *qs, float **fs, int copies, const float *x, float *y, float *tmp)
{
    double best = 1e30;
    for (int r = 0; r < reps + 1; r++) {
        double t0 = now();
        for (int c = 0; c < copies; c++) {
            if (k == K_F32)
                cblas_sgemv(CblasRowMajor, CblasNoTrans, R, C, 1.0f, fs[c], C, x, 1, 0.0f, y, 1);
            else if (k == K_NF4_DEQ) { /* dequantize-then-multiply: the f32 weight is written, then read */
                lp_qweight_dequantize(tmp, &qs[c], 0, (int64_t)R * C);
                cblas_sgemv(CblasRowMajor, CblasNoTrans, R, C, 1.0f, tmp, C, x, 1, 0.0f, y, 1);
            } else
                ok(lp_qmatmul_forward(y, x, &qs[c], NULL, 1, C, R));
        }
        double t = now() - t0;
        if (r && t < best)
            best = t;
    }
    return best;
}

static void gemv_row(const char *name, kind k, lp_ggml_type t, const float *w, const lp_qweight *nf4, double mib,
                     double bw, const float *x, float *y, float *tmp)
{
    lp_qweight base = {0};
    size_t bytes;
    if (k == K_F32)
        bytes = (size_t)R * C * 4;
    else if (k == K_GGML) {
        base_weight(&base, t, w);
        bytes = lp_qweight_nbytes(&base);
    } else
        bytes = lp_qweight_nbytes(nf4);
    int copies = (int)(mib * 1048576.0 / (double)bytes + 0.999);
    copies = copies < 1 ? 1 : copies;
    lp_qweight *qs = calloc((size_t)copies, sizeof *qs);
    float **fs = calloc((size_t)copies, sizeof *fs);
    for (int c = 0; c < copies; c++) {
        if (k == K_F32) {
            fs[c] = malloc(bytes);
            memcpy(fs[c], w, bytes);
        } else if (k == K_GGML)
            ok(lp_qweight_from_ggml(&qs[c], t, base.blocks, R, C, "bench copy"));
        else
            nf4_copy(&qs[c], nf4);
    }
    double s = pass(k, qs, fs, copies, x, y, tmp);
    double gbs = (double)bytes * copies / s * 1e-9;
    printf("  %-22s %7.1f MiB  %8.2f ms/token  %6.1f GB/s  %5.1f %% of triad  %7.1f GB/s as f32\n", name,
           (double)bytes * copies / 1048576.0, s * 1e3, gbs, 100.0 * gbs / bw,
           (double)R * C * 4.0 * copies / s * 1e-9);
    for (int c = 0; c < copies; c++) {
        if (k == K_F32)
            free(fs[c]);
        else
            lp_qweight_free(&qs[c]);
    }
    free(qs);
    free(fs);
    lp_qweight_free(&base);
}

/* One prefill GEMM (OC, K) with N activation rows, best of reps; tiles: the Q8_0 / Q4_0
 * weight repacked at load (lp_qweight_ggml_pack_tiles, as a model's Linears are), else
 * packed per call. */
static void prefill(const char *name, lp_ggml_type t, bool tiles, const float *w, const float *x, float *y,
                    int64_t OC, int64_t K, int64_t N)
{
    double best = 1e30;
    lp_qweight q = {0};
    if (t != LP_GGML_TYPE_F32) {
        ok(lp_qweight_quantize_ggml(&q, t, w, OC, K, "bench prefill"));
        if (tiles)
            ok(lp_qweight_ggml_pack_tiles(&q));
    }
    for (int r = 0; r < reps + 1; r++) {
        double t0 = now();
        if (t == LP_GGML_TYPE_F32)
            lp_matmul_forward(y, x, w, NULL, N, K, OC);
        else
            ok(lp_qmatmul_forward(y, x, &q, NULL, N, K, OC));
        double s = now() - t0;
        if (r && s < best)
            best = s;
    }
    printf("  %-22s %4lld x %4lld N = %3lld %8.1f GFLOP/s\n", name, (long long)OC, (long long)K, (long long)N,
           2.0 * (double)N * OC * K / best * 1e-9);
    lp_qweight_free(&q);
}

int main(int argc, char **argv)
{
    char threads[64] = "1,2";
    double mib = 512;
    bool prefill_only = false, qwen = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--prefill-only"))
            prefill_only = true;
        else if (!strcmp(argv[i], "--qwen"))
            qwen = prefill_only = true;
        else if (!strcmp(argv[i], "--cpu-time"))
            clk = CLOCK_THREAD_CPUTIME_ID;
        else if (i + 1 < argc && !strcmp(argv[i], "--reps"))
            reps = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--threads"))
            snprintf(threads, sizeof threads, "%s", argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--mib"))
            mib = atof(argv[++i]);
    }
    lp_kernels_init();
    float *w = malloc((size_t)R * C * 4), *x = malloc((size_t)C * 4 * 512), *y = malloc((size_t)R * 4 * 512);
    float *tmp = malloc((size_t)R * C * 4);
    lp_rng rng;
    lp_rng_init(&rng, 1234, LP_RNG_STREAM_INIT);
    lp_rng_uniform(&rng, w, (int64_t)R * C, -0.05f, 0.05f);
    lp_rng_uniform(&rng, x, (int64_t)C * 512, -1.0f, 1.0f);
    lp_qweight nf4;
    ok(lp_qweight_quantize(&nf4, LP_DTYPE_NF4, w, R, C, true, "bench nf4"));
    static const struct {
        const char *name;
        lp_ggml_type t;
    } fm[] = {{"Q8_0", LP_GGML_TYPE_Q8_0}, {"Q4_0", LP_GGML_TYPE_Q4_0}, {"Q4_1", LP_GGML_TYPE_Q4_1},
              {"Q4_K", LP_GGML_TYPE_Q4_K}, {"Q6_K", LP_GGML_TYPE_Q6_K}, {"F16", LP_GGML_TYPE_F16},
              {"BF16", LP_GGML_TYPE_BF16}};
    for (char *tok = strtok(threads, ","); tok; tok = strtok(NULL, ",")) {
        const int th = atoi(tok);
        lp_threads_set(th);
        const double bw = prefill_only ? 0.0 : triad((int64_t)3 << 26); /* 3 x 768 MiB */
        if (prefill_only)
            printf("threads %d:\n", th);
        else
            printf("threads %d: triad %.1f GB/s\n", th, bw);
        for (int ws = 0; ws < (prefill_only ? 0 : 2); ws++) {
            const double m = ws ? 48 : mib;
            printf(" GEMV, N = 1, 4096 x 4096 weights, %s working set (%.0f MiB):\n", ws ? "LLC" : "DRAM", m);
            gemv_row("F32 (OpenBLAS sgemv)", K_F32, LP_GGML_TYPE_F32, w, NULL, m, bw, x, y, tmp);
            for (size_t i = 0; i < sizeof fm / sizeof fm[0]; i++)
                gemv_row(fm[i].name, K_GGML, fm[i].t, w, NULL, m, bw, x, y, tmp);
            gemv_row("NF4 fused", K_NF4_FUSED, LP_GGML_TYPE_F32, w, &nf4, m, bw, x, y, tmp);
            gemv_row("NF4 dequant+sgemv", K_NF4_DEQ, LP_GGML_TYPE_F32, w, &nf4, m, bw, x, y, tmp);
        }
        printf(" prefill GEMM (Q8_0 / Q4_0 at N >= 8: the tiled integer GEMM; 'tiles': packed at load):\n");
        /* a 2048-square weight, then SmolLM2-135M's MLP up / down shapes */
        static const int64_t shapes[][3] = {{2048, 2048, 16}, {2048, 2048, 64}, {2048, 2048, 512},
                                            {1536, 576, 512}, {576, 1536, 512}};
        /* Qwen2.5-0.5B's layer at a 128-token prefill: q / o, k / v, gate / up, down */
        static const int64_t qshapes[][3] = {
            {896, 896, 128}, {128, 896, 128}, {4864, 896, 128}, {896, 4864, 128}};
        for (int k = 0; qwen && k < 4; k++) {
            prefill("F32 (OpenBLAS sgemm)", LP_GGML_TYPE_F32, false, w, x, y, qshapes[k][0], qshapes[k][1],
                    qshapes[k][2]);
            prefill("Q8_0 tiles", LP_GGML_TYPE_Q8_0, true, w, x, y, qshapes[k][0], qshapes[k][1],
                    qshapes[k][2]);
        }
        for (int k = 0; !qwen && k < 5; k++) {
            const int64_t OC = shapes[k][0], K = shapes[k][1], N = shapes[k][2];
            prefill("F32 (OpenBLAS sgemm)", LP_GGML_TYPE_F32, false, w, x, y, OC, K, N);
            prefill("Q8_0", LP_GGML_TYPE_Q8_0, false, w, x, y, OC, K, N);
            prefill("Q8_0 tiles", LP_GGML_TYPE_Q8_0, true, w, x, y, OC, K, N);
            prefill("Q4_0", LP_GGML_TYPE_Q4_0, false, w, x, y, OC, K, N);
            prefill("Q4_0 tiles", LP_GGML_TYPE_Q4_0, true, w, x, y, OC, K, N);
        }
    }
    lp_qweight_free(&nf4);
    free(w), free(x), free(y), free(tmp);
    return 0;
}
