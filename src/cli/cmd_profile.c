/* loupe profile: A short training run with the profiler on.
 * Placeholder until the training engine lands: --help describes the command, anything else exits 2. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

int lp_cmd_profile(int argc, char **argv)
{
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("usage: loupe profile [options]\n\nA short training run with the profiler on.\n\nNot built yet: this command arrives with the training engine.\n");
        return LP_EXIT_OK;
    }
    return lp_cli_not_built("profile", "the training engine");
}
