/*
 * audio_frontend.h - the audio front end WavLM, wav2vec2 and HuBERT share
 * (tests/golden/README.md, WavLMModel; README-zoo.md, Wav2Vec2Model): the conv
 * feature encoder ("group" or "layer" norm), the feature projection, the
 * weight-normed positional conv, and the frame mask derived from a sample-level
 * attention mask. The transformer encoders after it differ per architecture and
 * stay in their own files.
 */
#ifndef FT_AUDIO_FRONTEND_H
#define FT_AUDIO_FRONTEND_H

#include "model.h"

#define FT_AUDIO_MAX_CONV 16

enum { FT_AUDIO_NORM_GROUP = 0, FT_AUDIO_NORM_LAYER = 1 };

typedef struct ft_audio_conv {
    ft_tensor *w, *b;           /* [Cout, Cin, K], [Cout] or NULL */
    ft_tensor *norm_w, *norm_b; /* GroupNorm (layer 0, "group") or LayerNorm ("layer"), or NULL */
} ft_audio_conv;

typedef struct ft_audio_frontend {
    /* config */
    int n_conv;
    int64_t conv_dim[FT_AUDIO_MAX_CONV], conv_kernel[FT_AUDIO_MAX_CONV], conv_stride[FT_AUDIO_MAX_CONV];
    bool conv_bias;
    int feat_norm;              /* FT_AUDIO_NORM_* */
    ft_act_kind feat_act;       /* feat_extract_activation: the convs and the positional conv */
    int64_t d, pos_k, pos_groups;
    float eps;                  /* layer_norm_eps (feature projection LayerNorm) */
    bool proj_ln;               /* feature_projection.layer_norm exists (HuBERT: feat_proj_layer_norm) */
    /* weights */
    ft_audio_conv conv[FT_AUDIO_MAX_CONV];
    ft_tensor *proj_ln_w, *proj_ln_b, *proj_w, *proj_b; /* [C], [C], [D, C], [D] */
    ft_tensor *masked_spec_embed;                       /* [D], unused at inference (counted as HF does) */
    ft_tensor *pos_g, *pos_v, *pos_b;                   /* [1, 1, K], [D, D/G, K], [D] */
} ft_audio_frontend;

/* Reads the front end's config keys (conv_dim/kernel/stride, conv_bias,
 * feat_extract_norm/activation, num_conv_pos_embeddings/_groups) with HF's
 * defaults; d and eps are the caller's hidden_size and layer_norm_eps. proj_ln
 * is left as the caller set it. */
ft_status ft_audio_frontend_config(ft_audio_frontend *a, ft_config *c, int64_t d, float eps);
/* Fetches the front end's weights under the wav2vec2 family's names. */
ft_status ft_audio_frontend_load(ft_model *m, ft_audio_frontend *a, ft_config *cfg);

/* Frames the feature encoder makes from n samples (HF's floor formula; 0: none). */
int64_t ft_audio_frames(const ft_audio_frontend *a, int64_t n);
/* Samples the conv stack needs to produce frame t (0-based): frames' inverse on integers. */
int64_t ft_audio_samples_needed(const ft_audio_frontend *a, int64_t t);

/* validate(): input_values [B, T] float with T enough for one frame; attention_mask
 * (optional) [B, T] of 0/1 with enough ones per row for one frame. */
ft_status ft_audio_validate(ft_model *m, const ft_audio_frontend *a);

/* Conv feature encoder: input [B, T] -> [B, C, T'] (with the "layer" norm a view of
 * [B, T', C], the layout ft_audio_project reads). */
ft_tensor *ft_audio_features(ft_ctx *ctx, const ft_audio_frontend *a, ft_tensor *input);
/* Feature projection of feat [B, C, T']: x [B, T', D]; *normed (when not NULL) receives the
 * LayerNormed features [B, T', C] (wav2vec2's extract_features), NULL without proj_ln. */
ft_tensor *ft_audio_project(ft_ctx *ctx, const ft_audio_frontend *a, ft_tensor *feat, ft_tensor **normed);
/* The encoder's input: with a sample mask, the frames past each row's length are zeroed
 * and *key_mask receives the additive (1 - f) * finfo(f32).min key mask [B, 1, 1, T']
 * (NULL without a mask); then the positional conv embedding is added. x is released. */
ft_tensor *ft_audio_encoder_input(ft_model *m, ft_ctx *ctx, const ft_audio_frontend *a, ft_tensor *x,
                                  ft_tensor *mask, ft_tensor **key_mask);

/* example_inputs: uniform [0, 1) audio of `length` samples (<= 0: def_len). */
ft_status ft_audio_example_inputs(ft_model *m, const ft_audio_frontend *a, int64_t batch, int64_t length,
                                  int64_t def_len, ft_host_tensor *in, int *n_in, void **owned);

#endif /* FT_AUDIO_FRONTEND_H */
