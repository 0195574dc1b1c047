/* File readers: delimited text (CSV with RFC 4180 quoting, TSV without) and JSON Lines.
 * They cut the buffer into records, pick the chosen columns and hand each row to the
 * sink, which validates it; structural problems become bad rows with their line. */
#include "data_internal.h"

#include "loupe/io.h"

#include <cJSON.h>
#include <stdlib.h>
#include <string.h>

int lp_utf8_valid(const char *str, size_t len, size_t *bad_at)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;
    while (i < len) {
        unsigned c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        int extra;
        uint32_t cp, min;
        if (c >= 0xC2 && c <= 0xDF) {
            extra = 1, cp = c & 0x1F, min = 0x80;
        } else if (c >= 0xE0 && c <= 0xEF) {
            extra = 2, cp = c & 0x0F, min = 0x800;
        } else if (c >= 0xF0 && c <= 0xF4) {
            extra = 3, cp = c & 0x07, min = 0x10000;
        } else {
            *bad_at = i;
            return 0;
        }
        if (i + (size_t)extra >= len) { /* truncated sequence */
            *bad_at = i;
            return 0;
        }
        for (int k = 1; k <= extra; k++) {
            unsigned cc = s[i + (size_t)k];
            if ((cc & 0xC0) != 0x80) {
                *bad_at = i;
                return 0;
            }
            cp = (cp << 6) | (cc & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
            *bad_at = i;
            return 0;
        }
        i += (size_t)extra + 1;
    }
    return 1;
}

/* ---- delimited ------------------------------------------------------------------- */

/* One record's fields, unescaped into a growable buffer; field k is
 * buf[off[k] .. off[k] + flen[k]) followed by a NUL. */
typedef struct record {
    char *buf;
    size_t len, cap;
    size_t *off, *flen;
    int n, fcap;
} record;

static int rec_putc(record *r, char c)
{
    char *b = lp_grow(r->buf, &r->cap, r->len + 2, 1, 256); /* and room for a NUL */
    if (!b)
        return 0;
    r->buf = b;
    r->buf[r->len++] = c;
    return 1;
}

static int rec_start_field(record *r)
{
    if (r->n == r->fcap) {
        int cap = r->fcap ? r->fcap * 2 : 16;
        size_t *o = lp_realloc(r->off, (size_t)cap * sizeof *o);
        if (!o)
            return 0;
        r->off = o;
        size_t *l = lp_realloc(r->flen, (size_t)cap * sizeof *l);
        if (!l)
            return 0;
        r->flen = l;
        r->fcap = cap;
    }
    r->off[r->n] = r->len;
    r->flen[r->n] = 0;
    r->n++;
    return 1;
}

static int rec_end_field(record *r)
{
    r->flen[r->n - 1] = r->len - r->off[r->n - 1];
    return rec_putc(r, '\0');
}

static void rec_free(record *r)
{
    free(r->buf);
    free(r->off);
    free(r->flen);
}

enum { REC_OK, REC_EOF, REC_NOMEM, REC_BAD };

/* Reads the record starting at *pos into r. Advances *pos past its line end and *line
 * by the newlines consumed. On REC_BAD, *why says what is wrong and *pos is moved to
 * the next line so reading can go on (skip_bad_rows). A line that is empty (or only
 * "\r") is returned as a record with n == 0. */
static int read_record(const char *b, size_t len, size_t *pos, int64_t *line, char sep, record *r,
                       const char **why)
{
    size_t i = *pos;
    r->len = 0;
    r->n = 0;
    if (i >= len)
        return REC_EOF;
    if (b[i] == '\n' || (b[i] == '\r' && (i + 1 == len || b[i + 1] == '\n'))) {
        *pos = b[i] == '\n' ? i + 1 : (i + 1 == len ? len : i + 2);
        (*line)++;
        return REC_OK;
    }
    for (;;) {
        if (!rec_start_field(r))
            return REC_NOMEM;
        if (sep == ',' && i < len && b[i] == '"') {
            i++;
            for (;;) {
                if (i >= len) {
                    *why = "unterminated quoted field";
                    *pos = len;
                    return REC_BAD;
                }
                char c = b[i];
                if (c == '"') {
                    if (i + 1 < len && b[i + 1] == '"') {
                        if (!rec_putc(r, '"'))
                            return REC_NOMEM;
                        i += 2;
                        continue;
                    }
                    i++;
                    break;
                }
                if (c == '\n')
                    (*line)++;
                if (!rec_putc(r, c))
                    return REC_NOMEM;
                i++;
            }
            /* After the closing quote only a separator or the end of the line may follow. */
            if (i < len && b[i] != sep && b[i] != '\n' && !(b[i] == '\r' && (i + 1 == len || b[i + 1] == '\n'))) {
                *why = "unexpected character after a closing quote (quotes inside a field must be doubled)";
                while (i < len && b[i] != '\n')
                    i++;
                *pos = i < len ? i + 1 : len;
                (*line)++;
                return REC_BAD;
            }
        } else {
            while (i < len && b[i] != sep && b[i] != '\n') {
                if (b[i] == '\r' && (i + 1 == len || b[i + 1] == '\n'))
                    break;
                if (!rec_putc(r, b[i]))
                    return REC_NOMEM;
                i++;
            }
        }
        if (!rec_end_field(r))
            return REC_NOMEM;
        if (i < len && b[i] == sep) {
            i++;
            continue;
        }
        /* end of record: "\n", "\r\n", a final "\r", or the end of the buffer */
        if (i < len && b[i] == '\r')
            i++;
        if (i < len && b[i] == '\n')
            i++;
        (*line)++;
        *pos = i;
        return REC_OK;
    }
}

static lp_status nomem(lp_row_sink *s)
{
    return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory while reading", s->name);
}

static int find_field(const record *r, const char *name)
{
    for (int k = 0; k < r->n; k++)
        if (strcmp(r->buf + r->off[k], name) == 0)
            return k;
    return -1;
}

/* Trims spaces around a header name in place (" label" names the column "label"). */
static void trim_field(record *r, int k)
{
    char *f = r->buf + r->off[k];
    size_t n = r->flen[k];
    size_t a = 0;
    while (a < n && (f[a] == ' ' || f[a] == '\t'))
        a++;
    while (n > a && (f[n - 1] == ' ' || f[n - 1] == '\t'))
        n--;
    memmove(f, f + a, n - a);
    f[n - a] = '\0';
    r->flen[k] = n - a;
}

lp_status lp_read_delimited(lp_row_sink *s, const char *buf, size_t len, char sep)
{
    record r = {0};
    size_t pos = 0;
    int64_t line = 1;
    const char *why = NULL;
    lp_status st = LP_OK;
    int rc;
    /* header: the first non-empty record */
    do {
        rc = read_record(buf, len, &pos, &line, sep, &r, &why);
    } while (rc == REC_OK && r.n == 0);
    if (rc == REC_EOF) {
        st = lp_err(LP_STATUS_FORMAT, "%s: empty file (expected a header row and data rows)", s->name);
        goto done;
    }
    if (rc == REC_NOMEM) {
        st = nomem(s);
        goto done;
    }
    if (rc == REC_BAD) {
        st = lp_err(LP_STATUS_FORMAT, "%s: header row: %s", s->name, why);
        goto done;
    }
    int n_cols = r.n;
    const char **names = lp_malloc((size_t)n_cols * sizeof *names);
    if (!names) {
        st = nomem(s);
        goto done;
    }
    for (int k = 0; k < n_cols; k++) {
        trim_field(&r, k);
        names[k] = r.buf + r.off[k];
    }
    st = lp_sink_resolve(s, names, n_cols);
    free(names);
    if (st != LP_OK)
        goto done;
    int ti = find_field(&r, s->text_key);
    int pi = s->pair_key ? find_field(&r, s->pair_key) : -1;
    int li = s->label_key ? find_field(&r, s->label_key) : -1; /* -1: text-only data */
    int64_t rows_seen = 0;
    for (;;) {
        int64_t start = line;
        rc = read_record(buf, len, &pos, &line, sep, &r, &why);
        if (rc == REC_EOF)
            break;
        if (rc == REC_NOMEM) {
            st = nomem(s);
            goto done;
        }
        if (rc == REC_OK && r.n == 0)
            continue; /* blank line */
        rows_seen++;
        if (rc == REC_BAD) {
            st = lp_sink_bad(s, LP_STATUS_FORMAT, start, "%s", why);
        } else if (r.n != n_cols) {
            st = lp_sink_bad(s, LP_STATUS_FORMAT, start, "expected %d fields (as in the header), found %d%s",
                             n_cols, r.n,
                             sep == '\t' ? "" : (r.n > n_cols ? " (quote fields that contain commas)" : ""));
        } else {
            st = lp_sink_row(s, start, r.buf + r.off[ti], r.flen[ti], pi >= 0 ? r.buf + r.off[pi] : NULL,
                             pi >= 0 ? r.flen[pi] : 0, li >= 0 ? r.buf + r.off[li] : NULL, li >= 0 ? r.flen[li] : 0);
        }
        if (st != LP_OK)
            goto done;
    }
    if (rows_seen == 0)
        st = lp_err(LP_STATUS_FORMAT, "%s: header only, no data rows", s->name);
done:
    rec_free(&r);
    return st;
}

/* ---- JSON Lines ---------------------------------------------------------------- */

/* The label of a JSON row as text: strings as they are, integral numbers in decimal.
 * Returns 0 (and *why) when the value cannot be a label. */
static int json_label_text(const cJSON *v, char *tmp, size_t tmp_size, const char **out, const char **why)
{
    if (cJSON_IsString(v)) {
        *out = v->valuestring;
        return 1;
    }
    if (cJSON_IsNumber(v)) {
        double d = v->valuedouble;
        if (!(d > -2147483648.0 && d < 2147483648.0) || d != (double)(int32_t)d) {
            *why = "label is a number but not a 32-bit integer";
            return 0;
        }
        snprintf(tmp, tmp_size, "%d", (int)(int32_t)d);
        *out = tmp;
        return 1;
    }
    *why = "label must be a string or an integer";
    return 0;
}

/* Strings in cJSON are NUL-terminated; a "\u0000" escape would silently cut the text,
 * so a string whose escapes include one is rejected by the caller through this check. */
static int json_has_nul_escape(const char *raw, size_t len)
{
    for (size_t i = 0; i + 5 < len; i++)
        if (raw[i] == '\\') {
            if (memcmp(raw + i + 1, "u0000", 5) == 0)
                return 1;
            i++; /* skip the escaped character ("\\\\" must not start a new escape) */
        }
    return 0;
}

static lp_status jsonl_row(lp_row_sink *s, int64_t line, const char *txt, size_t n)
{
    const char *end = NULL;
    if (memchr(txt, '\0', n))
        return lp_sink_bad(s, LP_STATUS_FORMAT, line, "NUL byte in the line");
    if (json_has_nul_escape(txt, n))
        return lp_sink_bad(s, LP_STATUS_FORMAT, line, "\\u0000 escape in a string");
    bool oom;
    cJSON *obj = lp_json_parse(txt, n, &end, &oom);
    if (!obj) // out of memory is no bad row to skip
        return oom ? lp_err(LP_STATUS_NO_MEMORY, "%s:%lld: out of memory parsing the JSON", s->name, (long long)line)
                   : lp_sink_bad(s, LP_STATUS_FORMAT, line, "invalid JSON");
    lp_status st = LP_OK;
    for (; end && end < txt + n; end++)
        if (*end != ' ' && *end != '\t' && *end != '\r') {
            st = lp_sink_bad(s, LP_STATUS_FORMAT, line, "extra text after the JSON object");
            goto done;
        }
    if (!cJSON_IsObject(obj)) {
        st = lp_sink_bad(s, LP_STATUS_FORMAT, line, "not a JSON object%s",
                         cJSON_IsArray(obj) ? " (JSON Lines needs one object per line, not an array)" : "");
        goto done;
    }
    if (!s->resolved) {
        int n_keys = 0;
        for (cJSON *c = obj->child; c; c = c->next)
            n_keys++;
        const char **keys = lp_malloc((size_t)(n_keys ? n_keys : 1) * sizeof *keys);
        if (!keys) {
            st = nomem(s);
            goto done;
        }
        int k = 0;
        for (cJSON *c = obj->child; c; c = c->next)
            keys[k++] = c->string;
        st = lp_sink_resolve(s, keys, n_keys);
        free(keys);
        if (st != LP_OK) {
            /* With explicit column names resolution never fails; with defaults, a row
             * lacking all of them is a bad row and the next row tries again. */
            char msg[512];
            const char *m = lp_err_msg();
            size_t nl = strlen(s->name);
            if (strncmp(m, s->name, nl) == 0 && m[nl] == ':' && m[nl + 1] == ' ')
                m += nl + 2; /* the row message names the file already */
            snprintf(msg, sizeof msg, "%s", m);
            st = lp_sink_bad(s, LP_STATUS_NOT_FOUND, line, "%s", msg);
            goto done;
        }
    }
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(obj, s->text_key);
    const cJSON *p = s->pair_key ? cJSON_GetObjectItemCaseSensitive(obj, s->pair_key) : NULL;
    const cJSON *l = s->label_key ? cJSON_GetObjectItemCaseSensitive(obj, s->label_key) : NULL;
    const char *why = NULL, *label = NULL;
    char tmp[32];
    if (!t)
        st = lp_sink_bad(s, LP_STATUS_NOT_FOUND, line, "missing key \"%s\"", s->text_key);
    else if (!cJSON_IsString(t))
        st = lp_sink_bad(s, LP_STATUS_FORMAT, line, "\"%s\" is not a string", s->text_key);
    else if (s->pair_key && !p)
        st = lp_sink_bad(s, LP_STATUS_NOT_FOUND, line, "missing key \"%s\"", s->pair_key);
    else if (s->pair_key && !cJSON_IsString(p))
        st = lp_sink_bad(s, LP_STATUS_FORMAT, line, "\"%s\" is not a string", s->pair_key);
    else if (s->label_key && !l)
        st = lp_sink_bad(s, LP_STATUS_NOT_FOUND, line, "missing key \"%s\"", s->label_key);
    else if (s->label_key && !json_label_text(l, tmp, sizeof tmp, &label, &why))
        st = lp_sink_bad(s, LP_STATUS_FORMAT, line, "bad label: %s", why);
    else
        st = lp_sink_row(s, line, t->valuestring, strlen(t->valuestring), p ? p->valuestring : NULL,
                         p ? strlen(p->valuestring) : 0, label, label ? strlen(label) : 0);
done:
    cJSON_Delete(obj);
    return st;
}

lp_status lp_read_jsonl(lp_row_sink *s, const char *buf, size_t len)
{
    size_t pos = 0;
    int64_t line = 0, rows_seen = 0;
    while (pos < len) {
        line++;
        const char *nl = memchr(buf + pos, '\n', len - pos);
        size_t end = nl ? (size_t)(nl - buf) : len;
        size_t a = pos, b = end;
        while (a < b && (buf[a] == ' ' || buf[a] == '\t' || buf[a] == '\r'))
            a++;
        while (b > a && (buf[b - 1] == ' ' || buf[b - 1] == '\t' || buf[b - 1] == '\r'))
            b--;
        pos = nl ? end + 1 : len;
        if (a == b)
            continue;
        rows_seen++;
        lp_status st = jsonl_row(s, line, buf + a, b - a);
        if (st != LP_OK)
            return st;
    }
    if (rows_seen == 0)
        return lp_err(LP_STATUS_FORMAT, "%s: empty file (expected one JSON object per line)", s->name);
    return LP_OK;
}
