/* Private to the CLI: the prompts `loupe generate` reads (cli_gen_prompts.c). */
#ifndef LOUPE_CLI_GEN_H
#define LOUPE_CLI_GEN_H

#include <stddef.h>

#include "loupe/base.h"

typedef struct lp_cli_gen_prompt {
    char *text;          /* a plain prompt (owned), or NULL */
    char *messages_json; /* a conversation's "messages" array as JSON (owned), or NULL */
    size_t line;         /* 1-based line in the prompts file; 0 for --prompt */
} lp_cli_gen_prompt;

typedef struct lp_cli_gen_prompts {
    lp_cli_gen_prompt *items;
    size_t n;
} lp_cli_gen_prompts;

/* Appends one prompt (copied). */
lp_status lp_cli_gen_prompt_one(lp_cli_gen_prompts *p, const char *text);
/* Appends every prompt of path ('-' = stdin): a line is a prompt, or a JSON object with
 * "prompt" or "messages". Errors: IO (unreadable), FORMAT naming the file and line. */
lp_status lp_cli_gen_prompts_read(lp_cli_gen_prompts *p, const char *path);
void lp_cli_gen_prompts_free(lp_cli_gen_prompts *p);

#endif
