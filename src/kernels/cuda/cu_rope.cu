/* Rotary position embeddings on the GPU (rope.c's semantics, HF rotate-half layout). The
 * cache is computed in double from the float32 angle, as the reference does; the rotation
 * also in double (it is memory-bound, and so matches the reference's rounding). */
#include "cu_nn_common.cuh"

__global__ void rope_cache_kernel(float *cos_, float *sin_, const int32_t *pos, const float *inv_freq,
                                  float attn_factor, int64_t N, int64_t half)
{
    const int64_t total = N * half;
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < total;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t n = e / half, i = e % half;
        const float a = __fmul_rn((float)pos[n], inv_freq[i]); /* the float32 angle, never fused */
        cos_[e] = (float)cos((double)a) * attn_factor;
        sin_[e] = (float)sin((double)a) * attn_factor;
    }
}

/* one block per token; threads over (head, i < D/2); sgn = +1 forward, -1 backward */
__global__ void rope_rotate_kernel(float *x, const float *cos_, const float *sin_, int H, int half, int D,
                                   int64_t ld, double sgn)
{
    const int64_t n = blockIdx.x;
    const float *cn = cos_ + n * half, *sn = sin_ + n * half;
    for (int e = threadIdx.x; e < H * half; e += blockDim.x) {
        const int h = e / half, i = e % half;
        float *x1 = x + n * ld + (int64_t)h * D;
        const double c = cn[i], s = sgn * sn[i], a = x1[i], b = x1[i + half];
        x1[i] = (float)(a * c - b * s);
        x1[i + half] = (float)(b * c + a * s);
    }
}

extern "C" void lp_cu_rope_cache(float *cos_, float *sin_, const int32_t *pos, const float *inv_freq,
                                 float attn_factor, int64_t N, int64_t D)
{
    const int64_t half = D / 2;
    if (N <= 0 || half <= 0)
        return;
    LP_CU_LAUNCH(rope_cache_kernel, cu_blocks(N * half, 256, 65535), 256, 0, lp_cu_nn_stream(), cos_, sin_,
                 pos, inv_freq, attn_factor, N, half);
    (void)lp_cu_nn_launched("rope_cache");
}

static void rope_rotate(float *x, const float *cos_, const float *sin_, int64_t N, int64_t H, int64_t D,
                        int64_t ld, double sgn, const char *op)
{
    const int64_t half = D / 2;
    if (N <= 0 || H <= 0 || half <= 0)
        return;
    if (N > INT32_MAX || H * half > INT32_MAX) {
        lp_cu_nn_refuse(op,
                        lp_err(LP_STATUS_UNSUPPORTED, "cuda %s: %lld tokens x %lld pairs exceed one launch",
                               op, (long long)N, (long long)(H * half)));
        return;
    }
    int64_t t = (H * half + 31) / 32 * 32;
    LP_CU_LAUNCH(rope_rotate_kernel, (unsigned)N, (unsigned)(t > 256 ? 256 : t), 0, lp_cu_nn_stream(), x,
                 cos_, sin_, (int)H, (int)half, (int)D, ld, sgn);
    (void)lp_cu_nn_launched(op);
}

extern "C" void lp_cu_rope_forward(float *x, const float *cos_, const float *sin_, int64_t N, int64_t H,
                                   int64_t D, int64_t ld)
{
    rope_rotate(x, cos_, sin_, N, H, D, ld, 1.0, "rope_forward");
}

extern "C" void lp_cu_rope_backward(float *dx, const float *cos_, const float *sin_, int64_t N, int64_t H,
                                    int64_t D, int64_t ld)
{
    rope_rotate(dx, cos_, sin_, N, H, D, ld, -1.0, "rope_backward");
}
