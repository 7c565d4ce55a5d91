/*
 * pass_eltwise.c - chains of elementwise ops into one FT_OP_FUSED_ELTWISE
 * kernel: y = f_n(...f_2(f_1(x, a), b)...), one read of each operand and one
 * write instead of a round trip through memory per op.
 *
 * A chain grows from a head op through single users that are elementwise,
 * keep the accumulator's shape (an operand may broadcast into it, the
 * accumulator itself never grows) and share its dtype. The last op of the
 * chain becomes the fused node, so every operand is computed before it.
 */
#include "graph.h"

#include <string.h>

static bool chainable(ft_op op) {
    switch (op) {
    case FT_OP_ADD: case FT_OP_SUB: case FT_OP_MUL: case FT_OP_DIV: case FT_OP_SCALE:
    case FT_OP_GELU: case FT_OP_GELU_TANH: case FT_OP_TANH: case FT_OP_RELU: case FT_OP_SIGMOID:
    case FT_OP_RELU6: case FT_OP_SILU:
        return true;
    default:
        return false;
    }
}

static bool binary(ft_op op) {
    return op == FT_OP_ADD || op == FT_OP_SUB || op == FT_OP_MUL || op == FT_OP_DIV;
}

/* Appends node's step to p (acc is the chain so far, or NULL for the head);
 * false if it does not fit. */
static bool add_step(ft_params_fused_eltwise *p, ft_tensor **srcs, int *n_src, ft_tensor *node,
                     ft_tensor *acc) {
    int s = p->n_steps;
    if (s == FT_FUSED_MAX_STEPS) return false;
    p->op[s] = (int8_t)node->op;
    p->operand[s] = -1;
    p->swap[s] = 0;
    p->alpha[s] = 1.0f;
    p->beta[s] = 0.0f;
    if (node->op == FT_OP_SCALE) {
        p->alpha[s] = FT_PARAMS(node, ft_params_scale)->alpha;
        p->beta[s] = FT_PARAMS(node, ft_params_scale)->beta;
    }
    if (binary(node->op)) {
        ft_tensor *other;
        if (acc) {
            if (node->src[0] == acc) other = node->src[1];
            else {
                other = node->src[0];
                p->swap[s] = 1;
            }
        } else {
            /* the head: its full-shape operand is the accumulator */
            if (ft_shape_equal(node->src[0], node)) other = node->src[1];
            else {
                other = node->src[0];
                p->swap[s] = 1;
            }
        }
        if (other->dtype != node->dtype) return false;
        int k = 1;
        while (k < *n_src && srcs[k] != other) k++;
        if (k == *n_src) {
            if (*n_src == FT_MAX_SRC) return false;
            srcs[(*n_src)++] = other;
        }
        p->operand[s] = (int8_t)k;
    }
    p->n_steps++;
    return true;
}

int ft_pass_eltwise(ft_graph *g) {
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        ft_tensor *head = g->nodes[i];
        if ((head->flags & FT_GF_DEAD) || !chainable(head->op)) continue;
        ft_tensor *acc0 = head->src[0];
        if (binary(head->op) && !ft_shape_equal(acc0, head)) acc0 = head->src[1];
        if (!ft_shape_equal(acc0, head) || acc0->dtype != head->dtype) continue;
        ft_params_fused_eltwise p;
        memset(&p, 0, sizeof p);
        ft_tensor *srcs[FT_MAX_SRC] = {acc0};
        int n_src = 1;
        if (!add_step(&p, srcs, &n_src, head, NULL)) continue;
        ft_tensor *chain[FT_FUSED_MAX_STEPS] = {head};
        int len = 1;
        ft_tensor *tail = head;
        for (;;) {
            ft_tensor *u = ft_graph_sole_user(g, tail);
            if (!u || !chainable(u->op) || !ft_shape_equal(u, tail) || u->dtype != tail->dtype) break;
            if (binary(u->op) && u->src[0] == tail && u->src[1] == tail) break;
            ft_params_fused_eltwise save = p;
            int save_n = n_src;
            if (!add_step(&p, srcs, &n_src, u, tail)) {
                p = save;
                n_src = save_n;
                break;
            }
            chain[len++] = u;
            tail = u;
        }
        if (len < 2) continue;
        /* the accumulator may not be one of the chain's own nodes */
        ft_tensor *last = chain[len - 1];
        for (int k = 0; k < len - 1; k++) chain[k]->flags |= FT_GF_DEAD;
        last->op = FT_OP_FUSED_ELTWISE;
        memset(last->op_params, 0, sizeof last->op_params);
        memcpy(last->op_params, &p, sizeof p);
        memset(last->src, 0, sizeof last->src);
        for (int k = 0; k < n_src; k++) last->src[k] = srcs[k];
        n++;
    }
    g->passes.eltwise += n;
    return n;
}
