/* Merging LoRA adapters into their f32 base weights at load (PEFT's merge_and_unload):
 * W += scale * B @ A, then the Linear runs as a plain one, so generation pays for one GEMV
 * per weight instead of the base plus the adapter's two thin ones. */
#include <stdlib.h>
#include <string.h>

#include "models_internal.h"

lp_status lp_model_merge_adapters(lp_model *m)
{
    for (size_t i = 0; i < m->n_adapters; i++) {
        lp_model_linear *ml = m->adapters[i].ml;
        if (ml->q)
            return lp_err(LP_STATUS_UNSUPPORTED,
                          "%s: cannot merge the adapter of %s into a quantized base (load the base in f32)", m->dir,
                          ml->module);
    }
    for (size_t i = 0; i < m->n_adapters; i++) {
        lp_model_linear *ml = m->adapters[i].ml;
        if (!ml->lin->lora)
            continue; // merged already
        float *buf = NULL;
        const float *w = lp_model__linear_weight(m, ml, &buf);
        if (!w)
            return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory merging %s", m->dir, ml->module);
        if (w != ml->lin->w)
            memcpy(ml->lin->w, w, (size_t)(ml->lin->out * ml->lin->in) * sizeof(float));
        free(buf);
        ml->lin->lora = NULL;
    }
    return LP_OK;
}
