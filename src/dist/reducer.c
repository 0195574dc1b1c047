/* Runs a bucket plan's all-reduces on a gradient block: MPI_Iallreduce per bucket as soon as
 * backward has finished the bucket's stage, completed before the optimizer. ZeRO-1 (sharded)
 * instead reduce-scatters each bucket, and all-gathers it once the optimizer has updated this
 * rank's shard: both as point-to-point transfers between every pair of ranks (the ring
 * all-reduce's two halves for two ranks; OpenMPI 4.1's MPI_Ireduce_scatter would reduce the
 * whole bucket at rank 0 and scatter it, 1.5x the bytes and all the adds on one rank). A step
 * is then 2n operations: the n reductions, then the n gathers, in plan order.
 *
 * OpenMPI 4.1 moves a non-blocking collective's data only inside MPI calls (no asynchronous
 * progress for shared memory or TCP), so something must call MPI while backward computes:
 *  - thread mode (the default, MPI_THREAD_MULTIPLE): a progress thread starts the released
 *    buckets in order, LP_DIST_INFLIGHT at a time (1 by default: several large collectives
 *    in flight at once stalled OpenMPI's copy-in/copy-out shared memory for hundreds of ms
 *    here, and one at a time was as fast with CMA), and tests the oldest one every
 *    LP_DIST_POLL_US microseconds (100 by default, 20 while the main thread waits in finish;
 *    a timed condition wait, so a release or finish wakes it at once). Its own
 *    communicator (a duplicate of the world's) keeps its collectives apart from those the
 *    main thread calls. The trace shows the all-reduces on its row ("mpi progress"), one
 *    range per bucket from its start (or, with several in flight, the previous one's end) to
 *    the test that saw it complete;
 *  - layer mode (LP_DIST_PROGRESS=layer, or a library without MPI_THREAD_MULTIPLE): the main
 *    thread starts the buckets and calls MPI_Testall once per finished layer, then
 *    MPI_Waitall: the transfers barely progress during backward.
 * In a world of one every call returns at once. */
#define _GNU_SOURCE /* pthread_condattr_setclock and friends under -std=c11 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "loupe/prof.h"
#include "dist_internal.h"

struct lp_dist_reducer {
    float *block;
    lp_dist_bucket *b;
    int32_t n, next; /* operations [0, next) are released (plan order: from the block's end down;
                      * sharded: reductions 0..n-1, then the gathers n..2n-1) */
    bool sharded;    /* ZeRO-1 with more than one rank */
    int32_t rank, world;
    int64_t *sh_lo, *sh_n; /* sharded, (n * world): rank q's shard of bucket i, floats from the
                            * bucket's start, at [i * world + q] */
    float **dst;           /* sharded, (n): where bucket i's gather goes (gather_to or the block) */
    float *scratch;        /* sharded: slots of (world - 1) * max_sh floats, the other ranks'
                            * values of this rank's shard while a reduction is in flight */
    int64_t max_sh, scratch_floats;
    int32_t slots;
#ifdef LP_HAVE_MPI
    MPI_Request *req; /* per requests per operation */
    int32_t per;
    /* thread mode; under mu: started and done are the progress thread's ([0, done) complete,
     * [done, started) in flight), main resets them once all are done */
    bool threaded, thread_up;
    MPI_Comm comm;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t wake, finished; /* to the thread (release, finish, stop); to main */
    int32_t started, done;
    bool waiting, stop;
    int mpi_rc;             /* first MPI error of the thread (MPI_SUCCESS: none) */
    const char *mpi_what;
    int64_t poll_ns;
    int32_t inflight; /* operations in flight at most */
#endif
};

#ifdef LP_HAVE_MPI
/* The collective as PyTorch's process groups name theirs ("gloo:all_reduce"; ProcessGroupMPI
 * says "mpi:all_reduce"), with the float count as its input shape: loupe analyze and HTA
 * count these names as communication. */
static const lp_prof_op_desc all_reduce_desc = {.name = "mpi:all_reduce",
                                                .cat = LP_PROF_CAT_USER_ANNOTATION,
                                                .ninputs = 1,
                                                .rank = {1},
                                                .type = {"float"}};
static const lp_prof_op_desc reduce_scatter_desc = {.name = "mpi:reduce_scatter",
                                                     .cat = LP_PROF_CAT_USER_ANNOTATION,
                                                     .ninputs = 1,
                                                     .rank = {1},
                                                     .type = {"float"}};
static const lp_prof_op_desc all_gather_desc = {.name = "mpi:all_gather",
                                                 .cat = LP_PROF_CAT_USER_ANNOTATION,
                                                 .ninputs = 1,
                                                 .rank = {1},
                                                 .type = {"float"}};
static const lp_prof_op_desc wait_desc = {.name = "mpi:wait", .cat = LP_PROF_CAT_USER_ANNOTATION};

static bool distributed(void)
{
    return lp_dist__mpi_on() && lp_dist_world_size() > 1;
}

/* LP_DIST_PROGRESS: "thread" (default) or "layer"; anything else is refused. */
static lp_status progress_mode(bool *threaded)
{
    const char *v = getenv("LP_DIST_PROGRESS");
    if (!v || !*v || !strcmp(v, "thread"))
        *threaded = lp_dist__thread_multiple();
    else if (!strcmp(v, "layer"))
        *threaded = false;
    else
        return lp_err(LP_STATUS_INVALID_ARG, "LP_DIST_PROGRESS=%s: expected thread or layer", v);
    return LP_OK;
}

/* An integer environment variable in [lo, hi], *out = dflt when unset or empty; anything else
 * is refused, naming the variable and what it expects. */
static lp_status env_long(const char *name, long lo, long hi, long dflt, const char *what, long *out)
{
    const char *v = getenv(name);
    *out = dflt;
    if (!v || !*v)
        return LP_OK;
    char *end;
    long k = strtol(v, &end, 10);
    if (*end || k < lo || k > hi)
        return lp_err(LP_STATUS_INVALID_ARG, "%s=%s: expected %s from %ld to %ld", name, v, what, lo, hi);
    *out = k;
    return LP_OK;
}

/* LP_DIST_POLL_US: microseconds between the progress thread's tests, 0 to 100000 (0: spin). */
static lp_status poll_interval(int64_t *ns)
{
    long us;
    lp_status st = env_long("LP_DIST_POLL_US", 0, 100000, 100, "microseconds", &us);
    *ns = (int64_t)us * 1000;
    return st;
}

/* LP_DIST_INFLIGHT: all-reduces the progress thread keeps in flight, 1 to 64 (default 1). */
static lp_status inflight_limit(int32_t *n)
{
    long k;
    lp_status st = env_long("LP_DIST_INFLIGHT", 1, 64, 1, "all-reduces", &k);
    *n = (int32_t)k;
    return st;
}

/* The operations of a step: n all-reduces, or n reduce-scatters then n all-gathers. */
static int32_t n_ops(const lp_dist_reducer *r)
{
    return r->sharded ? 2 * r->n : r->n;
}

/* Operation i's message tag: operations run in the same order on every rank, so matching is
 * by order anyway; the tag keeps a late one from ever matching the next. */
static int op_tag(int32_t i)
{
    return (int)(i % 32767);
}

/* Rank q's slot among the other ranks (this rank's scratch holds their values in rank order). */
static int32_t peer_slot(const lp_dist_reducer *r, int32_t q)
{
    return q < r->rank ? q : q - 1;
}

/* Sharded: the other ranks' values of this rank's shard of bucket i (slot), then sends each rank
 * this rank's values of its shard. */
static int start_reduce_scatter(lp_dist_reducer *r, int32_t i, MPI_Comm comm)
{
    const int32_t W = r->world, me = r->rank;
    float *tmp = r->scratch + (int64_t)(i % r->slots) * (W - 1) * r->max_sh;
    float *bucket = r->block + r->b[i].off;
    MPI_Request *q_req = &r->req[(int64_t)i * r->per];
    int rc = MPI_SUCCESS;
    for (int32_t q = 0; q < W && rc == MPI_SUCCESS; q++)
        if (q != me)
            rc = MPI_Irecv(tmp + peer_slot(r, q) * r->max_sh, (int)r->sh_n[(int64_t)i * W + me], MPI_FLOAT, q,
                           op_tag(i), comm, q_req++);
    for (int32_t q = 0; q < W && rc == MPI_SUCCESS; q++)
        if (q != me)
            rc = MPI_Isend(bucket + r->sh_lo[(int64_t)i * W + q], (int)r->sh_n[(int64_t)i * W + q], MPI_FLOAT, q,
                           op_tag(i), comm, q_req++);
    return rc;
}

/* Sharded: every other rank's shard of bucket i into its place in dst[i], this rank's to them. */
static int start_all_gather(lp_dist_reducer *r, int32_t i, int32_t op, MPI_Comm comm)
{
    const int32_t W = r->world, me = r->rank;
    float *d = r->dst[i];
    MPI_Request *q_req = &r->req[(int64_t)op * r->per];
    int rc = MPI_SUCCESS;
    for (int32_t q = 0; q < W && rc == MPI_SUCCESS; q++)
        if (q != me)
            rc = MPI_Irecv(d + r->sh_lo[(int64_t)i * W + q], (int)r->sh_n[(int64_t)i * W + q], MPI_FLOAT, q,
                           op_tag(op), comm, q_req++);
    for (int32_t q = 0; q < W && rc == MPI_SUCCESS; q++)
        if (q != me)
            rc = MPI_Isend(d + r->sh_lo[(int64_t)i * W + me], (int)r->sh_n[(int64_t)i * W + me], MPI_FLOAT, q,
                           op_tag(op), comm, q_req++);
    return rc;
}

static int start_op(lp_dist_reducer *r, int32_t i, MPI_Comm comm)
{
    if (!r->sharded) {
        const lp_dist_bucket *b = &r->b[i];
        return MPI_Iallreduce(MPI_IN_PLACE, r->block + b->off, (int)b->n, MPI_FLOAT, MPI_SUM, comm, &r->req[i]);
    }
    return i < r->n ? start_reduce_scatter(r, i, comm) : start_all_gather(r, i - r->n, i, comm);
}

static void add_into(float *restrict y, const float *restrict x, int64_t n)
{
    for (int64_t k = 0; k < n; k++)
        y[k] += x[k];
}

/* Sharded, once reduction i is complete: this rank's shard of bucket i becomes the sum of every
 * rank's values in rank order (((v0 + v1) + v2) + ...), the lower ranks' first summed in the
 * scratch: with two ranks v0 + v1 on both, the all-reduce's sum exactly. */
static void sum_shard(lp_dist_reducer *r, int32_t i)
{
    const int32_t W = r->world, me = r->rank;
    const int64_t n = r->sh_n[(int64_t)i * W + me];
    float *x = r->block + r->b[i].off + r->sh_lo[(int64_t)i * W + me];
    float *tmp = r->scratch + (int64_t)(i % r->slots) * (W - 1) * r->max_sh;
    for (int32_t q = 1; q < me; q++) /* v0 + ... + v(me-1), in slot 0 */
        add_into(tmp, tmp + (int64_t)q * r->max_sh, n);
    if (me > 0)
        add_into(x, tmp, n); /* commutative: (lower ranks' sum) + v(me) */
    for (int32_t q = me + 1; q < W; q++)
        add_into(x, tmp + (int64_t)peer_slot(r, q) * r->max_sh, n);
}

/* Tests operation i; *flag when complete (a reduction's shard then summed). */
static int test_op(lp_dist_reducer *r, int32_t i, int *flag)
{
    int rc = MPI_Testall(r->per, &r->req[(int64_t)i * r->per], flag, MPI_STATUSES_IGNORE);
    if (rc == MPI_SUCCESS && *flag && r->sharded && i < r->n)
        sum_shard(r, i);
    return rc;
}

/* Opens operation i's range on the calling thread; returns whether it was recorded. */
static int push_op(const lp_dist_reducer *r, int32_t i)
{
    const lp_dist_bucket *b = &r->b[i < r->n ? i : i - r->n];
    const int64_t dims[1] = {b->n};
    const lp_prof_op_desc *d = !r->sharded ? &all_reduce_desc : i < r->n ? &reduce_scatter_desc : &all_gather_desc;
    return lp_prof__scope_op(d, dims, -1, (double)b->n * sizeof(float));
}

static void deadline_after(struct timespec *ts, int64_t ns)
{
    clock_gettime(CLOCK_MONOTONIC, ts);
    ts->tv_nsec += ns;
    ts->tv_sec += ts->tv_nsec / 1000000000;
    ts->tv_nsec %= 1000000000;
}

/* The progress thread: starts released buckets, tests the oldest in flight (any MPI test
 * progresses all of them), sleeps poll_ns between tests unless main waits for it. */
static void *progress_main(void *arg)
{
    lp_dist_reducer *r = arg;
    lp_prof_set_thread_name("mpi progress");
#ifdef __linux__
    prctl(PR_SET_TIMERSLACK, 1000UL); /* wake within ~1 us of the poll, not the default 50 */
#endif
    int open = 0; /* the range of bucket r->done is recorded open */
    pthread_mutex_lock(&r->mu);
    while (!r->stop) {
        if (r->mpi_rc == MPI_SUCCESS && r->started < r->next && r->started - r->done < r->inflight) {
            const int32_t i = r->started;
            pthread_mutex_unlock(&r->mu);
            if (i == r->done) /* nothing in flight: its range starts now */
                open = push_op(r, i);
            int rc = start_op(r, i, r->comm);
            pthread_mutex_lock(&r->mu);
            if (rc != MPI_SUCCESS) {
                r->mpi_rc = rc, r->mpi_what = r->sharded ? "MPI_Isend/MPI_Irecv" : "MPI_Iallreduce";
                pthread_cond_signal(&r->finished);
            } else {
                r->started++;
            }
            continue;
        }
        if (r->mpi_rc == MPI_SUCCESS && r->done < r->started) {
            const int32_t i = r->done;
            const bool spin = r->poll_ns == 0;
            pthread_mutex_unlock(&r->mu);
            int flag = 0, rc = test_op(r, i, &flag);
            if (flag && open)
                lp_prof__pop();
            pthread_mutex_lock(&r->mu);
            if (rc != MPI_SUCCESS) {
                r->mpi_rc = rc, r->mpi_what = "MPI_Testall";
                pthread_cond_signal(&r->finished);
            } else if (flag) {
                r->done++;
                open = r->done < r->started ? push_op(r, r->done) : 0;
                if (r->done == r->next)
                    pthread_cond_signal(&r->finished);
            } else if (!spin && (r->started == r->next || r->started - r->done >= r->inflight)) {
                /* main waiting: test more often, but still sleep (two ranks spinning on a
                 * loaded machine took turns at the CPU, 100 ms at a time, here) */
                struct timespec ts;
                deadline_after(&ts, r->waiting && r->poll_ns > 20000 ? 20000 : r->poll_ns);
                pthread_cond_timedwait(&r->wake, &r->mu, &ts);
            }
            continue;
        }
        pthread_cond_wait(&r->wake, &r->mu); /* nothing to start or test */
    }
    pthread_mutex_unlock(&r->mu);
    if (open)
        lp_prof__pop();
    return NULL;
}

/* Starts the progress thread with every signal blocked: SIGINT and friends stay the main
 * thread's (the trainer's handlers), as without it. */
static lp_status start_thread(lp_dist_reducer *r)
{
    pthread_condattr_t ca;
    if (pthread_condattr_init(&ca) || pthread_condattr_setclock(&ca, CLOCK_MONOTONIC))
        return lp_err(LP_STATUS_IO, "gradient reducer: cannot set up its condition variables");
    int e = pthread_mutex_init(&r->mu, NULL);
    e = e ? e : pthread_cond_init(&r->wake, &ca);
    e = e ? e : pthread_cond_init(&r->finished, NULL);
    pthread_condattr_destroy(&ca);
    if (e)
        return lp_err(LP_STATUS_IO, "gradient reducer: cannot create its locks: %s", strerror(e));
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    e = pthread_create(&r->thread, NULL, progress_main, r);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (e)
        return lp_err(LP_STATUS_IO, "gradient reducer: cannot start its progress thread: %s", strerror(e));
    r->thread_up = true;
    return LP_OK;
}

/* The thread's error, if any, as this rank's status. Under mu. */
static lp_status thread_status(const lp_dist_reducer *r)
{
    return r->mpi_rc == MPI_SUCCESS ? LP_OK : lp_dist__mpi_err(r->mpi_rc, r->mpi_what);
}
#endif

#ifdef LP_HAVE_MPI
/* Sharded: every rank's shard of every bucket, the gather destinations and the scratch (slots:
 * the reductions in flight at most). */
static lp_status plan_shards(lp_dist_reducer *r, float *const *gather_to, int32_t slots)
{
    const int32_t W = r->world;
    const size_t cells = (size_t)(r->n ? r->n : 1) * (size_t)W;
    r->sh_lo = malloc(cells * sizeof *r->sh_lo);
    r->sh_n = malloc(cells * sizeof *r->sh_n);
    r->dst = malloc((size_t)(r->n ? r->n : 1) * sizeof *r->dst);
    if (!r->sh_lo || !r->sh_n || !r->dst)
        return lp_err(LP_STATUS_NO_MEMORY, "gradient reducer: out of memory");
    for (int32_t i = 0; i < r->n; i++) {
        for (int32_t q = 0; q < W; q++) {
            int64_t *lo = &r->sh_lo[(int64_t)i * W + q], *len = &r->sh_n[(int64_t)i * W + q];
            lp_dist_shard_range(r->b[i].n, q, W, lo, len);
            r->max_sh = *len > r->max_sh ? *len : r->max_sh;
        }
        r->dst[i] = gather_to && gather_to[i] ? gather_to[i] : r->block + r->b[i].off;
    }
    r->slots = slots < 1 ? 1 : slots;
    r->scratch_floats = (int64_t)r->slots * (W - 1) * r->max_sh;
    const size_t bytes = ((size_t)(r->scratch_floats ? r->scratch_floats : 1) * sizeof(float) + 63) & ~(size_t)63;
    if (!(r->scratch = aligned_alloc(64, bytes)))
        return lp_err(LP_STATUS_NO_MEMORY, "gradient reducer: %lld floats of reduce-scatter buffers: out of memory",
                      (long long)r->scratch_floats);
    lp_prof_mem_alloc(r->scratch, (uint64_t)r->scratch_floats * sizeof(float), LP_MEM_CATEGORY_GRADIENT);
    return LP_OK;
}
#endif

static lp_status reducer_init(lp_dist_reducer **out, float *block, const lp_dist_buckets *plan, bool sharded,
                              float *const *gather_to)
{
    *out = NULL;
    lp_dist_reducer *r = calloc(1, sizeof *r);
    if (!r)
        return lp_err(LP_STATUS_NO_MEMORY, "gradient reducer: out of memory");
    r->block = block;
    r->n = plan->n;
    r->rank = lp_dist_rank();
    r->world = lp_dist_world_size();
    r->b = malloc((size_t)(plan->n ? plan->n : 1) * sizeof *r->b);
    if (!r->b) {
        lp_dist_reducer_free(r);
        return lp_err(LP_STATUS_NO_MEMORY, "gradient reducer: out of memory");
    }
    if (plan->n)
        memcpy(r->b, plan->b, (size_t)plan->n * sizeof *r->b);
#ifdef LP_HAVE_MPI
    r->sharded = sharded && distributed();
    r->per = r->sharded ? 2 * (r->world - 1) : 1;
    r->comm = MPI_COMM_NULL;
    r->mpi_rc = MPI_SUCCESS;
    const size_t nreq = (size_t)(n_ops(r) ? n_ops(r) : 1) * (size_t)r->per;
    r->req = malloc(nreq * sizeof *r->req);
    for (size_t i = 0; r->req && i < nreq; i++)
        r->req[i] = MPI_REQUEST_NULL;
    if (!r->req) {
        lp_dist_reducer_free(r);
        return lp_err(LP_STATUS_NO_MEMORY, "gradient reducer: out of memory");
    }
    for (int32_t i = 0; distributed() && i < plan->n; i++)
        if (plan->b[i].n > INT32_MAX) {
            const long long n = (long long)plan->b[i].n;
            lp_dist_reducer_free(r);
            return lp_err(LP_STATUS_RANGE,
                          "gradient bucket of %lld floats: over MPI's int count (lower --bucket-mb)", n);
        }
    lp_status st = LP_OK;
    if (distributed() && (st = progress_mode(&r->threaded)) == LP_OK && r->threaded)
        if ((st = poll_interval(&r->poll_ns)) == LP_OK)
            st = inflight_limit(&r->inflight);
    /* the thread keeps inflight reductions going; layer mode starts every released one at once */
    if (st == LP_OK && r->sharded)
        st = plan_shards(r, gather_to, r->threaded ? r->inflight : r->n);
    if (st == LP_OK && distributed()) { /* every rank builds its reducer */
        int rc = MPI_Comm_dup(MPI_COMM_WORLD, &r->comm);
        st = rc != MPI_SUCCESS ? lp_dist__mpi_err(rc, "MPI_Comm_dup") : r->threaded ? start_thread(r) : LP_OK;
    }
    if (st != LP_OK) {
        lp_dist_reducer_free(r);
        return st;
    }
#else
    (void)sharded, (void)gather_to;
#endif
    *out = r;
    return LP_OK;
}

lp_status lp_dist_reducer_init(lp_dist_reducer **out, float *block, const lp_dist_buckets *plan)
{
    return reducer_init(out, block, plan, false, NULL);
}

lp_status lp_dist_reducer_init_sharded(lp_dist_reducer **out, float *block, const lp_dist_buckets *plan,
                                       float *const *gather_to)
{
    return reducer_init(out, block, plan, true, gather_to);
}

void lp_dist_reducer_free(lp_dist_reducer *r)
{
    if (!r)
        return;
#ifdef LP_HAVE_MPI
    if (r->thread_up) { /* stops at its next test: a step cut short leaves its buckets behind */
        pthread_mutex_lock(&r->mu);
        r->stop = true;
        pthread_cond_signal(&r->wake);
        pthread_mutex_unlock(&r->mu);
        pthread_join(r->thread, NULL);
        pthread_cond_destroy(&r->wake);
        pthread_cond_destroy(&r->finished);
        pthread_mutex_destroy(&r->mu);
    }
    int done = 1;
    if (r->comm != MPI_COMM_NULL && MPI_Finalized(&done) == MPI_SUCCESS && !done)
        MPI_Comm_free(&r->comm);
    free(r->req);
#endif
    if (r->scratch)
        lp_prof_mem_free(r->scratch, (uint64_t)r->scratch_floats * sizeof(float), LP_MEM_CATEGORY_GRADIENT);
    free(r->scratch);
    free(r->sh_lo);
    free(r->sh_n);
    free(r->dst);
    free(r->b);
    free(r);
}

int32_t lp_dist_reducer_started(const lp_dist_reducer *r)
{
    return r->next < r->n ? r->next : r->n;
}

bool lp_dist_reducer_threaded(const lp_dist_reducer *r)
{
#ifdef LP_HAVE_MPI
    return r->threaded;
#else
    (void)r;
    return false;
#endif
}

bool lp_dist_reducer_sharded(const lp_dist_reducer *r)
{
    return r->sharded;
}

int64_t lp_dist_reducer_scratch_bytes(const lp_dist_reducer *r)
{
    return r->scratch ? r->scratch_floats * (int64_t)sizeof(float) : 0;
}

/* Layer mode: starts operation r->next from this thread. */
static lp_status start_next(lp_dist_reducer *r)
{
#ifdef LP_HAVE_MPI
    if (distributed()) {
        const int open = push_op(r, r->next);
        int rc = start_op(r, r->next, r->comm);
        if (open)
            lp_prof__pop();
        if (rc != MPI_SUCCESS)
            return lp_dist__mpi_err(rc, r->sharded ? "MPI_Isend/MPI_Irecv" : "MPI_Iallreduce");
    }
#endif
    r->next++;
    return LP_OK;
}

#ifdef LP_HAVE_MPI
/* Thread mode: releases operations [.., upto) to the progress thread and, with wait, waits
 * until they are complete. Under no lock. */
static lp_status thread_release(lp_dist_reducer *r, int32_t upto, bool wait)
{
    pthread_mutex_lock(&r->mu);
    if (upto > r->next) {
        r->next = upto;
        pthread_cond_signal(&r->wake);
    }
    if (wait && r->done < upto && r->mpi_rc == MPI_SUCCESS) {
        r->waiting = true;
        pthread_cond_signal(&r->wake);
        lp_prof_op_push(&wait_desc, NULL, -1, -1);
        while (r->done < upto && r->mpi_rc == MPI_SUCCESS)
            pthread_cond_wait(&r->finished, &r->mu);
        lp_prof_range_pop();
        r->waiting = false;
    }
    lp_status st = thread_status(r);
    if (st == LP_OK && wait && upto == n_ops(r)) /* the thread is idle: the next step starts at 0 */
        r->next = r->started = r->done = 0;
    pthread_mutex_unlock(&r->mu);
    return st;
}

/* Layer mode: waits for operations [from, to) (started), summing the reductions' shards. */
static lp_status layer_wait(lp_dist_reducer *r, int32_t from, int32_t to)
{
    if (!distributed() || to <= from)
        return LP_OK;
    lp_prof_op_push(&wait_desc, NULL, -1, -1);
    int rc = MPI_Waitall((int)((to - from) * r->per), &r->req[(int64_t)from * r->per], MPI_STATUSES_IGNORE);
    lp_prof_range_pop();
    if (rc != MPI_SUCCESS)
        return lp_dist__mpi_err(rc, "MPI_Waitall");
    for (int32_t i = from; r->sharded && i < to && i < r->n; i++)
        sum_shard(r, i);
    return LP_OK;
}
#endif

lp_status lp_dist_reducer_ready(lp_dist_reducer *r, int32_t stage)
{
    int32_t next = r->next;
    while (next < r->n && r->b[next].stage >= stage)
        next++;
#ifdef LP_HAVE_MPI
    if (r->threaded) /* hand them to the progress thread */
        return thread_release(r, next, false);
#endif
    lp_status st = LP_OK;
    while (st == LP_OK && r->next < next)
        st = start_next(r);
#ifdef LP_HAVE_MPI
    if (st == LP_OK && distributed() && r->next > 0) { /* progress the transfers in flight */
        int flag = 0;
        lp_prof_op_push(&wait_desc, NULL, -1, -1);
        int rc = MPI_Testall((int)(r->next * r->per), r->req, &flag, MPI_STATUSES_IGNORE);
        lp_prof_range_pop();
        if (rc != MPI_SUCCESS)
            return lp_dist__mpi_err(rc, "MPI_Testall");
    }
#endif
    return st;
}

lp_status lp_dist_reducer_finish(lp_dist_reducer *r)
{
    lp_status st = LP_OK;
#ifdef LP_HAVE_MPI
    if (r->threaded) /* release the rest; the thread spins until all are done */
        return thread_release(r, r->n, true);
#endif
    while (st == LP_OK && r->next < r->n)
        st = start_next(r);
#ifdef LP_HAVE_MPI
    lp_status ws = layer_wait(r, 0, r->next);
    st = st != LP_OK ? st : ws;
#endif
    if (!r->sharded)
        r->next = 0;
    return st;
}

lp_status lp_dist_reducer_gather(lp_dist_reducer *r, int32_t bucket)
{
    if (!r->sharded)
        return LP_OK;
    if (bucket < 0 || bucket >= r->n || r->next < r->n)
        return lp_err(LP_STATUS_INVALID_ARG, "gradient reducer: all-gather of bucket %d of %d before the reduction",
                      (int)bucket, (int)r->n);
#ifdef LP_HAVE_MPI
    if (r->threaded)
        return thread_release(r, r->n + bucket + 1, false);
#endif
    lp_status st = LP_OK;
    while (st == LP_OK && r->next < r->n + bucket + 1)
        st = start_next(r);
    return st;
}

lp_status lp_dist_reducer_gather_finish(lp_dist_reducer *r)
{
    if (!r->sharded)
        return LP_OK;
    if (r->next < r->n)
        return lp_err(LP_STATUS_INVALID_ARG, "gradient reducer: all-gather before the reduction finished");
#ifdef LP_HAVE_MPI
    if (r->threaded)
        return thread_release(r, 2 * r->n, true);
#endif
    lp_status st = LP_OK;
    while (st == LP_OK && r->next < 2 * r->n)
        st = start_next(r);
#ifdef LP_HAVE_MPI
    lp_status ws = layer_wait(r, r->n, r->next);
    st = st != LP_OK ? st : ws;
#endif
    r->next = 0;
    return st;
}
