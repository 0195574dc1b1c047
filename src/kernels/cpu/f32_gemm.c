/* f32 weights packed once at load (lp_qweight with dtype LP_DTYPE_F32) and their GEMMs:
 * out (N,OC) = inp (N,C) @ W^T + bias, all in f32, and (at the end of the file) the input
 * gradient dinp = dout @ W. The weight is frozen: inference, or a LoRA run's base.
 *
 * OpenBLAS's sgemm re-packs W on every call; at the Linear shapes of small transformers
 * (N = 32..1024 rows, C, OC ~ 1e3) that repacking and its per-call set-up cost a large part
 * of the time. Here W is laid out once into the micro-kernel's panels (kernels.h,
 * LP_F32_PANEL): 32 output channels per panel, k-major, so one k step of a panel is two
 * 64-byte loads (AVX-512) or four 32-byte ones (AVX2), multiplied by broadcast activations:
 *   AVX-512: 8 rows x 32 outputs in 16 zmm accumulators;
 *   AVX2 + FMA: 6 rows x 16 outputs (half a panel) in 12 ymm accumulators;
 *   baseline: the same loops in plain C;
 * and one row (decode) with independent even-k / odd-k accumulator chains, so FMA latency
 * is not the limit. The loops are the usual GEMM blocking, with W the pre-packed operand:
 * a task is MC rows x up to PB panels; K blocks (KC) outermost, so the rows' K block
 * (MC x KC) stays in L2 while the task's panels pass, each panel's KC slice (32 KB) in L1
 * while the row groups use it, and the task's outputs (in out itself, started from the
 * bias) in L2 between K blocks; W is read once per MC rows. Threads split the (row chunk,
 * panel block) tasks in contiguous ranges, panel blocks fastest, as the bf16 GEMM does; at
 * small N the panel blocks shrink so that every thread has one.
 * PREFETCH: every tile fetches the slice that follows its own in memory (the next panel's,
 * or the next K block's first), one k row per k step, so at small N (W streamed from DRAM,
 * 16 flops per weight byte at N = 32) the next slice arrives while this one computes
 * (measured ~170 -> ~230 GFLOP/s at N = 32, one thread, AVX-512). Prefetching past the end
 * of W is harmless: prefetches do not fault.
 * The paths differ from the reference (double sums) only by f32 summation order. */
#include <omp.h>
#include <string.h>

#include "cpu_kernels.h"
#include "simd.h"

#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

enum { P = LP_F32_PANEL, KC = 256 };

size_t lp_qweight_f32_plan_nbytes(int64_t rows, int64_t cols)
{
    if (rows <= 0 || cols <= 0)
        return 0;
    const size_t panels = (size_t)((rows + P - 1) / P);
    return (panels * P * (size_t)cols * sizeof(float) + 63) & ~(size_t)63;
}

/* Index of W[o, k] in the packed panels: K blocks of KC outermost, then the panels, each
 * block's slice of a panel (kcb x P, kcb = KC but the last block's rest) k-major. So the
 * slices a task reads in one K block, consecutive panels, are one sequential stream. */
static inline int64_t pidx(int64_t rows, int64_t cols, int64_t o, int64_t k)
{
    const int64_t np = (rows + P - 1) / P, k0 = k / KC * KC, kcb = cols - k0 < KC ? cols - k0 : KC;
    return (k0 * np + (o / P) * kcb + (k - k0)) * P + o % P;
}

lp_status lp_qweight_pack_f32(lp_qweight *q, const float *w, int64_t rows, int64_t cols, const char *name)
{
    void *mem;
    lp_status st = lp_k_qweight_alloc_packed(q, w, rows, cols, lp_qweight_f32_plan_nbytes(rows, cols),
                                             "packed f32", name, LP_MEM_CATEGORY_QUANTIZED_WEIGHT, &mem);
    if (st)
        return st;
    float *m = mem; /* zeroed: the last panel's padding rows multiply as zeros */
    for (int64_t o = 0; o < rows; o++)
        for (int64_t k = 0; k < cols; k++)
            m[pidx(rows, cols, o, k)] = w[o * cols + k];
    *q = (lp_qweight){.dtype = LP_DTYPE_F32, .rows = rows, .cols = cols, .n = rows * cols, .f32 = m, .mem = m};
    return LP_OK;
}

void lp_k_f32_dequantize_range(float *out, const lp_qweight *w, int64_t start, int64_t n)
{
    for (int64_t e = 0; e < n; e++) {
        const int64_t i = start + e;
        out[e] = w->f32[pidx(w->rows, w->cols, i / w->cols, i % w->cols)];
    }
}

static lp_status check_shape(const lp_qweight *w, int64_t C, int64_t OC)
{
    return lp_k_packed_weight_check(w, LP_DTYPE_F32, w ? w->f32 : NULL, C, OC, "f32_matmul_forward", "packed f32");
}

/* The reference: products summed in double. */
lp_status lp_k_f32_matmul_forward_ref(float *out, const float *inp, const lp_qweight *w, const float *bias,
                                      int64_t N, int64_t C, int64_t OC)
{
    lp_status st = check_shape(w, C, OC);
    if (st)
        return st;
    for (int64_t i = 0; i < N; i++)
        for (int64_t o = 0; o < OC; o++) {
            double acc = bias ? bias[o] : 0.0;
            for (int64_t k = 0; k < C; k++)
                acc += (double)inp[i * C + k] * (double)w->f32[pidx(OC, C, o, k)];
            out[i * OC + o] = (float)acc;
        }
    return LP_OK;
}

/* c (m rows of P, row stride ldc) = init (P floats, each row; NULL: c itself) + rows
 * x[0..m) (stride ldx, kc values) times the panel slice wp (kc x P): one micro-tile.
 * Inlined with m a constant at each call site, so the row loops unroll into registers.
 * pf: prefetch the next slice (the forward's W streams); the input gradient's slice is
 * a transposed copy already in L1 and passes false. */
#if defined(__AVX512F__)
#define MR 8
static inline __attribute__((always_inline)) void tile(int m, const float *x, int64_t ldx, const float *wp,
                                                       int64_t kc, float *c, int64_t ldc, const float *init, bool pf)
{
    const float *nx = wp + kc * P; /* the next slice in memory (PREFETCH) */
    __m512 c0[MR], c1[MR];
    for (int r = 0; r < m; r++) {
        c0[r] = _mm512_loadu_ps(init ? init : c + r * ldc);
        c1[r] = _mm512_loadu_ps(init ? init + 16 : c + r * ldc + 16);
    }
    for (int64_t k = 0; k < kc; k++) {
        const __m512 w0 = _mm512_loadu_ps(wp + k * P), w1 = _mm512_loadu_ps(wp + k * P + 16);
        if (pf) {
            _mm_prefetch((const char *)(nx + k * P), _MM_HINT_T0);
            _mm_prefetch((const char *)(nx + k * P + 16), _MM_HINT_T0);
        }
        for (int r = 0; r < m; r++) {
            const __m512 a = _mm512_set1_ps(x[r * ldx + k]);
            c0[r] = _mm512_fmadd_ps(w0, a, c0[r]);
            c1[r] = _mm512_fmadd_ps(w1, a, c1[r]);
        }
    }
    for (int r = 0; r < m; r++) {
        _mm512_storeu_ps(c + r * ldc, c0[r]);
        _mm512_storeu_ps(c + r * ldc + 16, c1[r]);
    }
}
/* One row (decode): even and odd k in separate accumulators, four independent chains. */
static void tile1(const float *x, const float *wp, int64_t kc, float *c, const float *init)
{
    __m512 c0 = _mm512_loadu_ps(init ? init : c), c1 = _mm512_loadu_ps(init ? init + 16 : c + 16);
    __m512 d0 = _mm512_setzero_ps(), d1 = d0;
    int64_t k = 0;
    for (; k + 2 <= kc; k += 2) {
        const __m512 a = _mm512_set1_ps(x[k]), b = _mm512_set1_ps(x[k + 1]);
        for (int j = 0; j < 4; j++) /* the next slice (PREFETCH) */
            _mm_prefetch((const char *)(wp + (kc + k) * P + 16 * j), _MM_HINT_T0);
        c0 = _mm512_fmadd_ps(_mm512_loadu_ps(wp + k * P), a, c0);
        c1 = _mm512_fmadd_ps(_mm512_loadu_ps(wp + k * P + 16), a, c1);
        d0 = _mm512_fmadd_ps(_mm512_loadu_ps(wp + k * P + P), b, d0);
        d1 = _mm512_fmadd_ps(_mm512_loadu_ps(wp + k * P + P + 16), b, d1);
    }
    if (k < kc) {
        const __m512 a = _mm512_set1_ps(x[k]);
        c0 = _mm512_fmadd_ps(_mm512_loadu_ps(wp + k * P), a, c0);
        c1 = _mm512_fmadd_ps(_mm512_loadu_ps(wp + k * P + 16), a, c1);
    }
    _mm512_storeu_ps(c, _mm512_add_ps(c0, d0));
    _mm512_storeu_ps(c + 16, _mm512_add_ps(c1, d1));
}
#elif defined(LP_HAVE_AVX2)
#define MR 6
/* 16 ymm registers: half a panel (16 outputs, two ymm) at a time, 6 rows: 12 accumulators,
 * the two weight vectors and a broadcast, no spills. The rows' kc slice is re-read for the
 * second half from L1. */
static inline __attribute__((always_inline)) void tile(int m, const float *x, int64_t ldx, const float *wp,
                                                       int64_t kc, float *c, int64_t ldc, const float *init, bool pf)
{
    for (int h = 0; h < P; h += 16) {
        __m256 c0[MR], c1[MR];
        for (int r = 0; r < m; r++) {
            c0[r] = _mm256_loadu_ps(init ? init + h : c + r * ldc + h);
            c1[r] = _mm256_loadu_ps(init ? init + h + 8 : c + r * ldc + h + 8);
        }
        for (int64_t k = 0; k < kc; k++) {
            const __m256 w0 = _mm256_loadu_ps(wp + k * P + h), w1 = _mm256_loadu_ps(wp + k * P + h + 8);
            if (pf) /* next slice (PREFETCH) */
                _mm_prefetch((const char *)(wp + (kc + k) * P + h), _MM_HINT_T0);
            for (int r = 0; r < m; r++) {
                const __m256 a = _mm256_broadcast_ss(x + r * ldx + k);
                c0[r] = _mm256_fmadd_ps(w0, a, c0[r]);
                c1[r] = _mm256_fmadd_ps(w1, a, c1[r]);
            }
        }
        for (int r = 0; r < m; r++) {
            _mm256_storeu_ps(c + r * ldc + h, c0[r]);
            _mm256_storeu_ps(c + r * ldc + h + 8, c1[r]);
        }
    }
}
/* One row (decode): the whole panel, even and odd k apart: eight independent chains. */
static void tile1(const float *x, const float *wp, int64_t kc, float *c, const float *init)
{
    __m256 a4[4], b4[4];
    for (int j = 0; j < 4; j++) {
        a4[j] = _mm256_loadu_ps(init ? init + 8 * j : c + 8 * j);
        b4[j] = _mm256_setzero_ps();
    }
    int64_t k = 0;
    for (; k + 2 <= kc; k += 2) {
        const __m256 a = _mm256_broadcast_ss(x + k), b = _mm256_broadcast_ss(x + k + 1);
        for (int j = 0; j < 4; j++) /* the next slice (PREFETCH) */
            _mm_prefetch((const char *)(wp + (kc + k) * P + 16 * j), _MM_HINT_T0);
        for (int j = 0; j < 4; j++) {
            a4[j] = _mm256_fmadd_ps(_mm256_loadu_ps(wp + k * P + 8 * j), a, a4[j]);
            b4[j] = _mm256_fmadd_ps(_mm256_loadu_ps(wp + k * P + P + 8 * j), b, b4[j]);
        }
    }
    if (k < kc) {
        const __m256 a = _mm256_broadcast_ss(x + k);
        for (int j = 0; j < 4; j++)
            a4[j] = _mm256_fmadd_ps(_mm256_loadu_ps(wp + k * P + 8 * j), a, a4[j]);
    }
    for (int j = 0; j < 4; j++)
        _mm256_storeu_ps(c + 8 * j, _mm256_add_ps(a4[j], b4[j]));
}
#else
#define MR 4
static void tile(int m, const float *x, int64_t ldx, const float *wp, int64_t kc, float *c, int64_t ldc,
                 const float *init, bool pf)
{
    (void)pf;
    for (int r = 0; r < m; r++) {
        float *cr = c + r * ldc;
        if (init)
            for (int j = 0; j < P; j++)
                cr[j] = init[j];
        for (int64_t k = 0; k < kc; k++) {
            const float a = x[r * ldx + k];
            const float *wk = wp + k * P;
            for (int j = 0; j < P; j++)
                cr[j] += wk[j] * a;
        }
    }
}
static void tile1(const float *x, const float *wp, int64_t kc, float *c, const float *init)
{
    tile(1, x, 0, wp, kc, c, P, init, false);
}
#endif

/* Rows per task (MC): a K block of them (MC x KC floats, 256 KB with AVX-512) stays in L2
 * while the task's panels pass, and W is read once per MC rows (MC / 2 flops per byte).
 * Measured on a busy Zen 5 (noisy): MC 16..64 x MR, PB 4..16, KC 256..512 all within the
 * noise of each other; the working set past L2 (N = 1024 at the larger shapes) is what costs. */
enum { MC = 32 * MR, PB = 8 /* panels per task, about: MC x 8 x 32 outputs, 256 KB, stay in L2 */ };

/* c (m rows, stride ldc) of panel slice wp (kc x P) for rows x (stride C, m <= MC): the
 * row groups as constant-size tiles; init as tile's. */
static inline __attribute__((always_inline)) void panel_rows(const float *x, int64_t C, int64_t m, const float *wp,
                                                             int64_t kc, float *c, int64_t ldc, const float *init,
                                                             bool pf)
{
    for (int64_t i = 0; i < m; i += MR) {
        const int r = (int)(m - i < MR ? m - i : MR);
        const float *xi = x + i * C;
        float *ci = c + i * ldc;
        switch (r) { /* a constant row count per call: the tile's loops unroll */
        case 1: tile1(xi, wp, kc, ci, init); break;
        case 2: tile(2, xi, C, wp, kc, ci, ldc, init, pf); break;
        case 3: tile(3, xi, C, wp, kc, ci, ldc, init, pf); break;
#if MR > 4
        case 4: tile(4, xi, C, wp, kc, ci, ldc, init, pf); break;
        case 5: tile(5, xi, C, wp, kc, ci, ldc, init, pf); break;
#endif
#if MR > 6
        case 6: tile(6, xi, C, wp, kc, ci, ldc, init, pf); break;
        case 7: tile(7, xi, C, wp, kc, ci, ldc, init, pf); break;
#endif
        default: tile(MR, xi, C, wp, kc, ci, ldc, init, pf);
        }
    }
}

/* Rows [i0, i0+m) of out, panels [p0, p1): K blocks outermost, so the rows' K block stays
 * in L2 across the panels and each panel's KC slice in L1 across the row groups. Whole
 * panels accumulate in out itself, the first K block starting from the bias; a last panel
 * narrower than P in acc (MC x P), copied out at the end. */
static void task(float *out, const float *inp, const lp_qweight *w, const float *bias, int64_t i0, int64_t m,
                 int64_t p0, int64_t p1, int64_t C, int64_t OC, float *acc)
{
    const int64_t np = (OC + P - 1) / P;
    static const float zero[P];
    float binit[P];
    for (int64_t k0 = 0; k0 < C; k0 += KC) {
        const int64_t kc = C - k0 < KC ? C - k0 : KC;
        for (int64_t p = p0; p < p1; p++) {
            const int64_t o0 = p * P, ow = OC - o0 < P ? OC - o0 : P;
            const float *init = NULL;
            if (k0 == 0 && bias) {
                memset(binit, 0, sizeof binit);
                memcpy(binit, bias + o0, (size_t)ow * sizeof(float));
                init = binit;
            } else if (k0 == 0)
                init = zero;
            const float *wp = w->f32 + (k0 * np + p * kc) * P, *x = inp + i0 * C + k0;
            if (ow == P)
                panel_rows(x, C, m, wp, kc, out + i0 * OC + o0, OC, init, true);
            else
                panel_rows(x, C, m, wp, kc, acc, P, init, true);
        }
    }
    if (p1 * P > OC) /* the narrow last panel */
        for (int64_t q = 0; q < m; q++)
            memcpy(out + (i0 + q) * OC + (p1 - 1) * P, acc + q * P, (size_t)(OC - (p1 - 1) * P) * sizeof(float));
}

lp_status lp_k_f32_matmul_forward_opt(float *out, const float *inp, const lp_qweight *w, const float *bias,
                                      int64_t N, int64_t C, int64_t OC)
{
    lp_status st = check_shape(w, C, OC);
    if (st || N <= 0)
        return st;
    const bool par = (double)N * (double)C * (double)OC >= 262144.0;
    const int nt = par ? lp_threads_get() : 1;
    /* Balanced tasks: nc row chunks of mc rows (a multiple of MR, <= MC, the last one the
     * rest) and nb panel blocks of np / nb panels (+1 for the first np % nb), nb a multiple
     * of the threads, so every thread gets the same number of equal tasks (uneven splits
     * cost 25-40 % at two threads, e.g. 24 panels in blocks of 8, or 256 rows as 192 + 64). */
    const int64_t np = (OC + P - 1) / P, nc = (N + MC - 1) / MC;
    const int64_t mc = ((N + nc - 1) / nc + MR - 1) / MR * MR;
    int64_t nb = (np + PB - 1) / PB;
    nb = (nb + nt - 1) / nt * nt;
    nb = nb > np ? np : nb;
#pragma omp parallel num_threads(nt) if (par)
    {
        /* the narrow last panel's rows: on the thread's stack (32 KB with AVX-512), so the
         * GEMM allocates nothing and the memory plan has no scratch to count */
        float acc[MC * P] __attribute__((aligned(64)));
        int64_t lo, hi; /* contiguous (row chunk, panel block) tasks, panel block fastest */
        lp_k_split(nc * nb, omp_get_thread_num(), omp_get_num_threads(), &lo, &hi);
        for (int64_t t = lo; t < hi; t++) {
            const int64_t c = t / nb, b = t % nb, i0 = c * mc, q = np / nb, e = np % nb;
            const int64_t p0 = b * q + (b < e ? b : e), p1 = p0 + q + (b < e);
            if (i0 < N)
                task(out, inp, w, bias, i0, N - i0 < mc ? N - i0 : mc, p0, p1, C, OC, acc);
        }
    }
    return LP_OK;
}

/* ---- dinp (N,C) = dout (N,OC) @ W (OC,C): the input gradient through a frozen packed
 * weight (LoRA's base, the frozen Linears of a LoRA run) ----
 * Two paths: at few rows (N < BWD_T_MIN) the dot-product tiles just below; at more, W's
 * blocks transposed into L1 under the forward's tile (backward_transposed, further down).
 * A panel holds, for each k, 32 consecutive outputs o: pieces of W's column k. The
 * reduction (over o) therefore runs along the vectors and this is a dot-product kernel: a
 * tile of BR rows x 4 k holds BR x 4 vector accumulators; each step multiplies a row's dout
 * vector (consecutive o) by the four columns' weight vectors, and at the end each group of
 * four accumulators is reduced across lanes at once (sum4) and added into dinp. No scratch:
 * the packed copy replaces the f32 weight and nothing is unpacked.
 * Blocking: a task is a row chunk x one K block (the packing's KC columns). The reduction is
 * cut into o blocks of OBP panels (KC x OBP x 32 floats, 512 KB, stay in L2 while the
 * chunk's row tiles pass; each row tile's dout slice, BR x 512 floats, in L1 across the
 * k groups). A last panel narrower than 32 (zero-padded in W, not in dout) and a K block's
 * last kcb % 4 columns take a scalar loop. */
static lp_status check_bwd(const lp_qweight *w, int64_t C, int64_t OC)
{
    return lp_k_packed_weight_check(w, LP_DTYPE_F32, w ? w->f32 : NULL, C, OC, "f32_matmul_backward", "packed f32");
}

lp_status lp_k_f32_matmul_backward_ref(float *dinp, const float *dout, const lp_qweight *w, int64_t N, int64_t C,
                                       int64_t OC)
{
    lp_status st = check_bwd(w, C, OC);
    if (st)
        return st;
    for (int64_t i = 0; i < N; i++)
        for (int64_t k = 0; k < C; k++) {
            double acc = 0.0;
            for (int64_t o = 0; o < OC; o++)
                acc += (double)dout[i * OC + o] * (double)w->f32[pidx(OC, C, o, k)];
            dinp[i * C + k] = (float)acc;
        }
    return LP_OK;
}

/* dx[r, 0..4) += sum over np panels of dy[r, panel] . W[panel, k0+j] (j < 4), m <= BR rows:
 * dy row r at dy + r * ldy (the o block's first output), wk the first panel's slice at the
 * group's first k (W[o, k0+j] at wk[j * P + o % P]), the next panel pstride floats on. */
#if defined(__AVX512F__)
#define BR 6
/* lanes of a, b, c, d summed: {sum a, sum b, sum c, sum d} */
static inline __m128 sum4(__m512 a, __m512 b, __m512 c, __m512 d)
{
    const __m512 ab = _mm512_add_ps(_mm512_unpacklo_ps(a, b), _mm512_unpackhi_ps(a, b));
    const __m512 cd = _mm512_add_ps(_mm512_unpacklo_ps(c, d), _mm512_unpackhi_ps(c, d));
    const __m512 s = _mm512_add_ps(_mm512_shuffle_ps(ab, cd, _MM_SHUFFLE(1, 0, 1, 0)),
                                   _mm512_shuffle_ps(ab, cd, _MM_SHUFFLE(3, 2, 3, 2)));
    const __m256 t = _mm256_add_ps(_mm512_castps512_ps256(s),
                                   _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(s), 1)));
    return _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
}
static inline __attribute__((always_inline)) void dtile(int m, const float *dy, int64_t ldy, const float *wk,
                                                        int64_t pstride, int64_t np, float *dx, int64_t ldx)
{
    __m512 acc[BR][4];
    for (int r = 0; r < m; r++)
        for (int j = 0; j < 4; j++)
            acc[r][j] = _mm512_setzero_ps();
    for (int64_t p = 0; p < np; p++) {
        const float *wp = wk + p * pstride, *y = dy + p * P;
        for (int j = 0; j < 4; j++) /* the next panel's slice (PREFETCH) */
            _mm_prefetch((const char *)(wp + pstride + j * P), _MM_HINT_T0);
        for (int h = 0; h < P; h += 16) {
            __m512 yv[BR];
            for (int r = 0; r < m; r++)
                yv[r] = _mm512_loadu_ps(y + r * ldy + h);
            for (int j = 0; j < 4; j++) {
                const __m512 wv = _mm512_loadu_ps(wp + j * P + h);
                for (int r = 0; r < m; r++)
                    acc[r][j] = _mm512_fmadd_ps(yv[r], wv, acc[r][j]);
            }
        }
    }
    for (int r = 0; r < m; r++)
        _mm_storeu_ps(dx + r * ldx, _mm_add_ps(_mm_loadu_ps(dx + r * ldx),
                                               sum4(acc[r][0], acc[r][1], acc[r][2], acc[r][3])));
}
#elif defined(LP_HAVE_AVX2)
#define BR 3
/* 16 ymm registers: 3 rows x 4 k accumulators, 3 dout vectors, a weight vector */
static inline __m128 sum4(__m256 a, __m256 b, __m256 c, __m256 d)
{
    const __m256 s = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));
    return _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
}
static inline __attribute__((always_inline)) void dtile(int m, const float *dy, int64_t ldy, const float *wk,
                                                        int64_t pstride, int64_t np, float *dx, int64_t ldx)
{
    __m256 acc[BR][4];
    for (int r = 0; r < m; r++)
        for (int j = 0; j < 4; j++)
            acc[r][j] = _mm256_setzero_ps();
    for (int64_t p = 0; p < np; p++) {
        const float *wp = wk + p * pstride, *y = dy + p * P;
        for (int j = 0; j < 4; j++) /* the next panel's slice (PREFETCH) */
            _mm_prefetch((const char *)(wp + pstride + j * P), _MM_HINT_T0);
        for (int h = 0; h < P; h += 8) {
            __m256 yv[BR];
            for (int r = 0; r < m; r++)
                yv[r] = _mm256_loadu_ps(y + r * ldy + h);
            for (int j = 0; j < 4; j++) {
                const __m256 wv = _mm256_loadu_ps(wp + j * P + h);
                for (int r = 0; r < m; r++)
                    acc[r][j] = _mm256_fmadd_ps(yv[r], wv, acc[r][j]);
            }
        }
    }
    for (int r = 0; r < m; r++)
        _mm_storeu_ps(dx + r * ldx, _mm_add_ps(_mm_loadu_ps(dx + r * ldx),
                                               sum4(acc[r][0], acc[r][1], acc[r][2], acc[r][3])));
}
#else
#define BR 4
static void dtile(int m, const float *dy, int64_t ldy, const float *wk, int64_t pstride, int64_t np, float *dx,
                  int64_t ldx)
{
    for (int r = 0; r < m; r++)
        for (int j = 0; j < 4; j++) {
            float s = 0.0f;
            for (int64_t p = 0; p < np; p++)
                for (int o = 0; o < P; o++)
                    s += dy[r * ldy + p * P + o] * wk[p * pstride + j * P + o];
            dx[r * ldx + j] += s;
        }
}
#endif

enum { OBP = 8 /* panels per o block: KC x 256 floats of W, 256 KB */, MCB = 16 * BR };

/* dx[r, k] += dy[r, o0..o1) . W[o0..o1, k0+k] for k < kn, one scalar at a time: the columns
 * past the last group of four, and the outputs of a narrow last panel. */
static void dscalar(int64_t m, const float *dy, int64_t ldy, const lp_qweight *w, int64_t o0, int64_t o1,
                    int64_t k0, int64_t kn, float *dx, int64_t ldx)
{
    for (int64_t r = 0; r < m; r++)
        for (int64_t k = 0; k < kn; k++) {
            float s = 0.0f;
            for (int64_t o = o0; o < o1; o++)
                s += dy[r * ldy + o] * w->f32[pidx(w->rows, w->cols, o, k0 + k)];
            dx[r * ldx + k] += s;
        }
}

/* Rows [i0, i0+m) of dinp, the columns of K block k0 (kcb wide). */
static void dtask(float *dinp, const float *dout, const lp_qweight *w, int64_t i0, int64_t m, int64_t k0,
                  int64_t kcb, int64_t C, int64_t OC)
{
    const int64_t np = (OC + P - 1) / P, npf = OC / P, k4 = kcb / 4 * 4;
    const float *wb = w->f32 + k0 * np * P; /* this K block's slices, panel after panel */
    for (int64_t q = 0; q < m; q++)
        memset(dinp + (i0 + q) * C + k0, 0, (size_t)kcb * sizeof(float));
    for (int64_t p0 = 0; p0 < npf; p0 += OBP) {
        const int64_t pn = npf - p0 < OBP ? npf - p0 : OBP;
        for (int64_t i = 0; i < m; i += BR) {
            const int r = (int)(m - i < BR ? m - i : BR);
            const float *dy = dout + (i0 + i) * OC + p0 * P, *wk = wb + p0 * kcb * P;
            float *dx = dinp + (i0 + i) * C + k0;
            for (int64_t k = 0; k < k4; k += 4)
                switch (r) { /* a constant row count per call: the tile's loops unroll */
                case 1: dtile(1, dy, OC, wk + k * P, kcb * P, pn, dx + k, C); break;
                case 2: dtile(2, dy, OC, wk + k * P, kcb * P, pn, dx + k, C); break;
#if BR > 3
                case 3: dtile(3, dy, OC, wk + k * P, kcb * P, pn, dx + k, C); break;
#endif
#if BR > 4
                case 4: dtile(4, dy, OC, wk + k * P, kcb * P, pn, dx + k, C); break;
                case 5: dtile(5, dy, OC, wk + k * P, kcb * P, pn, dx + k, C); break;
#endif
                default: dtile(BR, dy, OC, wk + k * P, kcb * P, pn, dx + k, C);
                }
        }
    }
    if (k4 < kcb)
        dscalar(m, dout + i0 * OC, OC, w, 0, npf * P, k0 + k4, kcb - k4, dinp + i0 * C + k0 + k4, C);
    if (np > npf)
        dscalar(m, dout + i0 * OC, OC, w, npf * P, OC, k0, kcb, dinp + i0 * C + k0, C);
}

/* ---- the input gradient at many rows: W's blocks transposed into L1, the forward's tile ----
 * The dot-product tiles above re-read their W slices from L2 for every BR rows and sum
 * across lanes; they read 60-75 % of the AVX-512 peak. At many rows a 32 x 32 block of a
 * panel (32 k of one K block x the panel's 32 outputs, 4 KB, contiguous in the packing) is
 * transposed once into a k-panel slice (o-major, 32 k per o: the forward's panel layout with
 * the roles of k and o swapped), OB outputs deep, and the forward's register tile (8 rows x
 * 32 columns of dinp with AVX-512, 6 x 16 twice with AVX2) runs on it with o the reduction:
 * dinp (rows, 32 k) += dout (rows, OB o) @ Wt (OB o, 32 k). One transposed slice (32 KB)
 * serves the task's whole row chunk (up to MC rows), so the transposes cost ~1/MC of the
 * multiply-adds; the chunk's dout block (MC x OB) stays in L2 across the task's k panels. */
enum { OB = 256 /* outputs (the reduction) per transposed slice: OB x 32 floats, 32 KB */ };

/* d[o * P + t] = s[t * P + o] for o < 32, t < kw (rows past kw zero): one 32 x 32 block of
 * a panel slice (k rows t, 32 outputs o each) into the transposed slice. */
static void transpose32(const float *s, float *d, int64_t kw)
{
    if (kw < P) { /* the last K block's narrow end: rare, plain */
        for (int o = 0; o < P; o++)
            for (int t = 0; t < P; t++)
                d[o * P + t] = t < kw ? s[t * P + o] : 0.0f;
        return;
    }
#if defined(__AVX512F__)
    /* four 16 x 16 transposes: pairs (unpack), quads (shuffle_ps), then 128-bit lanes */
    for (int bt = 0; bt < P; bt += 16)
        for (int bo = 0; bo < P; bo += 16) {
            __m512 r[16], t[16], u[16];
            for (int i = 0; i < 16; i++)
                r[i] = _mm512_loadu_ps(s + (bt + i) * P + bo);
            for (int i = 0; i < 16; i += 2) {
                t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
                t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
            }
            for (int g = 0; g < 16; g += 4) { /* u[g + c], lane L: column 4L + c, rows g..g+3 */
                u[g] = _mm512_shuffle_ps(t[g], t[g + 2], 0x44);
                u[g + 1] = _mm512_shuffle_ps(t[g], t[g + 2], 0xee);
                u[g + 2] = _mm512_shuffle_ps(t[g + 1], t[g + 3], 0x44);
                u[g + 3] = _mm512_shuffle_ps(t[g + 1], t[g + 3], 0xee);
            }
            for (int c = 0; c < 4; c++) { /* the 4 x 4 transpose of u[c], u[4+c], u[8+c], u[12+c]'s lanes */
                const __m512 v0 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0x44),
                             v1 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0xee),
                             v2 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0x44),
                             v3 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0xee);
                float *dc = d + (bo + c) * P + bt;
                _mm512_storeu_ps(dc, _mm512_shuffle_f32x4(v0, v2, 0x88));
                _mm512_storeu_ps(dc + 4 * P, _mm512_shuffle_f32x4(v0, v2, 0xdd));
                _mm512_storeu_ps(dc + 8 * P, _mm512_shuffle_f32x4(v1, v3, 0x88));
                _mm512_storeu_ps(dc + 12 * P, _mm512_shuffle_f32x4(v1, v3, 0xdd));
            }
        }
#elif defined(LP_HAVE_AVX2)
    for (int bt = 0; bt < P; bt += 8) /* sixteen 8 x 8 transposes */
        for (int bo = 0; bo < P; bo += 8)
            lp_transpose8x8(s + bt * P + bo, P, d + bo * P + bt, P);
#else
    for (int o = 0; o < P; o++)
        for (int t = 0; t < P; t++)
            d[o * P + t] = s[t * P + o];
#endif
}

/* panel_rows without the prefetch (pf a constant: no test in the k loop) */
static void panel_rows_nopf(const float *x, int64_t ldx, int64_t m, const float *wp, int64_t kc, float *c, int64_t ldc,
                            const float *init)
{
    panel_rows(x, ldx, m, wp, kc, c, ldc, init, false);
}

/* The blocks transposed for o block o0 and k panel q: *nb of them (panels pa..pb), 32 x 32
 * floats each, *stride floats apart (one K block's panel slice); the first returned. */
static const float *tsrc(const lp_qweight *w, int64_t o0, int64_t q, int64_t C, int64_t OC, int64_t *nb,
                         int64_t *stride)
{
    const int64_t np = (OC + P - 1) / P, ob = OC - o0 < OB ? OC - o0 : OB, pa = o0 / P;
    const int64_t k = q * P, kb = k / KC * KC, kcb = C - kb < KC ? C - kb : KC;
    *nb = (o0 + ob + P - 1) / P - pa;
    *stride = kcb * P;
    return w->f32 + (kb * np + pa * kcb + (k - kb)) * P;
}

/* Rows [i0, i0+m) of dinp (m <= MC), k panels [q0, q1) (32 columns each, each within one
 * K block; the last of C may be narrower): o blocks of OB outermost, so the rows' dout block
 * stays in L2 across the panels; the first o block starts the sums from zero. wt: OB x P
 * floats, acc: MC x P (a narrow last panel's rows, copied out at the end).
 * PREFETCH: the next slice's blocks (8 pages 32 KB apart, from DRAM for the 17 MB MLP
 * weights, where the hardware prefetcher stops at each page) are fetched into L2 while this
 * slice computes, spread over its row groups so the misses overlap the multiply-adds
 * instead of stalling the next transposition. */
static void dtask_t(float *dinp, const float *dout, const lp_qweight *w, int64_t i0, int64_t m, int64_t q0,
                    int64_t q1, int64_t C, int64_t OC, float *wt, float *acc)
{
    static const float zero[P];
    enum { PR = 4 * MR, LINES = P * P * (int)sizeof(float) / 64 /* cache lines a block */ };
    const int64_t pieces = (m + PR - 1) / PR;
    for (int64_t o0 = 0; o0 < OC; o0 += OB) {
        const int64_t ob = OC - o0 < OB ? OC - o0 : OB;
        for (int64_t q = q0; q < q1; q++) {
            const int64_t k = q * P, kw = C - k < P ? C - k : P;
            int64_t nb, stride, nnb = 0, nstride = 0;
            const float *src = tsrc(w, o0, q, C, OC, &nb, &stride), *nx = NULL;
            for (int64_t b = 0; b < nb; b++)
                transpose32(src + b * stride, wt + b * P * P, kw);
            if (q + 1 < q1)
                nx = tsrc(w, o0, q + 1, C, OC, &nnb, &nstride);
            else if (o0 + OB < OC)
                nx = tsrc(w, o0 + OB, q0, C, OC, &nnb, &nstride);
            /* a narrow last panel: W's zero padding past OC is transposed but never read,
             * as the reduction stops at ob */
            const float *init = o0 ? NULL : zero;
            const int64_t lines = nnb * LINES;
            for (int64_t j = 0; j < pieces; j++) {
                const int64_t r = j * PR, mr = m - r < PR ? m - r : PR;
                if (kw == P)
                    panel_rows_nopf(dout + (i0 + r) * OC + o0, OC, mr, wt, ob, dinp + (i0 + r) * C + k, C, init);
                else
                    panel_rows_nopf(dout + (i0 + r) * OC + o0, OC, mr, wt, ob, acc + r * P, P, init);
                for (int64_t l = j * lines / pieces; l < (j + 1) * lines / pieces; l++) /* (PREFETCH) */
                    __builtin_prefetch(nx + l / LINES * nstride + l % LINES * 16, 0, 2);
            }
        }
    }
    if (q1 * P > C) /* the narrow last panel */
        for (int64_t r = 0; r < m; r++)
            memcpy(dinp + (i0 + r) * C + (q1 - 1) * P, acc + r * P, (size_t)(C - (q1 - 1) * P) * sizeof(float));
}

/* Rows from which the transposing path runs. Measured (bench_f32_gemm --backward --rows,
 * one thread, busy Zen 5, 2026-11-27 17:35): at AVX-512 it is ahead of the dot-product tiles
 * from N = 32 (e.g. 896 -> 896: 77 % of the peak against 60 %; at N >= 256 88-94 % against
 * 23-75 %); at AVX2 the dot-product tiles read ~90 % of the AVX2 peak up to N = 128 and the
 * transposing path 81-90 % there, ahead of them only past it. */
#if defined(__AVX512F__)
enum { BWD_T_MIN = 16 };
#elif defined(LP_HAVE_AVX2)
enum { BWD_T_MIN = 128 };
#else
enum { BWD_T_MIN = 64 };
#endif

static void backward_transposed(float *dinp, const float *dout, const lp_qweight *w, int64_t N, int64_t C,
                                int64_t OC, int nt, bool par)
{
    /* Balanced tasks as the forward's: nc row chunks of mc rows x nb blocks of k panels,
     * nb a multiple of the threads; k panels fastest so a thread's tasks share a row chunk */
    const int64_t nq = (C + P - 1) / P, nc = (N + MC - 1) / MC;
    const int64_t mc = ((N + nc - 1) / nc + MR - 1) / MR * MR;
    int64_t nb = (nq + PB - 1) / PB;
    nb = (nb + nt - 1) / nt * nt;
    nb = nb > nq ? nq : nb;
#pragma omp parallel num_threads(nt) if (par)
    {
        /* on the thread's stack (32 + 32 KB with AVX-512): the GEMM allocates nothing */
        float wt[OB * P] __attribute__((aligned(64))), acc[MC * P] __attribute__((aligned(64)));
        int64_t lo, hi;
        lp_k_split(nc * nb, omp_get_thread_num(), omp_get_num_threads(), &lo, &hi);
        for (int64_t t = lo; t < hi; t++) {
            const int64_t c = t / nb, b = t % nb, i0 = c * mc, q = nq / nb, e = nq % nb;
            const int64_t q0 = b * q + (b < e ? b : e), q1 = q0 + q + (b < e);
            if (i0 < N)
                dtask_t(dinp, dout, w, i0, N - i0 < mc ? N - i0 : mc, q0, q1, C, OC, wt, acc);
        }
    }
}

lp_status lp_k_f32_matmul_backward_opt(float *dinp, const float *dout, const lp_qweight *w, int64_t N, int64_t C,
                                       int64_t OC)
{
    lp_status st = check_bwd(w, C, OC);
    if (st || N <= 0)
        return st;
    const bool par = (double)N * (double)C * (double)OC >= 262144.0;
    const int nt = par ? lp_threads_get() : 1;
    if (N >= BWD_T_MIN) {
        backward_transposed(dinp, dout, w, N, C, OC, nt, par);
        return LP_OK;
    }
    /* tasks: nc row chunks (equal, multiples of BR) x nk K blocks, K blocks fastest */
    const int64_t nk = (C + KC - 1) / KC, nc = (N + MCB - 1) / MCB;
    const int64_t mc = ((N + nc - 1) / nc + BR - 1) / BR * BR;
#pragma omp parallel num_threads(nt) if (par)
    {
        int64_t lo, hi;
        lp_k_split(nc * nk, omp_get_thread_num(), omp_get_num_threads(), &lo, &hi);
        for (int64_t t = lo; t < hi; t++) {
            const int64_t i0 = t / nk * mc, k0 = t % nk * KC;
            if (i0 < N)
                dtask(dinp, dout, w, i0, N - i0 < mc ? N - i0 : mc, k0, C - k0 < KC ? C - k0 : KC, C, OC);
        }
    }
    return LP_OK;
}
