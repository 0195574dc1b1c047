/* GGML block formats (the tensor types of GGUF files) dequantized to f32: the plain
 * reference, element for element what ggml's dequantize_row_* and the `gguf` package's
 * numpy dequantizers compute (this file is built with -ffp-contract=off: Q4_1's d*q + m
 * and Q4_K's d*q - m would round differently if fused). */
#include <assert.h>
#include <stddef.h>
#include <string.h>

#include "loupe/kernels.h"
#include "qdot.h"

static const lp_ggml_type_traits traits[] = {
    [LP_GGML_TYPE_F32] = {"F32", 1, 4, true},
    [LP_GGML_TYPE_F16] = {"F16", 1, 2, true},
    [LP_GGML_TYPE_Q4_0] = {"Q4_0", 32, 18, true},
    [LP_GGML_TYPE_Q4_1] = {"Q4_1", 32, 20, true},
    [LP_GGML_TYPE_Q5_0] = {"Q5_0", 32, 22, true},
    [LP_GGML_TYPE_Q5_1] = {"Q5_1", 32, 24, true},
    [LP_GGML_TYPE_Q8_0] = {"Q8_0", 32, 34, true},
    [LP_GGML_TYPE_Q8_1] = {"Q8_1", 32, 40, false},
    [LP_GGML_TYPE_Q2_K] = {"Q2_K", 256, 84, false},
    [LP_GGML_TYPE_Q3_K] = {"Q3_K", 256, 110, false},
    [LP_GGML_TYPE_Q4_K] = {"Q4_K", 256, 144, true},
    [LP_GGML_TYPE_Q5_K] = {"Q5_K", 256, 176, true},
    [LP_GGML_TYPE_Q6_K] = {"Q6_K", 256, 210, true},
    [LP_GGML_TYPE_Q8_K] = {"Q8_K", 256, 292, false},
    [LP_GGML_TYPE_IQ2_XXS] = {"IQ2_XXS", 256, 66, false},
    [LP_GGML_TYPE_IQ2_XS] = {"IQ2_XS", 256, 74, false},
    [LP_GGML_TYPE_IQ3_XXS] = {"IQ3_XXS", 256, 98, false},
    [LP_GGML_TYPE_IQ1_S] = {"IQ1_S", 256, 50, false},
    [LP_GGML_TYPE_IQ4_NL] = {"IQ4_NL", 32, 18, false},
    [LP_GGML_TYPE_IQ3_S] = {"IQ3_S", 256, 110, false},
    [LP_GGML_TYPE_IQ2_S] = {"IQ2_S", 256, 82, false},
    [LP_GGML_TYPE_IQ4_XS] = {"IQ4_XS", 256, 136, false},
    [LP_GGML_TYPE_I8] = {"I8", 1, 1, false},
    [LP_GGML_TYPE_I16] = {"I16", 1, 2, false},
    [LP_GGML_TYPE_I32] = {"I32", 1, 4, false},
    [LP_GGML_TYPE_I64] = {"I64", 1, 8, false},
    [LP_GGML_TYPE_F64] = {"F64", 1, 8, false},
    [LP_GGML_TYPE_IQ1_M] = {"IQ1_M", 256, 56, false},
    [LP_GGML_TYPE_BF16] = {"BF16", 1, 2, true},
    [LP_GGML_TYPE_TQ1_0] = {"TQ1_0", 256, 54, false},
    [LP_GGML_TYPE_TQ2_0] = {"TQ2_0", 256, 66, false},
    [LP_GGML_TYPE_MXFP4] = {"MXFP4", 32, 17, false},
};

const lp_ggml_type_traits *lp_ggml_type_traits_get(uint32_t t)
{
    if (t >= sizeof traits / sizeof traits[0] || !traits[t].name)
        return NULL;
    return &traits[t];
}

static float f16_at(const uint8_t *p)
{
    return lp_f16_to_f32((uint16_t)(p[0] | p[1] << 8));
}

/* 32 elements: d (f16), 32 int8. */
static void q8_0_block(const uint8_t *b, float *y)
{
    const float d = f16_at(b);
    for (int j = 0; j < 32; j++)
        y[j] = (float)(int8_t)b[2 + j] * d;
}

/* 32 elements: d (f16), 16 bytes of nibbles; low nibbles are elements 0..15, high 16..31. */
static void q4_0_block(const uint8_t *b, float *y)
{
    const float d = f16_at(b);
    for (int j = 0; j < 16; j++) {
        y[j] = d * (float)((b[2 + j] & 0xF) - 8);
        y[j + 16] = d * (float)((b[2 + j] >> 4) - 8);
    }
}

/* 32 elements: d, m (f16), 16 bytes of nibbles: y = d*q + m. */
static void q4_1_block(const uint8_t *b, float *y)
{
    const float d = f16_at(b), m = f16_at(b + 2);
    for (int j = 0; j < 16; j++) {
        y[j] = d * (float)(b[4 + j] & 0xF) + m;
        y[j + 16] = d * (float)(b[4 + j] >> 4) + m;
    }
}

/* 32 elements: d (f16), 4 bytes of fifth bits (bit j of the little-endian word is element
 * j's), 16 bytes of nibbles as Q4_0's: y = d * (q - 16), q in [0, 31]. */
static void q5_0_block(const uint8_t *b, float *y)
{
    const float d = f16_at(b);
    const uint32_t qh = lp_qd_le32(b + 2);
    for (int j = 0; j < 16; j++) {
        y[j] = d * (float)((int)((b[6 + j] & 0xF) | ((qh >> j) & 1) << 4) - 16);
        y[j + 16] = d * (float)((int)((b[6 + j] >> 4) | ((qh >> (j + 16)) & 1) << 4) - 16);
    }
}

/* 32 elements: d, m (f16), fifth bits and nibbles as Q5_0: y = d*q + m. */
static void q5_1_block(const uint8_t *b, float *y)
{
    const float d = f16_at(b), m = f16_at(b + 2);
    const uint32_t qh = lp_qd_le32(b + 4);
    for (int j = 0; j < 16; j++) {
        y[j] = d * (float)((b[8 + j] & 0xF) | ((qh >> j) & 1) << 4) + m;
        y[j + 16] = d * (float)((b[8 + j] >> 4) | ((qh >> (j + 16)) & 1) << 4) + m;
    }
}

/* A Q4_K / Q5_K block of 256 elements at b: d, dmin (f16), 12 bytes packing eight 6-bit
 * (scale, min) pairs, then (Q5_K only: qh, 32 bytes of fifth bits, bit s of byte j being
 * element j of sub-block s) 128 bytes of nibbles at qs. Sub-block s (32 elements) uses byte
 * column s/2, nibble s%2: y = d * scale_s * q - dmin * min_s. */
static inline void k45_block(const uint8_t *b, const uint8_t *qh, const uint8_t *qs, float *y)
{
    const float d = f16_at(b), dmin = f16_at(b + 2);
    uint8_t scale[8], min[8];
    lp_qd_k4_scales_mins(b + 4, scale, min);
    for (int s = 0; s < 8; s++) {
        const float d1 = d * (float)scale[s], m1 = dmin * (float)min[s];
        const uint8_t *q = qs + 32 * (s / 2);
        const int shift = 4 * (s % 2);
        for (int j = 0; j < 32; j++)
            y[32 * s + j] = d1 * (float)(((q[j] >> shift) & 0xF) | (qh ? ((qh[j] >> s) & 1) << 4 : 0)) - m1;
    }
}

static void q4_k_block(const uint8_t *b, float *y)
{
    k45_block(b, NULL, b + 16, y);
}

static void q5_k_block(const uint8_t *b, float *y)
{
    k45_block(b, b + 16, b + 48, y);
}

/* 256 elements: 128 bytes of low nibbles, 64 bytes of 2-bit highs, 16 int8 scales (one
 * per 16 elements), d (f16). Each half of 128 elements takes 64 low and 32 high bytes. */
static void q6_k_block(const uint8_t *b, float *y)
{
    const uint8_t *ql = b, *qh = b + 128;
    const int8_t *scales = (const int8_t *)(b + 192);
    const float d = f16_at(b + 208);
    for (int e = 0; e < 256; e++) {
        const int h = e / 128, r = e % 128;
        const int lo = (ql[64 * h + r % 64] >> (4 * (r / 64))) & 0xF;
        const int hi = (qh[32 * h + r % 32] >> (2 * (r / 32))) & 3;
        y[e] = (d * (float)scales[e / 16]) * (float)((lo | hi << 4) - 32);
    }
}

void lp_ggml_dequantize(lp_ggml_type t, const void *src, float *dst, int64_t n)
{
    const lp_ggml_type_traits *tt = lp_ggml_type_traits_get((uint32_t)t);
    assert(tt && tt->dequantizable && n % tt->block == 0);
    const uint8_t *p = src;
    switch (t) {
    case LP_GGML_TYPE_F32:
        memcpy(dst, p, (size_t)n * 4);
        return;
    case LP_GGML_TYPE_F16:
        for (int64_t i = 0; i < n; i++)
            dst[i] = f16_at(p + 2 * i);
        return;
    case LP_GGML_TYPE_BF16:
        for (int64_t i = 0; i < n; i++) {
            const uint32_t u = (uint32_t)(p[2 * i] | p[2 * i + 1] << 8) << 16;
            memcpy(&dst[i], &u, 4);
        }
        return;
    default:
        break;
    }
    void (*block)(const uint8_t *, float *) = t == LP_GGML_TYPE_Q8_0   ? q8_0_block
                                              : t == LP_GGML_TYPE_Q4_0 ? q4_0_block
                                              : t == LP_GGML_TYPE_Q4_1 ? q4_1_block
                                              : t == LP_GGML_TYPE_Q5_0 ? q5_0_block
                                              : t == LP_GGML_TYPE_Q5_1 ? q5_1_block
                                              : t == LP_GGML_TYPE_Q4_K ? q4_k_block
                                              : t == LP_GGML_TYPE_Q5_K ? q5_k_block
                                                                       : q6_k_block;
    const int64_t nb = n / tt->block;
#pragma omp parallel for schedule(static) if (nb > 4096)
    for (int64_t i = 0; i < nb; i++)
        block(p + i * tt->bytes, dst + i * tt->block);
}
