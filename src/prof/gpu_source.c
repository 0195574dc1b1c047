/* The session's GPU source: a collector (the CUPTI one in CUDA builds) registers start /
 * stop hooks; each recorded window starts it and, at its stop, adds the records it returns
 * to the window's events. Without CUPTI the collector's entry points say so. */
#include "prof_internal.h"

#include <stdio.h>

static const lp_prof_gpu_source *gpu_src;

void lp_prof_set_gpu_source(const lp_prof_gpu_source *src)
{
    __atomic_store_n(&gpu_src, src, __ATOMIC_RELEASE);
}

void lp_prof__gpu_window_start(void)
{
    const lp_prof_gpu_source *s = __atomic_load_n(&gpu_src, __ATOMIC_ACQUIRE);
    if (s && s->start && s->start() != LP_OK) /* the CPU trace is still worth having */
        fprintf(stderr, "loupe profiler: GPU activity not collected: %s\n", lp_err_msg());
}

lp_status lp_prof__gpu_window_stop(lp_prof_events *ev, int64_t origin_mono_ns, int64_t end_ns)
{
    const lp_prof_gpu_source *s = __atomic_load_n(&gpu_src, __ATOMIC_ACQUIRE);
    if (!s || !s->stop)
        return LP_OK;
    lp_gpu_records *r = NULL;
    lp_status st = s->stop(&r);
    if (st == LP_OK && r)
        st = lp_prof_events_add_gpu(ev, r, origin_mono_ns, 0, end_ns);
    lp_gpu_records_free(r);
    return st;
}

#ifndef LP_HAVE_CUPTI
static lp_status no_cupti(void)
{
    return lp_err(LP_STATUS_UNSUPPORTED,
                  "profiler: this loupe was built without CUPTI (no CUDA toolkit found at configure time)");
}
lp_status lp_prof_cupti_attach(void)
{
    return no_cupti();
}
void lp_prof_cupti_detach(void) {}
int lp_prof_cupti_built(void)
{
    return 0;
}
lp_status lp_prof_cupti_load(void)
{
    return no_cupti();
}
lp_status lp_prof_cupti_start(void)
{
    return no_cupti();
}
lp_status lp_prof_cupti_stop(lp_gpu_records **out)
{
    *out = NULL;
    return no_cupti();
}
#endif
