/* libFuzzer target for the dataset readers: CSV, TSV and JSONL rows from a memory
 * buffer, plus label_mappings.json parsing. The first byte picks the format and
 * options; on success the rows are tokenized and batched to exercise the whole path. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "loupe/data.h"

/* One id per byte, plus [CLS]/[SEP]: enough to drive encode, truncation and batches. */
static lp_status byte_encode(void *ctx, const char *text, const char *pair, int32_t max_len, int32_t *ids,
                             int32_t *type_ids, int32_t *n_out)
{
    (void)ctx;
    int32_t n = 0;
    const char *parts[2] = {text, pair};
    for (int p = 0; p < 2 && parts[p]; p++)
        for (const char *s = parts[p]; *s && n < max_len; s++) {
            ids[n] = (unsigned char)*s;
            type_ids[n++] = p;
        }
    *n_out = n;
    return LP_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t mode = data[0];
    const char *buf = (const char *)data + 1;
    size_t len = size - 1;
    if ((mode & 3) == 3) {
        lp_label_map m;
        if (lp_label_map_parse(&m, "fuzz.json", buf, len) == LP_OK) {
            if (m.n < 1 || lp_label_map_find(&m, m.names[m.n - 1]) != m.n - 1)
                abort();
            lp_label_map_free(&m);
        }
        return 0;
    }
    static const char *names[3] = {"fuzz.csv", "fuzz.tsv", "fuzz.jsonl"};
    lp_dataset_options opt;
    lp_dataset_options_init(&opt);
    opt.skip_bad_rows = (mode >> 2) & 1;
    if ((mode >> 3) & 1) {
        opt.text_column = "a";
        opt.text_pair_column = "b";
        opt.label_column = "c";
    }
    lp_label_map given;
    const char *given_names[3] = {"neg", "pos", "mid"};
    int have_map = (mode >> 4) & 1;
    if (have_map) {
        if (lp_label_map_from_names(&given, given_names, 3) != LP_OK)
            abort();
        opt.label_map = &given;
    } else if ((mode >> 5) & 1) {
        opt.num_labels = 2;
    }
    lp_dataset ds;
    lp_status st = lp_dataset_load_buffer(names[mode & 3], buf, len, &opt, &ds);
    if (st == LP_OK) {
        if (ds.n < 1 || ds.label_map.n < 1)
            abort();
        for (int64_t i = 0; i < ds.n; i++)
            if (ds.labels[i] < 0 || ds.labels[i] >= ds.label_map.n || !ds.text[i][0])
                abort();
        lp_encoded_dataset e;
        if (lp_dataset_encode(&ds, byte_encode, NULL, 16, 0, &e) == LP_OK) {
            lp_length_stats stats;
            if (lp_encoded_length_stats(&e, &stats) != LP_OK || stats.max > 0x7fffffff || stats.min > stats.max)
                abort();
            int64_t *order = malloc((size_t)e.n * sizeof *order);
            lp_batch b;
            lp_batch_init(&b);
            if (order && lp_epoch_order(e.n, mode, 1, 1, order) == LP_OK) {
                for (int64_t s = 0; s < lp_batch_count(e.n, 4, 0); s++) {
                    int32_t rows = (int32_t)(e.n - s * 4 < 4 ? e.n - s * 4 : 4);
                    if (lp_batch_fill(&b, &e, order + s * 4, rows, (mode & 64) ? 16 : 0) != LP_OK || b.T > 16)
                        abort();
                }
            }
            lp_batch_free(&b);
            free(order);
            lp_encoded_dataset_free(&e);
        }
        if (ds.n >= 2) {
            lp_dataset tr, va;
            if (lp_dataset_split(&ds, 0.3, mode, &tr, &va) != LP_OK || tr.n + va.n != ds.n)
                abort();
            lp_dataset_free(&tr);
            lp_dataset_free(&va);
        }
        lp_dataset_free(&ds);
    }
    if (have_map)
        lp_label_map_free(&given);
    return 0;
}
