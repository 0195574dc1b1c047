/* Chat templates: the four real templates (Qwen2.5, SmolLM2, Llama 3.2, Mistral v0.1,
 * tests/text/chat_templates/) rendered byte for byte as transformers' apply_chat_template
 * renders them (tools/make_chat_template_expected.py wrote expected.jsonl), refusals where
 * the template raises, the one-line errors of bad templates, Jinja semantics the four
 * rely on, and the bounds. Exact byte equality: rendering is text, no tolerance applies. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "loupe/text.h"

#define DIR "tests/text/chat_templates/"

static char *slurp(const char *path)
{
    char *s = NULL;
    size_t n;
    assert_int_equal(lp_file_read_all(path, &s, &n), LP_OK);
    return s;
}

/* Renders src with messages; returns the status, *out the text (caller frees). */
static lp_status render(const char *src, const char *msgs, int gen, const char *bos, const char *eos, const char *extra, char **out)
{
    lp_chat_template *t;
    *out = NULL;
    lp_status st = lp_chat_template_parse(src, strlen(src), "t.jinja", &t);
    if (st) return st;
    lp_chat_vars v = {.messages_json = msgs, .bos_token = bos, .eos_token = eos, .extra_json = extra, .add_generation_prompt = gen};
    st = lp_chat_template_render(t, &v, out, NULL);
    lp_chat_template_free(t);
    return st;
}

static void expect_text(const char *src, const char *msgs, const char *want)
{
    char *out = NULL;
    lp_status st = render(src, msgs, 0, "<s>", "</s>", NULL, &out);
    if (st) fail_msg("render failed: %s", lp_err_msg());
    if (strcmp(out, want)) fail_msg("template %s\n got [%s]\nwant [%s]", src, out, want);
    free(out);
}

static void expect_error(const char *src, const char *msgs, lp_status want_st, const char *want_msg)
{
    char *out = NULL;
    lp_status st = render(src, msgs ? msgs : "[]", 0, "<s>", "</s>", NULL, &out);
    free(out);
    if (st != want_st) fail_msg("template %s: status %d (%s), want %d", src, st, lp_err_msg(), want_st);
    if (strcmp(lp_err_msg(), want_msg)) fail_msg("template %s\n got error [%s]\nwant error [%s]", src, lp_err_msg(), want_msg);
    assert_null(strchr(lp_err_msg(), '\n')); /* one line */
}

/* Every (template, conversation, generation prompt) render of expected.jsonl. */
static void test_real_templates_match_transformers(void **state)
{
    (void)state;
    const char *names[] = {"qwen2.5", "smollm2", "llama3.2", "mistral-v0.1"};
    lp_chat_template *tmpl[4];
    for (int i = 0; i < 4; i++) {
        char path[256];
        snprintf(path, sizeof path, DIR "%s.jinja", names[i]);
        char *src = slurp(path);
        if (lp_chat_template_parse(src, strlen(src), path, &tmpl[i]) != LP_OK) fail_msg("%s", lp_err_msg());
        free(src);
    }
    char *convs = slurp(DIR "conversations.jsonl"), *exp = slurp(DIR "expected.jsonl");
    const char *lines[64];
    size_t nconv = 0;
    for (char *p = strtok(convs, "\n"); p && nconv < 64; p = strtok(NULL, "\n")) lines[nconv++] = p;
    assert_true(nconv >= 8);
    int checked = 0, refused = 0;
    for (char *save = NULL, *p = strtok_r(exp, "\n", &save); p; p = strtok_r(NULL, "\n", &save)) {
        cJSON *r = cJSON_Parse(p);
        assert_non_null(r);
        const char *name = cJSON_GetObjectItem(r, "template")->valuestring;
        int ci = cJSON_GetObjectItem(r, "conversation")->valueint, which = -1;
        for (int i = 0; i < 4; i++)
            if (!strcmp(name, names[i])) which = i;
        assert_true(which >= 0 && ci >= 0 && (size_t)ci < nconv);
        const cJSON *bos = cJSON_GetObjectItem(r, "bos_token"), *eos = cJSON_GetObjectItem(r, "eos_token");
        lp_chat_vars v = {.messages_json = lines[ci],
                          .bos_token = cJSON_IsString(bos) ? bos->valuestring : NULL,
                          .eos_token = cJSON_IsString(eos) ? eos->valuestring : NULL,
                          .extra_json = "{\"date_string\": \"26 Jul 2024\"}",
                          .add_generation_prompt = cJSON_IsTrue(cJSON_GetObjectItem(r, "add_generation_prompt"))};
        char *out = NULL;
        size_t n = 0;
        lp_status st = lp_chat_template_render(tmpl[which], &v, &out, &n);
        const cJSON *text = cJSON_GetObjectItem(r, "text"), *err = cJSON_GetObjectItem(r, "error");
        if (text) {
            if (st) fail_msg("%s conversation %d gen %d: %s", name, ci, v.add_generation_prompt, lp_err_msg());
            if (n != strlen(text->valuestring) || memcmp(out, text->valuestring, n))
                fail_msg("%s conversation %d gen %d differs from transformers:\n got [%s]\nwant [%s]", name, ci,
                         v.add_generation_prompt, out, text->valuestring);
        } else {
            /* transformers raised: loupe refuses with the template's own message */
            assert_int_equal(st, LP_STATUS_INVALID_ARG);
            if (!strstr(lp_err_msg(), err->valuestring)) fail_msg("%s conversation %d: error [%s] lacks [%s]", name, ci, lp_err_msg(), err->valuestring);
            refused++;
        }
        free(out);
        checked++;
        cJSON_Delete(r);
    }
    /* 4 templates x every conversation x 2: a truncated expected file fails here */
    assert_int_equal(checked, (int)(4 * nconv * 2));
    assert_true(refused > 0 && refused < checked / 4);
    for (int i = 0; i < 4; i++) lp_chat_template_free(tmpl[i]);
    free(convs);
    free(exp);
}

/* lp_chat_template_config_load reads both chat_template forms and AddedToken specials. */
static void test_config_forms(void **state)
{
    (void)state;
    const char *dir = "build-tmp-chat-template-cfg";
    char path[256];
    snprintf(path, sizeof path, "%s.json", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("{\"bos_token\": {\"content\": \"<B>\", \"lstrip\": false}, \"eos_token\": \"<E>\", \"chat_template\": "
          "[{\"name\": \"tool_use\", \"template\": \"T\"}, {\"name\": \"default\", \"template\": \"{{ bos_token }}D\"}]}",
          f);
    fclose(f);
    lp_chat_template_config c;
    assert_int_equal(lp_chat_template_config_load(path, &c), LP_OK);
    assert_string_equal(c.template_src, "{{ bos_token }}D");
    assert_string_equal(c.bos_token, "<B>");
    assert_string_equal(c.eos_token, "<E>");
    lp_chat_template_config_free(&c);
    f = fopen(path, "w");
    fputs("{\"eos_token\": \"<E>\"}", f);
    fclose(f);
    assert_int_equal(lp_chat_template_config_load(path, &c), LP_STATUS_NOT_FOUND);
    assert_non_null(strstr(lp_err_msg(), path));
    remove(path);
}

/* Jinja semantics the four templates lean on, each against what jinja2 gives. */
static void test_semantics(void **state)
{
    (void)state;
    const char *m = "[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"assistant\",\"content\":\"b\"}]";
    /* trim_blocks + lstrip_blocks: block lines leave no trace, the last newline goes */
    expect_text("{% for x in messages %}\n  {% if loop.first %}\n[{{ x.role }}]\n  {% endif %}\n{% endfor %}\n", m, "[user]\n");
    /* "-" strips on its side; variable tags are not lstripped */
    expect_text("a  {{- 'b' -}}  c\n  {{ 'd' }}", m, "abc\n  d");
    /* loop fields and the loop else */
    expect_text("{% for x in messages %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.length }}{{ loop.last }},{% endfor %}"
                "{% for x in [] %}no{% else %}empty{% endfor %}",
                m, "1022False,2112True,empty");
    /* a set in a loop body does not outlive the iteration; a namespace does */
    expect_text("{% set c = 0 %}{% set ns = namespace(c=0) %}{% for x in messages %}{% set c = c + 1 %}{% set ns.c = ns.c + 1 %}{% endfor %}{{ c }}{{ ns.c }}",
                m, "02");
    /* slicing, negative index, in / not in, is tests, ~, filters */
    expect_text("{{ messages[1:]|length }}{{ messages[-1].content }}{{ 'ss' in 'assist' }}{{ 'x' not in messages[0] }}"
                "{{ nothing is defined }}{{ none is none }}{{ 1 ~ 'a' }}{{ '  t  '|trim }}{{ 'abc'[::-1] }}{{ messages[0]|tojson }}",
                m, "1bTrueTrueFalseTrue1atcba{\"role\": \"user\", \"content\": \"a\"}");
    expect_text("{{ [1, 'a', none, true] }}{{ {'k': [1]} }}{{ 7 // 2 }}{{ -7 % 3 }}{{ 'a' if 0 else 'b' }}{{ x|default('d') }}",
                m, "[1, 'a', None, True]{'k': [1]}32bd");
    expect_text("{{ {'a': {'b': [1, 2]}, 'c': 'é\"'}|tojson(indent=2) }}", m, "{\n  \"a\": {\n    \"b\": [\n      1,\n      2\n    ]\n  },\n  \"c\": \"é\\\"\"\n}");
    expect_text("{% for x in messages %}{% if loop.index0 == 1 %}{% break %}{% endif %}{{ x.content }}{% endfor %}"
                "{{ ' A b '.strip().upper() }}{{ 'a,b'.split(',')|join('+') }}{{ messages[0].get('nope', 'g') }}",
                m, "aA Ba+bg");
    /* two-name loops over items(), an inline loop filter (loop.length counts what is kept),
     * code-point length, string escapes, and transformers' generation block (Qwen2.5-Coder) */
    expect_text("{% for k, v in {'a': 1, 'b': [2]}.items() %}{{ k }}={{ v }};{% endfor %}{% for x in [1, 2, 3] if x != 2 %}"
                "{{ loop.length }}{{ x }}{% endfor %}{{ '\xe6\x97\xa5\xe6\x9c\xac'|length }}{{ 'a\\tb\\u00e9' }}",
                m, "a=1;b=[2];21232a\tb\xc3\xa9");
    expect_text("{% for x in messages %}{% generation %}{{ x.content }}{% endgeneration %}{% endfor %}", m, "ab");
}

/* Bad templates: refused with one line naming the file, line and construct. */
static void test_errors(void **state)
{
    (void)state;
    expect_error("a\n{{ x | frobnicate }}", NULL, LP_STATUS_UNSUPPORTED, "t.jinja: line 2: unknown filter 'frobnicate'");
    expect_error("{{ x is shiny }}", NULL, LP_STATUS_UNSUPPORTED, "t.jinja: line 1: unknown test 'shiny'");
    expect_error("\n\n{% if x %}yes", NULL, LP_STATUS_FORMAT, "t.jinja: line 3: 'if' tag opened here is never closed (no 'endif')");
    expect_error("{{ x ", NULL, LP_STATUS_FORMAT, "t.jinja: line 1: unclosed tag (no '}}')");
    expect_error("{{ 1 + }}", NULL, LP_STATUS_FORMAT, "t.jinja: line 1: expected an expression, found '}}'");
    expect_error("{{ (1 }}", NULL, LP_STATUS_FORMAT, "t.jinja: line 1: expected ')' to close '(', found '}}'");
    expect_error("{% macro m() %}{% endmacro %}", NULL, LP_STATUS_UNSUPPORTED, "t.jinja: line 1: unsupported tag 'macro'");
    expect_error("{# open comment", NULL, LP_STATUS_FORMAT, "t.jinja: line 1: unclosed comment (no '#}')");
    expect_error("{% break %}", NULL, LP_STATUS_FORMAT, "t.jinja: line 1: 'break' outside a for loop");
    expect_error("{{ 'unterminated }}", NULL, LP_STATUS_FORMAT, "t.jinja: line 1: unterminated string literal");
    expect_error("line1\n{{ raise_exception('Only user and assistant roles are supported!') }}", NULL, LP_STATUS_INVALID_ARG,
                 "t.jinja: line 2: raise_exception: Only user and assistant roles are supported!");
    expect_error("{{ messages + 'x' }}", NULL, LP_STATUS_FORMAT, "t.jinja: line 1: unsupported operand types for '+': list and string");
    expect_error("{{ nothing.attr }}", NULL, LP_STATUS_FORMAT, "t.jinja: line 1: attribute 'attr' of an undefined value");
    expect_error("{{ frob(1) }}", NULL, LP_STATUS_UNSUPPORTED, "t.jinja: line 1: unknown function 'frob'");
    expect_error("{{ 1 }}", "{\"messages\": 3}", LP_STATUS_FORMAT,
                 "t.jinja: messages must be a JSON array (or an object with one under \"messages\")");
}

/* Bounds: runaway loops, output and nesting stop with an error, not a hang or a crash. */
static void test_bounds(void **state)
{
    (void)state;
    char *out = NULL;
    assert_int_equal(render("{% for i in range(2000) %}{% for j in range(2000) %}{% endfor %}{% endfor %}", "[]", 0, NULL, NULL, NULL, &out),
                     LP_STATUS_RANGE);
    assert_non_null(strstr(lp_err_msg(), "loop iterations"));
    /* a string doubling in a namespace stops at the 64 MiB bound */
    assert_int_equal(render("{% set ns = namespace(s='xxxxxxxxxxxxxxxx') %}{% for i in range(40) %}{% set ns.s = ns.s + ns.s %}{% endfor %}",
                            "[]", 0, NULL, NULL, NULL, &out),
                     LP_STATUS_RANGE);
    assert_non_null(strstr(lp_err_msg(), "string too long"));
    /* output past 64 MiB: 70 000 prints of 1 KiB */
    assert_int_equal(render("{% set ns = namespace(s='xxxxxxxxxxxxxxxx') %}{% for i in range(6) %}{% set ns.s = ns.s + ns.s %}{% endfor %}"
                            "{% for i in range(70000) %}{{ ns.s }}{% endfor %}",
                            "[]", 0, NULL, NULL, NULL, &out),
                     LP_STATUS_RANGE);
    assert_non_null(strstr(lp_err_msg(), "rendered text passes 64 MiB"));
    char deep[4000];
    size_t n = 0;
    n += (size_t)snprintf(deep + n, sizeof deep - n, "{{ ");
    for (int i = 0; i < 1000; i++) deep[n++] = '(';
    snprintf(deep + n, sizeof deep - n, "1 }}");
    assert_int_equal(render(deep, "[]", 0, NULL, NULL, NULL, &out), LP_STATUS_RANGE);
    assert_non_null(strstr(lp_err_msg(), "nested too deeply"));
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_real_templates_match_transformers),
        cmocka_unit_test(test_config_forms),
        cmocka_unit_test(test_semantics),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_bounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
