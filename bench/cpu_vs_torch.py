#!/usr/bin/env python3
"""cpu_vs_torch.py - ftengine's CPU backend side by side with PyTorch eager on
the same machine, in the same run (issue 18).

The models are written out in plain torch with the Hugging Face math (BERT,
DistilBERT, ResNet bottleneck nets; random init at the real sizes, eval mode,
no autograd), so neither transformers nor a checkpoint is needed. Each round
runs, for every model, `ftengine bench MODEL --device cpu --mode graph|static
--threads N` (its median forward latency) and then the torch model for the same
number of forwards (median wall time of one forward, in a fresh python whose
OpenMP and BLAS thread counts are set before torch loads: OpenBLAS's pthread
build sizes its own pool at load time); rounds alternate so both see the same
machine load. The table keeps the median over rounds of each
side's median, ftengine's best of graph/static, and the ratio
ftengine / torch (below 1: ftengine is faster).

Optional tooling: needs torch (Debian's python3-torch is enough); without it
the script says so and exits 0. The C build and tests never run it.

    python3 bench/cpu_vs_torch.py --models bert-base,distilbert-base,resnet-50 \
        --threads 1,2 --batch 1 --rounds 5 --iters 10 [--md table.md] [--json out.json]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

try:
    import torch
    import torch.nn.functional as F
except Exception as e:  # optional tooling
    torch = None
    TORCH_ERROR = f"{e.__class__.__name__}: {e}"

# name -> (kind, config); the sizes of the HF configs of the ftengine presets
MODELS = {
    "bert-tiny": ("bert", dict(layers=2, hidden=128, heads=2, inter=512)),
    "bert-mini": ("bert", dict(layers=4, hidden=256, heads=4, inter=1024)),
    "bert-base": ("bert", dict(layers=12, hidden=768, heads=12, inter=3072)),
    "bert-large": ("bert", dict(layers=24, hidden=1024, heads=16, inter=4096)),
    "distilbert-base": ("distilbert", dict(layers=6, hidden=768, heads=12, inter=3072)),
    "resnet-50": ("resnet", dict(depths=(3, 4, 6, 3), widths=(256, 512, 1024, 2048))),
    "resnet-101": ("resnet", dict(depths=(3, 4, 23, 3), widths=(256, 512, 1024, 2048))),
}
VOCAB, MAXPOS = 30522, 512
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


def _w(*shape, scale=0.02):
    return torch.randn(*shape) * scale


class Bert:
    """BertModel / DistilBertModel forward (HF eager math): embeddings + LayerNorm,
    per layer q/k/v projections, scaled masked softmax attention, output projection +
    residual + LayerNorm, erf-GELU FFN + residual + LayerNorm; BERT's tanh pooler."""

    def __init__(self, kind, layers, hidden, heads, inter):
        self.kind, self.h, self.nh = kind, hidden, heads
        self.word = _w(VOCAB, hidden)
        self.pos = _w(MAXPOS, hidden)
        self.type = _w(2, hidden) if kind == "bert" else None
        self.ln_e = (torch.ones(hidden), torch.zeros(hidden))
        self.layers = []
        for _ in range(layers):
            self.layers.append(dict(
                q=(_w(hidden, hidden), torch.zeros(hidden)), k=(_w(hidden, hidden), torch.zeros(hidden)),
                v=(_w(hidden, hidden), torch.zeros(hidden)), o=(_w(hidden, hidden), torch.zeros(hidden)),
                ln1=(torch.ones(hidden), torch.zeros(hidden)),
                i=(_w(inter, hidden), torch.zeros(inter)), out=(_w(hidden, inter), torch.zeros(hidden)),
                ln2=(torch.ones(hidden), torch.zeros(hidden))))
        self.pool = (_w(hidden, hidden), torch.zeros(hidden)) if kind == "bert" else None

    def inputs(self, batch, seq):
        g = torch.Generator().manual_seed(0)
        return (torch.randint(0, VOCAB, (batch, seq), generator=g), torch.ones(batch, seq))

    def __call__(self, ids, mask):
        b, s = ids.shape
        h, nh, d = self.h, self.nh, self.h // self.nh
        x = self.word[ids] + self.pos[:s]
        if self.type is not None:
            x = x + self.type[torch.zeros_like(ids)]
        eps = 1e-12
        x = F.layer_norm(x, (h,), *self.ln_e, eps)
        ext = (1.0 - mask[:, None, None, :]) * torch.finfo(torch.float32).min
        for L in self.layers:
            q = F.linear(x, *L["q"]).view(b, s, nh, d).transpose(1, 2)
            k = F.linear(x, *L["k"]).view(b, s, nh, d).transpose(1, 2)
            v = F.linear(x, *L["v"]).view(b, s, nh, d).transpose(1, 2)
            if self.kind == "distilbert":  # DistilBERT scales q first
                q = q / d ** 0.5
                sc = torch.matmul(q, k.transpose(-1, -2))
            else:
                sc = torch.matmul(q, k.transpose(-1, -2)) / d ** 0.5
            p = torch.softmax(sc + ext, dim=-1)
            c = torch.matmul(p, v).transpose(1, 2).reshape(b, s, h)
            x = F.layer_norm(F.linear(c, *L["o"]) + x, (h,), *L["ln1"], eps)
            f = F.linear(F.gelu(F.linear(x, *L["i"])), *L["out"])
            x = F.layer_norm(f + x, (h,), *L["ln2"], eps)
        if self.pool is not None:
            return x, torch.tanh(F.linear(x[:, 0], *self.pool))
        return x


class ResNet:
    """ResNetModel forward (HF math, eval): 7x7/2 stem + BN + ReLU + 3x3/2 max pool,
    bottleneck stages (1x1 reduce, 3x3 with the stage's stride, 1x1 expand, each
    conv + BN, ReLU after the residual add, a 1x1 + BN shortcut where the shape
    changes), global average pool."""

    def __init__(self, kind, depths, widths):
        def conv(cin, cout, k, stride):
            w = torch.randn(cout, cin, k, k) * (2.0 / (cin * k * k)) ** 0.5
            bn = (torch.rand(cout) * 0.1, torch.rand(cout) + 0.5, torch.rand(cout) + 0.5, torch.rand(cout) * 0.1)
            return (w, bn, stride, k // 2)

        self.stem = conv(3, 64, 7, 2)
        self.blocks = []
        cin = 64
        for si, (n, cout) in enumerate(zip(depths, widths)):
            red = cout // 4
            for i in range(n):
                stride = 2 if si > 0 and i == 0 else 1
                short = conv(cin, cout, 1, stride) if (cin != cout or stride != 1) else None
                self.blocks.append((conv(cin, red, 1, 1), conv(red, red, 3, stride), conv(red, cout, 1, 1), short))
                cin = cout

    @staticmethod
    def _cbn(x, c, relu=True):
        w, (mean, var, g, b), stride, pad = c
        y = F.batch_norm(F.conv2d(x, w, None, stride, pad), mean, var, g, b, False, 0.0, 1e-5)
        return F.relu(y) if relu else y

    def inputs(self, batch, size):
        g = torch.Generator().manual_seed(0)
        return (torch.rand(batch, 3, size, size, generator=g),)

    def __call__(self, x):
        x = self._cbn(x, self.stem)
        x = F.max_pool2d(x, 3, 2, 1)
        for c1, c2, c3, short in self.blocks:
            r = x if short is None else self._cbn(x, short, relu=False)
            y = self._cbn(self._cbn(self._cbn(x, c1), c2), c3, relu=False)
            x = F.relu(y + r)
        return F.adaptive_avg_pool2d(x, 1)


def build_torch(name):
    kind, cfg = MODELS[name]
    return ResNet(kind, **cfg) if kind == "resnet" else Bert(kind, **cfg)


def time_torch(model, inputs, iters, warmup=2):
    """Median wall time (ms) of one forward."""
    with torch.no_grad():
        for _ in range(warmup):
            model(*inputs)
        ts = []
        for _ in range(iters):
            t0 = time.perf_counter()
            model(*inputs)
            ts.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ts)


# --------------------------------------------------------------------------- ftengine


def time_ftengine(tool, name, mode, batch, seq, threads, iters):
    cmd = [tool, "bench", name, "--device", "cpu", "--mode", mode, "--batch", str(batch),
           "--threads", str(threads), "--iters", str(iters), "--warmup", "2"]
    if seq and MODELS[name][0] != "resnet":
        cmd += ["--seq", str(seq)]
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
    ap.add_argument("--models", default="bert-base,distilbert-base,resnet-50")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--batch", default="1")
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--image", type=int, default=224)
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
    if a.torch_worker and torch is not None:
        return torch_worker(a.torch_worker)
    if torch is None:
        print(f"cpu_vs_torch: needs torch ({TORCH_ERROR}); skipping")
        return 0
    if not os.path.exists(a.tool):
        print(f"cpu_vs_torch: no ftengine tool at {a.tool} (make first)", file=sys.stderr)
        return 1
    models = [m for m in a.models.split(",") if m]
    for m in models:
        if m not in MODELS:
            print(f"cpu_vs_torch: unknown model {m} ({', '.join(MODELS)})", file=sys.stderr)
            return 2
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
                size = a.image if MODELS[m][0] == "resnet" else a.seq
                for t in threads:
                    key = (m, b, t)
                    slot = res.setdefault(key, {})
                    for mode in modes:
                        slot.setdefault(mode, []).append(time_ftengine(a.tool, m, mode, b, a.seq, t, a.iters))
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
