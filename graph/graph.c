/*
 * graph.c - the graph IR: building a graph from a trace, editing helpers the
 * passes share, and the pass pipeline.
 */
#include "graph.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int grow(void **arr, int *cap, int need, size_t elem) {
    if (need <= *cap) return 0;
    int nc = *cap ? *cap * 2 : 64;
    while (nc < need) nc *= 2;
    void *p = realloc(*arr, (size_t)nc * elem);
    if (!p) return -1;
    *arr = p;
    *cap = nc;
    return 0;
}

ft_tensor *ft_graph_new_tensor(ft_graph *g) {
    if (grow((void **)&g->owned, &g->cap_owned, g->n_owned + 1, sizeof *g->owned)) {
        ft_set_error(g->ctx, FT_ERR_OOM, "out of host memory while building a graph");
        return NULL;
    }
    ft_tensor *t = (ft_tensor *)calloc(1, sizeof *t);
    if (!t) {
        ft_set_error(g->ctx, FT_ERR_OOM, "out of host memory while building a graph");
        return NULL;
    }
    t->id = -1;
    t->device = g->ctx->device;
    g->owned[g->n_owned++] = t;
    return t;
}

ft_tensor *ft_graph_new_const(ft_graph *g, ft_dtype dtype, int ndim, const int64_t *shape) {
    ft_tensor *t = ft_graph_new_tensor(g);
    if (!t) return NULL;
    t->dtype = dtype;
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++) t->ne[i] = shape[i];
    ft_tensor_set_contiguous_strides(t);
    t->flags = FT_TF_WEIGHT | FT_GF_FOLDED;
    if (ft_tensor_alloc_storage(g->ctx, t) != FT_OK) return NULL;
    return t;
}

float *ft_graph_const_to_host(ft_graph *g, ft_tensor *t) {
    int64_t n = ft_numel(t);
    float *h = (float *)malloc((size_t)(n ? n : 1) * sizeof *h);
    if (!h) {
        ft_set_error(g->ctx, FT_ERR_OOM, "out of host memory");
        return NULL;
    }
    if (ft_tensor_to_host(g->ctx, t, FT_DTYPE_F32, h, (size_t)n * sizeof *h) != FT_OK) {
        free(h);
        return NULL;
    }
    return h;
}

ft_tensor *ft_graph_const_from_host(ft_graph *g, ft_dtype dtype, int ndim, const int64_t *shape,
                                    const float *data) {
    ft_tensor *t = ft_graph_new_const(g, dtype, ndim, shape);
    if (!t) return NULL;
    int64_t n = ft_numel(t);
    void *tmp = malloc(ft_nbytes(t) ? ft_nbytes(t) : 1);
    if (!tmp) {
        ft_set_error(g->ctx, FT_ERR_OOM, "out of host memory");
        return NULL;
    }
    ft_status st = ft_convert_host(dtype, tmp, FT_DTYPE_F32, data, n);
    if (st == FT_OK) st = ft_copy_to_device(g->ctx, t->data, tmp, ft_nbytes(t));
    free(tmp);
    return st == FT_OK ? t : NULL;
}

void ft_graph_make_view(ft_tensor *t, ft_tensor *src, ft_tensor *root, int64_t offs) {
    t->op = FT_OP_VIEW;
    memset(t->op_params, 0, sizeof t->op_params);
    memset(t->src, 0, sizeof t->src);
    t->src[0] = src;
    t->view_src = root;
    t->view_offs = offs;
    t->flags |= FT_TF_VIEW;
    t->data = NULL;
}

ft_tensor *ft_graph_const_derived(ft_graph *g, int kind, uint64_t tag, ft_tensor *const *src, int n_src,
                                  int ndim, const int64_t *ne, ft_const_make_fn make, const void *user,
                                  int *fail) {
    if (n_src < 1 || n_src > FT_STACK_MAX) {
        ft_set_error(g->ctx, FT_ERR_INTERNAL, "a constant derived from %d constants", n_src);
        *fail = 1;
        return NULL;
    }
    bool share = g->cache != NULL;
    const void *key[FT_STACK_MAX];
    for (int i = 0; i < n_src; i++) {
        share = share && ft_graph_const_shared(src[i]);
        key[i] = src[i]->data;
        tag = tag * 31 + (uint64_t)src[i]->dtype;
    }
    ft_tensor *hit = share ? ft_const_cache_get(g->cache, kind, tag, key, n_src) : NULL;
    if (hit) return hit;
    float *h[FT_STACK_MAX] = {NULL};
    bool ok = true;
    for (int i = 0; i < n_src && ok; i++) ok = (h[i] = ft_graph_const_to_host(g, src[i])) != NULL;
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) n *= ne[d];
    float *out = ok ? (float *)malloc((size_t)(n ? n : 1) * sizeof *out) : NULL;
    ft_tensor *t = NULL;
    if (!out) {
        if (ok) ft_set_error(g->ctx, FT_ERR_OOM, "out of host memory");
        *fail = 1;
    } else if (make((const float *const *)h, (const ft_tensor *const *)src, out, user)) {
        t = ft_graph_const_from_host(g, src[0]->dtype, ndim, ne, out);
        if (!t) *fail = 1;
    }
    for (int i = 0; i < n_src; i++) free(h[i]);
    free(out);
    if (!t || !share) return t;
    if (ft_const_cache_put(g->ctx, g->cache, kind, tag, key, n_src, t) != FT_OK) {
        *fail = 1;
        return NULL;
    }
    /* the cache's persistent header: what is made of it is keyed alike in every plan */
    return ft_const_cache_get(g->cache, kind, tag, key, n_src);
}

/* Whether parts are contiguous, of one dtype and one block, each starting where
 * the previous one ends: then their stack along dim 0 is that memory as is. */
static bool packed(ft_tensor *const *parts, int n) {
    const char *end = NULL;
    for (int i = 0; i < n; i++) {
        const ft_tensor *p = parts[i];
        if (!p->block || p->block != parts[0]->block || p->dtype != parts[0]->dtype ||
            !ft_tensor_contiguous(p) || (i && (const char *)p->data != end))
            return false;
        end = (const char *)p->data + ft_nbytes(p);
    }
    return true;
}

ft_tensor *ft_const_cache_get(ft_const_cache *c, int kind, uint64_t tag, const void *const *parts, int n) {
    for (int i = 0; i < c->n; i++) {
        ft_const_entry *e = &c->e[i];
        if (e->kind != kind || e->tag != tag || e->n != n) continue;
        int k = 0;
        while (k < n && e->parts[k] == parts[k]) k++;
        if (k == n) return e->t;
    }
    return NULL;
}

/* Appends an entry owning t (a persistent header). */
static ft_status cache_add(ft_ctx *ctx, ft_const_cache *c, int kind, uint64_t tag, const void *const *parts,
                           int n, ft_tensor *t) {
    if (n < 0 || n > FT_STACK_MAX) return ft_set_error(ctx, FT_ERR_INTERNAL, "a constant made of %d parts", n);
    if (grow((void **)&c->e, &c->cap, c->n + 1, sizeof *c->e)) return ft_set_error(ctx, FT_ERR_OOM, "out of host memory");
    ft_const_entry *e = &c->e[c->n++];
    memset(e, 0, sizeof *e);
    e->kind = kind;
    e->tag = tag;
    for (int i = 0; i < n; i++) e->parts[i] = parts[i];
    e->n = n;
    e->t = t;
    return FT_OK;
}

ft_status ft_const_cache_put(ft_ctx *ctx, ft_const_cache *c, int kind, uint64_t tag,
                             const void *const *parts, int n, const ft_tensor *t) {
    ft_tensor *k = ft_tensor_keep(ctx, t);
    if (!k) return ctx->status ? ctx->status : FT_ERR_OOM;
    ft_status st = cache_add(ctx, c, kind, tag, parts, n, k);
    if (st != FT_OK) ft_tensor_free_persistent(k);
    return st;
}

bool ft_graph_const_shared(const ft_tensor *t) {
    while (t && t->op == FT_OP_VIEW) t = t->src[0];
    return t && t->op == FT_OP_NONE && t->data &&
           ((t->flags & FT_TF_PERSISTENT) || (t->flags & FT_GF_SHARED)) && !(t->flags & FT_TF_CONST);
}

/* A stack is keyed by its parts' memory (a folded constant gets a new header in
 * every plan, its shared storage stays) and, in the tag, their shapes and dtypes. */
static uint64_t stack_tag(ft_tensor *const *parts, int n) {
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < n; i++) {
        int64_t v[FT_MAX_DIMS + 2] = {parts[i]->dtype, parts[i]->ndim};
        for (int d = 0; d < parts[i]->ndim; d++) v[2 + d] = parts[i]->ne[d];
        const unsigned char *b = (const unsigned char *)v;
        for (size_t k = 0; k < sizeof v; k++) h = (h ^ b[k]) * 1099511628211ull;
    }
    return h;
}

ft_tensor *ft_const_cache_stack(ft_ctx *ctx, ft_const_cache *c, ft_tensor *const *parts, int n) {
    if (n < 1 || n > FT_STACK_MAX) {
        ft_set_error(ctx, FT_ERR_INTERNAL, "stacking %d tensors", n);
        return NULL;
    }
    const void *key[FT_STACK_MAX];
    for (int i = 0; i < n; i++) key[i] = parts[i]->data;
    uint64_t tag = stack_tag(parts, n);
    ft_tensor *hit = ft_const_cache_get(c, FT_CONST_STACK, tag, key, n);
    if (hit) return hit;
    ft_tensor *t = ft_tensor_new_persistent(ctx);
    if (!t) return NULL;
    *t = *parts[0];
    t->flags = FT_TF_PERSISTENT | FT_TF_WEIGHT;
    t->block = NULL;
    t->id = -1;
    t->op = FT_OP_NONE;
    t->view_src = NULL;
    memset(t->src, 0, sizeof t->src);
    for (int i = 1; i < n; i++) t->ne[0] += parts[i]->ne[0];
    ft_tensor_set_contiguous_strides(t);
    ft_status st = FT_OK;
    if (packed(parts, n)) {
        /* the loader already laid the parts out back to back (ft_weights_pack):
         * the stack is the same memory, shared, with nothing to copy */
        t->data = parts[0]->data;
        t->block = parts[0]->block;
        t->block->refs++;
    } else {
        st = ft_tensor_alloc_storage(ctx, t);
        int64_t row = 0;
        for (int i = 0; i < n && st == FT_OK; i++) {
            st = ft_tensor_copy_raw(ctx, (char *)t->data + (size_t)(row * t->nb[0]) * ft_dtype_size(t->dtype),
                                    parts[i]);
            row += parts[i]->ne[0];
        }
    }
    if (st == FT_OK) st = cache_add(ctx, c, FT_CONST_STACK, tag, key, n, t);
    if (st != FT_OK) {
        ft_tensor_free_persistent(t);
        return NULL;
    }
    return t;
}

void ft_const_cache_free(ft_const_cache *c) {
    if (!c) return;
    for (int i = 0; i < c->n; i++) ft_tensor_free_persistent(c->e[i].t);
    free(c->e);
    memset(c, 0, sizeof *c);
}

ft_status ft_graph_insert(ft_graph *g, int pos, ft_tensor *node) {
    if (grow((void **)&g->nodes, &g->cap_nodes, g->n_nodes + 1, sizeof *g->nodes))
        return ft_set_error(g->ctx, FT_ERR_OOM, "out of host memory while building a graph");
    memmove(&g->nodes[pos + 1], &g->nodes[pos], (size_t)(g->n_nodes - pos) * sizeof *g->nodes);
    g->nodes[pos] = node;
    g->n_nodes++;
    for (int i = pos; i < g->n_nodes; i++) g->nodes[i]->id = i;
    return FT_OK;
}

void ft_graph_compact(ft_graph *g) {
    int k = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        ft_tensor *n = g->nodes[i];
        if (n->flags & FT_GF_DEAD) {
            n->id = -1;
            continue; /* the header stays in `owned` until the graph dies */
        }
        n->id = k;
        g->nodes[k++] = n;
    }
    g->n_nodes = k;
}

void ft_graph_replace_uses(ft_graph *g, ft_tensor *old, ft_tensor *repl) {
    for (int i = 0; i < g->n_nodes; i++) {
        ft_tensor *n = g->nodes[i];
        if (n == repl) continue;
        for (int k = 0; k < FT_MAX_SRC; k++)
            if (n->src[k] == old) n->src[k] = repl;
        if (n->view_src == old) n->view_src = repl;
    }
    for (int j = 0; j < g->n_out; j++)
        if (g->out[j].t == old) {
            g->out[j].t = repl;
            repl->flags |= FT_TF_OUTPUT;
        }
}

void ft_graph_count_uses(const ft_graph *g, int *uses) {
    memset(uses, 0, (size_t)g->n_nodes * sizeof *uses);
    for (int i = 0; i < g->n_nodes; i++) {
        const ft_tensor *n = g->nodes[i];
        for (int k = 0; k < FT_MAX_SRC; k++) {
            const ft_tensor *s = n->src[k];
            if (s && s->id >= 0 && s->id < g->n_nodes && g->nodes[s->id] == s) uses[s->id]++;
        }
    }
    for (int j = 0; j < g->n_out; j++) {
        const ft_tensor *s = g->out[j].t;
        if (s && s->id >= 0 && s->id < g->n_nodes && g->nodes[s->id] == s) uses[s->id]++;
    }
}

int ft_graph_uses(const ft_graph *g, const ft_tensor *t) {
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const ft_tensor *u = g->nodes[i];
        if (u->flags & FT_GF_DEAD) continue;
        for (int k = 0; k < FT_MAX_SRC; k++) n += u->src[k] == t;
    }
    for (int j = 0; j < g->n_out; j++) n += g->out[j].t == t;
    return n;
}

void ft_graph_move_later(ft_graph *g, ft_tensor *node, int pos) {
    int i = node->id;
    if (i < 0 || pos <= i || pos >= g->n_nodes) return;
    memmove(&g->nodes[i], &g->nodes[i + 1], (size_t)(pos - i) * sizeof *g->nodes);
    g->nodes[pos] = node;
    for (int k = i; k <= pos; k++) g->nodes[k]->id = k;
}

bool ft_graph_fusable(const ft_graph *g, const ft_tensor *t) {
    return !(t->flags & (FT_TF_OUTPUT | FT_TF_INPUT)) && !ft_graph_is_output(g, t) &&
           ft_graph_uses(g, t) == 1;
}

ft_tensor *ft_graph_sole_user(const ft_graph *g, const ft_tensor *t) {
    if (!ft_graph_fusable(g, t)) return NULL;
    for (int i = t->id + 1; i < g->n_nodes; i++) {
        ft_tensor *u = g->nodes[i];
        if (u->flags & FT_GF_DEAD) continue;
        for (int k = 0; k < FT_MAX_SRC; k++)
            if (u->src[k] == t) return u;
    }
    return NULL;
}

bool ft_graph_is_const(const ft_tensor *t) {
    while (t && t->op == FT_OP_VIEW) t = t->src[0];
    if (!t) return false;
    if (t->op != FT_OP_NONE) return false;
    return (t->flags & (FT_TF_WEIGHT | FT_TF_CONST | FT_GF_FOLDED)) && !(t->flags & FT_TF_INPUT);
}

bool ft_graph_is_output(const ft_graph *g, const ft_tensor *t) {
    for (int j = 0; j < g->n_out; j++)
        if (g->out[j].t == t) return true;
    return false;
}

int ft_graph_kernel_count(const ft_graph *g) {
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++)
        n += g->nodes[i]->op != FT_OP_NONE && g->nodes[i]->op != FT_OP_VIEW;
    return n;
}

/* The graph's copy of a traced tensor; weights (made outside the trace) map to themselves. */
static ft_tensor *map_src(ft_graph *g, const ft_trace *tr, ft_tensor **map, ft_tensor *s) {
    if (!s) return NULL;
    if (s->id >= 0 && s->id < tr->n_nodes && tr->nodes[s->id] == s) return map[s->id];
    if ((s->flags & (FT_TF_WEIGHT | FT_TF_PERSISTENT)) && (s->data || ft_numel(s) == 0)) return s;
    char sh[96];
    ft_set_error(g->ctx, FT_ERR_INVALID_ARG,
                 "graph mode: the forward used a tensor %s made outside the trace (only inputs, "
                 "weights and ops may feed a traced forward)",
                 ft_shape_str(s, sh, sizeof sh));
    return NULL;
}

ft_status ft_graph_from_trace(ft_ctx *ctx, const ft_trace *tr, const ft_graph_io *outs, int n_out,
                              ft_graph **out) {
    *out = NULL;
    if (n_out > FT_GRAPH_MAX_OUT)
        return ft_set_error(ctx, FT_ERR_UNSUPPORTED, "graph mode: %d outputs (at most %d)", n_out,
                            FT_GRAPH_MAX_OUT);
    ft_graph *g = (ft_graph *)calloc(1, sizeof *g);
    ft_tensor **map = (ft_tensor **)calloc((size_t)(tr->n_nodes ? tr->n_nodes : 1), sizeof *map);
    if (!g || !map) {
        free(g);
        free(map);
        return ft_set_error(ctx, FT_ERR_OOM, "out of host memory while building a graph");
    }
    g->ctx = ctx;
    ft_status st = FT_OK;
    for (int i = 0; i < tr->n_nodes && st == FT_OK; i++) {
        const ft_tensor *t = tr->nodes[i];
        ft_tensor *c = ft_graph_new_tensor(g);
        if (!c || ft_graph_insert(g, g->n_nodes, c) != FT_OK) {
            st = ctx->status;
            break;
        }
        int id = c->id;
        *c = *t;
        c->id = id;
        c->block = NULL;
        c->flags &= ~(uint32_t)(FT_TF_RELEASED | FT_TF_PERSISTENT);
        c->extra = NULL;
        map[i] = c;
        for (int k = 0; k < FT_MAX_SRC && st == FT_OK; k++) {
            if (!t->src[k]) continue;
            c->src[k] = map_src(g, tr, map, t->src[k]);
            if (!c->src[k]) st = ctx->status;
        }
        if (st == FT_OK && t->view_src) {
            c->view_src = map_src(g, tr, map, t->view_src);
            if (!c->view_src) st = ctx->status;
        }
        if (st != FT_OK) break;
        if (c->op == FT_OP_VIEW && !(c->view_src->flags & FT_TF_WEIGHT)) c->data = NULL;
        if (c->op == FT_OP_NONE) {
            const void *hd = ft_trace_constant_data(t);
            if (c->flags & FT_TF_INPUT) {
                if (g->n_in == FT_GRAPH_MAX_IN) {
                    st = ft_set_error(ctx, FT_ERR_UNSUPPORTED, "graph mode: too many inputs");
                    break;
                }
                snprintf(g->in[g->n_in].name, sizeof g->in[0].name, "%.47s", c->name);
                g->in[g->n_in++].t = c;
            } else if (hd) {
                size_t bytes = ft_nbytes(c);
                void *copy = malloc(bytes ? bytes : 1);
                if (!copy || grow((void **)&g->host, &g->cap_host, g->n_host + 1, sizeof(void *))) {
                    free(copy);
                    st = ft_set_error(ctx, FT_ERR_OOM, "out of host memory while building a graph");
                    break;
                }
                memcpy(copy, hd, bytes);
                g->host[g->n_host++] = copy;
                c->extra = copy;
            } else {
                st = ft_set_error(ctx, FT_ERR_UNSUPPORTED,
                                  "graph mode: the forward made an uninitialised tensor "
                                  "(ft_tensor_empty) that no op fills");
            }
        }
    }
    for (int j = 0; j < n_out && st == FT_OK; j++) {
        ft_tensor *o = map_src(g, tr, map, outs[j].t);
        if (!o) {
            st = ctx->status;
            break;
        }
        snprintf(g->out[j].name, sizeof g->out[j].name, "%s", outs[j].name);
        g->out[j].t = o;
        if (!(o->flags & FT_TF_WEIGHT)) o->flags |= FT_TF_OUTPUT;
        g->n_out = j + 1;
    }
    free(map);
    if (st != FT_OK) {
        ft_graph_destroy(g);
        return st;
    }
    *out = g;
    return FT_OK;
}

void ft_graph_destroy(ft_graph *g) {
    if (!g) return;
    for (int i = 0; i < g->n_owned; i++) {
        ft_tensor_drop_storage(g->owned[i]);
        free(g->owned[i]);
    }
    free(g->owned);
    for (int i = 0; i < g->n_host; i++) free(g->host[i]);
    free(g->host);
    free(g->nodes);
    free(g);
}

typedef struct pass_def {
    const char *name;
    int (*fn)(ft_graph *);
} pass_def;

/* folding first so later patterns see weights; affine maps into GEMMs before
 * the QKV merge stacks the GEMMs they make; epilogues after attention and
 * QKV so a merged GEMM still gets its bias; elementwise chains on what no
 * other fusion took; the blocked-channel layout (CPU) last, on the fused
 * convolutions; dead-node elimination (always) first and last */
static const pass_def passes[] = {
    {"dce", ft_pass_dce},           {"fold", ft_pass_fold},         {"nonorm", ft_pass_nonorm},
    {"conv_bn", ft_pass_conv_bn},   {"se", ft_pass_se},             {"layer_scale", ft_pass_layer_scale},
    {"affine", ft_pass_affine},     {"attention_rel", ft_pass_attention_rel},
    {"attention", ft_pass_attention}, {"qkv", ft_pass_qkv},         {"epilogue", ft_pass_epilogue},
    {"ln_residual", ft_pass_ln_residual}, {"eltwise", ft_pass_eltwise}, {"nchwc", ft_pass_nchwc},
    {"dce", ft_pass_dce},
};
#define N_PASSES ((int)(sizeof passes / sizeof passes[0]))

/* The names FT_DISABLE_PASSES takes, space-separated, from the table itself (the
 * environment table checks the variable against them: engine/env.c). */
static char pass_names[256];
static pthread_once_t pass_names_once = PTHREAD_ONCE_INIT;

static void pass_names_build(void) {
    size_t n = 0;
    for (int i = 1; i < N_PASSES - 1; i++) /* not the dead-node eliminations at each end */
        n += (size_t)snprintf(pass_names + n, sizeof pass_names - n, "%s%s", i > 1 ? " " : "", passes[i].name);
}

const char *ft_graph_pass_names(void) {
    pthread_once(&pass_names_once, pass_names_build);
    return pass_names;
}

/* FT_DISABLE_PASSES=name,name,...: off[i] for each pass named; an unknown name
 * is an error that lists the names. */
static ft_status disabled_passes(ft_ctx *ctx, bool *off) {
    const char *v = ft_env_raw(FT_ENV_DISABLE_PASSES);
    for (const char *p = v; p && *p;) {
        size_t len = strcspn(p, ",");
        bool found = false;
        for (int i = 1; i < N_PASSES - 1; i++)
            if (len && strlen(passes[i].name) == len && !strncmp(p, passes[i].name, len)) off[i] = found = true;
        if (len && !found)
            return ft_set_error(ctx, FT_ERR_INVALID_ARG, "FT_DISABLE_PASSES: unknown pass '%.*s' (%s)",
                                (int)(len < 64 ? len : 64), p, ft_graph_pass_names());
        p += len + (p[len] == ',');
    }
    return FT_OK;
}

ft_status ft_graph_optimize(ft_graph *g) {
    bool off[N_PASSES] = {false};
    bool fuse = !ft_env_flag(FT_ENV_DISABLE_FUSION, false);
    if (disabled_passes(g->ctx, off) != FT_OK) return g->ctx->status;
    for (int i = 0; i < N_PASSES; i++) {
        bool dce = passes[i].fn == ft_pass_dce;
        if (!dce && (!fuse || off[i])) continue;
        if (passes[i].fn(g) < 0) return g->ctx->status ? g->ctx->status : FT_ERR_INTERNAL;
        ft_graph_compact(g);
    }
    return g->ctx->status;
}
