/* Private to the html*.c files: the page being built (one growing buffer and the first
 * error met), and the appenders they share. */
#ifndef LP_REPORT_HTML_INTERNAL_H
#define LP_REPORT_HTML_INTERNAL_H

#include <stdarg.h>

#include "loupe/report.h"

struct lp_html {
    char *buf; /* the page so far, NUL-terminated */
    size_t len, cap;
    lp_status st;     /* the first error; once set, appends do nothing */
    char *plots_dir;  /* where chart copies go, or NULL */
    int plots_made;   /* plots_dir created */
    int in_table;     /* 0 none, 1 header written, 2 inside a row */
    int32_t n_charts; /* charts so far: each one's SVG ids get their own prefix */
};

/* Appends n bytes / a string / formatted text as they are (markup). */
void lp_html__put(lp_html *h, const char *s, size_t n);
void lp_html__puts(lp_html *h, const char *s);
void lp_html__vputf(lp_html *h, const char *fmt, va_list ap);
void lp_html__putf(lp_html *h, const char *fmt, ...) LP_PRINTF(2, 3);
/* Appends s escaped. */
void lp_html__esc(lp_html *h, const char *s);
/* Keeps st as the page's error (the first one wins); returns the page's error. */
lp_status lp_html__fail(lp_html *h, lp_status st);
/* name made of letters, digits, '-' and '_' (an id and a file name), 1..64 characters. */
int lp_html__name_ok(const char *name);

/* The page's head (CSS) and tail (script), html_page.c. */
extern const char lp_html__css[];
extern const char lp_html__js[];

#endif
