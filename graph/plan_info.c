/*
 * plan_info.c - ft_model_plan_step: the last plan of a model described step by
 * step for users (`ftengine plan`), so what the passes fused, which step feeds
 * which, and where each buffer sits in the arena can be read without a debugger.
 */
#include "graph_api.h"
#include "graph.h"
#include "../engine/replay_map.h"
#include "../kernels/cpu/nchwc.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

_Static_assert(FT_MAX_SRC <= 8, "ft_plan_step_info.src_step is too small");

static const char *act_name(int act) {
    switch (act) {
    case FT_ACT_GELU: return "gelu";
    case FT_ACT_GELU_TANH: return "gelu_tanh";
    case FT_ACT_RELU: return "relu";
    case FT_ACT_TANH: return "tanh";
    case FT_ACT_SIGMOID: return "sigmoid";
    case FT_ACT_RELU6: return "relu6";
    case FT_ACT_SILU: return "silu";
    default: return NULL;
    }
}

/* Appends "+what" (or "what" first) to d. */
static void part(char *d, size_t n, const char *sep, const char *what) {
    size_t len = strlen(d);
    if (len + 1 < n) snprintf(d + len, n - len, "%s%s", len ? sep : "", what);
}

static void describe(const ft_tensor *t, char *d, size_t n) {
    d[0] = '\0';
    switch (t->op) {
    case FT_OP_LINEAR:
    case FT_OP_LINEAR_GROUPED:
    case FT_OP_CONV1D:
    case FT_OP_CONV2D:
    case FT_OP_DWCONV2D: {
        bool lin = t->op == FT_OP_LINEAR || t->op == FT_OP_LINEAR_GROUPED; /* act and alpha lead in both */
        int act = lin ? FT_PARAMS(t, ft_params_linear)->act : FT_PARAMS(t, ft_params_conv)->act;
        if (t->op == FT_OP_LINEAR_GROUPED) {
            char gs[48];
            const ft_params_linear_grouped *gp = FT_PARAMS(t, ft_params_linear_grouped);
            if (gp->groups == gp->in_groups) snprintf(gs, sizeof gs, "groups %d", gp->groups);
            else snprintf(gs, sizeof gs, "groups %d (%d stacked)", gp->in_groups, gp->groups / gp->in_groups);
            part(d, n, "+", gs);
        }
        if (lin && FT_PARAMS(t, ft_params_linear)->alpha != 1.0f) {
            char a[32];
            snprintf(a, sizeof a, "alpha %g", (double)FT_PARAMS(t, ft_params_linear)->alpha);
            part(d, n, "+", a);
        }
        if (t->src[2]) part(d, n, "+", t->src[4] ? "bias in GEMM" : "bias");
        if (t->src[3]) part(d, n, "+", "residual");
        if (act_name(act)) part(d, n, "+", act_name(act));
        if (!lin && (t->src[5] || FT_PARAMS(t, ft_params_conv)->act_in != FT_ACT_NONE)) {
            char in[48];
            const char *an = act_name(FT_PARAMS(t, ft_params_conv)->act_in);
            snprintf(in, sizeof in, "input%s%s%s", t->src[5] ? " bias" : "", an ? " " : "", an ? an : "");
            part(d, n, "+", in);
        }
        break;
    }
    case FT_OP_LAYERNORM:
        if (t->src[3]) part(d, n, "+", "residual");
        break;
    case FT_OP_SE_GATE:
        if (act_name(FT_PARAMS(t, ft_params_se)->act)) part(d, n, "+", act_name(FT_PARAMS(t, ft_params_se)->act));
        break;
    case FT_OP_SOFTMAX:
    case FT_OP_ATTENTION:
        if (t->src[t->op == FT_OP_SOFTMAX ? 1 : 3]) part(d, n, "+", "mask");
        if (t->op == FT_OP_SOFTMAX ? FT_PARAMS(t, ft_params_softmax)->causal
                                   : FT_PARAMS(t, ft_params_attention)->causal)
            part(d, n, "+", "causal");
        break;
    case FT_OP_ATTENTION_REL:
        if (t->src[3]) part(d, n, "+", "mask");
        if (t->src[4]) part(d, n, "+", "c2p");
        if (t->src[5]) part(d, n, "+", "p2c");
        if (t->src[6]) part(d, n, "+", "row scale");
        break;
    case FT_OP_FUSED_ELTWISE: {
        const ft_params_fused_eltwise *p = FT_PARAMS(t, ft_params_fused_eltwise);
        for (int s = 0; s < p->n_steps && s < FT_FUSED_MAX_STEPS; s++)
            part(d, n, ">", ft_op_name((ft_op)p->op[s]));
        break;
    }
    default:
        break;
    }
    /* the blocked-channel layout (graph/pass_nchwc.c): which steps run in it, and
     * the reorders at its edges */
    if (t->op == FT_OP_COPY && t->src[0] && ((t->flags ^ t->src[0]->flags) & FT_TF_NCHWC))
        part(d, n, "+", (t->flags & FT_TF_NCHWC) ? "reorder to NCHWc" : "reorder to NCHW");
    else if (t->flags & FT_TF_NCHWC)
        part(d, n, "+", ft_cpu_nchwc_conv_is_wino(t) ? "NCHWc+Winograd" : "NCHWc");
}

void ft_plan_step_detail(const ft_tensor *t, char *d, size_t n) { describe(t, d, n); }

/* The node that holds t's storage: t itself, or the root of a view. */
static const ft_tensor *root_of(const ft_tensor *t) {
    while (t && t->op == FT_OP_VIEW && t->view_src) t = t->view_src;
    return t;
}

/* Whether t, or a view of t, is one of the graph's outputs. */
static int is_output(const ft_graph *g, const ft_tensor *t) {
    for (int j = 0; j < g->n_out; j++)
        if (root_of(g->out[j].t) == t) return 1;
    return 0;
}

int ft_model_plan_length(const ft_model *m) {
    ft_plan_view v;
    if (!m || ft_ctx_enter(m->ctx, __func__) != FT_OK) return 0; /* another thread's forward */
    int n = ft_graph_last_plan(m, &v) ? v.n_steps : 0;
    ft_ctx_leave(m->ctx);
    return n;
}

/* CUDA Graph nodes of step i from the capture's cumulative counts. */
static int graph_nodes_of(const ft_plan_view *v, int i) {
    if (!v->captured) return 0;
    const ft_replay_map *map = v->map;
    /* counts are whole only if the last step closed on the graph's node count */
    if (!map || map->n_steps != v->n_steps || v->n_steps == 0 || map->n_nodes < 0 ||
        map->step[v->n_steps - 1].end != map->n_nodes)
        return -1;
    return map->step[i].end - (i ? map->step[i - 1].end : 0);
}

static ft_status plan_step(const ft_model *m, int i, ft_plan_step_info *out);

ft_status ft_model_plan_step(const ft_model *m, int i, ft_plan_step_info *out) {
    if (!m) return FT_ERR_INVALID_ARG;
    if (!out) return ft_api_null(m->ctx, __func__, "out");
    ft_status st = ft_ctx_enter(m->ctx, __func__);
    if (st != FT_OK) return st;
    st = plan_step(m, i, out);
    ft_ctx_leave(m->ctx);
    return st;
}

static ft_status plan_step(const ft_model *m, int i, ft_plan_step_info *out) {
    memset(out, 0, sizeof *out);
    ft_plan_view v;
    if (!ft_graph_last_plan(m, &v) || i < 0 || i >= v.n_steps) return FT_ERR_INVALID_ARG;
    const ft_tensor *t = v.nodes[i];
    out->op = ft_op_name(t->op);
    describe(t, out->detail, sizeof out->detail);
    out->dtype = t->dtype;
    out->ndim = t->ndim;
    for (int d = 0; d < t->ndim && d < FT_MAX_DIMS; d++) out->shape[d] = t->ne[d];
    out->bytes = ft_nbytes(t);
    out->arena_offset = v.arena && t->data ? (size_t)((const char *)t->data - v.arena) : SIZE_MAX;
    out->is_output = is_output(v.g, t);
    for (int k = 0; k < FT_MAX_SRC; k++) {
        const ft_tensor *s = root_of(t->src[k]);
        if (!s) continue;
        int step = s->flags & FT_TF_INPUT ? FT_PLAN_SRC_INPUT : FT_PLAN_SRC_CONST;
        /* steps run in graph order, so the producer is an earlier step */
        for (int j = i - 1; j >= 0 && step == FT_PLAN_SRC_CONST; j--)
            if (v.nodes[j] == s) step = j;
        out->src_step[out->n_src++] = step;
    }
    out->graph_nodes = graph_nodes_of(&v, i);
    return FT_OK;
}
