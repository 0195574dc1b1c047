/* Runs a bucket plan's all-reduces on a gradient block: MPI_Iallreduce per bucket as soon as
 * backward has finished the bucket's stage, completed before the optimizer.
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
    int32_t n, next; /* buckets [0, next) are released (plan order: from the block's end down) */
#ifdef LP_HAVE_MPI
    MPI_Request *req;
    /* thread mode; under mu: started and done are the progress thread's ([0, done) complete,
     * [done, started) in flight), main resets them in finish once all are done */
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
    int32_t inflight; /* all-reduces in flight at most */
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

static int start_bucket(lp_dist_reducer *r, int32_t i, MPI_Comm comm)
{
    const lp_dist_bucket *b = &r->b[i];
    return MPI_Iallreduce(MPI_IN_PLACE, r->block + b->off, (int)b->n, MPI_FLOAT, MPI_SUM, comm, &r->req[i]);
}

/* Opens bucket i's range on the calling thread; returns whether it was recorded. */
static int push_bucket(const lp_dist_reducer *r, int32_t i)
{
    const int64_t dims[1] = {r->b[i].n};
    return lp_prof__scope_op(&all_reduce_desc, dims, -1, (double)r->b[i].n * sizeof(float));
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
                open = push_bucket(r, i);
            int rc = start_bucket(r, i, r->comm);
            pthread_mutex_lock(&r->mu);
            if (rc != MPI_SUCCESS) {
                r->mpi_rc = rc, r->mpi_what = "MPI_Iallreduce";
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
            int flag = 0, rc = MPI_Test(&r->req[i], &flag, MPI_STATUS_IGNORE);
            if (flag && open)
                lp_prof__pop();
            pthread_mutex_lock(&r->mu);
            if (rc != MPI_SUCCESS) {
                r->mpi_rc = rc, r->mpi_what = "MPI_Test";
                pthread_cond_signal(&r->finished);
            } else if (flag) {
                r->done++;
                open = r->done < r->started ? push_bucket(r, r->done) : 0;
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

lp_status lp_dist_reducer_init(lp_dist_reducer **out, float *block, const lp_dist_buckets *plan)
{
    *out = NULL;
    lp_dist_reducer *r = calloc(1, sizeof *r);
    if (!r)
        return lp_err(LP_STATUS_NO_MEMORY, "gradient reducer: out of memory");
    r->block = block;
    r->n = plan->n;
    r->b = malloc((size_t)(plan->n ? plan->n : 1) * sizeof *r->b);
    if (!r->b) {
        lp_dist_reducer_free(r);
        return lp_err(LP_STATUS_NO_MEMORY, "gradient reducer: out of memory");
    }
    if (plan->n)
        memcpy(r->b, plan->b, (size_t)plan->n * sizeof *r->b);
#ifdef LP_HAVE_MPI
    r->comm = MPI_COMM_NULL;
    r->mpi_rc = MPI_SUCCESS;
    r->req = malloc((size_t)(plan->n ? plan->n : 1) * sizeof *r->req);
    for (int32_t i = 0; r->req && i < plan->n; i++)
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
    if (distributed() && (st = progress_mode(&r->threaded)) == LP_OK && r->threaded &&
        (st = poll_interval(&r->poll_ns)) == LP_OK && (st = inflight_limit(&r->inflight)) == LP_OK) {
        int rc = MPI_Comm_dup(MPI_COMM_WORLD, &r->comm); /* every rank builds its reducer */
        st = rc == MPI_SUCCESS ? start_thread(r) : lp_dist__mpi_err(rc, "MPI_Comm_dup");
    }
    if (st != LP_OK) {
        lp_dist_reducer_free(r);
        return st;
    }
#endif
    *out = r;
    return LP_OK;
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
    free(r->b);
    free(r);
}

int32_t lp_dist_reducer_started(const lp_dist_reducer *r)
{
    return r->next;
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

/* Layer mode: starts bucket r->next from this thread. */
static lp_status start_next(lp_dist_reducer *r)
{
#ifdef LP_HAVE_MPI
    if (distributed()) {
        lp_prof_op_push(&all_reduce_desc, (const int64_t[1]){r->b[r->next].n}, -1,
                        (double)r->b[r->next].n * sizeof(float));
        int rc = start_bucket(r, r->next, MPI_COMM_WORLD);
        lp_prof_range_pop();
        if (rc != MPI_SUCCESS)
            return lp_dist__mpi_err(rc, "MPI_Iallreduce");
    }
#endif
    r->next++;
    return LP_OK;
}

lp_status lp_dist_reducer_ready(lp_dist_reducer *r, int32_t stage)
{
    int32_t next = r->next;
    while (next < r->n && r->b[next].stage >= stage)
        next++;
#ifdef LP_HAVE_MPI
    if (r->threaded) { /* hand them to the progress thread */
        pthread_mutex_lock(&r->mu);
        if (next > r->next) {
            r->next = next;
            pthread_cond_signal(&r->wake);
        }
        lp_status st = thread_status(r);
        pthread_mutex_unlock(&r->mu);
        return st;
    }
#endif
    lp_status st = LP_OK;
    while (st == LP_OK && r->next < next)
        st = start_next(r);
#ifdef LP_HAVE_MPI
    if (st == LP_OK && distributed() && r->next > 0) { /* progress the transfers in flight */
        int flag = 0;
        lp_prof_op_push(&wait_desc, NULL, -1, -1);
        int rc = MPI_Testall(r->next, r->req, &flag, MPI_STATUSES_IGNORE);
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
    if (r->threaded) { /* release the rest; the thread spins until all are done */
        pthread_mutex_lock(&r->mu);
        r->next = r->n;
        if (r->done < r->n && r->mpi_rc == MPI_SUCCESS) {
            r->waiting = true;
            pthread_cond_signal(&r->wake);
            lp_prof_op_push(&wait_desc, NULL, -1, -1);
            while (r->done < r->n && r->mpi_rc == MPI_SUCCESS)
                pthread_cond_wait(&r->finished, &r->mu);
            lp_prof_range_pop();
            r->waiting = false;
        }
        st = thread_status(r);
        if (st == LP_OK) /* the thread is idle: the next step starts from bucket 0 */
            r->next = r->started = r->done = 0;
        pthread_mutex_unlock(&r->mu);
        return st;
    }
#endif
    while (st == LP_OK && r->next < r->n)
        st = start_next(r);
#ifdef LP_HAVE_MPI
    if (distributed() && r->next > 0) {
        lp_prof_op_push(&wait_desc, NULL, -1, -1);
        int rc = MPI_Waitall(r->next, r->req, MPI_STATUSES_IGNORE);
        lp_prof_range_pop();
        if (rc != MPI_SUCCESS && st == LP_OK)
            st = lp_dist__mpi_err(rc, "MPI_Waitall");
    }
#endif
    r->next = 0;
    return st;
}
