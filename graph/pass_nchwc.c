/*
 * pass_nchwc.c - CPU plans keep CNN activations in the blocked-channel layout
 * (NCHWc, kernels/cpu/nchwc.h) from the first convolution to the pooler.
 *
 * A node is made blocked (FT_TF_NCHWC) when a kernel of that layout runs it:
 * a convolution the direct kernel takes (f32, groups 1 or depthwise, Cout a
 * multiple of 16; its input may be either layout, a depthwise one's, also a
 * dwconv2d node with TF-SAME per-side padding, must be blocked), a max pool
 * or a squeeze-excitation gate of a blocked input. A blocked tensor is then
 * read only by consumers that take it as it is: a blocked convolution (input
 * or residual), a blocked max pool or SE gate, a global average pool (its [N, C, 1, 1]
 * output is the same in both layouts, so the pooler output needs no
 * conversion). Every other reader gets the NCHW copy of a reorder node (a
 * COPY whose output is not flagged, one per tensor, right after it), and so
 * does a model output; a blocked convolution whose residual comes in NCHW gets
 * a reorder the other way; blocked nodes with a reader that needs NCHW are
 * first turned back (below). Conversions therefore sit at the edges only. A
 * tensor some view reads stays NCHW. Nothing changes size (C is a multiple of
 * 16), so the memory plan is made as before.
 *
 * Eager mode keeps NCHW, and so do CUDA plans: the pass runs on CPU graphs only.
 */
#include "graph.h"
#include "../engine/op_infer.h"

#include "../kernels/cpu/nchwc.h"

#include <stdlib.h>
#include <string.h>

static bool is_blocked(const ft_tensor *t) { return t && (t->flags & FT_TF_NCHWC); }

/* Whether node n can be blocked given its sources' current layouts. */
static bool can_block(const ft_tensor *n) {
    if (n->flags & FT_GF_DEAD) return false;
    if (n->op == FT_OP_CONV2D || n->op == FT_OP_DWCONV2D) {
        if (!ft_cpu_nchwc_conv_ok(n)) return false;
        const ft_params_conv *p = FT_PARAMS(n, ft_params_conv);
        /* the depthwise kernel reads a blocked input only */
        return p->groups == 1 || is_blocked(n->src[0]);
    }
    /* squeeze-excitation: x blocked in, the gated x blocked out (f32) */
    if (n->op == FT_OP_SE_GATE)
        return n->dtype == FT_DTYPE_F32 && n->ndim == 4 && is_blocked(n->src[0]) && n->src[0]->dtype == FT_DTYPE_F32;
    if (n->op == FT_OP_MAXPOOL2D)
        return n->dtype == FT_DTYPE_F32 && n->ndim == 4 && is_blocked(n->src[0]) && n->src[0]->dtype == FT_DTYPE_F32;
    return false;
}

/* Whether consumer c reads its source slot s as a blocked tensor. */
static bool takes_blocked(const ft_tensor *c, int s) {
    if (is_blocked(c) && (c->op == FT_OP_CONV2D || c->op == FT_OP_DWCONV2D)) return s == 0 || s == 3;
    if (is_blocked(c) && c->op == FT_OP_SE_GATE) return s == 0;
    if (is_blocked(c) && c->op == FT_OP_MAXPOOL2D) return s == 0;
    return c->op == FT_OP_GLOBAL_AVGPOOL && s == 0 && c->dtype == FT_DTYPE_F32 && c->ndim == 4;
}

/* A reorder of t into the other layout (a COPY, flagged when to_blocked),
 * inserted at position pos; NULL + error. */
static ft_tensor *reorder(ft_graph *g, ft_tensor *t, int pos, bool to_blocked) {
    ft_tensor *r = ft_graph_new_tensor(g);
    if (!r) return NULL;
    r->op = FT_OP_COPY;
    r->src[0] = t;
    ft_params_copy p = {(int32_t)t->dtype};
    memcpy(r->op_params, &p, sizeof p);
    if (ft_infer_copy(g->ctx, r) != FT_OK || ft_graph_insert(g, pos, r) != FT_OK) return NULL;
    if (to_blocked) r->flags |= FT_TF_NCHWC;
    return r;
}

int ft_pass_nchwc(ft_graph *g) {
    if (g->ctx->device != FT_DEVICE_CPU || g->n_nodes == 0) return 0;
    const int n = g->n_nodes;
    /* tensors some view reads stay NCHW (a view addresses NCHW strides) */
    bool *pinned = calloc((size_t)n, sizeof *pinned);
    if (!pinned) {
        ft_set_error(g->ctx, FT_ERR_OOM, "out of host memory in the blocked-layout pass");
        return -1;
    }
    for (int i = 0; i < n; i++) {
        const ft_tensor *v = g->nodes[i];
        if (v->op == FT_OP_VIEW || (v->flags & FT_TF_VIEW))
            for (int s = 0; s <= FT_MAX_SRC; s++) {
                const ft_tensor *t = s < FT_MAX_SRC ? v->src[s] : v->view_src;
                if (t && t->id >= 0 && t->id < n && g->nodes[t->id] == t) pinned[t->id] = true;
            }
    }
    /* decide, in order: a node's sources are decided before it */
    int made = 0;
    for (int i = 0; i < n; i++) {
        ft_tensor *t = g->nodes[i];
        if (!pinned[i] && can_block(t)) {
            t->flags |= FT_TF_NCHWC;
            made++;
        }
    }
    free(pinned);
    /* A blocked node pays off only inside a region: one with a reader that needs
     * NCHW (a depthwise convolution it cannot block, a norm) would pay a reorder per
     * forward for one convolution (MobileNetV2 and EfficientNet ran 10-25%
     * slower that way). So a node stays blocked only while every reader takes
     * it blocked (a model output costs its one reorder at the edge), and a node
     * that needs a blocked input only while its input is; undone to a fixpoint. */
    for (bool changed = made > 0; changed;) {
        changed = false;
        for (int i = 0; i < g->n_nodes; i++) {
            ft_tensor *t = g->nodes[i];
            if (!is_blocked(t)) continue;
            /* the pool, the depthwise kernel and the SE gate read a blocked input only */
            const bool in_blocked = t->op == FT_OP_MAXPOOL2D || t->op == FT_OP_DWCONV2D || t->op == FT_OP_SE_GATE ||
                                    (t->op == FT_OP_CONV2D && FT_PARAMS(t, ft_params_conv)->groups != 1);
            bool keep = !in_blocked || is_blocked(t->src[0]);
            for (int k = i + 1; k < g->n_nodes && keep; k++) {
                const ft_tensor *c = g->nodes[k];
                if (c->flags & FT_GF_DEAD) continue;
                for (int s = 0; s < FT_MAX_SRC && keep; s++)
                    if (c->src[s] == t && !takes_blocked(c, s)) keep = false;
            }
            if (!keep) {
                t->flags &= ~FT_TF_NCHWC;
                made--;
                changed = true;
            }
        }
    }
    if (!made) return 0;
    /* readers that need NCHW get one reorder per tensor; a blocked convolution's
     * NCHW residual gets one the other way */
    int reorders = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        ft_tensor *c = g->nodes[i];
        if (c->flags & FT_GF_DEAD) continue;
        for (int s = 0; s < FT_MAX_SRC; s++) {
            ft_tensor *t = c->src[s];
            if (!t) continue;
            bool want = takes_blocked(c, s) && !(c->op == FT_OP_CONV2D && s == 0) && !(c->op == FT_OP_GLOBAL_AVGPOOL);
            /* a blocked conv's input and a global pool's input may be either */
            bool either = takes_blocked(c, s) && !want;
            if (either || is_blocked(t) == want) continue;
            if (!want && c->op == FT_OP_COPY && c->src[0] == t && !(c->flags & FT_TF_NCHWC) &&
                c->dtype == t->dtype && t->ndim == 4)
                continue; /* a copy of a blocked tensor into NCHW already is a reorder */
            /* one reorder per tensor and direction, placed right after the tensor
             * (or before this reader when the tensor is a leaf) */
            ft_tensor *r = NULL;
            for (int k = t->id >= 0 ? t->id + 1 : 0; k < i && !r; k++) {
                ft_tensor *q = g->nodes[k];
                if (q->op == FT_OP_COPY && q->src[0] == t && is_blocked(q) == want && q->dtype == t->dtype &&
                    !(q->flags & FT_GF_DEAD))
                    r = q;
            }
            if (!r) {
                int pos = t->id >= 0 && t->id < g->n_nodes && g->nodes[t->id] == t ? t->id + 1 : i;
                if (!(r = reorder(g, t, pos, want))) return -1;
                reorders++;
                i = c->id; /* the reader moved one place on */
            }
            c->src[s] = r;
        }
    }
    /* a model output is read in NCHW */
    for (int j = 0; j < g->n_out; j++) {
        ft_tensor *t = g->out[j].t;
        if (!is_blocked(t)) continue;
        ft_tensor *r = NULL;
        for (int k = t->id + 1; k < g->n_nodes && !r; k++) {
            ft_tensor *q = g->nodes[k];
            if (q->op == FT_OP_COPY && q->src[0] == t && !is_blocked(q) && !(q->flags & FT_GF_DEAD)) r = q;
        }
        if (!r) {
            if (!(r = reorder(g, t, t->id + 1, false))) return -1;
            reorders++;
        }
        r->flags |= FT_TF_OUTPUT;
        /* still an output under another name? then it keeps its flag */
        bool other = false;
        for (int k = 0; k < g->n_out; k++) other |= k != j && g->out[k].t == t;
        if (!other) t->flags &= ~FT_TF_OUTPUT;
        g->out[j].t = r;
    }
    g->passes.nchwc += made;
    g->passes.nchwc_reorders += reorders;
    return made;
}
