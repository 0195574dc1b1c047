/* The communication layer's world: MPI_Init/Finalize when the build has MPI and mpirun
 * started the process, else a world of one where every collective is a copy or nothing. The
 * blocking collectives the trainer needs outside the gradient buckets live here too. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist_internal.h"

static int32_t g_rank = 0, g_world = 1;
static bool g_init = false;

int32_t lp_dist_env_world_size(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "MPI_LOCALNRANKS"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v) {
            long n = strtol(v, NULL, 10);
            if (n > 1)
                return n > INT32_MAX ? INT32_MAX : (int32_t)n;
        }
    }
    return 1;
}

int32_t lp_dist_env_rank(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v) {
            long r = strtol(v, NULL, 10);
            return r > 0 && r < INT32_MAX ? (int32_t)r : 0;
        }
    }
    return 0;
}

int32_t lp_dist_rank(void)
{
    return g_rank;
}
int32_t lp_dist_world_size(void)
{
    return g_world;
}
const char *lp_dist_backend(void)
{
    return g_world > 1 ? "mpi" : "none";
}

#ifdef LP_HAVE_MPI
static bool g_mpi = false;
static int g_thread_level = MPI_THREAD_SINGLE;

bool lp_dist_built_with_mpi(void)
{
    return true;
}
bool lp_dist__mpi_on(void)
{
    return g_mpi;
}
bool lp_dist__thread_multiple(void)
{
    return g_mpi && g_thread_level >= MPI_THREAD_MULTIPLE;
}

lp_status lp_dist__mpi_err(int rc, const char *what)
{
    char msg[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS)
        snprintf(msg, sizeof msg, "MPI error %d", rc);
    return lp_err(LP_STATUS_IO, "rank %d: %s failed: %s", (int)g_rank, what, msg);
}

/* Only under a launcher: a plain `loupe train` must not need an MPI runtime to start (and
 * singleton MPI_Init costs a few hundred ms). */
static bool under_launcher(void)
{
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE") || getenv("PMIX_RANK") || getenv("PMI_RANK");
}

lp_status lp_dist_init(void)
{
    if (g_init)
        return LP_OK;
    g_init = true;
    if (!under_launcher())
        return LP_OK;
    /* MULTIPLE: the reducer's progress thread tests the gradient all-reduces while the main
     * thread computes (and may meet an error and call a collective of its own); a library
     * without it gets the reducer's single-thread mode */
    int provided = 0, rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided);
    if (rc != MPI_SUCCESS)
        return lp_dist__mpi_err(rc, "MPI_Init_thread");
    g_mpi = true;
    g_thread_level = provided;
    int r = 0, n = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    g_rank = r;
    g_world = n;
    return LP_OK;
}

void lp_dist_finalize(void)
{
    if (g_mpi) {
        int done = 0;
        MPI_Finalized(&done);
        if (!done)
            MPI_Finalize();
        g_mpi = false;
    }
}

_Noreturn void lp_dist_abort(int code)
{
    fflush(stdout);
    fflush(stderr);
    if (g_mpi && g_world > 1)
        MPI_Abort(MPI_COMM_WORLD, code);
    exit(code);
}

static int ibytes(int64_t n)
{
    return n > INT32_MAX ? -1 : (int)n;
}

lp_status lp_dist_allreduce_sum_f32(float *buf, int64_t n)
{
    if (!g_mpi || g_world == 1 || n == 0)
        return LP_OK;
    if (ibytes(n) < 0)
        return lp_err(LP_STATUS_RANGE, "all-reduce of %lld floats: over MPI's int count", (long long)n);
    int rc = MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    return rc == MPI_SUCCESS ? LP_OK : lp_dist__mpi_err(rc, "MPI_Allreduce");
}

static lp_status allreduce_f64(double *buf, int64_t n, MPI_Op op)
{
    if (!g_mpi || g_world == 1 || n == 0)
        return LP_OK;
    if (ibytes(n) < 0)
        return lp_err(LP_STATUS_RANGE, "all-reduce of %lld doubles: over MPI's int count", (long long)n);
    int rc = MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_DOUBLE, op, MPI_COMM_WORLD);
    return rc == MPI_SUCCESS ? LP_OK : lp_dist__mpi_err(rc, "MPI_Allreduce");
}

lp_status lp_dist_allreduce_sum_f64(double *buf, int64_t n)
{
    return allreduce_f64(buf, n, MPI_SUM);
}
lp_status lp_dist_allreduce_max_f64(double *buf, int64_t n)
{
    return allreduce_f64(buf, n, MPI_MAX);
}

lp_status lp_dist_broadcast(void *buf, int64_t bytes, int32_t root)
{
    if (!g_mpi || g_world == 1 || bytes == 0)
        return LP_OK;
    if (ibytes(bytes) < 0)
        return lp_err(LP_STATUS_RANGE, "broadcast of %lld bytes: over MPI's int count", (long long)bytes);
    int rc = MPI_Bcast(buf, (int)bytes, MPI_BYTE, root, MPI_COMM_WORLD);
    return rc == MPI_SUCCESS ? LP_OK : lp_dist__mpi_err(rc, "MPI_Bcast");
}

lp_status lp_dist_barrier(void)
{
    if (!g_mpi || g_world == 1)
        return LP_OK;
    int rc = MPI_Barrier(MPI_COMM_WORLD);
    return rc == MPI_SUCCESS ? LP_OK : lp_dist__mpi_err(rc, "MPI_Barrier");
}

lp_status lp_dist_allgather(const void *send, void *recv, int64_t bytes)
{
    if (!g_mpi || g_world == 1) {
        if (bytes)
            memmove(recv, send, (size_t)bytes);
        return LP_OK;
    }
    if (ibytes(bytes) < 0)
        return lp_err(LP_STATUS_RANGE, "all-gather of %lld bytes: over MPI's int count", (long long)bytes);
    int rc = MPI_Allgather(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE, MPI_COMM_WORLD);
    return rc == MPI_SUCCESS ? LP_OK : lp_dist__mpi_err(rc, "MPI_Allgather");
}

static lp_status p2p(void *buf, int64_t bytes, int32_t peer, bool send)
{
    if (!g_mpi || g_world == 1 || peer < 0 || peer >= g_world || peer == g_rank)
        return lp_err(LP_STATUS_INVALID_ARG, "rank %d: %s rank %d of %d", (int)g_rank,
                      send ? "send to" : "receive from", (int)peer, (int)g_world);
    if (ibytes(bytes) < 0)
        return lp_err(LP_STATUS_RANGE, "message of %lld bytes: over MPI's int count", (long long)bytes);
    int rc = send ? MPI_Send(buf, (int)bytes, MPI_BYTE, peer, 0, MPI_COMM_WORLD)
                  : MPI_Recv(buf, (int)bytes, MPI_BYTE, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    return rc == MPI_SUCCESS ? LP_OK : lp_dist__mpi_err(rc, send ? "MPI_Send" : "MPI_Recv");
}

lp_status lp_dist_send(const void *buf, int64_t bytes, int32_t peer)
{
    return p2p((void *)buf, bytes, peer, true);
}
lp_status lp_dist_recv(void *buf, int64_t bytes, int32_t peer)
{
    return p2p(buf, bytes, peer, false);
}

#else /* a world of one */

lp_status lp_dist_send(const void *buf, int64_t bytes, int32_t peer)
{
    (void)buf, (void)bytes;
    return lp_err(LP_STATUS_INVALID_ARG, "send to rank %d in a world of one", (int)peer);
}

lp_status lp_dist_recv(void *buf, int64_t bytes, int32_t peer)
{
    (void)buf, (void)bytes;
    return lp_err(LP_STATUS_INVALID_ARG, "receive from rank %d in a world of one", (int)peer);
}

bool lp_dist_built_with_mpi(void)
{
    return false;
}

lp_status lp_dist_init(void)
{
    g_init = true;
    int32_t n = lp_dist_env_world_size();
    if (n > 1)
        return lp_err(
            LP_STATUS_UNSUPPORTED,
            "started as one of %d MPI ranks, but this loupe was built without MPI (LP_MPI=OFF or no "
            "libopenmpi-dev at configure time): each rank would train alone and write the same run; "
            "rebuild with MPI or run a single process",
            (int)n);
    return LP_OK;
}

void lp_dist_finalize(void) {}

_Noreturn void lp_dist_abort(int code)
{
    fflush(stdout);
    fflush(stderr);
    exit(code);
}

lp_status lp_dist_allreduce_sum_f32(float *buf, int64_t n)
{
    (void)buf, (void)n;
    return LP_OK;
}
lp_status lp_dist_allreduce_sum_f64(double *buf, int64_t n)
{
    (void)buf, (void)n;
    return LP_OK;
}
lp_status lp_dist_allreduce_max_f64(double *buf, int64_t n)
{
    (void)buf, (void)n;
    return LP_OK;
}
lp_status lp_dist_broadcast(void *buf, int64_t bytes, int32_t root)
{
    (void)buf, (void)bytes, (void)root;
    return LP_OK;
}
lp_status lp_dist_barrier(void)
{
    return LP_OK;
}

lp_status lp_dist_allgather(const void *send, void *recv, int64_t bytes)
{
    if (bytes)
        memmove(recv, send, (size_t)bytes);
    return LP_OK;
}
#endif
