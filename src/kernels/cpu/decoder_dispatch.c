/* The public wrappers of the decoder ops (RMSNorm, SwiGLU, RoPE, row gather/scatter): each
 * records its shapes, FLOPs and bytes moved with the profiler and calls the active table.
 * FLOPs count multiplies and adds (a sigmoid as 4: exp, add, divide, multiply). */
#include <assert.h>

#include "cpu_kernels.h"
#include "op_record.h"

#define K lp_kernels_active()

void lp_rmsnorm_forward(float *out, float *rstd, const float *inp, const float *weight, int64_t N, int64_t C,
                        float eps)
{
    LP_OP_BEGIN("lp::rmsnorm_forward", 4.0 * N * C, 4.0 * (2 * N * C + C + N), 2, N, C);
    K->rmsnorm_forward(out, rstd, inp, weight, N, C, eps);
    LP_OP_END();
}

void lp_rmsnorm_backward(float *dinp, float *dweight, const float *dout, const float *inp,
                         const float *weight, const float *rstd, int64_t N, int64_t C)
{
    /* dinp: a 3-FLOP reduction and 4 FLOPs per element; dweight: 3 more, and a second read
     * of dout and inp */
    double fl = 7.0 * N * C + (dweight ? 3.0 * N * C : 0.0);
    double by = 4.0 * (3 * N * C + C + N) + (dweight ? 4.0 * (2 * N * C + 2 * C) : 0.0);
    LP_OP_BEGIN("lp::rmsnorm_backward", fl, by, 2, N, C);
    K->rmsnorm_backward(dinp, dweight, dout, inp, weight, rstd, N, C);
    LP_OP_END();
}

void lp_swiglu_forward(float *out, const float *gate, const float *up, int64_t N, int64_t F, int64_t ld)
{
    LP_OP_BEGIN("lp::swiglu_forward", 6.0 * N * F, 12.0 * N * F, 2, N, F);
    K->swiglu_forward(out, gate, up, N, F, ld);
    LP_OP_END();
}

void lp_swiglu_backward(float *dgate, float *dup, const float *dout, const float *gate, const float *up,
                        int64_t N, int64_t F, int64_t ld)
{
    LP_OP_BEGIN("lp::swiglu_backward", 11.0 * N * F, 20.0 * N * F, 2, N, F);
    K->swiglu_backward(dgate, dup, dout, gate, up, N, F, ld);
    LP_OP_END();
}

void lp_rope_cache(float *cos, float *sin, const int32_t *pos, const float *inv_freq, float attn_factor,
                   int64_t N, int64_t D)
{
    /* an angle, a cos and a sin (counted as one FLOP each) and two scalings per pair */
    assert(D % 2 == 0 && "rope: odd head size (lp_rope_inv_freq refuses it)");
    LP_OP_BEGIN("lp::rope_cache", 5.0 * N * (D / 2), 4.0 * (N + D / 2 + N * D), 2, N, D);
    K->rope_cache(cos, sin, pos, inv_freq, attn_factor, N, D);
    LP_OP_END();
}

void lp_rope_forward(float *x, const float *cos, const float *sin, int64_t N, int64_t H, int64_t D,
                     int64_t ld)
{
    assert(D % 2 == 0 && "rope: odd head size (lp_rope_inv_freq refuses it)");
    LP_OP_BEGIN("lp::rope_forward", 3.0 * N * H * D, 4.0 * (2 * N * H * D + N * D), 3, N, H, D);
    K->rope_forward(x, cos, sin, N, H, D, ld);
    LP_OP_END();
}

void lp_rope_backward(float *dx, const float *cos, const float *sin, int64_t N, int64_t H, int64_t D,
                      int64_t ld)
{
    assert(D % 2 == 0 && "rope: odd head size (lp_rope_inv_freq refuses it)");
    LP_OP_BEGIN("lp::rope_backward", 3.0 * N * H * D, 4.0 * (2 * N * H * D + N * D), 3, N, H, D);
    K->rope_backward(dx, cos, sin, N, H, D, ld);
    LP_OP_END();
}

void lp_rows_gather(float *out, const float *x, const int64_t *idx, int64_t n, int64_t C)
{
    LP_OP_BEGIN("lp::rows_gather", 0.0, 8.0 * n * C + 8.0 * n, 2, n, C);
    K->rows_gather(out, x, idx, n, C);
    LP_OP_END();
}

void lp_rows_scatter_add(float *dx, const float *dout, const int64_t *idx, int64_t n, int64_t C)
{
    LP_OP_BEGIN("lp::rows_scatter_add", 1.0 * n * C, 12.0 * n * C + 8.0 * n, 2, n, C);
    K->rows_scatter_add(dx, dout, idx, n, C);
    LP_OP_END();
}

void lp_mean_pool_forward(float *out, const float *x, const int32_t *mask, int64_t B, int64_t T, int64_t C)
{
    LP_OP_BEGIN("lp::mean_pool_forward", 1.0 * B * T * C, 4.0 * (B * T * C + B * C) + 4.0 * B * T, 3, B, T, C);
    K->mean_pool_forward(out, x, mask, B, T, C);
    LP_OP_END();
}

void lp_mean_pool_backward(float *dx, const float *dout, const int32_t *mask, int64_t B, int64_t T, int64_t C)
{
    LP_OP_BEGIN("lp::mean_pool_backward", 1.0 * B * T * C, 4.0 * (B * T * C + B * C) + 4.0 * B * T, 3, B, T, C);
    K->mean_pool_backward(dx, dout, mask, B, T, C);
    LP_OP_END();
}

void lp_l2_normalize(float *x, int64_t N, int64_t C)
{
    LP_OP_BEGIN("lp::l2_normalize", 3.0 * N * C, 8.0 * N * C, 2, N, C);
    K->l2_normalize(x, N, C);
    LP_OP_END();
}
