/* Instruction-tuning rows: JSONL in the text, prompt/response, alpaca or chat-messages layout,
 * read into conversations (role, content turns) that a chat template can render. The layout
 * comes from the first row's keys unless the caller names it; a bad row names file and line. */
#include "data_internal.h"

#include "loupe/io.h"

#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const format_names[] = {"auto", "text", "prompt-response", "alpaca", "messages"};
static const char *const role_names[] = {"text", "system", "user", "assistant"};

const char *lp_sft_format_name(lp_sft_format f)
{
    return (unsigned)f < sizeof format_names / sizeof format_names[0] ? format_names[f] : "?";
}

const char *lp_sft_role_name(lp_sft_role r)
{
    return (unsigned)r < sizeof role_names / sizeof role_names[0] ? role_names[r] : "?";
}

lp_status lp_sft_format_parse(const char *s, lp_sft_format *out)
{
    for (size_t i = 0; s && i < sizeof format_names / sizeof format_names[0]; i++)
        if (!strcmp(s, format_names[i])) {
            *out = (lp_sft_format)i;
            return LP_OK;
        }
    return lp_err(LP_STATUS_INVALID_ARG,
                  "data format '%s': expected auto, text, prompt-response, alpaca or messages", s ? s : "");
}

void lp_sft_free(lp_sft_dataset *ds)
{
    if (!ds)
        return;
    for (int64_t i = 0; ds->first && i < ds->first[ds->n]; i++)
        free(ds->turns[i].content);
    free(ds->turns);
    free(ds->first);
    free(ds->lines);
    free(ds->source);
    memset(ds, 0, sizeof *ds);
}

/* A reader's growing state: turns and rows so far. */
typedef struct sft_build {
    lp_sft_dataset *ds;
    size_t cap_rows, cap_turns;
    int64_t n_turns;
} sft_build;

static lp_status add_turn(sft_build *b, lp_sft_role role, const char *a, const char *sep, const char *c)
{
    if ((size_t)b->n_turns == b->cap_turns) {
        size_t cap = b->cap_turns ? 2 * b->cap_turns : 256;
        lp_sft_turn *t = lp_realloc(b->ds->turns, cap * sizeof *t);
        if (!t)
            return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", b->ds->source);
        b->ds->turns = t, b->cap_turns = cap;
    }
    size_t la = strlen(a), ls = sep ? strlen(sep) : 0, lc = c ? strlen(c) : 0;
    char *text = lp_malloc(la + ls + lc + 1);
    if (!text)
        return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", b->ds->source);
    memcpy(text, a, la);
    if (ls)
        memcpy(text + la, sep, ls);
    if (lc)
        memcpy(text + la + ls, c, lc);
    text[la + ls + lc] = 0;
    b->ds->turns[b->n_turns++] = (lp_sft_turn){role, text};
    return LP_OK;
}

/* The string under key, or NULL with *why set (missing, or not a string). */
static const char *str_key(const cJSON *obj, const char *key, bool optional, char *why, size_t cap)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v) {
        if (!optional)
            snprintf(why, cap, "missing key \"%s\"", key);
        return NULL;
    }
    if (!cJSON_IsString(v)) {
        snprintf(why, cap, "key \"%s\" is not a string", key);
        return NULL;
    }
    size_t bad;
    if (!lp_utf8_valid(v->valuestring, strlen(v->valuestring), &bad)) {
        snprintf(why, cap, "key \"%s\" has invalid UTF-8 at byte %zu", key, bad);
        return NULL;
    }
    return v->valuestring;
}

static lp_sft_format detect(const cJSON *obj)
{
    if (cJSON_GetObjectItemCaseSensitive(obj, "messages"))
        return LP_SFT_FORMAT_MESSAGES;
    if (cJSON_GetObjectItemCaseSensitive(obj, "instruction"))
        return LP_SFT_FORMAT_ALPACA;
    if (cJSON_GetObjectItemCaseSensitive(obj, "prompt"))
        return LP_SFT_FORMAT_PROMPT_RESPONSE;
    if (cJSON_GetObjectItemCaseSensitive(obj, "text"))
        return LP_SFT_FORMAT_TEXT;
    return LP_SFT_FORMAT_AUTO;
}

/* One row's turns; on a bad row, why says what and LP_STATUS_FORMAT returns. */
static lp_status read_row(sft_build *b, const cJSON *obj, char *why, size_t cap)
{
    why[0] = 0;
    const lp_sft_format f = b->ds->format;
    if (f == LP_SFT_FORMAT_TEXT) {
        const char *t = str_key(obj, "text", false, why, cap);
        if (t && !*t)
            snprintf(why, cap, "empty \"text\"");
        return why[0] ? LP_STATUS_FORMAT : add_turn(b, LP_SFT_ROLE_TEXT, t, NULL, NULL);
    }
    if (f == LP_SFT_FORMAT_PROMPT_RESPONSE || f == LP_SFT_FORMAT_ALPACA) {
        const bool alpaca = f == LP_SFT_FORMAT_ALPACA;
        const char *p = str_key(obj, alpaca ? "instruction" : "prompt", false, why, cap);
        const char *in = alpaca && p ? str_key(obj, "input", true, why, cap) : NULL;
        const char *rkey = alpaca ? "output"
                           : !cJSON_GetObjectItemCaseSensitive(obj, "response") &&
                                   cJSON_GetObjectItemCaseSensitive(obj, "completion")
                               ? "completion"
                               : "response";
        const char *r = p && !why[0] ? str_key(obj, rkey, false, why, cap) : NULL;
        if (why[0])
            return LP_STATUS_FORMAT;
        lp_status st = add_turn(b, LP_SFT_ROLE_USER, p, in && *in ? "\n\n" : NULL, in && *in ? in : NULL);
        return st != LP_OK ? st : add_turn(b, LP_SFT_ROLE_ASSISTANT, r, NULL, NULL);
    }
    const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(obj, "messages");
    if (!msgs) {
        snprintf(why, cap, "missing key \"messages\"");
        return LP_STATUS_FORMAT;
    }
    if (!cJSON_IsArray(msgs) || !cJSON_GetArraySize(msgs)) {
        snprintf(why, cap,
                 cJSON_IsArray(msgs) ? "empty conversation (\"messages\" has no message)"
                                     : "\"messages\" is not an array");
        return LP_STATUS_FORMAT;
    }
    int i = 0;
    for (const cJSON *m = msgs->child; m; m = m->next, i++) {
        char sub[160] = "";
        const char *role = cJSON_IsObject(m) ? str_key(m, "role", false, sub, sizeof sub) : NULL;
        const char *content = role ? str_key(m, "content", false, sub, sizeof sub) : NULL;
        if (!content) {
            snprintf(why, cap, "message %d: %s", i + 1, cJSON_IsObject(m) ? sub : "not an object");
            return LP_STATUS_FORMAT;
        }
        lp_sft_role r = LP_SFT_ROLE_TEXT;
        for (int k = LP_SFT_ROLE_SYSTEM; k <= LP_SFT_ROLE_ASSISTANT; k++)
            if (!strcmp(role, role_names[k]))
                r = (lp_sft_role)k;
        if (r == LP_SFT_ROLE_TEXT) {
            snprintf(why, cap, "message %d has unknown role \"%.40s\" (expected system, user or assistant)",
                     i + 1, role);
            return LP_STATUS_FORMAT;
        }
        lp_status st = add_turn(b, r, content, NULL, NULL);
        if (st != LP_OK)
            return st;
    }
    return LP_OK;
}

static lp_status add_row(sft_build *b, int64_t line)
{
    lp_sft_dataset *ds = b->ds;
    if ((size_t)ds->n + 2 > b->cap_rows) {
        size_t cap = b->cap_rows ? 2 * b->cap_rows : 256;
        int64_t *f = lp_realloc(ds->first, cap * sizeof *f);
        if (f)
            ds->first = f;
        int64_t *l = lp_realloc(ds->lines, cap * sizeof *l);
        if (l)
            ds->lines = l;
        if (!f || !l)
            return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", ds->source);
        b->cap_rows = cap;
    }
    ds->lines[ds->n] = line;
    ds->first[++ds->n] = b->n_turns;
    return LP_OK;
}

lp_status lp_sft_load_buffer(const char *name, const char *buf, size_t len, lp_sft_format format,
                             lp_sft_dataset *ds)
{
    memset(ds, 0, sizeof *ds);
    if (!(ds->source = lp_strdup(name ? name : "<buffer>")))
        return lp_err(LP_STATUS_NO_MEMORY, "instruction data: out of memory");
    sft_build b = {.ds = ds};
    ds->format = format;
    if (!(ds->first = lp_calloc(1, sizeof *ds->first)))
        return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", ds->source);
    b.cap_rows = 1;
    if (len >= 3 && !memcmp(buf, "\xEF\xBB\xBF", 3)) // a UTF-8 byte-order mark
        buf += 3, len -= 3;
    int64_t line = 0;
    for (size_t at = 0; at < len;) {
        const char *nl = memchr(buf + at, '\n', len - at);
        size_t n = nl ? (size_t)(nl - (buf + at)) : len - at;
        const char *txt = buf + at;
        at += n + 1;
        line++;
        size_t k = 0;
        while (k < n && (txt[k] == ' ' || txt[k] == '\t' || txt[k] == '\r'))
            k++;
        if (k == n) // blank lines between rows are allowed, as in JSON Lines readers
            continue;
        if (memchr(txt, 0, n))
            return lp_err(LP_STATUS_FORMAT, "%s:%lld: NUL byte in the line", ds->source, (long long)line);
        bool oom;
        cJSON *obj = lp_json_parse(txt, n, NULL, &oom);
        if (oom)
            return lp_err(LP_STATUS_NO_MEMORY, "%s:%lld: out of memory parsing the JSON", ds->source, (long long)line);
        if (!obj || !cJSON_IsObject(obj)) {
            cJSON_Delete(obj);
            return lp_err(LP_STATUS_FORMAT, "%s:%lld: %s", ds->source, (long long)line,
                          obj ? "not a JSON object" : "invalid JSON");
        }
        if (ds->format == LP_SFT_FORMAT_AUTO && (ds->format = detect(obj)) == LP_SFT_FORMAT_AUTO) {
            cJSON_Delete(obj);
            return lp_err(
                LP_STATUS_FORMAT,
                "%s:%lld: no key to tell the data format by (\"text\", \"prompt\", \"instruction\" or "
                "\"messages\"); name it with --data-format",
                ds->source, (long long)line);
        }
        char why[256];
        lp_status st = read_row(&b, obj, why, sizeof why);
        cJSON_Delete(obj);
        if (st == LP_OK)
            st = add_row(&b, line);
        // a row not added (bad, or no room to add it): its turns so far, which lp_sft_free
        // does not see
        for (int64_t k = ds->first[ds->n]; st != LP_OK && k < b.n_turns; k++)
            free(ds->turns[k].content);
        if (st == LP_STATUS_FORMAT)
            return lp_err(st, "%s:%lld: %s (%s data)", ds->source, (long long)line, why,
                          lp_sft_format_name(ds->format));
        if (st != LP_OK)
            return st;
    }
    if (!ds->n)
        return lp_err(LP_STATUS_FORMAT, "%s: no rows", ds->source);
    return LP_OK;
}

lp_status lp_sft_load(const char *path, lp_sft_format format, lp_sft_dataset *ds)
{
    memset(ds, 0, sizeof *ds);
    char *buf = NULL;
    size_t len = 0;
    lp_status st = lp_file_read_all(path, &buf, &len);
    if (st != LP_OK)
        return st;
    st = lp_sft_load_buffer(path, buf, len, format, ds);
    free(buf);
    return st;
}
