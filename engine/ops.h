/*
 * ops.h - the op vocabulary: the op enum, each op's parameter struct, and the
 * row type of the op table (engine/op_table.c). One op = one enum value, one
 * table row, a CPU reference (kernels/cpu), a CUDA kernel (kernels/cuda) and a
 * test comparing the two. Append new ops before FT_OP_COUNT.
 *
 * Numerical contract shared by all backends: float storage f32/f16/bf16, f32
 * accumulation, masks f32; a NULL optional source means "absent".
 */
#ifndef FT_OPS_H
#define FT_OPS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct ft_tensor;
struct ft_ctx;

typedef enum ft_op {
    FT_OP_NONE = 0,      /* a leaf: input, weight or constant */

    /* data movement */
    FT_OP_VIEW,          /* reshape/permute/slice/expand: a view, no kernel */
    FT_OP_COPY,          /* src0 copied contiguous into dst's dtype (contiguous, cast) */
    FT_OP_CONCAT,        /* src0 ++ src1 along dim */
    FT_OP_PAD,           /* constant padding of one dim */
    FT_OP_EMBEDDING,     /* src0 table [V,D], src1 ids [...] -> [..., D] */
    FT_OP_GATHER_LAST,   /* src0 [..., I, T], src1 idx [I, J] -> [..., I, J] */

    /* elementwise (NumPy broadcasting for binary ops) */
    FT_OP_ADD,
    FT_OP_SUB,
    FT_OP_MUL,
    FT_OP_DIV,
    FT_OP_SCALE,         /* x * alpha + beta */
    FT_OP_GELU,          /* exact erf GELU */
    FT_OP_GELU_TANH,     /* tanh approximation ("gelu_new") */
    FT_OP_TANH,
    FT_OP_RELU,
    FT_OP_SIGMOID,

    /* reductions and normalisations */
    FT_OP_SUM_LAST,      /* sum over the last dim, kept as size 1 */
    FT_OP_SOFTMAX,       /* softmax(x * scale + mask) over the last dim; src1 mask optional */
    FT_OP_LAYERNORM,     /* src: x, gamma?, beta?, residual?  LN(x + residual) over last dim */
    FT_OP_GROUPNORM,     /* src: x [B,C,...], gamma?, beta? */
    FT_OP_BATCHNORM,     /* src: x [B,C,...], mean, var, gamma, beta */
    FT_OP_POOL_DIM,      /* 1-d pooling along one dim, ceil mode */

    /* linear algebra */
    FT_OP_LINEAR,        /* src: x [...,K], w [N,K], bias?, residual?  act(a x W^T + b + r) */
    FT_OP_MATMUL,        /* batched a [...,M,K] b [...,K,N] * alpha */
    FT_OP_ATTENTION,     /* src: q, k, v [B,H,S,D], mask?  softmax(q k^T s + m) v */

    /* convolutions, pooling, weight transforms */
    FT_OP_CONV1D,        /* src: x, w, bias?, residual?, wb?, bin?  act(conv + b + r) */
    FT_OP_CONV2D,        /* src: x, w, bias?, residual?, wb?, bin?  act(conv + b + r); wb (graph, groups 1):
                            [Cout, ft_conv_wb_cols(Cin*K)], w's rows with b appended and zeros
                            after, so a GEMM over an im2col buffer with a row of ones (then zero
                            rows) adds the bias itself (CUDA) */
    FT_OP_MAXPOOL2D,
    FT_OP_GLOBAL_AVGPOOL,
    FT_OP_WEIGHT_NORM,   /* src: g, v */

    /* graph-mode fused ops (made by passes, never by model code) */
    FT_OP_FUSED_ELTWISE, /* a chain of elementwise ops in one kernel (graph/) */

    /* the zoo's text models (SqueezeBERT, DeBERTa) */
    FT_OP_LINEAR_GROUPED, /* src: x [...,K], w [N,K/in_groups], bias?, residual?  block-diagonal linear */
    FT_OP_ATTENTION_REL,  /* src: q, k, v, mask?, c2p?, p2c?, row_scale?  disentangled attention */
    /* efficient vision models (MobileNetV2, EfficientNet, ConvNeXt) */
    FT_OP_RELU6,         /* min(max(x, 0), 6), NaN kept */
    FT_OP_SILU,          /* x * sigmoid(x) ("swish") */
    FT_OP_DWCONV2D,      /* src: x [B,C,H,W], w [C,1,KH,KW], bias?, residual?, -, bin?  depthwise,
                            computed directly (no im2col): act(conv + b + r), per-side padding,
                            dilation, input prologue act_in(x + bin[c]) (ft_params_conv) */
    FT_OP_CHANNEL_NORM,  /* src: x [B,C,...], gamma?, beta?  LayerNorm over dim 1 at every position
                            (ConvNeXt's channels-first LayerNorm), f32 statistics */
    FT_OP_SE_GATE,       /* src: x [B,C,H,W], w1 [R,C(,1,1)], b1 [R], w2 [C,R(,1,1)], b2 [C]
                            x * sigmoid(w2 act(w1 mean_hw(x) + b1) + b2): squeeze-excitation
                            (graph/pass_vision.c makes it; ft_params_se) */
    /* position ids */
    FT_OP_POSITION_IDS,  /* src0 ids [..., S] -> i64 cumsum(ids != pad) * (ids != pad) + pad over S */

    FT_OP_COUNT
} ft_op;

/* Activations usable as GEMM/conv epilogues and in fused chains. */
typedef enum ft_act {
    FT_ACT_NONE = 0,
    FT_ACT_GELU = 1,
    FT_ACT_GELU_TANH = 2,
    FT_ACT_RELU = 3,
    FT_ACT_TANH = 4,
    FT_ACT_SIGMOID = 5,
    FT_ACT_RELU6 = 6,
    FT_ACT_SILU = 7,
    FT_ACT_LAST = FT_ACT_SILU /* the largest value (range checks, test loops) */
} ft_act;

/* The activation a unary op computes (FT_OP_GELU ... FT_OP_SILU), FT_ACT_NONE for
 * any other op: what a pass fuses into an epilogue, what a fused chain applies. */
static inline ft_act ft_op_act(ft_op op) {
    switch (op) {
    case FT_OP_GELU: return FT_ACT_GELU;
    case FT_OP_GELU_TANH: return FT_ACT_GELU_TANH;
    case FT_OP_RELU: return FT_ACT_RELU;
    case FT_OP_TANH: return FT_ACT_TANH;
    case FT_OP_SIGMOID: return FT_ACT_SIGMOID;
    case FT_OP_RELU6: return FT_ACT_RELU6;
    case FT_OP_SILU: return FT_ACT_SILU;
    default: return FT_ACT_NONE;
    }
}

/* ---- parameter structs (at most FT_MAX_OP_PARAMS bytes each) ---- */

typedef struct ft_params_copy { int32_t dtype; } ft_params_copy; /* target ft_dtype */
typedef struct ft_params_concat { int32_t dim; } ft_params_concat;
typedef struct ft_params_pad {
    int32_t dim;
    int32_t pad_;
    int64_t before, after;
    float value;
} ft_params_pad;
typedef struct ft_params_scale { float alpha, beta; } ft_params_scale;
/* causal (HF GPT-2): after scaling, the score of key j > i + (Sk - Sq) for query i (the
 * second-to-last dim) is replaced by finfo(float32).min, then the mask is added */
typedef struct ft_params_softmax { float scale; int32_t causal; } ft_params_softmax;
typedef struct ft_params_norm { float eps; int32_t groups; } ft_params_norm; /* layer/group/batch norm */
typedef struct ft_params_pool_dim {
    int32_t dim;
    int32_t kind;   /* 0 mean, 1 max, 2 min */
    int32_t kernel;
    int32_t stride;
} ft_params_pool_dim;
typedef struct ft_params_linear {
    int32_t act;  /* ft_act */
    float alpha;  /* act(alpha * x W^T + b + r): 1 from the op API, another scale folded in
                     by the graph (graph/pass_affine.c); finite and nonzero */
} ft_params_linear;
/* Grouped linear (a grouped 1x1 convolution over channels-last rows): output group j
 * (Ng = N / groups columns) reads input group j % in_groups (Kg = K / in_groups
 * channels, w's width): y[.., j Ng + o] = act(alpha sum_c x[.., (j % in_groups) Kg + c]
 * w[j Ng + o, c] + b + r). The op API sets groups == in_groups; the QKV merge stacks
 * siblings of one in_groups, so groups is a multiple of it. act and alpha lead, as in
 * ft_params_linear, so a pass reading those two reads either op. */
typedef struct ft_params_linear_grouped {
    int32_t act;
    float alpha;
    int32_t groups, in_groups;
} ft_params_linear_grouped;
typedef struct ft_params_matmul { float alpha; } ft_params_matmul;
typedef struct ft_params_attention { float scale; int32_t causal; } ft_params_attention; /* causal: as softmax */
/* Disentangled (DeBERTa) attention, q [B,H,Sq,D], k [B,H,Sk,D], v [B,H,Sk,Dv]: with
 * d(i, j) = clamp(i - j + span, 0, 2 span - 1),
 *   s[i, j] = scale q_i.k_j + c2p[b,h,i,d(i,j)] + p2c[b,h,j,d(i,j)] + mask[b,h,i,j]
 *   out[i] = row_scale[b,h,i] * sum_j softmax_j(s[i, :]) v_j
 * c2p [B,H,Sq,2 span] and p2c [B,H,Sk,2 span] (model dtype, any strides) are the
 * relative-position products computed once; the [B,H,Sq,Sk] terms are gathered in the
 * kernel, never written. mask f32, row_scale (model dtype, [.., Sq, 1]) broadcast. */
typedef struct ft_params_attention_rel {
    float scale;
    int32_t span;
} ft_params_attention_rel;
typedef struct ft_params_conv {
    int32_t stride, padding, groups;
    int32_t act;    /* ft_act epilogue (graph fusions) */
    int32_t act_in; /* ft_act of an input prologue: the convolution reads act_in(x + bin[c])
                       (bin = src[5], optional; the zero padding stays zero): the bias and
                       activation of the convolution that made x, moved here by the graph */
    int32_t asym;   /* conv2d, dwconv2d: 1 = pad_t/b/l/r replace `padding` (TensorFlow "SAME",
                       EfficientNet's fixed asymmetric zero padding); 0 = `padding` on every side */
    int32_t pad_t, pad_b, pad_l, pad_r;
    int32_t dilation; /* dwconv2d: spacing of the taps (0 and 1: none); conv1d/conv2d: must be <= 1 */
} ft_params_conv;
/* The zero padding of a convolution's (top, bottom, left, right) sides. */
static inline void ft_conv_pads(const ft_params_conv *p, int64_t pad[4]) {
    if (p->asym) {
        pad[0] = p->pad_t, pad[1] = p->pad_b, pad[2] = p->pad_l, pad[3] = p->pad_r;
    } else {
        pad[0] = pad[1] = pad[2] = pad[3] = p->padding;
    }
}
static inline int32_t ft_conv_dilation(const ft_params_conv *p) { return p->dilation > 1 ? p->dilation : 1; }
/* squeeze-excitation gate: act of the reduced vector (ft_act; the gate itself is a sigmoid) */
typedef struct ft_params_se { int32_t act; } ft_params_se;
/* Columns of a convolution's weights-with-bias (wb) for k = Cin/groups * KH * KW weights
 * per output channel: k + 1 rounded up to a multiple of 8 elements, so every row of the
 * GEMM operand starts 16-byte aligned in fp16/bf16 (cuBLASLt's fast Hopper kernels need
 * aligned leading dimensions; k + 1 alone is odd for ResNet's 3x3 convolutions and stem). */
static inline int64_t ft_conv_wb_cols(int64_t k) { return (k + 1 + 7) / 8 * 8; }
typedef struct ft_params_maxpool { int32_t kernel, stride, padding; } ft_params_maxpool;
typedef struct ft_params_weight_norm { int32_t dim; } ft_params_weight_norm;
typedef struct ft_params_position_ids { int64_t padding_idx; } ft_params_position_ids;

/* Fused elementwise chain: up to FT_FUSED_MAX_STEPS steps applied to src0, each an ft_op among
 * ADD/SUB/MUL/DIV (with the step's operand src[k]), SCALE, or a unary activation.
 * 5 steps keep the struct within FT_MAX_OP_PARAMS (56 of 64 bytes). */
#define FT_FUSED_MAX_STEPS 5
typedef struct ft_params_fused_eltwise {
    int8_t n_steps;
    int8_t op[FT_FUSED_MAX_STEPS];     /* ft_op of each step */
    int8_t operand[FT_FUSED_MAX_STEPS]; /* src index for binary steps, -1 otherwise */
    int8_t swap[FT_FUSED_MAX_STEPS];    /* binary step computes operand (op) acc */
    float alpha[FT_FUSED_MAX_STEPS];    /* SCALE steps */
    float beta[FT_FUSED_MAX_STEPS];
} ft_params_fused_eltwise;

/* ---- the op table ---- */

typedef int (*ft_kernel_fn)(struct ft_ctx *ctx, struct ft_tensor *dst); /* returns ft_status */
typedef int (*ft_check_fn)(struct ft_ctx *ctx, const struct ft_tensor *dst);
typedef int (*ft_infer_fn)(struct ft_ctx *ctx, struct ft_tensor *dst);
typedef int64_t (*ft_macs_fn)(const struct ft_tensor *dst);

enum {
    FT_OPF_VIEW = 1u << 0,        /* no kernel: output aliases src0 */
    FT_OPF_ELEMENTWISE = 1u << 1, /* output[i] depends only on inputs at i (broadcast) */
    FT_OPF_CAPTURABLE = 1u << 2,  /* safe inside CUDA graph capture */
    FT_OPF_GEMM = 1u << 3         /* matrix product (MAC counting, epilogue fusion) */
};

typedef struct ft_op_def {
    const char *name;
    int min_src, max_src;
    uint32_t flags;
    ft_check_fn check;  /* dtypes, arity, parameters */
    ft_infer_fn infer;  /* output dtype, shape (strides for views), shape errors */
    ft_kernel_fn cpu;   /* kernels/cpu reference */
    ft_kernel_fn cuda;  /* kernels/cuda, NULL when not built or not supported */
    ft_macs_fn macs;    /* multiply-accumulates, NULL = 0 */
} ft_op_def;

extern const ft_op_def ft_op_table[FT_OP_COUNT];

const char *ft_op_name(ft_op op);

#ifdef __cplusplus
}
#endif

#endif /* FT_OPS_H */
