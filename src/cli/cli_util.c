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

int lp_cli_weights_flag(const char *cmd, const char *fmt, lp_weight_format *out)
{
    if (!fmt) {
        *out = LP_WEIGHT_FORMAT_F32;
        return 0;
    }
    if (lp_weight_format_parse(fmt, out) != LP_OK || *out == LP_WEIGHT_FORMAT_F32)
        return lp_cli_usage_error(cmd, "--quantize expects q8_0, int8, q4_0, nf4, bf16, f32_packed or stored, got '%s'",
                                  fmt);
    return 0;
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
