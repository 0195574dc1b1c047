/* libFuzzer target for the Kineto trace readers: the bytes are a trace file, gzip or
 * plain (decided by the magic, as lp_trace_read_text does), parsed into an event list
 * (lp_trace_parse), and streamed through the trace model `loupe analyze` uses, with a
 * tiny reorder window so late events and evictions are exercised, then printed. Any input
 * must end in LP_OK or an error message, never a crash, leak or sanitizer report; the
 * model's steps must sum to their parts. */
#define _GNU_SOURCE /* open_memstream */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loupe/report.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = NULL;
    size_t len = 0;
    if (size >= 2 && data[0] == 0x1f && data[1] == 0x8b) {
        if (lp_trace_gunzip("fuzz.json.gz", data, size, &text, &len) != LP_OK)
            return 0;
    } else {
        text = malloc(size + 1);
        if (!text)
            return 0;
        memcpy(text, data, size);
        text[size] = '\0';
        len = size;
    }
    lp_prof_events *ev = NULL;
    lp_trace_info info;
    if (lp_prof_events_new(&ev) == LP_OK && lp_trace_parse("fuzz.json", text, len, ev, &info) == LP_OK) {
        for (size_t i = 0; i < lp_prof_events_count(ev); i++)
            if (lp_prof_events_get(ev, i)->dur_ns < 0)
                abort(); /* the reader promises dur >= 0 */
    }
    lp_prof_events_free(ev);
    lp_trace_model_opts o;
    lp_trace_model_opts_init(&o);
    o.window = 8;
    lp_trace_model *m = NULL;
    if (lp_trace_model_parse("fuzz.json", text, len, &o, &m) == LP_OK) {
        for (size_t i = 0; i < m->n_steps; i++) {
            int64_t sum = 0;
            for (int p = 0; p < LP_TRACE_PART__COUNT; p++)
                sum += m->steps[i].part_ns[p];
            if (sum != m->steps[i].dur_ns)
                abort(); /* the breakdown promises parts that sum to the step */
        }
        char *out = NULL;
        size_t n = 0;
        FILE *f = open_memstream(&out, &n);
        lp_prof_keyavg_opts ko;
        lp_prof_keyavg_opts_init(&ko);
        ko.group_by_input_shape = 1;
        if (f) {
            (void)lp_trace_model_write_text(f, m, &ko, 1);
            fclose(f);
        }
        free(out);
        lp_trace_model_free(m);
    }
    free(text);
    return 0;
}
