/* The one thread pool: OpenMP. OpenBLAS on Debian (libopenblas0-openmp) parallelises
 * with the same OpenMP runtime, so lp_threads_set sets both and no second pool exists.
 *
 * Wait policy: we leave the runtime's default (GOMP spins briefly, then sleeps). With a
 * single pool there is nothing to spin against, and the short spin keeps the gap between
 * back-to-back kernels of a training step small; OMP_WAIT_POLICY=passive still works
 * for a shared machine. */
#define _GNU_SOURCE
#include <omp.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

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
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int n = CPU_COUNT(&set);
        if (n > 0)
            return n;
    }
    return omp_get_num_procs();
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
 *   LP_BLAS_CORETYPE unset or "auto"  detect (as if OPENBLAS_CORETYPE were unset)
 *   LP_BLAS_CORETYPE=env              keep OPENBLAS_CORETYPE / OpenBLAS's load-time choice
 *   LP_BLAS_CORETYPE=<name>           force that kernel set (unknown name: detect)
 * The selection is OpenBLAS's own (gotoblas_dynamic_init), redone before any BLAS call;
 * when it overrides OPENBLAS_CORETYPE, lp_threads_blas_note says so. */
static char blas_note[256];

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
    if (!strcmp(want, "auto") && (!old || !*old))
        return; /* OpenBLAS already detected at load */
    char saved[64] = "", before[64] = "";
    if (old)
        snprintf(saved, sizeof saved, "%s", old);
    snprintf(before, sizeof before, "%s", lp_threads_blas_core());
    if (!strcmp(want, "auto"))
        unsetenv("OPENBLAS_CORETYPE");
    else
        setenv("OPENBLAS_CORETYPE", want, 1);
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
    if (old && strcmp(before, lp_threads_blas_core()))
        snprintf(blas_note, sizeof blas_note,
                 "OpenBLAS: using the %s kernels %s instead of OPENBLAS_CORETYPE=%s (LP_BLAS_CORETYPE=env keeps it)",
                 lp_threads_blas_core(), strcmp(want, "auto") ? "(LP_BLAS_CORETYPE)" : "detected for this CPU", saved);
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
