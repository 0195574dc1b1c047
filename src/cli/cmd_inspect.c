/* loupe inspect: Architecture, parameter counts and predicted memory of a model.
 * Placeholder until the model loader lands: --help describes the command, anything else exits 2. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

int lp_cmd_inspect(int argc, char **argv)
{
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("usage: loupe inspect [options]\n\nArchitecture, parameter counts and predicted memory of a model.\n\nNot built yet: this command arrives with the model loader.\n");
        return LP_EXIT_OK;
    }
    return lp_cli_not_built("inspect", "the model loader");
}
