/*
 * model.h - what an architecture file (models/<arch>.c) implements and what
 * the model framework (models/model.c) gives it.
 *
 * An architecture is a row of callbacks (ft_arch). Its load() reads the config
 * through ft_config getters (absent keys take the HF default for that model
 * type) and fetches each parameter with ft_weight(), which finds the tensor in
 * model.safetensors under its HF name (with or without the base-model prefix,
 * with legacy LayerNorm.gamma/beta spellings), checks its shape, converts it
 * to the model dtype and uploads it - or random-initialises it for a preset.
 * Its forward() is written once against the op API (ftengine.h) and runs in
 * every mode: it must not read tensor data on the host, branch on values, or
 * call kernels directly. Host-side input checks belong in validate().
 */
#ifndef FT_MODEL_H
#define FT_MODEL_H

#include "../engine/config.h"
#include "../engine/ft_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FT_MODEL_MAX_INPUTS 8
#define FT_MODEL_MAX_OUTPUTS 96

/* A random-initialised model at real sizes for latency studies: a name and the
 * config.json it stands for (absent keys take the model type's defaults). */
typedef struct ft_preset {
    const char *name;        /* "bert-base" */
    const char *config_json; /* "{\"model_type\": \"bert\"}" */
} ft_preset;

typedef struct ft_arch {
    const char *model_type;   /* config.json "model_type": "bert", "distilbert", ... */
    const char *const *prefixes; /* base-model prefixes accepted in checkpoints, NULL-terminated */
    const char *const *inputs;   /* accepted input names, NULL-terminated */
    /* Reads the config, sets m->arch_name, fetches weights, fills m->priv. */
    ft_status (*load)(ft_model *m, ft_config *cfg);
    /* Host-side checks of the inputs (ranks, shapes, id ranges) before anything runs. */
    ft_status (*validate)(ft_model *m);
    /* The forward pass on ft_model_input() tensors; adds outputs with ft_model_add_output. */
    ft_status (*forward)(ft_model *m, ft_ctx *ctx);
    /* Frees m->priv (weights are freed by the framework). */
    void (*destroy)(ft_model *m);
    /* Builds the host inputs of a typical forward for ft_model_macs and the bench:
     * deterministic pseudo-random ids over the vocabulary, pixels / audio uniform in
     * [0, 1) (use ft_example_fill_*); `length` is sequence length / image side /
     * samples, and length <= 0 means the architecture's default (128 / 224 / 32000).
     * *owned receives one malloc'd block holding all the data. */
    ft_status (*example_inputs)(ft_model *m, int64_t batch, int64_t length, ft_host_tensor *in,
                                int *n_in, void **owned);
    const ft_preset *presets; /* NULL-name-terminated, or NULL */
} ft_arch;

typedef struct ft_model_io {
    char name[48];
    ft_tensor *t;                 /* device tensor (eager) or placeholder (trace) */
    const ft_host_tensor *host;   /* inputs: the caller's host data */
} ft_model_io;

struct ft_model {
    ft_ctx *ctx;
    const ft_arch *arch;
    char arch_name[64];           /* "BertModel" */
    char source[512];             /* checkpoint directory or "preset:<name>" */
    ft_model_options opt;
    ft_dtype dtype;               /* weights and activations */
    void *priv;                   /* the architecture's state */

    /* parameters, owned */
    ft_tensor **params;
    int n_params, cap_params;
    int64_t param_count;

    /* loading state (valid during load only) */
    struct ft_st_file *st;        /* model.safetensors, or NULL for random init */
    uint64_t rng;                 /* random init state */
    float init_std;               /* std of random weights (config initializer_range) */

    /* the current forward */
    ft_model_io in[FT_MODEL_MAX_INPUTS];
    int n_in;
    ft_model_io out[FT_MODEL_MAX_OUTPUTS]; /* persistent (kept) tensors */
    int n_out;

    void *graph;                  /* graph/static mode state (graph/executor.c) */
    /* set while example inputs are made for their shapes only (ft_model_macs, and
     * ft_model_example_inputs with owned == NULL): example_inputs leaves data NULL and
     * allocates nothing; validate() skips what reads values */
    bool example_shapes_only;
};

/* ---- weights (during load) ---- */

/* The parameter of that HF name and shape, in the model dtype; NULL + error if missing
 * or mis-shaped. The name is a printf format. */
ft_tensor *ft_weight(ft_model *m, int ndim, const int64_t *shape, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
/* Same, kept in f32 whatever the model dtype (statistics, masks, positional tables). */
ft_tensor *ft_weight_f32(ft_model *m, int ndim, const int64_t *shape, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
/* A Conv1D weight (GPT-2's y = x W + b): the file holds W as [in, out]; it is
 * stored transposed once, as [out, in], so ft_linear takes it with no copy per
 * call. Errors name the file's [in, out] shape. */
ft_tensor *ft_weight_transposed(ft_model *m, int64_t out, int64_t in, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
/* Whether the checkpoint holds a tensor of that name (prefix and renames applied).
 * Always false for random init. */
bool ft_weight_exists(ft_model *m, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Moves freshly loaded weights (e.g. the query, key and value projections of one
 * layer) into one block, back to back, so graph mode's Q/K/V merge uses that memory
 * as the stacked weight instead of copying it at plan time (and holding it twice).
 * Only in graph and static mode (eager never stacks); a no-op when a part is
 * NULL, of another dtype, or not a multiple of 256 bytes (the parts keep their
 * alignment). The tensors stay valid: only their storage moves. */
ft_status ft_weights_pack(ft_model *m, ft_tensor *const *parts, int n);

/* shape literals: FT_SHAPE(768, 3072) */
#define FT_SHAPE(...) (const int64_t[]){__VA_ARGS__}
#define FT_NDIM(...) ((int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))
/* ft_weight with an inline shape: FT_W(m, "encoder.layer.%d.attention.self.query.weight", D, D) */
#define FT_W_SHAPE(...) FT_NDIM(__VA_ARGS__), FT_SHAPE(__VA_ARGS__)

/* ---- inside forward ---- */

/* The input of that name (device tensor, or placeholder while tracing); NULL if absent. */
ft_tensor *ft_model_input(ft_model *m, const char *name);
/* The caller's host copy of an input (for validate); NULL if absent. */
const ft_host_tensor *ft_model_host_input(const ft_model *m, const char *name);
/* Registers an output under its HF name. */
ft_status ft_model_add_output(ft_model *m, const char *name, ft_tensor *t);
/* Registers t as "hidden_states.<index>" when hidden states were asked for; else no-op. */
ft_status ft_model_add_hidden_state(ft_model *m, int64_t index, ft_tensor *t);

/* [B, S, H*Dh] -> [B, H, S, Dh], a view (the attention layout of every text model). */
ft_tensor *ft_split_heads(ft_ctx *ctx, ft_tensor *x, int64_t heads);
/* The checks every text model makes of its host inputs: input_ids [batch, seq] with ids
 * in [0, vocab), seq <= max_pos (0: no limit), attention_mask and token_type_ids (when
 * given) of the same shape, token types in [0, type_vocab). */
ft_status ft_validate_text_inputs(ft_model *m, int64_t max_pos, int64_t vocab, int64_t type_vocab);

/* Hugging Face's additive attention mask, (1 - m) * min_value as f32 [B, 1, 1, S]
 * from a [B, S] mask of any dtype: min_value is finfo(float32).min for BERT,
 * MobileBERT and WavLM (FT_F32_MIN), -1e6 for Funnel (score - INF * (1 - m)).
 * Computed in f32 with two roundings, as HF's two ops; NULL without a mask. */
#define FT_F32_MIN (-3.4028234663852886e38f)
ft_tensor *ft_additive_mask(ft_ctx *ctx, ft_tensor *mask, float min_value);
/* For validate(): FT_ERR_INVALID_ARG naming the value and its position when (1 - m) *
 * min_value is not finite in f32 for some mask value m (seen as the forward sees it:
 * float masks in the model dtype), i.e. where HF's formula would give NaN rows. */
ft_status ft_check_mask_values(ft_model *m, const char *input, float min_value);
/* Element i of a host tensor of any dtype (unaligned data is fine). */
double ft_host_value_at(const ft_host_tensor *t, int64_t i);

/* Activations by their Hugging Face names (transformers' ACT2FN). */
typedef enum ft_act_kind {
    FT_ACTK_GELU,       /* "gelu", "gelu_python": exact erf */
    FT_ACTK_GELU_TANH,  /* "gelu_new", "gelu_pytorch_tanh", "gelu_fast", "gelu_accurate" */
    FT_ACTK_RELU,       /* "relu" */
    FT_ACTK_TANH,       /* "tanh" */
    FT_ACTK_SIGMOID,    /* "sigmoid" */
    FT_ACTK_SILU,       /* "silu", "swish": x * sigmoid(x) */
    FT_ACTK_QUICK_GELU, /* "quick_gelu": x * sigmoid(1.702 x) */
    FT_ACTK_LINEAR,     /* "linear": identity */
    FT_ACTK_RELU6       /* "relu6": min(max(x, 0), 6) */
} ft_act_kind;
/* Reads config key `key` (default `def` when absent) into *out; an unknown name is a
 * config error listing the supported ones. */
ft_status ft_model_act_parse(ft_config *cfg, const char *key, const char *def, ft_act_kind *out);
/* act(x) through the op API (single ops where one exists, so graph mode can fuse
 * them into a GEMM epilogue). Always a new tensor or view: x may be released after. */
ft_tensor *ft_model_act(ft_ctx *ctx, ft_act_kind act, ft_tensor *x);
static inline int ft_model_want_hidden_states(const ft_model *m) {
    return m->opt.output_hidden_states;
}

/* Deterministic fills for example_inputs (a fixed seed, so runs are comparable). */
void ft_example_fill_ids(int64_t *ids, int64_t n, int64_t vocab);
void ft_example_fill_uniform(float *x, int64_t n);
/* example_inputs of a text model: input_ids [batch, length] (length <= 0: 128) over vocab. */
ft_status ft_example_text_inputs(ft_model *m, int64_t batch, int64_t length, int64_t vocab,
                                 ft_host_tensor *in, int *n_in, void **owned);

/* example_inputs of an image model: pixel_values [batch, channels, height, width], uniform [0, 1). */
ft_status ft_example_image_inputs(ft_model *m, int64_t batch, int64_t channels, int64_t height, int64_t width,
                                  ft_host_tensor *in, int *n_in, void **owned);

/* Host-side helpers for validate(): integer inputs read as int64. */
int64_t ft_host_int_at(const ft_host_tensor *t, int64_t i);
int64_t ft_host_numel(const ft_host_tensor *t);
/* FT_ERR_SHAPE naming `what` when a shape's element count or byte size (elem bytes each)
 * overflows or passes FT_MAX_BYTES (engine/ft_checked.h); FT_OK otherwise. */
ft_status ft_check_host_size(ft_ctx *ctx, const char *what, int ndim, const int64_t *shape, size_t elem);
/* Checks that every element of an integer input lies in [lo, hi); error names the input. */
ft_status ft_check_ids(ft_model *m, const char *input, int64_t lo, int64_t hi);

/* Architectures (one file each under models/) */
extern const ft_arch ft_arch_bert;
extern const ft_arch ft_arch_distilbert;
extern const ft_arch ft_arch_funnel;
extern const ft_arch ft_arch_mobilebert;
extern const ft_arch ft_arch_resnet;
extern const ft_arch ft_arch_wavlm;
extern const ft_arch ft_arch_vit;
extern const ft_arch ft_arch_wav2vec2;
extern const ft_arch ft_arch_hubert;
extern const ft_arch ft_arch_squeezebert;
extern const ft_arch ft_arch_deberta;
extern const ft_arch ft_arch_mobilenet_v2;
extern const ft_arch ft_arch_efficientnet;
extern const ft_arch ft_arch_convnext;
extern const ft_arch ft_arch_roberta;
extern const ft_arch ft_arch_albert;
extern const ft_arch ft_arch_gpt2;

/* The architecture for a config's model_type, or NULL. (models/registry.c) */
const ft_arch *ft_arch_find(const char *model_type);

/* Every architecture, NULL-terminated (models/registry.c: one line per arch). */
extern const ft_arch *const ft_archs[];
/* The preset of that name across all architectures, or NULL. */
const ft_preset *ft_preset_find(const char *name, const ft_arch **arch);

#ifdef __cplusplus
}
#endif

#endif /* FT_MODEL_H */
