/* loupe analyze: Key averages and per-step breakdown of a Kineto trace.
 * Placeholder until the trace analyzer lands: --help describes the command, anything else exits 2. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

int lp_cmd_analyze(int argc, char **argv)
{
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("usage: loupe analyze [options]\n\nKey averages and per-step breakdown of a Kineto trace.\n\nNot built yet: this command arrives with the trace analyzer.\n");
        return LP_EXIT_OK;
    }
    return lp_cli_not_built("analyze", "the trace analyzer");
}
