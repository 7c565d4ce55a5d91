#!/usr/bin/env python3
"""gemm_peers.py - the per-shape SGEMM table: ftengine and OpenBLAS (bench/gemm_shapes,
one process) and ONNX Runtime's MatMul (bench/gemm_ort.js through onnxruntime-node),
in alternating rounds, at each thread count asked for.

    /usr/bin/python3 bench/gemm_peers.py [--threads 1,2] [--rounds 5] [--iters 5]
        [--set bert|resnet|all] [--tool build/bench/gemm_shapes] [--ort DIR/node_modules]
        [--openblas-core SkylakeX] [--json out.json]

Each round runs gemm_shapes once (every shape, ftengine and OpenBLAS interleaved per
shape) and then gemm_ort.js once (every shape); per (shape, implementation) the best
call over all rounds is kept, by the wall clock and by CPU time (ftengine and
OpenBLAS: the OpenMP team's, each thread reading its own clock; ORT: the process's).
On a shared, loaded host the wall clock of a call stretches with other processes'
load while its CPU time does not, so at one thread GFLOP per CPU second is the fair
column. With more threads CPU time counts spinning (and the process clock of the ORT
side under-counts running threads), so there the best wall-clock call of many is the
figure, and it needs more rounds on a loaded host.

ONNX models (Y = X @ W, W an initializer) are written with the onnx module; without
it, or without node and onnxruntime-node, the ORT column is left out with a line
saying why. OpenBLAS (Debian: libopenblas0-openmp) is used with its SkylakeX
kernels by default (OPENBLAS_CORETYPE), as it does not know newer CPUs by name.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
COLS = ("shape", "m", "n", "k", "impl", "best_ms", "median_ms", "cpu_ms", "gf_wall", "gf_cpu")


def parse_table(text):
    """Rows of a gemm_shapes / gemm_ort.js table as dicts (comment and header lines skipped)."""
    rows = []
    for line in text.splitlines():
        f = line.split()
        if len(f) != len(COLS) or line.startswith("#") or f[0] == "shape":
            continue
        try:
            r = {"shape": f[0], "m": int(f[1]), "n": int(f[2]), "k": int(f[3]), "impl": f[4]}
            for name, v in zip(COLS[5:], f[5:]):
                r[name] = float(v)
        except ValueError:
            continue
        rows.append(r)
    return rows


def merge(best, rows, threads):
    """Keeps per (threads, shape, impl) the best wall and CPU time over the rounds."""
    for r in rows:
        key = (threads, r["shape"], r["impl"])
        b = best.get(key)
        if b is None:
            best[key] = dict(r, medians=[r["median_ms"]])
            continue
        b["medians"].append(r["median_ms"])
        for c in ("best_ms", "cpu_ms"):
            b[c] = min(b[c], r[c])
    return best


def gflops(r, col):
    t = r[col]
    return 2.0 * r["m"] * r["n"] * r["k"] * 1e-9 / (t * 1e-3) if t > 0 else 0.0


def render(best, threads_list, impls):
    """Markdown tables, one per thread count. At one thread each cell is GFLOP/s by the
    best wall-clock call / GFLOP per CPU-second of the best call, and ft/ort compares
    the CPU figures; with more threads the process CPU clock under-counts the other
    threads' running time, so cells and ratio are by the best wall-clock call only."""
    out = []
    for t in threads_list:
        shapes = []
        for (tt, s, _), r in best.items():
            if tt == t and s not in shapes:
                shapes.append(s)
        present = [i for i in impls if any((t, s, i) in best for s in shapes)]
        col = "cpu_ms" if t == 1 else "best_ms"
        if t == 1:
            out.append("\n1 thread: GFLOP/s by the best wall-clock call / GFLOP per CPU-second "
                       "of the best call\n")
        else:
            out.append(f"\n{t} threads: GFLOP/s by the best wall-clock call\n")
        ratio = "ft" in present and "ort" in present
        out.append("| shape | M x N x K | " + " | ".join(present) +
                   (f" | ft/ort ({'cpu' if t == 1 else 'wall'}) |" if ratio else " |"))
        out.append("| --- | --- |" + " --- |" * (len(present) + (1 if ratio else 0)))
        for s in shapes:
            any_r = next(best[(t, s, i)] for i in present if (t, s, i) in best)
            cells = []
            for i in present:
                r = best.get((t, s, i))
                if not r:
                    cells.append("-")
                elif t == 1:
                    cells.append(f"{gflops(r, 'best_ms'):.0f} / {gflops(r, 'cpu_ms'):.0f}")
                else:
                    cells.append(f"{gflops(r, 'best_ms'):.0f}")
            line = f"| {s} | {any_r['m']} x {any_r['n']} x {any_r['k']} | " + " | ".join(cells) + " |"
            if ratio:
                a, b = best.get((t, s, "ft")), best.get((t, s, "ort"))
                line += f" {gflops(a, col) / gflops(b, col):.2f} |" if a and b else " - |"
            out.append(line)
    return "\n".join(out)


def write_models(shapes, folder):
    """One ONNX MatMul model per shape; returns the list for gemm_ort.js or raises ImportError."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper

    rng = np.random.default_rng(0)
    out = []
    for name, m, n, k in shapes:
        w = (rng.random((k, n), dtype=np.float32) - 0.5).astype(np.float32)
        init = helper.make_tensor("W", TensorProto.FLOAT, [k, n], w.tobytes(), raw=True)
        g = helper.make_graph([helper.make_node("MatMul", ["X", "W"], ["Y"])], name,
                              [helper.make_tensor_value_info("X", TensorProto.FLOAT, [m, k])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [m, n])], [init])
        model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
        model.ir_version = 8
        path = os.path.join(folder, name + ".onnx")
        onnx.save(model, path)
        out.append({"name": name, "m": m, "n": n, "k": k, "model": path})
    return out


def find_ort(arg):
    """The node_modules folder holding onnxruntime-node, or None."""
    for d in [arg, os.path.join(ROOT, "build", "ort", "node_modules"),
              os.path.join(ROOT, "bench", "baselines", "node_modules")] + \
            os.environ.get("NODE_PATH", "").split(":"):
        if d and os.path.isdir(os.path.join(d, "onnxruntime-node")):
            return d
    return None


def run(cmd, env=None):
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr.strip()[-400:]}")
    return p.stdout


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--set", default="all", choices=["bert", "resnet", "all"])
    ap.add_argument("--only", default=None, help="shapes whose name contains this")
    ap.add_argument("--tool", default=os.path.join(ROOT, "build", "bench", "gemm_shapes"))
    ap.add_argument("--ort", default=None, help="node_modules folder with onnxruntime-node")
    ap.add_argument("--openblas-core", default="SkylakeX", help="OPENBLAS_CORETYPE ('' keeps its choice)")
    ap.add_argument("--json", default=None, help="also save the merged rows here")
    a = ap.parse_args(argv)
    threads_list = [int(t) for t in a.threads.split(",") if t]
    if not os.access(a.tool, os.X_OK):
        sys.exit(f"gemm_peers: {a.tool} not built (make build/bench/gemm_shapes)")
    base = [a.tool, "--set", a.set] + (["--only", a.only] if a.only else [])
    shapes = [(f[0], int(f[1]), int(f[2]), int(f[3]))
              for f in (l.split() for l in run(base + ["--list"]).splitlines()) if len(f) == 4]
    env = dict(os.environ)
    if a.openblas_core:
        env["OPENBLAS_CORETYPE"] = a.openblas_core
    tmp = tempfile.mkdtemp(prefix="gemm_peers_")
    ort_dir, node, models = find_ort(a.ort), shutil.which("node"), None
    try:
        if not node or not ort_dir:
            print("# ort: left out (" + ("no node on PATH" if not node else
                  "onnxruntime-node not found: npm --prefix build/ort install --ignore-scripts "
                  "onnxruntime-node@1.30.0") + ")")
        else:
            try:
                models = write_models(shapes, tmp)
                with open(os.path.join(tmp, "models.json"), "w") as f:
                    json.dump(models, f)
            except ImportError as e:
                print(f"# ort: left out (no {e.name} module to write the ONNX models)")
        best = {}
        for t in threads_list:
            for r in range(a.rounds):
                out = run(base + ["--threads", str(t), "--rounds", "1", "--iters", str(a.iters)], env)
                if r == 0 and t == threads_list[0]:
                    print("\n".join(l for l in out.splitlines() if l.startswith("# openblas")))
                merge(best, parse_table(out), t)
                if models:
                    out = run([node, os.path.join(HERE, "gemm_ort.js"), "--models",
                               os.path.join(tmp, "models.json"), "--ort", ort_dir, "--threads",
                               str(t), "--rounds", "1", "--iters", str(a.iters)], env)
                    if r == 0 and t == threads_list[0]:
                        print("\n".join(l for l in out.splitlines() if l.startswith("# ort")))
                    merge(best, parse_table(out), t)
        print(f"# {a.rounds} alternating rounds x {a.iters} calls per shape and implementation")
        print(render(best, threads_list, ["ft", "ft-nopack", "openblas", "ort"]))
        if a.json:
            with open(a.json, "w") as f:
                json.dump([dict(v, threads=k[0]) for k, v in best.items()], f, indent=1)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
