/*
 * cuda_ops_cases_vision.h - the CUDA-vs-CPU cases of the efficient vision
 * models' ops (ReLU6, SiLU, the direct depthwise convolution, per-side padding
 * of dense convolutions, the channels-first LayerNorm, the squeeze-excitation
 * gate): odd channel counts and sizes, batch 3, both padding styles, dilation,
 * the fused epilogue and input prologue the graph passes set. Included by
 * tests/cuda_ops_cases.h, whose OP_TESTS list names these tables.
 */

/* ---- activations ---- */

static ft_tensor *b_vis_unary(ft_ctx *c, ft_tensor **in, int v) {
    /* x in [-10, 10]: both ends of ReLU6 and the tails of SiLU */
    ft_tensor *x = ft_scale(c, v >= 2 ? tr(c, in[0], 0, 1) : in[0], 2.5f, 0.0f);
    return v % 2 ? ft_silu(c, x) : ft_relu6(c, x);
}
static const op_case cases_vision_unary[] = {
    {"relu6", b_vis_unary, 0, 1, {IW(3, 3, 17, 129)}, 0},
    {"silu", b_vis_unary, 1, 1, {IW(3, 3, 17, 129)}, 0},
    {"relu6 transposed", b_vis_unary, 2, 1, {IW(2, 17, 129)}, 0},
    {"silu transposed", b_vis_unary, 3, 1, {IW(2, 17, 129)}, 0},
};

/* ---- depthwise convolution ---- */

/* per-side padding (top, bottom, left, right), stride, dilation; graph-style epilogue
 * (act, residual) and input prologue (act_in, bin) through the dispatcher */
typedef struct dw_spec {
    int stride, dil, pads[4], act, act_in, bias, res, bin;
} dw_spec;
static const dw_spec dw_specs[] = {
    {1, 1, {1, 1, 1, 1}, FT_ACT_NONE, FT_ACT_NONE, 0, 0, 0}, /* 0: 3x3 "same", no bias */
    {2, 1, {0, 1, 0, 1}, FT_ACT_RELU6, FT_ACT_NONE, 1, 0, 0}, /* 1: TF-SAME stride 2, even input */
    {2, 1, {1, 1, 1, 1}, FT_ACT_SILU, FT_ACT_NONE, 1, 0, 0},  /* 2: TF-SAME stride 2, odd input */
    {2, 1, {1, 2, 1, 2}, FT_ACT_SILU, FT_ACT_NONE, 1, 0, 0},  /* 3: EfficientNet 5x5 stride 2 */
    {1, 1, {3, 3, 3, 3}, FT_ACT_NONE, FT_ACT_NONE, 1, 0, 0},  /* 4: ConvNeXt 7x7 with bias */
    {1, 2, {2, 2, 2, 2}, FT_ACT_RELU6, FT_ACT_NONE, 1, 0, 0}, /* 5: dilation 2 (output_stride) */
    {1, 1, {1, 1, 1, 1}, FT_ACT_RELU6, FT_ACT_NONE, 1, 1, 0}, /* 6: bias + residual + relu6 */
    {1, 1, {1, 1, 1, 1}, FT_ACT_SILU, FT_ACT_RELU6, 1, 0, 1}, /* 7: input prologue relu6(x + bin) */
    {3, 1, {0, 2, 1, 0}, FT_ACT_NONE, FT_ACT_NONE, 1, 0, 0},  /* 8: stride 3, lopsided padding */
};
static ft_tensor *b_dwconv(ft_ctx *c, ft_tensor **in, int v) {
    const dw_spec *d = &dw_specs[v];
    if (!in[0] || !in[1]) return NULL;
    ft_params_conv p;
    memset(&p, 0, sizeof p);
    p.stride = d->stride, p.groups = (int32_t)in[0]->ne[1], p.dilation = d->dil;
    p.asym = 1, p.pad_t = d->pads[0], p.pad_b = d->pads[1], p.pad_l = d->pads[2], p.pad_r = d->pads[3];
    p.act = d->act, p.act_in = d->act_in;
    int k = 2;
    ft_tensor *s[6] = {in[0], in[1], NULL, NULL, NULL, NULL};
    if (d->bias) s[2] = in[k++];
    if (d->res) s[3] = in[k++];
    if (d->bin) s[5] = in[k++];
    return ft_dispatch(c, FT_OP_DWCONV2D, s, 6, &p, sizeof p);
}
/* through the public API: ft_conv2d routes a depthwise convolution to the direct kernel */
static ft_tensor *b_dwconv_api(ft_ctx *c, ft_tensor **in, int v) {
    if (v == 0) return ft_conv2d(c, in[0], in[1], in[2], 2, 1, in[0] ? (int)in[0]->ne[1] : 1);
    ft_conv2d_opts o = {2, in[0] ? (int)in[0]->ne[1] : 1, 1, 1, 2, 0, 1};
    return ft_conv2d_ex(c, tr(c, in[0], 2, 3), in[1], in[2], &o); /* a transposed view: copied first */
}
static const op_case cases_dwconv[] = {
    {"dwconv 3x3 same", b_dwconv, 0, 2, {I(4, 2, 17, 9, 11), I(4, 17, 1, 3, 3)}, 0},
    {"dwconv 3x3/2 tf-same even", b_dwconv, 1, 3, {I(4, 3, 5, 10, 12), I(4, 5, 1, 3, 3), I(1, 5)}, 0},
    {"dwconv 3x3/2 tf-same odd", b_dwconv, 2, 3, {I(4, 1, 7, 9, 13), I(4, 7, 1, 3, 3), I(1, 7)}, 0},
    {"dwconv 5x5/2 efficientnet", b_dwconv, 3, 3, {I(4, 2, 6, 11, 8), I(4, 6, 1, 5, 5), I(1, 6)}, 0},
    {"dwconv 7x7 convnext", b_dwconv, 4, 3, {I(4, 2, 16, 7, 9), I(4, 16, 1, 7, 7), I(1, 16)}, 0},
    {"dwconv 3x3 dilation 2", b_dwconv, 5, 3, {I(4, 1, 5, 9, 7), I(4, 5, 1, 3, 3), I(1, 5)}, 0},
    {"dwconv residual relu6", b_dwconv, 6, 4, {I(4, 3, 4, 5, 6), I(4, 4, 1, 3, 3), I(1, 4), I(4, 3, 4, 5, 6)}, 0},
    {"dwconv input prologue", b_dwconv, 7, 4, {I(4, 2, 3, 6, 5), I(4, 3, 1, 3, 3), I(1, 3), I(1, 3)}, 0},
    {"dwconv stride 3 lopsided", b_dwconv, 8, 3, {I(4, 1, 3, 10, 11), I(4, 3, 1, 4, 2), I(1, 3)}, 0},
    {"dwconv mobilenet 56x56", b_dwconv, 1, 3, {I(4, 1, 24, 56, 56), I(4, 24, 1, 3, 3), I(1, 24)}, 0},
    {"dwconv via ft_conv2d", b_dwconv_api, 0, 3, {I(4, 2, 9, 7, 8), I(4, 9, 1, 3, 3), I(1, 9)}, 0},
    {"dwconv via ft_conv2d_ex view", b_dwconv_api, 1, 3, {I(4, 2, 9, 7, 8), I(4, 9, 1, 3, 3), I(1, 9)}, 0},
};

/* ---- dense convolutions with per-side padding (the stems) ---- */

static ft_tensor *b_conv2d_asym(ft_ctx *c, ft_tensor **in, int v) {
    ft_conv2d_opts o = {2, 1, 1, 0, 1, 0, 1}; /* EfficientNet's stem, TF-SAME on even sizes */
    if (v == 1) o = (ft_conv2d_opts){2, 1, 1, 1, 1, 0, 1};  /* odd height, even width */
    if (v == 2) o = (ft_conv2d_opts){1, 1, 1, 0, 2, 1, 0};  /* lopsided, stride 1 */
    if (v == 3) o = (ft_conv2d_opts){1, 1, 1, 0, 1, 0, 1};  /* 1x1 padded after: no direct GEMM */
    return ft_conv2d_ex(c, in[0], in[1], in[2], &o);
}
static const op_case cases_conv2d_asym[] = {
    {"conv2d 3x3/2 pad (0,1,0,1)", b_conv2d_asym, 0, 3, {I(4, 2, 3, 12, 10), I(4, 8, 3, 3, 3), I(1, 8)}, 0},
    {"conv2d 3x3/2 pad (1,1,0,1)", b_conv2d_asym, 1, 3, {I(4, 3, 3, 11, 10), I(4, 5, 3, 3, 3), I(1, 5)}, 0},
    {"conv2d 3x3 pad (0,2,1,0)", b_conv2d_asym, 2, 3, {I(4, 1, 4, 7, 9), I(4, 6, 4, 3, 3), I(1, 6)}, 0},
    {"conv2d 1x1 pad after", b_conv2d_asym, 3, 3, {I(4, 2, 4, 5, 3), I(4, 6, 4, 1, 1), I(1, 6)}, 0},
};

/* ---- channels-first LayerNorm ---- */

static ft_tensor *b_channel_norm(ft_ctx *c, ft_tensor **in, int v) {
    if (v == 1) return ft_channel_norm(c, in[0], NULL, NULL, 1e-6f);
    if (v == 2) return ft_channel_norm(c, tr(c, in[0], 2, 3), in[1], in[2], 1e-6f);
    return ft_channel_norm(c, in[0], in[1], in[2], 1e-6f);
}
static const op_case cases_channel_norm[] = {
    {"channel_norm", b_channel_norm, 0, 3, {IW(4, 3, 17, 5, 7), I(1, 17), I(1, 17)}, 0},
    {"channel_norm no affine", b_channel_norm, 1, 1, {IW(4, 2, 96, 9, 9)}, 0},
    {"channel_norm transposed view", b_channel_norm, 2, 3, {IW(4, 2, 5, 3, 35), I(1, 5), I(1, 5)}, 0},
    {"channel_norm 3-d", b_channel_norm, 0, 3, {IW(3, 2, 33, 40), I(1, 33), I(1, 33)}, 0},
};

/* ---- squeeze-excitation gate ---- */

static ft_tensor *b_se_gate(ft_ctx *c, ft_tensor **in, int v) {
    if (v == 1) /* 2-d weights, ReLU */
        return ft_se_gate(c, in[0], in[1], in[2], in[3], in[4], FT_ACT_RELU);
    ft_tensor *w1 = in[1], *w2 = in[3];
    if (w1 && w2) {
        w1 = ft_reshape(c, w1, 4, (int64_t[]){w1->ne[0], w1->ne[1], 1, 1});
        w2 = ft_reshape(c, w2, 4, (int64_t[]){w2->ne[0], w2->ne[1], 1, 1});
    }
    return ft_se_gate(c, in[0], w1, in[2], w2, in[4], FT_ACT_SILU);
}
static const op_case cases_se_gate[] = {
    {"se_gate silu", b_se_gate, 0, 5, {IW(4, 3, 17, 5, 7), I(2, 4, 17), I(1, 4), I(2, 17, 4), I(1, 17)}, 0},
    {"se_gate relu 2-d", b_se_gate, 1, 5, {IW(4, 2, 9, 1, 3), I(2, 1, 9), I(1, 1), I(2, 9, 1), I(1, 9)}, 0},
    {"se_gate efficientnet 28x28", b_se_gate, 0, 5,
     {IW(4, 1, 48, 28, 28), I(2, 6, 48), I(1, 6), I(2, 48, 6), I(1, 48)}, 0},
};
