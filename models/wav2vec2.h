/*
 * wav2vec2.h - Wav2Vec2Model and HubertModel share everything but a few
 * config keys and one output (tests/golden/README-zoo.md: HF's HuBERT
 * modules are line-for-line copies of wav2vec2's): wav2vec2.c implements both,
 * hubert.c is HuBERT's registry entry over these functions.
 */
#ifndef FT_WAV2VEC2_H
#define FT_WAV2VEC2_H

#include "audio_frontend.h"

typedef struct ft_w2v_layer {
    ft_tensor *wq, *bq, *wk, *bk, *wv, *bv, *wo, *bo; /* [D, D], [D] */
    ft_tensor *ln1_w, *ln1_b;                         /* layer_norm [D] */
    ft_tensor *wi, *bi, *wo2, *bo2;                   /* [I, D], [I], [D, I], [D] */
    ft_tensor *ln2_w, *ln2_b;                         /* final_layer_norm [D] */
} ft_w2v_layer;

typedef struct ft_w2v {
    ft_audio_frontend fe;
    bool hubert;  /* HubertModel: feat_proj_layer_norm from the config, no extract_features */
    bool stable;  /* do_stable_layer_norm: pre-LN layers, encoder LayerNorm at the end */
    ft_act_kind act;
    int64_t d, layers, heads, inter;
    float eps;
    ft_tensor *enc_ln_w, *enc_ln_b; /* encoder.layer_norm [D] */
    ft_w2v_layer *layer;
} ft_w2v;

/* The ft_arch callbacks of both architectures (hubert: HubertModel's config and names). */
ft_status ft_w2v_load(ft_model *m, ft_config *cfg, bool hubert);
ft_status ft_w2v_validate(ft_model *m);
ft_status ft_w2v_forward(ft_model *m, ft_ctx *ctx);
void ft_w2v_destroy(ft_model *m);
/* Uniform [0, 1) audio; 1 s at 16 kHz (the zoo spec's MAC counts) by default. */
ft_status ft_w2v_example_inputs(ft_model *m, int64_t batch, int64_t length, ft_host_tensor *in, int *n_in,
                                void **owned);

#endif /* FT_WAV2VEC2_H */
