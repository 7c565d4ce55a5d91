/*
 * audio_frontend.c - the audio front end shared by WavLM, wav2vec2 and HuBERT
 * (audio_frontend.h): conv feature encoder, feature projection, weight-normed
 * positional conv and the frame mask of an audio attention mask.
 *
 * Everything that depends only on shapes is computed on the host (frames per
 * conv layer, the sample count each frame needs) and uploaded with
 * ft_tensor_from_host, which graph mode records as a constant of the plan for
 * that input shape. Everything that depends on input values (the frame mask
 * derived from an audio attention mask) is computed with ops, so one forward()
 * serves every mode:
 *   frame t of row b is valid  <=>  t < frames(sum(mask[b]))
 *                              <=>  need(t) <= sum(mask[b])
 * where need(t) is the number of samples the conv stack consumes to produce
 * frame t (floor((L - k) / s) + 1 composed, inverted exactly on integers).
 * With d = sum - need(t) (an integer in f32), relu(d + 1) - relu(d) is 1 when
 * d >= 0 and 0 otherwise, which is HF's mask without a comparison op.
 */
#include "audio_frontend.h"
#include "../engine/ft_checked.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

ft_status ft_audio_frontend_config(ft_audio_frontend *a, ft_config *c, int64_t d, float eps) {
    static const int64_t def_dim[7] = {512, 512, 512, 512, 512, 512, 512};
    static const int64_t def_kernel[7] = {10, 3, 3, 3, 3, 2, 2};
    static const int64_t def_stride[7] = {5, 2, 2, 2, 2, 2, 2};
    int nd = 0, nk = 0, ns = 0;
    const char *norm = NULL;
    ft_status st;
    if ((st = ft_config_int_array(c, "conv_dim", def_dim, 7, a->conv_dim, FT_AUDIO_MAX_CONV, &nd)) ||
        (st = ft_config_int_array(c, "conv_kernel", def_kernel, 7, a->conv_kernel, FT_AUDIO_MAX_CONV, &nk)) ||
        (st = ft_config_int_array(c, "conv_stride", def_stride, 7, a->conv_stride, FT_AUDIO_MAX_CONV, &ns)) ||
        (st = ft_config_bool(c, "conv_bias", false, &a->conv_bias)) ||
        (st = ft_config_string(c, "feat_extract_norm", "group", &norm)) ||
        (st = ft_model_act_parse(c, "feat_extract_activation", "gelu", &a->feat_act)) ||
        (st = ft_config_int(c, "num_conv_pos_embeddings", 128, &a->pos_k)) ||
        (st = ft_config_int(c, "num_conv_pos_embedding_groups", 16, &a->pos_groups)))
        return st;
    if (nd != nk || nd != ns || nd < 1)
        return ft_config_error(c, "conv_dim, conv_kernel and conv_stride must have the same non-zero "
                               "length (got %d, %d, %d)", nd, nk, ns);
    a->n_conv = nd;
    for (int i = 0; i < nd; i++)
        if (a->conv_dim[i] < 1 || a->conv_kernel[i] < 1 || a->conv_stride[i] < 1)
            return ft_config_error(c, "feature encoder layer %d (conv_dim, conv_kernel, conv_stride): dim %lld, "
                                   "kernel %lld and stride %lld must be positive", i, (long long)a->conv_dim[i],
                                   (long long)a->conv_kernel[i], (long long)a->conv_stride[i]);
    if (!strcmp(norm, "group")) a->feat_norm = FT_AUDIO_NORM_GROUP;
    else if (!strcmp(norm, "layer")) a->feat_norm = FT_AUDIO_NORM_LAYER;
    else return ft_config_error(c, "feat_extract_norm '%s' is not supported (group, layer)", norm);
    if (a->pos_k < 1)
        return ft_config_error(c, "num_conv_pos_embeddings must be positive, got %lld", (long long)a->pos_k);
    if (a->pos_groups < 1)
        return ft_config_error(c, "num_conv_pos_embedding_groups must be positive, got %lld",
                               (long long)a->pos_groups);
    if (d % a->pos_groups)
        return ft_config_error(c, "hidden_size %lld is not a multiple of num_conv_pos_embedding_groups %lld",
                               (long long)d, (long long)a->pos_groups);
    a->d = d;
    a->eps = eps;
    return FT_OK;
}

ft_status ft_audio_frontend_load(ft_model *m, ft_audio_frontend *a, ft_config *cfg) {
    int64_t D = a->d;
    const char *fe = "feature_extractor.conv_layers";
    for (int i = 0; i < a->n_conv; i++) {
        ft_audio_conv *cv = &a->conv[i];
        int64_t cin = i ? a->conv_dim[i - 1] : 1, cout = a->conv_dim[i];
        cv->w = ft_weight(m, FT_W_SHAPE(cout, cin, a->conv_kernel[i]), "%s.%d.conv.weight", fe, i);
        if (a->conv_bias) cv->b = ft_weight(m, FT_W_SHAPE(cout), "%s.%d.conv.bias", fe, i);
        if (a->feat_norm == FT_AUDIO_NORM_LAYER || i == 0) {
            cv->norm_w = ft_weight(m, FT_W_SHAPE(cout), "%s.%d.layer_norm.weight", fe, i);
            cv->norm_b = ft_weight(m, FT_W_SHAPE(cout), "%s.%d.layer_norm.bias", fe, i);
        }
    }
    int64_t C = a->conv_dim[a->n_conv - 1];
    if (a->proj_ln) {
        a->proj_ln_w = ft_weight(m, FT_W_SHAPE(C), "feature_projection.layer_norm.weight");
        a->proj_ln_b = ft_weight(m, FT_W_SHAPE(C), "feature_projection.layer_norm.bias");
    }
    a->proj_w = ft_weight(m, FT_W_SHAPE(D, C), "feature_projection.projection.weight");
    a->proj_b = ft_weight(m, FT_W_SHAPE(D), "feature_projection.projection.bias");
    /* HF creates masked_spec_embed when SpecAugment can run; checkpoints may omit it */
    double mtp = 0.05, mfp = 0.0;
    ft_status st;
    if ((st = ft_config_float(cfg, "mask_time_prob", 0.05, &mtp)) ||
        (st = ft_config_float(cfg, "mask_feature_prob", 0.0, &mfp)))
        return st;
    if (m->st ? ft_weight_exists(m, "masked_spec_embed") : (mtp > 0 || mfp > 0))
        a->masked_spec_embed = ft_weight(m, FT_W_SHAPE(D), "masked_spec_embed");
    /* weight_g / weight_v, or parametrizations.weight.original0/1 (models/weights.c) */
    const char *pc = "encoder.pos_conv_embed.conv";
    a->pos_g = ft_weight(m, FT_W_SHAPE(1, 1, a->pos_k), "%s.weight_g", pc);
    a->pos_v = ft_weight(m, FT_W_SHAPE(D, D / a->pos_groups, a->pos_k), "%s.weight_v", pc);
    a->pos_b = ft_weight(m, FT_W_SHAPE(D), "%s.bias", pc);
    return m->ctx->status;
}

int64_t ft_audio_frames(const ft_audio_frontend *a, int64_t n) {
    for (int i = 0; i < a->n_conv; i++) {
        if (n < a->conv_kernel[i]) return 0;
        n = (n - a->conv_kernel[i]) / a->conv_stride[i] + 1;
    }
    return n;
}

int64_t ft_audio_samples_needed(const ft_audio_frontend *a, int64_t t) {
    int64_t n = t + 1;
    for (int i = a->n_conv - 1; i >= 0; i--) n = (n - 1) * a->conv_stride[i] + a->conv_kernel[i];
    return n;
}

ft_status ft_audio_validate(ft_model *m, const ft_audio_frontend *a) {
    const ft_host_tensor *x = ft_model_host_input(m, "input_values");
    if (!x) return ft_set_error(m->ctx, FT_ERR_INVALID_ARG, "%s needs input 'input_values'", m->arch_name);
    if (!ft_dtype_is_float(x->dtype))
        return ft_set_error(m->ctx, FT_ERR_INVALID_ARG, "input 'input_values' must be a float tensor, got %s",
                            ft_dtype_name(x->dtype));
    if (x->ndim != 2)
        return ft_set_error(m->ctx, FT_ERR_SHAPE, "input 'input_values' must be [batch, samples], got rank %d",
                            x->ndim);
    int64_t min_len = ft_audio_samples_needed(a, 0);
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
        /* HF's length arithmetic would index frame -1 here: refused rather than guessed */
        if (ft_audio_frames(a, ones) < 1)
            return ft_set_error(m->ctx, FT_ERR_INVALID_ARG,
                                "input 'attention_mask' row %lld keeps %lld samples, fewer than the %lld "
                                "needed for one frame", (long long)b, (long long)ones, (long long)min_len);
    }
    return FT_OK;
}

ft_tensor *ft_audio_features(ft_ctx *ctx, const ft_audio_frontend *a, ft_tensor *input) {
    ft_tensor *h = ft_unsqueeze(ctx, input, 1); /* [B, 1, T] */
    for (int i = 0; i < a->n_conv; i++) {
        const ft_audio_conv *cv = &a->conv[i];
        ft_tensor *y = ft_conv1d(ctx, h, cv->w, cv->b, (int)a->conv_stride[i], 0, 1); /* [B, C, L] */
        if (i) ft_tensor_release(ctx, h);
        if (cv->norm_w && a->feat_norm == FT_AUDIO_NORM_GROUP) {
            /* one group per channel: each channel normalised over time */
            ft_tensor *n = ft_groupnorm(ctx, y, (int)a->conv_dim[i], cv->norm_w, cv->norm_b, 1e-5f);
            ft_tensor_release(ctx, y);
            y = n;
        } else if (cv->norm_w) {
            /* LayerNorm over channels (nn.LayerNorm default eps, not layer_norm_eps) on
             * [B, L, C]. The activation reads it transposed back and writes [B, C, L] itself
             * (no copy for the way back); after the last conv it stays [B, L, C], returned
             * as a [B, C, L] view, which is the layout the feature projection reads. */
            ft_tensor *n = ft_layernorm(ctx, ft_transpose(ctx, y, 1, 2), cv->norm_w, cv->norm_b, 1e-5f);
            ft_tensor_release(ctx, y);
            if (i == a->n_conv - 1) {
                ft_tensor *act = ft_model_act(ctx, a->feat_act, n);
                ft_tensor_release(ctx, n);
                h = ft_transpose(ctx, act, 1, 2);
                ft_tensor_release(ctx, act);
                break;
            }
            y = ft_transpose(ctx, n, 1, 2);
            ft_tensor_release(ctx, n);
        }
        h = ft_model_act(ctx, a->feat_act, y);
        ft_tensor_release(ctx, y);
    }
    return h;
}

ft_tensor *ft_audio_project(ft_ctx *ctx, const ft_audio_frontend *a, ft_tensor *feat, ft_tensor **normed) {
    ft_tensor *ft = ft_transpose(ctx, feat, 1, 2); /* [B, T', C] */
    ft_tensor *ef = a->proj_ln ? ft_layernorm(ctx, ft, a->proj_ln_w, a->proj_ln_b, a->eps) : ft;
    if (normed) *normed = a->proj_ln ? ef : NULL;
    return ft_linear(ctx, ef, a->proj_w, a->proj_b); /* [B, T', D] */
}

/* Frame validity [B, T'] (1 valid, 0 padded) from the sample mask, in f32. */
static ft_tensor *frame_mask(ft_ctx *ctx, const ft_audio_frontend *a, ft_tensor *mask, int64_t frames) {
    float *need = (float *)malloc((size_t)frames * sizeof *need);
    if (!need) {
        ft_set_error(ctx, FT_ERR_OOM, "out of host memory");
        return NULL;
    }
    for (int64_t t = 0; t < frames; t++) need[t] = (float)ft_audio_samples_needed(a, t);
    ft_tensor *need_t = ft_tensor_from_host(ctx, FT_DTYPE_F32, 2, FT_SHAPE(1, frames), need); /* [1, T'] */
    free(need);
    ft_tensor *len = ft_sum_last(ctx, ft_cast(ctx, mask, FT_DTYPE_F32)); /* [B, 1] */
    ft_tensor *d = ft_sub(ctx, len, need_t);                            /* [B, T'] */
    return ft_sub(ctx, ft_relu(ctx, ft_scale(ctx, d, 1.0f, 1.0f)), ft_relu(ctx, d));
}

/* Positional conv embedding of x [B, T, D]: weight-normed grouped conv, activation,
 * last frame dropped when the kernel is even; returned as [B, T, D]. HF drops the
 * frame before the activation; an elementwise activation does not care, and
 * applied to the conv's whole output it is the conv's epilogue in graph mode. */
static ft_tensor *pos_conv(ft_ctx *ctx, const ft_audio_frontend *a, ft_tensor *x) {
    int64_t T = ft_tensor_dim(x, 1);
    ft_tensor *wt = ft_weight_norm(ctx, a->pos_g, a->pos_v, 2); /* [D, D/G, K] */
    ft_tensor *y = ft_conv1d(ctx, ft_transpose(ctx, x, 1, 2), wt, a->pos_b, 1, (int)(a->pos_k / 2),
                             (int)a->pos_groups); /* [B, D, T (+1)] */
    ft_tensor_release(ctx, wt);
    ft_tensor *act = ft_model_act(ctx, a->feat_act, y);
    ft_tensor_release(ctx, y);
    return ft_transpose(ctx, ft_slice(ctx, act, 2, 0, T), 1, 2);
}

ft_tensor *ft_audio_encoder_input(ft_model *m, ft_ctx *ctx, const ft_audio_frontend *a, ft_tensor *x,
                                  ft_tensor *mask, ft_tensor **key_mask) {
    *key_mask = NULL;
    if (!x) return NULL;
    if (mask) {
        ft_tensor *valid = frame_mask(ctx, a, mask, ft_tensor_dim(x, 1)); /* [B, T'] f32 */
        if (!valid) return NULL;
        ft_tensor *keep = ft_cast(ctx, ft_unsqueeze(ctx, valid, 2), m->dtype); /* [B, T', 1] */
        ft_tensor *zeroed = ft_mul(ctx, x, keep); /* padded frames are zero before the positional conv */
        ft_tensor_release(ctx, x);
        x = zeroed;
        /* (1 - valid) * finfo(float32).min, [B, 1, 1, T']: finite, so a row with one
         * valid key (validate() guarantees it) never turns into NaN */
        *key_mask = ft_additive_mask(ctx, valid, FT_F32_MIN);
    }
    ft_tensor *pos = pos_conv(ctx, a, x);
    ft_tensor *h = ft_add(ctx, x, pos);
    ft_tensor_release(ctx, pos);
    ft_tensor_release(ctx, x);
    return h;
}

ft_status ft_audio_example_inputs(ft_model *m, const ft_audio_frontend *a, int64_t batch, int64_t length,
                                  int64_t def_len, ft_host_tensor *in, int *n_in, void **owned) {
    if (length <= 0) length = def_len;
    if (batch < 1) return ft_set_error(m->ctx, FT_ERR_INVALID_ARG, "batch must be positive");
    if (ft_audio_frames(a, length) < 1)
        return ft_set_error(m->ctx, FT_ERR_INVALID_ARG, "%lld samples are fewer than the %lld needed for one "
                            "frame", (long long)length, (long long)ft_audio_samples_needed(a, 0));
    int64_t n;
    size_t bytes;
    if (!ft_mul_ok(batch, length, &n) || !ft_bytes_ok(n, sizeof(float), &bytes))
        return ft_set_error(m->ctx, FT_ERR_SHAPE, "batch %lld x %lld samples is too large", (long long)batch,
                            (long long)length);
    float *x = m->example_shapes_only ? NULL : (float *)malloc(bytes); /* shapes only: no data */
    if (!x && !m->example_shapes_only)
        return ft_set_error(m->ctx, FT_ERR_OOM, "out of host memory for batch %lld x %lld example samples (%.3g GiB)",
                            (long long)batch, (long long)length, (double)bytes / 1073741824.0);
    /* uniform [0, 1) audio, as the paper fed torch.rand */
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
