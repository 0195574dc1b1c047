/* loupe data: datasets for sequence classification and (text_only) causal-LM training.
 * Reads CSV (RFC 4180), TSV (GLUE SST-2 form) and JSONL; maps labels to ids
 * (label_mappings.json); splits, shuffles per epoch, tokenizes once through a caller's
 * encode callback, and builds padded batches (with per-token LM labels).
 *
 *   lp_dataset_options opt;
 *   lp_dataset_options_init(&opt);          // --text-column/--label-column default to
 *   opt.skip_bad_rows = 1;                  // auto-detection; --skip-bad-rows
 *   lp_dataset train, val;
 *   if (lp_dataset_load("data/sst2-mini/train.tsv", &opt, &train) != LP_OK) die(lp_err_msg());
 *   lp_label_map_save(&train.label_map, "run/label_mappings.json");
 *   lp_encoded_dataset enc;
 *   lp_dataset_encode(&train, my_encode, tok, 128, pad_id, &enc);   // once, before epochs
 *   int64_t *order = malloc(enc.n * sizeof *order);
 *   lp_batch b; lp_batch_init(&b);
 *   for (int64_t epoch = 0; epoch < E; epoch++) {
 *       lp_epoch_order(enc.n, seed, epoch, 1, order);
 *       for (int64_t s = 0; s < lp_batch_count(enc.n, 32, 0); s++) {
 *           int32_t rows = (int32_t)(enc.n - s * 32 < 32 ? enc.n - s * 32 : 32);
 *           lp_batch_fill(&b, &enc, order + s * 32, rows, 0);   // 0 = pad to longest
 *           ... b.input_ids (b.B, b.T) ...
 *       }
 *   }
 */
#ifndef LOUPE_DATA_H
#define LOUPE_DATA_H

#include "loupe/base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- label maps ------------------------------------------------------------------ */

/* Class names by id: names[id] for id in [0, n). */
typedef struct lp_label_map {
    int32_t n;
    char **names;    /* (n) owned, NUL-terminated, distinct */
    int32_t *sorted; /* (n) ids in name order, for lp_label_map_find (internal, owned) */
} lp_label_map;

/* Builds a map from n distinct names (copied; id = position). Duplicate or empty names
 * are LP_STATUS_INVALID_ARG. */
LP_WARN_UNUSED lp_status lp_label_map_from_names(lp_label_map *m, const char *const *names, int32_t n);

/* Copies src into dst (dst is overwritten, not freed first). */
LP_WARN_UNUSED lp_status lp_label_map_copy(lp_label_map *dst, const lp_label_map *src);

/* Id of name, or -1 when absent (binary search: O(log n)). */
int32_t lp_label_map_find(const lp_label_map *m, const char *name);

/* Writes {"label2id": {name: id, ...}, "id2label": {"0": name, ...}, "num_labels": n}
 * to path atomically (seed 001's label_mappings.json shape, the same as a Hugging Face
 * config's label2id/id2label). */
LP_WARN_UNUSED lp_status lp_label_map_save(const lp_label_map *m, const char *path);

/* Reads a label map from JSON text: an object with "id2label" and/or "label2id" (a
 * config.json works too). Ids must be 0..n-1, each exactly once; when both objects are
 * present they must agree. name is used in error messages. */
LP_WARN_UNUSED lp_status lp_label_map_parse(lp_label_map *m, const char *name, const char *json,
                                            size_t len);

/* lp_label_map_parse on the contents of path. */
LP_WARN_UNUSED lp_status lp_label_map_load(lp_label_map *m, const char *path);

void lp_label_map_free(lp_label_map *m);

/* ---- datasets -------------------------------------------------------------------- */

typedef enum lp_data_format {
    LP_DATA_FORMAT_AUTO = 0, /* by file extension: .csv, .tsv, .jsonl/.json/.ndjson */
    LP_DATA_FORMAT_CSV,      /* RFC 4180: header row, "quoted, fields", "" escapes, CRLF */
    LP_DATA_FORMAT_TSV,      /* header row, TAB-separated, no quoting (GLUE SST-2) */
    LP_DATA_FORMAT_JSONL,    /* one JSON object per line; columns are keys */
} lp_data_format;

/* How many skip reasons a dataset keeps (the first ones, in file order). */
#define LP_DATA_MAX_REASONS 5

/* What to read; mirrors the trainer's flags. Start from lp_dataset_options_init. */
typedef struct lp_dataset_options {
    lp_data_format format;         /* --format: AUTO picks by extension */
    const char *text_column;       /* --text-column; NULL: first of text, sentence, sentence1 */
    const char *text_pair_column;  /* --text-pair-column; NULL: single sentences (or sentence2
                                    * when text_column is NULL and the data has sentence1+2) */
    const char *label_column;      /* --label-column; NULL: first of label, labels, label_id */
    int skip_bad_rows;             /* --skip-bad-rows: drop bad rows, count them, keep reasons */
    int32_t num_labels;            /* --num-labels; 0: from the data (or the label map) */
    const lp_label_map *label_map; /* given label set (borrowed); NULL: built from the data */
    int text_only;                 /* causal-LM data: only the text (and pair) column is read; no
                                    * label column is needed, labels stay NULL, label_map empty */
} lp_dataset_options;

void lp_dataset_options_init(lp_dataset_options *opt);

/* Rows that survived loading, in file order, with labels as ids.
 * Labels: when label_map is given, a label is its name's id, else an integer in [0, n).
 * Otherwise, when every label is a non-negative integer, the ids are those integers
 * (names "0".."max", or up to num_labels-1); otherwise the distinct label strings sorted
 * by bytes (strcmp) get ids 0..k-1. Labels outside num_labels or the map are bad rows. */
typedef struct lp_dataset {
    int64_t n;
    char **text;            /* (n) owned, valid UTF-8, not empty */
    char **text_pair;       /* (n) owned; NULL when there is no pair column */
    int32_t *labels;        /* (n) ids in [0, label_map.n); NULL for text_only data */
    int64_t *lines;         /* (n) 1-based line of the source where each row starts */
    lp_label_map label_map; /* owned */
    char *source;           /* file (or buffer) name for messages, owned */
    int64_t n_skipped;      /* bad rows dropped (skip_bad_rows) */
    int32_t n_reasons;      /* entries used in skip_reasons */
    char *skip_reasons[LP_DATA_MAX_REASONS]; /* "file:line: problem", owned; the first
                                              * reported (row problems, then labels) */
} lp_dataset;

/* Reads a dataset file. A bad row (unterminated quote, wrong number of fields, missing
 * key, empty text, bad label (not with text_only), invalid UTF-8, NUL byte) fails with a message naming file,
 * line and problem, unless opt->skip_bad_rows. A missing column, an empty file, a header
 * with no rows, or no good rows at all always fail. On failure *ds is left empty.
 * opt may be NULL (defaults). Caller frees with lp_dataset_free. */
LP_WARN_UNUSED lp_status lp_dataset_load(const char *path, const lp_dataset_options *opt,
                                         lp_dataset *ds);

/* lp_dataset_load on a memory buffer (len bytes, need not be NUL-terminated); name is
 * used for messages and, with LP_DATA_FORMAT_AUTO, for the extension. */
LP_WARN_UNUSED lp_status lp_dataset_load_buffer(const char *name, const char *buf, size_t len,
                                                const lp_dataset_options *opt, lp_dataset *ds);

void lp_dataset_free(lp_dataset *ds);

/* counts[id] = rows with label id, for id in [0, ds->label_map.n). */
void lp_dataset_label_counts(const lp_dataset *ds, int64_t *counts);

/* Splits ds into train and validation copies (both owned by the caller, label map
 * copied). Algorithm: a Fisher-Yates permutation of 0..n-1 driven by splitmix64 seeded
 * from seed; the first round(n * val_fraction) indices (at least 1 and at most n-1 when
 * 0 < val_fraction < 1 and n >= 2) form validation; both parts keep file order. The same
 * (n, val_fraction, seed) always gives the same split. val_fraction outside (0, 1) or
 * n < 2 is LP_STATUS_INVALID_ARG. */
LP_WARN_UNUSED lp_status lp_dataset_split(const lp_dataset *ds, double val_fraction, uint64_t seed,
                                          lp_dataset *train, lp_dataset *val);

/* order[0..n) = the row order for one epoch: 0..n-1 when !shuffle, else a Fisher-Yates
 * permutation whose generator state is splitmix64(seed) mixed with splitmix64(epoch), so
 * each epoch differs and (seed, epoch) always gives the same order. */
LP_WARN_UNUSED lp_status lp_epoch_order(int64_t n, uint64_t seed, int64_t epoch, int shuffle,
                                        int64_t *order);

/* ---- tokenized datasets and batches ------------------------------------------------ */

/* Tokenizes one example: writes at most max_len ids (special tokens included, truncating
 * by the tokenizer's own rules) to ids_out and their segment ids to type_ids_out, and
 * the count to *n_out. text_pair is NULL for single sentences. Returns LP_OK or a status
 * with lp_err set. (lp_tokenizer_encode from the text layer fits behind this.) */
typedef lp_status (*lp_encode_fn)(void *ctx, const char *text, const char *text_pair, int32_t max_len,
                                  int32_t *ids_out, int32_t *type_ids_out, int32_t *n_out);

/* A dataset tokenized once; row i's tokens are ids[offsets[i] .. offsets[i+1]). */
typedef struct lp_encoded_dataset {
    int64_t n;
    int32_t max_len;    /* truncation length used */
    int32_t pad_id;
    int64_t *offsets;   /* (n+1) */
    int32_t *ids;       /* (offsets[n]) */
    int32_t *type_ids;  /* (offsets[n]) */
    int32_t *labels;    /* (n); NULL when the dataset has none (text_only) */
    int32_t *full_len;  /* (n) token count before truncation */
    int32_t *lm_labels; /* (offsets[n]) per-token LM labels (-100: not trained, e.g. a prompt
                         * under --train-on-responses); NULL: the ids themselves */
    int32_t *segs;      /* (offsets[n]) packed rows: each token's sample id 1, 2, ... in its row
                         * (the model's attention mask); NULL: one sample per row */
    int32_t *pos;       /* (offsets[n]) packed rows: position ids, restarting at 0 per sample
                         * (what the model derives from segs); NULL when not packed */
    int64_t n_truncated, n_dropped_tokens; /* instruction data: samples cut to max_len and the
                                            * tokens they lost */
    int64_t n_skipped;  /* instruction data: samples left with no trained token (skipped) */
    char *skip_reason;  /* "file:line: why" of the first skipped sample, owned, or NULL */
} lp_encoded_dataset;

/* Tokenizes every row of ds. Each row is first encoded with room for its whole length
 * (4 * bytes + 64 ids, far above any real tokenizer) to learn the untruncated length;
 * rows longer than max_len are encoded again with max_len so the tokenizer truncates
 * them its own way. max_len must be >= 1. An encoder error is wrapped with the file and
 * line of the row; an encoder writing more than it was allowed is LP_STATUS_RANGE. */
LP_WARN_UNUSED lp_status lp_dataset_encode(const lp_dataset *ds, lp_encode_fn encode, void *ctx,
                                           int32_t max_len, int32_t pad_id, lp_encoded_dataset *out);

void lp_encoded_dataset_free(lp_encoded_dataset *e);

/* Token-length statistics over the untruncated lengths (full_len). Percentiles are
 * nearest-rank: pXX = the ceil(XX/100 * count)-th smallest length. */
typedef struct lp_length_stats {
    int64_t count;
    int64_t n_truncated;  /* rows with full_len > max_len */
    int64_t total_tokens; /* tokens kept after truncation */
    int32_t min, max, p50, p90, p99;
    double mean;
} lp_length_stats;

LP_WARN_UNUSED lp_status lp_encoded_length_stats(const lp_encoded_dataset *e, lp_length_stats *out);

/* A padded batch; buffers are reused by later fills (grown when needed). Right padding:
 * row b holds its tokens in [0, len) with attention_mask 1 (a packed row: its sample ids,
 * e->segs), then pad_id / mask 0 / type id 0 up to T; lm_labels come from e->lm_labels
 * when the dataset has them. */
typedef struct lp_batch {
    int32_t B, T;
    int32_t *input_ids;      /* (B,T) row-major */
    int32_t *attention_mask; /* (B,T) */
    int32_t *token_type_ids; /* (B,T) */
    int32_t *labels;         /* (B); -100 for rows of a dataset without labels */
    int32_t *lm_labels;      /* (B,T) a causal LM's labels: input_ids with -100 on padding
                              * (transformers' convention; the model shifts them inside) */
    int64_t *rows;           /* (B) row of the encoded dataset behind each entry */
    int64_t n_tokens;        /* real (unpadded) tokens in the batch: the sum of the mask */
    size_t cap_bt, cap_b;    /* allocated elements (internal) */
} lp_batch;

void lp_batch_init(lp_batch *b);

/* Fills b with the n_rows rows listed in rows[]. pad_to == 0: T = the longest row
 * (dynamic padding); pad_to > 0: T = pad_to, and a longer row is LP_STATUS_RANGE.
 * Row indices outside [0, e->n) or n_rows < 1 are LP_STATUS_INVALID_ARG. */
LP_WARN_UNUSED lp_status lp_batch_fill(lp_batch *b, const lp_encoded_dataset *e, const int64_t *rows,
                                       int32_t n_rows, int32_t pad_to);

void lp_batch_free(lp_batch *b);

/* Number of batches of batch_size in n rows: ceil(n / batch_size), or floor with
 * drop_last. 0 when batch_size < 1. */
int64_t lp_batch_count(int64_t n, int32_t batch_size, int drop_last);

/* ---- instruction-tuning data (sft.c, sft_encode.c) ------------------------------------
 * JSONL rows in one of four layouts, chosen by --data-format or, by default, from the first
 * row's keys: {"text"} (language modelling, every token trained); {"prompt", "response"}
 * ("completion" is taken for "response", as TRL names it); alpaca's {"instruction", "input"
 * (optional), "output"}; chat {"messages": [{"role", "content"}, ...]} with roles system,
 * user and assistant. Each row becomes a conversation of turns: a prompt/response row is
 * user = prompt, assistant = response; an alpaca row is user = instruction + "\n\n" + input
 * (instruction alone when input is empty), assistant = output. */

typedef enum lp_sft_format {
    LP_SFT_FORMAT_AUTO = 0,
    LP_SFT_FORMAT_TEXT,
    LP_SFT_FORMAT_PROMPT_RESPONSE,
    LP_SFT_FORMAT_ALPACA,
    LP_SFT_FORMAT_MESSAGES,
} lp_sft_format;

/* "auto", "text", "prompt-response", "alpaca", "messages". */
const char *lp_sft_format_name(lp_sft_format f);
LP_WARN_UNUSED lp_status lp_sft_format_parse(const char *s, lp_sft_format *out);

typedef enum lp_sft_role {
    LP_SFT_ROLE_TEXT = 0, /* a "text" row: rendered as it is */
    LP_SFT_ROLE_SYSTEM,
    LP_SFT_ROLE_USER,
    LP_SFT_ROLE_ASSISTANT,
} lp_sft_role;

/* "text", "system", "user", "assistant". */
const char *lp_sft_role_name(lp_sft_role r);

typedef struct lp_sft_turn {
    lp_sft_role role;
    char *content; /* owned, valid UTF-8 */
} lp_sft_turn;

/* Conversations in file order: row i's turns are turns[first[i] .. first[i+1]). */
typedef struct lp_sft_dataset {
    int64_t n;
    lp_sft_format format; /* resolved (never AUTO) */
    int64_t *first;       /* (n+1) */
    lp_sft_turn *turns;   /* (first[n]) owned */
    int64_t *lines;       /* (n) 1-based line of each row */
    char *source;         /* file name for messages, owned */
} lp_sft_dataset;

/* Reads instruction data from a JSONL file (or lp_sft_load_buffer: len bytes named name).
 * A bad row fails with "file:line: problem": invalid JSON, a missing key ("response"),
 * a key of the wrong type, an empty conversation, a message with an unknown role, invalid
 * UTF-8. An empty file fails too. Caller frees with lp_sft_free (also after a failure). */
LP_WARN_UNUSED lp_status lp_sft_load(const char *path, lp_sft_format format, lp_sft_dataset *ds);
LP_WARN_UNUSED lp_status lp_sft_load_buffer(const char *name, const char *buf, size_t len, lp_sft_format format,
                                            lp_sft_dataset *ds);
void lp_sft_free(lp_sft_dataset *ds);

/* How conversations become tokens, supplied by the caller (the train layer binds the model's
 * chat template and tokenizer). render writes turns[0..n) as the model sees them (malloc'd
 * *out, *len bytes), followed by the assistant's header when add_generation_prompt; tokenize
 * replaces *ids (grown as needed, *cap entries) by the ids of text[0..len), *n of them. */
typedef struct lp_sft_codec {
    void *ctx;
    lp_status (*render)(void *ctx, const lp_sft_turn *turns, int32_t n, int add_generation_prompt, char **out,
                        size_t *len);
    lp_status (*tokenize)(void *ctx, const char *text, size_t len, int32_t **ids, size_t *n, size_t *cap);
} lp_sft_codec;

/* The plain format used when the model has no chat template (ctx: the EOS token's text, or
 * NULL): a text turn as it is; a system or user turn as its content and "\n"; an assistant
 * turn as its content and the EOS text. The generation prompt adds nothing. */
LP_WARN_UNUSED lp_status lp_sft_render_plain(void *ctx, const lp_sft_turn *turns, int32_t n,
                                             int add_generation_prompt, char **out, size_t *len);

/* Tokenizes every conversation into out (ids, lm_labels; segs NULL). Without
 * train_on_responses every token is trained. With it, only assistant turns' tokens are:
 * for turn k the span runs from the end of the render of turns[0..k) with the generation
 * prompt to the end of the render of turns[0..k] with trailing whitespace dropped (so the
 * end-of-turn token is trained), each located as the longest prefix its tokens share with
 * the whole conversation's tokens: the template alone decides the boundaries. Text rows
 * are trained whole either way. Rows longer than max_len are cut to it (counted in
 * n_truncated, n_dropped_tokens); a row left with no trained token is skipped and counted
 * (n_skipped, skip_reason). All rows skipped is LP_STATUS_INVALID_ARG naming the file. */
LP_WARN_UNUSED lp_status lp_sft_encode(const lp_sft_dataset *ds, const lp_sft_codec *codec, int32_t max_len,
                                       int train_on_responses, int32_t pad_id, lp_encoded_dataset *out);

/* Packs the rows of in (in order) into rows of at most max_len tokens: a row takes the next
 * samples while they fit, then a new row starts (next fit: deterministic, no reordering).
 * Each token gets its sample's id in the row (segs: 1, 2, ...) and its position in its
 * sample (pos); labels are kept, so no loss crosses a boundary (the model also refuses to
 * predict across one). Rows of in longer than max_len are LP_STATUS_INVALID_ARG. The
 * truncation and skip counts are carried over. */
LP_WARN_UNUSED lp_status lp_sft_pack(const lp_encoded_dataset *in, int32_t max_len, lp_encoded_dataset *out);

#ifdef __cplusplus
}
#endif
#endif /* LOUPE_DATA_H */
