/* Malformed decoder models are refused at load with one message naming the file and the key
 * or tensor: keys missing or contradictory, head counts that do not divide, an odd head size,
 * absurd sizes, an unsupported activation or rope type, scaling parameters missing, and
 * weights whose shapes disagree with the config. lp_model_estimate (what `loupe inspect
 * --method` runs) refuses the same models with the same message. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loupe/base.h"
#include "loupe/models.h"

/* The tiny Llama of tests/golden/llama_lm, with one key replaced (or added). */
static const char *base_cfg =
    "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\", \"vocab_size\": 128,"
    " \"hidden_size\": 64, \"intermediate_size\": 160, \"num_hidden_layers\": 2, \"num_attention_heads\": 4,"
    " \"num_key_value_heads\": 2, \"head_dim\": 16, \"max_position_embeddings\": 128, \"rms_norm_eps\": 1e-6,"
    " \"hidden_act\": \"silu\", \"pad_token_id\": 0, \"tie_word_embeddings\": false %s}";

static char dir[256];

/* Writes dir/config.json from base_cfg with `extra` appended inside the object (keys given
 * twice: cJSON reads the first, so replaced keys are removed from base first), and links the
 * golden's weights when with_weights. */
static void write_model(const char *drop_key, const char *extra, bool with_weights)
{
    char cfg[2048], path[512];
    snprintf(cfg, sizeof cfg, base_cfg, extra);
    if (drop_key) { // remove "key": value, from the base
        char *k = strstr(cfg, drop_key);
        assert_non_null(k);
        char *comma = strchr(k, ',');
        assert_non_null(comma);
        memmove(k, comma + 1, strlen(comma + 1) + 1);
    }
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(cfg, f);
    fclose(f);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    unlink(path);
    if (with_weights) {
        char target[600];
        assert_non_null(realpath("tests/golden/llama_lm/model.safetensors", target));
        assert_int_equal(symlink(target, path), 0);
    }
}

static void expect_refused(const char *drop_key, const char *extra, bool with_weights, const char *needle)
{
    write_model(drop_key, extra, with_weights);
    lp_model_options o;
    lp_model_options_init(&o);
    o.quiet = true;
    o.training = true;
    lp_model *m = NULL;
    lp_status st = lp_model_load(dir, &o, &m);
    const char *msg = lp_err_msg();
    printf("  %-40s -> %s\n", needle, msg);
    if (st == LP_OK)
        fail_msg("model with %s loaded", needle);
    assert_null(m);
    assert_null(strchr(msg, '\n')); // one line
    if (!strstr(msg, dir))
        fail_msg("message does not name the model directory: %s", msg);
    if (!strstr(msg, needle))
        fail_msg("message does not name '%s': %s", needle, msg);
    char first[1024];
    snprintf(first, sizeof first, "%s", msg);
    lp_mem_estimate e;
    assert_int_not_equal(lp_model_estimate(dir, &o, 2, 8, 1, &e), LP_OK);
    assert_string_equal(lp_err_msg(), first); // inspect refuses with the same message
}

static void test_configs(void **state)
{
    (void)state;
    expect_refused("\"hidden_size\"", "", false, "hidden_size");
    expect_refused("\"num_key_value_heads\"", ", \"num_key_value_heads\": 3", false, "key/value heads");
    expect_refused("\"num_key_value_heads\"", ", \"num_key_value_heads\": 0", false, "num_key_value_heads");
    expect_refused("\"hidden_act\"", ", \"hidden_act\": \"gelu\"", false, "hidden_act");
    expect_refused("\"head_dim\"", ", \"head_dim\": 15", false, "head_dim");
    expect_refused("\"vocab_size\"", ", \"vocab_size\": 1e15", false, "vocab_size");
    expect_refused("\"num_hidden_layers\"", ", \"num_hidden_layers\": 0", false, "num_hidden_layers");
    expect_refused("\"pad_token_id\"", ", \"pad_token_id\": 500", false, "pad_token_id");
    expect_refused(NULL, ", \"rope_scaling\": {\"rope_type\": \"dynamic\", \"factor\": 2.0}", false, "dynamic");
    expect_refused(NULL, ", \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8.0}", false, "original_max_position_embeddings");
    expect_refused(NULL, ", \"rope_scaling\": \"linear\"", false, "rope_scaling");
    expect_refused("\"architectures\"", ", \"architectures\": [\"GPTNeoXForCausalLM\"]", false, "GPTNeoXForCausalLM");
}

static void test_weights(void **state)
{
    (void)state;
    /* the golden's weights under a config that disagrees: the tensor is named */
    expect_refused("\"intermediate_size\"", ", \"intermediate_size\": 170", true, "gate_proj");
    expect_refused("\"num_key_value_heads\"", ", \"num_key_value_heads\": 4", true, "k_proj");
    expect_refused("\"vocab_size\"", ", \"vocab_size\": 100", true, "embed_tokens");
    /* and the config it was made with loads */
    write_model(NULL, "", true);
    lp_model_options o;
    lp_model_options_init(&o);
    o.quiet = true;
    lp_model *m = NULL;
    if (lp_model_load(dir, &o, &m) != LP_OK)
        fail_msg("%s", lp_err_msg());
    lp_model_free(m);
}

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/lp_decoder_errors.XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char path[512];
    snprintf(path, sizeof path, "%s/config.json", dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    unlink(path);
    rmdir(dir);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_configs), cmocka_unit_test(test_weights)};
    return cmocka_run_group_tests(tests, setup, teardown);
}
