// Elementwise ops on the device: bias add / broadcast, GELU (erf and tanh) and SwiGLU
// forward and backward, scale, add. Grid-stride loops; where the pointers are 16-byte
// aligned (and, for row-shaped ops, the row length a multiple of 4) each thread moves a
// float4 and the n % 4 tail is done one element per thread, else one element per thread.
// Each element is computed by the same expression either way, so results are unchanged. The
// activations evaluate in f32 with CUDA's full-precision erff / tanhf / expf (no fast
// math), within a few ulp of the CPU reference, which evaluates in double.
#include "cuda_kernels.h"

#define THREADS 256
#define GRID_STRIDE(i, n)                                                                                      \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

static bool al16(const void *p)
{
    return ((uintptr_t)p & 15) == 0;
}

// blocks for n elements moved as float4s (the tail loop reuses the same grid)
static unsigned vec_blocks(int64_t n)
{
    return lp_cu_blocks(n / 4 > 0 ? n / 4 : 1, THREADS);
}

// apply F (a statement on float lvalue references) to a float4's lanes
#define F4_APPLY(v, F)                                                                                         \
    do {                                                                                                       \
        F((v).x);                                                                                              \
        F((v).y);                                                                                              \
        F((v).z);                                                                                              \
        F((v).w);                                                                                              \
    } while (0)

static __global__ void bias_add_k(float *out, const float *bias, int64_t n, int64_t C)
{
    GRID_STRIDE(i, n) out[i] += bias[i % C];
}

// C % 4 == 0, out and bias 16-byte aligned: n4 = n / 4 float4s, C4 = C / 4
static __global__ void bias_add_v4_k(float4 *out, const float4 *bias, int64_t n4, int64_t C4)
{
    GRID_STRIDE(i, n4)
    {
        float4 o = out[i], b = bias[i % C4];
        o.x += b.x;
        o.y += b.y;
        o.z += b.z;
        o.w += b.w;
        out[i] = o;
    }
}

static __global__ void bias_broadcast_k(float *out, const float *bias, int64_t n, int64_t C)
{
    GRID_STRIDE(i, n) out[i] = bias[i % C];
}

extern "C" void lp_cu_bias_add_forward(float *out, const float *bias, int64_t N, int64_t C)
{
    if (N * C == 0)
        return;
    if (C % 4 == 0 && al16(out) && al16(bias))
        bias_add_v4_k<<<vec_blocks(N * C), THREADS, 0, lp_cu_stream()>>>((float4 *)out, (const float4 *)bias,
                                                                        N * C / 4, C / 4);
    else
        bias_add_k<<<lp_cu_blocks(N * C, THREADS), THREADS, 0, lp_cu_stream()>>>(out, bias, N * C, C);
    lp_cu_check("bias_add_forward");
}

extern "C" void lp_cu_bias_broadcast(float *out, const float *bias, int64_t N, int64_t C)
{
    if (N * C == 0)
        return;
    bias_broadcast_k<<<lp_cu_blocks(N * C, THREADS), THREADS, 0, lp_cu_stream()>>>(out, bias, N * C, C);
    lp_cu_check("bias_broadcast");
}

#define SQRT1_2 0.70710678118654752440f
#define INV_SQRT_2PI 0.39894228040143267794f
#define GELU_K 0.7978845608028654f // sqrt(2/pi)
#define GELU_A 0.044715f

static __device__ __forceinline__ float gelu1(float x, bool tanh_form)
{
    if (tanh_form)
        return 0.5f * x * (1.0f + tanhf(GELU_K * (x + GELU_A * x * x * x)));
    return 0.5f * x * (1.0f + erff(x * SQRT1_2));
}

static __device__ __forceinline__ float dgelu1(float x, bool tanh_form)
{
    if (tanh_form) {
        float t = tanhf(GELU_K * (x + GELU_A * x * x * x));
        float du = GELU_K * (1.0f + 3.0f * GELU_A * x * x);
        return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du;
    }
    return 0.5f * (1.0f + erff(x * SQRT1_2)) + x * INV_SQRT_2PI * expf(-0.5f * x * x);
}

static __global__ void gelu_fwd_k(float *out, const float *inp, int64_t n, bool tanh_form)
{
    GRID_STRIDE(i, n) out[i] = gelu1(inp[i], tanh_form);
}

// out and inp 16-byte aligned (out may be inp: a thread reads its float4 before writing it)
static __global__ void gelu_fwd_v4_k(float *out, const float *inp, int64_t n, bool tanh_form)
{
    const int64_t n4 = n / 4;
    GRID_STRIDE(i, n4)
    {
        float4 v = ((const float4 *)inp)[i];
#define GELU_F(e) e = gelu1(e, tanh_form)
        F4_APPLY(v, GELU_F);
#undef GELU_F
        ((float4 *)out)[i] = v;
    }
    GRID_STRIDE(i, n - n4 * 4) out[n4 * 4 + i] = gelu1(inp[n4 * 4 + i], tanh_form);
}

static __global__ void gelu_bwd_k(float *dinp, const float *dout, const float *inp, int64_t n, bool tanh_form)
{
    GRID_STRIDE(i, n) dinp[i] = dout[i] * dgelu1(inp[i], tanh_form);
}

static __global__ void gelu_bwd_v4_k(float *dinp, const float *dout, const float *inp, int64_t n, bool tanh_form)
{
    const int64_t n4 = n / 4;
    GRID_STRIDE(i, n4)
    {
        float4 d = ((const float4 *)dout)[i], x = ((const float4 *)inp)[i];
        d.x *= dgelu1(x.x, tanh_form);
        d.y *= dgelu1(x.y, tanh_form);
        d.z *= dgelu1(x.z, tanh_form);
        d.w *= dgelu1(x.w, tanh_form);
        ((float4 *)dinp)[i] = d;
    }
    GRID_STRIDE(i, n - n4 * 4) dinp[n4 * 4 + i] = dout[n4 * 4 + i] * dgelu1(inp[n4 * 4 + i], tanh_form);
}

extern "C" void lp_cu_gelu_forward(float *out, const float *inp, int64_t n, lp_gelu_kind kind)
{
    if (n == 0)
        return;
    if (al16(out) && al16(inp))
        gelu_fwd_v4_k<<<vec_blocks(n), THREADS, 0, lp_cu_stream()>>>(out, inp, n, kind == LP_GELU_KIND_TANH);
    else
        gelu_fwd_k<<<lp_cu_blocks(n, THREADS), THREADS, 0, lp_cu_stream()>>>(out, inp, n, kind == LP_GELU_KIND_TANH);
    lp_cu_check("gelu_forward");
}

extern "C" void lp_cu_gelu_backward(float *dinp, const float *dout, const float *inp, int64_t n, lp_gelu_kind kind)
{
    if (n == 0)
        return;
    if (al16(dinp) && al16(dout) && al16(inp))
        gelu_bwd_v4_k<<<vec_blocks(n), THREADS, 0, lp_cu_stream()>>>(dinp, dout, inp, n, kind == LP_GELU_KIND_TANH);
    else
        gelu_bwd_k<<<lp_cu_blocks(n, THREADS), THREADS, 0, lp_cu_stream()>>>(dinp, dout, inp, n,
                                                                               kind == LP_GELU_KIND_TANH);
    lp_cu_check("gelu_backward");
}

// The heads' activations (lp_act_kind) on (B, C) operands: one element per thread. ReLU's
// derivative selects (0, not NaN, where dout is not finite and x <= 0), as the CPU's does.
static __global__ void act_fwd_k(float *out, const float *inp, int64_t n, bool tanh_form)
{
    GRID_STRIDE(i, n)
    {
        const float x = inp[i];
        out[i] = tanh_form ? tanhf(x) : x > 0.0f ? x : 0.0f;
    }
}

static __global__ void act_bwd_k(float *dinp, const float *dout, const float *inp, const float *out,
                                 int64_t n, bool tanh_form)
{
    GRID_STRIDE(i, n)
    {
        if (tanh_form)
            dinp[i] = dout[i] * (1.0f - out[i] * out[i]);
        else
            dinp[i] = inp[i] > 0.0f ? dout[i] : 0.0f;
    }
}

extern "C" void lp_cu_act_forward(float *out, const float *inp, int64_t n, lp_act_kind kind)
{
    if (n == 0)
        return;
    act_fwd_k<<<lp_cu_blocks(n, THREADS), THREADS, 0, lp_cu_stream()>>>(out, inp, n, kind == LP_ACT_TANH);
    lp_cu_check("act_forward");
}

extern "C" void lp_cu_act_backward(float *dinp, const float *dout, const float *inp, const float *out,
                                   int64_t n, lp_act_kind kind)
{
    if (n == 0)
        return;
    act_bwd_k<<<lp_cu_blocks(n, THREADS), THREADS, 0, lp_cu_stream()>>>(dinp, dout, inp, out, n,
                                                                        kind == LP_ACT_TANH);
    lp_cu_check("act_backward");
}

// silu as the CPU kernels take it: exp(-g) overflowing gives s = 0, never inf / inf
static __device__ __forceinline__ float sigmoid1(float g)
{
    return 1.0f / (1.0f + expf(-g));
}

static __global__ void swiglu_fwd_k(float *out, const float *gate, const float *up, int64_t N, int64_t F, int64_t ld)
{
    GRID_STRIDE(i, N * F)
    {
        int64_t r = i / F, f = i % F;
        float g = gate[r * ld + f];
        out[i] = g * sigmoid1(g) * up[r * ld + f];
    }
}

// F % 4 == 0, ld % 4 == 0, all pointers 16-byte aligned: float4 i of the N x F/4 output
static __global__ void swiglu_fwd_v4_k(float4 *out, const float *gate, const float *up, int64_t N, int64_t F4,
                                       int64_t ld)
{
    GRID_STRIDE(i, N * F4)
    {
        int64_t r = i / F4, f = i % F4;
        float4 g = ((const float4 *)(gate + r * ld))[f], u = ((const float4 *)(up + r * ld))[f], o;
        o.x = g.x * sigmoid1(g.x) * u.x;
        o.y = g.y * sigmoid1(g.y) * u.y;
        o.z = g.z * sigmoid1(g.z) * u.z;
        o.w = g.w * sigmoid1(g.w) * u.w;
        out[i] = o;
    }
}

static __device__ __forceinline__ void swiglu_bwd1(float d, float g, float u, float &dg, float &du)
{
    float s = sigmoid1(g);
    dg = d * u * (s * (1.0f + g * (1.0f - s)));
    du = d * g * s;
}

// dgate may be gate and dup may be up: each thread reads its element before writing it
static __global__ void swiglu_bwd_k(float *dgate, float *dup, const float *dout, const float *gate, const float *up,
                                    int64_t N, int64_t F, int64_t ld)
{
    GRID_STRIDE(i, N * F)
    {
        int64_t r = i / F, f = i % F;
        float g = gate[r * ld + f], u = up[r * ld + f], d = dout[i];
        swiglu_bwd1(d, g, u, dgate[r * ld + f], dup[r * ld + f]);
    }
}

static __global__ void swiglu_bwd_v4_k(float *dgate, float *dup, const float4 *dout, const float *gate,
                                       const float *up, int64_t N, int64_t F4, int64_t ld)
{
    GRID_STRIDE(i, N * F4)
    {
        int64_t r = i / F4, f = i % F4;
        float4 g = ((const float4 *)(gate + r * ld))[f], u = ((const float4 *)(up + r * ld))[f], d = dout[i];
        float4 dg, du;
        swiglu_bwd1(d.x, g.x, u.x, dg.x, du.x);
        swiglu_bwd1(d.y, g.y, u.y, dg.y, du.y);
        swiglu_bwd1(d.z, g.z, u.z, dg.z, du.z);
        swiglu_bwd1(d.w, g.w, u.w, dg.w, du.w);
        ((float4 *)(dgate + r * ld))[f] = dg;
        ((float4 *)(dup + r * ld))[f] = du;
    }
}

extern "C" void lp_cu_swiglu_forward(float *out, const float *gate, const float *up, int64_t N, int64_t F, int64_t ld)
{
    if (N * F == 0)
        return;
    if (F % 4 == 0 && ld % 4 == 0 && al16(out) && al16(gate) && al16(up))
        swiglu_fwd_v4_k<<<vec_blocks(N * F), THREADS, 0, lp_cu_stream()>>>((float4 *)out, gate, up, N, F / 4, ld);
    else
        swiglu_fwd_k<<<lp_cu_blocks(N * F, THREADS), THREADS, 0, lp_cu_stream()>>>(out, gate, up, N, F, ld);
    lp_cu_check("swiglu_forward");
}

extern "C" void lp_cu_swiglu_backward(float *dgate, float *dup, const float *dout, const float *gate, const float *up,
                                      int64_t N, int64_t F, int64_t ld)
{
    if (N * F == 0)
        return;
    if (F % 4 == 0 && ld % 4 == 0 && al16(dgate) && al16(dup) && al16(dout) && al16(gate) && al16(up))
        swiglu_bwd_v4_k<<<vec_blocks(N * F), THREADS, 0, lp_cu_stream()>>>(dgate, dup, (const float4 *)dout, gate, up,
                                                                          N, F / 4, ld);
    else
        swiglu_bwd_k<<<lp_cu_blocks(N * F, THREADS), THREADS, 0, lp_cu_stream()>>>(dgate, dup, dout, gate, up, N, F,
                                                                                 ld);
    lp_cu_check("swiglu_backward");
}

static __global__ void scale_k(float *x, int64_t n, float s)
{
    GRID_STRIDE(i, n) x[i] *= s;
}

static __global__ void scale_v4_k(float *x, int64_t n, float s)
{
    const int64_t n4 = n / 4;
    GRID_STRIDE(i, n4)
    {
        float4 v = ((float4 *)x)[i];
        v.x *= s;
        v.y *= s;
        v.z *= s;
        v.w *= s;
        ((float4 *)x)[i] = v;
    }
    GRID_STRIDE(i, n - n4 * 4) x[n4 * 4 + i] *= s;
}

static __global__ void add_k(float *y, const float *x, int64_t n)
{
    GRID_STRIDE(i, n) y[i] += x[i];
}

static __global__ void add_v4_k(float *y, const float *x, int64_t n)
{
    const int64_t n4 = n / 4;
    GRID_STRIDE(i, n4)
    {
        float4 a = ((float4 *)y)[i], b = ((const float4 *)x)[i];
        a.x += b.x;
        a.y += b.y;
        a.z += b.z;
        a.w += b.w;
        ((float4 *)y)[i] = a;
    }
    GRID_STRIDE(i, n - n4 * 4) y[n4 * 4 + i] += x[n4 * 4 + i];
}

extern "C" void lp_cu_scale(float *x, int64_t n, float s)
{
    if (n == 0)
        return;
    if (al16(x))
        scale_v4_k<<<vec_blocks(n), THREADS, 0, lp_cu_stream()>>>(x, n, s);
    else
        scale_k<<<lp_cu_blocks(n, THREADS), THREADS, 0, lp_cu_stream()>>>(x, n, s);
    lp_cu_check("scale");
}

extern "C" void lp_cu_add_inplace(float *y, const float *x, int64_t n)
{
    if (n == 0)
        return;
    if (al16(y) && al16(x))
        add_v4_k<<<vec_blocks(n), THREADS, 0, lp_cu_stream()>>>(y, x, n);
    else
        add_k<<<lp_cu_blocks(n, THREADS), THREADS, 0, lp_cu_stream()>>>(y, x, n);
    lp_cu_check("add_inplace");
}

// beta == 0 writes zeros (old NaNs included), as a GEMM with beta 0 ignores C
static __global__ void scale_2d_k(float *C, int64_t M, int64_t N, int64_t ldc, float beta)
{
    GRID_STRIDE(i, M * N)
    {
        float *c = C + (i / N) * ldc + i % N;
        *c = beta == 0.0f ? 0.0f : *c * beta;
    }
}

extern "C" void lp_cu_scale_2d(float *C, int64_t M, int64_t N, int64_t ldc, float beta)
{
    if (M * N == 0)
        return;
    scale_2d_k<<<lp_cu_blocks(M * N, THREADS), THREADS, 0, lp_cu_stream()>>>(C, M, N, ldc, beta);
    lp_cu_check("sgemm (K = 0)");
}
