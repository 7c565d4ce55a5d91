#!/usr/bin/env python3
"""profile_peers.py - where a forward's time goes, per op type, in ftengine (the
profiler of `ftengine bench --phases`), ONNX Runtime (its session profile: every
node's kernel time) and PyTorch eager (torch.profiler, self CPU time per aten op),
on one (model, batch, length, threads), with the same weights-free setup as
bench/peers.py (its workers, ONNX export cache and thread environment). The
groups (matrix products, convolutions, attention, normalisation, the rest) make
the three comparable where the ops are not: ORT's unfused attention is MatMul +
Softmax nodes, ftengine's is one fused op. Used for the "where the time goes"
notes of docs/results/; every number is ms per forward, averaged over --iters
forwards after the first (profiling adds its own cost: compare within a column).

    python3 bench/baselines/profile_peers.py --model bert-base --batch 8 --threads 1 [--seq 128] \\
        [--modes graph] [--iters 5] [--json out.json]
"""
import argparse
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import peers as P  # noqa: E402

GROUPS = (("matmul", r"linear|matmul|gemm|addmm|\bmm\b|bmm|einsum"), ("conv", r"conv"),
          ("attention", r"attention|softmax"), ("norm", r"norm|batch_norm"))


def group_of(op):
    o = op.lower()
    for g, pat in GROUPS:
        if re.search(pat, o):
            return g
    return "other"


def grouped(ops):
    out = {}
    for k, v in ops.items():
        out[group_of(k)] = out.get(group_of(k), 0.0) + v
    return out


def ftengine_ops(tool, model, mode, b, s, threads, iters):
    """{op: ms per forward} from `ftengine bench --phases` (the profiled pass)."""
    r = subprocess.run([tool, "bench", model, "--device", "cpu", "--mode", mode, "--batch", str(b), "--seq", str(s),
                        "--threads", str(threads), "--iters", str(iters), "--warmup", "1", "--phases"],
                       capture_output=True, text=True, timeout=P.TIMEOUT_S)
    if r.returncode != 0:
        raise RuntimeError("ftengine bench --phases: " + r.stderr.strip()[-300:])
    return parse_phases(r.stdout)


def parse_phases(text):
    """{op: ms per forward} from the per-op table of `ftengine bench --phases`."""
    ops, on = {}, False
    for ln in text.splitlines():
        if ln.startswith("profile: op (per iter)"):
            on = True
            continue
        m = re.match(r"profile: (\S+)\s+([0-9.]+)\s+([0-9.]+)\s", ln)
        if on and m:
            ops[m.group(1)] = float(m.group(3)) / 1e3
        elif on and not m:
            on = False
    return ops


def ort_ops(profile_json):
    """{op type: ms per forward} from an ORT session profile, the first run left out."""
    with open(profile_json) as f:
        ev = json.load(f)
    runs = sorted(e["ts"] for e in ev if e.get("cat") == "Session" and e.get("name") == "model_run")
    if len(runs) < 2:
        raise RuntimeError("%s: fewer than two runs profiled" % profile_json)
    ops = {}
    for e in ev:
        if e.get("cat") == "Node" and e.get("name", "").endswith("_kernel_time") and e["ts"] >= runs[1]:
            op = e.get("args", {}).get("op_name", "?")
            ops[op] = ops.get(op, 0.0) + e["dur"] / 1e3
    return {k: v / (len(runs) - 1) for k, v in ops.items()}


def profile(model, b, s, threads, tool, modes=("graph",), iters=5, cache=None, libdir=None,
            openblas="auto"):
    """{runtime: {"ops": {op: ms}, "groups": {group: ms}}} plus "skipped" reasons."""
    out, skipped = {}, []
    for m in modes:
        try:
            ops = ftengine_ops(tool, model, m, b, s, threads, iters)
            out["ftengine-" + m] = ops
        except RuntimeError as e:
            skipped.append(("ftengine-" + m, str(e)))
    tpy, why = P.find_python("torch", "FT_TORCH_PYTHON")
    if not tpy:
        skipped.append(("pytorch-eager, ort-cpu", why))
        return finish(out, skipped)
    logdir = tempfile.mkdtemp(prefix="ft_prof_")
    cfg = P.cell_config(iters, 1, cache=cache, logdir=logdir, libdir=P.torch_libdir(libdir), openblas=openblas)
    ort = P.find_ort()
    cell = P.Cell(model, s, threads, ["pytorch-eager"], [], tool, tpy, ort, cfg)
    try:
        a = cell.tw.ask(cmd="profile", runtime="eager", batch=b, size=s, iters=iters)
        if a.get("ok"):
            out["pytorch-eager"] = {k: v for k, v in a["self_ms"].items() if v > 0}
        else:
            skipped.append(("pytorch-eager", a.get("error")))
        if ort[0]:
            onnx_p, inp = cell.export(b, s)
            prefix = os.path.join(logdir, "ortprof")
            cmd = [ort[1], os.path.join(HERE, "ort_runner.py" if ort[0] == "python" else "ort_runner.js"),
                   "--threads", str(threads), "--profile", prefix, "--serve"]
            w = P.Worker("ort-prof", cmd, P.worker_env(threads), logdir)
            try:
                for c in (dict(cmd="load", model=onnx_p), dict(cmd="time", inputs=inp, iters=iters, warmup=0),
                          dict(cmd="end_profiling")):
                    r = w.ask(**c)
                    if not r.get("ok"):
                        raise RuntimeError(r.get("error"))
            finally:
                w.close()
            files = sorted(glob.glob(prefix + "*.json"))
            if files:
                out["ort-cpu"] = ort_ops(files[-1])
            else:
                skipped.append(("ort-cpu", "no profile written"))
        else:
            skipped.append(("ort-cpu", ort[1]))
    except RuntimeError as e:
        skipped.append(("peers", str(e)))
    finally:
        cell.close()
    return finish(out, skipped)


def finish(out, skipped):
    return {"runtimes": {k: {"ops": dict(sorted(v.items(), key=lambda kv: -kv[1])), "groups": grouped(v),
                             "total_ms": sum(v.values())} for k, v in out.items()},
            "skipped": [{"runtime": r, "why": w} for r, w in skipped]}


def table_md(res, top=8):
    rts = list(res["runtimes"])
    groups = [g for g, _ in GROUPS] + ["other"]
    out = "| group, ms per forward | " + " | ".join(rts) + " |\n|---|" + "---|" * len(rts) + "\n"
    for g in groups + ["total"]:
        vals = [res["runtimes"][r]["total_ms"] if g == "total" else res["runtimes"][r]["groups"].get(g, 0.0)
                for r in rts]
        out += "| %s | %s |\n" % (g, " | ".join("%.2f" % v for v in vals))
    out += "\nLargest ops:\n\n"
    for r in rts:
        ops = list(res["runtimes"][r]["ops"].items())[:top]
        out += "- %s: %s\n" % (r, ", ".join("%s %.2f" % kv for kv in ops))
    for s in res["skipped"]:
        out += "- skipped %s: %s\n" % (s["runtime"], s["why"])
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tool", default=os.path.join(P.ROOT, os.environ.get("FT_BUILD") or "build", "ftengine"))
    ap.add_argument("--model", default="bert-base")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--seq", type=int, help="tokens, image side or samples (default: the kind's)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--modes", default="graph", help="ftengine modes (static is one op to the profiler)")
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    if a.model not in P.tb.PRESETS:
        print("profile_peers: unknown model %s" % a.model, file=sys.stderr)
        return 2
    if not os.path.exists(a.tool):
        print("profile_peers: no ftengine tool at %s (make first)" % a.tool, file=sys.stderr)
        return 1
    s = a.seq or P.DEFAULT_SIZES[P.kind_of(a.model)]
    res = profile(a.model, a.batch, s, a.threads, a.tool, [m for m in a.modes.split(",") if m], a.iters)
    res.update(model=a.model, batch=a.batch, size=s, threads=a.threads)
    print(table_md(res))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
