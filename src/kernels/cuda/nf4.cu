// Dequantization of a quantized weight held on the device (lp_cuda_qweight_upload): NF4
// (bitsandbytes layout, with or without double quantization, and the bnb_cpu_rows scale
// lookup) and int8. The same f32 operations as the CPU reference, each rounded on its own
// (__fmul_rn / __fadd_rn: never an FMA), so the result equals it bit for bit.
#include <pthread.h>

#include "cuda_kernels.h"

static __constant__ float c_nf4[16];
static __constant__ float c_dyn[256];
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;
static cudaError_t tables_err;

// Once per process. cudaMemcpyToSymbol from pageable memory may return before the copy has
// landed, and the context's stream does not wait for the legacy stream: wait here.
static void tables_upload(void)
{
    tables_err = cudaMemcpyToSymbol(c_nf4, lp_nf4_code, sizeof c_nf4);
    if (tables_err == cudaSuccess)
        tables_err = cudaMemcpyToSymbol(c_dyn, lp_nf4_dynamic_map, sizeof c_dyn);
    if (tables_err == cudaSuccess)
        tables_err = cudaDeviceSynchronize();
}

typedef struct nf4_args {
    const uint8_t *codes;
    const float *absmax;
    const uint8_t *absmax_q;
    const float *nested;
    float offset;
    int64_t cols;
    bool dq, cpu_rows; // double quant; bitsandbytes' per-row CPU lookup (lp_qweight.bnb_cpu_rows)
} nf4_args;

static __global__ void nf4_k(float *out, nf4_args a, int64_t start, int64_t n)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t e = start + i;
        int64_t b = a.cpu_rows ? (e / a.cols) * (a.cols / LP_NF4_BLOCK) + (e % a.cols) / LP_NF4_BLOCK
                               : e / LP_NF4_BLOCK;
        float sc = a.dq ? __fadd_rn(__fmul_rn(c_dyn[a.absmax_q[b]], a.nested[b / LP_NF4_NESTED_BLOCK]), a.offset)
                        : a.absmax[b];
        uint8_t byte = a.codes[e >> 1];
        out[i] = __fmul_rn(c_nf4[(e & 1) ? byte & 15 : byte >> 4], sc);
    }
}

static __global__ void int8_k(float *out, const int8_t *q, const float *scale, int64_t cols, int64_t start, int64_t n)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t e = start + i;
        out[i] = __fmul_rn((float)q[e], scale[e / cols]);
    }
}

extern "C" void lp_cu_qweight_dequantize(float *out, const lp_qweight *w, int64_t start, int64_t n)
{
    if (n == 0)
        return;
    if (w->dtype == LP_DTYPE_INT8) {
        int8_k<<<lp_cu_blocks(n, 256), 256, 0, lp_cu_stream()>>>(out, w->q, w->scale, w->cols, start, n);
        lp_cu_check("qweight_dequantize");
        return;
    }
    if (w->dtype != LP_DTYPE_NF4) {
        lp_cu_pend(lp_err(LP_STATUS_UNSUPPORTED, "cuda qweight_dequantize: %s weights are not supported on the GPU "
                                                 "(NF4 and int8 are)", lp_dtype_name(w->dtype)));
        return;
    }
    pthread_once(&tables_once, tables_upload);
    if (tables_err != cudaSuccess) {
        lp_cu_fail("qweight_dequantize", "cudaMemcpyToSymbol (NF4 tables)", tables_err);
        return;
    }
    nf4_args a = {w->codes, w->absmax, w->absmax_q, w->nested_absmax, w->offset, w->cols, w->double_quant, false};
    a.cpu_rows = w->bnb_cpu_rows && w->cols % 16 == 0 && w->cols % LP_NF4_BLOCK != 0;
    nf4_k<<<lp_cu_blocks(n, 256), 256, 0, lp_cu_stream()>>>(out, a, start, n);
    lp_cu_check("qweight_dequantize");
}
