// AdamW (torch.optim.AdamW, amsgrad off), the CPU reference's arithmetic exactly: the
// scalars formed in double on the host and rounded once, then per element the same f32
// operations in the same order. Compiled with -fmad=false (CMakeLists.txt) so nvcc does not
// fuse them into FMAs, which the reference (baseline x86-64, no FMA) does not have: the
// update equals the reference's bit for bit.
#include <math.h>

#include "cuda_kernels.h"

typedef struct adamw_scalars {
    float decay, b1c, b2, b2c, step_size, bc2_sqrt, eps;
} adamw_scalars;

static __global__ void adamw_k(float *param, const float *grad, float *m, float *v, int64_t n, adamw_scalars s)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        float g = grad[i], p = param[i] * s.decay;
        float mi = m[i] + s.b1c * (g - m[i]);
        float vi = v[i] * s.b2 + s.b2c * g * g;
        m[i] = mi;
        v[i] = vi;
        float denom = sqrtf(vi) / s.bc2_sqrt + s.eps;
        param[i] = p - s.step_size * (mi / denom);
    }
}

extern "C" void lp_cu_adamw_step(float *param, const float *grad, float *m, float *v, int64_t n, double lr,
                                 double beta1, double beta2, double eps, double weight_decay, int64_t step)
{
    if (n == 0)
        return;
    adamw_scalars s;
    s.decay = (float)(1.0 - lr * weight_decay);
    s.b1c = (float)(1.0 - beta1);
    s.b2 = (float)beta2;
    s.b2c = (float)(1.0 - beta2);
    s.step_size = (float)(lr / (1.0 - pow(beta1, (double)step)));
    s.bc2_sqrt = (float)sqrt(1.0 - pow(beta2, (double)step));
    s.eps = (float)eps;
    adamw_k<<<lp_cu_blocks(n, 256), 256, 0, lp_cu_stream()>>>(param, grad, m, v, n, s);
    lp_cu_check("adamw_step");
}
