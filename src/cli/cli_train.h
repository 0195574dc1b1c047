/* Shared option handling of `loupe train` and `loupe profile`: flags, the YAML config file
 * whose keys mirror the long flags, and the run itself (private to src/cli). */
#ifndef LOUPE_CLI_TRAIN_H
#define LOUPE_CLI_TRAIN_H

#include <stddef.h>

#include "loupe/train.h"

/* Owned strings that config values point into: they live until the run ends. */
typedef struct lp_cli_strpool {
    char **s;
    size_t n, cap;
} lp_cli_strpool;

void lp_cli_strpool_free(lp_cli_strpool *p);

/* Applies a --config YAML file held in memory (len bytes, need not be NUL-terminated; path
 * names it in messages) to c: a mapping of long flag (with '-' or '_') to scalar, each value
 * checked as the flag's is; value strings are copied into pool. Prints the problem on stderr
 * and returns the exit code: 0, LP_EXIT_FAIL (YAML syntax, lists, nested mappings, aliases),
 * LP_EXIT_USAGE (unknown key, bad value). c may be partly updated on error. */
int lp_cli_train_yaml(const char *cmd, const char *path, const char *text, size_t len, lp_train_config *c,
                      lp_cli_strpool *pool);

/* Parses argv (flags override --config FILE) into a config and runs it. profile selects
 * loupe profile's defaults (profiling on, a short run). Returns the exit code: 0 done,
 * 1 failed (a bad or unsupported file too), 2 usage error (a bad flag, or a flag value
 * the model refuses), 130 interrupted. */
int lp_cli_train_main(const char *cmd, int argc, char **argv, bool profile);

#endif
