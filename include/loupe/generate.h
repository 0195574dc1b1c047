/* loupe generate: text generation with a KV cache on a causal LM of the llama family
 * (lp_model_prefill / lp_model_decode), sampling, stop tokens and strings, streaming text.
 *
 *   lp_gen_opts o;
 *   lp_gen_opts_init(&o);                       // greedy, 128 new tokens, f32 cache
 *   o.max_new_tokens = 32; o.on_text = print_cb; o.user = NULL;
 *   lp_gen_stop_ids_default(model_dir, m, tok, &o);   // EOS ids of config / generation_config / tokenizer
 *   lp_gen_result r[2];
 *   if (lp_generate(m, tok, prompts, lens, 2, &o, r) != LP_OK) die(lp_err_msg());
 *   printf("%s\n", r[0].text);
 *   lp_gen_result_free(&r[0]); lp_gen_result_free(&r[1]);
 *
 * Threads: one generation at a time per model (its kernels use the OpenMP pool).
 */
#ifndef LOUPE_GENERATE_H
#define LOUPE_GENERATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "loupe/base.h"
#include "loupe/core.h"
#include "loupe/models.h"
#include "loupe/text.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- sampling ---------------------------------------------------------------------------- */

typedef struct lp_sample_opts {
    float temperature; /* <= 0: greedy (argmax, the lowest id on ties) */
    int32_t top_k;     /* > 0: keep the k most probable tokens; 0: all */
    float top_p;       /* in (0, 1]: keep the smallest most-probable set whose mass reaches top_p */
} lp_sample_opts;

/* Scratch for V logits (reuse across steps). */
typedef struct lp_sampler {
    int64_t V;
    int32_t *idx; /* (V) owned */
    float *p;     /* (V) owned */
} lp_sampler;
LP_WARN_UNUSED lp_status lp_sampler_init(lp_sampler *s, int64_t V);
void lp_sampler_free(lp_sampler *s);

/* The tokens sampling may pick, most probable first, as transformers' warpers keep them
 * (temperature, then top-k, then top-p; ties ordered by id): ids[0..n) and their
 * renormalized probabilities probs[0..n) (each of V entries); returns n >= 1. Greedy
 * (temperature <= 0) returns the argmax alone with probability 1. */
int64_t lp_sample_candidates(lp_sampler *s, const float *logits, const lp_sample_opts *o, int32_t *ids, float *probs);
/* One token from logits (V): greedy, or one uniform draw of rng over the candidates. */
int32_t lp_sample(lp_sampler *s, const float *logits, const lp_sample_opts *o, lp_rng *rng);

/* ---- generation -------------------------------------------------------------------------- */

/* Streaming: b is the prompt's index in the lp_generate call; text is UTF-8 complete (never
 * half a character) and never part of a stop string. */
typedef void (*lp_gen_text_fn)(void *user, int32_t b, const char *text, size_t len);

typedef struct lp_gen_opts {
    int32_t max_new_tokens;   /* >= 1 */
    lp_sample_opts sample;
    uint64_t seed;            /* sampling stream (each prompt draws from its own stream) */
    lp_dtype kv_dtype;        /* LP_DTYPE_F32 or LP_DTYPE_F16 */
    const int32_t *stop_ids;  /* generation ends after one of these ids (kept in ids, not in text) */
    int32_t n_stop_ids;
    const char *const *stop_strs; /* generation ends at the first occurrence (cut from text) */
    int32_t n_stop_strs;
    bool skip_special;        /* text without special tokens (default true) */
    bool prof_steps;          /* lp_prof_step() after each decode step (a profiler session runs) */
    lp_gen_text_fn on_text;   /* NULL: no streaming */
    void *user;
} lp_gen_opts;
/* Greedy, 128 new tokens, seed 0, f32 cache, no stops, skip special tokens. */
void lp_gen_opts_init(lp_gen_opts *o);

typedef struct lp_gen_result {
    int32_t *ids;           /* (n_ids) generated token ids (owned, malloc) */
    int32_t n_ids;
    char *text;             /* generated text (owned, malloc), stop string cut */
    int32_t n_prompt;       /* prompt tokens */
    double prefill_ms;      /* of the batch this prompt ran in */
    double decode_ms;       /* the batch's decode steps */
    int32_t decode_steps;   /* decode steps the batch ran */
    bool stopped;           /* ended by a stop id or string (else max_new_tokens) */
} lp_gen_result;
void lp_gen_result_free(lp_gen_result *r);

/* Generates a continuation for each of B prompts (tok NULL: ids only, empty texts, no stop
 * strings) (prompts[b]: lens[b] >= 1 token ids) in one
 * batch: left-padded prefill, then greedy/sampled decode steps until every prompt stopped or
 * max_new_tokens. out[0..B) are filled (free each with lp_gen_result_free); on error nothing
 * is left allocated in out. Errors: the model's (INVALID_ARG for a prompt plus max_new_tokens
 * beyond the model's positions, naming config.json), NO_MEMORY. */
LP_WARN_UNUSED lp_status lp_generate(lp_model *m, const lp_tokenizer *tok, const int32_t *const *prompts,
                                     const int32_t *lens, int32_t B, const lp_gen_opts *o, lp_gen_result *out);

/* The ids that end generation by default: config.json's eos_token_id, generation_config.json's
 * eos_token_id (an id or a list) in the model directory (none for a GGUF file: its EOS comes
 * from the tokenizer), and the tokenizer's EOS; duplicates removed. *ids is malloc'd (free). */
LP_WARN_UNUSED lp_status lp_gen_default_stop_ids(const char *model_path, const lp_model *m, const lp_tokenizer *tok,
                                                 int32_t **ids, int32_t *n);

/* ---- llama-bench-style benchmark ----------------------------------------------------------
 * pp<N>: a prefill of N random tokens (one sequence), tokens/s; tg<N>: N decode steps after a
 * one-token prompt, tokens/s. Each test runs once untimed (warm-up) and then reps times per
 * thread count; mean and sample standard deviation of the rates are reported, with the weight
 * bytes each token reads and the FLOPs it does turned into GB/s and GFLOP/s against the
 * machine's measured ceilings (STREAM triad, FMA peak) at that thread count. */
typedef struct lp_bench_gen_opts {
    int32_t n_prompt;          /* pp test length (0: no pp test) */
    int32_t n_gen;             /* tg test length (0: no tg test) */
    int32_t reps;              /* >= 1 */
    const int32_t *threads;    /* thread counts to run */
    int32_t n_threads;
    lp_dtype kv_dtype;
    uint64_t seed;             /* the random prompt */
    bool progress;             /* one line per test on stderr */
} lp_bench_gen_opts;

typedef struct lp_bench_gen_row {
    int32_t threads;
    char test[16];             /* "pp512", "tg128" */
    int32_t n_tokens;
    double tps_mean, tps_sd;   /* tokens/s */
    double gbs, gflops;        /* achieved: weight bytes and FLOPs per token x the mean rate */
    double peak_gbs, peak_gflops; /* the ceilings at this thread count */
} lp_bench_gen_row;

typedef struct lp_bench_gen_result {
    lp_bench_gen_row *rows;    /* (n_rows) owned */
    int32_t n_rows;
    double weight_bytes;       /* bytes of weights one token reads (every Linear and the LM head) */
    double flops_per_token;    /* forward FLOPs of one token (matmuls) */
    uint64_t n_params;
    int32_t scaling_stops_at;  /* tg: the thread count past which more threads gain < 10 % (0: n/a) */
} lp_bench_gen_result;

/* Runs the tests on m. Errors: the model's (generation on a non-LM), NO_MEMORY. */
LP_WARN_UNUSED lp_status lp_bench_gen_run(lp_model *m, const lp_bench_gen_opts *o, lp_bench_gen_result *out);
void lp_bench_gen_result_free(lp_bench_gen_result *r);

#ifdef __cplusplus
}
#endif
#endif /* LOUPE_GENERATE_H */
