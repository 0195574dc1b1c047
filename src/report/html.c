/* The HTML page builder: one growing buffer, escaping, headings, sections, tabs, headline
 * figures and sortable tables. Errors are sticky (the first is kept and returned by
 * lp_html_write) so report code reads as a list of calls, not a ladder of checks. */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "html_internal.h"

lp_status lp_html__fail(lp_html *h, lp_status st)
{
    if (h->st == LP_OK)
        h->st = st;
    return h->st;
}

void lp_html__put(lp_html *h, const char *s, size_t n)
{
    if (h->st != LP_OK)
        return;
    char *b = lp_grow(h->buf, &h->cap, h->len + n + 1, 1, 1 << 16);
    if (!b) {
        lp_html__fail(h, lp_err(LP_STATUS_NO_MEMORY, "html: out of memory building the page"));
        return;
    }
    h->buf = b;
    memcpy(h->buf + h->len, s, n);
    h->len += n;
    h->buf[h->len] = 0;
}

void lp_html__puts(lp_html *h, const char *s)
{
    lp_html__put(h, s, strlen(s));
}

void lp_html__vputf(lp_html *h, const char *fmt, va_list ap)
{
    char small[512];
    va_list aq;
    va_copy(aq, ap);
    int n = vsnprintf(small, sizeof small, fmt, aq);
    va_end(aq);
    if (n < 0)
        return;
    if ((size_t)n < sizeof small) {
        lp_html__put(h, small, (size_t)n);
        return;
    }
    char *big = malloc((size_t)n + 1);
    if (!big) {
        lp_html__fail(h, lp_err(LP_STATUS_NO_MEMORY, "html: out of memory building the page"));
        return;
    }
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    lp_html__put(h, big, (size_t)n);
    free(big);
}

void lp_html__putf(lp_html *h, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    lp_html__vputf(h, fmt, ap);
    va_end(ap);
}

/* The entity for c, or NULL when c goes through as it is ("" when it is dropped). */
static const char *entity(unsigned char c)
{
    switch (c) {
    case '&': return "&amp;";
    case '<': return "&lt;";
    case '>': return "&gt;";
    case '"': return "&quot;";
    case '\'': return "&#39;";
    case '\t':
    case '\n': return NULL;
    default: return c < 0x20 || c == 0x7f ? "" : NULL;
    }
}

void lp_html__esc(lp_html *h, const char *s)
{
    if (!s)
        return;
    const char *run = s; // copy runs of plain characters in one go
    for (; *s; s++) {
        const char *e = entity((unsigned char)*s);
        if (!e)
            continue;
        lp_html__put(h, run, (size_t)(s - run));
        lp_html__puts(h, e);
        run = s + 1;
    }
    lp_html__put(h, run, (size_t)(s - run));
}

char *lp_html_escape(const char *s)
{
    lp_html h = {0};
    lp_html__esc(&h, s ? s : "");
    lp_html__put(&h, "", 0); // an empty input still gets a buffer
    if (h.st != LP_OK) {
        free(h.buf);
        return NULL;
    }
    return h.buf;
}

int lp_html__name_ok(const char *name)
{
    size_t n = name ? strlen(name) : 0;
    if (n < 1 || n > 64)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)name[i]) && name[i] != '-' && name[i] != '_')
            return 0;
    return 1;
}

/* ---- the page ---------------------------------------------------------------------- */

lp_html *lp_html_new(const char *title, const char *plots_dir)
{
    lp_html *h = calloc(1, sizeof *h);
    if (!h) {
        lp_err(LP_STATUS_NO_MEMORY, "html: out of memory");
        return NULL;
    }
    if (plots_dir && !(h->plots_dir = strdup(plots_dir))) {
        free(h);
        lp_err(LP_STATUS_NO_MEMORY, "html: out of memory");
        return NULL;
    }
    lp_html__puts(h, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                     "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
                     "<meta name=\"generator\" content=\"loupe\">\n<title>");
    lp_html__esc(h, title);
    lp_html__puts(h, "</title>\n<style>\n");
    lp_html__puts(h, lp_html__css);
    lp_html__puts(h, "</style>\n</head>\n<body>\n<main>\n");
    if (h->st != LP_OK) {
        lp_html_free(h);
        return NULL;
    }
    return h;
}

void lp_html_free(lp_html *h)
{
    if (!h)
        return;
    free(h->buf);
    free(h->plots_dir);
    free(h);
}

lp_status lp_html_status(const lp_html *h)
{
    return h->st;
}

const char *lp_html_data(const lp_html *h, size_t *len)
{
    if (len)
        *len = h->len;
    return h->buf ? h->buf : "";
}

void lp_html_text(lp_html *h, const char *s)
{
    lp_html__esc(h, s);
}

void lp_html_raw(lp_html *h, const char *markup)
{
    lp_html__puts(h, markup);
}

/* Formats into a temporary string and appends it escaped. */
static void vesc(lp_html *h, const char *fmt, va_list ap)
{
    lp_html tmp = {0};
    lp_html__vputf(&tmp, fmt, ap);
    if (tmp.st != LP_OK)
        lp_html__fail(h, tmp.st);
    else
        lp_html__esc(h, tmp.buf ? tmp.buf : "");
    free(tmp.buf);
}

void lp_html_textf(lp_html *h, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vesc(h, fmt, ap);
    va_end(ap);
}

void lp_html_h(lp_html *h, int level, const char *text)
{
    level = level < 1 ? 1 : level > 4 ? 4 : level;
    lp_html__putf(h, "<h%d>", level);
    lp_html__esc(h, text);
    lp_html__putf(h, "</h%d>\n", level);
}

void lp_html_p(lp_html *h, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    lp_html__puts(h, "<p>");
    vesc(h, fmt, ap);
    lp_html__puts(h, "</p>\n");
    va_end(ap);
}

void lp_html_note(lp_html *h, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    lp_html__puts(h, "<p class=\"lp-note\">");
    vesc(h, fmt, ap);
    lp_html__puts(h, "</p>\n");
    va_end(ap);
}

/* An id attribute when id is a valid name; an invalid one is a caller's bug, kept as the
 * page's error so that the page is not written with a broken anchor. */
static void id_attr(lp_html *h, const char *id)
{
    if (!id)
        return;
    if (!lp_html__name_ok(id)) {
        lp_html__fail(h, lp_err(LP_STATUS_INVALID_ARG, "html: id '%.64s' is not letters, digits, '-', '_'", id));
        return;
    }
    lp_html__putf(h, " id=\"%s\"", id);
}

void lp_html_section_begin(lp_html *h, const char *id, const char *title)
{
    lp_html__puts(h, "<section");
    id_attr(h, id);
    lp_html__puts(h, ">\n");
    if (title)
        lp_html_h(h, 2, title);
}

void lp_html_section_end(lp_html *h)
{
    lp_html__puts(h, "</section>\n");
}

void lp_html_tabs_begin(lp_html *h)
{
    lp_html__puts(h, "<div class=\"lp-tabs\">\n");
}

void lp_html_tab_begin(lp_html *h, const char *id, const char *label)
{
    lp_html__puts(h, "<div class=\"lp-tab\"");
    id_attr(h, id);
    lp_html__puts(h, " data-label=\"");
    lp_html__esc(h, label);
    lp_html__puts(h, "\">\n<h2 class=\"lp-tab-title\">");
    lp_html__esc(h, label);
    lp_html__puts(h, "</h2>\n");
}

void lp_html_tab_end(lp_html *h)
{
    lp_html__puts(h, "</div>\n");
}

void lp_html_tabs_end(lp_html *h)
{
    lp_html__puts(h, "</div>\n");
}

void lp_html_stats_begin(lp_html *h)
{
    lp_html__puts(h, "<div class=\"lp-stats\">\n");
}

void lp_html_stat(lp_html *h, const char *label, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    lp_html__puts(h, "<div class=\"lp-stat\"><span>");
    lp_html__esc(h, label);
    lp_html__puts(h, "</span><b>");
    vesc(h, fmt, ap);
    lp_html__puts(h, "</b></div>\n");
    va_end(ap);
}

void lp_html_stats_end(lp_html *h)
{
    lp_html__puts(h, "</div>\n");
}

/* ---- tables ------------------------------------------------------------------------ */

void lp_html_table_begin(lp_html *h, const char *const *headers, int32_t n)
{
    lp_html__puts(h, "<div class=\"lp-table-wrap\"><table class=\"lp-sortable\">\n<thead><tr>");
    for (int32_t i = 0; i < n; i++) {
        const char *t = headers[i] ? headers[i] : "";
        int num = *t == '#';
        lp_html__puts(h, num ? "<th class=\"num\">" : "<th>");
        lp_html__esc(h, t + num);
        lp_html__puts(h, "</th>");
    }
    lp_html__puts(h, "</tr></thead>\n<tbody>\n");
    h->in_table = 1;
}

void lp_html_tr(lp_html *h)
{
    lp_html__puts(h, h->in_table == 2 ? "</tr>\n<tr>" : "<tr>");
    h->in_table = 2;
}

void lp_html_td(lp_html *h, const char *text)
{
    lp_html__puts(h, "<td>");
    lp_html__esc(h, text);
    lp_html__puts(h, "</td>");
}

void lp_html_tdf(lp_html *h, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    lp_html__puts(h, "<td>");
    vesc(h, fmt, ap);
    lp_html__puts(h, "</td>");
    va_end(ap);
}

void lp_html_td_num(lp_html *h, double v, const char *fmt)
{
    if (!isfinite(v)) {
        lp_html__puts(h, "<td class=\"num\" data-v=\"\">-</td>");
        return;
    }
    char shown[64];
    snprintf(shown, sizeof shown, fmt, v); // fmt is the caller's literal with one double
    lp_html__putf(h, "<td class=\"num\" data-v=\"%.17g\">", v);
    lp_html__esc(h, shown);
    lp_html__puts(h, "</td>");
}

void lp_html_table_end(lp_html *h)
{
    lp_html__puts(h, h->in_table == 2 ? "</tr>\n</tbody></table></div>\n" : "</tbody></table></div>\n");
    h->in_table = 0;
}
