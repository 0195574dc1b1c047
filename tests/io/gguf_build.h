/* A tiny GGUF writer for the tests (and the fuzz seeds they write): appends the format's
 * little-endian fields to a growing buffer, so a test can build valid files and then break
 * exactly one thing. Header-only. */
#ifndef LP_TEST_GGUF_BUILD_H
#define LP_TEST_GGUF_BUILD_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct gb {
    uint8_t *p;
    size_t n, cap;
} gb;

static inline void gb_raw(gb *b, const void *d, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        if (!b->p)
            abort();
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}
static inline void gb_u8(gb *b, uint8_t v)
{
    gb_raw(b, &v, 1);
}
static inline void gb_u32(gb *b, uint32_t v)
{
    gb_raw(b, &v, 4);
}
static inline void gb_u64(gb *b, uint64_t v)
{
    gb_raw(b, &v, 8);
}
static inline void gb_f32(gb *b, float v)
{
    gb_raw(b, &v, 4);
}
static inline void gb_str(gb *b, const char *s)
{
    gb_u64(b, strlen(s));
    gb_raw(b, s, strlen(s));
}
static inline void gb_header(gb *b, uint64_t n_tensors, uint64_t n_kv)
{
    gb_raw(b, "GGUF", 4);
    gb_u32(b, 3);
    gb_u64(b, n_tensors);
    gb_u64(b, n_kv);
}
/* key + type; the caller appends the value */
static inline void gb_key(gb *b, const char *key, uint32_t type)
{
    gb_str(b, key);
    gb_u32(b, type);
}
static inline void gb_kv_u32(gb *b, const char *key, uint32_t v)
{
    gb_key(b, key, 4);
    gb_u32(b, v);
}
static inline void gb_kv_f32(gb *b, const char *key, float v)
{
    gb_key(b, key, 6);
    gb_f32(b, v);
}
static inline void gb_kv_str(gb *b, const char *key, const char *v)
{
    gb_key(b, key, 8);
    gb_str(b, v);
}
static inline void gb_tensor(gb *b, const char *name, uint32_t ndim, const uint64_t *ne, uint32_t type,
                             uint64_t off)
{
    gb_str(b, name);
    gb_u32(b, ndim);
    for (uint32_t d = 0; d < ndim; d++)
        gb_u64(b, ne[d]);
    gb_u32(b, type);
    gb_u64(b, off);
}
static inline void gb_align(gb *b, size_t a)
{
    while (b->n % a)
        gb_u8(b, 0);
}

#endif
