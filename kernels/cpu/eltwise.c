/*
 * eltwise.c - CPU kernels for elementwise ops: binary add/sub/mul/div with
 * NumPy broadcasting, scale (x * alpha + beta), the unary activations and the
 * graph-mode fused elementwise chain. Sources may have any strides (stride 0
 * for broadcast dims); the output is contiguous.
 *
 * All four are one engine: a chain of steps (binary with an operand, scale,
 * activation) applied to src0. Dims every operand walks contiguously are
 * merged first, so [1, 64, 56, 56] + [1, 64, 56, 56] is one row, not 3584 rows
 * of 56. The output is cut into chunks of FT_CPU_CHUNK elements (the unit of
 * parallel work); each operand chunk is read in place when it is f32 with unit
 * stride, else converted to f32 once by a per-dtype row load, and each step is
 * a vectorised f32 row map (vrow.c). Intermediates stay in f32 and the result
 * is rounded once, as a fused kernel does.
 */
#include "cpu_common.h"
#include "cpu_kernels.h"
#include "vrow.h"

#include <omp.h>

/* A chain of elementwise steps on src0 (the fused-chain params, also used for
 * the single ops). */
typedef ft_params_fused_eltwise ew_chain;

/* Output shape and every present operand's broadcast strides, with mergeable
 * adjacent dims merged and size-1 dims dropped. */
typedef struct ew_geom {
    int nd;
    int64_t ne[FT_MAX_DIMS];
    int64_t nb[FT_MAX_SRC][FT_MAX_DIMS];
} ew_geom;

static void ew_collapse(const ft_tensor *dst, ew_geom *g) {
    const int nd = dst->ndim;
    int64_t nb[FT_MAX_SRC][FT_MAX_DIMS];
    for (int i = 0; i < FT_MAX_SRC; i++)
        if (dst->src[i]) ft_cpu_bcast_strides(dst->src[i], nd, nb[i]);
    g->nd = 0;
    for (int d = 0; d < nd; d++) {
        if (dst->ne[d] == 1 && d + 1 < nd) continue; /* size 1: no walk */
        int k = g->nd;
        int merge = k > 0;
        for (int i = 0; merge && i < FT_MAX_SRC; i++)
            if (dst->src[i] && g->nb[i][k - 1] != nb[i][d] * dst->ne[d]) merge = 0;
        if (merge) {
            /* dim k-1 of the merged shape walks like (k-1, d) */
            g->ne[k - 1] *= dst->ne[d];
            for (int i = 0; i < FT_MAX_SRC; i++)
                if (dst->src[i]) g->nb[i][k - 1] = nb[i][d];
            continue;
        }
        g->ne[k] = dst->ne[d];
        for (int i = 0; i < FT_MAX_SRC; i++)
            if (dst->src[i]) g->nb[i][k] = nb[i][d];
        g->nd++;
    }
    if (g->nd == 0) { /* 0-d */
        g->nd = 1;
        g->ne[0] = 1;
        for (int i = 0; i < FT_MAX_SRC; i++) g->nb[i][0] = 0;
    }
}

/* The f32 values of operand chunk [off, off + n) with stride `in`: in place or in buf. */
static const float *ew_operand(const ft_tensor *s, int64_t off, int64_t in, int64_t n, float *buf) {
    if (s->dtype == FT_DTYPE_F32 && in == 1) return (const float *)s->data + off;
    ft_cpu_row_load(s->data, s->dtype, off, in, n, buf);
    return buf;
}

static int ew_run(ft_ctx *ctx, ft_tensor *dst, const ew_chain *p) {
    int st = ft_cpu_need_contiguous(ctx, dst, "output");
    if (st) return st;
    for (int i = 0; i < FT_MAX_SRC; i++)
        if (dst->src[i] && !ft_cpu_bcast_ok(dst->src[i], dst->ndim, dst->ne))
            return ft_set_error(ctx, FT_ERR_SHAPE, "inputs do not broadcast to the output");
    const int64_t n = ft_numel(dst);
    if (n == 0) return FT_OK;
    ew_geom g;
    ew_collapse(dst, &g);
    const int nd = g.nd;
    const int64_t cols = g.ne[nd - 1], rows = n / cols;
    const int64_t nchunk = (cols + FT_CPU_CHUNK - 1) / FT_CPU_CHUNK, tasks = rows * nchunk;

#pragma omp parallel for num_threads(ft_cpu_threads()) schedule(static) if (n >= FT_CPU_PAR_MIN && tasks > 1)
    for (int64_t t = 0; t < tasks; t++) {
        if (t == 0) ft_cpu_team_note(omp_get_num_threads()); /* thread 0 under schedule(static) */
        float acc[FT_CPU_CHUNK], buf[FT_CPU_CHUNK];
        const int64_t r = t / nchunk, c0 = (t % nchunk) * FT_CPU_CHUNK;
        const int64_t len = cols - c0 < FT_CPU_CHUNK ? cols - c0 : FT_CPU_CHUNK;
        int64_t off[FT_MAX_SRC] = {0}, in[FT_MAX_SRC] = {0};
        for (int i = 0; i < FT_MAX_SRC; i++) {
            if (!dst->src[i]) continue;
            in[i] = g.nb[i][nd - 1];
            off[i] = ft_cpu_row_offset(nd, g.ne, g.nb[i], r) + c0 * in[i];
        }
        const ft_tensor *s0 = dst->src[0];
        ft_cpu_row_load(s0->data, s0->dtype, off[0], in[0], len, acc);
        for (int k = 0; k < p->n_steps; k++) {
            int op = p->op[k];
            if (op == FT_OP_SCALE) {
                ft_cpu_row_scale(acc, len, p->alpha[k], p->beta[k]);
            } else if (op >= FT_OP_ADD && op <= FT_OP_DIV) {
                int o = p->operand[k];
                ft_cpu_row_binary(op, acc, ew_operand(dst->src[o], off[o], in[o], len, buf), len,
                                  p->swap[k]);
            } else {
                ft_cpu_row_act(ft_op_act((ft_op)op), acc, len);
            }
        }
        ft_cpu_row_store(dst->data, dst->dtype, r * cols + c0, len, acc);
    }
    return FT_OK;
}

FT_CPU_KERNEL_DEF(binary) {
    ew_chain c = {.n_steps = 1, .op = {(int8_t)dst->op}, .operand = {1}};
    return ew_run(ctx, dst, &c);
}

FT_CPU_KERNEL_DEF(scale) {
    const ft_params_scale *p = FT_PARAMS(dst, ft_params_scale);
    ew_chain c = {.n_steps = 1, .op = {FT_OP_SCALE}, .operand = {-1}, .alpha = {p->alpha}, .beta = {p->beta}};
    return ew_run(ctx, dst, &c);
}

FT_CPU_KERNEL_DEF(unary) {
    switch (dst->op) {
    case FT_OP_GELU:
    case FT_OP_GELU_TANH:
    case FT_OP_TANH:
    case FT_OP_RELU:
    case FT_OP_SIGMOID:
    case FT_OP_RELU6:
    case FT_OP_SILU: {
        ew_chain c = {.n_steps = 1, .op = {(int8_t)dst->op}, .operand = {-1}};
        return ew_run(ctx, dst, &c);
    }
    default:
        return ft_set_error(ctx, FT_ERR_INTERNAL, "op %s is not a unary activation",
                            ft_op_name(dst->op));
    }
}

/* Checks a fused chain against its node before running it: every step is a
 * known op, every binary operand exists. */
static int check_chain(ft_ctx *ctx, const ft_tensor *dst, const ft_params_fused_eltwise *p) {
    if (p->n_steps < 0 || p->n_steps > FT_FUSED_MAX_STEPS)
        return ft_set_error(ctx, FT_ERR_INTERNAL, "fused chain has %d steps", p->n_steps);
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
        case FT_OP_SIGMOID:
        case FT_OP_RELU6:
        case FT_OP_SILU: break;
        default:
            return ft_set_error(ctx, FT_ERR_INTERNAL, "step %d: op %s cannot be fused", k,
                                ft_op_name((ft_op)p->op[k]));
        }
    }
    return FT_OK;
}

FT_CPU_KERNEL_DEF(fused_eltwise) {
    const ft_params_fused_eltwise *p = FT_PARAMS(dst, ft_params_fused_eltwise);
    int st = check_chain(ctx, dst, p);
    if (st) return st;
    return ew_run(ctx, dst, p);
}
