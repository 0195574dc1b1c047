/* GEMMs through cuBLASLt: the table's sgemm (f32, or TF32 when the context asks) and the
 * bf16 GEMM (bf16 inputs, f32 accumulation and output). loupe's matrices are row-major and
 * cuBLASLt's column-major, so C = op(A) op(B) is computed as C^T = op(B)^T op(A)^T: the same
 * buffers, operands swapped, no copies. Pointer alignments are passed to the heuristic
 * (which otherwise assumes 256-byte aligned operands and may pick a kernel that faults on a
 * view into a buffer). Descriptors and the chosen algorithm are kept per shape (plans
 * below). A Linear's bias is added by the GEMM's epilogue (CUBLASLT_EPILOGUE_BIAS) instead
 * of a broadcast into the output that the GEMM then reads back with beta 1: one pass over the
 * output instead of three. */
#include <stdatomic.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "cuda_blaslt.h"
#include "cuda_kernels.h"

static uint32_t align_of(const void *p)
{
    uint32_t a = 256;
    while (a > 1 && (uintptr_t)p % a)
        a /= 2;
    return a;
}

/* A GEMM's cuBLASLt objects and chosen algorithm, kept per shape: a training step repeats
 * the same few dozen shapes, and the heuristic query costs more than a small GEMM. */
typedef struct plan_key {
    int32_t ab, compute, ta, tb;
    int64_t M, N, K, lda, ldb, ldc;
    int64_t batch, sa, sb, sc; /* strided batch (1, 0, 0, 0: one GEMM) */
    uint32_t al_a, al_b, al_c;
    uint32_t al_bias; /* 0: no bias epilogue; else the bias pointer's alignment */
} plan_key;

typedef struct plan {
    plan_key key;
    uint64_t last; /* use stamp for eviction; 0 = empty slot */
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulAlgo_t algo;
} plan;

#define PLANS 64
static plan plans[PLANS];
static uint64_t plan_tick;
static pthread_mutex_t plans_mu = PTHREAD_MUTEX_INITIALIZER;

static void plan_clear(plan *p)
{
    if (p->lc)
        lp_lt.MatrixLayoutDestroy(p->lc);
    if (p->lb)
        lp_lt.MatrixLayoutDestroy(p->lb);
    if (p->la)
        lp_lt.MatrixLayoutDestroy(p->la);
    if (p->desc)
        lp_lt.MatmulDescDestroy(p->desc);
    memset(p, 0, sizeof *p);
}

/* Fills p for k: descriptors, layouts (column-major view, see the top), and the heuristic's
 * first algorithm. On failure p is cleared and *call names the call that failed. */
static cublasStatus_t plan_make(plan *p, const plan_key *k, const float *bias, lp_cuda_ctx *x,
                                const char **call)
{
    /* first cuBLAS operand: our B, stored column-major as (N,K) or, transposed, (K,N) */
    cublasOperation_t ta = k->tb ? CUBLAS_OP_T : CUBLAS_OP_N, tb = k->ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    uint64_t a_rows = k->tb ? k->K : k->N, a_cols = k->tb ? k->N : k->K;
    uint64_t b_rows = k->ta ? k->M : k->K, b_cols = k->ta ? k->K : k->M;
    cublasLtMatmulPreference_t pref = NULL;
    cublasStatus_t s;
    memset(p, 0, sizeof *p);
#define LT(c)                                                                                                   \
    do {                                                                                                        \
        *call = #c;                                                                                             \
        if ((s = (c)) != CUBLAS_STATUS_SUCCESS)                                                                 \
            goto fail;                                                                                          \
    } while (0)
    LT(lp_lt.MatmulDescCreate(&p->desc, (cublasComputeType_t)k->compute, CUDA_R_32F));
    LT(lp_lt.MatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    LT(lp_lt.MatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    if (k->al_bias) { /* the heuristic reads the pointer's alignment: set before asking */
        const uint32_t epi = CUBLASLT_EPILOGUE_BIAS;
        const int32_t bt = CUDA_R_32F;
        LT(lp_lt.MatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
        LT(lp_lt.MatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt));
        LT(lp_lt.MatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    }
    LT(lp_lt.MatrixLayoutCreate(&p->la, (cudaDataType_t)k->ab, a_rows, a_cols, k->ldb));
    LT(lp_lt.MatrixLayoutCreate(&p->lb, (cudaDataType_t)k->ab, b_rows, b_cols, k->lda));
    LT(lp_lt.MatrixLayoutCreate(&p->lc, CUDA_R_32F, (uint64_t)k->N, (uint64_t)k->M, k->ldc));
    if (k->batch > 1) { /* the first cuBLAS operand is our B (stride sb), the second our A */
        const int32_t n = (int32_t)k->batch;
        const int64_t st[3] = {k->sb, k->sa, k->sc};
        cublasLtMatrixLayout_t l[3] = {p->la, p->lb, p->lc};
        for (int i = 0; i < 3; i++) {
            LT(lp_lt.MatrixLayoutSetAttribute(l[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &n, sizeof n));
            LT(lp_lt.MatrixLayoutSetAttribute(l[i], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &st[i],
                                              sizeof st[i]));
        }
    }
    LT(lp_lt.MatmulPreferenceCreate(&pref));
    uint64_t ws = x->workspace_bytes;
    LT(lp_lt.MatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    LT(lp_lt.MatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &k->al_a, sizeof k->al_a));
    LT(lp_lt.MatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &k->al_b, sizeof k->al_b));
    LT(lp_lt.MatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &k->al_c, sizeof k->al_c));
    LT(lp_lt.MatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &k->al_c, sizeof k->al_c));
    cublasLtMatmulHeuristicResult_t res;
    int nres = 0;
    LT(lp_lt.MatmulAlgoGetHeuristic(x->lt, p->desc, p->la, p->lb, p->lc, p->lc, pref, 1, &res, &nres));
#undef LT
    if (nres == 0) {
        *call = "cublasLtMatmulAlgoGetHeuristic: no algorithm for this shape";
        s = CUBLAS_STATUS_NOT_SUPPORTED;
        goto fail;
    }
    p->algo = res.algo;
    p->key = *k;
    lp_lt.MatmulPreferenceDestroy(pref);
    return CUBLAS_STATUS_SUCCESS;
fail:
    if (pref)
        lp_lt.MatmulPreferenceDestroy(pref);
    plan_clear(p);
    return s;
}

/* C_i = alpha op(A_i) op(B_i) + beta C_i (+ bias, length N, broadcast over the M rows: the
 * epilogue's; NULL for none), i < batch, X_i = X + i sX elements of the operand's type. An
 * error is returned through lp_err and, with pend, also kept as the context's pending error
 * (ops are void); without, the caller decides (attention and the bias epilogue fall back). */
static lp_status lt_gemm(const char *op, cudaDataType_t ab, cublasComputeType_t compute, bool trans_a,
                         bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const void *A,
                         int64_t lda, int64_t sa, const void *B, int64_t ldb, int64_t sb, float beta,
                         float *C, int64_t ldc, int64_t sc, int64_t batch, const float *bias, bool pend)
{
    lp_cuda_ctx *x = lp_cu_ctx();
    if (!x)
        return lp_err(LP_STATUS_UNSUPPORTED, "cuda %s: no CUDA context (call lp_backend_cuda first)", op);
    if (M == 0 || N == 0 || batch == 0)
        return LP_OK;
    if (K == 0) { /* C = beta * C: nothing to multiply */
        for (int64_t i = 0; i < batch; i++)
            lp_cu_scale_2d(C + i * sc, M, N, ldc, beta);
        return LP_OK;
    }
    if (batch > INT32_MAX)
        return lp_err(LP_STATUS_UNSUPPORTED, "cuda %s: batch of %lld GEMMs above cuBLASLt's int32 count", op,
                      (long long)batch);
    const size_t es = ab == CUDA_R_16BF ? 2 : 4;
    plan_key k;
    memset(&k, 0, sizeof k); /* padding too: keys compare with memcmp */
    k.ab = ab, k.compute = compute, k.ta = trans_a, k.tb = trans_b;
    k.M = M, k.N = N, k.K = K, k.lda = lda, k.ldb = ldb, k.ldc = ldc;
    k.batch = batch > 1 ? batch : 1;
    if (batch > 1)
        k.sa = sa, k.sb = sb, k.sc = sc;
    /* every batch element's operand is as aligned as both its base and its stride are */
    k.al_a = align_of((const void *)((uintptr_t)B | (uintptr_t)(k.sb * es)));
    k.al_b = align_of((const void *)((uintptr_t)A | (uintptr_t)(k.sa * es)));
    k.al_c = align_of((const void *)((uintptr_t)C | (uintptr_t)(k.sc * 4)));
    k.al_bias = bias ? align_of(bias) : 0;
    pthread_mutex_lock(&plans_mu);
    plan *p = NULL, *victim = &plans[0];
    for (int i = 0; i < PLANS && !p; i++) {
        if (plans[i].last && !memcmp(&plans[i].key, &k, sizeof k))
            p = &plans[i];
        else if (plans[i].last < victim->last)
            victim = &plans[i];
    }
    const char *call = "";
    cublasStatus_t s = CUBLAS_STATUS_SUCCESS;
    if (!p) {
        plan_clear(victim);
        s = plan_make(victim, &k, bias, x, &call);
        p = s == CUBLAS_STATUS_SUCCESS ? victim : NULL;
    }
    if (p) {
        p->last = ++plan_tick;
        call = "cublasLtMatmul";
        if (bias) /* the plan is shared by every bias of this shape and alignment */
            s = lp_lt.MatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias);
        if (s == CUBLAS_STATUS_SUCCESS)
            s = lp_lt.Matmul(x->lt, p->desc, &alpha, B, p->la, A, p->lb, &beta, C, p->lc, C, p->lc, &p->algo,
                             x->workspace, x->workspace_bytes, x->stream);
    }
    pthread_mutex_unlock(&plans_mu);
    if (s != CUBLAS_STATUS_SUCCESS)
        return pend ? lp_cu_fail_blas(op, call, s)
                    : lp_err(LP_STATUS_UNSUPPORTED, "cuda %s: %s: %s (%d)", op, call, lp_cublaslt_status(s), (int)s);
    return LP_OK;
}

void lp_cu_sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                 int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc)
{
    lp_cuda_ctx *x = lp_cu_ctx();
    cublasComputeType_t compute = x && x->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    (void)lt_gemm("sgemm", CUDA_R_32F, compute, trans_a, trans_b, M, N, K, alpha, A, lda, 0, B, ldb, 0, beta,
                  C, ldc, 0, 1, NULL, true);
}

lp_status lp_cu_sgemm_batched(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                              int64_t lda, int64_t sa, const float *B, int64_t ldb, int64_t sb, float beta, float *C,
                              int64_t ldc, int64_t sc, int64_t batch, bool tf32)
{
    return lt_gemm("sgemm (batched)", CUDA_R_32F, tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F,
                   trans_a, trans_b, M, N, K, alpha, A, lda, sa, B, ldb, sb, beta, C, ldc, sc, batch, NULL,
                   false);
}

lp_status lp_cu_gemm_bf16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const uint16_t *A,
                          int64_t lda, const uint16_t *B, int64_t ldb, float beta, float *C, int64_t ldc)
{
    return lt_gemm("gemm_bf16", CUDA_R_16BF, CUBLAS_COMPUTE_32F, trans_a, trans_b, M, N, K, alpha, A, lda, 0,
                   B, ldb, 0, beta, C, ldc, 0, 1, NULL, true);
}

/* Set when an epilogue plan failed once (no algorithm, or a library without the epilogue for
 * these types): the bias is added by its own kernel from then on, without asking again. A
 * bias less than 16-byte aligned (a view) always takes that way: cuBLASLt's epilogue kernels
 * have been seen to need it. */
static atomic_bool epilogue_off;

/* out (N,OC) = a (N,C) @ w^T + bias, a and w f32 (f32 or TF32 compute as the context says)
 * or bf16: the bias in the GEMM's epilogue, or, where cuBLASLt offers none, broadcast first
 * and accumulated into with beta 1. */
static lp_status linear(const char *op, cudaDataType_t ab, cublasComputeType_t compute, float *out,
                        const void *a, const void *w, const float *bias, int64_t N, int64_t C, int64_t OC)
{
    if (bias && C > 0 && align_of(bias) >= 16 && !atomic_load_explicit(&epilogue_off, memory_order_relaxed)) {
        if (lt_gemm(op, ab, compute, false, true, N, OC, C, 1.0f, a, C, 0, w, C, 0, 0.0f, out, OC, 0, 1, bias,
                    false) == LP_OK)
            return LP_OK;
        atomic_store(&epilogue_off, true);
    }
    if (bias)
        lp_cu_bias_broadcast(out, bias, N, OC);
    return lt_gemm(op, ab, compute, false, true, N, OC, C, 1.0f, a, C, 0, w, C, 0, bias ? 1.0f : 0.0f, out,
                   OC, 0, 1, NULL, true);
}

void lp_cu_linear_forward(float *out, const float *inp, const float *weight, const float *bias, int64_t N,
                          int64_t C, int64_t OC)
{
    lp_cuda_ctx *x = lp_cu_ctx();
    (void)linear("linear_forward", CUDA_R_32F,
                 x && x->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, out, inp, weight, bias, N,
                 C, OC);
}

lp_status lp_cu_linear_bf16(float *out, const uint16_t *a, const uint16_t *w, const float *bias, int64_t N,
                            int64_t C, int64_t OC)
{
    return linear("gemm_bf16", CUDA_R_16BF, CUBLAS_COMPUTE_32F, out, a, w, bias, N, C, OC);
}
