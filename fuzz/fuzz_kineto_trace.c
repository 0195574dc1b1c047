/* libFuzzer target for the Kineto trace reader: the bytes are a trace file, gzip or
 * plain (decided by the magic, as lp_trace_read_text does), parsed into an event list,
 * then averaged and broken down by step as `loupe analyze` does. Any input must end in
 * LP_OK or an error message, never a crash, leak or sanitizer report. */
#include <stdint.h>
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
    free(text);
    return 0;
}
