/* Which ISA level this CPU and OS run: CPUID for the instruction sets, XGETBV for the OS
 * saving the wider registers on a context switch (a CPU with AVX-512 under an OS or
 * hypervisor that does not enable its state faults on the first zmm instruction).
 * Compiled once, for the baseline: it must run before anything wider is chosen. */
#include <stdatomic.h>
#include <string.h>

#include "loupe/kernels.h"

static const char *const isa_names[LP_ISA_COUNT] = {"baseline", "avx2", "avx512", "avx512bf16"};

const char *lp_isa_name(lp_isa isa) { return (unsigned)isa < LP_ISA_COUNT ? isa_names[isa] : "?"; }

lp_status lp_isa_parse(const char *s, const char *what, lp_isa *out)
{
    for (int i = 0; s && i < LP_ISA_COUNT; i++)
        if (!strcmp(s, isa_names[i])) {
            *out = (lp_isa)i;
            return LP_OK;
        }
    return lp_err(LP_STATUS_INVALID_ARG, "%s: unknown ISA level '%s' (baseline, avx2, avx512 or avx512bf16)",
                  what ? what : "ISA", s ? s : "");
}

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

/* One feature a level needs: CPUID leaf/sub-leaf, register (0 EAX .. 3 EDX), bit. */
typedef struct feature {
    const char *name;
    unsigned leaf, sub, reg, bit;
} feature;

/* x86-64-v2 .. v4 as the psABI lists them, plus what the avx512bf16 copy is compiled with. */
static const feature need_v2[] = {{"sse3", 1, 0, 2, 0},    {"ssse3", 1, 0, 2, 9},   {"sse4.1", 1, 0, 2, 19},
                                  {"sse4.2", 1, 0, 2, 20}, {"popcnt", 1, 0, 2, 23}, {"cx16", 1, 0, 2, 13}};
static const feature need_v3[] = {{"avx", 1, 0, 2, 28},   {"fma", 1, 0, 2, 12},  {"f16c", 1, 0, 2, 29},
                                  {"movbe", 1, 0, 2, 22}, {"avx2", 7, 0, 1, 5},  {"bmi1", 7, 0, 1, 3},
                                  {"bmi2", 7, 0, 1, 8},   {"lzcnt", 0x80000001u, 0, 2, 5}};
static const feature need_v4[] = {{"avx512f", 7, 0, 1, 16},  {"avx512dq", 7, 0, 1, 17}, {"avx512cd", 7, 0, 1, 28},
                                  {"avx512bw", 7, 0, 1, 30}, {"avx512vl", 7, 0, 1, 31}};
static const feature need_bf16[] = {{"avx512_bf16", 7, 1, 0, 5}, {"avx512_vnni", 7, 0, 2, 11}};

static bool has(const feature *f)
{
    unsigned r[4] = {0, 0, 0, 0};
    unsigned max = __get_cpuid_max(f->leaf & 0x80000000u, NULL);
    if (max < f->leaf)
        return false;
    __cpuid_count(f->leaf, f->sub, r[0], r[1], r[2], r[3]);
    return (r[f->reg] >> f->bit) & 1u;
}

/* XCR0: which register states the OS saves (bit 1 SSE, 2 AVX, 5-7 AVX-512 opmask and zmm). */
static unsigned long long xcr0(void)
{
    if (!has(&(feature){"osxsave", 1, 0, 2, 27}))
        return 0;
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((unsigned long long)hi << 32) | lo;
}

#define N_OF(a) (sizeof(a) / sizeof *(a))

static const char *first_missing(const feature *fs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!has(&fs[i]))
            return fs[i].name;
    return NULL;
}

const char *lp_isa_missing(lp_isa isa)
{
    const char *m = NULL;
    unsigned long long x = xcr0();
    if ((unsigned)isa >= LP_ISA_COUNT)
        return "a known ISA level";
    if ((m = first_missing(need_v2, N_OF(need_v2))))
        return m;
    if (isa >= LP_ISA_AVX2) {
        if ((m = first_missing(need_v3, N_OF(need_v3))))
            return m;
        if ((x & 0x6) != 0x6)
            return "OS support for the AVX register state (XCR0)";
    }
    if (isa >= LP_ISA_AVX512) {
        if ((m = first_missing(need_v4, N_OF(need_v4))))
            return m;
        if ((x & 0xe0) != 0xe0)
            return "OS support for the AVX-512 register state (XCR0)";
    }
    if (isa >= LP_ISA_AVX512BF16 && (m = first_missing(need_bf16, N_OF(need_bf16))))
        return m;
    return NULL;
}
#else
const char *lp_isa_missing(lp_isa isa) { return isa == LP_ISA_BASELINE ? NULL : "an x86-64 CPU"; }
#endif

lp_isa lp_isa_detect(void)
{
    static atomic_int cached = -1; /* CPUID is slow under some hypervisors (a VM exit each) */
    int c = atomic_load(&cached);
    if (c >= 0)
        return (lp_isa)c;
    lp_isa best = LP_ISA_BASELINE;
    for (int i = LP_ISA_COUNT - 1; i > 0; i--)
        if (!lp_isa_missing((lp_isa)i)) {
            best = (lp_isa)i;
            break;
        }
    atomic_store(&cached, (int)best);
    return best;
}
