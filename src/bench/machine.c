/* The machine a bench ran on: CPU model from /proc/cpuinfo and the ISA level the kernels
 * ran at (what bench/README.md figures are quoted with). */
#include <stdio.h>
#include <string.h>

#include "loupe/bench.h"
#include "loupe/kernels.h"

void lp_bench_machine(char *cpu, size_t cpu_cap, char *simd, size_t simd_cap)
{
    snprintf(cpu, cpu_cap, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    while (f && fgets(line, sizeof line, f)) {
        char *c = strchr(line, ':');
        if (strncmp(line, "model name", 10) || !c)
            continue;
        c++;
        c += strspn(c, " \t");
        c[strcspn(c, "\n")] = 0;
        snprintf(cpu, cpu_cap, "%s", c);
        break;
    }
    if (f)
        fclose(f);
    /* the level the kernels run at (LP_ISA can force a lower one), not the CPU's widest */
    snprintf(simd, simd_cap, "%s", lp_isa_name(lp_kernels_isa()));
}
