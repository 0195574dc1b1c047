/* loupe peak: Measure this machine's FLOP/s and bandwidth ceilings.
 * Placeholder until the peak-rate probe lands: --help describes the command, anything else exits 2. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

int lp_cmd_peak(int argc, char **argv)
{
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("usage: loupe peak [options]\n\nMeasure this machine's FLOP/s and bandwidth ceilings.\n\nNot built yet: this command arrives with the peak-rate probe.\n");
        return LP_EXIT_OK;
    }
    return lp_cli_not_built("peak", "the peak-rate probe");
}
