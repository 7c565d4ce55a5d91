#!/usr/bin/env python3
"""make_variants_vision_a.py - extra reference cases for ViT, wav2vec2 and
HuBERT in the layout of tests/golden/<arch>/ (config.json, model.safetensors,
inputs.safetensors, expected.safetensors), for configurations the shared golden
cases do not cover: ViT at odd and non-square image sizes, other patch sizes,
batch 3, no qkv bias, no pooler; wav2vec2 and HuBERT in the large layout
(stable layer norm, "layer" feature norm, conv biases), with audio attention
masks over rows of different lengths (garbage in the padding), odd and even
positional-conv kernels, feat_proj_layer_norm false, both weight-norm namings
and task-checkpoint prefixes and heads. tests/test_golden_variants.c checks
every case it finds under tests/golden/variants/.

The reference is bench/torch_zoo_vision_a.py run in float64 on the float32
weights and inputs, stored as float32 (the shared golden cases' recipe). Those
torch definitions reproduce HF 4.36.2's float64 outputs of the golden cases to
the bit (bench/test_torch_zoo_vision_a.py checks that), which is what lets them
stand in for transformers where it is not installed. Weights: every tensor
random, norms near 1, biases and weight_g perturbed, so a skipped bias or
norm cannot pass.

    /usr/bin/python3 tools/golden/make_variants_vision_a.py OUTDIR [CASE ...]

Needs torch (exits 0 with a line saying so without it); no safetensors module.
"""
import json
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench"))
import torch_models as tm  # noqa: E402

torch = tm.torch

ST_NAME = {"float32": "F32", "float64": "F64", "int64": "I64", "int32": "I32"}


def write_safetensors(path, tensors, metadata=None):
    """tensors: name -> torch tensor (contiguous copies are written, little-endian)."""
    header, blobs, off = {}, [], 0
    for name in sorted(tensors):
        t = tensors[name].detach().contiguous()
        raw = t.numpy().tobytes()
        header[name] = {"dtype": ST_NAME[str(t.dtype).replace("torch.", "")], "shape": list(t.shape),
                        "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    if metadata:
        header["__metadata__"] = {k: str(v) for k, v in metadata.items()}
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw)
        for b in blobs:
            f.write(b)


def perturb(model, gen):
    """Every weight random in float64: norm scales 1 + noise, biases noise, matrices
    N(0, 1/fan_in), weight_g a rescaled ||v||, embeddings O(0.5)."""
    for name, p in model.p.items():
        shape = tuple(p.shape)
        if name.endswith("weight_g"):
            continue
        if name.endswith(".bias"):
            t = 0.1 * torch.randn(shape, generator=gen, dtype=torch.float64)
        elif "norm" in name and name.endswith(".weight"):
            t = 1.0 + 0.1 * torch.randn(shape, generator=gen, dtype=torch.float64)
        elif name.endswith(("cls_token", "position_embeddings", "masked_spec_embed")):
            t = 0.5 * torch.randn(shape, generator=gen, dtype=torch.float64)
        else:
            fan_in = max(1, p.numel() // shape[0])
            t = torch.randn(shape, generator=gen, dtype=torch.float64) / fan_in ** 0.5
        model.p[name] = t
    for name in list(model.p):
        if name.endswith("weight_g"):
            v = model.p[name[:-1] + "v"]
            norm = v.pow(2).sum(dim=(0, 1), keepdim=True).sqrt()
            model.p[name] = norm * (0.5 + torch.rand(norm.shape, generator=gen, dtype=torch.float64))
    for name in model.p:  # the file holds float32; the reference runs on exactly those values
        model.p[name] = model.p[name].float().double()


def audio(gen, lengths, total, garbage=True):
    """[B, total] audio, rows random up to their length, then noise (masked) or zeros."""
    x = torch.zeros(len(lengths), total, dtype=torch.float64)
    m = torch.zeros(len(lengths), total, dtype=torch.long)
    for b, n in enumerate(lengths):
        x[b, :n] = torch.randn(n, generator=gen, dtype=torch.float64)
        if garbage and n < total:
            x[b, n:] = 3.0 * torch.rand(total - n, generator=gen, dtype=torch.float64)
        m[b, :n] = 1
    return x.float().double(), m


AUDIO_SMALL = dict(conv_dim=[16, 16, 24, 24, 24, 24, 20], conv_kernel=[10, 3, 3, 3, 3, 2, 2],
                   conv_stride=[5, 2, 2, 2, 2, 2, 2], hidden_size=32, num_attention_heads=4, intermediate_size=64,
                   num_hidden_layers=2, num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4)
# 32 channels: a per-frame LayerNorm over fewer amplifies fp16 rounding past the fp16 bound
LARGE = dict(feat_extract_norm="layer", do_stable_layer_norm=True, conv_bias=True, conv_dim=[32] * 7)

# name -> (config, builder of (inputs, file-name map)); see each entry's comment
CASES = {
    # batch 3, 30x30 image, patch 4: a 7x7 grid with 2 trailing pixels dropped; Dh 12 (a scale that is not a power of two)
    "vit_b3_odd_image": dict(config=dict(model_type="vit", hidden_size=36, num_hidden_layers=2,
                                         num_attention_heads=3, intermediate_size=72, image_size=30,
                                         patch_size=4, layer_norm_eps=1e-6),
                             batch=3),
    # non-square [22, 28] image, patch 6 (3x4 grid), no q/k/v bias, saved as a task
    # checkpoint: "vit." prefix, a classifier, no pooler (as google/vit-base-patch16-224)
    "vit_nonsquare_nopooler": dict(config=dict(model_type="vit", hidden_size=40, num_hidden_layers=3,
                                               num_attention_heads=5, intermediate_size=80, image_size=[22, 28],
                                               patch_size=6, qkv_bias=False, hidden_act="gelu_new"),
                                   batch=2, prefix="vit.", drop=("pooler.",),
                                   extra={"classifier.weight": (10, 40), "classifier.bias": (10,)}),
    # base layout with an audio mask: batch 3, rows of 3800, 2770 and 1650 samples
    "wav2vec2_base_mask": dict(config=dict(AUDIO_SMALL, model_type="wav2vec2"),
                               lengths=[3800, 2770, 1650]),
    # large layout (stable LN, "layer" norm, conv biases), mask, odd positional kernel,
    # pre-training checkpoint: "wav2vec2." prefix, quantizer and projection heads,
    # weight norm under torch >= 2.1's parametrization names
    "wav2vec2_large_mask": dict(config=dict(AUDIO_SMALL, model_type="wav2vec2", num_conv_pos_embeddings=15)
                                | LARGE,
                                lengths=[2400, 3000, 1234], prefix="wav2vec2.", parametrized=True,
                                extra={"quantizer.codevectors": (1, 8, 4), "project_q.weight": (4, 4),
                                       "project_hid.weight": (4, 32)}),
    # HuBERT large layout, mask, no feature-projection LayerNorm, CTC checkpoint names
    "hubert_large_noprojln_mask": dict(config=dict(AUDIO_SMALL, model_type="hubert", feat_proj_layer_norm=False)
                                       | LARGE,
                                       lengths=[2500, 3000, 3000], prefix="hubert.",
                                       extra={"lm_head.weight": (6, 32), "lm_head.bias": (6,)}),
    # HuBERT base layout, batch 3 unmasked zero-padded audio (what its feature extractor gives)
    "hubert_base_b3": dict(config=dict(AUDIO_SMALL, model_type="hubert", num_conv_pos_embeddings=9,
                                       num_conv_pos_embedding_groups=2),
                           lengths=[3600, 3000, 2000], mask=False, garbage=False),
}


def make_case(name, spec, outdir, seed):
    gen = torch.Generator().manual_seed(seed)
    cfg = dict(spec["config"])
    model = tm.build(cfg)
    perturb(model, gen)
    for d in spec.get("drop", ()):
        for k in [k for k in model.p if k.startswith(d)]:
            del model.p[k]
    if cfg["model_type"] == "vit":
        ih, iw = tm.torch_zoo_vision_a._pair(model.cfg["image_size"])
        x = torch.rand(spec["batch"], model.ch, ih, iw, generator=gen, dtype=torch.float64).float().double()
        inputs = {"pixel_values": x}
    else:
        x, m = audio(gen, spec["lengths"], max(spec["lengths"]), spec.get("garbage", True))
        inputs = {"input_values": x}
        if spec.get("mask", True):
            inputs["attention_mask"] = m
    with torch.no_grad():
        out = model(**inputs)
    d = os.path.join(outdir, name)
    os.makedirs(d, exist_ok=True)
    full = dict(cfg)
    full["architectures"] = [{"vit": "ViTModel", "wav2vec2": "Wav2Vec2Model", "hubert": "HubertModel"}[
        cfg["model_type"]]]
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(full, f, indent=2, sort_keys=True)
        f.write("\n")
    weights = {}
    for k, v in model.p.items():
        if spec.get("parametrized") and k.endswith((".weight_g", ".weight_v")):
            k = k[:-len(".weight_g")] + (".parametrizations.weight.original0" if k.endswith("_g")
                                          else ".parametrizations.weight.original1")
        weights[spec.get("prefix", "") + k] = v.float()
    for k, shape in spec.get("extra", {}).items():
        weights[k] = torch.randn(shape, generator=gen).float()
    meta = {"case": f"vision-a/{name}", "reference": "bench/torch_zoo_vision_a.py in float64 on float32 "
            "weights and inputs", "generator": "tools/golden/make_variants_vision_a.py", "seed": seed}
    write_safetensors(os.path.join(d, "model.safetensors"), weights, {"format": "pt"})
    write_safetensors(os.path.join(d, "inputs.safetensors"),
                      {k: (v.float() if v.is_floating_point() else v) for k, v in inputs.items()}, meta)
    write_safetensors(os.path.join(d, "expected.safetensors"), {k: v.float() for k, v in out.items()},
                      dict(meta, required="last_hidden_state"))
    return d


def main(argv):
    if torch is None:
        print(f"make_variants_vision_a: needs torch ({tm.TORCH_ERROR}); nothing written")
        return 0
    if not argv:
        print(__doc__.strip().split("\n\n")[-2])
        return 2
    outdir, names = argv[0], argv[1:] or list(CASES)
    bad = [n for n in names if n not in CASES]
    if bad:
        print(f"make_variants_vision_a: unknown case(s) {', '.join(bad)} (cases: {', '.join(CASES)})")
        return 2
    for i, name in enumerate(CASES):
        if name in names:
            d = make_case(name, CASES[name], outdir, seed=1000 + i)
            size = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))
            print(f"{d}: {size / 1024:.0f} KB")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
