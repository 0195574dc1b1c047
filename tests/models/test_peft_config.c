/* PEFT adapter_config.json parsing (what --adapter DIR reads) from a buffer: a file PEFT
 * wrote parses to its fields; a regex target_modules, defaults; and every refusal names the
 * file: bad JSON, non-integer or out-of-range r (1e30 once hit an undefined int conversion,
 * found by fuzz/fuzz_peft_adapter_config), an alpha beyond float range, bad dropout, settings
 * loupe does not implement, non-string list entries. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "../../src/models/models_internal.h"

static lp_status parse(const char *json, lp_model_adapter_cfg *c)
{
    return lp_model__adapter_cfg_parse(json, strlen(json), "dir/adapter_config.json", c);
}

static void peft_written_file(void **state)
{
    (void)state;
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(lp_file_read_all("tests/golden/lora_distilbert/peft_adapter/adapter_config.json", &text, &len),
                     LP_OK);
    lp_model_adapter_cfg c;
    assert_int_equal(lp_model__adapter_cfg_parse(text, len, "x", &c), LP_OK);
    free(text);
    assert_int_equal(c.r, 4);
    assert_true(c.alpha == 8.0 && c.dropout == 0.0 && !c.rslora && !c.target_regex);
    assert_int_equal(c.n_targets, 2);
    assert_string_equal(c.targets[0], "v_lin");
    assert_string_equal(c.targets[1], "q_lin");
    assert_int_equal(c.n_mts, 2);
    assert_string_equal(c.mts[0], "classifier");
    assert_string_equal(c.mts[1], "score");
    lp_model__adapter_cfg_free(&c);
    assert_null(c.targets);
}

static void regex_and_defaults(void **state)
{
    (void)state;
    lp_model_adapter_cfg c;
    assert_int_equal(parse("{\"peft_type\":\"LORA\",\"target_modules\":\".*\\\\.q_lin\",\"use_rslora\":true,"
                           "\"modules_to_save\":null,\"rank_pattern\":{},\"layers_to_transform\":null}",
                           &c),
                     LP_OK);
    assert_int_equal(c.r, 8); // PEFT's LoraConfig defaults
    assert_true(c.alpha == 8.0 && c.dropout == 0.0 && c.rslora);
    assert_string_equal(c.target_regex, ".*\\.q_lin");
    assert_int_equal(c.n_targets, 0);
    assert_int_equal(c.n_mts, 0);
    lp_model__adapter_cfg_free(&c);
}

static void refusals(void **state)
{
    (void)state;
    static const struct {
        const char *json, *msg;
        lp_status st;
    } cases[] = {
        {"{\"peft_type\":\"LORA\",", "not valid JSON", LP_STATUS_FORMAT},
        {"[1]", "not a JSON object", LP_STATUS_FORMAT},
        {"{\"peft_type\":\"IA3\",\"target_modules\":[\"q\"]}", "peft_type is IA3", LP_STATUS_UNSUPPORTED},
        {"{\"peft_type\":\"LORA\",\"r\":1e30,\"target_modules\":[\"q\"]}", "r must be", LP_STATUS_FORMAT},
        {"{\"peft_type\":\"LORA\",\"r\":-1e30,\"target_modules\":[\"q\"]}", "r must be", LP_STATUS_FORMAT},
        {"{\"peft_type\":\"LORA\",\"r\":4.5,\"target_modules\":[\"q\"]}", "r must be", LP_STATUS_FORMAT},
        {"{\"peft_type\":\"LORA\",\"r\":0,\"target_modules\":[\"q\"]}", "r must be", LP_STATUS_FORMAT},
        {"{\"peft_type\":\"LORA\",\"r\":65537,\"target_modules\":[\"q\"]}", "r must be", LP_STATUS_FORMAT},
        {"{\"peft_type\":\"LORA\",\"lora_alpha\":1e300,\"target_modules\":[\"q\"]}", "lora_alpha", LP_STATUS_FORMAT},
        {"{\"peft_type\":\"LORA\",\"lora_alpha\":1e999,\"target_modules\":[\"q\"]}", "lora_alpha", LP_STATUS_FORMAT},
        {"{\"peft_type\":\"LORA\",\"lora_dropout\":1,\"target_modules\":[\"q\"]}", "lora_dropout", LP_STATUS_FORMAT},
        {"{\"peft_type\":\"LORA\",\"use_dora\":true,\"target_modules\":[\"q\"]}", "use_dora", LP_STATUS_UNSUPPORTED},
        {"{\"peft_type\":\"LORA\",\"bias\":\"all\",\"target_modules\":[\"q\"]}", "bias", LP_STATUS_UNSUPPORTED},
        {"{\"peft_type\":\"LORA\",\"rank_pattern\":{\"q\":2},\"target_modules\":[\"q\"]}", "rank_pattern",
         LP_STATUS_UNSUPPORTED},
        {"{\"peft_type\":\"LORA\",\"layers_to_transform\":[0],\"target_modules\":[\"q\"]}", "layers_to_transform",
         LP_STATUS_UNSUPPORTED},
        {"{\"peft_type\":\"LORA\"}", "target_modules is missing", LP_STATUS_FORMAT},
        {"{\"peft_type\":\"LORA\",\"target_modules\":[]}", "target_modules is missing", LP_STATUS_FORMAT},
        {"{\"peft_type\":\"LORA\",\"target_modules\":[\"q\",7]}", "\"target_modules\"[1]", LP_STATUS_FORMAT},
        {"{\"peft_type\":\"LORA\",\"target_modules\":[\"q\"],\"modules_to_save\":{}}", "modules_to_save",
         LP_STATUS_FORMAT},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        lp_model_adapter_cfg c;
        lp_status st = parse(cases[i].json, &c);
        if (st != cases[i].st || !strstr(lp_err_msg(), cases[i].msg) || !strstr(lp_err_msg(), "dir/adapter_config.json"))
            fail_msg("case %zu (%s): status %d, message '%s'", i, cases[i].json, (int)st, lp_err_msg());
        assert_null(c.targets); // nothing left to free
        assert_null(c.target_regex);
        assert_null(c.mts);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(peft_written_file),
        cmocka_unit_test(regex_and_defaults),
        cmocka_unit_test(refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
