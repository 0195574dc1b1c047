/* Interned strings and a bounded id map for the streaming trace model (trace_store.h). */
#include "trace_store.h"

#include <stdlib.h>
#include <string.h>

static uint64_t fnv(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h ^ (h >> 29);
}

static int strtab_rehash(lp_strtab *t, size_t nslot)
{
    uint32_t *slot = calloc(nslot, sizeof *slot);
    if (!slot)
        return 0;
    for (size_t i = 0; i < t->n; i++) {
        size_t k = t->hash[i] & (nslot - 1);
        while (slot[k])
            k = (k + 1) & (nslot - 1);
        slot[k] = (uint32_t)i + 1;
    }
    free(t->slot);
    t->slot = slot;
    t->nslot = nslot;
    return 1;
}

int64_t lp_strtab_find(const lp_strtab *t, const char *s, size_t n)
{
    if (!n)
        s = "";
    uint64_t h = fnv(s, n);
    if (t->nslot)
        for (size_t k = h & (t->nslot - 1); t->slot[k]; k = (k + 1) & (t->nslot - 1)) {
            size_t id = t->slot[k] - 1;
            if (t->hash[id] == h && t->len[id] == n && !memcmp(t->str[id], s, n))
                return (int64_t)id;
        }
    return -1;
}

int64_t lp_strtab_intern(lp_strtab *t, const char *s, size_t n)
{
    if (!n)
        s = ""; /* an empty key may come as NULL (an empty call path) */
    uint64_t h = fnv(s, n);
    if (t->nslot) {
        for (size_t k = h & (t->nslot - 1); t->slot[k]; k = (k + 1) & (t->nslot - 1)) {
            size_t id = t->slot[k] - 1;
            if (t->hash[id] == h && t->len[id] == n && !memcmp(t->str[id], s, n))
                return (int64_t)id;
        }
    }
    if (t->n >= UINT32_MAX - 1)
        return -1;
    if (t->n == t->cap) {
        size_t c = t->cap ? t->cap * 2 : 256;
        char **a = realloc(t->str, c * sizeof *a);
        if (!a)
            return -1;
        t->str = a;
        size_t *l = realloc(t->len, c * sizeof *l);
        if (!l)
            return -1;
        t->len = l;
        uint64_t *hh = realloc(t->hash, c * sizeof *hh);
        if (!hh)
            return -1;
        t->hash = hh;
        t->cap = c;
    }
    if ((t->n + 1) * 2 > t->nslot && !strtab_rehash(t, t->nslot ? t->nslot * 2 : 1024))
        return -1;
    char *copy = malloc(n + 1);
    if (!copy)
        return -1;
    memcpy(copy, s, n);
    copy[n] = '\0';
    size_t id = t->n++;
    t->str[id] = copy;
    t->len[id] = n;
    t->hash[id] = h;
    size_t k = h & (t->nslot - 1);
    while (t->slot[k])
        k = (k + 1) & (t->nslot - 1);
    t->slot[k] = (uint32_t)id + 1;
    return (int64_t)id;
}

void lp_strtab_free(lp_strtab *t)
{
    for (size_t i = 0; i < t->n; i++)
        free(t->str[i]);
    free(t->str);
    free(t->len);
    free(t->hash);
    free(t->slot);
    memset(t, 0, sizeof *t);
}

static size_t mix(int64_t k, size_t cap)
{
    uint64_t x = (uint64_t)k * 0x9E3779B97F4A7C15ull;
    return (size_t)(x ^ (x >> 32)) & (cap - 1);
}

static int idmap_alloc(lp_idmap *m, size_t cap)
{
    m->keys = malloc(cap * sizeof *m->keys);
    m->vals = malloc(cap * sizeof *m->vals);
    m->age = malloc(cap * sizeof *m->age);
    if (!m->keys || !m->vals || !m->age)
        return 0;
    for (size_t i = 0; i < cap; i++)
        m->keys[i] = INT64_MIN;
    m->cap = cap;
    m->n = 0;
    return 1;
}

int lp_idmap_init(lp_idmap *m, size_t limit)
{
    memset(m, 0, sizeof *m);
    m->limit = limit < 64 ? 64 : limit;
    return idmap_alloc(m, 256);
}

static void put_raw(lp_idmap *m, int64_t key, const lp_idmap_val *v, uint64_t age)
{
    size_t k = mix(key, m->cap);
    while (m->keys[k] != INT64_MIN && m->keys[k] != key)
        k = (k + 1) & (m->cap - 1);
    if (m->keys[k] == INT64_MIN)
        m->n++;
    m->keys[k] = key;
    m->vals[k] = *v;
    m->age[k] = age;
}

/* Rebuilds into cap slots, keeping only entries at least min_age old-counter. */
static int rebuild(lp_idmap *m, size_t cap, uint64_t min_age)
{
    lp_idmap old = *m;
    if (!idmap_alloc(m, cap)) {
        free(m->keys);
        free(m->vals);
        free(m->age);
        *m = old;
        return 0;
    }
    for (size_t i = 0; i < old.cap; i++)
        if (old.keys[i] != INT64_MIN && old.age[i] >= min_age)
            put_raw(m, old.keys[i], &old.vals[i], old.age[i]);
    free(old.keys);
    free(old.vals);
    free(old.age);
    return 1;
}

int lp_idmap_put(lp_idmap *m, int64_t key, const lp_idmap_val *v)
{
    if (key == INT64_MIN)
        return 1;
    if (m->n + 1 > m->limit) {
        /* forget the older half: launches that long ago have had their kernels */
        uint64_t min_age = m->clock - m->limit / 2;
        if (!rebuild(m, m->cap, min_age))
            return 0;
    }
    if ((m->n + 1) * 2 > m->cap && !rebuild(m, m->cap * 2, 0))
        return 0;
    put_raw(m, key, v, m->clock++);
    return 1;
}

const lp_idmap_val *lp_idmap_get(const lp_idmap *m, int64_t key)
{
    if (!m->cap || key == INT64_MIN)
        return NULL;
    for (size_t k = mix(key, m->cap); m->keys[k] != INT64_MIN; k = (k + 1) & (m->cap - 1))
        if (m->keys[k] == key)
            return &m->vals[k];
    return NULL;
}

void lp_idmap_free(lp_idmap *m)
{
    free(m->keys);
    free(m->vals);
    free(m->age);
    memset(m, 0, sizeof *m);
}
