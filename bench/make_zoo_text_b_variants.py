#!/usr/bin/env python3
"""make_zoo_text_b_variants.py - writes SqueezeBERT and DeBERTa reference cases
for configurations the two golden cases leave out, in the layout of
tests/golden/<arch>/ (config.json, model.safetensors, inputs.safetensors,
expected.safetensors), for tests/test_golden_variants.c (every case there runs in
eager, graph and static mode on the CPU and on CUDA).

The expected outputs come from bench/torch_zoo_text_b.py, the plain-torch
transcription of HF 4.36.2's SqueezeBertModel and DebertaModel, which
bench/hf_golden.py shows reproduces HF's own golden outputs (transformers is not
installed here); computed in float64 on the float32 weights (DeBERTa's LayerNorm
in float32, as HF's), stored as float32. Weights are random from a fixed seed,
with every bias and norm parameter away from its init value, so a skipped bias
or a wrong eps cannot pass.

    /usr/bin/python3 bench/make_zoo_text_b_variants.py [OUTDIR] [--case NAME ...]

OUTDIR defaults to tests/golden/variants. Needs torch (Debian's python3-torch is
enough); without it it says so and exits 0.
"""
import argparse
import json
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_models as tm  # noqa: E402

torch = tm.torch
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SQ = dict(model_type="squeezebert", vocab_size=64, hidden_size=48, embedding_size=48, num_attention_heads=4,
          intermediate_size=96, max_position_embeddings=32, initializer_range=0.1)
DB = dict(model_type="deberta", vocab_size=64, hidden_size=32, num_attention_heads=4, intermediate_size=64,
          max_position_embeddings=24, initializer_range=0.1, type_vocab_size=0)

# name -> (config, batch, seq, with token types, padded rows); the checks each case adds
# are in its name: other group counts, spans shorter than the sequence, batch 3, odd lengths
CASES = {
    "squeezebert-groups-2-4-3-2-4-6": (dict(SQ, num_hidden_layers=2, q_groups=2, k_groups=4, v_groups=3,
                                            post_attention_groups=2, intermediate_groups=4, output_groups=6,
                                            layer_norm_eps=1e-5), 3, 13, True, True),
    "squeezebert-dense-gelu-new": (dict(SQ, num_hidden_layers=1, num_attention_heads=3, q_groups=1, k_groups=1,
                                        v_groups=1, post_attention_groups=1, intermediate_groups=1, output_groups=1,
                                        hidden_act="gelu_new"), 1, 7, False, False),
    "deberta-span4-batch3": (dict(DB, num_hidden_layers=2, relative_attention=True, max_relative_positions=4,
                                  pos_att_type="c2p|p2c", position_biased_input=False), 3, 11, False, True),
    "deberta-p2c-positions-types-proj": (dict(DB, num_hidden_layers=1, embedding_size=24, type_vocab_size=2,
                                              relative_attention=True, pos_att_type=["p2c"], max_relative_positions=3,
                                              position_biased_input=True), 2, 9, True, True),
    "deberta-c2p-talking-heads": (dict(DB, num_hidden_layers=1, relative_attention=True, pos_att_type="C2P",
                                       talking_head=True, position_biased_input=False), 2, 7, False, True),
    "deberta-no-relative": (dict(DB, num_hidden_layers=1, relative_attention=False, pos_att_type="c2p|p2c",
                                 position_biased_input=False), 2, 8, False, True),
}

ST_CODES = {"float32": "F32", "int64": "I64"}


def write_safetensors(path, tensors):
    """tensors: name -> torch tensor (float32 or int64), written in name order."""
    header, blobs, off = {}, [], 0
    for name in sorted(tensors):
        t = tensors[name].contiguous()
        raw = t.numpy().tobytes()
        header[name] = {"dtype": ST_CODES[str(t.dtype).replace("torch.", "")], "shape": list(t.shape),
                        "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    header["__metadata__"] = {"format": "pt", "source": "bench/make_zoo_text_b_variants.py"}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def random_weights(model, gen, std):
    """Every declared weight random: matrices normal(0, std), norm scales 1 + 0.1 n, biases 0.1 n."""
    for k, t in model.p.items():
        n = torch.randn(t.shape, generator=gen, dtype=torch.float32)
        if k.endswith("Norm.weight") or k.endswith("norm.weight"):
            model.p[k] = 1.0 + 0.1 * n
        elif k.endswith("bias") or k.endswith("_bias"):
            model.p[k] = 0.1 * n
        else:
            model.p[k] = std * n


def case_inputs(gen, cfg, batch, seq, types, padded):
    ids = torch.randint(0, cfg["vocab_size"], (batch, seq), generator=gen)
    inp = {"input_ids": ids}
    if padded:
        m = torch.ones(batch, seq, dtype=torch.long)
        for b in range(1, batch):  # row 1 keeps about half its tokens, row 2 one token
            m[b, max(1, seq - b * (seq // 2 + 1)):] = 0
        inp["attention_mask"] = m
    if types:
        inp["token_type_ids"] = torch.randint(0, 2, (batch, seq), generator=gen)
    return inp


def write_case(outdir, name):
    cfg, batch, seq, types, padded = CASES[name]
    gen = torch.Generator().manual_seed(sum(map(ord, name)))
    model = tm.CLASSES[cfg["model_type"]](tm.full_config(cfg), return_hidden=True)
    random_weights(model, gen, cfg["initializer_range"])
    inputs = case_inputs(gen, cfg, batch, seq, types, padded)
    weights = {k: v.clone() for k, v in model.p.items()}
    model.p = {k: v.double() for k, v in weights.items()}
    with torch.no_grad():
        out = model(**inputs)
    d = os.path.join(outdir, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(dict(cfg, architectures=["SqueezeBertModel" if cfg["model_type"] == "squeezebert" else "DebertaModel"]),
                  f, indent=2, sort_keys=True)
        f.write("\n")
    write_safetensors(os.path.join(d, "model.safetensors"), weights)
    write_safetensors(os.path.join(d, "inputs.safetensors"), inputs)
    write_safetensors(os.path.join(d, "expected.safetensors"), {k: v.float() for k, v in out.items()})
    return d


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("outdir", nargs="?", default=os.path.join(ROOT, "tests", "golden", "variants"))
    ap.add_argument("--case", action="append", choices=sorted(CASES))
    a = ap.parse_args(argv)
    if torch is None:
        print(f"make_zoo_text_b_variants: needs torch ({tm.TORCH_ERROR}); nothing written")
        return 0
    for name in a.case or sorted(CASES):
        d = write_case(a.outdir, name)
        size = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))
        print(f"{d}: {size} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
