/* Ctrl-C handling shared by the long-running commands (train, bench): the first
 * SIGINT/SIGTERM sets a flag the running loop polls (it then finishes its unit of work and
 * writes what it has); a second one restores the default action and re-raises, so a stuck
 * run can still be killed. */
#include <signal.h>
#include <string.h>

#include "loupe/base.h"

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

void lp_stop_signal_install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

bool lp_stop_requested(void) { return stop_flag != 0; }

void lp_stop_request(void) { stop_flag = 1; }
