/* CPU emulator of the slice of the CUDA runtime API the NN kernels and their test use
 * (LP_CUDA_EMU builds only, so that the kernels run and are checked on a machine without a
 * GPU). "Device" memory is host memory; kernels run in cuda_emu.cpp. C-compatible. */
#ifndef LP_CUDA_EMU_RUNTIME_API_H
#define LP_CUDA_EMU_RUNTIME_API_H

#include <stddef.h>

/* renamed, so that they never clash with the CUDA runtime a CUDA build also links */
#define cudaGetDeviceCount lp_emu_cudaGetDeviceCount
#define cudaGetDeviceProperties lp_emu_cudaGetDeviceProperties
#define cudaGetLastError lp_emu_cudaGetLastError
#define cudaGetErrorString lp_emu_cudaGetErrorString
#define cudaMalloc lp_emu_cudaMalloc
#define cudaMallocAsync lp_emu_cudaMallocAsync
#define cudaFree lp_emu_cudaFree
#define cudaFreeAsync lp_emu_cudaFreeAsync
#define cudaMemcpy lp_emu_cudaMemcpy
#define cudaMemset lp_emu_cudaMemset
#define cudaMemcpyAsync lp_emu_cudaMemcpyAsync
#define cudaMemsetAsync lp_emu_cudaMemsetAsync
#define cudaStreamSynchronize lp_emu_cudaStreamSynchronize
#define cudaEventCreate lp_emu_cudaEventCreate
#define cudaEventRecord lp_emu_cudaEventRecord
#define cudaEventSynchronize lp_emu_cudaEventSynchronize
#define cudaEventElapsedTime lp_emu_cudaEventElapsedTime

#ifdef __cplusplus
extern "C" {
#endif

typedef enum cudaError {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInvalidConfiguration = 9,
} cudaError_t;
typedef struct lp_emu_stream *cudaStream_t;
typedef struct lp_emu_event *cudaEvent_t;
enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3,
    cudaMemcpyDefault = 4
};
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
struct cudaDeviceProp {
    char name[256];
    int major, minor, multiProcessorCount;
};

cudaError_t cudaGetDeviceCount(int *n);
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int dev);
cudaError_t cudaGetLastError(void);
const char *cudaGetErrorString(cudaError_t e);
cudaError_t cudaMalloc(void **p, size_t bytes);
cudaError_t cudaMallocAsync(void **p, size_t bytes, cudaStream_t s);
cudaError_t cudaFree(void *p);
cudaError_t cudaFreeAsync(void *p, cudaStream_t s);
cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind);
cudaError_t cudaMemset(void *p, int value, size_t bytes);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind,
                            cudaStream_t s);
cudaError_t cudaMemsetAsync(void *p, int value, size_t bytes, cudaStream_t s);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaEventCreate(cudaEvent_t *e);
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s);
cudaError_t cudaEventSynchronize(cudaEvent_t e);
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b);

#ifdef __cplusplus
}
#endif
#endif
