/* models internals: the lp_model struct (parameters, gradients and activations each in one
 * block with named pointers into it, llm.c style) shared by build, run and save. */
#ifndef LP_MODELS_INTERNAL_H
#define LP_MODELS_INTERNAL_H

#include "loupe/models.h"

/* One parameter while the model is being built: where its pointers go in the modules. */
typedef struct lp_model_pslot {
    float **w, **g;          /* module fields that receive data / grad */
    const lp_st_tensor *src; /* checkpoint tensor, or NULL: initialize */
    int init;                /* INIT_NORMAL, INIT_ZERO, INIT_ONE, INIT_SINUSOID */
    int64_t offset;          /* floats into the blocks */
    int64_t pad_row;         /* embedding row zeroed at init (-1: none) */
} lp_model_pslot;

enum { LP_INIT_NORMAL = 0, LP_INIT_ZERO, LP_INIT_ONE, LP_INIT_SINUSOID };

struct lp_model {
    char *dir;         /* source directory (owned) */
    char *config_json; /* source config.json text (owned), rewritten on save */
    lp_model_config cfg;
    lp_model_options opt;
    double init_range;
    bool has_head;
    lp_hf_arch save_arch;
    char **label_names; /* num_labels owned strings or NULL (then the config's / LABEL_i) */
    int64_t num_labels;

    /* parameters and gradients: one block each; params[i] point into them */
    float *param_block, *grad_block;
    int64_t n_floats;
    lp_model_param *params;
    lp_model_pslot *slots;
    char **names; /* owned HF names */
    size_t n_params, cap_params;

    lp_nn_embedding emb;
    lp_nn_encoder_layer *layers;
    int64_t L; /* layers */
    lp_nn_cls_head head;

    /* run state */
    lp_exec_mode exec;
    bool training, ckpt;
    lp_rng rng;        /* dropout stream */
    lp_rng *layer_rng; /* (L) stream state at each layer's forward: recompute replays it */
    float dloss_scale;

    /* activations (ACTIVATION), scratch (TEMPORARY), inputs (INPUT), sized for the batch */
    float *act_block;
    uint8_t *act_u8;
    int64_t act_cap_floats, act_cap_u8;
    float *tmp_block;
    int64_t tmp_cap;
    int32_t *in_block;
    int64_t in_cap;
    lp_nn_embedding_act emb_act;
    lp_nn_layer_act *lact; /* (L), or one shared entry under checkpointing */
    float **ckpt_out;      /* (L) layer outputs kept under checkpointing */
    lp_nn_head_act head_act;
    float *logits, *lse; /* (B,L), (B) */
    int32_t *ids, *mask, *types, *labels;
    bool has_types;
    int64_t B, T; /* of the last forward */
    bool fwd_ok, loss_ok;
    float loss;
    lp_exec_mode fwd_exec; /* layout of the last forward */
    bool fwd_training, fwd_ckpt;
};

/* Builds the modules and the parameter table from m->cfg and the checkpoint (w may be NULL:
 * everything initialized from the seed), allocates and fills the blocks. */
lp_status lp_model__build_bert(lp_model *m, const lp_st_set *w);

#endif
