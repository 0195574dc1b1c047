/* The CUDA NN kernels (src/kernels/cuda/cu_*.cu) against the CPU reference table on the same
 * host inputs: layernorm, rmsnorm, softmax, embedding, cross-entropy, rope and fused attention,
 * forward and backward (the backward cases are the gradient check: the CPU reference
 * backward is itself held to finite differences by test_kernels_grad). One line per case:
 * op, shape, max abs and rel error, the tolerance, PASS/FAIL, CUDA time per call (events).
 * Outputs start NaN-filled on the device, so an element a kernel forgot shows up; "+="
 * gradients start from the same random values on both sides.
 *
 * Tolerances (|gpu - ref| <= atol + rtol |ref|): the reference sums in double (norms,
 * softmax, cross-entropy) or in f32 in another order (attention); the GPU sums in f32 in
 * tree order, so errors are a few ulps times the length of the reduction:
 *   norms/softmax outputs 2e-5 abs + 1e-4 rel (rows of <= 1000: f32 sums of O(1) terms);
 *   parameter gradients (sums over N <= 2048 rows of O(1) terms) 1e-3 abs + 1e-4 rel;
 *   attention out/lse 2e-5 abs + 1e-4 rel, dq/dk/dv 1e-4 abs + 1e-3 rel (sums over T <= 512
 *   keys of products of O(1) values, exp in f32 both sides);
 *   embedding forward exact (the same three adds in the same order), backward 1e-6 n abs +
 *   1e-5 rel for a row with n contributions (atomics add them in another order).
 * Attention as GEMMs (src/kernels/attn_gemm.h; the CUDA table's attention entries run it
 * with TF32 on, cuda_attention.c): its SIMT steps against the CPU steps (head copies exact;
 * softmax and its backward 1e-6 abs + 1e-5 rel: the same f32 operations, sums in another
 * order); then the whole path against the fused reference: on the emulator the composition
 * over the emulated steps and a host GEMM (1e-5 abs + 1e-5 rel, as test_attention_gemm); on a
 * GPU through the table, with f32 GEMMs (LP_CUDA_ATTN_GEMM, TF32 off: the fused kernels'
 * tolerances) and with TF32 (AUTO, TF32 on): out/lse 3e-3 abs + 5e-3 rel, dq/dk/dv 1e-2 abs +
 * 1e-2 rel, because TF32 keeps 10 of f32's 23 mantissa bits (operands rounded by ~5e-4 to
 * 1e-3 relative) in the scores' and the gradients' GEMMs, whose sums run over D (forward)
 * and T or grp*T (backward). test_attention_gemm measures that error on the CPU with
 * truncated operands (the worse rounding) and keeps it under a third of these bounds.
 * Without a GPU (no device, no driver) it prints the reason and exits 77 (ctest: skipped). */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "loupe/kernels.h"
#include "../../src/kernels/attn_gemm.h"
#include "../../src/kernels/cuda/cu_nn.h"
#ifndef LP_CUDA_EMU
#include "cuda_test_util.h" /* ct_init: the CUDA backend, or the skip */
#endif

cudaStream_t lp_cu_nn_stream(void); /* cu_nn_common.cuh, which is CUDA C++ */

static int g_fail, g_cases;
static const lp_kernel_table *R; /* the CPU reference */
static const lp_kernel_table *K; /* the ops under test: the CUDA backend's table */

#ifdef LP_CUDA_EMU
/* the emulator has no backend: the same launchers in a table of their own */
static const lp_kernel_table emu_table = {
    .name = "cuda-emu",
    LP_CU_NN_TABLE_ENTRIES
    .attention_fused_forward = lp_cu_attention_fused_forward,
    .attention_fused_backward = lp_cu_attention_fused_backward,
};
#endif

/* Waits for the ops queued and returns the first error they kept (a launch failure, a call
 * refused, an id or label out of range): the backend's sync. */
static lp_status sync_status(void)
{
#ifdef LP_CUDA_EMU
    return lp_cu_nn_take_error();
#else
    return ct_be->sync(ct_be->ctx);
#endif
}
static uint32_t g_seed = 12345;

static float frand(float lo, float hi)
{
    g_seed = g_seed * 1664525u + 1013904223u;
    return lo + (hi - lo) * (float)(g_seed >> 8) / 16777216.0f;
}

static float *hrand(int64_t n, float lo, float hi)
{
    float *p = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    for (int64_t i = 0; i < n; i++)
        p[i] = frand(lo, hi);
    return p;
}

static float *hcopy(const float *x, int64_t n)
{
    float *p = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    memcpy(p, x, (size_t)n * sizeof(float));
    return p;
}

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static void ck(cudaError_t e, const char *what)
{
    if (e != cudaSuccess) {
        fprintf(stderr, "FATAL: %s: %s\n", what, cudaGetErrorString(e));
        exit(1);
    }
}

/* device copy of n bytes of host memory */
static void *dput(const void *h, size_t bytes)
{
    void *d = NULL;
    ck(cudaMalloc(&d, bytes ? bytes : 4), "cudaMalloc");
    if (bytes) /* on the ops' stream (non-blocking: the legacy stream would not order it) */
        ck(cudaMemcpyAsync(d, h, bytes, cudaMemcpyHostToDevice, lp_cu_nn_stream()), "upload");
    ck(cudaStreamSynchronize(lp_cu_nn_stream()), "upload sync");
    return d;
}
#define DPUTF(h, n) ((float *)dput((h), (size_t)(n) * sizeof(float)))
#define DPUTI(h, n) ((int32_t *)dput((h), (size_t)(n) * sizeof(int32_t)))

/* device buffer of n floats, NaN-filled (all bits set) */
static float *dnan(int64_t n)
{
    void *d = NULL;
    ck(cudaMalloc(&d, (size_t)(n > 0 ? n : 1) * sizeof(float)), "cudaMalloc");
    ck(cudaMemsetAsync(d, 0xFF, (size_t)(n > 0 ? n : 1) * sizeof(float), lp_cu_nn_stream()), "memset");
    return d;
}

/* host copy of n device floats (waits for the stream) */
static float *dget(const float *d, int64_t n)
{
    if (sync_status() != LP_OK) {
        fprintf(stderr, "FATAL: an op failed: %s\n", lp_err_msg());
        exit(1);
    }
    float *h = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    ck(cudaMemcpyAsync(h, d, (size_t)n * sizeof(float), cudaMemcpyDeviceToHost, lp_cu_nn_stream()),
       "download");
    ck(cudaStreamSynchronize(lp_cu_nn_stream()), "download sync");
    return h;
}

typedef struct errs {
    double abs, rel, worst; /* worst: the largest |err| / (atol + rtol |ref|) */
    int64_t at;
} errs;

static errs cmp(const float *got, const float *want, int64_t n, double atol, double rtol)
{
    errs e = {0, 0, 0, -1};
    for (int64_t i = 0; i < n; i++) {
        double a = got[i], b = want[i], r;
        if (isnan(b) && isnan(a))
            continue;
        if (isinf(b) && a == b)
            continue;
        double d = isnan(a) || isnan(b) || isinf(a) || isinf(b) ? INFINITY : fabs(a - b);
        r = d / (atol + rtol * fabs(b));
        if (d > e.abs)
            e.abs = d;
        if (b != 0 && d / fabs(b) > e.rel)
            e.rel = d / fabs(b);
        if (r > e.worst) {
            e.worst = r;
            e.at = i;
        }
    }
    return e;
}

/* one result line; time_us < 0: not timed */
static void report(const char *op, const char *shape, errs e, double atol, double rtol, double time_us,
                   const float *got, const float *want)
{
    int ok = e.worst <= 1.0;
    g_cases++;
    if (!ok)
        g_fail++;
    printf("%-28s %-44s max_abs %.3e max_rel %.3e tol %.0e+%.0e*|ref|  %s", op, shape, e.abs, e.rel, atol,
           rtol, ok ? "PASS" : "FAIL");
    if (time_us >= 0)
        printf("  %9.2f us/call", time_us);
    printf("\n");
    if (!ok && e.at >= 0)
        printf("    worst at %lld: got %.9g want %.9g\n", (long long)e.at, (double)got[e.at],
               (double)want[e.at]);
}

static void check(const char *op, const char *shape, const float *dgot, const float *want, int64_t n,
                  double atol, double rtol, double time_us)
{
    float *got = dget(dgot, n);
    report(op, shape, cmp(got, want, n, atol, rtol), atol, rtol, time_us, got, want);
    free(got);
}

static void expect(int cond, const char *what)
{
    g_cases++;
    if (!cond)
        g_fail++;
    printf("%-28s %-44s %s\n", "check", what, cond ? "PASS" : "FAIL");
}

/* CUDA time per call of a launch expression, over reps calls after one warm-up */
static cudaEvent_t ev0, ev1;
#define TIME_US(reps, stmt)                                                                                  \
    ({                                                                                                       \
        stmt;                                                                                                \
        ck(cudaEventRecord(ev0, lp_cu_nn_stream()), "event");                                                \
        for (int rep_ = 0; rep_ < (reps); rep_++) {                                                          \
            stmt;                                                                                            \
        }                                                                                                    \
        ck(cudaEventRecord(ev1, lp_cu_nn_stream()), "event");                                                \
        ck(cudaEventSynchronize(ev1), "event sync");                                                         \
        float ms_ = 0.0f;                                                                                    \
        ck(cudaEventElapsedTime(&ms_, ev0, ev1), "elapsed");                                                 \
        1000.0 * (double)ms_ / (reps);                                                                       \
    })

/* ---- layernorm --------------------------------------------------------------------------- */

static void case_layernorm(int64_t N, int64_t C)
{
    char shape[64];
    snprintf(shape, sizeof shape, "N=%lld C=%lld", (long long)N, (long long)C);
    float *x = hrand(N * C, -2, 2), *w = hrand(C, 0.5f, 1.5f), *bi = hrand(C, -0.5f, 0.5f);
    float *out = malloc(N * C * 4), *mean = malloc(N * 4), *rstd = malloc(N * 4);
    R->layernorm_forward(out, mean, rstd, x, w, bi, N, C, 1e-5f);
    float *dx = DPUTF(x, N * C), *dw = DPUTF(w, C), *db = DPUTF(bi, C);
    float *dout_ = dnan(N * C), *dmean = dnan(N), *drstd = dnan(N);
    K->layernorm_forward(dout_, dmean, drstd, dx, dw, db, N, C, 1e-5f);
    double t = TIME_US(10, K->layernorm_forward(dout_, dmean, drstd, dx, dw, db, N, C, 1e-5f));
    check("layernorm_forward out", shape, dout_, out, N * C, 2e-5, 1e-4, t);
    check("layernorm_forward mean", shape, dmean, mean, N, 2e-5, 1e-4, -1);
    check("layernorm_forward rstd", shape, drstd, rstd, N, 2e-5, 1e-4, -1);
    /* backward: dweight/dbias += onto random starting values */
    float *g = hrand(N * C, -1, 1), *gw0 = hrand(C, -1, 1), *gb0 = hrand(C, -1, 1);
    float *gx = malloc(N * C * 4), *gw = hcopy(gw0, C), *gb = hcopy(gb0, C);
    R->layernorm_backward(gx, gw, gb, g, x, w, mean, rstd, N, C);
    float *dg = DPUTF(g, N * C), *dgx = dnan(N * C), *dgw = DPUTF(gw0, C), *dgb = DPUTF(gb0, C);
    K->layernorm_backward(dgx, dgw, dgb, dg, dx, dw, dmean, drstd, N, C);
    check("layernorm_backward dinp", shape, dgx, gx, N * C, 2e-5, 1e-4, -1);
    check("layernorm_backward dweight", shape, dgw, gw, C, 1e-3, 1e-4, -1);
    check("layernorm_backward dbias", shape, dgb, gb, C, 1e-3, 1e-4, -1);
    t = TIME_US(10, K->layernorm_backward(dgx, dgw, dgb, dg, dx, dw, dmean, drstd, N, C));
    printf("%-28s %-44s %9.2f us/call\n", "layernorm_backward (time)", shape, t);
    void *dev[] = {dx, dw, db, dout_, dmean, drstd, dg, dgx, dgw, dgb};
    for (size_t i = 0; i < sizeof dev / sizeof *dev; i++)
        cudaFree(dev[i]);
    free(x), free(w), free(bi), free(out), free(mean), free(rstd), free(g), free(gw0), free(gb0), free(gx),
        free(gw), free(gb);
}

/* ---- rmsnorm ----------------------------------------------------------------------------- */

static void case_rmsnorm(int64_t N, int64_t C, int inplace)
{
    char shape[64];
    snprintf(shape, sizeof shape, "N=%lld C=%lld%s", (long long)N, (long long)C, inplace ? " dinp=dout" : "");
    float *x = hrand(N * C, -2, 2), *w = hrand(C, 0.5f, 1.5f);
    float *out = malloc(N * C * 4), *rstd = malloc(N * 4);
    R->rmsnorm_forward(out, rstd, x, w, N, C, 1e-6f);
    float *dx = DPUTF(x, N * C), *dw = DPUTF(w, C), *dout_ = dnan(N * C), *drstd = dnan(N);
    K->rmsnorm_forward(dout_, drstd, dx, dw, N, C, 1e-6f);
    double t = TIME_US(10, K->rmsnorm_forward(dout_, drstd, dx, dw, N, C, 1e-6f));
    check("rmsnorm_forward out", shape, dout_, out, N * C, 2e-5, 1e-4, t);
    check("rmsnorm_forward rstd", shape, drstd, rstd, N, 2e-5, 1e-4, -1);
    float *g = hrand(N * C, -1, 1), *gw0 = hrand(C, -1, 1), *gx = malloc(N * C * 4), *gw = hcopy(gw0, C);
    R->rmsnorm_backward(gx, gw, g, x, w, rstd, N, C);
    float *dg = DPUTF(g, N * C), *dgx = inplace ? dg : dnan(N * C), *dgw = DPUTF(gw0, C);
    K->rmsnorm_backward(dgx, dgw, dg, dx, dw, drstd, N, C);
    check("rmsnorm_backward dinp", shape, dgx, gx, N * C, 2e-5, 1e-4, -1);
    check("rmsnorm_backward dweight", shape, dgw, gw, C, 1e-3, 1e-4, -1);
    if (!inplace) {
        t = TIME_US(10, K->rmsnorm_backward(dgx, dgw, dg, dx, dw, drstd, N, C));
        printf("%-28s %-44s %9.2f us/call\n", "rmsnorm_backward (time)", shape, t);
        cudaFree(dgx);
    }
    cudaFree(dx), cudaFree(dw), cudaFree(dout_), cudaFree(drstd), cudaFree(dg), cudaFree(dgw);
    free(x), free(w), free(out), free(rstd), free(g), free(gw0), free(gx), free(gw);
}

/* ---- softmax ----------------------------------------------------------------------------- */

static void case_softmax(int64_t N, int64_t C)
{
    char shape[64];
    snprintf(shape, sizeof shape, "N=%lld C=%lld", (long long)N, (long long)C);
    float *x = hrand(N * C, -8, 8), *out = malloc(N * C * 4);
    x[0] = -INFINITY; /* -inf entries get probability 0 */
    R->softmax_forward(out, x, N, C);
    float *dx = DPUTF(x, N * C), *dy = dnan(N * C);
    K->softmax_forward(dy, dx, N, C);
    double t = TIME_US(10, K->softmax_forward(dy, dx, N, C));
    check("softmax_forward", shape, dy, out, N * C, 1e-6, 1e-4, t);
    float *g = hrand(N * C, -1, 1), *gx = malloc(N * C * 4);
    R->softmax_backward(gx, g, out, N, C);
    float *dg = DPUTF(g, N * C), *dgx = dnan(N * C), *dout_ = DPUTF(out, N * C);
    K->softmax_backward(dgx, dg, dout_, N, C);
    t = TIME_US(10, K->softmax_backward(dgx, dg, dout_, N, C));
    check("softmax_backward", shape, dgx, gx, N * C, 1e-6, 1e-4, t);
    cudaFree(dx), cudaFree(dy), cudaFree(dg), cudaFree(dgx), cudaFree(dout_);
    free(x), free(out), free(g), free(gx);
}

/* ---- embedding --------------------------------------------------------------------------- */

static void case_embedding(int64_t B, int64_t T, int64_t C, int64_t V, int64_t P, int64_t TT, int64_t off,
                           int use_wpe, int use_types)
{
    char shape[80];
    snprintf(shape, sizeof shape, "B=%lld T=%lld C=%lld V=%lld off=%lld%s%s", (long long)B, (long long)T,
             (long long)C, (long long)V, (long long)off, use_wpe ? " +pos" : "", use_types ? " +type" : "");
    int32_t *ids = malloc(B * T * 4), *ty = malloc(B * T * 4);
    for (int64_t i = 0; i < B * T; i++) {
        ids[i] = (int32_t)(frand(0, 1) * (float)V) % (int32_t)V;
        ty[i] = (int32_t)(frand(0, 1) * (float)TT) % (int32_t)TT;
    }
    ids[1 % (B * T)] = ids[0]; /* a repeated id */
    float *wte = hrand(V * C, -1, 1), *wpe = hrand(P * C, -1, 1), *wtt = hrand(TT * C, -1, 1);
    float *out = malloc(B * T * C * 4);
    lp_status st = R->embedding_forward(out, ids, use_types ? ty : NULL, wte, use_wpe ? wpe : NULL,
                                        use_types ? wtt : NULL, B, T, C, V, P, TT, off);
    if (st != LP_OK) {
        printf("embedding reference refused: %s\n", lp_err_msg());
        g_fail++;
        return;
    }
    int32_t *dids = DPUTI(ids, B * T), *dty = DPUTI(ty, B * T);
    float *dwte = DPUTF(wte, V * C), *dwpe = DPUTF(wpe, P * C), *dwtt = DPUTF(wtt, TT * C),
          *dy = dnan(B * T * C);
    st = K->embedding_forward(dy, dids, use_types ? dty : NULL, dwte, use_wpe ? dwpe : NULL,
                              use_types ? dwtt : NULL, B, T, C, V, P, TT, off);
    double t =
        TIME_US(10, (void)K->embedding_forward(dy, dids, use_types ? dty : NULL, dwte, use_wpe ? dwpe : NULL,
                                               use_types ? dwtt : NULL, B, T, C, V, P, TT, off));
    check("embedding_forward", shape, dy, out, B * T * C, 0, 0, t);
    expect(st == LP_OK && sync_status() == LP_OK, "embedding_forward: LP_OK, sync LP_OK");
    /* backward: += onto random tables */
    float *g = hrand(B * T * C, -1, 1), *gte0 = hrand(V * C, -1, 1), *gpe0 = hrand(P * C, -1, 1),
          *gtt0 = hrand(TT * C, -1, 1);
    float *gte = hcopy(gte0, V * C), *gpe = hcopy(gpe0, P * C), *gtt = hcopy(gtt0, TT * C);
    R->embedding_backward(gte, use_wpe ? gpe : NULL, use_types ? gtt : NULL, g, ids, use_types ? ty : NULL, B,
                          T, C, off);
    float *dg = DPUTF(g, B * T * C), *dgte = DPUTF(gte0, V * C), *dgpe = DPUTF(gpe0, P * C),
          *dgtt = DPUTF(gtt0, TT * C);
    K->embedding_backward(dgte, use_wpe ? dgpe : NULL, use_types ? dgtt : NULL, dg, dids,
                          use_types ? dty : NULL, B, T, C, off);
    /* atomics add a row's n contributions (|x| <= 1) in any order: f32 sums of n terms differ
     * by a few ulps of the sum per term; 1e-6 n absolute (the sums stay below ~2n) + 1e-5 rel */
    int64_t *cnt = calloc((size_t)(V + TT), sizeof(int64_t)), n_id = 1, n_ty = 1;
    for (int64_t i = 0; i < B * T; i++) {
        int64_t a = ++cnt[ids[i]], t = ++cnt[V + (use_types ? ty[i] : 0)];
        n_id = a > n_id ? a : n_id;
        n_ty = t > n_ty ? t : n_ty;
    }
    free(cnt);
    check("embedding_backward dwte", shape, dgte, gte, V * C, 1e-6 * (double)n_id + 1e-6, 1e-5, -1);
    check("embedding_backward dwpe", shape, dgpe, gpe, P * C, 1e-6 * (double)B + 1e-6, 1e-5, -1);
    check("embedding_backward dwtt", shape, dgtt, gtt, TT * C, 1e-6 * (double)n_ty + 1e-6, 1e-5, -1);
    /* an id outside the vocabulary: its row NaN, the error recorded as LP_STATUS_RANGE */
    int32_t bad = (int32_t)V;
    ck(cudaMemcpyAsync(dids + (B * T - 1), &bad, 4, cudaMemcpyHostToDevice, lp_cu_nn_stream()), "upload");
    st = K->embedding_forward(dy, dids, NULL, dwte, NULL, NULL, B, T, C, V, P, TT, off);
    lp_status st1 = sync_status(), st2 = sync_status();
    float *y = dget(dy, B * T * C);
    expect(st == LP_OK && st1 == LP_STATUS_RANGE && st2 == LP_OK && isnan(y[(B * T - 1) * C]),
           "embedding bad id: NaN row, RANGE at the next sync only");
    expect(K->embedding_forward(dy, dids, NULL, dwte, dwpe, NULL, B, T, C, V, T + off - 1, TT, off) ==
               LP_STATUS_RANGE,
           "embedding positions past P: RANGE at once");
    free(y);
    void *dev[] = {dids, dty, dwte, dwpe, dwtt, dy, dg, dgte, dgpe, dgtt};
    for (size_t i = 0; i < sizeof dev / sizeof *dev; i++)
        cudaFree(dev[i]);
    free(ids), free(ty), free(wte), free(wpe), free(wtt), free(out), free(g), free(gte0), free(gpe0),
        free(gtt0), free(gte), free(gpe), free(gtt);
}

/* ---- cross-entropy ----------------------------------------------------------------------- */

static void case_cross_entropy(int64_t N, int64_t V, int n_ignored)
{
    char shape[64];
    snprintf(shape, sizeof shape, "N=%lld V=%lld ignored=%d", (long long)N, (long long)V, n_ignored);
    float *x = hrand(N * V, -6, 6);
    int32_t *tg = malloc(N * 4);
    for (int64_t i = 0; i < N; i++)
        tg[i] = i < n_ignored ? -100 : (int32_t)(frand(0, 1) * (float)V) % (int32_t)V;
    float loss = NAN, *lse = malloc(N * 4);
    if (R->cross_entropy_forward(&loss, lse, x, tg, N, V, -100) != LP_OK) {
        printf("cross-entropy reference refused: %s\n", lp_err_msg());
        g_fail++;
        return;
    }
    float *dx = DPUTF(x, N * V), *dlse = dnan(N), *dloss = dnan(1);
    int32_t *dtg = DPUTI(tg, N);
    lp_status st = K->cross_entropy_forward(dloss, dlse, dx, dtg, N, V, -100);
    double t = TIME_US(10, (void)K->cross_entropy_forward(dloss, dlse, dx, dtg, N, V, -100));
    check("cross_entropy_forward loss", shape, dloss, &loss, 1, 1e-5, 1e-5, t);
    check("cross_entropy_forward lse", shape, dlse, lse, N, 1e-5, 1e-6, -1);
    expect(st == LP_OK && sync_status() == LP_OK, "cross_entropy_forward: LP_OK, sync LP_OK");
    float *gx = malloc(N * V * 4);
    R->cross_entropy_backward(gx, x, lse, tg, N, V, -100, 1.5f);
    float *dgx = dnan(N * V);
    K->cross_entropy_backward(dgx, dx, dlse, dtg, N, V, -100, 1.5f);
    t = TIME_US(10, K->cross_entropy_backward(dgx, dx, dlse, dtg, N, V, -100, 1.5f));
    check("cross_entropy_backward", shape, dgx, gx, N * V, 1e-9, 1e-4, t);
    /* a label outside [0, V): loss NaN, RANGE recorded */
    int32_t bad = (int32_t)V;
    ck(cudaMemcpyAsync(dtg + (N - 1), &bad, 4, cudaMemcpyHostToDevice, lp_cu_nn_stream()), "upload");
    (void)K->cross_entropy_forward(dloss, dlse, dx, dtg, N, V, -100);
    lp_status st1 = sync_status();
    float *l = dget(dloss, 1);
    expect(isnan(*l) && st1 == LP_STATUS_RANGE, "cross_entropy bad label: NaN loss, RANGE at the next sync");
    free(l);
    cudaFree(dx), cudaFree(dlse), cudaFree(dloss), cudaFree(dtg), cudaFree(dgx);
    free(x), free(tg), free(lse), free(gx);
}

/* ---- rope -------------------------------------------------------------------------------- */

static void case_rope(int64_t N, int64_t H, int64_t D, int64_t ld)
{
    char shape[64];
    snprintf(shape, sizeof shape, "N=%lld H=%lld D=%lld ld=%lld", (long long)N, (long long)H, (long long)D,
             (long long)ld);
    float *inv = malloc(D / 2 * 4), af = 1.0f;
    if (lp_rope_inv_freq(inv, D, 10000.0, NULL, &af) != LP_OK) {
        g_fail++;
        return;
    }
    int32_t *pos = malloc(N * 4);
    for (int64_t i = 0; i < N; i++)
        pos[i] = (int32_t)(frand(0, 4000));
    float *c = malloc(N * D / 2 * 4), *s = malloc(N * D / 2 * 4);
    R->rope_cache(c, s, pos, inv, 0.9f, N, D);
    int32_t *dpos = DPUTI(pos, N);
    float *dinv = DPUTF(inv, D / 2), *dc = dnan(N * D / 2), *ds = dnan(N * D / 2);
    K->rope_cache(dc, ds, dpos, dinv, 0.9f, N, D);
    double t = TIME_US(10, K->rope_cache(dc, ds, dpos, dinv, 0.9f, N, D));
    check("rope_cache cos", shape, dc, c, N * D / 2, 1e-6, 1e-6, t);
    check("rope_cache sin", shape, ds, s, N * D / 2, 1e-6, 1e-6, -1);
    /* rotate heads inside rows of ld floats (the rest of each row must stay untouched) */
    float *x = hrand(N * ld, -2, 2), *xr = hcopy(x, N * ld), *xb = hcopy(x, N * ld);
    R->rope_forward(xr, c, s, N, H, D, ld);
    R->rope_backward(xb, c, s, N, H, D, ld);
    float *dcr = DPUTF(c, N * D / 2), *dsr = DPUTF(s, N * D / 2); /* the same cache on both sides */
    float *dx = DPUTF(x, N * ld), *dxb = DPUTF(x, N * ld);
    K->rope_forward(dx, dcr, dsr, N, H, D, ld);
    K->rope_backward(dxb, dcr, dsr, N, H, D, ld);
    check("rope_forward", shape, dx, xr, N * ld, 1e-6, 1e-6, -1);
    check("rope_backward", shape, dxb, xb, N * ld, 1e-6, 1e-6, -1);
    t = TIME_US(10, K->rope_forward(dx, dcr, dsr, N, H, D, ld));
    printf("%-28s %-44s %9.2f us/call\n", "rope_forward (time)", shape, t);
    void *dev[] = {dpos, dinv, dc, ds, dcr, dsr, dx, dxb};
    for (size_t i = 0; i < sizeof dev / sizeof *dev; i++)
        cudaFree(dev[i]);
    free(inv), free(pos), free(c), free(s), free(x), free(xr), free(xb);
}

/* ---- attention as GEMMs: the SIMT steps ---------------------------------------------------- */

#ifdef LP_CUDA_EMU
/* the composition on the emulator: its steps, and a host GEMM ("device" memory is host memory
 * there; cuBLASLt is the GPU's) */
static lp_status host_gemm(void *ctx, bool ta, bool tb, int64_t M, int64_t N, int64_t K_, float alpha, const float *A,
                           int64_t lda, int64_t sa, const float *B, int64_t ldb, int64_t sb, float beta, float *C,
                           int64_t ldc, int64_t sc, int64_t batch)
{
    (void)ctx;
    for (int64_t i = 0; i < batch; i++)
        R->sgemm(ta, tb, M, N, K_, alpha, A + i * sa, lda, B + i * sb, ldb, beta, C + i * sc, ldc);
    return LP_OK;
}
static void *emu_alloc(void *ctx, size_t bytes, const char *what)
{
    (void)ctx, (void)what;
    void *p = NULL;
    ck(cudaMalloc(&p, bytes ? bytes : 4), "cudaMalloc");
    return p;
}
static void emu_free(void *ctx, void *p)
{
    (void)ctx;
    if (p)
        cudaFree(p);
}
static const lp_attn_gemm_ops emu_gemm_ops = {
    .alloc = emu_alloc,
    .free = emu_free,
    .gemm = host_gemm,
    .to_heads = lp_cu_attn_gemm_to_heads,
    .from_heads = lp_cu_attn_gemm_from_heads,
    .softmax_forward = lp_cu_attn_gemm_softmax_forward,
    .softmax_backward = lp_cu_attn_gemm_softmax_backward,
};
#endif

/* mask (B,T) of kind 1 right padding, 2 left padding, 3 segments (as case_attention's) */
static int32_t *attn_mask(int kind, int64_t B, int64_t T)
{
    int32_t *mask = malloc((size_t)(B * T) * 4);
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++) {
            int64_t pad = (b * 7 + 3) % (T / 3 + 1);
            mask[b * T + t] = kind == 1   ? t < T - pad
                              : kind == 2 ? t >= pad
                                          : (t >= T - pad ? 0 : t < T / 3 ? 1 : t < 2 * T / 3 ? 2 : 3);
        }
    return mask;
}

/* the four SIMT steps against the CPU's on the same inputs */
static void case_attn_steps(const char *name, lp_attn_geom g, int mask_kind, float drop_p)
{
    const int64_t B = g.B, T = g.T, H = g.H, D = g.D, C = H * D, ld = C + 8;
    char shape[128];
    snprintf(shape, sizeof shape, "%s B%lld T%lld H%lld D%lld%s", name, (long long)B, (long long)T, (long long)H,
             (long long)D, drop_p > 0 ? " drop" : "");
    /* head copies, both ways, with a token stride wider than the heads (columns past them kept) */
    const int64_t nx = B * T * ld, nh = B * H * T * D;
    float *x = hrand(nx, -1, 1), *xh = malloc((size_t)nh * 4), *x2 = hrand(nx, -1, 1), *x2h = hcopy(x2, nx);
    lp_attn_gemm_to_heads_cpu(xh, x, B, T, H, D, ld);
    float *dx = DPUTF(x, nx), *dxh = dnan(nh), *dx2 = DPUTF(x2, nx);
    lp_cu_attn_gemm_to_heads(dxh, dx, B, T, H, D, ld);
    check("attn_gemm to_heads", shape, dxh, xh, nh, 0, 0, -1);
    lp_attn_gemm_from_heads_cpu(x2h, xh, B, T, H, D, ld);
    lp_cu_attn_gemm_from_heads(dx2, dxh, B, T, H, D, ld);
    check("attn_gemm from_heads", shape, dx2, x2h, nx, 0, 0, -1);
    /* softmax forward and backward over random scaled scores */
    g.ldq = g.ldkv = C;
    int32_t *mask = mask_kind ? attn_mask(mask_kind, B, T) : NULL;
    g.segments = mask_kind == 3;
    lp_attn_dropout drop = {.p = drop_p, .seed = 9, .stream = 3, .offset = 77, .lane = 2};
    const lp_attn_dropout *dp = drop_p > 0 ? &drop : NULL;
    const int64_t ns = B * H * T * T;
    float *sc = hrand(ns, -4, 4), *sc2 = hcopy(sc, ns), *lse = malloc((size_t)(B * H * T) * 4);
    float *dsc = DPUTF(sc, ns), *dlse = dnan(B * H * T);
    int32_t *dmask = mask ? DPUTI(mask, B * T) : NULL;
    lp_attn_gemm_softmax_forward_cpu(sc, lse, mask, &g, dp);
    lp_cu_attn_gemm_softmax_forward(dsc, dlse, dmask, &g, dp);
    check("attn_gemm softmax_forward zp", shape, dsc, sc, ns, 1e-6, 1e-5, -1);
    check("attn_gemm softmax_forward lse", shape, dlse, lse, B * H * T, 1e-6, 1e-5, -1);
    float *pd = hrand(ns, -1, 1), *dout = hrand(B * T * C, -1, 1), *out = hrand(B * T * C, -1, 1);
    float *dsc2 = DPUTF(sc2, ns), *dpd = DPUTF(pd, ns), *ddout = DPUTF(dout, B * T * C), *dout_ = DPUTF(out, B * T * C);
    lp_attn_gemm_softmax_backward_cpu(sc2, pd, dout, out, lse, mask, &g, dp);
    lp_cu_attn_gemm_softmax_backward(dsc2, dpd, ddout, dout_, dlse, dmask, &g, dp);
    check("attn_gemm softmax_backward zp", shape, dsc2, sc2, ns, 1e-6, 1e-5, -1);
    check("attn_gemm softmax_backward ds", shape, dpd, pd, ns, 1e-6, 1e-5, -1);
    cudaFree(dx), cudaFree(dxh), cudaFree(dx2), cudaFree(dsc), cudaFree(dlse), cudaFree(dsc2), cudaFree(dpd);
    cudaFree(ddout), cudaFree(dout_);
    if (dmask)
        cudaFree(dmask);
    free(x), free(xh), free(x2), free(x2h), free(mask), free(sc), free(sc2), free(lse), free(pd), free(dout), free(out);
}

/* ---- fused attention --------------------------------------------------------------------- */

typedef struct attn_case {
    const char *name;
    lp_attn_geom g;
    int packed;   /* q, k, v in one (B,T,(H+2Hkv)D) buffer */
    int mask;     /* 0 none, 1 right padding, 2 left padding, 3 segments */
    float drop_p; /* 0: none */
    int opt_ref;  /* compare against the OPTIMIZED CPU table (large timing cases; it is held to ref on CPU) */
} attn_case;

static void case_attention(attn_case ac)
{
    lp_attn_geom g = ac.g;
    const int64_t B = g.B, T = g.T, H = g.H, Hkv = g.Hkv, D = g.D, C = H * D;
    const lp_kernel_table *ref = ac.opt_ref ? lp_kernels_table(LP_KERNELS_IMPL_OPT) : R;
    char shape[128];
    snprintf(shape, sizeof shape, "%s B%lld T%lld H%lld/%lld D%lld%s%s%s w%lld%s", ac.name, (long long)B,
             (long long)T, (long long)H, (long long)Hkv, (long long)D, g.causal ? " causal" : "",
             ac.mask == 1   ? " rpad"
             : ac.mask == 2 ? " lpad"
             : ac.mask == 3 ? " seg"
                            : "",
             ac.packed ? " packed" : "", (long long)g.window, ac.drop_p > 0 ? " drop" : "");
    int64_t nq, nkv, qo = 0, ko, vo;
    if (ac.packed) {
        g.ldq = g.ldkv = (H + 2 * Hkv) * D;
        nq = nkv = B * T * g.ldq;
        ko = H * D, vo = (H + Hkv) * D;
    } else {
        g.ldq = C, g.ldkv = Hkv * D;
        nq = B * T * C, nkv = B * T * Hkv * D;
        ko = vo = 0;
    }
    float *hq = hrand(nq, -1, 1), *hk = ac.packed ? hq : hrand(nkv, -1, 1),
          *hv = ac.packed ? hq : hrand(nkv, -1, 1);
    int32_t *mask = NULL;
    if (ac.mask) {
        mask = malloc(B * T * 4);
        for (int64_t b = 0; b < B; b++)
            for (int64_t t = 0; t < T; t++) {
                int64_t pad = (b * 7 + 3) % (T / 3 + 1); /* differs per row; row 0 has 3 */
                int32_t m = 1;
                if (ac.mask == 1)
                    m = t < T - pad;
                else if (ac.mask == 2)
                    m = t >= pad;
                else /* samples of lengths T/3, T/3, rest minus padding */
                    m = t >= T - pad ? 0 : t < T / 3 ? 1 : t < 2 * T / 3 ? 2 : 3;
                mask[b * T + t] = m;
            }
        if (ac.mask == 3)
            g.segments = true;
    }
    lp_attn_dropout drop = {.p = ac.drop_p, .seed = 77, .stream = 5, .offset = 1000, .lane = 1}; /* mid-block */
    const lp_attn_dropout *dp = ac.drop_p > 0 ? &drop : NULL;
    if (lp_cu_attention_supports(&g) != LP_OK) {
        printf("attention unsupported: %s\n", lp_err_msg());
        g_fail++;
        return;
    }
    float *out = malloc(B * T * C * 4), *lse = malloc(B * H * T * 4);
    double cpu_f = now_us();
    ref->attention_fused_forward(out, lse, hq + qo, hk + ko, hv + vo, mask, &g, dp);
    cpu_f = now_us() - cpu_f;
    float *dq_ = DPUTF(hq, nq), *dk_ = ac.packed ? dq_ : DPUTF(hk, nkv),
          *dv_ = ac.packed ? dq_ : DPUTF(hv, nkv);
    int32_t *dmask = mask ? DPUTI(mask, B * T) : NULL;
    float *dout_ = dnan(B * T * C), *dlse = dnan(B * H * T);
    K->attention_fused_forward(dout_, dlse, dq_ + qo, dk_ + ko, dv_ + vo, dmask, &g, dp);
    double t =
        TIME_US(3, K->attention_fused_forward(dout_, dlse, dq_ + qo, dk_ + ko, dv_ + vo, dmask, &g, dp));
    double t_f = t;
    check("attention_fused_forward out", shape, dout_, out, B * T * C, 2e-5, 1e-4, t);
    check("attention_fused_forward lse", shape, dlse, lse, B * H * T, 2e-5, 1e-4, -1);
    /* backward: gradients into NaN-filled buffers of the inputs' layout */
    float *go = hrand(B * T * C, -1, 1);
    float *gq = malloc(nq * 4), *gk = ac.packed ? gq : malloc(nkv * 4),
          *gv = ac.packed ? gq : malloc(nkv * 4);
    for (int64_t i = 0; i < nq; i++)
        gq[i] = NAN;
    if (!ac.packed)
        for (int64_t i = 0; i < nkv; i++)
            gk[i] = gv[i] = NAN;
    double cpu_b = now_us();
    ref->attention_fused_backward(gq + qo, gk + ko, gv + vo, go, out, lse, hq + qo, hk + ko, hv + vo, mask,
                                  &g, dp);
    cpu_b = now_us() - cpu_b;
    float *dgo = DPUTF(go, B * T * C), *dgq = dnan(nq), *dgk = ac.packed ? dgq : dnan(nkv),
          *dgv = ac.packed ? dgq : dnan(nkv);
    K->attention_fused_backward(dgq + qo, dgk + ko, dgv + vo, dgo, dout_, dlse, dq_ + qo, dk_ + ko, dv_ + vo,
                                dmask, &g, dp);
    double t_b = t = TIME_US(3, K->attention_fused_backward(dgq + qo, dgk + ko, dgv + vo, dgo, dout_, dlse,
                                                            dq_ + qo, dk_ + ko, dv_ + vo, dmask, &g, dp));
    if (ac.packed) {
        check("attention_fused_backward dqkv", shape, dgq, gq, nq, 1e-4, 1e-3, t);
    } else {
        check("attention_fused_backward dq", shape, dgq, gq, nq, 1e-4, 1e-3, t);
        check("attention_fused_backward dk", shape, dgk, gk, nkv, 1e-4, 1e-3, -1);
        check("attention_fused_backward dv", shape, dgv, gv, nkv, 1e-4, 1e-3, -1);
    }
    /* rates, counting FlashAttention's way: 4 D flops per visible (query, key) pair forward,
     * 10 D backward; and the CPU table's time for the same call (one run, wall clock) */
    double pairs = 0;
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < T; i++) {
            int64_t lo, hi;
            lp_attn_key_range(&g, i, &lo, &hi);
            for (int64_t j = lo; j < hi; j++)
                pairs += lp_attn_mask_visible(&g, mask ? mask + b * T : NULL, i, j);
        }
    pairs *= (double)H;
    printf("%-28s %-44s fwd %.1f GFLOP/s bwd %.1f GFLOP/s; CPU %s %.0f / %.0f us (x%.0f / x%.0f)\n",
           "attention rate", shape, 4 * D * pairs / t_f * 1e-3, 10 * D * pairs / t_b * 1e-3, ref->name, cpu_f,
           cpu_b, cpu_f / t_f, cpu_b / t_b);

    /* attention as GEMMs: emulator: the composition over the emulated steps; GPU: the table's
     * entries with f32 GEMMs (forced), then with TF32 (chosen by AUTO where the scores fit) */
#ifdef LP_CUDA_EMU
    const int variants = 1;
#else
    const int variants = 2;
#endif
    for (int var = 0; var < variants; var++) {
        double ao = 1e-5, ro = 1e-5, ag = 1e-5, rg = 1e-5;
        const char *tag = "attn GEMMs (emu)";
#ifndef LP_CUDA_EMU
        lp_cuda_set_attention(ct_be, var == 0 ? LP_CUDA_ATTN_GEMM : LP_CUDA_ATTN_AUTO);
        lp_cuda_set_tf32(ct_be, var == 1);
        const bool fits = (double)B * H * T * T * 4 <= LP_CUDA_ATTN_GEMM_MAX_MIB * 1048576.0 &&
                          T <= LP_CUDA_ATTN_GEMM_MAX_T;
        const bool want = var == 0 || fits;
        expect(lp_cuda_attention_uses_gemm(ct_be, &g) == want,
               var == 0 ? "LP_CUDA_ATTN_GEMM: the table runs GEMMs" : "AUTO + TF32: GEMMs exactly where they fit");
        if (!want) {
            printf("%-28s %-44s fused kernels (T or the scores above the GEMM path's limit)\n", "attn GEMMs tf32", shape);
            continue;
        }
        if (var == 0) /* f32 GEMMs: the fused kernels' tolerances */
            ao = 2e-5, ro = 1e-4, ag = 1e-4, rg = 1e-3, tag = "attn GEMMs f32";
        else /* TF32: see the top of the file */
            ao = 3e-3, ro = 5e-3, ag = 1e-2, rg = 1e-2, tag = "attn GEMMs tf32";
#endif
        char op[64];
        float *o2 = dnan(B * T * C), *l2 = dnan(B * H * T), *g2q = dnan(nq), *g2k = ac.packed ? g2q : dnan(nkv),
              *g2v = ac.packed ? g2q : dnan(nkv);
        double tf = -1, tb = -1;
#ifdef LP_CUDA_EMU
        lp_status s1 = lp_attn_gemm_forward(&emu_gemm_ops, o2, l2, dq_ + qo, dk_ + ko, dv_ + vo, dmask, &g, dp);
        lp_status s2 = lp_attn_gemm_backward(&emu_gemm_ops, g2q + qo, g2k + ko, g2v + vo, dgo, o2, l2, dq_ + qo,
                                             dk_ + ko, dv_ + vo, dmask, &g, dp);
        expect(s1 == LP_OK && s2 == LP_OK, "attn GEMMs (emu): forward and backward ran");
#else
        K->attention_fused_forward(o2, l2, dq_ + qo, dk_ + ko, dv_ + vo, dmask, &g, dp);
        tf = TIME_US(3, K->attention_fused_forward(o2, l2, dq_ + qo, dk_ + ko, dv_ + vo, dmask, &g, dp));
        K->attention_fused_backward(g2q + qo, g2k + ko, g2v + vo, dgo, o2, l2, dq_ + qo, dk_ + ko, dv_ + vo, dmask, &g,
                                    dp);
        tb = TIME_US(3, K->attention_fused_backward(g2q + qo, g2k + ko, g2v + vo, dgo, o2, l2, dq_ + qo, dk_ + ko,
                                                    dv_ + vo, dmask, &g, dp));
#endif
        snprintf(op, sizeof op, "%s out", tag);
        check(op, shape, o2, out, B * T * C, ao, ro, tf);
        snprintf(op, sizeof op, "%s lse", tag);
        check(op, shape, l2, lse, B * H * T, ao, ro, -1);
        if (ac.packed) {
            snprintf(op, sizeof op, "%s dqkv", tag);
            check(op, shape, g2q, gq, nq, ag, rg, tb);
        } else {
            snprintf(op, sizeof op, "%s dq", tag);
            check(op, shape, g2q, gq, nq, ag, rg, tb);
            snprintf(op, sizeof op, "%s dk", tag);
            check(op, shape, g2k, gk, nkv, ag, rg, -1);
            snprintf(op, sizeof op, "%s dv", tag);
            check(op, shape, g2v, gv, nkv, ag, rg, -1);
        }
#ifndef LP_CUDA_EMU
        printf("%-28s %-44s fwd %.2f us (fused %.2f, x%.2f) bwd %.2f us (fused %.2f, x%.2f)\n", tag, shape, tf, t_f,
               t_f / tf, tb, t_b, t_b / tb);
#endif
        cudaFree(o2), cudaFree(l2), cudaFree(g2q);
        if (!ac.packed)
            cudaFree(g2k), cudaFree(g2v);
    }
#ifndef LP_CUDA_EMU
    lp_cuda_set_attention(ct_be, LP_CUDA_ATTN_AUTO);
    lp_cuda_set_tf32(ct_be, false);
#endif
    cudaFree(dq_), cudaFree(dout_), cudaFree(dlse), cudaFree(dgo), cudaFree(dgq);
    if (!ac.packed) {
        cudaFree(dk_), cudaFree(dv_), cudaFree(dgk), cudaFree(dgv);
        free(hk), free(hv), free(gk), free(gv);
    }
    if (dmask)
        cudaFree(dmask);
    free(hq), free(mask), free(out), free(lse), free(go), free(gq);
}

static void attention_cases(void)
{
#define G(B_, T_, H_, Hkv_, D_, causal_, window_)                                                            \
    ((lp_attn_geom){.B = B_, .T = T_, .H = H_, .Hkv = Hkv_, .D = D_, .causal = causal_, .window = window_})
    attn_case cases[] = {
#ifdef LP_CUDA_EMU
        {"mha", G(1, 37, 2, 2, 64, false, 0), 0, 0, 0, 0},
        {"gqa2", G(2, 40, 2, 1, 80, true, 0), 0, 2, 0, 0},
        {"gqa7-win", G(1, 45, 7, 1, 32, true, 8), 0, 1, 0, 0},
        {"seg", G(1, 40, 2, 2, 32, false, 0), 0, 3, 0, 0},
        {"seg-causal-gqa", G(1, 40, 2, 1, 40, true, 0), 0, 3, 0, 0},
        {"packed-gqa3", G(1, 35, 3, 1, 96, true, 0), 1, 1, 0, 0},
        {"d256", G(1, 33, 1, 1, 256, false, 0), 0, 0, 0, 0},
        {"d7", G(1, 19, 3, 1, 7, false, 0), 0, 1, 0, 0},
        {"dropout", G(1, 40, 2, 1, 64, true, 0), 0, 1, 0.1f, 0},
        {"t1", G(3, 1, 2, 1, 64, true, 0), 0, 1, 0, 0},
        {"win1-nc", G(1, 33, 2, 2, 16, false, 1), 0, 0, 0, 0},
#else
        {"mha", G(2, 37, 4, 4, 64, false, 0), 0, 0, 0, 0},
        {"mha-pad", G(3, 50, 3, 3, 64, false, 0), 0, 1, 0, 0},
        {"gqa2", G(2, 77, 4, 2, 80, true, 0), 0, 2, 0, 0}, /* left padding under causal: empty rows */
        {"gqa7-win", G(1, 100, 7, 1, 128, true, 16), 0, 1, 0, 0},
        {"gqa7-win-nc", G(2, 65, 7, 1, 64, false, 9), 0, 0, 0, 0},
        {"seg", G(2, 70, 2, 2, 32, false, 0), 0, 3, 0, 0},
        {"seg-causal-gqa", G(2, 70, 4, 2, 64, true, 0), 0, 3, 0, 0},
        {"packed-gqa3", G(2, 50, 6, 2, 96, true, 0), 1, 1, 0, 0},
        {"d256", G(1, 40, 2, 1, 256, false, 0), 0, 0, 0, 0},
        {"d40-odd-T", G(3, 33, 2, 2, 40, true, 0), 0, 0, 0, 0},
        {"d7", G(1, 19, 3, 1, 7, false, 0), 0, 1, 0, 0},
        {"dropout", G(2, 45, 4, 2, 64, true, 0), 0, 1, 0.1f, 0},
        {"t1", G(3, 1, 2, 1, 64, true, 0), 0, 1, 0, 0},
        {"win1-nc", G(1, 33, 2, 2, 16, false, 1), 0, 0, 0, 0},
        {"dropout-gqa7-win", G(1, 70, 7, 1, 128, true, 20), 0, 2, 0.2f, 0},
        {"bert-base", G(8, 128, 12, 12, 64, false, 0), 0, 1, 0, 1},
        {"qwen-0.5b", G(2, 512, 14, 2, 64, true, 0), 0, 0, 0, 1},
        {"long-2k", G(1, 2048, 16, 16, 64, true, 0), 0, 0, 0, 1},
        /* dk/dv grids of >= ADKV_MANY_BLOCKS blocks take the 4-blocks-per-SM instantiation */
        {"distilbert-dkv4", G(32, 128, 12, 12, 64, false, 0), 0, 1, 0, 1},
        {"d32-gqa2-dkv4", G(16, 256, 16, 8, 32, true, 0), 0, 2, 0, 1},
#endif
    };
#undef G
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        if (!strcmp(cases[i].name, "d256"))
            cases[i].g.scale = 0.3f;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        case_attention(cases[i]);
    lp_attn_geom big = {.B = 1, .T = 8, .H = 1, .Hkv = 1, .D = 300, .ldq = 300, .ldkv = 300};
    expect(lp_cu_attention_supports(&big) == LP_STATUS_UNSUPPORTED, "attention D=300: supports UNSUPPORTED");
    K->attention_fused_forward(NULL, NULL, NULL, NULL, NULL, NULL, &big, NULL);
    expect(sync_status() == LP_STATUS_UNSUPPORTED && sync_status() == LP_OK,
           "attention D=300: launcher refuses, UNSUPPORTED at the next sync");
}

int main(void)
{
    if (lp_kernels_init() != LP_OK)
        return 1;
#ifdef LP_CUDA_EMU
    printf("device: the CPU emulator of tests/kernels/cuda_emu (LP_CUDA_EMU); times are emulation times\n");
    K = &emu_table;
#else
    int rc = ct_init(); /* prints the device, or the reason for the skip */
    if (rc)
        return rc;
    K = ct_be->ops;
#endif
    R = lp_kernels_table(LP_KERNELS_IMPL_REF);
    ck(cudaEventCreate(&ev0), "event");
    ck(cudaEventCreate(&ev1), "event");

#ifdef LP_CUDA_EMU /* the CPU emulator (tests/kernels/cuda_emu): small shapes, same code paths */
    case_layernorm(7, 5);
    case_layernorm(70, 100);
    case_rmsnorm(7, 5, 0);
    case_rmsnorm(65, 96, 1);
    case_softmax(5, 7);
    case_softmax(9, 1000);
    case_softmax(13, 128);  /* warp per row, float4, a part-filled last block */
    case_softmax(11, 130);  /* warp per row, scalar (C % 4 != 0) */
    case_softmax(3, 1500);  /* wider than a warp's rows: a block per row */
    case_embedding(2, 7, 33, 50, 16, 2, 3, 1, 1);
    case_embedding(3, 5, 40, 10, 8, 1, 0, 0, 0);
    case_cross_entropy(7, 11, 2);
    case_cross_entropy(9, 3000, 3);
    case_rope(13, 3, 64, 3 * 64 + 2 * 64);
    case_rope(4, 2, 80, 2 * 80 + 5);
#else
    case_layernorm(7, 5);
    case_layernorm(33, 1000);
    case_layernorm(2048, 768);
    case_rmsnorm(7, 5, 0);
    case_rmsnorm(65, 896, 0);
    case_rmsnorm(65, 896, 1);
    case_rmsnorm(2048, 896, 0);
    case_softmax(5, 7);
    case_softmax(64, 128);
    case_softmax(33, 1000);
    case_softmax(512, 4096);
    case_softmax(13, 128);
    case_softmax(11, 130);
    case_softmax(37, 1500);
    case_embedding(2, 7, 33, 50, 16, 2, 3, 1, 1);
    case_embedding(3, 5, 40, 10, 8, 1, 0, 0, 0);
    case_embedding(32, 128, 768, 30522, 512, 2, 0, 1, 1);
    case_cross_entropy(7, 11, 2);
    case_cross_entropy(64, 1000, 5);
    case_cross_entropy(33, 50257, 3);
    case_cross_entropy(512, 32000, 0);
    case_rope(13, 3, 64, 3 * 64 + 2 * 64);
    case_rope(50, 14, 64, 14 * 64);
    case_rope(4, 2, 80, 2 * 80 + 5);
#endif
    case_attn_steps("mha", (lp_attn_geom){.B = 2, .T = 37, .H = 2, .Hkv = 2, .D = 64}, 0, 0);
    case_attn_steps("causal-win-rpad", (lp_attn_geom){.B = 2, .T = 45, .H = 3, .Hkv = 1, .D = 7, .causal = true, .window = 9}, 1, 0);
    case_attn_steps("lpad-causal-drop", (lp_attn_geom){.B = 3, .T = 40, .H = 2, .Hkv = 1, .D = 32, .causal = true}, 2, 0.2f);
    case_attn_steps("seg-scale", (lp_attn_geom){.B = 1, .T = 70, .H = 2, .Hkv = 2, .D = 40, .scale = 0.3f}, 3, 0.1f);
#ifndef LP_CUDA_EMU
    case_attn_steps("distilbert", (lp_attn_geom){.B = 32, .T = 128, .H = 12, .Hkv = 12, .D = 64}, 1, 0.1f);
#endif
    attention_cases();

    printf("%d of %d checks failed\n", g_fail, g_cases);
    return g_fail ? 1 : 0;
}
