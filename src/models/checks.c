/* Load-time checks of what would otherwise fail later and far from its cause: sizes that
 * overflow for a batch. Kept apart from the family builders so that each family (and the
 * trainer) calls one place. */
#include "models_internal.h"

/* A generous bound on the floats a (B,T) batch's activation, dropout-mask and scratch blocks
 * take: every layer's attention scores (A,T,T) a row, sixteen (N,H), four (N,I) and eight
 * (N,r) LoRA tensors a layer, over the layers plus the embeddings and head. The exact sizes (need() in model.c and
 * the nn modules) stay below it, so when it is representable they are too. */
bool lp_model__batch_sizes_ok(const lp_model *m, int64_t B, int64_t T)
{
    const lp_model_config *c = &m->cfg;
    bool ovf = false;
    int64_t N = lp_size_mul(&ovf, B, T);
    int64_t scores = lp_size_mul(&ovf, lp_size_mul(&ovf, 4 * c->num_heads, B), lp_size_mul(&ovf, T, T));
    int64_t width = lp_size_add(&ovf, lp_size_mul(&ovf, 16, c->hidden_size), lp_size_mul(&ovf, 4, c->intermediate_size));
    width = lp_size_add(&ovf, width, lp_size_mul(&ovf, 8, m->opt.lora.enabled ? m->opt.lora.rank : 0));
    int64_t layer = lp_size_add(&ovf, scores, lp_size_mul(&ovf, N, lp_size_add(&ovf, width, 64)));
    int64_t all = lp_size_mul(&ovf, layer, lp_size_add(&ovf, m->L, 2));
    return !ovf && all <= ((int64_t)1 << 59); /* x 4 bytes, x 2 blocks, still in int64 */
}
