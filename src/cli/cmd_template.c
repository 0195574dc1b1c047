/* loupe template: render conversations through a model's chat template, exactly as the
 * model will see them (transformers' apply_chat_template output), one conversation per
 * JSONL line ({"messages": [...]}, optionally "tools"). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "loupe/io.h"
#include "loupe/text.h"

static const char usage[] =
    "usage: loupe template (--model DIR | --template FILE) --messages FILE.jsonl\n"
    "                      [--add-generation-prompt] [--bos S] [--eos S] [--vars JSON]\n"
    "\n"
    "Print each conversation of FILE.jsonl ({\"messages\": [{\"role\": ..., \"content\": ...}]}\n"
    "per line) rendered through the chat template, as transformers' apply_chat_template does.\n"
    "\n"
    "  --model DIR|FILE.gguf     tokenizer_config.json (or its directory), or a GGUF's metadata: chat_template,\n"
    "                            bos_token and eos_token\n"
    "  --template FILE           a Jinja chat template file instead (--bos/--eos give tokens)\n"
    "  --messages FILE           JSONL conversations ('-' for stdin)\n"
    "  --add-generation-prompt   end with the assistant header, ready for a reply\n"
    "  --vars JSON               further template variables, e.g. '{\"date_string\": \"26 Jul 2024\"}'\n"
    "\n"
    "Conversations are printed one after another, each followed by a newline.\n";

/* Renders every line of `in` through template text `src` (named `name` in errors) with the
 * given special tokens; one call so that any template source (tokenizer_config.json, a
 * file, GGUF metadata) plugs in. Returns an exit code. */
static int render_conversations(const char *src, const char *name, const char *bos, const char *eos, const char *vars,
                                int add_gen, FILE *in, const char *in_name)
{
    lp_chat_template *t = NULL;
    if (lp_chat_template_parse(src, strlen(src), name, &t) != LP_OK) return lp_cli_fail("template");
    char *line = NULL;
    size_t cap = 0, lineno = 0;
    ssize_t n;
    int rc = LP_EXIT_OK;
    while ((n = getline(&line, &cap, in)) >= 0) {
        lineno++;
        size_t len = (size_t)n;
        while (len && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = 0;
        if (!len) continue;
        lp_chat_vars v = {.messages_json = line, .bos_token = bos, .eos_token = eos, .extra_json = vars,
                          .add_generation_prompt = add_gen};
        char *text = NULL;
        size_t tlen = 0;
        if (lp_chat_template_render(t, &v, &text, &tlen) != LP_OK) {
            fprintf(stderr, "loupe template: %s line %zu: %s\n", in_name, lineno, lp_err_msg());
            rc = LP_EXIT_FAIL;
            break;
        }
        fwrite(text, 1, tlen, stdout);
        fputc('\n', stdout);
        free(text);
    }
    free(line);
    lp_chat_template_free(t);
    if (fflush(stdout) != 0) {
        fprintf(stderr, "loupe template: cannot write the output\n");
        rc = LP_EXIT_FAIL;
    }
    return rc;
}

int lp_cmd_template(int argc, char **argv)
{
    static const struct option longopts[] = {{"model", required_argument, NULL, 'm'},
                                             {"template", required_argument, NULL, 't'},
                                             {"messages", required_argument, NULL, 'i'},
                                             {"add-generation-prompt", no_argument, NULL, 'g'},
                                             {"bos", required_argument, NULL, 'b'},
                                             {"eos", required_argument, NULL, 'e'},
                                             {"vars", required_argument, NULL, 'v'},
                                             {"help", no_argument, NULL, 'h'},
                                             {NULL, 0, NULL, 0}};
    const char *model = NULL, *tfile = NULL, *msgs = NULL, *bos = NULL, *eos = NULL, *vars = NULL;
    int add_gen = 0, c;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case 'm': model = optarg; break;
        case 't': tfile = optarg; break;
        case 'i': msgs = optarg; break;
        case 'g': add_gen = 1; break;
        case 'b': bos = optarg; break;
        case 'e': eos = optarg; break;
        case 'v': vars = optarg; break;
        case 'h': fputs(usage, stdout); return LP_EXIT_OK;
        default: return lp_cli_usage_error("template", "unknown option");
        }
    }
    if (optind < argc) return lp_cli_usage_error("template", "unexpected argument '%s'", argv[optind]);
    if (!model == !tfile) return lp_cli_usage_error("template", "give one of --model or --template");
    if (!msgs) return lp_cli_usage_error("template", "--messages is required");

    FILE *in = strcmp(msgs, "-") ? fopen(msgs, "r") : stdin;
    if (!in) {
        fprintf(stderr, "loupe template: cannot open %s\n", msgs);
        return LP_EXIT_FAIL;
    }
    int rc;
    if (model && lp_path_is_gguf(model)) { // the template and special tokens from the GGUF's metadata
        char *src = NULL;
        lp_tokenizer *tok = NULL;
        if (lp_gguf_chat_template(model, &src) != LP_OK || lp_tokenizer_load(model, &tok) != LP_OK) {
            rc = lp_cli_fail("template");
        } else {
            const char *b = lp_tokenizer_id_to_token(tok, lp_tokenizer_special_id(tok, LP_SPECIAL_BOS));
            const char *e = lp_tokenizer_id_to_token(tok, lp_tokenizer_special_id(tok, LP_SPECIAL_EOS));
            rc = render_conversations(src, model, bos ? bos : b, eos ? eos : e, vars, add_gen, in, msgs);
        }
        lp_tokenizer_free(tok);
        free(src);
    } else if (model) {
        lp_chat_template_config cfg;
        if (lp_chat_template_config_load(model, &cfg) != LP_OK) {
            rc = lp_cli_fail("template");
        } else {
            rc = render_conversations(cfg.template_src, cfg.path, bos ? bos : cfg.bos_token, eos ? eos : cfg.eos_token, vars,
                                      add_gen, in, msgs);
            lp_chat_template_config_free(&cfg);
        }
    } else {
        char *src = NULL;
        size_t len;
        if (lp_file_read_all(tfile, &src, &len) != LP_OK) rc = lp_cli_fail("template");
        else rc = render_conversations(src, tfile, bos, eos, vars, add_gen, in, msgs);
        free(src);
    }
    if (in != stdin) fclose(in);
    return rc;
}
