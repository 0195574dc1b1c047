/* loupe bench: Inference benchmark: batch-size sweep, latency, throughput, memory, accuracy.
 * Placeholder until the inference benchmark lands: --help describes the command, anything else exits 2. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

int lp_cmd_bench(int argc, char **argv)
{
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("usage: loupe bench [options]\n\nInference benchmark: batch-size sweep, latency, throughput, memory, accuracy.\n\nNot built yet: this command arrives with the inference benchmark.\n");
        return LP_EXIT_OK;
    }
    return lp_cli_not_built("bench", "the inference benchmark");
}
