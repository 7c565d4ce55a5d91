/*
 * pass_attention.c - whole-attention fusion: the eager pattern
 *
 *   scores = matmul(q, k^T, a)        [B, H, Sq, Sk]
 *   probs  = softmax(scores, mask, s)
 *   ctx    = matmul(probs, v)         [B, H, Sq, D]
 *
 * becomes one attention(q, k, v, mask, a * s) node, which never writes the
 * [B, H, Sq, Sk] scores; a causal softmax (GPT-2) gives a causal attention. The op API may have made q, k^T or v contiguous with
 * a copy (a permuted head view is not a batched GEMM operand); the attention
 * kernels only need a unit inner stride, so those copies are bypassed and k^T
 * is turned back into k by a view. The copies die in dead-node elimination.
 *
 * Biases added to the scores before a softmax of scale 1 (WavLM's gated
 * relative-position bias, Funnel's positional and token-type terms:
 * softmax(q k^T a + b1 + b2 ..., mask)) join the mask:
 * attention(q, k, v, f32(b1) + f32(b2) + ... + mask, a). The casts and adds run
 * on the [B, H, Sq, Sk] biases only, and the scores are still never written.
 *
 * Models then merge the heads back: permute(0, 2, 1, 3) and a contiguous copy
 * before the output projection. The fused attention instead writes its output
 * straight in that [B, S, H, Dv] layout (its strides say so), the permute becomes
 * a contiguous view and the copy a view too: one kernel less per layer.
 */
#include "graph.h"
#include "../engine/op_infer.h"

#include <string.h>

/* The view under a same-dtype contiguous copy, if the copy is only a layout fix. */
static ft_tensor *under_copy(ft_tensor *t) {
    if (t->op == FT_OP_COPY && t->src[0] && t->src[0]->dtype == t->dtype) return t->src[0];
    return t;
}

static bool inner_unit(const ft_tensor *t) {
    return t->ndim == 4 && (t->nb[3] == 1 || t->ne[3] == 1);
}

/* Rewrites kt ([.., D, Sk], one user) into a view k [.., Sk, D] of the same data. */
static bool untranspose(ft_graph *g, ft_tensor *kt) {
    ft_tensor *base = under_copy(kt);
    if (base->ndim != 4) return false;
    int64_t ne[4], nb[4];
    memcpy(ne, base->ne, sizeof ne);
    memcpy(nb, base->nb, sizeof nb);
    int64_t t = ne[2];
    ne[2] = ne[3];
    ne[3] = t;
    t = nb[2];
    nb[2] = nb[3];
    nb[3] = t;
    if (!(nb[3] == 1 || ne[3] == 1)) return false;
    ft_tensor *root = base->op == FT_OP_VIEW ? base->view_src : base;
    int64_t offs = base->op == FT_OP_VIEW ? base->view_offs : 0;
    if (!root) return false;
    ft_tensor *src = base == kt ? kt->src[0] : base;
    (void)g;
    ft_graph_make_view(kt, src, root, offs);
    memcpy(kt->ne, ne, sizeof ne);
    memcpy(kt->nb, nb, sizeof nb);
    return true;
}

/* A new node `op` on a and b (b may be NULL) inserted just before `before`; NULL + error. */
static ft_tensor *insert_node(ft_graph *g, ft_tensor *before, ft_op op, ft_tensor *a, ft_tensor *b,
                              const void *params, size_t psize) {
    ft_tensor *t = ft_graph_new_tensor(g);
    if (!t) return NULL;
    t->op = op;
    t->src[0] = a;
    t->src[1] = b;
    if (params) memcpy(t->op_params, params, psize);
    int st = op == FT_OP_COPY ? ft_infer_copy(g->ctx, t) : ft_infer_binary(g->ctx, t);
    if (st != FT_OK || ft_graph_insert(g, before->id, t) != FT_OK) return NULL;
    return t;
}

#define MAX_BIAS 4

/* The mask the fused attention adds: the biases (any float dtype, cast to f32) and
 * the softmax's mask (f32 or NULL), summed. Biases of one 16-bit dtype are summed
 * in it first, as eager mode adds them to the 16-bit scores, and cast once: one
 * cast instead of one per bias, and a sum the elementwise pass can chain with
 * what computed the biases. */
static ft_tensor *joined_mask(ft_graph *g, ft_tensor *before, ft_tensor **bias, int n, ft_tensor *mask) {
    ft_tensor *sum = mask;
    bool same = n > 1;
    for (int i = 1; i < n; i++) same = same && bias[i]->dtype == bias[0]->dtype;
    ft_tensor *pre = NULL;
    if (same && bias[0]->dtype != FT_DTYPE_F32) {
        pre = bias[0];
        for (int i = 1; i < n && pre; i++) pre = insert_node(g, before, FT_OP_ADD, pre, bias[i], NULL, 0);
        if (!pre) return NULL;
    }
    for (int i = 0; i < (pre ? 1 : n); i++) {
        ft_tensor *b = pre ? pre : bias[i];
        if (b->dtype != FT_DTYPE_F32) {
            ft_params_copy p = {(int32_t)FT_DTYPE_F32};
            if (!(b = insert_node(g, before, FT_OP_COPY, b, NULL, &p, sizeof p))) return NULL;
        }
        sum = sum ? insert_node(g, before, FT_OP_ADD, b, sum, NULL, 0) : b;
        if (!sum) return NULL;
    }
    return sum;
}

/* scores = add(add(matmul, b1), b2)... feeding a softmax of scale 1: the matmul,
 * the biases (up to MAX_BIAS) and the adds, each used once and of the scores' shape. */
static bool biased_scores(const ft_graph *g, const ft_tensor *probs, ft_tensor *top, ft_tensor **mm,
                          ft_tensor **bias, int *n_bias, ft_tensor **adds) {
    if (FT_PARAMS(probs, ft_params_softmax)->scale != 1.0f) return false;
    ft_tensor *node = top;
    int n = 0;
    while (node->op == FT_OP_ADD && n < MAX_BIAS && ft_graph_fusable(g, node) && node->ndim == 4) {
        int k = 0;
        for (; k < 2; k++) { /* the side that leads to the scores has their full shape */
            ft_tensor *a = node->src[k];
            bool full = a->ndim == 4 && (a->op == FT_OP_MATMUL || a->op == FT_OP_ADD);
            for (int d = 0; full && d < 4; d++) full = a->ne[d] == node->ne[d];
            if (full && ft_graph_fusable(g, a)) break;
        }
        if (k == 2) return false;
        ft_tensor *b = node->src[1 - k];
        if (b->ndim > 4 || !ft_dtype_is_float(b->dtype)) return false;
        adds[n] = node;
        bias[n++] = b;
        node = node->src[k];
        if (node->op == FT_OP_MATMUL) {
            *mm = node;
            *n_bias = n;
            return true;
        }
    }
    return false;
}

/* attention [B, H, S, Dv] -> permute(0, 2, 1, 3) -> contiguous copy: the attention
 * writes [B, S, H, Dv] memory, the copy becomes a view. Returns 1 if rewritten. */
static int heads_merged_in_place(ft_graph *g, ft_tensor *a) {
    if (a->ndim != 4 || !ft_tensor_contiguous(a)) return 0;
    ft_tensor *u = ft_graph_sole_user(g, a);
    if (!u || u->op != FT_OP_VIEW || u->view_src != a || u->view_offs != 0 || u->ndim != 4) return 0;
    const int perm[4] = {0, 2, 1, 3};
    for (int d = 0; d < 4; d++)
        if (u->ne[d] != a->ne[perm[d]] || (u->ne[d] != 1 && u->nb[d] != a->nb[perm[d]])) return 0;
    ft_tensor *c = ft_graph_sole_user(g, u);
    if (!c || c->op != FT_OP_COPY || c->src[0] != u || c->dtype != a->dtype || !ft_tensor_contiguous(c))
        return 0;
    int64_t H = a->ne[1], S = a->ne[2], Dv = a->ne[3];
    a->nb[3] = 1;
    a->nb[1] = Dv;
    a->nb[2] = H * Dv;
    a->nb[0] = S * H * Dv;
    for (int d = 0; d < 4; d++) u->nb[d] = a->nb[perm[d]]; /* now contiguous */
    ft_graph_make_view(c, u, a, 0);
    /* views taken of the copy (the reshape to [B, S, D]) now alias a: their root
     * must say so, or the planner would free a's memory before they are read */
    for (int i = c->id + 1; i < g->n_nodes; i++) {
        ft_tensor *v = g->nodes[i];
        if (v->op == FT_OP_VIEW && v->view_src == c) v->view_src = a;
    }
    return 1;
}

int ft_pass_attention(ft_graph *g) {
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        ft_tensor *mm2 = g->nodes[i];
        if (mm2->op != FT_OP_MATMUL || (mm2->flags & FT_GF_DEAD) || mm2->ndim != 4) continue;
        if (FT_PARAMS(mm2, ft_params_matmul)->alpha != 1.0f) continue;
        ft_tensor *probs = mm2->src[0], *v = mm2->src[1];
        if (probs->op != FT_OP_SOFTMAX || !ft_graph_fusable(g, probs)) continue;
        ft_tensor *scores = probs->src[0], *mask = probs->src[1], *bias[MAX_BIAS], *adds[MAX_BIAS];
        int n_bias = 0;
        if (!biased_scores(g, probs, scores, &scores, bias, &n_bias, adds)) n_bias = 0;
        if (scores->op != FT_OP_MATMUL || !ft_graph_fusable(g, scores) || scores->ndim != 4) continue;
        ft_tensor *q = under_copy(scores->src[0]), *kt = scores->src[1], *vv = under_copy(v);
        if (!inner_unit(q) || !inner_unit(vv) || kt->ndim != 4 || !ft_graph_fusable(g, kt)) continue;
        if (kt->op != FT_OP_VIEW && !(kt->op == FT_OP_COPY && kt->src[0]->dtype == kt->dtype))
            continue;
        if (q->dtype != mm2->dtype || vv->dtype != mm2->dtype) continue;
        float scale = FT_PARAMS(scores, ft_params_matmul)->alpha * FT_PARAMS(probs, ft_params_softmax)->scale;
        if (mask && mask->dtype != FT_DTYPE_F32) continue;
        /* the CUDA kernel keeps a head in shared memory: head dims up to 128 */
        if (g->ctx->device == FT_DEVICE_CUDA && (q->ne[3] > 128 || vv->ne[3] > 128)) continue;
        if (!untranspose(g, kt)) continue;
        if (n_bias && !(mask = joined_mask(g, mm2, bias, n_bias, mask))) return -1;
        ft_params_attention p = {scale, FT_PARAMS(probs, ft_params_softmax)->causal};
        mm2->op = FT_OP_ATTENTION;
        memset(mm2->op_params, 0, sizeof mm2->op_params);
        memcpy(mm2->op_params, &p, sizeof p);
        memset(mm2->src, 0, sizeof mm2->src);
        mm2->src[0] = q;
        mm2->src[1] = kt;
        mm2->src[2] = vv;
        mm2->src[3] = mask;
        probs->flags |= FT_GF_DEAD;
        scores->flags |= FT_GF_DEAD;
        for (int b = 0; b < n_bias; b++) adds[b]->flags |= FT_GF_DEAD;
        n++;
    }
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i]->op == FT_OP_ATTENTION && !(g->nodes[i]->flags & FT_GF_DEAD))
            heads_merged_in_place(g, g->nodes[i]);
    g->passes.attention += n;
    return n;
}

/* ---- shared with pass_attention_rel.c (graph.h) ---- */

ft_tensor *ft_attn_under_copy(ft_tensor *t) { return under_copy(t); }
bool ft_attn_inner_unit(const ft_tensor *t) { return inner_unit(t); }
bool ft_attn_untranspose(ft_graph *g, ft_tensor *kt) { return untranspose(g, kt); }
int ft_attn_heads_merged_in_place(ft_graph *g, ft_tensor *a) { return heads_merged_in_place(g, a); }
