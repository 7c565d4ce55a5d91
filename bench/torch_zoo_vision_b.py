#!/usr/bin/env python3
"""torch_zoo_vision_b.py - MobileNetV2, EfficientNet and ConvNeXt in plain
PyTorch, written out from Hugging Face transformers 4.36.2's modeling code
(tests/golden/README-zoo.md) with bench/torch_base.py's conventions:
built from an HF config dict, weights in a dict under HF's bare state_dict
names (random init at declaration, load_state() takes a checkpoint's), forward
with HF's argument names returning HF's output names.

They serve bench/cpu_vs_torch.py's side-by-side timing (torchvision is not
installed, and its models are not HF's: TF padding, BN eps 1e-3, HF's rounding)
and tools/golden/make_vision_variants.py (extra reference cases). That they are
HF's math is checked by bench/hf_golden.py on the golden cases (HF's own outputs).

Besides last_hidden_state and pooler_output, forward returns hidden_states.N as
HF does with output_hidden_states (MobileNetV2: the 16 layer outputs;
EfficientNet: the stem and every block; ConvNeXt: the stem and every stage).
"""
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_base import F, HFModel, act_fn, torch  # noqa: E402


def act_of(name):
    """HF's ACT2FN for the names these models use, on top of torch_base's."""
    extra = {"relu6": lambda x: F.relu6(x), "swish": lambda x: F.silu(x), "silu": lambda x: F.silu(x),
             "sigmoid": lambda x: torch.sigmoid(x)}
    return extra[name] if name in extra else act_fn(name)


def tf_same(n, k, s, d=1):
    """HF's apply_tf_padding along one axis: (before, after)."""
    total = max(k - s, 0) if n % s == 0 else max(k - n % s, 0)
    return total // 2 * d, (total - total // 2) * d


class ConvBNModel(HFModel):
    """A model made of bias-free convolutions, each followed by an inference BatchNorm."""

    def conv(self, conv, bn, cin, cout, k, groups=1):
        """conv.weight [cout, cin/groups, k, k] (He init) and BatchNorm bn.* [cout]."""
        self.param(conv + ".weight", (cout, cin // groups, k, k), std=(2.0 / (cin // groups * k * k)) ** 0.5)
        self.param(bn + ".weight", (cout,), lambda s: torch.rand(*s) + 0.5)
        self.param(bn + ".bias", (cout,), lambda s: torch.rand(*s) * 0.1)
        self.param(bn + ".running_mean", (cout,), lambda s: torch.rand(*s) * 0.1)
        self.param(bn + ".running_var", (cout,), lambda s: torch.rand(*s) + 0.5)

    def cbn(self, x, conv, bn, stride=1, pad=(0, 0, 0, 0), groups=1, dilation=1, act=None):
        """act(BN(conv(zero-pad(x)))); pad = (left, right, top, bottom) as F.pad takes it."""
        if any(pad):
            x = F.pad(x, pad)
        y = F.conv2d(x, self.p[conv + ".weight"], None, stride, 0, dilation, groups)
        y = F.batch_norm(y, self.p[bn + ".running_mean"], self.p[bn + ".running_var"], self.p[bn + ".weight"],
                         self.p[bn + ".bias"], False, 0.0, self.eps)
        return act(y) if act else y

    def inputs(self, batch, size, seed=0):
        g = torch.Generator().manual_seed(seed)
        return {"pixel_values": torch.rand(batch, self.cfg["num_channels"], size, size, generator=g)}


class MobileNetV2(ConvBNModel):
    """MobileNetV2Model: TF-SAME padded (or k//2) conv + BN(eps = layer_norm_eps) + ReLU6 layers;
    stem 3x3/2, depthwise 3x3, 1x1 reduce; 16 inverted residuals; 1x1 head; mean pooler [B, C]."""
    prefix = "mobilenet_v2."
    BASE = [16, 24, 24, 32, 32, 32, 64, 64, 64, 64, 96, 96, 96, 160, 160, 160, 320]
    STRIDES = [2, 1, 2, 1, 1, 2, 1, 1, 1, 1, 1, 1, 2, 1, 1, 1]

    def __init__(self, cfg):
        super().__init__(cfg)
        c = cfg
        self.tf, self.eps, self.act = c["tf_padding"], c["layer_norm_eps"], act_of(c["hidden_act"])
        div, mind, dm = c["depth_divisible_by"], c["min_depth"], c["depth_multiplier"]

        def make_div(v):
            nv = max(mind, int(v + div / 2) // div * div)
            return nv + div if nv < 0.9 * v else nv

        ch = [make_div(int(round(b * dm))) for b in self.BASE]
        s32 = make_div(int(round(32 * dm)))
        self.layers = {}  # conv stem -> (stride, k, groups, dilation)
        self.cl("conv_stem.first_conv", c["num_channels"], s32, 3, 2)
        self.first_exp = c["first_layer_is_expansion"]
        if not self.first_exp:
            self.cl("conv_stem.expand_1x1", s32, s32, 1)
        self.cl("conv_stem.conv_3x3", s32, s32, 3, groups=s32)
        self.cl("conv_stem.reduce_1x1", s32, ch[0], 1)
        current, dilation = 2, 1
        self.res = []
        for i in range(16):
            if current == c["output_stride"]:
                stride, dil = 1, dilation
                dilation *= self.STRIDES[i]
            else:
                stride, dil = self.STRIDES[i], 1
                current *= stride
            e = make_div(int(round(ch[i] * c["expand_ratio"])))
            self.cl(f"layer.{i}.expand_1x1", ch[i], e, 1)
            self.cl(f"layer.{i}.conv_3x3", e, e, 3, stride, e, dil)
            self.cl(f"layer.{i}.reduce_1x1", e, ch[i + 1], 1)
            self.res.append(stride == 1 and ch[i] == ch[i + 1])
        head = 1280 if c["finegrained_output"] and dm < 1.0 else make_div(int(round(1280 * dm)))
        self.cl("conv_1x1", ch[16], head, 1)

    def cl(self, stem, cin, cout, k, stride=1, groups=1, dil=1):
        self.conv(stem + ".convolution", stem + ".normalization", cin, cout, k, groups)
        self.layers[stem] = (stride, k, groups, dil)

    def run(self, x, stem, act=True):
        stride, k, groups, dil = self.layers[stem]
        w = self.p[stem + ".convolution.weight"]
        if self.tf:
            t, b = tf_same(x.shape[-2], k, stride, dil)
            lft, r = tf_same(x.shape[-1], k, stride, dil)
            x = F.pad(x, (lft, r, t, b))
            pad = 0
        else:
            pad = (k - 1) // 2 * dil
        y = F.conv2d(x, w, None, stride, pad, dil, groups)
        n = stem + ".normalization."
        y = F.batch_norm(y, self.p[n + "running_mean"], self.p[n + "running_var"], self.p[n + "weight"],
                         self.p[n + "bias"], False, 0.0, self.eps)
        return self.act(y) if act else y

    def forward(self, pixel_values):
        h = self.run(pixel_values, "conv_stem.first_conv")
        if not self.first_exp:
            h = self.run(h, "conv_stem.expand_1x1")
        h = self.run(self.run(h, "conv_stem.conv_3x3"), "conv_stem.reduce_1x1", act=False)
        out = {}
        for i in range(16):
            p = f"layer.{i}."
            y = self.run(self.run(self.run(h, p + "expand_1x1"), p + "conv_3x3"), p + "reduce_1x1", act=False)
            h = h + y if self.res[i] else y
            out[f"hidden_states.{i}"] = h
        last = self.run(h, "conv_1x1")
        out.update(last_hidden_state=last, pooler_output=last.mean((-2, -1)))
        return out


class EfficientNet(ConvBNModel):
    """EfficientNetModel: stem (zero pad right/bottom, 3x3/2 valid), MBConv blocks (1x1 expansion
    unless the ratio is 1, depthwise with HF's padding, squeeze-excitation from the block's input
    width, 1x1 projection, residual in every repeat but a stage's first), 1x1 head, mean/max pooler."""
    prefix = "efficientnet."

    def __init__(self, cfg):
        super().__init__(cfg)
        c = cfg
        self.eps, self.act = c["batch_norm_eps"], act_of(c["hidden_act"])
        w, div = c["width_coefficient"], c["depth_divisor"]

        def round_filters(n):
            n = n * w
            nd = max(div, int(n + div / 2) // div * div)
            return int(nd + div if nd < 0.9 * n else nd)

        def round_repeats(r):
            return int(math.ceil(c["depth_coefficient"] * r))

        self.stem_w = round_filters(32)
        self.conv("embeddings.convolution", "embeddings.batchnorm", c["num_channels"], self.stem_w, 3)
        self.blocks = []
        b = 0
        for s in range(len(c["in_channels"])):
            cin, cout = round_filters(c["in_channels"][s]), round_filters(c["out_channels"][s])
            k, e = c["kernel_sizes"][s], c["expand_ratios"][s]
            for j in range(round_repeats(c["num_block_repeats"][s])):
                bi = cin if j == 0 else cout
                stride = c["strides"][s] if j == 0 else 1
                p = f"encoder.blocks.{b}."
                ed = bi * e
                if e != 1:
                    self.conv(p + "expansion.expand_conv", p + "expansion.expand_bn", bi, ed, 1)
                self.conv(p + "depthwise_conv.depthwise_conv", p + "depthwise_conv.depthwise_norm", ed, ed, k, ed)
                r = max(1, int(bi * c["squeeze_expansion_ratio"]))
                self.param(p + "squeeze_excite.reduce.weight", (r, ed, 1, 1), std=(2.0 / ed) ** 0.5)
                self.param(p + "squeeze_excite.reduce.bias", (r,), "zeros")
                self.param(p + "squeeze_excite.expand.weight", (ed, r, 1, 1), std=(2.0 / r) ** 0.5)
                self.param(p + "squeeze_excite.expand.bias", (ed,), "zeros")
                self.conv(p + "projection.project_conv", p + "projection.project_bn", ed, cout, 1)
                if stride == 2:  # correct_pad: (left, right, top, bottom)
                    pad = (k // 2 - 1, k // 2, k // 2 - 1, k // 2) if b not in c["depthwise_padding"] else (k // 2,) * 4
                else:  # padding="same": k - 1 split, the odd one after
                    pad = ((k - 1) // 2, k - 1 - (k - 1) // 2) * 2
                self.blocks.append((p, e != 1, stride, ed, pad, j > 0))
                b += 1
        top = round_filters(1280)
        if top != c["hidden_dim"]:
            raise ValueError(f"hidden_dim {c['hidden_dim']} must equal round_filters(1280) = {top}")
        self.conv("encoder.top_conv", "encoder.top_bn", cout, top, 1)
        self.max_pool = {"mean": False, "max": True}[c["pooling_type"]]

    def forward(self, pixel_values):
        h = self.cbn(pixel_values, "embeddings.convolution", "embeddings.batchnorm", 2, (0, 1, 0, 1), act=self.act)
        out = {"hidden_states.0": h}
        for i, (p, expand, stride, ed, pad, residual) in enumerate(self.blocks):
            x = h
            if expand:
                x = self.cbn(x, p + "expansion.expand_conv", p + "expansion.expand_bn", act=self.act)
            x = self.cbn(x, p + "depthwise_conv.depthwise_conv", p + "depthwise_conv.depthwise_norm", stride, pad,
                         ed, act=self.act)
            z = x.mean((-2, -1), keepdim=True)
            z = self.act(F.conv2d(z, self.p[p + "squeeze_excite.reduce.weight"],
                                  self.p[p + "squeeze_excite.reduce.bias"]))
            z = torch.sigmoid(F.conv2d(z, self.p[p + "squeeze_excite.expand.weight"],
                                       self.p[p + "squeeze_excite.expand.bias"]))
            y = self.cbn(x * z, p + "projection.project_conv", p + "projection.project_bn")
            h = y + h if residual else y
            out[f"hidden_states.{i + 1}"] = h
        last = self.cbn(h, "encoder.top_conv", "encoder.top_bn", act=self.act)
        pooled = last.amax((-2, -1)) if self.max_pool else last.mean((-2, -1))
        out.update(last_hidden_state=last, pooler_output=pooled)
        return out


class ConvNext(HFModel):
    """ConvNextModel: patchify stem + channels-first LayerNorm; stages (after the first) open
    with channels-first LayerNorm + 2x2/2 conv; blocks: depthwise 7x7 (bias), NHWC LayerNorm,
    Linear C->4C, act, Linear 4C->C, layer scale, residual; pooler LayerNorm(mean), eps from config."""
    prefix = "convnext."

    def __init__(self, cfg):
        super().__init__(cfg)
        c = cfg
        self.act, self.eps, self.patch = act_of(c["hidden_act"]), c["layer_norm_eps"], c["patch_size"]
        hs, depths = c["hidden_sizes"], c["depths"]
        self.stages = c["num_stages"]
        self.param("embeddings.patch_embeddings.weight", (hs[0], c["num_channels"], self.patch, self.patch))
        self.param("embeddings.patch_embeddings.bias", (hs[0],), "zeros")
        self.norm("embeddings.layernorm", hs[0])
        self.depths, self.hs = depths, hs
        self.scale = c["layer_scale_init_value"] > 0
        prev = hs[0]
        for s in range(self.stages):
            p = f"encoder.stages.{s}."
            if s > 0:
                self.norm(p + "downsampling_layer.0", prev)
                self.param(p + "downsampling_layer.1.weight", (hs[s], prev, 2, 2))
                self.param(p + "downsampling_layer.1.bias", (hs[s],), "zeros")
            for j in range(depths[s]):
                q = p + f"layers.{j}."
                d = hs[s]
                self.param(q + "dwconv.weight", (d, 1, 7, 7), std=(2.0 / 49) ** 0.5)
                self.param(q + "dwconv.bias", (d,), "zeros")
                self.norm(q + "layernorm", d)
                self.linear(q + "pwconv1", 4 * d, d)
                self.linear(q + "pwconv2", d, 4 * d)
                if self.scale:
                    self.param(q + "layer_scale_parameter", (d,), lambda sh: torch.full(sh, 0.1))
            prev = hs[s]
        self.norm("layernorm", hs[-1])

    def ln_cf(self, x, name):
        """HF's channels-first ConvNextLayerNorm: statistics in float32 whatever the dtype."""
        dt = x.dtype
        x = x.float()
        u = x.mean(1, keepdim=True)
        s = (x - u).pow(2).mean(1, keepdim=True)
        x = ((x - u) / torch.sqrt(s + 1e-6)).to(dt)
        return self.p[name + ".weight"][:, None, None] * x + self.p[name + ".bias"][:, None, None]

    def forward(self, pixel_values):
        h = F.conv2d(pixel_values, self.p["embeddings.patch_embeddings.weight"],
                     self.p["embeddings.patch_embeddings.bias"], self.patch)
        h = self.ln_cf(h, "embeddings.layernorm")
        out = {"hidden_states.0": h}
        for s in range(self.stages):
            p = f"encoder.stages.{s}."
            if s > 0:
                h = F.conv2d(self.ln_cf(h, p + "downsampling_layer.0"), self.p[p + "downsampling_layer.1.weight"],
                             self.p[p + "downsampling_layer.1.bias"], 2)
            for j in range(self.depths[s]):
                q = p + f"layers.{j}."
                y = F.conv2d(h, self.p[q + "dwconv.weight"], self.p[q + "dwconv.bias"], 1, 3, 1, h.shape[1])
                y = self.ln(y.permute(0, 2, 3, 1), q + "layernorm", 1e-6)
                y = self.lin(self.act(self.lin(y, q + "pwconv1")), q + "pwconv2")
                if self.scale:
                    y = self.p[q + "layer_scale_parameter"] * y
                h = h + y.permute(0, 3, 1, 2)
            out[f"hidden_states.{s + 1}"] = h
        out.update(last_hidden_state=h, pooler_output=self.ln(h.mean((-2, -1)), "layernorm", self.eps))
        return out

    def inputs(self, batch, size, seed=0):
        g = torch.Generator().manual_seed(seed)
        return {"pixel_values": torch.rand(batch, self.cfg["num_channels"], size, size, generator=g)}


CLASSES = {"mobilenet_v2": MobileNetV2, "efficientnet": EfficientNet, "convnext": ConvNext}
