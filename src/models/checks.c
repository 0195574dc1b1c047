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

lp_status lp_model__check_finite(const lp_model *m)
{
    size_t bad_tensors = 0, first = 0;
    int64_t first_count = 0, first_at = -1;
    for (size_t i = 0; i < m->n_params; i++) {
        const lp_st_tensor *src = m->slots[i].src;
        const float *w = m->params[i].data;
        if (!src || !w || m->slots[i].lazy) /* a lazy table was checked as it loaded */
            continue;
        int64_t count = 0, at = -1;
        for (int64_t k = 0; k < m->params[i].numel; k++)
            if (!isfinite(w[k]) && count++ == 0)
                at = k;
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
