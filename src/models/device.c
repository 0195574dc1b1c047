/* A model on a device (lp_kernels_use_device before lp_model_load): the parameter block is
 * uploaded once after load and the parameter table and modules point into the device copy;
 * gradients, activations, scratch and the batch live in device blocks of the same memory
 * categories (so the device allocator's per-category figures are the memory plan). The host
 * parameter block stays, as the staging copy lp_model_host_params downloads into for saving. */
#include <stdlib.h>
#include <string.h>

#include "models_internal.h"

void *lp_model__blk_alloc(const lp_model *m, size_t bytes, lp_mem_category cat, const char *what)
{
    return m->dev ? lp_kernels_dev_alloc(bytes, cat, what) : lp_alloc(bytes, cat, what);
}

void lp_model__blk_free(const lp_model *m, void *p)
{
    if (m->dev)
        lp_kernels_dev_free(p);
    else
        lp_free(p);
}

/* What a device run does not do yet: said up front, naming the option. */
static lp_status refuse(const lp_model *m)
{
    const char *dev = lp_device_name(lp_kernels_device());
    if (m->exec != LP_EXEC_MODE_FUSED)
        return lp_err(LP_STATUS_UNSUPPORTED, "%s: --device %s has no eager attention: use --exec fused",
                      m->dir, dev);
    if (m->opt.compute == LP_DTYPE_BF16 && !lp_kernels_active()->bf16_matmul_forward)
        return lp_err(LP_STATUS_UNSUPPORTED, "%s: --device %s has no bf16 GEMMs (no --dtype bf16)", m->dir,
                      dev);
    if (m->opt.weights != LP_WEIGHT_FORMAT_F32)
        return lp_err(LP_STATUS_UNSUPPORTED, "%s: --device %s runs f32 weights only (no --quantize %s)",
                      m->dir, dev, lp_weight_format_name(m->opt.weights));
    for (size_t i = 0; i < m->n_lins; i++) {
        const lp_qweight *q = m->lins[i].q;
        if (m->lins[i].lin->qbase != q ||
            (q && q->dtype != LP_DTYPE_NF4 && q->dtype != LP_DTYPE_INT8 && q->dtype != LP_DTYPE_BF16))
            return lp_err(LP_STATUS_UNSUPPORTED,
                          "%s: --device %s takes f32, NF4, int8 or bf16 LoRA bases only (%s is %s)", m->dir,
                          dev, m->lins[i].module, lp_dtype_name(q ? q->dtype : LP_DTYPE_F32));
    }
    return LP_OK;
}

/* ml's frozen LoRA base on the device, where lin->qbase then points: NF4 / int8 copied as they
 * are; bf16 made again in the device's bf16 layout from its exact f32 values (the host copy
 * is in the CPU GEMM's panels). The stand-in device reads an NF4 / int8 host copy as it is. */
static lp_status base_to_device(lp_model *m, lp_model_linear *ml)
{
    const lp_qweight *q = ml->q;
    if (!(ml->qdev = lp_calloc(1, sizeof *ml->qdev)))
        return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", m->dir);
    lp_status st = LP_OK;
    if (q->dtype != LP_DTYPE_BF16) {
        st = lp_kernels_qweight_upload(q, ml->qdev, ml->module);
    } else {
        const size_t bytes = (size_t)q->n * sizeof(float);
        float *h = lp_malloc(bytes),
              *d = lp_kernels_dev_scratch(bytes, LP_MEM_CATEGORY_TEMPORARY, "bf16 base");
        if (!h || !d) {
            st = lp_err(LP_STATUS_NO_MEMORY, "%s: %s as f32", m->dir, ml->module);
        } else { // read on the host, with the CPU's own kernel
            lp_kernels_table(LP_KERNELS_IMPL_OPT)->qweight_dequantize(h, q, 0, q->n);
            if ((st = lp_kernels_upload(d, h, bytes)) == LP_OK)
                st = lp_kernels_qweight_bf16_train(ml->qdev, d, q->rows, q->cols, ml->module);
        }
        free(h);
        lp_kernels_dev_free(d);
    }
    if (st != LP_OK)
        return lp_err_wrap(st, "%s: the base %s on the device", m->dir, ml->module);
    if (ml->qdev->mem) {
        ml->lin->qbase = ml->qdev;
    } else {
        free(ml->qdev);
        ml->qdev = NULL;
    }
    return LP_OK;
}

/* Points parameter i (table and module) at base + its offset. */
static void point_params(lp_model *m, float *base)
{
    for (size_t i = 0; i < m->n_params; i++) {
        m->params[i].data = base + m->slots[i].offset;
        *m->slots[i].w = m->params[i].data;
    }
}

lp_status lp_model__to_device(lp_model *m)
{
    lp_status st = refuse(m);
    if (st != LP_OK)
        return st;
    const size_t pbytes = (size_t)m->n_floats * sizeof(float);
    m->dev = true;
    if (!(m->param_dev = lp_kernels_dev_alloc(pbytes, LP_MEM_CATEGORY_PARAMETER, "model parameters")))
        return lp_err_wrap(LP_STATUS_NO_MEMORY, "%s: %lld parameters on the device", m->dir,
                           (long long)m->n_floats);
    if (!(m->loss_dev = lp_kernels_dev_alloc(64, LP_MEM_CATEGORY_OTHER, "model loss")))
        return lp_err_wrap(LP_STATUS_NO_MEMORY, "%s: the loss on the device", m->dir);
    if ((st = lp_kernels_upload(m->param_dev, m->param_block, pbytes)) != LP_OK)
        return lp_err_wrap(st, "%s: uploading the parameters", m->dir);
    point_params(m, m->param_dev);
    // --dtype bf16: the Linears' copies, made from the device's weights
    if ((st = lp_model__bf16_setup(m)) != LP_OK)
        return st;
    // LoRA: the frozen NF4 / int8 / bf16 bases (the host copies stay, for merging and saving)
    for (size_t i = 0; i < m->n_lins; i++)
        if (m->lins[i].q && (st = base_to_device(m, &m->lins[i])) != LP_OK)
            return st;
    // the gradient block again, on the device (lp_model__layout_grads allocates through
    // lp_model__blk_alloc now); what was accumulated on the host (nothing after a load) is lost
    for (size_t i = 0; i < m->n_params; i++)
        m->slots[i].goff = -1;
    lp_free(m->grad_block);
    m->grad_block = NULL;
    m->n_grad_floats = 0;
    if ((st = lp_model__layout_grads(m)) != LP_OK)
        return st;
    // blocks sized before the move (max_batch) are host blocks: sized again on the device
    lp_free(m->act_block), lp_free(m->act_u8), lp_free(m->tmp_block), lp_free(m->in_block);
    m->act_block = m->tmp_block = NULL, m->act_u8 = NULL, m->in_block = NULL;
    m->act_cap_floats = m->act_cap_u8 = m->tmp_cap = m->in_cap = 0;
    lp_free(m->lora_act), lp_free(m->lora_u8);
    m->lora_act = NULL, m->lora_u8 = NULL;
    m->lora_act_cap = m->lora_u8_cap = 0;
    return lp_kernels_sync();
}

void lp_model__device_free(lp_model *m)
{
    if (!m->dev)
        return;
    // (called last in lp_model_free: the modules the table points into are gone, so nothing is
    // pointed back; param_dev is ours whichever copy the table saw last)
    lp_kernels_dev_free(m->param_dev);
    lp_kernels_dev_free(m->loss_dev);
    lp_free(m->in_host);
    m->param_dev = NULL, m->loss_dev = NULL, m->in_host = NULL;
}

lp_status lp_model__cross_entropy(lp_model *m, float *loss, float *lse, const float *logits,
                                  const int32_t *labels, int64_t n)
{
    if (!m->dev)
        return lp_cross_entropy_forward(loss, lse, logits, labels, n, m->n_classes, -100);
    lp_status st = lp_cross_entropy_forward(m->loss_dev, lse, logits, labels, n, m->n_classes, -100);
    return st == LP_OK ? lp_kernels_download(loss, m->loss_dev, sizeof *loss) : st;
}

lp_status lp_model_host_params(lp_model *m, bool host)
{
    if (!m->dev || host == m->host_view)
        return LP_OK;
    if (host) {
        lp_status st = lp_kernels_download(m->param_block, m->param_dev, (size_t)m->n_floats * sizeof(float));
        if (st != LP_OK)
            return lp_err_wrap(st, "%s: downloading the parameters", m->dir);
    }
    point_params(m, host ? m->param_block : m->param_dev);
    m->host_view = host;
    return LP_OK;
}

bool lp_model_on_device(const lp_model *m)
{
    return m->dev;
}
