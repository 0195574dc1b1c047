/* `loupe peak --device cuda`: cuBLASLt GEMM throughput (bf16 with f32 accumulation, TF32,
 * f32) and device-to-device copy bandwidth, timed with CUDA events on the backend's stream. */
#include <stdio.h>
#include <string.h>

#include "cuda_kernels.h"

#define WARMUP 2

/* mean ms of reps runs of one GEMM kind (0 bf16, 1 tf32, 2 f32) after WARMUP */
static lp_status time_gemm(const lp_backend *be, int kind, int64_t n, int reps, const void *A, const void *B, float *C,
                           double *ms)
{
    for (int r = 0; r < WARMUP + reps; r++) {
        if (r == WARMUP) {
            lp_status st = lp_cuda_timer_start(be);
            if (st)
                return st;
        }
        if (kind == 0) {
            lp_status st = lp_cu_gemm_bf16(false, true, n, n, n, 1.0f, A, n, B, n, 0.0f, C, n);
            if (st)
                return st;
        } else {
            lp_cuda_set_tf32(be, kind == 1);
            lp_cu_sgemm(false, true, n, n, n, 1.0f, A, n, B, n, 0.0f, C, n);
            lp_cuda_set_tf32(be, false);
        }
    }
    lp_status st = lp_cuda_timer_stop(be, ms);
    if (st)
        return st;
    *ms /= reps;
    return be->sync(be->ctx); /* a failed sgemm launch shows here */
}

lp_status lp_cuda_peak_measure(lp_cuda_peak_result *out, int64_t n, int reps)
{
    memset(out, 0, sizeof *out);
    if (n < 256 || n > 16384 || reps < 1)
        return lp_err(LP_STATUS_INVALID_ARG, "cuda peak: size %lld outside 256..16384 or reps %d < 1", (long long)n,
                      reps);
    const lp_backend *be;
    lp_status st = lp_backend_cuda(&be);
    if (st)
        return st;
    const lp_cuda_device_info *d = lp_cuda_device_info_get(be);
    snprintf(out->device, sizeof out->device, "%s", d->name);
    out->cc_major = d->cc_major, out->cc_minor = d->cc_minor, out->sm_count = d->sm_count;
    out->sm_clock_mhz = d->sm_clock_khz / 1000;
    out->memory_gib = (double)d->total_mem / (1 << 30);
    out->driver_version = d->driver_version, out->runtime_version = d->runtime_version;
    out->gemm_n = n;
    size_t nn = (size_t)n * (size_t)n;
    void *a16 = be->alloc(be->ctx, nn * 2, "peak A bf16"), *b16 = be->alloc(be->ctx, nn * 2, "peak B bf16");
    float *a = be->alloc(be->ctx, nn * 4, "peak A"), *b = be->alloc(be->ctx, nn * 4, "peak B");
    float *c = be->alloc(be->ctx, nn * 4, "peak C");
    if (!a16 || !b16 || !a || !b || !c) {
        st = lp_err_wrap(LP_STATUS_NO_MEMORY, "cuda peak: buffers for n = %lld", (long long)n);
        goto done;
    }
    lp_cu_fill_uniform(a16, (int64_t)nn, 1, true);
    lp_cu_fill_uniform(b16, (int64_t)nn, 2, true);
    lp_cu_fill_uniform(a, (int64_t)nn, 3, false);
    lp_cu_fill_uniform(b, (int64_t)nn, 4, false);
    if ((st = be->sync(be->ctx)) != LP_OK)
        goto done;
    double flop = 2.0 * (double)n * (double)n * (double)n, ms;
    if ((st = time_gemm(be, 0, n, reps, a16, b16, c, &ms)) != LP_OK)
        goto done;
    out->bf16_tflops = flop / (ms * 1e-3) / 1e12;
    if ((st = time_gemm(be, 1, n, reps, a, b, c, &ms)) != LP_OK)
        goto done;
    out->tf32_tflops = flop / (ms * 1e-3) / 1e12;
    if ((st = time_gemm(be, 2, n, reps, a, b, c, &ms)) != LP_OK)
        goto done;
    out->f32_tflops = flop / (ms * 1e-3) / 1e12;
    /* copy: A -> C (n^2 floats) reps times after a warm-up */
    out->copy_bytes = (int64_t)(nn * 4);
    if ((st = be->copy(be->ctx, c, a, nn * 4)) != LP_OK || (st = lp_cuda_timer_start(be)) != LP_OK)
        goto done;
    for (int r = 0; r < reps; r++)
        if ((st = be->copy(be->ctx, c, a, nn * 4)) != LP_OK)
            goto done;
    if ((st = lp_cuda_timer_stop(be, &ms)) != LP_OK)
        goto done;
    out->copy_gbs = 2.0 * (double)out->copy_bytes * reps / (ms * 1e-3) / 1e9;
done:
    be->free(be->ctx, a16);
    be->free(be->ctx, b16);
    be->free(be->ctx, a);
    be->free(be->ctx, b);
    be->free(be->ctx, c);
    lp_cuda_empty_cache(be); /* the probe's gigabytes back to the device */
    return st;
}
