/* Private to src/bench: the state one bench run carries between its phases (load, sweep,
 * full pass, profiled pass, output). */
#ifndef LP_BENCH_INTERNAL_H
#define LP_BENCH_INTERNAL_H

#include "loupe/bench.h"
#include "loupe/core.h"
#include "loupe/data.h"
#include "loupe/models.h"
#include "loupe/text.h"

typedef struct lp_bench_state {
    const lp_bench_config *c;
    const char *dir;
    lp_bench_result *r;
    lp_model *model;
    lp_tokenizer *tok;
    lp_dataset ds;          /* the rows (empty with --synthetic) */
    lp_encoded_dataset enc; /* tokenized rows, or synthetic ids */
    int64_t *order;         /* (enc.n) the seeded order of every row (length-sorted on request) */
    int64_t *pool;          /* (pool_n) the sweep's rows: the first pool_n of a seeded order */
    int64_t pool_n;
    float *logits; /* (max batch, num_labels) */
    lp_batch batch;
    bool label_map_from_data; /* written back as label_mappings.json */
    bool head_trained;        /* the classifier came from the checkpoint (else drawn from --seed) */
} lp_bench_state;

/* load.c: model, tokenizer, data (or synthetic ids), the seeded orders. */
lp_status lp_bench__load(lp_bench_state *s);
void lp_bench__unload(lp_bench_state *s);
/* sweep.c: the batch-size sweep (stops early on Ctrl-C) and the full pass. */
lp_status lp_bench__sweep(lp_bench_state *s);
lp_status lp_bench__full_pass(lp_bench_state *s);
/* After the full pass of a quantized --dtype: f32's accuracy on the same rows (full.f32_*). */
lp_status lp_bench__f32_reference(lp_bench_state *s);
/* load.c: the bench's model again with f32 weights (the caller frees it). */
lp_status lp_bench__load_f32(const lp_bench_state *s, lp_model **out);
/* Fills b with n rows of s's encoded set starting at position `at` of the cyclic list rows. */
lp_status lp_bench__fill(lp_bench_state *s, const int64_t *rows, int64_t n_rows, int64_t at, int32_t n);
/* profile.c: the profiled pass and its bottlenecks. */
lp_status lp_bench__profile(lp_bench_state *s);
/* write_*.c: the output files. */
lp_status lp_bench__write_json(const lp_bench_state *s);
lp_status lp_bench__write_csv(const lp_bench_state *s);
lp_status lp_bench__write_summary(const lp_bench_state *s);
lp_status lp_bench__write_predictions(const lp_bench_state *s);
/* The run's best batch size as the report states it. */
void lp_bench__best_reason(const lp_bench_result *r, char *buf, size_t cap);

#endif
