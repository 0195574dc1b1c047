/* Test helper for save_hf_check.py: loads a model directory with the given options,
 * optionally takes one AdamW step on a batch (so the saved weights differ from the source),
 * saves it with lp_model_save_hf and prints the logits of the batch (eval mode) as JSON.
 *   save_tool SRC OUT BATCH.safetensors [--labels N] [--pooling cls|mean] [--step] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "golden_util.h"
#include "loupe/models.h"

static int die(const char *what)
{
    fprintf(stderr, "save_tool: %s: %s\n", what, lp_err_msg());
    return 1;
}

int main(int argc, char **argv)
{
    if (argc < 4)
        return fprintf(stderr, "usage: save_tool SRC OUT BATCH [--labels N] [--pooling cls|mean] [--step]\n"),
               2;
    lp_model_options o;
    lp_model_options_init(&o);
    o.task = LP_MODEL_TASK_SEQ_CLS;
    o.quiet = false;
    bool step = false;
    for (int i = 4; i < argc; i++) {
        if (!strcmp(argv[i], "--labels") && i + 1 < argc)
            o.num_labels = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--pooling") && i + 1 < argc) {
            if (lp_pooling_parse(argv[++i], &o.pooling) != LP_OK)
                return die("--pooling");
        } else if (!strcmp(argv[i], "--step"))
            step = true;
        else
            return fprintf(stderr, "save_tool: unknown argument %s\n", argv[i]), 2;
    }
    lp_threads_init();
    lp_model *m;
    if (lp_model_load(argv[1], &o, &m) != LP_OK)
        return die(argv[1]);
    lp_st_file *bf;
    if (lp_st_open(argv[3], &bf) != LP_OK)
        return die(argv[3]);
    int64_t n = 0, nl = 0;
    int32_t *ids = gold_i32(bf, "input_ids", &n), *mask = gold_i32(bf, "attention_mask", NULL),
            *types = gold_i32(bf, "token_type_ids", NULL), *labels = gold_i32(bf, "labels", &nl);
    if (!ids || !mask)
        return fprintf(stderr, "save_tool: %s lacks input_ids/attention_mask\n", argv[3]), 1;
    const lp_st_tensor *t = lp_st_find(bf, "input_ids");
    int32_t B = (int32_t)t->shape[0], T = (int32_t)t->shape[1];
    lp_model_info info;
    lp_model_info_get(m, &info);
    if (step) {
        if (!labels || nl != B)
            return fprintf(stderr, "save_tool: --step needs labels [B]\n"), 1;
        size_t np;
        const lp_model_param *p = lp_model_params(m, &np);
        float loss;
        lp_model_set_training(m, true);
        lp_model_zero_grad(m);
        if (lp_model_loss_forward(m, ids, mask, types, labels, B, T, NULL, &loss) != LP_OK ||
            lp_model_backward(m) != LP_OK)
            return die("train step");
        for (size_t i = 0; i < np; i++)
            if (p[i].trainable) {
                float *mv = calloc((size_t)p[i].numel * 2, sizeof(float));
                lp_adamw_step(p[i].data, p[i].grad, mv, mv + p[i].numel, p[i].numel, 1e-2, 0.9, 0.999, 1e-8,
                              0.01, 1);
                free(mv);
            }
        lp_model_set_training(m, false);
    }
    if (lp_model_save_hf(m, argv[2]) != LP_OK)
        return die(argv[2]);
    float *logits = malloc((size_t)B * (size_t)info.num_labels * sizeof *logits);
    if (lp_model_forward(m, ids, mask, types, B, T, logits) != LP_OK)
        return die("forward");
    printf("{\"logits\": [");
    for (int64_t i = 0; i < (int64_t)B * info.num_labels; i++)
        printf("%s%.9g", i ? ", " : "", logits[i]);
    printf("], \"num_labels\": %lld}\n", (long long)info.num_labels);
    free(logits);
    free(ids), free(mask), free(types), free(labels);
    lp_st_close(bf);
    lp_model_free(m);
    return 0;
}
