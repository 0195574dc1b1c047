/* gpu_records_trace RECORDS.jsonl OUT.pt.trace.json [--keep-sync]: the Kineto trace loupe
 * writes from recorded CUPTI activity (the committed fixtures), for the ecosystem check
 * tests/ecosystem/hta_gpu_check.py. The first record is at ts 0; every record is kept
 * (no window). Synchronization records are dropped unless --keep-sync: the collector
 * records them only with LP_PROF_CUDA_SYNC=1, as PyTorch does, because HTA counts them as
 * kernels; fixtures recorded before that default still hold some. Exit 0, or 1 with the
 * error. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "loupe/prof.h"

static int fail(const char *what)
{
    fprintf(stderr, "gpu_records_trace: %s: %s\n", what, lp_err_msg());
    return 1;
}

int main(int argc, char **argv)
{
    if (argc < 3 || (argc == 4 && strcmp(argv[3], "--keep-sync")) || argc > 4) {
        fprintf(stderr, "usage: gpu_records_trace RECORDS.jsonl OUT.pt.trace.json [--keep-sync]\n");
        return 2;
    }
    int keep_sync = argc == 4;
    lp_gpu_records *in, *r;
    if (lp_gpu_records_read_jsonl(argv[1], &in) != LP_OK)
        return fail("reading the records");
    if (lp_gpu_records_new(&r) != LP_OK)
        return fail("records");
    int64_t first = INT64_MAX, cg = 0, ch = 0;
    if (lp_gpu_records_clock(in, &cg, &ch))
        lp_gpu_records_set_clock(r, cg, ch);
    for (size_t i = 0; i < lp_gpu_records_n_devices(in); i++)
        if (lp_gpu_records_set_device(r, lp_gpu_records_device(in, i)) != LP_OK)
            return fail("devices");
    size_t dropped = 0;
    for (size_t i = 0; i < lp_gpu_records_count(in); i++) {
        const lp_gpu_activity *a = lp_gpu_records_get(in, i);
        if (a->kind == LP_GPU_SYNC && !keep_sync) {
            dropped++;
            continue;
        }
        if (a->start_ns < first)
            first = a->start_ns;
        if (lp_gpu_records_add(r, a) != LP_OK)
            return fail("copying a record");
    }
    lp_prof_events *ev;
    if (lp_prof_events_new(&ev) != LP_OK)
        return fail("events");
    /* origin: the first record at ts 0 (the pair maps GPU ns onto the host clock) */
    if (lp_prof_events_add_gpu(ev, r, first - cg + ch, INT64_MIN, INT64_MAX) != LP_OK)
        return fail("converting");
    if (lp_prof_export_chrome(ev, argv[2]) != LP_OK)
        return fail("writing the trace");
    printf("%s: %zu records (%zu sync records dropped) -> %s\n", argv[1], lp_gpu_records_count(r), dropped,
           argv[2]);
    lp_prof_events_free(ev);
    lp_gpu_records_free(r);
    lp_gpu_records_free(in);
    return 0;
}
