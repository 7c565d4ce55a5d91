#!/usr/bin/env python3
"""make_vision_variants.py - extra reference cases ("variants") for MobileNetV2,
EfficientNet and ConvNeXt: configurations the three golden cases do not cover
(tf_padding false, odd and non-square images, batch 3, output_stride dilation,
the stem expansion, depthwise_padding lists, even kernels, max pooling, other
width/depth multipliers and rounding, no layer scale, other patch sizes and
activations). Each case has the layout of tests/golden/<arch>/ (config.json,
model.safetensors, inputs.safetensors, expected.safetensors with
last_hidden_state, pooler_output and hidden_states.N; MobileNetV2 cases also a
tolerance.json with wider fp16 bounds) and is checked by tests/test_golden_variants.c
in every mode. tests/golden/variants/ holds three of them (mobilenet_v2_notf_b3,
efficientnet_dwpad_b3, convnext_p3_b3); the others are for running locally
(mobilenet_v2_os8 meets the fp32 criterion but carries f16 round-off past any
sensible fp16 bound: keep it out of the CUDA fp16 check).

Unlike tools/golden/make_golden.py (HF transformers itself), the expected
outputs come from bench/torch_zoo_vision_b.py: plain-torch definitions of HF's
4.36.2 math that reproduce HF's own golden outputs (bench/hf_golden.py, to
~2e-8 relative in float64). They are run in float64 on the float32 weights and
inputs and stored as float32, as the golden cases were. Weights are the
definitions' random init (He-scaled convolutions) with every BatchNorm tensor
and every constant-initialised one (biases, norm scales, layer scale) perturbed
as make_golden.py perturbs HF's init, so a skipped term fails. (Wider BatchNorm
scales, U(0.5, 1.5) as the timing init has, make a 16-layer MobileNetV2 amplify
float32 round-off past the golden criterion in any float32 implementation,
PyTorch's own included.)

Needs torch (Debian's python3-torch: /usr/bin/python3); no transformers, no
safetensors module. The build and the tests never run it.

    /usr/bin/python3 tools/golden/make_vision_variants.py OUTDIR [CASE ...]   # OUTDIR: tests/golden/variants
    /usr/bin/python3 tools/golden/make_vision_variants.py --list
"""
import json
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench"))
import torch_models as tm  # noqa: E402

torch = tm.torch

# name -> (config keys over the class defaults, batch, height, width, seed)
CASES = {
    # symmetric k//2 padding, a non-square odd image, batch 3, a 0.12 width on a divisor of 4
    # (rounding that changes the residual pattern), the head at make_divisible(1280 * 0.12)
    "mobilenet_v2_notf_b3": (dict(model_type="mobilenet_v2", depth_multiplier=0.12, tf_padding=False,
                                  finegrained_output=False, expand_ratio=3.0, depth_divisible_by=4, min_depth=4),
                             3, 37, 45, 1),
    # TF padding on odd sizes, output_stride 8 (dilated depthwise convolutions), the stem's
    # expansion 1x1, another BatchNorm eps, min_depth 4
    "mobilenet_v2_os8": (dict(model_type="mobilenet_v2", depth_multiplier=0.14, output_stride=8,
                              first_layer_is_expansion=False, layer_norm_eps=1e-5, min_depth=4,
                              finegrained_output=False, expand_ratio=2.0), 1, 41, 33, 23),
    # depthwise_padding on a 3x3 and a 5x5 stride-2 block, odd sizes, batch 3, max pooling
    "efficientnet_dwpad_b3": (dict(model_type="efficientnet", width_coefficient=0.1, depth_coefficient=0.4,
                                   hidden_dim=128, depthwise_padding=[1, 2], pooling_type="max", depth_divisor=4,
                                   num_block_repeats=[1, 2, 2, 3, 2, 3, 1]), 3, 45, 39, 3),
    # an even kernel (PyTorch's "same" and HF's stride-2 padding split k - 1 unevenly), expand
    # ratio 1 after the first stage, a squeeze ratio giving width 1, depth rounding up
    "efficientnet_k4_odd": (dict(model_type="efficientnet", width_coefficient=0.1, depth_coefficient=0.3,
                                 hidden_dim=128, kernel_sizes=[3, 4, 5, 4, 3, 5, 3],
                                 expand_ratios=[1, 1, 6, 4, 6, 6, 6], squeeze_expansion_ratio=0.1,
                                 hidden_act="relu"), 2, 35, 30, 4),
    # no layer scale, patch 3 (trailing pixels dropped), three stages, tanh GELU, another eps
    "convnext_p3_b3": (dict(model_type="convnext", patch_size=3, num_stages=3, hidden_sizes=[8, 16, 24],
                            depths=[1, 2, 1], layer_scale_init_value=0.0, hidden_act="gelu_new",
                            layer_norm_eps=1e-6), 3, 47, 38, 5),
}


def perturb(model, gen):
    """As tools/golden/make_golden.py perturbs HF's init: BatchNorm running variances
    0.5 + U(0, 1), running means, biases and other constant-initialised tensors their
    constant + 0.1 N(0, 1) (norm scales about 1, layer scales about 0.5)."""
    with torch.no_grad():
        for name, p in model.p.items():
            if name.endswith("running_var"):
                model.p[name] = 0.5 + torch.rand(p.shape, generator=gen)
                continue
            if name.endswith("running_mean"):
                model.p[name] = 0.1 * torch.randn(p.shape, generator=gen)
                continue
            if ".normalization." in name or "_bn." in name or "batchnorm." in name or "_norm." in name:
                base = 1.0 if name.endswith(".weight") else 0.0  # BatchNorm scale and shift
                model.p[name] = base + 0.1 * torch.randn(p.shape, generator=gen)
                continue
            flat = p.reshape(-1)
            if p.numel() and bool((flat == flat[0]).all()):
                base = 1.0 if float(flat[0]) == 1.0 else (0.5 if "layer_scale" in name else 0.0)
                model.p[name] = base + 0.1 * torch.randn(p.shape, generator=gen)


# tests/test_golden_variants.c's fp16 bounds for MobileNetV2 cases (atol, rtol, relative L2): the
# 1e-2 default is met by ~0.8e-2 relative L2 but not elementwise after 16 layers on f16 storage
FP16_MOBILENET = {"fp16": [0.15, 0.05, 0.03]}


def write_st(path, tensors):
    """A safetensors file (8-byte header length, JSON header, raw little-endian data)."""
    st = {torch.float32: "F32", torch.int64: "I64"}
    header, blobs, off = {}, [], 0
    for name, t in tensors.items():
        t = t.contiguous()
        b = t.numpy().tobytes()
        header[name] = {"dtype": st[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def write_case(outdir, name):
    cfg, batch, hgt, wid, seed = CASES[name]
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    model = tm.build(dict(cfg))
    perturb(model, gen)
    pixels = torch.randn(batch, model.cfg["num_channels"], hgt, wid, generator=gen)
    m64 = tm.build(dict(cfg))
    m64.p = {k: v.double() for k, v in model.p.items()}
    with torch.no_grad():
        out = m64(pixel_values=pixels.double())
    d = os.path.join(outdir, name)
    os.makedirs(d, exist_ok=True)
    full = dict(model.cfg, architectures=[type(model).__name__ + "Model"])
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(dict(cfg, architectures=full["architectures"]), f, indent=2, sort_keys=True)
        f.write("\n")
    weights = {k: v.float() for k, v in model.p.items()}
    for k in list(weights):  # HF's state dicts hold a counter per BatchNorm (never read)
        if k.endswith(".running_var"):
            weights[k[: -len("running_var")] + "num_batches_tracked"] = torch.tensor(0, dtype=torch.int64)
    write_st(os.path.join(d, "model.safetensors"), weights)
    write_st(os.path.join(d, "inputs.safetensors"), {"pixel_values": pixels.float()})
    write_st(os.path.join(d, "expected.safetensors"), {k: v.float() for k, v in out.items()})
    if cfg["model_type"] == "mobilenet_v2":  # f16 through 16 BatchNorm'd layers: wider bounds
        with open(os.path.join(d, "tolerance.json"), "w") as f:
            f.write(json.dumps(FP16_MOBILENET) + "\n")
    size = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))
    print(f"{name}: {len(weights)} tensors, {model.n_params()} parameters, "
          f"last_hidden_state {tuple(out['last_hidden_state'].shape)}, {size / 1024:.0f} KiB")


def main(argv):
    if torch is None:
        print(f"make_vision_variants: needs torch ({tm.TORCH_ERROR}); nothing written")
        return 0
    if argv[:1] == ["--list"]:
        print("\n".join(CASES))
        return 0
    if not argv:
        print(__doc__)
        return 2
    names = argv[1:] or list(CASES)
    for n in names:
        if n not in CASES:
            print(f"make_vision_variants: unknown case {n} ({', '.join(CASES)})", file=sys.stderr)
            return 2
    for n in names:
        write_case(argv[0], n)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
