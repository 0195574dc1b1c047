/* Ctrl-C during loupe bench: the first SIGINT/SIGTERM asks the sweep to stop after the current
 * run (what was measured is then written, marked incomplete); base's stop-signal mechanism
 * does the work. */
#include "loupe/bench.h"

void lp_bench_install_signal_handlers(void) { lp_stop_signal_install(); }

bool lp_bench_stop_requested(void) { return lp_stop_requested(); }

void lp_bench_request_stop(void) { lp_stop_request(); }
