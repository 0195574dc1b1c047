/* The CUDA emulator's runtime (cuda_runtime.h, cuda_runtime_api.h): blocks one after another,
 * each block's threads as fibers on one OS thread. A fiber runs until it reaches a barrier
 * (__syncthreads, or a warp barrier inside a shuffle) or exits; when every fiber waits, the
 * scheduler releases whole warps waiting at a warp barrier first, else the block barrier when
 * every live thread waits there, else reports the deadlock. Fibers start with makecontext and
 * then switch with _setjmp/_longjmp (no signal-mask system call per switch). */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <ucontext.h>

#include <map>
#include <vector>

#include "cuda_runtime.h"

dim3 threadIdx, blockIdx, blockDim, gridDim;

namespace
{

enum { RUN, WAIT_BLOCK, WAIT_WARP, DONE };
const size_t STACK = 256 * 1024;

struct fiber {
    ucontext_t uc;
    jmp_buf jb;
    bool started;
    int state;
    dim3 tid;
};

std::vector<fiber> F;
char *stacks[1024];          /* fiber stacks, made once and kept (a plain array: never destroyed) */
std::vector<uint64_t> slots; /* 32 per warp */
std::vector<float> smem;
jmp_buf sched_jb;
ucontext_t sched_uc;
int cur;
const std::function<void()> *body;
cudaError_t last_error = cudaSuccess;
std::map<const void *, int> smem_attr;
/* LP_CUDA_EMU_REVERSE=1 runs each phase's threads in reverse order: a result that changes
 * with it reads shared or global memory another thread writes in the same phase (a race) */
const bool reverse = getenv("LP_CUDA_EMU_REVERSE") && *getenv("LP_CUDA_EMU_REVERSE") == '1';

[[noreturn]] void fatal(const char *what)
{
    fprintf(stderr, "cuda emulator: %s (block %u,%u,%u thread %u,%u,%u)\n", what, blockIdx.x, blockIdx.y,
            blockIdx.z, threadIdx.x, threadIdx.y, threadIdx.z);
    abort();
}

void yield(int state)
{
    F[cur].state = state;
    if (!_setjmp(F[cur].jb))
        _longjmp(sched_jb, 1);
}

void entry(void)
{
    (*body)();
    F[cur].state = DONE;
    _longjmp(sched_jb, 1);
}

/* runs fiber i until it waits or exits; sched_jb lives in this frame meanwhile */
__attribute__((noinline)) void resume(int i)
{
    cur = i;
    threadIdx = F[i].tid;
    if (_setjmp(sched_jb))
        return;
    if (!F[i].started) {
        F[i].started = true;
        getcontext(&F[i].uc);
        F[i].uc.uc_stack.ss_sp = stacks[i];
        F[i].uc.uc_stack.ss_size = STACK;
        F[i].uc.uc_link = NULL;
        makecontext(&F[i].uc, entry, 0);
        swapcontext(&sched_uc, &F[i].uc);
    } else {
        _longjmp(F[i].jb, 1);
    }
}

void run_block(int nt)
{
    F.assign((size_t)nt, fiber());
    for (int i = 0; i < nt; i++)
        if (!stacks[i] && !(stacks[i] = (char *)malloc(STACK)))
            fatal("no memory for fiber stacks");
    for (int i = 0; i < nt; i++) {
        F[i].tid = dim3(i % blockDim.x, (i / blockDim.x) % blockDim.y, i / (blockDim.x * blockDim.y));
        F[i].state = RUN;
        F[i].started = false;
    }
    const int nw = (nt + 31) / 32;
    slots.assign((size_t)nw * 32, 0);
    for (;;) {
        for (int k = 0; k < nt; k++) {
            const int i = reverse ? nt - 1 - k : k;
            if (F[i].state != RUN)
                continue;
            resume(i);
        }
        /* every fiber waits or is done */
        bool released = false, all_done = true, all_block = true;
        for (int w = 0; w < nw; w++) {
            int n_warp = 0, n_block = 0, live = 0;
            for (int i = w * 32; i < nt && i < w * 32 + 32; i++) {
                if (F[i].state == DONE)
                    continue;
                live++;
                n_warp += F[i].state == WAIT_WARP;
                n_block += F[i].state == WAIT_BLOCK;
            }
            if (n_warp && n_block) {
                threadIdx = F[w * 32].tid;
                fatal("a warp's lanes wait at different barriers (divergent shuffle or __syncthreads)");
            }
            if (live)
                all_done = false;
            if (n_warp) {
                all_block = false;
                for (int i = w * 32; i < nt && i < w * 32 + 32; i++)
                    if (F[i].state == WAIT_WARP)
                        F[i].state = RUN;
                released = true;
            }
        }
        if (all_done)
            return;
        if (!released && all_block) {
            for (int i = 0; i < nt; i++)
                if (F[i].state == WAIT_BLOCK)
                    F[i].state = RUN;
            released = true;
        }
        if (!released)
            fatal("deadlock");
    }
}

} // namespace

void __syncthreads(void)
{
    yield(WAIT_BLOCK);
}
void __trap(void)
{
    fatal("__trap (a device-side check failed)");
}
void lp_emu_sync_warp(void)
{
    yield(WAIT_WARP);
}
int lp_emu_lane(void)
{
    return cur & 31;
}
uint64_t *lp_emu_warp_slots(void)
{
    return slots.data() + (cur & ~31);
}
void lp_emu_check_lane(int lane)
{
    int i = (cur & ~31) + lane;
    if (i >= (int)F.size() || F[i].state == DONE)
        fatal("shuffle reads a lane that has exited");
}
void *lp_emu_dyn_smem(void)
{
    return smem.data();
}

cudaError_t lp_emu_set_smem_attr(const void *key, int bytes)
{
    if (bytes < 0 || bytes > 227 * 1024)
        return last_error = cudaErrorInvalidValue;
    smem_attr[key] = bytes;
    return cudaSuccess;
}

void lp_emu_run(dim3 g, dim3 b, size_t smem_bytes, const void *key, const std::function<void()> &fn)
{
    const unsigned long long nt = (unsigned long long)b.x * b.y * b.z;
    size_t limit = 48 * 1024;
    auto it = smem_attr.find(key);
    if (it != smem_attr.end() && (size_t)it->second > limit)
        limit = (size_t)it->second;
    if (nt == 0 || nt > 1024 || b.z > 64 || g.x == 0 || g.y == 0 || g.z == 0 || g.x > 2147483647u ||
        g.y > 65535 || g.z > 65535 || smem_bytes > limit) {
        fprintf(stderr, "cuda emulator: launch refused: grid %u,%u,%u block %u,%u,%u smem %zu (limit %zu)\n",
                g.x, g.y, g.z, b.x, b.y, b.z, smem_bytes, limit);
        last_error = cudaErrorInvalidConfiguration;
        return;
    }
    body = &fn;
    blockDim = b;
    gridDim = g;
    for (unsigned z = 0; z < g.z; z++)
        for (unsigned y = 0; y < g.y; y++)
            for (unsigned x = 0; x < g.x; x++) {
                blockIdx = dim3(x, y, z);
                smem.assign(smem_bytes / sizeof(float) + 1, NAN); /* stale shared memory reads show */
                run_block((int)nt);
            }
}

extern "C" {

cudaError_t cudaGetDeviceCount(int *n)
{
    *n = 1;
    return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int dev)
{
    (void)dev;
    memset(p, 0, sizeof *p);
    strcpy(p->name, "CPU emulator (LP_CUDA_EMU)");
    p->major = 9;
    p->multiProcessorCount = 1;
    return cudaSuccess;
}

cudaError_t cudaGetLastError(void)
{
    cudaError_t e = last_error;
    last_error = cudaSuccess;
    return e;
}

const char *cudaGetErrorString(cudaError_t e)
{
    switch (e) {
    case cudaSuccess:
        return "no error";
    case cudaErrorInvalidValue:
        return "invalid argument";
    case cudaErrorMemoryAllocation:
        return "out of memory";
    case cudaErrorInvalidConfiguration:
        return "invalid configuration argument";
    }
    return "unknown error";
}

cudaError_t cudaMalloc(void **p, size_t bytes)
{
    *p = malloc(bytes ? bytes : 1);
    return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
cudaError_t cudaMallocAsync(void **p, size_t bytes, cudaStream_t)
{
    return cudaMalloc(p, bytes);
}
cudaError_t cudaFree(void *p)
{
    free(p);
    return cudaSuccess;
}
cudaError_t cudaFreeAsync(void *p, cudaStream_t)
{
    return cudaFree(p);
}
cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind)
{
    memmove(dst, src, bytes);
    return cudaSuccess;
}
cudaError_t cudaMemset(void *p, int value, size_t bytes)
{
    memset(p, value, bytes);
    return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind, cudaStream_t)
{
    return cudaMemcpy(dst, src, bytes, kind);
}
cudaError_t cudaMemsetAsync(void *p, int value, size_t bytes, cudaStream_t)
{
    return cudaMemset(p, value, bytes);
}
cudaError_t cudaStreamSynchronize(cudaStream_t)
{
    return cudaSuccess;
}

struct lp_emu_event {
    double t;
};
cudaError_t cudaEventCreate(cudaEvent_t *e)
{
    *e = (cudaEvent_t)calloc(1, sizeof(struct lp_emu_event));
    return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    e->t = (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
    return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t)
{
    return cudaSuccess;
}
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b)
{
    *ms = (float)(b->t - a->t);
    return cudaSuccess;
}
}
