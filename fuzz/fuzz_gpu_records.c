/* libFuzzer target: the recorded GPU activity records reader (lp_gpu_records_parse_jsonl)
 * over arbitrary bytes. Accepted records must hold the reader's promises (end >= start,
 * named kinds named, dims and kinds in range) and convert to Kineto events whose durations
 * are >= 0, whose flows pair up (an 'f' only with a call that starts one), and whose
 * kernel estimates are finite. Any input ends in LP_OK or an error, never a crash or leak. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "loupe/prof.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    lp_gpu_records *r = NULL;
    if (lp_gpu_records_parse_jsonl("fuzz.jsonl", (const char *)data, size, &r) != LP_OK)
        return 0;
    for (size_t i = 0; i < lp_gpu_records_count(r); i++) {
        const lp_gpu_activity *a = lp_gpu_records_get(r, i);
        if (a->end_ns < a->start_ns || (unsigned)a->kind >= LP_GPU_KIND__COUNT)
            abort();
        if ((a->kind == LP_GPU_KERNEL || a->kind == LP_GPU_RUNTIME) && (!a->name || !a->name[0]))
            abort();
        for (size_t d = 0; d < lp_gpu_records_n_devices(r); d++) {
            double b, w;
            int o;
            if (a->kind == LP_GPU_KERNEL &&
                lp_gpu_kernel_occupancy(lp_gpu_records_device(r, d), a, &b, &w, &o) &&
                (!isfinite(b) || !isfinite(w)))
                abort();
        }
    }
    lp_prof_events *ev = NULL;
    if (lp_prof_events_new(&ev) == LP_OK && lp_prof_events_add_gpu(ev, r, 0, INT64_MIN, INT64_MAX) == LP_OK) {
        size_t n = lp_prof_events_count(ev), starts = 0;
        for (size_t i = 0; i < n; i++) {
            const lp_prof_event *e = lp_prof_events_get(ev, i);
            if (e->dur_ns < 0 || !e->gpu)
                abort();
            starts += e->gpu_flow == 's';
        }
        for (size_t i = 0; i < n; i++) { /* every flow end has its start */
            const lp_prof_event *e = lp_prof_events_get(ev, i);
            if (e->gpu_flow != 'f')
                continue;
            int found = 0;
            for (size_t j = 0; j < n && !found; j++) {
                const lp_prof_event *s = lp_prof_events_get(ev, j);
                found = s->gpu_flow == 's' && s->correlation == e->correlation;
            }
            if (!found)
                abort();
        }
        (void)starts;
    }
    lp_prof_events_free(ev);
    lp_gpu_records_free(r);
    return 0;
}
