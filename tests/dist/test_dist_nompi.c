/* A loupe built without MPI, started as one of several ranks (mpirun sets
 * OMPI_COMM_WORLD_SIZE, Hydra PMI_SIZE), refuses instead of training N copies of one run.
 * This binary compiles src/dist/dist.c without LP_HAVE_MPI, whatever the build has. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "loupe/dist.h"

static void test_refuses_under_mpirun(void **state)
{
    (void)state;
    assert_false(lp_dist_built_with_mpi());
    setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
    assert_int_equal(lp_dist_env_world_size(), 2);
    assert_int_equal(lp_dist_init(), LP_STATUS_UNSUPPORTED);
    assert_non_null(strstr(lp_err_msg(), "built without MPI"));
    assert_non_null(strstr(lp_err_msg(), "2 MPI ranks"));
    unsetenv("OMPI_COMM_WORLD_SIZE");
    setenv("PMI_SIZE", "3", 1);
    assert_int_equal(lp_dist_init(), LP_STATUS_UNSUPPORTED);
    unsetenv("PMI_SIZE");
    setenv("OMPI_COMM_WORLD_SIZE", "1", 1); /* mpirun -np 1 is a plain run */
    assert_int_equal(lp_dist_init(), LP_OK);
    assert_int_equal(lp_dist_world_size(), 1);
    assert_int_equal(lp_dist_rank(), 0);
    float f = 2.0f;
    assert_int_equal(lp_dist_allreduce_sum_f32(&f, 1), LP_OK);
    assert_float_equal(f, 2.0f, 0.0f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_refuses_under_mpirun)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
