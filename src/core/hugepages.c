/* 2 MiB pages for the weights. A decode streams every weight once per token; on 4 KiB pages
 * that is a TLB miss and a restart of the hardware prefetchers every 4 KiB (SmolLM2 F32:
 * 131,000 pages a token). Where transparent huge pages are in `madvise` mode (the kernel's
 * default on many distributions) nothing gets them unless asked, so the allocator asks for
 * parameter and quantized-weight buffers of 2 MiB and more: 2 MiB-aligned, their whole 2 MiB
 * pages madvise(MADV_HUGEPAGE)d before the first touch. Only those buffers: glibc's own
 * switch (glibc.malloc.hugetlb=1) applied to every allocation made a 2 GB load 5x slower on
 * a long-running machine (compaction for the small ones). LP_HUGEPAGES=0 turns it off. */
#define _GNU_SOURCE /* MADV_HUGEPAGE under -std=c11 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "core_internal.h"

bool lp_core__huge_wanted(lp_mem_category cat, size_t bytes)
{
    static _Atomic int on = -1;
    if (bytes < LP_HUGE_MIN_BYTES || (cat != LP_MEM_CATEGORY_PARAMETER && cat != LP_MEM_CATEGORY_QUANTIZED_WEIGHT))
        return false;
    int v = atomic_load(&on);
    if (v < 0) {
        const char *e = getenv("LP_HUGEPAGES");
        v = !(e && !strcmp(e, "0"));
        atomic_store(&on, v);
    }
    return v;
}

void lp_core__huge_advise(void *p, size_t bytes)
{
#if defined(MADV_HUGEPAGE)
    /* advice only: a kernel without THP (EINVAL) or with it off keeps 4 KiB pages */
    (void)madvise(p, bytes, MADV_HUGEPAGE);
#else
    (void)p;
    (void)bytes;
#endif
}
