/* The tokenizer a GGUF file describes, as tokenizer.json text the text layer loads:
 * tokenizer.ggml.model "gpt2" (byte-level BPE) with its tokens, merges and token types,
 * the pre-tokenizer split that tokenizer.ggml.pre names, control tokens as special added
 * tokens, user-defined ones as plain added tokens, and BOS/EOS per add_bos/eos_token.
 * Built the way transformers' GGUF loader builds its tokenizer, so the ids agree. */
#include "io_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SPLIT_LLAMA3                                                                                         \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|" \
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define SPLIT_QWEN2                                                                                          \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"      \
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define SPLIT_GPT4O                                                                                          \
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+"              \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+"              \
    "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\\p{N}{1,3}| "                              \
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|"                                                                        \
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

/* tokenizer.ggml.pre values whose split regex differs from GPT-2's (the byte-level
 * default, which "smollm", "gpt2", "starcoder", ... use). */
static const struct {
    const char *pre, *regex;
} splits[] = {
    {"llama3", SPLIT_LLAMA3},  {"llama-v3", SPLIT_LLAMA3}, {"llama-bpe", SPLIT_LLAMA3},
    {"falcon3", SPLIT_LLAMA3}, {"dbrx", SPLIT_LLAMA3},     {"smaug-bpe", SPLIT_LLAMA3},
    {"pixtral", SPLIT_LLAMA3}, {"qwen2", SPLIT_QWEN2},     {"deepseek-r1-qwen", SPLIT_QWEN2},
    {"gpt-4o", SPLIT_GPT4O},   {"llama4", SPLIT_GPT4O},
};

typedef struct spelled_id {
    const char *s;
    uint64_t id;
} spelled_id;

static int by_spelling(const void *a, const void *b)
{
    const spelled_id *x = a, *y = b;
    const int c = strcmp(x->s, y->s);
    return c ? c : (x->id > y->id) - (x->id < y->id);
}

/* vocab[spelled[i]] = i for i < n, where a later duplicate spelling wins, as in a Python
 * dict built in order (the key keeps its first place). Duplicates are found by sorting, not
 * by looking each key up in the cJSON object: that is a linear scan, and 150k tokens made
 * it 1e10 string compares (50 s to open a Qwen GGUF). */
static lp_status add_vocab(cJSON *vocab, char *const *spelled, uint64_t n, const char *path)
{
    spelled_id *o = lp_malloc((size_t)(n ? n : 1) * sizeof *o);
    uint64_t *to = lp_malloc((size_t)(n ? n : 1) * sizeof *to);
    if (!o || !to) {
        free(o);
        free(to);
        return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", path);
    }
    for (uint64_t i = 0; i < n; i++)
        o[i] = (spelled_id){spelled[i], i};
    qsort(o, (size_t)n, sizeof *o, by_spelling);
    /* to[i]: the id token i's spelling maps to (its group's last), UINT64_MAX for a repeat */
    for (uint64_t a = 0, b; a < n; a = b) {
        for (b = a + 1; b < n && !strcmp(o[a].s, o[b].s); b++)
            to[o[b].id] = UINT64_MAX;
        to[o[a].id] = o[b - 1].id;
    }
    for (uint64_t i = 0; i < n; i++)
        if (to[i] != UINT64_MAX)
            cJSON_AddNumberToObject(vocab, spelled[i], (double)to[i]);
    free(o);
    free(to);
    return LP_OK;
}

const char *lp_gguf__pre_of_regex(const char *regex)
{
    for (size_t i = 0; regex && i < sizeof splits / sizeof splits[0]; i++)
        if (!strcmp(regex, splits[i].regex))
            return splits[i].pre;
    return NULL;
}

/* GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves, the others for
 * U+0100 onwards in byte order. */
static uint32_t byte_char(uint8_t b)
{
    static uint32_t map[256];
    static int ready;
    if (!ready) {
        uint32_t next = 256;
        for (int c = 0; c < 256; c++)
            map[c] = ((c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || c >= 0xAE) ? (uint32_t)c : next++;
        ready = 1;
    }
    return map[b];
}

static bool in_alphabet(uint32_t cp)
{
    return (cp >= '!' && cp <= '~') || (cp >= 0xA1 && cp <= 0xAC) || (cp >= 0xAE && cp <= 0xFF) ||
           (cp >= 256 && cp < 256 + 68);
}

static size_t put_utf8(char *o, uint32_t cp)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | cp >> 6), o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    o[0] = (char)(0xE0 | cp >> 12), o[1] = (char)(0x80 | ((cp >> 6) & 0x3F)),
    o[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
}

/* Decodes one UTF-8 code point (the text was validated); returns its length. */
static size_t get_utf8(const uint8_t *s, size_t n, uint32_t *cp)
{
    if (s[0] < 0x80 || n < 2) {
        *cp = s[0];
        return 1;
    }
    if (s[0] < 0xE0) {
        *cp = (uint32_t)(s[0] & 0x1F) << 6 | (s[1] & 0x3F);
        return 2;
    }
    if (s[0] < 0xF0 && n >= 3) {
        *cp = (uint32_t)(s[0] & 0x0F) << 12 | (uint32_t)(s[1] & 0x3F) << 6 | (s[2] & 0x3F);
        return 3;
    }
    *cp = 0x110000; /* outside the alphabet */
    return n >= 4 ? 4 : n;
}

/* The vocabulary spelling of a token: as written when every character is in the byte
 * alphabet, else each UTF-8 byte spelled by its alphabet character (a token llama.cpp
 * stored as raw text). Fresh string (free()). */
static char *spell(const lp_gguf_str *t)
{
    const uint8_t *s = (const uint8_t *)t->s;
    bool ok = true;
    for (size_t i = 0; i < t->len && ok;) {
        uint32_t cp;
        i += get_utf8(s + i, (size_t)t->len - i, &cp);
        ok = in_alphabet(cp);
    }
    char *o = lp_malloc((size_t)t->len * 2 + 1);
    if (!o)
        return NULL;
    size_t k = 0;
    if (ok) {
        memcpy(o, s, (size_t)t->len);
        k = (size_t)t->len;
    } else {
        for (size_t i = 0; i < t->len; i++)
            k += put_utf8(o + k, byte_char(s[i]));
    }
    o[k] = '\0';
    return o;
}

static char *str_copy(const lp_gguf_str *s)
{
    char *o = lp_malloc((size_t)s->len + 1);
    if (o) {
        memcpy(o, s->s, (size_t)s->len);
        o[s->len] = '\0';
    }
    return o;
}

static cJSON *added_token(int64_t id, const char *content, bool special)
{
    cJSON *a = cJSON_CreateObject();
    cJSON_AddNumberToObject(a, "id", (double)id);
    cJSON_AddStringToObject(a, "content", content);
    cJSON_AddBoolToObject(a, "single_word", false);
    cJSON_AddBoolToObject(a, "lstrip", false);
    cJSON_AddBoolToObject(a, "rstrip", false);
    cJSON_AddBoolToObject(a, "normalized", false); // matched in the raw text, as transformers adds them
    cJSON_AddBoolToObject(a, "special", special);
    return a;
}

static cJSON *byte_level(bool use_regex)
{
    cJSON *b = cJSON_CreateObject();
    cJSON_AddStringToObject(b, "type", "ByteLevel");
    cJSON_AddBoolToObject(b, "add_prefix_space", false);
    cJSON_AddBoolToObject(b, "trim_offsets", true);
    cJSON_AddBoolToObject(b, "use_regex", use_regex);
    return b;
}

static void add_special_piece(cJSON *seq, const char *tok)
{
    cJSON *p = cJSON_CreateObject(), *sp = cJSON_AddObjectToObject(p, "SpecialToken");
    cJSON_AddStringToObject(sp, "id", tok);
    cJSON_AddNumberToObject(sp, "type_id", 0);
    lp_json_arr_add(seq, p);
}

static void add_seq_piece(cJSON *seq, const char *id, int type_id)
{
    cJSON *p = cJSON_CreateObject(), *sq = cJSON_AddObjectToObject(p, "Sequence");
    cJSON_AddStringToObject(sq, "id", id);
    cJSON_AddNumberToObject(sq, "type_id", type_id);
    lp_json_arr_add(seq, p);
}

static lp_status build(const lp_gguf_file *g, char **out)
{
    const char *path = lp_gguf_path(g);
    char *model = NULL, *pre = NULL;
    lp_status st = lp_gguf_get_str(g, "tokenizer.ggml.model", &model);
    if (st != LP_OK)
        return st;
    if (strcmp(model, "gpt2")) {
        st = lp_err(LP_STATUS_UNSUPPORTED,
                    "%s: tokenizer.ggml.model '%.40s' is not supported (gpt2: byte-level BPE)", path, model);
        free(model);
        return st;
    }
    free(model);
    const lp_gguf_value *toks = lp_gguf_get(g, "tokenizer.ggml.tokens"),
                        *merges = lp_gguf_get(g, "tokenizer.ggml.merges"),
                        *types = lp_gguf_get(g, "tokenizer.ggml.token_type");
    if (!toks || toks->type != LP_GGUF_TYPE_ARRAY || toks->elem_type != LP_GGUF_TYPE_STRING)
        return lp_err(LP_STATUS_FORMAT,
                      "%s: metadata 'tokenizer.ggml.tokens' is %s, expected an array of strings", path,
                      toks ? "of another type" : "missing");
    if (!merges || merges->type != LP_GGUF_TYPE_ARRAY || merges->elem_type != LP_GGUF_TYPE_STRING)
        return lp_err(LP_STATUS_FORMAT,
                      "%s: metadata 'tokenizer.ggml.merges' is %s, expected an array of strings", path,
                      merges ? "of another type" : "missing");
    if (types && (types->type != LP_GGUF_TYPE_ARRAY || types->n != toks->n ||
                  types->elem_type == LP_GGUF_TYPE_STRING || types->elem_type == LP_GGUF_TYPE_ARRAY))
        return lp_err(LP_STATUS_FORMAT,
                      "%s: metadata 'tokenizer.ggml.token_type' is not an integer array of %llu entries",
                      path, (unsigned long long)toks->n);
    if (lp_gguf_get(g, "tokenizer.ggml.pre") &&
        (st = lp_gguf_get_str(g, "tokenizer.ggml.pre", &pre)) != LP_OK)
        return st;
    bool add_bos = false, add_eos = false;
    int64_t bos = -1, eos = -1;
    if ((lp_gguf_get(g, "tokenizer.ggml.add_bos_token") &&
         (st = lp_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &add_bos))) ||
        (lp_gguf_get(g, "tokenizer.ggml.add_eos_token") &&
         (st = lp_gguf_get_bool(g, "tokenizer.ggml.add_eos_token", &add_eos))) ||
        (lp_gguf_get(g, "tokenizer.ggml.bos_token_id") &&
         (st = lp_gguf_get_int(g, "tokenizer.ggml.bos_token_id", &bos))) ||
        (lp_gguf_get(g, "tokenizer.ggml.eos_token_id") &&
         (st = lp_gguf_get_int(g, "tokenizer.ggml.eos_token_id", &eos)))) {
        free(pre);
        return st;
    }
    if ((add_bos && (bos < 0 || (uint64_t)bos >= toks->n)) ||
        (add_eos && (eos < 0 || (uint64_t)eos >= toks->n))) {
        free(pre);
        return lp_err(LP_STATUS_FORMAT,
                      "%s: add_bos/eos_token set but the BOS/EOS id is missing or outside the %llu tokens",
                      path, (unsigned long long)toks->n);
    }

    lp_json_oom_begin(); /* a node that fails to allocate is dropped by cJSON: checked at the end */
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "version", "1.0");
    cJSON_AddNullToObject(j, "truncation");
    cJSON_AddNullToObject(j, "padding");
    cJSON *added = cJSON_AddArrayToObject(j, "added_tokens");
    cJSON *vocab = cJSON_CreateObject();
    char **spelled = lp_calloc((size_t)toks->n + 1, sizeof *spelled);
    if (!spelled) {
        st = lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", path);
        goto out;
    }
    for (uint64_t i = 0; i < toks->n; i++)
        if (!(spelled[i] = spell(&toks->strs[i]))) {
            st = lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", path);
            goto out;
        }
    if ((st = add_vocab(vocab, spelled, toks->n, path)) != LP_OK)
        goto out;
    for (uint64_t i = 0; types && i < toks->n; i++) {
        int64_t ty = 0;
        if (!lp_gguf_array_i64(types, i, &ty))
            continue;
        /* 3 CONTROL: special (only if spelled in the byte alphabet, as transformers checks);
         * 4 USER_DEFINED: a plain added token matched whole */
        char *raw = str_copy(&toks->strs[i]);
        if (!raw) {
            st = lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", path);
            goto out;
        }
        if (ty == 3 && !strcmp(raw, spelled[i]))
            lp_json_arr_add(added, added_token((int64_t)i, raw, true));
        else if (ty == 4)
            lp_json_arr_add(added, added_token((int64_t)i, raw, false));
        free(raw);
    }
    cJSON_AddNullToObject(j, "normalizer");
    const char *regex = NULL;
    for (size_t i = 0; pre && i < sizeof splits / sizeof splits[0]; i++)
        if (!strcmp(pre, splits[i].pre))
            regex = splits[i].regex;
    if (regex) {
        cJSON *seq = cJSON_AddObjectToObject(j, "pre_tokenizer");
        cJSON_AddStringToObject(seq, "type", "Sequence");
        cJSON *list = cJSON_AddArrayToObject(seq, "pretokenizers");
        cJSON *sp = cJSON_CreateObject();
        cJSON_AddStringToObject(sp, "type", "Split");
        cJSON *pat = cJSON_AddObjectToObject(sp, "pattern");
        cJSON_AddStringToObject(pat, "Regex", regex);
        cJSON_AddStringToObject(sp, "behavior", "Isolated");
        cJSON_AddBoolToObject(sp, "invert", false);
        lp_json_arr_add(list, sp);
        lp_json_arr_add(list, byte_level(false));
    } else {
        lp_json_obj_add(j, "pre_tokenizer", byte_level(true));
    }
    cJSON *pp = cJSON_AddObjectToObject(j, "post_processor");
    cJSON_AddStringToObject(pp, "type", "TemplateProcessing");
    cJSON *single = cJSON_AddArrayToObject(pp, "single"), *pair = cJSON_AddArrayToObject(pp, "pair");
    cJSON *specials = cJSON_AddObjectToObject(pp, "special_tokens");
    if (add_bos) {
        add_special_piece(single, spelled[bos]);
        add_special_piece(pair, spelled[bos]);
    }
    add_seq_piece(single, "A", 0);
    add_seq_piece(pair, "A", 0);
    if (add_eos) {
        add_special_piece(single, spelled[eos]);
        add_special_piece(pair, spelled[eos]);
    }
    add_seq_piece(pair, "B", 1);
    for (int k = 0; k < 2; k++) {
        const bool on = k == 0 ? add_bos : add_eos;
        const int64_t id = k == 0 ? bos : eos;
        if (!on || cJSON_GetObjectItemCaseSensitive(specials, spelled[id]))
            continue;
        cJSON *e = cJSON_AddObjectToObject(specials, spelled[id]);
        cJSON_AddStringToObject(e, "id", spelled[id]);
        cJSON *ids = cJSON_AddArrayToObject(e, "ids");
        lp_json_arr_add(ids, cJSON_CreateNumber((double)id));
        cJSON *tks = cJSON_AddArrayToObject(e, "tokens");
        lp_json_arr_add(tks, cJSON_CreateString(spelled[id]));
    }
    cJSON *dec = byte_level(true);
    lp_json_obj_replace(dec, "add_prefix_space", cJSON_CreateTrue());
    lp_json_obj_add(j, "decoder", dec);
    cJSON *m = cJSON_AddObjectToObject(j, "model");
    cJSON_AddStringToObject(m, "type", "BPE");
    cJSON_AddNullToObject(m, "dropout");
    cJSON_AddNullToObject(m, "unk_token");
    cJSON_AddStringToObject(m, "continuing_subword_prefix", "");
    cJSON_AddStringToObject(m, "end_of_word_suffix", "");
    cJSON_AddBoolToObject(m, "fuse_unk", false);
    cJSON_AddBoolToObject(m, "byte_fallback", false);
    cJSON_AddBoolToObject(m, "ignore_merges", false);
    lp_json_obj_add(m, "vocab", vocab);
    vocab = NULL;
    cJSON *ml = cJSON_AddArrayToObject(m, "merges");
    for (uint64_t i = 0; i < merges->n; i++) {
        char *s = str_copy(&merges->strs[i]);
        if (!s) {
            st = lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", path);
            goto out;
        }
        char *sp = strchr(s, ' ');
        if (!sp) {
            st = lp_err(LP_STATUS_FORMAT,
                        "%s: tokenizer.ggml.merges[%llu] '%.40s' is not two tokens separated by a space",
                        path, (unsigned long long)i, s);
            free(s);
            goto out;
        }
        *sp = '\0';
        cJSON *pr = cJSON_CreateArray();
        lp_json_arr_add(pr, cJSON_CreateString(s));
        lp_json_arr_add(pr, cJSON_CreateString(sp + 1));
        lp_json_arr_add(ml, pr);
        free(s);
    }
    if (lp_json_oom_end() || !(*out = cJSON_PrintUnformatted(j)))
        st = lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", path);
out:
    if (spelled)
        for (uint64_t i = 0; i < toks->n; i++)
            free(spelled[i]);
    free(spelled);
    cJSON_Delete(vocab);
    cJSON_Delete(j);
    free(pre);
    return st;
}

lp_status lp_gguf_tokenizer_json_of(const lp_gguf_file *g, char **out)
{
    *out = NULL;
    return build(g, out);
}

lp_status lp_gguf_tokenizer_json(const char *path, char **out)
{
    *out = NULL;
    lp_gguf_file *g;
    lp_status st = lp_gguf_open(path, &g);
    if (st != LP_OK)
        return st;
    st = build(g, out);
    lp_gguf_close(g);
    return st;
}
