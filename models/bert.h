/*
 * bert.h - BERT's post-LN encoder layer, shared by the architectures built on it
 * (models/bert.c: BERT and DistilBERT; models/roberta.c; models/albert.c, whose
 * shared layers are this layer under other names): its weights, their loading
 * under an architecture's module names, and its forward.
 *
 * One layer: q, k, v projections, softmax(q k^T / sqrt(Dh) + mask) v with the
 * heads merged, h + dense -> LayerNorm, then act(intermediate) -> output + that
 * -> LayerNorm. Eager mode runs attention unfused, as HF's eager attention does;
 * graph mode's passes fuse it.
 */
#ifndef FT_MODEL_BERT_H
#define FT_MODEL_BERT_H

#include "model.h"

typedef struct ft_bert_layer {
    ft_tensor *wq, *bq, *wk, *bk, *wv, *bv; /* [D, D], [D] */
    ft_tensor *wo, *bo;                      /* attention output dense [D, D] */
    ft_tensor *ln1_w, *ln1_b;                /* [D] */
    ft_tensor *wi, *bi;                      /* intermediate [I, D], [I] */
    ft_tensor *wo2, *bo2;                    /* output [D, I], [D] */
    ft_tensor *ln2_w, *ln2_b;
} ft_bert_layer;

/* The module names of a layer's eight parts, in the order q, k, v, attention
 * output dense, its LayerNorm, intermediate, output, output LayerNorm (each
 * holding .weight and .bias), relative to the layer's prefix. */
typedef const char *const ft_bert_layer_names[8];

/* Loads one layer from "<prefix>.<name>.weight/.bias" (prefix e.g. "encoder.layer.3")
 * and packs q/k/v for graph mode's merge; the context's status. */
ft_status ft_bert_layer_load(ft_model *m, ft_bert_layer *l, const char *prefix, const ft_bert_layer_names names,
                             int64_t d, int64_t inter);

/* One layer on h [B, S, D] with the additive mask (or NULL); a new tensor. */
ft_tensor *ft_bert_layer_forward(ft_ctx *ctx, const ft_bert_layer *l, ft_tensor *h, ft_tensor *mask,
                                 int64_t heads, float eps, ft_act_kind act);

#endif /* FT_MODEL_BERT_H */
