/*
 * gpt2.c - GPT2Model as Hugging Face defines it (tests/golden/README-zoo.md,
 * GPT2Model): token + position embeddings, pre-LN blocks with causal
 * self-attention and a gelu_new MLP, a final LayerNorm ln_f. The full-sequence
 * forward only (no KV cache): what the paper timed.
 *
 * Conv1D weights are stored [in, out] (y = x W + b); they are transposed once at
 * load (ft_weight_transposed), so every projection is an ordinary linear with no
 * copy per call and graph mode's epilogue passes apply. c_attn is already one
 * GEMM for q | k | v; the heads are views into its output.
 *
 * Attention as HF computes it: scores / sqrt(Dh) (/ (layer + 1) with
 * scale_attn_by_inverse_layer_idx), scores past each query *replaced* by
 * finfo(float32).min, then (1 - m) * finfo.min *added* when a mask is given
 * (ft_softmax_causal; graph mode fuses it into a causal ft_attention). The sum
 * of two minima is -inf, so the pad query rows of a left-padded batch attend
 * uniformly to their causal pad keys and every real key, exactly as HF's do.
 * Positions are 0 .. S - 1 whatever the mask says, unless position_ids are
 * given; token_type_ids, when given, are looked up in the word table.
 * hidden_states are the inputs of the blocks and then the ln_f output.
 */
#include "model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct gpt2_block {
    ft_tensor *ln1_w, *ln1_b, *ln2_w, *ln2_b; /* [D] */
    ft_tensor *attn_w, *attn_b;               /* c_attn as [3D, D], [3D] */
    ft_tensor *proj_w, *proj_b;               /* attn.c_proj as [D, D], [D] */
    ft_tensor *fc_w, *fc_b;                   /* mlp.c_fc as [I, D], [I] */
    ft_tensor *out_w, *out_b;                 /* mlp.c_proj as [D, I], [D] */
} gpt2_block;

typedef struct gpt2 {
    int64_t vocab, max_pos, d, layers, heads, inner;
    float eps;
    bool scale_weights, scale_by_layer;
    ft_act_kind act;
    ft_tensor *wte, *wpe; /* [V, D], [P, D] */
    gpt2_block *block;
    ft_tensor *lnf_w, *lnf_b;
} gpt2;

/* GPT2Config's defaults (= gpt2); the attribute_map aliases are accepted. */
static ft_status read_config(gpt2 *g, ft_config *c) {
    ft_status st;
    double eps = 1e-5;
    bool cross = false, upcast = false;
    if ((st = ft_config_int(c, "vocab_size", 50257, &g->vocab)) ||
        (st = ft_config_int(c, "n_positions|max_position_embeddings", 1024, &g->max_pos)) ||
        (st = ft_config_int(c, "n_embd|hidden_size", 768, &g->d)) ||
        (st = ft_config_int(c, "n_layer|num_hidden_layers", 12, &g->layers)) ||
        (st = ft_config_int(c, "n_head|num_attention_heads", 12, &g->heads)) ||
        (st = ft_config_float(c, "layer_norm_epsilon", 1e-5, &eps)) ||
        (st = ft_config_bool(c, "scale_attn_weights", true, &g->scale_weights)) ||
        (st = ft_config_bool(c, "scale_attn_by_inverse_layer_idx", false, &g->scale_by_layer)) ||
        (st = ft_config_bool(c, "reorder_and_upcast_attn", false, &upcast)) ||
        (st = ft_config_bool(c, "add_cross_attention", false, &cross)) ||
        (st = ft_model_act_parse(c, "activation_function", "gelu_new", &g->act)))
        return st;
    /* n_inner null (the Hub's) means 4 * n_embd */
    if (g->d > 0 && g->d < ((int64_t)1 << 40) && (st = ft_config_int(c, "n_inner", 4 * g->d, &g->inner)))
        return st;
    if (cross) return ft_config_error(c, "add_cross_attention is not supported (GPT2Model without cross-attention)");
    if (g->vocab < 1 || g->max_pos < 1 || g->d < 1 || g->layers < 0 || g->heads < 1 || g->inner < 1)
        return ft_config_error(c, "sizes must be positive (vocab_size %lld, n_positions %lld, n_embd %lld, n_layer "
                               "%lld, n_head %lld, n_inner %lld)",
                               (long long)g->vocab, (long long)g->max_pos, (long long)g->d, (long long)g->layers,
                               (long long)g->heads, (long long)g->inner);
    if (g->d % g->heads)
        return ft_config_error(c, "n_embd %lld is not a multiple of n_head %lld", (long long)g->d,
                               (long long)g->heads);
    if (!(eps > 0)) return ft_config_error(c, "layer_norm_epsilon must be positive");
    g->eps = (float)eps; /* reorder_and_upcast_attn: the same math in f32 */
    return FT_OK;
}

static ft_status load_weights(ft_model *m, gpt2 *g) {
    int64_t D = g->d, I = g->inner;
    g->wte = ft_weight(m, FT_W_SHAPE(g->vocab, D), "wte.weight");
    g->wpe = ft_weight(m, FT_W_SHAPE(g->max_pos, D), "wpe.weight");
    for (int64_t l = 0; l < g->layers; l++) {
        gpt2_block *b = &g->block[l];
        int i = (int)l;
        b->ln1_w = ft_weight(m, FT_W_SHAPE(D), "h.%d.ln_1.weight", i);
        b->ln1_b = ft_weight(m, FT_W_SHAPE(D), "h.%d.ln_1.bias", i);
        b->attn_w = ft_weight_transposed(m, 3 * D, D, "h.%d.attn.c_attn.weight", i);
        b->attn_b = ft_weight(m, FT_W_SHAPE(3 * D), "h.%d.attn.c_attn.bias", i);
        b->proj_w = ft_weight_transposed(m, D, D, "h.%d.attn.c_proj.weight", i);
        b->proj_b = ft_weight(m, FT_W_SHAPE(D), "h.%d.attn.c_proj.bias", i);
        b->ln2_w = ft_weight(m, FT_W_SHAPE(D), "h.%d.ln_2.weight", i);
        b->ln2_b = ft_weight(m, FT_W_SHAPE(D), "h.%d.ln_2.bias", i);
        b->fc_w = ft_weight_transposed(m, I, D, "h.%d.mlp.c_fc.weight", i);
        b->fc_b = ft_weight(m, FT_W_SHAPE(I), "h.%d.mlp.c_fc.bias", i);
        b->out_w = ft_weight_transposed(m, D, I, "h.%d.mlp.c_proj.weight", i);
        b->out_b = ft_weight(m, FT_W_SHAPE(D), "h.%d.mlp.c_proj.bias", i);
        if (m->ctx->status != FT_OK) return m->ctx->status;
    }
    /* (h.N.attn.bias / masked_bias, non-persistent buffers of older files, are not read) */
    g->lnf_w = ft_weight(m, FT_W_SHAPE(D), "ln_f.weight");
    g->lnf_b = ft_weight(m, FT_W_SHAPE(D), "ln_f.bias");
    return m->ctx->status;
}

static ft_status gpt2_load(ft_model *m, ft_config *cfg) {
    gpt2 *g = (gpt2 *)calloc(1, sizeof *g);
    if (!g) return ft_set_error(m->ctx, FT_ERR_OOM, "out of host memory");
    m->priv = g;
    snprintf(m->arch_name, sizeof m->arch_name, "GPT2Model");
    ft_status st = read_config(g, cfg);
    if (st) return st;
    g->block = (gpt2_block *)calloc((size_t)(g->layers ? g->layers : 1), sizeof *g->block);
    if (!g->block) return ft_set_error(m->ctx, FT_ERR_OOM, "out of host memory");
    return load_weights(m, g);
}

static void gpt2_destroy(ft_model *m) {
    gpt2 *g = (gpt2 *)m->priv;
    if (g) free(g->block);
    free(g);
    m->priv = NULL;
}

static ft_status gpt2_validate(ft_model *m) {
    const gpt2 *g = (const gpt2 *)m->priv;
    /* the causal buffer is n_positions square: longer inputs fail in HF too */
    ft_status st = ft_validate_text_inputs(m, g->max_pos, g->vocab, g->vocab);
    if (st) return st;
    const ft_host_tensor *p = ft_model_host_input(m, "position_ids");
    if (p) {
        const ft_host_tensor *ids = ft_model_host_input(m, "input_ids");
        if (p->ndim != 2 || (p->shape[0] != ids->shape[0] && p->shape[0] != 1) || p->shape[1] != ids->shape[1])
            return ft_set_error(m->ctx, FT_ERR_SHAPE, "input 'position_ids' must be [%lld, %lld] or [1, %lld]",
                                (long long)ids->shape[0], (long long)ids->shape[1], (long long)ids->shape[1]);
        if ((st = ft_check_ids(m, "position_ids", 0, g->max_pos))) return st;
    }
    return ft_check_mask_values(m, "attention_mask", FT_F32_MIN);
}

/* One pre-LN block on h [B, S, D] (left alive: it may be a hidden state); a new tensor. */
static ft_tensor *block_forward(ft_ctx *ctx, const gpt2 *g, const gpt2_block *b, int64_t layer, ft_tensor *h,
                                ft_tensor *mask) {
    int64_t B = ft_tensor_dim(h, 0), S = ft_tensor_dim(h, 1), D = g->d, H = g->heads, Dh = D / H;
    ft_tensor *x = ft_layernorm(ctx, h, b->ln1_w, b->ln1_b, g->eps);
    ft_tensor *z = ft_linear(ctx, x, b->attn_w, b->attn_b); /* [B, S, 3D]: q | k | v */
    ft_tensor_release(ctx, x);
    ft_tensor *z5 = ft_reshape(ctx, z, 5, FT_SHAPE(B, S, 3, H, Dh));
    const int heads_first[4] = {0, 2, 1, 3};
    ft_tensor *q = ft_permute(ctx, ft_select(ctx, z5, 2, 0), heads_first); /* [B, H, S, Dh] views */
    ft_tensor *k = ft_permute(ctx, ft_select(ctx, z5, 2, 1), heads_first);
    ft_tensor *v = ft_permute(ctx, ft_select(ctx, z5, 2, 2), heads_first);
    /* HF divides by the f32 sqrt(Dh), then by layer + 1 */
    float scale = 1.0f;
    if (g->scale_weights) scale /= (float)sqrt((double)Dh);
    if (g->scale_by_layer) scale /= (float)(layer + 1);
    ft_tensor *scores = ft_matmul(ctx, q, ft_transpose(ctx, k, -1, -2), 1.0f); /* [B, H, S, S] */
    ft_tensor *probs = ft_softmax_causal(ctx, scores, mask, scale);
    ft_tensor_release(ctx, scores);
    ft_tensor *c = ft_matmul(ctx, probs, v, 1.0f); /* [B, H, S, Dh] */
    ft_tensor_release(ctx, probs);
    ft_tensor_release(ctx, z);
    c = ft_reshape(ctx, ft_permute(ctx, c, heads_first), 3, FT_SHAPE(B, S, D));
    ft_tensor *r = ft_add(ctx, ft_linear(ctx, c, b->proj_w, b->proj_b), h); /* h + attention */
    ft_tensor_release(ctx, c);
    x = ft_layernorm(ctx, r, b->ln2_w, b->ln2_b, g->eps);
    ft_tensor *f = ft_linear(ctx, x, b->fc_w, b->fc_b); /* [B, S, I] */
    ft_tensor_release(ctx, x);
    ft_tensor *fa = ft_model_act(ctx, g->act, f);
    ft_tensor_release(ctx, f);
    ft_tensor *out = ft_add(ctx, ft_linear(ctx, fa, b->out_w, b->out_b), r);
    ft_tensor_release(ctx, fa);
    ft_tensor_release(ctx, r);
    return out;
}

static ft_status gpt2_forward(ft_model *m, ft_ctx *ctx) {
    const gpt2 *g = (const gpt2 *)m->priv;
    ft_tensor *ids = ft_model_input(m, "input_ids");
    ft_tensor *tt = ft_model_input(m, "token_type_ids");
    ft_tensor *pid = ft_model_input(m, "position_ids");
    int64_t S = ft_tensor_dim(ids, 1);
    ft_tensor *h = ft_add(ctx, ft_embedding(ctx, g->wte, ids),
                          pid ? ft_embedding(ctx, g->wpe, pid) : ft_slice(ctx, g->wpe, 0, 0, S)); /* [B, S, D] */
    if (tt) h = ft_add(ctx, h, ft_embedding(ctx, g->wte, tt)); /* token types index the word table */
    ft_tensor *mask = ft_additive_mask(ctx, ft_model_input(m, "attention_mask"), FT_F32_MIN);
    bool hs = ft_model_want_hidden_states(m);
    for (int64_t l = 0; l < g->layers; l++) {
        ft_model_add_hidden_state(m, l, h); /* the block's input */
        ft_tensor *next = block_forward(ctx, g, &g->block[l], l, h, mask);
        if (!hs) ft_tensor_release(ctx, h);
        h = next;
    }
    ft_tensor *out = ft_layernorm(ctx, h, g->lnf_w, g->lnf_b, g->eps);
    ft_model_add_hidden_state(m, g->layers, out);
    ft_model_add_output(m, "last_hidden_state", out);
    return ctx->status;
}

static ft_status gpt2_example_inputs(ft_model *m, int64_t batch, int64_t length, ft_host_tensor *in, int *n_in,
                                     void **owned) {
    const gpt2 *g = (const gpt2 *)m->priv;
    if (length > g->max_pos) /* before allocating length x batch ids */
        return ft_set_error(m->ctx, FT_ERR_SHAPE, "sequence length %lld exceeds n_positions %lld",
                            (long long)length, (long long)g->max_pos);
    return ft_example_text_inputs(m, batch, length, g->vocab, in, n_in, owned);
}

/* Checkpoints of GPT2LMHeadModel and the like may carry the "transformer." prefix
 * (the gpt2 Hub file itself has none). */
static const char *const gpt2_prefixes[] = {"transformer.", NULL};
static const char *const gpt2_inputs[] = {"input_ids", "attention_mask", "token_type_ids", "position_ids", NULL};

static const ft_preset gpt2_presets[] = {
    {"gpt2", "{\"model_type\": \"gpt2\"}"},
    {"gpt2-medium", "{\"model_type\": \"gpt2\", \"n_embd\": 1024, \"n_layer\": 24, \"n_head\": 16}"},
    {NULL, NULL},
};

const ft_arch ft_arch_gpt2 = {
    .model_type = "gpt2",
    .prefixes = gpt2_prefixes,
    .inputs = gpt2_inputs,
    .load = gpt2_load,
    .validate = gpt2_validate,
    .forward = gpt2_forward,
    .destroy = gpt2_destroy,
    .example_inputs = gpt2_example_inputs,
    .presets = gpt2_presets,
};
