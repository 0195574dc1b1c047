/* The communication layer: bucket planning (tiling, size cap, stages, order, bad plans) and,
 * in whatever world the test runs in (one process under ctest; two ranks under the mpi-labelled
 * mpirun of this same binary), the reducer's sums and the blocking collectives. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "loupe/dist.h"

/* The buckets tile [0, total): contiguous, no gap, no overlap, in plan order from the end. */
static void assert_tiles(const lp_dist_buckets *b, int64_t total)
{
    int64_t hi = total;
    for (int32_t i = 0; i < b->n; i++) {
        assert_true(b->b[i].n > 0);
        assert_int_equal(b->b[i].off + b->b[i].n, hi);
        hi = b->b[i].off;
    }
    assert_int_equal(hi, 0);
}

static void test_plan_packs_from_the_end(void **state)
{
    (void)state;
    /* four tensors of 100 floats at 16-float alignment (112 apart), a 250-float cap: two per
     * bucket; the layer numbers count down the block as backward finishes them */
    lp_dist_span s[4] = {{0, 100, -1}, {112, 100, 0}, {224, 100, 1}, {336, 100, 2}};
    lp_dist_buckets b;
    assert_int_equal(lp_dist_buckets_plan(s, 4, 448, 250 * 4, &b), LP_OK);
    assert_int_equal(b.n, 2);
    assert_tiles(&b, 448);
    assert_int_equal(b.b[0].off, 224); /* the last two tensors and the tail padding */
    assert_int_equal(b.b[0].stage, 1); /* startable once layer 1 is done */
    assert_int_equal(b.b[1].off, 0);
    assert_int_equal(b.b[1].stage, -1); /* the embeddings: only at the end */
    lp_dist_buckets_free(&b);
}

static void test_plan_unsorted_and_oversized(void **state)
{
    (void)state;
    /* a span larger than the cap is a bucket alone; input order does not matter */
    lp_dist_span s[3] = {{500, 20, 3}, {0, 400, 5}, {400, 50, 4}};
    lp_dist_buckets b;
    assert_int_equal(lp_dist_buckets_plan(s, 3, 520, 100 * 4, &b), LP_OK);
    assert_tiles(&b, 520);
    assert_int_equal(b.n, 2);
    assert_int_equal(b.b[0].off, 400); /* 20 + 50 floats fit in 100 */
    assert_int_equal(b.b[0].stage, 3);
    assert_int_equal(b.b[1].n, 400);
    assert_int_equal(b.b[1].stage, 5);
    lp_dist_buckets_free(&b);
    /* the DDP default (25 MiB) over a small model: one bucket */
    assert_int_equal(lp_dist_buckets_plan(s, 3, 520, 25 << 20, &b), LP_OK);
    assert_int_equal(b.n, 1);
    assert_tiles(&b, 520);
    assert_int_equal(b.b[0].stage, 3);
    lp_dist_buckets_free(&b);
    /* one float per bucket: one bucket per span */
    assert_int_equal(lp_dist_buckets_plan(s, 3, 520, 4, &b), LP_OK);
    assert_int_equal(b.n, 3);
    assert_tiles(&b, 520);
    lp_dist_buckets_free(&b);
    /* no gradients: no buckets */
    assert_int_equal(lp_dist_buckets_plan(s, 0, 0, 1024, &b), LP_OK);
    assert_int_equal(b.n, 0);
}

static void test_plan_refuses_bad_spans(void **state)
{
    (void)state;
    lp_dist_buckets b;
    lp_dist_span overlap[2] = {{0, 100, 0}, {50, 100, 1}};
    assert_int_equal(lp_dist_buckets_plan(overlap, 2, 200, 1024, &b), LP_STATUS_INVALID_ARG);
    lp_dist_span outside[1] = {{150, 100, 0}};
    assert_int_equal(lp_dist_buckets_plan(outside, 1, 200, 1024, &b), LP_STATUS_INVALID_ARG);
    lp_dist_span empty[1] = {{0, 0, 0}};
    assert_int_equal(lp_dist_buckets_plan(empty, 1, 200, 1024, &b), LP_STATUS_INVALID_ARG);
    lp_dist_span ok[1] = {{0, 10, 0}};
    assert_int_equal(lp_dist_buckets_plan(ok, 1, 10, 2, &b), LP_STATUS_INVALID_ARG); /* < one float */
}

/* The reducer sums a block over the ranks: rank r holds (r+1) * v[i], so the sum is
 * v[i] * W(W+1)/2 exactly (small integers times 0.5: every partial sum is exact in f32). */
static void test_reducer_sums(void **state)
{
    (void)state;
    const int32_t W = lp_dist_world_size(), r = lp_dist_rank();
    enum { N = 1000 };
    float *blk = malloc(N * sizeof *blk);
    assert_non_null(blk);
    lp_dist_span s[5] = {{0, 100, -1}, {112, 300, 0}, {412, 200, 1}, {624, 300, 2}, {930, 60, 3}};
    lp_dist_buckets plan;
    assert_int_equal(lp_dist_buckets_plan(s, 5, N, 400 * 4, &plan), LP_OK);
    assert_int_equal(plan.n, 3);
    lp_dist_reducer *red;
    assert_int_equal(lp_dist_reducer_init(&red, blk, &plan), LP_OK);
    for (int rep = 0; rep < 3; rep++) { /* the reducer resets for the next step */
        for (int i = 0; i < N; i++)
            blk[i] = (float)(r + 1) * 0.5f * (float)(i % 97 + rep);
        /* buckets [624, 1000) stage 2, [412, 624) stage 1, [0, 412) stage -1 */
        assert_int_equal(lp_dist_reducer_ready(red, 3), LP_OK); /* stage 2 is not done yet */
        assert_int_equal(lp_dist_reducer_started(red), 0);
        assert_int_equal(lp_dist_reducer_ready(red, 2), LP_OK);
        assert_int_equal(lp_dist_reducer_started(red), 1);
        assert_int_equal(lp_dist_reducer_ready(red, 0), LP_OK);
        assert_int_equal(lp_dist_reducer_started(red), 2); /* the embeddings wait for the end */
        assert_int_equal(lp_dist_reducer_finish(red), LP_OK);
        assert_int_equal(lp_dist_reducer_started(red), 0);
        const float k = (float)(W * (W + 1) / 2);
        for (int i = 0; i < N; i++)
            assert_float_equal(blk[i], k * 0.5f * (float)(i % 97 + rep), 0.0f);
    }
    lp_dist_reducer_free(red);
    lp_dist_buckets_free(&plan);
    free(blk);
}

/* Many buckets, every one released at once (the progress thread's queue), then in two halves:
 * sums exact as above. Which mode runs: the progress thread with more than one rank unless
 * LP_DIST_PROGRESS=layer (mpi_units.sh runs both, and the thread with several in flight). */
static void test_reducer_many_buckets(void **state)
{
    (void)state;
    const int32_t W = lp_dist_world_size(), r = lp_dist_rank();
    enum { NB = 40, PER = 3000, N = NB * PER };
    float *blk = malloc(N * sizeof *blk);
    lp_dist_span *s = malloc(NB * sizeof *s);
    assert_non_null(blk);
    assert_non_null(s);
    for (int i = 0; i < NB; i++)
        s[i] = (lp_dist_span){.off = (int64_t)i * PER, .n = PER, .stage = i};
    lp_dist_buckets plan;
    assert_int_equal(lp_dist_buckets_plan(s, NB, N, PER * 4, &plan), LP_OK);
    assert_int_equal(plan.n, NB);
    lp_dist_reducer *red;
    assert_int_equal(lp_dist_reducer_init(&red, blk, &plan), LP_OK);
    const char *mode = getenv("LP_DIST_PROGRESS");
    assert_int_equal(lp_dist_reducer_threaded(red), W > 1 && !(mode && !strcmp(mode, "layer")));
    for (int rep = 0; rep < 4; rep++) {
        for (int i = 0; i < N; i++)
            blk[i] = (float)(r + 1) * 0.25f * (float)(i % 101 + rep);
        if (rep % 2) { /* half during "backward", the rest at finish */
            assert_int_equal(lp_dist_reducer_ready(red, NB / 2), LP_OK);
            assert_int_equal(lp_dist_reducer_started(red), NB / 2);
        }
        assert_int_equal(lp_dist_reducer_finish(red), LP_OK);
        const float k = (float)(W * (W + 1) / 2);
        for (int i = 0; i < N; i++)
            if (blk[i] != k * 0.25f * (float)(i % 101 + rep))
                fail_msg("rep %d: float %d is %g, wanted %g", rep, i, (double)blk[i],
                         (double)(k * 0.25f * (float)(i % 101 + rep)));
    }
    lp_dist_reducer_free(red);
    lp_dist_buckets_free(&plan);
    free(s);
    free(blk);
}

/* Shards tile a run in rank order at 16-float boundaries; a short run leaves the last ranks none. */
static void test_shard_range(void **state)
{
    (void)state;
    int64_t lo, n;
    const int64_t want3[3][2] = {{0, 48}, {48, 32}, {80, 20}}; /* 100/3 = 33.3 -> 48, 66.7 -> 80 */
    for (int32_t q = 0; q < 3; q++) {
        lp_dist_shard_range(100, q, 3, &lo, &n);
        assert_int_equal(lo, want3[q][0]);
        assert_int_equal(n, want3[q][1]);
    }
    lp_dist_shard_range(10, 0, 2, &lo, &n);
    assert_int_equal(lo, 0);
    assert_int_equal(n, 10);
    lp_dist_shard_range(10, 1, 2, &lo, &n);
    assert_int_equal(n, 0);
    lp_dist_shard_range(10, 0, 1, &lo, &n); /* a world of one: all of it */
    assert_int_equal(lo, 0);
    assert_int_equal(n, 10);
    for (int64_t len = 1; len < 200; len += 7) /* tiling for any length and world */
        for (int32_t w = 1; w <= 5; w++) {
            int64_t at = 0;
            for (int32_t q = 0; q < w; q++) {
                lp_dist_shard_range(len, q, w, &lo, &n);
                assert_int_equal(lo, at);
                assert_true(n >= 0);
                assert_true(lo % 16 == 0 || n == 0);
                at += n;
            }
            assert_int_equal(at, len);
        }
}

/* ZeRO-1's reducer: after finish each rank's shard of every bucket holds the sum over ranks
 * (exact: multiples of 0.25 below 2^20; rank order of the adds does not matter for them); after
 * the gathers every rank's shard values are everywhere, for buckets gathered into another
 * buffer (the parameters) and for buckets gathered in the block (staged), three steps in a row
 * (the reducer resets). Buckets of 5 floats (fewer than 16 per rank: rank 0 holds them all)
 * to 4000. */
static void test_reducer_sharded(void **state)
{
    (void)state;
    const int32_t W = lp_dist_world_size(), r = lp_dist_rank();
    enum { NB = 6 };
    const int64_t len[NB] = {5, 4000, 37, 1024, 333, 16};
    lp_dist_span s[NB];
    int64_t N = 0;
    for (int i = 0; i < NB; i++) {
        s[i] = (lp_dist_span){.off = N, .n = len[i], .stage = i};
        N += (len[i] + 15) & ~(int64_t)15;
    }
    float *blk = malloc((size_t)N * sizeof *blk), *par = malloc((size_t)N * sizeof *par);
    assert_non_null(blk);
    assert_non_null(par);
    lp_dist_buckets plan;
    assert_int_equal(lp_dist_buckets_plan(s, NB, N, 4, &plan), LP_OK); /* a bucket per span */
    assert_int_equal(plan.n, NB);
    for (int32_t i = 0; i < NB; i++) /* the hulls, as the trainer cuts them */
        plan.b[i].n = len[NB - 1 - i];
    float *to[NB];
    for (int32_t i = 0; i < NB; i++)
        to[i] = i % 2 ? NULL : par + plan.b[i].off; /* odd: staged in the block */
    lp_dist_reducer *red;
    assert_int_equal(lp_dist_reducer_init_sharded(&red, blk, &plan, to), LP_OK);
    assert_int_equal(lp_dist_reducer_sharded(red), W > 1);
    assert_true((lp_dist_reducer_scratch_bytes(red) > 0) == (W > 1));
    if (W > 1) /* a gather before its reduction is refused */
        assert_int_equal(lp_dist_reducer_gather(red, 0), LP_STATUS_INVALID_ARG);
    const float k = (float)(W * (W + 1) / 2);
    for (int rep = 0; rep < 3; rep++) {
        for (int64_t i = 0; i < N; i++) {
            blk[i] = (float)(r + 1) * 0.25f * (float)(i % 97 + rep);
            par[i] = -1.0f;
        }
        assert_int_equal(lp_dist_reducer_ready(red, NB / 2), LP_OK);
        assert_int_equal(lp_dist_reducer_finish(red), LP_OK);
        for (int32_t i = 0; i < NB; i++) {
            const lp_dist_bucket *b = &plan.b[i];
            int64_t lo, n;
            lp_dist_shard_range(b->n, r, W, &lo, &n);
            for (int64_t j = b->off + lo; j < b->off + lo + n; j++)
                if (blk[j] != k * 0.25f * (float)(j % 97 + rep))
                    fail_msg("rep %d bucket %d: float %lld is %g, wanted %g", rep, (int)i, (long long)j,
                             (double)blk[j], (double)(k * 0.25f * (float)(j % 97 + rep)));
            float *d = to[i] ? to[i] : blk + b->off; /* "the optimizer": this rank's marks */
            for (int64_t j = lo; j < lo + n; j++)
                d[j] = (float)(1000 * r + rep) + (float)(j % 7);
            if (i == 2) /* the first three early, the rest at the finish */
                assert_int_equal(lp_dist_reducer_gather(red, i), LP_OK);
        }
        assert_int_equal(lp_dist_reducer_gather_finish(red), LP_OK);
        for (int32_t i = 0; i < NB; i++) {
            const float *d = to[i] ? to[i] : blk + plan.b[i].off;
            for (int32_t q = 0; q < W; q++) {
                int64_t lo, n;
                lp_dist_shard_range(plan.b[i].n, q, W, &lo, &n);
                for (int64_t j = lo; j < lo + n; j++)
                    if (d[j] != (float)(1000 * q + rep) + (float)(j % 7))
                        fail_msg("rep %d bucket %d: float %lld of rank %d's shard is %g after the gather", rep,
                                 (int)i, (long long)j, (int)q, (double)d[j]);
            }
        }
    }
    lp_dist_reducer_free(red);
    lp_dist_buckets_free(&plan);
    free(blk);
    free(par);
}

static void test_collectives(void **state)
{
    (void)state;
    const int32_t W = lp_dist_world_size(), r = lp_dist_rank();
    double d[2] = {(double)r, 1.0};
    assert_int_equal(lp_dist_allreduce_sum_f64(d, 2), LP_OK);
    assert_float_equal(d[0], W * (W - 1) / 2.0, 0.0);
    assert_float_equal(d[1], (double)W, 0.0);
    double m = (double)r;
    assert_int_equal(lp_dist_allreduce_max_f64(&m, 1), LP_OK);
    assert_float_equal(m, (double)(W - 1), 0.0);
    float f[3] = {1.5f, 2.0f, (float)r};
    assert_int_equal(lp_dist_allreduce_sum_f32(f, 3), LP_OK);
    assert_float_equal(f[0], 1.5f * (float)W, 0.0f);
    char msg[16] = "";
    if (r == 0)
        snprintf(msg, sizeof msg, "from rank 0");
    assert_int_equal(lp_dist_broadcast(msg, sizeof msg, 0), LP_OK);
    assert_string_equal(msg, "from rank 0");
    int32_t mine = 100 + r, *all = calloc((size_t)W, sizeof *all);
    assert_int_equal(lp_dist_allgather(&mine, all, sizeof mine), LP_OK);
    for (int32_t i = 0; i < W; i++)
        assert_int_equal(all[i], 100 + i);
    free(all);
    assert_int_equal(lp_dist_barrier(), LP_OK);
    assert_string_equal(lp_dist_backend(), W > 1 ? "mpi" : "none");
}

int main(void)
{
    lp_status st = lp_dist_init();
    if (st == LP_STATUS_UNSUPPORTED && !lp_dist_built_with_mpi()) { /* mpirun of a build without MPI */
        printf("SKIP: %s\n", lp_err_msg());
        return 77;
    }
    if (st != LP_OK) {
        fprintf(stderr, "lp_dist_init: %s\n", lp_err_msg());
        return 1;
    }
    const char *mode = getenv("LP_DIST_PROGRESS");
    if (mode && !strcmp(mode, "bogus")) { /* mpi_units.sh: every rank refuses it, naming it */
        float blk[4] = {0};
        lp_dist_span sp = {0, 4, 0};
        lp_dist_buckets plan;
        lp_dist_reducer *red = NULL;
        if (lp_dist_buckets_plan(&sp, 1, 4, 16, &plan) != LP_OK)
            return 1;
        st = lp_dist_reducer_init(&red, blk, &plan);
        lp_dist_buckets_free(&plan);
        lp_dist_reducer_free(red);
        lp_dist_finalize();
        if (lp_dist_world_size() > 1 && st != LP_STATUS_INVALID_ARG)
            return 1;
        printf("refused: %s\n", st == LP_OK ? "(a world of one: no reducer thread)" : lp_err_msg());
        return 0;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plan_packs_from_the_end),
        cmocka_unit_test(test_plan_unsorted_and_oversized),
        cmocka_unit_test(test_plan_refuses_bad_spans),
        cmocka_unit_test(test_reducer_sums),
        cmocka_unit_test(test_reducer_many_buckets),
        cmocka_unit_test(test_shard_range),
        cmocka_unit_test(test_reducer_sharded),
        cmocka_unit_test(test_collectives),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    lp_dist_finalize();
    return rc;
}
