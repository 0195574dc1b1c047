/* The prompts of `loupe generate`: one --prompt, or a file of one prompt per line, or JSONL
 * lines with "prompt" (a string) or "messages" (a conversation for --chat). Each prompt keeps
 * its line number so errors (a bad line, a prompt longer than the context) can name it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli_gen.h"
#include "loupe/io.h"

void lp_cli_gen_prompts_free(lp_cli_gen_prompts *p)
{
    for (size_t i = 0; i < p->n; i++) {
        free(p->items[i].text);
        free(p->items[i].messages_json);
    }
    free(p->items);
    memset(p, 0, sizeof *p);
}

static lp_status push(lp_cli_gen_prompts *p, char *text, char *messages, size_t line)
{
    if (!text && !messages)
        return lp_err(LP_STATUS_NO_MEMORY, "prompts: out of memory");
    lp_cli_gen_prompt *n = realloc(p->items, (p->n + 1) * sizeof *n);
    if (!n) {
        free(text);
        free(messages);
        return lp_err(LP_STATUS_NO_MEMORY, "prompts: out of memory");
    }
    p->items = n;
    p->items[p->n++] = (lp_cli_gen_prompt){.text = text, .messages_json = messages, .line = line};
    return LP_OK;
}

lp_status lp_cli_gen_prompt_one(lp_cli_gen_prompts *p, const char *text)
{
    return push(p, strdup(text), NULL, 0);
}

/* One JSONL line: {"prompt": "..."} or {"messages": [...]} */
static lp_status parse_json_line(lp_cli_gen_prompts *p, const char *path, size_t lineno, const char *line)
{
    bool oom;
    cJSON *j = lp_json_parse(line, strlen(line), NULL, &oom);
    if (oom)
        return lp_err(LP_STATUS_NO_MEMORY, "%s line %zu: out of memory parsing the JSON", path, lineno);
    if (!j || !cJSON_IsObject(j)) {
        cJSON_Delete(j);
        return lp_err(LP_STATUS_FORMAT, "%s line %zu: not a JSON object", path, lineno);
    }
    const cJSON *pr = cJSON_GetObjectItemCaseSensitive(j, "prompt");
    const cJSON *ms = cJSON_GetObjectItemCaseSensitive(j, "messages");
    lp_status st;
    if (cJSON_IsString(pr)) {
        st = push(p, strdup(pr->valuestring), NULL, lineno);
    } else if (cJSON_IsArray(ms) && cJSON_GetArraySize(ms) > 0) {
        char *s = cJSON_PrintUnformatted(ms);
        st = push(p, NULL, s, lineno);
    } else {
        st = lp_err(LP_STATUS_FORMAT, "%s line %zu: needs \"prompt\" (a string) or \"messages\" (a non-empty array)",
                    path, lineno);
    }
    cJSON_Delete(j);
    return st;
}

lp_status lp_cli_gen_prompts_read(lp_cli_gen_prompts *p, const char *path)
{
    FILE *f = strcmp(path, "-") ? fopen(path, "r") : stdin;
    if (!f)
        return lp_err(LP_STATUS_IO, "%s: cannot open the prompts file", path);
    char *line = NULL;
    size_t cap = 0, lineno = 0;
    ssize_t n;
    lp_status st = LP_OK;
    while (st == LP_OK && (n = getline(&line, &cap, f)) >= 0) {
        lineno++;
        size_t len = (size_t)n;
        while (len && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = 0;
        if (!len)
            continue; // blank lines separate nothing
        if (memchr(line, 0, len))
            st = lp_err(LP_STATUS_FORMAT, "%s line %zu: contains a NUL byte", path, lineno);
        else if (line[0] == '{')
            st = parse_json_line(p, path, lineno, line);
        else
            st = push(p, strdup(line), NULL, lineno);
    }
    free(line);
    if (f != stdin)
        fclose(f);
    if (st == LP_OK && p->n == 0)
        st = lp_err(LP_STATUS_FORMAT, "%s: no prompts (the file is empty)", path);
    return st;
}
