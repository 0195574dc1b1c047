/* core's internals shared with its unit tests. */
#ifndef LP_CORE_INTERNAL_H
#define LP_CORE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "loupe/core.h"

/* The widest vector ISA the CPU and OS support, as far as OpenBLAS's kernel sets differ. */
typedef enum lp_cpu_isa {
    LP_CPU_ISA_OLD,        /* below AVX2 + FMA */
    LP_CPU_ISA_AVX2,       /* AVX2 + FMA */
    LP_CPU_ISA_AVX512,     /* AVX-512 F/BW/DQ/VL */
    LP_CPU_ISA_AVX512_BF16 /* and AVX512_BF16 */
} lp_cpu_isa;

lp_cpu_isa lp_core__cpu_isa(void);

/* The OpenBLAS kernel set to use instead of `detected` when OpenBLAS did not know the CPU
 * and fell back to kernels narrower than its ISA (Prescott on a 2024 Xeon), else NULL. */
const char *lp_core__blas_upgrade(const char *detected, lp_cpu_isa isa);

/* CPUs a cgroup CPU quota allows: ceil(quota / period), at least 1; 0 for no limit or
 * text that is not a quota. v2: the text of cpu.max ("200000 100000", "max 100000");
 * v1: the texts of cpu.cfs_quota_us ("-1" = none) and cpu.cfs_period_us. */
int lp_core__cgroup_v2_cpus(const char *cpu_max);
int lp_core__cgroup_v1_cpus(const char *quota_us, const char *period_us);
/* The smallest quota of this process's cgroup and its ancestors (/proc/self/cgroup), 0 for none. */
int lp_core__cgroup_cpus(void);

/* The GOMP_SPINCOUNT loupe sets given the user's OMP_WAIT_POLICY and GOMP_SPINCOUNT
 * (NULL = unset), or -1 when the user chose. */
long long lp_core__spin_plan(const char *wait_policy, const char *spincount);

/* 2 MiB pages for weights (hugepages.c): whether lp_alloc gives a buffer of this category and
 * size (header included) 2 MiB alignment and the advice (parameters and quantized weights of
 * at least one whole 2 MiB page, unless LP_HUGEPAGES=0), and the advice itself (before the
 * first touch). */
#define LP_HUGE_PAGE_BYTES ((size_t)2 << 20)
#define LP_HUGE_MIN_BYTES LP_HUGE_PAGE_BYTES
bool lp_core__huge_wanted(lp_mem_category cat, size_t bytes);
void lp_core__huge_advise(void *p, size_t bytes);

#endif
