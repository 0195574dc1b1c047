// AdamW (torch.optim.AdamW, amsgrad off), the CPU reference's arithmetic exactly: the
// scalars formed in double on the host and rounded once, then per element the same f32
// operations in the same order. Compiled with -fmad=false (CMakeLists.txt) so nvcc does not
// fuse them into FMAs, which the reference (baseline x86-64, no FMA) does not have: the
// update equals the reference's bit for bit.
#include <math.h>
#include <string.h>

#include "cuda_kernels.h"

typedef struct adamw_scalars {
    float decay, b1c, b2, b2c, step_size, bc2_sqrt, eps;
} adamw_scalars;

/* The element update, shared by the one-tensor and the multi-tensor kernels. decay is the
 * tensor's own 1 - lr * weight_decay. */
static __device__ __forceinline__ void adamw_elem(float *param, const float *grad, float *m, float *v,
                                                  int64_t i, float decay, const adamw_scalars &s)
{
    float g = grad[i], p = param[i] * decay;
    float mi = m[i] + s.b1c * (g - m[i]);
    float vi = v[i] * s.b2 + s.b2c * g * g;
    m[i] = mi;
    v[i] = vi;
    float denom = sqrtf(vi) / s.bc2_sqrt + s.eps;
    param[i] = p - s.step_size * (mi / denom);
}

static __global__ void adamw_k(float *param, const float *grad, float *m, float *v, int64_t n, adamw_scalars s)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        adamw_elem(param, grad, m, v, i, s.decay, s);
}

static adamw_scalars scalars(double lr, double beta1, double beta2, double eps, double weight_decay,
                             int64_t step)
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

extern "C" void lp_cu_adamw_step(float *param, const float *grad, float *m, float *v, int64_t n, double lr,
                                 double beta1, double beta2, double eps, double weight_decay, int64_t step)
{
    if (n == 0)
        return;
    const adamw_scalars s = scalars(lr, beta1, beta2, eps, weight_decay, step);
    adamw_k<<<lp_cu_blocks(n, 256), 256, 0, lp_cu_stream()>>>(param, grad, m, v, n, s);
    lp_cu_check("adamw_step");
}

/* Multi-tensor AdamW: up to MT_TENSORS tensors per launch, their pointers in the kernel's
 * parameters (2.3 KB, under the 4 KB every toolkit and card accepts), so a step over a
 * model's ~100-300 tensors is a few launches instead of one per tensor and the small
 * tensors (norms, biases) stop being launch-bound. Each block takes MT_CHUNK elements of one
 * tensor; first[t] is tensor t's first block, searched by each block. */
enum { MT_TENSORS = 48, MT_THREADS = 256, MT_CHUNK = MT_THREADS * 16 };

typedef struct adamw_list {
    float *param[MT_TENSORS];
    const float *grad[MT_TENSORS];
    float *m[MT_TENSORS], *v[MT_TENSORS];
    int64_t n[MT_TENSORS];
    float decay[MT_TENSORS];
    int32_t first[MT_TENSORS + 1]; /* first[count] = the launch's block count */
    int32_t count;
} adamw_list;
static_assert(sizeof(adamw_list) + sizeof(adamw_scalars) <= 4096, "kernel parameters above 4 KB");

static __global__ void adamw_multi_k(const adamw_list l, adamw_scalars s)
{
    const int32_t b = (int32_t)blockIdx.x;
    int32_t lo = 0, hi = l.count - 1; /* the last t with first[t] <= b */
    while (lo < hi) {
        int32_t mid = (lo + hi + 1) / 2;
        if (l.first[mid] <= b)
            lo = mid;
        else
            hi = mid - 1;
    }
    const int64_t start = (int64_t)(b - l.first[lo]) * MT_CHUNK, n = l.n[lo];
    const int64_t end = start + MT_CHUNK < n ? start + MT_CHUNK : n;
    for (int64_t i = start + threadIdx.x; i < end; i += MT_THREADS)
        adamw_elem(l.param[lo], l.grad[lo], l.m[lo], l.v[lo], i, l.decay[lo], s);
}

extern "C" void lp_cu_adamw_multi(const lp_adamw_tensor *t, int count, double lr, double beta1, double beta2,
                                  double eps, int64_t step)
{
    const adamw_scalars s = scalars(lr, beta1, beta2, eps, 0.0, step);
    adamw_list l;
    memset(&l, 0, sizeof l);
    int64_t blocks = 0;
    /* int32 block indices: a launch's tensors, 16 bytes an element with their gradient and
     * moments, would need 2^31 chunks x 4096 x 16 = 128 TiB of device memory to overflow them */
    for (int i = 0; i <= count; i++) {
        /* launch what is gathered when the list is full or the tensors are done */
        const int64_t nb = i < count ? (t[i].n + MT_CHUNK - 1) / MT_CHUNK : 0;
        if (l.count && (i == count || l.count == MT_TENSORS)) {
            l.first[l.count] = (int32_t)blocks;
            adamw_multi_k<<<(unsigned)blocks, MT_THREADS, 0, lp_cu_stream()>>>(l, s);
            if (lp_cu_check("adamw_multi") != LP_OK)
                return;
            l.count = 0;
            blocks = 0;
        }
        if (i == count || nb == 0)
            continue;
        const int c = l.count++;
        l.param[c] = t[i].param, l.grad[c] = t[i].grad, l.m[c] = t[i].m, l.v[c] = t[i].v, l.n[c] = t[i].n;
        l.decay[c] = (float)(1.0 - lr * t[i].weight_decay);
        l.first[c] = (int32_t)blocks;
        blocks += nb;
    }
}
