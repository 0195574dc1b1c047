/* f32 to GGML blocks, as ggml's reference quantizers (quantize_row_*_ref) and the `gguf`
 * package compute them, so a file loupe writes holds what llama.cpp's converter would
 * write. Built with -ffp-contract=off: Q4_0's x * id + 8.5 must round twice, as there. */
#include <math.h>
#include <string.h>

#include "loupe/kernels.h"

static void put_f16(uint8_t *p, float x)
{
    uint16_t h = lp_f32_to_f16(x);
    p[0] = (uint8_t)(h & 0xFF);
    p[1] = (uint8_t)(h >> 8);
}

/* d = max|x| / 127, q = roundf(x / d) (half away from zero). */
static void q8_0_block(const float *x, uint8_t *b)
{
    float amax = 0.0f;
    for (int j = 0; j < 32; j++)
        amax = fmaxf(amax, fabsf(x[j]));
    const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    put_f16(b, d);
    for (int j = 0; j < 32; j++)
        b[2 + j] = (uint8_t)(int8_t)fminf(fmaxf(roundf(x[j] * id), -128.0f), 127.0f); /* clamp: no-op unless 1/d overflowed */
}

/* d = (the value of largest magnitude) / -8, q = min(15, trunc(x / d + 8.5)): the signed
 * extreme maps to code 0 exactly. */
static void q4_0_block(const float *x, uint8_t *b)
{
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < 32; j++)
        if (amax < fabsf(x[j])) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    const float d = max / -8.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    put_f16(b, d);
    for (int j = 0; j < 16; j++) {
        const float x0 = x[j] * id + 8.5f, x1 = x[16 + j] * id + 8.5f;
        const int q0 = (int)fminf(fmaxf(x0, 0.0f), 15.0f), q1 = (int)fminf(fmaxf(x1, 0.0f), 15.0f);
        b[2 + j] = (uint8_t)(q0 | q1 << 4);
    }
}

bool lp_ggml_can_quantize(lp_ggml_type t)
{
    return t == LP_GGML_TYPE_Q8_0 || t == LP_GGML_TYPE_Q4_0 || t == LP_GGML_TYPE_F16 || t == LP_GGML_TYPE_BF16;
}

void lp_ggml_quantize(lp_ggml_type t, const float *x, void *dst, int64_t n)
{
    uint8_t *p = dst;
    if (t == LP_GGML_TYPE_F16 || t == LP_GGML_TYPE_BF16) {
        for (int64_t i = 0; i < n; i++) {
            uint16_t h = t == LP_GGML_TYPE_F16 ? lp_f32_to_f16(x[i]) : lp_f32_to_bf16(x[i]);
            p[2 * i] = (uint8_t)(h & 0xFF);
            p[2 * i + 1] = (uint8_t)(h >> 8);
        }
        return;
    }
    const int64_t nb = n / 32, bytes = t == LP_GGML_TYPE_Q8_0 ? 34 : 18;
#pragma omp parallel for schedule(static) if (nb > 4096)
    for (int64_t b = 0; b < nb; b++) {
        if (t == LP_GGML_TYPE_Q8_0)
            q8_0_block(x + 32 * b, p + bytes * b);
        else
            q4_0_block(x + 32 * b, p + bytes * b);
    }
}
