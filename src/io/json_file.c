/* JSON files the way every loupe writer and reader wants them: written pretty-printed and
 * atomically (temporary name, then rename), read whole and parsed, errors naming the file. */
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "loupe/io.h"

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
    *out = cJSON_ParseWithLength(text, len);
    free(text);
    return *out ? LP_OK : lp_err(LP_STATUS_FORMAT, "%s: not valid JSON", path);
}
