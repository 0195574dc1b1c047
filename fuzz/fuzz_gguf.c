/* libFuzzer target: the GGUF reader over arbitrary bytes (lp_gguf_parse_buffer). Every
 * accepted file's metadata is walked (strings, array elements, nested arrays) and every
 * tensor's bytes are read and, for the types loupe dequantizes, dequantized (small ones),
 * so ASan catches any view that escapes the buffer. The config.json and tokenizer.json
 * builders run over every accepted file too (their output must parse as JSON). Every
 * accepted file small enough also goes through the GGUF writer (every key-value and tensor
 * copied) and must read back with the same keys, value types, tensor shapes and bytes. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "loupe/io.h"
#include "loupe/kernels.h"

static volatile uint8_t sink;

/* Writes g again with lp_gguf_writer and checks the copy reads back the same. */
static void roundtrip(const lp_gguf_file *g)
{
    int64_t align = 32;
    if (lp_gguf_get(g, "general.alignment") && lp_gguf_get_int(g, "general.alignment", &align) != LP_OK)
        return;
    char path[64];
    snprintf(path, sizeof path, "/tmp/fuzz_gguf_rt_%d.gguf", (int)getpid());
    lp_gguf_writer *w = NULL;
    if (align <= 0 || align > (1 << 20) || lp_gguf_writer_init(&w, path, (uint32_t)align) != LP_OK)
        return; /* an alignment the writer refuses (not a multiple of 8) */
    lp_status st = LP_OK;
    for (size_t i = 0; st == LP_OK && i < lp_gguf_kv_count(g); i++)
        st = lp_gguf_writer_add_kv(w, lp_gguf_kv_at(g, i)->key, &lp_gguf_kv_at(g, i)->v);
    for (size_t i = 0; st == LP_OK && i < lp_gguf_tensor_count(g); i++) {
        const lp_gguf_tensor *t = lp_gguf_tensor_at(g, i);
        st = lp_gguf_writer_add_tensor(w, t->name, t->ndim, t->ne, t->type, t->data, t->nbytes);
    }
    if (st == LP_OK)
        st = lp_gguf_writer_finish(w);
    lp_gguf_writer_free(w);
    if (st != LP_OK)
        return; /* e.g. a tensor whose rows are not whole blocks: the writer refuses it */
    lp_gguf_file *h = NULL;
    if (lp_gguf_open(path, &h) != LP_OK)
        abort(); /* what the writer wrote must read */
    if (lp_gguf_kv_count(h) != lp_gguf_kv_count(g) || lp_gguf_tensor_count(h) != lp_gguf_tensor_count(g))
        abort();
    for (size_t i = 0; i < lp_gguf_kv_count(g); i++) {
        const lp_gguf_kv *a = lp_gguf_kv_at(g, i), *b = lp_gguf_kv_at(h, i);
        if (strcmp(a->key, b->key) || a->v.type != b->v.type || a->v.n != b->v.n || a->v.u != b->v.u ||
            a->v.i != b->v.i || a->v.str.len != b->v.str.len ||
            (a->v.str.len && memcmp(a->v.str.s, b->v.str.s, a->v.str.len)))
            abort();
    }
    for (size_t i = 0; i < lp_gguf_tensor_count(g); i++) {
        const lp_gguf_tensor *a = lp_gguf_tensor_at(g, i), *b = lp_gguf_tensor_at(h, i);
        if (strcmp(a->name, b->name) || a->type != b->type || a->ndim != b->ndim || a->nbytes != b->nbytes ||
            memcmp(a->ne, b->ne, sizeof a->ne) || (a->nbytes && memcmp(a->data, b->data, a->nbytes)))
            abort();
    }
    lp_gguf_close(h);
    remove(path);
}

static void walk(const lp_gguf_value *v)
{
    if (v->type == LP_GGUF_TYPE_STRING && v->str.len)
        sink ^= (uint8_t)v->str.s[v->str.len - 1];
    if (v->type != LP_GGUF_TYPE_ARRAY)
        return;
    for (uint64_t i = 0; i < v->n; i++) {
        int64_t x;
        double f;
        if (v->strs && v->strs[i].len)
            sink ^= (uint8_t)v->strs[i].s[v->strs[i].len - 1];
        else if (v->items)
            walk(&v->items[i]);
        else if (lp_gguf_array_i64(v, i, &x) || lp_gguf_array_f64(v, i, &f))
            sink ^= 1;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *buf = malloc(size ? size : 1); /* views must stay inside exactly [buf, buf + size) */
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    lp_gguf_file *g = NULL;
    if (lp_gguf_parse_buffer(buf, size, "fuzz.gguf", &g) == LP_OK) {
        for (size_t i = 0; i < lp_gguf_kv_count(g); i++) {
            const lp_gguf_kv *kv = lp_gguf_kv_at(g, i);
            if (lp_gguf_get(g, kv->key) != &kv->v)
                abort();
            walk(&kv->v);
        }
        for (size_t i = 0; i < lp_gguf_tensor_count(g); i++) {
            const lp_gguf_tensor *t = lp_gguf_tensor_at(g, i);
            const uint8_t *p = t->data;
            for (uint64_t k = 0; k < t->nbytes; k++)
                sink ^= p[k];
            if (lp_gguf_find_tensor(g, t->name) != t)
                abort();
            const lp_ggml_type_traits *tt = lp_ggml_type_traits_get(t->type);
            if (tt && tt->dequantizable && t->numel <= (1u << 16)) {
                float *out = malloc(t->numel * sizeof *out + 1);
                if (out) {
                    lp_ggml_dequantize((lp_ggml_type)t->type, t->data, out, (int64_t)t->numel);
                    free(out);
                }
            }
        }
        if (size <= (1u << 16))
            roundtrip(g);
        char *json = NULL;
        for (int k = 0; k < 2; k++) {
            lp_status st = k == 0 ? lp_gguf_config_json(g, &json) : lp_gguf_tokenizer_json_of(g, &json);
            if (st == LP_OK) {
                cJSON *j = cJSON_Parse(json);
                if (!j)
                    abort();
                cJSON_Delete(j);
            }
            free(json);
            json = NULL;
        }
        lp_gguf_close(g);
    }
    free(buf);
    return 0;
}
