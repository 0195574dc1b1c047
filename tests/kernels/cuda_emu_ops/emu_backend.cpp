/* An emulated CUDA backend over host memory, so that test_cuda_ops.c runs this backend's
 * kernels on cukern's CPU emulator (tests/kernels/cuda_emu); sgemm and the bf16 GEMM are the
 * CPU reference here (cuBLASLt is not emulated). Built and run by run.sh. */
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include "cuda_kernels.h"

extern "C" {
void lp_cu_bias_add_forward(float *out, const float *bias, int64_t N, int64_t C);
void lp_cu_bias_broadcast(float *out, const float *bias, int64_t N, int64_t C);
void lp_cu_gelu_forward(float *out, const float *inp, int64_t n, lp_gelu_kind kind);
void lp_cu_gelu_backward(float *dinp, const float *dout, const float *inp, int64_t n, lp_gelu_kind kind);
void lp_cu_act_forward(float *out, const float *inp, int64_t n, lp_act_kind kind);
void lp_cu_act_backward(float *dinp, const float *dout, const float *inp, const float *out, int64_t n,
                        lp_act_kind kind);
void lp_cu_swiglu_forward(float *out, const float *gate, const float *up, int64_t N, int64_t F, int64_t ld);
void lp_cu_swiglu_backward(float *dgate, float *dup, const float *dout, const float *gate, const float *up,
                           int64_t N, int64_t F, int64_t ld);
void lp_cu_scale(float *x, int64_t n, float s);
void lp_cu_add_inplace(float *y, const float *x, int64_t n);
void lp_cu_bias_backward(float *dbias, const float *dout, int64_t N, int64_t C);
double lp_cu_sum_squares(const float *x, int64_t n);
void lp_cu_mean_pool_forward(float *out, const float *x, const int32_t *mask, int64_t B, int64_t T,
                             int64_t C);
void lp_cu_mean_pool_backward(float *dx, const float *dout, const int32_t *mask, int64_t B, int64_t T,
                              int64_t C);
void lp_cu_l2_normalize(float *x, int64_t N, int64_t C);
void lp_cu_rows_gather(float *out, const float *x, const int64_t *idx, int64_t n, int64_t C);
void lp_cu_rows_scatter_add(float *dx, const float *dout, const int64_t *idx, int64_t n, int64_t C);
void lp_cu_adamw_step(float *param, const float *grad, float *m, float *v, int64_t n, double lr, double beta1,
                      double beta2, double eps, double weight_decay, int64_t step);
void lp_cu_adamw_multi(const lp_adamw_tensor *t, int count, double lr, double beta1, double beta2, double eps,
                       int64_t step);
void lp_cu_qweight_dequantize(float *out, const lp_qweight *w, int64_t start, int64_t n);
void lp_cu_dropout_forward(float *out, uint8_t *keep, const float *inp, int64_t n, float p, lp_rng *rng);
void lp_cu_dropout_backward(float *dinp, const float *dout, const uint8_t *keep, int64_t n, float p);
}

static lp_cuda_ctx ctx;
static lp_status pending;
static char pending_msg[512];
extern "C" lp_cuda_ctx *lp_cu_ctx(void)
{
    return &ctx;
}
extern "C" cudaStream_t lp_cu_stream(void)
{
    return 0;
}
extern "C" lp_status lp_cu_pend(lp_status st)
{
    if (!pending) {
        pending = st;
        snprintf(pending_msg, sizeof pending_msg, "%s", lp_err_msg());
    }
    return st;
}
extern "C" lp_status lp_cu_fail(const char *op, const char *call, cudaError_t e)
{
    return lp_cu_pend(lp_err(LP_STATUS_UNSUPPORTED, "emu %s: %s: %d", op, call, (int)e));
}

static lp_status raw_alloc(void *, void **out, size_t bytes)
{
    *out = malloc(bytes);
    return *out ? LP_OK : LP_STATUS_NO_MEMORY;
}
static void raw_free(void *, void *p)
{
    free(p);
}
static void *e_alloc_tagged(void *, size_t b, lp_mem_category c, const char *w)
{
    return lp_cu_alloc_get(&ctx.alloc, b, c, w);
}
static void *e_alloc(void *c, size_t b, const char *w)
{
    return e_alloc_tagged(c, b, LP_MEM_CATEGORY_TEMPORARY, w);
}
static void e_free(void *, void *p)
{
    if (lp_cu_alloc_put(&ctx.alloc, p) != LP_OK)
        lp_cu_pend(LP_STATUS_INVALID_ARG);
}
static lp_status e_copy(void *, void *d, const void *s, size_t b)
{
    memmove(d, s, b);
    return LP_OK;
}
static lp_status e_copy_rows(void *, void *d, size_t ds, const void *src, size_t ss, size_t rb, size_t rows)
{
    for (size_t r = 0; r < rows; r++)
        memmove((char *)d + r * ds, (const char *)src + r * ss, rb);
    return LP_OK;
}
static lp_status e_memset(void *, void *d, int v, size_t b)
{
    memset(d, v, b);
    return LP_OK;
}
static lp_status e_sync(void *)
{
    lp_status st = pending;
    if (st)
        lp_err(st, "%s", pending_msg);
    pending = LP_OK;
    return st;
}
static bool e_supports(const lp_backend *b, size_t op)
{
    if (op < offsetof(lp_kernel_table, sgemm) || op + sizeof(void (*)(void)) > sizeof(lp_kernel_table))
        return false;
    void (*fn)(void);
    memcpy(&fn, (const char *)b->ops + op, sizeof fn);
    return fn != NULL;
}
static lp_kernel_table table;
static lp_backend be;
extern "C" lp_status lp_backend_cuda(const lp_backend **out)
{
    table = lp_kernel_table{};
    table.name = "cuda-emu";
    table.isa = "emu";
    table.sgemm = lp_kernels_table(LP_KERNELS_IMPL_REF)->sgemm; /* cuBLASLt is not emulated */
    table.bias_add_forward = lp_cu_bias_add_forward;
    table.bias_broadcast = lp_cu_bias_broadcast;
    table.gelu_forward = lp_cu_gelu_forward;
    table.gelu_backward = lp_cu_gelu_backward;
    table.swiglu_forward = lp_cu_swiglu_forward;
    table.swiglu_backward = lp_cu_swiglu_backward;
    table.act_forward = lp_cu_act_forward;
    table.act_backward = lp_cu_act_backward;
    table.scale = lp_cu_scale;
    table.add_inplace = lp_cu_add_inplace;
    table.bias_backward = lp_cu_bias_backward;
    table.sum_squares = lp_cu_sum_squares;
    table.adamw_step = lp_cu_adamw_step;
    table.adamw_multi = lp_cu_adamw_multi;
    table.rows_gather = lp_cu_rows_gather;
    table.rows_scatter_add = lp_cu_rows_scatter_add;
    table.mean_pool_forward = lp_cu_mean_pool_forward;
    table.mean_pool_backward = lp_cu_mean_pool_backward;
    table.l2_normalize = lp_cu_l2_normalize;
    table.dropout_forward = lp_cu_dropout_forward;
    table.dropout_backward = lp_cu_dropout_backward;
    table.qweight_dequantize = lp_cu_qweight_dequantize;
    table.bf16_matmul_forward = lp_cu_bf16_matmul_forward;
    table.bf16_matmul_backward = lp_cu_bf16_matmul_backward;
    table.bf16_repack = lp_cu_bf16_repack;
    lp_cu_alloc_init(&ctx.alloc, raw_alloc, raw_free, NULL);
    snprintf(ctx.info.name, sizeof ctx.info.name, "CPU emulator");
    ctx.info.sm_count = 132;
    ctx.info.cc_major = 9;
    void *ws = lp_cu_alloc_get(&ctx.alloc, 32u << 20, LP_MEM_CATEGORY_OTHER, "workspace");
    (void)ws;
    be = lp_backend{};
    be.name = "cuda";
    be.level = "emu";
    be.ctx = &ctx;
    be.alloc = e_alloc;
    be.alloc_tagged = e_alloc_tagged;
    be.free = e_free;
    be.upload = e_copy;
    be.download = e_copy;
    be.copy = e_copy;
    be.copy_rows = e_copy_rows;
    be.memset = e_memset;
    be.sync = e_sync;
    be.supports = e_supports;
    be.ops = &table;
    *out = &be;
    return LP_OK;
}
extern "C" const lp_cuda_device_info *lp_cuda_device_info_get(const lp_backend *)
{
    return &ctx.info;
}
extern "C" void lp_cuda_set_tf32(const lp_backend *, bool) {}
extern "C" lp_status lp_cuda_gemm_bf16(const lp_backend *, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                                       float alpha, const uint16_t *A, int64_t lda, const uint16_t *B,
                                       int64_t ldb, float beta, float *C, int64_t ldc)
{
    int64_t na = (ta ? K : M) * lda, nb = (tb ? N : K) * ldb;
    float *a = (float *)malloc(na * 4), *b = (float *)malloc(nb * 4);
    lp_bf16_to_f32_n(a, A, na);
    lp_bf16_to_f32_n(b, B, nb);
    lp_kernels_table(LP_KERNELS_IMPL_REF)->sgemm(ta, tb, M, N, K, alpha, a, lda, b, ldb, beta, C, ldc);
    free(a);
    free(b);
    return LP_OK;
}
extern "C" lp_status lp_cu_gemm_bf16(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                                     const uint16_t *A, int64_t lda, const uint16_t *B, int64_t ldb,
                                     float beta, float *C, int64_t ldc)
{
    return lp_cuda_gemm_bf16(&be, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
/* cuBLASLt's bias epilogue is not emulated: the GEMM, then the emulated bias add */
extern "C" lp_status lp_cu_linear_bf16(float *out, const uint16_t *a, const uint16_t *w, const float *bias,
                                       int64_t N, int64_t C, int64_t OC)
{
    lp_status st = lp_cu_gemm_bf16(false, true, N, OC, C, 1.0f, a, C, w, C, 0.0f, out, OC);
    if (st == LP_OK && bias)
        lp_cu_bias_add_forward(out, bias, N, OC);
    return st;
}
extern "C" lp_status lp_cuda_timer_start(const lp_backend *)
{
    return LP_OK;
}
extern "C" lp_status lp_cuda_timer_stop(const lp_backend *, double *ms)
{
    *ms = 0;
    return LP_OK;
}
extern "C" void lp_cuda_alloc_stats(const lp_backend *, lp_cu_alloc_stats *out)
{
    lp_cu_alloc_get_stats(&ctx.alloc, out);
}
extern "C" void lp_cuda_empty_cache(const lp_backend *)
{
    lp_cu_alloc_empty_cache(&ctx.alloc);
}
