/*
 * eltwise.c - CPU reference kernels for elementwise ops: binary add/sub/mul/div
 * with NumPy broadcasting, scale (x * alpha + beta), the unary activations and
 * the graph-mode fused elementwise chain. Sources may have any strides
 * (stride 0 for broadcast dims); the output is contiguous.
 */
#include "cpu_common.h"
#include "cpu_kernels.h"

#include <omp.h>

FT_CPU_KERNEL_DEF(binary) {
    const ft_tensor *a = dst->src[0], *b = dst->src[1];
    int st = ft_cpu_need_contiguous(ctx, dst, "output");
    if (st) return st;
    const int nd = dst->ndim, op = dst->op;
    if (!ft_cpu_bcast_ok(a, nd, dst->ne) || !ft_cpu_bcast_ok(b, nd, dst->ne))
        return ft_set_error(ctx, FT_ERR_SHAPE, "inputs do not broadcast to the output");
    int64_t anb[FT_MAX_DIMS], bnb[FT_MAX_DIMS];
    ft_cpu_bcast_strides(a, nd, anb);
    ft_cpu_bcast_strides(b, nd, bnb);
    const int64_t rows = ft_cpu_rows(nd, dst->ne), cols = ft_cpu_cols(nd, dst->ne);
    const int64_t ain = nd > 0 ? anb[nd - 1] : 0, bin = nd > 0 ? bnb[nd - 1] : 0;
    const ft_dtype at = a->dtype, bt = b->dtype, dt = dst->dtype;
    if (rows == 0 || cols == 0) return FT_OK;

#pragma omp parallel for num_threads(ft_cpu_threads()) schedule(static) if (rows * cols >= FT_CPU_PAR_MIN && rows > 1)
    for (int64_t r = 0; r < rows; r++) {
        if (r == 0) ft_cpu_team_note(omp_get_num_threads()); /* thread 0 under schedule(static) */
        int64_t ao = ft_cpu_row_offset(nd, dst->ne, anb, r);
        int64_t bo = ft_cpu_row_offset(nd, dst->ne, bnb, r);
        int64_t o = r * cols;
        for (int64_t j = 0; j < cols; j++) {
            float x = ft_cpu_load(a->data, at, ao + j * ain);
            float y = ft_cpu_load(b->data, bt, bo + j * bin);
            ft_cpu_store(dst->data, dt, o + j, ft_cpu_binary_op(op, x, y));
        }
    }
    return FT_OK;
}

/* One-source elementwise map: y = f(x) with x of any strides. SCALE uses
 * alpha/beta; the activations use the op. */
static int map_unary(ft_ctx *ctx, ft_tensor *dst, int op, float alpha, float beta) {
    const ft_tensor *x = dst->src[0];
    int st = ft_cpu_need_contiguous(ctx, dst, "output");
    if (st) return st;
    const int nd = x->ndim;
    const int64_t rows = ft_cpu_rows(nd, x->ne), cols = ft_cpu_cols(nd, x->ne);
    const int64_t xin = nd > 0 ? x->nb[nd - 1] : 1;
    if (rows == 0 || cols == 0) return FT_OK;

#pragma omp parallel for num_threads(ft_cpu_threads()) schedule(static) if (rows * cols >= FT_CPU_PAR_MIN && rows > 1)
    for (int64_t r = 0; r < rows; r++) {
        int64_t xo = ft_cpu_row_offset(nd, x->ne, x->nb, r), o = r * cols;
        for (int64_t j = 0; j < cols; j++) {
            float v = ft_cpu_load(x->data, x->dtype, xo + j * xin);
            v = op == FT_OP_SCALE ? v * alpha + beta : ft_cpu_unary_op(op, v);
            ft_cpu_store(dst->data, dst->dtype, o + j, v);
        }
    }
    return FT_OK;
}

FT_CPU_KERNEL_DEF(scale) {
    const ft_params_scale *p = FT_PARAMS(dst, ft_params_scale);
    return map_unary(ctx, dst, FT_OP_SCALE, p->alpha, p->beta);
}

FT_CPU_KERNEL_DEF(unary) {
    switch (dst->op) {
    case FT_OP_GELU:
    case FT_OP_GELU_TANH:
    case FT_OP_TANH:
    case FT_OP_RELU:
    case FT_OP_SIGMOID: return map_unary(ctx, dst, dst->op, 1.0f, 0.0f);
    default:
        return ft_set_error(ctx, FT_ERR_INTERNAL, "op %s is not a unary activation",
                            ft_op_name(dst->op));
    }
}

/* Checks a fused chain against its node before running it: every step is a
 * known op, every binary operand exists and broadcasts to the output. */
static int check_chain(ft_ctx *ctx, const ft_tensor *dst, const ft_params_fused_eltwise *p) {
    if (p->n_steps < 0 || p->n_steps > FT_FUSED_MAX_STEPS)
        return ft_set_error(ctx, FT_ERR_INTERNAL, "fused chain has %d steps", p->n_steps);
    for (int i = 0; i < FT_MAX_SRC; i++)
        if (dst->src[i] && !ft_cpu_bcast_ok(dst->src[i], dst->ndim, dst->ne))
            return ft_set_error(ctx, FT_ERR_SHAPE, "input %d does not broadcast to the output", i);
    for (int k = 0; k < p->n_steps; k++) {
        switch (p->op[k]) {
        case FT_OP_ADD:
        case FT_OP_SUB:
        case FT_OP_MUL:
        case FT_OP_DIV:
            if (p->operand[k] < 0 || p->operand[k] >= FT_MAX_SRC || !dst->src[p->operand[k]])
                return ft_set_error(ctx, FT_ERR_INTERNAL, "step %d has no operand (%d)", k,
                                    p->operand[k]);
            break;
        case FT_OP_SCALE:
        case FT_OP_GELU:
        case FT_OP_GELU_TANH:
        case FT_OP_TANH:
        case FT_OP_RELU:
        case FT_OP_SIGMOID: break;
        default:
            return ft_set_error(ctx, FT_ERR_INTERNAL, "step %d: op %s cannot be fused", k,
                                ft_op_name((ft_op)p->op[k]));
        }
    }
    return FT_OK;
}

FT_CPU_KERNEL_DEF(fused_eltwise) {
    const ft_params_fused_eltwise *p = FT_PARAMS(dst, ft_params_fused_eltwise);
    int st = ft_cpu_need_contiguous(ctx, dst, "output");
    if (st) return st;
    if ((st = check_chain(ctx, dst, p))) return st;
    const int nd = dst->ndim;
    int64_t nb[FT_MAX_SRC][FT_MAX_DIMS];
    for (int i = 0; i < FT_MAX_SRC; i++)
        if (dst->src[i]) ft_cpu_bcast_strides(dst->src[i], nd, nb[i]);
    const int64_t rows = ft_cpu_rows(nd, dst->ne), cols = ft_cpu_cols(nd, dst->ne);
    if (rows == 0 || cols == 0) return FT_OK;

#pragma omp parallel for num_threads(ft_cpu_threads()) schedule(static) if (rows * cols >= FT_CPU_PAR_MIN && rows > 1)
    for (int64_t r = 0; r < rows; r++) {
        int64_t off[FT_MAX_SRC] = {0}, in[FT_MAX_SRC] = {0};
        for (int i = 0; i < FT_MAX_SRC; i++) {
            if (!dst->src[i]) continue;
            off[i] = ft_cpu_row_offset(nd, dst->ne, nb[i], r);
            in[i] = nd > 0 ? nb[i][nd - 1] : 0;
        }
        for (int64_t j = 0; j < cols; j++) {
            /* intermediates stay in f32, as a fused kernel does */
            float acc = ft_cpu_load(dst->src[0]->data, dst->src[0]->dtype, off[0] + j * in[0]);
            for (int k = 0; k < p->n_steps; k++) {
                int op = p->op[k];
                if (op == FT_OP_SCALE) {
                    acc = acc * p->alpha[k] + p->beta[k];
                } else if (op >= FT_OP_ADD && op <= FT_OP_DIV) {
                    const ft_tensor *s = dst->src[p->operand[k]];
                    float v = ft_cpu_load(s->data, s->dtype, off[p->operand[k]] + j * in[p->operand[k]]);
                    acc = p->swap[k] ? ft_cpu_binary_op(op, v, acc) : ft_cpu_binary_op(op, acc, v);
                } else {
                    acc = ft_cpu_unary_op(op, acc);
                }
            }
            ft_cpu_store(dst->data, dst->dtype, r * cols + j, acc);
        }
    }
    return FT_OK;
}
