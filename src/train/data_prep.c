/* Training data: the model's tokenizer, the train/eval datasets (labels checked against the
 * model's label count; text only for a causal LM) and their one-time tokenization. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train_internal.h"

/* With --skip-bad-rows, says how many rows each file lost and why (the first few). */
static void report_skipped(const lp_dataset *ds)
{
    if (!ds->n_skipped)
        return;
    fprintf(stderr, "loupe: %s: skipped %lld bad row%s\n", ds->source, (long long)ds->n_skipped,
            ds->n_skipped == 1 ? "" : "s");
    for (int32_t i = 0; i < ds->n_reasons; i++)
        fprintf(stderr, "  %s\n", ds->skip_reasons[i]);
}

/* Says how many rows --max-seq-len cut (their tokens past it are not trained on). */
static void report_truncated(const lp_encoded_dataset *e, const char *source)
{
    lp_length_stats ls;
    if (lp_encoded_length_stats(e, &ls) != LP_OK || !ls.n_truncated)
        return;
    fprintf(stderr, "loupe: %s: %lld of %lld rows truncated to --max-seq-len %d tokens (longest %d)\n", source,
            (long long)ls.n_truncated, (long long)ls.count, (int)e->max_len, (int)ls.max);
}

/* The id padding positions hold. Its value does not change the math: the attention mask
 * keeps every query from padded keys, padded positions carry no label (-100) and a
 * classifier reads the last real token by the mask. Decoder tokenizers often have no pad
 * token, so: the tokenizer's, else the config's pad_token_id, else EOS, else 0. */
static int32_t pad_id_of(const lp_tokenizer *tok, int64_t config_pad, int64_t config_eos, const char *model_dir,
                         bool quiet)
{
    int32_t pad = lp_tokenizer_special_id(tok, LP_SPECIAL_PAD);
    if (pad >= 0)
        return pad;
    const char *from = "pad_token_id";
    if (config_pad >= 0 && config_pad < INT32_MAX) {
        pad = (int32_t)config_pad;
    } else if ((pad = lp_tokenizer_special_id(tok, LP_SPECIAL_EOS)) >= 0) {
        from = "the EOS token";
    } else if (config_eos >= 0 && config_eos < INT32_MAX) {
        pad = (int32_t)config_eos;
        from = "eos_token_id";
    } else {
        pad = 0;
        from = "id 0";
    }
    if (!quiet)
        fprintf(stderr, "note: the tokenizer of %s has no pad token: padding with %s (%d); the attention mask, not "
                        "the id, keeps padding out of the results\n",
                model_dir, from, (int)pad);
    return pad;
}

/* The tokenizer file lp_tokenizer_load picked in a model directory (for messages). */
static void tokenizer_file(const char *dir, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s/tokenizer.json", dir);
    FILE *fp = fopen(buf, "rb");
    if (fp)
        fclose(fp);
    else
        snprintf(buf, cap, "%s/vocab.txt", dir);
}

/* What would fail at step 1 far from its cause, checked once the tokenizer is known: ids
 * past the embedding table (an "embedding" error at step 1), and a position table too short
 * for even one token between the special ones (blamed on the data file, exit 2). Both name
 * config.json, whose key is wrong for this tokenizer. */
static lp_status check_model_fits(const lp_train_data *d, const lp_train_config *c, int64_t model_vocab,
                                  int64_t model_positions)
{
    char tf[4200];
    tokenizer_file(c->model_dir, tf, sizeof tf);
    int32_t tv = lp_tokenizer_vocab_size(d->tok);
    if (model_vocab > 0 && tv > model_vocab)
        return lp_err(LP_STATUS_FORMAT,
                      "%s/config.json: vocab_size %lld is smaller than the tokenizer's vocabulary (%d ids in %s): "
                      "ids %lld and up have no embedding row",
                      c->model_dir, (long long)model_vocab, tv, tf, (long long)model_vocab);
    lp_encoding enc = {0};
    bool pair = c->text_pair_column && *c->text_pair_column;
    lp_status st = lp_tokenizer_encode(d->tok, "", pair ? "" : NULL, NULL, &enc);
    int64_t specials = st == LP_OK ? (int64_t)enc.len : 0;
    lp_encoding_free(&enc);
    if (st != LP_OK)
        return lp_err_wrap(st, "%s", tf);
    if (model_positions > 0 && model_positions < specials + 1)
        return lp_err(LP_STATUS_FORMAT,
                      "%s/config.json: max_position_embeddings %lld cannot hold one token besides the %lld special "
                      "tokens %s adds",
                      c->model_dir, (long long)model_positions, (long long)specials, tf);
    return LP_OK;
}

lp_status lp_train_data_load(lp_train_data *d, const lp_train_config *c, int32_t max_len, int32_t model_labels,
                             bool lm, int64_t config_pad, int64_t config_eos, int64_t model_vocab,
                             int64_t model_positions)
{
    memset(d, 0, sizeof *d);
    lp_status st = lp_tokenizer_load(c->model_dir, &d->tok);
    if (st != LP_OK)
        return lp_err_wrap(st, "tokenizer of %s", c->model_dir);
    if ((st = check_model_fits(d, c, model_vocab, model_positions)) != LP_OK)
        goto fail;
    lp_dataset_options o;
    lp_dataset_options_init(&o);
    o.text_column = c->text_column;
    o.text_pair_column = c->text_pair_column;
    o.label_column = c->label_column;
    o.skip_bad_rows = c->skip_bad_rows;
    o.num_labels = lm ? 0 : model_labels;
    o.text_only = lm;
    d->lm = lm;
    bool sft = false;
    if (lm && (st = lp_train_sft_wanted(c, &sft)) != LP_OK)
        goto fail;
    if (sft) {
        if (c->eval_split > 0) {
            st = lp_err(LP_STATUS_INVALID_ARG, "%s: --eval-split does not apply to instruction data: give --eval FILE "
                                               "(or --data DIR with eval.jsonl)", c->train_file);
            goto fail;
        }
        int32_t pad = pad_id_of(d->tok, config_pad, config_eos, c->model_dir, c->quiet);
        if ((st = lp_train_sft_load(d, c, max_len, pad)) != LP_OK)
            goto fail;
        return LP_OK;
    }
    if (c->packing || c->train_on_responses == 1 || c->data_format) {
        st = lp_err(LP_STATUS_INVALID_ARG, "--packing, --train-on-responses and --data-format need a causal LM");
        goto fail;
    }
    if ((st = lp_dataset_load(c->train_file, &o, &d->train)) != LP_OK)
        goto fail;
    d->num_labels = d->train.label_map.n;
    if (!lm && d->num_labels > model_labels) {
        st = lp_err(LP_STATUS_RANGE, "%s: %d labels but the model %s has %d", c->train_file, d->num_labels,
                    c->model_dir, model_labels);
        goto fail;
    }
    d->num_labels = lm ? 0 : model_labels;
    if (c->eval_split > 0) { /* validation carved out of the training file with the run's seed */
        lp_dataset tr, va;
        if ((st = lp_dataset_split(&d->train, c->eval_split, c->seed, &tr, &va)) != LP_OK) {
            st = lp_err_wrap(st, "%s: --eval-split %g", c->train_file, c->eval_split);
            goto fail;
        }
        lp_dataset_free(&d->train);
        d->train = tr;
        d->eval = va;
        d->has_eval = true;
    } else if (c->eval_file && *c->eval_file) {
        o.label_map = lm ? NULL : &d->train.label_map;
        if ((st = lp_dataset_load(c->eval_file, &o, &d->eval)) != LP_OK)
            goto fail;
        d->has_eval = true;
    }
    d->label_names = d->train.label_map.names;
    int32_t pad = pad_id_of(d->tok, config_pad, config_eos, c->model_dir, c->quiet);
    lp_tokenizer_rows ec = {.tok = d->tok};
    st = lp_dataset_encode(&d->train, lp_tokenizer_encode_row, &ec, max_len, pad, &d->etrain);
    if (st == LP_OK && d->has_eval)
        st = lp_dataset_encode(&d->eval, lp_tokenizer_encode_row, &ec, max_len, pad, &d->eeval);
    lp_encoding_free(&ec.enc);
    if (st != LP_OK)
        goto fail;
    report_skipped(&d->train);
    if (d->has_eval)
        report_skipped(&d->eval);
    report_truncated(&d->etrain, d->train.source); /* like skipped rows: said even with --quiet */
    if (d->has_eval)
        report_truncated(&d->eeval, d->eval.source);
    return LP_OK;
fail:
    lp_train_data_free(d);
    return st;
}

void lp_train_data_free(lp_train_data *d)
{
    lp_encoded_dataset_free(&d->etrain);
    lp_encoded_dataset_free(&d->eeval);
    lp_dataset_free(&d->train);
    lp_dataset_free(&d->eval);
    lp_sft_free(&d->strain);
    lp_sft_free(&d->seval);
    for (int64_t i = 0; d->em_want && i < d->em_n; i++)
        free(d->em_want[i]);
    free(d->em_want);
    free(d->em_off);
    free(d->em_ids);
    free(d->em_budget);
    lp_tokenizer_free(d->tok);
    memset(d, 0, sizeof *d);
}
