/*
 * pass_dce.c - dead-node elimination: drops every node no output depends on
 * (HF-style forwards compute things they never return, e.g. a pooler input
 * view, and fusions leave their absorbed nodes behind). Inputs are kept even
 * when unused so a plan's input signature never depends on the model's code.
 */
#include "graph.h"

#include <stdlib.h>

int ft_pass_dce(ft_graph *g) {
    if (g->n_nodes == 0) return 0;
    char *live = (char *)calloc((size_t)g->n_nodes, 1);
    if (!live) {
        ft_set_error(g->ctx, FT_ERR_OOM, "out of host memory in dead-node elimination");
        return -1;
    }
    for (int j = 0; j < g->n_out; j++) {
        ft_tensor *o = g->out[j].t;
        if (o->id >= 0 && o->id < g->n_nodes && g->nodes[o->id] == o) live[o->id] = 1;
    }
    /* sources come before their users, so one backward sweep finds everything */
    for (int i = g->n_nodes - 1; i >= 0; i--) {
        ft_tensor *n = g->nodes[i];
        if (n->flags & FT_GF_DEAD) continue;
        if (n->flags & FT_TF_INPUT) live[i] = 1;
        if (!live[i]) continue;
        for (int k = 0; k < FT_MAX_SRC; k++) {
            ft_tensor *s = n->src[k];
            if (s && s->id >= 0 && s->id < g->n_nodes && g->nodes[s->id] == s) live[s->id] = 1;
        }
        ft_tensor *r = n->view_src;
        if (r && r->id >= 0 && r->id < g->n_nodes && g->nodes[r->id] == r) live[r->id] = 1;
    }
    int removed = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        if (live[i] || (g->nodes[i]->flags & FT_GF_DEAD)) continue;
        g->nodes[i]->flags |= FT_GF_DEAD;
        removed += g->nodes[i]->op != FT_OP_NONE && g->nodes[i]->op != FT_OP_VIEW;
    }
    free(live);
    g->passes.dce += removed;
    return removed;
}
