/* loupe generate: text from a causal LM (a Hugging Face directory or a GGUF file, optionally
 * with a PEFT adapter) with a KV cache: one prompt streamed to stdout, or a prompts file run
 * in batches, each result optionally written as a JSON line (prompt, text, ids, counts,
 * timings). Everything that can be refused (flags, prompts, the model, the adapter, prompt
 * lengths) is refused before the first token, so no output is half written. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "cli_gen.h"
#include "loupe/generate.h"
#include "loupe/io.h"
#include "loupe/prof.h"

static const char usage[] =
    "usage: loupe generate --model DIR|FILE.gguf (--prompt TEXT | --prompts FILE) [options]\n"
    "\n"
    "Generate text with a KV cache: greedy by default, or sampled.\n"
    "\n"
    "  --model DIR|FILE.gguf     a causal LM of the llama family (Llama, Mistral, Qwen2, SmolLM)\n"
    "  --adapter DIR             a PEFT LoRA adapter, applied unmerged (as trained)\n"
    "  --merge-adapter           merge the adapter into the weights at load (faster decoding)\n"
    "  --quantize q8_0|int8|q4_0|nf4|bf16|f32_packed|stored\n"
    "                            the Linear weights at run time: converted at load, or a\n"
    "                            GGUF's own blocks ('stored', the default), run by the integer kernels\n"
    "                            (f32_packed: the f32 values packed once for the f32 GEMM;\n"
    "                            int8: int8 weights with a scale per row, activations quantized per token\n"
    "                            per call; q8_0: a scale per 32-block);\n"
    "                            the LM head takes the same format ('stored': the file's own; an F32 file's is f32)\n"
    "  --dequantize              f32 weights (a GGUF dequantized at load), for comparison\n"
    "  --prompt TEXT             one prompt; its tokens stream to stdout\n"
    "  --prompts FILE            one prompt per line, or JSONL with \"prompt\" or \"messages\" ('-': stdin)\n"
    "  --chat                    render each prompt through the model's chat template (generation prompt on)\n"
    "  --system TEXT             a system message before each prompt (with --chat)\n"
    "  --max-new-tokens N        at most N new tokens per prompt (128)\n"
    "  --temperature T           0 = greedy (default); > 0 samples\n"
    "  --top-k K                 keep the K most probable tokens (0 = all)\n"
    "  --top-p P                 keep the smallest set of tokens whose probability reaches P (1 = all)\n"
    "  --seed S                  sampling seed (0)\n"
    "  --stop TEXT               end a sequence at TEXT (repeatable); the model's EOS ids always stop\n"
    "  --kv-cache f32|f16        KV cache precision (f32)\n"
    "  --batch-size N            prompts per batch (1)\n"
    "  --threads N               threads (default: all cores)\n"
    "  --output FILE.jsonl       one JSON line per prompt: prompt, text, token_ids, prompt_tokens,\n"
    "                            generated_tokens, prefill_ms, decode_ms, tokens_per_s\n"
    "  --profile DIR             profile the run: trace, key averages by layer and op, memory by category\n";

#define MAX_STOPS 16

typedef struct gen_args {
    const char *model, *adapter, *prompt, *prompts, *system, *output, *profile;
    bool chat, merge;
    long max_new, top_k, batch, threads;
    double temperature, top_p;
    unsigned long long seed;
    lp_dtype kv;
    lp_weight_format weights;
    bool weights_given;
    const char *stops[MAX_STOPS];
    int n_stops;
} gen_args;

enum { O_MODEL = 256, O_ADAPTER, O_MERGE, O_PROMPT, O_PROMPTS, O_CHAT, O_SYSTEM, O_MAXNEW, O_TEMP, O_TOPK, O_TOPP,
       O_SEED, O_STOP, O_KV, O_BATCH, O_THREADS, O_OUTPUT, O_PROFILE, O_QUANTIZE, O_DEQUANTIZE };

static int parse_double(const char *flag, const char *s, double lo, double hi, double *out)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end || !(v >= lo && v <= hi))
        return lp_cli_usage_error("generate", "%s: '%s' is not a number in [%g, %g]", flag, s, lo, hi);
    *out = v;
    return 0;
}

static int parse_args(int argc, char **argv, gen_args *a)
{
    static const struct option longopts[] = {
        {"model", required_argument, NULL, O_MODEL},     {"adapter", required_argument, NULL, O_ADAPTER},
        {"merge-adapter", no_argument, NULL, O_MERGE},   {"prompt", required_argument, NULL, O_PROMPT},
        {"prompts", required_argument, NULL, O_PROMPTS}, {"chat", no_argument, NULL, O_CHAT},
        {"system", required_argument, NULL, O_SYSTEM},   {"max-new-tokens", required_argument, NULL, O_MAXNEW},
        {"temperature", required_argument, NULL, O_TEMP}, {"top-k", required_argument, NULL, O_TOPK},
        {"top-p", required_argument, NULL, O_TOPP},       {"seed", required_argument, NULL, O_SEED},
        {"stop", required_argument, NULL, O_STOP},        {"kv-cache", required_argument, NULL, O_KV},
        {"batch-size", required_argument, NULL, O_BATCH}, {"threads", required_argument, NULL, O_THREADS},
        {"output", required_argument, NULL, O_OUTPUT},    {"profile", required_argument, NULL, O_PROFILE},
        {"quantize", required_argument, NULL, O_QUANTIZE}, {"dequantize", no_argument, NULL, O_DEQUANTIZE},
        {"help", no_argument, NULL, 'h'},                 {NULL, 0, NULL, 0}};
    *a = (gen_args){.max_new = 128, .batch = 1, .top_p = 1.0, .kv = LP_DTYPE_F32, .weights = LP_WEIGHT_FORMAT_STORED};
    int c;
    long v;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case O_MODEL: a->model = optarg; break;
        case O_ADAPTER: a->adapter = optarg; break;
        case O_MERGE: a->merge = true; break;
        case O_PROMPT: a->prompt = optarg; break;
        case O_PROMPTS: a->prompts = optarg; break;
        case O_CHAT: a->chat = true; break;
        case O_SYSTEM: a->system = optarg; break;
        case O_MAXNEW:
            if (lp_cli_parse_long("generate", "--max-new-tokens", optarg, 1, 1 << 20, &a->max_new)) return LP_EXIT_USAGE;
            break;
        case O_TEMP:
            if (parse_double("--temperature", optarg, 0, 100, &a->temperature)) return LP_EXIT_USAGE;
            break;
        case O_TOPK:
            if (lp_cli_parse_long("generate", "--top-k", optarg, 0, 1L << 30, &a->top_k)) return LP_EXIT_USAGE;
            break;
        case O_TOPP:
            if (parse_double("--top-p", optarg, 1e-9, 1, &a->top_p)) return LP_EXIT_USAGE;
            break;
        case O_SEED:
            if (lp_cli_parse_long("generate", "--seed", optarg, 0, 0x7fffffffL, &v)) return LP_EXIT_USAGE;
            a->seed = (unsigned long long)v;
            break;
        case O_STOP:
            if (a->n_stops == MAX_STOPS) return lp_cli_usage_error("generate", "at most %d --stop strings", MAX_STOPS);
            if (!optarg[0]) return lp_cli_usage_error("generate", "--stop needs a non-empty string");
            a->stops[a->n_stops++] = optarg;
            break;
        case O_KV:
            if (!strcmp(optarg, "f32")) a->kv = LP_DTYPE_F32;
            else if (!strcmp(optarg, "f16")) a->kv = LP_DTYPE_F16;
            else return lp_cli_usage_error("generate", "--kv-cache: '%s' is not f32 or f16", optarg);
            break;
        case O_QUANTIZE:
        case O_DEQUANTIZE:
            if (lp_cli_weights_flag("generate", c == O_DEQUANTIZE ? NULL : optarg, &a->weights)) return LP_EXIT_USAGE;
            a->weights_given = true;
            break;
        case O_BATCH:
            if (lp_cli_parse_long("generate", "--batch-size", optarg, 1, 4096, &a->batch)) return LP_EXIT_USAGE;
            break;
        case O_THREADS:
            if (lp_cli_parse_long("generate", "--threads", optarg, 1, 4096, &a->threads)) return LP_EXIT_USAGE;
            break;
        case O_OUTPUT: a->output = optarg; break;
        case O_PROFILE: a->profile = optarg; break;
        case 'h': fputs(usage, stdout); return -1;
        default: return lp_cli_usage_error("generate", "unknown option");
        }
    }
    if (optind < argc) return lp_cli_usage_error("generate", "unexpected argument '%s'", argv[optind]);
    if (!a->model) return lp_cli_usage_error("generate", "--model is required");
    if (!a->prompt == !a->prompts) return lp_cli_usage_error("generate", "give one of --prompt or --prompts");
    if (a->merge && !a->adapter) return lp_cli_usage_error("generate", "--merge-adapter needs --adapter");
    if (a->system && !a->chat) return lp_cli_usage_error("generate", "--system needs --chat");
    return 0;
}

/* ---- prompts to token ids ------------------------------------------------------------------ */

typedef struct gen_run {
    const gen_args *a;
    lp_model *m;
    lp_tokenizer *tok;
    lp_chat_template *tpl;
    char *bos, *eos; /* the template's special tokens (owned) */
    lp_cli_gen_prompts prompts;
    int32_t **ids;   /* (n prompts) token ids (owned) */
    int32_t *lens;
    char **shown;    /* (n) the prompt text as given (for --output; owned) */
} gen_run;

static lp_status load_template(gen_run *R)
{
    const char *model = R->a->model;
    if (lp_path_is_gguf(model)) {
        char *src = NULL;
        lp_status st = lp_gguf_chat_template(model, &src);
        if (st == LP_OK)
            st = lp_chat_template_parse(src, strlen(src), model, &R->tpl);
        free(src);
        if (st != LP_OK)
            return st;
        const char *b = lp_tokenizer_id_to_token(R->tok, lp_tokenizer_special_id(R->tok, LP_SPECIAL_BOS));
        const char *e = lp_tokenizer_id_to_token(R->tok, lp_tokenizer_special_id(R->tok, LP_SPECIAL_EOS));
        R->bos = b ? strdup(b) : NULL;
        R->eos = e ? strdup(e) : NULL;
        return LP_OK;
    }
    lp_chat_template_config cfg;
    lp_status st = lp_chat_template_config_load(model, &cfg);
    if (st != LP_OK)
        return st;
    st = lp_chat_template_parse(cfg.template_src, strlen(cfg.template_src), cfg.path, &R->tpl);
    R->bos = cfg.bos_token ? strdup(cfg.bos_token) : NULL;
    R->eos = cfg.eos_token ? strdup(cfg.eos_token) : NULL;
    lp_chat_template_config_free(&cfg);
    return st;
}

/* The conversation of a plain prompt: an optional system message, then the user's. */
static char *messages_of(const char *system, const char *text)
{
    cJSON *arr = cJSON_CreateArray();
    if (system) {
        cJSON *s = cJSON_CreateObject();
        cJSON_AddStringToObject(s, "role", "system");
        cJSON_AddStringToObject(s, "content", system);
        cJSON_AddItemToArray(arr, s);
    }
    cJSON *u = cJSON_CreateObject();
    cJSON_AddStringToObject(u, "role", "user");
    cJSON_AddStringToObject(u, "content", text);
    cJSON_AddItemToArray(arr, u);
    char *out = cJSON_PrintUnformatted(arr);
    cJSON_Delete(arr);
    return out;
}

static void where(const gen_run *R, size_t i, char *buf, size_t n)
{
    if (R->prompts.items[i].line)
        snprintf(buf, n, "%s line %zu", R->a->prompts, R->prompts.items[i].line);
    else
        snprintf(buf, n, "--prompt");
}

static lp_status encode_prompts(gen_run *R)
{
    const gen_args *a = R->a;
    const size_t n = R->prompts.n;
    R->ids = calloc(n, sizeof *R->ids);
    R->lens = calloc(n, sizeof *R->lens);
    R->shown = calloc(n, sizeof *R->shown);
    if (!R->ids || !R->lens || !R->shown)
        return lp_err(LP_STATUS_NO_MEMORY, "prompts: out of memory");
    const int64_t P = lp_model_config_get(R->m)->max_position_embeddings;
    lp_encoding enc = {0};
    lp_status st = LP_OK;
    for (size_t i = 0; i < n && st == LP_OK; i++) {
        const lp_cli_gen_prompt *p = &R->prompts.items[i];
        char at[600];
        where(R, i, at, sizeof at);
        char *text = NULL;
        lp_encode_opts eo = lp_encode_opts_default();
        if (a->chat) { // the template writes the specials (BOS, role headers) itself
            char *msgs = p->messages_json ? strdup(p->messages_json) : messages_of(a->system, p->text);
            lp_chat_vars v = {.messages_json = msgs, .bos_token = R->bos, .eos_token = R->eos,
                              .add_generation_prompt = 1};
            st = msgs ? lp_chat_template_render(R->tpl, &v, &text, NULL) : lp_err(LP_STATUS_NO_MEMORY, "out of memory");
            free(msgs);
            if (st != LP_OK) {
                st = lp_err_wrap(st, "%s", at);
                break;
            }
            eo.add_special_tokens = 0;
        } else if (!p->text) {
            st = lp_err(LP_STATUS_INVALID_ARG, "%s: a \"messages\" line needs --chat", at);
            break;
        } else {
            text = strdup(p->text);
        }
        R->shown[i] = p->text ? strdup(p->text) : strdup(p->messages_json);
        if (!text || !R->shown[i]) {
            free(text);
            st = lp_err(LP_STATUS_NO_MEMORY, "prompts: out of memory");
            break;
        }
        st = lp_tokenizer_encode(R->tok, text, NULL, &eo, &enc);
        free(text);
        if (st != LP_OK)
            break;
        if (enc.len == 0) {
            st = lp_err(LP_STATUS_INVALID_ARG, "%s: the prompt has no tokens", at);
            break;
        }
        if ((int64_t)enc.len + a->max_new > P) {
            st = lp_err(LP_STATUS_INVALID_ARG,
                        "%s: the prompt has %zu tokens; with --max-new-tokens %ld that exceeds the model's context of "
                        "%lld positions",
                        at, enc.len, a->max_new, (long long)P);
            break;
        }
        R->lens[i] = (int32_t)enc.len;
        if (!(R->ids[i] = malloc(enc.len * sizeof(int32_t)))) {
            st = lp_err(LP_STATUS_NO_MEMORY, "prompts: out of memory");
            break;
        }
        memcpy(R->ids[i], enc.ids, enc.len * sizeof(int32_t));
    }
    lp_encoding_free(&enc);
    return st;
}

/* ---- the run ------------------------------------------------------------------------------- */

static void stream_stdout(void *user, int32_t b, const char *text, size_t len)
{
    (void)user, (void)b;
    fwrite(text, 1, len, stdout);
    fflush(stdout);
}

static lp_status open_model(gen_run *R)
{
    const gen_args *a = R->a;
    lp_model_options mo;
    lp_model_options_init(&mo);
    mo.no_grad = true;
    mo.lazy_embedding = true; /* forward and generation only: the rows of the tokens met */
    mo.quiet = true;
    mo.exec = LP_EXEC_MODE_FUSED;
    if (a->adapter) {
        mo.lora.enabled = true;
        mo.lora.adapter_dir = a->adapter;
    } else {
        mo.weights = a->weights; /* an adapter's base runs in f32 (or its --base-dtype in eval) */
    }
    lp_status st = lp_model_load(a->model, &mo, &R->m);
    if (st != LP_OK)
        return a->adapter ? lp_err_wrap(st, "%s with adapter %s", a->model, a->adapter) : st;
    lp_model_info mi;
    lp_model_info_get(R->m, &mi);
    if (mi.task != LP_MODEL_TASK_CAUSAL_LM)
        return lp_err(LP_STATUS_UNSUPPORTED, "%s: not a causal LM (%s): nothing to generate with", a->model,
                      lp_hf_arch_name(mi.arch));
    if (a->merge && (st = lp_model_merge_adapters(R->m)) != LP_OK)
        return st;
    if ((st = lp_tokenizer_load(a->model, &R->tok)) != LP_OK)
        return lp_err_wrap(st, "tokenizer of %s", a->model);
    return LP_OK;
}

static cJSON *result_json(const char *prompt, const lp_gen_result *r)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "prompt", prompt);
    cJSON_AddStringToObject(j, "text", r->text);
    cJSON *ids = cJSON_AddArrayToObject(j, "token_ids");
    for (int32_t k = 0; k < r->n_ids; k++)
        cJSON_AddItemToArray(ids, cJSON_CreateNumber(r->ids[k]));
    cJSON_AddNumberToObject(j, "prompt_tokens", r->n_prompt);
    cJSON_AddNumberToObject(j, "generated_tokens", r->n_ids);
    cJSON_AddNumberToObject(j, "prefill_ms", r->prefill_ms);
    cJSON_AddNumberToObject(j, "decode_ms", r->decode_ms);
    // decode rate of this prompt's batch: the tokens after the first (the prefill made it)
    cJSON_AddNumberToObject(j, "tokens_per_s", r->decode_ms > 0 ? r->decode_steps / (r->decode_ms / 1e3) : 0.0);
    cJSON_AddBoolToObject(j, "stopped", r->stopped);
    return j;
}

static lp_status run_all(gen_run *R, lp_atomic_file *out)
{
    const gen_args *a = R->a;
    lp_gen_opts o;
    lp_gen_opts_init(&o);
    o.max_new_tokens = (int32_t)a->max_new;
    o.sample = (lp_sample_opts){.temperature = (float)a->temperature, .top_k = (int32_t)a->top_k,
                                .top_p = (float)a->top_p};
    o.seed = a->seed;
    o.kv_dtype = a->kv;
    o.stop_strs = a->stops;
    o.n_stop_strs = a->n_stops;
    o.prof_steps = a->profile != NULL;
    const bool stream = R->prompts.n == 1;
    if (stream)
        o.on_text = stream_stdout;
    int32_t *stop_ids = NULL, n_stop = 0;
    lp_status st = lp_gen_default_stop_ids(a->model, R->m, R->tok, &stop_ids, &n_stop);
    if (st != LP_OK)
        return st;
    o.stop_ids = stop_ids;
    o.n_stop_ids = n_stop;
    const size_t n = R->prompts.n, B = (size_t)a->batch;
    lp_gen_result *res = calloc(B, sizeof *res);
    double pre_ms = 0, dec_ms = 0;
    long long n_prompt_tok = 0, n_gen = 0, n_steps = 0;
    if (!res)
        st = lp_err(LP_STATUS_NO_MEMORY, "generate: out of memory");
    for (size_t i0 = 0; i0 < n && st == LP_OK; i0 += B) {
        const int32_t nb = (int32_t)(n - i0 < B ? n - i0 : B);
        if ((st = lp_generate(R->m, R->tok, (const int32_t *const *)R->ids + i0, R->lens + i0, nb, &o, res)) != LP_OK)
            break;
        pre_ms += res[0].prefill_ms;
        dec_ms += res[0].decode_ms;
        n_steps += res[0].decode_steps;
        for (int32_t b = 0; b < nb && st == LP_OK; b++) {
            n_prompt_tok += res[b].n_prompt;
            n_gen += res[b].n_ids;
            if (stream)
                fputc('\n', stdout);
            else if (!out)
                printf("%s\n", res[b].text);
            if (out) {
                cJSON *j = result_json(R->shown[i0 + (size_t)b], &res[b]);
                char *line = j ? cJSON_PrintUnformatted(j) : NULL;
                if (!line || fprintf(out->fp, "%s\n", line) < 0)
                    st = lp_err(LP_STATUS_IO, "%s: cannot write", a->output);
                free(line);
                cJSON_Delete(j);
            }
        }
        for (int32_t b = 0; b < nb; b++)
            lp_gen_result_free(&res[b]);
    }
    free(res);
    free(stop_ids);
    if (st == LP_OK)
        fprintf(stderr,
                "loupe generate: %zu prompts, %lld prompt tokens in %.1f ms (%.1f tokens/s), %lld new tokens, "
                "%lld decode steps in %.1f ms (%.1f steps/s)\n",
                n, n_prompt_tok, pre_ms, pre_ms > 0 ? n_prompt_tok / (pre_ms / 1e3) : 0.0, n_gen, n_steps, dec_ms,
                dec_ms > 0 ? n_steps / (dec_ms / 1e3) : 0.0);
    return st;
}

int lp_cmd_generate(int argc, char **argv)
{
    gen_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc)
        return rc < 0 ? LP_EXIT_OK : rc;
    if (a.threads > 0)
        lp_threads_set((int)a.threads);
    gen_run R = {.a = &a};
    lp_atomic_file out = {0};
    bool out_open = false, prof_on = false;
    lp_status st = a.prompt ? lp_cli_gen_prompt_one(&R.prompts, a.prompt) : lp_cli_gen_prompts_read(&R.prompts, a.prompts);
    if (st == LP_OK)
        st = open_model(&R);
    if (st == LP_OK && a.chat)
        st = load_template(&R);
    if (st == LP_OK)
        st = encode_prompts(&R);
    if (st == LP_OK && a.output && (st = lp_atomic_open(&out, a.output)) == LP_OK)
        out_open = true;
    if (st == LP_OK && a.profile) {
        lp_prof_config pc;
        lp_prof_config_init(&pc);
        pc.out_dir = a.profile;
        pc.worker_name = "generate";
        pc.record_shapes = pc.profile_memory = pc.with_flops = pc.with_stack = 1;
        if ((st = lp_prof_start(&pc)) == LP_OK) {
            prof_on = true;
            lp_prof_set_thread_name("main");
        }
    }
    if (st == LP_OK)
        st = run_all(&R, out_open ? &out : NULL);
    if (prof_on) {
        lp_status s2 = lp_prof_stop();
        if (st == LP_OK)
            st = s2;
    }
    if (out_open) {
        if (st == LP_OK)
            st = lp_atomic_commit(&out);
        else
            lp_atomic_abort(&out);
    }
    rc = st == LP_OK ? LP_EXIT_OK : lp_cli_fail("generate");
    for (size_t i = 0; R.ids && i < R.prompts.n; i++) {
        free(R.ids[i]);
        free(R.shown[i]);
    }
    free(R.ids), free(R.lens), free(R.shown), free(R.bos), free(R.eos);
    lp_chat_template_free(R.tpl);
    lp_cli_gen_prompts_free(&R.prompts);
    lp_tokenizer_free(R.tok);
    lp_model_free(R.m);
    return rc;
}
