/* loupe quantize: a GGUF model re-encoded as Q8_0 or Q4_0 (lp_gguf_quantize_file), a file
 * llama.cpp and the `gguf` package read, and loupe runs with its weights kept as stored. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "loupe/io.h"
#include "loupe/kernels.h"

static const char usage[] =
    "usage: loupe quantize --model FILE.gguf --type q8_0|q4_0 --output OUT.gguf\n"
    "\n"
    "Write a copy of a GGUF model whose matrices are re-encoded as Q8_0 or Q4_0 (ggml's\n"
    "reference quantizers, byte for byte what llama.cpp's converter writes); norms stay F32,\n"
    "metadata (tokenizer, chat template, hyperparameters) is copied. OUT.gguf appears only\n"
    "once complete (written as OUT.gguf.tmp, then renamed).\n"
    "\n"
    "  --model FILE.gguf   the source model (any type loupe dequantizes: F32, F16, BF16,\n"
    "                      Q8_0, Q4_0, Q4_1, Q4_K, Q6_K)\n"
    "  --type T            q8_0 or q4_0\n"
    "  --output OUT.gguf   the file to write\n";

int lp_cmd_quantize(int argc, char **argv)
{
    static const struct option longopts[] = {{"model", required_argument, NULL, 'm'},
                                             {"type", required_argument, NULL, 't'},
                                             {"output", required_argument, NULL, 'o'},
                                             {"help", no_argument, NULL, 'h'},
                                             {NULL, 0, NULL, 0}};
    const char *model = NULL, *type = NULL, *out = NULL;
    int c;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case 'm': model = optarg; break;
        case 't': type = optarg; break;
        case 'o': out = optarg; break;
        case 'h': fputs(usage, stdout); return LP_EXIT_OK;
        default: return lp_cli_usage_error("quantize", "unknown option");
        }
    }
    if (optind < argc) return lp_cli_usage_error("quantize", "unexpected argument '%s'", argv[optind]);
    if (!model || !type || !out) return lp_cli_usage_error("quantize", "--model, --type and --output are required");
    uint32_t t;
    if (!strcmp(type, "q8_0")) t = LP_GGML_TYPE_Q8_0;
    else if (!strcmp(type, "q4_0")) t = LP_GGML_TYPE_Q4_0;
    else return lp_cli_usage_error("quantize", "--type '%s' (expected q8_0 or q4_0)", type);
    if (!lp_path_is_gguf(model)) {
        fprintf(stderr,
                "loupe quantize: %s: not a .gguf file; loupe quantize reads GGUF models (convert a Hugging Face "
                "directory with llama.cpp's convert_hf_to_gguf.py, or run it quantized at load with --quantize)\n",
                model);
        return LP_EXIT_FAIL;
    }
    if (!strcmp(model, out)) return lp_cli_usage_error("quantize", "--output must differ from --model");
    if (lp_gguf_quantize_file(model, out, t) != LP_OK) return lp_cli_fail("quantize");
    fprintf(stderr, "loupe quantize: wrote %s (%s)\n", out, type);
    return LP_EXIT_OK;
}
