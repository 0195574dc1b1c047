/* libFuzzer target: the gzip trace readers with a decompression cap. The bytes are a trace
 * file (written to a temporary path: the readers take files); it is streamed through
 * lp_trace_gunzip_stream with a 1 MiB cap into a counting sink and read whole with
 * lp_trace_read_text_max under the same cap. Checked: neither ever hands over more than the
 * cap, the sink's chunks add up to the reported total, both readers agree on success and on
 * the length, and the text is what the stream delivered (same length, NUL-terminated). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loupe/report.h"

#define CAP ((uint64_t)1 << 20)

typedef struct sum {
    uint64_t n;
    uint32_t hash;
} sum;

static lp_status sink(void *ctx, const char *d, size_t n)
{
    sum *s = ctx;
    s->n += n;
    for (size_t i = 0; i < n; i++)
        s->hash = s->hash * 31u + (unsigned char)d[i];
    return LP_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char path[64];
    if (!path[0])
        snprintf(path, sizeof path, "/tmp/lp_fuzz_trace_%ld.json.gz", (long)getpid());
    FILE *fp = fopen(path, "wb"); /* plain write: an fsync per input would cap the exec rate */
    if (!fp || fwrite(data, 1, size, fp) != size || fclose(fp) != 0)
        abort();
    sum s = {0, 7};
    uint64_t total = 0;
    lp_status st1 = size >= 2 && data[0] == 0x1f && data[1] == 0x8b
                        ? lp_trace_gunzip_stream(path, CAP, sink, &s, &total)
                        : LP_STATUS_FORMAT; /* plain text: the whole-text reader only */
    if (s.n != total || total > CAP)
        abort();
    char *text = NULL;
    size_t len = 0;
    lp_status st2 = lp_trace_read_text_max(path, CAP, &text, &len);
    if (st2 == LP_OK) {
        if (len > CAP || text[len] != '\0')
            abort();
        if (st1 == LP_OK) {
            sum t = {0, 7};
            sink(&t, text, len);
            if (t.n != total || t.hash != s.hash)
                abort(); /* the two readers disagree on the text */
        }
    } else if (st1 == LP_OK) {
        abort(); /* the stream read what the whole-text reader refused */
    }
    free(text);
    return 0;
}
