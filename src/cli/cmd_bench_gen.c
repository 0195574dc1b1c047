/* loupe bench-gen: llama-bench's measurements on a loupe model, with llama-bench's options
 * (-p 512 -n 128 -t 1,2 -r 5): prompt processing and token generation rates with their
 * spread per thread count, the GB/s and GFLOP/s they imply and their share of the machine's
 * measured ceilings, and the thread count where decoding stops scaling. A table on stdout,
 * and JSON with --json FILE. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "loupe/generate.h"
#include "loupe/kernels.h"

static const char usage[] =
    "usage: loupe bench-gen -m MODEL [-p N] [-n N] [-t LIST] [-r N] [--kv-cache f32|f16] [--json FILE]\n"
    "\n"
    "Prompt processing (pp) and token generation (tg) speed, as llama-bench measures them.\n"
    "\n"
    "  -m, --model DIR|FILE.gguf   a causal LM of the llama family\n"
    "  -p, --n-prompt N            prompt tokens of the pp test (512; 0 = none)\n"
    "  -n, --n-gen N               generated tokens of the tg test (128; 0 = none)\n"
    "  -t, --threads LIST          thread counts, comma-separated (1,2), in increasing order\n"
    "  -r, --repetitions N         timed runs per test (5), after one untimed\n"
    "  --kv-cache f32|f16          KV cache precision (f32)\n"
    "  --quantize q8_0|int8|q4_0|nf4|bf16|f32_packed|stored\n"
    "                              Linear weights at run time (stored: a GGUF's own blocks, the default;\n"
    "                              int8: dynamic int8 quantization, a scale per weight row and per\n"
    "                              token, integer GEMM; q8_0: a scale per 32-block),\n"
    "                              the LM head's too (an F32 file's stays f32)\n"
    "  --dequantize                f32 weights (a GGUF dequantized at load)\n"
    "  --json FILE                 the results as JSON too\n"
    "\n"
    "GB/s is weight bytes read per token x tokens/s (per prompt for pp), set against STREAM\n"
    "triad at that thread count; GFLOP/s against the FMA peak (loupe peak).\n";

#define MAX_T 32

static int parse_threads(const char *s, int32_t *t, int32_t *n)
{
    *n = 0;
    char *end;
    const char *p = s;
    while (*p) {
        long v = strtol(p, &end, 10);
        if (end == p || v < 1 || v > 4096 || *n == MAX_T || (*end && *end != ','))
            return lp_cli_usage_error("bench-gen", "-t: '%s' is not a list of thread counts like 1,2,4", s);
        t[(*n)++] = (int32_t)v;
        p = *end ? end + 1 : end;
    }
    return *n ? 0 : lp_cli_usage_error("bench-gen", "-t: empty list");
}

static cJSON *to_json(const char *model, const lp_bench_gen_result *r, const lp_peak_result *pk)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "model", model);
    cJSON_AddNumberToObject(j, "n_params", (double)r->n_params);
    cJSON_AddNumberToObject(j, "weight_bytes_per_token", r->weight_bytes);
    cJSON_AddNumberToObject(j, "flops_per_token", r->flops_per_token);
    cJSON_AddNumberToObject(j, "vector_bits", pk->vector_bits);
    cJSON_AddNumberToObject(j, "decode_scaling_stops_at_threads", r->scaling_stops_at);
    cJSON *rows = cJSON_AddArrayToObject(j, "results");
    for (int32_t i = 0; i < r->n_rows; i++) {
        const lp_bench_gen_row *w = &r->rows[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "test", w->test);
        cJSON_AddNumberToObject(o, "threads", w->threads);
        cJSON_AddNumberToObject(o, "tokens_per_s", w->tps_mean);
        cJSON_AddNumberToObject(o, "tokens_per_s_sd", w->tps_sd);
        cJSON_AddNumberToObject(o, "gb_per_s", w->gbs);
        cJSON_AddNumberToObject(o, "gflop_per_s", w->gflops);
        cJSON_AddNumberToObject(o, "peak_gb_per_s", w->peak_gbs);
        cJSON_AddNumberToObject(o, "peak_gflop_per_s", w->peak_gflops);
        cJSON_AddItemToArray(rows, o);
    }
    return j;
}

int lp_cmd_bench_gen(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"model", required_argument, NULL, 'm'},    {"n-prompt", required_argument, NULL, 'p'},
        {"n-gen", required_argument, NULL, 'n'},    {"threads", required_argument, NULL, 't'},
        {"repetitions", required_argument, NULL, 'r'}, {"kv-cache", required_argument, NULL, 'k'},
        {"json", required_argument, NULL, 'j'},     {"help", no_argument, NULL, 'h'},
        {"quantize", required_argument, NULL, 'Q'}, {"dequantize", no_argument, NULL, 'D'},
        {NULL, 0, NULL, 0}};
    lp_weight_format weights = LP_WEIGHT_FORMAT_STORED;
    const char *model = NULL, *json = NULL;
    long np = 512, ng = 128, reps = 5;
    int32_t threads[MAX_T] = {1, 2}, nt = 2;
    lp_dtype kvd = LP_DTYPE_F32;
    int c;
    while ((c = getopt_long(argc, argv, "m:p:n:t:r:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'm': model = optarg; break;
        case 'p': if (lp_cli_parse_long("bench-gen", "-p", optarg, 0, 1 << 20, &np)) return LP_EXIT_USAGE; break;
        case 'n': if (lp_cli_parse_long("bench-gen", "-n", optarg, 0, 1 << 20, &ng)) return LP_EXIT_USAGE; break;
        case 'r': if (lp_cli_parse_long("bench-gen", "-r", optarg, 1, 1000, &reps)) return LP_EXIT_USAGE; break;
        case 't': if (parse_threads(optarg, threads, &nt)) return LP_EXIT_USAGE; break;
        case 'k':
            if (!strcmp(optarg, "f32")) kvd = LP_DTYPE_F32;
            else if (!strcmp(optarg, "f16")) kvd = LP_DTYPE_F16;
            else return lp_cli_usage_error("bench-gen", "--kv-cache: '%s' is not f32 or f16", optarg);
            break;
        case 'j': json = optarg; break;
        case 'Q':
        case 'D':
            if (lp_cli_weights_flag("bench-gen", c == 'D' ? NULL : optarg, &weights)) return LP_EXIT_USAGE;
            break;
        case 'h': fputs(usage, stdout); return LP_EXIT_OK;
        default: return lp_cli_usage_error("bench-gen", "unknown option");
        }
    }
    if (optind < argc) return lp_cli_usage_error("bench-gen", "unexpected argument '%s'", argv[optind]);
    if (!model) return lp_cli_usage_error("bench-gen", "-m MODEL is required");
    if (!np && !ng) return lp_cli_usage_error("bench-gen", "-p 0 and -n 0: nothing to measure");

    lp_model_options mo;
    lp_model_options_init(&mo);
    mo.no_grad = true;
    mo.lazy_embedding = true; /* forward and generation only: the rows of the tokens met */
    mo.quiet = true;
    mo.exec = LP_EXEC_MODE_FUSED;
    mo.weights = weights;
    lp_model *m = NULL;
    if (lp_model_load(model, &mo, &m) != LP_OK) return lp_cli_fail("bench-gen");
    lp_bench_gen_opts o = {.n_prompt = (int32_t)np, .n_gen = (int32_t)ng, .reps = (int32_t)reps, .threads = threads,
                           .n_threads = nt, .kv_dtype = kvd, .seed = 1, .progress = true};
    lp_bench_gen_result r;
    lp_peak_result pk = {0};
    lp_status st = lp_bench_gen_run(m, &o, &r);
    if (st == LP_OK) st = lp_peak_measure(&pk, 0.05, 64); // the vector width for the report
    if (st != LP_OK) {
        lp_model_free(m);
        return lp_cli_fail("bench-gen");
    }
    printf("model: %s  (%.1f M params, %.1f MB of weights read per token, %s weights, %d-bit vectors)\n\n", model,
           r.n_params / 1e6, r.weight_bytes / 1e6, lp_weight_format_name(weights), pk.vector_bits);
    printf("| threads |   test |            t/s |   GB/s | %% triad | GFLOP/s | %% FMA peak |\n");
    printf("| ------: | -----: | -------------: | -----: | ------: | ------: | ---------: |\n");
    for (int32_t i = 0; i < r.n_rows; i++) {
        const lp_bench_gen_row *w = &r.rows[i];
        printf("| %7d | %6s | %7.2f ± %5.2f | %6.2f | %6.1f%% | %7.2f | %9.1f%% |\n", w->threads, w->test, w->tps_mean,
               w->tps_sd, w->gbs, w->peak_gbs > 0 ? 100 * w->gbs / w->peak_gbs : 0.0, w->gflops,
               w->peak_gflops > 0 ? 100 * w->gflops / w->peak_gflops : 0.0);
    }
    if (r.scaling_stops_at)
        printf("\ndecode stops scaling at %d thread(s) (the next count gains < 10 %%, or none was measured)\n",
               r.scaling_stops_at);
    int rc = LP_EXIT_OK;
    if (json) {
        cJSON *j = to_json(model, &r, &pk);
        char *s = j ? cJSON_Print(j) : NULL;
        if (!s || lp_file_write_atomic(json, s, strlen(s)) != LP_OK) rc = lp_cli_fail("bench-gen");
        free(s);
        cJSON_Delete(j);
    }
    lp_bench_gen_result_free(&r);
    lp_model_free(m);
    return rc;
}
