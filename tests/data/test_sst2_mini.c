/* The bundled dataset data/sst2-mini: it loads cleanly, has the documented sizes and a
 * balanced label split, train and dev share no sentence, and vocab.txt covers every
 * word of the corpus after BERT's basic (lowercase, punctuation-splitting) tokenization. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "loupe/data.h"

static void path_of(char *out, size_t n, const char *rel)
{
    const char *root = getenv("LP_SOURCE_DIR");
    snprintf(out, n, "%s/%s", root ? root : ".", rel);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void check_split(const lp_dataset *ds, int64_t want_n)
{
    assert_int_equal(ds->n, want_n);
    assert_int_equal(ds->n_skipped, 0);
    assert_int_equal(ds->label_map.n, 2);
    assert_string_equal(ds->label_map.names[0], "0");
    assert_string_equal(ds->label_map.names[1], "1");
    int64_t counts[2];
    lp_dataset_label_counts(ds, counts);
    assert_int_equal(counts[0] + counts[1], want_n);
    /* balanced within 45..55 % */
    assert_in_range(counts[1] * 100 / want_n, 45, 55);
}

static void test_sst2_mini(void **state)
{
    (void)state;
    char train_path[512], dev_path[512];
    path_of(train_path, sizeof train_path, "data/sst2-mini/train.tsv");
    path_of(dev_path, sizeof dev_path, "data/sst2-mini/dev.tsv");
    lp_dataset train, dev;
    lp_status st = lp_dataset_load(train_path, NULL, &train);
    if (st != LP_OK)
        print_error("%s\n", lp_err_msg());
    assert_int_equal(st, LP_OK);
    assert_int_equal(lp_dataset_load(dev_path, NULL, &dev), LP_OK);
    check_split(&train, 4000);
    check_split(&dev, 500);

    /* disjoint sentences: sort both, merge */
    char **a = malloc((size_t)train.n * sizeof *a), **b = malloc((size_t)dev.n * sizeof *b);
    memcpy(a, train.text, (size_t)train.n * sizeof *a);
    memcpy(b, dev.text, (size_t)dev.n * sizeof *b);
    qsort(a, (size_t)train.n, sizeof *a, cmp_str);
    qsort(b, (size_t)dev.n, sizeof *b, cmp_str);
    int64_t i = 0, j = 0, shared = 0, dups = 0;
    while (i < train.n && j < dev.n) {
        int c = strcmp(a[i], b[j]);
        shared += c == 0;
        if (c <= 0)
            i++;
        else
            j++;
    }
    for (i = 1; i < train.n; i++)
        dups += strcmp(a[i - 1], a[i]) == 0;
    assert_int_equal(shared, 0);
    assert_int_equal(dups, 0);

    /* vocab: specials first, then every basic token of the corpus is present */
    char vocab_path[512];
    path_of(vocab_path, sizeof vocab_path, "data/sst2-mini/vocab.txt");
    char *vbuf;
    size_t vlen;
    assert_int_equal(lp_file_read_all(vocab_path, &vbuf, &vlen), LP_OK);
    char **words = NULL;
    size_t nw = 0;
    for (char *line = strtok(vbuf, "\n"); line; line = strtok(NULL, "\n")) {
        words = realloc(words, (nw + 1) * sizeof *words);
        words[nw++] = line;
    }
    assert_true(nw > 300);
    const char *specials[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
    for (size_t k = 0; k < 5; k++)
        assert_string_equal(words[k], specials[k]);
    qsort(words, nw, sizeof *words, cmp_str);
    for (size_t k = 1; k < nw; k++)
        assert_string_not_equal(words[k - 1], words[k]);
    int64_t missing = 0;
    for (int pass = 0; pass < 2; pass++) {
        const lp_dataset *ds = pass ? &dev : &train;
        for (int64_t r = 0; r < ds->n; r++) {
            const char *s = ds->text[r];
            while (*s) {
                char tok[128];
                size_t n = 0;
                if (isspace((unsigned char)*s)) {
                    s++;
                    continue;
                }
                if (ispunct((unsigned char)*s)) {
                    tok[n++] = *s++;
                } else {
                    while (*s && !isspace((unsigned char)*s) && !ispunct((unsigned char)*s) && n < sizeof tok - 1)
                        tok[n++] = (char)tolower((unsigned char)*s++);
                }
                tok[n] = '\0';
                const char *key = tok;
                if (!bsearch(&key, words, nw, sizeof *words, cmp_str)) {
                    if (missing++ < 5)
                        print_error("not in vocab.txt: '%s'\n", tok);
                }
            }
        }
    }
    assert_int_equal(missing, 0);
    /* single letters and their ## continuations, so any ASCII word can be spelled */
    for (char c = 'a'; c <= 'z'; c++) {
        char one[2] = {c, 0}, cont[4] = {'#', '#', c, 0};
        const char *k1 = one, *k2 = cont;
        assert_non_null(bsearch(&k1, words, nw, sizeof *words, cmp_str));
        assert_non_null(bsearch(&k2, words, nw, sizeof *words, cmp_str));
    }
    free(words);
    free(vbuf);
    free(a);
    free(b);
    lp_dataset_free(&train);
    lp_dataset_free(&dev);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sst2_mini),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
