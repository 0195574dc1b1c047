/* The llama-bench-style generation benchmark: prompt processing (one prefill of N tokens) and
 * token generation (N single-token decode steps) rates per thread count, with the weight
 * bytes and FLOPs behind each token turned into achieved GB/s and GFLOP/s and set against
 * the machine's measured ceilings at the same thread count. Decode reads every weight once
 * per token, so its GB/s against STREAM's is the figure that says how close to the memory
 * limit it runs. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loupe/generate.h"
#include "loupe/kernels.h"
#include "loupe/prof.h"

void lp_bench_gen_result_free(lp_bench_gen_result *r)
{
    free(r->rows);
    memset(r, 0, sizeof *r);
}

/* Bytes of weights one token reads (lp_model_decode_weight_bytes: a tied head counts as the
 * blocks or tiles it reads when it has a quantized copy, not as the f32 table) and the
 * parameter count (f32 parameters plus the quantized bases). */
static double weight_bytes(const lp_model *m, uint64_t *n_params)
{
    size_t n;
    const lp_model_param *p = lp_model_params(m, &n);
    uint64_t count = 0;
    for (size_t i = 0; i < n; i++)
        count += (uint64_t)p[i].numel;
    lp_lora_info li;
    lp_model_lora_info(m, &li);
    *n_params = count + li.quantized_params;
    return lp_model_decode_weight_bytes(m);
}

static double secs(int64_t t0)
{
    return (double)(lp_prof_now_ns() - t0) / 1e9;
}

/* One timed run of a test; *tps = tokens/s. */
static lp_status run_once(lp_model *m, lp_kv_cache *kv, const int32_t *prompt, bool pp, int32_t n, float *logits,
                          double *tps)
{
    lp_kv_cache_reset(kv);
    lp_status st;
    if (pp) {
        const int64_t t0 = lp_prof_now_ns();
        if ((st = lp_model_prefill(m, kv, prompt, NULL, 1, n, logits)) != LP_OK)
            return st;
        *tps = n / secs(t0);
        return LP_OK;
    }
    if ((st = lp_model_prefill(m, kv, prompt, NULL, 1, 1, logits)) != LP_OK)
        return st;
    const int64_t t0 = lp_prof_now_ns();
    for (int32_t i = 0; i < n; i++) // the token fed back does not matter to the cost
        if ((st = lp_model_decode(m, kv, prompt, logits)) != LP_OK)
            return st;
    *tps = n / secs(t0);
    return LP_OK;
}

lp_status lp_bench_gen_run(lp_model *m, const lp_bench_gen_opts *o, lp_bench_gen_result *out)
{
    memset(out, 0, sizeof *out);
    if (o->reps < 1 || o->n_threads < 1 || o->n_prompt < 0 || o->n_gen < 0)
        return lp_err(LP_STATUS_INVALID_ARG, "bench-gen: reps %d, %d thread counts", o->reps, o->n_threads);
    const lp_model_config *c = lp_model_config_get(m);
    const int32_t cap = (o->n_prompt > 1 + o->n_gen ? o->n_prompt : 1 + o->n_gen);
    out->weight_bytes = weight_bytes(m, &out->n_params);
    out->flops_per_token = lp_model_forward_flops(m, 1, 1);
    int32_t *prompt = malloc((size_t)cap * sizeof *prompt);
    float *logits = malloc((size_t)c->vocab_size * sizeof *logits);
    double *rates = malloc((size_t)o->reps * sizeof *rates);
    out->rows = calloc((size_t)o->n_threads * 2, sizeof *out->rows);
    lp_kv_cache *kv = NULL;
    lp_status st = LP_OK;
    if (!prompt || !logits || !rates || !out->rows) {
        st = lp_err(LP_STATUS_NO_MEMORY, "bench-gen: out of memory");
        goto done;
    }
    lp_rng rng;
    lp_rng_init(&rng, o->seed, LP_RNG_STREAM_DATA);
    for (int32_t i = 0; i < cap; i++)
        prompt[i] = (int32_t)lp_rng_below(&rng, (uint64_t)c->vocab_size);
    if ((st = lp_model_kv_init(m, 1, cap, o->kv_dtype, &kv)) != LP_OK)
        goto done;
    const int saved = lp_threads_get();
    for (int32_t ti = 0; ti < o->n_threads && st == LP_OK; ti++) {
        lp_threads_set(o->threads[ti]);
        lp_peak_result pk;
        if ((st = lp_peak_measure(&pk, 0.1, 256)) != LP_OK)
            break;
        for (int test = 0; test < 2 && st == LP_OK; test++) {
            const bool pp = test == 0;
            const int32_t n = pp ? o->n_prompt : o->n_gen;
            if (n <= 0)
                continue;
            double tps;
            if ((st = run_once(m, kv, prompt, pp, n, logits, &tps)) != LP_OK) // warm-up
                break;
            double sum = 0;
            for (int32_t r = 0; r < o->reps && st == LP_OK; r++)
                if ((st = run_once(m, kv, prompt, pp, n, logits, &rates[r])) == LP_OK)
                    sum += rates[r];
            if (st != LP_OK)
                break;
            const double mean = sum / o->reps;
            double var = 0;
            for (int32_t r = 0; r < o->reps; r++)
                var += (rates[r] - mean) * (rates[r] - mean);
            lp_bench_gen_row *row = &out->rows[out->n_rows++];
            row->threads = o->threads[ti];
            snprintf(row->test, sizeof row->test, "%s%d", pp ? "pp" : "tg", n);
            row->n_tokens = n;
            row->tps_mean = mean;
            row->tps_sd = o->reps > 1 ? sqrt(var / (o->reps - 1)) : 0.0;
            // pp: the weights are read once for the whole prompt; tg: once per token
            row->gbs = (pp ? out->weight_bytes / n : out->weight_bytes) * mean / 1e9;
            row->gflops = (pp ? lp_model_forward_flops(m, 1, n) / n : out->flops_per_token) * mean / 1e9;
            row->peak_gbs = pk.triad_gbs;
            row->peak_gflops = pk.fma_gflops;
            if (o->progress)
                fprintf(stderr, "bench-gen: %s t=%d: %.2f ± %.2f tokens/s\n", row->test, row->threads, mean,
                        row->tps_sd);
        }
    }
    lp_threads_set(saved);
    // where decode stops scaling: the first thread count whose successor gains < 10 %
    for (int32_t i = 0; st == LP_OK && i < out->n_rows; i++) {
        const lp_bench_gen_row *a = &out->rows[i];
        if (a->test[0] != 't')
            continue;
        out->scaling_stops_at = a->threads;
        const lp_bench_gen_row *next = NULL;
        for (int32_t j = i + 1; j < out->n_rows && !next; j++)
            if (out->rows[j].test[0] == 't' && out->rows[j].threads > a->threads)
                next = &out->rows[j];
        if (!next || next->tps_mean < 1.1 * a->tps_mean)
            break;
    }
done:
    lp_kv_cache_free(kv);
    free(prompt), free(logits), free(rates);
    if (st != LP_OK)
        lp_bench_gen_result_free(out);
    return st;
}
