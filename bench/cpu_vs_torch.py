#!/usr/bin/env python3
"""cpu_vs_torch.py - ftengine's CPU backend side by side with PyTorch eager on
the same machine, in the same run (issue 18).

The models are ftengine's presets written out in plain torch with the Hugging
Face math (bench/torch_models.py: BERT, DistilBERT, MobileBERT, Funnel with and
without its decoder, ResNet, WavLM; random init at the presets' sizes, eval
mode, no autograd), so neither transformers nor a checkpoint is needed. That
they are HF's math is checked, not assumed: bench/hf_golden.py loads each
golden case's HF weights into them and compares with HF's own outputs
(tests/golden/, the C golden tests' tolerance); bench/test_cpu_vs_torch.py runs
it, and shows a dropped or changed operation fails it. Each torch model gets
what `ftengine bench` feeds its own: input_ids only (HF's forward fills the
mask and token types), pixel_values of --image side, or --samples of audio.

Each round runs, for every model, `ftengine bench MODEL --device cpu --mode
graph|static --threads N` (its median forward latency) and then the torch
model for the same number of forwards (median wall time of one forward, in a
fresh python whose OpenMP and BLAS thread counts are set before torch loads:
OpenBLAS's pthread build sizes its own pool at load time); rounds alternate so
both see the same machine load. The table keeps the median over rounds of each
side's median, ftengine's best of the modes, and the ratio ftengine / torch
(below 1: ftengine is faster). WavLM's positional-conv weight norm is folded
once on the torch side (as remove_weight_norm would; HF recomputes it per
forward), so torch is not charged for it.

Optional tooling: needs torch (Debian's python3-torch is enough); without it
the script says so and exits 0. The C build and tests never run it.

    python3 bench/cpu_vs_torch.py --models bert-base,distilbert-base,mobilebert-uncased,funnel-small,\
        funnel-small-base,resnet-50,wavlm-base --threads 1,2 --batch 1,8 --rounds 5 --iters 10 \
        [--modes graph,static] [--md table.md] [--json out.json]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_models as tm  # noqa: E402

torch, TORCH_ERROR = tm.torch, tm.TORCH_ERROR
MODELS = tm.PRESETS  # name -> (model_type, preset keys)
LATENCY_RE = re.compile(r"latency ms: median ([0-9.]+)")


def parse_latency(text):
    """The median forward latency (ms) from `ftengine bench` output, or None."""
    m = LATENCY_RE.search(text)
    return float(m.group(1)) if m else None


def ratio_row(model, batch, threads, ft_ms, torch_ms, ft_mode):
    """One markdown table row; the ratio is ftengine / torch."""
    r = ft_ms / torch_ms if ft_ms and torch_ms else float("nan")
    return (f"| {model} | {batch} | {threads} | {ft_ms:.2f} ({ft_mode}) | {torch_ms:.2f} | {r:.2f} |")


TABLE_HEAD = ("| model | batch | threads | ftengine best of graph/static, ms | PyTorch eager, ms "
              "| ratio |\n| --- | --- | --- | --- | --- | --- |")

# --------------------------------------------------------------------------- torch models


def kind(name):
    """text, vision or speech: what --seq means for ftengine bench (tokens, image side, samples)."""
    vision = ("resnet", "mobilenet_v2", "efficientnet", "convnext")
    return "vision" if tm.PRESETS[name][0] in vision else {"wavlm": "speech"}.get(tm.PRESETS[name][0], "text")


def build_torch(name):
    return tm.build_preset(name)


def time_torch(model, inputs, iters, warmup=2):
    """Median wall time (ms) of one forward."""
    with torch.no_grad():
        for _ in range(warmup):
            model(**inputs)
        ts = []
        for _ in range(iters):
            t0 = time.perf_counter()
            model(**inputs)
            ts.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ts)


# --------------------------------------------------------------------------- ftengine


def time_ftengine(tool, name, mode, batch, size, threads, iters):
    """ftengine's median ms; `size` is --seq: tokens, image side or audio samples."""
    cmd = [tool, "bench", name, "--device", "cpu", "--mode", mode, "--batch", str(batch),
           "--threads", str(threads), "--iters", str(iters), "--warmup", "2"]
    if size:
        cmd += ["--seq", str(size)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    ms = parse_latency(r.stdout)
    if r.returncode != 0 or ms is None:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr.strip()[:300]}")
    return ms


def torch_env(threads):
    """The environment of a torch worker with `threads` threads: OpenMP and every
    BLAS it may call (OpenBLAS's pthread build keeps a pool of its own, sized at
    load time, which torch.set_num_threads does not reach)."""
    env = dict(os.environ)
    for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "GOTO_NUM_THREADS"):
        env[v] = str(threads)
    return env


TORCH_LIBDIR = None  # --torch-libdir: a directory searched first for torch's libblas.so.3


def time_torch_worker(name, batch, size, threads, iters, seed=0):
    """Median ms of one forward in a fresh python with the thread settings applied
    before torch loads (so its BLAS pool has the same size)."""
    cmd = [sys.executable, os.path.abspath(__file__), "--torch-worker",
           f"{name},{batch},{size},{threads},{iters},{seed}"]
    env = torch_env(threads)
    if TORCH_LIBDIR:
        env["LD_LIBRARY_PATH"] = TORCH_LIBDIR + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0 or not r.stdout.strip():
        raise RuntimeError(f"torch worker failed ({r.returncode}): {r.stderr.strip()[-300:]}")
    return float(r.stdout.strip().splitlines()[-1])


def torch_worker(spec):
    name, batch, size, threads, iters, seed = spec.split(",")
    torch.set_num_threads(int(threads))
    torch.manual_seed(int(seed))
    net = build_torch(name)
    print(f"{time_torch(net, net.inputs(int(batch), int(size)), int(iters)):.4f}")
    return 0


def torch_build_info():
    """torch version, its BLAS and oneDNN, as torch.__config__.show() reports them."""
    cfg = torch.__config__.show()
    keep = []
    for ln in cfg.splitlines():
        ln = ln.strip().lstrip("- ")
        if ln.startswith("Build settings"):
            keep += [kv.strip() for kv in ln.split(":", 1)[1].split(",")
                     if kv.strip().split("=")[0] in ("BLAS_INFO", "LAPACK_INFO", "USE_MKLDNN", "USE_OPENMP")]
        elif any(k in ln for k in ("MKL", "oneDNN", "CPU capability", "OpenMP")):
            keep.append(ln)
    # Debian's torch says BLAS_INFO=generic: it calls the system libblas.so.3, whichever
    # implementation the alternatives system points that at
    blas = "?"
    for p in ("/etc/alternatives/libblas.so.3-x86_64-linux-gnu", "/etc/alternatives/libblas.so.3"):
        if os.path.exists(p):
            blas = os.path.realpath(p)
            break
    return {"torch": torch.__version__, "mkldnn": bool(torch.backends.mkldnn.is_available()),
            "system_blas": blas, "config": keep}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tool", default=os.path.join(os.path.dirname(__file__), "..", "build", "ftengine"))
    ap.add_argument("--models", default="bert-base,distilbert-base,mobilebert-uncased,funnel-small,"
                    "funnel-small-base,resnet-50,wavlm-base")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--batch", default="1")
    ap.add_argument("--seq", type=int, default=128, help="tokens per item (text models)")
    ap.add_argument("--image", type=int, default=224, help="image side (ResNet)")
    ap.add_argument("--samples", type=int, default=32000, help="audio samples per item (WavLM)")
    ap.add_argument("--modes", default="graph,static")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--md")
    ap.add_argument("--json")
    ap.add_argument("--torch-worker", help=argparse.SUPPRESS)
    ap.add_argument("--torch-libdir", help="directory searched first for torch's BLAS "
                    "(e.g. /usr/lib/x86_64-linux-gnu/openblas-openmp: OpenBLAS on torch's OpenMP "
                    "threads instead of a pthread pool of its own)")
    a = ap.parse_args(argv)
    global TORCH_LIBDIR
    TORCH_LIBDIR = a.torch_libdir
    models = [m for m in a.models.split(",") if m]
    for m in models:
        if m not in MODELS:
            print(f"cpu_vs_torch: unknown model {m} ({', '.join(MODELS)})", file=sys.stderr)
            return 2
    if a.torch_worker and torch is not None:
        return torch_worker(a.torch_worker)
    if torch is None:
        print(f"cpu_vs_torch: needs torch ({TORCH_ERROR}); skipping")
        return 0
    if not os.path.exists(a.tool):
        print(f"cpu_vs_torch: no ftengine tool at {a.tool} (make first)", file=sys.stderr)
        return 1
    threads = [int(t) for t in a.threads.split(",")]
    batches = [int(b) for b in a.batch.split(",")]
    modes = [m for m in a.modes.split(",") if m]
    info = torch_build_info()
    if a.torch_libdir:
        info["torch_libdir"] = a.torch_libdir
    print(f"torch {info['torch']} (mkldnn {info['mkldnn']}, system BLAS {info['system_blas']}, "
          f"torch libdir first: {a.torch_libdir or '-'}); " +
          "; ".join(info["config"]))
    res = {}  # (model, batch, threads) -> {"torch": [...], mode: [...]}
    for rnd in range(a.rounds):
        for m in models:
            for b in batches:
                size = {"text": a.seq, "vision": a.image, "speech": a.samples}[kind(m)]
                for t in threads:
                    key = (m, b, t)
                    slot = res.setdefault(key, {})
                    for mode in modes:
                        slot.setdefault(mode, []).append(time_ftengine(a.tool, m, mode, b, size, t, a.iters))
                    slot.setdefault("torch", []).append(time_torch_worker(m, b, size, t, a.iters))
                    print(f"round {rnd + 1}: {m} b{b} t{t}: " +
                          ", ".join(f"{k} {v[-1]:.2f}" for k, v in slot.items()), flush=True)
    rows, out = [], []
    for (m, b, t), slot in res.items():
        tm = statistics.median(slot["torch"])
        best = min(modes, key=lambda md: statistics.median(slot[md]))
        fm = statistics.median(slot[best])
        rows.append(ratio_row(m, b, t, fm, tm, best))
        out.append(dict(model=m, batch=b, threads=t, torch_ms=tm, ftengine_ms=fm, ftengine_mode=best,
                        ratio=fm / tm, samples={k: v for k, v in slot.items()}))
    table = TABLE_HEAD + "\n" + "\n".join(rows)
    print(table)
    if a.md:
        with open(a.md, "w") as f:
            f.write(table + "\n")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(dict(torch=info, rounds=a.rounds, iters=a.iters, rows=out), f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
