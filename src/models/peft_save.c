/* Writing LoRA results: a PEFT adapter directory (adapter_config.json with LoraConfig's
 * fields, adapter_model.safetensors under PEFT's tensor names, README.md) that
 * PeftModel.from_pretrained loads, and the merged weights (W + scale * B @ A) a merged HF
 * model is saved with. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "models_internal.h"

#define KEY_PREFIX "base_model.model."

bool lp_model__in_modules_to_save(const lp_model *m, const char *param)
{
    const char *dot = strrchr(param, '.');
    if (!dot)
        return false;
    size_t a = (size_t)(dot - param); // module name: "classifier.weight" -> "classifier"
    for (size_t i = 0; i < m->n_mts; i++) {
        size_t b = strlen(m->mts[i]);
        if (a >= b && !strncmp(param + a - b, m->mts[i], b)) // PEFT: plain endswith
            return true;
    }
    return false;
}

const float *lp_model__linear_weight(const lp_model *m, const lp_model_linear *ml, float **buf)
{
    *buf = NULL;
    const lp_model_adapter *ad = NULL;
    for (size_t k = 0; k < m->n_adapters && !ad; k++)
        if (m->adapters[k].ml == ml)
            ad = &m->adapters[k];
    if (!ml->q && !ad)
        return ml->lin->w;
    const int64_t out = ml->lin->out, in = ml->lin->in;
    float *w = malloc((size_t)(out * in) * sizeof *w);
    if (!w) {
        lp_err(LP_STATUS_NO_MEMORY, "saving %s.weight: out of memory", ml->module);
        return NULL;
    }
    if (ml->q)
        lp_qweight_dequantize(w, ml->q, 0, out * in);
    else
        memcpy(w, ml->lin->w, (size_t)(out * in) * sizeof *w);
    if (ad) {
        const int64_t r = ad->lora.r;
        const float *A = ad->lora.A, *B = ad->lora.B;
        // W + scale * (B @ A): the product in double, one rounding
        for (int64_t o = 0; o < out; o++)
            for (int64_t c = 0; c < in; c++) {
                double acc = 0;
                for (int64_t j = 0; j < r; j++)
                    acc += (double)B[o * r + j] * (double)A[j * in + c];
                w[o * in + c] = (float)((double)w[o * in + c] + (double)ad->lora.scale * acc);
            }
    }
    *buf = w;
    return w;
}

const float *lp_model__saved_weight(const lp_model *m, size_t i, float **buf)
{
    *buf = NULL;
    for (size_t k = 0; k < m->n_lins; k++)
        if (m->lins[k].wparam == i)
            return lp_model__linear_weight(m, &m->lins[k], buf);
    return m->params[i].data;
}

/* ---- adapter directory ------------------------------------------------------------------ */

static lp_status write_tensors(const lp_model *m, const char *path)
{
    lp_st_write_tensor *t = calloc(m->n_params + 1, sizeof *t);
    char **names = calloc(m->n_params + 1, sizeof *names);
    lp_status st = LP_OK;
    size_t k = 0;
    if (!t || !names) {
        st = lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", path);
        goto out;
    }
    for (size_t i = 0; i < m->n_params; i++) {
        const lp_model_param *p = &m->params[i];
        if (!lp_model__is_adapter_param(m, i) && !lp_model__in_modules_to_save(m, p->name))
            continue;
        size_t len = strlen(KEY_PREFIX) + strlen(p->name) + 1;
        if (!(names[k] = malloc(len))) {
            st = lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", path);
            goto out;
        }
        snprintf(names[k], len, KEY_PREFIX "%s", p->name);
        t[k] = (lp_st_write_tensor){names[k], LP_ST_DTYPE_F32, p->ndim, p->shape, p->data};
        k++;
    }
    static const char *const meta[] = {"format", "pt"};
    st = lp_st_write(path, t, k, meta, 1);
out:
    if (names)
        for (size_t i = 0; i < m->n_params; i++)
            free(names[i]);
    free(names);
    free(t);
    return st;
}

static lp_status write_config(const lp_model *m, const char *path)
{
    cJSON *c = cJSON_CreateObject();
    if (!c)
        return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", path);
    // LoraConfig's fields as PEFT 0.21 writes them; the ones loupe does not use keep their defaults
    cJSON_AddNullToObject(c, "alora_invocation_tokens");
    cJSON_AddItemToObject(c, "alpha_pattern", cJSON_CreateObject());
    cJSON_AddNullToObject(c, "arrow_config");
    cJSON_AddNullToObject(c, "auto_mapping");
    cJSON_AddStringToObject(c, "base_model_name_or_path", m->dir);
    cJSON_AddStringToObject(c, "bias", "none");
    cJSON_AddNullToObject(c, "corda_config");
    cJSON_AddFalseToObject(c, "ensure_weight_tying");
    cJSON_AddNullToObject(c, "eva_config");
    cJSON_AddNullToObject(c, "exclude_modules");
    cJSON_AddFalseToObject(c, "fan_in_fan_out");
    cJSON_AddTrueToObject(c, "inference_mode");
    cJSON_AddTrueToObject(c, "init_lora_weights");
    cJSON_AddNullToObject(c, "kasa_config");
    cJSON_AddNullToObject(c, "layer_replication");
    cJSON_AddNullToObject(c, "layers_pattern");
    cJSON_AddNullToObject(c, "layers_to_transform");
    cJSON_AddItemToObject(c, "loftq_config", cJSON_CreateObject());
    cJSON_AddNumberToObject(c, "lora_alpha", m->lora.alpha);
    cJSON_AddFalseToObject(c, "lora_bias");
    cJSON_AddNumberToObject(c, "lora_dropout", (double)m->lora.dropout);
    cJSON_AddNullToObject(c, "lora_ga_config");
    cJSON_AddNullToObject(c, "megatron_config");
    cJSON_AddStringToObject(c, "megatron_core", "megatron.core");
    cJSON *mts = cJSON_AddArrayToObject(c, "modules_to_save");
    for (size_t i = 0; i < m->n_mts; i++)
        cJSON_AddItemToArray(mts, cJSON_CreateString(m->mts[i]));
    cJSON_AddNullToObject(c, "monteclora_config");
    cJSON_AddStringToObject(c, "peft_type", "LORA");
    cJSON_AddNumberToObject(c, "r", m->lora.rank);
    cJSON_AddItemToObject(c, "rank_pattern", cJSON_CreateObject());
    cJSON_AddNullToObject(c, "revision");
    cJSON *tm = cJSON_AddArrayToObject(c, "target_modules");
    const char *p = m->lora_targets ? m->lora_targets : "";
    while (*p) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        char *one = strndup(p, len);
        if (one)
            cJSON_AddItemToArray(tm, cJSON_CreateString(one));
        free(one);
        if (!e)
            break;
        p = e + 1;
    }
    cJSON_AddNullToObject(c, "target_parameters");
    cJSON_AddStringToObject(c, "task_type", m->task == LP_MODEL_TASK_CAUSAL_LM ? "CAUSAL_LM" : "SEQ_CLS");
    cJSON_AddNullToObject(c, "trainable_token_indices");
    cJSON_AddFalseToObject(c, "use_dora");
    cJSON_AddBoolToObject(c, "use_rslora", m->lora.rslora);
    return lp_json_write_file(path, c);
}

static lp_status write_readme(const lp_model *m, const char *path)
{
    char text[2048];
    int n = snprintf(text, sizeof text,
                     "---\nlibrary_name: peft\n---\n\n# LoRA adapter written by loupe\n\n"
                     "Base model: `%s`. r = %d, lora_alpha = %g%s, target modules: %s.\n\n"
                     "```python\nfrom peft import PeftModel\nmodel = PeftModel.from_pretrained(base_model, "
                     "\"<this directory>\")\n```\n",
                     m->dir, m->lora.rank, m->lora.alpha, m->lora.rslora ? " (rsLoRA)" : "",
                     m->lora_targets ? m->lora_targets : "");
    return lp_file_write_atomic(path, text, (size_t)(n < (int)sizeof text ? n : (int)sizeof text - 1));
}

static lp_status write_adapter(const lp_model *m, const char *dir)
{
    char p[4096];
    lp_status st;
    snprintf(p, sizeof p, "%s/adapter_model.safetensors", dir);
    if ((st = write_tensors(m, p)) != LP_OK)
        return st;
    snprintf(p, sizeof p, "%s/README.md", dir);
    if ((st = write_readme(m, p)) != LP_OK)
        return st;
    snprintf(p, sizeof p, "%s/adapter_config.json", dir); // last: a reader that sees it sees the weights
    return write_config(m, p);
}

static lp_status fill_adapter(void *m, const char *dir)
{
    return write_adapter(m, dir);
}

lp_status lp_model_save_adapter(const lp_model *m, const char *dir)
{
    if (!m->n_adapters)
        return lp_err(LP_STATUS_INVALID_ARG, "%s: model %s has no LoRA adapters to save", dir, m->dir);
    return lp_dir_write_atomic(dir, fill_adapter, (void *)m);
}
