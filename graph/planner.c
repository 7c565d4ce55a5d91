/*
 * planner.c - the memory planner: every intermediate of a plan lives at a
 * fixed offset in one arena, decided once from liveness.
 *
 * A buffer is live from the node that writes it to the last node that reads
 * it (directly or through a view). Buffers are placed largest first, each at
 * the lowest-waste gap among the buffers already placed whose lifetimes
 * overlap its own ("greedy by size"), which lands close to the peak-live lower
 * bound on transformer graphs. Model inputs and outputs live for the whole
 * forward: an output must survive until the next forward and an input is
 * written before the first node runs. Inputs are placed first, side by side
 * at offset 0, so that one copy uploads them all.
 *
 * One buffer is shared by two tensors: a CPU blocked-channel convolution
 * (FT_TF_NCHWC) writes its output over its fused residual when that is the
 * residual's last use (the kernel then accumulates into it, as ONNX Runtime's
 * NCHWc convolutions do with their Sum input): a residual block's output then
 * costs no separate stream of writes (ResNet-50 at batch 8: the 56 x 56
 * expansions were 1.24x ORT's time, read residual + write output).
 */
#include "graph.h"

#include <stdlib.h>
#include <string.h>

#define ALIGN 256

typedef struct buf {
    int node;         /* index of the node owning the buffer */
    int start, end;   /* first and last step it is live */
    size_t size, off;
    bool input;       /* a model input */
} buf;

static size_t align_up(size_t x) { return (x + ALIGN - 1) & ~(size_t)(ALIGN - 1); }

static int by_size_desc(const void *a, const void *b) {
    const buf *x = (const buf *)a, *y = (const buf *)b;
    if (x->size != y->size) return x->size < y->size ? 1 : -1;
    return x->start - y->start;
}

static int by_off(const void *a, const void *b) {
    const buf *x = *(const buf *const *)a, *y = *(const buf *const *)b;
    return x->off < y->off ? -1 : x->off > y->off;
}

static int by_area_desc(const void *a, const void *b) {
    const buf *x = (const buf *)a, *y = (const buf *)b;
    double ax = (double)x->size * (x->end - x->start + 1), ay = (double)y->size * (y->end - y->start + 1);
    if (ax != ay) return ax < ay ? 1 : -1;
    return x->start - y->start;
}

static int by_start(const void *a, const void *b) {
    const buf *x = (const buf *)a, *y = (const buf *)b;
    if (x->start != y->start) return x->start - y->start;
    return x->size < y->size ? 1 : x->size > y->size ? -1 : 0;
}

/* Places b[0..nb) in that order, each in the tightest gap left by the placed
 * buffers it overlaps in time; returns the arena size. */
static size_t place(buf *b, int nb, buf **act) {
    size_t top = 0;
    for (int i = 0; i < nb; i++) {
        int na = 0;
        for (int j = 0; j < i; j++)
            if (b[j].start <= b[i].end && b[i].start <= b[j].end) act[na++] = &b[j];
        qsort(act, (size_t)na, sizeof *act, by_off);
        size_t best = (size_t)-1, best_gap = (size_t)-1, prev = 0;
        for (int j = 0; j < na; j++) {
            if (act[j]->off >= prev + b[i].size) {
                size_t gap = act[j]->off - prev;
                if (gap < best_gap) {
                    best_gap = gap;
                    best = prev;
                }
            }
            size_t e = act[j]->off + act[j]->size;
            if (e > prev) prev = e;
        }
        b[i].off = best != (size_t)-1 ? best : prev;
        if (b[i].off + b[i].size > top) top = b[i].off + b[i].size;
    }
    return top;
}

/* Moves the model inputs to the front, in their order, keeping the rest as
 * sorted. Placed first, and all live from step 0, they end up side by side at
 * the start of the arena, so the executor uploads them in one copy. */
static void inputs_first(buf *b, int nb, buf *tmp) {
    int k = 0;
    for (int i = 0; i < nb; i++)
        if (b[i].input) tmp[k++] = b[i];
    if (k == 0 || k == nb) return;
    for (int i = 0; i < nb; i++)
        if (!b[i].input) tmp[k++] = b[i];
    memcpy(b, tmp, (size_t)nb * sizeof *b);
}

static bool in_graph(const ft_graph *g, const ft_tensor *t) {
    return t && t->id >= 0 && t->id < g->n_nodes && g->nodes[t->id] == t;
}

/* The node whose buffer t reads, or -1 (weights, constants). A pass may turn a
 * node that other views were taken of into a view itself: follow the chain. */
static int root_of(const ft_graph *g, const ft_tensor *t) {
    while (t && t->op == FT_OP_VIEW) t = t->view_src;
    return in_graph(g, t) ? t->id : -1;
}

/* Whether conv node t may write its output over its residual src[3] (the same
 * bytes, layout and dtype; the kernel, kernels/cpu/nchwc_conv.c, detects it). */
static bool residual_in_place(const ft_graph *g, const ft_tensor *t) {
    const ft_tensor *r = t->src[3];
    if (t->op != FT_OP_CONV2D || !(t->flags & FT_TF_NCHWC) || !r || !(r->flags & FT_TF_NCHWC) ||
        r->op == FT_OP_VIEW || !in_graph(g, r) || r->dtype != t->dtype || ft_nbytes(r) != ft_nbytes(t) ||
        !ft_tensor_contiguous(r) || !ft_tensor_contiguous(t))
        return false;
    for (int k = 0; k < 3; k++) /* read as anything else here: it would be overwritten while read */
        if (t->src[k] && root_of(g, t->src[k]) == r->id) return false;
    return true;
}

static bool needs_buffer(const ft_tensor *n) {
    if (n->op == FT_OP_VIEW) return false;
    if (n->op == FT_OP_NONE) return (n->flags & FT_TF_INPUT) != 0;
    return true;
}

ft_status ft_plan_memory(ft_graph *g, ft_mem_plan *mp, size_t *offs) {
    memset(mp, 0, sizeof *mp);
    int n = g->n_nodes;
    int *bix = (int *)malloc((size_t)(n ? n : 1) * sizeof *bix);
    buf *b = (buf *)calloc((size_t)(n ? n : 1), sizeof *b);
    buf **act = (buf **)malloc((size_t)(n ? n : 1) * sizeof *act);
    buf *tmp = (buf *)malloc((size_t)(n ? n : 1) * sizeof *tmp);
    if (!bix || !b || !act || !tmp) {
        free(bix);
        free(b);
        free(act);
        free(tmp);
        return ft_set_error(g->ctx, FT_ERR_OOM, "out of host memory in the memory planner");
    }
    int nb = 0;
    for (int i = 0; i < n; i++) {
        offs[i] = FT_NO_OFFSET;
        bix[i] = -1;
        ft_tensor *t = g->nodes[i];
        if (!needs_buffer(t)) continue;
        bix[i] = nb;
        b[nb].node = i;
        b[nb].start = b[nb].end = i;
        b[nb].size = align_up(ft_nbytes(t) ? ft_nbytes(t) : 1);
        if (t->flags & FT_TF_INPUT) b[nb].start = 0, b[nb].input = true;
        nb++;
    }
    for (int i = 0; i < n; i++) {
        ft_tensor *t = g->nodes[i];
        for (int k = 0; k < FT_MAX_SRC; k++) {
            int r = root_of(g, t->src[k]);
            if (r >= 0 && bix[r] >= 0 && b[bix[r]].end < i) b[bix[r]].end = i;
        }
    }
    for (int j = 0; j < g->n_out; j++) {
        int r = root_of(g, g->out[j].t);
        if (r >= 0 && bix[r] >= 0) {
            b[bix[r]].start = 0;
            b[bix[r]].end = n;
        }
    }
    /* outputs over residuals that die at their convolution: the output's buffer
     * merges into the residual's (chains follow: the next block's conv may take
     * this output as its residual); alias[i] is the node that owns i's bytes */
    int *alias = (int *)malloc((size_t)(n ? n : 1) * sizeof *alias);
    if (!alias) {
        free(bix), free(b), free(act), free(tmp);
        return ft_set_error(g->ctx, FT_ERR_OOM, "out of host memory in the memory planner");
    }
    int merged = 0;
    for (int i = 0; i < n; i++) {
        alias[i] = -1;
        ft_tensor *t = g->nodes[i];
        if (bix[i] < 0 || !residual_in_place(g, t)) continue;
        int r = t->src[3]->id;
        buf *rb = bix[r] >= 0 ? &b[bix[r]] : NULL;
        /* not over a model input, and not for a model output (live the whole forward) */
        if (!rb || rb->input || rb->end != i || rb->size != b[bix[i]].size || b[bix[i]].end >= n) continue;
        rb->end = b[bix[i]].end;
        b[bix[i]].size = 0; /* dropped below */
        bix[i] = bix[r];
        alias[i] = alias[r] >= 0 ? alias[r] : r;
        merged++;
    }
    if (merged) {
        int k = 0;
        for (int i = 0; i < nb; i++)
            if (b[i].size) b[k++] = b[i];
        nb = k;
    }
    /* statistics: no reuse, and the most bytes live at one step */
    for (int i = 0; i < nb; i++) mp->sum_bytes += b[i].size;
    for (int s = 0; s < n; s++) {
        size_t live = 0;
        for (int i = 0; i < nb; i++)
            if (b[i].start <= s && s <= b[i].end) live += b[i].size;
        if (live > mp->lower_bound) mp->lower_bound = live;
    }
    /* a few placement orders, keep the tightest: none wins on every graph. With
     * the inputs side by side (one upload) unless that costs over 1% of arena */
    int (*orders[])(const void *, const void *) = {by_size_desc, by_area_desc, by_start};
    int n_inputs = 0;
    for (int i = 0; i < nb; i++) n_inputs += b[i].input;
    size_t best_top[2] = {(size_t)-1, (size_t)-1}; /* [inputs first] */
    size_t *best_offs = (size_t *)malloc((size_t)(n ? n : 1) * sizeof *best_offs);
    if (!best_offs) {
        free(bix), free(b), free(act), free(tmp), free(alias);
        return ft_set_error(g->ctx, FT_ERR_OOM, "out of host memory in the memory planner");
    }
    for (int first = n_inputs > 1 ? 1 : 0; first >= 0; first--)
        for (int o = 0; o < 3; o++) {
            qsort(b, (size_t)nb, sizeof *b, orders[o]);
            if (first) inputs_first(b, nb, tmp);
            size_t top = place(b, nb, act);
            if (top >= best_top[first]) continue;
            best_top[first] = top;
            /* inputs-first layouts go to best_offs; the others to offs, unless an
             * inputs-first one is within 1% */
            size_t *dst = first ? best_offs : offs;
            if (!first && best_top[1] != (size_t)-1 && best_top[1] <= top + top / 100) continue;
            for (int i = 0; i < nb; i++) dst[b[i].node] = b[i].off;
        }
    size_t top = best_top[0];
    if (best_top[1] != (size_t)-1 && best_top[1] <= best_top[0] + best_top[0] / 100) {
        top = best_top[1];
        for (int i = 0; i < nb; i++) offs[b[i].node] = best_offs[b[i].node];
    }
    free(best_offs);
    for (int i = 0; i < n; i++)
        if (alias[i] >= 0) offs[i] = offs[alias[i]];
    free(alias);
    if (top == (size_t)-1) top = 0;
    mp->arena_bytes = top;
    mp->n_buffers = nb;
    mp->n_in_place = merged;
    free(bix);
    free(b);
    free(act);
    free(tmp);
    return FT_OK;
}

void ft_plan_bind_memory(ft_graph *g, const size_t *offs, void *base) {
    for (int i = 0; i < g->n_nodes; i++)
        if (offs[i] != FT_NO_OFFSET) g->nodes[i]->data = (char *)base + offs[i];
    for (int i = 0; i < g->n_nodes; i++) {
        ft_tensor *v = g->nodes[i];
        if (v->op != FT_OP_VIEW || !v->view_src || !v->view_src->data) continue;
        v->data = (char *)v->view_src->data + v->view_offs * (int64_t)ft_dtype_size(v->dtype);
    }
}
