/* The op table (ggml test-backend-ops style): every kernel x odd shapes (1, 3, 17, 63,
 * 128, non-multiples of 8, masks with all but one token padded), optimized against
 * reference, each with its own error bound; guard bytes around every buffer, NaN-filled
 * outputs, and a NaN check on every result. Attention has a second table of decoder
 * geometries (GQA, causal, sliding window, left padding); fused is held against eager and
 * both against a naive double-precision loop written here. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kernel_test_util.h"

static const lp_kernel_table *R, *O;

/* ---- runners: each returns the number of failures for one shape ---- */

static int run_sgemm(const int64_t *d)
{
    int64_t M = d[0], N = d[1], K = d[2];
    int fails = 0;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
            for (int bi = 0; bi < 2; bi++) {
                float beta = bi ? 0.5f : 0.0f;
                int64_t lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 1, ldc = N + 2;
                float *A = kt_rand_f((ta ? K : M) * lda, -1, 1), *B = kt_rand_f((tb ? N : K) * ldb, -1, 1);
                float *C0 = kt_rand_f(M * ldc, -1, 1);
                if (!bi)
                    for (int64_t i = 0; i < M * ldc; i++)
                        C0[i] = NAN; /* beta = 0 must ignore C entirely */
                float *C1 = kt_copy(C0, M * ldc);
                R->sgemm(ta, tb, M, N, K, 0.7f, A, lda, B, ldb, beta, C0, ldc);
                O->sgemm(ta, tb, M, N, K, 0.7f, A, lda, B, ldb, beta, C1, ldc);
                for (int64_t i = 0; i < M; i++) {
                    char what[64];
                    snprintf(what, sizeof what, "sgemm ta=%d tb=%d beta=%g row %lld", ta, tb, beta, (long long)i);
                    fails += kt_close(what, C1 + i * ldc, C0 + i * ldc, N, 1e-5 * (double)K, 1e-5);
                    if (fails)
                        break;
                }
                fails += kt_release("sgemm");
            }
    return fails;
}

static int run_matmul(const int64_t *d)
{
    int64_t N = d[0], C = d[1], OC = d[2];
    float *x = kt_rand_f(N * C, -1, 1), *w = kt_rand_f(OC * C, -1, 1), *b = kt_rand_f(OC, -1, 1);
    float *dout = kt_rand_f(N * OC, -1, 1);
    float *o0 = kt_nan(N * OC), *o1 = kt_nan(N * OC), *dx0 = kt_nan(N * C), *dx1 = kt_nan(N * C);
    float *dw0 = kt_rand_f(OC * C, -1, 1), *dw1 = kt_copy(dw0, OC * C);
    float *db0 = kt_rand_f(OC, -1, 1), *db1 = kt_copy(db0, OC);
    lp_kernels_select(LP_KERNELS_IMPL_REF);
    lp_matmul_forward(o0, x, w, b, N, C, OC);
    lp_matmul_backward(dx0, dw0, db0, dout, x, w, N, C, OC);
    lp_kernels_select(LP_KERNELS_IMPL_OPT);
    lp_matmul_forward(o1, x, w, b, N, C, OC);
    lp_matmul_backward(dx1, dw1, db1, dout, x, w, N, C, OC);
    int f = kt_close("matmul out", o1, o0, N * OC, 1e-5 * C, 1e-5);
    f += kt_close("matmul dinp", dx1, dx0, N * C, 1e-5 * OC, 1e-5);
    f += kt_close("matmul dweight", dw1, dw0, OC * C, 1e-5 * N, 1e-5);
    f += kt_close("matmul dbias", db1, db0, OC, 1e-5 * N, 1e-5);
    return f + kt_release("matmul");
}

static int run_bias(const int64_t *d)
{
    int64_t N = d[0], C = d[1];
    float *o0 = kt_rand_f(N * C, -1, 1), *o1 = kt_copy(o0, N * C), *b = kt_rand_f(C, -1, 1);
    float *g0 = kt_rand_f(C, -1, 1), *g1 = kt_copy(g0, C);
    R->bias_add_forward(o0, b, N, C);
    O->bias_add_forward(o1, b, N, C);
    float *f0 = kt_nan(N * C), *f1 = kt_nan(N * C);
    R->bias_broadcast(f0, b, N, C);
    O->bias_broadcast(f1, b, N, C);
    int fb = kt_close("bias broadcast", f1, f0, N * C, 0, 0);
    for (int64_t e = 0; e < N * C; e++)
        fb += f0[e] != b[e % C];
    R->bias_backward(g0, o0, N, C);
    O->bias_backward(g1, o0, N, C);
    int f = fb + kt_close("bias_add", o1, o0, N * C, 0, 0);
    f += kt_close("bias_backward", g1, g0, C, 1e-6 * N, 1e-6);
    return f + kt_release("bias");
}

static int run_embedding(const int64_t *d)
{
    int64_t B = d[0], T = d[1], C = d[2], V = d[3], P = T + 2, TT = 2;
    int32_t *ids = kt_alloc((size_t)(B * T) * 4), *tt = kt_alloc((size_t)(B * T) * 4);
    for (int64_t i = 0; i < B * T; i++) {
        ids[i] = (int32_t)(kt_rand() % (uint32_t)(V < 4 ? V : 4)); /* repeats: scatter collisions */
        tt[i] = (int32_t)(kt_rand() % 2);
    }
    float *wte = kt_rand_f(V * C, -1, 1), *wpe = kt_rand_f(P * C, -1, 1), *wtt = kt_rand_f(TT * C, -1, 1);
    float *o0 = kt_nan(B * T * C), *o1 = kt_nan(B * T * C), *dout = kt_rand_f(B * T * C, -1, 1);
    float *g0[3] = {kt_rand_f(V * C, -1, 1), kt_rand_f(P * C, -1, 1), kt_rand_f(TT * C, -1, 1)};
    float *g1[3] = {kt_copy(g0[0], V * C), kt_copy(g0[1], P * C), kt_copy(g0[2], TT * C)};
    int f = 0;
    f += R->embedding_forward(o0, ids, tt, wte, wpe, wtt, B, T, C, V, P, TT, 1) != LP_OK;
    f += O->embedding_forward(o1, ids, tt, wte, wpe, wtt, B, T, C, V, P, TT, 1) != LP_OK;
    f += kt_close("embedding out", o1, o0, B * T * C, 0, 0);
    R->embedding_backward(g0[0], g0[1], g0[2], dout, ids, tt, B, T, C, 1);
    O->embedding_backward(g1[0], g1[1], g1[2], dout, ids, tt, B, T, C, 1);
    f += kt_close("embedding dwte", g1[0], g0[0], V * C, 0, 0);
    f += kt_close("embedding dwpe", g1[1], g0[1], P * C, 0, 0);
    f += kt_close("embedding dwtt", g1[2], g0[2], TT * C, 0, 0);
    /* out-of-range ids are errors naming the position, in both versions */
    ids[B * T - 1] = (int32_t)V;
    f += R->embedding_forward(o0, ids, tt, wte, wpe, wtt, B, T, C, V, P, TT, 1) != LP_STATUS_RANGE;
    f += O->embedding_forward(o1, ids, tt, wte, wpe, wtt, B, T, C, V, P, TT, 1) != LP_STATUS_RANGE;
    f += strstr(lp_err_msg(), "outside vocabulary") == NULL;
    ids[B * T - 1] = 0;
    f += O->embedding_forward(o1, ids, tt, wte, wpe, wtt, B, T, C, V, P, TT, 3) != LP_STATUS_RANGE;
    return f + kt_release("embedding");
}

static int run_layernorm(const int64_t *d)
{
    int64_t N = d[0], C = d[1];
    float *x = kt_rand_f(N * C, -3, 5), *w = kt_rand_f(C, 0.5f, 1.5f), *b = kt_rand_f(C, -1, 1);
    float *o0 = kt_nan(N * C), *o1 = kt_nan(N * C), *m0 = kt_nan(N), *m1 = kt_nan(N), *r0 = kt_nan(N),
          *r1 = kt_nan(N);
    float *dout = kt_rand_f(N * C, -1, 1), *dx0 = kt_nan(N * C), *dx1 = kt_nan(N * C);
    float *dw0 = kt_rand_f(C, -1, 1), *dw1 = kt_copy(dw0, C), *db0 = kt_rand_f(C, -1, 1), *db1 = kt_copy(db0, C);
    R->layernorm_forward(o0, m0, r0, x, w, b, N, C, 1e-5f);
    O->layernorm_forward(o1, m1, r1, x, w, b, N, C, 1e-5f);
    int f = kt_close("layernorm out", o1, o0, N * C, 1e-5, 1e-4);
    f += kt_close("layernorm mean", m1, m0, N, 1e-6, 1e-5);
    f += kt_close("layernorm rstd", r1, r0, N, 1e-6, 1e-4);
    R->layernorm_backward(dx0, dw0, db0, dout, x, w, m0, r0, N, C);
    O->layernorm_backward(dx1, dw1, db1, dout, x, w, m0, r0, N, C);
    f += kt_close("layernorm dinp", dx1, dx0, N * C, 1e-5, 1e-3);
    f += kt_close("layernorm dweight", dw1, dw0, C, 1e-5 * N, 1e-4);
    f += kt_close("layernorm dbias", db1, db0, C, 1e-6 * N, 1e-5);
    return f + kt_release("layernorm");
}

static int run_gelu(const int64_t *d)
{
    int64_t n = d[0];
    int f = 0;
    for (int kind = 0; kind < 2; kind++) {
        float *x = kt_rand_f(n, -6, 6);
        if (n > 5) { /* the tails: exp underflow/overflow paths */
            x[0] = -30.0f, x[1] = 30.0f, x[2] = 0.0f, x[3] = -1e-3f, x[4] = 9.5f;
        }
        if (n > 40) { /* a diverging run's activations: x^3 overflows float from ~1e13 on (the
                       * tanh form's slope was NaN / -inf there, its output -3e8 at -3e38) */
            const float huge[] = {1e13f, -1e13f, 1e20f, -1e20f, 3e38f, -3e38f, 10.0f, -10.0f, 10.5f, -10.5f};
            for (int i = 0; i < 10; i++)
                x[20 + i] = huge[i];
        }
        float *o0 = kt_nan(n), *o1 = kt_nan(n), *dout = kt_rand_f(n, -1, 1), *g0 = kt_nan(n), *g1 = kt_nan(n);
        R->gelu_forward(o0, x, n, (lp_gelu_kind)kind);
        O->gelu_forward(o1, x, n, (lp_gelu_kind)kind);
        R->gelu_backward(g0, dout, x, n, (lp_gelu_kind)kind);
        O->gelu_backward(g1, dout, x, n, (lp_gelu_kind)kind);
        f += kt_close(kind ? "gelu_tanh out" : "gelu out", o1, o0, n, 1e-6, 1e-5);
        f += kt_close(kind ? "gelu_tanh dinp" : "gelu dinp", g1, g0, n, 1e-6, 1e-5);
        /* in place */
        float *y = kt_copy(x, n);
        O->gelu_forward(y, y, n, (lp_gelu_kind)kind);
        f += kt_close("gelu in place", y, o1, n, 0, 0);
        f += kt_release("gelu");
    }
    return f;
}

/* the heads' tanh and ReLU: the optimized tanhf within 1 ulp of the double reference (atol
 * 1e-7 on values in [-1, 1]); ReLU and both derivatives the same expressions (tolerance 0
 * but for tanh's, whose 1 - y^2 may contract to an FMA: 1e-7) */
static int run_act(const int64_t *d)
{
    int64_t n = d[0];
    int f = 0;
    for (int kind = 0; kind < 2; kind++) {
        float *x = kt_rand_f(n, -4, 4), *dout = kt_rand_f(n, -1, 1);
        if (n > 3)
            x[0] = 0.0f, x[1] = -0.0f, x[2] = 30.0f, x[3] = -30.0f; /* ReLU's edge, tanh's saturation */
        float *o0 = kt_nan(n), *o1 = kt_nan(n), *g0 = kt_nan(n), *g1 = kt_nan(n);
        R->act_forward(o0, x, n, (lp_act_kind)kind);
        O->act_forward(o1, x, n, (lp_act_kind)kind);
        R->act_backward(g0, dout, x, o0, n, (lp_act_kind)kind);
        O->act_backward(g1, dout, x, o0, n, (lp_act_kind)kind);
        f += kt_close(kind ? "relu out" : "tanh out", o1, o0, n, kind ? 0 : 1e-7, kind ? 0 : 1e-6);
        f += kt_close(kind ? "relu dinp" : "tanh dinp", g1, g0, n, kind ? 0 : 1e-7, kind ? 0 : 1e-6);
        float *y = kt_copy(x, n), *g = kt_copy(dout, n); /* in place, as the head calls them */
        O->act_forward(y, y, n, (lp_act_kind)kind);
        O->act_backward(g, g, x, o0, n, (lp_act_kind)kind);
        f += kt_close("act in place", y, o1, n, 0, 0);
        f += kt_close("act_backward in place", g, g1, n, 0, 0);
        f += kt_release("act");
    }
    return f;
}

static int run_softmax(const int64_t *d)
{
    int64_t N = d[0], C = d[1];
    float *x = kt_rand_f(N * C, -10, 10);
    x[0] = 80.0f; /* large logits must not overflow */
    if (C > 2)
        x[C - 1] = -INFINITY; /* masked entries get exactly 0 */
    float *o0 = kt_nan(N * C), *o1 = kt_nan(N * C), *dout = kt_rand_f(N * C, -1, 1);
    float *g0 = kt_nan(N * C), *g1 = kt_nan(N * C);
    R->softmax_forward(o0, x, N, C);
    O->softmax_forward(o1, x, N, C);
    R->softmax_backward(g0, dout, o0, N, C);
    O->softmax_backward(g1, dout, o0, N, C);
    int f = kt_close("softmax out", o1, o0, N * C, 1e-7, 1e-5);
    f += kt_close("softmax dinp", g1, g0, N * C, 1e-6, 1e-4);
    if (C > 2 && o1[C - 1] != 0.0f) {
        fprintf(stderr, "  softmax: -inf entry got %g\n", (double)o1[C - 1]);
        f++;
    }
    return f + kt_release("softmax");
}

/* ---- attention: every geometry (lp_attn_geom) through the four kernels and a naive loop ---- */

/* Mask modes: none; random right-padding lengths; all but one token padded (right); random
 * right padding with padded keys that score far above every real key (q >= 0, padded k = 50:
 * raw scores of hundreds, whose exp overflows; masking must come before the exp, not after,
 * as inf * 0 is NaN; seen in a LoRA run at lr 1e-2, where the fused backward's gradient
 * turned non-finite at step 185); random LEFT-padding lengths (row 0 always padded at the
 * start: under a causal mask its first queries see no key); left padding with only the last
 * token real (every query but the last sees nothing under a causal mask). */
enum { MASK_NONE, MASK_RIGHT, MASK_ONE_REAL, MASK_FAR_KEYS, MASK_LEFT, MASK_LEFT_LAST_ONLY, MASK_SEGMENTS };

/* Packed rows (MASK_SEGMENTS, lp_attn_geom.segments): samples of random lengths 1..maxlen with
 * ids 1, 2, ... one after another, and in odd rows up to 3 padded tokens at the end. */
static void fill_segments(int32_t *mask, int64_t B, int64_t T, int64_t maxlen)
{
    for (int64_t b = 0; b < B; b++) {
        int64_t pad = b % 2 ? (int64_t)(kt_rand() % 4u) : 0, t = 0;
        pad = pad < T ? pad : T - 1;
        for (int32_t id = 1; t < T - pad; id++)
            for (int64_t n = 1 + (int64_t)(kt_rand() % (uint32_t)maxlen); n > 0 && t < T - pad; n--, t++)
                mask[b * T + t] = id;
        for (; t < T; t++)
            mask[b * T + t] = 0;
    }
}

typedef struct attn_case {
    int64_t B, T, H, Hkv, D;
    int packed; /* q, k, v in one buffer with token stride (H + 2 Hkv) D + 3 > C */
    int maskmode;
    bool causal;
    int64_t window;
    float scale; /* 0 = 1/sqrt(D) */
} attn_case;

/* The definition, spelled out again independently of the kernels and of lp_attn_key_range. */
static bool naive_visible(const attn_case *c, const int32_t *mask, int64_t b, int64_t i, int64_t j)
{
    const bool same = c->maskmode != MASK_SEGMENTS || mask[b * c->T + j] == mask[b * c->T + i];
    return (!mask || mask[b * c->T + j]) && same && (!c->causal || j <= i) && (c->window <= 0 || i - j < c->window);
}

/* Textbook attention in double, forward and backward: out, dq (B,T,H*D), dk, dv (B,T,Hkv*D)
 * compact. Query head h reads kv head h / (H / Hkv); a query that sees nothing gives 0. */
static void naive_attention(double *out, double *dq, double *dk, double *dv, const attn_case *c, const float *q,
                            int64_t ldq, const float *k, const float *v, int64_t ldkv, const int32_t *mask,
                            const float *dout)
{
    const int64_t T = c->T, H = c->H, D = c->D, C = H * D, Ckv = c->Hkv * D;
    const double scale = c->scale != 0.0f ? (double)c->scale : 1.0 / sqrt((double)D);
    double *p = malloc((size_t)T * sizeof(double)), *dp = malloc((size_t)T * sizeof(double));
    memset(dk, 0, (size_t)(c->B * T * Ckv) * sizeof(double));
    memset(dv, 0, (size_t)(c->B * T * Ckv) * sizeof(double));
    for (int64_t b = 0; b < c->B; b++)
        for (int64_t h = 0; h < H; h++) {
            const int64_t kvh = h / (H / c->Hkv);
            for (int64_t i = 0; i < T; i++) {
                const float *qi = q + (b * T + i) * ldq + h * D;
                double m = -INFINITY, sum = 0.0;
                for (int64_t j = 0; j < T; j++) {
                    p[j] = -INFINITY;
                    if (!naive_visible(c, mask, b, i, j))
                        continue;
                    double s = 0.0;
                    for (int64_t d = 0; d < D; d++)
                        s += (double)qi[d] * k[(b * T + j) * ldkv + kvh * D + d];
                    p[j] = s * scale;
                    m = fmax(m, p[j]);
                }
                for (int64_t j = 0; j < T; j++)
                    sum += p[j] == -INFINITY ? 0.0 : exp(p[j] - m);
                for (int64_t j = 0; j < T; j++)
                    p[j] = p[j] == -INFINITY ? 0.0 : exp(p[j] - m) / sum;
                double *o = out + (b * T + i) * C + h * D, *dqi = dq + (b * T + i) * C + h * D;
                const float *doi = dout + (b * T + i) * C + h * D;
                double dot = 0.0;
                for (int64_t j = 0; j < T; j++) {
                    dp[j] = 0.0;
                    for (int64_t d = 0; d < D; d++)
                        dp[j] += (double)doi[d] * v[(b * T + j) * ldkv + kvh * D + d];
                    dot += p[j] * dp[j];
                }
                for (int64_t d = 0; d < D; d++) {
                    o[d] = 0.0, dqi[d] = 0.0;
                    for (int64_t j = 0; j < T; j++) {
                        o[d] += p[j] * v[(b * T + j) * ldkv + kvh * D + d];
                        dqi[d] += p[j] * (dp[j] - dot) * scale * k[(b * T + j) * ldkv + kvh * D + d];
                    }
                }
                for (int64_t j = 0; j < T; j++)
                    for (int64_t d = 0; d < D; d++) {
                        dk[(b * T + j) * Ckv + kvh * D + d] += p[j] * (dp[j] - dot) * scale * qi[d];
                        dv[(b * T + j) * Ckv + kvh * D + d] += p[j] * doi[d];
                    }
            }
        }
    free(p), free(dp);
}

/* rows x width of a (row stride lda) against want (compact, double): |a - want| <= atol +
 * rtol * |want| and no NaN; prints the worst element on failure. */
static int close_naive(const char *what, const float *a, int64_t lda, const double *want, int64_t rows, int64_t width,
                       double atol, double rtol)
{
    double worst = 0.0;
    int64_t wr = 0, wc = 0;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < width; c++) {
            double x = a[r * lda + c], y = want[r * width + c];
            double e = isnan(x) ? INFINITY : fabs(x - y) / (atol + rtol * fabs(y));
            if (e > worst)
                worst = e, wr = r, wc = c;
        }
    if (worst > 1.0) {
        fprintf(stderr, "  %s: row %lld col %lld: got %.9g, want %.9g (%.2fx the bound atol %g rtol %g)\n", what,
                (long long)wr, (long long)wc, (double)a[wr * lda + wc], want[wr * width + wc], worst, atol, rtol);
        return 1;
    }
    return 0;
}

/* rows x width of a (stride lda) against b (stride ldb), kt_close's bound, row by row. */
static int close_rows(const char *what, const float *a, const float *b, int64_t ld, int64_t rows, int64_t width,
                      double atol, double rtol)
{
    for (int64_t r = 0; r < rows; r++)
        if (kt_close(what, a + r * ld, b + r * ld, width, atol, rtol)) {
            fprintf(stderr, "  (%s: token row %lld)\n", what, (long long)r);
            return 1;
        }
    return 0;
}

/* lse: -inf exactly where want is -inf (kt_close cannot see infinities), close elsewhere. */
static int lse_close(const char *what, const float *a, const float *want, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        bool ai = a[i] == -INFINITY, wi = want[i] == -INFINITY;
        if (ai != wi || (!wi && !(fabs((double)a[i] - want[i]) <= 1e-5 + 1e-5 * fabs((double)want[i])))) {
            fprintf(stderr, "  %s: element %lld: got %.9g, want %.9g\n", what, (long long)i, (double)a[i],
                    (double)want[i]);
            return 1;
        }
    }
    return 0;
}

/* Opt equals ref (each kernel), fused equals eager, and all equal the naive loop, forward and
 * backward. Tolerances: f32 against f32, 1e-5 absolute + 1e-4 relative on outputs and 1e-3
 * on gradients (the partial sums run in different orders and the vector exp is within 2e-7);
 * against the double-precision loop, 2e-5 + 1e-4 and 2e-5 + 1e-3 (the f32 rounding of sums
 * of up to 130 terms of order 1). Queries that see no key must give exactly 0 and lse -inf,
 * and the token stride's pad columns (packed) must stay untouched (NaN). */
static int run_attn_case(const attn_case *ac)
{
    const int64_t B = ac->B, T = ac->T, H = ac->H, Hkv = ac->Hkv, D = ac->D, C = H * D, Ckv = Hkv * D;
    const int packed = ac->packed;
    const int64_t ldq = packed ? C + 2 * Ckv + 3 : C, ldkv = packed ? ldq : Ckv;
    const lp_attn_geom g = {.B = B, .T = T, .H = H, .Hkv = Hkv, .D = D, .ldq = ldq, .ldkv = ldkv,
                            .causal = ac->causal, .window = ac->window, .scale = ac->scale,
                            .segments = ac->maskmode == MASK_SEGMENTS};
    const int64_t nq = B * T * ldq, nkv = B * T * ldkv, nx = packed ? nq : nq + 2 * nkv;
    float *qkv = kt_rand_f(nx, -2, 2);
    float *q = qkv, *k = packed ? qkv + C : qkv + nq, *v = packed ? qkv + C + Ckv : qkv + nq + nkv;
    int32_t *mask = NULL;
    if (ac->maskmode == MASK_SEGMENTS) {
        mask = kt_alloc((size_t)(B * T) * 4);
        fill_segments(mask, B, T, T / 3 + 1);
    } else if (ac->maskmode != MASK_NONE) {
        mask = kt_alloc((size_t)(B * T) * 4);
        for (int64_t b = 0; b < B; b++) {
            int64_t len = 1 + (int64_t)(kt_rand() % (uint32_t)T);
            if (ac->maskmode == MASK_ONE_REAL || ac->maskmode == MASK_LEFT_LAST_ONLY)
                len = 1;
            if (ac->maskmode == MASK_LEFT && b == 0 && T > 1)
                len = 1 + (int64_t)(kt_rand() % (uint32_t)(T - 1));
            bool left = ac->maskmode == MASK_LEFT || ac->maskmode == MASK_LEFT_LAST_ONLY;
            for (int64_t t = 0; t < T; t++)
                mask[b * T + t] = left ? t >= T - len : t < len;
        }
    }
    if (ac->maskmode == MASK_FAR_KEYS)
        for (int64_t bt = 0; bt < B * T; bt++) {
            for (int64_t c = 0; c < C; c++)
                q[bt * ldq + c] = fabsf(q[bt * ldq + c]);
            if (!mask[bt])
                for (int64_t c = 0; c < Ckv; c++)
                    k[bt * ldkv + c] = 50.0f;
        }
    const int64_t nout = B * T * C, natt = B * H * T * T;
    float *oe0 = kt_nan(nout), *oe1 = kt_nan(nout), *of0 = kt_nan(nout), *of1 = kt_nan(nout);
    float *att0 = kt_nan(natt), *att1 = kt_nan(natt), *lse0 = kt_nan(B * H * T), *lse1 = kt_nan(B * H * T);
    R->attention_eager_forward(oe0, att0, q, k, v, mask, &g);
    O->attention_eager_forward(oe1, att1, q, k, v, mask, &g);
    R->attention_fused_forward(of0, lse0, q, k, v, mask, &g, NULL);
    O->attention_fused_forward(of1, lse1, q, k, v, mask, &g, NULL);
    int f = kt_close("attention eager out", oe1, oe0, nout, 1e-5, 1e-4);
    f += kt_close("attention eager att", att1, att0, natt, 1e-6, 1e-4);
    f += kt_close("attention fused out (ref)", of0, oe0, nout, 1e-5, 1e-4);
    f += kt_close("attention fused out (opt)", of1, oe0, nout, 1e-5, 1e-4);
    f += lse_close("attention fused lse", lse1, lse0, B * H * T);

    /* backward: gradients land in the layouts of q, k, v */
    float *dout = kt_rand_f(nout, -1, 1);
    float *gr[4];
    for (int i = 0; i < 4; i++)
        gr[i] = kt_nan(nx);
    float *datt = kt_nan(natt);
#define DQKV(gb) gb, packed ? gb + C : gb + nq, packed ? gb + C + Ckv : gb + nq + nkv
    R->attention_eager_backward(DQKV(gr[0]), datt, dout, att0, q, k, v, &g);
    O->attention_eager_backward(DQKV(gr[1]), datt, dout, att0, q, k, v, &g);
    R->attention_fused_backward(DQKV(gr[2]), dout, of0, lse0, q, k, v, mask, &g, NULL);
    O->attention_fused_backward(DQKV(gr[3]), dout, of0, lse0, q, k, v, mask, &g, NULL);
    static const char *gname[4] = {"eager (ref)", "eager (opt)", "fused (ref)", "fused (opt)"};
    for (int i = 1; i < 4; i++) {
        char what[64];
        snprintf(what, sizeof what, "attention dq %s", gname[i]);
        f += close_rows(what, gr[i], gr[0], ldq, B * T, C, 1e-5, 1e-3);
        snprintf(what, sizeof what, "attention dk %s", gname[i]);
        f += close_rows(what, packed ? gr[i] + C : gr[i] + nq, packed ? gr[0] + C : gr[0] + nq, ldkv, B * T, Ckv,
                        1e-5, 1e-3);
        snprintf(what, sizeof what, "attention dv %s", gname[i]);
        f += close_rows(what, packed ? gr[i] + C + Ckv : gr[i] + nq + nkv, packed ? gr[0] + C + Ckv : gr[0] + nq + nkv,
                        ldkv, B * T, Ckv, 1e-5, 1e-3);
    }
    if (packed) /* the stride's pad columns are nobody's */
        for (int i = 0; i < 4; i++)
            for (int64_t bt = 0; bt < B * T; bt++)
                for (int64_t c = C + 2 * Ckv; c < ldq; c++)
                    f += !isnan(gr[i][bt * ldq + c]);

    /* the naive loop, in double */
    double *no = kt_alloc((size_t)nout * 8), *ndq = kt_alloc((size_t)nout * 8);
    double *ndk = kt_alloc((size_t)(B * T * Ckv) * 8), *ndv = kt_alloc((size_t)(B * T * Ckv) * 8);
    naive_attention(no, ndq, ndk, ndv, ac, q, ldq, k, v, ldkv, mask, dout);
    f += close_naive("attention eager out vs naive", oe0, C, no, B * T, C, 2e-5, 1e-4);
    f += close_naive("attention fused out (opt) vs naive", of1, C, no, B * T, C, 2e-5, 1e-4);
    f += close_naive("attention eager dq vs naive", gr[0], ldq, ndq, B * T, C, 2e-5, 1e-3);
    f += close_naive("attention fused dq (opt) vs naive", gr[3], ldq, ndq, B * T, C, 2e-5, 1e-3);
    f += close_naive("attention eager dk vs naive", packed ? gr[0] + C : gr[0] + nq, ldkv, ndk, B * T, Ckv, 2e-5,
                     1e-3);
    f += close_naive("attention eager dv vs naive", packed ? gr[0] + C + Ckv : gr[0] + nq + nkv, ldkv, ndv, B * T,
                     Ckv, 2e-5, 1e-3);
    f += close_naive("attention fused dk (opt) vs naive", packed ? gr[3] + C : gr[3] + nq, ldkv, ndk, B * T, Ckv, 2e-5,
                     1e-3);
    f += close_naive("attention fused dv (opt) vs naive", packed ? gr[3] + C + Ckv : gr[3] + nq + nkv, ldkv, ndv,
                     B * T, Ckv, 2e-5, 1e-3);
    /* queries that see no key: exactly 0 out, -inf lse, 0 dq, in every kernel */
    int64_t blind = 0;
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < T; i++) {
            bool any = false;
            for (int64_t j = 0; j < T; j++)
                any = any || naive_visible(ac, mask, b, i, j);
            if (any)
                continue;
            blind++;
            for (int64_t c = 0; c < C; c++) {
                int64_t o = (b * T + i) * C + c;
                f += oe0[o] != 0.0f || oe1[o] != 0.0f || of0[o] != 0.0f || of1[o] != 0.0f;
                for (int gi = 0; gi < 4; gi++)
                    f += gr[gi][(b * T + i) * ldq + c] != 0.0f;
            }
            for (int64_t h = 0; h < H; h++)
                f += lse0[(b * H + h) * T + i] != -INFINITY || lse1[(b * H + h) * T + i] != -INFINITY;
        }
    if (ac->causal && (ac->maskmode == MASK_LEFT || ac->maskmode == MASK_LEFT_LAST_ONLY) && T > 1 && blind == 0) {
        fprintf(stderr, "  attention: the left-padded causal case has no blind query\n");
        f++;
    }

    /* with dropout on the probabilities: opt equals ref (same counters, tile by tile) */
    lp_attn_dropout ad = {0.25f, 99, LP_RNG_STREAM_DROPOUT, 3, 1}; /* lane 1: a rank's slice */
    R->attention_fused_forward(of0, lse0, q, k, v, mask, &g, &ad);
    O->attention_fused_forward(of1, lse1, q, k, v, mask, &g, &ad);
    f += kt_close("attention fused out, dropout (opt vs ref)", of1, of0, nout, 1e-5, 1e-4);
    float *gd[2] = {kt_nan(nx), kt_nan(nx)};
    R->attention_fused_backward(DQKV(gd[0]), dout, of0, lse0, q, k, v, mask, &g, &ad);
    O->attention_fused_backward(DQKV(gd[1]), dout, of0, lse0, q, k, v, mask, &g, &ad);
#undef DQKV
    f += close_rows("attention fused dq, dropout (opt vs ref)", gd[1], gd[0], ldq, B * T, C, 1e-5, 1e-3);
    f += close_rows("attention fused dk, dropout (opt vs ref)", packed ? gd[1] + C : gd[1] + nq,
                    packed ? gd[0] + C : gd[0] + nq, ldkv, B * T, Ckv, 1e-5, 1e-3);
    return f + kt_release("attention");
}

/* The BERT-path table below: {B, T, H, D, packed (ld = 3C), maskmode}, all heads their own
 * kv head, no causal mask. */
static int run_attention(const int64_t *d)
{
    attn_case c = {.B = d[0], .T = d[1], .H = d[2], .Hkv = d[2], .D = d[3], .packed = (int)d[4],
                   .maskmode = (int)d[5]};
    return run_attn_case(&c);
}

static int run_dropout(const int64_t *d)
{
    int64_t n = d[0];
    int f = 0;
    const float ps[] = {0.0f, 0.1f, 0.5f};
    for (int pi = 0; pi < 3; pi++) {
        float p = ps[pi];
        float *x = kt_rand_f(n, -1, 1), *o0 = kt_nan(n), *o1 = kt_nan(n), *dout = kt_rand_f(n, -1, 1);
        float *g0 = kt_nan(n), *g1 = kt_nan(n);
        uint8_t *k0 = kt_alloc((size_t)n), *k1 = kt_alloc((size_t)n);
        lp_rng r0, r1;
        lp_rng_init(&r0, 99, LP_RNG_STREAM_DROPOUT);
        lp_rng_init(&r1, 99, LP_RNG_STREAM_DROPOUT);
        r0.offset = r1.offset = 5;
        R->dropout_forward(o0, k0, x, n, p, &r0);
        O->dropout_forward(o1, k1, x, n, p, &r1);
        R->dropout_backward(g0, dout, k0, n, p);
        O->dropout_backward(g1, dout, k1, n, p);
        f += memcmp(k0, k1, (size_t)n) != 0;
        f += r0.offset != r1.offset || r0.offset != 5 + (uint64_t)((n + 3) / 4);
        f += kt_close("dropout out", o1, o0, n, 0, 0);
        f += kt_close("dropout dinp", g1, g0, n, 0, 0);
        /* a fill from lp_rng_at(start, e0) draws exactly elements e0.. of the fill from start
         * (a data-parallel rank's rows of the global batch's mask), mid-block lanes included,
         * and leaves the stream where the whole fill does */
        for (int64_t e0 = 1; e0 < n && e0 <= 7; e0 += 3) {
            lp_rng start, s0, s1;
            lp_rng_init(&start, 99, LP_RNG_STREAM_DROPOUT);
            start.offset = 5;
            s0 = s1 = lp_rng_at(&start, e0);
            uint8_t *ks0 = kt_alloc((size_t)n), *ks1 = kt_alloc((size_t)n);
            float *os0 = kt_nan(n), *os1 = kt_nan(n);
            R->dropout_forward(os0, ks0, x + e0, n - e0, p, &s0);
            O->dropout_forward(os1, ks1, x + e0, n - e0, p, &s1);
            if (memcmp(ks0, k0 + e0, (size_t)(n - e0)) || memcmp(ks1, k0 + e0, (size_t)(n - e0))) {
                fprintf(stderr, "  dropout: the slice from element %lld is not the full fill's\n", (long long)e0);
                f++;
            }
            f += kt_close("dropout slice out (ref)", os0, o0 + e0, n - e0, 0, 0);
            f += kt_close("dropout slice out (opt)", os1, o0 + e0, n - e0, 0, 0);
            f += s0.offset != r0.offset || s0.lane != 0 || s1.offset != r0.offset || s1.lane != 0;
        }
        int64_t kept = 0;
        for (int64_t i = 0; i < n; i++)
            kept += k0[i];
        if (p == 0.0f)
            f += kept != n;
        else if (n > 10000 && fabs((double)kept / n - (1.0 - p)) > 0.02) {
            fprintf(stderr, "  dropout: kept %lld of %lld at p=%g\n", (long long)kept, (long long)n, (double)p);
            f++;
        }
        f += kt_release("dropout");
    }
    return f;
}

static int run_cross_entropy(const int64_t *d)
{
    int64_t N = d[0], V = d[1];
    float *x = kt_rand_f(N * V, -8, 8);
    int32_t *t = kt_alloc((size_t)N * 4);
    for (int64_t i = 0; i < N; i++)
        t[i] = (i % 3 == 2) ? -100 : (int32_t)(kt_rand() % (uint32_t)V);
    float l0 = NAN, l1 = NAN, *lse0 = kt_nan(N), *lse1 = kt_nan(N), *g0 = kt_nan(N * V), *g1 = kt_nan(N * V);
    int f = 0;
    f += R->cross_entropy_forward(&l0, lse0, x, t, N, V, -100) != LP_OK;
    f += O->cross_entropy_forward(&l1, lse1, x, t, N, V, -100) != LP_OK;
    f += kt_close("cross_entropy loss", &l1, &l0, 1, 1e-6, 1e-5);
    f += kt_close("cross_entropy lse", lse1, lse0, N, 1e-6, 1e-5);
    R->cross_entropy_backward(g0, x, lse0, t, N, V, -100, 1.5f);
    O->cross_entropy_backward(g1, x, lse0, t, N, V, -100, 1.5f);
    f += kt_close("cross_entropy dlogits", g1, g0, N * V, 1e-7, 1e-4);
    // in place (dlogits = logits, as the chunked LM head calls it): the same gradient, bit for bit
    float *xr = kt_copy(x, N * V), *xo = kt_copy(x, N * V);
    R->cross_entropy_backward(xr, xr, lse0, t, N, V, -100, 1.5f);
    O->cross_entropy_backward(xo, xo, lse0, t, N, V, -100, 1.5f);
    f += kt_close("cross_entropy dlogits in place (ref)", xr, g0, N * V, 0, 0);
    f += kt_close("cross_entropy dlogits in place (opt)", xo, g1, N * V, 0, 0);
    t[0] = (int32_t)V;
    f += O->cross_entropy_forward(&l1, lse1, x, t, N, V, -100) != LP_STATUS_RANGE;
    f += R->cross_entropy_forward(&l0, lse0, x, t, N, V, -100) != LP_STATUS_RANGE;
    return f + kt_release("cross_entropy");
}

static int run_adamw(const int64_t *d)
{
    int64_t n = d[0];
    float *p0 = kt_rand_f(n, -1, 1), *p1 = kt_copy(p0, n), *g = kt_rand_f(n, -1, 1);
    float *m0 = kt_rand_f(n, -0.1f, 0.1f), *m1 = kt_copy(m0, n), *v0 = kt_rand_f(n, 0, 0.01f), *v1 = kt_copy(v0, n);
    R->adamw_step(p0, g, m0, v0, n, 1e-3, 0.9, 0.999, 1e-8, 0.01, 7);
    O->adamw_step(p1, g, m1, v1, n, 1e-3, 0.9, 0.999, 1e-8, 0.01, 7);
    int f = kt_close("adamw param", p1, p0, n, 1e-7, 1e-6);
    f += kt_close("adamw m", m1, m0, n, 1e-8, 1e-6);
    f += kt_close("adamw v", v1, v0, n, 1e-10, 1e-6);
    double s0 = R->sum_squares(g, n), s1 = O->sum_squares(g, n);
    if (fabs(s0 - s1) > 1e-5 * s0 + 1e-12) {
        fprintf(stderr, "  sum_squares: %.9g vs %.9g\n", s1, s0);
        f++;
    }
    R->scale(p0, n, 0.25f);
    O->scale(p1, n, 0.25f);
    f += kt_close("scale", p1, p0, n, 1e-7, 1e-6);
    return f + kt_release("adamw");
}

/* ---- decoder ops ---- */

/* d = {N, C}: rows scaled 1e-2 .. 1e2 (rstd must follow), weight around 1; the backward with
 * dweight (+=) and without (frozen), and in place (dinp = dout) against the separate run. */
static int run_rmsnorm(const int64_t *d)
{
    int64_t N = d[0], C = d[1];
    float *x = kt_rand_f(N * C, -3, 5), *w = kt_rand_f(C, 0.5f, 1.5f);
    for (int64_t i = 0; i < N; i++)
        for (int64_t c = 0; c < C; c++)
            x[i * C + c] *= powf(10.0f, (float)(i % 5) - 2.0f);
    float *o0 = kt_nan(N * C), *o1 = kt_nan(N * C), *r0 = kt_nan(N), *r1 = kt_nan(N);
    R->rmsnorm_forward(o0, r0, x, w, N, C, 1e-6f);
    O->rmsnorm_forward(o1, r1, x, w, N, C, 1e-6f);
    /* the reference sums in double, opt in float lanes: C * 2^-24 relative at worst */
    int f = kt_close("rmsnorm out", o1, o0, N * C, 1e-30, 2e-5);
    f += kt_close("rmsnorm rstd", r1, r0, N, 1e-30, 2e-5);
    float *dout = kt_rand_f(N * C, -1, 1), *dx0 = kt_nan(N * C), *dx1 = kt_nan(N * C);
    float *dw0 = kt_rand_f(C, -1, 1), *dw1 = kt_copy(dw0, C), *dw2 = kt_copy(dw0, C);
    R->rmsnorm_backward(dx0, dw0, dout, x, w, r0, N, C);
    O->rmsnorm_backward(dx1, dw1, dout, x, w, r0, N, C);
    /* dinp is a difference of two terms of size rstd * |dout| (rstd 1e-2 .. 1e2 here) */
    for (int64_t i = 0; i < N; i++)
        f += kt_close("rmsnorm dinp", dx1 + i * C, dx0 + i * C, C, 1e-5 * r0[i], 1e-3);
    f += kt_close("rmsnorm dweight", dw1, dw0, C, 1e-5 * N, 1e-4);
    float *dx2 = kt_nan(N * C);
    O->rmsnorm_backward(dx2, NULL, dout, x, w, r0, N, C);
    f += kt_close("rmsnorm dinp (frozen weight)", dx2, dx1, N * C, 0, 0);
    float *io = kt_copy(dout, N * C);
    O->rmsnorm_backward(io, dw2, io, x, w, r0, N, C);
    f += kt_close("rmsnorm dinp in place (opt)", io, dx1, N * C, 0, 0);
    f += kt_close("rmsnorm dweight in place (opt)", dw2, dw1, C, 0, 0);
    float *io0 = kt_copy(dout, N * C);
    R->rmsnorm_backward(io0, NULL, io0, x, w, r0, N, C);
    f += kt_close("rmsnorm dinp in place (ref)", io0, dx0, N * C, 0, 0);
    return f + kt_release("rmsnorm");
}

/* d = {N, F, extra}: gate and up inside one (N, ld) buffer, ld = 2F + extra (the fused
 * gate_up GEMM output, padded); gates from a diverging run included (exp overflows from
 * |g| ~ 88 on; silu(-1e30) must be -0, not NaN); backward separate and in place. */
static int run_swiglu(const int64_t *d)
{
    int64_t N = d[0], F = d[1], ld = 2 * F + d[2];
    float *gu = kt_rand_f(N * ld, -10, 10), *dout = kt_rand_f(N * F, -1, 1);
    const float huge[] = {1e30f, -1e30f, 3e38f, -3e38f, 1e13f, -1e13f, 88.5f, -88.5f, 90.0f, -90.0f, 100.0f, -100.0f,
                          0.0f, -1.278f, 20.0f, -20.0f, 87.0f, -87.0f, -1e-30f, 1e-30f};
    for (int64_t e = 0; e < (int64_t)(sizeof huge / sizeof huge[0]); e++) {
        int64_t n = (e * 7) % N, f = (e * 13) % F;
        gu[n * ld + f] = huge[e];
    }
    const float *gate = gu, *up = gu + F;
    float *o0 = kt_nan(N * F), *o1 = kt_nan(N * F);
    R->swiglu_forward(o0, gate, up, N, F, ld);
    O->swiglu_forward(o1, gate, up, N, F, ld);
    /* lp_exp's 2e-7 and one division, against double */
    int f = kt_close("swiglu out", o1, o0, N * F, 1e-6, 1e-5);
    float *g0 = kt_nan(N * ld), *g1 = kt_nan(N * ld);
    R->swiglu_backward(g0, g0 + F, dout, gate, up, N, F, ld);
    O->swiglu_backward(g1, g1 + F, dout, gate, up, N, F, ld);
    for (int64_t n = 0; n < N; n++) {
        f += kt_close("swiglu dgate", g1 + n * ld, g0 + n * ld, F, 1e-6, 1e-5);
        f += kt_close("swiglu dup", g1 + n * ld + F, g0 + n * ld + F, F, 1e-6, 1e-5);
        for (int64_t e = 2 * F; e < ld; e++) /* the padding columns are not written */
            f += !isnan(g1[n * ld + e]) || !isnan(g0[n * ld + e]);
    }
    float *io = kt_copy(gu, N * ld);
    O->swiglu_backward(io, io + F, dout, io, io + F, N, F, ld);
    for (int64_t n = 0; n < N; n++) {
        f += kt_close("swiglu in place dgate", io + n * ld, g1 + n * ld, 2 * F, 0, 0);
        for (int64_t e = 2 * F; e < ld; e++)
            f += io[n * ld + e] != gu[n * ld + e];
    }
    return f + kt_release("swiglu");
}

/* d = {N, H, D, extra}: H heads of D per token, ld = H*D + extra (a packed qkv row);
 * positions up to 32767 and repeats (left padding); attention factor 1.1 (yarn-like). The
 * padding between rows stays untouched; forward then backward returns x (a rotation, when
 * the factor is 1). */
static int run_rope(const int64_t *d)
{
    int64_t N = d[0], H = d[1], D = d[2], ld = H * D + d[3], half = D / 2;
    int32_t *pos = kt_alloc((size_t)N * 4);
    for (int64_t n = 0; n < N; n++)
        pos[n] = n % 4 == 3 ? 32767 - (int32_t)n : (int32_t)(kt_rand() % 4096u);
    pos[0] = 0;
    float *inv = kt_nan(half);
    int f = lp_rope_inv_freq(inv, D, 10000.0, NULL, NULL) != LP_OK;
    float *c0 = kt_nan(N * half), *s0 = kt_nan(N * half), *c1 = kt_nan(N * half), *s1 = kt_nan(N * half);
    R->rope_cache(c0, s0, pos, inv, 1.1f, N, D);
    O->rope_cache(c1, s1, pos, inv, 1.1f, N, D);
    /* libm cosf/sinf against cos/sin in double of the same float angle: an ulp or two */
    f += kt_close("rope cos", c1, c0, N * half, 3e-7, 0);
    f += kt_close("rope sin", s1, s0, N * half, 3e-7, 0);
    float *x = kt_rand_f(N * ld, -2, 2), *x0 = kt_copy(x, N * ld), *x1 = kt_copy(x, N * ld);
    R->rope_forward(x0, c0, s0, N, H, D, ld);
    O->rope_forward(x1, c0, s0, N, H, D, ld);
    /* float FMAs against double: about an ulp of |x| * (|cos| + |sin|) */
    f += kt_close("rope forward", x1, x0, N * ld, 1e-6, 1e-5);
    for (int64_t n = 0; n < N; n++)
        for (int64_t e = H * D; e < ld; e++)
            f += x1[n * ld + e] != x[n * ld + e] || x0[n * ld + e] != x[n * ld + e];
    float *g = kt_rand_f(N * ld, -1, 1), *g0 = kt_copy(g, N * ld), *g1 = kt_copy(g, N * ld);
    R->rope_backward(g0, c0, s0, N, H, D, ld);
    O->rope_backward(g1, c0, s0, N, H, D, ld);
    f += kt_close("rope backward", g1, g0, N * ld, 1e-6, 1e-5);
    /* with factor 1 the backward undoes the forward (cos^2 + sin^2 = 1 within 2 ulps) */
    O->rope_cache(c1, s1, pos, inv, 1.0f, N, D);
    float *rt = kt_copy(x, N * ld);
    O->rope_forward(rt, c1, s1, N, H, D, ld);
    O->rope_backward(rt, c1, s1, N, H, D, ld);
    f += kt_close("rope backward(forward(x))", rt, x, N * ld, 2e-6, 1e-5);
    return f + kt_release("rope");
}

/* d = {n, C, rows}: indices with repeats (scatter collisions add up in order) */
static int run_rows(const int64_t *d)
{
    int64_t n = d[0], C = d[1], rows = d[2];
    int64_t *idx = kt_alloc((size_t)n * 8);
    for (int64_t i = 0; i < n; i++)
        idx[i] = (int64_t)(kt_rand() % (uint32_t)(rows < 3 ? rows : rows / 2 + 1));
    idx[n - 1] = rows - 1;
    float *x = kt_rand_f(rows * C, -1, 1), *o0 = kt_nan(n * C), *o1 = kt_nan(n * C);
    R->rows_gather(o0, x, idx, n, C);
    O->rows_gather(o1, x, idx, n, C);
    int f = kt_close("rows gather (opt vs ref)", o1, o0, n * C, 0, 0);
    for (int64_t i = 0; i < n; i++)
        f += kt_close("rows gather (vs x)", o0 + i * C, x + idx[i] * C, C, 0, 0);
    float *dout = kt_rand_f(n * C, -1, 1), *dx0 = kt_rand_f(rows * C, -1, 1), *dx1 = kt_copy(dx0, rows * C);
    R->rows_scatter_add(dx0, dout, idx, n, C);
    O->rows_scatter_add(dx1, dout, idx, n, C);
    /* every element sums the same terms in the same order: bit for bit */
    f += kt_close("rows scatter_add", dx1, dx0, rows * C, 0, 0);
    return f + kt_release("rows");
}

/* d = {B, T, C}: masked mean pooling (rows of different lengths, one with no real token),
 * its backward, and row L2 normalization; opt keeps each sum's order: bit for bit */
static int run_pool(const int64_t *d)
{
    int64_t B = d[0], T = d[1], C = d[2];
    int32_t *mask = kt_alloc((size_t)(B * T) * sizeof *mask);
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++)
            mask[b * T + t] = b == 1 ? 0 : t < T - b % T; // row 1 all padding: pooled 0
    float *x = kt_rand_f(B * T * C, -2, 2), *o0 = kt_nan(B * C), *o1 = kt_nan(B * C);
    R->mean_pool_forward(o0, x, mask, B, T, C);
    O->mean_pool_forward(o1, x, mask, B, T, C);
    int f = kt_close("mean pool forward", o1, o0, B * C, 0, 0);
    /* against a direct sum of row 0 (its first T real tokens) */
    for (int64_t c = 0; c < C; c++) {
        double acc = 0;
        for (int64_t t = 0; t < T; t++)
            acc += x[t * C + c];
        float want = (float)(acc / (double)T);
        f += kt_close("mean pool row 0", &o0[c], &want, 1, 0, 0);
    }
    if (B > 1)
        for (int64_t c = 0; c < C; c++)
            f += o0[C + c] != 0.0f;
    float *dout = kt_rand_f(B * C, -1, 1), *d0 = kt_nan(B * T * C), *d1 = kt_nan(B * T * C);
    R->mean_pool_backward(d0, dout, mask, B, T, C);
    O->mean_pool_backward(d1, dout, mask, B, T, C);
    f += kt_close("mean pool backward", d1, d0, B * T * C, 0, 0);
    float *y0 = kt_copy(x, B * T * C), *y1 = kt_copy(x, B * T * C);
    R->l2_normalize(y0, B * T, C);
    O->l2_normalize(y1, B * T, C);
    f += kt_close("l2 normalize", y1, y0, B * T * C, 0, 0);
    double ss = 0;
    for (int64_t c = 0; c < C; c++)
        ss += (double)y0[c] * y0[c];
    float one = 1.0f, got = (float)ss;
    f += kt_close("l2 normalize: unit norm", &got, &one, 1, 1e-6, 1e-6);
    return f + kt_release("pool");
}

typedef int (*runner)(const int64_t *d);
typedef struct op_case {
    const char *op;
    runner run;
    int64_t d[6];
} op_case;

static const op_case cases[] = {
    {"sgemm", run_sgemm, {1, 1, 1}},
    {"sgemm", run_sgemm, {3, 17, 5}},
    {"sgemm", run_sgemm, {17, 63, 128}},
    {"sgemm", run_sgemm, {128, 3, 63}},
    {"sgemm", run_sgemm, {65, 66, 67}},
    {"matmul", run_matmul, {1, 1, 1}},
    {"matmul", run_matmul, {17, 63, 3}},
    {"matmul", run_matmul, {128, 96, 130}},
    {"bias", run_bias, {1, 1}},
    {"bias", run_bias, {3, 17}},
    {"bias", run_bias, {300, 129}},
    {"bias", run_bias, {257, 768}},
    {"embedding", run_embedding, {1, 1, 1, 1}},
    {"embedding", run_embedding, {3, 17, 63, 5}},
    {"embedding", run_embedding, {4, 128, 129, 50}},
    {"layernorm", run_layernorm, {1, 1}},
    {"layernorm", run_layernorm, {3, 17}},
    {"layernorm", run_layernorm, {63, 128}},
    {"layernorm", run_layernorm, {130, 769}},
    {"gelu", run_gelu, {1}},
    {"gelu", run_gelu, {3}},
    {"gelu", run_gelu, {17}},
    {"gelu", run_gelu, {63}},
    {"gelu", run_gelu, {100003}},
    {"act", run_act, {1}},
    {"act", run_act, {77}},
    {"act", run_act, {100003}},
    {"softmax", run_softmax, {1, 1}},
    {"softmax", run_softmax, {3, 17}},
    {"softmax", run_softmax, {63, 128}},
    {"softmax", run_softmax, {129, 1001}},
    {"attention", run_attention, {1, 1, 1, 1, 0, 0}},
    {"attention", run_attention, {2, 3, 2, 4, 1, 1}},
    {"attention", run_attention, {2, 17, 3, 8, 0, 1}},
    {"attention", run_attention, {3, 17, 2, 5, 1, 2}},
    {"attention", run_attention, {1, 63, 2, 16, 0, 0}},
    {"attention", run_attention, {2, 40, 3, 32, 1, 1}},
    {"attention", run_attention, {2, 128, 2, 64, 1, 1}},
    {"attention", run_attention, {2, 70, 1, 64, 0, 2}},
    {"attention", run_attention, {1, 130, 1, 128, 1, 1}},
    {"attention", run_attention, {1, 70, 2, 96, 0, 1}},  /* head dim 64 + 32 */
    {"attention", run_attention, {1, 33, 1, 48, 1, 0}},  /* head dim 32 + 16 */
    {"attention", run_attention, {2, 128, 2, 64, 1, 3}}, /* padded keys far above the real ones */
    {"attention", run_attention, {3, 40, 2, 32, 0, 3}},
    {"dropout", run_dropout, {1}},
    {"dropout", run_dropout, {17}},
    {"dropout", run_dropout, {63}},
    {"dropout", run_dropout, {100001}},
    {"cross_entropy", run_cross_entropy, {1, 1}},
    {"cross_entropy", run_cross_entropy, {3, 17}},
    {"cross_entropy", run_cross_entropy, {63, 2}},
    {"cross_entropy", run_cross_entropy, {130, 1027}},
    {"adamw", run_adamw, {1}},
    {"adamw", run_adamw, {17}},
    {"adamw", run_adamw, {100003}},
    /* decoder ops: N in {1, 3, 17}, C and F in {1, 7, 64, 896, 4864}, D in {8, 64, 128} and odd halves */
    {"rmsnorm", run_rmsnorm, {1, 1}},
    {"rmsnorm", run_rmsnorm, {3, 7}},
    {"rmsnorm", run_rmsnorm, {17, 64}},
    {"rmsnorm", run_rmsnorm, {3, 896}},
    {"rmsnorm", run_rmsnorm, {17, 896}},
    {"rmsnorm", run_rmsnorm, {1, 4864}},
    {"rmsnorm", run_rmsnorm, {17, 4864}},
    {"rmsnorm", run_rmsnorm, {3, 33}},
    {"swiglu", run_swiglu, {1, 1, 0}},
    {"swiglu", run_swiglu, {3, 7, 3}},
    {"swiglu", run_swiglu, {17, 64, 1}},
    {"swiglu", run_swiglu, {3, 896, 0}},
    {"swiglu", run_swiglu, {17, 896, 5}},
    {"swiglu", run_swiglu, {1, 4864, 0}},
    {"swiglu", run_swiglu, {17, 4864, 7}},
    {"swiglu", run_swiglu, {3, 19, 0}},
    {"rope", run_rope, {1, 1, 8, 0}},
    {"rope", run_rope, {3, 2, 8, 5}},
    {"rope", run_rope, {17, 3, 64, 0}},
    {"rope", run_rope, {17, 14, 64, 128}}, /* q of a packed (q, k, v) row with 2 kv heads */
    {"rope", run_rope, {3, 2, 128, 256}},
    {"rope", run_rope, {17, 7, 128, 3}},
    {"rope", run_rope, {3, 2, 2, 1}},     /* D/2 = 1 */
    {"rope", run_rope, {17, 3, 34, 0}},   /* D/2 = 17: vector + tail */
    {"rope", run_rope, {300, 4, 64, 64}}, /* parallel */
    {"pool", run_pool, {1, 1, 1}},
    {"pool", run_pool, {3, 7, 5}},
    {"pool", run_pool, {4, 128, 384}}, /* parallel: MiniLM's sentence embeddings */
    {"pool", run_pool, {2, 65, 130}},
    {"rows", run_rows, {1, 1, 1}},
    {"rows", run_rows, {3, 7, 5}},
    {"rows", run_rows, {17, 64, 20}},
    {"rows", run_rows, {17, 896, 4}},
    {"rows", run_rows, {3, 4864, 17}},
    {"rows", run_rows, {64, 896, 64}}, /* parallel scatter */
};

/* Decoder geometries: GQA (H=4 over 2 kv heads, and MQA over 1), causal, causal + sliding
 * window (windows that cross key tiles), left and right padding under the causal mask
 * (with queries that see no key), odd T (1, 7, 65, 130, 200), head sizes 1 to 320 (above
 * LP_ATTN_TILE_MAX_D the fused kernels take heap tiles), packed qkv with a stride > C. */
static const attn_case attn_cases[] = {
    /* B, T, H, Hkv, D, packed, mask, causal, window[, scale] */
    {1, 1, 1, 1, 8, 0, MASK_NONE, true, 0, 0.0f},
    {2, 7, 4, 2, 8, 1, MASK_RIGHT, true, 0, 0.0f},
    {2, 7, 4, 1, 8, 0, MASK_LEFT, true, 0, 0.0f},
    {2, 7, 4, 2, 8, 1, MASK_LEFT, false, 0, 0.0f},
    {1, 17, 2, 1, 1, 0, MASK_RIGHT, true, 5, 0.0f},
    {2, 65, 4, 2, 64, 1, MASK_LEFT, true, 16, 0.0f},
    {2, 65, 4, 1, 80, 0, MASK_RIGHT, true, 20, 0.0f},
    {1, 33, 2, 1, 40, 0, MASK_LEFT, true, 0, 0.0f}, /* head sizes 8 mod 16 and 8 mod 32: every */
    {2, 20, 3, 3, 24, 1, MASK_NONE, false, 0, 0.0f}, /* level's vector tails (AVX2: 16, 8) */
    {1, 130, 4, 2, 96, 1, MASK_NONE, true, 0, 0.0f},
    {2, 130, 4, 2, 128, 1, MASK_LEFT_LAST_ONLY, true, 0, 0.0f},
    {2, 65, 4, 2, 64, 1, MASK_FAR_KEYS, true, 0, 0.0f},
    {1, 130, 2, 1, 64, 0, MASK_NONE, false, 40, 0.0f},
    {1, 200, 2, 1, 64, 1, MASK_LEFT, true, 70, 0.0f},
    {1, 65, 2, 1, 320, 1, MASK_RIGHT, true, 0, 0.0f},
    {1, 33, 2, 2, 320, 0, MASK_NONE, false, 0, 0.0f},
    {2, 130, 4, 4, 64, 1, MASK_RIGHT, false, 0, 0.0f},
    {2, 40, 4, 2, 32, 1, MASK_LEFT, true, 0, 0.3f}, /* an explicit scale (Gemma-style query_pre_attn_scalar) */
    /* a prefill: one sequence, no mask (the forward's path without a padding bias, its
     * causal rows hidden as a range), SmolLM2's 9 heads over 3; D = 40 for the vector tails */
    {1, 150, 9, 3, 64, 1, MASK_NONE, true, 0, 0.0f},
    {1, 70, 3, 1, 40, 0, MASK_NONE, true, 0, 0.0f},
    /* packed samples: short ones inside one tile, long ones across tiles, with GQA, a
     * window, no causal mask (an encoder-style check of the sample rule alone), D > TMAX */
    {2, 7, 4, 2, 8, 0, MASK_SEGMENTS, true, 0, 0.0f},
    {2, 130, 4, 2, 64, 1, MASK_SEGMENTS, true, 0, 0.0f},
    {2, 200, 4, 1, 64, 0, MASK_SEGMENTS, true, 30, 0.0f},
    {2, 65, 2, 2, 32, 0, MASK_SEGMENTS, false, 0, 0.0f},
    {1, 70, 2, 1, 320, 0, MASK_SEGMENTS, true, 0, 0.0f},
};

static void test_op_table(void **state)
{
    (void)state;
    R = lp_kernels_table(LP_KERNELS_IMPL_REF);
    O = lp_kernels_table(LP_KERNELS_IMPL_OPT);
    int failed = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const op_case *c = &cases[i];
        int f = c->run(c->d);
        fprintf(stderr, "%-14s [%lld,%lld,%lld,%lld,%lld,%lld] %s\n", c->op, (long long)c->d[0], (long long)c->d[1],
                (long long)c->d[2], (long long)c->d[3], (long long)c->d[4], (long long)c->d[5], f ? "FAIL" : "ok");
        failed += f != 0;
    }
    for (size_t i = 0; i < sizeof attn_cases / sizeof attn_cases[0]; i++) {
        const attn_case *c = &attn_cases[i];
        int f = run_attn_case(c);
        fprintf(stderr, "attention      B%lld T%lld H%lld Hkv%lld D%lld packed=%d mask=%d causal=%d window=%lld %s\n",
                (long long)c->B, (long long)c->T, (long long)c->H, (long long)c->Hkv, (long long)c->D, c->packed,
                c->maskmode, (int)c->causal, (long long)c->window, f ? "FAIL" : "ok");
        failed += f != 0;
    }
    lp_kernels_select(LP_KERNELS_IMPL_OPT);
    assert_int_equal(failed, 0);
}

/* The same checks with one thread: partitioning must not change results beyond bounds. */
static void test_op_table_one_thread(void **state)
{
    int saved = lp_threads_get();
    lp_threads_set(1);
    test_op_table(state);
    lp_threads_set(saved);
}

static void test_dispatch_env(void **state)
{
    (void)state;
    assert_string_equal(lp_kernels_table(LP_KERNELS_IMPL_REF)->name, "ref");
    lp_kernels_select(LP_KERNELS_IMPL_REF);
    assert_string_equal(lp_kernels_active()->name, "ref");
    lp_kernels_select(LP_KERNELS_IMPL_OPT);
    assert_string_equal(lp_kernels_active()->name, "opt");
}

/* Without their scratch (the debug allocator fails it) the fused kernels still give the
 * same result: the forward packs key tiles per query block (D <= 256) or runs the reference
 * (D > 256: no memory for D-sized tiles), the GQA backward runs one task per kv head
 * instead of per query head, or the reference. Tolerances as in the op table. */
static void test_attention_without_scratch(void **state)
{
    (void)state;
    const lp_kernel_table *Ot = lp_kernels_table(LP_KERNELS_IMPL_OPT);
    static const attn_case cs[] = {{2, 70, 4, 2, 64, 0, MASK_LEFT, true, 0, 0.0f},
                                   {1, 40, 2, 1, 320, 0, MASK_RIGHT, true, 9, 0.0f}};
    int f = 0;
    for (int ci = 0; ci < 2; ci++) {
        const attn_case *c = &cs[ci];
        const int64_t B = c->B, T = c->T, H = c->H, D = c->D, C = H * D, Ckv = c->Hkv * D;
        const lp_attn_geom g = {.B = B, .T = T, .H = H, .Hkv = c->Hkv, .D = D, .ldq = C, .ldkv = Ckv, .causal = c->causal,
                                .window = c->window};
        float *q = kt_rand_f(B * T * C, -2, 2), *k = kt_rand_f(B * T * Ckv, -2, 2), *v = kt_rand_f(B * T * Ckv, -2, 2);
        float *dout = kt_rand_f(B * T * C, -1, 1);
        int32_t *mask = kt_alloc((size_t)(B * T) * 4);
        for (int64_t bt = 0; bt < B * T; bt++)
            mask[bt] = c->maskmode == MASK_LEFT ? bt % T >= 3 : bt % T < T - 3;
        float *o0 = kt_nan(B * T * C), *o1 = kt_nan(B * T * C), *l0 = kt_nan(B * H * T), *l1 = kt_nan(B * H * T);
        Ot->attention_fused_forward(o0, l0, q, k, v, mask, &g, NULL);
        lp_alloc_fail_at(1);
        Ot->attention_fused_forward(o1, l1, q, k, v, mask, &g, NULL);
        lp_alloc_fail_at(0);
        f += strstr(lp_err_msg(), "attention keys/values") == NULL; /* the scratch really failed */
        f += kt_close("attention fused out without scratch", o1, o0, B * T * C, 1e-5, 1e-4);
        f += lse_close("attention fused lse without scratch", l1, l0, B * H * T);
        float *gq[3] = {kt_nan(B * T * C), kt_nan(B * T * C), kt_nan(B * T * C)};
        float *gk[3] = {kt_nan(B * T * Ckv), kt_nan(B * T * Ckv), kt_nan(B * T * Ckv)};
        float *gv[3] = {kt_nan(B * T * Ckv), kt_nan(B * T * Ckv), kt_nan(B * T * Ckv)};
        for (uint64_t fail = 0; fail < 3; fail++) { /* none; the first; the second allocation */
            lp_alloc_fail_at(fail);
            Ot->attention_fused_backward(gq[fail], gk[fail], gv[fail], dout, o0, l0, q, k, v, mask, &g, NULL);
            uint64_t n = lp_alloc_fail_at(0);
            if (fail > n) /* this path allocates fewer: the result is the first's again */
                continue;
            char what[64];
            snprintf(what, sizeof what, "attention fused dq, allocation %llu failed", (unsigned long long)fail);
            f += kt_close(what, gq[fail], gq[0], B * T * C, 1e-5, 1e-3);
            f += kt_close(what, gk[fail], gk[0], B * T * Ckv, 1e-5, 1e-3);
            f += kt_close(what, gv[fail], gv[0], B * T * Ckv, 1e-5, 1e-3);
        }
        f += kt_release("attention without scratch");
    }
    assert_int_equal(f, 0);
}

/* Packing changes nothing for a sample: a packed row with sample ids gives, on each sample's
 * tokens, the output and the q, k, v gradients of that sample run alone (B = 1, T = its
 * length, no mask), in the eager and fused kernels, ref and opt. Tolerances as the op table's
 * opt against ref (1e-5 + 1e-4 relative on outputs, 1e-3 on gradients): only the order of the
 * partial sums differs (other tiles). Padded tokens give exactly 0. */
static void test_attention_segments_alone(void **state)
{
    (void)state;
    static const attn_case cs[] = {{1, 150, 4, 2, 64, 0, MASK_SEGMENTS, true, 0, 0.0f},
                                   {2, 97, 4, 1, 32, 0, MASK_SEGMENTS, true, 24, 0.0f},
                                   {1, 40, 2, 2, 16, 0, MASK_SEGMENTS, false, 0, 0.0f}};
    int f = 0;
    for (int ci = 0; ci < 3; ci++) {
        const attn_case *c = &cs[ci];
        const int64_t B = c->B, T = c->T, H = c->H, Hkv = c->Hkv, D = c->D, C = H * D, Ckv = Hkv * D;
        const lp_attn_geom g = {.B = B, .T = T, .H = H, .Hkv = Hkv, .D = D, .ldq = C, .ldkv = Ckv,
                                .causal = c->causal, .window = c->window, .segments = true};
        float *q = kt_rand_f(B * T * C, -2, 2), *k = kt_rand_f(B * T * Ckv, -2, 2), *v = kt_rand_f(B * T * Ckv, -2, 2);
        float *dout = kt_rand_f(B * T * C, -1, 1);
        int32_t *mask = kt_alloc((size_t)(B * T) * 4);
        fill_segments(mask, B, T, T / 2);
        /* one sample's run alone, sized for the longest */
        float *o1 = kt_nan(T * C), *l1 = kt_nan(H * T), *a1 = kt_nan(H * T * T);
        float *dq1 = kt_nan(T * C), *dk1 = kt_nan(T * Ckv), *dv1 = kt_nan(T * Ckv), *da1 = kt_nan(H * T * T);
        for (int impl = 0; impl < 2; impl++) {
            const lp_kernel_table *K = lp_kernels_table(impl ? LP_KERNELS_IMPL_OPT : LP_KERNELS_IMPL_REF);
            for (int fused = 0; fused < 2; fused++) {
                float *o = kt_nan(B * T * C), *lse = kt_nan(B * H * T), *att = kt_nan(B * H * T * T);
                float *dq = kt_nan(B * T * C), *dk = kt_nan(B * T * Ckv), *dv = kt_nan(B * T * Ckv);
                float *datt = kt_nan(B * H * T * T);
                if (fused) {
                    K->attention_fused_forward(o, lse, q, k, v, mask, &g, NULL);
                    K->attention_fused_backward(dq, dk, dv, dout, o, lse, q, k, v, mask, &g, NULL);
                } else {
                    K->attention_eager_forward(o, att, q, k, v, mask, &g);
                    K->attention_eager_backward(dq, dk, dv, datt, dout, att, q, k, v, &g);
                }
                char what[96];
                for (int64_t b = 0; b < B; b++)
                    for (int64_t t0 = 0; t0 < T;) {
                        int64_t t1 = t0 + 1;
                        while (t1 < T && mask[b * T + t1] == mask[b * T + t0])
                            t1++;
                        const int64_t n = t1 - t0, r0 = b * T + t0;
                        if (!mask[r0]) { /* padding sees nothing: exactly 0 */
                            for (int64_t e = 0; e < n * C; e++)
                                f += o[r0 * C + e] != 0.0f || dq[r0 * C + e] != 0.0f;
                            t0 = t1;
                            continue;
                        }
                        lp_attn_geom g1 = g;
                        g1.B = 1, g1.T = n, g1.segments = false;
                        if (fused) {
                            K->attention_fused_forward(o1, l1, q + r0 * C, k + r0 * Ckv, v + r0 * Ckv, NULL, &g1, NULL);
                            K->attention_fused_backward(dq1, dk1, dv1, dout + r0 * C, o1, l1, q + r0 * C, k + r0 * Ckv,
                                                        v + r0 * Ckv, NULL, &g1, NULL);
                        } else {
                            K->attention_eager_forward(o1, a1, q + r0 * C, k + r0 * Ckv, v + r0 * Ckv, NULL, &g1);
                            K->attention_eager_backward(dq1, dk1, dv1, da1, dout + r0 * C, a1, q + r0 * C,
                                                        k + r0 * Ckv, v + r0 * Ckv, &g1);
                        }
                        snprintf(what, sizeof what, "%s %s, sample at row %lld token %lld alone: ", K->name,
                                 fused ? "fused" : "eager", (long long)b, (long long)t0);
                        char w2[128];
                        snprintf(w2, sizeof w2, "%sout", what);
                        f += kt_close(w2, o + r0 * C, o1, n * C, 1e-5, 1e-4);
                        snprintf(w2, sizeof w2, "%sdq", what);
                        f += kt_close(w2, dq + r0 * C, dq1, n * C, 1e-5, 1e-3);
                        snprintf(w2, sizeof w2, "%sdk", what);
                        f += kt_close(w2, dk + r0 * Ckv, dk1, n * Ckv, 1e-5, 1e-3);
                        snprintf(w2, sizeof w2, "%sdv", what);
                        f += kt_close(w2, dv + r0 * Ckv, dv1, n * Ckv, 1e-5, 1e-3);
                        t0 = t1;
                    }
            }
        }
        f += kt_release("attention segments alone");
    }
    assert_int_equal(f, 0);
}

/* Bad geometries are refused with a message naming the caller and the field. */
static void test_attention_geom_check(void **state)
{
    (void)state;
    lp_attn_geom g = {.B = 2, .T = 9, .H = 14, .Hkv = 2, .D = 64, .ldq = 14 * 64, .ldkv = 2 * 64, .causal = true,
                      .window = 4};
    assert_int_equal(lp_attention_geom_check(&g, "model.json"), LP_OK);
    g.Hkv = 3;
    assert_int_equal(lp_attention_geom_check(&g, "model.json"), LP_STATUS_INVALID_ARG);
    assert_non_null(strstr(lp_err_msg(), "model.json"));
    assert_non_null(strstr(lp_err_msg(), "3 key/value heads"));
    g.Hkv = 2, g.ldkv = 64;
    assert_int_equal(lp_attention_geom_check(&g, "x"), LP_STATUS_INVALID_ARG);
    assert_non_null(strstr(lp_err_msg(), "ldkv=64"));
    g.ldkv = 128, g.D = 0;
    assert_int_equal(lp_attention_geom_check(&g, "x"), LP_STATUS_INVALID_ARG);
    g.D = 64, g.window = -1;
    assert_int_equal(lp_attention_geom_check(&g, "x"), LP_STATUS_INVALID_ARG);
    g.window = 0, g.scale = NAN;
    assert_int_equal(lp_attention_geom_check(&g, "x"), LP_STATUS_INVALID_ARG);
    assert_int_equal(lp_attention_geom_check(NULL, "x"), LP_STATUS_INVALID_ARG);
}

int main(void)
{
    int isa_rc = kt_isa_init();
    if (isa_rc)
        return isa_rc;
    lp_threads_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dispatch_env),
        cmocka_unit_test(test_attention_geom_check),
        cmocka_unit_test(test_attention_without_scratch),
        cmocka_unit_test(test_attention_segments_alone),
        cmocka_unit_test(test_op_table),
        cmocka_unit_test(test_op_table_one_thread),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
