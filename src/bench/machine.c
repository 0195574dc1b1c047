/* The machine a bench ran on: CPU model from /proc/cpuinfo and the widest SIMD level the
 * kernels use (what bench/README.md figures are quoted with). */
#include <stdio.h>
#include <string.h>

#include "loupe/bench.h"

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
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    const char *s = __builtin_cpu_supports("avx512f") ? "avx512"
                    : __builtin_cpu_supports("avx2")  ? "avx2"
                                                      : "sse2";
    if (__builtin_cpu_supports("avx512bf16"))
        s = "avx512+bf16";
    snprintf(simd, simd_cap, "%s", s);
#else
    snprintf(simd, simd_cap, "scalar");
#endif
}
