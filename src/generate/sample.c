/* Sampling a token from logits as transformers' generate does: greedy (argmax), or the
 * temperature -> top-k -> top-p warpers then one draw. Ties are ordered by id (the stable
 * sort torch's topk and sort give on CPU for equal values is not guaranteed; by id is at
 * least reproducible), so a given seed always picks the same token. */
#include <math.h>
#include <stdlib.h>

#include "loupe/generate.h"

lp_status lp_sampler_init(lp_sampler *s, int64_t V)
{
    s->V = V;
    s->idx = malloc((size_t)V * sizeof *s->idx);
    s->p = malloc((size_t)V * sizeof *s->p);
    if (!s->idx || !s->p) {
        lp_sampler_free(s);
        return lp_err(LP_STATUS_NO_MEMORY, "sampler: out of memory for %lld logits", (long long)V);
    }
    return LP_OK;
}

void lp_sampler_free(lp_sampler *s)
{
    free(s->idx);
    free(s->p);
    s->idx = NULL;
    s->p = NULL;
}

static int32_t argmax(const float *x, int64_t n)
{
    int32_t best = 0;
    for (int64_t i = 1; i < n; i++)
        if (x[i] > x[best])
            best = (int32_t)i;
    return best;
}

/* qsort has no context argument: the logits being sorted, for this thread. */
static _Thread_local const float *sort_keys;

static int by_logit_desc(const void *a, const void *b)
{
    const int32_t i = *(const int32_t *)a, j = *(const int32_t *)b;
    const float x = sort_keys[i], y = sort_keys[j];
    if (x != y)
        return x > y ? -1 : 1;
    return (i > j) - (i < j);
}

int64_t lp_sample_candidates(lp_sampler *s, const float *logits, const lp_sample_opts *o, int32_t *ids, float *probs)
{
    const int64_t V = s->V;
    if (o->temperature <= 0.0f) {
        ids[0] = argmax(logits, V);
        probs[0] = 1.0f;
        return 1;
    }
    for (int64_t i = 0; i < V; i++)
        s->idx[i] = (int32_t)i;
    sort_keys = logits;
    qsort(s->idx, (size_t)V, sizeof *s->idx, by_logit_desc);
    int64_t n = o->top_k > 0 && o->top_k < V ? o->top_k : V;
    // softmax of logits / T over the kept tokens (in double: the sums decide top-p's cut)
    const double T = o->temperature, mx = logits[s->idx[0]];
    double z = 0.0;
    for (int64_t i = 0; i < n; i++)
        z += exp(((double)logits[s->idx[i]] - mx) / T);
    if (o->top_p > 0.0f && o->top_p < 1.0f) { // smallest prefix whose mass reaches top_p
        double c = 0.0;
        int64_t keep = n;
        for (int64_t i = 0; i < n; i++) {
            c += exp(((double)logits[s->idx[i]] - mx) / T) / z;
            if (c >= (double)o->top_p) {
                keep = i + 1;
                break;
            }
        }
        n = keep;
        z = 0.0;
        for (int64_t i = 0; i < n; i++)
            z += exp(((double)logits[s->idx[i]] - mx) / T);
    }
    for (int64_t i = 0; i < n; i++) {
        ids[i] = s->idx[i];
        probs[i] = (float)(exp(((double)logits[s->idx[i]] - mx) / T) / z);
    }
    return n;
}

int32_t lp_sample(lp_sampler *s, const float *logits, const lp_sample_opts *o, lp_rng *rng)
{
    if (o->temperature <= 0.0f)
        return argmax(logits, s->V);
    // candidates into the sampler's own arrays (ids may alias idx: it is read in order)
    const int64_t n = lp_sample_candidates(s, logits, o, s->idx, s->p);
    const float u = lp_rng_u01(lp_rng_u32(rng));
    double c = 0.0;
    for (int64_t i = 0; i < n; i++) {
        c += s->p[i];
        if ((double)u < c)
            return s->idx[i];
    }
    return s->idx[n - 1]; // rounding left the sum just under u
}
