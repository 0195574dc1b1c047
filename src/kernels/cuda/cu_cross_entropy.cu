/* Cross-entropy with logits on the GPU (cross_entropy.c's semantics: mean over rows whose
 * target is not ignore_index, 0 when all are ignored). The forward reads each logit row
 * once: every thread keeps an online (max, sum of exp) over its strided slice of the
 * vocabulary and the block merges the pairs, so any V works without a second copy of the
 * logits. The loss is summed in double by one block in a fixed order (deterministic). A
 * label out of range or a non-finite row makes the loss NaN and is recorded for
 * lp_cu_nn_take_error (the CPU kernel returns the status instead). */
#include "cu_nn_common.cuh"

#define CE_THREADS 256

/* (m, s) <- the merge of two online log-sum-exp states */
static __device__ __forceinline__ void lse_merge(float &m, float &s, float mo, float so)
{
    float mn = fmaxf(m, mo);
    if (mn == -INFINITY)
        return; /* both empty */
    s = (m == -INFINITY ? 0.0f : s * expf(m - mn)) + (mo == -INFINITY ? 0.0f : so * expf(mo - mn));
    m = mn;
}

__global__ void ce_lse_kernel(float *lse, const float *logits, int64_t V)
{
    __shared__ float shm[CE_THREADS / 32], shs[CE_THREADS / 32];
    const float *x = logits + (int64_t)blockIdx.x * V;
    float m = -INFINITY, s = 0.0f;
    for (int64_t c = threadIdx.x; c < V; c += CE_THREADS) {
        float v = x[c];
        if (v > m) {
            s = (m == -INFINITY ? 0.0f : s * expf(m - v)) + 1.0f;
            m = v;
        } else if (v != -INFINITY) {
            s += expf(v - m); /* NaN stays NaN: the row is reported non-finite */
        }
        if (v != v)
            s = NAN;
    }
    for (int o = 16; o > 0; o >>= 1) {
        float mo = __shfl_xor_sync(0xffffffffu, m, o), so = __shfl_xor_sync(0xffffffffu, s, o);
        lse_merge(m, s, mo, so);
    }
    const int w = threadIdx.x >> 5;
    if ((threadIdx.x & 31) == 0) {
        shm[w] = m;
        shs[w] = s;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int k = 1; k < CE_THREADS / 32; k++)
            lse_merge(m, s, shm[k], shs[k]);
        lse[blockIdx.x] = m + logf(s); /* an all -inf row: -inf + log 0, non-finite as on the CPU */
    }
}

/* One block: checks labels and lse, sums lse - logit[target] in double over kept rows. */
__global__ void ce_loss_kernel(float *loss, const float *lse, const float *logits, const int32_t *targets,
                               int64_t N, int64_t V, int32_t ignore_index, int *err)
{
    __shared__ double shs[1024 / 32];
    __shared__ long long shc[1024 / 32];
    __shared__ int bad;
    if (threadIdx.x == 0)
        bad = 0;
    __syncthreads();
    double sum = 0.0;
    long long count = 0;
    for (int64_t i = threadIdx.x; i < N; i += blockDim.x) {
        int32_t t = targets[i];
        float l = lse[i];
        if (t != ignore_index && (t < 0 || t >= V)) {
            if (err)
                cu_record_error(err, LP_CU_ERR_CE_LABEL, i);
            bad = 1;
            continue;
        }
        if (!isfinite(l)) {
            if (err)
                cu_record_error(err, LP_CU_ERR_CE_NONFINITE, i);
            bad = 1;
            continue;
        }
        if (t == ignore_index)
            continue;
        sum += (double)l - (double)logits[i * V + t];
        count++;
    }
    for (int o = 16; o > 0; o >>= 1) {
        sum += __shfl_xor_sync(0xffffffffu, sum, o);
        count += __shfl_xor_sync(0xffffffffu, count, o);
    }
    const int w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    if ((threadIdx.x & 31) == 0) {
        shs[w] = sum;
        shc[w] = count;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int k = 1; k < nw; k++) {
            sum += shs[k];
            count += shc[k];
        }
        *loss = bad ? NAN : count ? (float)(sum / (double)count) : 0.0f;
    }
}

/* *count = rows whose target is not ignore_index (one block) */
__global__ void ce_count_kernel(int64_t *count, const int32_t *targets, int64_t N, int32_t ignore_index)
{
    __shared__ long long sh[1024 / 32];
    long long n = 0;
    for (int64_t i = threadIdx.x; i < N; i += blockDim.x)
        n += targets[i] != ignore_index;
    for (int o = 16; o > 0; o >>= 1)
        n += __shfl_xor_sync(0xffffffffu, n, o);
    if ((threadIdx.x & 31) == 0)
        sh[threadIdx.x >> 5] = n;
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int k = 1; k < (int)(blockDim.x >> 5); k++)
            n += sh[k];
        *count = n;
    }
}

__global__ void ce_backward_kernel(float *dlogits, const float *logits, const float *lse,
                                   const int32_t *targets, const int64_t *count, int64_t V,
                                   int32_t ignore_index, float dloss)
{
    const int64_t i = blockIdx.x;
    float *d = dlogits + i * V;
    const int32_t t = targets[i];
    if (t == ignore_index) {
        for (int64_t c = threadIdx.x; c < V; c += blockDim.x)
            d[c] = 0.0f;
        return;
    }
    const int64_t n = *count;
    const float g = n ? dloss / (float)n : 0.0f, l = lse[i];
    const float *x = logits + i * V;
    for (int64_t c = threadIdx.x; c < V; c += blockDim.x)
        d[c] = g * (expf(x[c] - l) - (c == t ? 1.0f : 0.0f));
}

extern "C" lp_status lp_cu_cross_entropy_forward(float *loss, float *lse, const float *logits,
                                                 const int32_t *targets, int64_t N, int64_t V,
                                                 int32_t ignore_index)
{
    if (N > INT32_MAX)
        return lp_err(LP_STATUS_UNSUPPORTED, "cuda cross-entropy: %lld rows exceed one launch", (long long)N);
    cudaStream_t st = lp_cu_nn_stream();
    if (N > 0 && V > 0) {
        LP_CU_LAUNCH(ce_lse_kernel, (unsigned)N, CE_THREADS, 0, st, lse, logits, V);
        lp_status s = lp_cu_nn_launched("cross_entropy_forward (lse)");
        if (s != LP_OK)
            return s;
    }
    LP_CU_LAUNCH(ce_loss_kernel, 1, 1024, 0, st, loss, lse, logits, targets, N, V, ignore_index,
                 lp_cu_nn_error_slot());
    return lp_cu_nn_launched("cross_entropy_forward (loss)");
}

extern "C" void lp_cu_cross_entropy_backward(float *dlogits, const float *logits, const float *lse,
                                             const int32_t *targets, int64_t N, int64_t V,
                                             int32_t ignore_index, float dloss)
{
    if (N <= 0 || V <= 0 || N > INT32_MAX)
        return;
    cudaStream_t st = lp_cu_nn_stream();
    int64_t *count = (int64_t *)lp_cu_nn_scratch(sizeof(int64_t), "cross_entropy_backward");
    if (!count)
        return;
    LP_CU_LAUNCH(ce_count_kernel, 1, 1024, 0, st, count, targets, N, ignore_index);
    if (lp_cu_nn_launched("cross_entropy_backward (count)") == LP_OK) {
        LP_CU_LAUNCH(ce_backward_kernel, (unsigned)N, CE_THREADS, 0, st, dlogits, logits, lse, targets, count,
                     V, ignore_index, dloss);
        (void)lp_cu_nn_launched("cross_entropy_backward");
    }
    lp_cu_nn_scratch_free(count);
}
