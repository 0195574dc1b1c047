/* What a bench runs on: the model; the data (rows and labels through the data layer's
 * readers and label maps: --label-map, else a trained head's config.json, else built from
 * the data; or random ids for --synthetic); a fresh head sized to the label map when the
 * checkpoint has none (a trained head of another size is an error); the tokenized rows;
 * and the seeded orders the sweep and the full pass walk. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_internal.h"

/* Reads the rows with labels as ids of map_file's label map (--label-map, or the trained
 * head's config.json), or of a map built from the data when map_file is NULL. */
static lp_status load_data(lp_bench_state *s, const char *map_file)
{
    const lp_bench_config *c = s->c;
    lp_label_map given = {0};
    lp_status st;
    if (map_file && (st = lp_label_map_load(&given, map_file)) != LP_OK) {
        if (c->label_map_file)
            return lp_err_wrap(st, "--label-map");
        map_file = NULL; // a config.json without id2label: the labels' own order, checked below
    }
    lp_dataset_options o;
    lp_dataset_options_init(&o);
    o.text_column = c->text_column;
    o.label_column = c->label_column;
    o.skip_bad_rows = c->skip_bad_rows;
    o.label_map = map_file ? &given : NULL;
    st = lp_dataset_load(c->data_file, &o, &s->ds);
    lp_label_map_free(&given);
    s->label_map_from_data = !map_file;
    if (st == LP_OK && s->ds.n_skipped && c->progress)
        fprintf(stderr, "loupe bench: %s: skipped %lld bad row%s (first: %s)\n", s->ds.source,
                (long long)s->ds.n_skipped, s->ds.n_skipped == 1 ? "" : "s", s->ds.skip_reasons[0]);
    return st;
}

static int head_from_checkpoint(const lp_model *m)
{
    size_t n;
    const lp_model_param *p = lp_model_params(m, &n);
    for (size_t i = 0; i < n; i++) {
        size_t l = strlen(p[i].name);
        if (((l >= 17 && !strcmp(p[i].name + l - 17, "classifier.weight")) ||
             (l >= 12 && !strcmp(p[i].name + l - 12, "score.weight"))) &&
            p[i].from_checkpoint)
            return 1;
    }
    return 0;
}

/* The model options of every bench load but the weights' format. */
static void base_options(const lp_bench_config *c, lp_model_options *o)
{
    lp_model_options_init(o);
    o->task = LP_MODEL_TASK_SEQ_CLS;
    o->no_grad = true;
    o->lazy_embedding = true; /* forward passes only: the rows of the tokens met */
    o->exec = c->exec;
    o->seed = c->seed;
    o->quiet = true;
    if (c->adapter_dir) {
        o->lora.enabled = true;
        o->lora.adapter_dir = c->adapter_dir;
    }
}

lp_status lp_bench__load_f32(const lp_bench_state *s, lp_model **out)
{
    lp_model_options o;
    base_options(s->c, &o);
    lp_model_info info;
    lp_model_info_get(s->model, &info);
    o.num_labels = (int32_t)info.num_labels; /* the bench model's head: a trained one is the same size */
    lp_status st = lp_model_load(s->c->model_dir, &o, out);
    return st == LP_OK
               ? LP_OK
               : lp_err_wrap(st, "bench: the f32 reference of --dtype %s", lp_bench_dtype_name(s->c->dtype));
}

static lp_status load_model(lp_bench_state *s)
{
    const lp_bench_config *c = s->c;
    lp_model_options o;
    base_options(c, &o);
    switch (c->dtype) {
    case LP_BENCH_DTYPE_F32:
        break;
    case LP_BENCH_DTYPE_NF4:
        /* the model layer stores quantized weights as the frozen base of a LoRA linear; a
         * rank-1 adapter on the query projection whose B is zero adds exactly nothing */
        o.lora.enabled = true;
        o.lora.rank = 1;
        o.lora.targets = "q";
        o.lora.base_dtype = LP_DTYPE_NF4;
        break;
    case LP_BENCH_DTYPE_BF16:
        /* Linears rounded to bf16 and packed at load, run by the bf16 GEMM (f32 accumulation) */
        o.weights = LP_WEIGHT_FORMAT_BF16;
        break;
    case LP_BENCH_DTYPE_F32_PACKED:
        /* the same f32 values, packed once at load for the f32 GEMM (no per-call repacking) */
        o.weights = LP_WEIGHT_FORMAT_F32_PACKED;
        break;
    case LP_BENCH_DTYPE_Q8_0:
        /* Linears converted at load to ggml's Q8_0 blocks (a scale per 32-block; activations
         * quantized per block at run time; vpdpbusd / maddubs) */
        o.weights = LP_WEIGHT_FORMAT_Q8_0;
        break;
    case LP_BENCH_DTYPE_INT8:
        /* int8 dynamic quantization as PyTorch's qint8 does it: int8 weights with one scale
         * per output row, activations quantized per row at run time, int32 sums over the
         * whole row (i8gemm.c). Under --adapter the integer kernels take no LoRA: int8 is
         * then LoRA's int8 base (the same per-row weights, dequantized per slab into the
         * f32 GEMM) */
        if (c->adapter_dir)
            o.lora.base_dtype = LP_DTYPE_INT8;
        else
            o.weights = LP_WEIGHT_FORMAT_INT8;
        break;
    default:
        return lp_err(
            LP_STATUS_UNSUPPORTED,
            "--dtype %s: the model layer has no %s inference path yet (f32, bf16, q8_0, int8 and nf4 run today)",
            lp_bench_dtype_name(c->dtype), lp_bench_dtype_name(c->dtype));
    }
    lp_status st = lp_model_load(c->model_dir, &o, &s->model);
    if (st != LP_OK)
        return st;
    lp_model_info info;
    lp_model_info_get(s->model, &info);
    int trained = head_from_checkpoint(s->model);
    s->head_trained = trained;
    /* the label ids a trained head predicts are its config's id2label: read the data with
     * that map (a label map built from the data could number the classes differently) */
    char cfg_path[1100];
    snprintf(cfg_path, sizeof cfg_path, "%s/config.json", c->model_dir);
    const char *map_file = c->label_map_file ? c->label_map_file : trained ? cfg_path : NULL;
    if (!c->synthetic && (st = load_data(s, map_file)) != LP_OK)
        return st;
    int32_t want = c->synthetic ? (int32_t)info.num_labels : s->ds.label_map.n;
    if (info.num_labels != want) {
        const char *src = c->label_map_file ? c->label_map_file : c->data_file;
        if (trained)
            return lp_err(
                LP_STATUS_RANGE,
                "%s: the model's trained head has %lld labels but %s has %d; give the label map the "
                "model was trained with (--label-map)",
                cfg_path, (long long)info.num_labels, src, want);
        if (!c->synthetic && c->progress)
            fprintf(stderr,
                    "loupe bench: %s has no trained head; a %d-label head is initialized from seed %llu "
                    "(accuracy is then chance)\n",
                    c->model_dir, want, (unsigned long long)c->seed);
        lp_model_free(s->model);
        s->model = NULL;
        o.num_labels = want;
        if ((st = lp_model_load(c->model_dir, &o, &s->model)) != LP_OK)
            return st;
    }
    if (!c->synthetic &&
        (st = lp_model_set_label_names(s->model, (const char *const *)s->ds.label_map.names, want)) != LP_OK)
        return st;
    return LP_OK;
}

static lp_status synthetic_ids(lp_bench_state *s, int64_t n, int32_t T, int64_t vocab)
{
    lp_encoded_dataset *e = &s->enc;
    e->n = n;
    e->max_len = T;
    e->offsets = malloc((size_t)(n + 1) * sizeof *e->offsets);
    e->ids = malloc((size_t)(n * T) * sizeof *e->ids);
    e->type_ids = calloc((size_t)(n * T), sizeof *e->type_ids);
    e->labels = calloc((size_t)n, sizeof *e->labels);
    e->full_len = malloc((size_t)n * sizeof *e->full_len);
    if (!e->offsets || !e->ids || !e->type_ids || !e->labels || !e->full_len)
        return lp_err(LP_STATUS_NO_MEMORY, "--synthetic: out of memory for %lld x %d ids", (long long)n, T);
    lp_rng rng;
    lp_rng_init(&rng, s->c->seed, LP_RNG_STREAM_DATA);
    for (int64_t i = 0; i <= n; i++)
        e->offsets[i] = i * T;
    for (int64_t i = 0; i < n * T; i++) // avoid id 0, the usual padding id
        e->ids[i] = 1 + (int32_t)(lp_rng_u32(&rng) % (uint32_t)(vocab > 1 ? vocab - 1 : 1));
    for (int64_t i = 0; i < n; i++)
        e->full_len[i] = T;
    return LP_OK;
}

static const lp_encoded_dataset *len_src;
static int by_len(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    int64_t lx = len_src->offsets[x + 1] - len_src->offsets[x],
            ly = len_src->offsets[y + 1] - len_src->offsets[y];
    return lx != ly ? (lx < ly ? -1 : 1) : (x < y ? -1 : x > y); // ties keep the seeded order's rows stable
}

lp_status lp_bench__load(lp_bench_state *s)
{
    const lp_bench_config *c = s->c;
    lp_bench_result *r = s->r;
    lp_status st;
    if ((st = load_model(s)) != LP_OK)
        return st;
    lp_model_info info;
    lp_model_info_get(s->model, &info);
    const lp_model_config *mc = lp_model_config_get(s->model);
    snprintf(r->model_type, sizeof r->model_type, "%s", mc->model_type);
    snprintf(r->arch, sizeof r->arch, "%s", lp_hf_arch_name(info.arch));
    snprintf(r->dtype, sizeof r->dtype, "%s", lp_bench_dtype_name(c->dtype));
    r->num_labels = (int32_t)info.num_labels;
    lp_lora_info li;
    lp_model_lora_info(s->model, &li);
    /* n_params counts the quantized weights too; they are stored as codes + scales. The
     * rank-1 zero adapter that carries a quantized base is not the model's (but its bytes are
     * in memory, so they stay in the size). */
    r->n_params = info.n_params - (c->adapter_dir ? 0 : li.adapter_params);
    r->model_bytes = (int64_t)(info.n_params - li.quantized_params) * 4 + (int64_t)li.quantized_bytes;
    r->model_mb = r->model_bytes / 1048576.0;
    int32_t maxlen = c->max_length;
    if (info.max_positions > 0 && maxlen > info.max_positions)
        maxlen = (int32_t)info.max_positions; // longer inputs cannot be embedded: truncate there
    r->max_length = maxlen;

    int64_t pool_want = 0;
    for (int32_t i = 0; i < c->n_sample_sizes; i++)
        if (c->sample_sizes[i] > pool_want)
            pool_want = c->sample_sizes[i];
    if (c->synthetic) {
        int32_t T = c->seq_len < maxlen ? c->seq_len : maxlen;
        if ((st = synthetic_ids(s, pool_want, T, info.vocab_size)) != LP_OK)
            return st;
    } else {
        if ((st = lp_tokenizer_load(c->model_dir, &s->tok)) != LP_OK)
            return lp_err_wrap(st, "tokenizer of %s", c->model_dir);
        int32_t pad = lp_tokenizer_special_id(s->tok, LP_SPECIAL_PAD);
        lp_tokenizer_rows ec = {.tok = s->tok};
        st = lp_dataset_encode(&s->ds, lp_tokenizer_encode_row, &ec, maxlen, pad < 0 ? 0 : pad, &s->enc);
        lp_encoding_free(&ec.enc);
        if (st != LP_OK)
            return st;
        /* long rows are truncated, as the model would see them; say where the longest is */
        int64_t n_trunc = 0, longest = -1;
        for (int64_t i = 0; i < s->enc.n; i++)
            if (s->enc.full_len[i] > maxlen) {
                n_trunc++;
                if (longest < 0 || s->enc.full_len[i] > s->enc.full_len[longest])
                    longest = i;
            }
        if (n_trunc && c->progress)
            fprintf(
                stderr,
                "loupe bench: %s:%lld: %lld row%s truncated to %d tokens (the longest, this one, has %d)\n",
                c->data_file, (long long)s->ds.lines[longest], (long long)n_trunc, n_trunc == 1 ? "" : "s",
                maxlen, s->enc.full_len[longest]);
    }
    int64_t n = s->enc.n;
    r->n_rows = n;
    s->order = malloc((size_t)n * sizeof *s->order);
    if (!s->order)
        return lp_err(LP_STATUS_NO_MEMORY, "bench: out of memory");
    if ((st = lp_epoch_order(n, c->seed, 0, 1, s->order)) != LP_OK)
        return st;
    s->pool_n = pool_want < n ? pool_want : n;
    s->pool = malloc((size_t)s->pool_n * sizeof *s->pool);
    if (!s->pool)
        return lp_err(LP_STATUS_NO_MEMORY, "bench: out of memory");
    memcpy(s->pool, s->order, (size_t)s->pool_n * sizeof *s->pool);
    r->pool_rows = s->pool_n;
    if (c->sort_by_length) {
        len_src = &s->enc;
        qsort(s->pool, (size_t)s->pool_n, sizeof *s->pool, by_len);
        qsort(s->order, (size_t)n, sizeof *s->order, by_len);
    }
    int64_t tot = 0;
    for (int64_t i = 0; i < n; i++) {
        int32_t l = (int32_t)(s->enc.offsets[i + 1] - s->enc.offsets[i]);
        tot += l;
        if (l > r->max_len_seen)
            r->max_len_seen = l;
    }
    r->mean_len = n ? (double)tot / n : 0;
    int32_t maxb = 1;
    for (int32_t i = 0; i < c->n_batch_sizes; i++)
        if (c->batch_sizes[i] > maxb)
            maxb = c->batch_sizes[i];
    s->logits = malloc((size_t)maxb * (size_t)(r->num_labels > 0 ? r->num_labels : 1) * sizeof *s->logits);
    if (!s->logits)
        return lp_err(LP_STATUS_NO_MEMORY, "bench: out of memory for logits");
    lp_batch_init(&s->batch);
    return LP_OK;
}

void lp_bench__unload(lp_bench_state *s)
{
    lp_batch_free(&s->batch);
    free(s->logits);
    free(s->pool);
    free(s->order);
    lp_encoded_dataset_free(&s->enc);
    lp_tokenizer_free(s->tok);
    lp_dataset_free(&s->ds);
    lp_model_free(s->model);
}
