/* Runs a bucket plan's all-reduces on a gradient block: MPI_Iallreduce per bucket as soon as
 * backward has finished the bucket's stage, MPI_Testall on each later stage so the transfers
 * progress during the rest of backward (OpenMPI has no progress thread), MPI_Waitall before
 * the optimizer. In a world of one every call returns at once. */
#include <stdlib.h>
#include <string.h>

#include "loupe/prof.h"
#include "dist_internal.h"

struct lp_dist_reducer {
    float *block;
    lp_dist_bucket *b;
    int32_t n, next; /* buckets [0, next) are started (plan order: from the block's end down) */
#ifdef LP_HAVE_MPI
    MPI_Request *req;
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
#ifdef LP_HAVE_MPI
    r->req = malloc((size_t)(plan->n ? plan->n : 1) * sizeof *r->req);
    for (int32_t i = 0; r->req && i < plan->n; i++)
        r->req[i] = MPI_REQUEST_NULL;
    if (!r->req) {
        lp_dist_reducer_free(r);
        return lp_err(LP_STATUS_NO_MEMORY, "gradient reducer: out of memory");
    }
#endif
    if (!r->b) {
        lp_dist_reducer_free(r);
        return lp_err(LP_STATUS_NO_MEMORY, "gradient reducer: out of memory");
    }
    if (plan->n)
        memcpy(r->b, plan->b, (size_t)plan->n * sizeof *r->b);
    *out = r;
    return LP_OK;
}

void lp_dist_reducer_free(lp_dist_reducer *r)
{
    if (!r)
        return;
    free(r->b);
#ifdef LP_HAVE_MPI
    free(r->req);
#endif
    free(r);
}

int32_t lp_dist_reducer_started(const lp_dist_reducer *r)
{
    return r->next;
}

#ifdef LP_HAVE_MPI
static bool distributed(void)
{
    return lp_dist__mpi_on() && lp_dist_world_size() > 1;
}
#endif

/* Starts bucket r->next. */
static lp_status start_next(lp_dist_reducer *r)
{
    const lp_dist_bucket *b = &r->b[r->next];
#ifdef LP_HAVE_MPI
    if (distributed()) {
        if (b->n > INT32_MAX)
            return lp_err(LP_STATUS_RANGE,
                          "gradient bucket of %lld floats: over MPI's int count (lower --bucket-mb)",
                          (long long)b->n);
        const int64_t dims[1] = {b->n};
        lp_prof_op_push(&all_reduce_desc, dims, -1, (double)b->n * sizeof(float));
        int rc = MPI_Iallreduce(MPI_IN_PLACE, r->block + b->off, (int)b->n, MPI_FLOAT, MPI_SUM,
                                MPI_COMM_WORLD, &r->req[r->next]);
        lp_prof_range_pop();
        if (rc != MPI_SUCCESS)
            return lp_dist__mpi_err(rc, "MPI_Iallreduce");
    }
#else
    (void)b;
#endif
    r->next++;
    return LP_OK;
}

lp_status lp_dist_reducer_ready(lp_dist_reducer *r, int32_t stage)
{
    lp_status st = LP_OK;
    while (st == LP_OK && r->next < r->n && r->b[r->next].stage >= stage)
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
