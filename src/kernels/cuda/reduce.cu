// Reductions: bias gradient (column sums), sum of squares (global-norm clipping), masked
// mean pooling over T and its backward, row L2 normalization. Deterministic: no atomics,
// every sum in a fixed order, so a run repeats bit for bit. Mean pooling sums each channel
// over t in order, in double, as the CPU reference does: equal to it bit for bit.
#include "cuda_kernels.h"

// dbias (C) += column sums of dout (N,C). A 32 x 32 block owns 32 columns of a chunk of
// rows; each of its 32 rows of threads sums every 32nd row of the chunk (coalesced loads),
// then the 32 partials are added in a fixed order. One chunk when the columns alone give the
// GPU two blocks per SM; else the rows are split into chunks whose partial sums (scratch)
// a second kernel adds in chunk order: deterministic, no atomics.
static __global__ void bias_bwd_k(float *dst, const float *dout, int64_t N, int64_t C, int64_t rows_per_chunk,
                                  bool accumulate)
{
    __shared__ float part[32][33];
    int64_t c = (int64_t)blockIdx.x * 32 + threadIdx.x;
    int64_t r0 = (int64_t)blockIdx.y * rows_per_chunk, r1 = r0 + rows_per_chunk < N ? r0 + rows_per_chunk : N;
    float s = 0.0f;
    if (c < C)
        for (int64_t i = r0 + threadIdx.y; i < r1; i += 32)
            s += dout[i * C + c];
    part[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.y == 0 && c < C) {
        float t = 0.0f;
        for (int k = 0; k < 32; k++)
            t += part[k][threadIdx.x];
        if (accumulate)
            dst[c] += t;
        else
            dst[(int64_t)blockIdx.y * C + c] = t;
    }
}

static __global__ void bias_bwd_sum_k(float *dbias, const float *part, int64_t chunks, int64_t C)
{
    for (int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; c < C; c += (int64_t)gridDim.x * blockDim.x) {
        float t = 0.0f;
        for (int64_t k = 0; k < chunks; k++)
            t += part[k * C + c];
        dbias[c] += t;
    }
}

extern "C" void lp_cu_bias_backward(float *dbias, const float *dout, int64_t N, int64_t C)
{
    lp_cuda_ctx *ctx = lp_cu_ctx();
    if (C == 0 || N == 0 || !ctx)
        return;
    int64_t bx = (C + 31) / 32, want = 2 * (int64_t)ctx->info.sm_count;
    int64_t chunks = bx >= want ? 1 : (want + bx - 1) / bx;
    int64_t max_chunks = (N + 255) / 256; // at least 8 rows per thread
    chunks = chunks < max_chunks ? chunks : max_chunks;
    chunks = chunks < 65535 ? chunks : 65535;
    int64_t rows = (N + chunks - 1) / chunks;
    float *part = NULL;
    if (chunks > 1) {
        part = (float *)lp_cu_alloc_get(&ctx->alloc, (size_t)(chunks * C) * sizeof(float), LP_MEM_CATEGORY_TEMPORARY,
                                        "bias_backward partials");
        if (!part) { // no scratch: one chunk, slower but right
            chunks = 1;
            rows = N;
        }
    }
    if (chunks == 1) {
        bias_bwd_k<<<dim3((unsigned)bx, 1), dim3(32, 32), 0, ctx->stream>>>(dbias, dout, N, C, N, true);
    } else {
        bias_bwd_k<<<dim3((unsigned)bx, (unsigned)chunks), dim3(32, 32), 0, ctx->stream>>>(part, dout, N, C, rows,
                                                                                           false);
        bias_bwd_sum_k<<<lp_cu_blocks(C, 256), 256, 0, ctx->stream>>>(dbias, part, chunks, C);
        lp_cu_alloc_put(&ctx->alloc, part); // reused only by work queued after this on the stream
    }
    lp_cu_check("bias_backward");
}

// ---- sum of squares: per-block double partials, then one block adds them in order ----
#define SS_THREADS 256
#define SS_BLOCKS 1024

static __device__ double block_sum(double v)
{
    __shared__ double sh[SS_THREADS];
    sh[threadIdx.x] = v;
    __syncthreads();
    for (int s = SS_THREADS / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s)
            sh[threadIdx.x] += sh[threadIdx.x + s];
        __syncthreads();
    }
    return sh[0];
}

static __global__ void sumsq_k(double *part, const float *x, int64_t n)
{
    double s = 0.0;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        s += (double)x[i] * x[i];
    s = block_sum(s);
    if (threadIdx.x == 0)
        part[blockIdx.x] = s;
}

static __global__ void sum_k(double *out, const double *part, int n)
{
    double s = 0.0;
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        s += part[i];
    s = block_sum(s);
    if (threadIdx.x == 0)
        *out = s;
}

// Waits for the stream (the value goes to the host). A failure returns NaN (and is kept
// for the next sync), so a clipping step never takes a wrong norm for a right one.
extern "C" double lp_cu_sum_squares(const float *x, int64_t n)
{
    lp_cuda_ctx *ctx = lp_cu_ctx();
    if (n == 0 || !ctx)
        return n == 0 ? 0.0 : NAN;
    unsigned blocks = lp_cu_blocks(n, SS_THREADS);
    blocks = blocks > SS_BLOCKS ? SS_BLOCKS : blocks;
    double *part = (double *)lp_cu_alloc_get(&ctx->alloc, (blocks + 1) * sizeof(double), LP_MEM_CATEGORY_TEMPORARY,
                                             "sum_squares partials");
    if (!part) {
        lp_cu_fail("sum_squares", "scratch", cudaErrorMemoryAllocation);
        return NAN;
    }
    sumsq_k<<<blocks, SS_THREADS, 0, ctx->stream>>>(part, x, n);
    sum_k<<<1, SS_THREADS, 0, ctx->stream>>>(part + blocks, part, (int)blocks);
    double r = NAN;
    if (lp_cu_check("sum_squares") == LP_OK) {
        cudaError_t e = cudaMemcpyAsync(&r, part + blocks, sizeof r, cudaMemcpyDeviceToHost, ctx->stream);
        if (e == cudaSuccess)
            e = cudaStreamSynchronize(ctx->stream);
        if (e != cudaSuccess) {
            lp_cu_fail("sum_squares", "cudaMemcpyAsync", e);
            r = NAN;
        }
    }
    lp_cu_alloc_put(&ctx->alloc, part);
    return r;
}

// ---- mean pooling: one thread per (b, c), t in order (coalesced across c) ----
static __device__ int64_t real_count(const int32_t *mask, int64_t b, int64_t T)
{
    int64_t n = 0;
    for (int64_t t = 0; t < T; t++)
        n += !mask || mask[b * T + t];
    return n;
}

static __global__ void mean_pool_fwd_k(float *out, const float *x, const int32_t *mask, int64_t B, int64_t T, int64_t C)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < B * C; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t b = i / C, c = i % C, cnt = real_count(mask, b, T);
        double acc = 0;
        for (int64_t t = 0; t < T; t++)
            if (!mask || mask[b * T + t])
                acc += x[(b * T + t) * C + c];
        out[i] = cnt ? (float)(acc / (double)cnt) : 0.0f;
    }
}

static __global__ void mean_pool_bwd_k(float *dx, const float *dout, const int32_t *mask, int64_t B, int64_t T,
                                       int64_t C)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < B * C; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t b = i / C, c = i % C, cnt = real_count(mask, b, T);
        const float s = cnt ? 1.0f / (float)cnt : 0.0f, d = dout[i];
        for (int64_t t = 0; t < T; t++)
            dx[(b * T + t) * C + c] = d * ((!mask || mask[b * T + t]) ? s : 0.0f);
    }
}

extern "C" void lp_cu_mean_pool_forward(float *out, const float *x, const int32_t *mask, int64_t B, int64_t T,
                                        int64_t C)
{
    if (B * C == 0)
        return;
    mean_pool_fwd_k<<<lp_cu_blocks(B * C, 128), 128, 0, lp_cu_stream()>>>(out, x, mask, B, T, C);
    lp_cu_check("mean_pool_forward");
}

extern "C" void lp_cu_mean_pool_backward(float *dx, const float *dout, const int32_t *mask, int64_t B, int64_t T,
                                         int64_t C)
{
    if (B * C == 0)
        return;
    mean_pool_bwd_k<<<lp_cu_blocks(B * C, 128), 128, 0, lp_cu_stream()>>>(dx, dout, mask, B, T, C);
    lp_cu_check("mean_pool_backward");
}

// ---- L2 normalization: one block per row, the sum of squares in double ----
static __global__ void l2_normalize_k(float *x, int64_t C)
{
    float *r = x + (int64_t)blockIdx.x * C;
    double ss = 0;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x)
        ss += (double)r[c] * r[c];
    ss = block_sum(ss);
    const double nrm = sqrt(ss);
    const float s = (float)(1.0 / (nrm > 1e-12 ? nrm : 1e-12));
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x)
        r[c] *= s;
}

extern "C" void lp_cu_l2_normalize(float *x, int64_t N, int64_t C)
{
    for (int64_t r0 = 0; r0 < N; r0 += INT32_MAX) { // gridDim.x is at most 2^31 - 1
        int64_t rows = N - r0 < INT32_MAX ? N - r0 : INT32_MAX;
        l2_normalize_k<<<(unsigned)rows, SS_THREADS, 0, lp_cu_stream()>>>(x + r0 * C, C);
    }
    lp_cu_check("l2_normalize");
}
