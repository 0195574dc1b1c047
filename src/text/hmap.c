/* Small open-addressing hash tables for vocabularies (string -> id) and BPE merge ranks
 * (id pair -> rank and result), plus the growable buffers the encoder reuses. Linear
 * probing at load factor <= 1/2 keeps lookups to one or two cache lines. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

uint64_t lp_hash_bytes(const void *p, size_t n)
{
    /* 8 bytes at a time, multiply-xorshift mixing: fast for short tokens, good spread. */
    const uint8_t *s = p;
    uint64_t h = 0x243F6A8885A308D3ull ^ (n * 0x9E3779B97F4A7C15ull);
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ w) * 0xFF51AFD7ED558CCDull;
        h ^= h >> 29;
        s += 8;
        n -= 8;
    }
    uint64_t w = 0;
    if (n) memcpy(&w, s, n);
    h = (h ^ w ^ ((uint64_t)n << 56)) * 0xC4CEB9FE1A85EC53ull;
    h ^= h >> 32;
    h *= 0x9E3779B97F4A7C15ull;
    h ^= h >> 29;
    return h;
}

static uint32_t pow2_at_least(uint64_t n)
{
    uint32_t c = 16;
    while (c < n && c < (1u << 31)) c <<= 1;
    return c;
}

int lp_strmap_init(lp_strmap *m, uint32_t expected)
{
    memset(m, 0, sizeof *m);
    uint32_t slots = pow2_at_least((uint64_t)expected * 2 + 2);
    m->slots = lp_calloc(slots, sizeof *m->slots);
    m->keys = lp_malloc(1024); /* never NULL, so keys + offset is always defined */
    if (!m->slots || !m->keys) {
        lp_strmap_free(m);
        return -1;
    }
    m->keys_cap = 1024;
    m->mask = slots - 1;
    return 0;
}

void lp_strmap_free(lp_strmap *m)
{
    free(m->slots);
    free(m->ents);
    free(m->keys);
    memset(m, 0, sizeof *m);
}

void lp_strmap_clear(lp_strmap *m)
{
    if (m->slots) memset(m->slots, 0, ((size_t)m->mask + 1) * sizeof *m->slots);
    m->n = 0;
    m->keys_len = 0;
}

static int strmap_grow(lp_strmap *m)
{
    uint32_t slots = (m->mask + 1) * 2;
    uint64_t *ns = lp_calloc(slots, sizeof *ns);
    if (!ns) return -1;
    for (uint32_t e = 0; e < m->n; e++) {
        uint32_t i = (uint32_t)m->ents[e].hash & (slots - 1);
        while (ns[i]) i = (i + 1) & (slots - 1);
        ns[i] = (m->ents[e].hash & 0xFFFFFFFF00000000ull) | (e + 1);
    }
    free(m->slots);
    m->slots = ns;
    m->mask = slots - 1;
    return 0;
}

int lp_strmap_put(lp_strmap *m, const char *k, size_t n, int32_t v)
{
    if (n > UINT32_MAX) return -1;
    if (!n) k = ""; /* empty keys may come with a NULL pointer */
    uint64_t h = lp_hash_bytes(k, n);
    uint32_t i = (uint32_t)h & m->mask;
    while (m->slots[i]) {
        struct lp_strent *e = &m->ents[(uint32_t)m->slots[i] - 1];
        if (e->hash == h && e->len == n && !memcmp(m->keys + e->off, k, n)) {
            e->val = v;
            return 0;
        }
        i = (i + 1) & m->mask;
    }
    if (m->n == m->cap_ents) {
        uint32_t nc = m->cap_ents ? m->cap_ents * 2 : 64;
        void *ne = lp_realloc(m->ents, (size_t)nc * sizeof *m->ents);
        if (!ne) return -1;
        m->ents = ne;
        m->cap_ents = nc;
    }
    if (m->keys_len + n > m->keys_cap) {
        size_t nc = m->keys_cap ? m->keys_cap * 2 : 1024;
        while (nc < m->keys_len + n) nc *= 2;
        if (nc > UINT32_MAX) return -1;
        char *nk = lp_realloc(m->keys, nc);
        if (!nk) return -1;
        m->keys = nk;
        m->keys_cap = nc;
    }
    if (n) memcpy(m->keys + m->keys_len, k, n);
    m->ents[m->n] = (struct lp_strent){h, (uint32_t)m->keys_len, (uint32_t)n, v};
    m->keys_len += n;
    m->slots[i] = (h & 0xFFFFFFFF00000000ull) | ++m->n;
    if ((uint64_t)m->n * 2 > m->mask) return strmap_grow(m);
    return 0;
}

int lp_strmap_get(const lp_strmap *m, const char *k, size_t n, int32_t *v)
{
    if (!n) k = "";
    uint64_t h = lp_hash_bytes(k, n);
    uint32_t i = (uint32_t)h & m->mask;
    uint64_t tag = h & 0xFFFFFFFF00000000ull, sl;
    while ((sl = m->slots[i]) != 0) {
        if ((sl & 0xFFFFFFFF00000000ull) == tag) {
            const struct lp_strent *e = &m->ents[(uint32_t)sl - 1];
            if (e->len == n && !memcmp(m->keys + e->off, k, n)) {
                *v = e->val;
                return 1;
            }
        }
        i = (i + 1) & m->mask;
    }
    return 0;
}

int lp_u64map_init(lp_u64map *m, uint32_t expected)
{
    uint32_t slots = pow2_at_least((uint64_t)expected * 2 + 2);
    m->keys = lp_malloc((size_t)slots * sizeof *m->keys);
    m->vals = lp_malloc((size_t)slots * sizeof *m->vals);
    m->mask = slots - 1;
    m->n = 0;
    if (!m->keys || !m->vals) {
        free(m->keys);
        free(m->vals);
        m->keys = m->vals = NULL;
        return -1;
    }
    memset(m->keys, 0xFF, (size_t)slots * sizeof *m->keys);
    return 0;
}

void lp_u64map_free(lp_u64map *m)
{
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

static int u64map_grow(lp_u64map *m)
{
    lp_u64map n;
    if (lp_u64map_init(&n, (m->mask + 1))) return -1;
    for (uint32_t i = 0; i <= m->mask; i++)
        if (m->keys[i] != UINT64_MAX) lp_u64map_put(&n, m->keys[i], m->vals[i]);
    lp_u64map_free(m);
    *m = n;
    return 0;
}

int lp_u64map_put(lp_u64map *m, uint64_t k, uint64_t v)
{
    uint64_t h = k * 0x9E3779B97F4A7C15ull;
    uint32_t i = (uint32_t)(h >> 32) & m->mask;
    while (m->keys[i] != UINT64_MAX) {
        if (m->keys[i] == k) {
            m->vals[i] = v;
            return 0;
        }
        i = (i + 1) & m->mask;
    }
    m->keys[i] = k;
    m->vals[i] = v;
    m->n++;
    if ((uint64_t)m->n * 2 > m->mask) return u64map_grow(m);
    return 0;
}

int lp_buf_reserve(lp_buf *b, size_t extra)
{
    char *np = lp_grow(b->p, &b->cap, b->len + extra, 1, 4096);
    if (!np) return -1;
    b->p = np;
    return 0;
}

int lp_spans_push(lp_spans *s, uint32_t off, uint32_t len)
{
    void *nv = lp_grow(s->v, &s->cap, s->n + 1, sizeof *s->v, 256);
    if (!nv) return -1;
    s->v = nv;
    s->v[s->n++] = (lp_span){off, len};
    return 0;
}

int lp_ids_push(lp_ids *s, int32_t id)
{
    void *nv = lp_grow(s->v, &s->cap, s->n + 1, sizeof *s->v, 256);
    if (!nv) return -1;
    s->v = nv;
    s->v[s->n++] = id;
    return 0;
}
