/* HF config.json parsing for both families: real-world configs (MiniLM, DistilBERT SST-2,
 * Qwen2.5-0.5B, a Llama with GQA) read back field by field, and broken configs rejected
 * with a message that names the file and the key. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "loupe/io.h"

static lp_status parse(const char *json, lp_model_config *c)
{
    return lp_hf_config_parse(json, strlen(json), "cfg/config.json", c);
}

static void expect_fail(const char *json, lp_status want, const char *frag)
{
    lp_model_config c;
    lp_status st = parse(json, &c);
    if (st != want)
        fail_msg("config %s: status %d (%s), wanted %d", json, st, lp_err_msg(), want);
    assert_non_null(strstr(lp_err_msg(), "cfg/config.json"));
    if (frag && !strstr(lp_err_msg(), frag))
        fail_msg("message '%s' lacks '%s'", lp_err_msg(), frag);
    assert_null(c.id2label);
}

/* all-MiniLM-L6-v2's config.json as published */
static const char *minilm =
    "{\"_name_or_path\": \"nreimers/MiniLM-L6-H384-uncased\", \"architectures\": [\"BertModel\"],"
    " \"attention_probs_dropout_prob\": 0.1, \"gradient_checkpointing\": false, \"hidden_act\": \"gelu\","
    " \"hidden_dropout_prob\": 0.1, \"hidden_size\": 384, \"initializer_range\": 0.02,"
    " \"intermediate_size\": 1536, \"layer_norm_eps\": 1e-12, \"max_position_embeddings\": 512,"
    " \"model_type\": \"bert\", \"num_attention_heads\": 12, \"num_hidden_layers\": 6, \"pad_token_id\": 0,"
    " \"position_embedding_type\": \"absolute\", \"transformers_version\": \"4.8.2\", \"type_vocab_size\": 2,"
    " \"use_cache\": true, \"vocab_size\": 30522}";

static void test_minilm(void **state)
{
    (void)state;
    lp_model_config c;
    assert_int_equal(parse(minilm, &c), LP_OK);
    assert_int_equal(c.family, LP_MODEL_FAMILY_BERT);
    assert_int_equal(c.arch, LP_HF_ARCH_BERT_MODEL);
    assert_false(c.distilbert);
    assert_int_equal(c.vocab_size, 30522);
    assert_int_equal(c.hidden_size, 384);
    assert_int_equal(c.num_layers, 6);
    assert_int_equal(c.num_heads, 12);
    assert_int_equal(c.num_kv_heads, 12);
    assert_int_equal(c.head_dim, 32);
    assert_int_equal(c.intermediate_size, 1536);
    assert_int_equal(c.max_position_embeddings, 512);
    assert_int_equal(c.type_vocab_size, 2);
    assert_true(c.norm_eps == 1e-12);
    assert_int_equal(c.activation, LP_ACTIVATION_GELU);
    assert_int_equal(c.pad_token_id, 0);
    assert_true(c.hidden_dropout == 0.1 && c.attention_dropout == 0.1 && c.classifier_dropout == 0.1);
    assert_int_equal(c.num_labels, 2);
    assert_string_equal(c.id2label[1], "LABEL_1");
    assert_true(c.attention_qkv_bias && c.attention_out_bias && c.mlp_bias);
    assert_string_equal(c.model_type, "bert");
    lp_model_config_free(&c);
}

static void test_distilbert_sst2(void **state)
{
    (void)state;
    const char *j = "{\"activation\": \"gelu\", \"architectures\": [\"DistilBertForSequenceClassification\"],"
                    " \"attention_dropout\": 0.1, \"dim\": 768, \"dropout\": 0.1, \"finetuning_task\": \"sst-2\","
                    " \"hidden_dim\": 3072, \"id2label\": {\"0\": \"NEGATIVE\", \"1\": \"POSITIVE\"},"
                    " \"initializer_range\": 0.02, \"label2id\": {\"NEGATIVE\": 0, \"POSITIVE\": 1},"
                    " \"max_position_embeddings\": 512, \"model_type\": \"distilbert\", \"n_heads\": 12,"
                    " \"n_layers\": 6, \"output_past\": true, \"pad_token_id\": 0, \"qa_dropout\": 0.1,"
                    " \"seq_classif_dropout\": 0.2, \"sinusoidal_pos_embds\": false, \"tie_weights_\": true,"
                    " \"vocab_size\": 30522}";
    lp_model_config c;
    assert_int_equal(parse(j, &c), LP_OK);
    assert_true(c.distilbert);
    assert_int_equal(c.arch, LP_HF_ARCH_DISTILBERT_SEQ_CLS);
    assert_int_equal(c.hidden_size, 768);
    assert_int_equal(c.num_layers, 6);
    assert_int_equal(c.num_heads, 12);
    assert_int_equal(c.intermediate_size, 3072);
    assert_int_equal(c.type_vocab_size, 0);
    assert_true(c.norm_eps == 1e-12);
    assert_true(fabs(c.classifier_dropout - 0.2) < 1e-12);
    assert_int_equal(c.num_labels, 2);
    assert_string_equal(c.id2label[0], "NEGATIVE");
    assert_string_equal(c.id2label[1], "POSITIVE");
    lp_model_config_free(&c);
}

static void test_qwen2(void **state)
{
    (void)state;
    /* Qwen2.5-0.5B config.json (values from the model card's config) */
    const char *j = "{\"architectures\": [\"Qwen2ForCausalLM\"], \"attention_dropout\": 0.0, \"bos_token_id\": 151643,"
                    " \"eos_token_id\": 151643, \"hidden_act\": \"silu\", \"hidden_size\": 896,"
                    " \"initializer_range\": 0.02, \"intermediate_size\": 4864, \"max_position_embeddings\": 32768,"
                    " \"max_window_layers\": 24, \"model_type\": \"qwen2\", \"num_attention_heads\": 14,"
                    " \"num_hidden_layers\": 24, \"num_key_value_heads\": 2, \"rms_norm_eps\": 1e-06,"
                    " \"rope_theta\": 1000000.0, \"sliding_window\": 32768, \"tie_word_embeddings\": true,"
                    " \"torch_dtype\": \"bfloat16\", \"use_cache\": true, \"use_sliding_window\": false,"
                    " \"vocab_size\": 151936}";
    lp_model_config c;
    assert_int_equal(parse(j, &c), LP_OK);
    assert_int_equal(c.family, LP_MODEL_FAMILY_LLAMA);
    assert_int_equal(c.arch, LP_HF_ARCH_QWEN2_CAUSAL_LM);
    assert_int_equal(c.hidden_size, 896);
    assert_int_equal(c.num_heads, 14);
    assert_int_equal(c.num_kv_heads, 2);
    assert_int_equal(c.head_dim, 64);
    assert_int_equal(c.intermediate_size, 4864);
    assert_true(c.rope_theta == 1e6);
    assert_true(c.norm_eps == 1e-6);
    assert_true(c.tie_word_embeddings);
    assert_true(c.attention_qkv_bias);
    assert_false(c.attention_out_bias);
    assert_false(c.mlp_bias);
    assert_int_equal(c.activation, LP_ACTIVATION_SILU);
    assert_int_equal(c.pad_token_id, -1); /* Qwen2.5 has none: the trainer must set 151643 */
    assert_int_equal(c.eos_token_id, 151643);
    assert_string_equal(c.torch_dtype, "bfloat16");
    lp_model_config_free(&c);
}

static void test_llama_defaults_and_rope_parameters(void **state)
{
    (void)state;
    /* no kv heads -> = heads; rope theta from rope_parameters; eos as a list */
    const char *j = "{\"architectures\": [\"LlamaForSequenceClassification\"], \"hidden_size\": 64,"
                    " \"intermediate_size\": 128, \"num_hidden_layers\": 2, \"num_attention_heads\": 4,"
                    " \"vocab_size\": 100, \"eos_token_id\": [7, 8], \"pad_token_id\": null,"
                    " \"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": 500000.0},"
                    " \"id2label\": {\"0\": \"a\", \"1\": \"b\", \"2\": \"c\"}}";
    lp_model_config c;
    assert_int_equal(parse(j, &c), LP_OK);
    assert_int_equal(c.arch, LP_HF_ARCH_LLAMA_SEQ_CLS);
    assert_int_equal(c.num_kv_heads, 4);
    assert_int_equal(c.head_dim, 16);
    assert_int_equal(c.max_position_embeddings, 2048);
    assert_true(c.rope_theta == 500000.0);
    assert_false(c.tie_word_embeddings);
    assert_false(c.attention_qkv_bias);
    assert_int_equal(c.eos_token_id, 7);
    assert_int_equal(c.pad_token_id, -1);
    assert_int_equal(c.num_labels, 3);
    assert_string_equal(c.id2label[2], "c");
    lp_model_config_free(&c);
    /* model_type without architectures; mistral defaults; gelu_new */
    j = "{\"model_type\": \"mistral\", \"hidden_size\": 32, \"intermediate_size\": 64, \"num_hidden_layers\": 1,"
        " \"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"vocab_size\": 50, \"hidden_act\": \"gelu_new\"}";
    assert_int_equal(parse(j, &c), LP_OK);
    assert_int_equal(c.arch, LP_HF_ARCH_MISTRAL_CAUSAL_LM);
    assert_int_equal(c.activation, LP_ACTIVATION_GELU_TANH);
    assert_true(c.rope_theta == 10000.0);
    assert_int_equal(c.sliding_window, 4096); // MistralConfig's default
    lp_model_config_free(&c);
    /* Llama 3 rope scaling; a Mistral window given as null */
    j = "{\"architectures\": [\"MistralForSequenceClassification\"], \"hidden_size\": 32, \"intermediate_size\": 64,"
        " \"num_hidden_layers\": 1, \"num_attention_heads\": 4, \"vocab_size\": 50, \"sliding_window\": null,"
        " \"rope_theta\": 500000.0, \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8.0,"
        " \"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 8192}}";
    assert_int_equal(parse(j, &c), LP_OK);
    assert_int_equal(c.arch, LP_HF_ARCH_MISTRAL_SEQ_CLS);
    assert_int_equal(c.sliding_window, 0);
    assert_string_equal(c.rope_type, "llama3");
    assert_true(c.rope_factor == 8.0 && c.rope_low_freq_factor == 1.0 && c.rope_high_freq_factor == 4.0);
    assert_int_equal(c.rope_original_max_pos, 8192);
    assert_true(c.rope_theta == 500000.0);
    lp_model_config_free(&c);
}

static void test_broken_configs(void **state)
{
    (void)state;
    expect_fail("{\"architectures\": [\"BertModel\"], \"hidden_size\": 3", LP_STATUS_FORMAT, "not valid JSON");
    expect_fail("[1]", LP_STATUS_FORMAT, "not a JSON object");
    expect_fail("{\"architectures\": [\"T5ForConditionalGeneration\"]}", LP_STATUS_UNSUPPORTED,
                "T5ForConditionalGeneration");
    expect_fail("{\"architectures\": [\"GPT2LMHeadModel\"]}", LP_STATUS_UNSUPPORTED,
                "supported: BertModel, BertForSequenceClassification");
    expect_fail("{\"model_type\": \"gpt2\"}", LP_STATUS_UNSUPPORTED, "gpt2");
    expect_fail("{\"hidden_size\": 3}", LP_STATUS_FORMAT, "neither \"architectures\"");
    expect_fail("{\"architectures\": \"BertModel\"}", LP_STATUS_FORMAT, "architectures");
    /* each size key missing in turn */
    expect_fail("{\"architectures\": [\"BertModel\"], \"hidden_size\": 8, \"num_hidden_layers\": 1,"
                " \"num_attention_heads\": 2, \"intermediate_size\": 16}",
                LP_STATUS_FORMAT, "missing required key \"vocab_size\"");
    expect_fail("{\"architectures\": [\"BertModel\"], \"vocab_size\": 8, \"num_hidden_layers\": 1,"
                " \"num_attention_heads\": 2, \"intermediate_size\": 16}",
                LP_STATUS_FORMAT, "\"hidden_size\"");
    expect_fail("{\"architectures\": [\"DistilBertForSequenceClassification\"], \"vocab_size\": 8, \"dim\": 8,"
                " \"n_layers\": 1, \"n_heads\": 2}",
                LP_STATUS_FORMAT, "\"hidden_dim\"");
    expect_fail("{\"architectures\": [\"Qwen2ForCausalLM\"], \"vocab_size\": 8, \"hidden_size\": 8,"
                " \"num_hidden_layers\": 1, \"num_attention_heads\": 2}",
                LP_STATUS_FORMAT, "\"intermediate_size\"");
    /* wrong types and inconsistent values */
    const char *base = "{\"architectures\": [\"BertModel\"], \"vocab_size\": 8, \"num_hidden_layers\": 1,"
                       " \"intermediate_size\": 16, ";
    char j[600];
#define BAD(tail, st, frag)                                                                                   \
    snprintf(j, sizeof j, "%s%s}", base, tail);                                                                 \
    expect_fail(j, st, frag)
    BAD("\"hidden_size\": \"8\", \"num_attention_heads\": 2", LP_STATUS_FORMAT, "\"hidden_size\" must be an integer");
    BAD("\"hidden_size\": 8.5, \"num_attention_heads\": 2", LP_STATUS_FORMAT, "hidden_size");
    BAD("\"hidden_size\": -8, \"num_attention_heads\": 2", LP_STATUS_FORMAT, "hidden_size");
    BAD("\"hidden_size\": 10, \"num_attention_heads\": 4", LP_STATUS_FORMAT, "not divisible");
    BAD("\"hidden_size\": 8, \"num_attention_heads\": 2, \"hidden_act\": \"mish\"", LP_STATUS_UNSUPPORTED, "mish");
    BAD("\"hidden_size\": 8, \"num_attention_heads\": 2, \"layer_norm_eps\": \"x\"", LP_STATUS_FORMAT, "layer_norm_eps");
    BAD("\"hidden_size\": 8, \"num_attention_heads\": 2, \"position_embedding_type\": \"relative_key\"",
        LP_STATUS_UNSUPPORTED, "position_embedding_type");
    BAD("\"hidden_size\": 8, \"num_attention_heads\": 2, \"id2label\": {\"0\": \"a\", \"2\": \"b\"}", LP_STATUS_FORMAT,
        "\"2\"");
    BAD("\"hidden_size\": 8, \"num_attention_heads\": 2, \"id2label\": {\"0\": \"a\", \"x\": \"b\"}", LP_STATUS_FORMAT,
        "\"x\"");
    BAD("\"hidden_size\": 8, \"num_attention_heads\": 2, \"id2label\": {\"0\": \"a\", \"1\": \"b\"},"
        " \"label2id\": {\"a\": 1, \"b\": 0}",
        LP_STATUS_FORMAT, "disagrees");
    BAD("\"hidden_size\": 8, \"num_attention_heads\": 2, \"id2label\": {\"0\": \"a\"}, \"num_labels\": 3",
        LP_STATUS_FORMAT, "num_labels");
    BAD("\"hidden_size\": 8, \"num_attention_heads\": 2, \"pad_token_id\": -3", LP_STATUS_FORMAT, "pad_token_id");
#undef BAD
    expect_fail("{\"architectures\": [\"LlamaForCausalLM\"], \"vocab_size\": 8, \"hidden_size\": 8,"
                " \"intermediate_size\": 8, \"num_hidden_layers\": 1, \"num_attention_heads\": 4,"
                " \"num_key_value_heads\": 3}",
                LP_STATUS_FORMAT, "key/value heads");
    expect_fail("{\"architectures\": [\"LlamaForCausalLM\"], \"vocab_size\": 8, \"hidden_size\": 8,"
                " \"intermediate_size\": 8, \"num_hidden_layers\": 1, \"num_attention_heads\": 4,"
                " \"rope_scaling\": {\"rope_type\": \"dynamic\", \"factor\": 8.0}}",
                LP_STATUS_UNSUPPORTED, "dynamic");
    expect_fail("{\"architectures\": [\"LlamaForCausalLM\"], \"vocab_size\": 8, \"hidden_size\": 8,"
                " \"intermediate_size\": 8, \"num_hidden_layers\": 1, \"num_attention_heads\": 4,"
                " \"rope_scaling\": [8]}",
                LP_STATUS_FORMAT, "rope_scaling");
    expect_fail("{\"architectures\": [\"Qwen2ForCausalLM\"], \"vocab_size\": 8, \"hidden_size\": 8,"
                " \"intermediate_size\": 8, \"num_hidden_layers\": 1, \"num_attention_heads\": 4,"
                " \"use_sliding_window\": true, \"sliding_window\": 4}",
                LP_STATUS_UNSUPPORTED, "use_sliding_window");
    /* a missing file */
    lp_model_config c;
    assert_int_equal(lp_hf_config_load("/nonexistent/config.json", &c), LP_STATUS_IO);
    assert_non_null(strstr(lp_err_msg(), "/nonexistent/config.json"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_minilm),
        cmocka_unit_test(test_distilbert_sst2),
        cmocka_unit_test(test_qwen2),
        cmocka_unit_test(test_llama_defaults_and_rope_parameters),
        cmocka_unit_test(test_broken_configs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
