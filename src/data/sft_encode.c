/* Conversations to training tokens: the whole conversation tokenized once, the assistant
 * spans found by rendering it prefix by prefix (the chat template decides every boundary,
 * nothing here knows a template's markers), truncation counted, and packing of several
 * samples per row with sample ids and restarting positions. */
#include "data_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

lp_status lp_sft_render_plain(void *ctx, const lp_sft_turn *turns, int32_t n, int add_generation_prompt,
                              char **out, size_t *len)
{
    (void)add_generation_prompt; // the assistant's text follows the user's newline directly
    const char *eos = ctx ? (const char *)ctx : "";
    size_t total = 1;
    for (int32_t i = 0; i < n; i++)
        total += strlen(turns[i].content) + strlen(eos) + 1;
    char *s = lp_malloc(total), *p = s;
    if (!s)
        return lp_err(LP_STATUS_NO_MEMORY, "plain chat format: out of memory");
    for (int32_t i = 0; i < n; i++) {
        size_t l = strlen(turns[i].content);
        memcpy(p, turns[i].content, l);
        p += l;
        const char *end = turns[i].role == LP_SFT_ROLE_TEXT        ? ""
                          : turns[i].role == LP_SFT_ROLE_ASSISTANT ? eos
                                                                   : "\n";
        memcpy(p, end, strlen(end));
        p += strlen(end);
    }
    *p = 0;
    *out = s;
    *len = (size_t)(p - s);
    return LP_OK;
}

/* Tokens [0, *n) shared by a and the conversation's ids. */
static size_t common_prefix(const int32_t *a, size_t na, const int32_t *full, size_t nf)
{
    size_t k = 0;
    while (k < na && k < nf && a[k] == full[k])
        k++;
    return k;
}

/* Renders turns[0..n) (optionally with the generation prompt, optionally without trailing
 * whitespace) and tokenizes it into tmp; returns how many of its tokens start the
 * conversation's ids. */
static lp_status prefix_tokens(const lp_sft_codec *c, const lp_sft_turn *turns, int32_t n, int gen, bool trim,
                               int32_t **tmp, size_t *cap, const int32_t *full, size_t nf, size_t *shared)
{
    char *text = NULL;
    size_t len = 0, nt = 0;
    lp_status st = c->render(c->ctx, turns, n, gen, &text, &len);
    if (st != LP_OK)
        return st;
    while (trim && len &&
           (text[len - 1] == ' ' || text[len - 1] == '\n' || text[len - 1] == '\t' || text[len - 1] == '\r'))
        len--;
    st = c->tokenize(c->ctx, text, len, tmp, &nt, cap);
    free(text);
    if (st == LP_OK)
        *shared = common_prefix(*tmp, nt, full, nf);
    return st;
}

/* Labels of one conversation: -100 everywhere but the assistant spans (lab has nf entries). */
static lp_status response_labels(const lp_sft_codec *c, const lp_sft_turn *turns, int32_t n,
                                 const int32_t *full, size_t nf, int32_t *lab, int32_t **tmp, size_t *cap)
{
    for (size_t t = 0; t < nf; t++)
        lab[t] = -100;
    for (int32_t k = 0; k < n; k++) {
        if (turns[k].role != LP_SFT_ROLE_ASSISTANT)
            continue;
        size_t a = 0, b = 0;
        lp_status st = prefix_tokens(c, turns, k, 1, false, tmp, cap, full, nf, &a);
        if (st == LP_OK)
            st = prefix_tokens(c, turns, k + 1, 0, true, tmp, cap, full, nf, &b);
        if (st != LP_OK)
            return st;
        for (size_t t = a; t < b; t++)
            lab[t] = full[t];
    }
    return LP_OK;
}

static lp_status grow(lp_encoded_dataset *e, size_t *cap, size_t need)
{
    if (need <= *cap)
        return LP_OK;
    size_t c = *cap ? *cap : 4096;
    while (c < need)
        c *= 2;
    int32_t *ids = lp_realloc(e->ids, c * sizeof *ids);
    if (ids)
        e->ids = ids;
    int32_t *tt = lp_realloc(e->type_ids, c * sizeof *tt);
    if (tt)
        e->type_ids = tt;
    int32_t *lm = lp_realloc(e->lm_labels, c * sizeof *lm);
    if (lm)
        e->lm_labels = lm;
    if (!ids || !tt || !lm)
        return lp_err(LP_STATUS_NO_MEMORY, "instruction data: out of memory for %zu tokens", need);
    *cap = c;
    return LP_OK;
}

lp_status lp_sft_encode(const lp_sft_dataset *ds, const lp_sft_codec *codec, int32_t max_len,
                        int train_on_responses, int32_t pad_id, lp_encoded_dataset *out)
{
    memset(out, 0, sizeof *out);
    if (max_len < 1)
        return lp_err(LP_STATUS_INVALID_ARG, "%s: max sequence length %d is below 1", ds->source,
                      (int)max_len);
    out->max_len = max_len;
    out->pad_id = pad_id;
    out->offsets = lp_calloc((size_t)ds->n + 1, sizeof *out->offsets);
    out->full_len = lp_calloc((size_t)ds->n + 1, sizeof *out->full_len);
    int32_t *full = NULL, *tmp = NULL, *lab = NULL;
    size_t cap = 0, cap_full = 0, cap_tmp = 0, cap_lab = 0, used = 0;
    lp_status st =
        out->offsets && out->full_len ? LP_OK : lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", ds->source);
    for (int64_t i = 0; st == LP_OK && i < ds->n; i++) {
        const lp_sft_turn *turns = ds->turns + ds->first[i];
        const int32_t nt = (int32_t)(ds->first[i + 1] - ds->first[i]);
        char *text = NULL;
        size_t len = 0, nf = 0;
        if ((st = codec->render(codec->ctx, turns, nt, 0, &text, &len)) == LP_OK) {
            st = codec->tokenize(codec->ctx, text, len, &full, &nf, &cap_full);
            free(text);
        }
        if (st == LP_OK && nf > cap_lab) {
            int32_t *l = lp_realloc(lab, nf * sizeof *l);
            st = l ? LP_OK : lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", ds->source);
            lab = l ? l : lab, cap_lab = l ? nf : cap_lab;
        }
        const bool masked = train_on_responses && turns[0].role != LP_SFT_ROLE_TEXT;
        if (st == LP_OK && masked)
            st = response_labels(codec, turns, nt, full, nf, lab, &tmp, &cap_tmp);
        else if (st == LP_OK)
            memcpy(lab, full, nf * sizeof *lab);
        if (st != LP_OK) {
            st = lp_err_wrap(st, "%s:%lld", ds->source, (long long)ds->lines[i]);
            break;
        }
        const size_t keep = nf < (size_t)max_len ? nf : (size_t)max_len;
        int64_t trained = 0;
        for (size_t t = 1; t < keep; t++) // token 0 predicts nothing: no earlier token to predict it from
            trained += lab[t] != -100;
        if (!trained) {
            if (!out->n_skipped++) {
                char why[512];
                snprintf(why, sizeof why, "%s:%lld: %s", ds->source, (long long)ds->lines[i],
                         nf == 0     ? "renders to no tokens"
                         : keep < nf ? "no response token left within --max-seq-len"
                         : masked    ? "no response token to train on"
                                     : "a single token: nothing to predict");
                out->skip_reason = lp_strdup(why);
            }
            continue;
        }
        if (keep < nf)
            out->n_truncated++, out->n_dropped_tokens += (int64_t)(nf - keep);
        if ((st = grow(out, &cap, used + keep)) != LP_OK)
            break;
        memcpy(out->ids + used, full, keep * sizeof *full);
        memcpy(out->lm_labels + used, lab, keep * sizeof *lab);
        memset(out->type_ids + used, 0, keep * sizeof *out->type_ids);
        out->full_len[out->n] = nf > INT32_MAX ? INT32_MAX : (int32_t)nf;
        used += keep;
        out->offsets[++out->n] = (int64_t)used;
    }
    free(full);
    free(tmp);
    free(lab);
    if (st == LP_OK && !out->n)
        st = lp_err(LP_STATUS_INVALID_ARG, "%s: no row left to train on (%lld skipped; the first: %s)",
                    ds->source, (long long)out->n_skipped, out->skip_reason ? out->skip_reason : "?");
    if (st != LP_OK)
        lp_encoded_dataset_free(out);
    return st;
}

lp_status lp_sft_pack(const lp_encoded_dataset *in, int32_t max_len, lp_encoded_dataset *out)
{
    memset(out, 0, sizeof *out);
    const int64_t nt = in->offsets[in->n];
    out->max_len = max_len;
    out->pad_id = in->pad_id;
    out->n_truncated = in->n_truncated, out->n_dropped_tokens = in->n_dropped_tokens,
    out->n_skipped = in->n_skipped;
    out->offsets = lp_calloc((size_t)in->n + 1, sizeof *out->offsets);
    out->full_len = lp_calloc((size_t)in->n + 1, sizeof *out->full_len);
    out->ids = lp_malloc((size_t)(nt ? nt : 1) * sizeof *out->ids);
    out->type_ids = lp_calloc((size_t)(nt ? nt : 1), sizeof *out->type_ids);
    out->lm_labels = lp_malloc((size_t)(nt ? nt : 1) * sizeof *out->lm_labels);
    out->segs = lp_malloc((size_t)(nt ? nt : 1) * sizeof *out->segs);
    out->pos = lp_malloc((size_t)(nt ? nt : 1) * sizeof *out->pos);
    if (in->skip_reason)
        out->skip_reason = lp_strdup(in->skip_reason);
    if (!out->offsets || !out->full_len || !out->ids || !out->type_ids || !out->lm_labels || !out->segs ||
        !out->pos || (in->skip_reason && !out->skip_reason)) {
        lp_encoded_dataset_free(out);
        return lp_err(LP_STATUS_NO_MEMORY, "packing: out of memory for %lld tokens", (long long)nt);
    }
    // the samples stay in order and contiguous, so the packed arrays are the input's with new
    // row boundaries: ids and labels copy straight across
    memcpy(out->ids, in->ids, (size_t)nt * sizeof *out->ids);
    memcpy(out->lm_labels, in->lm_labels ? in->lm_labels : in->ids, (size_t)nt * sizeof *out->lm_labels);
    int64_t row_start = 0;
    int32_t sample = 0;
    for (int64_t i = 0; i < in->n; i++) {
        const int64_t a = in->offsets[i], len = in->offsets[i + 1] - a;
        if (len > max_len) {
            lp_encoded_dataset_free(out);
            return lp_err(LP_STATUS_INVALID_ARG,
                          "packing: sample %lld has %lld tokens, above the row length %d", (long long)i,
                          (long long)len, (int)max_len);
        }
        if (a + len - row_start > max_len) { // does not fit: close the row
            out->full_len[out->n] = (int32_t)(a - row_start);
            out->offsets[++out->n] = a;
            row_start = a, sample = 0;
        }
        sample++;
        for (int64_t t = 0; t < len; t++)
            out->segs[a + t] = sample, out->pos[a + t] = (int32_t)t;
    }
    if (nt > row_start) {
        out->full_len[out->n] = (int32_t)(nt - row_start);
        out->offsets[++out->n] = nt;
    }
    return LP_OK;
}
