/* Ctrl-C during loupe train: the first SIGINT/SIGTERM asks the loop to stop after the current
 * step (it then checkpoints and writes the run files); base's stop-signal mechanism does the
 * work. SIGUSR1 asks the same: OpenMPI's mpirun forwards it to every rank at once, whereas it
 * turns a Ctrl-C into SIGTERM to the ranks only odls_base_sigkill_timeout seconds later
 * (default 1) and SIGKILL as long after that (the ranks agree on the step to stop at and rank 0
 * checkpoints within that time: tests/dist/mpi_sigint.sh). */
#include <signal.h>
#include <string.h>

#include "loupe/train.h"

static void on_usr1(int sig)
{
    (void)sig;
    lp_stop_request(); /* sets a sig_atomic_t */
}

void lp_train_install_signal_handlers(void)
{
    lp_stop_signal_install();
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);
}

bool lp_train_stop_requested(void) { return lp_stop_requested(); }

void lp_train_request_stop(void) { lp_stop_request(); }
