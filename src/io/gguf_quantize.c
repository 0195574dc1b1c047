/* `loupe quantize`'s work: a GGUF model re-encoded as Q8_0, Q4_0 or F32. Every tensor goes
 * through f32 (the exact dequantization) and, when it is a matrix of whole 32-blocks,
 * through ggml's reference quantizer (lp_ggml_quantize, bit-identical with the `gguf`
 * package's); vectors (norms) stay F32, as llama.cpp's quantizer keeps them. Names,
 * shapes and row order stay as stored (llama.cpp's permuted q/k rows included), so the
 * file reads in llama.cpp exactly as the source did. */
#include <stdlib.h>
#include <string.h>

#include "io_internal.h"
#include "loupe/kernels.h"

/* llama.cpp's llama_ftype for a file mostly of this type (general.file_type). */
static uint32_t ftype_of(uint32_t type)
{
    /* LLAMA_FTYPE_ALL_F32, _MOSTLY_Q8_0, _MOSTLY_Q4_0 */
    return type == LP_GGML_TYPE_F32 ? 0u : type == LP_GGML_TYPE_Q8_0 ? 7u : 2u;
}

static lp_status add_tensor(lp_gguf_writer *w, const lp_gguf_tensor *t, uint32_t type, const char *path)
{
    const lp_ggml_type_traits *tt = lp_ggml_type_traits_get(t->type);
    if (!tt || !tt->dequantizable)
        return lp_err(LP_STATUS_UNSUPPORTED, "%s: tensor '%s' is %s, which loupe cannot re-encode", path, t->name,
                      tt ? tt->name : "?");
    float *f = lp_malloc((size_t)t->numel * sizeof *f);
    if (!f)
        return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory for tensor '%s'", path, t->name);
    lp_ggml_dequantize((lp_ggml_type)t->type, t->data, f, (int64_t)t->numel);
    lp_status st;
    if (type != LP_GGML_TYPE_F32 && t->ndim == 2 && t->ne[0] % 32 == 0) {
        const uint64_t nbytes = t->numel / 32 * (uint64_t)lp_ggml_type_traits_get(type)->bytes;
        uint8_t *q = lp_malloc((size_t)nbytes);
        if (!q) {
            free(f);
            return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory for tensor '%s'", path, t->name);
        }
        lp_ggml_quantize((lp_ggml_type)type, f, q, (int64_t)t->numel);
        st = lp_gguf_writer_add_tensor(w, t->name, t->ndim, t->ne, type, q, nbytes);
        free(q);
    } else {
        st = lp_gguf_writer_add_tensor(w, t->name, t->ndim, t->ne, LP_GGML_TYPE_F32, f, t->numel * 4);
    }
    free(f);
    return st;
}

lp_status lp_gguf_quantize_file(const char *src, const char *out, uint32_t type)
{
    if (type != LP_GGML_TYPE_Q8_0 && type != LP_GGML_TYPE_Q4_0 && type != LP_GGML_TYPE_F32)
        return lp_err(LP_STATUS_UNSUPPORTED, "%s: loupe quantize writes f32, q8_0 or q4_0", out);
    lp_gguf_file *g = NULL;
    lp_status st = lp_gguf_open(src, &g);
    if (st != LP_OK)
        return st;
    int64_t align = 32;
    if (lp_gguf_get(g, "general.alignment") && (st = lp_gguf_get_int(g, "general.alignment", &align)) != LP_OK)
        goto done;
    lp_gguf_writer *w = NULL;
    if ((st = lp_gguf_writer_init(&w, out, (uint32_t)align)) != LP_OK)
        goto done;
    bool have_ftype = false;
    for (size_t i = 0; st == LP_OK && i < lp_gguf_kv_count(g); i++) {
        const lp_gguf_kv *kv = lp_gguf_kv_at(g, i);
        if (!strcmp(kv->key, "general.file_type")) {
            have_ftype = true;
            st = lp_gguf_writer_add_u32(w, kv->key, ftype_of(type));
        } else {
            st = lp_gguf_writer_add_kv(w, kv->key, &kv->v);
        }
    }
    if (st == LP_OK && !have_ftype)
        st = lp_gguf_writer_add_u32(w, "general.file_type", ftype_of(type));
    for (size_t i = 0; st == LP_OK && i < lp_gguf_tensor_count(g); i++)
        st = add_tensor(w, lp_gguf_tensor_at(g, i), type, src);
    if (st == LP_OK)
        st = lp_gguf_writer_finish(w);
    lp_gguf_writer_free(w);
done:
    lp_gguf_close(g);
    return st;
}
