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
 * (K, R). Only the real elements are written: the padding stays as the pack zeroed it.
 * Each panel is written in order, one 32-bit pair per output (the stores stream); the reads
 * are two rows of w (trans, contiguous) or 32 rows a pair at a time (their lines stay in L1
 * across the 8 pairs a line holds). */
static void pack(uint16_t *dst, const float *w, int64_t R, int64_t K, bool trans)
{
    const int64_t kp = even(K) / 2, np = (R + P - 1) / P;
#pragma omp parallel for schedule(static) if (R * K >= LP_PAR_MIN)
    for (int64_t p = 0; p < np; p++) {
        const int64_t o0 = p * P, ow = R - o0 < P ? R - o0 : P;
        uint32_t *d = (uint32_t *)dst + p * kp * P; /* pair kk of output o0 + j at d[kk * P + j] */
        for (int64_t kk = 0; kk < kp; kk++, d += P) {
            const int64_t k = 2 * kk;
            const bool odd = k + 1 < K;
            if (trans) {
                const float *r0 = w + k * R + o0, *r1 = r0 + R;
                if (odd)
#pragma omp simd
                    for (int64_t j = 0; j < ow; j++)
                        d[j] = pair(r0[j], r1[j]);
                else
                    for (int64_t j = 0; j < ow; j++)
                        d[j] = pair(r0[j], 0.0f);
            } else {
                const float *c = w + o0 * K + k;
                for (int64_t j = 0; j < ow; j++)
                    d[j] = pair(c[j * K], odd ? c[j * K + 1] : 0.0f);
            }
        }
    }
}

lp_status lp_qweight_pack_bf16_train(lp_qweight *q, const float *w, int64_t rows, int64_t cols,
                                     const char *name)
{
    void *mem;
    lp_status st =
        lp_k_qweight_alloc_packed(q, w, rows, cols, lp_qweight_bf16_train_plan_nbytes(rows, cols), "bf16", name, &mem);
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

void lp_qweight_repack_bf16(lp_qweight *q, const float *w)
{
    pack(q->bf16, w, q->rows, q->cols, false);
    if (q->bf16t)
        pack(q->bf16t, w, q->cols, q->rows, true);
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
 * Np = N rounded up to even, the pad column zero. Both are written a pair of batch rows at
 * a time as 32-bit stores (a: 32 output rows' streams; b: each panel in order). */
static void pack_dweight_operands(uint16_t *a, uint16_t *b, const float *dout, const float *inp, int64_t N,
                                  int64_t C, int64_t OC)
{
    const int64_t np = even(N), ncp = (C + P - 1) / P, nop = (OC + P - 1) / P;
#pragma omp parallel if (N * (C + OC) >= LP_PAR_MIN)
    {
#pragma omp for schedule(static) nowait
        for (int64_t p = 0; p < nop; p++) { /* 32 output rows at a time: the reads of dout stay in lines */
            const int64_t o0 = p * P, ow = OC - o0 < P ? OC - o0 : P;
            for (int64_t i = 0; i < np; i += 2) {
                const float *r0 = dout + i * OC + o0, *r1 = r0 + OC;
                const bool two = i + 1 < N;
                for (int64_t j = 0; j < ow; j++) {
                    const uint32_t v = pair(r0[j], two ? r1[j] : 0.0f);
                    memcpy(a + (o0 + j) * np + i, &v, 4);
                }
            }
        }
#pragma omp for schedule(static)
        for (int64_t p = 0; p < ncp; p++) {
            const int64_t c0 = p * P, cw = C - c0 < P ? C - c0 : P;
            uint32_t *d = (uint32_t *)b + p * (np / 2) * P;
            for (int64_t i = 0; i < np; i += 2, d += P) {
                const float *r0 = inp + i * C + c0, *r1 = r0 + C;
                const bool two = i + 1 < N;
                int64_t j = 0;
                if (two)
#pragma omp simd
                    for (j = 0; j < cw; j++)
                        d[j] = pair(r0[j], r1[j]);
                else
                    for (j = 0; j < cw; j++)
                        d[j] = pair(r0[j], 0.0f);
                for (j = cw; j < P; j++)
                    d[j] = 0;
            }
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
