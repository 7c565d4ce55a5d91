#!/usr/bin/env python3
"""zoo_text_a_variants.py - writes reference cases ("variants") of RoBERTa, ALBERT
and GPT-2 at sizes and layouts the three golden cases do not have: other widths
and head sizes (head dims that are not powers of two), batch 3, odd lengths, pad
ids inside a RoBERTa row, left and right padding, no mask, explicit position_ids
and token_type_ids, ALBERT with 3 groups x 2 inner layers and with HF's
float-division group index (18 layers, 14 groups: groups shared by applications), GPT-2 with
scale_attn_by_inverse_layer_idx and n_inner. Each case has the layout of
tests/golden/<arch>/ (config.json, model.safetensors, inputs.safetensors,
expected.safetensors with last_hidden_state, pooler_output where the model has
one, and every hidden_states.N) and is checked by tests/test_golden_variants.c.

The expected outputs come from bench/torch_zoo_text_a.py's plain-torch models run
in float64 on the float32 weights and inputs (as the HF golden cases were made);
those models reproduce the HF golden cases of tests/golden/ to the last float32
bit in float64 (bench/test_torch_zoo_text_a.py checks it), so these cases carry
HF's math, not ftengine's. Weights are random with std 0.1; tensors HF would
initialise to constants (norm weights, biases) get noise, so nothing passes by
skipping one.

Needs torch (Debian's python3-torch: /usr/bin/python3); without it, says so and
writes nothing. Deterministic (fixed seeds).

    /usr/bin/python3 tools/golden/zoo_text_a_variants.py OUTDIR [CASE ...]   # the named cases
    /usr/bin/python3 tools/golden/zoo_text_a_variants.py OUTDIR --random N  # N random ones per arch
"""
import argparse
import json
import os
import random
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench"))
import torch_models as tm  # noqa: E402

torch = tm.torch

ST = {"float32": "F32", "int64": "I64"}


def write_st(path, tensors, metadata=None):
    """A safetensors file of {name: tensor} (F32 / I64), standard library + torch."""
    hdr, blobs, off = {}, [], 0
    if metadata:
        hdr["__metadata__"] = metadata
    for k in sorted(tensors):
        t = tensors[k].contiguous()
        b = t.numpy().tobytes()
        hdr[k] = {"dtype": ST[str(t.dtype).replace("torch.", "")], "shape": list(t.shape),
                  "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    raw = json.dumps(hdr, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw + b"".join(blobs))


def randomize(model, gen):
    """std 0.1 weights; norm weights 1 + 0.1 noise; biases 0.1 noise (no constant tensor)."""
    for k, v in model.p.items():
        if k.endswith(".bias") or k.endswith(".beta"):
            model.p[k] = 0.1 * torch.randn(v.shape, generator=gen)
        elif ("LayerNorm" in k or "layer_norm" in k or ".ln_" in k or k.startswith("ln_")) and v.dim() == 1:
            model.p[k] = 1.0 + 0.1 * torch.randn(v.shape, generator=gen)
        else:
            model.p[k] = 0.1 * torch.randn(v.shape, generator=gen)


def pad_rows(batch, seq, left, right):
    """attention mask [batch, seq]: row b masks left[b] leading and right[b] trailing tokens."""
    m = torch.ones(batch, seq, dtype=torch.int64)
    for b in range(batch):
        if left[b]:
            m[b, :left[b]] = 0
        if right[b]:
            m[b, seq - right[b]:] = 0
    return m


# name -> (config, input builder(gen, cfg) -> dict)
def roberta_pads(gen, c):
    B, S, pad = 3, 13, c["pad_token_id"]
    ids = torch.randint(3, c["vocab_size"], (B, S), generator=gen)
    ids[1, 3] = ids[1, 7] = pad  # pad ids inside a row: positions skip them
    m = pad_rows(B, S, [0, 0, 3], [0, 4, 0])
    ids[m == 0] = pad
    tt = torch.randint(0, c["type_vocab_size"], (B, S), generator=gen)
    return {"input_ids": ids, "attention_mask": m, "token_type_ids": tt}


def ids_only(gen, c, B=2, S=9, pad=None):
    ids = torch.randint(0, c["vocab_size"], (B, S), generator=gen)
    if pad is not None:
        ids[0, 2] = ids[1, S - 1] = pad
    return {"input_ids": ids}


def albert_masked(gen, c):
    B, S = 3, 11
    ids = torch.randint(0, c["vocab_size"], (B, S), generator=gen)
    return {"input_ids": ids, "attention_mask": pad_rows(B, S, [0, 0, 2], [0, 3, 0]),
            "token_type_ids": torch.randint(0, c["type_vocab_size"], (B, S), generator=gen)}


def gpt2_padded(gen, c):
    B, S = 3, 13
    ids = torch.randint(0, c["vocab_size"], (B, S), generator=gen)
    m = pad_rows(B, S, [0, 4, 0], [0, 0, 3])
    ids[m == 0] = c["vocab_size"] - 1  # eos as pad, as GPT-2 tokenizers do
    return {"input_ids": ids, "attention_mask": m}


def gpt2_explicit(gen, c):
    B, S = 2, 9
    ids = torch.randint(0, c["vocab_size"], (B, S), generator=gen)
    return {"input_ids": ids, "attention_mask": pad_rows(B, S, [0, 2], [0, 0]),
            "token_type_ids": torch.randint(0, c["vocab_size"], (B, S), generator=gen),
            "position_ids": (torch.arange(S) + 3)[None].repeat(B, 1)}


CASES = {
    "roberta-b3-s13-pads": (dict(model_type="roberta", vocab_size=200, hidden_size=32, num_hidden_layers=3,
                                 num_attention_heads=4, intermediate_size=64, max_position_embeddings=40,
                                 type_vocab_size=2, layer_norm_eps=1e-5, pad_token_id=1), roberta_pads),
    "roberta-pad0-nomask": (dict(model_type="roberta", vocab_size=150, hidden_size=24, num_hidden_layers=2,
                                 num_attention_heads=2, intermediate_size=40, max_position_embeddings=20,
                                 type_vocab_size=1, layer_norm_eps=1e-5, pad_token_id=0, hidden_act="gelu_new"),
                            lambda g, c: ids_only(g, c, 2, 9, pad=0)),
    "albert-3x2-b3-s11": (dict(model_type="albert", vocab_size=100, embedding_size=24, hidden_size=36,
                               num_hidden_layers=3, num_hidden_groups=3, inner_group_num=2, num_attention_heads=3,
                               intermediate_size=48, max_position_embeddings=32, type_vocab_size=2), albert_masked),
    "albert-l18-g14": (dict(model_type="albert", vocab_size=100, embedding_size=16, hidden_size=16,
                            num_hidden_layers=18, num_hidden_groups=14, inner_group_num=1, num_attention_heads=2,
                            intermediate_size=32, max_position_embeddings=16, type_vocab_size=2),
                       lambda g, c: ids_only(g, c, 1, 7)),
    "gpt2-b3-s13-pads": (dict(model_type="gpt2", vocab_size=120, n_positions=32, n_embd=40, n_layer=2, n_head=4),
                         gpt2_padded),
    "gpt2-layer-scale": (dict(model_type="gpt2", vocab_size=100, n_positions=24, n_embd=32, n_layer=2, n_head=2,
                              n_inner=72, scale_attn_by_inverse_layer_idx=True), gpt2_explicit),
}


def random_case(arch, rng):
    """A random configuration and input builder of arch (for a broader local sweep)."""
    heads = rng.choice([1, 2, 3, 4, 6])
    d = heads * rng.choice([4, 6, 8, 10, 12, 16])
    B, S = rng.choice([1, 2, 3]), rng.choice([1, 2, 5, 7, 13, 17, 31])
    if arch == "roberta":
        pad = rng.choice([0, 1, 2])
        c = dict(model_type="roberta", vocab_size=rng.choice([60, 97]), hidden_size=d,
                 num_hidden_layers=rng.choice([1, 2, 3]), num_attention_heads=heads, intermediate_size=2 * d + 4,
                 max_position_embeddings=S + pad + 1 + rng.choice([0, 5]), type_vocab_size=rng.choice([1, 2]),
                 layer_norm_eps=1e-5, pad_token_id=pad, hidden_act=rng.choice(["gelu", "gelu_new", "relu"]))

        def build(g, c):
            ids = torch.randint(0, c["vocab_size"], (B, S), generator=g)
            ids[ids == c["pad_token_id"]] += 1
            for b in range(B):  # some pads, anywhere
                for s in range(S):
                    if torch.rand(1, generator=g) < 0.2:
                        ids[b, s] = c["pad_token_id"]
            out = {"input_ids": ids}
            if rng.random() < 0.7:
                out["attention_mask"] = (ids != c["pad_token_id"]).to(torch.int64)
            if c["type_vocab_size"] > 1:
                out["token_type_ids"] = torch.randint(0, 2, (B, S), generator=g)
            return out
    elif arch == "albert":
        L = rng.choice([1, 2, 3, 4, 6])
        G = rng.choice([g for g in range(1, L + 1) if g <= 4])
        c = dict(model_type="albert", vocab_size=rng.choice([50, 77]), embedding_size=rng.choice([8, 12, 20]),
                 hidden_size=d, num_hidden_layers=L, num_hidden_groups=G, inner_group_num=rng.choice([1, 2]),
                 num_attention_heads=heads, intermediate_size=2 * d + 2, max_position_embeddings=S + 3,
                 type_vocab_size=2, hidden_act=rng.choice(["gelu_new", "gelu"]))

        def build(g, c):
            out = {"input_ids": torch.randint(0, c["vocab_size"], (B, S), generator=g)}
            if rng.random() < 0.7:
                out["attention_mask"] = pad_rows(B, S, [0] * B, [min(b, S - 1) for b in range(B)])
            return out
    else:
        c = dict(model_type="gpt2", vocab_size=rng.choice([50, 77]), n_positions=S + rng.choice([0, 4]), n_embd=d,
                 n_layer=rng.choice([1, 2, 3]), n_head=heads, n_inner=rng.choice([None, 3 * d]),
                 scale_attn_by_inverse_layer_idx=rng.random() < 0.3, activation_function="gelu_new")

        def build(g, c):
            out = {"input_ids": torch.randint(0, c["vocab_size"], (B, S), generator=g)}
            if rng.random() < 0.8:
                left = [min(rng.choice([0, 1, 3]), S - 1) if b else 0 for b in range(B)]
                right = [0 if left[b] else min(rng.choice([0, 2]), S - 1) for b in range(B)]
                out["attention_mask"] = pad_rows(B, S, left, right)
            return out
    return c, build


def write_case(outdir, name, cfg, build, seed):
    gen = torch.Generator().manual_seed(seed)
    model = tm.build(cfg)
    randomize(model, gen)
    inputs = build(gen, model.cfg)
    with torch.no_grad():
        ref = tm.build(cfg)
        ref.p = {k: v.double() for k, v in model.p.items()}
        out = ref(**inputs)
    d = os.path.join(outdir, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(dict(cfg, architectures=[type(model).__name__ + "Model"]), f, indent=2, sort_keys=True)
    write_st(os.path.join(d, "model.safetensors"), model.p, {"format": "pt"})
    write_st(os.path.join(d, "inputs.safetensors"), inputs)
    meta = {"case": name, "reference": "bench/torch_zoo_text_a.py in float64, stored as float32",
            "generator": "tools/golden/zoo_text_a_variants.py"}
    write_st(os.path.join(d, "expected.safetensors"), {k: v.float() for k, v in out.items()}, meta)
    return d


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("outdir")
    ap.add_argument("cases", nargs="*", help=f"of {', '.join(CASES)} (default: all)")
    ap.add_argument("--random", type=int, default=0, help="write N random cases per architecture instead")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args(argv)
    if torch is None:
        print(f"zoo_text_a_variants: needs torch ({tm.TORCH_ERROR}); nothing written")
        return 0
    torch.set_num_threads(1)
    if a.random:
        rng = random.Random(a.seed)
        for arch in ("roberta", "albert", "gpt2"):
            for i in range(a.random):
                cfg, build = random_case(arch, rng)
                print(write_case(a.outdir, f"{arch}-random-{a.seed}-{i}", cfg, build, a.seed * 1000 + i))
        return 0
    for name in a.cases or CASES:
        if name not in CASES:
            print(f"zoo_text_a_variants: no case {name!r} ({', '.join(CASES)})")
            return 2
        cfg, build = CASES[name]
        print(write_case(a.outdir, name, cfg, build, seed=sum(map(ord, name))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
