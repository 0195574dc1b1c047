/* loupe quantize: a GGUF model re-encoded as Q8_0, Q4_0 or F32 (lp_gguf_quantize_file), or a
 * Hugging Face directory of the llama family (qwen2, llama) written as one
 * (lp_model_save_gguf): files llama.cpp and the `gguf` package read, and loupe runs with its
 * weights kept as stored. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "loupe/io.h"
#include "loupe/kernels.h"
#include "loupe/models.h"

static const char usage[] =
    "usage: loupe quantize --model FILE.gguf|DIR --type f32|q8_0|q4_0 --output OUT.gguf [--seed N]\n"
    "\n"
    "Write a GGUF model whose matrices are encoded as Q8_0 or Q4_0 (ggml's reference\n"
    "quantizers, byte for byte what llama.cpp's converter writes) or F32; norms stay F32.\n"
    "From a GGUF: a copy, metadata (tokenizer, chat template, hyperparameters) copied. From a\n"
    "Hugging Face directory of a qwen2 or llama causal LM: the hyperparameters under\n"
    "llama.cpp's keys and the directory's tokenizer.json (byte-level BPE) as its gpt2\n"
    "vocabulary (tokens padded to vocab_size, merges, special ids, chat template), so\n"
    "llama.cpp loads the file; a directory with config.json and no weights gets loupe's random\n"
    "initialization (--seed). OUT.gguf appears only once complete (written as OUT.gguf.tmp,\n"
    "then renamed).\n"
    "\n"
    "  --model FILE.gguf   the source model (any type loupe dequantizes: F32, F16, BF16,\n"
    "                      Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K)\n"
    "  --model DIR         a Hugging Face directory (config.json, safetensors, tokenizer.json)\n"
    "  --type T            f32, q8_0 or q4_0\n"
    "  --output OUT.gguf   the file to write\n"
    "  --seed N            initialization of a directory without weights (42)\n";

/* A Hugging Face directory through the model loader (f32 weights, any dtype it converts). */
static int from_dir(const char *dir, const char *out, uint32_t type, unsigned long long seed)
{
    lp_model_options o;
    lp_model_options_init(&o);
    o.quiet = true;
    o.no_grad = true;
    o.seed = seed;
    lp_model *m = NULL;
    if (lp_model_load(dir, &o, &m) != LP_OK)
        return lp_cli_fail("quantize");
    const lp_status st = lp_model_save_gguf(m, out, type);
    lp_model_free(m);
    if (st != LP_OK)
        return lp_cli_fail("quantize");
    char tj[4200];
    struct stat sb;
    snprintf(tj, sizeof tj, "%s/tokenizer.json", dir);
    if (stat(tj, &sb) != 0)
        fprintf(stderr, "loupe quantize: note: %s has no tokenizer.json; %s carries no tokenizer (llama.cpp "
                        "will not load it)\n",
                dir, out);
    return LP_EXIT_OK;
}

int lp_cmd_quantize(int argc, char **argv)
{
    static const struct option longopts[] = {{"model", required_argument, NULL, 'm'},
                                             {"type", required_argument, NULL, 't'},
                                             {"output", required_argument, NULL, 'o'},
                                             {"seed", required_argument, NULL, 's'},
                                             {"help", no_argument, NULL, 'h'},
                                             {NULL, 0, NULL, 0}};
    const char *model = NULL, *type = NULL, *out = NULL;
    unsigned long long seed = 42;
    int c;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case 'm': model = optarg; break;
        case 't': type = optarg; break;
        case 'o': out = optarg; break;
        case 's': {
            char *end;
            seed = strtoull(optarg, &end, 10);
            if (!*optarg || *end) return lp_cli_usage_error("quantize", "--seed '%s' is not a number", optarg);
            break;
        }
        case 'h': fputs(usage, stdout); return LP_EXIT_OK;
        default: return lp_cli_usage_error("quantize", "unknown option");
        }
    }
    if (optind < argc) return lp_cli_usage_error("quantize", "unexpected argument '%s'", argv[optind]);
    if (!model || !type || !out) return lp_cli_usage_error("quantize", "--model, --type and --output are required");
    uint32_t t;
    if (!strcmp(type, "q8_0")) t = LP_GGML_TYPE_Q8_0;
    else if (!strcmp(type, "q4_0")) t = LP_GGML_TYPE_Q4_0;
    else if (!strcmp(type, "f32")) t = LP_GGML_TYPE_F32;
    else return lp_cli_usage_error("quantize", "--type '%s' (expected f32, q8_0 or q4_0)", type);
    if (!strcmp(model, out)) return lp_cli_usage_error("quantize", "--output must differ from --model");
    struct stat sb;
    if (!lp_path_is_gguf(model) && stat(model, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        const int rc = from_dir(model, out, t, seed);
        if (rc == LP_EXIT_OK) fprintf(stderr, "loupe quantize: wrote %s (%s)\n", out, type);
        return rc;
    }
    if (!lp_path_is_gguf(model)) {
        fprintf(stderr, "loupe quantize: %s: neither a .gguf file nor a model directory\n", model);
        return LP_EXIT_FAIL;
    }
    if (lp_gguf_quantize_file(model, out, t) != LP_OK) return lp_cli_fail("quantize");
    fprintf(stderr, "loupe quantize: wrote %s (%s)\n", out, type);
    return LP_EXIT_OK;
}
