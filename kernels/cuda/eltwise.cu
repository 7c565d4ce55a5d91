/*
 * eltwise.cu - CUDA elementwise ops: binary add/sub/mul/div with NumPy
 * broadcasting over any strides (0 included), scale (x * alpha + beta), the
 * unary activations, and the graph's fused elementwise chains. The output is
 * always contiguous; math is f32 whatever the storage.
 *
 * Two paths per op: a dense one (every operand contiguous with the output's
 * shape) that moves 16 bytes per access when the pointers allow, and an N-d
 * path that walks collapsed dims with 32-bit index math when offsets fit.
 */
#include "strided.cuh"

/* ------------------------------------------------------------------------- */
/* shared host helpers                                                        */
/* ------------------------------------------------------------------------- */

/* Whether t broadcasts (right-aligned) to the output shape of dst. */
static bool ft_broadcasts_to(const ft_tensor *t, const ft_tensor *dst) {
    if (t->ndim > dst->ndim) return false;
    for (int i = 0; i < t->ndim; i++) {
        int64_t a = t->ne[t->ndim - 1 - i], b = dst->ne[dst->ndim - 1 - i];
        if (a != b && a != 1) return false;
    }
    return true;
}

/* Contiguous and exactly the output's shape: readable at the output's index. */
static bool ft_dense_like(const ft_tensor *t, const ft_tensor *dst) {
    return ft_shape_equal(t, dst) && ft_tensor_contiguous(t);
}

template <int K> static void ft_nd_init(ft_nd<K> *d, const ft_tensor *dst) {
    d->ndim = dst->ndim;
    for (int i = 0; i < dst->ndim; i++) d->ne[i] = dst->ne[i];
}

__device__ __forceinline__ float ft_binop(int op, float a, float b) {
    switch (op) {
    case FT_OP_ADD: return a + b;
    case FT_OP_SUB: return a - b;
    case FT_OP_MUL: return a * b;
    default: return a / b;
    }
}

/* ------------------------------------------------------------------------- */
/* binary                                                                     */
/* ------------------------------------------------------------------------- */

template <typename T, int V>
__global__ void ft_k_binary_dense(T *__restrict__ out, const T *__restrict__ a,
                                  const T *__restrict__ b, int64_t n, int op, int vec) {
    FT_KERNEL_PROLOGUE();
    int64_t tid = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    int64_t step = (int64_t)gridDim.x * blockDim.x;
    int64_t nv = vec ? n / V : 0;
    if (vec) {
        const ft_vec<T, V> *va = reinterpret_cast<const ft_vec<T, V> *>(a);
        const ft_vec<T, V> *vb = reinterpret_cast<const ft_vec<T, V> *>(b);
        ft_vec<T, V> *vo = reinterpret_cast<ft_vec<T, V> *>(out);
        for (int64_t i = tid; i < nv; i += step) {
            ft_vec<T, V> x = va[i], y = vb[i], z;
#pragma unroll
            for (int j = 0; j < V; j++) ft_st(&z.v[j], ft_binop(op, ft_ld(&x.v[j]), ft_ld(&y.v[j])));
            vo[i] = z;
        }
    }
    for (int64_t i = nv * V + tid; i < n; i += step)
        ft_st(out + i, ft_binop(op, ft_ld(a + i), ft_ld(b + i)));
}

template <typename T, typename I>
__global__ void ft_k_binary_nd(T *__restrict__ out, const T *__restrict__ a, const T *__restrict__ b,
                               const __grid_constant__ ft_nd<2> d, int64_t n, int op) {
    FT_KERNEL_PROLOGUE();
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        I off[2];
        ft_nd_offsets<2, I>(d, (I)i, off);
        ft_st(out + i, ft_binop(op, ft_ld(a + off[0]), ft_ld(b + off[1])));
    }
}

struct ft_binary_fn {
    ft_ctx *ctx;
    ft_tensor *dst;
    template <typename T> int run() {
        const ft_tensor *a = dst->src[0], *b = dst->src[1];
        int64_t n = ft_numel(dst);
        cudaStream_t st = ft_cuda_stream(ctx);
        T *out = (T *)dst->data;
        if (ft_dense_like(a, dst) && ft_dense_like(b, dst)) {
            constexpr int V = 16 / sizeof(T);
            int vec = ft_cu_aligned(out, 16) && ft_cu_aligned(a->data, 16) &&
                      ft_cu_aligned(b->data, 16);
            unsigned blocks = ft_cuda_blocks(vec ? n / V + 1 : n, FT_EW_THREADS);
            FT_LAUNCH(ctx, blocks, FT_EW_THREADS, 0, st, ft_k_binary_dense<T, V>)(
                out, (const T *)a->data, (const T *)b->data, n, (int)dst->op, vec);
            FT_CUDA_LAUNCH_CHECK(ctx, "binary (dense)");
            return FT_OK;
        }
        ft_nd<2> d;
        ft_nd_init(&d, dst);
        ft_nd_set_operand(&d, 0, a, dst->ndim);
        ft_nd_set_operand(&d, 1, b, dst->ndim);
        ft_nd_collapse(&d);
        unsigned blocks = ft_cuda_blocks(n, FT_EW_THREADS);
        if (ft_nd_fits_i32(&d, n))
            FT_LAUNCH(ctx, blocks, FT_EW_THREADS, 0, st, ft_k_binary_nd<T, int32_t>)(
                out, (const T *)a->data, (const T *)b->data, d, n, (int)dst->op);
        else
            FT_LAUNCH(ctx, blocks, FT_EW_THREADS, 0, st, ft_k_binary_nd<T, int64_t>)(
                out, (const T *)a->data, (const T *)b->data, d, n, (int)dst->op);
        FT_CUDA_LAUNCH_CHECK(ctx, "binary (strided)");
        return FT_OK;
    }
};

FT_CUDA_KERNEL(binary) {
    const ft_tensor *a = dst->src[0], *b = dst->src[1];
    if (dst->op != FT_OP_ADD && dst->op != FT_OP_SUB && dst->op != FT_OP_MUL && dst->op != FT_OP_DIV)
        return ft_set_error(ctx, FT_ERR_INTERNAL, "binary kernel called for op %s",
                            ft_op_name(dst->op));
    if (ft_numel(dst) == 0) return FT_OK;
    if (!ft_broadcasts_to(a, dst) || !ft_broadcasts_to(b, dst))
        return ft_set_error(ctx, FT_ERR_SHAPE, "binary inputs do not broadcast to the output");
    if (a->dtype != dst->dtype || b->dtype != dst->dtype)
        return ft_set_error(ctx, FT_ERR_INVALID_ARG, "binary inputs must share the output dtype");
    ft_binary_fn f = {ctx, dst};
    return FT_DISPATCH_FLOAT(ctx, dst->dtype, f);
}

/* ------------------------------------------------------------------------- */
/* scale and unary: y = act < 0 ? x * alpha + beta : act(x)                   */
/* ------------------------------------------------------------------------- */

/* A unary op as the CPU reference computes it (ft_cpu_unary_op, used by the
 * unary kernels and the fused chains): RELU keeps NaN, as torch.relu does and
 * as every fused epilogue now does too (strided.cuh's ft_relu). */
__device__ __forceinline__ float ft_ew_act(int act, float x) {
    if (act == FT_ACT_RELU) return (x > 0.0f || x != x) ? x : 0.0f;
    return ft_act_apply(act, x);
}

__device__ __forceinline__ float ft_map1(float x, int act, float alpha, float beta) {
    return act < 0 ? x * alpha + beta : ft_ew_act(act, x);
}

template <typename T, int V>
__global__ void ft_k_map_dense(T *__restrict__ out, const T *__restrict__ x, int64_t n, int act,
                               float alpha, float beta, int vec) {
    FT_KERNEL_PROLOGUE();
    int64_t tid = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    int64_t step = (int64_t)gridDim.x * blockDim.x;
    int64_t nv = vec ? n / V : 0;
    if (vec) {
        const ft_vec<T, V> *vx = reinterpret_cast<const ft_vec<T, V> *>(x);
        ft_vec<T, V> *vo = reinterpret_cast<ft_vec<T, V> *>(out);
        for (int64_t i = tid; i < nv; i += step) {
            ft_vec<T, V> a = vx[i], z;
#pragma unroll
            for (int j = 0; j < V; j++) ft_st(&z.v[j], ft_map1(ft_ld(&a.v[j]), act, alpha, beta));
            vo[i] = z;
        }
    }
    for (int64_t i = nv * V + tid; i < n; i += step)
        ft_st(out + i, ft_map1(ft_ld(x + i), act, alpha, beta));
}

template <typename T, typename I>
__global__ void ft_k_map_nd(T *__restrict__ out, const T *__restrict__ x,
                            const __grid_constant__ ft_nd<1> d, int64_t n,
                            int act, float alpha, float beta) {
    FT_KERNEL_PROLOGUE();
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        I off[1];
        ft_nd_offsets<1, I>(d, (I)i, off);
        ft_st(out + i, ft_map1(ft_ld(x + off[0]), act, alpha, beta));
    }
}

struct ft_map_fn {
    ft_ctx *ctx;
    ft_tensor *dst;
    int act;
    float alpha, beta;
    template <typename T> int run() {
        const ft_tensor *x = dst->src[0];
        int64_t n = ft_numel(dst);
        cudaStream_t st = ft_cuda_stream(ctx);
        T *out = (T *)dst->data;
        if (ft_dense_like(x, dst)) {
            constexpr int V = 16 / sizeof(T);
            int vec = ft_cu_aligned(out, 16) && ft_cu_aligned(x->data, 16);
            unsigned blocks = ft_cuda_blocks(vec ? n / V + 1 : n, FT_EW_THREADS);
            FT_LAUNCH(ctx, blocks, FT_EW_THREADS, 0, st, ft_k_map_dense<T, V>)(out, (const T *)x->data, n, act,
                                                                   alpha, beta, vec);
            FT_CUDA_LAUNCH_CHECK(ctx, ft_op_name(dst->op));
            return FT_OK;
        }
        ft_nd<1> d;
        ft_nd_init(&d, dst);
        ft_nd_set_operand(&d, 0, x, dst->ndim);
        ft_nd_collapse(&d);
        unsigned blocks = ft_cuda_blocks(n, FT_EW_THREADS);
        if (ft_nd_fits_i32(&d, n))
            FT_LAUNCH(ctx, blocks, FT_EW_THREADS, 0, st, ft_k_map_nd<T, int32_t>)(out, (const T *)x->data, d, n,
                                                                      act, alpha, beta);
        else
            FT_LAUNCH(ctx, blocks, FT_EW_THREADS, 0, st, ft_k_map_nd<T, int64_t>)(out, (const T *)x->data, d, n,
                                                                      act, alpha, beta);
        FT_CUDA_LAUNCH_CHECK(ctx, ft_op_name(dst->op));
        return FT_OK;
    }
};

static int ft_map_run(ft_ctx *ctx, ft_tensor *dst, int act, float alpha, float beta) {
    const ft_tensor *x = dst->src[0];
    if (ft_numel(dst) == 0) return FT_OK;
    if (!ft_shape_equal(x, dst) || x->dtype != dst->dtype)
        return ft_set_error(ctx, FT_ERR_INTERNAL, "%s: output shape or dtype differs from the input",
                            ft_op_name(dst->op));
    ft_map_fn f = {ctx, dst, act, alpha, beta};
    return FT_DISPATCH_FLOAT(ctx, dst->dtype, f);
}

FT_CUDA_KERNEL(scale) {
    const ft_params_scale *p = FT_PARAMS(dst, ft_params_scale);
    return ft_map_run(ctx, dst, -1, p->alpha, p->beta);
}

FT_CUDA_KERNEL(unary) {
    int act = ft_unary_act(dst->op);
    if (act < 0)
        return ft_set_error(ctx, FT_ERR_INTERNAL, "unary kernel called for op %s", ft_op_name(dst->op));
    return ft_map_run(ctx, dst, act, 1.0f, 0.0f);
}

/* ------------------------------------------------------------------------- */
/* fused elementwise chains                                                   */
/* ------------------------------------------------------------------------- */

/* The sources' pointers (K used), all of storage type T. */
template <typename T> struct ft_fused_srcs {
    const T *p[FT_MAX_SRC];
};

/* acc = src0; then each step in order (see ft_params_fused_eltwise in ops.h). */
template <typename T, int K, typename I>
__global__ void ft_k_fused(T *__restrict__ out, const __grid_constant__ ft_fused_srcs<T> s,
                           const __grid_constant__ ft_nd<K> d, int64_t n,
                           const __grid_constant__ ft_params_fused_eltwise p) {
    FT_KERNEL_PROLOGUE();
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        I off[K];
        ft_nd_offsets<K, I>(d, (I)i, off);
        float v[K];
#pragma unroll
        for (int k = 0; k < K; k++) v[k] = ft_ld(s.p[k] + off[k]);
        float acc = v[0];
        for (int st = 0; st < p.n_steps; st++) {
            int op = p.op[st];
            if (op == FT_OP_ADD || op == FT_OP_SUB || op == FT_OP_MUL || op == FT_OP_DIV) {
                float w = 0.0f;
#pragma unroll
                for (int k = 0; k < K; k++)
                    if (k == p.operand[st]) w = v[k];
                acc = p.swap[st] ? ft_binop(op, w, acc) : ft_binop(op, acc, w);
            } else if (op == FT_OP_SCALE) {
                acc = acc * p.alpha[st] + p.beta[st];
            } else {
                acc = ft_ew_act(ft_unary_act(op), acc);
            }
        }
        ft_st(out + i, acc);
    }
}

template <typename T, int K> static int ft_fused_launch(ft_ctx *ctx, ft_tensor *dst) {
    ft_fused_srcs<T> s;
    ft_nd<K> d;
    ft_nd_init(&d, dst);
    for (int k = 0; k < FT_MAX_SRC; k++) s.p[k] = NULL;
    for (int k = 0; k < K; k++) {
        s.p[k] = (const T *)dst->src[k]->data;
        ft_nd_set_operand(&d, k, dst->src[k], dst->ndim);
    }
    ft_nd_collapse(&d);
    int64_t n = ft_numel(dst);
    const ft_params_fused_eltwise *p = FT_PARAMS(dst, ft_params_fused_eltwise);
    unsigned blocks = ft_cuda_blocks(n, FT_EW_THREADS);
    cudaStream_t st = ft_cuda_stream(ctx);
    if (ft_nd_fits_i32(&d, n))
        FT_LAUNCH(ctx, blocks, FT_EW_THREADS, 0, st, ft_k_fused<T, K, int32_t>)((T *)dst->data, s, d, n, *p);
    else
        FT_LAUNCH(ctx, blocks, FT_EW_THREADS, 0, st, ft_k_fused<T, K, int64_t>)((T *)dst->data, s, d, n, *p);
    FT_CUDA_LAUNCH_CHECK(ctx, "fused_eltwise");
    return FT_OK;
}

struct ft_fused_fn {
    ft_ctx *ctx;
    ft_tensor *dst;
    int k;
    template <typename T> int run() {
        switch (k) {
        case 1: return ft_fused_launch<T, 1>(ctx, dst);
        case 2: return ft_fused_launch<T, 2>(ctx, dst);
        case 3: return ft_fused_launch<T, 3>(ctx, dst);
        case 4: return ft_fused_launch<T, 4>(ctx, dst);
        case 5: return ft_fused_launch<T, 5>(ctx, dst);
        default: return ft_fused_launch<T, 6>(ctx, dst);
        }
    }
};

FT_CUDA_KERNEL(fused_eltwise) {
    const ft_params_fused_eltwise *p = FT_PARAMS(dst, ft_params_fused_eltwise);
    /* the graph pass packs the inputs: src[0..k) non-NULL, the rest NULL */
    int k = 0;
    while (k < FT_MAX_SRC && dst->src[k]) k++;
    if (k == 0) return ft_set_error(ctx, FT_ERR_INVALID_ARG, "fused_eltwise without inputs");
    for (int i = k; i < FT_MAX_SRC; i++)
        if (dst->src[i])
            return ft_set_error(ctx, FT_ERR_INVALID_ARG, "fused_eltwise input %d follows an empty "
                                "slot", i);
    if (p->n_steps < 0 || p->n_steps > FT_FUSED_MAX_STEPS)
        return ft_set_error(ctx, FT_ERR_INVALID_ARG, "fused_eltwise: %d steps (at most %d)",
                            p->n_steps, FT_FUSED_MAX_STEPS);
    for (int s = 0; s < p->n_steps; s++) {
        int op = p->op[s];
        bool bin = op == FT_OP_ADD || op == FT_OP_SUB || op == FT_OP_MUL || op == FT_OP_DIV;
        if (bin && (p->operand[s] < 0 || p->operand[s] >= k))
            return ft_set_error(ctx, FT_ERR_INVALID_ARG, "fused_eltwise step %d: operand %d is "
                                "not an input (0..%d)", s, p->operand[s], k - 1);
        if (!bin && op != FT_OP_SCALE && ft_unary_act(op) < 0)
            return ft_set_error(ctx, FT_ERR_INVALID_ARG, "fused_eltwise step %d: op %s cannot be "
                                "fused", s, ft_op_name((ft_op)op));
    }
    for (int i = 0; i < k; i++) {
        if (!ft_broadcasts_to(dst->src[i], dst))
            return ft_set_error(ctx, FT_ERR_SHAPE, "fused_eltwise input %d does not broadcast to "
                                "the output", i);
        if (dst->src[i]->dtype != dst->dtype)
            return ft_set_error(ctx, FT_ERR_INVALID_ARG, "fused_eltwise input %d has dtype %s, "
                                "output %s", i, ft_dtype_name(dst->src[i]->dtype),
                                ft_dtype_name(dst->dtype));
    }
    if (ft_numel(dst) == 0) return FT_OK;
    ft_fused_fn f = {ctx, dst, k};
    return FT_DISPATCH_FLOAT(ctx, dst->dtype, f);
}
