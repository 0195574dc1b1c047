/* loupe train: Fine-tune a Hugging Face classifier (full, LoRA or QLoRA).
 * Placeholder until the training engine lands: --help describes the command, anything else exits 2. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

int lp_cmd_train(int argc, char **argv)
{
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("usage: loupe train [options]\n\nFine-tune a Hugging Face classifier (full, LoRA or QLoRA).\n\nNot built yet: this command arrives with the training engine.\n");
        return LP_EXIT_OK;
    }
    return lp_cli_not_built("train", "the training engine");
}
