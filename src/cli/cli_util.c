/* Uniform error reporting and small argument parsers for the subcommands. */
#include "cli.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>

#include "loupe/base.h"

#ifndef LP_GIT_REV
#define LP_GIT_REV "unknown"
#endif
#ifndef LP_VERSION
#define LP_VERSION "0.0.0"
#endif

int lp_cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "loupe %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry 'loupe %s --help'.\n", cmd);
    return LP_EXIT_USAGE;
}

int lp_cli_fail(const char *cmd)
{
    fprintf(stderr, "loupe %s: %s\n", cmd, lp_err_msg());
    return LP_EXIT_FAIL;
}

int lp_cli_not_built(const char *cmd, const char *what)
{
    fprintf(stderr, "loupe %s: not built yet (%s). See README.md for what works today.\n", cmd, what);
    return LP_EXIT_USAGE;
}

int lp_cli_parse_long(const char *cmd, const char *flag, const char *text, long min, long max, long *out)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || end == text || *end != '\0' || v < min || v > max) {
        lp_cli_usage_error(cmd, "%s expects an integer in [%ld, %ld], got '%s'", flag, min, max, text);
        return -1;
    }
    *out = v;
    return 0;
}

const char *lp_cli_version(void) { return "loupe " LP_VERSION " (" LP_GIT_REV ")"; }
