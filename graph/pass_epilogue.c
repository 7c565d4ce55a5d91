/*
 * pass_epilogue.c - GEMM epilogues: a linear (grouped too) or convolution followed by a
 * residual add and/or an activation becomes one kernel computing
 * act(x W^T + b + r), the contract the linear and conv kernels already
 * implement (engine/ops.h). The residual is fused first so that
 * act(linear + r) takes both; an activation after a fused residual is still
 * exact, an add after an activation is not and is left alone. On CUDA a
 * convolution through im2col also gets its weights with the bias as one more
 * column (src[4], rows zero-padded to a multiple of 8 elements: aligned fp16
 * rows), so the GEMM adds the bias too, and a 1x1 convolution read
 * only by such a convolution hands it its bias and activation (src[5],
 * act_in), applied while the reader gathers its input.
 */
#include "graph.h"

/* (the direct depthwise convolution has the same act(conv + b + r) epilogue) */
static bool is_gemm_epilogue_op(ft_op op) {
    return op == FT_OP_LINEAR || op == FT_OP_LINEAR_GROUPED || op == FT_OP_CONV1D || op == FT_OP_CONV2D ||
           op == FT_OP_DWCONV2D;
}

static int32_t *act_of(ft_tensor *n) {
    if (n->op == FT_OP_LINEAR) return &((ft_params_linear *)(void *)n->op_params)->act;
    if (n->op == FT_OP_LINEAR_GROUPED) return &((ft_params_linear_grouped *)(void *)n->op_params)->act;
    return &((ft_params_conv *)(void *)n->op_params)->act;
}

/* The GEMM node g absorbs `user` (the add or activation reading it): user's
 * readers now read g, and g runs where user ran (a residual may be computed
 * after g's own inputs). */
static void absorb(ft_graph *g, ft_tensor *gemm, ft_tensor *user) {
    int pos = user->id;
    ft_graph_replace_uses(g, user, gemm);
    user->flags |= FT_GF_DEAD;
    user->flags &= ~(uint32_t)FT_TF_OUTPUT;
    ft_graph_move_later(g, gemm, pos);
}

static int fuse_residuals(ft_graph *g) {
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        ft_tensor *add = g->nodes[i];
        if (add->op != FT_OP_ADD || (add->flags & FT_GF_DEAD)) continue;
        for (int side = 0; side < 2; side++) {
            ft_tensor *mm = add->src[side], *r = add->src[1 - side];
            if (!mm || !r || !is_gemm_epilogue_op(mm->op) || mm->src[3] || *act_of(mm) != FT_ACT_NONE)
                continue;
            if (!ft_graph_fusable(g, mm) || r->dtype != mm->dtype || !ft_shape_equal(r, mm) ||
                !ft_shape_equal(add, mm) || !ft_tensor_contiguous(r))
                continue;
            mm->src[3] = r;
            absorb(g, mm, add);
            n++;
            break;
        }
    }
    return n;
}

/* An activation may also read the GEMM through a reshape (a contiguous view of
 * all of it, read by nothing else): elementwise, it commutes with the view. */
static ft_tensor *through_reshape(const ft_graph *g, ft_tensor *t, ft_tensor **view) {
    *view = NULL;
    if (t->op != FT_OP_VIEW) return t;
    ft_tensor *root = t->view_src;
    if (!root || t->view_offs != 0 || !ft_tensor_contiguous(t) || ft_numel(t) != ft_numel(root) ||
        ft_graph_uses(g, t) != 1 || ft_graph_is_output(g, t))
        return NULL;
    *view = t;
    return root;
}

static int fuse_activations(ft_graph *g) {
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        ft_tensor *a = g->nodes[i];
        ft_act act = ft_op_act(a->op);
        if (act == FT_ACT_NONE || (a->flags & FT_GF_DEAD) || !a->src[0]) continue;
        ft_tensor *view;
        ft_tensor *mm = through_reshape(g, a->src[0], &view);
        if (!mm || !is_gemm_epilogue_op(mm->op) || *act_of(mm) != FT_ACT_NONE ||
            !ft_graph_fusable(g, mm) || a->dtype != mm->dtype)
            continue;
        *act_of(mm) = act;
        if (view) {
            /* the view now shows the activated output; a's readers read the view */
            ft_graph_replace_uses(g, a, view);
            a->flags |= FT_GF_DEAD;
            a->flags &= ~(uint32_t)FT_TF_OUTPUT;
        } else {
            absorb(g, mm, a);
        }
        n++;
    }
    return n;
}

/* h: w [Cout, K], b [Cout] -> [Cout, Kp], Kp = ft_conv_wb_cols(K): the weights, the bias,
 * then zeros up to a row length of a multiple of 8 (aligned fp16 rows for cuBLASLt) */
static bool bias_column(const float *const *h, const ft_tensor *const *src, float *out, const void *user) {
    (void)user;
    int64_t cout = src[0]->ne[0], k = ft_numel(src[0]) / (cout ? cout : 1), kp = ft_conv_wb_cols(k);
    for (int64_t r = 0; r < cout; r++) {
        for (int64_t c = 0; c < k; c++) out[r * kp + c] = h[0][r * k + c];
        out[r * kp + k] = h[1][r];
        for (int64_t c = k + 1; c < kp; c++) out[r * kp + c] = 0.0f;
    }
    return true;
}

/* CUDA convolutions through im2col: the bias rides in the GEMM as one more
 * weight column against a row of ones, so with a cuBLASLt activation and the
 * residual as C the separate bias pass goes (kernels/cuda/conv.cu). Direct
 * (1x1, stride 1) convolutions read x itself and keep the pass. */
/* A 1x1 stride-1 unpadded convolution: a GEMM on x itself, no im2col. */
static bool conv_direct(const ft_tensor *c) {
    if (c->op == FT_OP_DWCONV2D) return false; /* direct, but no GEMM: it has its own epilogue */
    const ft_params_conv *p = FT_PARAMS(c, ft_params_conv);
    const ft_tensor *w = c->src[1];
    int64_t kk = w->ne[2] * (c->op == FT_OP_CONV2D ? w->ne[3] : 1);
    return kk == 1 && p->stride == 1 && p->padding == 0 && !p->asym;
}

static int bias_into_conv_gemms(ft_graph *g) {
    if (g->ctx->device != FT_DEVICE_CUDA) return 0;
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        ft_tensor *c = g->nodes[i];
        if ((c->op != FT_OP_CONV1D && c->op != FT_OP_CONV2D) || (c->flags & FT_GF_DEAD) || c->src[4]) continue;
        const ft_params_conv *p = FT_PARAMS(c, ft_params_conv);
        ft_tensor *w = c->src[1], *b = c->src[2];
        if (conv_direct(c) || p->groups != 1 || !b || !ft_graph_is_const(w) || !ft_graph_is_const(b) ||
            !ft_tensor_contiguous(w) ||
            (p->act != FT_ACT_NONE && p->act != FT_ACT_RELU && p->act != FT_ACT_GELU_TANH))
            continue;
        int fail = 0;
        ft_tensor *src[2] = {w, b};
        int64_t ne[2] = {w->ne[0], ft_conv_wb_cols(ft_numel(w) / w->ne[0])};
        ft_tensor *wb = ft_graph_const_derived(g, FT_CONST_BIAS_COLUMN, 0, src, 2, 2, ne, bias_column, NULL, &fail);
        if (fail) return -1;
        if (!wb) continue;
        c->src[4] = wb;
        n++;
    }
    return n;
}

/* CUDA: a 1x1 convolution (a GEMM on x itself, whose bias and activation need a
 * pass of their own) read only by a convolution that gathers its input through
 * im2col hands them over: the reader applies them while gathering (its input
 * prologue, kernels/cuda/conv.cu), one launch fewer. ResNet: each bottleneck's
 * first 1x1 into its 3x3; MobileNetV2's and EfficientNet's expansion 1x1 into
 * the depthwise convolution after it. */
static int prologues_from_producers(ft_graph *g) {
    if (g->ctx->device != FT_DEVICE_CUDA) return 0;
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        ft_tensor *b = g->nodes[i];
        if ((b->op != FT_OP_CONV1D && b->op != FT_OP_CONV2D && b->op != FT_OP_DWCONV2D) ||
            (b->flags & FT_GF_DEAD) || conv_direct(b) || b->src[5] ||
            FT_PARAMS(b, ft_params_conv)->act_in != FT_ACT_NONE)
            continue;
        ft_tensor *a = b->src[0];
        ft_op want = b->op == FT_OP_DWCONV2D ? FT_OP_CONV2D : b->op;
        if (a->op != want || !conv_direct(a) || a->src[3] || a->src[5] || !ft_graph_fusable(g, a) ||
            a->dtype != b->dtype || (a->src[2] && !ft_graph_is_const(a->src[2])))
            continue;
        ft_params_conv *pa = (ft_params_conv *)(void *)a->op_params, *pb = (ft_params_conv *)(void *)b->op_params;
        if (!a->src[2] && pa->act == FT_ACT_NONE) continue;
        b->src[5] = a->src[2];
        pb->act_in = pa->act;
        a->src[2] = NULL;
        pa->act = FT_ACT_NONE;
        n++;
    }
    return n;
}

int ft_pass_epilogue(ft_graph *g) {
    int n = fuse_residuals(g);
    n += fuse_activations(g);
    int b = bias_into_conv_gemms(g);
    if (b < 0) return -1;
    n += b + prologues_from_producers(g);
    g->passes.epilogue += n;
    return n;
}
