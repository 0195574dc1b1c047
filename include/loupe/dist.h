/* loupe dist: the communication layer of data-parallel training. One process per rank,
 * started by mpirun; every collective is over all ranks (MPI_COMM_WORLD). Without MPI (a
 * build with LP_MPI=OFF, or a single process) the same calls run as a world of one, so the
 * trainer has one code path.
 *
 *   if (lp_dist_init() != LP_OK) ...;           // MPI_Init when built with MPI
 *   int32_t r = lp_dist_rank(), n = lp_dist_world_size();
 *   lp_dist_buckets b;                          // plan the gradient buckets once
 *   lp_dist_buckets_plan(spans, n_spans, total, 25 << 20, &b);
 *   lp_dist_reducer *red;
 *   lp_dist_reducer_init(&red, grad_block, &b);
 *   ... backward: lp_dist_reducer_ready(red, stage) as each stage's gradients complete ...
 *   lp_dist_reducer_finish(red);                // start the rest, wait: sums over ranks
 *   lp_dist_finalize();
 *
 * Threads: call everything from the thread that called lp_dist_init (the reducer's own
 * progress thread calls MPI on a communicator of its own). */
#ifndef LOUPE_DIST_H
#define LOUPE_DIST_H

#include <stdbool.h>
#include <stdint.h>

#include "loupe/base.h"

/* Starts the communication layer: MPI_Init when the build has MPI and the process was
 * started by an MPI launcher; a world of one otherwise. A build without MPI started as one of
 * several ranks (OMPI_COMM_WORLD_SIZE or PMI_SIZE > 1) gets LP_STATUS_UNSUPPORTED saying so:
 * N copies of a single-process run would each write the same run directory. Idempotent. */
LP_WARN_UNUSED lp_status lp_dist_init(void);
/* MPI_Finalize (nothing without MPI). Call after the last collective. */
void lp_dist_finalize(void);
/* Ends every rank of the job now (MPI_Abort) with exit status code: the way out of an error
 * that one rank meets while others may wait in a collective. A world of one just exits. */
_Noreturn void lp_dist_abort(int code);

int32_t lp_dist_rank(void);       /* 0 .. world_size-1; 0 before init */
int32_t lp_dist_world_size(void); /* 1 before init and without MPI */
/* "mpi" with more than one rank, "none" otherwise (the trace's distributedInfo.backend). */
const char *lp_dist_backend(void);
/* Whether this binary was built with MPI (LP_MPI). */
bool lp_dist_built_with_mpi(void);
/* The launcher's world size from the environment (OMPI_COMM_WORLD_SIZE, PMI_SIZE), 1 if none. */
int32_t lp_dist_env_world_size(void);
/* The launcher's rank of this process from the environment (OMPI_COMM_WORLD_RANK, PMI_RANK,
 * PMIX_RANK), 0 if none: usable before lp_dist_init (to let rank 0 alone report a usage error). */
int32_t lp_dist_env_rank(void);

/* Blocking collectives over all ranks. Errors: LP_STATUS_IO naming the MPI error (with
 * MPI's default handler an MPI error ends the job before returning). n and bytes >= 0. */
LP_WARN_UNUSED lp_status lp_dist_allreduce_sum_f32(float *buf, int64_t n);  /* in place */
LP_WARN_UNUSED lp_status lp_dist_allreduce_sum_f64(double *buf, int64_t n); /* in place */
LP_WARN_UNUSED lp_status lp_dist_allreduce_max_f64(double *buf, int64_t n); /* in place */
LP_WARN_UNUSED lp_status lp_dist_broadcast(void *buf, int64_t bytes, int32_t root);
LP_WARN_UNUSED lp_status lp_dist_barrier(void);
/* recv (world_size * bytes) gets every rank's send (bytes) in rank order. */
LP_WARN_UNUSED lp_status lp_dist_allgather(const void *send, void *recv, int64_t bytes);
/* Point to point, blocking: bytes to / from rank peer (!= this rank; INVALID_ARG in a world of
 * one). A send and its recv agree on bytes. */
LP_WARN_UNUSED lp_status lp_dist_send(const void *buf, int64_t bytes, int32_t peer);
LP_WARN_UNUSED lp_status lp_dist_recv(void *buf, int64_t bytes, int32_t peer);

/* ---- gradient buckets ---------------------------------------------------------------- */

/* A run of gradient floats that becomes final at one stage of the backward pass. Stages
 * count down as backward runs: the trainer numbers its layers' gradients so that stage s is
 * complete before stage s-1 starts (the head L, layers L-1..0, the embeddings -1). */
typedef struct lp_dist_span {
    int64_t off, n; /* floats [off, off+n) of the gradient block */
    int32_t stage;
} lp_dist_span;

/* A bucket: one all-reduce over floats [off, off+n) of the gradient block, startable once
 * the backward pass has finished stage `stage` (the lowest stage of the spans in it). */
typedef struct lp_dist_bucket {
    int64_t off, n;
    int32_t stage;
} lp_dist_bucket;

typedef struct lp_dist_buckets {
    lp_dist_bucket *b; /* owned; lp_dist_buckets_free */
    int32_t n;
} lp_dist_buckets;

/* Packs the spans into buckets of at most bucket_bytes (a span larger than that is a bucket
 * of its own; spans are never split), in the order backward completes them: from the end of
 * the block down. Spans must not overlap and must lie in [0, total); the floats between
 * spans (padding) join the bucket beside them, so that the buckets tile [0, total) exactly
 * and each all-reduce is one contiguous range. Spans need not be sorted. INVALID_ARG for
 * overlapping or out-of-range spans or bucket_bytes < 4, NO_MEMORY. */
LP_WARN_UNUSED lp_status lp_dist_buckets_plan(const lp_dist_span *spans, int32_t n_spans, int64_t total,
                                              int64_t bucket_bytes, lp_dist_buckets *out);
void lp_dist_buckets_free(lp_dist_buckets *b);

/* Runs a plan's all-reduces (sum, f32, in place) on a gradient block, non-blocking with MPI
 * (MPI_Iallreduce) so that they overlap the rest of the backward pass. OpenMPI moves their
 * data only inside MPI calls, so by default (MPI_THREAD_MULTIPLE) a progress thread of the
 * reducer starts the released buckets in order (LP_DIST_INFLIGHT at a time, default 1) and
 * tests them every LP_DIST_POLL_US microseconds (100; 0 spins) while backward computes
 * (environment variables, read at init; out-of-range values are refused);
 * LP_DIST_PROGRESS=layer (or a library without
 * MPI_THREAD_MULTIPLE) keeps everything on the calling thread, with one MPI_Testall per
 * finished stage. Profiler ranges: "mpi:all_reduce" per bucket (its float count as the input
 * shape; in thread mode on the thread "mpi progress", from its start to the test that saw it
 * complete), "mpi:wait" where the caller waits; loupe analyze counts both as communication. */
typedef struct lp_dist_reducer lp_dist_reducer;

/* block is borrowed (floats [0, total) of the plan); the plan is copied. NO_MEMORY. */
LP_WARN_UNUSED lp_status lp_dist_reducer_init(lp_dist_reducer **out, float *block,
                                              const lp_dist_buckets *plan);
void lp_dist_reducer_free(lp_dist_reducer *r);
/* The backward pass has finished stage `stage`: starts every bucket not yet started whose
 * stage is >= it, and lets the ones in flight progress. */
LP_WARN_UNUSED lp_status lp_dist_reducer_ready(lp_dist_reducer *r, int32_t stage);
/* Starts the buckets still waiting, waits for all: the block then holds the sum over ranks
 * (sharded: this rank's shards do). Resets for the next step (sharded: after the gathers). */
LP_WARN_UNUSED lp_status lp_dist_reducer_finish(lp_dist_reducer *r);
/* ---- ZeRO-1: reduce-scatter, then all-gather ------------------------------------------ */

/* The shard of a run of n floats that rank `rank` of `world` owns: floats [*lo, *lo + *len),
 * the ranks' shards in rank order tiling [0, n), each boundary a multiple of 16 floats (64
 * bytes: the optimizer's vector loops see the same alignment as over whole tensors), so a
 * shard may be empty when n < 16 * world. */
void lp_dist_shard_range(int64_t n, int32_t rank, int32_t world, int64_t *lo, int64_t *len);

/* A reducer for ZeRO-1 over the same plan: each bucket is reduce-scattered instead of
 * all-reduced (lp_dist_shard_range of the bucket: after finish, this rank's shard of the block
 * holds the sum over ranks, the rest of the bucket its own gradients still), and after the
 * optimizer has updated a bucket's shard, lp_dist_reducer_gather sends it to every other rank
 * and receives theirs: gather_to[i] (a plan.n array, copied) is where bucket i's floats live
 * for the gather (float k of the bucket at gather_to[i][k]: the parameters, when they are laid
 * out as their gradients), NULL for the block itself (the caller copies its shard there and
 * the others' out). Point-to-point transfers between every pair of ranks, on the progress
 * thread as the all-reduces (the same bytes as one all-reduce; OpenMPI's own
 * MPI_Ireduce_scatter reduces the whole bucket at rank 0 and scatters it); each shard's sum is
 * its own value plus the others' in rank order, so two ranks add a + b exactly as the
 * all-reduce. Profiler ranges "mpi:reduce_scatter" and "mpi:all_gather" (the bucket's float
 * count as input shape). Errors: as lp_dist_reducer_init. */
LP_WARN_UNUSED lp_status lp_dist_reducer_init_sharded(lp_dist_reducer **out, float *block,
                                                      const lp_dist_buckets *plan, float *const *gather_to);
/* Whether r reduce-scatters (lp_dist_reducer_init_sharded with more than one rank). */
bool lp_dist_reducer_sharded(const lp_dist_reducer *r);
/* Sharded: after finish, starts the all-gathers of buckets [0, bucket] not yet started (plan
 * order), this rank's shard of each being final. */
LP_WARN_UNUSED lp_status lp_dist_reducer_gather(lp_dist_reducer *r, int32_t bucket);
/* Sharded: starts the all-gathers still waiting and waits for every one: each gather_to then
 * holds every rank's shard. Resets for the next step. Unsharded: nothing. */
LP_WARN_UNUSED lp_status lp_dist_reducer_gather_finish(lp_dist_reducer *r);
/* Bytes of receive buffers the sharded reducer holds (0 unsharded). */
int64_t lp_dist_reducer_scratch_bytes(const lp_dist_reducer *r);

/* Buckets started (released to the progress thread) so far in the current step (for tests). */
int32_t lp_dist_reducer_started(const lp_dist_reducer *r);
/* Whether a progress thread runs the all-reduces (thread mode, more than one rank). */
bool lp_dist_reducer_threaded(const lp_dist_reducer *r);

#endif
