/* Geometric growth of a heap array: the one realloc-and-double every buffer, table and
 * stack in loupe grows by. */
#include <stdint.h>
#include <stdlib.h>

#include "loupe/base.h"

void *lp_grow(void *v, size_t *cap, size_t need, size_t size, size_t first)
{
    if (need <= *cap)
        return v;
    size_t nc = *cap ? *cap : (first ? first : 1);
    while (nc < need) {
        if (nc > SIZE_MAX / 2)
            return NULL;
        nc *= 2;
    }
    if (size && nc > SIZE_MAX / size)
        return NULL;
    void *nv = realloc(v, nc * size);
    if (nv)
        *cap = nc;
    return nv;
}
