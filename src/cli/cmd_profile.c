/* loupe profile: a short training run with the profiler on (the seeds' profile_analysis.py):
 * the same flags as loupe train plus the schedule and export flags. */
#include "cli.h"
#include "cli_train.h"

int lp_cmd_profile(int argc, char **argv) { return lp_cli_train_main("profile", argc, argv, true); }
