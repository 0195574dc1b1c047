/* generate internals: the per-sequence text stream (stream.c) the generation loop feeds. */
#ifndef LP_GEN_INTERNAL_H
#define LP_GEN_INTERNAL_H

#include "loupe/generate.h"

typedef struct lp_gen_stream {
    char *text;     /* the whole text so far (owned), cut at a stop string */
    size_t emitted; /* bytes of it already passed to on_text */
} lp_gen_stream;

/* Decodes ids[0..n) into st->text, cuts it at the first stop string (*hit_stop), and passes
 * on_text the newly stable bytes (all of them when final or stopped). Errors: the
 * tokenizer's. */
lp_status lp_gen__stream_update(lp_gen_stream *st, const lp_tokenizer *tok, const int32_t *ids, int32_t n,
                                const lp_gen_opts *o, bool final, int32_t b, bool *hit_stop);

#endif
