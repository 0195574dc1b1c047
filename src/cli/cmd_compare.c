/* loupe compare: Compare runs side by side.
 * Placeholder until the report layer lands: --help describes the command, anything else exits 2. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

int lp_cmd_compare(int argc, char **argv)
{
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("usage: loupe compare [options]\n\nCompare runs side by side.\n\nNot built yet: this command arrives with the report layer.\n");
        return LP_EXIT_OK;
    }
    return lp_cli_not_built("compare", "the report layer");
}
