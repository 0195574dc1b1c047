/* Noticing a busy machine: per step, the process's CPU time against wall time x threads.
 * A step whose threads all ran gets a share near 1 (spinning at barriers counts as CPU
 * time); when other processes take the cores, the threads sit in the run queue and the
 * share falls (one busy loop on two cores: about 2/3, two: about 1/2). Single steps
 * dip for other reasons (page faults, a serial stretch), so the run is called contended
 * only after LP_CONTENTION_RUN flagged steps in a row. */
#include <stdio.h>
#include <time.h>

#include "loupe/core.h"

double lp_cpu_time_s(void)
{
    struct timespec t;
    if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t))
        return 0;
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

void lp_contention_init(lp_contention *c, int32_t threads)
{
    *c = (lp_contention){.threads = threads > 0 ? threads : 1};
}

bool lp_contention_add(lp_contention *c, double wall_s, double cpu_s)
{
    if (!(wall_s > 0) || !(cpu_s >= 0))
        return false; /* a clock that did not move says nothing */
    c->steps++;
    c->wall_s += wall_s;
    c->cpu_s += cpu_s;
    double share = cpu_s / (wall_s * c->threads);
    if (share < LP_CONTENTION_SHARE) {
        c->flagged++;
        c->run++;
    } else {
        c->run = 0;
    }
    if (!c->noticed && c->run >= LP_CONTENTION_RUN) {
        c->noticed = true;
        return true;
    }
    return false;
}

double lp_contention_cpu_share(const lp_contention *c)
{
    return c->wall_s > 0 ? c->cpu_s / (c->wall_s * c->threads) : 0.0;
}

const char *lp_contention_note(const lp_contention *c, char *buf, size_t cap)
{
    snprintf(buf, cap,
             "the machine looks busy: %d timed steps in a row got under %.0f%% of wall time x %d thread%s in CPU "
             "time (%.0f%% so far: other processes hold the cores); times from this run are slower than this "
             "machine can do, and LP_THREADS=%d may be faster",
             (int)c->run, 100 * LP_CONTENTION_SHARE, (int)c->threads, c->threads == 1 ? "" : "s", 100 * lp_contention_cpu_share(c),
             c->threads > 1 ? c->threads / 2 : 1);
    return buf;
}
