// Elementwise ops on the device: bias add / broadcast, GELU (erf and tanh) and SwiGLU
// forward and backward, scale, add. One thread per element in grid-stride loops. The
// activations evaluate in f32 with CUDA's full-precision erff / tanhf / expf (no fast
// math), within a few ulp of the CPU reference, which evaluates in double.
#include "cuda_kernels.h"

#define THREADS 256
#define GRID_STRIDE(i, n)                                                                                      \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

static __global__ void bias_add_k(float *out, const float *bias, int64_t n, int64_t C)
{
    GRID_STRIDE(i, n) out[i] += bias[i % C];
}

static __global__ void bias_broadcast_k(float *out, const float *bias, int64_t n, int64_t C)
{
    GRID_STRIDE(i, n) out[i] = bias[i % C];
}

extern "C" void lp_cu_bias_add_forward(float *out, const float *bias, int64_t N, int64_t C)
{
    if (N * C == 0)
        return;
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

static __global__ void gelu_bwd_k(float *dinp, const float *dout, const float *inp, int64_t n, bool tanh_form)
{
    GRID_STRIDE(i, n) dinp[i] = dout[i] * dgelu1(inp[i], tanh_form);
}

extern "C" void lp_cu_gelu_forward(float *out, const float *inp, int64_t n, lp_gelu_kind kind)
{
    if (n == 0)
        return;
    gelu_fwd_k<<<lp_cu_blocks(n, THREADS), THREADS, 0, lp_cu_stream()>>>(out, inp, n, kind == LP_GELU_KIND_TANH);
    lp_cu_check("gelu_forward");
}

extern "C" void lp_cu_gelu_backward(float *dinp, const float *dout, const float *inp, int64_t n, lp_gelu_kind kind)
{
    if (n == 0)
        return;
    gelu_bwd_k<<<lp_cu_blocks(n, THREADS), THREADS, 0, lp_cu_stream()>>>(dinp, dout, inp, n,
                                                                           kind == LP_GELU_KIND_TANH);
    lp_cu_check("gelu_backward");
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

// dgate may be gate and dup may be up: each thread reads its element before writing it
static __global__ void swiglu_bwd_k(float *dgate, float *dup, const float *dout, const float *gate, const float *up,
                                    int64_t N, int64_t F, int64_t ld)
{
    GRID_STRIDE(i, N * F)
    {
        int64_t r = i / F, f = i % F;
        float g = gate[r * ld + f], u = up[r * ld + f], d = dout[i];
        float s = sigmoid1(g);
        dgate[r * ld + f] = d * u * (s * (1.0f + g * (1.0f - s)));
        dup[r * ld + f] = d * g * s;
    }
}

extern "C" void lp_cu_swiglu_forward(float *out, const float *gate, const float *up, int64_t N, int64_t F, int64_t ld)
{
    if (N * F == 0)
        return;
    swiglu_fwd_k<<<lp_cu_blocks(N * F, THREADS), THREADS, 0, lp_cu_stream()>>>(out, gate, up, N, F, ld);
    lp_cu_check("swiglu_forward");
}

extern "C" void lp_cu_swiglu_backward(float *dgate, float *dup, const float *dout, const float *gate, const float *up,
                                      int64_t N, int64_t F, int64_t ld)
{
    if (N * F == 0)
        return;
    swiglu_bwd_k<<<lp_cu_blocks(N * F, THREADS), THREADS, 0, lp_cu_stream()>>>(dgate, dup, dout, gate, up, N, F, ld);
    lp_cu_check("swiglu_backward");
}

static __global__ void scale_k(float *x, int64_t n, float s)
{
    GRID_STRIDE(i, n) x[i] *= s;
}

static __global__ void add_k(float *y, const float *x, int64_t n)
{
    GRID_STRIDE(i, n) y[i] += x[i];
}

extern "C" void lp_cu_scale(float *x, int64_t n, float s)
{
    if (n == 0)
        return;
    scale_k<<<lp_cu_blocks(n, THREADS), THREADS, 0, lp_cu_stream()>>>(x, n, s);
    lp_cu_check("scale");
}

extern "C" void lp_cu_add_inplace(float *y, const float *x, int64_t n)
{
    if (n == 0)
        return;
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
