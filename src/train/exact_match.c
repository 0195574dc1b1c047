/* Exact match of greedy answers on an instruction eval split. A minimal greedy loop: every new
 * token runs the whole sequence again (no KV cache), which on eval prompts of a few dozen
 * tokens and answers of a few tokens costs seconds; the generate API (KV cache) can replace
 * next_token without changing what is scored. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "train_internal.h"

/* The argmax of the last position's logits for ids[0..n). */
static lp_status next_token(lp_model *m, const int32_t *ids, int32_t n, float *logits, int64_t V,
                            int32_t *out)
{
    lp_status st = lp_model_forward(m, ids, NULL, NULL, 1, n, logits);
    if (st != LP_OK)
        return st;
    const float *row = logits + (int64_t)(n - 1) * V;
    int32_t best = 0;
    for (int64_t v = 1; v < V; v++)
        if (row[v] > row[best])
            best = (int32_t)v;
    *out = best;
    return LP_OK;
}

/* A special token (EOS, end of turn, ...): decoding it without specials gives nothing. */
static bool is_special(const lp_tokenizer *tok, int32_t id)
{
    char *with = NULL, *without = NULL;
    bool special = false;
    if (lp_tokenizer_decode(tok, &id, 1, 0, &with) == LP_OK &&
        lp_tokenizer_decode(tok, &id, 1, 1, &without) == LP_OK)
        special = *with && !*without;
    free(with);
    free(without);
    return special;
}

/* s[0..n) without leading and trailing whitespace, as [*a, *b). */
static void strip(const char *s, size_t *a, size_t *b)
{
    size_t n = strlen(s), i = 0;
    while (i < n && isspace((unsigned char)s[i]))
        i++;
    while (n > i && isspace((unsigned char)s[n - 1]))
        n--;
    *a = i, *b = n;
}

static bool same_stripped(const char *x, const char *y)
{
    size_t xa, xb, ya, yb;
    strip(x, &xa, &xb);
    strip(y, &ya, &yb);
    return xb - xa == yb - ya && !memcmp(x + xa, y + ya, xb - xa);
}

lp_status lp_train_exact_match(lp_model *m, const lp_train_data *d, int64_t *hits)
{
    *hits = 0;
    lp_model_info mi;
    lp_model_info_get(m, &mi);
    const int64_t V = mi.vocab_size;
    int32_t longest = 0;
    for (int64_t i = 0; i < d->em_n; i++) {
        int32_t n = (int32_t)(d->em_off[i + 1] - d->em_off[i]) + d->em_budget[i];
        longest = n > longest ? n : longest;
    }
    int32_t *ids = malloc((size_t)(longest ? longest : 1) * sizeof *ids);
    float *logits = malloc((size_t)(longest ? longest : 1) * (size_t)V * sizeof *logits);
    lp_status st = ids && logits ? LP_OK : lp_err(LP_STATUS_NO_MEMORY, "exact match: out of memory");
    const int32_t eos = lp_tokenizer_special_id(d->tok, LP_SPECIAL_EOS);
    lp_model_set_training(m, false);
    LP_PROF_SCOPE("exact_match");
    for (int64_t i = 0; st == LP_OK && i < d->em_n; i++) {
        const int32_t np = (int32_t)(d->em_off[i + 1] - d->em_off[i]);
        memcpy(ids, d->em_ids + d->em_off[i], (size_t)np * sizeof *ids);
        int32_t n = np;
        for (int32_t k = 0; k < d->em_budget[i]; k++) {
            int32_t t;
            if ((st = next_token(m, ids, n, logits, V, &t)) != LP_OK)
                break;
            if (t == eos || is_special(d->tok, t))
                break;
            ids[n++] = t;
        }
        char *text = NULL;
        if (st == LP_OK && (st = lp_tokenizer_decode(d->tok, ids + np, (size_t)(n - np), 1, &text)) == LP_OK)
            *hits += same_stripped(text, d->em_want[i]);
        free(text);
    }
    lp_model_set_training(m, true);
    free(ids);
    free(logits);
    return st;
}
