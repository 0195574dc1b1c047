/* Load-time checks of what would otherwise fail later and far from its cause: sizes that
 * overflow for a batch, and NaN or Inf weights in the checkpoint (which surfaced only as
 * "loss is NaN"). Kept apart from the family builders so that each family (and the
 * trainer) calls one place. */
#include <math.h>

#include "models_internal.h"

/* A generous bound on the floats a (B,T) batch's activation, dropout-mask and scratch blocks
 * take: every layer's attention scores (A,T,T) a row, sixteen (N,H), four (N,I) and eight
 * (N,r) LoRA tensors a layer, over the layers plus the embeddings and head, and two (N,V)
 * for logits and their gradient (a causal LM holds one chunk of rows of them, lm_loss.c, so
 * the bound is generous there). The exact sizes
 * (need() in model.c and the nn modules) stay below it, so when it is representable they
 * are too. */
bool lp_model__batch_sizes_ok(const lp_model *m, int64_t B, int64_t T)
{
    const lp_model_config *c = &m->cfg;
    bool ovf = false;
    int64_t N = lp_size_mul(&ovf, B, T);
    int64_t scores = lp_size_mul(&ovf, lp_size_mul(&ovf, 4 * c->num_heads, B), lp_size_mul(&ovf, T, T));
    int64_t width =
        lp_size_add(&ovf, lp_size_mul(&ovf, 16, c->hidden_size), lp_size_mul(&ovf, 4, c->intermediate_size));
    width = lp_size_add(&ovf, width, lp_size_mul(&ovf, 8, m->opt.lora.enabled ? m->opt.lora.rank : 0));
    width = lp_size_add(&ovf, width, lp_size_mul(&ovf, 2, m->n_classes)); // a causal LM's logits and their gradient
    int64_t layer = lp_size_add(&ovf, scores, lp_size_mul(&ovf, N, lp_size_add(&ovf, width, 64)));
    int64_t all = lp_size_mul(&ovf, layer, lp_size_add(&ovf, m->L, 2));
    return !ovf && all <= ((int64_t)1 << 59); /* x 4 bytes, x 2 blocks, still in int64 */
}

/* Non-finite values among w[0..n), counted into *count; the first's index (+ base) in *at. */
static void count_bad(const float *w, int64_t n, int64_t base, int64_t *count, int64_t *at)
{
    for (int64_t k = 0; k < n; k++)
        if (!isfinite(w[k]) && (*count)++ == 0)
            *at = base + k;
}

/* A lazy table (lazy_rows.c) reads 0 until its rows are used: its source is checked instead,
 * converted a slab of rows at a time as the eager load would have converted it. */
static lp_status count_bad_source(const lp_st_tensor *t, int64_t rows, int64_t cols, int64_t *count, int64_t *at)
{
    enum { SLAB = 64 };
    float *tmp = lp_alloc((size_t)(SLAB * cols) * sizeof(float), LP_MEM_CATEGORY_TEMPORARY, "embedding check");
    if (!tmp)
        return LP_STATUS_NO_MEMORY;
    const size_t esz = lp_st_dtype_size(t->dtype);
    for (int64_t r0 = 0; r0 < rows; r0 += SLAB) {
        const int64_t n = (rows - r0 < SLAB ? rows - r0 : SLAB) * cols;
        lp_model__convert_n(tmp, (const uint8_t *)t->data + (size_t)(r0 * cols) * esz, t->dtype, n);
        count_bad(tmp, n, r0 * cols, count, at);
    }
    lp_free(tmp);
    return LP_OK;
}

lp_status lp_model__check_finite(const lp_model *m)
{
    size_t bad_tensors = 0, first = 0;
    int64_t first_count = 0, first_at = -1;
    for (size_t i = 0; i < m->n_params; i++) {
        const lp_st_tensor *src = m->slots[i].src;
        const lp_model_param *p = &m->params[i];
        if (!src || !p->data)
            continue;
        int64_t count = 0, at = -1;
        if (!m->slots[i].lazy)
            count_bad(p->data, p->numel, 0, &count, &at);
        else if (count_bad_source(src, p->shape[0], p->shape[1], &count, &at) != LP_OK)
            return LP_STATUS_NO_MEMORY;
        if (count && bad_tensors++ == 0) {
            first = i;
            first_count = count;
            first_at = at;
        }
    }
    if (!bad_tensors)
        return LP_OK;
    const lp_st_tensor *src = m->slots[first].src;
    return lp_err(
        LP_STATUS_NUMERIC,
        "%s: tensor '%s' holds %lld non-finite values (NaN or Inf; the first at flat index %lld); %zu "
        "tensor%s affected",
        src->file, src->name, (long long)first_count, (long long)first_at, bad_tensors,
        bad_tensors == 1 ? "" : "s");
}
