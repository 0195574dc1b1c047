/* Instruction data: the four layouts read into conversations, bad rows named by file and line,
 * response-only labels through real chat templates (SmolLM2, Llama 3.2, Mistral) held against a
 * reference that finds each answer in the rendered text, and packing's sample ids, positions
 * and labels against a next-fit computed here. A byte tokenizer (one token per byte) keeps
 * the reference exact: token t is byte t of the rendered text. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loupe/data.h"
#include "loupe/text.h"

#define DIR "tests/text/chat_templates/"

/* ---- a codec over a real template and a byte tokenizer ---- */
typedef struct tcodec {
    lp_chat_template *t; /* NULL: the plain format */
    const char *bos, *eos;
} tcodec;

static lp_status t_render(void *ctx, const lp_sft_turn *turns, int32_t n, int gen, char **out, size_t *len)
{
    tcodec *c = ctx;
    if (!c->t)
        return lp_sft_render_plain((void *)c->eos, turns, n, gen, out, len);
    cJSON *arr = cJSON_CreateArray();
    for (int32_t i = 0; i < n; i++) {
        cJSON *m = cJSON_CreateObject();
        cJSON_AddStringToObject(m, "role", lp_sft_role_name(turns[i].role));
        cJSON_AddStringToObject(m, "content", turns[i].content);
        cJSON_AddItemToArray(arr, m);
    }
    char *js = cJSON_PrintUnformatted(arr);
    cJSON_Delete(arr);
    lp_chat_vars v = {
        .messages_json = js, .bos_token = c->bos, .eos_token = c->eos, .add_generation_prompt = gen};
    lp_status st = lp_chat_template_render(c->t, &v, out, len);
    free(js);
    return st;
}

static lp_status t_tokenize(void *ctx, const char *text, size_t len, int32_t **ids, size_t *n, size_t *cap)
{
    (void)ctx;
    if (len > *cap) {
        *ids = realloc(*ids, len * sizeof **ids);
        *cap = len;
    }
    for (size_t i = 0; i < len; i++)
        (*ids)[i] = (unsigned char)text[i];
    *n = len;
    return LP_OK;
}

static char *slurp(const char *path)
{
    char *s = NULL;
    size_t n = 0;
    assert_int_equal(lp_file_read_all(path, &s, &n), LP_OK);
    return s;
}

/* ---- reading ---- */
static void test_formats(void **state)
{
    (void)state;
    static const char *rows[4] = {
        "{\"text\": \"Hello there.\"}\n",
        "{\"prompt\": \"2+3=\", \"response\": \"5\"}\n\n{\"prompt\": \"1+1=\", \"completion\": \"2\"}\n",
        "{\"instruction\": \"Add.\", \"input\": \"2 and 3\", \"output\": \"5\"}\n"
        "{\"instruction\": \"Say hi.\", \"output\": \"hi\"}\n",
        "{\"messages\": [{\"role\": \"system\", \"content\": \"S\"}, {\"role\": \"user\", \"content\": "
        "\"U\"}, "
        "{\"role\": \"assistant\", \"content\": \"A\"}]}\n"};
    static const lp_sft_format want[4] = {LP_SFT_FORMAT_TEXT, LP_SFT_FORMAT_PROMPT_RESPONSE,
                                          LP_SFT_FORMAT_ALPACA, LP_SFT_FORMAT_MESSAGES};
    for (int i = 0; i < 4; i++) {
        lp_sft_dataset ds;
        assert_int_equal(lp_sft_load_buffer("d.jsonl", rows[i], strlen(rows[i]), LP_SFT_FORMAT_AUTO, &ds),
                         LP_OK);
        assert_int_equal(ds.format, want[i]);
        if (i == 1) { /* two rows, the second after a blank line; "completion" taken for "response" */
            assert_int_equal(ds.n, 2);
            assert_int_equal(ds.lines[1], 3);
            assert_string_equal(ds.turns[3].content, "2");
            assert_int_equal(ds.turns[3].role, LP_SFT_ROLE_ASSISTANT);
        }
        if (i == 2) { /* instruction + "\n\n" + input; input absent: the instruction alone */
            assert_string_equal(ds.turns[0].content, "Add.\n\n2 and 3");
            assert_string_equal(ds.turns[2].content, "Say hi.");
        }
        if (i == 3) {
            assert_int_equal(ds.first[1], 3);
            assert_int_equal(ds.turns[0].role, LP_SFT_ROLE_SYSTEM);
        }
        lp_sft_free(&ds);
    }
    lp_sft_format f;
    assert_int_equal(lp_sft_format_parse("alpaca", &f), LP_OK);
    assert_int_equal(f, LP_SFT_FORMAT_ALPACA);
    assert_int_equal(lp_sft_format_parse("chatml", &f), LP_STATUS_INVALID_ARG);
}

/* Bad rows: one line naming the file, the line and the problem. */
static void test_bad_rows(void **state)
{
    (void)state;
    static const struct {
        const char *text, *want;
    } cases[] = {
        {"{\"prompt\": \"a\", \"response\": \"b\"}\n{\"prompt\": \"c\"}\n",
         "bad.jsonl:2: missing key \"response\""},
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}, {\"role\": \"bot\", \"content\": "
         "\"y\"}]}\n",
         "bad.jsonl:1: message 2 has unknown role \"bot\""},
        {"{\"messages\": []}\n", "bad.jsonl:1: empty conversation"},
        {"{\"messages\": [{\"role\": \"user\"}]}\n", "bad.jsonl:1: message 1: missing key \"content\""},
        {"{\"prompt\": 3, \"response\": \"b\"}\n", "bad.jsonl:1: key \"prompt\" is not a string"},
        {"{\"question\": \"a\"}\n", "bad.jsonl:1: no key to tell the data format by"},
        {"{\"text\": \"a\"}\n{\"text\": \n", "bad.jsonl:2: invalid JSON"},
        {"\n\n", "bad.jsonl: no rows"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        lp_sft_dataset ds;
        lp_status st =
            lp_sft_load_buffer("bad.jsonl", cases[i].text, strlen(cases[i].text), LP_SFT_FORMAT_AUTO, &ds);
        if (st == LP_OK || !strstr(lp_err_msg(), cases[i].want))
            fail_msg("case %zu: got '%s', want '%s'", i, st == LP_OK ? "OK" : lp_err_msg(), cases[i].want);
        assert_null(strchr(lp_err_msg(), '\n'));
        lp_sft_free(&ds);
    }
    /* a named format overrides detection: a prompt row read as messages lacks "messages" */
    lp_sft_dataset ds;
    const char *row = "{\"prompt\": \"a\", \"response\": \"b\"}\n";
    assert_int_equal(lp_sft_load_buffer("x.jsonl", row, strlen(row), LP_SFT_FORMAT_MESSAGES, &ds),
                     LP_STATUS_FORMAT);
    assert_non_null(strstr(lp_err_msg(), "x.jsonl:1: missing key \"messages\""));
    lp_sft_free(&ds);
}

/* ---- response-only labels ---- */

/* The reference: in the rendered conversation, each assistant answer is the first occurrence
 * of its content after the template's assistant header (searched from where the previous
 * answer ended), and its trained span runs to the end of the end-of-turn marker that follows. */
typedef struct tmpl_case {
    const char *file;            /* NULL: the plain format */
    const char *header, *marker; /* assistant header and end-of-turn marker in the rendered text */
} tmpl_case;

static void reference_labels(const char *text, const lp_sft_turn *turns, int32_t n, const tmpl_case *tc,
                             int32_t *want)
{
    size_t len = strlen(text);
    for (size_t i = 0; i < len; i++)
        want[i] = -100;
    const char *at = text;
    for (int32_t k = 0; k < n; k++) {
        if (turns[k].role != LP_SFT_ROLE_ASSISTANT)
            continue;
        const char *h = *tc->header ? strstr(at, tc->header) : at;
        assert_non_null(h);
        const char *c = strstr(h + strlen(tc->header), turns[k].content);
        assert_non_null(c);
        const char *m = strstr(c + strlen(turns[k].content), tc->marker);
        assert_non_null(m);
        const char *end = m + strlen(tc->marker);
        for (const char *p = c; p < end; p++)
            want[p - text] = (unsigned char)*p;
        at = end;
    }
}

static void test_response_labels(void **state)
{
    (void)state;
    static const tmpl_case tcs[] = {
        {"smollm2", "<|im_start|>assistant\n", "<|im_end|>"},
        {"llama3.2", "<|start_header_id|>assistant<|end_header_id|>\n\n", "<|eot_id|>"},
        {"mistral-v0.1", "[/INST]", "</s>"},
        {NULL, "", "</s>"},
    };
    /* prompt/response, alpaca and multi-turn messages (system prompt, two answers) */
    static const char *data[3] = {
        "{\"prompt\": \"What is 12+7?\", \"response\": \"19\"}\n{\"prompt\": \"Spell cat.\", \"response\": "
        "\"c-a-t\"}\n",
        "{\"instruction\": \"Convert to metres.\", \"input\": \"3 km\", \"output\": \"3000 m\"}\n",
        "{\"messages\": [{\"role\": \"user\", \"content\": \"Convert 3 km to metres.\"}, {\"role\": "
        "\"assistant\", "
        "\"content\": \"3000 metres.\"}, {\"role\": \"user\", \"content\": \"And 2.5 km?\"}, {\"role\": "
        "\"assistant\", \"content\": \"2500 metres.\"}]}\n"
        "{\"messages\": [{\"role\": \"system\", \"content\": \"Be terse.\"}, {\"role\": \"user\", "
        "\"content\": "
        "\"2+2?\"}, {\"role\": \"assistant\", \"content\": \"4\"}]}\n",
    };
    for (size_t ti = 0; ti < sizeof tcs / sizeof tcs[0]; ti++) {
        tcodec c = {.bos = "<s>", .eos = "</s>"};
        char *src = NULL;
        if (tcs[ti].file) {
            char path[256];
            snprintf(path, sizeof path, DIR "%s.jinja", tcs[ti].file);
            src = slurp(path);
            assert_int_equal(lp_chat_template_parse(src, strlen(src), path, &c.t), LP_OK);
        }
        lp_sft_codec codec = {&c, t_render, t_tokenize};
        for (int di = 0; di < 3; di++) {
            if (!c.t && di == 2) /* messages need a template in loupe train; the plain form still works */
                continue;
            if (tcs[ti].file && !strcmp(tcs[ti].file, "mistral-v0.1") &&
                di == 2) /* mistral v0.1 refuses system */
                continue;
            lp_sft_dataset ds;
            assert_int_equal(
                lp_sft_load_buffer("d.jsonl", data[di], strlen(data[di]), LP_SFT_FORMAT_AUTO, &ds), LP_OK);
            lp_encoded_dataset e, all;
            if (lp_sft_encode(&ds, &codec, 4096, 1, 0, &e) != LP_OK)
                fail_msg("%s", lp_err_msg());
            assert_int_equal(lp_sft_encode(&ds, &codec, 4096, 0, 0, &all), LP_OK);
            assert_int_equal(e.n, ds.n);
            for (int64_t i = 0; i < ds.n; i++) {
                const lp_sft_turn *turns = ds.turns + ds.first[i];
                int32_t nt = (int32_t)(ds.first[i + 1] - ds.first[i]);
                char *text = NULL;
                size_t len = 0;
                assert_int_equal(t_render(&c, turns, nt, 0, &text, &len), LP_OK);
                int64_t n = e.offsets[i + 1] - e.offsets[i];
                assert_int_equal(n, (int64_t)len);
                int32_t *want = malloc(len * sizeof *want);
                reference_labels(text, turns, nt, &tcs[ti], want);
                for (int64_t t = 0; t < n; t++) {
                    if (e.lm_labels[e.offsets[i] + t] != want[t])
                        fail_msg("%s, data %d row %lld, byte %lld ('%c'): label %d, want %d\n%s",
                                 tcs[ti].file ? tcs[ti].file : "plain", di, (long long)i, (long long)t,
                                 text[t], e.lm_labels[e.offsets[i] + t], want[t], text);
                    assert_int_equal(e.ids[e.offsets[i] + t], (unsigned char)text[t]);
                    /* without the flag every token is trained */
                    assert_int_equal(all.lm_labels[all.offsets[i] + t], (unsigned char)text[t]);
                }
                free(want);
                free(text);
            }
            lp_encoded_dataset_free(&e);
            lp_encoded_dataset_free(&all);
            lp_sft_free(&ds);
        }
        lp_chat_template_free(c.t);
        free(src);
    }
}

/* --max-seq-len: cut samples are counted with the tokens they lost; one whose answer lies
 * wholly past the cut is skipped and counted, naming file and line; all skipped fails. */
static void test_truncation(void **state)
{
    (void)state;
    tcodec c = {.eos = "</s>"};
    lp_sft_codec codec = {&c, t_render, t_tokenize};
    const char *rows =
        "{\"prompt\": \"short\", \"response\": \"ok\"}\n"                       /* 6 + 2 + 4 = 12 bytes */
        "{\"prompt\": \"a much longer prompt here\", \"response\": \"yes\"}\n"; /* 26 + 7 = 33 */
    lp_sft_dataset ds;
    assert_int_equal(lp_sft_load_buffer("t.jsonl", rows, strlen(rows), LP_SFT_FORMAT_AUTO, &ds), LP_OK);
    lp_encoded_dataset e;
    assert_int_equal(lp_sft_encode(&ds, &codec, 20, 0, 0, &e), LP_OK); /* full loss: the long row is cut */
    assert_int_equal(e.n, 2);
    assert_int_equal(e.n_truncated, 1);
    assert_int_equal(e.n_dropped_tokens, 33 - 20);
    assert_int_equal(e.full_len[1], 33);
    lp_encoded_dataset_free(&e);
    assert_int_equal(lp_sft_encode(&ds, &codec, 20, 1, 0, &e), LP_OK); /* responses only: skipped */
    assert_int_equal(e.n, 1);
    assert_int_equal(e.n_skipped, 1);
    assert_int_equal(e.n_truncated, 0);
    assert_string_equal(e.skip_reason, "t.jsonl:2: no response token left within --max-seq-len");
    lp_encoded_dataset_free(&e);
    assert_int_equal(lp_sft_encode(&ds, &codec, 5, 1, 0, &e), LP_STATUS_INVALID_ARG);
    assert_non_null(
        strstr(lp_err_msg(), "t.jsonl: no row left to train on (2 skipped; the first: t.jsonl:1:"));
    lp_sft_free(&ds);
}

/* ---- packing ---- */
static void test_packing(void **state)
{
    (void)state;
    /* 7 samples of lengths 5, 9, 3, 12, 1 (too short: skipped, nothing to predict), 6, 4 in rows of 16 */
    static const int32_t lens[] = {5, 9, 3, 12, 1, 6, 4};
    char buf[1024] = "";
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        char t[64];
        memset(t, 'a' + (int)i, (size_t)lens[i]);
        t[lens[i]] = 0;
        snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "{\"text\": \"%s\"}\n", t);
    }
    tcodec c = {0};
    lp_sft_codec codec = {&c, t_render, t_tokenize};
    lp_sft_dataset ds;
    assert_int_equal(lp_sft_load_buffer("p.jsonl", buf, strlen(buf), LP_SFT_FORMAT_AUTO, &ds), LP_OK);
    lp_encoded_dataset e, p;
    assert_int_equal(lp_sft_encode(&ds, &codec, 16, 1, 0, &e), LP_OK);
    assert_int_equal(e.n, 6);
    assert_int_equal(e.n_skipped, 1);
    assert_int_equal(lp_sft_pack(&e, 16, &p), LP_OK);
    /* the reference: next fit in order, computed here */
    static const int32_t kept[] = {5, 9, 3, 12, 6, 4};
    int32_t want_rows[8] = {0}, nrows = 0, fill = 0, sample = 0;
    int64_t tok = 0;
    for (int i = 0; i < 6; i++) {
        if (fill + kept[i] > 16 || nrows == 0) {
            if (nrows)
                want_rows[nrows - 1] = fill;
            nrows++, fill = 0, sample = 0;
        }
        sample++;
        for (int32_t t = 0; t < kept[i]; t++, tok++) {
            assert_int_equal(p.segs[tok], sample);
            assert_int_equal(p.pos[tok], t);
            assert_int_equal(p.lm_labels[tok], 'a' + (i < 4 ? i : i + 1));
            assert_int_equal(p.ids[tok], e.ids[tok]);
        }
        fill += kept[i];
    }
    want_rows[nrows - 1] = fill;
    assert_int_equal(p.n, nrows); /* rows: 5+9 | 3+12 | 6+4 */
    assert_int_equal(nrows, 3);
    for (int r = 0; r < nrows; r++)
        assert_int_equal(p.offsets[r + 1] - p.offsets[r], want_rows[r]);
    /* a batch of packed rows: the sample ids become the attention mask, labels pass through */
    lp_batch b;
    lp_batch_init(&b);
    int64_t order[3] = {2, 0, 1};
    assert_int_equal(lp_batch_fill(&b, &p, order, 3, 0), LP_OK);
    assert_int_equal(b.T, 15);
    assert_int_equal(b.attention_mask[0], 1);
    assert_int_equal(b.attention_mask[6], 2);
    assert_int_equal(b.attention_mask[10], 0); /* padding */
    assert_int_equal(b.lm_labels[10], -100);
    assert_int_equal(b.attention_mask[15 + 5], 2);
    lp_batch_free(&b);
    lp_encoded_dataset_free(&p);
    assert_int_equal(lp_sft_pack(&e, 8, &p), LP_STATUS_INVALID_ARG); /* a sample longer than the row */
    lp_encoded_dataset_free(&e);
    lp_sft_free(&ds);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_formats),         cmocka_unit_test(test_bad_rows),
        cmocka_unit_test(test_response_labels), cmocka_unit_test(test_truncation),
        cmocka_unit_test(test_packing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
