/* Private: the chat-template evaluator's entry points (template_eval.c). */
#ifndef LP_TEXT_TEMPLATE_EVAL_H
#define LP_TEXT_TEMPLATE_EVAL_H

#include "template_internal.h"

/* Renders the tree into out with `globals` as the outermost scope. */
lp_status lp_tmpl_render(lp_tarena *a, const char *name, const lp_tnode *root, lp_tdict *globals, lp_tbuf *out);

/* Whether a filter / test name is one the evaluator implements (the parser refuses others
 * at load time, naming them). */
int lp_tmpl_filter_known(const char *s, size_t n);
int lp_tmpl_test_known(const char *s, size_t n);

#endif
