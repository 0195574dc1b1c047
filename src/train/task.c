/* What a run trains: --task names it, or the checkpoint's architecture decides (a
 * *ForCausalLM predicts the next token of a text column, anything else classifies). */
#include <stdio.h>
#include <string.h>

#include "train_internal.h"

const char *lp_train_task_name(lp_model_task t)
{
    switch (t) {
    case LP_MODEL_TASK_AUTO:
        return "auto";
    case LP_MODEL_TASK_BASE:
        return "base";
    case LP_MODEL_TASK_SEQ_CLS:
        return "seq-cls";
    case LP_MODEL_TASK_CAUSAL_LM:
        return "causal-lm";
    }
    return "?";
}

lp_status lp_train_task_parse(const char *s, lp_model_task *out)
{
    if (s && !strcmp(s, "auto"))
        *out = LP_MODEL_TASK_AUTO;
    else if (s && !strcmp(s, "seq-cls"))
        *out = LP_MODEL_TASK_SEQ_CLS;
    else if (s && !strcmp(s, "causal-lm"))
        *out = LP_MODEL_TASK_CAUSAL_LM;
    else
        return lp_err(LP_STATUS_INVALID_ARG, "--task expects auto, seq-cls or causal-lm, got '%s'",
                      s ? s : "");
    return LP_OK;
}

lp_status lp_train_task_resolve(const char *model_dir, lp_model_task want, lp_model_task *out)
{
    if (want == LP_MODEL_TASK_SEQ_CLS || want == LP_MODEL_TASK_CAUSAL_LM) {
        *out = want;
        return LP_OK;
    }
    if (want != LP_MODEL_TASK_AUTO)
        return lp_err(LP_STATUS_INVALID_ARG, "task %s cannot be trained (seq-cls or causal-lm)",
                      lp_train_task_name(want));
    if (lp_path_is_gguf(model_dir)) { // a GGUF holds a causal LM (llama, qwen2, mistral)
        *out = LP_MODEL_TASK_CAUSAL_LM;
        return LP_OK;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", model_dir);
    lp_model_config cfg;
    lp_status st = lp_hf_config_load(path, &cfg);
    if (st != LP_OK)
        return st;
    const lp_hf_arch a = cfg.arch;
    /* a bare or masked-LM encoder gets a classification head, as before decoders existed */
    *out = a == LP_HF_ARCH_LLAMA_CAUSAL_LM || a == LP_HF_ARCH_QWEN2_CAUSAL_LM ||
                   a == LP_HF_ARCH_MISTRAL_CAUSAL_LM
               ? LP_MODEL_TASK_CAUSAL_LM
               : LP_MODEL_TASK_SEQ_CLS;
    lp_model_config_free(&cfg);
    return LP_OK;
}
