/* dist's private seam: the MPI communicator's error text, shared by dist.c and reducer.c. */
#ifndef LP_DIST_INTERNAL_H
#define LP_DIST_INTERNAL_H

#include "loupe/dist.h"

#ifdef LP_HAVE_MPI
#include <mpi.h>
/* LP_STATUS_IO naming the collective and MPI's message for rc (rc != MPI_SUCCESS). */
lp_status lp_dist__mpi_err(int rc, const char *what);
/* Whether MPI_Init ran (false: a world of one, even in an MPI build). */
bool lp_dist__mpi_on(void);
/* Whether MPI_Init_thread gave MPI_THREAD_MULTIPLE (the reducer's progress thread needs it). */
bool lp_dist__thread_multiple(void);
#endif

#endif
