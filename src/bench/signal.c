/* Ctrl-C during a bench: the first SIGINT/SIGTERM asks the sweep to stop after the current
 * run (what was measured is then written, marked incomplete); a second one restores the
 * default action and re-raises, so a stuck bench can still be killed. */
#include <signal.h>
#include <string.h>

#include "loupe/bench.h"

static volatile sig_atomic_t stop_flag;

static void on_signal(int sig)
{
    if (stop_flag) {
        signal(sig, SIG_DFL);
        raise(sig);
        return;
    }
    stop_flag = 1;
}

void lp_bench_install_signal_handlers(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

bool lp_bench_stop_requested(void)
{
    return stop_flag != 0;
}

void lp_bench_request_stop(void)
{
    stop_flag = 1;
}
