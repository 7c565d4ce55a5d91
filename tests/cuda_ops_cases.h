/*
 * cuda_ops_cases.h - the case table of tests/test_cuda_ops.c: for every op of
 * the op table, builders (the op calls a case makes, views included) and the
 * inputs they take. Shapes mix odd sizes (1, 3, 17, 129) with BERT-base ones
 * (768, 3072, 12 heads of 64, sequence 128). Included once, by that file.
 */

#define I(nd_, ...) {CASE_DT, nd_, {__VA_ARGS__}, K_UNIF, 0}
#define IW(nd_, ...) {CASE_DT, nd_, {__VA_ARGS__}, K_WIDE, 0}
#define IP(nd_, ...) {CASE_DT, nd_, {__VA_ARGS__}, K_POS, 0}
#define IM(nd_, ...) {FT_DTYPE_F32, nd_, {__VA_ARGS__}, K_MASK, 0}
#define IDS(dt_, lim_, nd_, ...) {dt_, nd_, {__VA_ARGS__}, K_IDS, lim_}

static ft_tensor *tr(ft_ctx *c, ft_tensor *x, int a, int b) { return ft_transpose(c, x, a, b); }

/* ---- data movement ---- */

static ft_tensor *b_copy(ft_ctx *c, ft_tensor **in, int v) {
    switch (v) {
    case 0: return ft_contiguous(c, tr(c, in[0], 0, 2));                 /* permuted */
    case 1: return ft_contiguous(c, ft_slice(c, in[0], 1, 3, 11));       /* offset + stride */
    case 2: return ft_cast(c, in[0], FT_DTYPE_F16);
    case 3: return ft_cast(c, tr(c, in[0], 1, 2), FT_DTYPE_BF16);
    case 4: return ft_cast(c, in[0], FT_DTYPE_F32);
    default: { /* broadcast view made contiguous */
        int64_t sh[3] = {4, 17, 129};
        return ft_contiguous(c, ft_expand(c, in[0], 3, sh));
    }
    }
}
static const op_case cases_copy[] = {
    {"copy permute", b_copy, 0, 1, {I(3, 3, 17, 129)}, 0},
    {"copy slice", b_copy, 1, 1, {I(3, 3, 17, 129)}, 0},
    {"cast to f16", b_copy, 2, 1, {I(2, 17, 129)}, 0},
    {"cast transposed to bf16", b_copy, 3, 1, {I(3, 3, 17, 129)}, 0},
    {"cast to f32", b_copy, 4, 1, {I(2, 128, 768)}, 0},
    {"copy broadcast", b_copy, 5, 1, {I(2, 17, 1)}, 0},
};

static ft_tensor *b_concat(ft_ctx *c, ft_tensor **in, int v) {
    if (v == 0) return ft_concat(c, in[0], in[1], 1);
    return ft_concat(c, tr(c, in[0], 0, 2), in[1], -1);
}
static const op_case cases_concat[] = {
    {"concat dim1", b_concat, 0, 2, {I(3, 3, 17, 5), I(3, 3, 4, 5)}, 0},
    {"concat last of view", b_concat, 1, 2, {I(3, 5, 17, 3), I(3, 3, 17, 1)}, 0},
};

static ft_tensor *b_pad(ft_ctx *c, ft_tensor **in, int v) {
    if (v == 0) return ft_pad(c, in[0], 1, 2, 3, 0.5f);
    return ft_pad(c, tr(c, in[0], 0, 1), -1, 0, 1, 0.0f);
}
static const op_case cases_pad[] = {
    {"pad dim1", b_pad, 0, 1, {I(3, 2, 17, 3)}, 0},
    {"pad last of view", b_pad, 1, 1, {I(2, 17, 129)}, 0},
};

static ft_tensor *b_embedding(ft_ctx *c, ft_tensor **in, int v) {
    (void)v;
    return ft_embedding(c, in[0], in[1]);
}
static const op_case cases_embedding[] = {
    {"embedding i64", b_embedding, 0, 2, {I(2, 129, 33), IDS(FT_DTYPE_I64, 129, 2, 3, 17)}, 0},
    {"embedding i32 bert", b_embedding, 0, 2, {I(2, 512, 768), IDS(FT_DTYPE_I32, 512, 2, 1, 128)}, 0},
};

/* RoBERTa's positions (pad id 1), read back through a table: a float output */
static ft_tensor *b_position_ids(ft_ctx *c, ft_tensor **in, int v) {
    (void)v;
    return ft_embedding(c, in[0], ft_position_ids(c, in[1], 1));
}
static const op_case cases_position_ids[] = {
    {"position_ids i64", b_position_ids, 0, 2, {I(2, 40, 3), IDS(FT_DTYPE_I64, 4, 2, 3, 17)}, 0},
    {"position_ids i32 long rows", b_position_ids, 0, 2, {I(2, 303, 5), IDS(FT_DTYPE_I32, 3, 3, 2, 1, 300)}, 0},
};

static ft_tensor *b_gather(ft_ctx *c, ft_tensor **in, int v) {
    (void)v;
    return ft_gather_last(c, in[0], in[1]);
}
static const op_case cases_gather_last[] = {
    {"gather_last", b_gather, 0, 2, {I(3, 2, 17, 9), IDS(FT_DTYPE_I64, 9, 2, 17, 5)}, 0},
};

/* ---- elementwise ---- */

static ft_tensor *b_binary(ft_ctx *c, ft_tensor **in, int v) {
    ft_tensor *a = in[0], *b = in[1];
    switch (v % 4) {
    case 0: return ft_add(c, (v / 4) ? tr(c, a, 0, 1) : a, b);
    case 1: return ft_sub(c, a, (v / 4) ? tr(c, b, 0, 1) : b);
    case 2: return ft_mul(c, a, b);
    default: return ft_div(c, a, b);
    }
}
static const op_case cases_binary[] = {
    {"add bcast row", b_binary, 0, 2, {I(3, 3, 17, 129), I(1, 129)}, 0},
    {"sub bcast mid", b_binary, 1, 2, {I(3, 3, 17, 129), I(3, 3, 1, 129)}, 0},
    {"mul same", b_binary, 2, 2, {I(2, 17, 129), I(2, 17, 129)}, 0},
    {"div bcast col", b_binary, 3, 2, {I(3, 3, 17, 129), IP(3, 3, 17, 1)}, 0},
    {"add transposed", b_binary, 4, 2, {I(3, 17, 3, 129), I(3, 3, 17, 129)}, 0},
    {"sub transposed", b_binary, 5, 2, {I(2, 17, 3), I(2, 3, 17)}, 0},
    {"add bert", b_binary, 0, 2, {I(3, 1, 128, 768), I(3, 1, 128, 768)}, 0},
};

static ft_tensor *b_scale(ft_ctx *c, ft_tensor **in, int v) {
    return ft_scale(c, v ? tr(c, in[0], 0, 1) : in[0], 0.5f, -1.0f);
}
static const op_case cases_scale[] = {
    {"scale", b_scale, 0, 1, {I(2, 17, 129)}, 0},
    {"scale transposed", b_scale, 1, 1, {I(2, 17, 129)}, 0},
};

static ft_tensor *b_unary(ft_ctx *c, ft_tensor **in, int v) {
    ft_tensor *x = v >= 5 ? tr(c, in[0], 0, 1) : in[0];
    switch (v % 5) {
    case 0: return ft_gelu(c, x);
    case 1: return ft_gelu_tanh(c, x);
    case 2: return ft_tanh(c, x);
    case 3: return ft_relu(c, x);
    default: return ft_sigmoid(c, x);
    }
}
static const op_case cases_unary[] = {
    {"gelu", b_unary, 0, 1, {IW(3, 3, 17, 129)}, 0},
    {"gelu_tanh", b_unary, 1, 1, {IW(3, 3, 17, 129)}, 0},
    {"tanh", b_unary, 2, 1, {IW(3, 3, 17, 129)}, 0},
    {"relu", b_unary, 3, 1, {IW(3, 3, 17, 129)}, 0},
    {"sigmoid", b_unary, 4, 1, {IW(3, 3, 17, 129)}, 0},
    {"gelu transposed", b_unary, 5, 1, {IW(2, 17, 129)}, 0},
    {"gelu bert ffn", b_unary, 0, 1, {IW(2, 128, 3072)}, 0},
};

/* ---- reductions and normalisations ---- */

static ft_tensor *b_sum_last(ft_ctx *c, ft_tensor **in, int v) {
    return ft_sum_last(c, v ? tr(c, in[0], 0, 1) : in[0]);
}
static const op_case cases_sum_last[] = {
    {"sum_last", b_sum_last, 0, 1, {I(3, 3, 17, 129)}, 0},
    {"sum_last long", b_sum_last, 0, 1, {I(2, 5, 3072)}, 0},
    {"sum_last transposed", b_sum_last, 1, 1, {I(2, 17, 3)}, 0},
    {"sum_last one", b_sum_last, 0, 1, {I(2, 3, 1)}, 0},
};

static ft_tensor *b_softmax(ft_ctx *c, ft_tensor **in, int v) {
    switch (v) {
    case 0: return ft_softmax(c, in[0], NULL, 1.0f);
    case 1: return ft_softmax(c, in[0], in[1], 0.125f);
    case 2: return ft_softmax(c, ft_slice(c, in[0], -1, 3, 100), NULL, 2.0f); /* row stride > n */
    case 3: return ft_softmax(c, in[0], tr(c, in[1], -1, -2), 1.0f);           /* strided mask */
    case 5: return ft_softmax_causal(c, in[0], in[1], 0.125f);                 /* GPT-2 */
    case 6: return ft_softmax_causal(c, in[0], NULL, 0.5f);
    default: return ft_softmax(c, tr(c, in[0], 0, 1), in[1], 1.0f);           /* copied x */
    }
}
static const op_case cases_softmax[] = {
    {"softmax", b_softmax, 0, 1, {IW(3, 3, 17, 129)}, 0},
    {"softmax 1", b_softmax, 0, 1, {IW(2, 3, 1)}, 0},
    {"softmax masked", b_softmax, 1, 2, {IW(4, 2, 3, 17, 129), IM(4, 2, 1, 1, 129)}, 0},
    {"softmax bert", b_softmax, 1, 2, {IW(4, 1, 12, 128, 128), IM(4, 1, 1, 1, 128)}, 0},
    {"softmax row view", b_softmax, 2, 1, {IW(2, 17, 129)}, 0},
    {"softmax mask view", b_softmax, 3, 2, {IW(3, 3, 17, 33), IM(2, 33, 17)}, 0},
    {"softmax long", b_softmax, 1, 2, {IW(2, 3, 2000), IM(1, 2000)}, 0},
    {"softmax transposed", b_softmax, 4, 2, {IW(3, 17, 3, 33), IM(1, 33)}, 0},
    {"softmax causal masked", b_softmax, 5, 2, {IW(4, 3, 2, 17, 17), IM(4, 3, 1, 1, 17)}, 0},
    {"softmax causal keys > queries", b_softmax, 6, 1, {IW(4, 2, 3, 17, 40)}, 0},
    {"softmax causal queries > keys", b_softmax, 6, 1, {IW(3, 3, 40, 17)}, 0},
    {"softmax causal long", b_softmax, 5, 2, {IW(3, 2, 3, 2000), IM(3, 2, 1, 2000)}, 0},
};

static ft_tensor *b_layernorm(ft_ctx *c, ft_tensor **in, int v) {
    switch (v) {
    case 0: return ft_layernorm(c, in[0], in[1], in[2], 1e-12f);
    case 1: return ft_layernorm(c, in[0], NULL, NULL, 1e-5f);
    case 2: return ft_layernorm(c, ft_slice(c, in[0], -1, 5, 100), NULL, NULL, 1e-5f);
    case 3: { /* LN(x + residual): the graph's fused node */
        ft_params_norm p = {1e-12f, 0};
        ft_tensor *s[4] = {in[0], in[1], in[2], in[3]};
        return ft_dispatch(c, FT_OP_LAYERNORM, s, 4, &p, sizeof p);
    }
    default: { /* strided residual and gamma */
        ft_params_norm p = {1e-6f, 0};
        ft_tensor *s[4] = {in[0], ft_select(c, in[1], 1, 0), in[2], tr(c, in[3], 0, 1)};
        return ft_dispatch(c, FT_OP_LAYERNORM, s, 4, &p, sizeof p);
    }
    }
}
static const op_case cases_layernorm[] = {
    {"layernorm bert", b_layernorm, 0, 3, {IW(3, 2, 128, 768), I(1, 768), I(1, 768)}, 0},
    {"layernorm odd", b_layernorm, 0, 3, {IW(3, 3, 17, 129), I(1, 129), I(1, 129)}, 0},
    {"layernorm plain", b_layernorm, 1, 1, {IW(2, 17, 3)}, 0},
    {"layernorm 1", b_layernorm, 1, 1, {IW(2, 5, 1)}, 0},
    {"layernorm row view", b_layernorm, 2, 1, {IW(2, 17, 129)}, 0},
    {"layernorm long", b_layernorm, 0, 3, {IW(2, 3, 3000), I(1, 3000), I(1, 3000)}, 0},
    {"layernorm residual", b_layernorm, 3, 4,
     {IW(3, 2, 17, 768), I(1, 768), I(1, 768), IW(3, 2, 17, 768)}, 0},
    {"layernorm strided", b_layernorm, 4, 4,
     {IW(2, 17, 64), I(2, 64, 2), I(1, 64), IW(2, 64, 17)}, 0},
};

static ft_tensor *b_groupnorm(ft_ctx *c, ft_tensor **in, int v) {
    if (v == 0) return ft_groupnorm(c, in[0], 4, in[1], in[2], 1e-5f);
    return ft_groupnorm(c, in[0], 8, NULL, NULL, 1e-5f); /* groups == channels (WavLM) */
}
static const op_case cases_groupnorm[] = {
    {"groupnorm", b_groupnorm, 0, 3, {IW(3, 2, 8, 17), I(1, 8), I(1, 8)}, 0},
    {"groupnorm per channel", b_groupnorm, 1, 1, {IW(4, 2, 8, 5, 7)}, 0},
};

static ft_tensor *b_batchnorm(ft_ctx *c, ft_tensor **in, int v) {
    (void)v;
    return ft_batchnorm(c, in[0], in[1], in[2], in[3], in[4], 1e-5f);
}
static const op_case cases_batchnorm[] = {
    {"batchnorm", b_batchnorm, 0, 5, {IW(4, 2, 8, 5, 7), I(1, 8), IP(1, 8), I(1, 8), I(1, 8)}, 0},
};

static ft_tensor *b_pool_dim(ft_ctx *c, ft_tensor **in, int v) {
    return ft_pool_dim(c, in[0], 1, v, 3, 2);
}
static const op_case cases_pool_dim[] = {
    {"pool_dim mean", b_pool_dim, 0, 1, {I(3, 2, 17, 9)}, 0},
    {"pool_dim max", b_pool_dim, 1, 1, {I(3, 2, 17, 9)}, 0},
    {"pool_dim min", b_pool_dim, 2, 1, {I(3, 2, 16, 9)}, 0},
};

/* ---- linear algebra ---- */

static ft_tensor *b_linear(ft_ctx *c, ft_tensor **in, int v) {
    if (v == 0) return ft_linear(c, in[0], in[1], in[2]);
    if (v == 1) return ft_linear(c, in[0], in[1], NULL);
    if (v == 2) return ft_linear(c, ft_slice(c, in[0], -1, 2, 100), in[1], in[2]); /* lda > K */
    if (v == 3) return ft_linear(c, in[0], tr(c, in[1], 0, 1), in[2]);             /* w given as [K,N]^T */
    /* graph-fused epilogues: act(x w^T + b (+ r)) with act = v - 4 (and a residual from 10);
     * 12 and 13: a folded scale, act(0.125 x w^T + b (+ r)) */
    ft_params_linear p = {v >= 12 ? (v == 13 ? FT_ACT_GELU : FT_ACT_NONE) : (v - 4) % 6,
                          v >= 12 ? 0.125f : 1.0f};
    int res = v >= 10 && v != 12;
    ft_tensor *s[4] = {in[0], in[1], in[2], res ? in[3] : NULL};
    return ft_dispatch(c, FT_OP_LINEAR, s, res ? 4 : 3, &p, sizeof p);
}
static const op_case cases_linear[] = {
    {"linear odd", b_linear, 0, 3, {I(3, 3, 17, 129), I(2, 65, 129), I(1, 65)}, 0},
    {"linear no bias", b_linear, 1, 2, {I(2, 1, 3), I(2, 17, 3)}, 0},
    {"linear row view", b_linear, 2, 3, {I(2, 17, 129), I(2, 33, 100), I(1, 33)}, 0},
    {"linear w view", b_linear, 3, 3, {I(2, 17, 129), I(2, 129, 33), I(1, 33)}, 0},
    {"linear bert qkv", b_linear, 0, 3, {I(3, 1, 128, 768), I(2, 2304, 768), I(1, 2304)}, 0},
    {"linear bert ffn", b_linear, 0, 3, {I(2, 128, 768), I(2, 3072, 768), I(1, 3072)}, 0},
    {"linear+gelu", b_linear, 5, 3, {I(3, 3, 17, 129), I(2, 65, 129), I(1, 65)}, 0},
    {"linear+gelu_tanh", b_linear, 6, 3, {I(3, 3, 17, 129), I(2, 65, 129), I(1, 65)}, 0},
    {"linear+relu", b_linear, 7, 3, {I(3, 3, 17, 129), I(2, 65, 129), I(1, 65)}, 0},
    {"linear+tanh", b_linear, 8, 3, {I(3, 3, 17, 129), I(2, 65, 129), I(1, 65)}, 0},
    {"linear+sigmoid", b_linear, 9, 3, {I(3, 3, 17, 129), I(2, 65, 129), I(1, 65)}, 0},
    {"linear+residual", b_linear, 10, 4,
     {I(2, 17, 129), I(2, 65, 129), I(1, 65), I(2, 17, 65)}, 0},
    {"linear+gelu+residual bert", b_linear, 11, 4,
     {I(2, 128, 768), I(2, 768, 768), I(1, 768), I(2, 128, 768)}, 0},
    {"linear alpha", b_linear, 12, 3, {I(3, 3, 17, 129), I(2, 65, 129), I(1, 65)}, 0},
    {"linear alpha+gelu+residual", b_linear, 13, 4,
     {I(2, 17, 129), I(2, 65, 129), I(1, 65), I(2, 17, 65)}, 0},
};

static ft_tensor *b_matmul(ft_ctx *c, ft_tensor **in, int v) {
    switch (v) {
    case 0: return ft_matmul(c, in[0], in[1], 0.5f);
    case 1: return ft_matmul(c, in[0], tr(c, in[1], -1, -2), 0.125f); /* q k^T */
    case 2: return ft_matmul(c, tr(c, in[0], -1, -2), in[1], 1.0f);   /* a^T b */
    default: { /* permuted batch dims: [B,S,H,D] -> [B,H,S,D] views */
        int perm[4] = {0, 2, 1, 3};
        return ft_matmul(c, ft_permute(c, in[0], perm), tr(c, ft_permute(c, in[1], perm), -1, -2), 1.0f);
    }
    }
}
static const op_case cases_matmul[] = {
    {"matmul batched", b_matmul, 0, 2, {I(4, 2, 3, 17, 33), I(4, 2, 3, 33, 9)}, 0},
    {"matmul 2d", b_matmul, 0, 2, {I(2, 1, 129), I(2, 129, 3)}, 0},
    {"matmul qk^T", b_matmul, 1, 2, {I(4, 2, 3, 17, 33), I(4, 2, 3, 9, 33)}, 0},
    {"matmul a^T", b_matmul, 2, 2, {I(3, 3, 33, 17), I(3, 3, 33, 5)}, 0},
    {"matmul bert scores", b_matmul, 1, 2, {I(4, 1, 12, 128, 64), I(4, 1, 12, 128, 64)}, 0},
    {"matmul permuted", b_matmul, 3, 2, {I(4, 2, 17, 3, 16), I(4, 2, 17, 3, 16)}, 0},
};

static ft_tensor *b_attention(ft_ctx *c, ft_tensor **in, int v) {
    float sc = 0.125f;
    switch (v) {
    case 0: return ft_attention(c, in[0], in[1], in[2], in[3], sc);
    case 1: return ft_attention(c, in[0], in[1], in[2], NULL, sc);
    case 3: /* a view one element into each row: row starts not 16-byte aligned */
        return ft_attention(c, ft_slice(c, in[0], 3, 1, in[0]->ne[3] - 1),
                            ft_slice(c, in[1], 3, 1, in[1]->ne[3] - 1),
                            ft_slice(c, in[2], 3, 1, in[2]->ne[3] - 1), in[3], sc);
    case 4: /* a mask whose last query row is all -inf: that row is NaN */
        return ft_attention(c, in[0], in[1], in[2], ft_pad(c, in[3], 2, 0, 1, -INFINITY), sc);
    case 6: return ft_attention_causal(c, in[0], in[1], in[2], in[3], sc); /* GPT-2 */
    case 7: return ft_attention_causal(c, in[0], in[1], in[2], NULL, sc);
    case 8: { /* left padding: the first 5 keys masked with finfo.min for every query,
               * so queries 0..4 see no allowed key (HF: uniform over a key set) */
        int64_t sk = in[3]->ne[3];
        ft_tensor *mk = ft_pad(c, ft_slice(c, in[3], 3, 0, sk - 5), 3, 5, 0, -3.4028234663852886e38f);
        return ft_attention_causal(c, in[0], in[1], in[2], mk, sc);
    }
    default: { /* q/k/v as the model makes them: [B,S,H,D] viewed as [B,H,S,D] */
        int perm[4] = {0, 2, 1, 3};
        return ft_attention(c, ft_permute(c, in[0], perm), ft_permute(c, in[1], perm),
                            ft_permute(c, in[2], perm), in[3], sc);
    }
    }
}
static const op_case cases_attention[] = {
    {"attention causal masked", b_attention, 6, 4,
     {I(4, 2, 3, 17, 33), I(4, 2, 3, 17, 33), I(4, 2, 3, 17, 33), IM(4, 2, 1, 1, 17)}, 0},
    {"attention causal gpt2", b_attention, 6, 4,
     {I(4, 1, 12, 128, 64), I(4, 1, 12, 128, 64), I(4, 1, 12, 128, 64), IM(4, 1, 1, 1, 128)}, 0},
    {"attention causal no mask", b_attention, 7, 3, {I(4, 2, 2, 70, 32), I(4, 2, 2, 70, 32), I(4, 2, 2, 70, 32)}, 0},
    {"attention causal keys > queries", b_attention, 7, 3, {I(4, 1, 2, 17, 16), I(4, 1, 2, 90, 16), I(4, 1, 2, 90, 16)}, 0},
    {"attention causal queries > keys", b_attention, 7, 3, {I(4, 1, 2, 40, 16), I(4, 1, 2, 17, 16), I(4, 1, 2, 17, 16)}, 0},
    {"attention causal left padding", b_attention, 8, 4,
     {I(4, 3, 2, 19, 64), I(4, 3, 2, 19, 64), I(4, 3, 2, 19, 64), IM(4, 3, 1, 1, 19)}, 0},
    {"attention causal left padding d128", b_attention, 8, 4,
     {I(4, 1, 2, 100, 128), I(4, 1, 2, 100, 128), I(4, 1, 2, 100, 96), IM(4, 1, 1, 1, 100)}, 0},
    {"attention odd", b_attention, 0, 4,
     {I(4, 2, 3, 17, 33), I(4, 2, 3, 17, 33), I(4, 2, 3, 17, 33), IM(4, 2, 1, 1, 17)}, 0},
    {"attention bert", b_attention, 0, 4,
     {I(4, 1, 12, 128, 64), I(4, 1, 12, 128, 64), I(4, 1, 12, 128, 64), IM(4, 1, 1, 1, 128)}, 0},
    {"attention no mask", b_attention, 1, 3, {I(4, 1, 2, 1, 64), I(4, 1, 2, 129, 64), I(4, 1, 2, 129, 64)}, 0},
    {"attention dv", b_attention, 1, 3, {I(4, 2, 1, 5, 128), I(4, 2, 1, 40, 128), I(4, 2, 1, 40, 3)}, 0},
    {"attention full mask", b_attention, 0, 4,
     {I(4, 1, 2, 17, 16), I(4, 1, 2, 33, 16), I(4, 1, 2, 33, 16), IM(4, 1, 2, 17, 33)}, 0},
    {"attention 2d mask", b_attention, 0, 4,
     {I(4, 1, 2, 17, 16), I(4, 1, 2, 33, 16), I(4, 1, 2, 33, 16), IM(2, 17, 33)}, 0},
    {"attention permuted", b_attention, 2, 4,
     {I(4, 2, 17, 3, 32), I(4, 2, 17, 3, 32), I(4, 2, 17, 3, 32), IM(4, 2, 1, 1, 17)}, 0},
    /* the head-dim 128 kernel (32-key tiles) with a narrower v, 16-byte loads */
    {"attention d128", b_attention, 0, 4,
     {I(4, 1, 2, 33, 128), I(4, 1, 2, 70, 128), I(4, 1, 2, 70, 96), IM(4, 1, 1, 1, 70)}, 0},
    /* misaligned rows (the one-element loads), head dim 25, 65 keys: a 1-key tail tile */
    {"attention unaligned", b_attention, 3, 4,
     {I(4, 2, 3, 17, 26), I(4, 2, 3, 65, 26), I(4, 2, 3, 65, 26), IM(4, 2, 1, 1, 65)}, 0},
    {"attention unaligned d128", b_attention, 3, 4,
     {I(4, 1, 2, 9, 122), I(4, 1, 2, 40, 122), I(4, 1, 2, 40, 122), IM(4, 1, 1, 9, 40)}, 0},
    {"attention masked row", b_attention, 4, 4,
     {I(4, 1, 2, 17, 64), I(4, 1, 2, 80, 64), I(4, 1, 2, 80, 64), IM(4, 1, 1, 16, 80)}, 0},
};

/* ---- convolutions and pooling ---- */

static ft_tensor *b_conv1d(ft_ctx *c, ft_tensor **in, int v) {
    if (v == 0) return ft_conv1d(c, in[0], in[1], in[2], 2, 1, 2);
    if (v == 2) return ft_conv1d(c, in[0], in[1], in[2], 1, 0, 1); /* kernel 1: the direct GEMM path */
    return ft_conv1d(c, in[0], in[1], NULL, 5, 0, 1); /* WavLM-like stem */
}
static const op_case cases_conv1d[] = {
    {"conv1d groups", b_conv1d, 0, 3, {I(3, 2, 6, 17), I(3, 4, 3, 3), I(1, 4)}, 0},
    {"conv1d stem", b_conv1d, 1, 2, {I(3, 2, 1, 400), I(3, 8, 1, 10)}, 0},
    {"conv1d 1x1 direct", b_conv1d, 2, 3, {I(3, 2, 6, 17), I(3, 4, 6, 1), I(1, 4)}, 0},
};

static ft_tensor *b_conv2d(ft_ctx *c, ft_tensor **in, int v) {
    if (v == 0) return ft_conv2d(c, in[0], in[1], in[2], 1, 1, 1);
    if (v == 2) return ft_conv2d(c, in[0], in[1], in[2], 1, 0, 1); /* 1x1 stride 1: direct GEMM */
    if (v == 3) return ft_conv2d(c, in[0], in[1], in[2], 1, 0, 2); /* the same, 2 groups */
    if (v == 4) { /* graph-fused epilogue: relu(conv + b + residual), as ResNet's last 1x1 */
        ft_params_conv p = {.stride = 1, .padding = 0, .groups = 1, .act = FT_ACT_RELU, .act_in = FT_ACT_NONE};
        ft_tensor *s[4] = {in[0], in[1], in[2], in[3]};
        return ft_dispatch(c, FT_OP_CONV2D, s, 4, &p, sizeof p);
    }
    if (v == 5 || v == 6 || v == 8) { /* the bias as a weight column (graph, CUDA), rows zero-padded to a
                                         multiple of 8: 3x3 + residual + relu, stride 2, a 7x7 stem */
        int64_t cout = in[1]->ne[0], k = ft_numel(in[1]) / cout, pad = ft_conv_wb_cols(k) - k - 1;
        void *zeros = calloc((size_t)(cout * pad), 8);
        ft_tensor *z = zeros ? ft_tensor_from_host(c, in[1]->dtype, 2, (int64_t[]){cout, pad}, zeros) : NULL;
        free(zeros);
        ft_tensor *wb = ft_concat(c, ft_reshape(c, in[1], 2, (int64_t[]){cout, k}),
                                  ft_reshape(c, in[2], 2, (int64_t[]){cout, 1}), 1);
        if (pad) wb = z ? ft_concat(c, wb, z, 1) : NULL;
        if (!wb) return NULL;
        ft_params_conv p = {.stride = v == 5 ? 1 : 2, .padding = v == 8 ? 3 : 1, .groups = 1, .act = FT_ACT_RELU,
                            .act_in = FT_ACT_NONE};
        ft_tensor *s[5] = {in[0], in[1], in[2], v == 5 ? in[3] : NULL, wb};
        return ft_dispatch(c, FT_OP_CONV2D, s, 5, &p, sizeof p);
    }
    if (v == 7) { /* an input prologue, relu(x + bin[c]), padded with zeros after it (graph, CUDA) */
        ft_params_conv p = {.stride = 1, .padding = 1, .groups = 1, .act = FT_ACT_NONE, .act_in = FT_ACT_RELU};
        ft_tensor *s[6] = {in[0], in[1], in[2], NULL, NULL, in[3]};
        return ft_dispatch(c, FT_OP_CONV2D, s, 6, &p, sizeof p);
    }
    return ft_conv2d(c, in[0], in[1], NULL, 2, 0, 2);
}
static const op_case cases_conv2d[] = {
    {"conv2d 3x3", b_conv2d, 0, 3, {I(4, 2, 4, 9, 11), I(4, 6, 4, 3, 3), I(1, 6)}, 0},
    {"conv2d groups stride", b_conv2d, 1, 2, {I(4, 1, 4, 9, 11), I(4, 6, 2, 1, 1)}, 0},
    {"conv2d 1x1 direct", b_conv2d, 2, 3, {I(4, 2, 8, 5, 7), I(4, 6, 8, 1, 1), I(1, 6)}, 0},
    {"conv2d 1x1 direct groups", b_conv2d, 3, 3, {I(4, 2, 8, 5, 7), I(4, 6, 4, 1, 1), I(1, 6)}, 0},
    {"conv2d 1x1+residual+relu", b_conv2d, 4, 4,
     {I(4, 2, 8, 5, 7), I(4, 6, 8, 1, 1), I(1, 6), I(4, 2, 6, 5, 7)}, 0},
    {"conv2d 3x3 bias column+residual+relu", b_conv2d, 5, 4,
     {I(4, 2, 4, 9, 11), I(4, 6, 4, 3, 3), I(1, 6), I(4, 2, 6, 9, 11)}, 0},
    {"conv2d 3x3 stride 2 bias column+relu", b_conv2d, 6, 3, {I(4, 2, 4, 9, 11), I(4, 6, 4, 3, 3), I(1, 6)}, 0},
    {"conv2d 3x3 input bias+relu", b_conv2d, 7, 4, {I(4, 2, 4, 9, 11), I(4, 6, 4, 3, 3), I(1, 6), I(1, 4)}, 0},
    /* K = 3*7*7 = 147: the bias column makes 148, padded to 152 (test_conv_bias_column_aligned) */
    {"conv2d 7x7 stem bias column+relu", b_conv2d, 8, 3, {I(4, 2, 3, 13, 15), I(4, 5, 3, 7, 7), I(1, 5)}, 0},
};

static ft_tensor *b_maxpool(ft_ctx *c, ft_tensor **in, int v) {
    (void)v;
    return ft_maxpool2d(c, in[0], 3, 2, 1);
}
static const op_case cases_maxpool2d[] = {
    {"maxpool2d", b_maxpool, 0, 1, {I(4, 2, 3, 9, 11)}, 0},
};

static ft_tensor *b_gap(ft_ctx *c, ft_tensor **in, int v) {
    (void)v;
    return ft_global_avgpool(c, in[0]);
}
static const op_case cases_global_avgpool[] = {
    {"global_avgpool", b_gap, 0, 1, {I(4, 2, 5, 7, 9)}, 0},
};

static ft_tensor *b_weight_norm(ft_ctx *c, ft_tensor **in, int v) {
    return ft_weight_norm(c, in[0], in[1], v);
}
static const op_case cases_weight_norm[] = {
    {"weight_norm dim0", b_weight_norm, 0, 2, {IP(3, 4, 1, 1), I(3, 4, 3, 5)}, 0},
    {"weight_norm dim2", b_weight_norm, 2, 2, {IP(3, 1, 1, 5), I(3, 4, 3, 5)}, 0},
};

/* fused_eltwise has no shape inference (graph passes make it): build the node
 * by hand and launch it through ft_node_launch. */
static ft_tensor *b_fused(ft_ctx *c, ft_tensor **in, int v) {
    (void)v;
    if (!in[0] || !in[1] || c->status != FT_OK) return NULL;
    ft_tensor *n = ft_tensor_alloc_header(c);
    if (!n) return NULL;
    n->op = FT_OP_FUSED_ELTWISE;
    n->src[0] = in[0];
    n->src[1] = in[1];
    n->dtype = in[0]->dtype;
    n->ndim = in[0]->ndim;
    memcpy(n->ne, in[0]->ne, sizeof n->ne);
    ft_tensor_set_contiguous_strides(n);
    ft_params_fused_eltwise p;
    memset(&p, 0, sizeof p);
    p.n_steps = 3;
    p.op[0] = FT_OP_ADD;
    p.operand[0] = 1;
    p.op[1] = FT_OP_GELU;
    p.operand[1] = -1;
    p.op[2] = FT_OP_SCALE;
    p.operand[2] = -1;
    p.alpha[2] = 0.5f;
    p.beta[2] = 0.25f;
    memcpy(n->op_params, &p, sizeof p);
    if (ft_tensor_alloc_storage(c, n) != FT_OK) return NULL;
    if (ft_node_launch(c, n) != FT_OK) return NULL;
    return n;
}
static const op_case cases_fused_eltwise[] = {
    {"fused add+gelu+scale", b_fused, 0, 2, {IW(3, 3, 17, 129), I(1, 129)}, 0},
};

/* ---- the zoo's text models: grouped linear (SqueezeBERT), disentangled attention (DeBERTa) ---- */

static ft_tensor *b_linear_grouped(ft_ctx *c, ft_tensor **in, int v) {
    int g = (int)(in[0]->ne[in[0]->ndim - 1] / in[1]->ne[1]);
    switch (v) {
    case 0: return ft_linear_grouped(c, in[0], in[1], in[2], g);
    case 1: return ft_linear_grouped(c, in[0], in[1], NULL, g);
    case 2: /* x a row view (row stride > K) */
        return ft_linear_grouped(c, ft_slice(c, in[0], -1, 1, in[0]->ne[in[0]->ndim - 1] - 2), in[1], in[2],
                                 (int)((in[0]->ne[in[0]->ndim - 1] - 2) / in[1]->ne[1]));
    default: { /* graph-made: 3: gelu + residual, alpha; 4: three members stacked by the QKV merge */
        int stacked = v == 4;
        ft_params_linear_grouped p = {stacked ? FT_ACT_NONE : FT_ACT_GELU, stacked ? 1.0f : 0.5f,
                                      stacked ? 3 * g : g, g};
        ft_tensor *s[4] = {in[0], in[1], in[2], stacked ? NULL : in[3]};
        return ft_dispatch(c, FT_OP_LINEAR_GROUPED, s, stacked ? 3 : 4, &p, sizeof p);
    }
    }
}
static const op_case cases_linear_grouped[] = {
    {"linear_grouped odd", b_linear_grouped, 0, 3, {I(3, 3, 17, 15), I(2, 21, 5), I(1, 21)}, 0},
    {"linear_grouped no bias", b_linear_grouped, 1, 2, {I(2, 1, 12), I(2, 6, 2)}, 0},
    {"linear_grouped row view", b_linear_grouped, 2, 3, {I(2, 17, 26), I(2, 32, 6), I(1, 32)}, 0},
    {"linear_grouped squeezebert q", b_linear_grouped, 0, 3, {I(3, 1, 128, 768), I(2, 768, 192), I(1, 768)}, 0},
    {"linear_grouped+gelu+residual alpha", b_linear_grouped, 3, 4,
     {I(2, 17, 24), I(2, 40, 6), I(1, 40), I(2, 17, 40)}, 0},
    {"linear_grouped stacked qkv", b_linear_grouped, 4, 3, {I(2, 17, 24), I(2, 72, 6), I(1, 72)}, 0},
};

/* in: q, k, v, mask, c2p, p2c (the row scale is q's first column: [B, H, Sq, 1]) */
static ft_tensor *b_attention_rel(ft_ctx *c, ft_tensor **in, int v) {
    int64_t span = in[4]->ne[3] / 2;
    ft_tensor *rs = ft_slice(c, in[0], 3, 0, 1);
    switch (v) {
    case 0: return ft_attention_rel(c, in[0], in[1], in[2], in[3], in[4], in[5], rs, 0.125f, span);
    case 1: return ft_attention_rel(c, in[0], in[1], in[2], NULL, in[4], NULL, NULL, 0.25f, span); /* c2p only */
    case 2: return ft_attention_rel(c, in[0], in[1], in[2], in[3], NULL, in[5], rs, 0.125f, span); /* p2c only */
    default: /* the relative products given as [B, H, 2 span, S] transposed views */
        return ft_attention_rel(c, in[0], in[1], in[2], in[3], tr(c, in[4], 2, 3), tr(c, in[5], 2, 3), rs, 0.125f,
                                in[4]->ne[2] / 2);
    }
}
static const op_case cases_attention_rel[] = {
    {"attention_rel odd", b_attention_rel, 0, 6,
     {I(4, 2, 3, 17, 20), I(4, 2, 3, 17, 20), I(4, 2, 3, 17, 20), IM(4, 2, 1, 1, 17), I(4, 2, 3, 17, 34),
      I(4, 2, 3, 17, 34)}, 0},
    {"attention_rel clamped span", b_attention_rel, 0, 6,
     {I(4, 1, 2, 70, 16), I(4, 1, 2, 70, 16), I(4, 1, 2, 70, 16), IM(4, 1, 1, 1, 70), I(4, 1, 2, 70, 10),
      I(4, 1, 2, 70, 10)}, 0},
    {"attention_rel sq != sk", b_attention_rel, 0, 6,
     {I(4, 1, 2, 9, 8), I(4, 1, 2, 33, 8), I(4, 1, 2, 33, 3), IM(4, 1, 1, 9, 33), I(4, 1, 2, 9, 18),
      I(4, 1, 2, 33, 18)}, 0},
    {"attention_rel c2p only", b_attention_rel, 1, 6,
     {I(4, 3, 1, 5, 7), I(4, 3, 1, 5, 7), I(4, 3, 1, 5, 7), IM(4, 3, 1, 1, 5), I(4, 3, 1, 5, 6),
      I(4, 3, 1, 5, 6)}, 0},
    {"attention_rel p2c only", b_attention_rel, 2, 6,
     {I(4, 2, 2, 33, 32), I(4, 2, 2, 33, 32), I(4, 2, 2, 33, 32), IM(4, 2, 1, 1, 33), I(4, 2, 2, 33, 66),
      I(4, 2, 2, 33, 66)}, 0},
    {"attention_rel views d128", b_attention_rel, 3, 6,
     {I(4, 1, 2, 19, 128), I(4, 1, 2, 19, 128), I(4, 1, 2, 19, 96), IM(4, 1, 1, 1, 19), I(4, 1, 2, 38, 19),
      I(4, 1, 2, 38, 19)}, 0},
    {"attention_rel deberta", b_attention_rel, 0, 6,
     {I(4, 1, 12, 128, 64), I(4, 1, 12, 128, 64), I(4, 1, 12, 128, 64), IM(4, 1, 1, 1, 128),
      I(4, 1, 12, 128, 256), I(4, 1, 12, 128, 256)}, 0},
};

#include "cuda_ops_cases_vision.h"

/* One entry per op-table row with a kernel (view has none). */
#define OP_TESTS(X)                          \
    X(copy, cases_copy)                      \
    X(concat, cases_concat)                  \
    X(pad, cases_pad)                        \
    X(embedding, cases_embedding)            \
    X(gather_last, cases_gather_last)        \
    X(binary, cases_binary)                  \
    X(scale, cases_scale)                    \
    X(unary, cases_unary)                    \
    X(sum_last, cases_sum_last)              \
    X(softmax, cases_softmax)                \
    X(layernorm, cases_layernorm)            \
    X(groupnorm, cases_groupnorm)            \
    X(batchnorm, cases_batchnorm)            \
    X(pool_dim, cases_pool_dim)              \
    X(linear, cases_linear)                  \
    X(matmul, cases_matmul)                  \
    X(attention, cases_attention)            \
    X(conv1d, cases_conv1d)                  \
    X(conv2d, cases_conv2d)                  \
    X(maxpool2d, cases_maxpool2d)            \
    X(global_avgpool, cases_global_avgpool)  \
    X(weight_norm, cases_weight_norm)        \
    X(fused_eltwise, cases_fused_eltwise)    \
    X(linear_grouped, cases_linear_grouped)  \
    X(attention_rel, cases_attention_rel)    \
    X(relu6_silu, cases_vision_unary)        \
    X(dwconv2d, cases_dwconv)                \
    X(conv2d_asym, cases_conv2d_asym)        \
    X(channel_norm, cases_channel_norm)      \
    X(se_gate, cases_se_gate)                \
    X(position_ids, cases_position_ids)
