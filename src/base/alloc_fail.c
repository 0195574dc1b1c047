/* The allocation counter behind the torture mode (curl's "fail the Nth allocation", every N
 * in turn) and the malloc-family wrappers that library code outside the tagged allocator
 * uses for what it owns (parameter tables, names, config strings), so that one counter sees
 * lp_alloc and these alike and a test can walk every error path of a loader. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "loupe/base.h"

static _Atomic uint64_t fail_at, since_mark;
static atomic_int env_read;

static void read_env(void)
{
    if (atomic_exchange(&env_read, 1))
        return;
    const char *s = getenv("LP_ALLOC_FAIL_AT");
    if (s && *s)
        atomic_store(&fail_at, strtoull(s, NULL, 10));
}

uint64_t lp_alloc_fail_set(uint64_t nth)
{
    atomic_store(&env_read, 1);
    atomic_store(&fail_at, nth);
    return atomic_exchange(&since_mark, 0);
}

uint64_t lp_alloc_tick(void)
{
    read_env();
    uint64_t count = atomic_fetch_add(&since_mark, 1) + 1;
    uint64_t f = atomic_load(&fail_at);
    return f && count == f ? count : 0;
}

void *lp_malloc(size_t n)
{
    return lp_alloc_tick() ? NULL : malloc(n ? n : 1);
}

void *lp_calloc(size_t n, size_t size)
{
    return lp_alloc_tick() ? NULL : calloc(n ? n : 1, size ? size : 1);
}

void *lp_realloc(void *p, size_t n)
{
    return lp_alloc_tick() ? NULL : realloc(p, n ? n : 1);
}

char *lp_strdup(const char *s)
{
    return lp_alloc_tick() ? NULL : strdup(s);
}
