/* --dtype bf16 with full fine-tuning (lp_model_options.compute = LP_DTYPE_BF16, no LoRA):
 * each trainable layer Linear keeps its f32 master weight (what AdamW updates) and gets a
 * bf16 copy packed for the bf16 GEMMs (both orientations, lp_qweight_pack_bf16_train) that
 * its forward and backward read. The copy is rounded again once per optimizer step: the
 * trainer calls lp_model_weights_changed after writing the weights and the next forward
 * repacks. On a device the copy lives there, in its layout (lp_kernels_qweight_bf16_train),
 * made once the weights are uploaded. (With LoRA the base is frozen: peft_setup.c packs it
 * once as a bf16 base and drops the f32 copy.) */
#include <stdint.h>
#include <stdlib.h>

#include "models_internal.h"

/* Whether ml gets a bf16 copy: an f32 layer Linear the optimizer trains. */
static bool cached(const lp_model *m, const lp_model_linear *ml)
{
    return m->opt.compute == LP_DTYPE_BF16 && !m->lora.enabled && !ml->quantized && ml->wparam != SIZE_MAX;
}

uint64_t lp_model__bf16_cache_nbytes(const lp_model *m, const lp_model_linear *ml)
{
    return cached(m, ml) ? lp_qweight_bf16_train_plan_nbytes(ml->lin->out, ml->lin->in) : 0;
}

lp_status lp_model__bf16_setup(lp_model *m)
{
    if (lp_kernels_device() != LP_DEVICE_CPU && !m->dev)
        return LP_OK; /* packed by lp_model__to_device, in the device's layout, once the weights are there */
    for (size_t i = 0; i < m->n_lins; i++) {
        lp_model_linear *ml = &m->lins[i];
        if (!cached(m, ml))
            continue;
        if (!(ml->bf16 = lp_calloc(1, sizeof *ml->bf16)))
            return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory for the bf16 copy of %s", m->dir,
                          ml->module);
        lp_status st =
            lp_kernels_qweight_bf16_train(ml->bf16, ml->lin->w, ml->lin->out, ml->lin->in, ml->module);
        if (st != LP_OK)
            return lp_err_wrap(st, "%s: packing %s.weight as bf16", m->dir, ml->module);
        ml->lin->bf16 = ml->bf16;
    }
    m->bf16_stale = false;
    return LP_OK;
}

void lp_model__bf16_refresh(lp_model *m)
{
    if (!m->bf16_stale)
        return;
    for (size_t i = 0; i < m->n_lins; i++)
        if (m->lins[i].bf16)
            lp_qweight_repack_bf16(m->lins[i].bf16, m->lins[i].lin->w);
    m->bf16_stale = false;
}

void lp_model__bf16_free(lp_model *m)
{
    for (size_t i = 0; m->lins && i < m->n_lins; i++)
        if (m->lins[i].bf16) {
            lp_kernels_qweight_free(m->lins[i].bf16);
            free(m->lins[i].bf16);
            m->lins[i].bf16 = NULL;
            m->lins[i].lin->bf16 = NULL;
        }
}

void lp_model_weights_changed(lp_model *m)
{
    m->bf16_stale = true;
}

lp_dtype lp_model_compute_dtype(const lp_model *m)
{
    return m->opt.compute == LP_DTYPE_BF16 ? LP_DTYPE_BF16 : LP_DTYPE_F32;
}
