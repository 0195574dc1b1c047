/* loupe text: tokenizers loaded from Hugging Face `tokenizer.json` (WordPiece/BERT and
 * byte-level BPE as GPT-2, Qwen2, Llama 3 and SmolLM use it) or a BERT `vocab.txt`.
 * Ids match the Hugging Face `tokenizers` library on the same file.
 *
 *   lp_tokenizer *tok;
 *   if (lp_tokenizer_load("models/minilm", &tok) != LP_OK) die(lp_err_msg());
 *   lp_encode_opts o = lp_encode_opts_default();   // add specials, no truncation/padding
 *   o.max_length = 128;                            // truncate (longest_first for pairs)
 *   lp_encoding enc = {0};
 *   if (lp_tokenizer_encode(tok, "Hello world", NULL, &o, &enc) == LP_OK)
 *       for (size_t i = 0; i < enc.len; i++) printf("%d ", enc.ids[i]);
 *   lp_encoding_pad(&enc, 32, lp_tokenizer_special_id(tok, LP_SPECIAL_PAD), 0);  // pad a batch
 *   lp_encoding_free(&enc);
 *   lp_tokenizer_free(tok);
 *
 * Input text is UTF-8. Invalid byte sequences are replaced by U+FFFD before tokenizing,
 * one U+FFFD per maximal subpart (the Unicode "substitution of maximal subparts" rule,
 * which is what Python's bytes.decode("utf-8", errors="replace") does), so loupe on raw
 * bytes gives the ids that HF gives on the Python-decoded string.
 *
 * Threads: a loaded tokenizer is read-only; lp_tokenizer_encode may be called from many
 * threads at once on the same tokenizer (each thread keeps its own scratch buffers and
 * BPE word cache).
 */
#ifndef LOUPE_TEXT_H
#define LOUPE_TEXT_H

#include <stddef.h>
#include <stdint.h>

#include "loupe/base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lp_tokenizer lp_tokenizer;

/* Truncation strategy for pairs (single sequences are simply cut on the right). */
typedef enum lp_truncation {
    LP_TRUNCATION_LONGEST_FIRST = 0, /* HF "longest_first": trim the longer of A and B first */
    LP_TRUNCATION_ONLY_FIRST,        /* trim only A (error when that is not enough) */
    LP_TRUNCATION_ONLY_SECOND,       /* trim only B (error when that is not enough) */
} lp_truncation;

/* Options of one encode call. Start from lp_encode_opts_default() (or
 * lp_tokenizer_file_opts() for the truncation/padding written in tokenizer.json). */
typedef struct lp_encode_opts {
    int add_special_tokens;   /* 1: apply the post-processor ([CLS] A [SEP], BOS, ...) */
    int32_t max_length;       /* > 0: truncate so the result, specials included, fits; 0: off */
    lp_truncation truncation; /* how pairs are truncated */
    int32_t pad_to;           /* > 0: pad (right) to this length with the pad token; 0: off */
} lp_encode_opts;

/* The result of an encode. All arrays have len entries; reuse one lp_encoding across
 * calls (zero-initialise it once) to avoid allocations; release with lp_encoding_free. */
typedef struct lp_encoding {
    int32_t *ids;            /* token ids */
    int32_t *type_ids;       /* segment ids: 0 for A (and its specials), 1 for B in pairs */
    int32_t *attention_mask; /* 1 for real tokens, 0 for padding */
    uint8_t *special_mask;   /* 1 where the token was added by the post-processor or padding */
    size_t len;
    size_t cap; /* allocated entries (internal) */
} lp_encoding;

/* Which special token lp_tokenizer_special_id asks for. */
typedef enum lp_special {
    LP_SPECIAL_CLS = 0,
    LP_SPECIAL_SEP,
    LP_SPECIAL_PAD,
    LP_SPECIAL_UNK,
    LP_SPECIAL_BOS,
    LP_SPECIAL_EOS,
    LP_SPECIAL_MASK,
    LP_SPECIAL__COUNT
} lp_special;

/* Loads a tokenizer. path is a tokenizer.json file, a BERT vocab.txt file, or a directory
 * holding tokenizer.json (preferred) or vocab.txt (then BERT uncased defaults: lowercase,
 * strip accents, [CLS] A [SEP]). *out is owned by the caller (lp_tokenizer_free).
 * Errors: LP_STATUS_IO / _NOT_FOUND (file), _FORMAT (bad JSON, missing model, bad merges,
 * token ids out of range), _UNSUPPORTED (a component type this build does not implement). */
LP_WARN_UNUSED lp_status lp_tokenizer_load(const char *path, lp_tokenizer **out);

/* Same as lp_tokenizer_load from a tokenizer.json held in memory (len bytes, need not be
 * NUL-terminated). name is used in error messages. */
LP_WARN_UNUSED lp_status lp_tokenizer_load_json(const char *json, size_t len, const char *name,
                                                lp_tokenizer **out);

/* Frees a tokenizer (NULL is fine). No encode may be running on it. */
void lp_tokenizer_free(lp_tokenizer *tok);

/* add_special_tokens = 1, no truncation, no padding. */
lp_encode_opts lp_encode_opts_default(void);

/* Options matching the "truncation" and "padding" sections of tokenizer.json (what HF's
 * Tokenizer.from_file applies by default); fixed-length padding only (BatchLongest is left
 * to the caller, see lp_encoding_pad). */
lp_encode_opts lp_tokenizer_file_opts(const lp_tokenizer *tok);

/* Encodes text (NUL-terminated UTF-8) and optionally a second sequence text_pair (NULL
 * for none) into *enc, replacing its previous contents. opts NULL = lp_encode_opts_default().
 * Errors: LP_STATUS_INVALID_ARG (max_length smaller than the specials it must hold,
 * pad_to with no pad token), LP_STATUS_NO_MEMORY. On error enc->len is 0. */
LP_WARN_UNUSED lp_status lp_tokenizer_encode(const lp_tokenizer *tok, const char *text, const char *text_pair,
                                             const lp_encode_opts *opts, lp_encoding *enc);

/* The per-row encoder a dataset tokenizes with (data.h's lp_encode_fn, without text depending
 * on data): ctx is an lp_tokenizer_rows; each row is encoded with the specials and truncated
 * to max_len by the tokenizer, ids and type ids copied out (at most max_len), *n_out their
 * count. The lp_encoding inside is reused across rows: free it with lp_encoding_free. */
typedef struct lp_tokenizer_rows {
    const lp_tokenizer *tok; /* borrowed */
    lp_encoding enc;         /* scratch, owned */
} lp_tokenizer_rows;
LP_WARN_UNUSED lp_status lp_tokenizer_encode_row(void *ctx, const char *text, const char *text_pair, int32_t max_len,
                                                 int32_t *ids_out, int32_t *type_ids_out, int32_t *n_out);

/* lp_tokenizer_encode for byte strings with explicit lengths (may contain NUL bytes).
 * pair NULL = single sequence. */
LP_WARN_UNUSED lp_status lp_tokenizer_encode_n(const lp_tokenizer *tok, const char *text, size_t text_len,
                                               const char *pair, size_t pair_len, const lp_encode_opts *opts,
                                               lp_encoding *enc);

/* Pads enc on the right to length (no-op when already that long or longer) with pad_id,
 * type id pad_type_id and attention mask 0: used to pad a batch to its longest member. */
LP_WARN_UNUSED lp_status lp_encoding_pad(lp_encoding *enc, size_t length, int32_t pad_id, int32_t pad_type_id);

/* Releases the arrays of enc and zeroes it (the struct itself is the caller's). */
void lp_encoding_free(lp_encoding *enc);

/* Decodes ids to UTF-8 text through the tokenizer's decoder (WordPiece "##" joining and
 * cleanup, ByteLevel bytes; none: tokens joined by spaces). skip_special drops special
 * tokens. Unknown ids are skipped. *out is NUL-terminated, caller frees it with free(). */
LP_WARN_UNUSED lp_status lp_tokenizer_decode(const lp_tokenizer *tok, const int32_t *ids, size_t n, int skip_special,
                                             char **out);

/* Token string -> id (vocabulary or added tokens); -1 when absent. len = strlen(token). */
int32_t lp_tokenizer_token_to_id(const lp_tokenizer *tok, const char *token);

/* id -> token string as written in the vocabulary (byte-level tokens in their mapped
 * alphabet, e.g. "Ġthe"); NULL when the id is unknown. Owned by the tokenizer. */
const char *lp_tokenizer_id_to_token(const lp_tokenizer *tok, int32_t id);

/* Number of ids: 1 + the largest id in the vocabulary and added tokens. */
int32_t lp_tokenizer_vocab_size(const lp_tokenizer *tok);

/* The id of a special token, or -1 when the tokenizer has none. Found from the
 * post-processor, the model's unk token, the padding section and the usual names
 * ([CLS], <s>, <|endoftext|>, ...). */
int32_t lp_tokenizer_special_id(const lp_tokenizer *tok, lp_special which);

/* Number of ids the post-processor adds (2 for [CLS] A [SEP], 3 for pairs). */
int32_t lp_tokenizer_num_special(const lp_tokenizer *tok, int pair);

/* Replaces invalid UTF-8 in src[0..len) by U+FFFD (maximal subparts, as Python's
 * errors="replace"). Returns a new NUL-terminated buffer (caller frees) and its length
 * in *out_len; NULL when out of memory. */
char *lp_utf8_sanitize(const char *src, size_t len, size_t *out_len);

/* ---- chat templates ----
 * The Jinja2 chat template of a model (tokenizer_config.json "chat_template", or a GGUF's
 * tokenizer.chat_template) rendered as transformers' apply_chat_template renders it
 * (trim_blocks, lstrip_blocks, tojson as json.dumps(ensure_ascii=False), strftime_now,
 * raise_exception, namespace). The subset covers the templates of Qwen2.5, SmolLM2,
 * Llama 3.x and Mistral; other constructs are refused at parse time with the tag, filter
 * or test and its line named. Rendering is bounded (nesting, loop iterations, 64 MiB).
 *
 *   lp_chat_template *ct;
 *   if (lp_chat_template_parse(src, strlen(src), "tokenizer_config.json", &ct) != LP_OK) die(lp_err_msg());
 *   lp_chat_vars v = {.messages_json = "[{\"role\":\"user\",\"content\":\"Hi\"}]",
 *                     .bos_token = "<s>", .eos_token = "</s>", .add_generation_prompt = 1};
 *   char *text; size_t n;
 *   if (lp_chat_template_render(ct, &v, &text, &n) == LP_OK) fwrite(text, 1, n, stdout), free(text);
 *   lp_chat_template_free(ct);
 */
typedef struct lp_chat_template lp_chat_template;

/* The variables of one render, as JSON texts (borrowed for the call). */
typedef struct lp_chat_vars {
    const char *messages_json; /* required: array of {"role", "content", ...}, or an object
                                * {"messages": [...], "tools": [...]} (a JSONL conversation line) */
    const char *tools_json;    /* array of tool schemas, or NULL (tools is none) */
    const char *extra_json;    /* object of further variables (date_string, pad_token, ...), or NULL */
    const char *bos_token;     /* NULL: undefined in the template */
    const char *eos_token;
    int add_generation_prompt;
} lp_chat_vars;

/* Parses template text src[0, len) (no NUL needed); name labels errors (a file name).
 * *out is owned by the caller (lp_chat_template_free). Errors: LP_STATUS_FORMAT for
 * malformed syntax, LP_STATUS_UNSUPPORTED for constructs outside the subset; the message
 * is one line naming `name`, the line and the construct. */
LP_WARN_UNUSED lp_status lp_chat_template_parse(const char *src, size_t len, const char *name, lp_chat_template **out);

/* Frees a parsed template (NULL is fine). */
void lp_chat_template_free(lp_chat_template *t);

/* Renders one conversation. *out (NUL-terminated, *out_len bytes, out_len may be NULL) is
 * malloc'd and owned by the caller (free). raise_exception in the template fails with
 * LP_STATUS_INVALID_ARG and its message; a template may be rendered from many threads. */
LP_WARN_UNUSED lp_status lp_chat_template_render(const lp_chat_template *t, const lp_chat_vars *vars, char **out,
                                                 size_t *out_len);

/* The chat template and special tokens of a Hugging Face tokenizer_config.json (path: the
 * file or its directory): "chat_template" as a string, or the list form's entry named
 * "default"; bos_token/eos_token as strings or {"content": ...} (NULL when absent). */
typedef struct lp_chat_template_config {
    char *template_src; /* owned; NUL-terminated template text */
    char *bos_token;    /* owned or NULL */
    char *eos_token;    /* owned or NULL */
    char *path;         /* owned; the file read, for messages */
} lp_chat_template_config;

/* Fills *out (release with lp_chat_template_config_free). LP_STATUS_NOT_FOUND when the
 * file has no chat template; LP_STATUS_IO / LP_STATUS_FORMAT for unreadable or bad JSON. */
LP_WARN_UNUSED lp_status lp_chat_template_config_load(const char *path, lp_chat_template_config *out);
void lp_chat_template_config_free(lp_chat_template_config *c);

#ifdef __cplusplus
}
#endif
#endif /* LOUPE_TEXT_H */
