/* Reads HF tokenizer.json (through cJSON) into an lp_tokenizer: model (WordPiece, BPE),
 * added tokens, normalizer, pre-tokenizer, post-processor, decoder, truncation and
 * padding. Every malformed or unsupported part is reported with the file name and the
 * JSON path of the problem. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "loupe/io.h"

#define LP_MAX_IDS (1 << 22) /* ids above this are refused: no real vocabulary is near it */

typedef struct ctx { const char *name; lp_tokenizer *t; } ctx;

static const char *type_of(const cJSON *o)
{
    const cJSON *ty = cJSON_GetObjectItemCaseSensitive(o, "type");
    return cJSON_IsString(ty) ? ty->valuestring : NULL;
}

/* Boolean member with default; non-boolean values are a format error (-1). */
static int get_bool(const cJSON *o, const char *key, int dflt, int *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v || cJSON_IsNull(v)) { *out = dflt; return 0; }
    if (!cJSON_IsBool(v)) return -1;
    *out = cJSON_IsTrue(v);
    return 0;
}

/* Non-negative integer below LP_MAX_IDS (ids, lengths); -1 when not one. */
static long get_uint(const cJSON *v)
{
    if (!cJSON_IsNumber(v)) return -1;
    double d = v->valuedouble;
    if (!(d >= 0 && d < LP_MAX_IDS) || d != (double)(long)d) return -1;
    return (long)d;
}

static lp_status bad(ctx *c, const char *what) { return lp_err(LP_STATUS_FORMAT, "%s: %s", c->name, what); }

/* Names a compiled pattern for match-time errors: the file, the stage and the pattern. */
static lp_status describe_re(ctx *c, lp_pretok *pt, const char *stage, const char *pat)
{
    int n = snprintf(NULL, 0, "%s: %s pre-tokenizer pattern /%.120s/", c->name, stage, pat);
    if (n < 0 || !(pt->re_desc = lp_malloc((size_t)n + 1))) return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", c->name);
    snprintf(pt->re_desc, (size_t)n + 1, "%s: %s pre-tokenizer pattern /%.120s/", c->name, stage, pat);
    return LP_OK;
}

/* ---- normalizer ---- */

static lp_status parse_norm(ctx *c, const cJSON *o, lp_norm **out, int depth)
{
    *out = NULL;
    if (!o || cJSON_IsNull(o)) return LP_OK;
    const char *ty = type_of(o);
    if (!cJSON_IsObject(o) || !ty) return bad(c, "normalizer: expected an object with a \"type\"");
    if (depth > 16) return bad(c, "normalizer: nested too deeply");
    lp_norm *nm = lp_calloc(1, sizeof *nm);
    if (!nm) return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", c->name);
    *out = nm;
    if (!strcmp(ty, "BertNormalizer")) {
        nm->type = LP_NORM_BERT;
        int strip_set;
        const cJSON *sa = cJSON_GetObjectItemCaseSensitive(o, "strip_accents");
        strip_set = sa && !cJSON_IsNull(sa);
        if (get_bool(o, "clean_text", 1, &nm->clean_text) || get_bool(o, "handle_chinese_chars", 1, &nm->chinese) ||
            get_bool(o, "lowercase", 1, &nm->lowercase) || get_bool(o, "strip_accents", 0, &nm->strip_accents))
            return bad(c, "BertNormalizer: flags must be true, false or null");
        if (!strip_set) nm->strip_accents = nm->lowercase; /* HF: strip_accents follows lowercase */
    } else if (!strcmp(ty, "NFC")) nm->type = LP_NORM_NFC;
    else if (!strcmp(ty, "NFD")) nm->type = LP_NORM_NFD;
    else if (!strcmp(ty, "NFKC")) nm->type = LP_NORM_NFKC;
    else if (!strcmp(ty, "NFKD")) nm->type = LP_NORM_NFKD;
    else if (!strcmp(ty, "Lowercase")) nm->type = LP_NORM_LOWER;
    else if (!strcmp(ty, "StripAccents")) nm->type = LP_NORM_STRIP_ACCENTS;
    else if (!strcmp(ty, "Sequence")) {
        nm->type = LP_NORM_SEQ;
        const cJSON *arr = cJSON_GetObjectItemCaseSensitive(o, "normalizers");
        if (!cJSON_IsArray(arr)) return bad(c, "normalizer Sequence: \"normalizers\" must be an array");
        int n = cJSON_GetArraySize(arr);
        nm->kids = lp_calloc((size_t)n + 1, sizeof *nm->kids);
        if (!nm->kids) return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", c->name);
        const cJSON *it;
        cJSON_ArrayForEach(it, arr) {
            lp_status st = parse_norm(c, it, &nm->kids[nm->nkids], depth + 1);
            if (nm->kids[nm->nkids]) nm->nkids++;
            if (st) return st;
        }
    } else {
        return lp_err(LP_STATUS_UNSUPPORTED, "%s: normalizer type \"%s\" is not supported", c->name, ty);
    }
    return LP_OK;
}

/* ---- pre-tokenizer ---- */

static const char GPT2_RE[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

static lp_status parse_pre(ctx *c, const cJSON *o, lp_pretok **out, int depth)
{
    *out = NULL;
    if (!o || cJSON_IsNull(o)) return LP_OK;
    const char *ty = type_of(o);
    if (!cJSON_IsObject(o) || !ty) return bad(c, "pre_tokenizer: expected an object with a \"type\"");
    if (depth > 16) return bad(c, "pre_tokenizer: nested too deeply");
    lp_pretok *pt = lp_calloc(1, sizeof *pt);
    if (!pt) return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", c->name);
    *out = pt;
    if (!strcmp(ty, "BertPreTokenizer")) {
        pt->type = LP_PRE_BERT;
    } else if (!strcmp(ty, "ByteLevel")) {
        pt->type = LP_PRE_BYTELEVEL;
        if (get_bool(o, "add_prefix_space", 1, &pt->add_prefix_space) || get_bool(o, "use_regex", 1, &pt->use_regex))
            return bad(c, "ByteLevel: flags must be true or false");
        lp_status st = pt->use_regex ? lp_regex_compile(GPT2_RE, sizeof GPT2_RE - 1, 0, c->name, &pt->re) : LP_OK;
        if (st) return st;
        if (pt->use_regex && describe_re(c, pt, "ByteLevel", GPT2_RE)) return LP_STATUS_NO_MEMORY;
    } else if (!strcmp(ty, "Split")) {
        pt->type = LP_PRE_SPLIT;
        const cJSON *pat = cJSON_GetObjectItemCaseSensitive(o, "pattern");
        const cJSON *re = cJSON_GetObjectItemCaseSensitive(pat, "Regex");
        const cJSON *lit = cJSON_GetObjectItemCaseSensitive(pat, "String");
        const cJSON *p = cJSON_IsString(re) ? re : lit;
        if (!cJSON_IsString(p)) return bad(c, "Split: \"pattern\" must be {\"Regex\": ...} or {\"String\": ...}");
        if (!*p->valuestring) return bad(c, "Split: empty pattern");
        lp_status st = lp_regex_compile(p->valuestring, strlen(p->valuestring), p == lit, c->name, &pt->re);
        if (st) return st;
        if (describe_re(c, pt, "Split", p->valuestring)) return LP_STATUS_NO_MEMORY;
        const cJSON *beh = cJSON_GetObjectItemCaseSensitive(o, "behavior");
        const char *b = cJSON_IsString(beh) ? beh->valuestring : "";
        static const char *names[] = {"Isolated", "Removed", "MergedWithPrevious", "MergedWithNext", "Contiguous"};
        pt->behavior = -1;
        for (int i = 0; i < 5; i++)
            if (!strcmp(b, names[i])) pt->behavior = i;
        if (pt->behavior < 0) return bad(c, "Split: unknown \"behavior\"");
        if (get_bool(o, "invert", 0, &pt->invert)) return bad(c, "Split: \"invert\" must be true or false");
    } else if (!strcmp(ty, "Digits")) {
        pt->type = LP_PRE_DIGITS;
        if (get_bool(o, "individual_digits", 0, &pt->individual_digits))
            return bad(c, "Digits: \"individual_digits\" must be true or false");
    } else if (!strcmp(ty, "WhitespaceSplit")) {
        pt->type = LP_PRE_WSSPLIT;
    } else if (!strcmp(ty, "Whitespace")) {
        pt->type = LP_PRE_WHITESPACE;
        static const char ws_re[] = "\\w+|[^\\w\\s]+";
        lp_status st = lp_regex_compile(ws_re, sizeof ws_re - 1, 0, c->name, &pt->re);
        if (st) return st;
        if (describe_re(c, pt, "Whitespace", ws_re)) return LP_STATUS_NO_MEMORY;
    } else if (!strcmp(ty, "Sequence")) {
        pt->type = LP_PRE_SEQ;
        const cJSON *arr = cJSON_GetObjectItemCaseSensitive(o, "pretokenizers");
        if (!cJSON_IsArray(arr)) return bad(c, "pre_tokenizer Sequence: \"pretokenizers\" must be an array");
        int n = cJSON_GetArraySize(arr);
        pt->kids = lp_calloc((size_t)n + 1, sizeof *pt->kids);
        if (!pt->kids) return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", c->name);
        const cJSON *it;
        cJSON_ArrayForEach(it, arr) {
            lp_status st = parse_pre(c, it, &pt->kids[pt->nkids], depth + 1);
            if (pt->kids[pt->nkids]) pt->nkids++;
            if (st) return st;
        }
    } else {
        return lp_err(LP_STATUS_UNSUPPORTED, "%s: pre-tokenizer type \"%s\" is not supported", c->name, ty);
    }
    return LP_OK;
}

/* Byte-level words must not be split again after the byte mapping: ByteLevel has to be
 * the last stage. Returns 1 when the tree contains ByteLevel, -1 when misplaced. */
static int bytelevel_check(const lp_pretok *pt)
{
    if (!pt) return 0;
    if (pt->type == LP_PRE_BYTELEVEL) return 1;
    if (pt->type != LP_PRE_SEQ) return 0;
    int found = 0;
    for (int i = 0; i < pt->nkids; i++) {
        int r = bytelevel_check(pt->kids[i]);
        if (r < 0 || (found && pt->kids[i]->type != LP_PRE_BYTELEVEL)) return -1;
        if (r && i != pt->nkids - 1 && pt->kids[i + 1]->type != LP_PRE_BYTELEVEL) return -1;
        found |= r;
    }
    return found;
}

/* ---- model ---- */

static lp_status parse_vocab(ctx *c, const cJSON *vocab)
{
    lp_tokenizer *t = c->t;
    if (!cJSON_IsObject(vocab)) return bad(c, "model: \"vocab\" must be an object {token: id}");
    int n = cJSON_GetArraySize(vocab);
    if (lp_strmap_init(&t->vocab, (uint32_t)n)) return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", c->name);
    const cJSON *it;
    cJSON_ArrayForEach(it, vocab) {
        long id = get_uint(it);
        if (id < 0)
            return lp_err(LP_STATUS_FORMAT, "%s: model.vocab[\"%.40s\"]: id must be an integer in [0, %d)", c->name,
                          it->string, LP_MAX_IDS);
        if (lp_strmap_put(&t->vocab, it->string, strlen(it->string), (int32_t)id))
            return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", c->name);
        if (id >= t->n_ids) t->n_ids = (int32_t)id + 1;
    }
    return LP_OK;
}

static lp_status parse_merges(ctx *c, const cJSON *merges)
{
    lp_tokenizer *t = c->t;
    if (!cJSON_IsArray(merges)) return bad(c, "model: BPE needs \"merges\" (an array)");
    int n = cJSON_GetArraySize(merges);
    if (lp_u64map_init(&t->merges, (uint32_t)n)) return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", c->name);
    char *buf = NULL;
    size_t cap = 0;
    lp_status st = LP_OK;
    long rank = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, merges) {
        const char *a, *b;
        size_t la, lb;
        if (cJSON_IsString(it)) {
            const char *s = it->valuestring;
            if (!strncmp(s, "#version", 8)) { rank++; continue; }
            const char *sp = strchr(s, ' ');
            if (!sp || strchr(sp + 1, ' ')) {
                st = lp_err(LP_STATUS_FORMAT, "%s: model.merges[%ld] \"%.60s\": expected two tokens separated by one space",
                            c->name, rank, s);
                break;
            }
            a = s, la = (size_t)(sp - s), b = sp + 1, lb = strlen(b);
        } else if (cJSON_IsArray(it) && cJSON_GetArraySize(it) == 2 && cJSON_IsString(it->child) &&
                   cJSON_IsString(it->child->next)) {
            a = it->child->valuestring, la = strlen(a), b = it->child->next->valuestring, lb = strlen(b);
        } else {
            st = lp_err(LP_STATUS_FORMAT, "%s: model.merges[%ld]: expected \"a b\" or [\"a\", \"b\"]", c->name, rank);
            break;
        }
        int32_t ia, ib, ic;
        if (la + lb > cap) {
            cap = (la + lb) * 2 + 64;
            char *nb = lp_realloc(buf, cap);
            if (!nb) { st = lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", c->name); break; }
            buf = nb;
        }
        memcpy(buf, a, la);
        memcpy(buf + la, b, lb);
        if (!lp_strmap_get(&t->vocab, a, la, &ia) || !lp_strmap_get(&t->vocab, b, lb, &ib) ||
            !lp_strmap_get(&t->vocab, buf, la + lb, &ic)) {
            st = lp_err(LP_STATUS_FORMAT, "%s: model.merges[%ld] (\"%.*s\" + \"%.*s\"): token missing from the vocab",
                        c->name, rank, (int)(la > 40 ? 40 : la), a, (int)(lb > 40 ? 40 : lb), b);
            break;
        }
        /* a later duplicate overwrites, as HF's HashMap insert does */
        if (lp_u64map_put(&t->merges, ((uint64_t)(uint32_t)ia << 32) | (uint32_t)ib,
                          ((uint64_t)(uint32_t)rank << 32) | (uint32_t)ic)) {
            st = lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", c->name);
            break;
        }
        rank++;
    }
    free(buf);
    return st;
}

static int empty_or_null(const cJSON *v) { return !v || cJSON_IsNull(v) || (cJSON_IsString(v) && !*v->valuestring); }

static lp_status parse_model(ctx *c, const cJSON *m)
{
    lp_tokenizer *t = c->t;
    if (!cJSON_IsObject(m)) return bad(c, "missing \"model\" (an object)");
    const char *ty = type_of(m);
    const cJSON *merges = cJSON_GetObjectItemCaseSensitive(m, "merges");
    if (!ty) {
        /* old files omit the tag; HF tells the models apart by their fields */
        if (merges) ty = "BPE";
        else if (cJSON_GetObjectItemCaseSensitive(m, "max_input_chars_per_word")) ty = "WordPiece";
        else return bad(c, "model: missing \"type\"");
    }
    lp_status st = parse_vocab(c, cJSON_GetObjectItemCaseSensitive(m, "vocab"));
    if (st) return st;
    const cJSON *unk = cJSON_GetObjectItemCaseSensitive(m, "unk_token");
    t->unk_id = -1;
    if (!strcmp(ty, "WordPiece")) {
        t->model = LP_MODEL_WORDPIECE;
        const char *u = cJSON_IsString(unk) ? unk->valuestring : "[UNK]";
        if (!lp_strmap_get(&t->vocab, u, strlen(u), &t->unk_id))
            return lp_err(LP_STATUS_FORMAT, "%s: WordPiece unk_token \"%.40s\" is not in the vocab", c->name, u);
        const cJSON *pre = cJSON_GetObjectItemCaseSensitive(m, "continuing_subword_prefix");
        t->wp_prefix = lp_strdup(cJSON_IsString(pre) ? pre->valuestring : "##");
        if (!t->wp_prefix) return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", c->name);
        t->wp_prefix_len = strlen(t->wp_prefix);
        const cJSON *mx = cJSON_GetObjectItemCaseSensitive(m, "max_input_chars_per_word");
        long v = mx ? get_uint(mx) : 100;
        if (v < 0) return bad(c, "WordPiece: max_input_chars_per_word must be a non-negative integer");
        t->wp_max_chars = (int32_t)v;
        return LP_OK;
    }
    if (strcmp(ty, "BPE"))
        return lp_err(LP_STATUS_UNSUPPORTED, "%s: model type \"%s\" is not supported (WordPiece, BPE)", c->name, ty);
    t->model = LP_MODEL_BPE;
    if (cJSON_IsString(unk) && !lp_strmap_get(&t->vocab, unk->valuestring, strlen(unk->valuestring), &t->unk_id))
        return lp_err(LP_STATUS_FORMAT, "%s: BPE unk_token \"%.40s\" is not in the vocab", c->name, unk->valuestring);
    const cJSON *drop = cJSON_GetObjectItemCaseSensitive(m, "dropout");
    if (drop && !cJSON_IsNull(drop) && !(cJSON_IsNumber(drop) && drop->valuedouble == 0))
        return lp_err(LP_STATUS_UNSUPPORTED, "%s: BPE dropout is a training-time option and is not supported", c->name);
    if (!empty_or_null(cJSON_GetObjectItemCaseSensitive(m, "continuing_subword_prefix")) ||
        !empty_or_null(cJSON_GetObjectItemCaseSensitive(m, "end_of_word_suffix")))
        return lp_err(LP_STATUS_UNSUPPORTED, "%s: BPE continuing_subword_prefix/end_of_word_suffix are not supported",
                      c->name);
    if (get_bool(m, "fuse_unk", 0, &t->fuse_unk) || get_bool(m, "byte_fallback", 0, &t->byte_fallback) ||
        get_bool(m, "ignore_merges", 0, &t->ignore_merges))
        return bad(c, "BPE: fuse_unk, byte_fallback and ignore_merges must be true or false");
    return parse_merges(c, merges);
}

/* ---- added tokens, post-processor, decoder, truncation/padding ---- */

static lp_status parse_added(ctx *c, const cJSON *arr)
{
    lp_tokenizer *t = c->t;
    if (!arr || cJSON_IsNull(arr)) return LP_OK;
    if (!cJSON_IsArray(arr)) return bad(c, "\"added_tokens\" must be an array");
    int n = cJSON_GetArraySize(arr);
    t->added = lp_calloc((size_t)n + 1, sizeof *t->added);
    if (!t->added) return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", c->name);
    const cJSON *it;
    cJSON_ArrayForEach(it, arr) {
        lp_added *a = &t->added[t->n_added];
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(it, "content");
        long id = get_uint(cJSON_GetObjectItemCaseSensitive(it, "id"));
        if (!cJSON_IsString(content) || !*content->valuestring || id < 0)
            return lp_err(LP_STATUS_FORMAT, "%s: added_tokens[%d]: needs a non-empty \"content\" and an integer \"id\"",
                          c->name, t->n_added);
        if (get_bool(it, "special", 0, &a->special) || get_bool(it, "lstrip", 0, &a->lstrip) ||
            get_bool(it, "rstrip", 0, &a->rstrip) || get_bool(it, "single_word", 0, &a->single_word) ||
            get_bool(it, "normalized", !a->special, &a->normalized))
            return lp_err(LP_STATUS_FORMAT, "%s: added_tokens[%d]: flags must be true or false", c->name, t->n_added);
        a->content = lp_strdup(content->valuestring);
        if (!a->content) return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", c->name);
        a->len = strlen(a->content);
        /* HF ignores the written id: a token already known (added earlier or in the
         * model vocab) keeps that id, a new one takes the next id after the vocab and the
         * added tokens so far. Consistent files (all real ones) give the written ids. */
        int32_t known = -1;
        for (int k = 0; k < t->n_added && known < 0; k++)
            if (!strcmp(t->added[k].content, a->content)) known = t->added[k].id;
        if (known < 0 && !lp_strmap_get(&t->vocab, a->content, a->len, &known)) {
            int32_t vsz = (int32_t)t->vocab.n, mx = -1;
            for (int k = 0; k < t->n_added; k++) mx = t->added[k].id > mx ? t->added[k].id : mx;
            known = mx < 0 ? vsz : (mx >= vsz || vsz == 0 ? mx + 1 : vsz);
        }
        (void)id;
        a->id = known;
        if (a->id >= LP_MAX_IDS)
            return lp_err(LP_STATUS_FORMAT, "%s: added_tokens[%d]: id out of range", c->name, t->n_added);
        if (a->id >= t->n_ids) t->n_ids = a->id + 1;
        t->n_added++;
    }
    return LP_OK;
}

static lp_status tpl_add(ctx *c, lp_template *tp, int kind, int32_t type_id, const int32_t *ids, int nids)
{
    void *np = lp_realloc(tp->p, (size_t)(tp->n + 1) * sizeof *tp->p);
    if (!np) return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", c->name);
    tp->p = np;
    lp_tpl_piece *p = &tp->p[tp->n++];
    *p = (lp_tpl_piece){kind, type_id, NULL, 0};
    if (nids) {
        p->ids = lp_malloc((size_t)nids * sizeof *ids);
        if (!p->ids) return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", c->name);
        memcpy(p->ids, ids, (size_t)nids * sizeof *ids);
        p->nids = nids;
    }
    return LP_OK;
}

/* ["[SEP]", 102] as BertProcessing/RobertaProcessing write their tokens. */
static int32_t pair_id(const cJSON *v)
{
    if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != 2) return -1;
    return (int32_t)get_uint(cJSON_GetArrayItem(v, 1));
}

static lp_status parse_template(ctx *c, const cJSON *arr, const cJSON *specials, lp_template *tp)
{
    if (!cJSON_IsArray(arr)) return bad(c, "TemplateProcessing: \"single\" and \"pair\" must be arrays");
    const cJSON *it;
    cJSON_ArrayForEach(it, arr) {
        const cJSON *sp = cJSON_GetObjectItemCaseSensitive(it, "SpecialToken");
        const cJSON *sq = cJSON_GetObjectItemCaseSensitive(it, "Sequence");
        const cJSON *body = sp ? sp : sq;
        const cJSON *idv = cJSON_GetObjectItemCaseSensitive(body, "id");
        long type_id = get_uint(cJSON_GetObjectItemCaseSensitive(body, "type_id"));
        if (!cJSON_IsString(idv) || type_id < 0)
            return bad(c, "TemplateProcessing: each piece needs a string \"id\" and an integer \"type_id\"");
        lp_status st;
        if (sq) {
            int kind = !strcmp(idv->valuestring, "A") ? LP_TPL_A : !strcmp(idv->valuestring, "B") ? LP_TPL_B : -1;
            if (kind < 0) return bad(c, "TemplateProcessing: sequence id must be \"A\" or \"B\"");
            st = tpl_add(c, tp, kind, (int32_t)type_id, NULL, 0);
        } else {
            const cJSON *entry = cJSON_GetObjectItemCaseSensitive(specials, idv->valuestring);
            const cJSON *ids = cJSON_GetObjectItemCaseSensitive(entry, "ids");
            if (!cJSON_IsArray(ids))
                return lp_err(LP_STATUS_FORMAT, "%s: TemplateProcessing: special token \"%.40s\" has no \"ids\"",
                              c->name, idv->valuestring);
            int n = cJSON_GetArraySize(ids), k = 0;
            int32_t *v = lp_malloc(((size_t)n + 1) * sizeof *v);
            if (!v) return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", c->name);
            const cJSON *x;
            cJSON_ArrayForEach(x, ids) {
                long id = get_uint(x);
                if (id < 0) { free(v); return bad(c, "TemplateProcessing: special token ids must be integers"); }
                if (id >= c->t->n_ids) c->t->n_ids = (int32_t)id + 1;
                v[k++] = (int32_t)id;
            }
            st = tpl_add(c, tp, LP_TPL_SPECIAL, (int32_t)type_id, v, k);
            free(v);
        }
        if (st) return st;
    }
    return LP_OK;
}

static lp_status parse_post(ctx *c, const cJSON *o, int depth)
{
    lp_tokenizer *t = c->t;
    if (!o || cJSON_IsNull(o)) return LP_OK;
    const char *ty = type_of(o);
    if (!ty) return bad(c, "post_processor: expected an object with a \"type\"");
    if (depth > 8) return bad(c, "post_processor: nested too deeply");
    if (!strcmp(ty, "ByteLevel")) return LP_OK; /* offsets only */
    if (!strcmp(ty, "Sequence")) {
        const cJSON *it, *arr = cJSON_GetObjectItemCaseSensitive(o, "processors");
        if (!cJSON_IsArray(arr)) return bad(c, "post_processor Sequence: \"processors\" must be an array");
        cJSON_ArrayForEach(it, arr) {
            lp_status st = parse_post(c, it, depth + 1);
            if (st) return st;
        }
        return LP_OK;
    }
    if (t->has_post) return lp_err(LP_STATUS_UNSUPPORTED, "%s: more than one id-adding post-processor", c->name);
    t->has_post = 1;
    if (!strcmp(ty, "TemplateProcessing")) {
        const cJSON *sp = cJSON_GetObjectItemCaseSensitive(o, "special_tokens");
        lp_status st = parse_template(c, cJSON_GetObjectItemCaseSensitive(o, "single"), sp, &t->single);
        return st ? st : parse_template(c, cJSON_GetObjectItemCaseSensitive(o, "pair"), sp, &t->pair);
    }
    int roberta = !strcmp(ty, "RobertaProcessing");
    if (!roberta && strcmp(ty, "BertProcessing"))
        return lp_err(LP_STATUS_UNSUPPORTED, "%s: post-processor type \"%s\" is not supported", c->name, ty);
    int32_t cls = pair_id(cJSON_GetObjectItemCaseSensitive(o, "cls"));
    int32_t sep = pair_id(cJSON_GetObjectItemCaseSensitive(o, "sep"));
    if (cls < 0 || sep < 0) return lp_err(LP_STATUS_FORMAT, "%s: %s needs \"cls\" and \"sep\" as [token, id]", c->name, ty);
    if (cls >= t->n_ids) t->n_ids = cls + 1;
    if (sep >= t->n_ids) t->n_ids = sep + 1;
    t->specials[LP_SPECIAL_CLS] = cls;
    t->specials[LP_SPECIAL_SEP] = sep;
    /* BERT: [CLS] A [SEP] B:1 [SEP]:1.  RoBERTa: <s> A </s> </s> B </s>, all type 0. */
    int32_t tb = roberta ? 0 : 1;
    lp_status st = LP_OK;
    st = st ? st : tpl_add(c, &t->single, LP_TPL_SPECIAL, 0, &cls, 1);
    st = st ? st : tpl_add(c, &t->single, LP_TPL_A, 0, NULL, 0);
    st = st ? st : tpl_add(c, &t->single, LP_TPL_SPECIAL, 0, &sep, 1);
    st = st ? st : tpl_add(c, &t->pair, LP_TPL_SPECIAL, 0, &cls, 1);
    st = st ? st : tpl_add(c, &t->pair, LP_TPL_A, 0, NULL, 0);
    st = st ? st : tpl_add(c, &t->pair, LP_TPL_SPECIAL, 0, &sep, 1);
    if (roberta) st = st ? st : tpl_add(c, &t->pair, LP_TPL_SPECIAL, 0, &sep, 1);
    st = st ? st : tpl_add(c, &t->pair, LP_TPL_B, tb, NULL, 0);
    st = st ? st : tpl_add(c, &t->pair, LP_TPL_SPECIAL, tb, &sep, 1);
    return st;
}

static lp_status parse_decoder(ctx *c, const cJSON *o)
{
    lp_tokenizer *t = c->t;
    if (!o || cJSON_IsNull(o)) return LP_OK;
    const char *ty = type_of(o);
    if (!ty) return bad(c, "decoder: expected an object with a \"type\"");
    if (!strcmp(ty, "ByteLevel")) {
        t->dec = LP_DEC_BYTELEVEL;
    } else if (!strcmp(ty, "WordPiece")) {
        t->dec = LP_DEC_WORDPIECE;
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(o, "prefix");
        t->dec_prefix = lp_strdup(cJSON_IsString(p) ? p->valuestring : "##");
        if (!t->dec_prefix) return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", c->name);
        if (get_bool(o, "cleanup", 1, &t->dec_cleanup)) return bad(c, "decoder: \"cleanup\" must be true or false");
    } else {
        t->dec = LP_DEC_OTHER; /* encoding still works; decode reports it */
    }
    return LP_OK;
}

static lp_status parse_trunc_pad(ctx *c, const cJSON *root)
{
    lp_tokenizer *t = c->t;
    const cJSON *tr = cJSON_GetObjectItemCaseSensitive(root, "truncation");
    if (cJSON_IsObject(tr)) {
        long ml = get_uint(cJSON_GetObjectItemCaseSensitive(tr, "max_length"));
        if (ml < 0) return bad(c, "truncation: \"max_length\" must be an integer");
        t->file_opts.max_length = (int32_t)ml;
        const cJSON *s = cJSON_GetObjectItemCaseSensitive(tr, "strategy");
        if (cJSON_IsString(s) && !strcmp(s->valuestring, "OnlyFirst")) t->file_opts.truncation = LP_TRUNCATION_ONLY_FIRST;
        if (cJSON_IsString(s) && !strcmp(s->valuestring, "OnlySecond")) t->file_opts.truncation = LP_TRUNCATION_ONLY_SECOND;
    }
    const cJSON *pd = cJSON_GetObjectItemCaseSensitive(root, "padding");
    if (cJSON_IsObject(pd)) {
        const cJSON *s = cJSON_GetObjectItemCaseSensitive(pd, "strategy");
        const cJSON *fixed = cJSON_GetObjectItemCaseSensitive(s, "Fixed");
        if (fixed) {
            long n = get_uint(fixed);
            if (n < 0) return bad(c, "padding: \"Fixed\" must be an integer");
            t->file_opts.pad_to = (int32_t)n;
        }
        long pid = get_uint(cJSON_GetObjectItemCaseSensitive(pd, "pad_id"));
        if (pid >= 0) t->specials[LP_SPECIAL_PAD] = (int32_t)pid;
        long ptid = get_uint(cJSON_GetObjectItemCaseSensitive(pd, "pad_type_id"));
        if (ptid >= 0) t->file_pad_type_id = (int32_t)ptid;
    }
    return LP_OK;
}

/* JSON allows no raw control characters inside strings (RFC 8259; serde, which HF's
 * tokenizers use, refuses them), and a raw NUL anywhere would cut a token short behind
 * cJSON's back: a vocabulary entry "a\0b" became "a". Refused naming the line. */
static lp_status check_raw_bytes(const char *json, size_t len, const char *name)
{
    int in_str = 0;
    size_t line = 1;
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)json[i];
        if (ch == 0 || (in_str && ch < 0x20))
            return lp_err(LP_STATUS_FORMAT, "%s: line %zu: raw control byte 0x%02x %s (write it as \\u%04x)", name,
                          line, ch, in_str ? "inside a string" : "in the JSON", ch);
        if (ch == '\n') line++;
        if (in_str && ch == '\\') i++; /* an escape: the next byte is its letter */
        else if (ch == '"') in_str = !in_str;
    }
    return LP_OK;
}

lp_status lp_tokenizer_from_json(const char *json, size_t len, const char *name, lp_tokenizer **out)
{
    *out = NULL;
    if (len == 0) return lp_err(LP_STATUS_FORMAT, "%s: empty file", name);
    lp_status raw = check_raw_bytes(json, len, name);
    if (raw) return raw;
    bool oom;
    cJSON *root = lp_json_parse(json, len, NULL, &oom);
    if (oom) return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", name);
    if (!root) {
        const char *e = cJSON_GetErrorPtr();
        size_t at = (e && e >= json && e <= json + len) ? (size_t)(e - json) : 0;
        return lp_err(LP_STATUS_FORMAT, "%s: invalid JSON near byte %zu", name, at);
    }
    lp_tokenizer *t = lp_tokenizer_alloc(name);
    if (!t) { cJSON_Delete(root); return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", name); }
    ctx c = {name, t};
    lp_status st = LP_OK;
    if (!cJSON_IsObject(root)) st = bad(&c, "top level must be a JSON object");
    if (!st) st = parse_model(&c, cJSON_GetObjectItemCaseSensitive(root, "model"));
    if (!st) st = parse_added(&c, cJSON_GetObjectItemCaseSensitive(root, "added_tokens"));
    if (!st) st = parse_norm(&c, cJSON_GetObjectItemCaseSensitive(root, "normalizer"), &t->norm, 0);
    if (!st) st = parse_pre(&c, cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer"), &t->pre, 0);
    if (!st) {
        int bl = bytelevel_check(t->pre);
        if (bl < 0) st = lp_err(LP_STATUS_UNSUPPORTED, "%s: ByteLevel must be the last pre-tokenizer", name);
        t->byte_level = bl > 0 && t->model == LP_MODEL_BPE;
    }
    if (!st) st = parse_post(&c, cJSON_GetObjectItemCaseSensitive(root, "post_processor"), 0);
    if (!st) st = parse_decoder(&c, cJSON_GetObjectItemCaseSensitive(root, "decoder"));
    if (!st) st = parse_trunc_pad(&c, root);
    cJSON_Delete(root);
    if (!st) st = lp_tokenizer_finish(t);
    if (st) {
        lp_tokenizer_free(t);
        return st;
    }
    *out = t;
    return LP_OK;
}
