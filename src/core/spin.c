/* A bounded spin for the OpenMP pool. libgomp's threads spin ~300,000 times (about 3 ms)
 * at every barrier and at the pool before they sleep. On a quiet machine that hides the
 * wake-up between back-to-back kernels; on a busy one a spinning thread holds a core that
 * the thread everyone waits for needs, and batch-1 inference slowed 15x under one busy
 * loop. loupe sets a short spin (LP_THREADS_SPIN, chosen by bench/contention) unless the
 * user set OMP_WAIT_POLICY or GOMP_SPINCOUNT.
 *
 * libgomp reads its environment once, in a constructor that runs when the library loads,
 * before main; a setenv in main changes nothing (bench/contention/spin_env_check.c shows
 * it), and the executable's own constructors run after its libraries'. So the program sets
 * the variable and executes itself again (/proc/self/exe, same pid, argv and fds). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core_internal.h"
#include "loupe/core.h"

/* marks a GOMP_SPINCOUNT set by loupe (not the user) in the re-executed process */
#define SPIN_MARK "LP_SPIN_SET_BY_LOUPE"

long long lp_core__spin_plan(const char *wait_policy, const char *spincount)
{
    if ((wait_policy && *wait_policy) || (spincount && *spincount))
        return -1; /* the user's choice stands */
    return LP_THREADS_SPIN;
}

void lp_threads_bound_spin(char **argv)
{
    long long spin = lp_core__spin_plan(getenv("OMP_WAIT_POLICY"), getenv("GOMP_SPINCOUNT"));
    const char *off = getenv("LP_SPIN");
    if (spin < 0 || (off && !strcmp(off, "default")) || !argv || !argv[0])
        return;
    char v[32];
    snprintf(v, sizeof v, "%lld", spin);
    if (setenv("GOMP_SPINCOUNT", v, 1) || setenv(SPIN_MARK, v, 1))
        return;
    execv("/proc/self/exe", argv);
    /* no /proc (or exec refused): run on with the runtime's default spin */
    unsetenv("GOMP_SPINCOUNT");
    unsetenv(SPIN_MARK);
}

const char *lp_threads_spin_desc(void)
{
    static char desc[128];
    const char *wp = getenv("OMP_WAIT_POLICY"), *sc = getenv("GOMP_SPINCOUNT"), *mark = getenv(SPIN_MARK);
    if (sc && *sc && mark && !strcmp(sc, mark))
        snprintf(desc, sizeof desc, "GOMP_SPINCOUNT=%s (loupe)", sc);
    else if ((sc && *sc) || (wp && *wp))
        snprintf(desc, sizeof desc, "%s%s%s%s%s (user)", wp && *wp ? "OMP_WAIT_POLICY=" : "", wp && *wp ? wp : "",
                 wp && *wp && sc && *sc ? " " : "", sc && *sc ? "GOMP_SPINCOUNT=" : "", sc && *sc ? sc : "");
    else
        snprintf(desc, sizeof desc, "OpenMP runtime default");
    return desc;
}
