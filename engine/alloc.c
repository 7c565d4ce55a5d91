/*
 * alloc.c - the caching allocator, one per device. Requests are rounded up to
 * a size class (four classes per power of two, 256 B minimum); freed blocks
 * wait on their class's free list and are handed out again, so a steady-state
 * forward makes no system allocation (no malloc / cudaMalloc). The system
 * allocation behind it is pluggable (plain aligned malloc here, cudaMalloc in
 * the CUDA backend). Counters follow PyTorch's: allocated, reserved, peak.
 */
#include "ft_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIN_SHIFT 8 /* 256 bytes */

int ft_alloc_size_class(size_t bytes, size_t *class_bytes) {
    if (bytes < ((size_t)1 << MIN_SHIFT)) bytes = (size_t)1 << MIN_SHIFT;
    int k = 63 - __builtin_clzll((unsigned long long)bytes); /* 2^k <= bytes < 2^(k+1) */
    size_t base = (size_t)1 << k, step = base / 4;
    size_t q = (bytes - base + step - 1) / step; /* 0..4 quarter steps above base */
    if (q == 4) { k++; q = 0; base <<= 1; step <<= 1; }
    int cls = (k - MIN_SHIFT) * 4 + (int)q;
    if (cls >= FT_ALLOC_NUM_CLASSES) return -1;
    *class_bytes = base + q * step;
    return cls;
}

void ft_allocator_init(ft_allocator *a, ft_device dev, const char *name) {
    memset(a, 0, sizeof *a);
    a->device = dev;
    a->name = name;
    a->caching = 1;
}

ft_block *ft_allocator_alloc(ft_allocator *a, ft_ctx *ctx, size_t bytes) {
    size_t cbytes = 0;
    int cls = ft_alloc_size_class(bytes, &cbytes);
    if (cls < 0) {
        ft_set_error(ctx, FT_ERR_OOM, "%s: cannot allocate %zu bytes (too large)", a->name, bytes);
        return NULL;
    }
    ft_block *b = a->free_list[cls];
    if (b) {
        a->free_list[cls] = b->next;
    } else {
        char err[256] = "";
        if (a->limit && a->stats.reserved + cbytes > a->limit) ft_allocator_trim(a);
        if (a->limit && a->stats.reserved + cbytes > a->limit) {
            ft_set_error(ctx, FT_ERR_OOM,
                         "%s: out of memory allocating %zu bytes (%zu allocated, %zu reserved): the "
                         "context's memory limit is %zu bytes",
                         a->name, cbytes, a->stats.allocated, a->stats.reserved, a->limit);
            return NULL;
        }
        void *p = a->sys_alloc(a, cbytes, err, sizeof err);
        if (!p) {
            ft_allocator_trim(a); /* give cached blocks back and try once more */
            p = a->sys_alloc(a, cbytes, err, sizeof err);
        }
        if (!p) {
            ft_set_error(ctx, FT_ERR_OOM,
                         "%s: out of memory allocating %zu bytes (%zu allocated, %zu reserved): %s",
                         a->name, cbytes, a->stats.allocated, a->stats.reserved, err);
            return NULL;
        }
        b = (ft_block *)calloc(1, sizeof *b);
        if (!b) {
            a->sys_free(a, p);
            ft_set_error(ctx, FT_ERR_OOM, "out of host memory");
            return NULL;
        }
        b->ptr = p;
        b->size = cbytes;
        b->size_class = cls;
        b->owner = a;
        a->stats.reserved += cbytes;
        a->stats.n_sys_alloc++;
    }
    b->refs = 1;
    b->next = NULL;
    b->version = 0; /* a reused block holds nothing a cache may know */
    a->stats.allocated += b->size;
    a->stats.n_alloc++;
    if (a->stats.allocated > a->stats.peak_allocated) a->stats.peak_allocated = a->stats.allocated;
    return b;
}

void ft_block_unref(ft_block *b) {
    if (!b || --b->refs > 0) return;
    ft_allocator *a = b->owner;
    a->stats.allocated -= b->size;
    if (a->caching) {
        b->next = a->free_list[b->size_class];
        a->free_list[b->size_class] = b;
    } else {
        a->stats.reserved -= b->size;
        a->sys_free(a, b->ptr);
        free(b);
    }
}

void ft_allocator_trim(ft_allocator *a) {
    for (int c = 0; c < FT_ALLOC_NUM_CLASSES; c++) {
        ft_block *b = a->free_list[c];
        while (b) {
            ft_block *n = b->next;
            a->stats.reserved -= b->size;
            a->sys_free(a, b->ptr);
            free(b);
            b = n;
        }
        a->free_list[c] = NULL;
    }
}

void ft_allocator_destroy(ft_allocator *a) {
    if (!a->sys_free) return;
    ft_allocator_trim(a);
}

static void *cpu_sys_alloc(ft_allocator *a, size_t bytes, char *err, size_t errsize) {
    (void)a;
    void *p = NULL;
    size_t sz = (bytes + 63) & ~(size_t)63;
    if (posix_memalign(&p, 64, sz) != 0) {
        snprintf(err, errsize, "posix_memalign failed");
        return NULL;
    }
    return p;
}

static void cpu_sys_free(ft_allocator *a, void *p) {
    (void)a;
    free(p);
}

void ft_allocator_init_cpu(ft_allocator *a) {
    ft_allocator_init(a, FT_DEVICE_CPU, "cpu allocator");
    a->sys_alloc = cpu_sys_alloc;
    a->sys_free = cpu_sys_free;
}

/* ---- plan-owned scratch ---- */

ft_block *ft_scratch_pool_take(ft_scratch_pool *p, size_t bytes) {
    ft_block *best = NULL;
    for (int i = 0; i < p->n; i++) {
        ft_block *b = p->blk[i];
        /* refs == 1: only the pool holds it, no kernel is using it right now */
        if (b->refs == 1 && b->size >= bytes && (!best || b->size < best->size)) best = b;
    }
    if (best) best->refs++;
    return best;
}

int ft_scratch_pool_add(ft_scratch_pool *p, ft_block *b) {
    if (p->n == p->cap) {
        int cap = p->cap ? 2 * p->cap : 4;
        ft_block **nb = (ft_block **)realloc(p->blk, (size_t)cap * sizeof *nb);
        if (!nb) return -1;
        p->blk = nb;
        p->cap = cap;
    }
    b->refs++;
    p->blk[p->n++] = b;
    p->bytes += b->size;
    return 0;
}

void ft_scratch_pool_release(ft_scratch_pool *p) {
    if (!p) return;
    for (int i = 0; i < p->n; i++) ft_block_unref(p->blk[i]);
    free(p->blk);
    memset(p, 0, sizeof *p);
}
