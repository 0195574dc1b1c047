/* Allocation-failure torture over every loader and the model setup (issue 16), as curl's
 * torture tests do: a clean run counts its allocations (lp_alloc, the loaders' lp_malloc family
 * and, through cJSON's hooks, every JSON node), then the run is repeated failing the 1st, 2nd,
 * ... Nth allocation in turn. Each failure must come back as LP_STATUS_NO_MEMORY with a
 * message, no object, and nothing left allocated, to the byte: the tagged allocator's live
 * bytes return to where they were, glibc's in-use heap bytes too (mallinfo2 with the tcache
 * off, outside ASan), and under ASan (scripts/build.sh's sanitizer build) LeakSanitizer fails
 * the test on any heap block left behind. Cases: a config-only model, checkpoints written by
 * transformers, a LoRA adapter written by PEFT, QLoRA (NF4) on a PEFT adapter; tokenizers
 * (tokenizer.json WordPiece and byte-level BPE, vocab.txt, the tokenizer in a GGUF's metadata)
 * each loaded, then a pair encoded and decoded; chat templates parsed from a .jinja file or a
 * tokenizer_config.json and rendered; GGUF metadata (reader, config builder), models built
 * from a GGUF (F32, Q8_0, Q4_0) dequantized and kept stored, `loupe quantize` (from a GGUF
 * and, lp_model_save_gguf, from a directory with its tokenizer.json); a checkpoint's
 * checksums verified; dataset readers (TSV/CSV/JSONL rows, label maps, instruction JSONL in
 * prompt/response, chat-messages and alpaca layouts); a checkpoint resumed (--resume). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
#include <malloc.h>
#define HAVE_MALLINFO2 1
#endif

#include <cmocka.h>

#include "loupe/core.h"
#include "loupe/data.h"
#include "loupe/io.h"
#include "loupe/kernels.h"
#include "loupe/models.h"
#include "loupe/text.h"
#include "loupe/train.h"
#include "../../src/train/train_internal.h" /* lp_ckpt_save/lp_ckpt_load, as the trainer calls them */

/* One torture subject: run builds an object from files (NULL in *out unless LP_OK) and
 * release frees it. */
typedef struct subject {
    const char *name;
    lp_status (*run)(const void *arg, void **out);
    void (*release)(void *obj);
    const void *arg;
} subject;

/* glibc's bytes in use, where it is exact: a plain malloc left behind moves it. glibc counts
 * the chunks its per-thread cache (tcache) holds as in use, so the check runs only with that
 * cache off (GLIBC_TUNABLES=glibc.malloc.tcache_count=0, as ctest runs this test); under ASan
 * glibc's heap is not used, and LeakSanitizer does the check. */
static bool heap_exact;

static size_t heap_in_use(void)
{
#ifdef HAVE_MALLINFO2
    return heap_exact ? mallinfo2().uordblks : 0;
#else
    return 0;
#endif
}

static void torture_subject(const subject *c)
{
    lp_alloc_stats s0, s1;
    void *obj = NULL;
    lp_alloc_fail_at(0);
    assert_int_equal(c->run(c->arg, &obj), LP_OK); /* warms once-only state (profiler name table) */
    c->release(obj);
    assert_int_equal(c->run(c->arg, &obj), LP_OK); /* and what the first free left cached */
    c->release(obj);
    lp_alloc_stats_get(&s0);
    size_t h0 = heap_in_use();
    lp_alloc_fail_at(0);
    if (c->run(c->arg, &obj) != LP_OK)
        fail_msg("%s: %s", c->name, lp_err_msg());
    uint64_t n = lp_alloc_fail_at(0);
    c->release(obj);
    assert_true(n > 5); /* the counter is alive (a small GGUF header makes ~10) */
    uint64_t refused = 0;
    for (uint64_t k = 1; k <= n; k++) {
        obj = (void *)1;
        lp_err_clear();
        lp_alloc_fail_at(k);
        lp_status st = c->run(c->arg, &obj);
        lp_alloc_fail_at(0);
        if (st == LP_OK) { /* an allocation whose failure has a fallback: the result is whole */
            c->release(obj);
        } else {
            refused++;
            if (st != LP_STATUS_NO_MEMORY || obj != NULL || !lp_err_msg()[0])
                fail_msg("%s: allocation %llu of %llu: status %s, object %p, message '%s'", c->name,
                         (unsigned long long)k, (unsigned long long)n, lp_status_str(st), obj, lp_err_msg());
        }
        lp_alloc_stats_get(&s1);
        if (s1.live_total != s0.live_total)
            fail_msg("%s: allocation %llu failed: %llu tagged bytes left allocated", c->name,
                     (unsigned long long)k, (unsigned long long)(s1.live_total - s0.live_total));
        size_t h1 = heap_in_use();
        if (h1 > h0)
            fail_msg("%s: allocation %llu failed: %zu heap bytes left allocated", c->name,
                     (unsigned long long)k, h1 - h0);
    }
    print_message("%s: %llu allocations, each failed in turn: %llu refused cleanly, %llu with a fallback\n",
                  c->name, (unsigned long long)n, (unsigned long long)refused,
                  (unsigned long long)(n - refused));
    assert_true(refused > n / 2);
}

typedef struct tcase {
    const char *name, *dir, *adapter;
    bool lora;
    lp_dtype base;
    lp_weight_format weights; /* LP_WEIGHT_FORMAT_F32 (0): dequantized at load */
} tcase;

static lp_status load_model(const void *arg, void **out)
{
    const tcase *c = arg;
    lp_model_options o;
    lp_model_options_init(&o);
    o.task = strstr(c->dir, "_lm") ? LP_MODEL_TASK_AUTO : LP_MODEL_TASK_SEQ_CLS; // causal LMs stay LMs
    o.training = c->weights == LP_WEIGHT_FORMAT_F32;
    o.quiet = true;
    o.weights = c->weights;
    if (c->lora) {
        o.lora.enabled = true;
        o.lora.rank = 4;
        o.lora.adapter_dir = c->adapter;
        o.lora.base_dtype = c->base;
    }
    lp_model *m = NULL;
    lp_status st = lp_model_load(c->dir, &o, &m);
    *out = m;
    return st;
}

static void free_model(void *m) { lp_model_free(m); }

/* an inference load reading the token embedding as tokens appear (lazy_rows.c): arg the dir */
static lp_status load_lazy(const void *arg, void **out)
{
    lp_model_options o;
    lp_model_options_init(&o);
    o.quiet = true;
    o.no_grad = true;
    o.lazy_embedding = true;
    lp_model *m = NULL;
    lp_status st = lp_model_load(arg, &o, &m);
    *out = m;
    return st;
}

static void torture(const tcase *c) { torture_subject(&(subject){c->name, load_model, free_model, c}); }

static void test_config_only(void **state)
{
    (void)state;
    torture(&(tcase){"models/default (config only)", "models/default", NULL, false, LP_DTYPE_F32, LP_WEIGHT_FORMAT_F32});
}

static void test_hf_checkpoints(void **state)
{
    (void)state;
    torture(&(tcase){"cls_bert", "tests/golden/cls_bert", NULL, false, LP_DTYPE_F32, LP_WEIGHT_FORMAT_F32});
    torture(&(tcase){"cls_distilbert", "tests/golden/cls_distilbert", NULL, false, LP_DTYPE_F32, LP_WEIGHT_FORMAT_F32});
}

static void test_peft(void **state)
{
    (void)state;
    torture(&(tcase){"lora_bert + PEFT adapter", "tests/golden/lora_bert",
                     "tests/golden/lora_bert/peft_adapter", true, LP_DTYPE_F32, LP_WEIGHT_FORMAT_F32});
    torture(
        &(tcase){"fresh LoRA on cls_distilbert", "tests/golden/cls_distilbert", NULL, true, LP_DTYPE_F32, LP_WEIGHT_FORMAT_F32});
    torture(&(tcase){"QLoRA (NF4) + PEFT adapter", "tests/golden/qlora_distilbert",
                     "tests/golden/qlora_distilbert/peft_adapter", true, LP_DTYPE_NF4, LP_WEIGHT_FORMAT_F32});
    /* the llama family: GQA, llama3 rope, tied embeddings, an all-linear adapter over NF4 */
    torture(&(tcase){"llama_lm", "tests/golden/llama_lm", NULL, false, LP_DTYPE_F32, LP_WEIGHT_FORMAT_F32});
    torture_subject(&(subject){"qwen2_cls, embedding read lazily", load_lazy, free_model, "tests/golden/qwen2_cls"});
    torture(&(tcase){"smollm_lm (tied)", "tests/golden/smollm_lm", NULL, false, LP_DTYPE_F32, LP_WEIGHT_FORMAT_F32});
    torture(&(tcase){"qlora_llama_lm + PEFT adapter", "tests/golden/qlora_llama_lm",
                     "tests/golden/qlora_llama_lm/peft_adapter", true, LP_DTYPE_NF4, LP_WEIGHT_FORMAT_F32});
}

/* A tokenizer loaded from a file, then a sentence pair encoded and the ids decoded: the
 * encode and decode allocations fail too. */
static lp_status load_tokenizer(const void *arg, void **out)
{
    lp_tokenizer *t = NULL;
    lp_status st = lp_tokenizer_load(arg, &t);
    *out = NULL;
    if (st) return st;
    lp_encode_opts o = lp_encode_opts_default();
    lp_encoding e = {0};
    char *text = NULL;
    st = lp_tokenizer_encode(t, "Hello, world! The quick brown fox", "jumps over 12 lazy dogs.", &o, &e);
    if (!st) st = lp_tokenizer_decode(t, e.ids, e.len, 1, &text);
    lp_encoding_free(&e);
    free(text);
    if (st) {
        lp_tokenizer_free(t);
        return st;
    }
    *out = t;
    return LP_OK;
}

static void free_tokenizer(void *t) { lp_tokenizer_free(t); }

static void test_tokenizers(void **state)
{
    (void)state;
    static const char *const files[][2] = {
        {"tokenizer.json (WordPiece)", "tests/golden/cls_bert/tokenizer.json"},
        {"vocab.txt", "tests/golden/cls_bert/vocab.txt"},
        {"tokenizer.json (byte-level BPE)", "models/tiny-llama/tokenizer.json"},
        {"tokenizer from GGUF metadata", "fuzz/seeds/gguf/model_tokenizer.gguf"},
    };
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
        torture_subject(&(subject){files[i][0], load_tokenizer, free_tokenizer, files[i][1]});
}

/* A chat template read from its file, parsed, and one conversation rendered. */
static lp_status load_template(const void *arg, void **out)
{
    char *src = NULL, *text = NULL;
    size_t len = 0;
    lp_chat_template *t = NULL;
    *out = NULL;
    lp_status st = lp_file_read_all(arg, &src, &len);
    if (!st) st = lp_chat_template_parse(src, len, arg, &t);
    free(src);
    if (st) return st;
    lp_chat_vars v = {.messages_json = "[{\"role\":\"system\",\"content\":\"Be brief.\"},"
                                       "{\"role\":\"user\",\"content\":\"Hi\"},"
                                       "{\"role\":\"assistant\",\"content\":\"Hello!\"},"
                                       "{\"role\":\"user\",\"content\":\"2+2?\"}]",
                      .bos_token = "<s>",
                      .eos_token = "</s>",
                      .add_generation_prompt = 1};
    st = lp_chat_template_render(t, &v, &text, NULL);
    free(text);
    if (st) {
        lp_chat_template_free(t);
        return st;
    }
    *out = t;
    return LP_OK;
}

static void free_template(void *t) { lp_chat_template_free(t); }

/* The template and special tokens read from a tokenizer_config.json, then parsed. */
static lp_status load_template_config(const void *arg, void **out)
{
    lp_chat_template_config cfg = {0};
    lp_chat_template *t = NULL;
    *out = NULL;
    lp_status st = lp_chat_template_config_load(arg, &cfg);
    if (!st) st = lp_chat_template_parse(cfg.template_src, strlen(cfg.template_src), cfg.path, &t);
    if (!st && (!cfg.bos_token || !cfg.eos_token)) fail_msg("special tokens not read");
    lp_chat_template_config_free(&cfg);
    *out = t;
    return st;
}

static void test_chat_templates(void **state)
{
    (void)state;
    torture_subject(&(subject){"chat template smollm2", load_template, free_template,
                               "tests/text/chat_templates/smollm2.jinja"});
    torture_subject(&(subject){"chat template llama3.2", load_template, free_template,
                               "tests/text/chat_templates/llama3.2.jinja"});
    char path[64];
    snprintf(path, sizeof path, "/tmp/loupe_torture_tc_%d.json", (int)getpid());
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("{\"bos_token\": {\"content\": \"<s>\", \"lstrip\": false}, \"eos_token\": \"</s>\",\n"
          " \"chat_template\": [{\"name\": \"tool_use\", \"template\": \"{{ tools }}\"},\n"
          "   {\"name\": \"default\", \"template\": \"{% for m in messages %}{{ bos_token + m['content'] }}{% endfor %}\"}]}\n",
          f);
    assert_int_equal(fclose(f), 0);
    torture_subject(&(subject){"tokenizer_config.json chat template", load_template_config, free_template, path});
    unlink(path);
}

/* A GGUF file's metadata: the reader, then (for a model's file) the config.json text built
 * from it. */
typedef struct gcase {
    const char *path;
    bool config;
} gcase;

static lp_status load_gguf_meta(const void *arg, void **out)
{
    const gcase *c = arg;
    lp_gguf_file *g = NULL;
    char *json = NULL;
    *out = NULL;
    lp_status st = lp_gguf_open(c->path, &g);
    if (st) return st;
    if (c->config) st = lp_gguf_config_json(g, &json);
    free(json);
    if (st) {
        lp_gguf_close(g);
        return st;
    }
    *out = g;
    return LP_OK;
}

static void free_gguf(void *g) { lp_gguf_close(g); }

/* `loupe quantize` (lp_gguf_quantize_file: reader, dequantize, quantize, GGUF writer): a
 * failure leaves neither the file nor its temporary behind. */
static char g_qout[96];

static lp_status quantize(const void *arg, void **out)
{
    char tmp[128];
    snprintf(tmp, sizeof tmp, "%s.tmp", g_qout);
    *out = NULL;
    lp_status st = lp_gguf_quantize_file(arg, g_qout, LP_GGML_TYPE_Q8_0);
    if (st && (!access(g_qout, F_OK) || !access(tmp, F_OK)))
        fail_msg("%s: a failed quantize left %s behind", (const char *)arg, access(tmp, F_OK) ? g_qout : tmp);
    if (!st) *out = g_qout;
    return st;
}

static void remove_output(void *path) { unlink(path); }

static void test_gguf(void **state)
{
    (void)state;
    torture_subject(&(subject){"GGUF metadata (model_tokenizer seed)", load_gguf_meta, free_gguf,
                               &(gcase){"fuzz/seeds/gguf/model_tokenizer.gguf", true}});
    torture_subject(&(subject){"GGUF metadata (quant_blocks seed)", load_gguf_meta, free_gguf,
                               &(gcase){"fuzz/seeds/gguf/quant_blocks.gguf", false}});
    torture_subject(&(subject){"GGUF metadata (smollm_lm)", load_gguf_meta, free_gguf,
                               &(gcase){"tests/golden/gguf_tiny/smollm_lm.gguf", true}});
    torture(&(tcase){"smollm_lm.gguf dequantized", "tests/golden/gguf_tiny/smollm_lm.gguf", NULL, false,
                     LP_DTYPE_F32, LP_WEIGHT_FORMAT_F32});
    torture(&(tcase){"qwen2_lm.gguf kept stored (F32)", "tests/golden/gguf_tiny/qwen2_lm.gguf", NULL, false,
                     LP_DTYPE_F32, LP_WEIGHT_FORMAT_STORED});
    /* quantized tensors: the tiny model written as Q8_0 and Q4_0 (a few hundred KiB in /tmp),
     * then loaded kept stored and dequantized */
    static const struct {
        uint32_t type;
        const char *name;
    } q[] = {{LP_GGML_TYPE_Q8_0, "q8_0"}, {LP_GGML_TYPE_Q4_0, "q4_0"}};
    for (size_t i = 0; i < sizeof q / sizeof q[0]; i++) {
        char path[64], name[96];
        snprintf(path, sizeof path, "/tmp/loupe_torture_lm_%d_%s.gguf", (int)getpid(), q[i].name);
        if (lp_gguf_quantize_file("tests/golden/gguf_tiny/smollm_lm.gguf", path, q[i].type) != LP_OK)
            fail_msg("%s", lp_err_msg());
        snprintf(name, sizeof name, "smollm_lm %s kept stored", q[i].name);
        torture(&(tcase){name, path, NULL, false, LP_DTYPE_F32, LP_WEIGHT_FORMAT_STORED});
        snprintf(name, sizeof name, "smollm_lm %s dequantized", q[i].name);
        torture(&(tcase){name, path, NULL, false, LP_DTYPE_F32, LP_WEIGHT_FORMAT_F32});
        unlink(path);
    }
    snprintf(g_qout, sizeof g_qout, "/tmp/loupe_torture_quantize_%d.gguf", (int)getpid());
    torture_subject(&(subject){"loupe quantize smollm_lm.gguf q8_0", quantize, remove_output,
                               "tests/golden/gguf_tiny/smollm_lm.gguf"});
}

/* lp_model_save_gguf (`loupe quantize --model DIR`): the tokenizer.json reader and writer,
 * the quantizer and the GGUF writer; a failure leaves neither the file nor its temporary. */
static lp_model *g_export_model;
static char g_export_out[128];

static lp_status export_gguf(const void *arg, void **out)
{
    (void)arg;
    char tmp[160];
    snprintf(tmp, sizeof tmp, "%s.tmp", g_export_out);
    *out = NULL;
    lp_status st = lp_model_save_gguf(g_export_model, g_export_out, LP_GGML_TYPE_Q8_0);
    if (st && (!access(g_export_out, F_OK) || !access(tmp, F_OK)))
        fail_msg("a failed lp_model_save_gguf left %s behind", access(tmp, F_OK) ? g_export_out : tmp);
    if (!st)
        *out = g_export_out;
    return st;
}

static void test_gguf_export(void **state)
{
    (void)state;
    char dir[96], p[160], cmd[400];
    snprintf(dir, sizeof dir, "/tmp/loupe_torture_export_%d", (int)getpid());
    snprintf(cmd, sizeof cmd, "mkdir -p %s && cp tests/golden/qwen2_lm/config.json tests/golden/qwen2_lm/model.safetensors %s/",
             dir, dir);
    assert_int_equal(system(cmd), 0);
    static const char tj[] =
        "{\"added_tokens\": [{\"id\": 3, \"content\": \"<|endoftext|>\", \"special\": true}], "
        "\"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Digits\", \"individual_digits\": true}, "
        "{\"type\": \"ByteLevel\"}]}, \"decoder\": {\"type\": \"ByteLevel\"}, "
        "\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2, \"c\": 5, \"abc\": 6}, "
        "\"merges\": [\"a b\", [\"ab\", \"c\"]]}}";
    static const char tc[] = "{\"add_bos_token\": false, \"chat_template\": \"{{ messages }}\"}";
    snprintf(p, sizeof p, "%s/tokenizer.json", dir);
    assert_int_equal(lp_file_write_atomic(p, tj, strlen(tj)), LP_OK);
    snprintf(p, sizeof p, "%s/tokenizer_config.json", dir);
    assert_int_equal(lp_file_write_atomic(p, tc, strlen(tc)), LP_OK);
    lp_model_options o;
    lp_model_options_init(&o);
    o.quiet = true;
    o.no_grad = true;
    assert_int_equal(lp_model_load(dir, &o, &g_export_model), LP_OK);
    snprintf(g_export_out, sizeof g_export_out, "%s/out.gguf", dir);
    torture_subject(&(subject){"lp_model_save_gguf qwen2_lm + tokenizer.json, q8_0", export_gguf, remove_output, NULL});
    lp_model_free(g_export_model);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

/* A checkpoint's checksums verified (what --resume trusts to tell a damaged checkpoint from a
 * good one): out of memory must be NO_MEMORY, never "damaged", or a resume would fall back to
 * an older checkpoint. The files are fuzz_ckpt_checksums's fixed checkpoint, and its seed
 * good.json holds their true crc32 values. */
static lp_status verify_checkpoint(const void *arg, void **out)
{
    bool has = false;
    *out = NULL;
    lp_status st = lp_checkpoint_verify(arg, &has);
    if (!st && !has) fail_msg("%s: checksums.json not seen", (const char *)arg);
    if (!st) *out = (void *)arg;
    return st;
}

static void nothing(void *p) { (void)p; }

static void put(const char *dir, const char *name, const void *data, size_t n)
{
    char p[160];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *fp = fopen(p, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(data, 1, n, fp), n);
    assert_int_equal(fclose(fp), 0);
}

static void test_checkpoint_verify(void **state)
{
    (void)state;
    char dir[64];
    snprintf(dir, sizeof dir, "/tmp/loupe_torture_ckpt_%d", (int)getpid());
    assert_int_equal(lp_mkdir_p(dir), LP_OK);
    /* state.safetensors: one F32 tensor "w" = {1, 2} */
    static const char hdr[] = "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}    ";
    unsigned char st[8 + sizeof hdr - 1 + 8];
    uint64_t hn = sizeof hdr - 1;
    memcpy(st, &hn, 8);
    memcpy(st + 8, hdr, hn);
    const float w[2] = {1.0f, 2.0f};
    memcpy(st + 8 + hn, w, 8);
    put(dir, "state.safetensors", st, sizeof st);
    put(dir, "trainer_state.json", "{}\n", 3);
    put(dir, "steps.csv", "step\n", 5);
    put(dir, "epoch_results.csv", "epoch\n", 6);
    char *sums = NULL;
    size_t len = 0;
    assert_int_equal(lp_file_read_all("fuzz/seeds/ckpt_checksums/good.json", &sums, &len), LP_OK);
    put(dir, "checksums.json", sums, len);
    free(sums);
    torture_subject(&(subject){"checkpoint verify", verify_checkpoint, nothing, dir});
    static const char *const names[] = {"state.safetensors", "trainer_state.json", "steps.csv",
                                        "epoch_results.csv", "checksums.json"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char p[160];
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        unlink(p);
    }
    rmdir(dir);
}

/* Dataset readers (the trainer's --data): TSV/CSV/JSONL classification rows, label maps and
 * instruction JSONL, each from a small buffer (the loop runs the reader once per allocation).
 * The TSV rows are data/sst2-mini/dev.tsv's first lines and the instruction rows
 * data/instruct-mini/train.jsonl's, so the fixtures are the shipped data, not written here. */
typedef struct dcase {
    const char *name, *text;
    size_t len;
    const char *label_map; /* JSON, or NULL: labels from the data */
    bool pair;
} dcase;

static char *head_lines(const char *path, int n, size_t *len)
{
    char *all = NULL;
    size_t total = 0;
    assert_int_equal(lp_file_read_all(path, &all, &total), LP_OK);
    size_t at = 0;
    for (int i = 0; i < n && at < total; i++) {
        const char *nl = memchr(all + at, '\n', total - at);
        at = nl ? (size_t)(nl - all) + 1 : total;
    }
    *len = at;
    return all;
}

static void free_dataset(void *d)
{
    lp_dataset_free(d);
    free(d);
}

static lp_status load_dataset(const void *arg, void **out)
{
    const dcase *c = arg;
    *out = NULL;
    lp_dataset *ds = calloc(1, sizeof *ds);
    assert_non_null(ds);
    lp_label_map map;
    lp_dataset_options opt;
    lp_dataset_options_init(&opt);
    lp_status st = LP_OK;
    if (c->label_map) {
        st = lp_label_map_parse(&map, "label_map.json", c->label_map, strlen(c->label_map));
        if (st) {
            free(ds);
            return st;
        }
        opt.label_map = &map;
    }
    if (c->pair) {
        opt.text_column = "sentence1";
        opt.text_pair_column = "sentence2";
    }
    st = lp_dataset_load_buffer(c->name, c->text, c->len, &opt, ds);
    if (c->label_map)
        lp_label_map_free(&map);
    if (st) {
        lp_dataset_free(ds);
        free(ds);
        return st;
    }
    *out = ds;
    return LP_OK;
}

static void free_sft(void *d)
{
    lp_sft_free(d);
    free(d);
}

static lp_status load_sft(const void *arg, void **out)
{
    const dcase *c = arg;
    *out = NULL;
    lp_sft_dataset *ds = calloc(1, sizeof *ds);
    assert_non_null(ds);
    lp_status st = lp_sft_load_buffer(c->name, c->text, c->len, LP_SFT_FORMAT_AUTO, ds);
    if (st) {
        free_sft(ds);
        return st;
    }
    *out = ds;
    return LP_OK;
}

static void test_datasets(void **state)
{
    (void)state;
    size_t n = 0;
    char *tsv = head_lines("data/sst2-mini/dev.tsv", 7, &n);
    torture_subject(&(subject){"sst2-mini dev.tsv (6 rows)", load_dataset, free_dataset,
                               &(dcase){"dev.tsv", tsv, n, NULL, false}});
    free(tsv);
    static const char csv[] = "sentence1,sentence2,label\n"
                              "\"a cat, sat\",on the mat,entail\n"
                              "it rained,the ground is dry,contradict\n"
                              "héllo wörld,bonjour,neutral\n";
    torture_subject(&(subject){"CSV pairs, string labels", load_dataset, free_dataset,
                               &(dcase){"pairs.csv", csv, sizeof csv - 1, NULL, true}});
    static const char jsonl[] = "{\"text\": \"good film\", \"label\": \"pos\"}\n"
                                "{\"text\": \"bad film\", \"label\": \"neg\", \"extra\": [1, 2]}\n"
                                "\n{\"text\": \"fine\", \"label\": \"pos\"}\n";
    torture_subject(&(subject){"JSONL rows + label map", load_dataset, free_dataset,
                               &(dcase){"rows.jsonl", jsonl, sizeof jsonl - 1,
                                        "{\"id2label\": {\"0\": \"neg\", \"1\": \"pos\"}, "
                                        "\"label2id\": {\"neg\": 0, \"pos\": 1}}",
                                        false}});
    char *sft = head_lines("data/instruct-mini/train.jsonl", 4, &n);
    torture_subject(&(subject){"instruct-mini train.jsonl (4 rows)", load_sft, free_sft,
                               &(dcase){"train.jsonl", sft, n, NULL, false}});
    free(sft);
    static const char chat[] =
        "{\"messages\": [{\"role\": \"system\", \"content\": \"be brief\"}, {\"role\": \"user\", \"content\": "
        "\"hi\"}, {\"role\": \"assistant\", \"content\": \"hello\"}]}\n"
        "{\"messages\": [{\"role\": \"user\", \"content\": \"2+2?\"}, {\"role\": \"assistant\", \"content\": "
        "\"4\"}]}\n";
    torture_subject(&(subject){"chat messages JSONL", load_sft, free_sft,
                               &(dcase){"chat.jsonl", chat, sizeof chat - 1, NULL, false}});
    static const char alpaca[] = "{\"instruction\": \"add\", \"input\": \"2 3\", \"output\": \"5\"}\n"
                                 "{\"instruction\": \"greet\", \"input\": \"\", \"output\": \"hi\"}\n";
    torture_subject(&(subject){"alpaca JSONL", load_sft, free_sft,
                               &(dcase){"alpaca.jsonl", alpaca, sizeof alpaca - 1, NULL, false}});
}

/* --resume: a checkpoint written by lp_ckpt_save (cls_bert's weights, AdamW moments, two
 * steps of history, one epoch) loaded back into the model and optimizer, as the trainer does:
 * checksums verified, trainer_state.json parsed, every tensor copied, steps.csv and
 * epoch_results.csv read. Out of memory must be NO_MEMORY and must not fall back to an older
 * checkpoint as if this one were damaged. */
typedef struct rcase {
    const char *dir;
    const lp_train_config *c;
    lp_model *model;
    lp_optim *o;
} rcase;

static void free_history(void *h)
{
    lp_history_free(h);
    free(h);
}

static lp_status resume(const void *arg, void **out)
{
    const rcase *r = arg;
    *out = NULL;
    lp_history *h = calloc(1, sizeof *h);
    assert_non_null(h);
    lp_ckpt_state s = {0};
    char resolved[512];
    lp_status st = lp_ckpt_load(r->dir, r->c, r->model, r->o, &s, h, resolved, sizeof resolved);
    if (st) { /* the trainer frees its history whatever the load did */
        free_history(h);
        return st;
    }
    if (h->n_steps != 2 || h->n_epochs != 1 || s.step != 2)
        fail_msg("%s: resumed %zu steps, %zu epochs at step %lld", resolved, h->n_steps, h->n_epochs,
                 (long long)s.step);
    *out = h;
    return LP_OK;
}

static void test_checkpoint_resume(void **state)
{
    (void)state;
    char dir[64];
    snprintf(dir, sizeof dir, "/tmp/loupe_torture_resume_%d", (int)getpid());
    assert_int_equal(lp_mkdir_p(dir), LP_OK);
    void *mv = NULL;
    assert_int_equal(load_model(&(tcase){"cls_bert", "tests/golden/cls_bert", NULL, false, LP_DTYPE_F32,
                                         LP_WEIGHT_FORMAT_F32},
                                &mv),
                     LP_OK);
    lp_model *model = mv;
    lp_train_config c;
    lp_train_config_init(&c);
    lp_optim o;
    assert_int_equal(lp_optim_init(&o, model), LP_OK);
    o.t = 2;
    lp_history h = {0};
    for (int i = 1; i <= 2; i++)
        assert_int_equal(lp_history_add_step(&h, &(lp_step_rec){.step = i, .loss = 0.7, .lr = 1e-4, .samples = 8}),
                         LP_OK);
    assert_int_equal(lp_history_add_epoch(&h, &(lp_epoch_rec){.epoch = 0, .steps = 2, .train_loss = 0.7,
                                                              .eval_loss = NAN, .eval_accuracy = NAN,
                                                              .eval_f1 = NAN, .eval_perplexity = NAN,
                                                              .complete = true}),
                     LP_OK);
    lp_ckpt_state s = {.step = 2, .pos = {1, 0}, .dropout_rng = {0}, .elapsed_s = 1.5};
    if (lp_ckpt_save(dir, &c, model, &o, &s, &h) != LP_OK)
        fail_msg("lp_ckpt_save: %s", lp_err_msg());
    lp_history_free(&h);
    torture_subject(&(subject){"checkpoint resume (cls_bert, AdamW state)", resume, free_history,
                               &(rcase){dir, &c, model, &o}});
    lp_optim_free(&o);
    lp_model_free(model);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

int main(int argc, char **argv)
{
    const char *tun = getenv("GLIBC_TUNABLES");
    heap_exact = tun && strstr(tun, "glibc.malloc.tcache_count=0");
    if (argc > 1) /* e.g. test_load_torture 'test_tok*': one group */
        cmocka_set_test_filter(argv[1]);
    /* cJSON's nodes and strings count too (io installs lp_malloc as cJSON's allocator at the
     * first parse): a config or header parse fails at every node */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_only),
        cmocka_unit_test(test_hf_checkpoints),
        cmocka_unit_test(test_peft),
        cmocka_unit_test(test_tokenizers),
        cmocka_unit_test(test_chat_templates),
        cmocka_unit_test(test_gguf),
        cmocka_unit_test(test_gguf_export),
        cmocka_unit_test(test_checkpoint_verify),
        cmocka_unit_test(test_datasets),
        cmocka_unit_test(test_checkpoint_resume),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
