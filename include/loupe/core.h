/* loupe core: dtypes, tensors, the tagged allocator (and a per-step arena), the one
 * thread pool, and a counter-based RNG. Everything above (kernels, modules, trainer)
 * allocates through lp_alloc so memory is accounted by category in the profiler.
 *
 *   lp_threads_init();                                   // LP_THREADS env or all cores
 *   lp_tensor w;
 *   if (lp_tensor_alloc(&w, LP_DTYPE_F32, 2, (int64_t[]){768, 3072},
 *                       LP_MEM_CATEGORY_PARAMETER, "ffn.lin1.weight") != LP_OK)
 *       return lp_err_wrap(LP_STATUS_NO_MEMORY, "model init");
 *   lp_rng rng;
 *   lp_rng_init(&rng, 42, LP_RNG_STREAM_INIT);
 *   lp_rng_normal(&rng, w.data, lp_tensor_numel(&w), 0.0f, 0.02f);
 *   lp_tensor_free(&w);
 *
 *   lp_arena act;                                         // activations for one step
 *   lp_arena_init(&act, 64u << 20, LP_MEM_CATEGORY_ACTIVATION, "step activations");
 *   float *h = lp_arena_alloc(&act, B * T * C * sizeof(float));   // NULL + lp_err if full
 *   lp_arena_reset(&act);                                 // next step reuses the block
 *   lp_arena_free(&act);
 */
#ifndef LOUPE_CORE_H
#define LOUPE_CORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "loupe/base.h"
#include "loupe/prof.h" /* lp_mem_category, lp_prof_mem_alloc/free */

#ifdef __cplusplus
extern "C" {
#endif

/* ---- dtypes ------------------------------------------------------------------------ */

typedef enum lp_dtype {
    LP_DTYPE_F32 = 0,
    LP_DTYPE_BF16,
    LP_DTYPE_F16,
    LP_DTYPE_INT8,
    LP_DTYPE_NF4, /* 4-bit NormalFloat codes, two per byte (low nibble first) */
    LP_DTYPE_I32, /* token ids, labels, masks */
    LP_DTYPE_GGML, /* a GGML block format (lp_qweight.gtype says which); no fixed bits per element */
    LP_DTYPE__COUNT
} lp_dtype;

/* Short lowercase name ("f32", "bf16", ...); "?" for an unknown value. */
const char *lp_dtype_name(lp_dtype dt);
/* Bits per element (4 for NF4, 32 for F32); 0 for an unknown value. */
int lp_dtype_bits(lp_dtype dt);
/* Bytes for n elements, rounded up to whole bytes (NF4 packs two per byte). */
size_t lp_dtype_nbytes(lp_dtype dt, int64_t n);
/* Parses "f32"/"float32", "bf16"/"bfloat16", "f16"/"float16", "int8", "nf4", "i32". */
LP_WARN_UNUSED lp_status lp_dtype_parse(const char *name, lp_dtype *out);

/* Scalar conversions. f32 -> bf16/f16 round to nearest even; NaN stays NaN (quiet),
 * overflow in f16 becomes infinity, as in PyTorch's .to(dtype). */
uint16_t lp_f32_to_bf16(float x);
float lp_bf16_to_f32(uint16_t x);
uint16_t lp_f32_to_f16(float x);
float lp_f16_to_f32(uint16_t x);
/* Bulk forms over n elements (dst and src must not overlap). */
void lp_f32_to_bf16_n(uint16_t *dst, const float *src, int64_t n);
void lp_bf16_to_f32_n(float *dst, const uint16_t *src, int64_t n);
void lp_f32_to_f16_n(uint16_t *dst, const float *src, int64_t n);
void lp_f16_to_f32_n(float *dst, const uint16_t *src, int64_t n);

/* ---- allocator ------------------------------------------------------------------------ */

#define LP_ALIGN 64

/* Allocates bytes (0 is allowed and gives a valid unique pointer), 64-byte aligned and
 * zero-filled, tagged with a category and a name (a string that must outlive the
 * buffer: a literal or a module-owned name). Reports to the profiler. Returns NULL and
 * sets lp_err (LP_STATUS_NO_MEMORY) on failure. Release with lp_free. */
void *lp_alloc(size_t bytes, lp_mem_category cat, const char *name);
/* Releases a buffer from lp_alloc (NULL is a no-op) and reports it to the profiler. */
void lp_free(void *p);
/* Bytes, category and name lp_alloc recorded for a live buffer. */
size_t lp_alloc_size(const void *p);
lp_mem_category lp_alloc_category(const void *p);
const char *lp_alloc_name(const void *p);

/* Live and peak bytes per category as seen by this allocator alone (the profiler's
 * lp_prof_mem_stats counts every reporter and keeps the timeline; these let tests check
 * that lp_alloc/lp_free balance). */
typedef struct lp_alloc_stats {
    uint64_t live[LP_MEM_CATEGORY__COUNT];
    uint64_t peak[LP_MEM_CATEGORY__COUNT];
    uint64_t live_total, peak_total;
    uint64_t n_allocs, n_frees;
} lp_alloc_stats;
void lp_alloc_stats_get(lp_alloc_stats *out);
/* Resets the peaks to the current live values (e.g. at the start of a measured step). */
void lp_alloc_stats_reset_peak(void);

/* Debug torture mode: the nth lp_alloc from now (1 = the next one) fails as if the
 * system were out of memory; 0 turns it off. Also set at first use from the environment
 * variable LP_ALLOC_FAIL_AT. Returns the number of allocations made since the last call,
 * so a test can first count a path's allocations and then fail each in turn. */
uint64_t lp_alloc_fail_at(uint64_t nth);

/* Bump allocator over one lp_alloc block, for activations and temporaries of a step:
 * allocations are 64-byte aligned and freed together by lp_arena_reset. */
typedef struct lp_arena {
    uint8_t *base;      /* owned, from lp_alloc */
    size_t cap, used, high_water;
    lp_mem_category category;
    const char *name;
} lp_arena;
LP_WARN_UNUSED lp_status lp_arena_init(lp_arena *a, size_t cap, lp_mem_category cat, const char *name);
/* Next bytes of the arena (not zeroed); NULL and lp_err (LP_STATUS_NO_MEMORY, naming
 * the arena, its capacity and the request) when it does not fit. */
void *lp_arena_alloc(lp_arena *a, size_t bytes);
/* A mark to roll back to: temporaries inside one op are released with lp_arena_release. */
size_t lp_arena_mark(const lp_arena *a);
void lp_arena_release(lp_arena *a, size_t mark);
void lp_arena_reset(lp_arena *a);
void lp_arena_free(lp_arena *a);

/* ---- tensors ---------------------------------------------------------------------- */

#define LP_MAX_DIMS 4

/* A strided view of up to 4 dimensions. shape[0] is the outermost; strides are in
 * elements (for NF4, contiguous layout only). Owning tensors free their data in
 * lp_tensor_free; views never do. */
typedef struct lp_tensor {
    lp_dtype dtype;
    int32_t ndim;
    int64_t shape[LP_MAX_DIMS];
    int64_t stride[LP_MAX_DIMS];
    void *data;
    bool owns;
    lp_mem_category category;
    const char *name;
} lp_tensor;

/* Allocates a zeroed contiguous tensor through lp_alloc (owning). ndim in 1..4, every
 * dim >= 0. Errors: LP_STATUS_INVALID_ARG (bad rank/shape/dtype), LP_STATUS_NO_MEMORY. */
LP_WARN_UNUSED lp_status lp_tensor_alloc(lp_tensor *t, lp_dtype dt, int ndim, const int64_t *shape,
                                         lp_mem_category cat, const char *name);
/* A contiguous non-owning view of caller memory. */
LP_WARN_UNUSED lp_status lp_tensor_view(lp_tensor *t, lp_dtype dt, int ndim, const int64_t *shape, void *data);
/* Frees data if owning; leaves t zeroed. Safe on a zeroed tensor. */
void lp_tensor_free(lp_tensor *t);
int64_t lp_tensor_numel(const lp_tensor *t);
size_t lp_tensor_nbytes(const lp_tensor *t);
bool lp_tensor_is_contiguous(const lp_tensor *t);
/* Same dtype and shape. */
bool lp_tensor_same_shape(const lp_tensor *a, const lp_tensor *b);
/* Non-owning view with a new shape of the same element count (contiguous tensors only). */
LP_WARN_UNUSED lp_status lp_tensor_reshape(lp_tensor *out, const lp_tensor *t, int ndim, const int64_t *shape);
/* Non-owning view of rows [start, start+len) along dimension 0. */
LP_WARN_UNUSED lp_status lp_tensor_slice0(lp_tensor *out, const lp_tensor *t, int64_t start, int64_t len);
/* Sets every element (of a contiguous tensor) to zero. */
void lp_tensor_zero(lp_tensor *t);
/* "f32[16,128,768]" into buf (always terminated). */
const char *lp_tensor_describe(const lp_tensor *t, char *buf, size_t cap);

/* ---- threads ---------------------------------------------------------------------- */

/* One pool for everything: our OpenMP kernels and OpenBLAS (built for OpenMP on Debian,
 * libopenblas0-openmp) run on the same OpenMP runtime, so the two never spin against
 * each other. Inside our own parallel regions OpenBLAS sees omp_in_parallel() and runs
 * single-threaded, which is what our own partitioning wants.
 *
 * Sets the thread count from LP_THREADS, else OMP_NUM_THREADS, else all cores, and picks
 * the OpenBLAS kernels (see lp_threads_blas_core). Call it once at startup, before any
 * BLAS call. Returns the count in use. Safe to call more than once. */
int lp_threads_init(void);
/* Sets the count for OpenMP and OpenBLAS together (n >= 1; clamped to 1..1024). */
void lp_threads_set(int n);
int lp_threads_get(void);
/* "openmp", "pthreads", "sequential" or "unknown": how the linked OpenBLAS parallelises. */
const char *lp_threads_blas_mode(void);
/* The OpenBLAS kernel set in use ("Cooperlake", "SkylakeX", "Haswell", ...). lp_threads_init
 * makes it the set OpenBLAS detects for this CPU, even when OPENBLAS_CORETYPE names another
 * (LP_BLAS_CORETYPE unset or auto), and on a CPU this OpenBLAS does not know (it falls back
 * to SSE3 Prescott kernels) the set the CPU's features allow; LP_BLAS_CORETYPE=env keeps
 * OpenBLAS's own choice, LP_BLAS_CORETYPE=<name> forces a set. */
const char *lp_threads_blas_core(void);
/* A one-line notice when lp_threads_init overrode OPENBLAS_CORETYPE or OpenBLAS's fallback
 * for an unknown CPU, else NULL. */
const char *lp_threads_blas_note(void);
/* Holds OpenBLAS's kernels to an ISA level (0 x86-64-v2, 1 AVX2, 2 AVX-512, 3 AVX-512 BF16:
 * lp_isa's order) where they run wider, unless LP_BLAS_CORETYPE names a set. LP_ISA calls it,
 * so a run with a forced level computes, and is timed, as on a CPU of that level (its MFU
 * against that level's peak stays below 1). */
void lp_threads_blas_cap(int level);
/* The CPUs this process may use: its affinity mask (sched_getaffinity) and, when its
 * cgroup (or an ancestor) has a CPU quota, ceil(quota / period); the smaller wins. This is
 * the default thread count. */
int lp_threads_cores(void);

/* Bounded spin: libgomp's threads spin ~3 ms at barriers before sleeping, which on a busy
 * machine keeps cores from the thread the others wait for. Call first in main(): unless
 * OMP_WAIT_POLICY or GOMP_SPINCOUNT is set (or LP_SPIN=default), it sets
 * GOMP_SPINCOUNT=LP_THREADS_SPIN and re-executes the program so the OpenMP runtime, which
 * reads its environment when it loads, sees it. Returns when nothing was to be done or
 * exec failed. The value was chosen by bench/contention (bench/README.md). */
#define LP_THREADS_SPIN 1000
void lp_threads_bound_spin(char **argv);
/* The wait policy in effect, for reports: "GOMP_SPINCOUNT=1000 (loupe)",
 * "OMP_WAIT_POLICY=passive (user)" or "OpenMP runtime default". */
const char *lp_threads_spin_desc(void);

/* ---- contention --------------------------------------------------------------------- */

/* This process's CPU time in seconds (all threads; CLOCK_PROCESS_CPUTIME_ID). */
double lp_cpu_time_s(void);

/* A step is flagged when its threads got less than LP_CONTENTION_SHARE of wall x threads
 * in CPU time; LP_CONTENTION_RUN flagged steps in a row make the run contended. */
#define LP_CONTENTION_SHARE 0.75
#define LP_CONTENTION_RUN 3
typedef struct lp_contention {
    int32_t threads;
    int64_t steps, flagged; /* steps seen, steps under the share */
    int32_t run;            /* flagged steps in a row, up to now */
    double wall_s, cpu_s;   /* sums over the steps seen */
    bool noticed;           /* the run was judged contended */
} lp_contention;
void lp_contention_init(lp_contention *c, int32_t threads);
/* Adds one step (wall and process CPU seconds). Returns true once: at the step that makes
 * the run contended (the caller says so then, e.g. lp_contention_note on stderr). */
bool lp_contention_add(lp_contention *c, double wall_s, double cpu_s);
/* CPU time / (wall time x threads) over all steps seen; 0 before any. */
double lp_contention_cpu_share(const lp_contention *c);
/* The one-line notice, into buf (always terminated); returns buf. */
const char *lp_contention_note(const lp_contention *c, char *buf, size_t cap);

/* ---- RNG ---------------------------------------------------------------------------- */

/* Philox4x32-10, counter based: element i of a fill depends only on (seed, stream,
 * offset + i), so results are the same for any thread count and any partitioning.
 * Each fill advances the offset past the counters it used. Streams separate uses:
 * initialisation, dropout, data shuffling. */
typedef struct lp_rng {
    uint64_t seed;
    uint64_t stream;
    uint64_t offset; /* next 128-bit counter block */
    uint32_t lane;   /* first 32-bit draw of block `offset` a dropout fill uses (0..3): nonzero
                        only for a slice of a larger fill (lp_rng_at); other fills assume 0 */
} lp_rng;

enum { LP_RNG_STREAM_INIT = 1, LP_RNG_STREAM_DROPOUT = 2, LP_RNG_STREAM_DATA = 3 };

void lp_rng_init(lp_rng *r, uint64_t seed, uint64_t stream);
/* The four 32-bit outputs of Philox at counter block ctr (pure function). */
void lp_rng_philox(uint64_t seed, uint64_t stream, uint64_t ctr, uint32_t out[4]);
/* A 24-bit-precise uniform float in [0, 1) from a 32-bit draw. */
static inline float lp_rng_u01(uint32_t x) { return (float)(x >> 8) * (1.0f / 16777216.0f); }
/* n uniforms in [lo, hi). */
void lp_rng_uniform(lp_rng *r, float *out, int64_t n, float lo, float hi);
/* n normals (Box-Muller on pairs of draws), mean and std. */
void lp_rng_normal(lp_rng *r, float *out, int64_t n, float mean, float std);
/* Advances r past the counter blocks a fill of n values uses (four 32-bit draws a block):
 * for a consumer that draws those values elsewhere from the same counters (the fused
 * attention kernel's dropout, LoRA's) and must leave the stream where a fill would. */
static inline void lp_rng_skip(lp_rng *r, int64_t n)
{
    r->offset += (uint64_t)(((int64_t)r->lane + n + 3) / 4);
    r->lane = 0;
}
/* The rng at element e of a fill that starts at r: a fill of n values from it draws exactly
 * elements e .. e+n-1 of the fill from r (a data-parallel rank's slice of a global dropout
 * mask). Does not move r. */
static inline lp_rng lp_rng_at(const lp_rng *r, int64_t e)
{
    const uint64_t d = (uint64_t)r->lane + (uint64_t)e;
    return (lp_rng){r->seed, r->stream, r->offset + d / 4, (uint32_t)(d % 4)};
}
/* Next 32-bit value (one counter block each; for occasional scalar use). */
uint32_t lp_rng_u32(lp_rng *r);
/* Uniform integer in [0, n) (n >= 1), unbiased. */
uint64_t lp_rng_below(lp_rng *r, uint64_t n);

#ifdef __cplusplus
}
#endif
#endif /* LOUPE_CORE_H */
