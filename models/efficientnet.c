/*
 * efficientnet.c - EfficientNetModel as Hugging Face transformers 4.36.2
 * defines it (tests/golden/README-zoo.md, EfficientNetModel): a 3x3/2 stem
 * (zero padding right and bottom only), MBConv blocks (1x1 expansion unless the
 * ratio is 1, depthwise KxK, squeeze-excitation, 1x1 projection, a residual in
 * every repeat but a stage's first), a 1x1 head, and the spatial mean (or max)
 * as a [B, hidden_dim] pooler output. BatchNorm eps is batch_norm_eps; every
 * activation is hidden_act ("swish" = SiLU) except the sigmoid gate.
 *
 * Scaling as HF: round_filters(c) = max(d, int(c w + d/2) // d * d) (+ d when that
 * is below 0.9 c w) for the width coefficient w and depth_divisor d;
 * round_repeats(n) = ceil(depth_coefficient n). Blocks are numbered globally;
 * depthwise_padding lists the stride-2 blocks that pad k/2 on every side instead
 * of HF's (k/2 - 1, k/2) emulation of TensorFlow's padding; stride-1 depthwise
 * convolutions pad "same". The squeeze width is max(1, int(block_in * ratio)),
 * from the block's input width.
 *
 * Eager mode runs squeeze-excitation as HF's six ops (pool, conv, act, conv,
 * sigmoid, mul); graph mode makes them one op (graph/pass_vision.c).
 */
#include "vision_common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EFF_MAX_STAGES 16
#define EFF_MAX_DWPAD 256

typedef struct eff_block {
    int64_t cin, cout, e, r;   /* input, expanded, output and squeeze widths */
    int k, stride;
    bool expand, residual;
    int pad[4];                /* depthwise padding (top, bottom, left, right) */
    ft_vconv expansion, dw, project;
    ft_tensor *se_w1, *se_b1, *se_w2, *se_b2; /* [R, E, 1, 1], [R], [E, R, 1, 1], [E] */
} eff_block;

typedef struct effnet {
    int64_t channels, image_size, divisor, hidden_dim;
    double width, depth, se_ratio;
    int n_stages;
    int64_t kernel[EFF_MAX_STAGES], cin[EFF_MAX_STAGES], cout[EFF_MAX_STAGES], stride[EFF_MAX_STAGES],
        repeats[EFF_MAX_STAGES], expand[EFF_MAX_STAGES];
    int64_t dwpad[EFF_MAX_DWPAD];
    int n_dwpad;
    bool max_pool;
    float eps;
    ft_act_kind act;
    int64_t stem_width, top_width;
    ft_vconv stem, top;
    eff_block *blocks;
    int n_blocks;
} effnet;

static int64_t round_filters(const effnet *r, int64_t c) {
    double nc = (double)c * r->width;
    int64_t d = r->divisor, v = (int64_t)(nc + (double)d / 2.0) / d * d;
    if (v < d) v = d;
    if ((double)v < 0.9 * nc) v += d;
    return v;
}

static int64_t round_repeats(const effnet *r, int64_t n) { return (int64_t)ceil(r->depth * (double)n); }

static ft_status read_arrays(effnet *r, ft_config *c) {
    static const int64_t def_k[7] = {3, 3, 5, 3, 5, 5, 3}, def_in[7] = {32, 16, 24, 40, 80, 112, 192},
                         def_out[7] = {16, 24, 40, 80, 112, 192, 320}, def_s[7] = {1, 2, 2, 2, 1, 2, 1},
                         def_rep[7] = {1, 2, 2, 3, 3, 4, 1}, def_e[7] = {1, 6, 6, 6, 6, 6, 6};
    struct {
        const char *key;
        const int64_t *def;
        int64_t *out;
    } arr[] = {{"kernel_sizes", def_k, r->kernel}, {"in_channels", def_in, r->cin}, {"out_channels", def_out, r->cout},
               {"strides", def_s, r->stride},      {"num_block_repeats", def_rep, r->repeats},
               {"expand_ratios", def_e, r->expand}};
    int n[6];
    ft_status st;
    for (int i = 0; i < 6; i++)
        if ((st = ft_config_int_array(c, arr[i].key, arr[i].def, 7, arr[i].out, EFF_MAX_STAGES, &n[i]))) return st;
    if ((st = ft_config_int_array(c, "depthwise_padding", NULL, 0, r->dwpad, EFF_MAX_DWPAD, &r->n_dwpad))) return st;
    r->n_stages = n[1];
    if (r->n_stages < 1) return ft_config_error(c, "in_channels is empty: no stage to build");
    for (int i = 0; i < 6; i++)
        if (n[i] < r->n_stages)
            return ft_config_error(c, "%s has %d values, but in_channels has %d (one per stage)", arr[i].key, n[i],
                                   r->n_stages);
    for (int s = 0; s < r->n_stages; s++) {
        if (r->kernel[s] < 1 || r->kernel[s] > 15)
            return ft_config_error(c, "kernel_sizes[%d] is %lld (1 to 15 supported)", s, (long long)r->kernel[s]);
        if (r->stride[s] != 1 && r->stride[s] != 2)
            return ft_config_error(c, "strides[%d] is %lld: HF builds stride 1 ('same') or 2 only", s,
                                   (long long)r->stride[s]);
        if (r->stride[s] == 2 && r->kernel[s] < 2)
            return ft_config_error(c, "kernel_sizes[%d] is 1 with stride 2: HF's padding would crop", s);
        if (r->cin[s] < 1 || r->cout[s] < 1 || r->repeats[s] < 0 || r->expand[s] < 1)
            return ft_config_error(c, "stage %d: in_channels %lld, out_channels %lld, num_block_repeats %lld, "
                                      "expand_ratios %lld (positive widths and ratio needed)",
                                   s, (long long)r->cin[s], (long long)r->cout[s], (long long)r->repeats[s],
                                   (long long)r->expand[s]);
    }
    return FT_OK;
}

static ft_status read_config(effnet *r, ft_config *c) {
    const char *pool = NULL;
    double eps = 1e-3;
    ft_status st;
    if ((st = ft_config_int(c, "num_channels", 3, &r->channels)) ||
        (st = ft_config_int(c, "image_size", 600, &r->image_size)) ||
        (st = ft_config_float(c, "width_coefficient", 2.0, &r->width)) ||
        (st = ft_config_float(c, "depth_coefficient", 3.1, &r->depth)) ||
        (st = ft_config_int(c, "depth_divisor", 8, &r->divisor)) ||
        (st = ft_config_float(c, "squeeze_expansion_ratio", 0.25, &r->se_ratio)) ||
        (st = ft_model_act_parse(c, "hidden_act", "swish", &r->act)) ||
        (st = ft_config_int(c, "hidden_dim", 2560, &r->hidden_dim)) ||
        (st = ft_config_string(c, "pooling_type", "mean", &pool)) ||
        (st = ft_config_float(c, "batch_norm_eps", 1e-3, &eps)) || (st = read_arrays(r, c)))
        return st;
    if (r->channels < 1) return ft_config_error(c, "num_channels must be positive, got %lld", (long long)r->channels);
    if (r->image_size < 1) return ft_config_error(c, "image_size must be positive, got %lld", (long long)r->image_size);
    if (!(r->width > 0.0) || r->width > 1e3)
        return ft_config_error(c, "width_coefficient must be positive, got %g", r->width);
    if (!(r->depth > 0.0) || r->depth > 1e3)
        return ft_config_error(c, "depth_coefficient must be positive, got %g", r->depth);
    if (r->divisor < 1 || r->divisor > 1 << 16)
        return ft_config_error(c, "depth_divisor must be positive, got %lld", (long long)r->divisor);
    if (!(r->se_ratio >= 0.0) || r->se_ratio > 1e3)
        return ft_config_error(c, "squeeze_expansion_ratio must be non-negative, got %g", r->se_ratio);
    if (!(eps > 0.0)) return ft_config_error(c, "batch_norm_eps must be positive, got %g", eps);
    if (!strcmp(pool, "max")) r->max_pool = true;
    else if (strcmp(pool, "mean"))
        return ft_config_error(c, "pooling_type '%s' is not supported (mean, max)", pool);
    r->eps = (float)eps;
    r->stem_width = round_filters(r, 32);
    r->top_width = round_filters(r, 1280);
    /* HF's top_conv has round_filters(1280) outputs and top_bn hidden_dim channels */
    if (r->hidden_dim != r->top_width)
        return ft_config_error(c, "hidden_dim is %lld, but it must equal round_filters(1280) = %lld (the width of "
                                  "top_conv that top_bn normalises)",
                               (long long)r->hidden_dim, (long long)r->top_width);
    return FT_OK;
}

static bool in_dwpad(const effnet *r, int64_t b) {
    for (int i = 0; i < r->n_dwpad; i++)
        if (r->dwpad[i] == b) return true;
    return false;
}

static ft_status build_blocks(ft_model *m, effnet *r) {
    int64_t total = 0;
    for (int s = 0; s < r->n_stages; s++) total += round_repeats(r, r->repeats[s]);
    if (total < 1 || total > 4096)
        return ft_set_error(m->ctx, FT_ERR_FORMAT, "%s: the config gives %lld blocks (1 to 4096 supported)",
                            m->source, (long long)total);
    r->blocks = (eff_block *)calloc((size_t)total, sizeof *r->blocks);
    if (!r->blocks) return ft_set_error(m->ctx, FT_ERR_OOM, "out of host memory");
    int b = 0;
    for (int s = 0; s < r->n_stages; s++) {
        int64_t in = round_filters(r, r->cin[s]), out = round_filters(r, r->cout[s]);
        for (int64_t j = 0; j < round_repeats(r, r->repeats[s]); j++, b++) {
            eff_block *B = &r->blocks[b];
            B->cin = j > 0 ? out : in;
            B->cout = out;
            B->k = (int)r->kernel[s];
            B->stride = j > 0 ? 1 : (int)r->stride[s];
            B->expand = r->expand[s] != 1;
            B->e = B->cin * r->expand[s];
            int64_t rr = (int64_t)((double)B->cin * r->se_ratio);
            B->r = rr > 1 ? rr : 1;
            B->residual = j > 0;
            int k2 = B->k / 2;
            if (B->stride == 2 && !in_dwpad(r, b)) { /* correct_pad(adjust=True) */
                B->pad[0] = B->pad[2] = k2 - 1;
                B->pad[1] = B->pad[3] = k2;
            } else if (B->stride == 2) {
                B->pad[0] = B->pad[1] = B->pad[2] = B->pad[3] = k2;
            } else { /* PyTorch's padding="same": k - 1 split, the odd one after */
                B->pad[0] = B->pad[2] = (B->k - 1) / 2;
                B->pad[1] = B->pad[3] = B->k - 1 - (B->k - 1) / 2;
            }
        }
    }
    r->n_blocks = b;
    return FT_OK;
}

static ft_status load_weights(ft_model *m, effnet *r) {
    ft_vconv_load(m, &r->stem, "embeddings.convolution", "embeddings.batchnorm", r->stem_width, r->channels, 3, 2, 1,
                  r->eps);
    char p[96], conv[160], bn[160];
    for (int b = 0; b < r->n_blocks; b++) {
        eff_block *B = &r->blocks[b];
        snprintf(p, sizeof p, "encoder.blocks.%d", b);
        if (B->expand) {
            snprintf(conv, sizeof conv, "%s.expansion.expand_conv", p);
            snprintf(bn, sizeof bn, "%s.expansion.expand_bn", p);
            ft_vconv_load(m, &B->expansion, conv, bn, B->e, B->cin, 1, 1, 1, r->eps);
        }
        snprintf(conv, sizeof conv, "%s.depthwise_conv.depthwise_conv", p);
        snprintf(bn, sizeof bn, "%s.depthwise_conv.depthwise_norm", p);
        ft_vconv_load(m, &B->dw, conv, bn, B->e, B->e, B->k, B->stride, (int)B->e, r->eps);
        snprintf(conv, sizeof conv, "%s.squeeze_excite.reduce.weight", p);
        B->se_w1 = ft_vision_conv_weight(m, B->r, B->e, 1, 1, conv);
        B->se_b1 = ft_weight(m, FT_W_SHAPE(B->r), "%s.squeeze_excite.reduce.bias", p);
        snprintf(conv, sizeof conv, "%s.squeeze_excite.expand.weight", p);
        B->se_w2 = ft_vision_conv_weight(m, B->e, B->r, 1, 1, conv);
        B->se_b2 = ft_weight(m, FT_W_SHAPE(B->e), "%s.squeeze_excite.expand.bias", p);
        snprintf(conv, sizeof conv, "%s.projection.project_conv", p);
        snprintf(bn, sizeof bn, "%s.projection.project_bn", p);
        ft_vconv_load(m, &B->project, conv, bn, B->cout, B->e, 1, 1, 1, r->eps);
        if (m->ctx->status != FT_OK) return m->ctx->status;
    }
    int64_t last = r->n_blocks ? r->blocks[r->n_blocks - 1].cout : r->stem_width;
    ft_vconv_load(m, &r->top, "encoder.top_conv", "encoder.top_bn", r->top_width, last, 1, 1, 1, r->eps);
    return m->ctx->status;
}

static ft_status eff_load(ft_model *m, ft_config *cfg) {
    effnet *r = (effnet *)calloc(1, sizeof *r);
    if (!r) return ft_set_error(m->ctx, FT_ERR_OOM, "out of host memory");
    m->priv = r;
    snprintf(m->arch_name, sizeof m->arch_name, "EfficientNetModel");
    ft_status st = read_config(r, cfg);
    if (st || (st = build_blocks(m, r))) return st;
    return load_weights(m, r);
}

static void eff_destroy(ft_model *m) {
    effnet *r = (effnet *)m->priv;
    if (r) free(r->blocks);
    free(r);
    m->priv = NULL;
}

/* The map side after the stem and every block, checked against each kernel (HF would
 * fail inside a convolution) and, at the end, against the pooling window. */
static ft_status eff_validate(ft_model *m) {
    const effnet *r = (const effnet *)m->priv;
    ft_status st = ft_vision_check_pixels(m, "EfficientNetModel", r->channels, 2);
    if (st) return st;
    const ft_host_tensor *px = ft_model_host_input(m, "pixel_values");
    for (int axis = 0; axis < 2; axis++) {
        int64_t n = (px->shape[2 + axis] + 1 - 3) / 2 + 1;
        for (int b = 0; b < r->n_blocks; b++) {
            const eff_block *B = &r->blocks[b];
            int64_t padded = n + B->pad[2 * axis] + B->pad[2 * axis + 1];
            if (padded < B->k)
                return ft_set_error(m->ctx, FT_ERR_SHAPE,
                                    "input 'pixel_values' is %lld x %lld pixels: too small for EfficientNetModel "
                                    "(block %d's %dx%d depthwise convolution sees a map of %lld)",
                                    (long long)px->shape[2], (long long)px->shape[3], b, B->k, B->k, (long long)n);
            n = (padded - B->k) / B->stride + 1;
        }
        if (n > r->hidden_dim)
            return ft_set_error(m->ctx, FT_ERR_SHAPE,
                                "input 'pixel_values' is %lld x %lld pixels: the last map (%lld) is larger than "
                                "the pooling window hidden_dim (%lld), which HF cannot flatten",
                                (long long)px->shape[2], (long long)px->shape[3], (long long)n,
                                (long long)r->hidden_dim);
    }
    return FT_OK;
}

/* HF's squeeze-excitation, op for op: x * sigmoid(expand(act(reduce(mean_hw(x))))) */
static ft_tensor *squeeze_excite(ft_ctx *ctx, const effnet *r, const eff_block *B, ft_tensor *x) {
    ft_tensor *z = ft_global_avgpool(ctx, x);                       /* [B, E, 1, 1] */
    ft_tensor *a = ft_conv2d(ctx, z, B->se_w1, B->se_b1, 1, 0, 1);  /* [B, R, 1, 1] */
    ft_tensor_release(ctx, z);
    ft_tensor *s = ft_model_act(ctx, r->act, a);
    ft_tensor_release(ctx, a);
    ft_tensor *e = ft_conv2d(ctx, s, B->se_w2, B->se_b2, 1, 0, 1);  /* [B, E, 1, 1] */
    ft_tensor_release(ctx, s);
    ft_tensor *g = ft_sigmoid(ctx, e);
    ft_tensor_release(ctx, e);
    ft_tensor *y = ft_mul(ctx, x, g);                               /* [B, E, h, w] */
    ft_tensor_release(ctx, g);
    return y;
}

static ft_tensor *block_fwd(ft_ctx *ctx, const effnet *r, const eff_block *B, ft_tensor *x) {
    static const int no_pad[4] = {0, 0, 0, 0};
    ft_tensor *h = B->expand ? ft_vconv_fwd(ctx, &B->expansion, x, no_pad, r->act) : x;
    ft_tensor *d = ft_vconv_fwd(ctx, &B->dw, h, B->pad, r->act);
    if (h != x) ft_tensor_release(ctx, h);
    ft_tensor *g = squeeze_excite(ctx, r, B, d);
    ft_tensor_release(ctx, d);
    ft_tensor *y = ft_vconv_fwd(ctx, &B->project, g, no_pad, FT_ACTK_LINEAR);
    ft_tensor_release(ctx, g);
    if (!B->residual) return y;
    ft_tensor *sum = ft_add(ctx, y, x);
    ft_tensor_release(ctx, y);
    return sum;
}

static ft_status eff_forward(ft_model *m, ft_ctx *ctx) {
    const effnet *r = (const effnet *)m->priv;
    static const int stem_pad[4] = {0, 1, 0, 1}, no_pad[4] = {0, 0, 0, 0};
    bool hs = ft_model_want_hidden_states(m);
    ft_tensor **states = hs ? (ft_tensor **)calloc((size_t)r->n_blocks + 1, sizeof *states) : NULL;
    if (hs && !states) return ft_set_error(ctx, FT_ERR_OOM, "out of host memory");
    ft_tensor *x = ft_model_input(m, "pixel_values");            /* [B, C, H, W] */
    ft_tensor *h = ft_vconv_fwd(ctx, &r->stem, x, stem_pad, r->act); /* [B, 32w, H/2, W/2] */
    if (hs) states[0] = h;
    for (int b = 0; b < r->n_blocks; b++) {
        ft_tensor *y = block_fwd(ctx, r, &r->blocks[b], h);
        if (!hs) ft_tensor_release(ctx, h);
        h = y;
        if (hs) states[b + 1] = h;
    }
    ft_tensor *last = ft_vconv_fwd(ctx, &r->top, h, no_pad, r->act); /* [B, hidden_dim, h, w] */
    if (!hs) ft_tensor_release(ctx, h);
    ft_model_add_output(m, "last_hidden_state", last);
    ft_tensor *pooled;
    if (r->max_pool) { /* MaxPool2d(hidden_dim, ceil_mode) on a smaller map: the global max */
        int64_t bsz = ft_tensor_dim(last, 0), c = ft_tensor_dim(last, 1);
        int64_t hw = ft_tensor_dim(last, 2) * ft_tensor_dim(last, 3);
        ft_tensor *flat = ft_reshape(ctx, last, 3, FT_SHAPE(bsz, c, hw));
        pooled = ft_pool_dim(ctx, flat, 2, 1, (int)hw, (int)hw); /* [B, C, 1] */
    } else {
        pooled = ft_global_avgpool(ctx, last); /* AvgPool2d(hidden_dim, ceil_mode): the mean */
    }
    ft_model_add_output(m, "pooler_output", ft_vision_flatten_pool(ctx, pooled)); /* [B, hidden_dim] */
    if (hs) ft_vision_add_hidden(m, states, r->n_blocks + 1);
    free(states);
    return ctx->status;
}

static ft_status eff_example_inputs(ft_model *m, int64_t batch, int64_t length, ft_host_tensor *in, int *n_in,
                                    void **owned) {
    const effnet *r = (const effnet *)m->priv;
    /* the default side is the config's image_size (224 for b0, 600 for b7) */
    return ft_vision_example_inputs(m, r->channels, batch, length > 0 ? length : r->image_size, in, n_in, owned);
}

static const char *const eff_prefixes[] = {"efficientnet.", NULL};
static const char *const eff_inputs[] = {"pixel_values", NULL};

/* google/efficientnet-b0 ... b7: CONFIG_MAP of HF's conversion script over the class defaults */
#define EFF_PRESET(name, w, d, res, hid, pad)                                                                   \
    {name, "{\"model_type\": \"efficientnet\", \"width_coefficient\": " w ", \"depth_coefficient\": " d         \
           ", \"image_size\": " res ", \"hidden_dim\": " hid ", \"depthwise_padding\": " pad "}"}
static const ft_preset eff_presets[] = {
    EFF_PRESET("efficientnet-b0", "1.0", "1.0", "224", "1280", "[]"),
    EFF_PRESET("efficientnet-b1", "1.0", "1.1", "240", "1280", "[16]"),
    EFF_PRESET("efficientnet-b2", "1.1", "1.2", "260", "1408", "[5, 8, 16]"),
    EFF_PRESET("efficientnet-b3", "1.2", "1.4", "300", "1536", "[5, 18]"),
    EFF_PRESET("efficientnet-b4", "1.4", "1.8", "380", "1792", "[6]"),
    EFF_PRESET("efficientnet-b5", "1.6", "2.2", "456", "2048", "[13, 27]"),
    EFF_PRESET("efficientnet-b6", "1.8", "2.6", "528", "2304", "[31]"),
    EFF_PRESET("efficientnet-b7", "2.0", "3.1", "600", "2560", "[18]"),
    {NULL, NULL},
};

const ft_arch ft_arch_efficientnet = {
    .model_type = "efficientnet",
    .prefixes = eff_prefixes,
    .inputs = eff_inputs,
    .load = eff_load,
    .validate = eff_validate,
    .forward = eff_forward,
    .destroy = eff_destroy,
    .example_inputs = eff_example_inputs,
    .presets = eff_presets,
};
