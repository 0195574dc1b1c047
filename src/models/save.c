/* Saving a model as a Hugging Face model directory: model.safetensors (f32, HF names),
 * config.json (the source config with the saved architecture and labels) and the source's
 * tokenizer files, so transformers' from_pretrained loads the result. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "models_internal.h"

static const char *const tokenizer_files[] = {"tokenizer.json",
                                              "tokenizer_config.json",
                                              "vocab.txt",
                                              "special_tokens_map.json",
                                              "vocab.json",
                                              "merges.txt",
                                              NULL};

static lp_status write_config(const lp_model *m, const char *path)
{
    bool oom;
    cJSON *root = lp_json_parse(m->config_json, strlen(m->config_json), NULL, &oom);
    if (!root)
        return oom ? lp_err(LP_STATUS_NO_MEMORY, "%s/config.json: out of memory re-reading the source config", m->dir)
                   : lp_err(LP_STATUS_FORMAT, "%s/config.json: cannot re-read the source config", m->dir);
    cJSON *arch = cJSON_CreateArray();
    cJSON_AddItemToArray(arch, cJSON_CreateString(lp_hf_arch_name(m->save_arch)));
    cJSON_DeleteItemFromObjectCaseSensitive(root, "architectures");
    cJSON_AddItemToObject(root, "architectures", arch);
    cJSON_DeleteItemFromObjectCaseSensitive(root, "loupe_pooling");
    if (m->has_head) {
        cJSON *id2 = cJSON_CreateObject(), *l2i = cJSON_CreateObject();
        for (int64_t i = 0; i < m->num_labels; i++) {
            char k[32], def[32];
            snprintf(k, sizeof k, "%lld", (long long)i);
            snprintf(def, sizeof def, "LABEL_%lld", (long long)i);
            const char *name = m->label_names ? m->label_names[i]
                               : (i < m->cfg.num_labels && m->cfg.id2label && m->cfg.id2label[i])
                                   ? m->cfg.id2label[i]
                                   : def;
            cJSON_AddItemToObject(id2, k, cJSON_CreateString(name));
            cJSON_AddItemToObject(l2i, name, cJSON_CreateNumber((double)i));
        }
        cJSON_DeleteItemFromObjectCaseSensitive(root, "id2label");
        cJSON_DeleteItemFromObjectCaseSensitive(root, "label2id");
        cJSON_DeleteItemFromObjectCaseSensitive(root, "num_labels");
        cJSON_AddItemToObject(root, "id2label", id2);
        cJSON_AddItemToObject(root, "label2id", l2i);
        if (m->pooling == LP_POOLING_MEAN) // not a transformers notion: see lp_pooling
            cJSON_AddItemToObject(root, "loupe_pooling", cJSON_CreateString("mean"));
    }
    return lp_json_write_file(path, root);
}

static lp_status write_weights(const lp_model *m, const char *path)
{
    // adapters are merged into their base weights (PEFT's merge_and_unload) and not saved
    lp_st_write_tensor *t = calloc(m->n_params + m->n_lins + 1, sizeof *t);
    float **bufs = calloc(m->n_params + 1, sizeof *bufs), **qbufs = calloc(m->n_lins + 1, sizeof *qbufs);
    char **qnames = calloc(m->n_lins + 1, sizeof *qnames);
    int64_t *qshapes = calloc(2 * m->n_lins + 2, sizeof *qshapes);
    lp_status st = LP_OK;
    size_t k = 0;
    if (!t || !bufs || !qbufs || !qnames || !qshapes) {
        st = lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", path);
        goto out;
    }
    for (size_t i = 0; i < m->n_params; i++) {
        const lp_model_param *p = &m->params[i];
        if (lp_model__is_adapter_param(m, i))
            continue;
        const float *data = lp_model__saved_weight(m, i, &bufs[i]);
        if (!data) {
            st = LP_STATUS_NO_MEMORY;
            goto out;
        }
        t[k++] = (lp_st_write_tensor){
            .name = p->name, .dtype = LP_ST_DTYPE_F32, .ndim = p->ndim, .shape = p->shape, .data = data};
    }
    // quantized bases are not parameters: saved dequantized (and merged)
    for (size_t i = 0; i < m->n_lins; i++) {
        const lp_model_linear *ml = &m->lins[i];
        if (!ml->q)
            continue;
        const float *data = lp_model__linear_weight(m, ml, &qbufs[i]);
        if (!data || !(qnames[i] = malloc(strlen(ml->module) + 8))) {
            st = lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", path);
            goto out;
        }
        sprintf(qnames[i], "%s.weight", ml->module);
        qshapes[2 * i] = ml->lin->out;
        qshapes[2 * i + 1] = ml->lin->in;
        t[k++] = (lp_st_write_tensor){
            .name = qnames[i], .dtype = LP_ST_DTYPE_F32, .ndim = 2, .shape = &qshapes[2 * i], .data = data};
    }
    // transformers refuses safetensors whose metadata lacks a known "format"
    static const char *const meta[] = {"format", "pt"};
    st = lp_st_write(path, t, k, meta, 1);
out:
    if (bufs)
        for (size_t i = 0; i < m->n_params; i++)
            free(bufs[i]);
    free(bufs);
    for (size_t i = 0; qbufs && qnames && i < m->n_lins; i++) {
        free(qbufs[i]);
        free(qnames[i]);
    }
    free(qbufs);
    free(qnames);
    free(qshapes);
    free(t);
    return st;
}

static lp_status write_all(const lp_model *m, const char *dir)
{
    char p[4096], q[4096];
    lp_status st;
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    if ((st = write_weights(m, p)) != LP_OK)
        return st;
    for (int i = 0; tokenizer_files[i]; i++) {
        snprintf(q, sizeof q, "%s/%s", m->dir, tokenizer_files[i]);
        struct stat sb;
        if (stat(q, &sb) != 0)
            continue;
        char *buf = NULL;
        size_t len = 0;
        if ((st = lp_file_read_all(q, &buf, &len)) != LP_OK)
            return st;
        snprintf(p, sizeof p, "%s/%s", dir, tokenizer_files[i]);
        st = lp_file_write_atomic(p, buf, len);
        free(buf);
        if (st != LP_OK)
            return st;
    }
    // the config last: a reader that sees it sees the weights it describes
    snprintf(p, sizeof p, "%s/config.json", dir);
    return write_config(m, p);
}

static lp_status fill_hf(void *m, const char *dir)
{
    return write_all(m, dir);
}

/* A new directory appears whole; in an existing one (it may hold other files) every file
 * is replaced atomically. */
lp_status lp_model_save_hf(const lp_model *m, const char *dir)
{
    return lp_dir_write_atomic(dir, fill_hf, (void *)m);
}
