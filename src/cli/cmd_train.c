/* loupe train: fine-tune a Hugging Face classifier (full fine-tuning; LoRA/QLoRA later).
 * Flags and the YAML config are handled in cli_train_opts.c, shared with loupe profile. */
#include "cli.h"
#include "cli_train.h"

int lp_cmd_train(int argc, char **argv) { return lp_cli_train_main("train", argc, argv, false); }
