/* The device the lp_* wrappers run on (kernels.h, lp_kernels_use_device): the CPU, or the
 * CUDA backend, whose op table the wrappers then call and whose memory the helpers here
 * manage. On the CPU every helper is the plain host operation (lp_alloc, memcpy, memset), so
 * code written through them runs exactly as it did before. */
#include <stdlib.h>
#include <string.h>

#include "../attn_gemm.h"
#include "../backend.h"
#include "../cuda/cuda_alloc.h"
#include "cpu_kernels.h"

/* The device backend in use, NULL on the CPU; set between runs (the CLI, a test). */
static const lp_backend *dev;

const char *lp_device_name(lp_device d)
{
    return d == LP_DEVICE_CUDA ? "cuda" : d == LP_DEVICE_CPU ? "cpu" : "?";
}

lp_status lp_device_parse(const char *s, lp_device *out)
{
    if (s && !strcmp(s, "cpu"))
        *out = LP_DEVICE_CPU;
    else if (s && !strcmp(s, "cuda"))
        *out = LP_DEVICE_CUDA;
    else
        return lp_err(LP_STATUS_INVALID_ARG, "unknown device '%s' (expected cpu or cuda)", s ? s : "(null)");
    return LP_OK;
}

/* LP_FAKE_DEVICE=1 (tests only): "cuda" is a stand-in in host memory whose op table is the
 * CPU's with the entries the CUDA table lacks left NULL, so the engine's device path (the
 * model's device blocks, uploads, downloads, host views, the compositions for missing ops)
 * runs and is checked against the CPU on a machine without a GPU. Its buffers are separate
 * from the host's, so a missed upload or download shows as a wrong result; a host touch of
 * device memory does not (that needs the real GPU). */
static lp_kernel_table fake_table;
static lp_backend fake_backend;
/* The stand-in's attention chooses as the CUDA table's does (backend.h, lp_cuda_attn_mode:
 * LP_CUDA_ATTN, TF32, the size limit) between the CPU's fused kernels and attention as
 * GEMMs over the CPU's steps (../attn_gemm.h, f32 GEMMs: the CPU has no TF32), so the
 * engine runs the GEMM composition end to end (LP_CUDA_ATTN=gemm, or --tf32) without a GPU. */
static lp_cuda_attn_mode fake_attn_mode;
static bool fake_tf32;

static bool fake_attn_gemm(const lp_attn_geom *g)
{
    return lp_cuda_attn_gemm_chosen(fake_attn_mode, fake_tf32, g);
}

static void fake_attention_forward(float *out, float *lse, const float *q, const float *k, const float *v,
                                   const int32_t *mask, const lp_attn_geom *g, const lp_attn_dropout *drop)
{
    const lp_attn_gemm_ops o = lp_attn_gemm_ops_cpu(lp_kernels_table(LP_KERNELS_IMPL_OPT));
    if (!fake_attn_gemm(g) || lp_attn_gemm_forward(&o, out, lse, q, k, v, mask, g, drop) != LP_OK)
        lp_kernels_table(LP_KERNELS_IMPL_OPT)->attention_fused_forward(out, lse, q, k, v, mask, g, drop);
}

static void fake_attention_backward(float *dq, float *dk, float *dv, const float *dout, const float *out,
                                    const float *lse, const float *q, const float *k, const float *v,
                                    const int32_t *mask, const lp_attn_geom *g, const lp_attn_dropout *drop)
{
    const lp_attn_gemm_ops o = lp_attn_gemm_ops_cpu(lp_kernels_table(LP_KERNELS_IMPL_OPT));
    if (!fake_attn_gemm(g) || lp_attn_gemm_backward(&o, dq, dk, dv, dout, out, lse, q, k, v, mask, g, drop) != LP_OK)
        lp_kernels_table(LP_KERNELS_IMPL_OPT)->attention_fused_backward(dq, dk, dv, dout, out, lse, q, k, v, mask, g,
                                                                         drop);
}

/* host memory: the CPU backend's functions (lp_alloc, memmove, memset), also the stand-in's */
/* Whether the wrappers run on the CUDA backend itself (not the CPU, not the stand-in). */
static bool on_cuda(void)
{
    return dev && dev != &fake_backend;
}

static const lp_backend *host(void)
{
    return lp_backend_cpu(LP_ISA_BASELINE);
}

static const lp_backend *fake_device(void)
{
    const char *e = getenv("LP_FAKE_DEVICE");
    if (!e || strcmp(e, "1"))
        return NULL;
    fake_table = *lp_kernels_table(LP_KERNELS_IMPL_OPT);
    fake_table.name = "cuda";
    if (lp_cuda_attn_mode_env(&fake_attn_mode) != LP_OK) /* the stand-in keeps auto for another value */
        fake_attn_mode = LP_CUDA_ATTN_AUTO;
    fake_table.attention_fused_forward = fake_attention_forward;
    fake_table.attention_fused_backward = fake_attention_backward;
    /* what src/kernels/cuda/cuda_backend.c's table leaves NULL */
    fake_table.attention_eager_forward = NULL;
    fake_table.attention_eager_backward = NULL;
    fake_table.qmatmul_forward = NULL;
    fake_table.qmatmul_backward = NULL;
    fake_table.lora_forward = NULL;
    fake_table.lora_backward = NULL;
    fake_table.kv_write = NULL;
    fake_table.attention_decode = NULL;
    fake_table.f32_matmul_forward = NULL;
    fake_table.f32_matmul_backward = NULL;
    fake_backend = *host(); /* host memory, separate buffers: the CPU backend's */
    fake_backend.name = "cuda";
    fake_backend.level = "fake";
    fake_backend.ops = &fake_table;
    return &fake_backend;
}

lp_status lp_kernels_use_device(lp_device d)
{
    if (d == LP_DEVICE_CPU) {
        dev = NULL;
        lp_kernels__set_active(NULL); /* lp_kernels_init's choice again */
        return lp_kernels_init();
    }
    const lp_backend *b = fake_device();
    if (b) {
        dev = b;
        lp_kernels__set_active(b->ops);
        return LP_OK;
    }
    lp_status st = lp_backend_cuda(&b);
    if (st != LP_OK)
        return st;
    dev = b;
    lp_kernels__set_active(b->ops);
    return LP_OK;
}

lp_device lp_kernels_device(void)
{
    return dev ? LP_DEVICE_CUDA : LP_DEVICE_CPU;
}

const char *lp_kernels_device_label(void)
{
    if (dev == &fake_backend)
        return "fake (LP_FAKE_DEVICE=1)";
    const lp_cuda_device_info *i = dev ? lp_cuda_device_info_get(dev) : NULL;
    return i ? i->name : NULL;
}

void *lp_kernels_dev_alloc(size_t bytes, lp_mem_category cat, const char *what)
{
    if (!dev)
        return lp_alloc(bytes, cat, what); /* zero-filled */
    void *p = dev->alloc_tagged(dev->ctx, bytes, cat, what);
    if (p && dev->memset(dev->ctx, p, 0, bytes) != LP_OK) { /* lp_alloc's promise, kept on the device */
        dev->free(dev->ctx, p);
        return NULL;
    }
    return p;
}

void *lp_kernels_dev_scratch(size_t bytes, lp_mem_category cat, const char *what)
{
    return dev ? dev->alloc_tagged(dev->ctx, bytes, cat, what) : lp_alloc(bytes, cat, what);
}

void lp_kernels_dev_free(void *p)
{
    if (!dev)
        lp_free(p);
    else if (p)
        dev->free(dev->ctx, p);
}

lp_status lp_kernels_upload(void *dst, const void *src, size_t bytes)
{
    return (dev ? dev : host())->upload(dev ? dev->ctx : NULL, dst, src, bytes);
}

lp_status lp_kernels_download(void *dst, const void *src, size_t bytes)
{
    if (!dev)
        return host()->download(NULL, dst, src, bytes);
    lp_status st = dev->download(dev->ctx, dst, src, bytes);
    lp_status s2 = dev->sync(dev->ctx); /* the errors the queued ops kept */
    return st != LP_OK ? st : s2;
}

void lp_kernels_copy(void *dst, const void *src, size_t bytes)
{
    if (bytes && dst != src) /* on a device a failure is kept for the next sync */
        (void)(dev ? dev : host())->copy(dev ? dev->ctx : NULL, dst, src, bytes);
}

void lp_kernels_copy_rows(void *dst, size_t dst_stride, const void *src, size_t src_stride, size_t row_bytes,
                          size_t rows)
{
    if (rows && row_bytes) /* on a device a failure is kept for the next sync */
        (void)(dev ? dev : host())
            ->copy_rows(dev ? dev->ctx : NULL, dst, dst_stride, src, src_stride, row_bytes, rows);
}

void lp_kernels_memset(void *dst, int value, size_t bytes)
{
    if (!dev)
        memset(dst, value, bytes);
    else if (bytes)
        (void)dev->memset(dev->ctx, dst, value, bytes); /* kept for the next sync */
}

/* A bf16 copy of w in the active device's layout, its memory of category cat. */
static lp_status bf16_train_as(lp_qweight *q, const float *w, int64_t rows, int64_t cols, const char *name,
                               lp_mem_category cat)
{
    if (on_cuda()) /* the stand-in keeps the CPU's panels, in its host memory */
        return lp_cuda_qweight_bf16_train(dev, q, w, rows, cols, name, cat);
    return lp_k_qweight_pack_bf16_train_as(q, w, rows, cols, name, cat);
}

lp_status lp_kernels_qweight_bf16_train(lp_qweight *q, const float *w, int64_t rows, int64_t cols,
                                        const char *name)
{
    return bf16_train_as(q, w, rows, cols, name, LP_MEM_CATEGORY_QUANTIZED_WEIGHT);
}

lp_status lp_kernels_qweight_bf16_of(lp_qweight *q, const lp_qweight *w, const char *name)
{
    memset(q, 0, sizeof *q);
    if (!w || (w->dtype != LP_DTYPE_NF4 && w->dtype != LP_DTYPE_INT8))
        return lp_err(LP_STATUS_INVALID_ARG, "bf16 copy of %s: not an NF4 or int8 weight",
                      name ? name : "a weight");
    float *f =
        lp_kernels_dev_scratch((size_t)w->n * sizeof(float), LP_MEM_CATEGORY_TEMPORARY, "dequantized base");
    if (!f)
        return lp_err_wrap(LP_STATUS_NO_MEMORY, "bf16 copy of %s: the dequantized weight",
                           name ? name : "a weight");
    lp_qweight_dequantize(f, w, 0, w->n);
    lp_status st = bf16_train_as(q, f, w->rows, w->cols, name, LP_MEM_CATEGORY_TEMPORARY);
    lp_kernels_dev_free(f);
    return st;
}

lp_status lp_kernels_qweight_upload(const lp_qweight *h, lp_qweight *d, const char *name)
{
    if (on_cuda())
        return lp_cuda_qweight_upload(dev, h, d, name);
    memset(d, 0, sizeof *d); /* the CPU, or the stand-in whose memory is the host's: h serves */
    return LP_OK;
}

void lp_kernels_qweight_free(lp_qweight *q)
{
    if (on_cuda())
        lp_cuda_qweight_free(dev, q);
    else
        lp_qweight_free(q);
}

lp_status lp_kernels_sync(void)
{
    return dev ? dev->sync(dev->ctx) : LP_OK;
}

void lp_kernels_set_tf32(bool on)
{
    if (dev == &fake_backend)
        fake_tf32 = on; /* its attention's choice only */
    else if (dev)
        lp_cuda_set_tf32(dev, on);
}

void lp_kernels_device_mem(lp_mem_category cat, lp_device_mem *out)
{
    memset(out, 0, sizeof *out);
    if (!on_cuda() || (unsigned)cat >= LP_MEM_CATEGORY__COUNT)
        return;
    lp_cu_alloc_stats s;
    lp_cuda_alloc_stats(dev, &s);
    *out = (lp_device_mem){s.allocated[cat], s.allocated_peak[cat], s.reserved[cat], s.reserved_peak[cat]};
}

void lp_kernels_device_mem_total(lp_device_mem *out)
{
    memset(out, 0, sizeof *out);
    if (!on_cuda())
        return;
    lp_cu_alloc_stats s;
    lp_cuda_alloc_stats(dev, &s);
    *out =
        (lp_device_mem){s.allocated_total, s.allocated_total_peak, s.reserved_total, s.reserved_total_peak};
}
