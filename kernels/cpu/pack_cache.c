/*
 * pack_cache.c - eager mode's cache of weights packed in the SGEMM's panel
 * layouts, per context: linear weights as B panels (per output group for a
 * grouped linear), convolution weights as A panels per group (graph and static
 * plans pack once per plan instead, ft_cpu_prepack).
 *
 * The key. A data pointer alone is not safe: eager activations are reused at the
 * same addresses, and a freed model's weights can come back at the same address
 * with other values. Only model parameters are cached (FT_TF_WEIGHT, storage
 * with a non-zero version): every write of a parameter's data goes through
 * ft_weight_store / ft_tensor_mark_written, which stamp its storage block with a
 * fresh process-wide version (the allocator clears it when it hands a block
 * out), so (header, block, version, data, dtype, shape, strides) names one
 * content, and (kind, groups) the panels cut from it; headers that share the
 * storage (copies, keeps) see the same stamp.
 * Tensors made by ft_tensor_from_host are never cached: the public API does not
 * mark them, and nothing would tell the cache when a caller reuses their memory.
 *
 * Bounded: past the cap (1 GiB, or FT_CPU_PACK_CACHE_MB; 0 turns the cache
 * off) further weights are packed per call; an entry goes when its header's
 * data is rewritten (replaced), when its model is freed (ft_cpu_pack_cache_drop)
 * and with the context; lowering the cap drops least-recently-used entries.
 */
#include "pack_cache.h"
#include "cpu_kernels.h"
#include "scratch.h"

#include <stdlib.h>
#include <string.h>

/* What an entry holds: a linear weight's B panels (W^T, per output group of a
 * grouped linear), or a convolution weight's A panels per group. One weight
 * used both ways gets one entry per kind. */
typedef enum pc_kind { PC_LINEAR, PC_CONV } pc_kind;

typedef struct pc_entry {
    const ft_tensor *w;
    const ft_block *block;
    uint64_t version;
    const void *data;
    ft_dtype dtype;
    int ndim;
    int64_t ne[FT_MAX_DIMS], nb[FT_MAX_DIMS];
    pc_kind kind;
    int64_t groups; /* a grouped linear's output groups (1: plain), a convolution's groups */
    ft_cpu_packed_b *p;
    size_t bytes;
    uint64_t used; /* LRU clock */
} pc_entry;

struct ft_cpu_pack_cache {
    pc_entry *e;
    int n, cap_n;
    size_t bytes, limit;
    uint64_t clock;
};

static int64_t n_hits, n_misses; /* test hooks (atomic) */

static struct ft_cpu_pack_cache *cache_of(ft_ctx *ctx) {
    if (ctx->cpu_pack_cache) return ctx->cpu_pack_cache;
    struct ft_cpu_pack_cache *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->limit = (size_t)1 << 30;
    /* engine/env.c range-checks it when the context is made */
    c->limit = (size_t)ft_env_num(FT_ENV_CPU_PACK_CACHE_MB, 1024) << 20;
    ctx->cpu_pack_cache = c;
    return c;
}

static void drop_at(struct ft_cpu_pack_cache *c, int i) {
    ft_cpu_packed_b_free(c->e[i].p);
    c->bytes -= c->e[i].bytes;
    c->e[i] = c->e[--c->n];
}

/* Drops least-recently-used entries until `more` bytes fit under the cap. */
static void evict(struct ft_cpu_pack_cache *c, size_t more) {
    while (c->n > 0 && c->bytes + more > c->limit) {
        int lru = 0;
        for (int i = 1; i < c->n; i++)
            if (c->e[i].used < c->e[lru].used) lru = i;
        drop_at(c, lru);
    }
}

/* e was cut from w's current content (any kind, any groups). */
static bool same_content(const pc_entry *e, const ft_tensor *w) {
    if (e->block != w->block || e->version != w->block->version || e->data != w->data ||
        e->dtype != w->dtype || e->ndim != w->ndim)
        return false;
    for (int d = 0; d < w->ndim; d++)
        if (e->ne[d] != w->ne[d] || e->nb[d] != w->nb[d]) return false;
    return true;
}

/* w's panels from the cache, packed on a miss (see pc_kind; groups >= 1). */
static const ft_cpu_packed_b *cache_get(ft_ctx *ctx, const ft_tensor *w, pc_kind kind, int64_t groups) {
    if (groups < 1 || !w || !w->data || !(w->flags & FT_TF_WEIGHT) || !w->block ||
        w->block->version == 0 || (w->flags & FT_TF_RELEASED) || w->ndim < 2 || w->ndim > FT_MAX_DIMS ||
        (kind == PC_LINEAR && w->ndim != 2) || !ft_dtype_is_float(w->dtype) || w->device != FT_DEVICE_CPU)
        return NULL;
    struct ft_cpu_pack_cache *c = cache_of(ctx);
    if (!c || c->limit == 0) return NULL;
    for (int i = c->n - 1; i >= 0; i--) {
        if (c->e[i].w != w) continue;
        if (!same_content(&c->e[i], w)) {
            drop_at(c, i); /* this header's data was rewritten (or it is another tensor now) */
            continue;
        }
        if (c->e[i].kind == kind && c->e[i].groups == groups) {
            c->e[i].used = ++c->clock;
            __atomic_fetch_add(&n_hits, 1, __ATOMIC_RELAXED);
            return c->e[i].p;
        }
    }
    __atomic_fetch_add(&n_misses, 1, __ATOMIC_RELAXED);
    /* W [N, K...]: N / groups rows (output channels) per group, K the rest */
    int64_t n = w->ne[0], k = n > 0 ? ft_numel(w) / n : 0, ng = n / groups;
    if (n <= 0 || k <= 0 || n % groups) return NULL;
    /* an upper bound before packing (each group's rows or columns padded to 16) */
    size_t bytes = (size_t)groups * (size_t)((ng + 15) / 16 * 16) * (size_t)k * sizeof(float);
    /* full: this weight is packed per call. No eviction: a forward walks its weights
     * in the same cycle every time, and least-recently-used would drop each one
     * just before it is needed again, paying a pack and an allocation per call */
    if (c->bytes + bytes > c->limit) return NULL;
    if (c->n == c->cap_n) {
        int nc = c->cap_n ? 2 * c->cap_n : 64;
        pc_entry *ne = realloc(c->e, (size_t)nc * sizeof *ne);
        if (!ne) return NULL;
        c->e = ne;
        c->cap_n = nc;
    }
    /* a one-off f32 copy of an f16/bf16 weight is malloc'd: in the scratch it would
     * stay for the context's life */
    ft_cpu_scratch *sc = ft_cpu_scratch_swap(NULL);
    ft_cpu_f32 fw = {0};
    ft_cpu_packed_b *p = NULL;
    if (ft_cpu_f32_get(w, ft_tensor_contiguous(w), &fw) == 0) {
        if (kind == PC_LINEAR) /* W [N, K] is op(B) = W^T; row block g is group g's */
            p = ft_cpu_pack_b_groups(groups, true, k, ng, fw.p, k, ng * k);
        else /* W [Cout, K]: Cout / groups rows per group */
            p = ft_cpu_pack_a_groups(groups, ng, k, fw.p, k);
        ft_cpu_f32_release(&fw);
    }
    ft_cpu_scratch_swap(sc);
    if (!p) return NULL;
    p->src = w->data;
    pc_entry *e = &c->e[c->n++];
    *e = (pc_entry){w, w->block, w->block->version, w->data, w->dtype, w->ndim, {0}, {0}, kind, groups, p,
                    (size_t)(p->npad * p->k * p->groups) * sizeof(float), ++c->clock};
    for (int d = 0; d < w->ndim; d++) {
        e->ne[d] = w->ne[d];
        e->nb[d] = w->nb[d];
    }
    c->bytes += e->bytes;
    return p;
}

const ft_cpu_packed_b *ft_cpu_pack_cache_linear(ft_ctx *ctx, const ft_tensor *w) {
    return cache_get(ctx, w, PC_LINEAR, 1);
}

const ft_cpu_packed_b *ft_cpu_pack_cache_linear_groups(ft_ctx *ctx, const ft_tensor *w, int64_t groups) {
    return cache_get(ctx, w, PC_LINEAR, groups);
}

const ft_cpu_packed_b *ft_cpu_pack_cache_conv(ft_ctx *ctx, const ft_tensor *w, int64_t groups) {
    return cache_get(ctx, w, PC_CONV, groups);
}

void ft_cpu_pack_cache_drop(ft_ctx *ctx, const ft_tensor *w) {
    struct ft_cpu_pack_cache *c = ctx ? ctx->cpu_pack_cache : NULL;
    if (!c || !w) return;
    for (int i = c->n - 1; i >= 0; i--)
        if (c->e[i].w == w) drop_at(c, i);
}

void ft_cpu_pack_cache_free(ft_ctx *ctx) {
    struct ft_cpu_pack_cache *c = ctx->cpu_pack_cache;
    if (!c) return;
    while (c->n > 0) drop_at(c, c->n - 1);
    free(c->e);
    free(c);
    ctx->cpu_pack_cache = NULL;
}

size_t ft_cpu_pack_cache_bytes(const ft_ctx *ctx) {
    const struct ft_cpu_pack_cache *c = ctx ? ctx->cpu_pack_cache : NULL;
    return c ? c->bytes : 0;
}

void ft_cpu_pack_cache_set_limit(ft_ctx *ctx, size_t bytes) {
    struct ft_cpu_pack_cache *c = cache_of(ctx);
    if (!c) return;
    c->limit = bytes;
    evict(c, 0);
}

int64_t ft_cpu_pack_cache_hits(void) { return __atomic_load_n(&n_hits, __ATOMIC_RELAXED); }
int64_t ft_cpu_pack_cache_misses(void) { return __atomic_load_n(&n_misses, __ATOMIC_RELAXED); }
