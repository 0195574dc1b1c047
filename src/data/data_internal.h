/* Internal to the data layer: the row sink the file readers feed, column resolution,
 * UTF-8 validation and the seeded generator behind splits and shuffles. */
#ifndef LP_DATA_INTERNAL_H
#define LP_DATA_INTERNAL_H

#include "loupe/data.h"

/* Collects rows from a reader: validates them, copies the strings, and either fails or
 * (skip_bad_rows) counts bad rows. Labels stay strings until every row is read. */
typedef struct lp_row_sink {
    const char *name;              /* source name for messages */
    const lp_dataset_options *opt;
    lp_dataset *ds;                /* rows so far (text, text_pair, lines, n) */
    char **label_raw;              /* (n) label text of each row, owned */
    size_t cap;
    int resolved;                  /* columns chosen (header read / first JSON object) */
    const char *text_key, *pair_key, *label_key; /* pair_key NULL: single sentences; label_key
                                                  * NULL: text-only data */
} lp_row_sink;

/* Picks the text, pair and label columns among names[0..n) per opt (explicit names or
 * the defaults); sets s->resolved. A missing column is LP_STATUS_NOT_FOUND with a
 * message listing what exists. */
lp_status lp_sink_resolve(lp_row_sink *s, const char *const *names, int n);

/* Validates one row (UTF-8, no NUL, non-empty text and label) and appends it. Strings
 * are (pointer, length), copied; label NULL for text-only data. Returns LP_OK also when the
 * row was skipped. */
lp_status lp_sink_row(lp_row_sink *s, int64_t line, const char *text, size_t text_len, const char *pair,
                      size_t pair_len, const char *label, size_t label_len);

/* Reports a bad row: with skip_bad_rows counts it (keeping the first reasons) and
 * returns LP_OK; otherwise sets the message "<name>:<line>: <problem>" and returns st. */
lp_status lp_sink_bad(lp_row_sink *s, lp_status st, int64_t line, const char *fmt, ...) LP_PRINTF(4, 5);

/* Readers over a whole buffer (BOM already removed). sep is ',' (RFC 4180 quoting) or
 * '\t' (no quoting). */
lp_status lp_read_delimited(lp_row_sink *s, const char *buf, size_t len, char sep);
lp_status lp_read_jsonl(lp_row_sink *s, const char *buf, size_t len);

/* 1 when s[0..len) is well-formed UTF-8 (no overlongs, surrogates or code points above
 * U+10FFFF); else 0 and *bad_at = offset of the first bad byte. */
int lp_utf8_valid(const char *s, size_t len, size_t *bad_at);

/* splitmix64: a tiny, well-mixed generator; the same seed gives the same stream on
 * every platform. */
static inline uint64_t lp_splitmix64_mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static inline uint64_t lp_splitmix64_next(uint64_t *state)
{
    *state += 0x9e3779b97f4a7c15ULL;
    return lp_splitmix64_mix(*state);
}

/* Uniform in [0, bound), bound >= 1, without modulo bias (rejects the short tail). */
static inline uint64_t lp_rng_below(uint64_t *state, uint64_t bound)
{
    uint64_t threshold = (0 - bound) % bound; /* 2^64 mod bound */
    for (;;) {
        uint64_t r = lp_splitmix64_next(state);
        if (r >= threshold)
            return r % bound;
    }
}

/* Fisher-Yates over a[0..n), from the back: a[i] swaps with a[j], j uniform in [0, i]. */
void lp_shuffle_i64(int64_t *a, int64_t n, uint64_t *state);

#endif /* LP_DATA_INTERNAL_H */
