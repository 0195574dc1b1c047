/* Cross-entropy with logits, mean over non-ignored rows (torch.nn.functional.cross_entropy
 * with reduction="mean" and ignore_index). The loss sums per-row terms serially after a
 * parallel pass, so it is the same for any thread count. */
#include <math.h>
#include <omp.h>

#include "cpu_kernels.h"
#include "simd.h"

static lp_status check_targets(const int32_t *targets, int64_t N, int64_t V, int32_t ignore_index)
{
    for (int64_t i = 0; i < N; i++)
        if (targets[i] != ignore_index && (targets[i] < 0 || targets[i] >= V))
            return lp_err(LP_STATUS_RANGE, "cross-entropy: label %d at row %lld outside 0..%lld (ignore index %d)",
                          targets[i], (long long)i, (long long)(V - 1), ignore_index);
    return LP_OK;
}

static lp_status finish(float *loss, const float *lse, const float *logits, const int32_t *targets, int64_t N,
                        int64_t V, int32_t ignore_index)
{
    double sum = 0.0;
    int64_t count = 0;
    for (int64_t i = 0; i < N; i++) {
        if (!isfinite(lse[i]))
            return lp_err(LP_STATUS_NUMERIC, "cross-entropy: row %lld has non-finite logits", (long long)i);
        if (targets[i] == ignore_index)
            continue;
        sum += (double)lse[i] - logits[i * V + targets[i]];
        count++;
    }
    *loss = count ? (float)(sum / (double)count) : 0.0f;
    return LP_OK;
}

// loss (1) =; lse (N) =; logits (N,V); targets (N)
lp_status lp_k_cross_entropy_forward_ref(float *loss, float *lse, const float *logits, const int32_t *targets,
                                         int64_t N, int64_t V, int32_t ignore_index)
{
    lp_status st = check_targets(targets, N, V, ignore_index);
    if (st != LP_OK)
        return st;
    for (int64_t i = 0; i < N; i++) {
        const float *x = logits + i * V;
        float m = -INFINITY;
        for (int64_t c = 0; c < V; c++)
            m = fmaxf(m, x[c]);
        double s = 0.0;
        for (int64_t c = 0; c < V; c++)
            s += exp((double)x[c] - m);
        lse[i] = (float)(m + log(s));
    }
    return finish(loss, lse, logits, targets, N, V, ignore_index);
}

lp_status lp_k_cross_entropy_forward_opt(float *loss, float *lse, const float *logits, const int32_t *targets,
                                         int64_t N, int64_t V, int32_t ignore_index)
{
    lp_status st = check_targets(targets, N, V, ignore_index);
    if (st != LP_OK)
        return st;
#pragma omp parallel for schedule(static) if (N * V >= LP_PAR_MIN)
    for (int64_t i = 0; i < N; i++) {
        const float *restrict x = logits + i * V;
        // the row max in vector registers (fmaxf's NaN rule kept the loop scalar: 5x the
        // backward's time on a 151936-wide vocabulary). A NaN logit still ends as a NaN lse:
        // exp(NaN - m) is NaN whatever m became
        float m = -INFINITY;
        int64_t c = 0;
#if defined(LP_HAVE_AVX512)
        __m512 vx = _mm512_set1_ps(-INFINITY);
        for (; c + 16 <= V; c += 16)
            vx = _mm512_max_ps(vx, _mm512_loadu_ps(x + c));
        m = _mm512_reduce_max_ps(vx);
#elif defined(LP_HAVE_AVX2)
        __m256 vx = _mm256_set1_ps(-INFINITY);
        for (; c + 8 <= V; c += 8)
            vx = _mm256_max_ps(vx, _mm256_loadu_ps(x + c));
        m = lp_hmax256(vx);
#endif
        for (; c < V; c++)
            m = fmaxf(m, x[c]);
        float s = 0.0f;
        c = 0;
#if defined(LP_HAVE_AVX512)
        __m512 vs = _mm512_setzero_ps(), vm = _mm512_set1_ps(m);
        for (; c + 16 <= V; c += 16)
            vs = _mm512_add_ps(vs, lp_exp_nonpos512(_mm512_sub_ps(_mm512_loadu_ps(x + c), vm)));
        s = _mm512_reduce_add_ps(vs);
#elif defined(LP_HAVE_AVX2)
        __m256 vs = _mm256_setzero_ps(), vm = _mm256_set1_ps(m);
        for (; c + 8 <= V; c += 8)
            vs = _mm256_add_ps(vs, lp_exp_nonpos256(_mm256_sub_ps(_mm256_loadu_ps(x + c), vm)));
        s = lp_hsum256(vs);
#endif
        for (; c < V; c++)
            s += expf(x[c] - m);
        lse[i] = m + logf(s);
    }
    return finish(loss, lse, logits, targets, N, V, ignore_index);
}

static int64_t count_rows(const int32_t *targets, int64_t N, int32_t ignore_index)
{
    int64_t n = 0;
    for (int64_t i = 0; i < N; i++)
        n += targets[i] != ignore_index;
    return n;
}

// dlogits (N,V) =, may be logits (in place); logits (N,V); lse (N); targets (N)
void lp_k_cross_entropy_backward_ref(float *dlogits, const float *logits, const float *lse, const int32_t *targets,
                                     int64_t N, int64_t V, int32_t ignore_index, float dloss)
{
    int64_t count = count_rows(targets, N, ignore_index);
    float g = count ? dloss / (float)count : 0.0f;
    for (int64_t i = 0; i < N; i++)
        for (int64_t c = 0; c < V; c++) {
            if (targets[i] == ignore_index) {
                dlogits[i * V + c] = 0.0f;
                continue;
            }
            float p = (float)exp((double)logits[i * V + c] - lse[i]);
            dlogits[i * V + c] = g * (p - (c == targets[i] ? 1.0f : 0.0f));
        }
}

void lp_k_cross_entropy_backward_opt(float *dlogits, const float *logits, const float *lse, const int32_t *targets,
                                     int64_t N, int64_t V, int32_t ignore_index, float dloss)
{
    int64_t count = count_rows(targets, N, ignore_index);
    float g = count ? dloss / (float)count : 0.0f;
#pragma omp parallel for schedule(static) if (N * V >= LP_PAR_MIN)
    for (int64_t i = 0; i < N; i++) {
        // no restrict: dlogits may be logits (the chunked LM head takes the gradient in place);
        // each element is read before it is written
        float *d = dlogits + i * V;
        const float *x = logits + i * V;
        if (targets[i] == ignore_index) {
            for (int64_t c = 0; c < V; c++)
                d[c] = 0.0f;
            continue;
        }
        int64_t c = 0;
#ifdef LP_HAVE_AVX2
        __m256 vl = _mm256_set1_ps(lse[i]), vg = _mm256_set1_ps(g);
        for (; c + 8 <= V; c += 8)
            _mm256_storeu_ps(d + c, _mm256_mul_ps(vg, lp_exp_nonpos256(_mm256_sub_ps(_mm256_loadu_ps(x + c), vl))));
#endif
        for (; c < V; c++)
            d[c] = g * expf(x[c] - lse[i]);
        d[targets[i]] -= g;
    }
}
