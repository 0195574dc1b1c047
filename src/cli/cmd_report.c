/* loupe report: Re-render report.html and plots from a run directory.
 * Placeholder until the report layer lands: --help describes the command, anything else exits 2. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

int lp_cmd_report(int argc, char **argv)
{
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("usage: loupe report [options]\n\nRe-render report.html and plots from a run directory.\n\nNot built yet: this command arrives with the report layer.\n");
        return LP_EXIT_OK;
    }
    return lp_cli_not_built("report", "the report layer");
}
