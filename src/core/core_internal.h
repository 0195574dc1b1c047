/* core's internals shared with its unit tests. */
#ifndef LP_CORE_INTERNAL_H
#define LP_CORE_INTERNAL_H

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

#endif
