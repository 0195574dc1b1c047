/* cuBLASLt, loaded when the CUDA context is made (dlopen) instead of linked: the library
 * is half a gigabyte, and linking it made every loupe command, CPU-only ones included,
 * start 0.12 s slower. Calls go through lp_lt, whose members have cuBLASLt's own types. */
#ifndef LP_KERNELS_CUDA_BLASLT_H
#define LP_KERNELS_CUDA_BLASLT_H

#include <cublasLt.h>

#include "loupe/base.h"

typedef struct lp_cublaslt_api {
    __typeof__(cublasLtCreate) *Create;
    __typeof__(cublasLtGetStatusString) *GetStatusString;
    __typeof__(cublasLtMatmulDescCreate) *MatmulDescCreate;
    __typeof__(cublasLtMatmulDescDestroy) *MatmulDescDestroy;
    __typeof__(cublasLtMatmulDescSetAttribute) *MatmulDescSetAttribute;
    __typeof__(cublasLtMatrixLayoutCreate) *MatrixLayoutCreate;
    __typeof__(cublasLtMatrixLayoutDestroy) *MatrixLayoutDestroy;
    __typeof__(cublasLtMatrixLayoutSetAttribute) *MatrixLayoutSetAttribute;
    __typeof__(cublasLtMatmulPreferenceCreate) *MatmulPreferenceCreate;
    __typeof__(cublasLtMatmulPreferenceDestroy) *MatmulPreferenceDestroy;
    __typeof__(cublasLtMatmulPreferenceSetAttribute) *MatmulPreferenceSetAttribute;
    __typeof__(cublasLtMatmulAlgoGetHeuristic) *MatmulAlgoGetHeuristic;
    __typeof__(cublasLtMatmul) *Matmul;
} lp_cublaslt_api;

extern lp_cublaslt_api lp_lt;

/* Loads libcublasLt.so.<major> (LD_LIBRARY_PATH and the loader's paths, then the toolkit's
 * folder this build was configured with). Errors: LP_STATUS_UNSUPPORTED naming the library
 * and dlerror's reason. */
lp_status lp_cublaslt_load(void);
/* cuBLAS's name for s ("CUBLAS_STATUS_NOT_SUPPORTED"), or "cuBLAS status <n>" before loading. */
const char *lp_cublaslt_status(cublasStatus_t s);

#endif
