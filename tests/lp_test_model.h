/* Helpers shared by the model-level cmocka tests. Header-only. */
#ifndef LP_TEST_MODEL_H
#define LP_TEST_MODEL_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "loupe/models.h"

/* Every trainable parameter's gradient, concatenated in parameter order, into a malloc'd
 * array the caller frees; *n_out its length. NULL when out of memory. */
static inline float *lp_test_model_grads(const lp_model *m, int64_t *n_out)
{
    size_t np;
    const lp_model_param *p = lp_model_params(m, &np);
    int64_t n = 0;
    for (size_t i = 0; i < np; i++)
        n += p[i].grad ? p[i].numel : 0;
    float *g = malloc((size_t)(n ? n : 1) * sizeof *g), *w = g;
    for (size_t i = 0; g && i < np; i++)
        if (p[i].grad) {
            memcpy(w, p[i].grad, (size_t)p[i].numel * sizeof *w);
            w += p[i].numel;
        }
    *n_out = n;
    return g;
}

#endif
