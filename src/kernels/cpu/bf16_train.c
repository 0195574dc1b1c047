/* bf16 training GEMMs (autocast semantics: bf16 operands, f32 accumulation, f32 results)
 * over a weight whose f32 master copy the optimizer updates:
 *   forward  out (N,OC) = x (N,C) @ W^T         bf16_gemm.c's kernel on the W panels;
 *   backward dX (N,C)   = dY (N,OC) @ W          the same engine on W^T packed as panels;
 *            dW (OC,C) += dY^T (OC,N) @ X (N,C)  the engine with dY^T as the rows and X
 *                                                packed per call as panels (pairs along N).
 * The weight (lp_qweight_pack_bf16_train) holds both packings in one block; after each
 * optimizer step lp_qweight_repack_bf16 rounds the new master weights into it in place.
 * Every path multiplies the same bf16 operands (exact products in f32), so the paths and
 * the double-sum reference differ by f32 summation order only. */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "cpu_kernels.h"

#if defined(__AVX2__)
#include <immintrin.h>
#endif

enum { P = LP_BF16_PANEL };

static inline int64_t even(int64_t x)
{
    return (x + 1) & ~(int64_t)1;
}

static inline size_t panel_bytes(int64_t rows, int64_t cols)
{
    return (size_t)((rows + P - 1) / P) * P * (size_t)even(cols) * sizeof(uint16_t);
}

static inline size_t up64(size_t x)
{
    return (x + 63) & ~(size_t)63;
}

size_t lp_qweight_bf16_train_plan_nbytes(int64_t rows, int64_t cols)
{
    if (rows <= 0 || cols <= 0)
        return 0;
    return up64(panel_bytes(rows, cols)) + up64(panel_bytes(cols, rows));
}

/* x rounded to bf16, nearest even, NaN kept quiet: lp_f32_to_bf16's rule, inlined for the
 * packing loops (a call per element would cost a few % of a step). */
static inline uint16_t rnd(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    const uint32_t r = (u & 0x7fffffffu) > 0x7f800000u ? (u | 0x00400000u) : u + 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(r >> 16);
}

/* Index of M[o, k] in panels of a matrix with cp (even) columns (bf16_gemm.c's layout). */
static inline int64_t pidx(int64_t cp, int64_t o, int64_t k)
{
    return (((o / P) * (cp / 2) + k / 2) * P + o % P) * 2 + (k & 1);
}

/* (lo, hi) rounded to bf16 as one 32-bit pair, lo in the low half: the panels' k pair. */
static inline uint32_t pair(float lo, float hi)
{
    return (uint32_t)rnd(lo) | (uint32_t)rnd(hi) << 16;
}

/* dst = panels of M (R, K) rounded to bf16, where M = w (R, K) or, with trans, w^T for w
 * (K, R), one element at a time: the reference the tiled packing below is held equal to.
 * Only the real elements are written: the padding stays as the pack zeroed it. */
static void pack_ref(uint16_t *dst, const float *w, int64_t R, int64_t K, bool trans)
{
    const int64_t kp = even(K) / 2, np = (R + P - 1) / P;
    for (int64_t p = 0; p < np; p++) {
        const int64_t o0 = p * P, ow = R - o0 < P ? R - o0 : P;
        uint32_t *d = (uint32_t *)dst + p * kp * P; /* pair kk of output o0 + j at d[kk * P + j] */
        for (int64_t kk = 0; kk < kp; kk++, d += P)
            for (int64_t j = 0; j < ow; j++) {
                const int64_t k = 2 * kk, o = o0 + j;
                const float lo = trans ? w[k * R + o] : w[o * K + k],
                            hi = k + 1 < K ? (trans ? w[(k + 1) * R + o] : w[o * K + k + 1]) : 0.0f;
                d[j] = pair(lo, hi);
            }
    }
}

void lp_k_bf16_repack_ref(lp_qweight *q, const float *w)
{
    pack_ref(q->bf16, w, q->rows, q->cols, false);
    if (q->bf16t)
        pack_ref(q->bf16t, w, q->cols, q->rows, true);
}

/* ---- the tiled packings: 32 x 32 tiles of a row-major f32 matrix, rounded once ----
 * A tile's rows paired (rows 2t and 2t+1 of a column as one 32-bit pair) is 16 x 32 pairs,
 * exactly a contiguous chunk of a panel whose outputs are the tile's columns (W^T's panels,
 * dW's X^T panels); the transposed store gives one 64-byte run of pairs per column (dW's
 * dY^T rows) or, with the tile's columns paired instead, a chunk of W's own panels. */
enum { T = P };

/* buf = src rows [0, nr) x columns [0, nc) (row stride ld) rounded to bf16, the rest 0 */
static inline void round_tile(uint16_t buf[T][T], const float *src, int64_t ld, int64_t nr, int64_t nc)
{
    for (int64_t r = 0; r < T; r++) {
        const float *s = src + r * ld;
        if (r < nr && nc == T) {
            __builtin_prefetch(s + 4 * T); /* the tile four to the right: 32 rows are 32 streams */
            __builtin_prefetch(s + 4 * T + 16);
#pragma omp simd
            for (int c = 0; c < T; c++)
                buf[r][c] = rnd(s[c]);
        } else
            for (int c = 0; c < T; c++)
                buf[r][c] = r < nr && c < nc ? rnd(s[c]) : 0;
    }
}

/* out[t][j] = (buf[2t][j], buf[2t+1][j]): the tile's rows paired, column j fastest */
static inline void row_pairs(uint32_t out[T / 2][T], const uint16_t buf[T][T])
{
    for (int t = 0; t < T / 2; t++)
#pragma omp simd
        for (int j = 0; j < T; j++)
            out[t][j] = (uint32_t)buf[2 * t][j] | (uint32_t)buf[2 * t + 1][j] << 16;
}

static inline int64_t min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

/* dst[0, n) = src, with non-temporal stores where the vector level has them and dst is
 * 64-byte aligned: the packed weight (twice the bf16 bytes of a 1-200 MB model) is read by
 * the next forward, long after it would have left the cache, so storing around the cache
 * saves the read-for-ownership of every line. The caller fences (stream_fence). */
static inline void store_chunk(uint32_t *dst, const uint32_t *src, int64_t n)
{
    int64_t i = 0;
#if defined(__AVX512F__)
    if (((uintptr_t)dst & 63) == 0)
        for (; i + 16 <= n; i += 16)
            _mm512_stream_si512((void *)(dst + i), _mm512_loadu_si512(src + i));
#elif defined(__AVX2__)
    if (((uintptr_t)dst & 31) == 0)
        for (; i + 8 <= n; i += 8)
            _mm256_stream_si256((__m256i *)(dst + i), _mm256_loadu_si256((const __m256i *)(src + i)));
#endif
    memcpy(dst + i, src + i, (size_t)(n - i) * sizeof(uint32_t));
}

static inline void stream_fence(void)
{
#if defined(__AVX2__)
    _mm_sfence();
#endif
}

/* Both packings of w (R, K) from each 32 x 32 tile while it is in L1: W's panel br gets the
 * tile's columns paired (pairs bk*16.., a transposed store), W^T's panel bk its rows paired
 * (pairs br*16.., one contiguous chunk). Tiles past the edge carry zeros into the padding. */
void lp_k_bf16_repack_opt(lp_qweight *q, const float *w)
{
    const int64_t R = q->rows, K = q->cols, kp = q->cpad / 2, rkp = q->rpad / 2, nbr = (R + T - 1) / T,
                  nbk = (K + T - 1) / T;
    uint32_t *wp = (uint32_t *)q->bf16, *tp = (uint32_t *)q->bf16t;
#pragma omp parallel for collapse(2) schedule(static) if (R * K >= LP_PAR_MIN)
    for (int64_t br = 0; br < nbr; br++)
        for (int64_t bk = 0; bk < nbk; bk++) {
            uint16_t buf[T][T];
            round_tile(buf, w + br * T * K + bk * T, K, min64(T, R - br * T), min64(T, K - bk * T));
            uint32_t chunk[T / 2][T];
            const int64_t nt = min64(T / 2, kp - bk * (T / 2));
            for (int64_t t = 0; t < nt; t++)
                for (int j = 0; j < T; j++)
                    memcpy(&chunk[t][j], &buf[j][2 * t], 4);
            store_chunk(wp + (br * kp + bk * (T / 2)) * P, &chunk[0][0], nt * P);
            if (tp) {
                row_pairs(chunk, buf);
                store_chunk(tp + (bk * rkp + br * (T / 2)) * P, &chunk[0][0],
                            min64(T / 2, rkp - br * (T / 2)) * P);
            }
        }
    stream_fence();
}

lp_status lp_qweight_pack_bf16_train(lp_qweight *q, const float *w, int64_t rows, int64_t cols,
                                     const char *name)
{
    return lp_k_qweight_pack_bf16_train_as(q, w, rows, cols, name, LP_MEM_CATEGORY_QUANTIZED_WEIGHT);
}

lp_status lp_k_qweight_pack_bf16_train_as(lp_qweight *q, const float *w, int64_t rows, int64_t cols,
                                          const char *name, lp_mem_category cat)
{
    void *mem;
    lp_status st = lp_k_qweight_alloc_packed(q, w, rows, cols, lp_qweight_bf16_train_plan_nbytes(rows, cols),
                                             "bf16", name, cat, &mem);
    if (st)
        return st;
    uint16_t *m = mem; /* zeroed: padding multiplies as zeros */
    *q = (lp_qweight){.dtype = LP_DTYPE_BF16,
                      .rows = rows,
                      .cols = cols,
                      .n = rows * cols,
                      .bf16 = m,
                      .cpad = even(cols),
                      .bf16t = m + up64(panel_bytes(rows, cols)) / sizeof(uint16_t),
                      .rpad = even(rows),
                      .mem = m};
    lp_qweight_repack_bf16(q, w);
    return LP_OK;
}

static lp_status check(const float *dinp, const lp_qweight *w, int64_t C, int64_t OC)
{
    lp_status st =
        lp_k_packed_weight_check(w, LP_DTYPE_BF16, w ? w->bf16 : NULL, C, OC, "bf16_matmul_backward", "bf16");
    if (st == LP_OK && dinp && !w->bf16t)
        return lp_err(LP_STATUS_INVALID_ARG,
                      "bf16_matmul_backward: the weight has no transposed panels (pack it with "
                      "lp_qweight_pack_bf16_train)");
    return st;
}

static inline double rb(float x)
{
    return (double)lp_bf16_to_f32(lp_f32_to_bf16(x));
}

/* The reference: operands rounded to bf16, products summed in double. */
lp_status lp_k_bf16_matmul_backward_ref(float *dinp, float *dweight, const float *dout, const float *inp,
                                        const lp_qweight *w, int64_t N, int64_t C, int64_t OC)
{
    lp_status st = check(dinp, w, C, OC);
    if (st)
        return st;
    if (dinp)
        for (int64_t i = 0; i < N; i++)
            for (int64_t k = 0; k < C; k++) {
                double acc = 0.0;
                for (int64_t o = 0; o < OC; o++)
                    acc += rb(dout[i * OC + o]) * (double)lp_bf16_to_f32(w->bf16[pidx(w->cpad, o, k)]);
                dinp[i * C + k] = (float)acc;
            }
    if (dweight)
        for (int64_t o = 0; o < OC; o++)
            for (int64_t k = 0; k < C; k++) {
                double acc = 0.0;
                for (int64_t i = 0; i < N; i++)
                    acc += rb(dout[i * OC + o]) * rb(inp[i * C + k]);
                dweight[o * C + k] += (float)acc;
            }
    return LP_OK;
}

/* a (OC, Np) = dout^T rounded, b = panels of inp^T (C, Np) rounded: the dW GEMM's operands,
 * Np = N rounded up to even, the pad column zero. Both from 32 x 32 tiles with their rows
 * (batch rows) paired: b's are contiguous panel chunks, a's the same pairs stored
 * transposed, one 64-byte run per output row. */
static void pack_dweight_operands(uint16_t *a, uint16_t *b, const float *dout, const float *inp, int64_t N,
                                  int64_t C, int64_t OC)
{
    const int64_t np2 = even(N) / 2, nbi = (N + T - 1) / T, nbo = (OC + T - 1) / T, nbc = (C + T - 1) / T;
    uint32_t *a32 = (uint32_t *)a, *b32 = (uint32_t *)b;
#pragma omp parallel if (N * (C + OC) >= LP_PAR_MIN)
    {
#pragma omp for collapse(2) schedule(static) nowait
        for (int64_t bi = 0; bi < nbi; bi++)
            for (int64_t bo = 0; bo < nbo; bo++) {
                uint16_t buf[T][T];
                uint32_t rp[T / 2][T];
                const int64_t no = min64(T, OC - bo * T), nt = min64(T / 2, np2 - bi * (T / 2));
                round_tile(buf, dout + bi * T * OC + bo * T, OC, min64(T, N - bi * T), no);
                row_pairs(rp, buf);
                for (int64_t j = 0; j < no; j++) {
                    uint32_t *d = a32 + (bo * T + j) * np2 + bi * (T / 2);
                    for (int64_t t = 0; t < nt; t++)
                        d[t] = rp[t][j];
                }
            }
#pragma omp for collapse(2) schedule(static)
        for (int64_t bc = 0; bc < nbc; bc++)
            for (int64_t bi = 0; bi < nbi; bi++) {
                uint16_t buf[T][T];
                uint32_t rp[T / 2][T];
                round_tile(buf, inp + bi * T * C + bc * T, C, min64(T, N - bi * T), min64(T, C - bc * T));
                row_pairs(rp, buf);
                memcpy(b32 + (bc * np2 + bi * (T / 2)) * P, rp,
                       (size_t)min64(T / 2, np2 - bi * (T / 2)) * P * sizeof(uint32_t));
            }
    }
}

lp_status lp_k_bf16_matmul_backward_opt(float *dinp, float *dweight, const float *dout, const float *inp,
                                        const lp_qweight *w, int64_t N, int64_t C, int64_t OC)
{
    lp_status st = check(dinp, w, C, OC);
    if (st || N <= 0)
        return st;
    if (dinp) { /* dX = dY @ W: dY's rows rounded, W^T's panels */
        const int64_t cp = w->rpad;
        uint16_t *ya = lp_alloc((size_t)(N * cp) * sizeof(uint16_t), LP_MEM_CATEGORY_TEMPORARY, "bf16 dout");
        if (!ya)
            return LP_STATUS_NO_MEMORY;
        lp_k_bf16_round_rows(ya, dout, N, OC, cp);
        lp_k_bf16_gemm_panels(dinp, C, false, ya, N, cp, w->bf16t, NULL, C);
        lp_free(ya);
    }
    if (dweight) { /* dW += dY^T @ X: the reduction runs over the batch rows */
        const int64_t np = even(N);
        const size_t na = (size_t)(OC * np), nb = (size_t)((C + P - 1) / P * P * np);
        uint16_t *a =
            lp_alloc((na + nb) * sizeof(uint16_t), LP_MEM_CATEGORY_TEMPORARY, "bf16 dweight operands");
        if (!a)
            return LP_STATUS_NO_MEMORY;
        pack_dweight_operands(a, a + na, dout, inp, N, C, OC);
        lp_k_bf16_gemm_panels(dweight, C, true, a, OC, np, a + na, NULL, C);
        lp_free(a);
    }
    return LP_OK;
}

size_t lp_qweight_bf16_train_scratch_nbytes(int64_t N, int64_t C, int64_t OC, bool dinp, bool dweight)
{
    const size_t x = dinp ? (size_t)(N * even(OC)) * sizeof(uint16_t) : 0,
                 y = dweight ? (size_t)(OC * even(N) + (C + P - 1) / P * P * even(N)) * sizeof(uint16_t) : 0;
    return x > y ? x : y;
}

const char *lp_bf16_gemm_path(void)
{
    const char *dev = lp_kernels_device_label(); /* NULL on the CPU; the stand-in device runs these kernels */
    if (dev && strncmp(dev, "fake", 4) != 0)
        return "cuBLASLt on the tensor cores (bf16 inputs, f32 accumulation)";
    switch (lp_kernels_isa()) {
    case LP_ISA_AVX512BF16:
        return "native (vdpbf16ps, AVX512_BF16)";
    case LP_ISA_AVX512:
        return "converted (bf16 widened to f32, AVX-512 FMA; this CPU or LP_ISA lacks AVX512_BF16)";
    case LP_ISA_AVX2:
        return "converted (bf16 widened to f32, AVX2 FMA; this CPU or LP_ISA lacks AVX512_BF16)";
    default:
        return "converted (bf16 widened to f32, scalar; baseline ISA)";
    }
}
