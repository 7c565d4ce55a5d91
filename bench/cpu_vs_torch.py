#!/usr/bin/env python3
"""cpu_vs_torch.py - ftengine's CPU backend side by side with the frameworks users
would run instead, on the same machine, in the same run (issues 18, 24, 28):
PyTorch eager, TorchScript (trace + freeze) and ONNX Runtime's CPU provider.

The models are ftengine's presets written out in plain torch with the Hugging
Face math (bench/torch_models.py; random init at the presets' sizes, eval mode,
no autograd), so neither transformers nor a checkpoint is needed; that they are
HF's math is checked by bench/hf_golden.py on the golden cases, and before any
timing bench/peers.py checks each peer's outputs on the golden case of the
model's architecture against `ftengine run`'s (and TorchScript's and ORT's at
every timed shape against PyTorch eager's). ORT runs a torch.onnx export of the
same model (graph optimisations on) through the Python onnxruntime module where
importable, else through onnxruntime-node (`npm --prefix bench/baselines install
--ignore-scripts`). Each side gets what `ftengine bench` feeds its own: input_ids
only, pixel_values of --image side, or --samples of audio.

The measuring is bench/peers.py's: per (model, threads), workers keep each
framework loaded with its thread pools sized before it loads; every round times
ftengine's modes (`ftengine bench --mode M`) and each peer at every batch, the
order rotating per round, so all see the same machine load. The table keeps the
median over rounds of each side's median forward, its interval (lowest and
highest round), ftengine's best of the modes, and the ratios ftengine / peer
(below 1: ftengine is faster).

A missing framework is skipped with a line saying why; without torch at all the
script says so and exits 0. The C build and tests never run it. On a quiet host,
the recorded table of docs/results/2026-11-26-peers-cpu.md is rerun with

    make && npm --prefix bench/baselines install --ignore-scripts
    /usr/bin/python3 bench/cpu_vs_torch.py --models bert-base,distilbert-base,resnet-50 \\
        --threads 1,2 --batch 1,8 --rounds 5 --iters 10 --overhead --fetch-openblas \\
        --md table.md --json out.json
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peers as P  # noqa: E402
import report_peers as RP  # noqa: E402
import torch_models as tm  # noqa: E402

torch, TORCH_ERROR = tm.torch, tm.TORCH_ERROR
MODELS = tm.PRESETS  # name -> (model_type, preset keys)
PEER_COLS = (("pytorch-eager", "PyTorch eager"), ("torchscript", "TorchScript"), ("ort-cpu", "ORT"))
TABLE_HEAD = ("| model | batch | threads | ftengine best, ms | PyTorch eager, ms | TorchScript, ms | ORT, ms "
              "| ftengine / ORT | ftengine / PyTorch eager |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- |")


def kind(name):
    """text, vision or speech: what --seq means for ftengine bench (tokens, image side, samples)."""
    return P.kind_of(name, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                        os.environ.get("FT_BUILD") or "build", "ftengine"))


def build_torch(name):
    return tm.build_preset(name)


def ratio_row(model, batch, threads, rows, stat="median"):
    """One markdown row from a (model, threads, batch) group of bench/peers.py rows."""
    mode, best = RP.best_ftengine(rows, stat)
    ft = "%s (%s)" % (RP.fmt_ms(best, stat), mode) if best else "-"
    cells = [model, batch, threads, ft] + [RP.fmt_ms(rows.get(p), stat) for p, _ in PEER_COLS]
    cells += [RP.fmt_ratio(RP.ratio(best, rows.get(p), stat)) for p in ("ort-cpu", "pytorch-eager")]
    return "| " + " | ".join(str(c) for c in cells) + " |"


def results_md(res, stat="median"):
    rows = [ratio_row(m, b, t, rs, stat) for (m, t, b), rs in sorted(RP.index(res).items(),
                                                                      key=lambda kv: (kv[0][0], kv[0][2], kv[0][1]))]
    return TABLE_HEAD + "\n" + "\n".join(rows) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tool", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                                   os.environ.get("FT_BUILD") or "build", "ftengine"))
    ap.add_argument("--models", default="bert-base,distilbert-base,resnet-50")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--batch", default="1")
    ap.add_argument("--seq", type=int, default=128, help="tokens per item (text models)")
    ap.add_argument("--image", type=int, default=224, help="image side (ResNet)")
    ap.add_argument("--samples", type=int, default=32000, help="audio samples per item (WavLM)")
    ap.add_argument("--modes", default="graph,static", help="ftengine's modes; the table keeps the best")
    ap.add_argument("--peers", default=",".join(P.PEERS))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--stat", default="median", choices=("median", "min", "mean"))
    ap.add_argument("--overhead", action="store_true", help="also the host cost per op (bench/peers.py --overhead)")
    ap.add_argument("--md")
    ap.add_argument("--json")
    ap.add_argument("--render", metavar="JSON[,JSON]", help="only print the tables of saved --json runs (with --stat)")
    ap.add_argument("--torch-libdir", help="directory searched first for torch's BLAS (default: an OpenBLAS "
                    "OpenMP build where bench/peers.py finds one)")
    ap.add_argument("--openblas-env", default="auto", help="auto, keep or a core name (bench/peers.py)")
    ap.add_argument("--fetch-openblas", action="store_true", help="bench/peers.py --fetch-openblas (Debian's "
                    "OpenBLAS unpacked under build/peers/, nothing installed)")
    ap.add_argument("--omp-wait", default="same", choices=("same", "default"), help="bench/peers.py --omp-wait")
    ap.add_argument("--ort-spinning", default="on", choices=("on", "off"))
    a = ap.parse_args(argv)
    if a.render:
        res, runs = None, []
        for path in a.render.split(","):  # several runs' rows in one table (or a file of {"runs": [...]})
            with open(path) as f:
                r = json.load(f)
            runs += r["runs"] if "runs" in r else [r]
        for r in runs:
            if res is None:
                res = r
            else:
                for k in ("rows", "skipped", "cells"):
                    res.setdefault(k, []).extend(r.get(k, []))
                res["golden"] = dict(res.get("golden", {}), **r.get("golden", {}))
        print(results_md(res, a.stat) + "\n" + RP.overhead_md(res, a.stat) + "\n" + RP.provenance_md(res))
        return 0
    models = [m for m in a.models.split(",") if m]
    for m in models:
        if m not in MODELS:
            print(f"cpu_vs_torch: unknown model {m} ({', '.join(MODELS)})", file=sys.stderr)
            return 2
    if torch is None and P.find_python("torch", "FT_TORCH_PYTHON")[0] is None:
        print(f"cpu_vs_torch: needs torch ({TORCH_ERROR}); skipping")
        return 0
    if not os.path.exists(a.tool):
        print(f"cpu_vs_torch: no ftengine tool at {a.tool} (make first)", file=sys.stderr)
        return 1
    if a.fetch_openblas and not P.torch_libdir(a.torch_libdir):
        P.log(P.try_fetch_openblas())
    res = P.measure(models, [int(b) for b in a.batch.split(",")], [int(t) for t in a.threads.split(",")],
                    rounds=a.rounds, iters=a.iters, warmup=a.warmup, peers=a.peers.split(","),
                    ft_modes=a.modes.split(","), tool=a.tool, seq=a.seq, image=a.image, samples=a.samples,
                    overhead=a.overhead, libdir=a.torch_libdir, openblas=a.openblas_env, omp_wait=a.omp_wait,
                    ort_spinning=a.ort_spinning == "on", save=a.json)
    table = results_md(res, a.stat)
    md = table + "\n" + RP.overhead_md(res, a.stat) + "\n" + RP.provenance_md(res)
    print(md)
    if a.md:
        with open(a.md, "w") as f:
            f.write(md)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
