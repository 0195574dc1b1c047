/* The CUDA backend (backend.h): one process-wide context (device, one stream, cuBLASLt
 * handle and workspace, caching allocator), made on the first lp_backend_cuda call, and its
 * op table of lp_cu_* launchers. Entries left NULL are ops this backend does not run yet
 * (supports() says so); cukern's ops join as their files land. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cu_nn.h"
#include "cuda_blaslt.h"
#include "cuda_kernels.h"

#define WORKSPACE_BYTES ((size_t)32 << 20) /* cuBLASLt's recommendation for Hopper */

static lp_cuda_ctx ctx;
static bool ctx_ready;
static lp_backend backend;
static char level[16];
static lp_kernel_table table = {
    .name = "cuda",
    .sgemm = lp_cu_sgemm,
    .bias_add_forward = lp_cu_bias_add_forward,
    .bias_broadcast = lp_cu_bias_broadcast,
    .gelu_forward = lp_cu_gelu_forward,
    .gelu_backward = lp_cu_gelu_backward,
    .act_forward = lp_cu_act_forward,
    .act_backward = lp_cu_act_backward,
    .swiglu_forward = lp_cu_swiglu_forward,
    .swiglu_backward = lp_cu_swiglu_backward,
    .scale = lp_cu_scale,
    .add_inplace = lp_cu_add_inplace,
    .bias_backward = lp_cu_bias_backward,
    .linear_forward = lp_cu_linear_forward,
    .sum_squares = lp_cu_sum_squares,
    .adamw_step = lp_cu_adamw_step,
    .adamw_multi = lp_cu_adamw_multi,
    .rows_gather = lp_cu_rows_gather,
    .rows_scatter_add = lp_cu_rows_scatter_add,
    .mean_pool_forward = lp_cu_mean_pool_forward,
    .mean_pool_backward = lp_cu_mean_pool_backward,
    .l2_normalize = lp_cu_l2_normalize,
    .dropout_forward = lp_cu_dropout_forward,
    .dropout_backward = lp_cu_dropout_backward,
    .qweight_dequantize = lp_cu_qweight_dequantize,
    /* --dtype bf16 (cuda_bf16.c) */
    .bf16_matmul_forward = lp_cu_bf16_matmul_forward,
    .bf16_matmul_backward = lp_cu_bf16_matmul_backward,
    .bf16_repack = lp_cu_bf16_repack,
    /* cukern's NN ops (cu_*.cu) */
    LP_CU_NN_TABLE_ENTRIES
        /* fused kernels or GEMMs on the tensor cores (cuda_attention.c) */
        .attention_fused_forward = lp_cu_attention_forward,
    .attention_fused_backward = lp_cu_attention_backward,
};
static pthread_once_t once = PTHREAD_ONCE_INIT;
static lp_status init_st;
static char init_msg[512];

lp_cuda_ctx *lp_cu_ctx(void)
{
    return ctx_ready ? &ctx : NULL;
}

cudaStream_t lp_cu_stream(void)
{
    return ctx_ready ? ctx.stream : 0;
}

static lp_status status_of(cudaError_t e)
{
    return e == cudaErrorMemoryAllocation ? LP_STATUS_NO_MEMORY
           : e == cudaErrorInvalidValue   ? LP_STATUS_INVALID_ARG
                                          : LP_STATUS_UNSUPPORTED;
}

/* Keeps the first error since the last sync. */
lp_status lp_cu_pend(lp_status st)
{
    if (!ctx_ready)
        return st;
    pthread_mutex_lock(&ctx.err_mu);
    if (ctx.err == LP_OK) {
        ctx.err = st;
        snprintf(ctx.err_msg, sizeof ctx.err_msg, "%s", lp_err_msg());
    }
    pthread_mutex_unlock(&ctx.err_mu);
    return st;
}

lp_status lp_cu_fail(const char *op, const char *call, cudaError_t e)
{
    return lp_cu_pend(
        lp_err(status_of(e), "cuda %s: %s: %s: %s", op, call, cudaGetErrorName(e), cudaGetErrorString(e)));
}

lp_status lp_cu_fail_blas(const char *op, const char *call, cublasStatus_t s)
{
    lp_status st = s == CUBLAS_STATUS_ALLOC_FAILED ? LP_STATUS_NO_MEMORY
                   : s == CUBLAS_STATUS_INVALID_VALUE ? LP_STATUS_INVALID_ARG
                                                      : LP_STATUS_UNSUPPORTED;
    return lp_cu_pend(lp_err(st, "cuda %s: %s: %s (%d)", op, call, lp_cublaslt_status(s), (int)s));
}

/* ---- memory ---- */

static lp_status raw_alloc(void *user, void **out, size_t bytes)
{
    (void)user;
    cudaError_t e = cudaMalloc(out, bytes);
    if (e != cudaSuccess) {
        (void)cudaGetLastError(); /* out of memory is not sticky: clear it for the next launch check */
        *out = NULL;
        return lp_err(status_of(e), "cudaMalloc(%zu): %s", bytes, cudaGetErrorString(e));
    }
    return LP_OK;
}

static void raw_free(void *user, void *p)
{
    (void)user;
    cudaError_t e = cudaFree(p);
    if (e != cudaSuccess)
        lp_cu_fail("free", "cudaFree", e);
}

static void *cu_alloc_tagged(void *c, size_t bytes, lp_mem_category cat, const char *what)
{
    return lp_cu_alloc_get(&((lp_cuda_ctx *)c)->alloc, bytes, cat, what);
}

static void *cu_alloc(void *c, size_t bytes, const char *what)
{
    return cu_alloc_tagged(c, bytes, LP_MEM_CATEGORY_TEMPORARY, what);
}

/* The stream may still use p: the caching allocator hands it out again only to work queued
 * after this point on the same stream, which runs after what used it. */
static void cu_free(void *c, void *p)
{
    if (lp_cu_alloc_put(&((lp_cuda_ctx *)c)->alloc, p) != LP_OK)
        lp_cu_pend(LP_STATUS_INVALID_ARG);
}

static lp_status cu_upload(void *c, void *dst, const void *src, size_t bytes)
{
    if (bytes)
        LP_CU_TRY("upload", cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, ((lp_cuda_ctx *)c)->stream));
    return LP_OK;
}

/* waits: the host reads dst next */
static lp_status cu_download(void *c, void *dst, const void *src, size_t bytes)
{
    lp_cuda_ctx *x = c;
    if (bytes)
        LP_CU_TRY("download", cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, x->stream));
    LP_CU_TRY("download", cudaStreamSynchronize(x->stream));
    return LP_OK;
}

static lp_status cu_copy(void *c, void *dst, const void *src, size_t bytes)
{
    if (bytes)
        LP_CU_TRY("copy", cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, ((lp_cuda_ctx *)c)->stream));
    return LP_OK;
}

static lp_status cu_copy_rows(void *c, void *dst, size_t dst_stride, const void *src, size_t src_stride,
                              size_t row_bytes, size_t rows)
{
    if (rows && row_bytes)
        LP_CU_TRY("copy_rows", cudaMemcpy2DAsync(dst, dst_stride, src, src_stride, row_bytes, rows,
                                                 cudaMemcpyDeviceToDevice, ((lp_cuda_ctx *)c)->stream));
    return LP_OK;
}

static lp_status cu_memset(void *c, void *dst, int value, size_t bytes)
{
    if (bytes)
        LP_CU_TRY("memset", cudaMemsetAsync(dst, value, bytes, ((lp_cuda_ctx *)c)->stream));
    return LP_OK;
}

/* Waits for the stream, then returns (and clears) the first error kept since the last sync. */
static lp_status cu_sync(void *c)
{
    lp_cuda_ctx *x = c;
    cudaError_t e = cudaStreamSynchronize(x->stream);
    if (e != cudaSuccess)
        lp_cu_fail("sync", "cudaStreamSynchronize", e);
    /* a data error the NN kernels recorded on the device (an id or label out of range, a
     * non-finite logit row): what the CPU kernels return as a status */
    lp_status nn = lp_cu_nn_take_error();
    pthread_mutex_lock(&x->err_mu);
    lp_status st = x->err;
    if (st != LP_OK)
        lp_err(st, "%s", x->err_msg);
    x->err = LP_OK;
    x->err_msg[0] = '\0';
    pthread_mutex_unlock(&x->err_mu);
    return st != LP_OK ? st : nn;
}

/* ---- the context ---- */

#define INIT_TRY(call)                                                                                          \
    do {                                                                                                        \
        cudaError_t e_ = (call);                                                                                \
        if (e_ != cudaSuccess)                                                                                  \
            return lp_err(LP_STATUS_UNSUPPORTED, "cuda: %s: %s: %s", #call, cudaGetErrorName(e_),             \
                          cudaGetErrorString(e_));                                                              \
    } while (0)

static lp_status make_ctx(void)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        /* Without the driver CUDA blames its version ("driver version is insufficient"):
         * say what is really missing. */
        void *drv = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
        if (drv)
            dlclose(drv);
        return lp_err(LP_STATUS_UNSUPPORTED, "no CUDA GPU is present (cudaGetDeviceCount: %s%s)", cudaGetErrorString(e),
                      drv ? "" : "; the NVIDIA driver's libcuda.so.1 is not installed");
    }
    if (n == 0)
        return lp_err(LP_STATUS_UNSUPPORTED, "no CUDA GPU is present (cudaGetDeviceCount: 0 devices)");
    const char *env = getenv("LP_CUDA_DEVICE");
    int dev = env && *env ? atoi(env) : 0;
    if (dev < 0 || dev >= n)
        return lp_err(LP_STATUS_INVALID_ARG, "LP_CUDA_DEVICE=%s: this machine has CUDA devices 0..%d", env, n - 1);
    INIT_TRY(cudaSetDevice(dev));
    lp_cuda_device_info *d = &ctx.info;
    d->device = dev;
    struct cudaDeviceProp p;
    INIT_TRY(cudaGetDeviceProperties(&p, dev));
    snprintf(d->name, sizeof d->name, "%s", p.name);
    d->total_mem = p.totalGlobalMem;
    INIT_TRY(cudaDeviceGetAttribute(&d->cc_major, cudaDevAttrComputeCapabilityMajor, dev));
    INIT_TRY(cudaDeviceGetAttribute(&d->cc_minor, cudaDevAttrComputeCapabilityMinor, dev));
    INIT_TRY(cudaDeviceGetAttribute(&d->sm_count, cudaDevAttrMultiProcessorCount, dev));
    INIT_TRY(cudaDeviceGetAttribute(&d->sm_clock_khz, cudaDevAttrClockRate, dev));
    INIT_TRY(cudaDeviceGetAttribute(&d->mem_clock_khz, cudaDevAttrMemoryClockRate, dev));
    INIT_TRY(cudaDeviceGetAttribute(&d->mem_bus_bits, cudaDevAttrGlobalMemoryBusWidth, dev));
    INIT_TRY(cudaDeviceGetAttribute(&d->l2_bytes, cudaDevAttrL2CacheSize, dev));
    INIT_TRY(cudaDriverGetVersion(&d->driver_version));
    INIT_TRY(cudaRuntimeGetVersion(&d->runtime_version));
    size_t total = 0;
    INIT_TRY(cudaMemGetInfo(&d->free_mem, &total));
    INIT_TRY(cudaStreamCreateWithFlags(&ctx.stream, cudaStreamNonBlocking));
    INIT_TRY(cudaEventCreate(&ctx.t0));
    INIT_TRY(cudaEventCreate(&ctx.t1));
    lp_status lst = lp_cublaslt_load();
    if (lst != LP_OK)
        return lst;
    cublasStatus_t s = lp_lt.Create(&ctx.lt);
    if (s != CUBLAS_STATUS_SUCCESS)
        return lp_err(LP_STATUS_UNSUPPORTED, "cuda: cublasLtCreate: %s", lp_cublaslt_status(s));
    pthread_mutex_init(&ctx.err_mu, NULL);
    ctx.device = dev;
    lp_cuda_attn_mode attn_mode;
    lst = lp_cuda_attn_mode_env(&attn_mode);
    if (lst != LP_OK)
        return lst;
    ctx.attn_mode = attn_mode;
    lp_cu_alloc_init(&ctx.alloc, raw_alloc, raw_free, NULL);
    ctx.workspace_bytes = WORKSPACE_BYTES;
    ctx.workspace = lp_cu_alloc_get(&ctx.alloc, ctx.workspace_bytes, LP_MEM_CATEGORY_OTHER, "cublasLt workspace");
    if (!ctx.workspace)
        return lp_err_wrap(LP_STATUS_NO_MEMORY, "cuda: cuBLASLt workspace");
    snprintf(level, sizeof level, "sm_%d%d", d->cc_major, d->cc_minor);
    table.isa = level;
    backend = (lp_backend){.name = "cuda",
                           .level = level,
                           .ctx = &ctx,
                           .alloc = cu_alloc,
                           .alloc_tagged = cu_alloc_tagged,
                           .free = cu_free,
                           .upload = cu_upload,
                           .download = cu_download,
                           .copy = cu_copy,
                           .copy_rows = cu_copy_rows,
                           .memset = cu_memset,
                           .sync = cu_sync,
                           .supports = lp_backend_table_supports,
                           .ops = &table};
    ctx_ready = true;
    (void)lp_cu_nn_error_slot(); /* the NN kernels' error record, made now: not during a graph capture */
    return LP_OK;
}

static void init_once(void)
{
    init_st = make_ctx();
    if (init_st != LP_OK)
        snprintf(init_msg, sizeof init_msg, "%s", lp_err_msg());
}

lp_status lp_backend_cuda(const lp_backend **out)
{
    *out = NULL;
    pthread_once(&once, init_once);
    if (init_st != LP_OK)
        return lp_err(init_st, "%s", init_msg);
    *out = &backend;
    return LP_OK;
}

static lp_cuda_ctx *ctx_of(const lp_backend *b)
{
    return b && b == &backend ? &ctx : NULL;
}

const lp_cuda_device_info *lp_cuda_device_info_get(const lp_backend *b)
{
    lp_cuda_ctx *x = ctx_of(b);
    return x ? &x->info : NULL;
}

void lp_cuda_set_tf32(const lp_backend *b, bool on)
{
    lp_cuda_ctx *x = ctx_of(b);
    if (x)
        x->tf32 = on;
}

lp_status lp_cuda_gemm_bf16(const lp_backend *b, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                            float alpha, const uint16_t *A, int64_t lda, const uint16_t *B, int64_t ldb, float beta,
                            float *C, int64_t ldc)
{
    if (!ctx_of(b))
        return lp_err(LP_STATUS_INVALID_ARG, "lp_cuda_gemm_bf16: not a CUDA backend");
    return lp_cu_gemm_bf16(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

lp_status lp_cuda_timer_start(const lp_backend *b)
{
    lp_cuda_ctx *x = ctx_of(b);
    if (!x)
        return lp_err(LP_STATUS_INVALID_ARG, "lp_cuda_timer_start: not a CUDA backend");
    LP_CU_TRY("timer", cudaEventRecord(x->t0, x->stream));
    return LP_OK;
}

lp_status lp_cuda_timer_stop(const lp_backend *b, double *ms)
{
    lp_cuda_ctx *x = ctx_of(b);
    *ms = 0.0;
    if (!x)
        return lp_err(LP_STATUS_INVALID_ARG, "lp_cuda_timer_stop: not a CUDA backend");
    float f = 0.0f;
    LP_CU_TRY("timer", cudaEventRecord(x->t1, x->stream));
    LP_CU_TRY("timer", cudaEventSynchronize(x->t1));
    LP_CU_TRY("timer", cudaEventElapsedTime(&f, x->t0, x->t1));
    *ms = f;
    return LP_OK;
}

void lp_cuda_alloc_stats(const lp_backend *b, lp_cu_alloc_stats *out)
{
    lp_cuda_ctx *x = ctx_of(b);
    if (x)
        lp_cu_alloc_get_stats(&x->alloc, out);
    else
        memset(out, 0, sizeof *out);
}

void lp_cuda_empty_cache(const lp_backend *b)
{
    lp_cuda_ctx *x = ctx_of(b);
    if (x) {
        cudaStreamSynchronize(x->stream); /* nothing queued still uses a cached block */
        lp_cu_alloc_empty_cache(&x->alloc);
    }
}
