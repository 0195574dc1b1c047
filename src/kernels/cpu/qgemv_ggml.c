/* The forward of a weight kept in a GGML block format: out (N,OC) = inp (N,C) @ W^T + bias.
 * Activations are quantized once per call (8-bit blocks, qact.c); the pool splits W's rows
 * into one contiguous range per thread (each thread streams its own part of the weight,
 * nothing to synchronise until the end), and each block of RB weight rows is multiplied
 * with every activation row while it sits in L1: a GEMV for decode (N = 1, every weight
 * byte read once per token) and a GEMM for short prefills from the same loop; Q8_0 / Q4_0 /
 * Q4_1 go to the tiled integer GEMM (qgemm_ggml.c) at any N when repacked at load, else at
 * N >= LP_QGEMM_MIN_ROWS; the other types from LP_GGML_SLAB_MIN_ROWS rows on to f32 slabs and
 * sgemm (lp_k_linear_slabs_forward). F16 / BF16 rows are converted to f32 a tile of RB rows
 * at a time inside the loop, never at load. */
#include <math.h>
#include <omp.h>

#include "qdot.h"

enum { RB = 16 }; /* weight rows per tile: 16 rows of a 4096-wide Q8_0 weight are 70 KB */

static bool kquant(lp_ggml_type t)
{
    return t == LP_GGML_TYPE_Q4_K || t == LP_GGML_TYPE_Q5_K || t == LP_GGML_TYPE_Q6_K;
}

static bool half(lp_ggml_type t)
{
    return t == LP_GGML_TYPE_F16 || t == LP_GGML_TYPE_BF16;
}

/* Bytes of one activation row quantized for w. */
static size_t act_bytes(const lp_qweight *w)
{
    return kquant(w->gtype) ? (size_t)(w->cols / 256) * sizeof(lp_q8k) : (size_t)(w->cols / 32) * sizeof(lp_q8a);
}

static void quantize_row(const lp_qweight *w, void *dst, const float *x)
{
    if (kquant(w->gtype))
        lp_k_quantize_q8k(dst, x, w->cols);
    else
        lp_k_quantize_q8a(dst, x, w->cols);
}

/* Row o of w times one quantized activation row. */
static float row_dot(const lp_qweight *w, int64_t o, const void *act)
{
    const uint8_t *r = w->blocks + o * w->row_bytes;
    switch (w->gtype) {
    case LP_GGML_TYPE_Q8_0:
        return lp_k_dot_q8_0(w->cols / 32, r, act);
    case LP_GGML_TYPE_Q4_0:
        return lp_k_dot_q4_0(w->cols / 32, r, act);
    case LP_GGML_TYPE_Q4_1:
        return lp_k_dot_q4_1(w->cols / 32, r, act);
    case LP_GGML_TYPE_Q5_0:
        return lp_k_dot_q5_0(w->cols / 32, r, act);
    case LP_GGML_TYPE_Q5_1:
        return lp_k_dot_q5_1(w->cols / 32, r, act);
    case LP_GGML_TYPE_Q4_K:
        return lp_k_dot_q4_k(w->cols / 256, r, act);
    case LP_GGML_TYPE_Q5_K:
        return lp_k_dot_q5_k(w->cols / 256, r, act);
    default:
        return lp_k_dot_q6_k(w->cols / 256, r, act);
    }
}

static float dot_f32(const float *a, const float *b, int64_t n)
{
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int64_t k = 0; k < n; k++)
        s += a[k] * b[k];
    return s;
}

/* dst (n) = f16 or bf16 src as f32: F16C / shifts, exact like the scalar conversions. */
static void half_to_f32(float *dst, const uint16_t *src, int64_t n, bool bf16)
{
    int64_t i = 0;
#if defined(__AVX2__) && defined(__F16C__)
    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm_loadu_si128((const __m128i *)(src + i));
        _mm256_storeu_ps(dst + i, bf16 ? _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16))
                                       : _mm256_cvtph_ps(h));
    }
#endif
    for (; i < n; i++)
        dst[i] = bf16 ? lp_bf16_to_f32(src[i]) : lp_f16_to_f32(src[i]);
}

/* Decode on a half-precision row: converted in registers, never stored. */
static float half_row_dot(const uint16_t *w, const float *x, int64_t n, bool bf16)
{
    int64_t i = 0;
    float s = 0.0f;
#if defined(__AVX2__) && defined(__F16C__)
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    for (; i + 16 <= n; i += 16) {
        __m128i h0 = _mm_loadu_si128((const __m128i *)(w + i)), h1 = _mm_loadu_si128((const __m128i *)(w + i + 8));
        __m256 w0 = bf16 ? _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h0), 16)) : _mm256_cvtph_ps(h0);
        __m256 w1 = bf16 ? _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h1), 16)) : _mm256_cvtph_ps(h1);
        a0 = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + i), a0);
        a1 = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x + i + 8), a1);
    }
    s = lp_qd_hsum(_mm256_add_ps(a0, a1));
#endif
    for (; i < n; i++)
        s += (bf16 ? lp_bf16_to_f32(w[i]) : lp_f16_to_f32(w[i])) * x[i];
    return s;
}

float lp_qweight_ggml_row_dot(const lp_qweight *w, int64_t row, const float *x)
{
    float *buf = lp_alloc(half(w->gtype) ? (size_t)w->cols * sizeof(float) : act_bytes(w),
                          LP_MEM_CATEGORY_TEMPORARY, "row dot");
    if (!buf)
        return NAN;
    float r;
    if (half(w->gtype)) {
        lp_ggml_dequantize(w->gtype, w->blocks + row * w->row_bytes, buf, w->cols);
        r = dot_f32(buf, x, w->cols);
    } else {
        quantize_row(w, buf, x);
        r = row_dot(w, row, buf);
    }
    lp_free(buf);
    return r;
}

lp_status lp_k_ggml_matmul_forward(float *out, const float *inp, const lp_qweight *w, const float *bias, int64_t N,
                                   int64_t C, int64_t OC)
{
    if (lp_ggml_forward_by_slabs(w->gtype, N)) /* long prefill without a tiled GEMM: f32 slabs, sgemm */
        return lp_k_linear_slabs_forward(out, inp, NULL, w, bias, NULL, NULL, 0.0f, N, C, OC, 0);
    const bool h = half(w->gtype);
    const size_t ab = act_bytes(w);
    const int nth = omp_get_max_threads();
    /* f16/bf16: one f32 tile per thread; else the quantized activations, shared */
    uint8_t *buf = lp_alloc(h ? (size_t)nth * RB * (size_t)C * sizeof(float) : (size_t)N * ab,
                            LP_MEM_CATEGORY_TEMPORARY, h ? "f16 weight tiles" : "quantized activations");
    if (!buf)
        return LP_STATUS_NO_MEMORY;
    const bool par = (double)OC * (double)C >= 65536.0;
    if (!h) {
#pragma omp parallel for schedule(static) if (par && N > 1)
        for (int64_t i = 0; i < N; i++)
            quantize_row(w, buf + (size_t)i * ab, inp + i * C);
        if (lp_k_qgemm_ggml_fits(w, N)) { /* the tiled integer GEMM */
            lp_status st = lp_k_qgemm_ggml(out, (const lp_q8a *)buf, w, bias, N, par);
            lp_free(buf);
            return st;
        }
    }
#pragma omp parallel if (par)
    {
        int64_t lo, hi;
        lp_k_split(OC, omp_get_thread_num(), omp_get_num_threads(), &lo, &hi);
        float *tile = h ? (float *)buf + (size_t)omp_get_thread_num() * RB * (size_t)C : NULL;
        for (int64_t o0 = lo; o0 < hi; o0 += RB) {
            const int64_t ob = hi - o0 < RB ? hi - o0 : RB;
            const bool bf16 = w->gtype == LP_GGML_TYPE_BF16;
            if (h && N == 1) { /* decode: each half row converted in registers */
                for (int64_t o = o0; o < o0 + ob; o++) {
                    float d = half_row_dot((const uint16_t *)(w->blocks + o * w->row_bytes), inp, C, bf16);
                    out[o] = bias ? d + bias[o] : d;
                }
                continue;
            }
            if (h) /* prefill: a tile of rows converted once, used by every activation row */
                half_to_f32(tile, (const uint16_t *)(w->blocks + o0 * w->row_bytes), ob * C, bf16);
            int64_t i0 = 0;
            if (!h && (w->gtype == LP_GGML_TYPE_Q8_0 || w->gtype == LP_GGML_TYPE_Q4_0))
                for (; i0 + 4 <= N; i0 += 4) /* prefill: 4 activation rows per weight block load */
                    for (int64_t o = o0; o < o0 + ob; o++) {
                        float d[4];
                        const lp_q8a *a = (const lp_q8a *)(buf + (size_t)i0 * ab);
                        const uint8_t *r = w->blocks + o * w->row_bytes;
                        if (w->gtype == LP_GGML_TYPE_Q8_0)
                            lp_k_dot_q8_0_x4(C / 32, r, a, C / 32, d);
                        else
                            lp_k_dot_q4_0_x4(C / 32, r, a, C / 32, d);
                        for (int k = 0; k < 4; k++)
                            out[(i0 + k) * OC + o] = bias ? d[k] + bias[o] : d[k];
                    }
            for (int64_t i = i0; i < N; i++) {
                float *y = out + i * OC;
                for (int64_t o = o0; o < o0 + ob; o++) {
                    float d = h ? dot_f32(tile + (o - o0) * C, inp + i * C, C)
                                : row_dot(w, o, buf + (size_t)i * ab);
                    y[o] = bias ? d + bias[o] : d;
                }
            }
        }
    }
    lp_free(buf);
    return LP_OK;
}
