/* Dataset operations: seeded splits (deterministic, disjoint, complete), per-epoch
 * orders, tokenizing through a fake whitespace encoder, truncation, length statistics
 * and padded batches (shapes, masks, pad ids, fixed length). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "loupe/data.h"

/* ---- a fake tokenizer: [CLS]=2 words [SEP]=3 (pair: [CLS] a [SEP] b [SEP]); a word's
 * id is 10 + FNV-1a(word) % 1000; truncation keeps the first max_len-1 and ends in
 * [SEP]. Counts its calls. */
enum { CLS = 2, SEP = 3, PAD = 0 };

typedef struct fake_tok {
    int calls;
} fake_tok;

static int32_t word_id(const char *w, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)w[i]) * 16777619u;
    return 10 + (int32_t)(h % 1000);
}

static int split_words(const char *s, int32_t *ids, int32_t cap, int32_t *n)
{
    while (*s) {
        while (*s == ' ')
            s++;
        if (!*s)
            break;
        const char *e = s;
        while (*e && *e != ' ')
            e++;
        if (*n < cap)
            ids[*n] = word_id(s, (size_t)(e - s));
        (*n)++;
        s = e;
    }
    return 1;
}

static lp_status fake_encode(void *ctx, const char *text, const char *pair, int32_t max_len, int32_t *ids,
                             int32_t *type_ids, int32_t *n_out)
{
    fake_tok *t = ctx;
    t->calls++;
    if (strstr(text, "FAIL"))
        return lp_err(LP_STATUS_FORMAT, "fake tokenizer refuses this text");
    int32_t tmp[512], ttmp[512], n = 0;
    tmp[n] = CLS, ttmp[n++] = 0;
    int32_t before = n;
    split_words(text, tmp, 500, &n);
    for (int32_t i = before; i < n; i++)
        ttmp[i] = 0;
    tmp[n] = SEP, ttmp[n++] = 0;
    if (pair) {
        before = n;
        split_words(pair, tmp, 500, &n);
        for (int32_t i = before; i < n; i++)
            ttmp[i] = 1;
        tmp[n] = SEP, ttmp[n++] = 1;
    }
    if (n > max_len) {
        n = max_len;
        tmp[n - 1] = SEP;
    }
    memcpy(ids, tmp, (size_t)n * sizeof *ids);
    memcpy(type_ids, ttmp, (size_t)n * sizeof *type_ids);
    *n_out = n;
    return LP_OK;
}

/* An encoder that breaks the contract by writing more than max_len when truncating. */
static lp_status greedy_encode(void *ctx, const char *text, const char *pair, int32_t max_len, int32_t *ids,
                               int32_t *type_ids, int32_t *n_out)
{
    lp_status st = fake_encode(ctx, text, pair, 1 << 20, ids, type_ids, n_out);
    (void)max_len;
    return st;
}

/* Rows "w1", "w1 w2", ... "w1 .. wN": row i has i+1 words, label i % 2. */
static void make_rows(lp_dataset *ds, int n)
{
    size_t cap = (size_t)n * 8 + 64;
    char *csv = malloc(cap * (size_t)n + 64), *p = csv;
    p += sprintf(p, "text,label\n");
    for (int i = 0; i < n; i++) {
        for (int w = 0; w <= i; w++)
            p += sprintf(p, "%sw%d", w ? " " : "", w + 1);
        p += sprintf(p, ",%d\n", i % 2);
    }
    assert_int_equal(lp_dataset_load_buffer("rows.csv", csv, strlen(csv), NULL, ds), LP_OK);
    free(csv);
    assert_int_equal(ds->n, n);
}

static void test_split(void **state)
{
    (void)state;
    lp_dataset ds, tr, va, tr2, va2;
    make_rows(&ds, 100);
    assert_int_equal(lp_dataset_split(&ds, 0.2, 7, &tr, &va), LP_OK);
    assert_int_equal(va.n, 20);
    assert_int_equal(tr.n, 80);
    /* disjoint and complete (lines identify rows), each part in file order */
    char seen[102] = {0};
    for (int64_t i = 0; i < tr.n; i++) {
        seen[tr.lines[i]]++;
        if (i)
            assert_true(tr.lines[i] > tr.lines[i - 1]);
        assert_string_equal(tr.text[i], ds.text[tr.lines[i] - 2]);
        assert_int_equal(tr.labels[i], ds.labels[tr.lines[i] - 2]);
    }
    for (int64_t i = 0; i < va.n; i++) {
        seen[va.lines[i]]++;
        if (i)
            assert_true(va.lines[i] > va.lines[i - 1]);
    }
    for (int line = 2; line < 102; line++)
        assert_int_equal(seen[line], 1);
    assert_int_equal(tr.label_map.n, 2);
    /* the same seed gives the same split; another seed a different one */
    assert_int_equal(lp_dataset_split(&ds, 0.2, 7, &tr2, &va2), LP_OK);
    assert_memory_equal(va.lines, va2.lines, (size_t)va.n * sizeof *va.lines);
    lp_dataset_free(&tr2);
    lp_dataset_free(&va2);
    assert_int_equal(lp_dataset_split(&ds, 0.2, 8, &tr2, &va2), LP_OK);
    assert_memory_not_equal(va.lines, va2.lines, (size_t)va.n * sizeof *va.lines);
    lp_dataset_free(&tr2);
    lp_dataset_free(&va2);
    /* tiny fractions still leave one row each side; bad fractions are refused */
    assert_int_equal(lp_dataset_split(&ds, 0.001, 1, &tr2, &va2), LP_OK);
    assert_int_equal(va2.n, 1);
    assert_int_equal(tr2.n, 99);
    lp_dataset_free(&tr2);
    lp_dataset_free(&va2);
    assert_int_equal(lp_dataset_split(&ds, 0.0, 1, &tr2, &va2), LP_STATUS_INVALID_ARG);
    assert_int_equal(lp_dataset_split(&ds, 1.0, 1, &tr2, &va2), LP_STATUS_INVALID_ARG);
    lp_dataset_free(&tr);
    lp_dataset_free(&va);
    lp_dataset_free(&ds);
}

static int is_permutation(const int64_t *o, int64_t n)
{
    char *seen = calloc((size_t)n, 1);
    int ok = 1;
    for (int64_t i = 0; i < n && ok; i++) {
        ok = o[i] >= 0 && o[i] < n && !seen[o[i]];
        if (ok)
            seen[o[i]] = 1;
    }
    free(seen);
    return ok;
}

static void test_epoch_order(void **state)
{
    (void)state;
    enum { N = 50 };
    int64_t a[N], b[N];
    assert_int_equal(lp_epoch_order(N, 1, 0, 0, a), LP_OK);
    for (int i = 0; i < N; i++)
        assert_int_equal(a[i], i);
    assert_int_equal(lp_epoch_order(N, 1, 0, 1, a), LP_OK);
    assert_int_equal(lp_epoch_order(N, 1, 0, 1, b), LP_OK);
    assert_true(is_permutation(a, N));
    assert_memory_equal(a, b, sizeof a);
    assert_int_equal(lp_epoch_order(N, 1, 1, 1, b), LP_OK); /* next epoch differs */
    assert_true(is_permutation(b, N));
    assert_memory_not_equal(a, b, sizeof a);
    assert_int_equal(lp_epoch_order(N, 2, 0, 1, b), LP_OK); /* another seed differs */
    assert_memory_not_equal(a, b, sizeof a);
    /* every row leads an epoch about equally often (5 rows, 5000 epochs, 1000 expected) */
    int first[5] = {0};
    int64_t o[5];
    for (int64_t e = 0; e < 5000; e++) {
        assert_int_equal(lp_epoch_order(5, 42, e, 1, o), LP_OK);
        first[o[0]]++;
    }
    for (int i = 0; i < 5; i++)
        assert_in_range(first[i], 880, 1120);
}

static void test_encode_truncate_stats(void **state)
{
    (void)state;
    lp_dataset ds;
    make_rows(&ds, 10); /* full lengths 3..12 with [CLS] and [SEP] */
    fake_tok tok = {0};
    lp_encoded_dataset e;
    assert_int_equal(lp_dataset_encode(&ds, fake_encode, &tok, 8, PAD, &e), LP_OK);
    assert_int_equal(tok.calls, 10 + 4); /* the 4 rows above 8 are encoded again */
    assert_int_equal(e.n, 10);
    for (int i = 0; i < 10; i++) {
        int32_t len = (int32_t)(e.offsets[i + 1] - e.offsets[i]);
        assert_int_equal(e.full_len[i], i + 3);
        assert_int_equal(len, i + 3 > 8 ? 8 : i + 3);
        assert_int_equal(e.ids[e.offsets[i]], CLS);
        assert_int_equal(e.ids[e.offsets[i + 1] - 1], SEP);
        assert_int_equal(e.labels[i], i % 2);
    }
    assert_int_equal(e.ids[e.offsets[9] + 1], word_id("w1", 2));
    assert_int_equal(e.ids[e.offsets[9] + 6], word_id("w6", 2)); /* kept up to the cut */
    lp_length_stats st;
    assert_int_equal(lp_encoded_length_stats(&e, &st), LP_OK);
    assert_int_equal(st.count, 10);
    assert_int_equal(st.min, 3);
    assert_int_equal(st.max, 12);
    assert_float_equal(st.mean, 7.5, 1e-12);
    assert_int_equal(st.p50, 7);  /* 5th smallest */
    assert_int_equal(st.p90, 11); /* 9th */
    assert_int_equal(st.p99, 12); /* 10th */
    assert_int_equal(st.n_truncated, 4);
    assert_int_equal(st.total_tokens, 3 + 4 + 5 + 6 + 7 + 8 * 5);
    lp_encoded_dataset_free(&e);

    /* encoder failures carry the row's file and line; contract breaches are caught */
    lp_dataset bad;
    const char *fcsv = "text,label\nok,1\nplease FAIL,0\n";
    assert_int_equal(lp_dataset_load_buffer("f.csv", fcsv, strlen(fcsv), NULL, &bad), LP_OK);
    assert_int_equal(lp_dataset_encode(&bad, fake_encode, &tok, 8, PAD, &e), LP_STATUS_FORMAT);
    assert_non_null(strstr(lp_err_msg(), "f.csv:3: tokenizing: fake tokenizer refuses"));
    assert_null(e.ids);
    lp_dataset_free(&bad);
    assert_int_equal(lp_dataset_encode(&ds, greedy_encode, &tok, 8, PAD, &e), LP_STATUS_RANGE);
    assert_non_null(strstr(lp_err_msg(), "rows.csv:8:"));
    assert_int_equal(lp_dataset_encode(&ds, fake_encode, &tok, 0, PAD, &e), LP_STATUS_INVALID_ARG);
    lp_dataset_free(&ds);
}

static void test_pairs_type_ids(void **state)
{
    (void)state;
    lp_dataset ds;
    const char *csv = "sentence1,sentence2,label\na b,c,1\nd,e f g,0\n";
    assert_int_equal(lp_dataset_load_buffer("p.csv", csv, strlen(csv), NULL, &ds), LP_OK);
    fake_tok tok = {0};
    lp_encoded_dataset e;
    assert_int_equal(lp_dataset_encode(&ds, fake_encode, &tok, 16, PAD, &e), LP_OK);
    lp_batch b;
    lp_batch_init(&b);
    int64_t rows[2] = {0, 1};
    assert_int_equal(lp_batch_fill(&b, &e, rows, 2, 0), LP_OK);
    assert_int_equal(b.T, 7); /* [CLS] d [SEP] e f g [SEP] */
    int32_t want_tt[2][7] = {{0, 0, 0, 0, 1, 1, 0}, {0, 0, 0, 1, 1, 1, 1}};
    int32_t want_mask[2][7] = {{1, 1, 1, 1, 1, 1, 0}, {1, 1, 1, 1, 1, 1, 1}};
    assert_memory_equal(b.token_type_ids, want_tt, sizeof want_tt);
    assert_memory_equal(b.attention_mask, want_mask, sizeof want_mask);
    lp_batch_free(&b);
    lp_encoded_dataset_free(&e);
    lp_dataset_free(&ds);
}

static void test_batches(void **state)
{
    (void)state;
    lp_dataset ds;
    make_rows(&ds, 10);
    fake_tok tok = {0};
    lp_encoded_dataset e;
    const int32_t pad = 77;
    assert_int_equal(lp_dataset_encode(&ds, fake_encode, &tok, 8, pad, &e), LP_OK);
    lp_batch b;
    lp_batch_init(&b);
    int64_t rows[3] = {2, 0, 4}; /* lengths 5, 3, 7 */
    assert_int_equal(lp_batch_fill(&b, &e, rows, 3, 0), LP_OK);
    assert_int_equal(b.B, 3);
    assert_int_equal(b.T, 7); /* dynamic: the longest row */
    assert_int_equal(b.n_tokens, 5 + 3 + 7);
    int32_t lens[3] = {5, 3, 7};
    for (int r = 0; r < 3; r++) {
        const int32_t *src = e.ids + e.offsets[rows[r]];
        for (int t = 0; t < b.T; t++) {
            int in = t < lens[r];
            assert_int_equal(b.attention_mask[r * b.T + t], in);
            assert_int_equal(b.input_ids[r * b.T + t], in ? src[t] : pad);
            assert_int_equal(b.token_type_ids[r * b.T + t], 0);
            /* a causal LM's labels: the ids themselves, -100 (ignored) on padding */
            assert_int_equal(b.lm_labels[r * b.T + t], in ? src[t] : -100);
        }
        assert_int_equal(b.labels[r], (int32_t)(rows[r] % 2));
        assert_int_equal(b.rows[r], rows[r]);
    }
    /* fixed length */
    assert_int_equal(lp_batch_fill(&b, &e, rows, 3, 12), LP_OK);
    assert_int_equal(b.T, 12);
    assert_int_equal(b.n_tokens, 5 + 3 + 7);
    assert_int_equal(b.input_ids[1 * 12 + 3], pad);
    assert_int_equal(b.attention_mask[2 * 12 + 6], 1);
    assert_int_equal(b.attention_mask[2 * 12 + 7], 0);
    assert_int_equal(lp_batch_fill(&b, &e, rows, 3, 6), LP_STATUS_RANGE);
    /* truncated rows fill max_len exactly; a smaller batch reuses the buffers */
    int64_t longest[2] = {9, 8};
    assert_int_equal(lp_batch_fill(&b, &e, longest, 2, 0), LP_OK);
    assert_int_equal(b.T, 8);
    for (int t = 0; t < 16; t++)
        assert_int_equal(b.attention_mask[t], 1);
    int64_t one[1] = {0};
    assert_int_equal(lp_batch_fill(&b, &e, one, 1, 0), LP_OK);
    assert_int_equal(b.B, 1);
    assert_int_equal(b.T, 3);
    int64_t out_of_range[1] = {10};
    assert_int_equal(lp_batch_fill(&b, &e, out_of_range, 1, 0), LP_STATUS_INVALID_ARG);
    assert_int_equal(lp_batch_fill(&b, &e, one, 0, 0), LP_STATUS_INVALID_ARG);
    /* a whole epoch in batches of 4 covers every row once */
    int64_t order[10];
    assert_int_equal(lp_epoch_order(10, 3, 1, 1, order), LP_OK);
    assert_int_equal(lp_batch_count(10, 4, 0), 3);
    assert_int_equal(lp_batch_count(10, 4, 1), 2);
    assert_int_equal(lp_batch_count(10, 0, 0), 0);
    int seen[10] = {0};
    for (int64_t s = 0; s < lp_batch_count(10, 4, 0); s++) {
        int32_t nrow = (int32_t)(10 - s * 4 < 4 ? 10 - s * 4 : 4);
        assert_int_equal(lp_batch_fill(&b, &e, order + s * 4, nrow, 0), LP_OK);
        for (int r = 0; r < b.B; r++)
            seen[b.rows[r]]++;
    }
    for (int i = 0; i < 10; i++)
        assert_int_equal(seen[i], 1);
    lp_batch_free(&b);
    lp_encoded_dataset_free(&e);
    lp_dataset_free(&ds);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split),
        cmocka_unit_test(test_epoch_order),
        cmocka_unit_test(test_encode_truncate_stats),
        cmocka_unit_test(test_pairs_type_ids),
        cmocka_unit_test(test_batches),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
