/* Chat templates, the public side: parse once (lex + parse into an arena the template
 * owns), render many times (each render in its own arena, freed before returning), with
 * the variables transformers' apply_chat_template passes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "loupe/io.h"
#include "loupe/text.h"
#include "template_eval.h"

struct lp_chat_template {
    lp_tarena arena;
    lp_tnode *root;
    char *name;
};

lp_status lp_chat_template_parse(const char *src, size_t len, const char *name, lp_chat_template **out)
{
    *out = NULL;
    if (!name) name = "chat template";
    if (!src) return lp_err(LP_STATUS_INVALID_ARG, "%s: no template text", name);
    lp_chat_template *t = lp_calloc(1, sizeof *t);
    if (!t || !(t->name = lp_strdup(name))) {
        free(t);
        return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", name);
    }
    lp_ttok *toks;
    size_t n;
    lp_status st = lp_tmpl_lex(&t->arena, t->name, src, len, &toks, &n);
    if (!st) st = lp_tmpl_parse(&t->arena, t->name, toks, n, &t->root);
    if (st) {
        lp_chat_template_free(t);
        return st;
    }
    *out = t;
    return LP_OK;
}

void lp_chat_template_free(lp_chat_template *t)
{
    if (!t) return;
    lp_tarena_free(&t->arena);
    free(t->name);
    free(t);
}

/* Parses a JSON text into arena values; what names the variable in errors. */
static lp_status json_var(lp_tarena *a, const char *tname, const char *what, const char *json, int want, lp_tv *out)
{
    bool oom;
    cJSON *j = lp_json_parse(json, strlen(json), NULL, &oom);
    if (oom) return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory reading %s", tname, what);
    if (!j) return lp_err(LP_STATUS_FORMAT, "%s: %s is not valid JSON", tname, what);
    int bad = (want == 'a' && !cJSON_IsArray(j)) || (want == 'o' && !cJSON_IsObject(j));
    int r = bad ? 0 : lp_tv_from_json(a, j, out, 0);
    cJSON_Delete(j);
    if (bad) return lp_err(LP_STATUS_FORMAT, "%s: %s must be a JSON %s", tname, what, want == 'a' ? "array" : "object");
    if (r == -2) return lp_err(LP_STATUS_RANGE, "%s: %s is nested too deeply", tname, what);
    if (r) return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory reading %s", tname, what);
    return LP_OK;
}

static lp_status set_str(lp_tarena *a, lp_tdict *g, const char *k, const char *v)
{
    if (!v) return LP_OK;
    if (lp_tdict_set(a, g, lp_tv_str(k, strlen(k)), lp_tv_str(v, strlen(v)))) return lp_err(LP_STATUS_NO_MEMORY, "out of memory");
    return LP_OK;
}

lp_status lp_chat_template_render(const lp_chat_template *t, const lp_chat_vars *vars, char **out, size_t *out_len)
{
    *out = NULL;
    if (out_len) *out_len = 0;
    if (!vars || !vars->messages_json) return lp_err(LP_STATUS_INVALID_ARG, "%s: no messages to render", t->name);
    lp_tarena a = {0};
    lp_tbuf b = {0};
    lp_tdict *g = lp_tarena_alloc(&a, sizeof *g);
    lp_status st = g ? LP_OK : lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", t->name);
    lp_tv v = {.kind = LP_TV_NONE};
    /* extra variables first, so the named ones below win as in apply_chat_template */
    if (!st && vars->extra_json && !(st = json_var(&a, t->name, "the extra variables", vars->extra_json, 'o', &v)))
        for (size_t i = 0; i < v.u.d->n && !st; i++)
            if (lp_tdict_set(&a, g, v.u.d->keys[i], v.u.d->vals[i])) st = lp_err(LP_STATUS_NO_MEMORY, "out of memory");
    lp_tv tools = {.kind = LP_TV_NONE}; /* transformers passes tools=None and documents=None */
    if (!st && !(st = json_var(&a, t->name, "messages", vars->messages_json, 0, &v))) {
        if (v.kind == LP_TV_DICT) { /* a conversation line: {"messages": [...], "tools": [...]} */
            const lp_tv *m = lp_tdict_get(v.u.d, "messages", 8), *tl = lp_tdict_get(v.u.d, "tools", 5);
            if (tl && tl->kind == LP_TV_LIST) tools = *tl;
            v = m ? *m : (lp_tv){.kind = LP_TV_NONE};
        }
        if (v.kind != LP_TV_LIST) st = lp_err(LP_STATUS_FORMAT, "%s: messages must be a JSON array (or an object with one under \"messages\")", t->name);
        else if (lp_tdict_set(&a, g, lp_tv_str("messages", 8), v)) st = lp_err(LP_STATUS_NO_MEMORY, "out of memory");
    }
    v = tools;
    if (!st && vars->tools_json) st = json_var(&a, t->name, "tools", vars->tools_json, 'a', &v);
    if (!st && (lp_tdict_set(&a, g, lp_tv_str("tools", 5), v) ||
                lp_tdict_set(&a, g, lp_tv_str("documents", 9), (lp_tv){.kind = LP_TV_NONE}) ||
                lp_tdict_set(&a, g, lp_tv_str("add_generation_prompt", 21), lp_tv_bool(vars->add_generation_prompt))))
        st = lp_err(LP_STATUS_NO_MEMORY, "out of memory");
    if (!st) st = set_str(&a, g, "bos_token", vars->bos_token);
    if (!st) st = set_str(&a, g, "eos_token", vars->eos_token);
    if (!st) st = lp_tmpl_render(&a, t->name, t->root, g, &b);
    if (!st && !b.p && lp_tbuf_put(&b, "", 0)) st = lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", t->name);
    lp_tarena_free(&a);
    if (st) {
        lp_tbuf_free(&b);
        return st;
    }
    *out = b.p;
    if (out_len) *out_len = b.n;
    return LP_OK;
}

/* A special token in tokenizer_config.json: a string, or an AddedToken {"content": ...}. */
static lp_status token_field(const cJSON *root, const char *key, char **out)
{
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(root, key);
    if (cJSON_IsObject(f)) f = cJSON_GetObjectItemCaseSensitive(f, "content");
    if (!cJSON_IsString(f)) return LP_OK;
    return (*out = lp_strdup(f->valuestring)) ? LP_OK : lp_err(LP_STATUS_NO_MEMORY, "out of memory");
}

lp_status lp_chat_template_config_load(const char *path, lp_chat_template_config *out)
{
    memset(out, 0, sizeof *out);
    size_t plen = strlen(path);
    char *file = lp_malloc(plen + 32);
    if (!file) return lp_err(LP_STATUS_NO_MEMORY, "out of memory");
    int is_json = plen >= 5 && !strcmp(path + plen - 5, ".json");
    snprintf(file, plen + 32, is_json ? "%s" : "%s/tokenizer_config.json", path);
    char *text = NULL;
    size_t len;
    lp_status st = lp_file_read_all(file, &text, &len);
    if (st) {
        free(file);
        return st;
    }
    bool oom;
    cJSON *root = lp_json_parse(text, len, NULL, &oom);
    free(text);
    if (oom) {
        free(file);
        return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", path);
    }
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        st = lp_err(LP_STATUS_FORMAT, "%s: not a JSON object", file);
        free(file);
        return st;
    }
    const cJSON *ct = cJSON_GetObjectItemCaseSensitive(root, "chat_template"), *src = NULL;
    if (cJSON_IsString(ct)) {
        src = ct;
    } else if (cJSON_IsArray(ct)) { /* [{"name": "default", "template": "..."}, ...] */
        const cJSON *e;
        cJSON_ArrayForEach(e, ct) {
            const cJSON *nm = cJSON_GetObjectItemCaseSensitive(e, "name");
            if (cJSON_IsString(nm) && !strcmp(nm->valuestring, "default")) src = cJSON_GetObjectItemCaseSensitive(e, "template");
        }
        if (!cJSON_IsString(src)) src = NULL;
    }
    if (!src)
        st = lp_err(LP_STATUS_NOT_FOUND, "%s: no chat template (\"chat_template\" missing%s)", file,
                    cJSON_IsArray(ct) ? ": no entry named \"default\"" : " or not a string");
    else if (!(out->template_src = lp_strdup(src->valuestring)))
        st = lp_err(LP_STATUS_NO_MEMORY, "out of memory");
    if (!st) st = token_field(root, "bos_token", &out->bos_token);
    if (!st) st = token_field(root, "eos_token", &out->eos_token);
    if (!st && !(out->path = lp_strdup(file))) st = lp_err(LP_STATUS_NO_MEMORY, "out of memory");
    cJSON_Delete(root);
    free(file);
    if (st) lp_chat_template_config_free(out);
    return st;
}

void lp_chat_template_config_free(lp_chat_template_config *c)
{
    free(c->template_src);
    free(c->bos_token);
    free(c->eos_token);
    free(c->path);
    memset(c, 0, sizeof *c);
}
