/* Tokenizer lifetime and lookups: loading from a directory, tokenizer.json or vocab.txt,
 * the final tables built after parsing (id -> token, byte-level vocabulary, added-token
 * matchers, special ids), and the small public queries. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "internal.h"
#include "loupe/io.h"

static atomic_uint_fast64_t next_serial = 1;

lp_tokenizer *lp_tokenizer_alloc(const char *name)
{
    lp_tokenizer *t = lp_calloc(1, sizeof *t);
    if (!t) return NULL;
    t->name = lp_strdup(name ? name : "tokenizer");
    if (!t->name) { free(t); return NULL; }
    t->serial = atomic_fetch_add(&next_serial, 1);
    t->unk_id = -1;
    t->file_opts = lp_encode_opts_default();
    for (int i = 0; i < LP_SPECIAL__COUNT; i++) t->specials[i] = -1;
    for (int i = 0; i < 256; i++) t->byte_id[i] = t->byte_fb[i] = -1;
    return t;
}

static void free_template(lp_template *tp)
{
    for (int i = 0; i < tp->n; i++) free(tp->p[i].ids);
    free(tp->p);
}

void lp_tokenizer_free(lp_tokenizer *t)
{
    if (!t) return;
    lp_strmap_free(&t->vocab);
    lp_strmap_free(&t->bvocab);
    lp_u64map_free(&t->merges);
    if (t->id_tok)
        for (int32_t i = 0; i < t->n_ids; i++) free(t->id_tok[i]);
    free(t->id_tok);
    free(t->id_special);
    for (int i = 0; i < t->n_added; i++) free(t->added[i].content);
    free(t->added);
    lp_norm_free(t->norm);
    lp_pretok_free(t->pre);
    free_template(&t->single);
    free_template(&t->pair);
    free(t->wp_prefix);
    free(t->dec_prefix);
    free(t->name);
    free(t);
}

static int32_t find_token(const lp_tokenizer *t, const char *s)
{
    for (int i = 0; i < t->n_added; i++)
        if (!t->added[i].normalized && !strcmp(t->added[i].content, s)) return t->added[i].id;
    int32_t id;
    return lp_strmap_get(&t->vocab, s, strlen(s), &id) ? id : -1;
}

static int added_cmp(const void *x, const void *y)
{
    const lp_added *a = x, *b = y;
    if (a->normalized != b->normalized) return a->normalized - b->normalized;
    return a->len != b->len ? (a->len < b->len ? 1 : -1) : 0;
}

static lp_status oom(const lp_tokenizer *t) { return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", t->name); }

lp_status lp_tokenizer_finish(lp_tokenizer *t)
{
    if (t->vocab.n == 0 && t->n_added == 0) return lp_err(LP_STATUS_FORMAT, "%s: the vocabulary is empty", t->name);
    t->id_tok = lp_calloc((size_t)t->n_ids, sizeof *t->id_tok);
    t->id_special = lp_calloc((size_t)t->n_ids, 1);
    if (!t->id_tok || !t->id_special) return oom(t);
    for (uint32_t e = 0; e < t->vocab.n; e++) {
        const struct lp_strent *en = &t->vocab.ents[e];
        if (en->len > t->max_tok_len) t->max_tok_len = en->len;
        if (t->id_tok[en->val]) continue;
        if (!(t->id_tok[en->val] = strndup(t->vocab.keys + en->off, en->len))) return oom(t);
    }
    /* added tokens: their strings win for id -> token; normalized ones are matched in
     * their normalized form */
    for (int i = 0; i < t->n_added; i++) {
        lp_added *a = &t->added[i];
        free(t->id_tok[a->id]);
        if (!(t->id_tok[a->id] = lp_strdup(a->content))) return oom(t);
        t->id_special[a->id] |= (uint8_t)a->special;
        if (a->normalized && t->norm) {
            lp_buf nb = {0};
            if (lp_norm_apply(t->norm, a->content, a->len, &nb) || lp_buf_add(&nb, "", 1)) { free(nb.p); return oom(t); }
            free(a->content);
            a->content = nb.p;
            a->len = nb.len - 1;
        }
    }
    /* empty after normalization: can never match */
    int k = 0;
    for (int i = 0; i < t->n_added; i++) {
        if (t->added[i].len) t->added[k++] = t->added[i];
        else free(t->added[i].content);
    }
    t->n_added = k;
    if (k) qsort(t->added, (size_t)k, sizeof *t->added, added_cmp);
    t->n_added_raw = 0;
    for (int i = 0; i < k; i++) {
        t->n_added_raw += !t->added[i].normalized;
        t->added_first[t->added[i].normalized][(uint8_t)t->added[i].content[0]] = 1;
    }
    if (t->byte_level) {
        /* re-key the vocabulary from GPT-2's alphabet to raw bytes */
        if (lp_strmap_init(&t->bvocab, t->vocab.n)) return oom(t);
        char *raw = NULL;
        size_t cap = 0;
        for (uint32_t e = 0; e < t->vocab.n; e++) {
            const struct lp_strent *en = &t->vocab.ents[e];
            const uint8_t *s = (const uint8_t *)t->vocab.keys + en->off;
            if (en->len > cap) {
                cap = en->len * 2 + 16;
                char *nr = lp_realloc(raw, cap);
                if (!nr) { free(raw); return oom(t); }
                raw = nr;
            }
            size_t o = 0, i = 0;
            int ok = 1;
            while (i < en->len && ok) {
                int len;
                int32_t cp = lp_utf8_next(s + i, en->len - i, &len);
                int b = lp_cp_to_byte(cp);
                if (b < 0) ok = 0;
                raw[o++] = (char)b;
                i += (size_t)len;
            }
            if (!ok) continue; /* not in the alphabet: no byte-level word can produce it */
            if (lp_strmap_put(&t->bvocab, raw, o, en->val)) { free(raw); return oom(t); }
            if (o == 1 && t->byte_id[(uint8_t)raw[0]] < 0) t->byte_id[(uint8_t)raw[0]] = en->val;
        }
        free(raw);
    }
    if (t->byte_fallback)
        for (int b = 0; b < 256; b++) {
            char name[8];
            snprintf(name, sizeof name, "<0x%02X>", b);
            lp_strmap_get(&t->vocab, name, strlen(name), &t->byte_fb[b]);
        }
    static const char *names[LP_SPECIAL__COUNT][5] = {
        [LP_SPECIAL_CLS] = {"[CLS]", "<s>", "<cls>"},
        [LP_SPECIAL_SEP] = {"[SEP]", "</s>", "<sep>"},
        [LP_SPECIAL_PAD] = {"[PAD]", "<pad>", "<|pad|>", "<|endoftext|>"},
        [LP_SPECIAL_UNK] = {"[UNK]", "<unk>"},
        [LP_SPECIAL_BOS] = {"<s>", "<|begin_of_text|>", "<|startoftext|>", "<bos>"},
        [LP_SPECIAL_EOS] = {"</s>", "<|endoftext|>", "<|end_of_text|>", "<eos>"},
        [LP_SPECIAL_MASK] = {"[MASK]", "<mask>"},
    };
    if (t->unk_id >= 0) t->specials[LP_SPECIAL_UNK] = t->unk_id;
    for (int s = 0; s < LP_SPECIAL__COUNT; s++)
        for (int j = 0; j < 5 && t->specials[s] < 0 && names[s][j]; j++) t->specials[s] = find_token(t, names[s][j]);
    return LP_OK;
}

/* vocab.txt: one token per line, id = line number; BERT uncased pipeline around it. */
lp_status lp_tokenizer_from_vocab_txt(const char *txt, size_t len, const char *name, lp_tokenizer **out)
{
    *out = NULL;
    if (len == 0) return lp_err(LP_STATUS_FORMAT, "%s: empty file", name);
    if (lp_utf8_valid_prefix((const uint8_t *)txt, len) != len)
        return lp_err(LP_STATUS_FORMAT, "%s: not valid UTF-8", name);
    lp_tokenizer *t = lp_tokenizer_alloc(name);
    if (!t || lp_strmap_init(&t->vocab, 32768)) { lp_tokenizer_free(t); return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", name); }
    lp_status st = LP_OK;
    int32_t id = 0;
    for (size_t i = 0; i < len && !st; id++) {
        if (id >= (1 << 22)) { st = lp_err(LP_STATUS_FORMAT, "%s: too many lines", name); break; }
        const char *nl = memchr(txt + i, '\n', len - i);
        size_t e = nl ? (size_t)(nl - txt) : len, s = i;
        i = e + 1;
        while (e > s && (txt[e - 1] == ' ' || txt[e - 1] == '\t' || txt[e - 1] == '\r')) e--;
        if (lp_strmap_put(&t->vocab, txt + s, e - s, id)) st = lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", name);
    }
    t->n_ids = id;
    t->model = LP_MODEL_WORDPIECE;
    if (!st && !lp_strmap_get(&t->vocab, "[UNK]", 5, &t->unk_id))
        st = lp_err(LP_STATUS_FORMAT, "%s: no [UNK] line: not a BERT vocab.txt", name);
    if (!st) {
        t->wp_prefix = lp_strdup("##");
        t->dec_prefix = lp_strdup("##");
        t->norm = lp_calloc(1, sizeof *t->norm);
        t->pre = lp_calloc(1, sizeof *t->pre);
        t->added = lp_calloc(5, sizeof *t->added);
        if (!t->wp_prefix || !t->dec_prefix || !t->norm || !t->pre || !t->added)
            st = lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", name);
    }
    if (!st) {
        t->wp_prefix_len = 2;
        t->wp_max_chars = 100;
        *t->norm = (lp_norm){.type = LP_NORM_BERT, .clean_text = 1, .chinese = 1, .strip_accents = 1, .lowercase = 1};
        t->pre->type = LP_PRE_BERT;
        t->dec = LP_DEC_WORDPIECE;
        t->dec_cleanup = 1;
        static const char *sp[5] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
        for (int i = 0; i < 5 && !st; i++) {
            int32_t v;
            if (!lp_strmap_get(&t->vocab, sp[i], strlen(sp[i]), &v)) continue;
            lp_added *a = &t->added[t->n_added++];
            *a = (lp_added){lp_strdup(sp[i]), strlen(sp[i]), v, 1, 0, 0, 0, 0};
            if (!a->content) st = lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", name);
        }
        int32_t cls, sep;
        if (!st && lp_strmap_get(&t->vocab, "[CLS]", 5, &cls) && lp_strmap_get(&t->vocab, "[SEP]", 5, &sep)) {
            t->has_post = 1;
            lp_tpl_piece s1[3] = {{LP_TPL_SPECIAL, 0, NULL, 1}, {LP_TPL_A, 0, NULL, 0}, {LP_TPL_SPECIAL, 0, NULL, 1}};
            lp_tpl_piece p1[5] = {{LP_TPL_SPECIAL, 0, NULL, 1}, {LP_TPL_A, 0, NULL, 0}, {LP_TPL_SPECIAL, 0, NULL, 1},
                                  {LP_TPL_B, 1, NULL, 0}, {LP_TPL_SPECIAL, 1, NULL, 1}};
            int32_t want_s[3] = {cls, -1, sep}, want_p[5] = {cls, -1, sep, -1, sep};
            t->single.p = lp_calloc(3, sizeof *t->single.p);
            t->pair.p = lp_calloc(5, sizeof *t->pair.p);
            if (!t->single.p || !t->pair.p) st = lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", name);
            for (int i = 0; i < 3 && !st; i++) {
                t->single.p[t->single.n++] = s1[i];
                if (want_s[i] >= 0 && !(t->single.p[i].ids = lp_malloc(sizeof(int32_t)))) st = LP_STATUS_NO_MEMORY;
                else if (want_s[i] >= 0) t->single.p[i].ids[0] = want_s[i];
            }
            for (int i = 0; i < 5 && !st; i++) {
                t->pair.p[t->pair.n++] = p1[i];
                if (want_p[i] >= 0 && !(t->pair.p[i].ids = lp_malloc(sizeof(int32_t)))) st = LP_STATUS_NO_MEMORY;
                else if (want_p[i] >= 0) t->pair.p[i].ids[0] = want_p[i];
            }
            if (st == LP_STATUS_NO_MEMORY) lp_err(st, "%s: out of memory", name);
        }
    }
    if (!st) st = lp_tokenizer_finish(t);
    if (st) { lp_tokenizer_free(t); return st; }
    *out = t;
    return LP_OK;
}

static int ends_with(const char *s, const char *suf)
{
    size_t n = strlen(s), m = strlen(suf);
    return n >= m && !strcmp(s + n - m, suf);
}

lp_status lp_tokenizer_load_json(const char *json, size_t len, const char *name, lp_tokenizer **out)
{
    if (!json || !out) return lp_err(LP_STATUS_INVALID_ARG, "lp_tokenizer_load_json: NULL argument");
    return lp_tokenizer_from_json(json, len, name ? name : "tokenizer.json", out);
}

lp_status lp_tokenizer_load(const char *path, lp_tokenizer **out)
{
    if (!path || !out) return lp_err(LP_STATUS_INVALID_ARG, "lp_tokenizer_load: NULL argument");
    *out = NULL;
    struct stat sb;
    if (stat(path, &sb) != 0) return lp_err(LP_STATUS_NOT_FOUND, "%s: no such file or directory", path);
    char *file = NULL;
    if (S_ISDIR(sb.st_mode)) {
        size_t n = strlen(path) + 32;
        file = lp_malloc(n);
        if (!file) return lp_err(LP_STATUS_NO_MEMORY, "out of memory");
        snprintf(file, n, "%s/tokenizer.json", path);
        if (stat(file, &sb) != 0) {
            snprintf(file, n, "%s/vocab.txt", path);
            if (stat(file, &sb) != 0) {
                free(file);
                return lp_err(LP_STATUS_NOT_FOUND, "%s: holds neither tokenizer.json nor vocab.txt", path);
            }
        }
    } else if (!(file = lp_strdup(path))) {
        return lp_err(LP_STATUS_NO_MEMORY, "out of memory");
    }
    char *data = NULL;
    size_t len = 0;
    lp_status st;
    if (ends_with(file, ".gguf")) { // the tokenizer in a GGUF file's metadata, as tokenizer.json text
        if (!(st = lp_gguf_tokenizer_json(file, &data)))
            len = strlen(data);
    } else {
        st = lp_file_read_all(file, &data, &len);
    }
    if (!st)
        st = ends_with(file, ".txt") ? lp_tokenizer_from_vocab_txt(data, len, file, out)
                                     : lp_tokenizer_from_json(data, len, file, out);
    free(data);
    free(file);
    return st;
}

lp_encode_opts lp_encode_opts_default(void)
{
    return (lp_encode_opts){.add_special_tokens = 1, .max_length = 0, .truncation = LP_TRUNCATION_LONGEST_FIRST,
                            .pad_to = 0};
}

lp_encode_opts lp_tokenizer_file_opts(const lp_tokenizer *t) { return t->file_opts; }

int32_t lp_tokenizer_token_to_id(const lp_tokenizer *t, const char *token)
{
    if (!t || !token) return -1;
    for (int i = 0; i < t->n_added; i++)
        if (!t->added[i].normalized && !strcmp(t->added[i].content, token)) return t->added[i].id;
    int32_t id;
    if (lp_strmap_get(&t->vocab, token, strlen(token), &id)) return id;
    for (int32_t i = 0; i < t->n_ids; i++) /* normalized added tokens: by their original text */
        if (t->id_tok[i] && t->id_special[i] && !strcmp(t->id_tok[i], token)) return i;
    return -1;
}

const char *lp_tokenizer_id_to_token(const lp_tokenizer *t, int32_t id)
{
    return t && id >= 0 && id < t->n_ids ? t->id_tok[id] : NULL;
}

int32_t lp_tokenizer_vocab_size(const lp_tokenizer *t) { return t ? t->n_ids : 0; }

int32_t lp_tokenizer_special_id(const lp_tokenizer *t, lp_special which)
{
    return t && which >= 0 && which < LP_SPECIAL__COUNT ? t->specials[which] : -1;
}

int32_t lp_tokenizer_num_special(const lp_tokenizer *t, int pair)
{
    const lp_template *tp = pair ? &t->pair : &t->single;
    int32_t n = 0;
    for (int i = 0; i < tp->n; i++) n += tp->p[i].kind == LP_TPL_SPECIAL ? tp->p[i].nids : 0;
    return n;
}
