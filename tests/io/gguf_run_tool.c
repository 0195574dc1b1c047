/* Test helper for gguf_qwen2_llama.py: loupe on a GGUF file, as llama.cpp is asked there.
 * For each line of stdin (a prompt): the ids the GGUF's own tokenizer gives it, the logits
 * of its last position after a prefill (appended to LOGITS.f32 as float32), and N greedy
 * tokens (lp_generate, no stop ids), printed as one JSON line {"ids": [...], "greedy": [...]}.
 * The weights are kept as stored (the integer kernels for Q8_0 / Q4_0), or dequantized to
 * f32 at load with --dequantize (an F32 file kept as stored runs all in f32 too, its LM
 * head included: quant_setup.c gives a head a quantized copy only from the file's own
 * blocks or a --quantize format).
 *   gguf_run_tool MODEL.gguf LOGITS.f32 N [--dequantize] < prompts.txt */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loupe/core.h"
#include "loupe/generate.h"
#include "loupe/io.h"
#include "loupe/models.h"
#include "loupe/text.h"

static int die(const char *what)
{
    fprintf(stderr, "gguf_run_tool: %s: %s\n", what, lp_err_msg());
    return 1;
}

static void print_ids(const char *key, const int32_t *ids, size_t n)
{
    printf("\"%s\": [", key);
    for (size_t i = 0; i < n; i++)
        printf("%s%d", i ? ", " : "", ids[i]);
    printf("]");
}

int main(int argc, char **argv)
{
    if (argc < 4)
        return fprintf(stderr, "usage: gguf_run_tool MODEL.gguf LOGITS.f32 N [--dequantize] < prompts\n"), 2;
    const int32_t n_new = atoi(argv[3]);
    lp_model_options o;
    lp_model_options_init(&o);
    o.quiet = true;
    o.no_grad = true;
    o.exec = LP_EXEC_MODE_FUSED;
    o.weights = argc > 4 && !strcmp(argv[4], "--dequantize") ? LP_WEIGHT_FORMAT_F32 : LP_WEIGHT_FORMAT_STORED;
    lp_threads_init();
    lp_model *m = NULL;
    if (lp_model_load(argv[1], &o, &m) != LP_OK)
        return die(argv[1]);
    char *tj = NULL;
    lp_tokenizer *tok = NULL;
    if (lp_gguf_tokenizer_json(argv[1], &tj) != LP_OK || lp_tokenizer_load_json(tj, strlen(tj), argv[1], &tok) != LP_OK)
        return die("tokenizer");
    free(tj);
    FILE *lf = fopen(argv[2], "wb");
    if (!lf)
        return fprintf(stderr, "gguf_run_tool: cannot create %s\n", argv[2]), 1;
    const int64_t V = lp_model_config_get(m)->vocab_size;
    float *logits = malloc((size_t)V * sizeof *logits);
    char line[4096];
    lp_encoding enc = {0};
    while (fgets(line, sizeof line, stdin)) {
        line[strcspn(line, "\n")] = '\0';
        if (lp_tokenizer_encode(tok, line, NULL, NULL, &enc) != LP_OK)
            return die("encode");
        const int32_t n = (int32_t)enc.len;
        lp_kv_cache *kv = NULL;
        if (lp_model_kv_init(m, 1, n + 1, LP_DTYPE_F32, &kv) != LP_OK ||
            lp_model_prefill(m, kv, enc.ids, NULL, 1, n, logits) != LP_OK)
            return die("prefill");
        lp_kv_cache_free(kv);
        if (fwrite(logits, sizeof *logits, (size_t)V, lf) != (size_t)V)
            return fprintf(stderr, "gguf_run_tool: write failed on %s\n", argv[2]), 1;
        lp_gen_opts go;
        lp_gen_opts_init(&go);
        go.max_new_tokens = n_new;
        lp_gen_result r;
        const int32_t *pp = enc.ids;
        if (lp_generate(m, NULL, &pp, &n, 1, &go, &r) != LP_OK)
            return die("generate");
        printf("{");
        print_ids("ids", enc.ids, enc.len);
        printf(", ");
        print_ids("greedy", r.ids, (size_t)r.n_ids);
        printf("}\n");
        fflush(stdout);
        lp_gen_result_free(&r);
    }
    lp_encoding_free(&enc);
    free(logits);
    fclose(lf);
    lp_tokenizer_free(tok);
    lp_model_free(m);
    return 0;
}
