/*
 * wavlm.c - WavLMModel as Hugging Face defines it (../shared/specs/models.md
 * section 6): conv feature encoder ("group" = wavlm-base, "layer" =
 * wavlm-large), feature projection, weight-normed positional conv, and a
 * transformer encoder with gated relative position bias, post-LN (base) or
 * pre-LN ("stable", large).
 *
 * Everything that depends only on shapes is computed on the host in forward()
 * (frames per conv layer, the relative-position bucket table, the sample count
 * each frame needs) and uploaded with ft_tensor_from_host, which graph mode
 * records as a constant of the plan for that input shape. Everything that
 * depends on input values (the frame mask derived from an audio attention
 * mask) is computed with ops, so one forward() serves every mode:
 *   frame t of row b is valid  <=>  t < frames(sum(mask[b]))
 *                              <=>  need(t) <= sum(mask[b])
 * where need(t) is the number of samples the conv stack consumes to produce
 * frame t (floor((L - k) / s) + 1 composed, inverted exactly on integers).
 * With d = sum - need(t) (an integer in f32), relu(d + 1) - relu(d) is 1 when
 * d >= 0 and 0 otherwise, which is HF's mask without a comparison op.
 */
#include "model.h"
#include "../engine/ft_checked.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WAVLM_MAX_CONV 16

enum { FEAT_NORM_GROUP = 0, FEAT_NORM_LAYER = 1 };

typedef struct wavlm_conv {
    ft_tensor *w, *b;         /* [Cout, Cin, K], [Cout] or NULL */
    ft_tensor *norm_w, *norm_b; /* GroupNorm (layer 0, "group") or LayerNorm ("layer"), or NULL */
} wavlm_conv;

typedef struct wavlm_layer {
    ft_tensor *wq, *bq, *wk, *bk, *wv, *bv, *wo, *bo; /* [D, D], [D] */
    ft_tensor *gru_const;          /* [1, H, 1, 1] */
    ft_tensor *gru_w, *gru_b;      /* [8, Dh], [8] */
    ft_tensor *rel_embed;          /* [num_buckets, H], layer 0 only */
    ft_tensor *ln1_w, *ln1_b;      /* layer_norm [D] */
    ft_tensor *wi, *bi, *wo2, *bo2; /* [I, D], [I], [D, I], [D] */
    ft_tensor *ln2_w, *ln2_b;      /* final_layer_norm [D] */
} wavlm_layer;

typedef struct wavlm {
    int n_conv;
    int64_t conv_dim[WAVLM_MAX_CONV], conv_kernel[WAVLM_MAX_CONV], conv_stride[WAVLM_MAX_CONV];
    bool conv_bias, stable;
    int feat_norm;
    ft_act_kind feat_act, act;
    int64_t d, layers, heads, inter, pos_k, pos_groups, num_buckets, max_distance;
    float eps;
    wavlm_conv conv[WAVLM_MAX_CONV];
    ft_tensor *proj_ln_w, *proj_ln_b, *proj_w, *proj_b; /* [C], [C], [D, C], [D] */
    ft_tensor *masked_spec_embed;  /* [D], unused at inference (counted as HF does) */
    ft_tensor *pos_g, *pos_v, *pos_b; /* [1, 1, K], [D, D/G, K], [D] */
    ft_tensor *enc_ln_w, *enc_ln_b;
    wavlm_layer *layer;
} wavlm;

static ft_status read_config(wavlm *w, ft_config *c) {
    static const int64_t def_dim[7] = {512, 512, 512, 512, 512, 512, 512};
    static const int64_t def_kernel[7] = {10, 3, 3, 3, 3, 2, 2};
    static const int64_t def_stride[7] = {5, 2, 2, 2, 2, 2, 2};
    int nd = 0, nk = 0, ns = 0;
    const char *norm = NULL;
    double eps = 1e-5;
    bool adapter = false;
    ft_status st;
    if ((st = ft_config_int_array(c, "conv_dim", def_dim, 7, w->conv_dim, WAVLM_MAX_CONV, &nd)) ||
        (st = ft_config_int_array(c, "conv_kernel", def_kernel, 7, w->conv_kernel, WAVLM_MAX_CONV, &nk)) ||
        (st = ft_config_int_array(c, "conv_stride", def_stride, 7, w->conv_stride, WAVLM_MAX_CONV, &ns)) ||
        (st = ft_config_bool(c, "conv_bias", false, &w->conv_bias)) ||
        (st = ft_config_string(c, "feat_extract_norm", "group", &norm)) ||
        (st = ft_model_act_parse(c, "feat_extract_activation", "gelu", &w->feat_act)) ||
        (st = ft_model_act_parse(c, "hidden_act", "gelu", &w->act)) ||
        (st = ft_config_int(c, "hidden_size", 768, &w->d)) ||
        (st = ft_config_int(c, "num_hidden_layers", 12, &w->layers)) ||
        (st = ft_config_int(c, "num_attention_heads", 12, &w->heads)) ||
        (st = ft_config_int(c, "intermediate_size", 3072, &w->inter)) ||
        (st = ft_config_int(c, "num_conv_pos_embeddings", 128, &w->pos_k)) ||
        (st = ft_config_int(c, "num_conv_pos_embedding_groups", 16, &w->pos_groups)) ||
        (st = ft_config_int(c, "num_buckets", 320, &w->num_buckets)) ||
        (st = ft_config_int(c, "max_bucket_distance", 800, &w->max_distance)) ||
        (st = ft_config_float(c, "layer_norm_eps", 1e-5, &eps)) ||
        (st = ft_config_bool(c, "do_stable_layer_norm", false, &w->stable)) ||
        (st = ft_config_bool(c, "add_adapter", false, &adapter)))
        return st;
    if (nd != nk || nd != ns || nd < 1)
        return ft_config_error(c, "conv_dim, conv_kernel and conv_stride must have the same non-zero "
                               "length (got %d, %d, %d)", nd, nk, ns);
    w->n_conv = nd;
    for (int i = 0; i < nd; i++)
        if (w->conv_dim[i] < 1 || w->conv_kernel[i] < 1 || w->conv_stride[i] < 1)
            return ft_config_error(c, "feature encoder layer %d: dim, kernel and stride must be positive", i);
    if (!strcmp(norm, "group")) w->feat_norm = FEAT_NORM_GROUP;
    else if (!strcmp(norm, "layer")) w->feat_norm = FEAT_NORM_LAYER;
    else return ft_config_error(c, "feat_extract_norm '%s' is not supported (group, layer)", norm);
    if (adapter) return ft_config_error(c, "add_adapter true is not supported");
    if (w->d < 1 || w->layers < 0 || w->heads < 1 || w->inter < 1 || w->pos_k < 1 || w->pos_groups < 1)
        return ft_config_error(c, "sizes must be positive (hidden %lld, layers %lld, heads %lld, "
                               "intermediate %lld, pos conv %lld/%lld)", (long long)w->d,
                               (long long)w->layers, (long long)w->heads, (long long)w->inter,
                               (long long)w->pos_k, (long long)w->pos_groups);
    if (w->d % w->heads)
        return ft_config_error(c, "hidden_size %lld is not a multiple of num_attention_heads %lld",
                               (long long)w->d, (long long)w->heads);
    if (w->d % w->pos_groups)
        return ft_config_error(c, "hidden_size %lld is not a multiple of num_conv_pos_embedding_groups %lld",
                               (long long)w->d, (long long)w->pos_groups);
    if (w->num_buckets < 4 || w->max_distance < 1)
        return ft_config_error(c, "num_buckets (%lld) must be at least 4 and max_bucket_distance positive",
                               (long long)w->num_buckets);
    if (!(eps > 0)) return ft_config_error(c, "layer_norm_eps must be positive");
    w->eps = (float)eps;
    return FT_OK;
}

static ft_status load_weights(ft_model *m, wavlm *w, ft_config *cfg) {
    int64_t D = w->d, I = w->inter, H = w->heads, dh = D / H;
    const char *fe = "feature_extractor.conv_layers";
    for (int i = 0; i < w->n_conv; i++) {
        wavlm_conv *cv = &w->conv[i];
        int64_t cin = i ? w->conv_dim[i - 1] : 1, cout = w->conv_dim[i];
        cv->w = ft_weight(m, FT_W_SHAPE(cout, cin, w->conv_kernel[i]), "%s.%d.conv.weight", fe, i);
        if (w->conv_bias) cv->b = ft_weight(m, FT_W_SHAPE(cout), "%s.%d.conv.bias", fe, i);
        if (w->feat_norm == FEAT_NORM_LAYER || i == 0) {
            cv->norm_w = ft_weight(m, FT_W_SHAPE(cout), "%s.%d.layer_norm.weight", fe, i);
            cv->norm_b = ft_weight(m, FT_W_SHAPE(cout), "%s.%d.layer_norm.bias", fe, i);
        }
    }
    int64_t C = w->conv_dim[w->n_conv - 1];
    w->proj_ln_w = ft_weight(m, FT_W_SHAPE(C), "feature_projection.layer_norm.weight");
    w->proj_ln_b = ft_weight(m, FT_W_SHAPE(C), "feature_projection.layer_norm.bias");
    w->proj_w = ft_weight(m, FT_W_SHAPE(D, C), "feature_projection.projection.weight");
    w->proj_b = ft_weight(m, FT_W_SHAPE(D), "feature_projection.projection.bias");
    /* HF creates masked_spec_embed when SpecAugment can run; checkpoints may omit it */
    double mtp = 0.05, mfp = 0.0;
    ft_status st;
    if ((st = ft_config_float(cfg, "mask_time_prob", 0.05, &mtp)) ||
        (st = ft_config_float(cfg, "mask_feature_prob", 0.0, &mfp)))
        return st;
    if (m->st ? ft_weight_exists(m, "masked_spec_embed") : (mtp > 0 || mfp > 0))
        w->masked_spec_embed = ft_weight(m, FT_W_SHAPE(D), "masked_spec_embed");
    const char *pc = "encoder.pos_conv_embed.conv";
    w->pos_g = ft_weight(m, FT_W_SHAPE(1, 1, w->pos_k), "%s.weight_g", pc);
    w->pos_v = ft_weight(m, FT_W_SHAPE(D, D / w->pos_groups, w->pos_k), "%s.weight_v", pc);
    w->pos_b = ft_weight(m, FT_W_SHAPE(D), "%s.bias", pc);
    w->enc_ln_w = ft_weight(m, FT_W_SHAPE(D), "encoder.layer_norm.weight");
    w->enc_ln_b = ft_weight(m, FT_W_SHAPE(D), "encoder.layer_norm.bias");
    for (int i = 0; i < (int)w->layers; i++) {
        wavlm_layer *l = &w->layer[i];
        const char *p = "encoder.layers";
        l->wq = ft_weight(m, FT_W_SHAPE(D, D), "%s.%d.attention.q_proj.weight", p, i);
        l->bq = ft_weight(m, FT_W_SHAPE(D), "%s.%d.attention.q_proj.bias", p, i);
        l->wk = ft_weight(m, FT_W_SHAPE(D, D), "%s.%d.attention.k_proj.weight", p, i);
        l->bk = ft_weight(m, FT_W_SHAPE(D), "%s.%d.attention.k_proj.bias", p, i);
        l->wv = ft_weight(m, FT_W_SHAPE(D, D), "%s.%d.attention.v_proj.weight", p, i);
        l->bv = ft_weight(m, FT_W_SHAPE(D), "%s.%d.attention.v_proj.bias", p, i);
        ft_weights_pack(m, (ft_tensor *[]){l->wq, l->wk, l->wv}, 3);
        ft_weights_pack(m, (ft_tensor *[]){l->bq, l->bk, l->bv}, 3);
        l->wo = ft_weight(m, FT_W_SHAPE(D, D), "%s.%d.attention.out_proj.weight", p, i);
        l->bo = ft_weight(m, FT_W_SHAPE(D), "%s.%d.attention.out_proj.bias", p, i);
        l->gru_const = ft_weight(m, FT_W_SHAPE(1, H, 1, 1), "%s.%d.attention.gru_rel_pos_const", p, i);
        l->gru_w = ft_weight(m, FT_W_SHAPE(8, dh), "%s.%d.attention.gru_rel_pos_linear.weight", p, i);
        l->gru_b = ft_weight(m, FT_W_SHAPE(8), "%s.%d.attention.gru_rel_pos_linear.bias", p, i);
        if (i == 0)
            l->rel_embed = ft_weight(m, FT_W_SHAPE(w->num_buckets, H), "%s.0.attention.rel_attn_embed.weight", p);
        l->ln1_w = ft_weight(m, FT_W_SHAPE(D), "%s.%d.layer_norm.weight", p, i);
        l->ln1_b = ft_weight(m, FT_W_SHAPE(D), "%s.%d.layer_norm.bias", p, i);
        l->wi = ft_weight(m, FT_W_SHAPE(I, D), "%s.%d.feed_forward.intermediate_dense.weight", p, i);
        l->bi = ft_weight(m, FT_W_SHAPE(I), "%s.%d.feed_forward.intermediate_dense.bias", p, i);
        l->wo2 = ft_weight(m, FT_W_SHAPE(D, I), "%s.%d.feed_forward.output_dense.weight", p, i);
        l->bo2 = ft_weight(m, FT_W_SHAPE(D), "%s.%d.feed_forward.output_dense.bias", p, i);
        l->ln2_w = ft_weight(m, FT_W_SHAPE(D), "%s.%d.final_layer_norm.weight", p, i);
        l->ln2_b = ft_weight(m, FT_W_SHAPE(D), "%s.%d.final_layer_norm.bias", p, i);
        if (m->ctx->status != FT_OK) return m->ctx->status;
    }
    return m->ctx->status;
}

static ft_status wavlm_load(ft_model *m, ft_config *cfg) {
    wavlm *w = (wavlm *)calloc(1, sizeof *w);
    if (!w) return ft_set_error(m->ctx, FT_ERR_OOM, "out of host memory");
    m->priv = w;
    snprintf(m->arch_name, sizeof m->arch_name, "WavLMModel");
    ft_status st = read_config(w, cfg);
    if (st) return st;
    w->layer = (wavlm_layer *)calloc((size_t)(w->layers ? w->layers : 1), sizeof *w->layer);
    if (!w->layer) return ft_set_error(m->ctx, FT_ERR_OOM, "out of host memory");
    return load_weights(m, w, cfg);
}

static void wavlm_destroy(ft_model *m) {
    wavlm *w = (wavlm *)m->priv;
    if (w) free(w->layer);
    free(w);
    m->priv = NULL;
}

/* Frames the feature encoder makes from n samples (HF's floor formula; <= 0: none). */
static int64_t frames_of(const wavlm *w, int64_t n) {
    for (int i = 0; i < w->n_conv; i++) {
        if (n < w->conv_kernel[i]) return 0;
        n = (n - w->conv_kernel[i]) / w->conv_stride[i] + 1;
    }
    return n;
}

/* Samples needed to produce frame t (0-based): the inverse of frames_of on integers. */
static int64_t samples_needed(const wavlm *w, int64_t t) {
    int64_t n = t + 1;
    for (int i = w->n_conv - 1; i >= 0; i--) n = (n - 1) * w->conv_stride[i] + w->conv_kernel[i];
    return n;
}

static ft_status wavlm_validate(ft_model *m) {
    const wavlm *w = (const wavlm *)m->priv;
    const ft_host_tensor *x = ft_model_host_input(m, "input_values");
    if (!x) return ft_set_error(m->ctx, FT_ERR_INVALID_ARG, "WavLMModel needs input 'input_values'");
    if (!ft_dtype_is_float(x->dtype))
        return ft_set_error(m->ctx, FT_ERR_INVALID_ARG, "input 'input_values' must be a float tensor, got %s",
                            ft_dtype_name(x->dtype));
    if (x->ndim != 2)
        return ft_set_error(m->ctx, FT_ERR_SHAPE, "input 'input_values' must be [batch, samples], got rank %d",
                            x->ndim);
    int64_t min_len = samples_needed(w, 0);
    if (x->shape[1] < min_len)
        return ft_set_error(m->ctx, FT_ERR_SHAPE,
                            "input 'input_values' has %lld samples, fewer than the %lld the feature "
                            "encoder needs for one frame", (long long)x->shape[1], (long long)min_len);
    const ft_host_tensor *mk = ft_model_host_input(m, "attention_mask");
    if (!mk) return FT_OK;
    if (mk->ndim != 2 || mk->shape[0] != x->shape[0] || mk->shape[1] != x->shape[1])
        return ft_set_error(m->ctx, FT_ERR_SHAPE, "input 'attention_mask' must have the shape of "
                            "input_values [%lld, %lld]", (long long)x->shape[0], (long long)x->shape[1]);
    for (int64_t b = 0; b < mk->shape[0]; b++) {
        int64_t ones = 0;
        for (int64_t t = 0; t < mk->shape[1]; t++) {
            int64_t i = b * mk->shape[1] + t;
            double v = ft_host_value_at(mk, i);
            /* a sample mask only says which samples are audio: HF sums it into frame
             * counts, where a 2 or a 0.5 has no meaning, so anything else is refused */
            if (v != 0 && v != 1)
                return ft_set_error(m->ctx, FT_ERR_INVALID_ARG,
                                    "input 'attention_mask' holds %g at [%lld, %lld]; an audio mask holds 0 "
                                    "(padding) or 1 (a sample), nothing else", v, (long long)b, (long long)t);
            ones += v == 1;
        }
        if (frames_of(w, ones) < 1)
            return ft_set_error(m->ctx, FT_ERR_INVALID_ARG,
                                "input 'attention_mask' row %lld keeps %lld samples, fewer than the %lld "
                                "needed for one frame", (long long)b, (long long)ones, (long long)min_len);
    }
    return FT_OK;
}

/* ---- forward ---- */

/* Conv feature encoder: [B, T] -> [B, C, T'] */
static ft_tensor *feature_encoder(ft_ctx *ctx, const wavlm *w, ft_tensor *input) {
    ft_tensor *h = ft_unsqueeze(ctx, input, 1); /* [B, 1, T] */
    for (int i = 0; i < w->n_conv; i++) {
        const wavlm_conv *cv = &w->conv[i];
        ft_tensor *y = ft_conv1d(ctx, h, cv->w, cv->b, (int)w->conv_stride[i], 0, 1); /* [B, C, L] */
        if (i) ft_tensor_release(ctx, h);
        if (cv->norm_w && w->feat_norm == FEAT_NORM_GROUP) {
            /* one group per channel: each channel normalised over time */
            ft_tensor *n = ft_groupnorm(ctx, y, (int)w->conv_dim[i], cv->norm_w, cv->norm_b, 1e-5f);
            ft_tensor_release(ctx, y);
            y = n;
        } else if (cv->norm_w) {
            /* LayerNorm over channels (nn.LayerNorm default eps, not layer_norm_eps) */
            ft_tensor *n = ft_layernorm(ctx, ft_transpose(ctx, y, 1, 2), cv->norm_w, cv->norm_b, 1e-5f);
            ft_tensor_release(ctx, y);
            y = ft_contiguous(ctx, ft_transpose(ctx, n, 1, 2));
            ft_tensor_release(ctx, n);
        }
        h = ft_model_act(ctx, w->feat_act, y);
        ft_tensor_release(ctx, y);
    }
    return h;
}

/* Bucket of relative offset r = key - query, in float32 exactly as HF computes it.
 * Not static: tests/test_resnet_wavlm.c checks it against the spec's examples. */
int64_t ft_wavlm_rel_bucket(int64_t r, int64_t num_buckets, int64_t max_distance);
int64_t ft_wavlm_rel_bucket(int64_t r, int64_t num_buckets, int64_t max_distance) {
    int64_t half = num_buckets / 2, max_exact = half / 2;
    int64_t bucket = r > 0 ? half : 0;
    int64_t a = r < 0 ? -r : r;
    if (a < max_exact) return bucket + a;
    float v = logf((float)a / (float)max_exact);
    v = v / (float)log((double)max_distance / (double)max_exact);
    v = v * (float)(half - max_exact);
    int64_t large = (int64_t)((float)max_exact + v);
    if (large > half - 1) large = half - 1;
    return bucket + large;
}

/* Ungated relative position bias [H, T, T] from layer 0's embedding. */
static ft_tensor *position_bias(ft_ctx *ctx, const wavlm *w, int64_t T) {
    int64_t *idx = (int64_t *)malloc((size_t)(T * T) * sizeof *idx);
    if (!idx) {
        ft_set_error(ctx, FT_ERR_OOM, "out of host memory for the %lldx%lld bucket table", (long long)T,
                     (long long)T);
        return NULL;
    }
    for (int64_t i = 0; i < T; i++)
        for (int64_t j = 0; j < T; j++) idx[i * T + j] = ft_wavlm_rel_bucket(j - i, w->num_buckets, w->max_distance);
    ft_tensor *ids = ft_tensor_from_host(ctx, FT_DTYPE_I64, 2, FT_SHAPE(T, T), idx); /* [T, T] */
    free(idx);
    ft_tensor *e = ft_embedding(ctx, w->layer[0].rel_embed, ids);             /* [T, T, H] */
    return ft_contiguous(ctx, ft_permute(ctx, e, (const int[]){2, 0, 1}));    /* [H, T, T] */
}

/* Frame validity [B, T'] (1 valid, 0 padded) from the sample mask, in f32. */
static ft_tensor *frame_mask(ft_ctx *ctx, const wavlm *w, ft_tensor *mask, int64_t frames) {
    float *need = (float *)malloc((size_t)frames * sizeof *need);
    if (!need) {
        ft_set_error(ctx, FT_ERR_OOM, "out of host memory");
        return NULL;
    }
    for (int64_t t = 0; t < frames; t++) need[t] = (float)samples_needed(w, t);
    ft_tensor *need_t = ft_tensor_from_host(ctx, FT_DTYPE_F32, 2, FT_SHAPE(1, frames), need); /* [1, T'] */
    free(need);
    ft_tensor *len = ft_sum_last(ctx, ft_cast(ctx, mask, FT_DTYPE_F32)); /* [B, 1] */
    ft_tensor *d = ft_sub(ctx, len, need_t);                            /* [B, T'] */
    return ft_sub(ctx, ft_relu(ctx, ft_scale(ctx, d, 1.0f, 1.0f)), ft_relu(ctx, d));
}

/* Self-attention with the gated relative bias; x [B, T, D] is the attention input. */
static ft_tensor *attention(ft_ctx *ctx, const wavlm *w, const wavlm_layer *l, ft_tensor *x,
                            ft_tensor *bias0, ft_tensor *key_mask) {
    int64_t B = ft_tensor_dim(x, 0), T = ft_tensor_dim(x, 1), H = w->heads, dh = w->d / H;
    /* gate from the layer input per head: sigmoid of two sums of 4 projections */
    ft_tensor *xh = ft_reshape(ctx, x, 4, FT_SHAPE(B, T, H, dh));
    ft_tensor *z = ft_linear(ctx, xh, l->gru_w, l->gru_b);                 /* [B, T, H, 8] */
    ft_tensor *zs = ft_sum_last(ctx, ft_reshape(ctx, z, 5, FT_SHAPE(B, T, H, 2, 4))); /* [B, T, H, 2, 1] */
    ft_tensor *sg = ft_sigmoid(ctx, zs);
    ft_tensor *ga = ft_select(ctx, sg, 3, 0), *gb = ft_select(ctx, sg, 3, 1); /* [B, T, H, 1] */
    ft_tensor *c = ft_reshape(ctx, l->gru_const, 2, FT_SHAPE(H, 1));
    ft_tensor *gate = ft_scale(ctx, ft_mul(ctx, ga, ft_scale(ctx, ft_mul(ctx, gb, c), 1.0f, -1.0f)), 1.0f, 2.0f);
    gate = ft_permute(ctx, gate, (const int[]){0, 2, 1, 3});             /* [B, H, T, 1] */
    ft_tensor *bias = ft_mul(ctx, gate, bias0);                          /* [B, H, T, T] */

    ft_tensor *q = ft_split_heads(ctx, ft_linear(ctx, x, l->wq, l->bq), H);
    ft_tensor *k = ft_split_heads(ctx, ft_linear(ctx, x, l->wk, l->bk), H);
    ft_tensor *v = ft_split_heads(ctx, ft_linear(ctx, x, l->wv, l->bv), H);
    ft_tensor *scores = ft_matmul(ctx, q, ft_transpose(ctx, k, -1, -2), 1.0f / sqrtf((float)dh));
    ft_tensor *biased = ft_add(ctx, scores, bias); /* the bias is not scaled */
    ft_tensor_release(ctx, scores);
    ft_tensor_release(ctx, bias);
    ft_tensor *probs = ft_softmax(ctx, biased, key_mask, 1.0f);
    ft_tensor_release(ctx, biased);
    ft_tensor *ctxv = ft_matmul(ctx, probs, v, 1.0f); /* [B, H, T, Dh] */
    ft_tensor_release(ctx, probs);
    ctxv = ft_reshape(ctx, ft_permute(ctx, ctxv, (const int[]){0, 2, 1, 3}), 3, FT_SHAPE(B, T, w->d));
    return ft_linear(ctx, ctxv, l->wo, l->bo);
}

static ft_tensor *feed_forward(ft_ctx *ctx, const wavlm *w, const wavlm_layer *l, ft_tensor *x) {
    ft_tensor *f = ft_linear(ctx, x, l->wi, l->bi); /* [B, T, I] */
    ft_tensor *fa = ft_model_act(ctx, w->act, f);
    ft_tensor_release(ctx, f);
    ft_tensor *o = ft_linear(ctx, fa, l->wo2, l->bo2);
    ft_tensor_release(ctx, fa);
    return o;
}

static ft_tensor *encoder_layer(ft_ctx *ctx, const wavlm *w, const wavlm_layer *l, ft_tensor *x,
                                ft_tensor *bias0, ft_tensor *key_mask) {
    if (w->stable) { /* pre-LN: x + attn(LN(x)); x + FFN(LN(x)) */
        ft_tensor *n1 = ft_layernorm(ctx, x, l->ln1_w, l->ln1_b, w->eps);
        ft_tensor *a = ft_add(ctx, x, attention(ctx, w, l, n1, bias0, key_mask));
        ft_tensor_release(ctx, n1);
        ft_tensor *n2 = ft_layernorm(ctx, a, l->ln2_w, l->ln2_b, w->eps);
        ft_tensor *y = ft_add(ctx, a, feed_forward(ctx, w, l, n2));
        ft_tensor_release(ctx, n2);
        ft_tensor_release(ctx, a);
        return y;
    }
    /* post-LN: LN(x + attn(x)); LN(a + FFN(a)) */
    ft_tensor *a = ft_layernorm(ctx, ft_add(ctx, x, attention(ctx, w, l, x, bias0, key_mask)), l->ln1_w,
                                l->ln1_b, w->eps);
    ft_tensor *y = ft_layernorm(ctx, ft_add(ctx, a, feed_forward(ctx, w, l, a)), l->ln2_w, l->ln2_b, w->eps);
    ft_tensor_release(ctx, a);
    return y;
}

/* Positional conv embedding of x [B, T, D]: weight-normed grouped conv, last frame
 * dropped when the kernel is even, activation; returned as [B, T, D]. */
static ft_tensor *pos_conv(ft_ctx *ctx, const wavlm *w, ft_tensor *x) {
    int64_t T = ft_tensor_dim(x, 1);
    ft_tensor *wt = ft_weight_norm(ctx, w->pos_g, w->pos_v, 2); /* [D, D/G, K] */
    ft_tensor *y = ft_conv1d(ctx, ft_transpose(ctx, x, 1, 2), wt, w->pos_b, 1, (int)(w->pos_k / 2),
                             (int)w->pos_groups); /* [B, D, T (+1)] */
    ft_tensor_release(ctx, wt);
    ft_tensor *a = ft_model_act(ctx, w->feat_act, ft_slice(ctx, y, 2, 0, T));
    ft_tensor_release(ctx, y);
    return ft_transpose(ctx, a, 1, 2);
}

static ft_status wavlm_forward(ft_model *m, ft_ctx *ctx) {
    const wavlm *w = (const wavlm *)m->priv;
    ft_tensor *input = ft_model_input(m, "input_values"); /* [B, T] */
    ft_tensor *mask = ft_model_input(m, "attention_mask");
    ft_tensor *feat = feature_encoder(ctx, w, input);    /* [B, C, T'] */
    if (!feat) return ctx->status;
    int64_t frames = ft_tensor_dim(feat, 2);
    ft_tensor *ef = ft_layernorm(ctx, ft_transpose(ctx, feat, 1, 2), w->proj_ln_w, w->proj_ln_b,
                                 w->eps);                /* [B, T', C] */
    ft_tensor_release(ctx, feat);
    ft_model_add_output(m, "extract_features", ef);
    ft_tensor *x = ft_linear(ctx, ef, w->proj_w, w->proj_b); /* [B, T', D] */

    ft_tensor *key_mask = NULL;
    if (mask) {
        ft_tensor *valid = frame_mask(ctx, w, mask, frames); /* [B, T'] f32 */
        if (!valid) return ctx->status;
        ft_tensor *keep = ft_cast(ctx, ft_unsqueeze(ctx, valid, 2), m->dtype); /* [B, T', 1] */
        x = ft_mul(ctx, x, keep); /* padded frames are zero before the positional conv */
        /* (1 - valid) * finfo(float32).min, [B, 1, 1, T']: finite, so a row with one
         * valid key (validate() guarantees it) never turns into NaN */
        key_mask = ft_additive_mask(ctx, valid, FT_F32_MIN);
    }
    ft_tensor *pos = pos_conv(ctx, w, x);
    ft_tensor *h = ft_add(ctx, x, pos);
    ft_tensor_release(ctx, pos);
    ft_tensor_release(ctx, x);
    if (!w->stable) {
        ft_tensor *n = ft_layernorm(ctx, h, w->enc_ln_w, w->enc_ln_b, w->eps);
        ft_tensor_release(ctx, h);
        h = n;
    }
    ft_tensor *bias0 = w->layers > 0 ? position_bias(ctx, w, frames) : NULL; /* [H, T', T'] */
    bool hs = ft_model_want_hidden_states(m);
    char name[48];
    for (int64_t i = 0; i < w->layers; i++) {
        if (hs) {
            snprintf(name, sizeof name, "hidden_states.%lld", (long long)i);
            ft_model_add_output(m, name, h);
        }
        ft_tensor *next = encoder_layer(ctx, w, &w->layer[i], h, bias0, key_mask);
        if (!hs) ft_tensor_release(ctx, h);
        h = next;
    }
    if (w->stable) {
        ft_tensor *n = ft_layernorm(ctx, h, w->enc_ln_w, w->enc_ln_b, w->eps);
        if (!hs) ft_tensor_release(ctx, h);
        h = n;
    }
    if (hs) {
        snprintf(name, sizeof name, "hidden_states.%lld", (long long)w->layers);
        ft_model_add_output(m, name, h);
    }
    ft_model_add_output(m, "last_hidden_state", h);
    return ctx->status;
}

/* Uniform [0, 1) audio, as the paper fed torch.rand; 2 s at 16 kHz by default. */
static ft_status wavlm_example_inputs(ft_model *m, int64_t batch, int64_t length, ft_host_tensor *in,
                                      int *n_in, void **owned) {
    const wavlm *w = (const wavlm *)m->priv;
    if (length <= 0) length = 32000;
    if (batch < 1) return ft_set_error(m->ctx, FT_ERR_INVALID_ARG, "batch must be positive");
    if (frames_of(w, length) < 1)
        return ft_set_error(m->ctx, FT_ERR_INVALID_ARG, "%lld samples are fewer than the %lld needed for one "
                            "frame", (long long)length, (long long)samples_needed(w, 0));
    int64_t n;
    size_t bytes;
    if (!ft_mul_ok(batch, length, &n) || !ft_bytes_ok(n, sizeof(float), &bytes))
        return ft_set_error(m->ctx, FT_ERR_SHAPE, "batch %lld x %lld samples is too large", (long long)batch,
                            (long long)length);
    float *x = m->example_shapes_only ? NULL : (float *)malloc(bytes); /* shapes only: no data */
    if (!x && !m->example_shapes_only)
        return ft_set_error(m->ctx, FT_ERR_OOM, "out of host memory for batch %lld x %lld example samples (%.3g GiB)",
                            (long long)batch, (long long)length, (double)bytes / 1073741824.0);
    uint32_t s = 777u;
    for (int64_t i = 0; x && i < n; i++) {
        s = s * 1664525u + 1013904223u;
        x[i] = (float)(s >> 8) * (1.0f / 16777216.0f);
    }
    *owned = x;
    memset(in, 0, sizeof *in);
    in[0].name = "input_values";
    in[0].dtype = FT_DTYPE_F32;
    in[0].ndim = 2;
    in[0].shape[0] = batch;
    in[0].shape[1] = length;
    in[0].data = x;
    *n_in = 1;
    return FT_OK;
}

static const char *const wavlm_prefixes[] = {"wavlm.", NULL};
static const char *const wavlm_inputs[] = {"input_values", "attention_mask", NULL};

static const ft_preset wavlm_presets[] = {
    {"wavlm-base", "{\"model_type\": \"wavlm\"}"},
    {"wavlm-large", "{\"model_type\": \"wavlm\", \"hidden_size\": 1024, \"num_hidden_layers\": 24,"
                    " \"num_attention_heads\": 16, \"intermediate_size\": 4096,"
                    " \"feat_extract_norm\": \"layer\", \"do_stable_layer_norm\": true, \"conv_bias\": true}"},
    {NULL, NULL},
};

const ft_arch ft_arch_wavlm = {
    .model_type = "wavlm",
    .prefixes = wavlm_prefixes,
    .inputs = wavlm_inputs,
    .load = wavlm_load,
    .validate = wavlm_validate,
    .forward = wavlm_forward,
    .destroy = wavlm_destroy,
    .example_inputs = wavlm_example_inputs,
    .presets = wavlm_presets,
};
