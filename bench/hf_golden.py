#!/usr/bin/env python3
"""hf_golden.py - proves bench/torch_models.py is Hugging Face's math: runs each
golden case of tests/golden/<arch>/ (config.json, model.safetensors,
inputs.safetensors and expected.safetensors, the outputs of HF transformers'
own float64 run) through the torch model built from that config and those
weights, and applies the golden criterion of tests/golden/README.md (the one
the C golden tests use, tests/ft_golden.h): per output, same shape, all finite,
every |got - exp| <= 1e-4 + 1e-4 |exp|, and ||got - exp|| / ||exp|| <= 1e-5.

    python3 bench/hf_golden.py [tests/golden] [--arch funnel,wavlm]

prints one line per compared output and exits 1 if any fails (0 with a line
saying so when torch is missing). Includes a safetensors reader on the standard
library (+ torch for the tensors): no `safetensors` module needed.
"""
import argparse
import json
import math
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_models as tm  # noqa: E402

torch = tm.torch
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDEN_DIR = os.environ.get("FT_GOLDEN_DIR") or os.path.join(ROOT, "tests", "golden")
ARCHS = ("bert", "funnel", "mobilebert", "resnet", "wavlm", "vit", "wav2vec2", "hubert", "squeezebert",
         "deberta", "mobilenet_v2", "efficientnet", "convnext", "roberta", "albert", "gpt2")
ATOL, RTOL, REL_L2 = 1e-4, 1e-4, 1e-5
# --------------------------------------------------------------------------- safetensors

# dtype -> (torch dtype name, bytes per element)
ST_DTYPES = {"F64": ("float64", 8), "F32": ("float32", 4), "F16": ("float16", 2), "BF16": ("bfloat16", 2),
             "I64": ("int64", 8), "I32": ("int32", 4), "I16": ("int16", 2), "I8": ("int8", 1),
             "U8": ("uint8", 1), "BOOL": ("bool", 1)}


def read_safetensors_header(path):
    """(header dict without __metadata__, offset of the data, data length): the layout is an
    8-byte little-endian u64 N, N bytes of JSON, then the raw little-endian tensors. Raises
    ValueError naming the file and the problem on anything malformed."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise ValueError(f"{path}: {size} bytes, too short for a safetensors header length")
        (n,) = struct.unpack("<Q", head)
        if n > size - 8:
            raise ValueError(f"{path}: header length {n} exceeds the file ({size} bytes): truncated?")
        raw = f.read(n)
    try:
        hdr = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise ValueError(f"{path}: header is not JSON ({e})") from None
    if not isinstance(hdr, dict):
        raise ValueError(f"{path}: header is not a JSON object")
    hdr.pop("__metadata__", None)
    dlen = size - 8 - n
    for name, e in hdr.items():
        if not isinstance(e, dict) or e.get("dtype") not in ST_DTYPES:
            raise ValueError(f"{path}: tensor {name}: unknown dtype {e.get('dtype') if isinstance(e, dict) else e!r}")
        shape, offs = e.get("shape"), e.get("data_offsets")
        if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
            raise ValueError(f"{path}: tensor {name}: bad shape {shape!r}")
        if not (isinstance(offs, list) and len(offs) == 2 and all(isinstance(o, int) for o in offs)
                and 0 <= offs[0] <= offs[1] <= dlen):
            raise ValueError(f"{path}: tensor {name}: data_offsets {offs!r} outside the {dlen} data bytes")
        numel = math.prod(shape)
        if offs[1] - offs[0] != numel * ST_DTYPES[e["dtype"]][1]:
            raise ValueError(f"{path}: tensor {name}: {offs[1] - offs[0]} bytes for {e['dtype']} {shape}")
    return hdr, 8 + n, dlen


def load_safetensors(path):
    """name -> torch tensor (a copy, in the file's dtype)."""
    hdr, start, _ = read_safetensors_header(path)
    with open(path, "rb") as f:
        f.seek(start)
        data = f.read()
    out = {}
    for name, e in hdr.items():
        dt = getattr(torch, ST_DTYPES[e["dtype"]][0])
        b, end = e["data_offsets"]
        if end == b:
            out[name] = torch.zeros(e["shape"], dtype=dt)
        else:
            out[name] = torch.frombuffer(bytearray(data[b:end]), dtype=dt).reshape(e["shape"])
    if sys.byteorder != "little":
        raise ValueError("big-endian hosts are not supported")
    return out


# --------------------------------------------------------------------------- the golden check


def compare(name, got, exp):
    """(ok, line): the golden criterion for one output tensor."""
    if tuple(got.shape) != tuple(exp.shape):
        return False, f"{name}: shape {tuple(got.shape)}, expected {tuple(exp.shape)}"
    got, exp = got.detach().double(), exp.double()
    if not bool(torch.isfinite(got).all()):
        return False, f"{name}: NaN or Inf in the output"
    diff = (got - exp).abs()
    over = int((diff > ATOL + RTOL * exp.abs()).sum())
    rel = float(torch.linalg.norm(got - exp) / max(float(torch.linalg.norm(exp)), 1e-30))
    ok = over == 0 and rel <= REL_L2
    return ok, (f"{name}: {'ok' if ok else 'FAIL'} max abs err {float(diff.max()):.2e}, rel L2 {rel:.2e}"
                f"{f', {over} elements over tolerance' if over else ''}")


def required_outputs(expected):
    """last_hidden_state and pooler_output where the case has them, plus the optional
    intermediate outputs both sides name (WavLM extract_features, Funnel encoder outputs)."""
    keep = ["last_hidden_state", "pooler_output", "extract_features", "encoder_last_hidden_state",
            "first_block_hidden_state"]
    return [k for k in keep if k in expected]


def load_case(case_dir, **kw):
    """(model with the case's weights, inputs, expected outputs)."""
    with open(os.path.join(case_dir, "config.json")) as f:
        cfg = json.load(f)
    model = tm.build(cfg, **kw).load_state(load_safetensors(os.path.join(case_dir, "model.safetensors")))
    inputs = load_safetensors(os.path.join(case_dir, "inputs.safetensors"))
    expected = load_safetensors(os.path.join(case_dir, "expected.safetensors"))
    return model, inputs, expected


def run_case(case_dir, model=None, **kw):
    """[(ok, line)] per compared output; `model` replaces the case's (a mutated copy)."""
    m, inputs, expected = load_case(case_dir, **kw)
    model = model or m
    with torch.no_grad():
        out = model(**inputs)
    names = [k for k in required_outputs(expected) if k in out]
    if "last_hidden_state" not in names:
        return [(False, "last_hidden_state: not produced")]
    return [compare(k, out[k], expected[k]) for k in names]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", nargs="?", default=GOLDEN_DIR)
    ap.add_argument("--arch", default=",".join(ARCHS))
    a = ap.parse_args(argv)
    if torch is None:
        print(f"hf_golden: needs torch ({tm.TORCH_ERROR}); skipping")
        return 0
    torch.set_num_threads(min(2, os.cpu_count() or 1))
    bad = 0
    for arch in a.arch.split(","):
        variants = [{}] if arch != "wavlm" else [dict(fold_weight_norm=True), dict(fold_weight_norm=False)]
        for kw in variants:
            tag = arch + ("" if not kw else f" (weight norm {'folded' if kw['fold_weight_norm'] else 'per forward'})")
            for ok, line in run_case(os.path.join(a.dir, arch), **kw):
                print(f"{tag}: {line}")
                bad += not ok
    print(f"hf_golden: {'all outputs match' if not bad else f'{bad} outputs FAIL'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
