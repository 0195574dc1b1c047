/* Ctrl-C during loupe train: the first SIGINT/SIGTERM asks the loop to stop after the current
 * step (it then checkpoints and writes the run files); base's stop-signal mechanism does the
 * work. */
#include "loupe/train.h"

void lp_train_install_signal_handlers(void) { lp_stop_signal_install(); }

bool lp_train_stop_requested(void) { return lp_stop_requested(); }

void lp_train_request_stop(void) { lp_stop_request(); }
