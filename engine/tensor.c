/*
 * tensor.c - tensor headers, storage references and host transfers.
 *
 * Headers of tensors made by ops come from the context's arena: chunks of
 * FT_ARENA_CHUNK headers recycled by scope (a model forward is a scope), so an
 * eager op costs no malloc for its header. Storage is a refcounted allocator
 * block: a root and each of its views hold one reference, and the block goes
 * back to the caching allocator when the last one is released. Weights, model
 * outputs and caches use persistent (malloc'd) headers instead.
 */
#include "ft_internal.h"
#include "ft_checked.h"
#include "cuda_backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- headers ---- */

ft_tensor *ft_tensor_alloc_header(ft_ctx *ctx) {
    ft_arena *ar = &ctx->arena;
    if (!ar->cur || ar->cur_used == FT_ARENA_CHUNK) {
        ft_arena_chunk *next = ar->cur ? ar->cur->next : ar->head;
        if (!next) {
            next = (ft_arena_chunk *)calloc(1, sizeof *next);
            if (!next) {
                ft_set_error(ctx, FT_ERR_OOM, "out of host memory for tensor headers");
                return NULL;
            }
            if (ar->cur) ar->cur->next = next;
            else ar->head = next;
        }
        ar->cur = next;
        ar->cur_used = 0;
    }
    ft_tensor *t = &ar->cur->t[ar->cur_used++];
    memset(t, 0, sizeof *t);
    t->id = -1;
    t->device = ctx->device;
    t->ctx = ctx;
    ar->count++;
    return t;
}

int64_t ft_arena_mark(const ft_ctx *ctx) { return ctx->arena.count; }

void ft_arena_release_to(ft_ctx *ctx, int64_t mark) {
    ft_arena *ar = &ctx->arena;
    if (mark < 0) mark = 0;
    if (mark >= ar->count) return;
    int64_t i = 0;
    for (ft_arena_chunk *c = ar->head; c && i < ar->count; c = c->next) {
        for (int k = 0; k < FT_ARENA_CHUNK && i < ar->count; k++, i++) {
            if (i >= mark) ft_tensor_drop_storage(&c->t[k]);
        }
    }
    /* the slot at index `mark` becomes the next free one */
    ar->count = mark;
    if (mark == 0) {
        ar->cur = NULL;
        ar->cur_used = 0;
        return;
    }
    int64_t chunk = (mark - 1) / FT_ARENA_CHUNK; /* chunk holding the last kept slot */
    ar->cur = ar->head;
    for (int64_t k = 0; k < chunk; k++) ar->cur = ar->cur->next;
    ar->cur_used = (int)(mark - chunk * FT_ARENA_CHUNK);
}

ft_tensor *ft_tensor_new_persistent(ft_ctx *ctx) {
    ft_tensor *t = (ft_tensor *)calloc(1, sizeof *t);
    if (!t) {
        ft_set_error(ctx, FT_ERR_OOM, "out of host memory");
        return NULL;
    }
    t->id = -1;
    t->device = ctx->device;
    t->ctx = ctx;
    t->flags = FT_TF_PERSISTENT;
    return t;
}

void ft_tensor_free_persistent(ft_tensor *t) {
    if (!t) return;
    /* eager mode's CPU pack cache keys packed panels on the tensor: they go with it */
    if (t->ctx) ft_cpu_pack_cache_drop(t->ctx, t);
    ft_tensor_drop_storage(t);
    free(t);
}

ft_tensor *ft_tensor_keep(ft_ctx *ctx, const ft_tensor *t) {
    ft_tensor *k = ft_tensor_new_persistent(ctx);
    if (!k) return NULL;
    *k = *t;
    /* a kept tensor is a leaf: the nodes it came from are recycled with their scope */
    memset(k->src, 0, sizeof k->src);
    k->op = FT_OP_NONE;
    k->view_src = NULL;
    k->view_offs = 0;
    k->extra = NULL;
    k->id = -1;
    k->ctx = ctx;
    k->flags = (t->flags & ~(FT_TF_VIEW | FT_TF_RELEASED)) | FT_TF_PERSISTENT;
    if (k->block) k->block->refs++;
    return k;
}

/* ---- shapes ---- */

void ft_tensor_set_contiguous_strides(ft_tensor *t) {
    int64_t s = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        t->nb[i] = s;
        ft_mul_ok(s, t->ne[i], &s); /* saturates on a shape about to be refused */
    }
}

bool ft_tensor_contiguous(const ft_tensor *t) {
    int64_t s = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->ne[i] != 1 && t->nb[i] != s) return false;
        ft_mul_ok(s, t->ne[i], &s);
    }
    return true;
}

/* Saturating (INT64_MAX / SIZE_MAX past the limits): every tensor that gets
 * storage or reaches a kernel passed ft_tensor_check_size first, so these only
 * saturate on shapes that are about to be refused. */
int64_t ft_numel(const ft_tensor *t) {
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++)
        if (!ft_mul_ok(n, t->ne[i], &n)) return INT64_MAX;
    return n;
}

size_t ft_nbytes(const ft_tensor *t) {
    size_t b;
    return ft_bytes_ok(ft_numel(t), ft_dtype_size(t->dtype), &b) ? b : SIZE_MAX;
}

/* "[4611686018427387904,4] i64 holds more than 2^63 elements" or
 * "... is 2^50 bytes, more than the 2^48 a tensor may hold" */
static ft_status size_error(ft_ctx *ctx, ft_dtype dtype, int ndim, const int64_t *shape) {
    char sh[256];
    size_t k = 0;
    for (int i = 0; i < ndim && k < sizeof sh; i++)
        k += (size_t)snprintf(sh + k, sizeof sh - k, "%s%lld", i ? " x " : "", (long long)shape[i]);
    int64_t count = 1;
    bool fits = true;
    for (int i = 0; i < ndim && fits; i++) fits = ft_mul_ok(count, shape[i], &count);
    if (!fits)
        return ft_set_error(ctx, FT_ERR_SHAPE, "a tensor of %s elements is too large (more than 2^63 elements)",
                            sh);
    return ft_set_error(ctx, FT_ERR_SHAPE,
                        "a tensor of %s %s elements is too large (%lld elements of %zu bytes; at most 2^48 bytes)",
                        sh, ft_dtype_name(dtype), (long long)count, ft_dtype_size(dtype));
}

ft_status ft_tensor_check_size(ft_ctx *ctx, const ft_tensor *t) {
    int64_t n;
    if (ft_shape_numel_ok(t->ndim, t->ne, ft_dtype_size(t->dtype), &n)) return FT_OK;
    return size_error(ctx, t->dtype, t->ndim, t->ne);
}

bool ft_tensor_rows_layout(const ft_tensor *t, int64_t *rows, int64_t *row_stride) {
    if (t->ndim < 1) return false;
    int n = t->ndim;
    if (t->ne[n - 1] != 1 && t->nb[n - 1] != 1) return false;
    int64_t r = 1, rs = t->ne[n - 1];
    bool have = false;
    for (int i = n - 2; i >= 0; i--) {
        if (t->ne[i] == 1) continue;
        if (!have) {
            rs = t->nb[i];
            have = true;
        } else if (t->nb[i] != t->nb[i + 1] * t->ne[i + 1]) {
            /* dims between i and the innermost leading dim must be size 1 or packed */
            int j = i + 1;
            while (j < n - 1 && t->ne[j] == 1) j++;
            if (t->nb[i] != t->nb[j] * t->ne[j]) return false;
        }
        r *= t->ne[i];
    }
    if (rs < t->ne[n - 1] && r > 1) return false;
    if (rows) *rows = r;
    if (row_stride) *row_stride = rs;
    return true;
}

bool ft_gemm_operand(const ft_tensor *t, int64_t *batch, int64_t *batch_stride, bool *trans,
                     int64_t *ld) {
    int n = t->ndim;
    if (n < 2) return false;
    int64_t r = t->ne[n - 2], c = t->ne[n - 1];
    if (c == 1 || t->nb[n - 1] == 1) {
        *trans = false;
        *ld = r == 1 ? (c > 0 ? c : 1) : t->nb[n - 2];
        if (*ld < c) return false;
    } else if (r == 1 || t->nb[n - 2] == 1) {
        *trans = true;
        *ld = c == 1 ? (r > 0 ? r : 1) : t->nb[n - 1];
        if (*ld < r) return false;
    } else {
        return false;
    }
    /* batch dims: uniform stride over the non-1 ones (stride 0 = broadcast) */
    int64_t b = 1, bs = 0;
    int inner = -1;
    for (int i = n - 3; i >= 0; i--) {
        if (t->ne[i] == 1) continue;
        if (inner < 0) bs = t->nb[i];
        else if (t->nb[i] != t->nb[inner] * t->ne[inner]) return false;
        inner = i;
        b *= t->ne[i];
    }
    *batch = b;
    *batch_stride = b == 1 ? 0 : bs;
    return true;
}

int ft_norm_dim(int dim, int ndim) {
    if (dim < 0) dim += ndim;
    return dim >= 0 && dim < ndim ? dim : -1;
}

bool ft_shape_equal(const ft_tensor *a, const ft_tensor *b) {
    if (a->ndim != b->ndim) return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->ne[i] != b->ne[i]) return false;
    return true;
}

const char *ft_shape_str(const ft_tensor *t, char *buf, size_t size) {
    size_t n = 0;
    n += (size_t)snprintf(buf + n, size - n, "[");
    for (int i = 0; i < t->ndim && n < size; i++)
        n += (size_t)snprintf(buf + n, size - n, "%s%lld", i ? "," : "", (long long)t->ne[i]);
    if (n < size) snprintf(buf + n, size - n, "] %s", ft_dtype_name(t->dtype));
    return buf;
}

/* ---- storage ---- */

ft_status ft_tensor_alloc_storage(ft_ctx *ctx, ft_tensor *t) {
    if (ft_tensor_check_size(ctx, t)) return ctx->status;
    size_t bytes = ft_nbytes(t);
    ft_block *b = ft_allocator_alloc(&ctx->alloc, ctx, bytes ? bytes : 1);
    if (!b) return ctx->status;
    t->block = b;
    t->data = b->ptr;
    return FT_OK;
}

ft_status ft_tensor_copy_raw(ft_ctx *ctx, void *dst, const ft_tensor *src) {
    ft_kernel_fn copy = ctx->device == FT_DEVICE_CUDA ? ft_op_table[FT_OP_COPY].cuda : ft_op_table[FT_OP_COPY].cpu;
    if (!copy) return ft_set_error(ctx, FT_ERR_UNSUPPORTED, "no copy kernel on %s", ft_device_name(ctx->device));
    ft_tensor d = *src;
    d.op = FT_OP_COPY;
    memset(d.src, 0, sizeof d.src);
    d.src[0] = (ft_tensor *)src;
    ft_params_copy p = {(int32_t)src->dtype};
    memset(d.op_params, 0, sizeof d.op_params);
    memcpy(d.op_params, &p, sizeof p);
    ft_tensor_set_contiguous_strides(&d);
    d.data = dst;
    d.block = NULL;
    d.view_src = NULL;
    d.flags = 0;
    return (ft_status)copy(ctx, &d);
}

void ft_tensor_drop_storage(ft_tensor *t) {
    if (t->block && !(t->flags & FT_TF_RELEASED)) ft_block_unref(t->block);
    t->block = NULL;
    t->flags |= FT_TF_RELEASED;
}

ft_status ft_copy_to_device(ft_ctx *ctx, void *dst, const void *src, size_t bytes) {
    if (ctx->device == FT_DEVICE_CPU) {
        if (bytes) memcpy(dst, src, bytes);
        return FT_OK;
    }
#ifdef FT_WITH_CUDA
    return ft_cuda_h2d(ctx, dst, src, bytes);
#else
    return ft_set_error(ctx, FT_ERR_UNSUPPORTED, "this build has no CUDA backend");
#endif
}

static uint64_t next_version; /* atomic: models load on several threads at once */

void ft_tensor_mark_written(ft_tensor *t) {
    if (t->block) t->block->version = __atomic_add_fetch(&next_version, 1, __ATOMIC_RELAXED);
}

ft_status ft_weight_store(ft_ctx *ctx, ft_tensor *t, const void *src, size_t bytes) {
    ft_status st = ft_copy_to_device(ctx, t->data, src, bytes);
    ft_tensor_mark_written(t); /* even a failed copy may have written part of it */
    return st;
}

ft_status ft_copy_to_host(ft_ctx *ctx, void *dst, const void *src, size_t bytes) {
    if (ctx->device == FT_DEVICE_CPU) {
        if (bytes) memcpy(dst, src, bytes);
        return FT_OK;
    }
#ifdef FT_WITH_CUDA
    return ft_cuda_d2h(ctx, dst, src, bytes);
#else
    return ft_set_error(ctx, FT_ERR_UNSUPPORTED, "this build has no CUDA backend");
#endif
}

/* ---- public accessors ---- */

int ft_tensor_ndim(const ft_tensor *t) { return t ? t->ndim : 0; }

int64_t ft_tensor_dim(const ft_tensor *t, int dim) {
    if (!t) return 0;
    int d = ft_norm_dim(dim, t->ndim);
    return d < 0 ? 0 : t->ne[d];
}

int64_t ft_tensor_stride(const ft_tensor *t, int dim) {
    if (!t) return 0;
    int d = ft_norm_dim(dim, t->ndim);
    return d < 0 ? 0 : t->nb[d];
}

int64_t ft_tensor_numel(const ft_tensor *t) { return t ? ft_numel(t) : 0; }
ft_dtype ft_tensor_dtype(const ft_tensor *t) { return t ? t->dtype : FT_DTYPE_F32; }
ft_device ft_tensor_device(const ft_tensor *t) { return t ? t->device : FT_DEVICE_CPU; }
int ft_tensor_is_contiguous(const ft_tensor *t) { return t && ft_tensor_contiguous(t); }

const char *ft_tensor_describe(const ft_tensor *t, char *buf, size_t size) {
    if (!buf || !size) return "";
    if (!t) {
        snprintf(buf, size, "(null)");
        return buf;
    }
    return ft_shape_str(t, buf, size);
}

static int check_shape_arg(ft_ctx *ctx, ft_dtype dtype, int ndim, const int64_t *shape) {
    if ((unsigned)dtype >= FT_DTYPE_COUNT)
        return ft_set_error(ctx, FT_ERR_INVALID_ARG, "invalid dtype %d", (int)dtype);
    if (ndim < 0 || ndim > FT_MAX_DIMS || (ndim && !shape))
        return ft_set_error(ctx, FT_ERR_INVALID_ARG, "invalid rank %d (at most %d)", ndim, FT_MAX_DIMS);
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 0) return ft_set_error(ctx, FT_ERR_SHAPE, "negative size in dim %d", i);
    int64_t n;
    if (!ft_shape_numel_ok(ndim, shape, ft_dtype_size(dtype), &n)) return size_error(ctx, dtype, ndim, shape);
    return FT_OK;
}

static ft_tensor *tensor_empty(ft_ctx *ctx, ft_dtype dtype, int ndim, const int64_t *shape) {
    if (!ctx || ctx->status != FT_OK || check_shape_arg(ctx, dtype, ndim, shape)) return NULL;
    ft_tensor *t = ft_tensor_alloc_header(ctx);
    if (!t) return NULL;
    t->dtype = dtype;
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++) t->ne[i] = shape[i];
    ft_tensor_set_contiguous_strides(t);
    t->flags = FT_TF_CONST;
    if (ctx->exec == FT_EXEC_EAGER && ft_tensor_alloc_storage(ctx, t)) return NULL;
    return t;
}

ft_tensor *ft_tensor_empty(ft_ctx *ctx, ft_dtype dtype, int ndim, const int64_t *shape) {
    if (!ctx || ft_ctx_enter(ctx, __func__) != FT_OK) return NULL;
    ft_tensor *t = tensor_empty(ctx, dtype, ndim, shape);
    ft_ctx_leave(ctx);
    return t;
}

static ft_tensor *tensor_from_host(ft_ctx *ctx, ft_dtype dtype, int ndim, const int64_t *shape,
                                   const void *data) {
    if (!ctx || ctx->status != FT_OK) return NULL;
    if (!data) {
        ft_set_error(ctx, FT_ERR_INVALID_ARG, "ft_tensor_from_host: data is NULL");
        return NULL;
    }
    if (ctx->exec == FT_EXEC_TRACE) {
        /* the tracer keeps its own copy of constants (graph/trace.c) */
        extern ft_tensor *ft_trace_constant(ft_ctx *, ft_dtype, int, const int64_t *, const void *);
        if (check_shape_arg(ctx, dtype, ndim, shape)) return NULL;
        return ft_trace_constant(ctx, dtype, ndim, shape, data);
    }
    ft_tensor *t = tensor_empty(ctx, dtype, ndim, shape);
    if (!t) return NULL;
    if (ft_copy_to_device(ctx, t->data, data, ft_nbytes(t))) return NULL;
    return t;
}

ft_tensor *ft_tensor_from_host(ft_ctx *ctx, ft_dtype dtype, int ndim, const int64_t *shape,
                               const void *data) {
    if (!ctx || ft_ctx_enter(ctx, __func__) != FT_OK) return NULL;
    ft_tensor *t = tensor_from_host(ctx, dtype, ndim, shape, data);
    ft_ctx_leave(ctx);
    return t;
}

static ft_status tensor_to_host(ft_ctx *ctx, const ft_tensor *t, ft_dtype dtype, void *out, size_t size);

ft_status ft_tensor_to_host(ft_ctx *ctx, const ft_tensor *t, ft_dtype dtype, void *out, size_t size) {
    if (!ctx) return FT_ERR_INVALID_ARG;
    ft_status st = ft_ctx_enter(ctx, __func__);
    if (st != FT_OK) return st;
    st = tensor_to_host(ctx, t, dtype, out, size);
    ft_ctx_leave(ctx);
    return st;
}

static ft_status tensor_to_host(ft_ctx *ctx, const ft_tensor *t, ft_dtype dtype, void *out, size_t size) {
    if (!FT_TENSOR_OK(ctx, t) || !FT_ARG_OK(ctx, out)) return ctx->status ? ctx->status : FT_ERR_INVALID_ARG;
    if (ctx->status != FT_OK) return ctx->status;
    if (!t->data && ft_numel(t) > 0)
        return ft_set_error(ctx, FT_ERR_INVALID_ARG, "ft_tensor_to_host: tensor has no data");
    int64_t n = ft_numel(t);
    if (size < (size_t)n * ft_dtype_size(dtype))
        return ft_set_error(ctx, FT_ERR_INVALID_ARG,
                            "ft_tensor_to_host: buffer of %zu bytes is too small for %lld %s values",
                            size, (long long)n, ft_dtype_name(dtype));
    if ((unsigned)dtype >= FT_DTYPE_COUNT || ft_dtype_is_float(dtype) != ft_dtype_is_float(t->dtype))
        return ft_set_error(ctx, FT_ERR_INVALID_ARG, "ft_tensor_to_host: cannot convert %s to %s",
                            ft_dtype_name(t->dtype), ft_dtype_name(dtype));
    const ft_tensor *src = t;
    int64_t mark = ft_arena_mark(ctx);
    if (!ft_tensor_contiguous(t)) {
        src = ft_contiguous(ctx, (ft_tensor *)t);
        if (!src) return ctx->status;
    }
    size_t bytes = (size_t)n * ft_dtype_size(src->dtype);
    ft_status st = FT_OK;
    if (src->dtype == dtype) {
        st = ft_copy_to_host(ctx, out, src->data, bytes);
    } else {
        void *tmp = malloc(bytes ? bytes : 1);
        if (!tmp) st = ft_set_error(ctx, FT_ERR_OOM, "out of host memory");
        else {
            st = ft_copy_to_host(ctx, tmp, src->data, bytes);
            if (!st) st = ft_convert_host(dtype, out, src->dtype, tmp, n);
            free(tmp);
        }
    }
    if (src != t) ft_arena_release_to(ctx, mark);
    return st;
}

void ft_tensor_release(ft_ctx *ctx, ft_tensor *t) {
    if (!t || (t->flags & FT_TF_PERSISTENT)) return;
    /* another context's tensor, or another thread at work: its allocator is not ours to touch */
    if (!ctx || ft_ctx_enter(ctx, __func__) != FT_OK) return;
    if (ft_tensor_of_ctx(ctx, t, __func__, "t")) ft_tensor_drop_storage(t);
    ft_ctx_leave(ctx);
}
