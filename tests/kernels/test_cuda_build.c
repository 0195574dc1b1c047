/* What a CUDA build can check without a GPU (CUDA builds only): cuBLASLt loads at run time
 * with every entry point the backend calls (cuda_blaslt.c's dlopen), lp_backend_cuda fails
 * with the documented message when no GPU is present (and succeeds when one is), and a
 * launcher called without a context reports instead of crashing. */
#include <stdio.h>
#include <string.h>

#include "cuda/cuda_blaslt.h"
#include "cuda/cuda_kernels.h"

int main(void)
{
    int fail = 0;
    if (lp_cublaslt_load() != LP_OK) {
        printf("FAIL: %s\n", lp_err_msg());
        fail = 1;
    } else {
        printf("cuBLASLt loaded: %s\n", lp_cublaslt_status(CUBLAS_STATUS_NOT_SUPPORTED));
    }
    int n = -1;
    cudaError_t e = cudaGetDeviceCount(&n);
    const lp_backend *be = NULL;
    lp_status st = lp_backend_cuda(&be);
    if (e != cudaSuccess || n == 0) {
        printf("no GPU: %s\n", lp_err_msg());
        const char *want = "no CUDA GPU is present (cudaGetDeviceCount: ";
        if (st != LP_STATUS_UNSUPPORTED || be || !strstr(lp_err_msg(), want)) {
            printf("FAIL: expected the no-GPU message\n");
            fail = 1;
        }
        lp_cu_sgemm(false, false, 2, 2, 2, 1.0f, NULL, 2, NULL, 2, 0.0f, NULL, 2); /* no context */
        if (!strstr(lp_err_msg(), "no CUDA context")) {
            printf("FAIL: a launch without a context should say so, said: %s\n", lp_err_msg());
            fail = 1;
        }
    } else if (st != LP_OK || !be || strcmp(be->name, "cuda")) {
        printf("FAIL: %d GPU(s) but lp_backend_cuda: %s\n", n, lp_err_msg());
        fail = 1;
    } else {
        printf("GPU present: %s (%s)\n", lp_cuda_device_info_get(be)->name, be->level);
    }
    printf("%s\n", fail ? "FAILED" : "passed");
    return fail;
}
