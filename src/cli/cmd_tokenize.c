/* loupe tokenize: print the token ids of each line on stdin, one output line per input
 * line, through a tokenizer.json / vocab.txt tokenizer. Lines are split on '\n' only;
 * invalid UTF-8 is replaced by U+FFFD (maximal subparts, as Python's errors="replace"). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "loupe/text.h"

static const char usage[] =
    "usage: loupe tokenize --tokenizer DIR_OR_FILE [--max-length N] [--pair] [--no-special]\n"
    "\n"
    "Print token ids for each line on stdin: one line of space-separated ids per input line.\n"
    "\n"
    "  --tokenizer P    tokenizer.json, a BERT vocab.txt, or a directory holding one\n"
    "  --max-length N   truncate to N ids, special tokens included (pairs: longest first)\n"
    "  --pair           each line is \"textA<TAB>textB\" (split at the first tab)\n"
    "  --no-special     do not add [CLS]/[SEP]/BOS (the post-processor template)\n"
    "\n"
    "Special tokens written in the text ([SEP], <|endoftext|>, ...) are recognised as HF does.\n"
    "Truncation and padding written in tokenizer.json are not applied; padding never is.\n";

static char *put_int(char *p, int32_t v)
{
    char tmp[12];
    int n = 0;
    uint32_t u = v < 0 ? (uint32_t)(-(int64_t)v) : (uint32_t)v;
    do tmp[n++] = (char)('0' + u % 10), u /= 10; while (u);
    if (v < 0) *p++ = '-';
    while (n) *p++ = tmp[--n];
    return p;
}

int lp_cmd_tokenize(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"tokenizer", required_argument, NULL, 't'}, {"max-length", required_argument, NULL, 'm'},
        {"pair", no_argument, NULL, 'p'},           {"no-special", no_argument, NULL, 'n'},
        {"help", no_argument, NULL, 'h'},           {NULL, 0, NULL, 0}};
    const char *path = NULL;
    long max_len = 0;
    int pair = 0, no_special = 0, c;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case 't': path = optarg; break;
        case 'm':
            if (lp_cli_parse_long("tokenize", "--max-length", optarg, 1, 1L << 30, &max_len)) return LP_EXIT_USAGE;
            break;
        case 'p': pair = 1; break;
        case 'n': no_special = 1; break;
        case 'h': fputs(usage, stdout); return LP_EXIT_OK;
        default: return lp_cli_usage_error("tokenize", "unknown option");
        }
    }
    if (optind < argc) return lp_cli_usage_error("tokenize", "unexpected argument '%s'", argv[optind]);
    if (!path) return lp_cli_usage_error("tokenize", "--tokenizer is required");

    lp_tokenizer *tok = NULL;
    if (lp_tokenizer_load(path, &tok) != LP_OK) return lp_cli_fail("tokenize");
    lp_encode_opts opts = lp_encode_opts_default();
    opts.add_special_tokens = !no_special;
    opts.max_length = (int32_t)max_len;

    static char obuf[1 << 16];
    setvbuf(stdout, obuf, _IOFBF, sizeof obuf);
    lp_encoding enc = {0};
    char *line = NULL, *out = NULL;
    size_t cap = 0, out_cap = 0, lineno = 0;
    ssize_t n;
    int rc = LP_EXIT_OK;
    while ((n = getline(&line, &cap, stdin)) >= 0) {
        lineno++;
        size_t len = (size_t)n;
        if (len && line[len - 1] == '\n') len--;
        const char *b = NULL;
        size_t alen = len, blen = 0;
        if (pair) {
            char *tab = memchr(line, '\t', len);
            if (tab) {
                alen = (size_t)(tab - line);
                b = tab + 1;
                blen = len - alen - 1;
            } else {
                b = "";
            }
        }
        if (lp_tokenizer_encode_n(tok, line, alen, b, blen, &opts, &enc) != LP_OK) {
            fprintf(stderr, "loupe tokenize: line %zu: %s\n", lineno, lp_err_msg());
            rc = LP_EXIT_FAIL;
            break;
        }
        if (enc.len * 12 + 2 > out_cap) {
            out_cap = enc.len * 12 + 64;
            char *no = realloc(out, out_cap);
            if (!no) {
                fprintf(stderr, "loupe tokenize: out of memory\n");
                rc = LP_EXIT_FAIL;
                break;
            }
            out = no;
        }
        char *p = out;
        for (size_t i = 0; i < enc.len; i++) {
            if (i) *p++ = ' ';
            p = put_int(p, enc.ids[i]);
        }
        *p++ = '\n';
        fwrite(out, 1, (size_t)(p - out), stdout);
    }
    if (fflush(stdout) != 0 && rc == LP_EXIT_OK) {
        fprintf(stderr, "loupe tokenize: cannot write the output\n");
        rc = LP_EXIT_FAIL;
    }
    free(line);
    free(out);
    lp_encoding_free(&enc);
    lp_tokenizer_free(tok);
    return rc;
}
