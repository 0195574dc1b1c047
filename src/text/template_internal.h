/* Private to the chat-template engine (template_*.c): values, tokens, the syntax tree and
 * the arena every render allocates from. The engine covers the Jinja2 subset that the
 * chat templates of Qwen2.5, SmolLM2, Llama 3.x and Mistral use, with the environment
 * transformers' apply_chat_template sets up (trim_blocks, lstrip_blocks, loopcontrols). */
#ifndef LP_TEXT_TEMPLATE_INTERNAL_H
#define LP_TEXT_TEMPLATE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "loupe/base.h"

/* Bounds that keep any input finite: nesting of the parser and evaluator, output bytes,
 * loop iterations summed over a render, template nodes. */
#define LP_TMPL_MAX_DEPTH 128
#define LP_TMPL_MAX_OUTPUT ((size_t)64 << 20)
#define LP_TMPL_MAX_ITERS 1000000
#define LP_TMPL_MAX_NODES 200000

/* ---- arena: every node, string and value of a parse or render lives in one ---- */
typedef struct lp_tarena_blk lp_tarena_blk;
typedef struct lp_tarena {
    lp_tarena_blk *head;
    size_t used; /* bytes handed out, for the output/size bounds */
} lp_tarena;
void *lp_tarena_alloc(lp_tarena *a, size_t n); /* zeroed; NULL when out of memory */
void lp_tarena_free(lp_tarena *a);

/* ---- values ---- */
typedef enum lp_tv_kind {
    LP_TV_UNDEF = 0, /* a name or key that is not there: falsy, prints as "" */
    LP_TV_NONE,
    LP_TV_BOOL,
    LP_TV_INT,
    LP_TV_FLOAT,
    LP_TV_STR,
    LP_TV_LIST,
    LP_TV_DICT, /* also namespace() objects (ns flag) and the loop object */
    LP_TV_FUNC, /* a global function: raise_exception, strftime_now, namespace, range */
} lp_tv_kind;

typedef struct lp_tlist lp_tlist;
typedef struct lp_tdict lp_tdict;
typedef struct lp_tv {
    lp_tv_kind kind;
    union {
        int64_t i; /* BOOL, INT, FUNC (which function) */
        double f;
        struct {
            const char *s;
            size_t n;
        } s;
        lp_tlist *l;
        lp_tdict *d;
    } u;
} lp_tv;

struct lp_tlist {
    lp_tv *v;
    size_t n, cap;
};
struct lp_tdict {
    lp_tv *keys; /* strings (JSON objects) */
    lp_tv *vals;
    size_t n, cap;
    int ns; /* a namespace(): attribute assignment allowed */
};

lp_tv lp_tv_str(const char *s, size_t n);
lp_tv lp_tv_int(int64_t i);
lp_tv lp_tv_bool(int b);
int lp_tlist_push(lp_tarena *a, lp_tlist *l, lp_tv v); /* 0 ok, -1 out of memory */
int lp_tdict_set(lp_tarena *a, lp_tdict *d, lp_tv key, lp_tv v);
const lp_tv *lp_tdict_get(const lp_tdict *d, const char *key, size_t n);
int lp_tv_truthy(lp_tv v);
int lp_tv_equal(lp_tv a, lp_tv b);
/* Copies a cJSON tree (passed as const void * to keep cJSON out of this header) into
 * arena values; NULL on out of memory. */
int lp_tv_from_json(lp_tarena *a, const void *json, lp_tv *out, int depth);

/* ---- a growable byte buffer bounded by LP_TMPL_MAX_OUTPUT ---- */
typedef struct lp_tbuf {
    char *p;
    size_t n, cap;
    int over; /* set when a write would pass the bound */
} lp_tbuf;
int lp_tbuf_put(lp_tbuf *b, const char *s, size_t n); /* 0 ok, -1 out of memory/bound */
void lp_tbuf_free(lp_tbuf *b);
/* Python str() of a value (None, True, 12, 'a', ['a', 1], {'k': 'v'}) appended to b. */
int lp_tv_write_str(lp_tbuf *b, lp_tv v);
/* json.dumps(v, ensure_ascii=False, indent=indent) as transformers' tojson filter does;
 * indent < 0: one line with ", " and ": " separators. */
int lp_tv_write_json(lp_tbuf *b, lp_tv v, int indent, int depth);

/* ---- lexer ---- */
typedef enum lp_ttok_kind {
    LP_TT_TEXT,      /* raw template text (already whitespace-controlled) */
    LP_TT_VAR_BEGIN, /* {{ */
    LP_TT_VAR_END,   /* }} */
    LP_TT_BLOCK_BEGIN,
    LP_TT_BLOCK_END,
    LP_TT_NAME,
    LP_TT_STRING, /* s/n hold the unescaped bytes */
    LP_TT_INT,
    LP_TT_FLOAT,
    LP_TT_OP, /* s/n hold the operator text */
    LP_TT_EOF,
} lp_ttok_kind;

typedef struct lp_ttok {
    lp_ttok_kind kind;
    int line;
    const char *s;
    size_t n;
    int64_t i;
    double f;
} lp_ttok;

/* Splits src into tokens (arena-allocated array, *n entries, ends with EOF). Errors name
 * `name` and the line. */
lp_status lp_tmpl_lex(lp_tarena *a, const char *name, const char *src, size_t len, lp_ttok **out, size_t *n);

/* ---- syntax tree ---- */
typedef enum lp_tnode_kind {
    /* statements */
    LP_TN_BODY,  /* kids: statements in order */
    LP_TN_TEXT,  /* s */
    LP_TN_PRINT, /* a: expression */
    LP_TN_IF,    /* a: condition, b: then-body, c: else (body or another IF for elif) */
    LP_TN_FOR,   /* s/n: target name, s2/n2: second target or NULL, a: iterable, b: body,
                  * c: else body, d: filter condition or NULL */
    LP_TN_SET,   /* s: name, s2: attribute or NULL, a: value */
    LP_TN_BREAK,
    LP_TN_CONTINUE,
    /* expressions */
    LP_TN_LIT,    /* v */
    LP_TN_NAME,   /* s */
    LP_TN_LIST,   /* kids */
    LP_TN_DICT,   /* kids: key, value, key, value, ... */
    LP_TN_ATTR,   /* a.s */
    LP_TN_ITEM,   /* a[b] */
    LP_TN_SLICE,  /* a[b:c:d], missing parts NULL */
    LP_TN_CALL,   /* a(kids), kwnames[i] NULL for positional arguments */
    LP_TN_FILTER, /* a | s(kids) */
    LP_TN_TEST,   /* a is [not] s(kids), op = negated */
    LP_TN_UNARY,  /* op a: "not", "-", "+" */
    LP_TN_BINARY, /* a op b */
    LP_TN_COND,   /* b if a else c */
} lp_tnode_kind;

typedef struct lp_tnode lp_tnode;
struct lp_tnode {
    lp_tnode_kind kind;
    int line;
    const char *s, *s2;
    size_t n, n2;
    const char *op;
    lp_tv v;
    lp_tnode *a, *b, *c, *d;
    lp_tnode **kids;
    const char **kwnames;
    size_t *kwlens;
    size_t nkids;
};

lp_status lp_tmpl_parse(lp_tarena *a, const char *name, const lp_ttok *toks, size_t n, lp_tnode **root);

#endif
