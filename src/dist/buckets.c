/* Gradient buckets: the spans of a gradient block packed, from the end of the block down (the
 * order backward finishes them), into contiguous runs of about bucket_bytes, so that each
 * all-reduce is one range and the first ones can start while backward still runs (DDP's
 * buckets, 25 MB by default). */
#include <stdlib.h>
#include <string.h>

#include "loupe/dist.h"

static int by_off(const void *a, const void *b)
{
    const lp_dist_span *x = a, *y = b;
    return (x->off > y->off) - (x->off < y->off);
}

lp_status lp_dist_buckets_plan(const lp_dist_span *spans, int32_t n_spans, int64_t total,
                               int64_t bucket_bytes, lp_dist_buckets *out)
{
    memset(out, 0, sizeof *out);
    if (n_spans < 0 || total < 0 || bucket_bytes < (int64_t)sizeof(float))
        return lp_err(LP_STATUS_INVALID_ARG,
                      "gradient buckets: bad plan (%d spans, %lld floats, %lld-byte buckets)", (int)n_spans,
                      (long long)total, (long long)bucket_bytes);
    if (n_spans == 0)
        return LP_OK;
    lp_dist_span *s = malloc((size_t)n_spans * sizeof *s);
    lp_dist_bucket *b = malloc((size_t)n_spans * sizeof *b); /* at most one bucket per span */
    if (!s || !b) {
        free(s);
        free(b);
        return lp_err(LP_STATUS_NO_MEMORY, "gradient buckets: out of memory");
    }
    memcpy(s, spans, (size_t)n_spans * sizeof *s);
    qsort(s, (size_t)n_spans, sizeof *s, by_off);
    for (int32_t i = 0; i < n_spans; i++) {
        const int64_t end = i + 1 < n_spans ? s[i + 1].off : total;
        if (s[i].n < 1 || s[i].off < 0 || s[i].off + s[i].n > end) {
            const long long lo = (long long)s[i].off, hi = (long long)(s[i].off + s[i].n);
            free(s);
            free(b);
            return lp_err(LP_STATUS_INVALID_ARG,
                          "gradient buckets: span [%lld, %lld) overlaps the next one or leaves the %lld-float block",
                          lo, hi, (long long)total);
        }
    }
    const int64_t cap = bucket_bytes / (int64_t)sizeof(float);
    int32_t nb = 0;
    int64_t hi = total; /* the open bucket covers [s[i].off, hi) */
    int64_t used = 0;   /* span floats in the open bucket */
    int32_t stage = 0;
    for (int32_t i = n_spans - 1; i >= 0; i--) {
        if (used > 0 && used + s[i].n > cap) { /* close the open bucket at the span above */
            const int64_t lo = s[i + 1].off;
            b[nb++] = (lp_dist_bucket){.off = lo, .n = hi - lo, .stage = stage};
            hi = lo;
            used = 0;
        }
        stage = used == 0 || s[i].stage < stage ? s[i].stage : stage;
        used += s[i].n;
    }
    b[nb++] = (lp_dist_bucket){.off = 0, .n = hi, .stage = stage}; /* padding before the first span too */
    free(s);
    out->b = b;
    out->n = nb;
    return LP_OK;
}

void lp_dist_buckets_free(lp_dist_buckets *b)
{
    free(b->b);
    b->b = NULL;
    b->n = 0;
}

/* Boundary q of n floats cut in world parts: q/world of them, rounded up to 16 floats. */
static int64_t cut(int64_t n, int32_t q, int32_t world)
{
    const int64_t at = (n * q / world + 15) & ~(int64_t)15;
    return at < n ? at : n;
}

void lp_dist_shard_range(int64_t n, int32_t rank, int32_t world, int64_t *lo, int64_t *len)
{
    if (world < 1 || rank < 0 || rank >= world || n <= 0) {
        *lo = 0;
        *len = world <= 1 && n > 0 ? n : 0;
        return;
    }
    *lo = cut(n, rank, world);
    *len = (rank + 1 == world ? n : cut(n, rank + 1, world)) - *lo;
}
