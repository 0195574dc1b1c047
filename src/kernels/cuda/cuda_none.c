/* The CUDA entry points of a build without CUDA (LP_CUDA=OFF, no nvcc, or the sanitizer
 * builds): every one says so, and the GPU tests skip on lp_backend_cuda's message. */
#include <string.h>

#include "../backend.h"
#include "cuda_alloc.h"

#define NO_CUDA "this loupe was built without CUDA (configure with the CUDA toolkit installed, LP_CUDA=AUTO or ON)"

lp_status lp_backend_cuda(const lp_backend **out)
{
    *out = NULL;
    return lp_err(LP_STATUS_UNSUPPORTED, NO_CUDA);
}

const lp_cuda_device_info *lp_cuda_device_info_get(const lp_backend *b)
{
    (void)b;
    return NULL;
}

void lp_cuda_set_tf32(const lp_backend *b, bool on)
{
    (void)b, (void)on;
}

void lp_cuda_set_attention(const lp_backend *b, lp_cuda_attn_mode mode)
{
    (void)b, (void)mode;
}

bool lp_cuda_attention_uses_gemm(const lp_backend *b, const lp_attn_geom *g)
{
    (void)b, (void)g;
    return false;
}

lp_status lp_cuda_gemm_bf16(const lp_backend *b, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                            float alpha, const uint16_t *A, int64_t lda, const uint16_t *B, int64_t ldb, float beta,
                            float *C, int64_t ldc)
{
    (void)b, (void)trans_a, (void)trans_b, (void)M, (void)N, (void)K, (void)alpha, (void)A, (void)lda, (void)B;
    (void)ldb, (void)beta, (void)C, (void)ldc;
    return lp_err(LP_STATUS_UNSUPPORTED, NO_CUDA);
}

lp_status lp_cuda_timer_start(const lp_backend *b)
{
    (void)b;
    return lp_err(LP_STATUS_UNSUPPORTED, NO_CUDA);
}

lp_status lp_cuda_timer_stop(const lp_backend *b, double *ms)
{
    (void)b;
    *ms = 0.0;
    return lp_err(LP_STATUS_UNSUPPORTED, NO_CUDA);
}

void lp_cuda_alloc_stats(const lp_backend *b, lp_cu_alloc_stats *out)
{
    (void)b;
    memset(out, 0, sizeof *out);
}

void lp_cuda_empty_cache(const lp_backend *b)
{
    (void)b;
}

lp_status lp_cuda_peak_measure(lp_cuda_peak_result *out, int64_t n, int reps)
{
    (void)n, (void)reps;
    memset(out, 0, sizeof *out);
    return lp_err(LP_STATUS_UNSUPPORTED, NO_CUDA);
}
