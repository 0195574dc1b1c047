/* AdamW (torch.optim.AdamW, amsgrad off) and the pieces of global-norm clipping. The
 * scalars (1 - beta, 1 - lr*wd, bias corrections) are formed in double and rounded once,
 * as PyTorch does with Python floats: 1 - 0.999f in float would be off by 1e-5 relative. */
#include <math.h>
#include <omp.h>

#include "cpu_kernels.h"

/* The per-call scalars, each rounded to float once (PyTorch's scalar arguments). */
typedef struct adamw_scalars {
    float decay, b1c, b2, b2c, step_size, bc2_sqrt, eps;
} adamw_scalars;

static adamw_scalars adamw_prepare(double lr, double beta1, double beta2, double eps, double weight_decay, int64_t step)
{
    adamw_scalars s;
    s.decay = (float)(1.0 - lr * weight_decay);
    s.b1c = (float)(1.0 - beta1);
    s.b2 = (float)beta2;
    s.b2c = (float)(1.0 - beta2);
    s.step_size = (float)(lr / (1.0 - pow(beta1, (double)step)));
    s.bc2_sqrt = (float)sqrt(1.0 - pow(beta2, (double)step));
    s.eps = (float)eps;
    return s;
}

// param, m, v (n) updated in place; grad (n)
void lp_k_adamw_step_ref(float *param, const float *grad, float *m, float *v, int64_t n, double lr, double beta1,
                         double beta2, double eps, double weight_decay, int64_t step)
{
    adamw_scalars s = adamw_prepare(lr, beta1, beta2, eps, weight_decay, step);
    for (int64_t i = 0; i < n; i++) {
        param[i] *= s.decay;
        m[i] += s.b1c * (grad[i] - m[i]); /* torch: exp_avg.lerp_(grad, 1-beta1) */
        v[i] = v[i] * s.b2 + s.b2c * grad[i] * grad[i];
        float denom = sqrtf(v[i]) / s.bc2_sqrt + s.eps;
        param[i] -= s.step_size * (m[i] / denom);
    }
}

void lp_k_adamw_step_opt(float *param, const float *grad, float *m, float *v, int64_t n, double lr, double beta1,
                         double beta2, double eps, double weight_decay, int64_t step)
{
    adamw_scalars s = adamw_prepare(lr, beta1, beta2, eps, weight_decay, step);
#pragma omp parallel for simd schedule(static) if (n >= LP_PAR_MIN)
    for (int64_t i = 0; i < n; i++) {
        float g = grad[i];
        float mi = m[i] + s.b1c * (g - m[i]);
        float vi = v[i] * s.b2 + s.b2c * g * g;
        m[i] = mi;
        v[i] = vi;
        param[i] = param[i] * s.decay - s.step_size * (mi / (sqrtf(vi) / s.bc2_sqrt + s.eps));
    }
}

// sum of x[i]^2 in double
double lp_k_sum_squares_ref(const float *x, int64_t n)
{
    double s = 0.0;
    for (int64_t i = 0; i < n; i++)
        s += (double)x[i] * x[i];
    return s;
}

double lp_k_sum_squares_opt(const float *x, int64_t n)
{
    double s = 0.0;
    /* float partial sums over short runs (exact enough: 64 squares), double across runs */
#pragma omp parallel for reduction(+ : s) schedule(static) if (n >= LP_PAR_MIN)
    for (int64_t b = 0; b < (n + 63) / 64; b++) {
        int64_t end = b * 64 + 64 < n ? b * 64 + 64 : n;
        float f = 0.0f;
#pragma omp simd reduction(+ : f)
        for (int64_t i = b * 64; i < end; i++)
            f += x[i] * x[i];
        s += f;
    }
    return s;
}

void lp_k_scale_ref(float *x, int64_t n, float s)
{
    for (int64_t i = 0; i < n; i++)
        x[i] *= s;
}

void lp_k_scale_opt(float *x, int64_t n, float s)
{
#pragma omp parallel for simd schedule(static) if (n >= LP_PAR_MIN)
    for (int64_t i = 0; i < n; i++)
        x[i] *= s;
}
