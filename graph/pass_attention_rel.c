/*
 * pass_attention_rel.c - DeBERTa's disentangled attention into one
 * attention_rel node (engine/ops.h). The eager pattern (models/deberta.c) is
 *
 *   X1 = q PK^T  [.., S, 2 span]       X2 = k PQ^T  [.., S, 2 span]
 *   c2p = view(gather_last(X1, I1))    p2c = view(gather_last(X2, I2))
 *   scores = matmul(q, k^T, a) + c2p + p2c        (adds in any order)
 *   probs  = softmax(scores, mask, 1) [* row_scale]
 *   ctx    = matmul(probs, v)
 *
 * with constant index tables I1[i, j] = clamp(i - j + span, 0, 2 span - 1) and
 * I2[a, b] = clamp(b - a + span, ...) (the p2c gather runs over key rows and is
 * transposed by its view). It becomes attention_rel(q, k, v, mask, X1', X2',
 * row_scale, a, span): the kernels gather X1 and X2 themselves, so neither the
 * gathered [B, H, S, S] terms, their sum nor the scores are ever written; X1
 * and X2 are still computed once by their GEMMs. Each gather node is turned
 * into the view X' of its source that the kernel reads ([B, H, rows, 2 span],
 * through the permutation the model's view applied). The tables are checked
 * value by value, so only a true relative-position gather is taken; anything
 * else is left to ft_pass_attention, which joins dense score terms to its mask.
 * A probs * row_scale without relative terms (DeBERTa with relative_attention
 * off, XSoftmax's zeroed rows) is fused the same way, with no terms.
 */
#include "graph.h"
#include "../engine/op_infer.h"

#include <string.h>

#define MAX_LEAVES 4

typedef struct rel_term {
    ft_tensor *t, *gather, *src, *root; /* the add's operand, the gather, X (under a copy), its root */
    int64_t offs, span;
    bool p2c;
    int64_t ne[4], nb[4]; /* X' */
} rel_term;

static int64_t clampi(int64_t d, int64_t span) { return d < 0 ? 0 : d > 2 * span - 1 ? 2 * span - 1 : d; }

/* Whether idx (a constant [I, J] integer table) is the c2p (i - j) or p2c (j - i) pattern. */
static bool index_pattern(const ft_tensor *idx, int64_t span, bool p2c) {
    const void *h = ft_trace_constant_data(idx);
    if (!h || idx->ndim != 2 || (idx->dtype != FT_DTYPE_I64 && idx->dtype != FT_DTYPE_I32) ||
        !ft_tensor_contiguous(idx))
        return false;
    int64_t I = idx->ne[0], J = idx->ne[1];
    for (int64_t a = 0; a < I; a++)
        for (int64_t b = 0; b < J; b++) {
            int64_t v = idx->dtype == FT_DTYPE_I64 ? ((const int64_t *)h)[a * J + b] : ((const int32_t *)h)[a * J + b];
            if (v != clampi(p2c ? b - a + span : a - b + span, span)) return false;
        }
    return true;
}

/* t (an operand of the score adds, [B, H, Sq, Sk]) as a relative term, or false. */
static bool match_term(const ft_graph *g, ft_tensor *t, rel_term *out) {
    memset(out, 0, sizeof *out);
    ft_tensor *G = t;
    if (t->op == FT_OP_VIEW) {
        if (!t->src[0] || t->src[0] != t->view_src || t->view_offs != 0) return false;
        G = t->src[0];
    }
    if (G->op != FT_OP_GATHER_LAST || G->ndim != 4 || t->ndim != 4 || !ft_graph_fusable(g, G) ||
        !ft_graph_fusable(g, t) || !ft_tensor_contiguous(G))
        return false;
    ft_tensor *X = ft_attn_under_copy(G->src[0]), *idx = G->src[1];
    if (X->ndim != 4 || X->dtype != G->dtype || X->ne[3] < 2 || X->ne[3] % 2) return false;
    for (int d = 0; d < 3; d++)
        if (X->ne[d] != G->ne[d]) return false;
    /* which dim of G each dim of t reads (-1: size 1); G is contiguous, so the
     * strides of its dims longer than 1 tell them apart */
    int map[4], used = 0;
    for (int k = 0; k < 4; k++) {
        map[k] = -1;
        if (t->ne[k] == 1) continue;
        for (int d = 0; d < 4; d++)
            if (G->ne[d] == t->ne[k] && G->nb[d] == t->nb[k] && !(used & (1 << d))) {
                map[k] = d;
                used |= 1 << d;
                break;
            }
        if (map[k] < 0) return false;
    }
    for (int d = 0; d < 4; d++)
        if (G->ne[d] != 1 && !(used & (1 << d))) return false;
    if (map[0] >= 2 || map[1] >= 2) return false; /* batch and head come from G's leading dims */
    bool c2p = (map[2] == 2 || map[2] < 0) && (map[3] == 3 || map[3] < 0);
    bool p2c = (map[2] == 3 || map[2] < 0) && (map[3] == 2 || map[3] < 0);
    if (!c2p && !p2c) return false;
    out->p2c = !c2p;
    out->span = X->ne[3] / 2;
    if (!index_pattern(idx, out->span, out->p2c)) return false;
    for (int k = 0; k < 2; k++) {
        out->ne[k] = t->ne[k];
        out->nb[k] = map[k] >= 0 ? X->nb[map[k]] : 0;
    }
    out->ne[2] = X->ne[2];
    out->nb[2] = X->ne[2] > 1 ? X->nb[2] : 0;
    out->ne[3] = X->ne[3];
    out->nb[3] = X->nb[3];
    out->t = t;
    out->gather = G;
    out->src = X;
    out->root = X->op == FT_OP_VIEW ? X->view_src : X;
    out->offs = X->op == FT_OP_VIEW ? X->view_offs : 0;
    return out->root != NULL;
}

/* The leaves of a tree of fusable adds of the scores' shape (up to MAX_LEAVES);
 * the adds go to adds[]. false when it is larger or not such a tree. */
static bool add_leaves(const ft_graph *g, ft_tensor *n, const ft_tensor *shape, ft_tensor **leaf, int *nl,
                       ft_tensor **adds, int *na) {
    if (n->op == FT_OP_ADD && ft_graph_fusable(g, n) && ft_shape_equal(n, shape)) {
        if (*na == MAX_LEAVES) return false;
        adds[(*na)++] = n;
        return add_leaves(g, n->src[0], shape, leaf, nl, adds, na) &&
               add_leaves(g, n->src[1], shape, leaf, nl, adds, na);
    }
    if (*nl == MAX_LEAVES) return false;
    leaf[(*nl)++] = n;
    return true;
}

static bool mask_like(const ft_tensor *rs, const ft_tensor *probs) {
    if (rs->ndim > 4 || rs->ne[rs->ndim - 1] != 1 || rs->dtype != probs->dtype) return false;
    ft_tensor s = *probs;
    s.ne[3] = 1;
    return ft_broadcastable_to(rs, &s);
}

int ft_pass_attention_rel(ft_graph *g) {
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        ft_tensor *mm2 = g->nodes[i];
        if (mm2->op != FT_OP_MATMUL || (mm2->flags & FT_GF_DEAD) || mm2->ndim != 4) continue;
        if (FT_PARAMS(mm2, ft_params_matmul)->alpha != 1.0f) continue;
        ft_tensor *probs = mm2->src[0], *v = ft_attn_under_copy(mm2->src[1]), *mul = NULL, *rs = NULL;
        if (probs->op == FT_OP_MUL && ft_graph_fusable(g, probs)) {
            for (int side = 0; side < 2 && !rs; side++)
                if (probs->src[side]->op == FT_OP_SOFTMAX && mask_like(probs->src[1 - side], probs)) {
                    mul = probs;
                    rs = probs->src[1 - side];
                    probs = probs->src[side];
                }
        }
        if (probs->op != FT_OP_SOFTMAX || !ft_graph_fusable(g, probs) || probs->ndim != 4) continue;
        ft_tensor *mask = probs->src[1];
        if (mask && mask->dtype != FT_DTYPE_F32) continue;
        ft_tensor *leaf[MAX_LEAVES], *adds[MAX_LEAVES];
        int nl = 0, na = 0;
        if (!add_leaves(g, probs->src[0], probs, leaf, &nl, adds, &na))
            continue;
        ft_tensor *scores = NULL;
        rel_term term[2];
        int nt = 0;
        bool ok = true, have_c2p = false, have_p2c = false;
        for (int l = 0; l < nl && ok; l++) {
            if (leaf[l]->op == FT_OP_MATMUL && !scores) {
                scores = leaf[l];
                continue;
            }
            rel_term rt;
            ok = nt < 2 && match_term(g, leaf[l], &rt) && !(rt.p2c ? have_p2c : have_c2p);
            if (!ok) break;
            if (rt.p2c) have_p2c = true;
            else have_c2p = true;
            term[nt++] = rt;
        }
        if (!ok || !scores || (nt == 0 && !rs)) continue;
        if (nt == 2 && term[0].span != term[1].span) continue;
        if (nt && FT_PARAMS(probs, ft_params_softmax)->scale != 1.0f) continue;
        if (scores->ndim != 4 || !ft_graph_fusable(g, scores) || !ft_shape_equal(scores, probs)) continue;
        ft_tensor *q = ft_attn_under_copy(scores->src[0]), *kt = scores->src[1];
        if (!ft_attn_inner_unit(q) || !ft_attn_inner_unit(v) || kt->ndim != 4 || !ft_graph_fusable(g, kt)) continue;
        if (kt->op != FT_OP_VIEW && !(kt->op == FT_OP_COPY && kt->src[0]->dtype == kt->dtype)) continue;
        if (q->dtype != mm2->dtype || v->dtype != mm2->dtype) continue;
        if (g->ctx->device == FT_DEVICE_CUDA && (q->ne[3] > 128 || v->ne[3] > 128)) continue;
        if (!ft_attn_untranspose(g, kt)) continue;

        float scale = FT_PARAMS(scores, ft_params_matmul)->alpha * FT_PARAMS(probs, ft_params_softmax)->scale;
        ft_tensor *src[7] = {q, kt, v, mask, NULL, NULL, rs};
        int64_t span = nt ? term[0].span : 1;
        for (int k = 0; k < nt; k++) {
            rel_term *rt = &term[k];
            ft_tensor *G = rt->gather;
            ft_graph_make_view(G, rt->src, rt->root, rt->offs);
            memcpy(G->ne, rt->ne, sizeof rt->ne);
            memcpy(G->nb, rt->nb, sizeof rt->nb);
            G->ndim = 4;
            if (rt->t != G) rt->t->flags |= FT_GF_DEAD;
            src[rt->p2c ? 5 : 4] = G;
        }
        ft_params_attention_rel p = {scale, (int32_t)span};
        mm2->op = FT_OP_ATTENTION_REL;
        memset(mm2->op_params, 0, sizeof mm2->op_params);
        memcpy(mm2->op_params, &p, sizeof p);
        memset(mm2->src, 0, sizeof mm2->src);
        memcpy(mm2->src, src, sizeof src);
        probs->flags |= FT_GF_DEAD;
        scores->flags |= FT_GF_DEAD;
        if (mul) mul->flags |= FT_GF_DEAD;
        for (int a = 0; a < na; a++) adds[a]->flags |= FT_GF_DEAD;
        ft_attn_heads_merged_in_place(g, mm2);
        n++;
    }
    g->passes.attention += n;
    return n;
}
