/* loupe tokenize: Print token ids for each line on stdin.
 * Placeholder until the tokenizers lands: --help describes the command, anything else exits 2. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

int lp_cmd_tokenize(int argc, char **argv)
{
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("usage: loupe tokenize [options]\n\nPrint token ids for each line on stdin.\n\nNot built yet: this command arrives with the tokenizers.\n");
        return LP_EXIT_OK;
    }
    return lp_cli_not_built("tokenize", "the tokenizers");
}
