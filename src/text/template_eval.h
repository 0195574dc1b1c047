/* Private: the chat-template evaluator (template_eval.c) and its library of filters,
 * tests and methods (template_filters.c). */
#ifndef LP_TEXT_TEMPLATE_EVAL_H
#define LP_TEXT_TEMPLATE_EVAL_H

#include "template_internal.h"

/* Renders the tree into out with `globals` as the outermost scope. */
lp_status lp_tmpl_render(lp_tarena *a, const char *name, const lp_tnode *root, lp_tdict *globals, lp_tbuf *out);

/* Whether a filter / test name is one the evaluator implements (the parser refuses others
 * at load time, naming them). */
int lp_tmpl_filter_known(const char *s, size_t n);
int lp_tmpl_test_known(const char *s, size_t n);

/* One render's state. */
typedef struct lp_tev {
    lp_tarena *a;
    const char *name;
    lp_tbuf *out;
    lp_tdict **frames;
    size_t nframes, cap_frames;
    long iters;
    int depth;
    int brk, cont; /* a break / continue is unwinding to its loop */
} lp_tev;

/* Evaluator services the filters use (template_eval.c). */
lp_status lp_tev_eval(lp_tev *E, const lp_tnode *nd, lp_tv *out);
lp_status lp_tev_oom(lp_tev *E);
lp_status lp_tev_out_fail(lp_tev *E, int line);
const char *lp_tev_kind_name(lp_tv v);
int lp_tev_str_eq(const char *s, size_t n, const char *lit);
lp_status lp_tev_args(lp_tev *E, const lp_tnode *nd, lp_tv *pos, size_t *npos, size_t maxpos);
lp_status lp_tev_kw(lp_tev *E, const lp_tnode *nd, const char *kw, lp_tv *out);
lp_status lp_tev_to_str(lp_tev *E, lp_tv v, lp_tv *out, int line);
lp_tv lp_tev_new_str(lp_tev *E, const char *s, size_t n, int *fail);
lp_status lp_tev_iterate(lp_tev *E, lp_tv v, int line, lp_tlist **out);
lp_status lp_tev_code_points(lp_tev *E, lp_tv s, lp_tlist **out);
int lp_tev_utf8_len(unsigned char c);

/* Filters, tests and methods (template_filters.c): value | filter(args) of node nd,
 * value is [not] test(args), obj.method(args) of call node `call`. */
lp_status lp_tev_filter(lp_tev *E, const lp_tnode *nd, lp_tv v, lp_tv *out);
lp_status lp_tev_test(lp_tev *E, const lp_tnode *nd, lp_tv v, int *r);
lp_status lp_tev_method(lp_tev *E, const lp_tnode *call, lp_tv obj, const char *m, size_t mn, lp_tv *out);

#endif
