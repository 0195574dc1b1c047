/* dtypes: names, sizes, and f32 <-> bf16/f16 conversions with round-to-nearest-even,
 * bit-exact with PyTorch's .to(torch.bfloat16) / .to(torch.float16) on finite values. */
#include <string.h>

#include "loupe/core.h"

static const struct {
    const char *name;
    int bits;
} dtype_info[LP_DTYPE__COUNT] = {
    [LP_DTYPE_F32] = {"f32", 32}, [LP_DTYPE_BF16] = {"bf16", 16}, [LP_DTYPE_F16] = {"f16", 16},
    [LP_DTYPE_INT8] = {"int8", 8}, [LP_DTYPE_NF4] = {"nf4", 4},   [LP_DTYPE_I32] = {"i32", 32},
    [LP_DTYPE_GGML] = {"ggml", 0},
};

const char *lp_dtype_name(lp_dtype dt)
{
    return (unsigned)dt < LP_DTYPE__COUNT ? dtype_info[dt].name : "?";
}

int lp_dtype_bits(lp_dtype dt) { return (unsigned)dt < LP_DTYPE__COUNT ? dtype_info[dt].bits : 0; }

size_t lp_dtype_nbytes(lp_dtype dt, int64_t n)
{
    if (n <= 0)
        return 0;
    return (size_t)(((uint64_t)n * (uint64_t)lp_dtype_bits(dt) + 7) / 8);
}

lp_status lp_dtype_parse(const char *name, lp_dtype *out)
{
    static const struct {
        const char *s;
        lp_dtype dt;
    } names[] = {
        {"f32", LP_DTYPE_F32},   {"float32", LP_DTYPE_F32}, {"bf16", LP_DTYPE_BF16},
        {"bfloat16", LP_DTYPE_BF16}, {"f16", LP_DTYPE_F16}, {"float16", LP_DTYPE_F16},
        {"int8", LP_DTYPE_INT8}, {"nf4", LP_DTYPE_NF4},     {"i32", LP_DTYPE_I32},
        {"int32", LP_DTYPE_I32},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (name && !strcmp(name, names[i].s)) {
            *out = names[i].dt;
            return LP_OK;
        }
    return lp_err(LP_STATUS_INVALID_ARG, "unknown dtype '%s' (expected f32, bf16, f16, int8, nf4 or i32)",
                  name ? name : "(null)");
}

static inline uint32_t f2u(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static inline float u2f(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint16_t lp_f32_to_bf16(float x)
{
    uint32_t u = f2u(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: keep sign, force quiet */
        return (uint16_t)((u >> 16) | 0x0040u);
    /* Round to nearest even: add 0x7fff plus the lowest kept bit. */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

float lp_bf16_to_f32(uint16_t x) { return u2f((uint32_t)x << 16); }

uint16_t lp_f32_to_f16(float x)
{
    uint32_t u = f2u(x);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) /* NaN */
        return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
    if (a >= 0x477ff000u) /* rounds to >= 65520: infinity */
        return (uint16_t)(sign | 0x7c00u);
    if (a < 0x38800000u) { /* below f16 normal range: subnormal or zero */
        if (a < 0x33000000u) /* < 2^-25: rounds to zero */
            return (uint16_t)sign;
        uint32_t e = a >> 23;                   /* biased f32 exponent, 102..112 */
        uint32_t mant = (a & 0x7fffffu) | 0x800000u; /* with implicit bit */
        uint32_t shift = 126 - e;               /* 14..24 so that result is in units of 2^-24 */
        uint32_t r = mant >> shift;
        uint32_t rem = mant & ((1u << shift) - 1);
        uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (r & 1u)))
            r++;
        return (uint16_t)(sign | r);
    }
    /* Normal: rebias exponent (127 -> 15) and round the 13 dropped bits to even. */
    uint32_t r = a - 0x38000000u;
    r += 0xfffu + ((r >> 13) & 1u);
    return (uint16_t)(sign | (r >> 13));
}

float lp_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu;
    uint32_t m = h & 0x3ffu;
    if (e == 0x1f)
        return u2f(sign | 0x7f800000u | (m << 13));
    if (e == 0) {
        if (m == 0)
            return u2f(sign);
        /* subnormal: value = m * 2^-24 exactly representable in f32 */
        float v = (float)m * (1.0f / 16777216.0f);
        return sign ? -v : v;
    }
    return u2f(sign | ((e + 112) << 23) | (m << 13));
}

void lp_f32_to_bf16_n(uint16_t *dst, const float *src, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        dst[i] = lp_f32_to_bf16(src[i]);
}

void lp_bf16_to_f32_n(float *dst, const uint16_t *src, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        dst[i] = lp_bf16_to_f32(src[i]);
}

void lp_f32_to_f16_n(uint16_t *dst, const float *src, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        dst[i] = lp_f32_to_f16(src[i]);
}

void lp_f16_to_f32_n(float *dst, const uint16_t *src, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        dst[i] = lp_f16_to_f32(src[i]);
}
