/* Memory accounting by category: lock-free current/peak counters that are always on
 * (the trainer reports peaks), plus [memory] events while a window records, and RSS. */
#include "prof_internal.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static _Atomic int64_t cur[LP_MEM_CATEGORY__COUNT], peak[LP_MEM_CATEGORY__COUNT];
static _Atomic int64_t total_cur, total_peak;
static _Atomic uint64_t n_allocs, n_frees;

static const char *const cat_names[LP_MEM_CATEGORY__COUNT] = {
    "parameter", "gradient", "optimizer_state", "activation",
    "temporary", "input",    "quantized_weight", "other", "kv_cache",
};

const char *lp_mem_category_name(lp_mem_category c)
{
    if ((unsigned)c >= LP_MEM_CATEGORY__COUNT)
        return "unknown";
    return cat_names[c];
}

static void raise_peak(_Atomic int64_t *p, int64_t v)
{
    int64_t old = atomic_load_explicit(p, memory_order_relaxed);
    while (v > old &&
           !atomic_compare_exchange_weak_explicit(p, &old, v, memory_order_relaxed,
                                                  memory_order_relaxed)) {
    }
}

static void account(const void *addr, int64_t delta, lp_mem_category cat)
{
    if ((unsigned)cat >= LP_MEM_CATEGORY__COUNT)
        cat = LP_MEM_CATEGORY_OTHER;
    int64_t c = atomic_fetch_add_explicit(&cur[cat], delta, memory_order_relaxed) + delta;
    int64_t t = atomic_fetch_add_explicit(&total_cur, delta, memory_order_relaxed) + delta;
    if (delta > 0) {
        raise_peak(&peak[cat], c);
        raise_peak(&total_peak, t);
        atomic_fetch_add_explicit(&n_allocs, 1, memory_order_relaxed);
    } else {
        atomic_fetch_add_explicit(&n_frees, 1, memory_order_relaxed);
    }
    if (LP_PROF__RECORDING() && __atomic_load_n(&lp_prof__mem_on, __ATOMIC_RELAXED))
        lp_prof__mem_record(addr, delta, (int)cat, t);
}

void lp_prof_mem_alloc(const void *addr, uint64_t bytes, lp_mem_category cat)
{
    account(addr, (int64_t)bytes, cat);
}

void lp_prof_mem_free(const void *addr, uint64_t bytes, lp_mem_category cat)
{
    account(addr, -(int64_t)bytes, cat);
}

void lp_prof_mem_stats(lp_mem_stats *out)
{
    memset(out, 0, sizeof *out);
    for (int c = 0; c < LP_MEM_CATEGORY__COUNT; c++) {
        out->current[c] = atomic_load(&cur[c]);
        out->peak[c] = atomic_load(&peak[c]);
    }
    out->total_current = atomic_load(&total_cur);
    out->total_peak = atomic_load(&total_peak);
    out->n_allocs = atomic_load(&n_allocs);
    out->n_frees = atomic_load(&n_frees);
}

void lp_prof_mem_reset_peaks(void)
{
    for (int c = 0; c < LP_MEM_CATEGORY__COUNT; c++)
        atomic_store(&peak[c], atomic_load(&cur[c]));
    atomic_store(&total_peak, atomic_load(&total_cur));
}

lp_status lp_prof_rss(int64_t *rss_bytes, int64_t *peak_rss_bytes)
{
    *rss_bytes = *peak_rss_bytes = -1;
    FILE *fp = fopen("/proc/self/status", "r");
    if (!fp)
        return lp_err(LP_STATUS_IO, "/proc/self/status: cannot open");
    char line[256];
    while (fgets(line, sizeof line, fp)) {
        long long kb;
        if (sscanf(line, "VmRSS: %lld kB", &kb) == 1)
            *rss_bytes = kb * 1024;
        else if (sscanf(line, "VmHWM: %lld kB", &kb) == 1)
            *peak_rss_bytes = kb * 1024;
    }
    fclose(fp);
    if (*rss_bytes < 0 || *peak_rss_bytes < 0)
        return lp_err(LP_STATUS_UNSUPPORTED, "/proc/self/status: no VmRSS/VmHWM lines");
    return LP_OK;
}
