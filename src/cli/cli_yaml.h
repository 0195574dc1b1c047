/* A --config YAML file as a flat mapping of long flag to scalar value (private to
 * src/cli): the walker behind `loupe bench --config`, with the rules loupe train's config
 * reader follows (keys are long flags with '-' or '_', no nesting, lists or aliases). */
#ifndef LOUPE_CLI_YAML_H
#define LOUPE_CLI_YAML_H

#include <stddef.h>

/* Called for each key: value (key with '_' turned into '-'; line 1-based). Returns 0 to go
 * on, or an exit code that stops the walk. */
typedef int (*lp_cli_yaml_fn)(void *ctx, const char *key, const char *value, size_t line);

/* Reads path and calls fn for each pair in file order. Prints the problem on stderr as
 * "loupe <cmd>: <path>:<line>: ..." and returns LP_EXIT_FAIL (unreadable, YAML syntax,
 * lists, nested mappings, aliases) or fn's code; 0 when every pair was taken. */
int lp_cli_yaml_each(const char *cmd, const char *path, lp_cli_yaml_fn fn, void *ctx);

#endif
