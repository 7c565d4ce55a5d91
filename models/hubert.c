/*
 * hubert.c - HubertModel (tests/golden/README-zoo.md, Wav2Vec2Model /
 * HubertModel): in transformers 4.36.2 every HuBERT module is a copy of
 * wav2vec2's, so the forward is wav2vec2.c's; what differs is the config
 * (feat_proj_layer_norm: the feature projection's LayerNorm is optional), the
 * output (no extract_features), the base-model prefix "hubert." and the
 * presets.
 */
#include "wav2vec2.h"

static const char *const hubert_prefixes[] = {"hubert.", NULL};
static const char *const hubert_inputs[] = {"input_values", "attention_mask", NULL};

static ft_status hubert_load(ft_model *m, ft_config *cfg) { return ft_w2v_load(m, cfg, true); }

/* facebook/hubert-base-ls960 (the class defaults) and the hubert-large-ll60k layout */
static const ft_preset hubert_presets[] = {
    {"hubert-base-ls960", "{\"model_type\": \"hubert\"}"},
    {"hubert-large-ll60k", "{\"model_type\": \"hubert\", \"hidden_size\": 1024, \"num_hidden_layers\": 24,"
                           " \"num_attention_heads\": 16, \"intermediate_size\": 4096,"
                           " \"feat_extract_norm\": \"layer\", \"do_stable_layer_norm\": true,"
                           " \"conv_bias\": true}"},
    {NULL, NULL},
};

const ft_arch ft_arch_hubert = {
    .model_type = "hubert",
    .prefixes = hubert_prefixes,
    .inputs = hubert_inputs,
    .load = hubert_load,
    .validate = ft_w2v_validate,
    .forward = ft_w2v_forward,
    .destroy = ft_w2v_destroy,
    .example_inputs = ft_w2v_example_inputs,
    .presets = hubert_presets,
};
