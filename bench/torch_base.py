#!/usr/bin/env python3
"""torch_base.py - what bench/torch_models.py's models share: the HF config
class defaults and ftengine's presets over them, HF's activations, and
HFModel, which keeps a model's weights in a dict under HF's state_dict names
(random init where declared, load_state() takes a checkpoint's)."""
import math

try:
    import torch
    import torch.nn.functional as F
    TORCH_ERROR = None
except Exception as e:  # optional: importers skip with a line saying so
    torch = F = None
    TORCH_ERROR = f"{e.__class__.__name__}: {e}"

# --------------------------------------------------------------------------- configs

# the HF config class defaults (transformers 4.36), as the C readers in models/*.c apply them
DEFAULTS = {
    "bert": dict(vocab_size=30522, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                 intermediate_size=3072, hidden_act="gelu", max_position_embeddings=512, type_vocab_size=2,
                 layer_norm_eps=1e-12),
    "distilbert": dict(vocab_size=30522, dim=768, n_layers=6, n_heads=12, hidden_dim=3072, activation="gelu",
                       max_position_embeddings=512),
    "mobilebert": dict(vocab_size=30522, hidden_size=512, embedding_size=128, num_hidden_layers=24,
                       num_attention_heads=4, intermediate_size=512, hidden_act="relu", max_position_embeddings=512,
                       type_vocab_size=2, layer_norm_eps=1e-12, trigram_input=True, use_bottleneck=True,
                       intra_bottleneck_size=128, use_bottleneck_attention=False, key_query_shared_bottleneck=True,
                       num_feedforward_networks=4, normalization_type="no_norm", classifier_activation=True),
    "funnel": dict(vocab_size=30522, block_sizes=[4, 4, 4], block_repeats=None, num_decoder_layers=2, d_model=768,
                   n_head=12, d_head=64, d_inner=3072, hidden_act="gelu_new", layer_norm_eps=1e-9,
                   pooling_type="mean", attention_type="relative_shift", separate_cls=True, truncate_seq=True,
                   pool_q_only=True, architectures=["FunnelModel"]),
    "resnet": dict(num_channels=3, embedding_size=64, hidden_sizes=[256, 512, 1024, 2048], depths=[3, 4, 6, 3],
                   layer_type="bottleneck", hidden_act="relu", downsample_in_first_stage=False,
                   downsample_in_bottleneck=False),
    "wavlm": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072,
                  hidden_act="gelu", layer_norm_eps=1e-5, feat_extract_norm="group", feat_extract_activation="gelu",
                  conv_dim=[512] * 7, conv_stride=[5, 2, 2, 2, 2, 2, 2], conv_kernel=[10, 3, 3, 3, 3, 2, 2],
                  conv_bias=False, num_conv_pos_embeddings=128, num_conv_pos_embedding_groups=16, num_buckets=320,
                  max_bucket_distance=800, do_stable_layer_norm=False),
    # bench/torch_zoo_vision_a.py
    "vit": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072,
                hidden_act="gelu", layer_norm_eps=1e-12, image_size=224, patch_size=16, num_channels=3,
                qkv_bias=True),
    "wav2vec2": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072,
                     hidden_act="gelu", layer_norm_eps=1e-5, feat_extract_norm="group",
                     feat_extract_activation="gelu", conv_dim=[512] * 7, conv_stride=[5, 2, 2, 2, 2, 2, 2],
                     conv_kernel=[10, 3, 3, 3, 3, 2, 2], conv_bias=False, num_conv_pos_embeddings=128,
                     num_conv_pos_embedding_groups=16, do_stable_layer_norm=False, mask_time_prob=0.05,
                     mask_feature_prob=0.0),
    # bench/torch_zoo_text_b.py
    "squeezebert": dict(vocab_size=30522, hidden_size=768, embedding_size=768, num_hidden_layers=12,
                        num_attention_heads=12, intermediate_size=3072, hidden_act="gelu", max_position_embeddings=512,
                        type_vocab_size=2, layer_norm_eps=1e-12, q_groups=4, k_groups=4, v_groups=4,
                        post_attention_groups=1, intermediate_groups=4, output_groups=4),
    "deberta": dict(vocab_size=50265, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                    intermediate_size=3072, hidden_act="gelu", max_position_embeddings=512, type_vocab_size=0,
                    layer_norm_eps=1e-7, relative_attention=False, max_relative_positions=-1,
                    position_biased_input=True, pos_att_type=None, talking_head=False),
    # bench/torch_zoo_vision_b.py
    "mobilenet_v2": dict(num_channels=3, image_size=224, depth_multiplier=1.0, depth_divisible_by=8, min_depth=8,
                         expand_ratio=6.0, output_stride=32, first_layer_is_expansion=True, finegrained_output=True,
                         hidden_act="relu6", tf_padding=True, layer_norm_eps=0.001),
    "efficientnet": dict(num_channels=3, image_size=600, width_coefficient=2.0, depth_coefficient=3.1, depth_divisor=8,
                         kernel_sizes=[3, 3, 5, 3, 5, 5, 3], in_channels=[32, 16, 24, 40, 80, 112, 192],
                         out_channels=[16, 24, 40, 80, 112, 192, 320], depthwise_padding=[],
                         strides=[1, 2, 2, 2, 1, 2, 1], num_block_repeats=[1, 2, 2, 3, 3, 4, 1],
                         expand_ratios=[1, 6, 6, 6, 6, 6, 6], squeeze_expansion_ratio=0.25, hidden_act="swish",
                         hidden_dim=2560, pooling_type="mean", batch_norm_eps=1e-3),
    "convnext": dict(num_channels=3, patch_size=4, num_stages=4, hidden_sizes=[96, 192, 384, 768], depths=[3, 3, 9, 3],
                     hidden_act="gelu", layer_norm_eps=1e-12, layer_scale_init_value=1e-6, image_size=224),
    "roberta": dict(vocab_size=50265, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                    intermediate_size=3072, hidden_act="gelu", max_position_embeddings=512, type_vocab_size=2,
                    layer_norm_eps=1e-12, pad_token_id=1),
    "albert": dict(vocab_size=30000, embedding_size=128, hidden_size=4096, num_hidden_layers=12, num_hidden_groups=1,
                   inner_group_num=1, num_attention_heads=64, intermediate_size=16384, hidden_act="gelu_new",
                   max_position_embeddings=512, type_vocab_size=2, layer_norm_eps=1e-12),
    "gpt2": dict(vocab_size=50257, n_positions=1024, n_embd=768, n_layer=12, n_head=12, n_inner=None,
                 activation_function="gelu_new", layer_norm_epsilon=1e-5, scale_attn_weights=True,
                 scale_attn_by_inverse_layer_idx=False),
}
DEFAULTS["hubert"] = dict(DEFAULTS["wav2vec2"], feat_proj_layer_norm=True)

# ftengine's presets (models/*.c): model_type + the keys each sets over the class defaults
PRESETS = {
    "bert-tiny": ("bert", dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=2, intermediate_size=512)),
    "bert-mini": ("bert", dict(hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024)),
    "bert-base": ("bert", {}),
    "bert-large": ("bert", dict(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16,
                                intermediate_size=4096)),
    "distilbert-base": ("distilbert", {}),
    "mobilebert-uncased": ("mobilebert", dict(classifier_activation=False)),
    "funnel-small": ("funnel", dict(architectures=["FunnelModel"])),
    "funnel-small-base": ("funnel", dict(architectures=["FunnelBaseModel"])),
    "resnet-50": ("resnet", {}),
    "resnet-101": ("resnet", dict(depths=[3, 4, 23, 3])),
    "wavlm-base": ("wavlm", {}),
    "vit-base-patch16-224": ("vit", {}),
    "vit-base-patch32-224": ("vit", dict(patch_size=32)),
    "wav2vec2-base": ("wav2vec2", {}),
    "wav2vec2-large-lv60": ("wav2vec2", dict(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16,
                                             intermediate_size=4096, feat_extract_norm="layer",
                                             do_stable_layer_norm=True, conv_bias=True)),
    "hubert-base-ls960": ("hubert", {}),
    "squeezebert-uncased": ("squeezebert", dict(vocab_size=30528)),
    "deberta-base": ("deberta", dict(relative_attention=True, pos_att_type="c2p|p2c", position_biased_input=False)),
    "deberta-large": ("deberta", dict(relative_attention=True, pos_att_type="c2p|p2c", position_biased_input=False,
                                      hidden_size=1024, num_hidden_layers=24, num_attention_heads=16,
                                      intermediate_size=4096)),
    "mobilenet_v2_1.0_224": ("mobilenet_v2", {}),
    "efficientnet-b0": ("efficientnet", dict(width_coefficient=1.0, depth_coefficient=1.0, image_size=224,
                                             hidden_dim=1280)),
    "convnext-tiny-224": ("convnext", {}),
    "roberta-base": ("roberta", dict(max_position_embeddings=514, type_vocab_size=1, layer_norm_eps=1e-5)),
    "albert-base-v2": ("albert", dict(hidden_size=768, num_attention_heads=12, intermediate_size=3072)),
    "albert-large-v2": ("albert", dict(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16,
                                       intermediate_size=4096)),
    "gpt2": ("gpt2", {}),
    "gpt2-medium": ("gpt2", dict(n_embd=1024, n_layer=24, n_head=16)),
}
PRESETS["hubert-large-ll60k"] = ("hubert", PRESETS["wav2vec2-large-lv60"][1])


def full_config(cfg):
    """An HF config dict with the class defaults filled in for keys it leaves out."""
    mt = cfg.get("model_type")
    if mt not in DEFAULTS:
        raise ValueError(f"model_type {mt!r} is not one of {', '.join(DEFAULTS)}")
    out = dict(DEFAULTS[mt])
    out.update({k: v for k, v in cfg.items() if not (v is None and k in out)})
    out["model_type"] = mt
    return out


def preset_config(name):
    mt, over = PRESETS[name]
    return full_config(dict(over, model_type=mt))


# --------------------------------------------------------------------------- shared pieces


def gelu_new(x):
    """HF NewGELUActivation, op for op: the tanh approximation."""
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


ACT = {"gelu": lambda x: F.gelu(x), "relu": lambda x: F.relu(x), "gelu_new": gelu_new,
       "tanh": lambda x: torch.tanh(x)}


def act_fn(name):
    if name not in ACT:
        raise ValueError(f"activation {name!r} is not supported ({', '.join(ACT)})")
    return ACT[name]


class HFModel:
    """Weights under HF names; random init at declaration, load_state() replaces them."""
    prefix = ""  # the base-model prefix Hub checkpoints may carry (bert., funnel. ...)

    def __init__(self, cfg):
        self.cfg = cfg
        self.p = {}

    def param(self, name, shape, init="normal", std=0.02):
        if init == "normal":
            t = torch.randn(*shape) * std
        elif init == "zeros":
            t = torch.zeros(*shape)
        elif init == "ones":
            t = torch.ones(*shape)
        else:
            t = init(shape)
        self.p[name] = t

    def linear(self, name, n_out, n_in, bias=True):
        self.param(name + ".weight", (n_out, n_in))
        if bias:
            self.param(name + ".bias", (n_out,), "zeros")

    def norm(self, name, n):
        self.param(name + ".weight", (n,), "ones")
        self.param(name + ".bias", (n,), "zeros")

    def lin(self, x, name):
        return F.linear(x, self.p[name + ".weight"], self.p.get(name + ".bias"))

    def ln(self, x, name, eps):
        return F.layer_norm(x, (x.shape[-1],), self.p[name + ".weight"], self.p[name + ".bias"], eps)

    ignored = ("num_batches_tracked", "position_ids")

    def load_state(self, sd):
        """Takes every declared weight from sd (HF names, an optional base-model prefix);
        a missing, extra or mis-shaped tensor is an error naming it."""
        sd = {(k[len(self.prefix):] if self.prefix and k.startswith(self.prefix) else k): v for k, v in sd.items()}
        missing = [k for k in self.p if k not in sd]
        extra = [k for k in sd if k not in self.p and not k.endswith(self.ignored)]
        if missing or extra:
            raise KeyError(f"{type(self).__name__}: missing weights {missing[:5]}{'...' if len(missing) > 5 else ''}"
                           f", unexpected {extra[:5]}{'...' if len(extra) > 5 else ''}")
        for k in self.p:
            if tuple(sd[k].shape) != tuple(self.p[k].shape):
                raise ValueError(f"{k}: shape {tuple(sd[k].shape)}, the config needs {tuple(self.p[k].shape)}")
            self.p[k] = sd[k].to(self.p[k].dtype).contiguous()
        self.prepare()
        return self

    def prepare(self):
        """Derived weights after a load (WavLM's folded weight norm)."""

    def n_params(self):
        """Parameters as ftengine info counts them (BatchNorm running statistics are buffers)."""
        return sum(t.numel() for k, t in self.p.items() if "running_" not in k)

    def __call__(self, **kw):
        return self.forward(**kw)


def text_inputs(vocab, batch, seq, seed=0):
    """What `ftengine bench` feeds a text model: input_ids only (HF fills the mask and types)."""
    g = torch.Generator().manual_seed(seed)
    return {"input_ids": torch.randint(0, vocab, (batch, seq), generator=g)}
