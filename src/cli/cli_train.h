/* Shared option handling of `loupe train` and `loupe profile`: flags, the YAML config file
 * whose keys mirror the long flags, and the run itself (private to src/cli). */
#ifndef LOUPE_CLI_TRAIN_H
#define LOUPE_CLI_TRAIN_H

#include "loupe/train.h"

/* Parses argv (flags override --config FILE) into a config and runs it. profile selects
 * loupe profile's defaults (profiling on, a short run). Returns the exit code: 0 done,
 * 1 failed, 2 usage error or an unsupported method, 130 interrupted. */
int lp_cli_train_main(const char *cmd, int argc, char **argv, bool profile);

#endif
