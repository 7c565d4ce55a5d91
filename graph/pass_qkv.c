/*
 * pass_qkv.c - Q/K/V merge: linears that read the same input with constant
 * weights of the same width K become one GEMM against their weights stacked
 * at plan time ([N1 + N2 + ..., K]), one launch instead of three. Grouped
 * linears (SqueezeBERT) merge the same way when they read the same input groups
 * with output groups of one width: the stacked weight's output groups simply
 * follow each other (ft_params_linear_grouped.groups grows, in_groups stays).
 *
 * Each former linear becomes a column slice of the merged output, a view
 * whose rows are N1 + N2 + ... apart. Views the model took of it (the head
 * split reshape and permute) are re-expressed against the merged buffer; the
 * merge is made only if every such view maps without crossing a row and every
 * op reading them still gets the layout the op API guaranteed at trace time
 * (rows for linear/norms, a GEMM operand for matmul, a unit inner stride for
 * attention; copies take any layout).
 */
#include "graph.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_GROUP 8

typedef struct remap {
    ft_tensor *v;
    int64_t nb[FT_MAX_DIMS];
    int64_t offs;
} remap;

static bool mergeable(const ft_tensor *l) {
    if ((l->op != FT_OP_LINEAR && l->op != FT_OP_LINEAR_GROUPED) || (l->flags & FT_GF_DEAD) || l->src[3]) return false;
    if (FT_PARAMS(l, ft_params_linear)->act != FT_ACT_NONE) return false; /* act leads in both ops' params */
    const ft_tensor *w = l->src[1], *b = l->src[2];
    if (w->op != FT_OP_NONE || !w->data || w->ndim != 2 || !ft_tensor_contiguous(w)) return false;
    if (b && (b->op != FT_OP_NONE || !b->data || !ft_tensor_contiguous(b))) return false;
    return !(l->flags & FT_TF_OUTPUT);
}

/* Whether consumer u may read t (at source slot k) in t's current layout. */
static bool layout_ok(const ft_tensor *u, int k, const ft_tensor *t) {
    int64_t b, bs, ld;
    bool tr;
    switch (u->op) {
    case FT_OP_VIEW:
    case FT_OP_COPY: return true;
    case FT_OP_ATTENTION: return k == 3 || t->ne[t->ndim - 1] == 1 || t->nb[t->ndim - 1] == 1;
    case FT_OP_LINEAR:
    case FT_OP_LAYERNORM:
    case FT_OP_SOFTMAX:
    case FT_OP_SUM_LAST: return k == 0 && ft_tensor_rows_layout(t, NULL, NULL);
    case FT_OP_MATMUL: return ft_gemm_operand(t, &b, &bs, &tr, &ld);
    default: return false;
    }
}

/* Re-expresses view v of a contiguous root of shape ne (strides cs) against the
 * root's new strides nbn at element offset base. In the merged buffer only the
 * columns move apart (rows are ntot apart instead of N): every dim but the last
 * keeps nbn[j - 1] = ne[j] * nbn[j], so a view step of whole rows may cross from
 * one of those dims into the next (Funnel's [B, L, H] -> [B*L, N, Dh] head view),
 * while a step within a row must stay inside the row's N columns. */
static bool remap_view(const ft_tensor *v, int nd, const int64_t *ne, const int64_t *cs,
                       const int64_t *nbn, int64_t base, remap *out) {
    int64_t u[FT_MAX_DIMS], ext = 0, o = v->view_offs;
    out->offs = base;
    for (int j = 0; j < nd; j++) {
        u[j] = (o / cs[j]) % ne[j];
        out->offs += u[j] * nbn[j];
    }
    for (int k = 0; k < v->ndim; k++) {
        int64_t s = v->nb[k];
        out->nb[k] = 0;
        if (v->ne[k] == 1 || s == 0) continue;
        int j = 0;
        while (j < nd && cs[j] > s) j++;
        if (j == nd || s % cs[j] != 0) return false;
        if (j == nd - 1) { /* within a row */
            if (s >= ne[j]) return false;
            ext += (v->ne[k] - 1) * s;
        }
        out->nb[k] = (s / cs[j]) * nbn[j];
    }
    if (ext > 0 && u[nd - 1] + ext >= ne[nd - 1]) return false;
    out->v = (ft_tensor *)v;
    return true;
}

/* Stacks tensors along dim 0; the result is shared through the model's cache
 * or, without one (or with a part the plan owns), owned by the graph. */
static ft_tensor *stack(ft_graph *g, ft_tensor **parts, int n) {
    ft_const_cache local = {0};
    /* a part only this plan holds (a folded constant not in the model's cache)
     * may free its memory with the plan: such a stack is the plan's own */
    bool share = g->cache != NULL;
    for (int i = 0; i < n; i++) share = share && ft_graph_const_shared(parts[i]);
    ft_tensor *s = ft_const_cache_stack(g->ctx, share ? g->cache : &local, parts, n);
    if (!s || share) return s;
    ft_tensor *t = ft_graph_new_tensor(g);
    if (t) {
        int id = t->id;
        *t = *s;
        t->id = id;
        t->flags = FT_TF_WEIGHT | FT_GF_FOLDED;
        s->block = NULL; /* the reference moves to t */
    }
    ft_const_cache_free(&local);
    return t;
}

static float alpha_of(const ft_tensor *l) { return FT_PARAMS(l, ft_params_linear)->alpha; }

/* Whether |a / b| is a power of two: weights scaled by it are the same numbers. */
static bool pow2_ratio(float a, float b) {
    int e;
    float r = a / b;
    return isfinite(r) && r != 0.0f && fabsf(frexpf(r, &e)) == 0.5f;
}

/* out = w * r, declined if a value would overflow the dtype. */
static bool scale_by(const float *const *h, const ft_tensor *const *src, float *out, const void *user) {
    float r = *(const float *)user;
    double top = src[0]->dtype == FT_DTYPE_F16 ? 65504.0 : (double)FLT_MAX;
    for (int64_t i = 0, n = ft_numel(src[0]); i < n; i++) {
        out[i] = h[0][i] * r;
        if (fabs((double)out[i]) > top) return false;
    }
    return true;
}

/* w * r (|r| a power of two >= 1, so exact unless a value overflows the dtype:
 * then NULL), shared through the model's cache when w's memory is the model's.
 * Lets linears with different folded scales (alpha) share one GEMM: the merged
 * GEMM takes the smallest alpha and the others' weights grow by the ratio. */
static ft_tensor *rescaled(ft_graph *g, ft_tensor *w, float r, int *fail) {
    uint32_t bits;
    memcpy(&bits, &r, sizeof bits);
    return ft_graph_const_derived(g, FT_CONST_SCALED, bits, &w, 1, w->ndim, w->ne, scale_by, &r, fail);
}

static int plan_remaps(ft_graph *g, ft_tensor **grp, int n, int nd, int64_t ntot, const int64_t *col,
                       remap *rm, int cap_rm, int *n_rm_out);
static int apply(ft_graph *g, ft_tensor **grp, int n, int nd, int64_t ntot, const int64_t *col,
                 const remap *rm, int n_rm);

static int merge_group(ft_graph *g, ft_tensor **grp, int n) {
    ft_ctx *ctx = g->ctx;
    int nd = grp[0]->ndim;
    int64_t ntot = 0, col[MAX_GROUP];
    for (int i = 0; i < n; i++) {
        col[i] = ntot;
        ntot += grp[i]->ne[nd - 1];
    }
    /* plan every rewrite before making any */
    int n_rm = 0, cap_rm = g->n_nodes;
    remap *rm = (remap *)malloc((size_t)(cap_rm ? cap_rm : 1) * sizeof *rm);
    if (!rm) {
        ft_set_error(ctx, FT_ERR_OOM, "out of host memory in the QKV merge");
        return -1;
    }
    int r = plan_remaps(g, grp, n, nd, ntot, col, rm, cap_rm, &n_rm);
    if (r == 1) r = apply(g, grp, n, nd, ntot, col, rm, n_rm);
    /* one member whose readers cannot take a column slice must not keep the
     * others from merging: merge those that can */
    ft_tensor *keep[MAX_GROUP];
    int nk = 0;
    for (int i = 0; r == 0 && n > 2 && i < n; i++) {
        int64_t c0 = 0;
        int dummy = 0;
        if (plan_remaps(g, &grp[i], 1, nd, ntot, &c0, rm, cap_rm, &dummy) == 1) keep[nk++] = grp[i];
    }
    free(rm);
    if (nk >= 2 && nk < n) return merge_group(g, keep, nk);
    return r;
}

static int plan_remaps(ft_graph *g, ft_tensor **grp, int n, int nd, int64_t ntot, const int64_t *col,
                       remap *rm, int cap_rm, int *n_rm_out) {
    int n_rm = 0;
    int64_t nbn[FT_MAX_DIMS], cs[FT_MAX_DIMS];
    for (int i = 0; i < n; i++) {
        ft_tensor *l = grp[i];
        ft_tensor probe = *l;
        for (int d = nd - 1; d >= 0; d--) {
            cs[d] = d == nd - 1 ? 1 : cs[d + 1] * l->ne[d + 1];
            nbn[d] = d == nd - 1 ? 1 : d == nd - 2 ? ntot : nbn[d + 1] * l->ne[d + 1];
        }
        memcpy(probe.nb, nbn, sizeof nbn);
        /* direct consumers see the slice layout */
        for (int j = l->id + 1; j < g->n_nodes; j++) {
            ft_tensor *u = g->nodes[j];
            if (u->flags & FT_GF_DEAD) continue;
            for (int k = 0; k < FT_MAX_SRC; k++)
                if (u->src[k] == l && !layout_ok(u, k, &probe)) return 0;
            if (u->op != FT_OP_VIEW || u->view_src != l) continue;
            if (n_rm == cap_rm) return 0;
            if (!remap_view(u, nd, l->ne, cs, nbn, col[i], &rm[n_rm])) return 0;
            ft_tensor pv = *u;
            memcpy(pv.nb, rm[n_rm].nb, sizeof pv.nb);
            for (int j2 = u->id + 1; j2 < g->n_nodes; j2++) {
                ft_tensor *w = g->nodes[j2];
                if (w->flags & FT_GF_DEAD) continue;
                for (int k = 0; k < FT_MAX_SRC; k++)
                    if (w->src[k] == u && !layout_ok(w, k, &pv)) return 0;
            }
            n_rm++;
        }
    }
    *n_rm_out = n_rm;
    return 1;
}

static int apply(ft_graph *g, ft_tensor **grp, int n, int nd, int64_t ntot, const int64_t *col,
                 const remap *rm, int n_rm) {
    ft_ctx *ctx = g->ctx;
    ft_tensor *x = grp[0]->src[0];
    ft_tensor *ws[MAX_GROUP], *bs[MAX_GROUP];
    float ag = alpha_of(grp[0]);
    for (int i = 1; i < n; i++)
        if (fabsf(alpha_of(grp[i])) < fabsf(ag)) ag = alpha_of(grp[i]);
    for (int i = 0; i < n; i++) {
        ws[i] = grp[i]->src[1];
        bs[i] = grp[i]->src[2]; /* added after alpha: unchanged */
        int fail = 0;
        if (alpha_of(grp[i]) != ag && !(ws[i] = rescaled(g, ws[i], alpha_of(grp[i]) / ag, &fail)))
            return fail ? -1 : 0;
    }
    ft_tensor *wm = stack(g, ws, n), *bm = bs[0] ? stack(g, bs, n) : NULL;
    if (!wm || (bs[0] && !bm)) return ctx->status ? -1 : 0;
    ft_tensor *mm = ft_graph_new_tensor(g);
    if (!mm) return -1;
    *mm = *grp[0];
    mm->src[0] = x;
    mm->src[1] = wm;
    mm->src[2] = bm;
    ((ft_params_linear *)(void *)mm->op_params)->alpha = ag;
    if (mm->op == FT_OP_LINEAR_GROUPED) { /* the members' output groups side by side */
        int32_t groups = 0;
        for (int i = 0; i < n; i++) groups += FT_PARAMS(grp[i], ft_params_linear_grouped)->groups;
        ((ft_params_linear_grouped *)(void *)mm->op_params)->groups = groups;
    }
    mm->ne[nd - 1] = ntot;
    ft_tensor_set_contiguous_strides(mm);
    mm->flags &= ~(uint32_t)FT_TF_OUTPUT;
    int first = grp[0]->id;
    for (int i = 1; i < n; i++)
        if (grp[i]->id < first) first = grp[i]->id;
    if (ft_graph_insert(g, first, mm) != FT_OK) return -1;
    for (int r = 0; r < n_rm; r++) {
        ft_tensor *v = rm[r].v;
        v->view_src = mm;
        v->view_offs = rm[r].offs;
        memcpy(v->nb, rm[r].nb, sizeof v->nb);
    }
    for (int i = 0; i < n; i++) {
        ft_tensor *l = grp[i];
        ft_graph_make_view(l, mm, mm, col[i]);
        for (int d = nd - 1; d >= 0; d--)
            l->nb[d] = d == nd - 1 ? 1 : d == nd - 2 ? ntot : l->nb[d + 1] * l->ne[d + 1];
    }
    return 1;
}

/* Whether l may share one GEMM with l0: same dtypes, width K and bias presence,
 * and alphas (scales folded into the GEMM, graph/pass_affine.c) a power of two
 * apart. */
static bool same_class(const ft_tensor *l, const ft_tensor *l0) {
    if (l->op != l0->op) return false;
    if (l->op == FT_OP_LINEAR_GROUPED) {
        /* grouped: stacked output groups must read the same input groups and be as wide */
        const ft_params_linear_grouped *p = FT_PARAMS(l, ft_params_linear_grouped),
                                       *p0 = FT_PARAMS(l0, ft_params_linear_grouped);
        if (p->in_groups != p0->in_groups || l->src[1]->ne[0] / p->groups != l0->src[1]->ne[0] / p0->groups)
            return false;
    }
    return l->dtype == l0->dtype && l->src[1]->ne[1] == l0->src[1]->ne[1] &&
           pow2_ratio(alpha_of(l), alpha_of(l0)) &&
           l->src[1]->dtype == l0->src[1]->dtype && !l->src[2] == !l0->src[2] &&
           (!l->src[2] || l->src[2]->dtype == l0->src[2]->dtype);
}

int ft_pass_qkv(ft_graph *g) {
    int merged = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        ft_tensor *x = g->nodes[i];
        if (x->flags & FT_GF_DEAD) continue;
        /* the siblings reading x, then one group per class (a bias-free linear
         * among biased ones must not keep those from merging) */
        ft_tensor *cand[2 * MAX_GROUP];
        int nc = 0;
        for (int j = i + 1; j < g->n_nodes && nc < 2 * MAX_GROUP; j++) {
            ft_tensor *l = g->nodes[j];
            if (l->src[0] == x && mergeable(l)) cand[nc++] = l;
        }
        for (int c = 0; c < nc; c++) {
            if (!cand[c]) continue;
            ft_tensor *grp[MAX_GROUP], *rep = cand[c];
            int n = 0;
            for (int j = c; j < nc && n < MAX_GROUP; j++)
                if (cand[j] && same_class(cand[j], rep)) {
                    grp[n++] = cand[j];
                    cand[j] = NULL;
                }
            if (n < 2) continue;
            int r = merge_group(g, grp, n);
            if (r < 0) return -1;
            merged += r;
        }
    }
    g->passes.qkv += merged;
    return merged;
}
