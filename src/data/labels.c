/* Label maps: class names by id, written and read as label_mappings.json
 * ({"label2id": ..., "id2label": ...}, the shape seed 001 and Hugging Face configs use). */
#include "loupe/data.h"

#include "loupe/io.h"

#include <cJSON.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

void lp_label_map_free(lp_label_map *m)
{
    if (!m)
        return;
    for (int32_t i = 0; i < m->n && m->names; i++)
        free(m->names[i]);
    free(m->names);
    free(m->sorted);
    m->names = NULL;
    m->sorted = NULL;
    m->n = 0;
}

/* qsort has no context argument; the names being sorted are passed through this. */
static _Thread_local char *const *sort_names;

static int cmp_by_name(const void *a, const void *b)
{
    return strcmp(sort_names[*(const int32_t *)a], sort_names[*(const int32_t *)b]);
}

lp_status lp_label_map_from_names(lp_label_map *m, const char *const *names, int32_t n)
{
    memset(m, 0, sizeof *m);
    if (n < 0 || (n > 0 && !names))
        return lp_err(LP_STATUS_INVALID_ARG, "label map: bad name list (n=%d)", (int)n);
    for (int32_t i = 0; i < n; i++)
        if (!names[i] || !names[i][0])
            return lp_err(LP_STATUS_INVALID_ARG, "label map: label %d has an empty name", (int)i);
    size_t cnt = n ? (size_t)n : 1;
    m->names = lp_calloc(cnt, sizeof *m->names);
    m->sorted = lp_malloc(cnt * sizeof *m->sorted);
    if (!m->names || !m->sorted) {
        lp_label_map_free(m);
        return lp_err(LP_STATUS_NO_MEMORY, "label map: out of memory");
    }
    for (int32_t i = 0; i < n; i++) {
        m->names[i] = lp_strdup(names[i]);
        m->n = i + 1;
        if (!m->names[i]) {
            lp_label_map_free(m);
            return lp_err(LP_STATUS_NO_MEMORY, "label map: out of memory");
        }
        m->sorted[i] = i;
    }
    /* sorting by name both finds duplicates (neighbours) and serves lookups */
    sort_names = m->names;
    qsort(m->sorted, (size_t)n, sizeof *m->sorted, cmp_by_name);
    for (int32_t k = 1; k < n; k++) {
        int32_t a = m->sorted[k - 1], b = m->sorted[k];
        if (strcmp(m->names[a], m->names[b]) == 0) {
            lp_status st = lp_err(LP_STATUS_INVALID_ARG, "label map: duplicate label '%s' (ids %d and %d)",
                                  m->names[a], (int)(a < b ? a : b), (int)(a < b ? b : a));
            lp_label_map_free(m);
            return st;
        }
    }
    return LP_OK;
}

lp_status lp_label_map_copy(lp_label_map *dst, const lp_label_map *src)
{
    return lp_label_map_from_names(dst, (const char *const *)src->names, src->n);
}

int32_t lp_label_map_find(const lp_label_map *m, const char *name)
{
    int32_t lo = 0, hi = m->n - 1;
    while (lo <= hi) {
        int32_t mid = lo + (hi - lo) / 2;
        int c = strcmp(m->names[m->sorted[mid]], name);
        if (c == 0)
            return m->sorted[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

lp_status lp_label_map_save(const lp_label_map *m, const char *path)
{
    cJSON *root = cJSON_CreateObject();
    cJSON *l2i = cJSON_AddObjectToObject(root, "label2id");
    cJSON *i2l = cJSON_AddObjectToObject(root, "id2label");
    int ok = root && l2i && i2l;
    for (int32_t i = 0; ok && i < m->n; i++) {
        char key[16];
        snprintf(key, sizeof key, "%d", (int)i);
        ok = cJSON_AddNumberToObject(l2i, m->names[i], i) && cJSON_AddStringToObject(i2l, key, m->names[i]);
    }
    ok = ok && cJSON_AddNumberToObject(root, "num_labels", m->n);
    char *text = ok ? cJSON_Print(root) : NULL;
    cJSON_Delete(root);
    if (!text)
        return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory building label map", path);
    size_t len = strlen(text);
    text[len] = '\n'; /* replace the NUL: the file ends in a newline, written by length */
    lp_status st = lp_file_write_atomic(path, text, len + 1);
    free(text);
    return st;
}

/* Parses an id written as a JSON object key ("0", "17"): digits only, no sign, no
 * leading zeros, below INT32_MAX. */
static int parse_id_key(const char *s, int32_t *out)
{
    if (!s[0] || (s[0] == '0' && s[1]))
        return 0;
    long long v = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9')
            return 0;
        v = v * 10 + (*p - '0');
        if (v >= INT32_MAX)
            return 0;
    }
    *out = (int32_t)v;
    return 1;
}

static int count_children(const cJSON *obj)
{
    int n = 0;
    for (const cJSON *c = obj ? obj->child : NULL; c; c = c->next)
        n++;
    return n;
}

lp_status lp_label_map_parse(lp_label_map *m, const char *name, const char *json, size_t len)
{
    memset(m, 0, sizeof *m);
    bool oom;
    cJSON *root = lp_json_parse(json, len, NULL, &oom);
    if (!root)
        return oom ? lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory parsing the JSON", name)
                   : lp_err(LP_STATUS_FORMAT, "%s: not valid JSON", name);
    lp_status st = LP_OK;
    const cJSON *i2l = cJSON_GetObjectItemCaseSensitive(root, "id2label");
    const cJSON *l2i = cJSON_GetObjectItemCaseSensitive(root, "label2id");
    char **names = NULL;
    int n = 0;
    if (!cJSON_IsObject(root)) {
        st = lp_err(LP_STATUS_FORMAT, "%s: expected a JSON object with id2label/label2id", name);
        goto done;
    }
    if ((i2l && !cJSON_IsObject(i2l)) || (l2i && !cJSON_IsObject(l2i)) || (!i2l && !l2i)) {
        st = lp_err(LP_STATUS_FORMAT, "%s: needs an \"id2label\" or \"label2id\" object", name);
        goto done;
    }
    n = count_children(i2l ? i2l : l2i);
    if (i2l && l2i && count_children(l2i) != n) {
        st = lp_err(LP_STATUS_FORMAT, "%s: id2label has %d entries but label2id has %d", name, n,
                    count_children(l2i));
        goto done;
    }
    if (n == 0) {
        st = lp_err(LP_STATUS_FORMAT, "%s: the label map is empty", name);
        goto done;
    }
    names = lp_calloc((size_t)n, sizeof *names);
    if (!names) {
        st = lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", name);
        goto done;
    }
    if (i2l) {
        for (const cJSON *c = i2l->child; c; c = c->next) {
            int32_t id;
            if (!parse_id_key(c->string, &id) || id >= n) {
                st = lp_err(LP_STATUS_FORMAT, "%s: id2label key '%s' is not an id in [0, %d)", name,
                            c->string, n);
                goto done;
            }
            if (!cJSON_IsString(c) || !c->valuestring[0]) {
                st = lp_err(LP_STATUS_FORMAT, "%s: id2label[\"%s\"] is not a non-empty string", name,
                            c->string);
                goto done;
            }
            if (names[id]) {
                st = lp_err(LP_STATUS_FORMAT, "%s: id %d appears twice in id2label", name, (int)id);
                goto done;
            }
            names[id] = c->valuestring;
        }
    }
    if (l2i) {
        for (const cJSON *c = l2i->child; c; c = c->next) {
            double v = cJSON_IsNumber(c) ? c->valuedouble : -1.0;
            if (!(v >= 0 && v < n && v == (double)(int32_t)v)) {
                st = lp_err(LP_STATUS_FORMAT, "%s: label2id[\"%s\"] is not an id in [0, %d)", name,
                            c->string, n);
                goto done;
            }
            int32_t id = (int32_t)v;
            if (i2l) {
                if (strcmp(names[id], c->string) != 0) {
                    st = lp_err(LP_STATUS_FORMAT, "%s: label2id[\"%s\"] = %d but id2label[\"%d\"] = \"%s\"",
                                name, c->string, (int)id, (int)id, names[id]);
                    goto done;
                }
            } else {
                if (names[id]) {
                    st = lp_err(LP_STATUS_FORMAT, "%s: id %d appears twice in label2id", name, (int)id);
                    goto done;
                }
                names[id] = c->string;
            }
        }
    }
    for (int i = 0; i < n; i++)
        if (!names[i]) {
            st = lp_err(LP_STATUS_FORMAT, "%s: no label for id %d", name, i);
            goto done;
        }
    st = lp_label_map_from_names(m, (const char *const *)names, n);
    if (st != LP_OK)
        lp_err_wrap(st, "%s", name);
done:
    free(names);
    cJSON_Delete(root);
    return st;
}

lp_status lp_label_map_load(lp_label_map *m, const char *path)
{
    char *buf;
    size_t len;
    memset(m, 0, sizeof *m);
    lp_status st = lp_file_read_all(path, &buf, &len);
    if (st != LP_OK)
        return st;
    st = lp_label_map_parse(m, path, buf, len);
    free(buf);
    return st;
}
