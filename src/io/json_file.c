/* JSON files the way every loupe writer and reader wants them: written pretty-printed and
 * atomically (temporary name, then rename), read whole and parsed, errors naming the file. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "io_internal.h"
#include "loupe/io.h"

/* cJSON allocates through these once lp_json_parse has run: counted by the torture mode, and
 * a failed allocation is remembered so that a parse can tell out-of-memory from bad text. */
static _Thread_local bool tl_oom;
static pthread_once_t hooks_once = PTHREAD_ONCE_INIT;

static void *hook_malloc(size_t n)
{
    void *p = lp_malloc(n);
    if (!p)
        tl_oom = true;
    return p;
}

static void install_hooks(void)
{
    cJSON_Hooks h = {hook_malloc, free};
    cJSON_InitHooks(&h);
}

void lp_json_oom_begin(void)
{
    pthread_once(&hooks_once, install_hooks);
    tl_oom = false;
}

bool lp_json_oom_end(void) { return tl_oom; }

void lp_json_arr_add(cJSON *arr, cJSON *item)
{
    if (!arr || !cJSON_AddItemToArray(arr, item))
        cJSON_Delete(item);
}

void lp_json_obj_add(cJSON *obj, const char *key, cJSON *item)
{
    if (!obj || !cJSON_AddItemToObject(obj, key, item))
        cJSON_Delete(item);
}

void lp_json_obj_replace(cJSON *obj, const char *key, cJSON *item)
{
    if (!obj || !cJSON_ReplaceItemInObject(obj, key, item))
        cJSON_Delete(item);
}

struct cJSON *lp_json_parse(const char *text, size_t len, const char **end, bool *oom)
{
    pthread_once(&hooks_once, install_hooks);
    tl_oom = false;
    cJSON *root = end ? cJSON_ParseWithLengthOpts(text, len, end, 0) : cJSON_ParseWithLength(text, len);
    *oom = !root && tl_oom;
    return root;
}

double lp_json_num(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

void lp_json_str(char *dst, size_t cap, const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    snprintf(dst, cap, "%s", cJSON_IsString(v) ? v->valuestring : "?");
}

lp_status lp_json_write_file(const char *path, struct cJSON *j)
{
    char *text = j ? cJSON_Print(j) : NULL;
    cJSON_Delete(j);
    if (!text)
        return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", path);
    lp_status st = lp_file_write_atomic(path, text, strlen(text));
    free(text);
    return st;
}

lp_status lp_json_read_file(const char *path, struct cJSON **out)
{
    *out = NULL;
    char *text = NULL;
    size_t len = 0;
    lp_status st = lp_file_read_all(path, &text, &len);
    if (st != LP_OK)
        return st;
    bool oom;
    *out = lp_json_parse(text, len, NULL, &oom);
    free(text);
    return *out ? LP_OK
                : oom ? lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory parsing JSON", path)
                      : lp_err(LP_STATUS_FORMAT, "%s: not valid JSON", path);
}
