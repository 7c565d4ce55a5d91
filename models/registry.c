/*
 * registry.c - every architecture the engine knows, by config model_type.
 * One line per architecture (models/<arch>.c defines its ft_arch).
 */
#include "model.h"

const ft_arch *const ft_archs[] = {
    &ft_arch_bert,
    &ft_arch_distilbert,
    &ft_arch_resnet,
    &ft_arch_wavlm,
    &ft_arch_funnel,
    &ft_arch_mobilebert,
    &ft_arch_vit,
    &ft_arch_wav2vec2,
    &ft_arch_hubert,
    &ft_arch_squeezebert,
    &ft_arch_deberta,
    &ft_arch_mobilenet_v2,
    &ft_arch_efficientnet,
    &ft_arch_convnext,
    &ft_arch_roberta,
    &ft_arch_albert,
    &ft_arch_gpt2,
    NULL,
};
