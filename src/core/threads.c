/* The one thread pool: OpenMP. OpenBLAS on Debian (libopenblas0-openmp) parallelises
 * with the same OpenMP runtime, so lp_threads_set sets both and no second pool exists.
 *
 * Wait policy: a bounded spin (spin.c) set before the runtime loads; the user's
 * OMP_WAIT_POLICY / GOMP_SPINCOUNT win. */
#define _GNU_SOURCE
#include <cpuid.h>
#include <omp.h>
#include <sched.h>
#include <strings.h>
#include <stdlib.h>
#include <string.h>

#include "core_internal.h"
#include "loupe/core.h"

/* OpenBLAS's own control functions (declared in its cblas.h, repeated here so this file
 * does not depend on which BLAS header is found). */
void openblas_set_num_threads(int n);
int openblas_get_parallel(void);
char *openblas_get_corename(void);
/* DYNAMIC_ARCH internals (exported by Debian's build): the active kernel table and the
 * function that picks one from OPENBLAS_CORETYPE or cpuid. */
extern void *gotoblas;
void gotoblas_dynamic_init(void);

static int n_threads;

int lp_threads_cores(void)
{
    cpu_set_t set;
    int n = 0;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        n = CPU_COUNT(&set);
    if (n <= 0)
        n = omp_get_num_procs();
    int quota = lp_core__cgroup_cpus(); /* 0: no quota */
    return quota > 0 && quota < n ? quota : n;
}

void lp_threads_set(int n)
{
    if (n < 1)
        n = 1;
    if (n > 1024)
        n = 1024;
    n_threads = n;
    omp_set_num_threads(n);
    openblas_set_num_threads(n);
}

int lp_threads_get(void) { return n_threads ? n_threads : omp_get_max_threads(); }

/* OpenBLAS picks its kernel set (Haswell = AVX2, SkylakeX/Cooperlake = AVX-512, ...) once,
 * from OPENBLAS_CORETYPE or cpuid, when the library loads. A machine-wide
 * OPENBLAS_CORETYPE=Haswell on an AVX-512 CPU caps sgemm at half the FMA peak (Zen 5, the
 * DistilBERT training step: 2.8 s with Haswell kernels, 1.65 s with SkylakeX), so loupe
 * uses the kernel set OpenBLAS detects for this CPU unless told otherwise:
 *   LP_BLAS_CORETYPE unset or "auto"  detect (as if OPENBLAS_CORETYPE were unset; on a CPU
 *                                     OpenBLAS does not know, by its features)
 *   LP_BLAS_CORETYPE=env              keep OPENBLAS_CORETYPE / OpenBLAS's load-time choice
 *   LP_BLAS_CORETYPE=<name>           force that kernel set (unknown name: detect)
 * The selection is OpenBLAS's own (gotoblas_dynamic_init), redone before any BLAS call;
 * when it overrides OPENBLAS_CORETYPE, lp_threads_blas_note says so. */
static char blas_note[256];

lp_cpu_isa lp_core__cpu_isa(void)
{
    __builtin_cpu_init(); // the feature bits below include the OS's saving of the vector state
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl")) {
        unsigned a, b, c, d; // AVX512_BF16: leaf 7, sub-leaf 1, EAX bit 5
        bool bf16 = __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 5));
        return bf16 ? LP_CPU_ISA_AVX512_BF16 : LP_CPU_ISA_AVX512;
    }
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return LP_CPU_ISA_AVX2;
    return LP_CPU_ISA_OLD;
}

/* The ISA an OpenBLAS kernel set needs (its DYNAMIC_ARCH names), or -1 for names not listed. */
static int core_isa(const char *core)
{
    static const struct { const char *name; lp_cpu_isa isa; } sets[] = {
        {"SkylakeX", LP_CPU_ISA_AVX512}, {"Cooperlake", LP_CPU_ISA_AVX512_BF16},
        {"SapphireRapids", LP_CPU_ISA_AVX512_BF16}, {"Haswell", LP_CPU_ISA_AVX2}, {"Zen", LP_CPU_ISA_AVX2},
        {"Prescott", LP_CPU_ISA_OLD}, {"Core2", LP_CPU_ISA_OLD}, {"Penryn", LP_CPU_ISA_OLD},
        {"Dunnington", LP_CPU_ISA_OLD}, {"Nehalem", LP_CPU_ISA_OLD}, {"Sandybridge", LP_CPU_ISA_OLD},
        {"Atom", LP_CPU_ISA_OLD}, {"Barcelona", LP_CPU_ISA_OLD}, {"Bulldozer", LP_CPU_ISA_OLD},
        {"Piledriver", LP_CPU_ISA_OLD}, {"Steamroller", LP_CPU_ISA_OLD}, {"Excavator", LP_CPU_ISA_OLD},
        {"Opteron", LP_CPU_ISA_OLD}, {"Katmai", LP_CPU_ISA_OLD}, {"Northwood", LP_CPU_ISA_OLD},
    };
    for (size_t i = 0; i < sizeof sets / sizeof *sets; i++)
        if (!strcasecmp(core, sets[i].name))
            return (int)sets[i].isa;
    return -1;
}

const char *lp_core__blas_upgrade(const char *detected, lp_cpu_isa isa)
{
    int have = detected ? core_isa(detected) : -1;
    if (have < 0 || have >= (int)isa)
        return NULL; // a set OpenBLAS chose on purpose, or one as wide as the CPU
    switch (isa) {
    case LP_CPU_ISA_AVX512_BF16: return have == LP_CPU_ISA_AVX512 ? NULL : "Cooperlake";
    case LP_CPU_ISA_AVX512: return "SkylakeX";
    case LP_CPU_ISA_AVX2: return "Haswell";
    default: return NULL;
    }
}

/* Selects `core` through OpenBLAS's own dispatch (as OPENBLAS_CORETYPE at load would), then
 * puts OPENBLAS_CORETYPE back as it was. An unknown name leaves OpenBLAS's detection. */
static void blas_use_core(const char *core)
{
    const char *old = getenv("OPENBLAS_CORETYPE");
    char saved[64] = "";
    if (old)
        snprintf(saved, sizeof saved, "%s", old);
    if (core)
        setenv("OPENBLAS_CORETYPE", core, 1);
    else
        unsetenv("OPENBLAS_CORETYPE");
    gotoblas = NULL;
    gotoblas_dynamic_init();
    if (!gotoblas) { /* unknown name: fall back to detection */
        unsetenv("OPENBLAS_CORETYPE");
        gotoblas_dynamic_init();
    }
    if (old)
        setenv("OPENBLAS_CORETYPE", saved, 1);
    else
        unsetenv("OPENBLAS_CORETYPE");
}

/* OpenBLAS 0.3.21 (Debian 12) knows CPUs by family and model; on a newer one it falls back
 * to Prescott (SSE3) kernels: a 16-core 2024 Xeon ran sgemm at 7 % of its FMA peak. Then
 * loupe picks the set by the CPU's features instead. */
static void blas_fix_unknown_cpu(void)
{
    char before[64];
    snprintf(before, sizeof before, "%s", lp_threads_blas_core());
    const char *better = lp_core__blas_upgrade(before, lp_core__cpu_isa());
    if (!better)
        return;
    blas_use_core(better);
    if (strcmp(before, lp_threads_blas_core()))
        snprintf(blas_note, sizeof blas_note,
                 "OpenBLAS: this CPU is unknown to this OpenBLAS, which chose its %s kernels; using %s, which "
                 "the CPU's features allow (LP_BLAS_CORETYPE=env keeps OpenBLAS's choice)",
                 before, lp_threads_blas_core());
}

static void blas_select_core(void)
{
    static int done;
    if (done)
        return;
    done = 1;
    const char *want = getenv("LP_BLAS_CORETYPE");
    if (!want || !*want)
        want = "auto";
    if (!strcmp(want, "env"))
        return;
    const char *old = getenv("OPENBLAS_CORETYPE");
    bool detect = !strcmp(want, "auto"), had_env = old && *old;
    char saved[64] = "", before[64];
    if (had_env)
        snprintf(saved, sizeof saved, "%s", old);
    snprintf(before, sizeof before, "%s", lp_threads_blas_core());
    if (had_env || !detect) // else OpenBLAS already detected at load
        blas_use_core(detect ? NULL : want);
    if (detect)
        blas_fix_unknown_cpu();
    if (had_env && strcmp(before, lp_threads_blas_core()) && !blas_note[0])
        snprintf(blas_note, sizeof blas_note,
                 "OpenBLAS: using the %s kernels %s instead of OPENBLAS_CORETYPE=%s (LP_BLAS_CORETYPE=env keeps it)",
                 lp_threads_blas_core(), detect ? "detected for this CPU" : "(LP_BLAS_CORETYPE)", saved);
}

void lp_threads_blas_cap(int level)
{
    static const char *const set_at[] = {"Nehalem", "Haswell", "SkylakeX", "Cooperlake"};
    const char *want = getenv("LP_BLAS_CORETYPE");
    if (level < 0 || level > 3 || (want && *want && strcmp(want, "auto")))
        return;
    blas_select_core();
    char before[64];
    snprintf(before, sizeof before, "%s", lp_threads_blas_core());
    int have = core_isa(before);
    if (have >= 0 && have <= level)
        return;
    blas_use_core(set_at[level]);
    snprintf(blas_note, sizeof blas_note, "OpenBLAS: %s kernels instead of %s, held to the ISA level LP_ISA forces",
             lp_threads_blas_core(), before);
}

const char *lp_threads_blas_note(void) { return blas_note[0] ? blas_note : NULL; }

const char *lp_threads_blas_core(void)
{
    const char *c = openblas_get_corename();
    return c ? c : "unknown";
}

int lp_threads_init(void)
{
    blas_select_core();
    const char *s = getenv("LP_THREADS");
    long n = 0;
    if (s && *s)
        n = strtol(s, NULL, 10);
    if (n <= 0) {
        s = getenv("OMP_NUM_THREADS");
        if (s && *s)
            n = strtol(s, NULL, 10);
    }
    if (n <= 0)
        n = lp_threads_cores();
    lp_threads_set((int)n);
    return n_threads;
}

const char *lp_threads_blas_mode(void)
{
    switch (openblas_get_parallel()) {
    case 0: return "sequential";
    case 1: return "pthreads";
    case 2: return "openmp";
    default: return "unknown";
    }
}
