/* Tokenizing a dataset once (through the caller's encode callback), token-length
 * statistics, and padded batches with attention masks for the trainer and the bench. */
#include "data_internal.h"

#include <stdlib.h>
#include <string.h>

void lp_encoded_dataset_free(lp_encoded_dataset *e)
{
    if (!e)
        return;
    free(e->offsets);
    free(e->ids);
    free(e->type_ids);
    free(e->labels);
    free(e->full_len);
    free(e->lm_labels);
    free(e->segs);
    free(e->pos);
    free(e->skip_reason);
    memset(e, 0, sizeof *e);
}

/* Grows the token arrays so that `need` more ids fit after `used`. */
static int reserve_tokens(lp_encoded_dataset *e, size_t *cap, size_t used, size_t need)
{
    if (used + need <= *cap)
        return 1;
    size_t c = *cap ? *cap : 4096;
    while (c < used + need)
        c *= 2;
    int32_t *ids = lp_realloc(e->ids, c * sizeof *ids);
    if (!ids)
        return 0;
    e->ids = ids;
    int32_t *tt = lp_realloc(e->type_ids, c * sizeof *tt);
    if (!tt)
        return 0;
    e->type_ids = tt;
    *cap = c;
    return 1;
}

lp_status lp_dataset_encode(const lp_dataset *ds, lp_encode_fn encode, void *ctx, int32_t max_len, int32_t pad_id,
                            lp_encoded_dataset *out)
{
    memset(out, 0, sizeof *out);
    const char *src = ds->source ? ds->source : "<dataset>";
    if (!encode || max_len < 1)
        return lp_err(LP_STATUS_INVALID_ARG, "%s: encode needs a callback and max_len >= 1 (got %d)", src,
                      (int)max_len);
    int64_t n = ds->n;
    out->n = n;
    out->max_len = max_len;
    out->pad_id = pad_id;
    out->offsets = lp_malloc((size_t)(n + 1) * sizeof *out->offsets);
    out->labels = ds->labels ? lp_malloc((size_t)(n ? n : 1) * sizeof *out->labels) : NULL;
    out->full_len = lp_malloc((size_t)(n ? n : 1) * sizeof *out->full_len);
    size_t cap = 0, used = 0;
    lp_status st = LP_OK;
    if (!out->offsets || (ds->labels && !out->labels) || !out->full_len || !reserve_tokens(out, &cap, 0, (size_t)max_len)) {
        st = lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory tokenizing", src);
        goto fail;
    }
    out->offsets[0] = 0;
    for (int64_t i = 0; i < n; i++) {
        const char *pair = ds->text_pair ? ds->text_pair[i] : NULL;
        /* Probe with room for the whole encoding: no real tokenizer emits more than one
         * id per byte plus a few special tokens. */
        size_t bytes = strlen(ds->text[i]) + (pair ? strlen(pair) : 0);
        size_t probe = 4 * bytes + 64;
        if (probe > INT32_MAX / 2)
            probe = INT32_MAX / 2;
        if (!reserve_tokens(out, &cap, used, probe)) {
            st = lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory tokenizing", src);
            goto fail;
        }
        int32_t got = -1;
        st = encode(ctx, ds->text[i], pair, (int32_t)probe, out->ids + used, out->type_ids + used, &got);
        if (st == LP_OK && (got < 0 || got > (int32_t)probe))
            st = lp_err(LP_STATUS_RANGE, "encoder returned %d ids with room for %d", (int)got, (int)probe);
        if (st == LP_OK && got > max_len) {
            int32_t full = got;
            st = encode(ctx, ds->text[i], pair, max_len, out->ids + used, out->type_ids + used, &got);
            if (st == LP_OK && (got < 0 || got > max_len))
                st = lp_err(LP_STATUS_RANGE, "encoder returned %d ids with max_len %d", (int)got, (int)max_len);
            out->full_len[i] = full;
        } else {
            out->full_len[i] = got;
        }
        if (st != LP_OK) {
            lp_err_wrap(st, "%s:%lld: tokenizing", src, ds->lines ? (long long)ds->lines[i] : (long long)i + 1);
            goto fail;
        }
        used += (size_t)got;
        out->offsets[i + 1] = (int64_t)used;
        if (ds->labels)
            out->labels[i] = ds->labels[i];
    }
    return LP_OK;
fail:
    lp_encoded_dataset_free(out);
    return st;
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* Nearest rank: the ceil(q * n)-th smallest of sorted[0..n), q in (0, 1]. Integer
 * arithmetic in per-mille so 0.9 * 10 is exactly 9. */
static int32_t nearest_rank(const int32_t *sorted, int64_t n, int permille)
{
    int64_t rank = ((int64_t)permille * n + 999) / 1000;
    if (rank < 1)
        rank = 1;
    return sorted[rank - 1];
}

lp_status lp_encoded_length_stats(const lp_encoded_dataset *e, lp_length_stats *out)
{
    memset(out, 0, sizeof *out);
    if (e->n == 0)
        return LP_OK;
    int32_t *s = lp_malloc((size_t)e->n * sizeof *s);
    if (!s)
        return lp_err(LP_STATUS_NO_MEMORY, "out of memory computing length statistics");
    memcpy(s, e->full_len, (size_t)e->n * sizeof *s);
    qsort(s, (size_t)e->n, sizeof *s, cmp_i32);
    double sum = 0;
    for (int64_t i = 0; i < e->n; i++) {
        sum += s[i];
        if (e->full_len[i] > e->max_len)
            out->n_truncated++;
    }
    out->count = e->n;
    out->total_tokens = e->offsets[e->n];
    out->min = s[0];
    out->max = s[e->n - 1];
    out->mean = sum / (double)e->n;
    out->p50 = nearest_rank(s, e->n, 500);
    out->p90 = nearest_rank(s, e->n, 900);
    out->p99 = nearest_rank(s, e->n, 990);
    free(s);
    return LP_OK;
}

void lp_batch_init(lp_batch *b) { memset(b, 0, sizeof *b); }

void lp_batch_free(lp_batch *b)
{
    if (!b)
        return;
    free(b->input_ids);
    free(b->attention_mask);
    free(b->token_type_ids);
    free(b->labels);
    free(b->lm_labels);
    free(b->rows);
    memset(b, 0, sizeof *b);
}

int64_t lp_batch_count(int64_t n, int32_t batch_size, int drop_last)
{
    if (batch_size < 1 || n < 1)
        return 0;
    return drop_last ? n / batch_size : (n + batch_size - 1) / batch_size;
}

lp_status lp_batch_fill(lp_batch *b, const lp_encoded_dataset *e, const int64_t *rows, int32_t n_rows, int32_t pad_to)
{
    if (n_rows < 1 || !rows || pad_to < 0)
        return lp_err(LP_STATUS_INVALID_ARG, "batch: need at least one row and pad_to >= 0 (got %d rows, pad_to %d)",
                      (int)n_rows, (int)pad_to);
    int32_t longest = 0;
    for (int32_t r = 0; r < n_rows; r++) {
        if (rows[r] < 0 || rows[r] >= e->n)
            return lp_err(LP_STATUS_INVALID_ARG, "batch: row %lld outside the dataset (%lld rows)",
                          (long long)rows[r], (long long)e->n);
        int32_t len = (int32_t)(e->offsets[rows[r] + 1] - e->offsets[rows[r]]);
        if (len > longest)
            longest = len;
    }
    int32_t T = pad_to ? pad_to : longest;
    if (longest > T)
        return lp_err(LP_STATUS_RANGE, "batch: a row has %d tokens, more than the fixed length %d", (int)longest,
                      (int)T);
    if (T < 1)
        T = 1; /* rows of zero tokens still get one padded position so shapes stay valid */
    size_t bt = (size_t)n_rows * (size_t)T;
    if (bt > b->cap_bt) {
        int32_t *ids = lp_realloc(b->input_ids, bt * sizeof *ids);
        if (ids)
            b->input_ids = ids;
        int32_t *mask = lp_realloc(b->attention_mask, bt * sizeof *mask);
        if (mask)
            b->attention_mask = mask;
        int32_t *tt = lp_realloc(b->token_type_ids, bt * sizeof *tt);
        if (tt)
            b->token_type_ids = tt;
        int32_t *lm = lp_realloc(b->lm_labels, bt * sizeof *lm);
        if (lm)
            b->lm_labels = lm;
        if (!ids || !mask || !tt || !lm)
            return lp_err(LP_STATUS_NO_MEMORY, "batch: out of memory for %d x %d", (int)n_rows, (int)T);
        b->cap_bt = bt;
    }
    if ((size_t)n_rows > b->cap_b) {
        int32_t *lab = lp_realloc(b->labels, (size_t)n_rows * sizeof *lab);
        if (lab)
            b->labels = lab;
        int64_t *rw = lp_realloc(b->rows, (size_t)n_rows * sizeof *rw);
        if (rw)
            b->rows = rw;
        if (!lab || !rw)
            return lp_err(LP_STATUS_NO_MEMORY, "batch: out of memory for %d rows", (int)n_rows);
        b->cap_b = (size_t)n_rows;
    }
    b->B = n_rows;
    b->T = T;
    b->n_tokens = 0;
    for (int32_t r = 0; r < n_rows; r++) {
        int64_t src = rows[r];
        int64_t off = e->offsets[src];
        int32_t len = (int32_t)(e->offsets[src + 1] - off);
        int32_t *ids = b->input_ids + (size_t)r * T;
        int32_t *mask = b->attention_mask + (size_t)r * T;
        int32_t *tt = b->token_type_ids + (size_t)r * T;
        int32_t *lm = b->lm_labels + (size_t)r * T;
        memcpy(ids, e->ids + off, (size_t)len * sizeof *ids);
        memcpy(lm, (e->lm_labels ? e->lm_labels : e->ids) + off, (size_t)len * sizeof *lm);
        memcpy(tt, e->type_ids + off, (size_t)len * sizeof *tt);
        for (int32_t t = 0; t < len; t++)
            mask[t] = e->segs ? e->segs[off + t] : 1;
        for (int32_t t = len; t < T; t++) {
            ids[t] = e->pad_id;
            mask[t] = 0;
            tt[t] = 0;
            lm[t] = -100; /* transformers' ignore_index: padding predicts and is predicted by nothing */
        }
        b->n_tokens += len;
        b->labels[r] = e->labels ? e->labels[src] : -100;
        b->rows[r] = src;
    }
    return LP_OK;
}
