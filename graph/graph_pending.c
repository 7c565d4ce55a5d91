/*
 * graph_pending.c - placeholder until graph/executor.c implements graph and
 * static mode: both are refused with a clear error, never silently run eager.
 * Delete this file when graph/ defines ft_graph_forward and ft_graph_free.
 */
#include "graph_api.h"

ft_status ft_graph_forward(ft_model *m) {
    return ft_set_error(m->ctx, FT_ERR_UNSUPPORTED, "mode %s is not implemented yet",
                        ft_mode_name(m->opt.mode));
}

void ft_graph_free(ft_model *m) { (void)m; }
