/* The backend seam (DESIGN-NEXT change 2), private to kernels/: what a device offers the
 * neutral wrappers in cpu/dispatch.c (profiling, argument checks, compositions). Today one
 * backend, the CPU, with one instance per ISA level (its op table is that level's compiled
 * copy); the CUDA backend (cuda/, lp_backend_cuda) is another instance of the same struct,
 * with its context (device, stream, cuBLASLt handle) and device buffers: its op table has
 * the same entries, every pointer a DEVICE pointer.
 *
 *   const lp_backend *be = lp_backend_cpu(lp_kernels_isa());
 *   float *x = be->alloc(be->ctx, n * sizeof(float), "activations");
 *   be->upload(be->ctx, x, host, n * sizeof(float));
 *   if (be->supports(be, LP_BACKEND_OP(gelu_forward)))
 *       be->ops->gelu_forward(x, x, n, LP_GELU_KIND_ERF);
 */
#ifndef LP_KERNELS_BACKEND_H
#define LP_KERNELS_BACKEND_H

#include <stddef.h>

#include "loupe/kernels.h"

#ifdef __cplusplus
extern "C" { /* the CUDA sources include it too */
#endif

/* An op, named by its entry in lp_kernel_table. */
#define LP_BACKEND_OP(name) offsetof(lp_kernel_table, name)

typedef struct lp_backend {
    const char *name;  /* "cpu" or "cuda" */
    const char *level; /* CPU: the ISA level (lp_isa_name); CUDA: "sm_90", ... */
    void *ctx;         /* CPU: NULL (the OpenMP team is process-wide); CUDA: its lp_cuda_ctx */
    /* Buffers in the backend's memory. alloc: NULL and lp_err on failure (the caller owns
     * the buffer; release with free). upload / download copy host <-> backend, copy and
     * memset work inside the backend; all are ordered before the next op, and sync waits
     * for everything queued (CPU: they run at once, sync returns LP_OK). CUDA: ops are
     * void, so a failed launch (or a bad free) is kept and the next sync returns it, with
     * lp_err naming the op and the CUDA error. */
    void *(*alloc)(void *ctx, size_t bytes, const char *what);
    /* alloc under a memory category (alloc's buffers are TEMPORARY) */
    void *(*alloc_tagged)(void *ctx, size_t bytes, lp_mem_category cat, const char *what);
    void (*free)(void *ctx, void *p);
    lp_status (*upload)(void *ctx, void *dst, const void *src, size_t bytes);
    lp_status (*download)(void *ctx, void *dst, const void *src, size_t bytes);
    lp_status (*copy)(void *ctx, void *dst, const void *src, size_t bytes);
    /* rows x row_bytes inside the backend, rows dst_stride / src_stride bytes apart (one
     * cudaMemcpy2DAsync on CUDA: a gather of B rows is one call, not B) */
    lp_status (*copy_rows)(void *ctx, void *dst, size_t dst_stride, const void *src, size_t src_stride,
                           size_t row_bytes, size_t rows);
    lp_status (*memset)(void *ctx, void *dst, int value, size_t bytes);
    lp_status (*sync)(void *ctx);
    /* Whether ops has the op at offset LP_BACKEND_OP(name): a device backend may leave
     * some to the CPU. */
    bool (*supports)(const struct lp_backend *b, size_t op);
    const lp_kernel_table *ops;
} lp_backend;

/* The supports() of a backend whose table holds what it has: true when the entry at op
 * (LP_BACKEND_OP) is filled, false for a NULL entry or an offset outside the ops (the CPU's,
 * the CUDA backend's and the stand-in device's). */
bool lp_backend_table_supports(const lp_backend *b, size_t op);

/* The CPU backend at `isa` (static storage, never NULL); its ops are
 * lp_kernels_table_isa(isa), so call only when lp_isa_missing(isa) is NULL. */
const lp_backend *lp_backend_cpu(lp_isa isa);

/* ---- CUDA (src/kernels/cuda; stubs in a build without it) ------------------------------ */

/* What the CUDA context knows of its device (cudaGetDeviceProperties / attributes). */
typedef struct lp_cuda_device_info {
    int device;               /* ordinal (LP_CUDA_DEVICE, default 0) */
    char name[256];           /* "NVIDIA H100 80GB HBM3" */
    int cc_major, cc_minor;   /* compute capability: 9.0 for H100/H200 */
    int sm_count;
    int sm_clock_khz;         /* peak SM clock */
    int mem_clock_khz;        /* peak memory clock */
    int mem_bus_bits;
    int l2_bytes;
    size_t total_mem;         /* bytes */
    size_t free_mem;          /* bytes free when the context was made */
    int driver_version, runtime_version; /* 13000 = 13.0 */
} lp_cuda_device_info;

/* The process's CUDA backend (one device, one stream; made on the first call, static
 * storage afterwards). Errors (LP_STATUS_UNSUPPORTED, *out NULL): "this loupe was built
 * without CUDA", "no CUDA GPU is present (cudaGetDeviceCount: <CUDA's message>)", or the
 * CUDA / cuBLASLt call that failed while making the context. */
LP_WARN_UNUSED lp_status lp_backend_cuda(const lp_backend **out);
/* The device of a CUDA backend; NULL for another backend. */
const lp_cuda_device_info *lp_cuda_device_info_get(const lp_backend *b);
/* f32 GEMMs (the table's sgemm) with TF32 tensor cores (CUBLAS_COMPUTE_32F_FAST_TF32:
 * inputs rounded to 10 mantissa bits, f32 accumulation) when on; plain f32 by default. */
void lp_cuda_set_tf32(const lp_backend *b, bool on);
/* Which kernels the CUDA table's attention entries (attention_fused_forward / _backward)
 * run. AUTO, the default: attention as GEMMs on the tensor cores (../attn_gemm.h: cuBLASLt
 * in TF32, the scores materialized) when TF32 is on and the scores of the call fit
 * (T <= LP_CUDA_ATTN_GEMM_MAX_T and B*H*T*T floats <= LP_CUDA_ATTN_GEMM_MAX_MIB), else the
 * fused f32 SIMT kernels (cuda/cu_attention.cu); FUSED: always the fused kernels; GEMM: GEMMs
 * at any size (TF32 when on, f32 GEMMs when off). The GEMM path falls back to the fused
 * kernels when its scratch cannot be had or cuBLASLt refuses a GEMM. The environment
 * variable LP_CUDA_ATTN=auto|fused|gemm sets the mode when the backend is made. */
typedef enum lp_cuda_attn_mode { LP_CUDA_ATTN_AUTO = 0, LP_CUDA_ATTN_FUSED, LP_CUDA_ATTN_GEMM } lp_cuda_attn_mode;
#define LP_CUDA_ATTN_GEMM_MAX_T 1024
#define LP_CUDA_ATTN_GEMM_MAX_MIB 1024
/* The mode LP_CUDA_ATTN names (AUTO when unset or empty); LP_STATUS_INVALID_ARG for another value. */
lp_status lp_cuda_attn_mode_env(lp_cuda_attn_mode *mode);
/* Whether attention in `mode`, TF32 on or off, runs g as GEMMs (the rule above): the one choice
 * of the CUDA table and of the stand-in device (LP_FAKE_DEVICE). */
bool lp_cuda_attn_gemm_chosen(lp_cuda_attn_mode mode, bool tf32, const lp_attn_geom *g);
void lp_cuda_set_attention(const lp_backend *b, lp_cuda_attn_mode mode);
/* Whether the attention entries would run g as GEMMs now (mode, TF32, size; not whether the
 * scratch will be had). False for a backend that is not CUDA's. */
bool lp_cuda_attention_uses_gemm(const lp_backend *b, const lp_attn_geom *g);
/* The bf16 GEMM (device pointers): C (M,N) f32 = alpha * op(A) @ op(B) + beta * C, A and B
 * bf16 (uint16_t bits) laid out as in lp_sgemm, f32 accumulation (cuBLASLt). Asynchronous
 * on the backend's stream; LP_OK or the cuBLASLt error. */
LP_WARN_UNUSED lp_status lp_cuda_gemm_bf16(const lp_backend *b, bool trans_a, bool trans_b, int64_t M, int64_t N,
                                           int64_t K, float alpha, const uint16_t *A, int64_t lda,
                                           const uint16_t *B, int64_t ldb, float beta, float *C, int64_t ldc);
/* Device time between two points of the stream (CUDA events): start, queue work, then
 * *ms = the time of what was queued in between (waits for it). */
LP_WARN_UNUSED lp_status lp_cuda_timer_start(const lp_backend *b);
LP_WARN_UNUSED lp_status lp_cuda_timer_stop(const lp_backend *b, double *ms);
/* A quantized weight on the device: *d = h's header with its arrays copied into one device
 * block of b (category QUANTIZED_WEIGHT, tagged name), which the CUDA table's
 * qweight_dequantize reads (a device lp_qweight's arrays are device pointers; the header
 * itself stays on the host and is passed by pointer). NF4 (double quant or not) and int8;
 * LP_STATUS_UNSUPPORTED for the other dtypes. Release with lp_cuda_qweight_free. */
LP_WARN_UNUSED lp_status lp_cuda_qweight_upload(const lp_backend *b, const lp_qweight *h, lp_qweight *d,
                                                const char *name);
/* --dtype bf16's copy of a trained weight on the device: *q = w (rows, cols, a device f32
 * array) rounded to bf16 into one row-major device array (category cat: QUANTIZED_WEIGHT for
 * a kept copy, TEMPORARY for one use), the layout the CUDA table's bf16 entries read; its
 * bf16_repack rounds it again. Errors: INVALID_ARG (not CUDA, shape), NO_MEMORY; *q zeroed
 * on error. Free with lp_cuda_qweight_free. */
LP_WARN_UNUSED lp_status lp_cuda_qweight_bf16_train(const lp_backend *b, lp_qweight *q, const float *w,
                                                    int64_t rows, int64_t cols, const char *name,
                                                    lp_mem_category cat);
void lp_cuda_qweight_free(const lp_backend *b, lp_qweight *d);
/* The caching allocator's counters (cuda/cuda_alloc.h: lp_cu_alloc_stats, per category),
 * and returning its cached blocks to the device. */
struct lp_cu_alloc_stats;
void lp_cuda_alloc_stats(const lp_backend *b, struct lp_cu_alloc_stats *out);
void lp_cuda_empty_cache(const lp_backend *b);

#ifdef __cplusplus
}
#endif

#endif
