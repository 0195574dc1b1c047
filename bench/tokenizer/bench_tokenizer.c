/* Tokenizer throughput on one thread: encodes every line of a (gzip) corpus with
 * lp_tokenizer_encode_n, several rounds, and prints the best round as JSON (MB/s of input
 * bytes, lines/s, ids/s). bench/tokenizer/run.py puts it beside HF tokenizers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>

#include "loupe/text.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: bench_tokenizer TOKENIZER CORPUS.txt.gz [ROUNDS]\n");
        return 2;
    }
    int rounds = argc > 3 ? atoi(argv[3]) : 5;
    gzFile gz = gzopen(argv[2], "rb");
    if (!gz) {
        fprintf(stderr, "bench_tokenizer: cannot open %s\n", argv[2]);
        return 1;
    }
    size_t cap = 1 << 20, len = 0;
    char *data = malloc(cap);
    int n;
    while (data && (n = gzread(gz, data + len, (unsigned)(cap - len))) > 0) {
        len += (size_t)n;
        if (len == cap) data = realloc(data, cap *= 2);
    }
    gzclose(gz);
    if (!data) return 1;
    size_t nlines = 0;
    for (size_t i = 0; i < len; i++) nlines += data[i] == '\n';
    lp_tokenizer *tok = NULL;
    double t0 = now();
    if (lp_tokenizer_load(argv[1], &tok) != LP_OK) {
        fprintf(stderr, "bench_tokenizer: %s\n", lp_err_msg());
        return 1;
    }
    double load_s = now() - t0;
    lp_encoding enc = {0};
    double best = 1e30;
    size_t ids = 0;
    for (int r = 0; r < rounds; r++) {
        ids = 0;
        t0 = now();
        for (size_t i = 0; i < len;) {
            const char *nl = memchr(data + i, '\n', len - i);
            size_t e = nl ? (size_t)(nl - data) : len;
            if (lp_tokenizer_encode_n(tok, data + i, e - i, NULL, 0, NULL, &enc) != LP_OK) {
                fprintf(stderr, "bench_tokenizer: %s\n", lp_err_msg());
                return 1;
            }
            ids += enc.len;
            i = e + 1;
        }
        double dt = now() - t0;
        if (dt < best) best = dt;
    }
    printf("{\"lines\": %zu, \"bytes\": %zu, \"ids\": %zu, \"seconds\": %.6f, \"load_seconds\": %.4f, "
           "\"mb_per_s\": %.3f, \"lines_per_s\": %.1f}\n",
           nlines, len, ids, best, load_s, (double)len / best / 1e6, (double)nlines / best);
    lp_encoding_free(&enc);
    lp_tokenizer_free(tok);
    free(data);
    return 0;
}
