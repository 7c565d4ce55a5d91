#!/usr/bin/env python3
"""torch_zoo_vision_a.py - ViTModel, Wav2Vec2Model and HubertModel in plain
PyTorch, written out from Hugging Face transformers 4.36.2's modeling code
(tests/golden/README-zoo.md), with bench/torch_models.py's
conventions: built from an HF config dict, weights in a dict under HF's
state_dict names, forward(**inputs) with HF's argument names returning HF's
output names (plus hidden_states.N). Eval mode only.

bench/hf_golden.py checks them on the golden cases (HF's own outputs);
tools/golden/make_variants_vision_a.py then uses them, in float64, as the
reference for the configurations those cases do not cover (stable-LN large
layout, audio masks, batch 3, other image and patch sizes).
"""
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_base import F, HFModel, act_fn, torch  # noqa: E402


# --------------------------------------------------------------------------- ViT


def _pair(v):
    return (v[0], v[1]) if isinstance(v, (list, tuple)) else (v, v)


class ViT(HFModel):
    """ViTModel: Conv2d patch embedding (kernel = stride = patch, trailing pixels dropped),
    flattened row-major, CLS prepended, position embeddings added; pre-LN layers
    (x + attn(layernorm_before(x)), x + output(act(intermediate(layernorm_after(x))))); final
    layernorm; pooler tanh(dense(h[:, 0])) when the weights have one."""
    prefix = "vit."

    def __init__(self, cfg):
        super().__init__(cfg)
        c = cfg
        self.h, self.L, self.nh, self.inter = c["hidden_size"], c["num_hidden_layers"], c["num_attention_heads"], \
            c["intermediate_size"]
        self.eps, self.act = c["layer_norm_eps"], act_fn(c["hidden_act"])
        self.image, self.patch = _pair(c["image_size"]), _pair(c["patch_size"])
        self.ch = c["num_channels"]
        n = (self.image[0] // self.patch[0]) * (self.image[1] // self.patch[1])
        h = self.h
        self.param("embeddings.cls_token", (1, 1, h))
        self.param("embeddings.position_embeddings", (1, n + 1, h))
        self.param("embeddings.patch_embeddings.projection.weight", (h, self.ch) + self.patch)
        self.param("embeddings.patch_embeddings.projection.bias", (h,), "zeros")
        for i in range(self.L):
            p = f"encoder.layer.{i}."
            self.norm(p + "layernorm_before", h)
            for k in ("query", "key", "value"):
                self.linear(p + "attention.attention." + k, h, h, bias=c["qkv_bias"])
            self.linear(p + "attention.output.dense", h, h)
            self.norm(p + "layernorm_after", h)
            self.linear(p + "intermediate.dense", self.inter, h)
            self.linear(p + "output.dense", h, self.inter)
        self.norm("layernorm", h)
        self.linear("pooler.dense", h, h)

    def load_state(self, sd):
        # google/vit-base-patch16-224 is saved without its pooler (add_pooling_layer=False)
        names = {k[len(self.prefix):] if k.startswith(self.prefix) else k for k in sd}
        if "pooler.dense.weight" not in names:
            for k in ("pooler.dense.weight", "pooler.dense.bias"):
                self.p.pop(k, None)
        # classifier / mask_token of task checkpoints are not ViTModel's
        sd = {k: v for k, v in sd.items() if not k.startswith("classifier.") and "mask_token" not in k}
        return super().load_state(sd)

    def inputs(self, batch, size=None, seed=0):
        g = torch.Generator().manual_seed(seed)
        return {"pixel_values": torch.rand(batch, self.ch, self.image[0], self.image[1], generator=g)}

    def forward(self, pixel_values):
        b, c, hh, ww = pixel_values.shape
        if c != self.ch:
            raise ValueError(f"{c} channels, the config says {self.ch}")
        if (hh, ww) != self.image:
            raise ValueError(f"Input image size ({hh}*{ww}) doesn't match model ({self.image[0]}*{self.image[1]}).")
        x = F.conv2d(pixel_values, self.p["embeddings.patch_embeddings.projection.weight"],
                     self.p["embeddings.patch_embeddings.projection.bias"], stride=self.patch)
        x = x.flatten(2).transpose(1, 2)
        x = torch.cat((self.p["embeddings.cls_token"].expand(b, -1, -1), x), dim=1)
        x = x + self.p["embeddings.position_embeddings"]
        out = {}
        nh, d = self.nh, self.h // self.nh
        for i in range(self.L):
            out[f"hidden_states.{i}"] = x
            p = f"encoder.layer.{i}."
            n = self.ln(x, p + "layernorm_before", self.eps)
            s = n.shape[1]

            def heads(t):
                return t.view(b, s, nh, d).permute(0, 2, 1, 3)
            q, k, v = (heads(self.lin(n, p + "attention.attention." + t)) for t in ("query", "key", "value"))
            sc = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(d)
            ctx = torch.matmul(torch.softmax(sc, dim=-1), v).permute(0, 2, 1, 3).reshape(b, s, self.h)
            x = self.lin(ctx, p + "attention.output.dense") + x
            n = self.ln(x, p + "layernorm_after", self.eps)
            x = self.lin(self.act(self.lin(n, p + "intermediate.dense")), p + "output.dense") + x
        out[f"hidden_states.{self.L}"] = x
        x = self.ln(x, "layernorm", self.eps)
        out["last_hidden_state"] = x
        if "pooler.dense.weight" in self.p:
            out["pooler_output"] = torch.tanh(self.lin(x[:, 0], "pooler.dense"))
        return out


# --------------------------------------------------------------------------- wav2vec2, HuBERT


class Wav2Vec2(HFModel):
    """Wav2Vec2Model: Conv1d feature encoder ("group": GroupNorm(C, C) after conv 0 only; "layer":
    LayerNorm over channels (eps 1e-5) after every conv; conv_bias per config), the feature
    activation; feature projection LayerNorm -> extract_features -> Linear; with an attention
    mask, frame lengths through floor((L - k) / s) + 1 per conv, padded frames zeroed and keys
    masked by (1 - m) * finfo.min; weight-normed grouped positional conv (even kernel drops the
    last frame) + feature activation, added; post-LN layers (LayerNorm first) or stable-LN
    (pre-LN layers, LayerNorm last); q scaled by Dh^-1/2 after its bias."""
    prefix = "wav2vec2."
    hubert = False

    def __init__(self, cfg):
        super().__init__(cfg)
        c = cfg
        self.d, self.L, self.nh, self.inter = c["hidden_size"], c["num_hidden_layers"], c["num_attention_heads"], \
            c["intermediate_size"]
        self.eps, self.act, self.fact = c["layer_norm_eps"], act_fn(c["hidden_act"]), act_fn(
            c["feat_extract_activation"])
        self.group = {"group": True, "layer": False}[c["feat_extract_norm"]]
        self.stable = c["do_stable_layer_norm"]
        self.kern, self.strd, self.dims = list(c["conv_kernel"]), list(c["conv_stride"]), list(c["conv_dim"])
        self.pos_k, self.pos_g = c["num_conv_pos_embeddings"], c["num_conv_pos_embedding_groups"]
        self.proj_ln = c.get("feat_proj_layer_norm", True) if self.hubert else True
        cin = 1
        for i, (k, cout) in enumerate(zip(self.kern, self.dims)):
            p = f"feature_extractor.conv_layers.{i}."
            self.param(p + "conv.weight", (cout, cin, k), std=(1.0 / (cin * k)) ** 0.5)
            if c["conv_bias"]:
                self.param(p + "conv.bias", (cout,), "zeros")
            if not self.group or i == 0:
                self.norm(p + "layer_norm", cout)
            cin = cout
        C, d = self.dims[-1], self.d
        if self.proj_ln:
            self.norm("feature_projection.layer_norm", C)
        self.linear("feature_projection.projection", d, C)
        if c.get("mask_time_prob", 0.05) > 0 or c.get("mask_feature_prob", 0.0) > 0:
            self.param("masked_spec_embed", (d,), lambda s: torch.rand(*s))  # unused at inference
        pc = "encoder.pos_conv_embed.conv."
        self.param(pc + "weight_v", (d, d // self.pos_g, self.pos_k), std=(1.0 / (d // self.pos_g * self.pos_k)) ** 0.5)
        self.param(pc + "weight_g", (1, 1, self.pos_k), "ones")
        self.param(pc + "bias", (d,), "zeros")
        self.norm("encoder.layer_norm", d)
        for i in range(self.L):
            p = f"encoder.layers.{i}."
            for n in ("q_proj", "k_proj", "v_proj", "out_proj"):
                self.linear(p + "attention." + n, d, d)
            self.norm(p + "layer_norm", d)
            self.linear(p + "feed_forward.intermediate_dense", self.inter, d)
            self.linear(p + "feed_forward.output_dense", d, self.inter)
            self.norm(p + "final_layer_norm", d)

    def load_state(self, sd):
        # torch >= 2.1 saves the weight norm as parametrizations; checkpoints for
        # pre-training carry the quantizer and projection heads, CTC ones lm_head
        ren = {".parametrizations.weight.original0": ".weight_g", ".parametrizations.weight.original1": ".weight_v"}
        out = {}
        for k, v in sd.items():
            for a, b in ren.items():
                if k.endswith(a):
                    k = k[:-len(a)] + b
            if k.split(".")[0] in ("quantizer", "project_hid", "project_q", "lm_head"):
                continue
            out[k] = v
        names = {k[len(self.prefix):] if k.startswith(self.prefix) else k for k in out}
        if "masked_spec_embed" not in names:
            self.p.pop("masked_spec_embed", None)
        return super().load_state(out)

    def inputs(self, batch, samples, seed=0):
        g = torch.Generator().manual_seed(seed)
        return {"input_values": torch.randn(batch, samples, generator=g)}

    def pos_weight(self):
        # weight_norm(dim=2): one norm per kernel tap, over dims 0 and 1
        pc = "encoder.pos_conv_embed.conv."
        v, g = self.p[pc + "weight_v"], self.p[pc + "weight_g"]
        return v * (g / v.pow(2).sum(dim=(0, 1), keepdim=True).sqrt())

    def out_lengths(self, n):
        for k, s in zip(self.kern, self.strd):
            n = torch.div(n - k, s, rounding_mode="floor") + 1
        return n

    def frame_mask(self, attention_mask, frames):
        # HF's _get_feature_vector_attention_mask: a 1 at each row's last valid frame,
        # then a reversed cumulative sum marks every frame before it
        lengths = self.out_lengths(attention_mask.cumsum(dim=-1)[:, -1]).to(torch.long)
        m = torch.zeros((attention_mask.shape[0], frames), dtype=attention_mask.dtype)
        m[(torch.arange(m.shape[0]), lengths - 1)] = 1
        return m.flip([-1]).cumsum(-1).flip([-1]).bool()

    def attention(self, x, p, mask):
        B, T, d = x.shape
        nh, dh = self.nh, d // self.nh
        a = p + "attention."
        q = self.lin(x, a + "q_proj") * dh ** -0.5

        def heads(t):
            return t.view(B, T, nh, dh).transpose(1, 2)
        sc = torch.matmul(heads(q), heads(self.lin(x, a + "k_proj")).transpose(-1, -2))
        if mask is not None:
            sc = sc + mask
        o = torch.matmul(torch.softmax(sc, dim=-1), heads(self.lin(x, a + "v_proj")))
        return self.lin(o.transpose(1, 2).reshape(B, T, d), a + "out_proj")

    def ffn(self, x, p):
        return self.lin(self.act(self.lin(x, p + "feed_forward.intermediate_dense")), p + "feed_forward.output_dense")

    def forward(self, input_values, attention_mask=None):
        x = input_values[:, None]
        for i, s in enumerate(self.strd):
            p = f"feature_extractor.conv_layers.{i}."
            x = F.conv1d(x, self.p[p + "conv.weight"], self.p.get(p + "conv.bias"), s)
            if self.group and i == 0:
                x = F.group_norm(x, x.shape[1], self.p[p + "layer_norm.weight"], self.p[p + "layer_norm.bias"], 1e-5)
            elif not self.group:
                x = self.ln(x.transpose(-2, -1), p + "layer_norm", 1e-5).transpose(-2, -1)
            x = self.fact(x)
        feats = x.transpose(1, 2)
        frames = None if attention_mask is None else self.frame_mask(attention_mask, feats.shape[1])
        if self.proj_ln:
            feats = self.ln(feats, "feature_projection.layer_norm", self.eps)
        h = self.lin(feats, "feature_projection.projection")
        mask = None
        if frames is not None:
            h = h.masked_fill(~frames[:, :, None], 0.0)
            mask = (1.0 - frames[:, None, None, :].to(h.dtype)) * torch.finfo(h.dtype).min
        pc = F.conv1d(h.transpose(1, 2), self.pos_weight(), self.p["encoder.pos_conv_embed.conv.bias"],
                      padding=self.pos_k // 2, groups=self.pos_g)
        if self.pos_k % 2 == 0:
            pc = pc[:, :, :-1]
        h = h + self.fact(pc).transpose(1, 2)
        if not self.stable:
            h = self.ln(h, "encoder.layer_norm", self.eps)
        out = {}
        for i in range(self.L):
            out[f"hidden_states.{i}"] = h
            p = f"encoder.layers.{i}."
            if self.stable:
                h = h + self.attention(self.ln(h, p + "layer_norm", self.eps), p, mask)
                h = h + self.ffn(self.ln(h, p + "final_layer_norm", self.eps), p)
            else:
                h = self.ln(h + self.attention(h, p, mask), p + "layer_norm", self.eps)
                h = self.ln(h + self.ffn(h, p), p + "final_layer_norm", self.eps)
        if self.stable:
            h = self.ln(h, "encoder.layer_norm", self.eps)
        out[f"hidden_states.{self.L}"] = h
        out["last_hidden_state"] = h
        if not self.hubert:
            out["extract_features"] = feats
        return out


class Hubert(Wav2Vec2):
    """HubertModel: wav2vec2's modules (HF copies them), the feature projection LayerNorm only
    when feat_proj_layer_norm, no extract_features output."""
    prefix = "hubert."
    hubert = True


CLASSES = {"vit": ViT, "wav2vec2": Wav2Vec2, "hubert": Hubert}
