/* Exact match of greedy answers on an instruction eval split: each prompt is prefilled into a
 * KV cache and its answer decoded one token per step (lp_model_prefill / lp_model_decode), so
 * a token costs one layer-stack pass over one position, not over the whole sequence. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "train_internal.h"

static int32_t argmax(const float *row, int64_t V)
{
    int32_t best = 0;
    for (int64_t v = 1; v < V; v++)
        if (row[v] > row[best])
            best = (int32_t)v;
    return best;
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
    float *logits = malloc((size_t)V * sizeof *logits);
    lp_kv_cache *kv = NULL;
    lp_status st = ids && logits ? LP_OK : lp_err(LP_STATUS_NO_MEMORY, "exact match: out of memory");
    if (st == LP_OK && d->em_n > 0)
        st = lp_model_kv_init(m, 1, longest, LP_DTYPE_F32, &kv);
    const int32_t eos = lp_tokenizer_special_id(d->tok, LP_SPECIAL_EOS);
    lp_model_set_training(m, false);
    LP_PROF_SCOPE("exact_match");
    for (int64_t i = 0; st == LP_OK && i < d->em_n; i++) {
        const int32_t np = (int32_t)(d->em_off[i + 1] - d->em_off[i]);
        memcpy(ids, d->em_ids + d->em_off[i], (size_t)np * sizeof *ids);
        int32_t n = np;
        lp_kv_cache_reset(kv);
        for (int32_t k = 0; k < d->em_budget[i]; k++) {
            st = k == 0 ? lp_model_prefill(m, kv, ids, NULL, 1, np, logits)
                        : lp_model_decode(m, kv, ids + n - 1, logits);
            if (st != LP_OK)
                break;
            const int32_t t = argmax(logits, V);
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
    lp_kv_cache_free(kv);
    free(ids);
    free(logits);
    return st;
}
