/* LoRA / QLoRA on a loaded model, as PEFT builds it: which encoder Linears get an adapter
 * (loupe roles or PEFT's module-name suffix rule), the frozen base (no gradient buffers), the
 * trainable head (modules_to_save), lora_A/lora_B parameters initialized as PEFT does or read
 * from a PEFT adapter directory, and the per-batch buffers the adapters keep. */
#include <cjson/cJSON.h>
#include <float.h>
#include <math.h>
#include <regex.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models_internal.h"

#define NAME_LEN 256
static const char *const role_names[] = {"q", "k", "v", "o", "ffn_in", "ffn_out", "ffn_gate"};
#define N_ROLES (sizeof role_names / sizeof role_names[0])

lp_status lp_model__note_linear(lp_model *m, lp_nn_linear *lin, const char *module, const char *role,
                                int32_t layer, size_t wparam)
{
    if (m->n_lins == m->cap_lins) { // before any adapter points into the array
        size_t cap = m->cap_lins ? 2 * m->cap_lins : 64;
        lp_model_linear *g = lp_realloc(m->lins, cap * sizeof *g);
        if (!g)
            return lp_err(LP_STATUS_NO_MEMORY, "model: out of memory");
        m->lins = g;
        m->cap_lins = cap;
    }
    lp_model_linear *ml = &m->lins[m->n_lins];
    memset(ml, 0, sizeof *ml);
    if (!(ml->module = lp_strdup(module)))
        return lp_err(LP_STATUS_NO_MEMORY, "model: out of memory");
    ml->lin = lin;
    ml->role = role;
    ml->layer = layer;
    ml->wparam = wparam;
    m->n_lins++;
    return LP_OK;
}

/* PEFT's rule: the module name equals the entry or ends with "." + entry. */
static bool suffix_match(const char *module, const char *entry)
{
    size_t a = strlen(module), b = strlen(entry);
    if (a == b)
        return !strcmp(module, entry);
    return a > b && module[a - b - 1] == '.' && !strcmp(module + a - b, entry);
}

/* ---- the adapter directory's config ----------------------------------------------------- */

void lp_model__adapter_cfg_free(lp_model_adapter_cfg *c)
{
    for (size_t i = 0; i < c->n_targets; i++)
        free(c->targets[i]);
    free(c->targets);
    free(c->target_regex);
    for (size_t i = 0; i < c->n_mts; i++)
        free(c->mts[i]);
    free(c->mts);
    memset(c, 0, sizeof *c);
}

static lp_status str_list(const cJSON *a, const char *path, const char *key, char ***out, size_t *n)
{
    *out = NULL;
    *n = 0;
    if (!a || cJSON_IsNull(a))
        return LP_OK;
    if (!cJSON_IsArray(a))
        return lp_err(LP_STATUS_FORMAT, "%s: \"%s\" is not a list of strings", path, key);
    int cnt = cJSON_GetArraySize(a);
    if (!(*out = lp_calloc((size_t)cnt + 1, sizeof **out)))
        return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", path);
    for (int i = 0; i < cnt; i++) {
        const cJSON *e = cJSON_GetArrayItem(a, i);
        if (!cJSON_IsString(e))
            return lp_err(LP_STATUS_FORMAT, "%s: \"%s\"[%d] is not a string", path, key, i);
        if (!((*out)[(*n)++] = lp_strdup(e->valuestring)))
            return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", path);
    }
    return LP_OK;
}

lp_status lp_model__adapter_cfg_parse(const char *text, size_t len, const char *path, lp_model_adapter_cfg *c)
{
    memset(c, 0, sizeof *c);
    lp_status st = LP_OK;
    bool oom;
    cJSON *root = lp_json_parse(text, len, NULL, &oom);
    if (!root)
        return oom ? lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory parsing JSON", path)
                   : lp_err(LP_STATUS_FORMAT, "%s: not valid JSON", path);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return lp_err(LP_STATUS_FORMAT, "%s: not a JSON object", path);
    }
#define GET(k) cJSON_GetObjectItemCaseSensitive(root, k)
    const cJSON *v = GET("peft_type");
    if (!cJSON_IsString(v) || strcmp(v->valuestring, "LORA")) {
        st = lp_err(LP_STATUS_UNSUPPORTED, "%s: peft_type is %s; loupe loads LORA adapters", path,
                    cJSON_IsString(v) ? v->valuestring : "missing");
        goto out;
    }
    v = GET("r");
    // range-checked as a double: converting one outside int32's range is undefined
    const double r = cJSON_IsNumber(v) ? v->valuedouble : 8.0;
    if (!(r >= 1.0 && r <= 65536.0) || r != floor(r)) {
        st = lp_err(LP_STATUS_FORMAT, "%s: r must be an integer in [1, 65536]", path);
        goto out;
    }
    c->r = (int32_t)r;
    v = GET("lora_alpha");
    c->alpha = cJSON_IsNumber(v) ? v->valuedouble : 8.0;
    v = GET("lora_dropout");
    c->dropout = cJSON_IsNumber(v) ? v->valuedouble : 0.0;
    // the adapters keep scale = alpha / r (or / sqrt(r)) as a float
    if (!(c->dropout >= 0.0 && c->dropout < 1.0) || !(fabs(c->alpha) <= FLT_MAX)) {
        st = lp_err(LP_STATUS_FORMAT, "%s: lora_dropout must be in [0, 1) and lora_alpha finite (a float)", path);
        goto out;
    }
    c->rslora = cJSON_IsTrue(GET("use_rslora"));
    // settings that change the math loupe does not implement: refuse rather than load wrong
    v = GET("bias");
    if (cJSON_IsString(v) && strcmp(v->valuestring, "none")) {
        st = lp_err(LP_STATUS_UNSUPPORTED, "%s: bias \"%s\" (only \"none\" is supported)", path,
                    v->valuestring);
        goto out;
    }
    static const char *const must_false[] = {"fan_in_fan_out", "use_dora", "lora_bias", NULL};
    for (int i = 0; must_false[i]; i++)
        if (cJSON_IsTrue(GET(must_false[i]))) {
            st = lp_err(LP_STATUS_UNSUPPORTED, "%s: %s is true (not supported)", path, must_false[i]);
            goto out;
        }
    static const char *const must_empty[] = {"rank_pattern", "alpha_pattern", NULL};
    for (int i = 0; must_empty[i]; i++) {
        v = GET(must_empty[i]);
        if (v && !cJSON_IsNull(v) && cJSON_GetArraySize(v) > 0) {
            st = lp_err(LP_STATUS_UNSUPPORTED, "%s: %s is not empty (per-module ranks are not supported)",
                        path, must_empty[i]);
            goto out;
        }
    }
    v = GET("layers_to_transform");
    if (v && !cJSON_IsNull(v)) {
        st = lp_err(LP_STATUS_UNSUPPORTED, "%s: layers_to_transform is set (not supported)", path);
        goto out;
    }
    v = GET("target_modules");
    if (cJSON_IsString(v)) {
        if (!(c->target_regex = lp_strdup(v->valuestring))) {
            st = lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", path);
            goto out;
        }
    } else if ((st = str_list(v, path, "target_modules", &c->targets, &c->n_targets)) != LP_OK) {
        goto out;
    } else if (!c->n_targets) {
        st = lp_err(LP_STATUS_FORMAT, "%s: target_modules is missing or empty", path);
        goto out;
    }
    st = str_list(GET("modules_to_save"), path, "modules_to_save", &c->mts, &c->n_mts);
#undef GET
out:
    cJSON_Delete(root);
    if (st != LP_OK)
        lp_model__adapter_cfg_free(c);
    return st;
}

static lp_status read_adapter_cfg(const char *dir, lp_model_adapter_cfg *c)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/adapter_config.json", dir);
    char *text = NULL;
    size_t len = 0;
    lp_status st = lp_file_read_all(path, &text, &len);
    if (st == LP_OK)
        st = lp_model__adapter_cfg_parse(text, len, path, c);
    free(text);
    return st;
}

/* ---- which Linears are adapted ------------------------------------------------------------ */

static lp_status mark_list(lp_model *m, char *const *entries, size_t n, bool strict, const char *what)
{
    for (size_t e = 0; e < n; e++) {
        const char *t = entries[e];
        bool hit = false;
        const char *role = NULL;
        for (size_t r = 0; r < N_ROLES; r++)
            if (!strcmp(t, role_names[r]))
                role = role_names[r];
        bool all = !strcmp(t, "all") || !strcmp(t, "all-linear");
        for (size_t i = 0; i < m->n_lins; i++) {
            lp_model_linear *ml = &m->lins[i];
            if (all || (role ? !strcmp(ml->role, role) : suffix_match(ml->module, t))) {
                ml->adapted = true;
                hit = true;
            }
        }
        if (!hit && strict) {
            char list[512];
            size_t k = 0;
            list[0] = 0;
            for (size_t r = 0; r < m->n_lins && m->lins[r].layer == 0; r++) {
                const char *mod = m->lins[r].module, *dot = strrchr(mod, '.');
                k += (size_t)snprintf(list + k, sizeof list - k, "%s%s", r ? ", " : "", dot ? dot + 1 : mod);
                if (k >= sizeof list)
                    break;
            }
            return lp_err(
                LP_STATUS_INVALID_ARG,
                "%s: target '%s' matches no Linear of %s (roles: q, k, v, o, ffn_gate, ffn_in, ffn_out, all; "
                "module names of layer 0: %s)",
                what, t, m->dir, list);
        }
    }
    return LP_OK;
}

static lp_status mark_regex(lp_model *m, const char *re, const char *what)
{
    char *anchored = lp_malloc(strlen(re) + 8);
    if (!anchored)
        return lp_err(LP_STATUS_NO_MEMORY, "out of memory");
    sprintf(anchored, "^(%s)$", re); // Python's re.fullmatch
    regex_t rx;
    int rc = regcomp(&rx, anchored, REG_EXTENDED | REG_NOSUB);
    free(anchored);
    if (rc != 0)
        return lp_err(LP_STATUS_UNSUPPORTED, "%s: target_modules regex '%s' is not a POSIX extended regex",
                      what, re);
    for (size_t i = 0; i < m->n_lins; i++)
        if (regexec(&rx, m->lins[i].module, 0, NULL, 0) == 0)
            m->lins[i].adapted = true;
    regfree(&rx);
    return LP_OK;
}

/* Splits a comma list into owned strings. */
static lp_status split_commas(const char *s, char ***out, size_t *n)
{
    *out = NULL;
    *n = 0;
    size_t cap = 1;
    for (const char *p = s; *p; p++)
        cap += *p == ',';
    if (!(*out = lp_calloc(cap, sizeof **out)))
        return lp_err(LP_STATUS_NO_MEMORY, "out of memory");
    const char *p = s;
    while (*p) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        while (len && (*p == ' ')) {
            p++;
            len--;
        }
        while (len && p[len - 1] == ' ')
            len--;
        if (len) {
            if (!((*out)[*n] = strndup(p, len)))
                return lp_err(LP_STATUS_NO_MEMORY, "out of memory");
            (*n)++;
        }
        if (!e)
            break;
        p = e + 1;
    }
    return LP_OK;
}

static void free_strs(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

/* The target_modules to save: for each adapted module the shortest dotted suffix that
 * matches (PEFT's rule) no module left without an adapter, deduplicated; so PEFT wraps
 * exactly the modules loupe adapted ("q_lin", or "layer.0.output.dense" where "dense" and
 * "output.dense" would also catch other modules). */
static lp_status saved_targets(lp_model *m)
{
    size_t cap = 16;
    for (size_t i = 0; i < m->n_lins; i++)
        cap += strlen(m->lins[i].module) + 3;
    char *out = lp_calloc(cap, 1);
    if (!out)
        return lp_err(LP_STATUS_NO_MEMORY, "out of memory");
    size_t k = 0;
    for (size_t i = 0; i < m->n_lins; i++) {
        if (!m->lins[i].adapted)
            continue;
        const char *mod = m->lins[i].module, *suf = mod + strlen(mod);
        for (;;) { // grow the suffix one component at a time
            while (suf > mod && suf[-1] != '.')
                suf--;
            bool clean = true;
            for (size_t j = 0; j < m->n_lins && clean; j++)
                if (!m->lins[j].adapted && suffix_match(m->lins[j].module, suf))
                    clean = false;
            // the head's and pooler's Linears: never adapted by loupe
            static const char *const others[] = {"classifier", "pre_classifier", "bert.pooler.dense",
                                                 "pooler.dense", "score", "lm_head"};
            for (size_t j = 0; j < sizeof others / sizeof others[0] && clean; j++)
                if (suffix_match(others[j], suf))
                    clean = false;
            if (clean || suf == mod)
                break;
            suf--; // step over the dot
        }
        // deduplicate
        bool dup = false;
        const char *p = out;
        size_t sl = strlen(suf);
        while (*p) {
            const char *e = strchr(p, ',');
            size_t len = e ? (size_t)(e - p) : strlen(p);
            if (len == sl && !strncmp(p, suf, sl))
                dup = true;
            if (!e)
                break;
            p = e + 1;
        }
        if (!dup)
            k += (size_t)snprintf(out + k, cap - k, "%s%s", k ? "," : "", suf);
    }
    free(m->lora_targets);
    m->lora_targets = out;
    return LP_OK;
}

/* ---- setup --------------------------------------------------------------------------------- */

static const lp_st_tensor *adapter_tensor(const lp_model *m, const char *name, int64_t d0, int64_t d1,
                                          lp_status *st)
{
    if (!m->adapter_file)
        return NULL;
    char key[NAME_LEN + 32];
    snprintf(key, sizeof key, "base_model.model.%s", name);
    const lp_st_tensor *t = lp_st_find(m->adapter_file, key);
    if (!t) {
        *st = lp_err(LP_STATUS_FORMAT, "%s: adapter has no tensor '%s' (its config targets this module)",
                     lp_st_path(m->adapter_file), key);
        return NULL;
    }
    bool ok = d1 ? t->ndim == 2 && t->shape[0] == d0 && t->shape[1] == d1 : t->ndim == 1 && t->shape[0] == d0;
    if (!ok) {
        *st = lp_err(LP_STATUS_FORMAT, "%s: tensor '%s' should have shape [%lld%s%lld]", t->file, key,
                     (long long)d0, d1 ? ", " : "", d1 ? (long long)d1 : 0LL);
        return NULL;
    }
    if (t->dtype != LP_ST_DTYPE_F32 && t->dtype != LP_ST_DTYPE_F16 && t->dtype != LP_ST_DTYPE_BF16 &&
        t->dtype != LP_ST_DTYPE_F64) {
        *st = lp_err(LP_STATUS_FORMAT, "%s: tensor '%s' has dtype %s (float expected)", t->file, key,
                     lp_st_dtype_name(t->dtype));
        return NULL;
    }
    return t;
}

/* QLoRA: the encoder Linears' weights leave the f32 parameter table (they are stored
 * quantized by lp_model__peft_finish, from the checkpoint tensor kept in qsrc). */
lp_status lp_model__drop_linear_params(lp_model *m, const bool *which)
{
    bool *drop = lp_calloc(m->n_params + 1, sizeof *drop);
    size_t *to = lp_calloc(m->n_params + 1, sizeof *to);
    if (!drop || !to) {
        free(drop);
        free(to);
        return lp_err(LP_STATUS_NO_MEMORY, "model: out of memory");
    }
    for (size_t i = 0; i < m->n_lins; i++) {
        lp_model_linear *ml = &m->lins[i];
        if (which && !which[i])
            continue;
        ml->qsrc = m->slots[ml->wparam].src;
        drop[ml->wparam] = true;
    }
    size_t k = 0;
    m->n_floats = 0;
    for (size_t i = 0; i < m->n_params; i++) {
        to[i] = k;
        if (drop[i]) {
            free(m->names[i]);
            continue;
        }
        m->params[k] = m->params[i];
        m->slots[k] = m->slots[i];
        m->names[k] = m->names[i];
        m->slots[k].offset = m->n_floats;
        m->n_floats += (m->params[k].numel + 15) & ~(int64_t)15;
        k++;
    }
    m->n_params = k;
    for (size_t i = 0; i < m->n_lins; i++)
        m->lins[i].wparam = which && !which[i] ? to[m->lins[i].wparam] : SIZE_MAX;
    free(drop);
    free(to);
    return LP_OK;
}

lp_status lp_model__peft_setup(lp_model *m)
{
    if (!m->opt.lora.enabled)
        return lp_model__quant_setup(m);
    if (m->opt.weights != LP_WEIGHT_FORMAT_F32)
        return lp_err(LP_STATUS_INVALID_ARG,
                      "%s: weights kept as %s and LoRA together: LoRA's base_dtype (nf4, int8) sets its base", m->dir,
                      lp_weight_format_name(m->opt.weights));
    lp_lora_options *o = &m->lora;
    *o = m->opt.lora;
    if (!m->has_head)
        return lp_err(LP_STATUS_INVALID_ARG, "%s: LoRA needs a classification head (load with task seq_cls)",
                      m->dir);
    if (o->base_dtype != LP_DTYPE_F32 && o->base_dtype != LP_DTYPE_NF4 && o->base_dtype != LP_DTYPE_INT8 &&
        o->base_dtype != LP_DTYPE_BF16)
        return lp_err(LP_STATUS_INVALID_ARG, "LoRA base dtype %s (expected f32, bf16, int8 or nf4)",
                      lp_dtype_name(o->base_dtype));
    lp_status st = LP_OK;
    char *const default_mts[] = {"classifier", "score"}; // PeftModelForSequenceClassification's
    char **mts = NULL;
    size_t n_mts = 0;
    if (o->adapter_dir && *o->adapter_dir) {
        lp_model_adapter_cfg ac;
        if ((st = read_adapter_cfg(o->adapter_dir, &ac)) != LP_OK)
            return st;
        o->rank = ac.r;
        o->alpha = ac.alpha;
        o->dropout = (float)ac.dropout;
        o->rslora = ac.rslora;
        char what[4200];
        snprintf(what, sizeof what, "%s/adapter_config.json", o->adapter_dir);
        st = ac.target_regex ? mark_regex(m, ac.target_regex, what)
                             : mark_list(m, ac.targets, ac.n_targets, false, what);
        // PEFT adds classifier/score for SEQ_CLS whatever the file lists
        for (size_t i = 0; st == LP_OK && m->task == LP_MODEL_TASK_SEQ_CLS && i < 2; i++) {
            bool have = false;
            for (size_t j = 0; j < ac.n_mts; j++)
                have |= !strcmp(ac.mts[j], default_mts[i]);
            if (!have) {
                char **nm = lp_realloc(ac.mts, (ac.n_mts + 1) * sizeof *nm);
                if (!nm || !(nm[ac.n_mts] = lp_strdup(default_mts[i]))) {
                    if (nm)
                        ac.mts = nm;
                    st = lp_err(LP_STATUS_NO_MEMORY, "out of memory");
                    break;
                }
                ac.mts = nm;
                ac.n_mts++;
            }
        }
        mts = ac.mts;
        n_mts = ac.n_mts;
        ac.mts = NULL;
        ac.n_mts = 0;
        lp_model__adapter_cfg_free(&ac);
        if (st == LP_OK) {
            char p[4096];
            snprintf(p, sizeof p, "%s/adapter_model.safetensors", o->adapter_dir);
            st = lp_st_open(p, &m->adapter_file);
            if (st == LP_STATUS_IO) {
                snprintf(p, sizeof p, "%s/adapter_model.bin", o->adapter_dir);
                FILE *f = fopen(p, "rb");
                if (f) {
                    fclose(f);
                    st = lp_err(LP_STATUS_UNSUPPORTED,
                                "%s: pickle adapters are not read; save it with "
                                "safe_serialization=True (adapter_model.safetensors)",
                                p);
                }
            }
        }
    } else {
        if (o->rank == 0)
            o->rank = 8;
        if (o->alpha == 0)
            o->alpha = 16;
        if (o->rank < 0 || o->rank > 65536)
            return lp_err(LP_STATUS_INVALID_ARG, "LoRA rank %d (expected 1..65536)", o->rank);
        if (!(o->dropout >= 0.0f && o->dropout < 1.0f) || !(o->alpha > 0 && o->alpha <= FLT_MAX))
            return lp_err(LP_STATUS_INVALID_ARG, "LoRA dropout %g must be in [0, 1) and alpha %g in (0, 3.4e38]",
                          (double)o->dropout, o->alpha);
        const char *t = o->targets && *o->targets ? o->targets : m->default_targets;
        char **ents;
        size_t ne;
        if ((st = split_commas(t, &ents, &ne)) == LP_OK) {
            if (!ne)
                st = lp_err(LP_STATUS_INVALID_ARG, "LoRA targets '%s' name no module", t);
            else
                st = mark_list(m, ents, ne, true, "--targets");
        }
        free_strs(ents, ne);
        if (st == LP_OK && m->task == LP_MODEL_TASK_SEQ_CLS) // PeftModelForCausalLM saves no module whole
            st = split_commas("classifier,score", &mts, &n_mts); // freed with the model, even on error
    }
    m->mts = mts;
    m->n_mts = n_mts;
    if (st != LP_OK)
        return st;
    o->adapter_dir = NULL; // borrowed string: not kept past load
    o->targets = NULL;
    o->enabled = true;

    size_t n_ad = 0;
    for (size_t i = 0; i < m->n_lins; i++)
        n_ad += m->lins[i].adapted;
    if (!n_ad) // an adapter file that does not fit the model is bad data, --targets a bad flag
        return lp_err(m->opt.lora.adapter_dir ? LP_STATUS_FORMAT : LP_STATUS_INVALID_ARG,
                      "%s: the LoRA targets match no Linear module of %s",
                      m->opt.lora.adapter_dir ? m->opt.lora.adapter_dir : "--targets", m->dir);
    if ((st = saved_targets(m)) != LP_OK)
        return st;

    if (o->base_dtype != LP_DTYPE_F32 && (st = lp_model__drop_linear_params(m, NULL)) != LP_OK)
        return st;

    /* the base is frozen; the head (modules_to_save) is trained in full, from the adapter if given */
    size_t n_base = m->n_params;
    for (size_t i = 0; i < n_base; i++) {
        lp_model_param *p = &m->params[i];
        bool save = lp_model__in_modules_to_save(m, p->name);
        p->trainable = save;
        if (save && m->adapter_file) {
            const lp_st_tensor *t =
                adapter_tensor(m, p->name, p->shape[0], p->ndim == 2 ? p->shape[1] : 0, &st);
            if (!t)
                return st;
            m->slots[i].src = t;
            p->from_checkpoint = true;
        }
    }

    /* a frozen f32 base packed once for the f32 GEMM when asked (lp_model__pack_f32_bases): every
     * Linear, as QLoRA quantizes every one; the packed copy replaces the f32 weight. After
     * the head's sources are known, so the init stream is recorded as the f32 model uses it */
    if (o->base_dtype == LP_DTYPE_F32 && lp_model__pack_f32_bases()) {
        for (size_t i = 0; i < m->n_lins; i++) {
            m->lins[i].quantized = true;
            m->lins[i].qdtype = LP_DTYPE_F32;
        }
        if ((st = lp_model__drop_keep_init_stream(m)) != LP_OK)
            return st;
    }

    /* adapters: appended after every base parameter, so base initialization is unchanged */
    if (!(m->adapters = lp_calloc(n_ad, sizeof *m->adapters)))
        return lp_err(LP_STATUS_NO_MEMORY, "model: out of memory");
    const double scale = o->rslora ? o->alpha / sqrt((double)o->rank) : o->alpha / (double)o->rank;
    for (size_t i = 0; i < m->n_lins; i++) {
        lp_model_linear *ml = &m->lins[i];
        if (!ml->adapted)
            continue;
        lp_model_adapter *ad = &m->adapters[m->n_adapters++];
        ad->ml = ml;
        lp_nn_lora *lo = &ad->lora;
        lo->r = o->rank;
        lo->scale = (float)scale;
        lo->dropout = o->dropout;
        char n[NAME_LEN];
        const int64_t in = ml->lin->in, out = ml->lin->out;
        snprintf(n, sizeof n, "%s.lora_A.weight", ml->module);
        const lp_st_tensor *ta = adapter_tensor(m, n, o->rank, in, &st);
        if (m->adapter_file && !ta)
            return st;
        ad->pa = m->n_params;
        if ((st = lp_model__add_param(m, n, 2, o->rank, in, &lo->A, &lo->dA, ta, LP_INIT_KAIMING, false)) !=
            LP_OK)
            return st;
        snprintf(n, sizeof n, "%s.lora_B.weight", ml->module);
        const lp_st_tensor *tb = adapter_tensor(m, n, out, o->rank, &st);
        if (m->adapter_file && !tb)
            return st;
        ad->pb = m->n_params;
        if ((st = lp_model__add_param(m, n, 2, out, o->rank, &lo->B, &lo->dB, tb, LP_INIT_ZERO, false)) !=
            LP_OK)
            return st;
        ml->lin->lora = lo;
        ml->lin->ctx = &m->pass_ctx;
    }

    /* every tensor of the adapter file must have been used: a key loupe did not place means
     * the adapter was made for another model or targets modules loupe cannot adapt */
    if (m->adapter_file) {
        for (size_t k = 0; k < lp_st_count(m->adapter_file); k++) {
            const lp_st_tensor *t = lp_st_at(m->adapter_file, k);
            bool used = false;
            for (size_t i = 0; i < m->n_params && !used; i++)
                used = m->slots[i].src == t;
            if (!used)
                return lp_err(LP_STATUS_FORMAT, "%s: tensor '%s' belongs to no module loupe adapted in %s",
                              t->file, t->name, m->dir);
        }
    }
    return LP_OK;
}

lp_status lp_model__peft_finish(lp_model *m)
{
    lp_st_close(m->adapter_file); // every tensor was copied into the parameter block
    m->adapter_file = NULL;
    if (!m->lora.enabled)
        return lp_model__quant_finish(m);
    if (m->lora.base_dtype == LP_DTYPE_F32) /* packs the bases marked by lp_model__pack_f32_bases */
        return m->n_lins && m->lins[0].quantized ? lp_model__quant_finish(m) : LP_OK;
    lp_rng rng;
    lp_rng_init(&rng, m->opt.seed ^ 0x9e3779b97f4a7c15ull, LP_RNG_STREAM_INIT);
    for (size_t i = 0; i < m->n_lins; i++) {
        lp_model_linear *ml = &m->lins[i];
        const int64_t out = ml->lin->out, in = ml->lin->in;
        // the f32 weight exists only for the moment it is quantized
        float *w = lp_malloc((size_t)(out * in) * sizeof *w);
        if (!w || !(ml->q = lp_calloc(1, sizeof *ml->q))) {
            free(w);
            return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory quantizing %s", m->dir, ml->module);
        }
        if (ml->qsrc)
            lp_model__convert(w, ml->qsrc);
        else
            lp_rng_normal(&rng, w, out * in, 0.0f, (float)m->init_range);
        /* bf16 (--dtype bf16): packed for the bf16 GEMMs in both orientations, the frozen base's
         * only copy */
        lp_status st = m->lora.base_dtype == LP_DTYPE_BF16
                           ? lp_qweight_pack_bf16_train(ml->q, w, out, in, ml->module)
                           : lp_qweight_quantize(ml->q, m->lora.base_dtype, w, out, in, true, ml->module);
        free(w);
        if (st != LP_OK)
            return lp_err_wrap(st, "%s: quantizing %s.weight to %s", m->dir, ml->module,
                               lp_dtype_name(m->lora.base_dtype));
        ml->q->bnb_cpu_rows = m->lora.bnb_cpu_dequant && m->lora.base_dtype == LP_DTYPE_NF4;
        ml->qsrc = NULL;
        ml->lin->w = NULL;
        ml->lin->dw = NULL;
        ml->lin->qbase = ml->q;
        /* QLoRA under --dtype bf16: the NF4 / int8 base rounded to bf16 for each use */
        ml->lin->qbase_bf16 = lp_model__qbase_bf16(m);
        ml->lin->ctx = &m->pass_ctx;
    }
    return LP_OK;
}

const lp_qweight *lp_model_qweight(const lp_model *m, const char *name)
{
    if (m->head_q && !strcmp(name, "lm_head.weight"))
        return m->head_q;
    size_t n = strlen(name);
    for (size_t i = 0; i < m->n_lins; i++) {
        const lp_model_linear *ml = &m->lins[i];
        size_t k = strlen(ml->module);
        if (ml->q && n == k + 7 && !strncmp(name, ml->module, k) && !strcmp(name + k, ".weight"))
            return ml->q;
    }
    return NULL;
}

lp_status lp_model__peft_bind(lp_model *m, int64_t B, int64_t T)
{
    if (!m->n_adapters)
        return LP_OK;
    const int64_t N = B * T;
    int64_t nf = 0, nu = 0;
    for (size_t i = 0; i < m->n_adapters; i++) {
        const lp_model_adapter *ad = &m->adapters[i];
        const int64_t in = ad->ml->lin->in;
        nf += (N * ad->lora.r + 15) & ~(int64_t)15;
        if (ad->lora.dropout > 0.0f)
            nu += (N * in + 63) & ~(int64_t)63;
    }
    if (nf > m->lora_act_cap) {
        lp_model__blk_free(m, m->lora_act);
        m->lora_act_cap = 0;
        if (!(m->lora_act =
                  lp_model__blk_alloc(m, (size_t)nf * sizeof(float), LP_MEM_CATEGORY_ACTIVATION, "lora activations")))
            return lp_err_wrap(LP_STATUS_NO_MEMORY, "LoRA activations for batch %lld x %lld", (long long)B,
                               (long long)T);
        m->lora_act_cap = nf;
    }
    if (nu > m->lora_u8_cap) {
        lp_model__blk_free(m, m->lora_u8);
        m->lora_u8_cap = 0;
        if (!(m->lora_u8 = lp_model__blk_alloc(m, (size_t)nu, LP_MEM_CATEGORY_ACTIVATION, "lora dropout masks")))
            return lp_err_wrap(LP_STATUS_NO_MEMORY, "LoRA dropout masks for batch %lld x %lld", (long long)B,
                               (long long)T);
        m->lora_u8_cap = nu;
    }
    float *f = m->lora_act;
    uint8_t *u = m->lora_u8;
    for (size_t i = 0; i < m->n_adapters; i++) {
        lp_nn_lora *lo = &m->adapters[i].lora;
        lo->u = f;
        f += (N * lo->r + 15) & ~(int64_t)15;
        lo->keep = NULL;
        if (lo->dropout > 0.0f) {
            lo->keep = u;
            u += (N * m->adapters[i].ml->lin->in + 63) & ~(int64_t)63;
        }
    }
    return LP_OK;
}

void lp_model__peft_free(lp_model *m)
{
    for (size_t i = 0; m->lins && i < m->n_lins; i++) {
        if (m->lins[i].qdev) {
            lp_kernels_qweight_free(m->lins[i].qdev);
            free(m->lins[i].qdev);
            m->lins[i].qdev = NULL;
        }
        if (m->lins[i].q) {
            lp_qweight_free(m->lins[i].q);
            free(m->lins[i].q);
            m->lins[i].q = NULL;
        }
    }
    lp_st_close(m->adapter_file);
    m->adapter_file = NULL;
    lp_gguf_close(m->qgguf);
    m->qgguf = NULL;
    if (m->head_q) {
        lp_qweight_free(m->head_q);
        free(m->head_q);
        m->head_q = NULL;
    }
    lp_model__blk_free(m, m->lora_act);
    lp_model__blk_free(m, m->lora_u8);
    free(m->adapters);
    free(m->lora_targets);
    free_strs(m->mts, m->n_mts);
    m->mts = NULL;
    m->n_mts = 0;
}

bool lp_model__is_adapter_param(const lp_model *m, size_t i)
{
    for (size_t k = 0; k < m->n_adapters; k++)
        if (m->adapters[k].pa == i || m->adapters[k].pb == i)
            return true;
    return false;
}

void lp_model_lora_info(const lp_model *m, lp_lora_info *o)
{
    memset(o, 0, sizeof *o);
    /* quantized bases count with or without adapters (lp_model_options.weights quantizes
     * the Linears of a plain inference model too) */
    for (size_t i = 0; i < m->n_lins; i++)
        if (m->lins[i].q) {
            o->quantized_params += (uint64_t)m->lins[i].q->n;
            o->quantized_bytes += (uint64_t)lp_qweight_nbytes(m->lins[i].q);
        }
    if (!m->n_adapters)
        return;
    o->enabled = true;
    o->rank = m->lora.rank;
    o->alpha = m->lora.alpha;
    o->rslora = m->lora.rslora;
    o->scale = m->adapters[0].lora.scale;
    o->dropout = m->lora.dropout;
    o->base_dtype = m->lora.base_dtype;
    o->n_adapters = (int32_t)m->n_adapters;
    for (size_t k = 0; k < m->n_adapters; k++)
        o->adapter_params +=
            (uint64_t)(m->params[m->adapters[k].pa].numel + m->params[m->adapters[k].pb].numel);
    snprintf(o->targets, sizeof o->targets, "%s", m->lora_targets ? m->lora_targets : "");
}
