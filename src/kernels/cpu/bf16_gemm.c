/* Weights held in bf16 (lp_qweight with dtype LP_DTYPE_BF16) and their GEMM:
 * out (N,OC) = inp (N,C) @ W^T + bias, f32 accumulation.
 *
 * Packed once at load into the micro-kernel's panels (kernels.h, LP_BF16_PANEL): panels of
 * 32 output channels, the reduction dimension in adjacent pairs, so one 64-byte load is
 * 16 outputs x 2 k -- exactly the operand layout vdpbf16ps multiplies with a broadcast
 * pair of activations. The activations are rounded to bf16 (nearest even) once per call
 * into a TEMPORARY (N, cpad) buffer, so every path multiplies the same bf16 operands:
 *   AVX512_BF16: vdpbf16ps, 8 rows x 32 outputs in 16 accumulators;
 *   AVX-512: the pairs widened to f32 by shift and mask, FMA, 8 rows x 32 outputs;
 *   AVX2: the same widening, 4 rows x 8 outputs (a quarter panel) at a time;
 *   baseline: the same loops in plain C;
 * and one row (decode) with four independent accumulator chains on the AVX-512 paths.
 * Products of two bf16 are exact in f32, so the paths differ from the reference (double
 * sums) only by f32 accumulation order (and vdpbf16ps flushing denormals).
 * Threads split (row chunk, panel) tasks in contiguous ranges: at N = 1 each thread
 * streams its own panels once (decode at memory bandwidth), at large N each thread keeps
 * a chunk of activation rows in L2 while it sweeps the panels. */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "cpu_kernels.h"
#include "simd.h"

#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

enum {
    P = LP_BF16_PANEL,
    NB = 64, /* activation rows per task: 64 x 896 bf16 = 112 KB */
    KBP = 256 /* k pairs per pass over a panel: its 32 KB slice stays in L1 while the task's
                 row tiles sweep it (a 3072-wide reduction would stream 192 KB from L2 per tile) */
};

size_t lp_qweight_bf16_plan_nbytes(int64_t rows, int64_t cols)
{
    if (rows <= 0 || cols <= 0)
        return 0;
    const size_t panels = (size_t)((rows + P - 1) / P), cpad = (size_t)((cols + 1) & ~(int64_t)1);
    return (panels * P * cpad * sizeof(uint16_t) + 63) & ~(size_t)63;
}

/* Index of W[o, k] in the packed panels. */
static inline int64_t pidx(int64_t cpad, int64_t o, int64_t k)
{
    return (((o / P) * (cpad / 2) + k / 2) * P + o % P) * 2 + (k & 1);
}

lp_status lp_qweight_pack_bf16(lp_qweight *q, const float *w, int64_t rows, int64_t cols, const char *name)
{
    memset(q, 0, sizeof *q);
    const char *nm = name ? name : "weight";
    if (rows <= 0 || cols <= 0 || !w)
        return lp_err(LP_STATUS_INVALID_ARG, "bf16 %s: bad shape [%lld, %lld]", nm, (long long)rows,
                      (long long)cols);
    for (int64_t i = 0; i < rows * cols; i++)
        if (!isfinite(w[i]))
            return lp_err(LP_STATUS_NUMERIC, "bf16 %s: non-finite weight %g at [%lld, %lld]", nm, (double)w[i],
                          (long long)(i / cols), (long long)(i % cols));
    const size_t bytes = lp_qweight_bf16_plan_nbytes(rows, cols);
    uint16_t *m = lp_alloc(bytes, LP_MEM_CATEGORY_QUANTIZED_WEIGHT, nm);
    if (!m)
        return LP_STATUS_NO_MEMORY;
    memset(m, 0, bytes); /* padding rows and the odd column multiply as zeros */
    const int64_t cpad = (cols + 1) & ~(int64_t)1;
    for (int64_t o = 0; o < rows; o++)
        for (int64_t k = 0; k < cols; k++)
            m[pidx(cpad, o, k)] = lp_f32_to_bf16(w[o * cols + k]);
    *q = (lp_qweight){.dtype = LP_DTYPE_BF16, .rows = rows, .cols = cols, .n = rows * cols, .bf16 = m,
                      .cpad = cpad, .mem = m};
    return LP_OK;
}

void lp_k_bf16_dequantize_range(float *out, const lp_qweight *w, int64_t start, int64_t n)
{
    for (int64_t e = 0; e < n; e++) {
        const int64_t i = start + e;
        out[e] = lp_bf16_to_f32(w->bf16[pidx(w->cpad, i / w->cols, i % w->cols)]);
    }
}

static lp_status check_shape(const lp_qweight *w, int64_t C, int64_t OC)
{
    return lp_k_packed_weight_check(w, LP_DTYPE_BF16, w ? w->bf16 : NULL, C, OC, "bf16_matmul_forward", "bf16");
}

/* The reference: both operands rounded to bf16, products summed in double. */
lp_status lp_k_bf16_matmul_forward_ref(float *out, const float *inp, const lp_qweight *w, const float *bias,
                                       int64_t N, int64_t C, int64_t OC)
{
    lp_status st = check_shape(w, C, OC);
    if (st)
        return st;
    for (int64_t i = 0; i < N; i++)
        for (int64_t o = 0; o < OC; o++) {
            double acc = bias ? bias[o] : 0.0;
            for (int64_t k = 0; k < C; k++)
                acc += (double)lp_bf16_to_f32(lp_f32_to_bf16(inp[i * C + k])) *
                       (double)lp_bf16_to_f32(w->bf16[pidx(w->cpad, o, k)]);
            out[i * OC + o] = (float)acc;
        }
    return LP_OK;
}

/* dst (cpad) = src (C) rounded to bf16, nearest even (lp_f32_to_bf16's rule, NaN kept
 * quiet), the odd pad column 0. */
static void round_row(uint16_t *dst, const float *src, int64_t C, int64_t cpad)
{
    int64_t k = 0;
#if defined(__AVX512BF16__)
    for (; k + 16 <= C; k += 16)
        _mm256_storeu_si256((__m256i *)(dst + k), (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(src + k)));
#endif
#pragma omp simd
    for (int64_t j = k; j < C; j++) {
        uint32_t u;
        memcpy(&u, &src[j], 4);
        uint32_t r = (u & 0x7fffffffu) > 0x7f800000u ? (u | 0x00400000u) : u + 0x7fffu + ((u >> 16) & 1u);
        dst[j] = (uint16_t)(r >> 16);
    }
    if (cpad > C)
        dst[C] = 0;
}

#if defined(__AVX512F__) || defined(LP_HAVE_AVX2)
/* activations k = 2kk and 2kk+1 as one 32-bit lane, to broadcast */
static inline uint32_t pair_at(const uint16_t *x, int64_t kk)
{
    uint32_t v;
    memcpy(&v, x + 2 * kk, 4);
    return v;
}
#endif

/* acc (m, P) = rows x[0..m) (stride ldx, bf16 pairs) times panel wp (kp pairs): one micro-tile.
 * Inlined with m a constant at each call site, so the row loops unroll into registers. */
#if defined(__AVX512BF16__)
static inline __attribute__((always_inline)) void tile(int m, const uint16_t *x, int64_t ldx, const uint16_t *wp,
                                                       int64_t kp, float *acc)
{
    __m512 c0[8], c1[8];
    for (int r = 0; r < m; r++)
        c0[r] = c1[r] = _mm512_setzero_ps();
    for (int64_t kk = 0; kk < kp; kk++) {
        const __m512bh w0 = (__m512bh)_mm512_loadu_si512(wp + kk * 2 * P),
                       w1 = (__m512bh)_mm512_loadu_si512(wp + kk * 2 * P + P);
        for (int r = 0; r < m; r++) {
            const __m512bh a = (__m512bh)_mm512_set1_epi32((int)pair_at(x + r * ldx, kk));
            c0[r] = _mm512_dpbf16_ps(c0[r], a, w0);
            c1[r] = _mm512_dpbf16_ps(c1[r], a, w1);
        }
    }
    for (int r = 0; r < m; r++) {
        _mm512_storeu_ps(acc + r * P, c0[r]);
        _mm512_storeu_ps(acc + r * P + 16, c1[r]);
    }
}
/* One row (decode): the row's two accumulators would chain every vdpbf16ps on the one
 * before it; four (k pairs alternating) keep the loads, not the latency, the limit. */
static void tile1(const uint16_t *x, const uint16_t *wp, int64_t kp, float *acc)
{
    __m512 c0 = _mm512_setzero_ps(), c1 = c0, d0 = c0, d1 = c0;
    int64_t kk = 0;
    for (; kk + 2 <= kp; kk += 2) {
        const uint16_t *w = wp + kk * 2 * P;
        const __m512bh a = (__m512bh)_mm512_set1_epi32((int)pair_at(x, kk)),
                       b = (__m512bh)_mm512_set1_epi32((int)pair_at(x, kk + 1));
        c0 = _mm512_dpbf16_ps(c0, a, (__m512bh)_mm512_loadu_si512(w));
        c1 = _mm512_dpbf16_ps(c1, a, (__m512bh)_mm512_loadu_si512(w + P));
        d0 = _mm512_dpbf16_ps(d0, b, (__m512bh)_mm512_loadu_si512(w + 2 * P));
        d1 = _mm512_dpbf16_ps(d1, b, (__m512bh)_mm512_loadu_si512(w + 3 * P));
    }
    if (kk < kp) {
        const __m512bh a = (__m512bh)_mm512_set1_epi32((int)pair_at(x, kk));
        c0 = _mm512_dpbf16_ps(c0, a, (__m512bh)_mm512_loadu_si512(wp + kk * 2 * P));
        c1 = _mm512_dpbf16_ps(c1, a, (__m512bh)_mm512_loadu_si512(wp + kk * 2 * P + P));
    }
    _mm512_storeu_ps(acc, _mm512_add_ps(c0, d0));
    _mm512_storeu_ps(acc + 16, _mm512_add_ps(c1, d1));
}
#define HAVE_TILE1 1
#define MR 8
#elif defined(__AVX512F__)
/* a pair register (16 lanes of (even, odd) bf16) as its even and odd elements in f32 */
#define LO16(v) _mm512_castsi512_ps(_mm512_slli_epi32(v, 16))
#define HI16(v) _mm512_castsi512_ps(_mm512_and_si512(v, _mm512_set1_epi32((int)0xffff0000u)))
static inline __attribute__((always_inline)) void tile(int m, const uint16_t *x, int64_t ldx, const uint16_t *wp,
                                                       int64_t kp, float *acc)
{
    __m512 c0[8], c1[8];
    for (int r = 0; r < m; r++)
        c0[r] = c1[r] = _mm512_setzero_ps();
    for (int64_t kk = 0; kk < kp; kk++) {
        const __m512i w0 = _mm512_loadu_si512(wp + kk * 2 * P), w1 = _mm512_loadu_si512(wp + kk * 2 * P + P);
        const __m512 w0e = LO16(w0), w0o = HI16(w0), w1e = LO16(w1), w1o = HI16(w1);
        for (int r = 0; r < m; r++) {
            const __m512i a = _mm512_set1_epi32((int)pair_at(x + r * ldx, kk));
            const __m512 ae = LO16(a), ao = HI16(a);
            c0[r] = _mm512_fmadd_ps(w0o, ao, _mm512_fmadd_ps(w0e, ae, c0[r]));
            c1[r] = _mm512_fmadd_ps(w1o, ao, _mm512_fmadd_ps(w1e, ae, c1[r]));
        }
    }
    for (int r = 0; r < m; r++) {
        _mm512_storeu_ps(acc + r * P, c0[r]);
        _mm512_storeu_ps(acc + r * P + 16, c1[r]);
    }
}
/* One row (decode): even and odd k into separate accumulators, so the two FMAs of a pair
 * do not chain on each other (four independent chains). */
static void tile1(const uint16_t *x, const uint16_t *wp, int64_t kp, float *acc)
{
    __m512 c0 = _mm512_setzero_ps(), c1 = c0, d0 = c0, d1 = c0;
    for (int64_t kk = 0; kk < kp; kk++) {
        const __m512i w0 = _mm512_loadu_si512(wp + kk * 2 * P), w1 = _mm512_loadu_si512(wp + kk * 2 * P + P);
        const __m512i a = _mm512_set1_epi32((int)pair_at(x, kk));
        const __m512 ae = LO16(a), ao = HI16(a);
        c0 = _mm512_fmadd_ps(LO16(w0), ae, c0);
        d0 = _mm512_fmadd_ps(HI16(w0), ao, d0);
        c1 = _mm512_fmadd_ps(LO16(w1), ae, c1);
        d1 = _mm512_fmadd_ps(HI16(w1), ao, d1);
    }
    _mm512_storeu_ps(acc, _mm512_add_ps(c0, d0));
    _mm512_storeu_ps(acc + 16, _mm512_add_ps(c1, d1));
}
#define HAVE_TILE1 1
#define MR 8
#elif defined(LP_HAVE_AVX2)
#define LO16(v) _mm256_castsi256_ps(_mm256_slli_epi32(v, 16))
#define HI16(v) _mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32((int)0xffff0000u)))
/* 16 ymm registers: the panel in four quarters of 8 outputs (one 32-byte load of 8 pairs per
 * k pair); 4 rows, each with separate even-k and odd-k accumulators (8 independent FMA
 * chains), the weight's two halves and the row's two broadcasts: 13 registers, no spills. */
static inline __attribute__((always_inline)) void tile(int m, const uint16_t *x, int64_t ldx, const uint16_t *wp,
                                                       int64_t kp, float *acc)
{
    for (int h = 0; h < 4; h++) {
        __m256 ce[4], co[4];
        for (int r = 0; r < m; r++)
            ce[r] = co[r] = _mm256_setzero_ps();
        for (int64_t kk = 0; kk < kp; kk++) {
            const __m256i w0 = _mm256_loadu_si256((const __m256i *)(wp + kk * 2 * P + h * 16));
            const __m256 we = LO16(w0), wo = HI16(w0);
            for (int r = 0; r < m; r++) {
                const __m256i a = _mm256_set1_epi32((int)pair_at(x + r * ldx, kk));
                ce[r] = _mm256_fmadd_ps(we, LO16(a), ce[r]);
                co[r] = _mm256_fmadd_ps(wo, HI16(a), co[r]);
            }
        }
        for (int r = 0; r < m; r++)
            _mm256_storeu_ps(acc + r * P + h * 8, _mm256_add_ps(ce[r], co[r]));
    }
}
#define MR 4
#else
static inline float bf(uint16_t v)
{
    uint32_t u = (uint32_t)v << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static void tile(int m, const uint16_t *x, int64_t ldx, const uint16_t *wp, int64_t kp, float *acc)
{
    for (int r = 0; r < m; r++) {
        float *c = acc + r * P;
        for (int j = 0; j < P; j++)
            c[j] = 0.0f;
        for (int64_t kk = 0; kk < kp; kk++) {
            const float xe = bf(x[r * ldx + 2 * kk]), xo = bf(x[r * ldx + 2 * kk + 1]);
            const uint16_t *wk = wp + kk * 2 * P;
            for (int j = 0; j < P; j++)
                c[j] += bf(wk[2 * j]) * xe + bf(wk[2 * j + 1]) * xo;
        }
    }
}
#define MR 4
#endif

/* rows [i0, i0+m) of out (row stride ldo), panel p of the packed panels wpan (kp pairs):
 * one tile per MR rows and KBP k pairs, the first slice written with the bias (or added to
 * out when accumulate), the later ones added */
static void task(float *out, int64_t ldo, bool accumulate, const uint16_t *xa, int64_t cp, const uint16_t *wpan,
                 const float *bias, int64_t i0, int64_t m, int64_t p, int64_t OC)
{
    const int64_t kpt = cp / 2, o0 = p * P, ow = OC - o0 < P ? OC - o0 : P;
    float acc[MR * P];
    for (int64_t k0 = 0; k0 < kpt; k0 += KBP) {
        const int64_t kp = kpt - k0 < KBP ? kpt - k0 : KBP;
        const bool add = accumulate || k0 > 0;
        const uint16_t *wp = wpan + (p * kpt + k0) * 2 * P;
        for (int64_t i = i0; i < i0 + m; i += MR) {
            const int r = (int)(i0 + m - i < MR ? i0 + m - i : MR);
            const uint16_t *x = xa + i * cp + 2 * k0;
            switch (r) { /* a constant row count per call: the tile's loops unroll */
            case 1:
#if defined(HAVE_TILE1)
                tile1(x, wp, kp, acc);
#else
                tile(1, x, cp, wp, kp, acc);
#endif
                break;
            case 2: tile(2, x, cp, wp, kp, acc); break;
            case 3: tile(3, x, cp, wp, kp, acc); break;
#if MR == 8
            case 4: tile(4, x, cp, wp, kp, acc); break;
            case 5: tile(5, x, cp, wp, kp, acc); break;
            case 6: tile(6, x, cp, wp, kp, acc); break;
            case 7: tile(7, x, cp, wp, kp, acc); break;
#endif
            default: tile(MR, x, cp, wp, kp, acc);
            }
            for (int q = 0; q < r; q++) {
                float *y = out + (i + q) * ldo + o0;
                const float *a = acc + q * P;
                if (add)
                    for (int64_t j = 0; j < ow; j++)
                        y[j] += a[j];
                else if (bias)
                    for (int64_t j = 0; j < ow; j++)
                        y[j] = a[j] + bias[o0 + j];
                else
                    memcpy(y, a, (size_t)ow * sizeof(float));
            }
        }
    }
}

/* This thread's share of the (row chunk, panel) tasks of out (M, OC) = xa (M, cp bf16) @
 * panels^T: contiguous ranges, panel fastest. Called inside a parallel region (or alone). */
static void gemm_share(float *out, int64_t ldo, bool accumulate, const uint16_t *xa, int64_t M, int64_t cp,
                       const uint16_t *wpan, const float *bias, int64_t OC)
{
    const int64_t np = (OC + P - 1) / P, nc = (M + NB - 1) / NB;
    int64_t lo, hi;
    lp_k_split(nc * np, omp_get_thread_num(), omp_get_num_threads(), &lo, &hi);
    for (int64_t t = lo; t < hi; t++) {
        const int64_t c = t / np, i0 = c * NB;
        task(out, ldo, accumulate, xa, cp, wpan, bias, i0, M - i0 < NB ? M - i0 : NB, t % np, OC);
    }
}

void lp_k_bf16_gemm_panels(float *out, int64_t ldo, bool accumulate, const uint16_t *xa, int64_t M, int64_t cp,
                           const uint16_t *wpan, const float *bias, int64_t OC)
{
    const bool par = (double)M * (double)cp * (double)OC >= 262144.0;
#pragma omp parallel if (par)
    gemm_share(out, ldo, accumulate, xa, M, cp, wpan, bias, OC);
}

void lp_k_bf16_round_rows(uint16_t *dst, const float *src, int64_t N, int64_t C, int64_t cp)
{
#pragma omp parallel for schedule(static) if (N * C >= LP_PAR_MIN)
    for (int64_t i = 0; i < N; i++)
        round_row(dst + i * cp, src + i * C, C, cp);
}

lp_status lp_k_bf16_matmul_forward_opt(float *out, const float *inp, const lp_qweight *w, const float *bias,
                                       int64_t N, int64_t C, int64_t OC)
{
    lp_status st = check_shape(w, C, OC);
    if (st || N <= 0)
        return st;
    const int64_t cp = w->cpad;
    uint16_t *xa = lp_alloc((size_t)(N * cp) * sizeof(uint16_t), LP_MEM_CATEGORY_TEMPORARY, "bf16 activations");
    if (!xa)
        return LP_STATUS_NO_MEMORY;
    const bool par = (double)N * (double)C * (double)OC >= 262144.0;
#pragma omp parallel if (par)
    {
#pragma omp for schedule(static)
        for (int64_t i = 0; i < N; i++)
            round_row(xa + i * cp, inp + i * C, C, cp);
        gemm_share(out, OC, false, xa, N, cp, w->bf16, bias, OC);
    }
    lp_free(xa);
    return LP_OK;
}
