/* The dataset readers on good and malformed input: CSV quoting, CRLF, BOM, TSV, JSONL,
 * every bad-row kind with its file:line message, skip-bad-rows counting, label ids and
 * label_mappings.json written, parsed back and rejected when inconsistent. */
#include "lp_test_util.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cJSON.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loupe/data.h"

static lp_status load_opt(const char *name, const char *text, const lp_dataset_options *opt, lp_dataset *ds)
{
    return lp_dataset_load_buffer(name, text, strlen(text), opt, ds);
}

static lp_status load(const char *name, const char *text, lp_dataset *ds)
{
    return load_opt(name, text, NULL, ds);
}

/* Expects failure with status st and a message containing each of the given pieces. */
static void expect_fail(const char *name, const char *text, const lp_dataset_options *opt, lp_status st,
                        const char *piece1, const char *piece2)
{
    lp_dataset ds;
    lp_status got = load_opt(name, text, opt, &ds);
    if (got != st || !strstr(lp_err_msg(), piece1) || (piece2 && !strstr(lp_err_msg(), piece2)))
        print_error("input %s -> status %d (want %d), message: %s\n", name, got, st, lp_err_msg());
    assert_int_equal(got, st);
    assert_non_null(strstr(lp_err_msg(), piece1));
    if (piece2)
        assert_non_null(strstr(lp_err_msg(), piece2));
    assert_int_equal(ds.n, 0);
    assert_null(ds.text);
}

static void test_csv_quoting(void **state)
{
    (void)state;
    lp_dataset ds;
    const char *csv = "text,label\n"
                      "\"hello, world\",1\n"
                      "\"she said \"\"hi\"\"\",0\n"
                      "\"multi\nline\",1\r\n"
                      "plain,0\n"
                      "\n"
                      "\"\",\"1\"\n" /* empty quoted text: bad row... */;
    lp_dataset_options opt;
    lp_dataset_options_init(&opt);
    opt.skip_bad_rows = 1;
    assert_int_equal(load_opt("q.csv", csv, &opt, &ds), LP_OK);
    assert_int_equal(ds.n, 4);
    assert_string_equal(ds.text[0], "hello, world");
    assert_string_equal(ds.text[1], "she said \"hi\"");
    assert_string_equal(ds.text[2], "multi\nline");
    assert_string_equal(ds.text[3], "plain");
    assert_int_equal(ds.lines[0], 2);
    assert_int_equal(ds.lines[2], 4);
    assert_int_equal(ds.lines[3], 6);
    assert_int_equal(ds.labels[0], 1);
    assert_int_equal(ds.labels[1], 0);
    assert_null(ds.text_pair);
    assert_int_equal(ds.label_map.n, 2);
    assert_string_equal(ds.label_map.names[1], "1");
    assert_int_equal(ds.n_skipped, 1); /* ...which skip mode counts, at its line (8) */
    assert_non_null(strstr(ds.skip_reasons[0], "q.csv:8: empty text"));
    lp_dataset_free(&ds);
    assert_int_equal(ds.n, 0);
}

static void test_csv_crlf_bom_and_spaces(void **state)
{
    (void)state;
    lp_dataset ds;
    assert_int_equal(load("c.csv", "\xEF\xBB\xBFtext , label\r\nfirst,1\r\nsecond, 0 \r\nthird,1", &ds), LP_OK);
    assert_int_equal(ds.n, 3);
    assert_string_equal(ds.text[0], "first");
    assert_string_equal(ds.text[1], "second");
    assert_string_equal(ds.text[2], "third"); /* no final newline */
    assert_int_equal(ds.labels[1], 0);        /* " 0 " is the label 0 */
    assert_int_equal(ds.lines[2], 4);
    lp_dataset_free(&ds);
    /* CRLF blank lines, a last line ending in a lone CR, and a CR inside a quoted field */
    assert_int_equal(load("c2.csv", "text,label\r\n\r\n\"a\r\nb\",1\r\n\r\nlast,0\r", &ds), LP_OK);
    assert_int_equal(ds.n, 2);
    assert_string_equal(ds.text[0], "a\r\nb");
    assert_string_equal(ds.text[1], "last");
    assert_int_equal(ds.lines[0], 3);
    assert_int_equal(ds.lines[1], 6);
    lp_dataset_free(&ds);
}

static void test_csv_malformed(void **state)
{
    (void)state;
    expect_fail("u.csv", "text,label\nok,1\n\"never closed,0\nmore,1\n", NULL, LP_STATUS_FORMAT, "u.csv:3:",
                "unterminated quoted field");
    expect_fail("w.csv", "text,label\nok,1\na,b,1\n", NULL, LP_STATUS_FORMAT, "w.csv:3:",
                "expected 2 fields (as in the header), found 3");
    expect_fail("w1.csv", "text,label\nonly\n", NULL, LP_STATUS_FORMAT, "w1.csv:2:", "found 1");
    expect_fail("g.csv", "text,label\n\"quoted\"tail,1\n", NULL, LP_STATUS_FORMAT, "g.csv:2:",
                "after a closing quote");
    expect_fail("e.csv", "text,label\n   ,1\n", NULL, LP_STATUS_FORMAT, "e.csv:2:", "empty text in column 'text'");
    expect_fail("l.csv", "text,label\nfine,\n", NULL, LP_STATUS_FORMAT, "l.csv:2:", "empty label");
}

static void test_csv_nul_byte(void **state)
{
    (void)state;
    const char buf[] = "text,label\nab\0c,1\n";
    lp_dataset ds;
    assert_int_equal(lp_dataset_load_buffer("n.csv", buf, sizeof buf - 1, NULL, &ds), LP_STATUS_FORMAT);
    assert_non_null(strstr(lp_err_msg(), "n.csv:2: NUL byte"));
}

static void test_utf8(void **state)
{
    (void)state;
    lp_dataset ds;
    assert_int_equal(load("ok.csv", "text,label\ncaf\xC3\xA9 \xF0\x9F\x98\x80 \xE2\x82\xAC,1\n", &ds), LP_OK);
    assert_string_equal(ds.text[0], "caf\xC3\xA9 \xF0\x9F\x98\x80 \xE2\x82\xAC");
    lp_dataset_free(&ds);
    const char *bad[] = {
        "text,label\n\xFF\xFE,1\n",          /* never valid */
        "text,label\nx\xC0\xAF,1\n",         /* overlong '/' */
        "text,label\nx\xED\xA0\x80,1\n",     /* surrogate */
        "text,label\nx\xE2\x82,1\n",         /* truncated */
        "text,label\nx\xF4\x90\x80\x80,1\n", /* above U+10FFFF */
        "text,label\nok,\xC3\x28\n",         /* bad label bytes */
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        expect_fail("b.csv", bad[i], NULL, LP_STATUS_FORMAT, "b.csv:2: invalid UTF-8", NULL);
}

static void test_columns(void **state)
{
    (void)state;
    lp_dataset_options opt;
    lp_dataset_options_init(&opt);
    opt.text_column = "review";
    expect_fail("m.csv", "sentence,label\na,1\n", &opt, LP_STATUS_NOT_FOUND, "no text column 'review'",
                "columns: 'sentence', 'label'");
    expect_fail("m2.csv", "foo,bar\na,1\n", NULL, LP_STATUS_NOT_FOUND, "'text' or 'sentence' or 'sentence1'", NULL);
    expect_fail("m3.tsv", "sentence\tscore\na\t1\n", NULL, LP_STATUS_NOT_FOUND, "no label column", "--label-column");

    /* seed 001's val_df.csv: text, labels (names), label_id; explicit columns pick either */
    const char *seed = "text,labels,label_id\nnice cable,electronics,1\nfresh beans,groceries,0\n";
    lp_dataset ds;
    assert_int_equal(load("v.csv", seed, &ds), LP_OK);
    assert_int_equal(ds.label_map.n, 2);
    assert_string_equal(ds.label_map.names[0], "electronics");
    assert_int_equal(ds.labels[1], 1);
    lp_dataset_free(&ds);
    lp_dataset_options_init(&opt);
    opt.label_column = "label_id";
    assert_int_equal(load_opt("v.csv", seed, &opt, &ds), LP_OK);
    assert_int_equal(ds.labels[0], 1);
    assert_int_equal(ds.labels[1], 0);
    lp_dataset_free(&ds);

    /* sentence pairs: sentence1/sentence2 by default, or named */
    assert_int_equal(load("p.csv", "sentence1,sentence2,label\na b,c d,1\n", &ds), LP_OK);
    assert_non_null(ds.text_pair);
    assert_string_equal(ds.text_pair[0], "c d");
    lp_dataset_free(&ds);
    lp_dataset_options_init(&opt);
    opt.text_column = "q";
    opt.text_pair_column = "a";
    assert_int_equal(load_opt("p.csv", "id,q,a,label\n7,why,because,yes\n", &opt, &ds), LP_OK);
    assert_string_equal(ds.text[0], "why");
    assert_string_equal(ds.text_pair[0], "because");
    assert_string_equal(ds.label_map.names[0], "yes");
    lp_dataset_free(&ds);
    opt.text_pair_column = "answer";
    expect_fail("p.csv", "id,q,a,label\n7,why,because,yes\n", &opt, LP_STATUS_NOT_FOUND, "no text pair column 'answer'",
                NULL);
    expect_fail("p2.csv", "id,q,a,label\n7,why, ,yes\n", &(lp_dataset_options){.text_column = "q", .text_pair_column = "a"},
                LP_STATUS_FORMAT, "p2.csv:2: empty text in column 'a'", NULL);
}

static void test_empty_and_header_only(void **state)
{
    (void)state;
    expect_fail("e.csv", "", NULL, LP_STATUS_FORMAT, "e.csv: empty file", NULL);
    expect_fail("e.csv", "\xEF\xBB\xBF", NULL, LP_STATUS_FORMAT, "empty file", NULL);
    expect_fail("e.tsv", "\n\r\n", NULL, LP_STATUS_FORMAT, "empty file", NULL);
    expect_fail("h.csv", "text,label\n", NULL, LP_STATUS_FORMAT, "h.csv: header only", NULL);
    expect_fail("h.tsv", "sentence\tlabel\r\n\r\n", NULL, LP_STATUS_FORMAT, "header only", NULL);
    expect_fail("e.jsonl", "\n  \n", NULL, LP_STATUS_FORMAT, "e.jsonl: empty file", NULL);
    expect_fail("x.txt", "text,label\na,1\n", NULL, LP_STATUS_UNSUPPORTED, "x.txt: cannot tell the format", NULL);
    lp_dataset ds;
    assert_int_equal(lp_dataset_load("/nonexistent/d.csv", NULL, &ds), LP_STATUS_IO);
    assert_non_null(strstr(lp_err_msg(), "/nonexistent/d.csv"));
}

static void test_tsv(void **state)
{
    (void)state;
    lp_dataset ds;
    /* GLUE SST-2: a space before the tab, quotes are ordinary characters */
    assert_int_equal(load("s.tsv", "sentence\tlabel\nit 's a \"charming\" film \t1\ndull , dull \t0\n", &ds), LP_OK);
    assert_int_equal(ds.n, 2);
    assert_string_equal(ds.text[0], "it 's a \"charming\" film ");
    assert_int_equal(ds.labels[0], 1);
    assert_int_equal(ds.labels[1], 0);
    lp_dataset_free(&ds);
    expect_fail("s.tsv", "sentence\tlabel\nfine\t1\nno tab here\n", NULL, LP_STATUS_FORMAT, "s.tsv:3:",
                "expected 2 fields");
    expect_fail("s.tsv", "sentence\tlabel\na, b\t1\tx\n", NULL, LP_STATUS_FORMAT, "s.tsv:2:", "found 3");
    /* an explicit format overrides the extension */
    lp_dataset_options opt;
    lp_dataset_options_init(&opt);
    opt.format = LP_DATA_FORMAT_TSV;
    assert_int_equal(load_opt("data.txt", "text\tlabel\na,b\t0\n", &opt, &ds), LP_OK);
    assert_string_equal(ds.text[0], "a,b");
    lp_dataset_free(&ds);
}

static void test_jsonl(void **state)
{
    (void)state;
    lp_dataset ds;
    const char *j = "{\"text\": \"great\", \"label\": \"pos\"}\n"
                    "\n"
                    "{\"label\": \"neg\", \"text\": \"bad \\u00e9\", \"extra\": [1, 2]}\r\n"
                    "  {\"text\":\"ok\",\"label\":\"neutral\"}  \n";
    assert_int_equal(load("j.jsonl", j, &ds), LP_OK);
    assert_int_equal(ds.n, 3);
    assert_string_equal(ds.text[1], "bad \xC3\xA9");
    assert_int_equal(ds.lines[2], 4);
    /* string labels sorted by bytes: neg, neutral, pos */
    assert_int_equal(ds.label_map.n, 3);
    assert_string_equal(ds.label_map.names[0], "neg");
    assert_string_equal(ds.label_map.names[1], "neutral");
    assert_string_equal(ds.label_map.names[2], "pos");
    assert_int_equal(ds.labels[0], 2);
    assert_int_equal(ds.labels[1], 0);
    assert_int_equal(ds.labels[2], 1);
    lp_dataset_free(&ds);

    assert_int_equal(load("i.jsonl", "{\"sentence\":\"a\",\"label\":1}\n{\"sentence\":\"b\",\"label\":0.0}\n", &ds),
                     LP_OK);
    assert_int_equal(ds.labels[0], 1);
    assert_int_equal(ds.labels[1], 0);
    lp_dataset_free(&ds);

    expect_fail("j.jsonl", "{\"text\":\"a\",\"label\":1}\n{\"label\":0}\n", NULL, LP_STATUS_NOT_FOUND, "j.jsonl:2:",
                "missing key \"text\"");
    expect_fail("j.jsonl", "{\"text\":\"a\",\"label\":1}\n{\"text\":\"b\"}\n", NULL, LP_STATUS_NOT_FOUND,
                "missing key \"label\"", NULL);
    expect_fail("j.jsonl", "{\"text\":\"a\",\"label\":1}\n{\"text\": \"b\", \"label\": 1\n", NULL, LP_STATUS_FORMAT,
                "j.jsonl:2: invalid JSON", NULL);
    expect_fail("j.jsonl", "[\"a\", 1]\n", NULL, LP_STATUS_FORMAT, "not a JSON object", "not an array");
    expect_fail("j.jsonl", "42\n", NULL, LP_STATUS_FORMAT, "j.jsonl:1: not a JSON object", NULL);
    /* columns come from the first object that has them; rows before it are bad rows */
    lp_dataset_options opt;
    lp_dataset_options_init(&opt);
    opt.text_column = "review";
    opt.skip_bad_rows = 1;
    assert_int_equal(load_opt("k.jsonl", "{\"text\":\"a\",\"label\":1}\n{\"review\":\"b\",\"label\":0}\n", &opt, &ds),
                     LP_OK);
    assert_int_equal(ds.n, 1);
    assert_string_equal(ds.text[0], "b");
    assert_string_equal(ds.skip_reasons[0], "k.jsonl:1: no text column 'review' (columns: 'text', 'label'); name it "
                                            "with --text-column");
    lp_dataset_free(&ds);
    expect_fail("j.jsonl", "{\"text\":\"a\",\"label\":1} x\n", NULL, LP_STATUS_FORMAT, "extra text", NULL);
    expect_fail("j.jsonl", "{\"text\":\"a\",\"label\":1.5}\n", NULL, LP_STATUS_FORMAT, "bad label", NULL);
    expect_fail("j.jsonl", "{\"text\":\"a\",\"label\":true}\n", NULL, LP_STATUS_FORMAT, "bad label", NULL);
    expect_fail("j.jsonl", "{\"text\":7,\"label\":1}\n", NULL, LP_STATUS_FORMAT, "\"text\" is not a string", NULL);
    expect_fail("j.jsonl", "{\"text\":\"a\\u0000b\",\"label\":1}\n", NULL, LP_STATUS_FORMAT, "\\u0000", NULL);
    expect_fail("j.jsonl", "{\"text\":\"\",\"label\":1}\n", NULL, LP_STATUS_FORMAT, "empty text", NULL);
    expect_fail("j.jsonl", "{\"text\":\"x\xFF\",\"label\":1}\n", NULL, LP_STATUS_FORMAT, "invalid UTF-8", NULL);
}

/* Causal-LM data: only the text column is read, a label column is neither needed nor
 * parsed (a bad label is no bad row), labels stay NULL; bad text is still a bad row. */
static void test_text_only(void **state)
{
    (void)state;
    lp_dataset_options o;
    lp_dataset_options_init(&o);
    o.text_only = 1;
    lp_dataset ds;
    assert_int_equal(load_opt("t.tsv", "text\nhello there\nsecond row\n", &o, &ds), LP_OK);
    assert_int_equal(ds.n, 2);
    assert_null(ds.labels);
    assert_int_equal(ds.label_map.n, 0);
    assert_string_equal(ds.text[1], "second row");
    {
        lp_dataset tr, va;
        assert_int_equal(lp_dataset_split(&ds, 0.5, 1, &tr, &va), LP_OK);
        assert_null(tr.labels);
        assert_int_equal(tr.n + va.n, 2);
        lp_dataset_free(&tr);
        lp_dataset_free(&va);
    }
    lp_dataset_free(&ds);
    /* a label column that would be bad for a classifier is ignored */
    assert_int_equal(load_opt("t.csv", "sentence,label\na b,\nc d,not-a-number\n", &o, &ds), LP_OK);
    assert_int_equal(ds.n, 2);
    assert_null(ds.labels);
    lp_dataset_free(&ds);
    assert_int_equal(load_opt("t.jsonl", "{\"text\": \"x\"}\n{\"text\": \"y\", \"label\": [1]}\n", &o, &ds), LP_OK);
    assert_int_equal(ds.n, 2);
    lp_dataset_free(&ds);
    /* no text column: the same one-line error as a classifier's */
    expect_fail("t.tsv", "sentence_x\tlabel\na\t1\n", &o, LP_STATUS_NOT_FOUND, "t.tsv: no text column", NULL);
    expect_fail("t.jsonl", "{\"text\": \"\"}\n", &o, LP_STATUS_FORMAT, "t.jsonl:1: empty text", NULL);
    o.skip_bad_rows = 1;
    assert_int_equal(load_opt("t.jsonl", "{\"text\": \"\"}\n{\"text\": \"ok\"}\n", &o, &ds), LP_OK);
    assert_int_equal(ds.n, 1);
    assert_int_equal(ds.n_skipped, 1);
    lp_dataset_free(&ds);
}

static void test_labels_given_and_ranges(void **state)
{
    (void)state;
    lp_label_map map;
    const char *names[] = {"negative", "positive"};
    assert_int_equal(lp_label_map_from_names(&map, names, 2), LP_OK);
    lp_dataset_options opt;
    lp_dataset_options_init(&opt);
    opt.label_map = &map;
    lp_dataset ds;
    /* names and in-range ids both map */
    assert_int_equal(load_opt("g.csv", "text,label\na,positive\nb,0\nc,negative\n", &opt, &ds), LP_OK);
    assert_int_equal(ds.labels[0], 1);
    assert_int_equal(ds.labels[1], 0);
    assert_int_equal(ds.labels[2], 0);
    assert_string_equal(ds.label_map.names[1], "positive");
    lp_dataset_free(&ds);
    expect_fail("g.csv", "text,label\na,positive\nb,neutral\n", &opt, LP_STATUS_RANGE, "g.csv:3: unknown label 'neutral'",
                "'negative', 'positive'");
    expect_fail("g.csv", "text,label\na,2\n", &opt, LP_STATUS_RANGE, "g.csv:2: label 2 out of range [0, 2)", NULL);
    opt.num_labels = 3;
    expect_fail("g.csv", "text,label\na,1\n", &opt, LP_STATUS_INVALID_ARG, "does not match", NULL);

    lp_dataset_options_init(&opt);
    opt.num_labels = 2;
    expect_fail("n.csv", "text,label\na,1\nb,2\n", &opt, LP_STATUS_RANGE, "n.csv:3: label 2 out of range [0, 2)", NULL);
    expect_fail("n.csv", "text,label\na,1\nb,-1\n", &opt, LP_STATUS_RANGE, "n.csv:3: negative label", NULL);
    expect_fail("n.csv", "text,label\na,x\nb,y\nc,z\n", &opt, LP_STATUS_RANGE, "found 3 distinct labels", NULL);
    expect_fail("n.csv", "text,label\na,1\nb,99999999\n", NULL, LP_STATUS_RANGE, "too large", NULL);
    /* num_labels larger than the data: names 0..n-1 all present */
    opt.num_labels = 4;
    assert_int_equal(load_opt("n.csv", "text,label\na,1\nb,0\n", &opt, &ds), LP_OK);
    assert_int_equal(ds.label_map.n, 4);
    assert_string_equal(ds.label_map.names[3], "3");
    lp_dataset_free(&ds);
    lp_label_map_free(&map);
}

static void test_skip_bad_rows(void **state)
{
    (void)state;
    lp_dataset_options opt;
    lp_dataset_options_init(&opt);
    opt.skip_bad_rows = 1;
    opt.num_labels = 2;
    const char *csv = "text,label\n"
                      "good one,1\n"        /* 2 */
                      "too,many,fields\n"   /* 3 bad */
                      "good two,0\n"        /* 4 */
                      ",1\n"                /* 5 bad: empty text */
                      "\xFF,0\n"            /* 6 bad: UTF-8 */
                      "good three,1\n"      /* 7 */
                      "out of range,5\n"    /* 8 bad: label */
                      "missing label,\n"    /* 9 bad */
                      "\"bad\"quote,1\n"    /* 10 bad */
                      "good four,0\n"       /* 11 */
                      "\"open quote,1\n";   /* 12 bad, runs to the end */
    lp_dataset ds;
    assert_int_equal(load_opt("s.csv", csv, &opt, &ds), LP_OK);
    assert_int_equal(ds.n, 4);
    assert_string_equal(ds.text[3], "good four");
    assert_int_equal(ds.lines[3], 11);
    assert_int_equal(ds.n_skipped, 7);
    assert_int_equal(ds.n_reasons, LP_DATA_MAX_REASONS);
    assert_non_null(strstr(ds.skip_reasons[0], "s.csv:3: expected 2 fields"));
    assert_non_null(strstr(ds.skip_reasons[1], "s.csv:5: empty text"));
    assert_non_null(strstr(ds.skip_reasons[2], "s.csv:6: invalid UTF-8"));
    assert_non_null(strstr(ds.skip_reasons[3], "s.csv:9: empty label"));
    assert_non_null(strstr(ds.skip_reasons[4], "s.csv:10:"));
    int64_t counts[2];
    lp_dataset_label_counts(&ds, counts);
    assert_int_equal(counts[0], 2);
    assert_int_equal(counts[1], 2);
    lp_dataset_free(&ds);

    /* JSONL skipping, and a file where nothing survives */
    assert_int_equal(load_opt("s.jsonl", "{\"text\":\"a\",\"label\":1}\nnot json\n{\"text\":\"b\",\"label\":0}\n", &opt, &ds),
                     LP_OK);
    assert_int_equal(ds.n, 2);
    assert_int_equal(ds.n_skipped, 1);
    assert_non_null(strstr(ds.skip_reasons[0], "s.jsonl:2: invalid JSON"));
    lp_dataset_free(&ds);
    expect_fail("all.csv", "text,label\n,1\n,0\n", &opt, LP_STATUS_FORMAT, "no usable rows (2 bad rows skipped",
                "all.csv:2: empty text");
    /* without the option the same file fails at its first bad row */
    opt.skip_bad_rows = 0;
    expect_fail("s.csv", csv, &opt, LP_STATUS_FORMAT, "s.csv:3:", "--skip-bad-rows");
}

static char tmpdir[256];

static int setup(void **state)
{
    (void)state;
    return lp_test_tmpdir_make(tmpdir, sizeof tmpdir, "data");
}

static int teardown(void **state)
{
    (void)state;
    return lp_test_tmpdir_remove(tmpdir);
}

static void test_label_mappings_json(void **state)
{
    (void)state;
    lp_dataset ds;
    assert_int_equal(load("l.csv", "text,label\na,sports\nb,arts & crafts\nc,\"video \"\"games\"\"\"\n", &ds), LP_OK);
    char path[300];
    snprintf(path, sizeof path, "%s/label_mappings.json", tmpdir);
    assert_int_equal(lp_label_map_save(&ds.label_map, path), LP_OK);
    /* only the final file is there: written atomically */
    DIR *d = opendir(tmpdir);
    int entries = 0;
    for (struct dirent *e; (e = readdir(d));)
        entries += e->d_name[0] != '.';
    closedir(d);
    assert_int_equal(entries, 1);

    /* parse it back independently with cJSON: seed 001's shape */
    char *buf;
    size_t len;
    assert_int_equal(lp_file_read_all(path, &buf, &len), LP_OK);
    cJSON *root = cJSON_Parse(buf);
    assert_non_null(root);
    cJSON *l2i = cJSON_GetObjectItemCaseSensitive(root, "label2id");
    cJSON *i2l = cJSON_GetObjectItemCaseSensitive(root, "id2label");
    assert_int_equal(cJSON_GetArraySize(l2i), 3);
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(l2i, "arts & crafts")->valueint, 0);
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(l2i, "sports")->valueint, 1);
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(l2i, "video \"games\"")->valueint, 2);
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(i2l, "2")->valuestring, "video \"games\"");
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(root, "num_labels")->valueint, 3);
    cJSON_Delete(root);
    free(buf);

    lp_label_map back;
    assert_int_equal(lp_label_map_load(&back, path), LP_OK);
    assert_int_equal(back.n, 3);
    for (int i = 0; i < 3; i++)
        assert_string_equal(back.names[i], ds.label_map.names[i]);
    /* and used as the given label set for another file */
    lp_dataset_options opt;
    lp_dataset_options_init(&opt);
    opt.label_map = &back;
    lp_dataset ds2;
    assert_int_equal(load_opt("m.csv", "text,label\nx,sports\n", &opt, &ds2), LP_OK);
    assert_int_equal(ds2.labels[0], 1);
    lp_dataset_free(&ds2);
    lp_label_map_free(&back);
    lp_dataset_free(&ds);
}

static void test_label_map_parse_errors(void **state)
{
    (void)state;
    struct {
        const char *json, *piece;
    } cases[] = {
        {"{\"id2label\": {\"0\": \"a\", \"2\": \"b\"}}", "not an id in [0, 2)"},
        {"{\"id2label\": {\"0\": \"a\", \"0\": \"b\"}}", "appears twice"},
        {"{\"label2id\": {\"a\": 0, \"b\": 0}}", "appears twice"},
        {"{\"label2id\": {\"a\": 0, \"b\": 1.5}}", "is not an id"},
        {"{\"id2label\": {\"0\": \"a\", \"1\": \"b\"}, \"label2id\": {\"a\": 1, \"b\": 0}}", "but id2label"},
        {"{\"id2label\": {\"0\": \"a\"}, \"label2id\": {\"a\": 0, \"b\": 1}}", "has 1 entries but label2id has 2"},
        {"{\"id2label\": {\"0\": \"\"}}", "non-empty string"},
        {"{\"id2label\": {}}", "empty"},
        {"{\"labels\": []}", "needs an \"id2label\""},
        {"[1, 2]", "expected a JSON object"},
        {"{\"id2label\": ", "not valid JSON"},
        {"{\"id2label\": {\"01\": \"a\"}}", "not an id"},
        {"{\"id2label\": {\"0\": \"a\", \"1\": \"a\"}}", "duplicate label 'a'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        lp_label_map m;
        lp_status st = lp_label_map_parse(&m, "lm.json", cases[i].json, strlen(cases[i].json));
        if (st == LP_OK || !strstr(lp_err_msg(), cases[i].piece))
            print_error("case %zu: status %d message %s\n", i, st, lp_err_msg());
        assert_int_not_equal(st, LP_OK);
        assert_non_null(strstr(lp_err_msg(), "lm.json"));
        assert_non_null(strstr(lp_err_msg(), cases[i].piece));
        assert_int_equal(m.n, 0);
    }
    /* a Hugging Face config.json carries the same two objects */
    const char *cfg = "{\"architectures\": [\"BertForSequenceClassification\"], \"id2label\": {\"1\": \"POS\", \"0\": "
                      "\"NEG\"}, \"label2id\": {\"NEG\": 0, \"POS\": 1}}";
    lp_label_map m;
    assert_int_equal(lp_label_map_parse(&m, "config.json", cfg, strlen(cfg)), LP_OK);
    assert_int_equal(m.n, 2);
    assert_string_equal(m.names[0], "NEG");
    assert_int_equal(lp_label_map_find(&m, "POS"), 1);
    assert_int_equal(lp_label_map_find(&m, "pos"), -1);
    lp_label_map_free(&m);
    const char *dup[] = {"a", "a"};
    assert_int_equal(lp_label_map_from_names(&m, dup, 2), LP_STATUS_INVALID_ARG);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_csv_quoting),
        cmocka_unit_test(test_csv_crlf_bom_and_spaces),
        cmocka_unit_test(test_csv_malformed),
        cmocka_unit_test(test_csv_nul_byte),
        cmocka_unit_test(test_utf8),
        cmocka_unit_test(test_columns),
        cmocka_unit_test(test_empty_and_header_only),
        cmocka_unit_test(test_tsv),
        cmocka_unit_test(test_jsonl),
        cmocka_unit_test(test_text_only),
        cmocka_unit_test(test_labels_given_and_ranges),
        cmocka_unit_test(test_skip_bad_rows),
        cmocka_unit_test_setup_teardown(test_label_mappings_json, setup, teardown),
        cmocka_unit_test(test_label_map_parse_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
