/* Private structures of the text layer: hash tables, the loaded tokenizer's components
 * and the per-thread scratch that encode uses. Nothing here is public API. */
#ifndef LP_TEXT_INTERNAL_H
#define LP_TEXT_INTERNAL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdint.h>
#include <stddef.h>

#include "loupe/text.h"

/* ---- hash tables (hmap.c) ---- */

/* Byte string -> int32 map, open addressing with linear probing. Keys are copied into an
 * arena owned by the map. */
typedef struct lp_strmap {
    uint64_t *slots;  /* 0 = empty, else (hash >> 32) << 32 | (entry index + 1): the tag
                       * settles most misses without touching the entry */
    uint32_t mask;    /* slot count - 1 (power of two) */
    struct lp_strent { uint64_t hash; uint32_t off, len; int32_t val; } *ents;
    uint32_t n, cap_ents;
    char *keys;       /* key bytes */
    size_t keys_len, keys_cap;
} lp_strmap;

uint64_t lp_hash_bytes(const void *p, size_t n);
int lp_strmap_init(lp_strmap *m, uint32_t expected);
void lp_strmap_free(lp_strmap *m);
/* Inserts or overwrites; returns 0 or -1 when out of memory. */
int lp_strmap_put(lp_strmap *m, const char *k, size_t n, int32_t v);
/* Returns 1 and sets *v when found. */
int lp_strmap_get(const lp_strmap *m, const char *k, size_t n, int32_t *v);
void lp_strmap_clear(lp_strmap *m);

/* uint64 -> uint64 map (merge pairs -> rank and result id). Key UINT64_MAX is reserved. */
typedef struct lp_u64map {
    uint64_t *keys, *vals;
    uint32_t mask, n;
} lp_u64map;

int lp_u64map_init(lp_u64map *m, uint32_t expected);
void lp_u64map_free(lp_u64map *m);
int lp_u64map_put(lp_u64map *m, uint64_t k, uint64_t v);
static inline int lp_u64map_get(const lp_u64map *m, uint64_t k, uint64_t *v)
{
    uint64_t h = k * 0x9E3779B97F4A7C15ull;
    uint32_t i = (uint32_t)(h >> 32) & m->mask;
    for (;;) {
        uint64_t kk = m->keys[i];
        if (kk == k) { *v = m->vals[i]; return 1; }
        if (kk == UINT64_MAX) return 0;
        i = (i + 1) & m->mask;
    }
}

/* ---- UTF-8 and character classes (utf8.c) ---- */

/* Decodes one code point from valid UTF-8 at s (n bytes left, n > 0); sets *len. */
int32_t lp_utf8_next(const uint8_t *s, size_t n, int *len);
/* Encodes cp into out (4 bytes room); returns the byte count. */
int lp_utf8_put(int32_t cp, char *out);
/* Returns the length of the valid UTF-8 prefix of s. */
size_t lp_utf8_valid_prefix(const uint8_t *s, size_t n);
int lp_is_ws(int32_t cp);          /* Unicode White_Space (Rust char::is_whitespace) */
int lp_is_control(int32_t cp);     /* BERT: category C* except \t \n \r */
int lp_is_punct(int32_t cp);       /* BERT: ASCII punctuation or category P* */
int lp_is_cjk(int32_t cp);         /* BERT's CJK ideograph ranges */
int lp_is_numeric(int32_t cp);     /* Rust char::is_numeric: Nd, Nl, No */
int lp_is_mn(int32_t cp);          /* category Mn */

/* GPT-2 bytes_to_unicode: byte -> code point and back (-1 when not in the alphabet). */
extern int32_t lp_byte_to_cp[256];
int lp_cp_to_byte(int32_t cp);

/* ---- growable buffers ---- */
typedef struct lp_buf { char *p; size_t len, cap; } lp_buf;
int lp_buf_reserve(lp_buf *b, size_t extra);
static inline int lp_buf_add(lp_buf *b, const void *d, size_t n)
{
    if (b->len + n > b->cap && lp_buf_reserve(b, n)) return -1;
    if (n) __builtin_memcpy(b->p + b->len, d, n);
    b->len += n;
    return 0;
}

typedef struct lp_span { uint32_t off, len; } lp_span;
typedef struct lp_spans { lp_span *v; size_t n, cap; } lp_spans;
int lp_spans_push(lp_spans *s, uint32_t off, uint32_t len);

typedef struct lp_ids { int32_t *v; size_t n, cap; } lp_ids;
int lp_ids_push(lp_ids *s, int32_t id);

/* ---- components ---- */

enum { LP_NORM_BERT = 1, LP_NORM_NFC, LP_NORM_NFD, LP_NORM_NFKC, LP_NORM_NFKD, LP_NORM_LOWER,
       LP_NORM_STRIP_ACCENTS, LP_NORM_SEQ };
typedef struct lp_norm {
    int type;
    int clean_text, chinese, strip_accents, lowercase; /* BertNormalizer */
    struct lp_norm **kids;
    int nkids;
} lp_norm;

enum { LP_PRE_BERT = 1, LP_PRE_BYTELEVEL, LP_PRE_SPLIT, LP_PRE_DIGITS, LP_PRE_WSSPLIT, LP_PRE_WHITESPACE,
       LP_PRE_SEQ };
enum { LP_BEH_ISOLATED = 0, LP_BEH_REMOVED, LP_BEH_PREV, LP_BEH_NEXT, LP_BEH_CONTIGUOUS };
typedef struct lp_pretok {
    int type;
    int add_prefix_space, use_regex; /* ByteLevel */
    int individual_digits;           /* Digits */
    int behavior, invert;            /* Split */
    pcre2_code *re;                  /* Split (Regex or escaped String), ByteLevel, Whitespace */
    char *re_desc;                   /* "<file>: <stage> pattern /.../" for match errors (owned) */
    struct lp_pretok **kids;
    int nkids;
} lp_pretok;

enum { LP_MODEL_WORDPIECE = 1, LP_MODEL_BPE };
enum { LP_DEC_NONE = 0, LP_DEC_WORDPIECE, LP_DEC_BYTELEVEL, LP_DEC_OTHER };
enum { LP_TPL_SPECIAL = 0, LP_TPL_A, LP_TPL_B };

typedef struct lp_tpl_piece { int kind; int32_t type_id; int32_t *ids; int nids; } lp_tpl_piece;
typedef struct lp_template { lp_tpl_piece *p; int n; } lp_template;

typedef struct lp_added {
    char *content;  /* as matched: raw for normalized=false, normalized content otherwise */
    size_t len;
    int32_t id;
    int special, lstrip, rstrip, single_word, normalized;
} lp_added;

struct lp_tokenizer {
    uint64_t serial;          /* tells thread scratch which tokenizer it serves */
    char *name;               /* file name for messages */
    /* vocabulary */
    lp_strmap vocab;          /* token as written in the file -> id (model vocab) */
    char **id_tok;            /* id -> token (model vocab and added tokens) */
    uint8_t *id_special;      /* id -> 1 for special added tokens */
    int32_t n_ids;
    /* model */
    int model;
    int32_t unk_id;           /* -1 none */
    char *wp_prefix;          /* WordPiece continuing_subword_prefix */
    size_t wp_prefix_len;
    int32_t wp_max_chars;
    size_t max_tok_len;       /* longest vocab entry in bytes: bounds WordPiece's search */
    lp_u64map merges;         /* (a << 32 | b) -> (rank << 32 | new id) */
    int ignore_merges, byte_fallback, fuse_unk;
    int byte_level;           /* words reach the model as raw bytes (ByteLevel pre-tokenizer) */
    lp_strmap bvocab;         /* raw bytes -> id, when byte_level */
    int32_t byte_id[256];     /* id of each single byte, when byte_level (-1 missing) */
    int32_t byte_fb[256];     /* id of "<0xNN>" for byte_fallback (-1 missing) */
    /* pipeline */
    lp_norm *norm;
    lp_pretok *pre;
    lp_added *added;          /* sorted: raw ones first; each group longest first */
    int n_added, n_added_raw;
    uint8_t added_first[2][256]; /* first bytes of raw [0] / normalized [1] added tokens */
    lp_template single, pair; /* post-processor; n == 0 with has_post == 0: none */
    int has_post;
    int dec;
    char *dec_prefix;
    int dec_cleanup;
    lp_encode_opts file_opts;
    int32_t file_pad_type_id;
    int32_t specials[LP_SPECIAL__COUNT];
};

/* ---- per-thread scratch (encode.c) ---- */
typedef struct lp_scratch {
    uint64_t serial;
    lp_buf a, b;              /* text arenas */
    lp_spans segs, segs2, words;
    lp_ids seg_ids, seg_ids2;
    lp_ids ids_a, ids_b;
    /* BPE */
    struct lp_sym { int32_t id; int32_t prev, next; uint32_t len; } *syms;
    size_t syms_cap;
    struct lp_mrg { uint32_t rank; uint32_t pos; int32_t new_id; } *heap;
    size_t heap_cap;
    lp_strmap cache;          /* word -> offset into cache_ids (val), count stored there */
    lp_ids cache_ids;
    pcre2_match_data *md;
    pcre2_match_context *mctx;
    pcre2_jit_stack *jstack;
} lp_scratch;

/* normalize.c: appends the normalized form of in[0..n) to out. */
int lp_norm_apply(const lp_norm *nm, const char *in, size_t n, lp_buf *out);
void lp_norm_free(lp_norm *nm);

/* pretok.c: splits the text arena span `in` into words appended to `words` (spans in
 * *arena, which may grow). */
int lp_pretok_apply(const lp_pretok *pt, lp_scratch *sc, lp_buf *arena, lp_span in, lp_spans *words);
void lp_pretok_free(lp_pretok *pt);
/* Compiles a PCRE2 pattern (UTF, UCP) into *out (NULL on failure): FORMAT for a pattern
 * that does not compile, NO_MEMORY, each with lp_err set. */
lp_status lp_regex_compile(const char *pat, size_t len, int literal, const char *name, pcre2_code **out);

/* models.c: appends the ids of one word. */
int lp_model_word(const lp_tokenizer *t, lp_scratch *sc, const char *w, size_t n, lp_ids *out);

/* load_json.c */
lp_status lp_tokenizer_from_json(const char *json, size_t len, const char *name, lp_tokenizer **out);
lp_status lp_tokenizer_from_vocab_txt(const char *txt, size_t len, const char *name, lp_tokenizer **out);
lp_tokenizer *lp_tokenizer_alloc(const char *name);
/* Finishes a loaded tokenizer: id table, byte-level vocab, specials. */
lp_status lp_tokenizer_finish(lp_tokenizer *t);

#endif
