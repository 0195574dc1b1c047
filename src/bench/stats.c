/* Summary statistics of the timed runs: mean, sample standard deviation and nearest-rank
 * percentiles (the pXX-th value is the ceil(XX/100 * n)-th smallest), as numpy's
 * percentile(method="inverted_cdf") gives them. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "loupe/bench.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double rank(const double *s, int32_t n, double pct)
{
    int32_t k = (int32_t)ceil(pct / 100.0 * n - 1e-9);
    return s[k < 1 ? 0 : k > n ? n - 1 : k - 1];
}

void lp_bench_stats_of(const double *x, int32_t n, lp_bench_stats *out)
{
    out->n = n;
    if (n <= 0) {
        out->mean = out->std = out->min = out->max = out->p50 = out->p90 = out->p99 = NAN;
        return;
    }
    double *s = malloc((size_t)n * sizeof *s), sum = 0;
    for (int32_t i = 0; i < n; i++)
        sum += x[i];
    out->mean = sum / n;
    double ss = 0;
    for (int32_t i = 0; i < n; i++)
        ss += (x[i] - out->mean) * (x[i] - out->mean);
    out->std = n > 1 ? sqrt(ss / (n - 1)) : 0;
    if (!s) { // no room to sort: percentiles unknown, the rest holds
        out->min = out->max = out->p50 = out->p90 = out->p99 = NAN;
        return;
    }
    memcpy(s, x, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    out->min = s[0];
    out->max = s[n - 1];
    out->p50 = rank(s, n, 50);
    out->p90 = rank(s, n, 90);
    out->p99 = rank(s, n, 99);
    free(s);
}
