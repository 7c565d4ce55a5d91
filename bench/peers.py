#!/usr/bin/env python3
"""peers.py - the frameworks ftengine's modes stand in for, measured beside it on
this machine (issue 24): PyTorch eager, TorchScript (trace + freeze) and ONNX
Runtime's CPU provider, on the same model, shapes, dtype (fp32), thread count and
timing protocol as `ftengine bench` (first call untimed, W warm-up forwards, N
forwards timed one by one), in interleaved rounds with ftengine's own modes.

    python3 bench/peers.py --models bert-base,resnet-50 --batches 1,8 --threads 1,2 \\
        [--seq 128 --image 224 --samples 32000] [--rounds 5 --iters 10 --warmup 2] \\
        [--peers pytorch-eager,torchscript,ort-cpu] [--ftengine-modes eager,graph,static] \\
        [--overhead] [--json out.json] [--md out.md] [--torch-libdir DIR] [--fetch-openblas]

Runners (bench/baselines/): torch_runner.py (plain-torch models of
bench/torch_models.py, random init under --seed as bench/cpu_vs_torch.py does; the
weights' values do not change the work of these dense fp32 forwards), and
ort_runner.py (Python onnxruntime, where importable) or ort_runner.js
(onnxruntime-node; `npm --prefix bench/baselines install --ignore-scripts`) on a
static-shape torch.onnx export of the same model. Each runner is a worker process
started with its thread counts in the environment (OMP, OpenBLAS, MKL) and kept
for the rounds of one (model, threads) cell, so rounds alternate between ftengine
and the peers under the same load. A peer that cannot run here is skipped with one
line saying why; nothing fails for lack of one.

Checks before timing: each peer's outputs on the golden case of the model's
architecture (tests/golden/) against `ftengine run`'s on the same case (the golden
criterion), and at every timed shape TorchScript's and ORT's outputs against
PyTorch eager's. A peer failing a check is reported, not timed.

Provenance per row: runtime and version, execution provider, threads, BLAS/oneDNN
actually loaded, the OpenBLAS kernel set, the ftengine commit. Torch's BLAS: Debian's
torch calls the system libblas.so.3; an OpenBLAS (OpenMP build) directory is put
first when found (--torch-libdir, FT_TORCH_LIBDIR, the Debian package's directory,
or build/peers/openblas from --fetch-openblas), and a host-wide OPENBLAS_CORETYPE /
OPENBLAS_L2_SIZE pin is dropped so OpenBLAS picks its kernels for this CPU as a
normal install does (--openblas-env keep|CORE to override).

Statistics: per round, the median (and min, mean) of the N forwards, kept per row in
round order (round_stats); per row, the median over rounds, and the lowest and highest
round (median_lo_ms, median_hi_ms). The tables (bench/report_peers.py) give the study's
interval instead (bench/studydata.py: the order-statistics confidence interval of the
median over rounds: the whole range up to 8 rounds), and take every ratio round by round.
"""
import argparse
import json
import os
import re
import select
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BASE = os.path.join(HERE, "baselines")
sys.path.insert(0, HERE)
sys.path.insert(0, BASE)
import st  # noqa: E402
from peer_env import (TOOL_SPINCOUNT, _probe, fetch_openblas, find_ort, find_python,  # noqa: E402
                      torch_libdir, worker_env)
import torch_base as tb  # noqa: E402  (no torch needed for the preset tables)

PEERS = ("pytorch-eager", "torchscript", "ort-cpu")
FT_MODES = ("eager", "graph", "static")
GOLDEN_DIR = os.environ.get("FT_GOLDEN_DIR") or os.path.join(ROOT, "tests", "golden")
DEFAULT_SIZES = {"text": 128, "vision": 224, "speech": 32000}
MIN_SIZES = {"text": 1, "vision": 32, "speech": 400}  # the overhead comparison's near-zero-compute shapes
TIMEOUT_S = float(os.environ.get("FT_PEERS_TIMEOUT", "900"))


VERBOSE = True  # progress lines on stderr (the tests turn them off)


def log(msg):
    if not VERBOSE:
        return
    sys.stderr.write("peers: " + msg + "\n")
    sys.stderr.flush()

KIND_WORDS = {"tokens": "text", "image side": "vision", "samples": "speech"}  # `ftengine info`'s length unit


def try_fetch_openblas():
    """fetch_openblas's outcome as one line; a failure leaves torch on the system BLAS."""
    try:
        return "OpenBLAS unpacked in %s" % fetch_openblas()
    except (OSError, RuntimeError, subprocess.CalledProcessError) as e:
        return "could not fetch OpenBLAS (%s): torch keeps the system libblas.so.3" % e


def kind_of(model, tool=None):
    """text, vision or speech: what ftengine's --seq means for this preset; `ftengine info`
    says it where the tool is at hand, else the architecture's model_type does."""
    if tool and os.path.exists(tool):
        out, _ = _probe([tool, "info", model])
        m = re.search(r"\((tokens|image side|samples)\)", out or "")
        if m:
            return KIND_WORDS[m.group(1)]
    mt = tb.PRESETS[model][0] if model in tb.PRESETS else model
    if mt in ("resnet", "vit", "convnext", "mobilenet_v2", "efficientnet") or "pixel" in mt:
        return "vision"
    if mt in ("wavlm", "wav2vec2", "hubert"):
        return "speech"
    return "text"


def golden_case(model):
    """The tests/golden/ case of the preset's architecture, or None."""
    mt = tb.PRESETS.get(model, (None,))[0]
    if not mt or not os.path.isdir(GOLDEN_DIR):
        return None
    for d in sorted(os.listdir(GOLDEN_DIR)):
        p = os.path.join(GOLDEN_DIR, d, "config.json")
        try:
            with open(p) as f:
                if json.load(f).get("model_type") == mt:
                    return os.path.dirname(p)
        except (OSError, ValueError):
            continue
    return None

# --------------------------------------------------------------------------- workers


class Worker:
    """A runner process answering one JSON line per JSON command line."""

    def __init__(self, name, cmd, env, logdir):
        self.name = name
        self.errlog = open(os.path.join(logdir, name + ".stderr"), "w")
        self.p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.errlog,
                                  env=env, text=True, bufsize=1)
        self.ready = self._read()
        if not self.ready.get("ok"):
            self.close()
            raise RuntimeError(self.ready.get("error", "did not start"))

    def _read(self):
        r, _, _ = select.select([self.p.stdout], [], [], TIMEOUT_S)
        line = self.p.stdout.readline() if r else ""
        if not line:
            tail = ""
            try:
                with open(self.errlog.name) as f:
                    tail = f.read()[-400:]
            except OSError:
                pass
            return {"ok": False, "error": "%s: no reply (exit %s) %s" % (self.name, self.p.poll(), tail.strip())}
        try:
            return json.loads(line)
        except ValueError:
            return {"ok": False, "error": "%s: not JSON: %s" % (self.name, line[:200])}

    def ask(self, **cmd):
        try:
            self.p.stdin.write(json.dumps(cmd) + "\n")
            self.p.stdin.flush()
        except (BrokenPipeError, OSError) as e:
            return {"ok": False, "error": "%s: %s" % (self.name, e)}
        return self._read()

    def close(self):
        if self.p.poll() is None:
            try:
                self.p.stdin.write('{"cmd": "quit"}\n')
                self.p.stdin.flush()
                self.p.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                self.p.kill()
                self.p.wait()
        for f in (self.p.stdin, self.p.stdout, self.errlog):
            try:
                f.close()
            except OSError:
                pass


def torch_worker(py, env, logdir, tag, model=None, case=None, seed=0, threads=1):
    cmd = [py, os.path.join(BASE, "torch_runner.py"), "--threads", str(threads), "--seed", str(seed), "--serve"]
    cmd += ["--case", case] if case else ["--model", model]
    return Worker("torch-" + tag, cmd, env, logdir)


def ort_worker(route, exe, threads, logdir, tag, optimized_out=None, spinning=True):
    script = "ort_runner.py" if route == "python" else "ort_runner.js"
    cmd = [exe, os.path.join(BASE, script), "--threads", str(threads), "--serve"]
    if optimized_out:
        cmd += ["--optimized-out", optimized_out]
    if not spinning:
        cmd.append("--no-spin")
    env = worker_env(threads)
    return Worker("ort-" + tag, cmd, env, logdir)

# --------------------------------------------------------------------------- ftengine


def ftengine_bench(tool, model, mode, batch, size, threads, iters, warmup):
    """ftengine's own protocol: one `ftengine bench` (its JSON: median, min, mean, kernels)."""
    fd, js = tempfile.mkstemp(suffix=".json", prefix="ft_peers_")
    os.close(fd)
    cmd = [tool, "bench", model, "--device", "cpu", "--mode", mode, "--batch", str(batch), "--threads",
           str(threads), "--iters", str(iters), "--warmup", str(warmup), "--seq", str(size), "--json", js]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S)
        if r.returncode != 0:
            return {"ok": False, "error": "%s: %s" % (" ".join(cmd), r.stderr.strip()[-300:])}
        with open(js) as f:
            d = json.load(f)
    except (OSError, ValueError, subprocess.TimeoutExpired) as e:
        return {"ok": False, "error": "%s: %s" % (" ".join(cmd), e)}
    finally:
        os.remove(js)
    lat = d["latency_ms"]
    g = d.get("graph") or {}
    return {"ok": True, "median": lat["median"], "min": lat["min"], "mean": lat["mean"], "first_ms": lat["first"],
            "commit": d["provenance"].get("commit"), "kernels": d.get("kernels_per_forward"),
            "eager_kernels": g.get("eager_kernels"), "version": d["provenance"].get("ftengine_version")}


def ftengine_commit(tool):
    out, _ = _probe([tool, "version"])
    m = re.search(r"commit:? ([0-9a-f]+(?:-dirty)?)", out or "")
    return m.group(1) if m else "unknown"

# --------------------------------------------------------------------------- statistics


def round_stats(samples):
    return {"median": statistics.median(samples), "min": min(samples), "mean": statistics.fmean(samples)}


def summarize(rounds):
    """rounds: [{"median", "min", "mean"}] -> the row's numbers: per statistic, the median
    over rounds and its interval (lowest and highest round)."""
    out = {"rounds": len(rounds), "round_stats": rounds}
    for k in ("median", "min", "mean"):
        v = sorted(r[k] for r in rounds)
        out[k + "_ms"] = statistics.median(v)
        out[k + "_lo_ms"], out[k + "_hi_ms"] = v[0], v[-1]
    out["interval_coverage"] = 1 - 2.0 ** (1 - len(rounds)) if rounds else 0.0
    return out

# --------------------------------------------------------------------------- the golden preflight


def golden_check(model, peers, tool, tpy, ort, cache, logdir, libdir, openblas, omp_wait="same"):
    """{peer: (ok, [lines])}: each peer's outputs on the golden case of the model's
    architecture against `ftengine run`'s (graph mode), under the golden criterion."""
    case = golden_case(model)
    if not case:
        return None, "no golden case in %s for %s's architecture (%s)" % (
            os.path.relpath(GOLDEN_DIR, ROOT), model, tb.PRESETS.get(model, ("?",))[0])
    if not (tool and os.path.exists(tool)):
        return None, "no ftengine tool to compare with"
    arch = os.path.basename(case)
    ft_out = os.path.join(cache, "golden-%s-ftengine.safetensors" % arch)
    r = subprocess.run([tool, "run", case, "--inputs", os.path.join(case, "inputs.safetensors"), "--out", ft_out,
                        "--mode", "graph", "--device", "cpu"], capture_output=True, text=True)
    if r.returncode != 0:
        return None, "ftengine run %s failed: %s" % (arch, r.stderr.strip()[-200:])
    want = st.read(ft_out)
    res = {}

    def judge(peer, path):
        got = st.read(path)
        lines, ok = [], True
        for k in ("last_hidden_state", "pooler_output"):
            if k in want:
                if k not in got:
                    ok, line = False, "%s: missing" % k
                else:
                    good, line = st.compare(k, got[k], want[k])
                    ok &= good
                lines.append(line)
        res[peer] = (ok, lines)

    tw = None
    try:
        if any(p in peers for p in ("pytorch-eager", "torchscript", "ort-cpu")):
            tw = torch_worker(tpy, worker_env(1, libdir, openblas, omp_wait), logdir, "golden", case=case)
        for peer, rt in (("pytorch-eager", "eager"), ("torchscript", "torchscript")):
            if peer in peers:
                out = os.path.join(cache, "golden-%s-%s.safetensors" % (arch, peer))
                a = tw.ask(cmd="run", runtime=rt, out=out)
                if a.get("ok"):
                    judge(peer, out)
                else:
                    res[peer] = (False, [a.get("error", "?")])
        if "ort-cpu" in peers:
            onnx_p = os.path.join(cache, "golden-%s.onnx" % arch)
            inp = os.path.join(cache, "golden-%s-inputs.safetensors" % arch)
            a = tw.ask(cmd="export", path=onnx_p, inputs=inp)
            if not a.get("ok"):
                res["ort-cpu"] = (False, ["export: " + a.get("error", "?")])
            else:
                ow = ort_worker(ort[0], ort[1], 1, logdir, "golden")
                try:
                    out = os.path.join(cache, "golden-%s-ort.safetensors" % arch)
                    a = ow.ask(cmd="load", model=onnx_p)
                    a = ow.ask(cmd="run", inputs=inp, out=out) if a.get("ok") else a
                    if a.get("ok"):
                        judge("ort-cpu", out)
                    else:
                        res["ort-cpu"] = (False, [a.get("error", "?")])
                finally:
                    ow.close()
    except RuntimeError as e:
        for p in peers:
            res.setdefault(p, (False, [str(e)]))
    finally:
        if tw:
            tw.close()
    return res, "golden case %s: each peer against `ftengine run --mode graph`" % os.path.relpath(case, ROOT)

# --------------------------------------------------------------------------- measuring


def source_key():
    """A short hash of the torch model sources and the exporter: a changed model re-exports."""
    import hashlib
    h = hashlib.sha1()
    for f in sorted(os.listdir(HERE)):
        if f.startswith("torch_") and f.endswith(".py"):
            with open(os.path.join(HERE, f), "rb") as fh:
                h.update(fh.read())
    with open(os.path.join(BASE, "torch_runner.py"), "rb") as fh:
        h.update(fh.read())
    return h.hexdigest()[:10]


def host_cpu():
    try:
        with open("/proc/cpuinfo") as f:
            for ln in f:
                if ln.startswith("model name"):
                    return ln.split(":", 1)[1].strip()
    except OSError:
        pass
    return "?"


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def cell_config(iters, warmup, seed=0, cache=None, logdir=None, libdir=None, openblas="auto", omp_wait="same",
                ort_spinning=True):
    """What a Cell's runners share: timing protocol, the ONNX export cache (build/peers/onnx
    by default), the workers' log folder, torch's BLAS directory and the wait policies."""
    cache = cache or os.path.join(ROOT, "build", "peers", "onnx")
    logdir = logdir or tempfile.mkdtemp(prefix="ft_peers_log_")
    os.makedirs(cache, exist_ok=True)
    os.makedirs(logdir, exist_ok=True)
    return dict(iters=iters, warmup=warmup, seed=seed, cache=cache, logdir=logdir, libdir=libdir, openblas=openblas,
                key=source_key(), omp_wait=omp_wait, ort_spinning=ort_spinning)


class Cell:
    """The runners of one (model, threads): workers kept for the rounds, each point's
    first timing preceded by its output check."""

    def __init__(self, model, size_of, threads, peers, ft_modes, tool, tpy, ort, cfg):
        self.model, self.threads, self.peers, self.ft_modes = model, threads, peers, ft_modes
        self.tool, self.cfg, self.size_of, self.ort = tool, cfg, size_of, ort
        self.tw = self.ow = None
        self.info = {}
        self.failed = {}    # runner -> why (a worker that did not start)
        self.checks = {}    # (runner, batch, size) -> {"match", "lines"}
        self.exported = {}  # (batch, size) -> (onnx path, inputs path)
        tag = "%s-t%d" % (model, threads)
        if any(p in peers for p in PEERS):
            try:
                self.tw = torch_worker(tpy, worker_env(threads, cfg["libdir"], cfg["openblas"], cfg["omp_wait"]),
                                       cfg["logdir"], tag, model=model, seed=cfg["seed"], threads=threads)
                self.info["torch"] = self.tw.ask(cmd="info")
            except RuntimeError as e:
                for p in PEERS:
                    self.failed[p] = "torch worker: %s" % e
        if "ort-cpu" in peers and "ort-cpu" not in self.failed:
            try:
                self.ow = ort_worker(ort[0], ort[1], threads, cfg["logdir"], tag, spinning=cfg["ort_spinning"])
                self.info["ort"] = self.ow.ask(cmd="info")
            except RuntimeError as e:
                self.failed["ort-cpu"] = "ORT worker: %s" % e

    def close(self):
        for w in (self.tw, self.ow):
            if w:
                w.close()

    def export(self, b, s):
        if (b, s) not in self.exported:
            stem = os.path.join(self.cfg["cache"], "%s-b%d-s%d-seed%d-%s" % (self.model, b, s, self.cfg["seed"],
                                                                             self.cfg["key"]))
            onnx_p, inp = stem + ".onnx", stem + "-inputs.safetensors"
            if not (os.path.exists(onnx_p) and os.path.exists(inp)):
                a = self.tw.ask(cmd="export", batch=b, size=s, path=onnx_p, inputs=inp)
                if not a.get("ok"):
                    raise RuntimeError("export: " + a.get("error", "?"))
            self.exported[(b, s)] = (onnx_p, inp)
        return self.exported[(b, s)]

    def check(self, runner, b, s):
        """The outputs of a peer at this shape against PyTorch eager's (same weights, same inputs)."""
        if runner == "torchscript":
            a = self.tw.ask(cmd="check", runtime="torchscript", batch=b, size=s)
        elif runner == "ort-cpu":
            onnx_p, inp = self.export(b, s)
            out = os.path.join(self.cfg["logdir"], "ort-out-%s-b%d-s%d.safetensors" % (self.model, b, s))
            a = self.ow.ask(cmd="load", model=onnx_p)
            a = self.ow.ask(cmd="run", inputs=inp, out=out) if a.get("ok") else a
            a = self.tw.ask(cmd="compare", batch=b, size=s, outputs=out) if a.get("ok") else a
            if os.path.exists(out):
                os.remove(out)
        else:
            return {"match": True, "lines": []}
        if not a.get("ok"):
            return {"match": False, "lines": [a.get("error", "?")]}
        return {"match": a["match"], "lines": a["lines"]}

    def time(self, runner, b, s):
        """{"ok", "samples"/"stats", ...} of one timing of `runner` at (b, s)."""
        c = self.cfg
        if runner.startswith("ftengine-"):
            r = ftengine_bench(self.tool, self.model, runner[9:], b, s, self.threads, c["iters"], c["warmup"])
            if r["ok"]:
                r["stats"] = {k: r[k] for k in ("median", "min", "mean")}
            return r
        if runner in self.failed:
            return {"ok": False, "error": self.failed[runner]}
        key = (runner, b, s)
        if key not in self.checks:
            try:
                self.checks[key] = self.check(runner, b, s)
            except RuntimeError as e:
                self.checks[key] = {"match": False, "lines": [str(e)]}
        if not self.checks[key]["match"]:
            return {"ok": False,
                    "error": "outputs differ from PyTorch eager's: " + "; ".join(self.checks[key]["lines"])}
        if runner == "ort-cpu":
            onnx_p, inp = self.export(b, s)
            a = self.ow.ask(cmd="load", model=onnx_p)
            if a.get("ok"):
                a = self.ow.ask(cmd="time", inputs=inp, iters=c["iters"], warmup=c["warmup"])
        else:
            # TorchScript's profiling executor specialises over its first two runs: at least 3 warm-ups
            w = max(c["warmup"], 3) if runner == "torchscript" else c["warmup"]
            a = self.tw.ask(cmd="time", runtime="eager" if runner == "pytorch-eager" else "torchscript", batch=b,
                            size=s, iters=c["iters"], warmup=w)
        if not a.get("ok"):
            return {"ok": False, "error": a.get("error", "?")}
        return {"ok": True, "stats": round_stats(a["samples_ms"]), "samples": a["samples_ms"],
                "first_ms": a["first_ms"], "warmup": a.get("warmup", c["warmup"])}

    def opcount(self, runner, b, s, ft_json):
        """Ops per forward, each runtime's own count, views left out: ftengine's kernels (eager:
        the traced eager count), PyTorch's dispatched aten ops, TorchScript's aten nodes, ORT's
        nodes after its graph rewrites (its Reshape/Transpose nodes stay in: ORT runs them)."""
        if runner == "ftengine-eager":  # the eager count comes with a graph-mode forward's trace
            r = ftengine_bench(self.tool, self.model, "graph", b, s, self.threads, 1, 0)
            return r.get("eager_kernels") if r["ok"] else None
        if runner.startswith("ftengine-"):
            return (ft_json or {}).get("kernels")
        if runner in self.failed or not self.tw:
            return None
        if runner in ("pytorch-eager", "torchscript"):
            a = self.tw.ask(cmd="opcount", runtime="eager" if runner == "pytorch-eager" else "torchscript",
                            batch=b, size=s)
            return a.get("compute_ops") if a.get("ok") else None
        onnx_p, _ = self.export(b, s)
        opt = onnx_p[:-5] + "-ort-optimized.onnx"
        try:
            ow = ort_worker(self.ort[0], self.ort[1], self.threads, self.cfg["logdir"], "opt", optimized_out=opt)
            ow.ask(cmd="load", model=onnx_p)
            ow.close()
        except RuntimeError:
            return None
        a = self.tw.ask(cmd="onnx_nodes", path=opt) if os.path.exists(opt) else {}
        return a.get("nodes") if a.get("ok") else None


def runner_info(cell, runner, commit):
    """Provenance fields of a row."""
    if runner.startswith("ftengine-"):
        return {"runtime": "ftengine", "version": commit, "provider": "CPU backend, %s mode" % runner[9:],
                "backend": "ftengine's own kernels (OpenMP)", "route": "ftengine bench"}
    i = cell.info.get("ort" if runner == "ort-cpu" else "torch") or {}
    if runner == "ort-cpu":
        return {"runtime": "ONNX Runtime", "version": i.get("version"), "provider": i.get("provider"),
                "backend": i.get("backend"), "route": i.get("route"),
                "graph_optimization": i.get("graph_optimization")}
    return {"runtime": "PyTorch" + (" TorchScript (trace + freeze)" if runner == "torchscript" else " eager"),
            "version": i.get("version"), "provider": "CPU (aten%s)" % (", JIT" if runner == "torchscript" else ""),
            "backend": i.get("backend"), "route": "torch_runner.py", "blas": i.get("blas"),
            "cpu_capability": i.get("cpu_capability")}


def measure(models, batches, threads_list, rounds=3, iters=10, warmup=2, peers=PEERS, ft_modes=("graph", "static"),
            tool=None, seq=None, image=None, samples=None, overhead=False, check=True, seed=0, cache=None,
            libdir=None, openblas="auto", logdir=None, omp_wait="same", ort_spinning=True, save=None):
    """Every runner on every (model, threads, batch) point, rounds interleaved; returns the
    result dict (rows, skipped, checks, provenance) that --json writes, also written to
    `save` after every (model, threads) cell (a long run keeps what it measured)."""
    peers, ft_modes = [p for p in peers if p], [m for m in ft_modes if m]
    res = {"schema": "ftengine-peers/1", "host": host_cpu(), "cpus": os.cpu_count(),
           "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "loadavg": [loadavg()],
           "protocol": {"rounds": rounds, "iters": iters, "warmup": warmup, "dtype": "fp32",
                        "timing": "first call untimed, W warm-up forwards, N forwards timed one by one "
                                  "(wall clock); per round the median, min and mean; per row the median over "
                                  "rounds, its interval the order-statistics one over the rounds (the study's)"},
           "rows": [], "skipped": [], "golden": {}, "commit": None}
    tool = tool if tool and os.path.exists(tool) else None
    res["commit"] = ftengine_commit(tool) if tool else None
    if not tool and ft_modes:
        res["skipped"].append({"peer": "ftengine", "why": "no ftengine tool (make first): its modes not measured"})
        ft_modes = []
    avail = []
    tpy, tver = find_python("torch", "FT_TORCH_PYTHON") if peers else (None, None)
    ort = None
    for p in peers:
        if p not in PEERS:
            raise ValueError("unknown peer %s (%s)" % (p, ", ".join(PEERS)))
        if not tpy:
            res["skipped"].append({"peer": p, "why": tver + (" (the ONNX export needs it)" if p == "ort-cpu" else "")})
            continue
        if p == "ort-cpu":
            ort = find_ort()
            if not ort[0]:
                res["skipped"].append({"peer": p, "why": ort[1]})
                continue
        avail.append(p)
    for s in res["skipped"]:
        log("skipped %s: %s" % (s["peer"], s["why"]))
    if peers and not avail and ft_modes:
        log("no peer can run here: ftengine's modes not timed either (nothing to compare them with)")
        ft_modes = []
    if "ort-cpu" in avail:
        res["ort_route"] = ort[0]
    res["torch_python"] = tpy
    if tpy:
        libdir = torch_libdir(libdir)
        res["torch_libdir"] = libdir
        res["openblas_env"] = {"policy": openblas, "host OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE"),
                               "host OPENBLAS_L2_SIZE": os.environ.get("OPENBLAS_L2_SIZE")}
    cfg = cell_config(iters, warmup, seed, cache, logdir, libdir, openblas, omp_wait, ort_spinning)
    cache, logdir = cfg["cache"], cfg["logdir"]
    res["omp_wait"] = ("GOMP_SPINCOUNT=%s for the torch workers, as `ftengine bench` runs" % TOOL_SPINCOUNT
                       if omp_wait == "same" and not (os.environ.get("OMP_WAIT_POLICY") or
                                                      os.environ.get("GOMP_SPINCOUNT"))
                       else "the environment's / libgomp's default for every side")
    res["ort_spinning"] = "ORT default (intra-op threads spin)" if ort_spinning else "off (allow_spinning=0)"
    for model in models:
        kind = kind_of(model, tool)
        size = {"text": seq, "vision": image, "speech": samples}[kind] or DEFAULT_SIZES[kind]
        run_peers = list(avail)
        if check and run_peers:
            g, why = golden_check(model, run_peers, tool, tpy, ort, cache, logdir, libdir, openblas, omp_wait)
            res["golden"][model] = {"how": why, "peers": {p: {"match": ok, "lines": ln} for p, (ok, ln) in
                                                          (g or {}).items()}}
            for p, (ok, lines) in (g or {}).items():
                log("golden %s %s: %s" % (model, p, "; ".join(lines)))
                if not ok:
                    run_peers.remove(p)
                    res["skipped"].append({"peer": p, "model": model,
                                           "why": "outputs differ from ftengine's on the golden case: " +
                                                  "; ".join(lines)})
            if g is None:
                log("golden %s: not checked (%s)" % (model, why))
        points = [(b, size, "curve") for b in batches]
        if overhead:
            points.append((1, MIN_SIZES[kind], "overhead"))
        runners = ["ftengine-" + m for m in ft_modes] + run_peers
        if not runners:  # every peer skipped (each said why above): nothing to time
            continue
        for t in threads_list:
            cell = Cell(model, size, t, run_peers, ft_modes, tool, tpy, ort, cfg)
            stamp = dict(model=model, threads=t, started=time.strftime("%H:%M:%S", time.gmtime()),
                         loadavg=[loadavg()])
            data = {}
            notes = {}
            try:
                for r in range(rounds):
                    for b, s, what in points:
                        order = runners[r % len(runners):] + runners[:r % len(runners)] if runners else []
                        for rn in order:
                            key = (rn, b, s)
                            if key in notes:
                                continue
                            x = cell.time(rn, b, s)
                            if not x["ok"]:
                                notes[key] = x["error"]
                                log("%s %s b%d s%d t%d: %s" % (model, rn, b, s, t, x["error"]))
                                continue
                            data.setdefault(key, []).append(x)
                        log("round %d/%d %s b%d s%d t%d: %s" % (
                            r + 1, rounds, model, b, s, t, ", ".join(
                                "%s %.3f" % (rn, data[(rn, b, s)][-1]["stats"]["median"])
                                for rn in runners if (rn, b, s) in data and len(data[(rn, b, s)]) == r + 1)))
                for b, s, what in points:
                    for rn in runners:
                        key = (rn, b, s)
                        row = dict(model=model, kind=kind, peer=rn, threads=t, batch=b, size=s, point=what,
                                   dtype="fp32", iters=iters, ftengine_commit=res["commit"],
                                   **runner_info(cell, rn, res["commit"]))
                        if key in notes:
                            row.update(status="failed", why=notes[key])
                        else:
                            xs = data[key]
                            row.update(status="ok", warmup=xs[0].get("warmup", warmup), **summarize(
                                [x["stats"] for x in xs]))
                            row["first_ms"] = statistics.median(x["first_ms"] for x in xs)
                            if key[0] in PEERS and (rn, b, s) in cell.checks:
                                row["check"] = cell.checks[(rn, b, s)]
                            if what == "overhead":
                                row["ops"] = cell.opcount(rn, b, s, xs[-1] if rn.startswith("ftengine-") else None)
                        res["rows"].append(row)
                res["info_%s_t%d" % (model, t)] = cell.info
            finally:
                cell.close()
                stamp.update(finished=time.strftime("%H:%M:%S", time.gmtime()), loadavg=stamp["loadavg"] + [loadavg()])
                res.setdefault("cells", []).append(stamp)
            if save:
                with open(save + ".tmp", "w") as f:
                    json.dump(res, f, indent=1)
                os.replace(save + ".tmp", save)
    res["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    res["loadavg"].append(loadavg())
    return res

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tool", default=os.path.join(ROOT, os.environ.get("FT_BUILD") or "build", "ftengine"))
    ap.add_argument("--models", default="bert-base")
    ap.add_argument("--batches", default="1,2,4,8,16,32,64")
    ap.add_argument("--threads", default="1")
    ap.add_argument("--seq", type=int, help="tokens per item (text; default 128)")
    ap.add_argument("--image", type=int, help="image side (vision; default 224)")
    ap.add_argument("--samples", type=int, help="audio samples per item (speech; default 32000)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--peers", default=",".join(PEERS))
    ap.add_argument("--ftengine-modes", default="graph,static", help="ftengine's modes timed in the same rounds "
                    "(empty: none)")
    ap.add_argument("--overhead", action="store_true", help="also batch 1 at a near-zero-compute shape, with ops "
                    "per forward: the host cost per op of each runtime")
    ap.add_argument("--no-check", action="store_true", help="skip the golden-case check against ftengine")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cache", help="ONNX exports (default build/peers/onnx)")
    ap.add_argument("--torch-libdir", help="a directory put first on torch's library path (its libblas.so.3)")
    ap.add_argument("--openblas-env", default="auto", help="auto (drop a host-wide OPENBLAS_CORETYPE pin), keep, "
                    "or a core name")
    ap.add_argument("--fetch-openblas", action="store_true", help="apt-get download Debian's OpenBLAS (OpenMP) and "
                    "unpack it under build/peers/openblas (nothing installed)")
    ap.add_argument("--omp-wait", default="same", choices=("same", "default"), help="same: torch's OpenMP waits "
                    "as ftengine bench's does (GOMP_SPINCOUNT=%s unless set); default: libgomp's" % TOOL_SPINCOUNT)
    ap.add_argument("--ort-spinning", default="on", choices=("on", "off"), help="ORT's intra-op spinning")
    ap.add_argument("--stat", default="median", choices=("median", "min", "mean"))
    ap.add_argument("--json")
    ap.add_argument("--md")
    a = ap.parse_args(argv)
    models = [m for m in a.models.split(",") if m]
    for m in models:
        if m not in tb.PRESETS:
            print("peers: unknown model %s (bench/torch_base.py PRESETS: %s)" % (m, ", ".join(tb.PRESETS)),
                  file=sys.stderr)
            return 2
    for m in (x for x in a.ftengine_modes.split(",") if x):
        if m not in FT_MODES:
            print("peers: unknown ftengine mode %s (%s)" % (m, ", ".join(FT_MODES)), file=sys.stderr)
            return 2
    try:
        batches = [int(x) for x in a.batches.split(",") if x]
        threads = [int(x) for x in a.threads.split(",") if x]
    except ValueError:
        print("peers: --batches and --threads take comma-separated integers", file=sys.stderr)
        return 2
    if a.rounds < 1 or a.iters < 1 or a.warmup < 0 or not batches or not threads or min(batches + threads) < 1:
        print("peers: --rounds, --iters, batches and threads must be positive", file=sys.stderr)
        return 2
    if a.fetch_openblas and not torch_libdir(a.torch_libdir):
        log(try_fetch_openblas())
    try:
        res = measure(models, batches, threads, rounds=a.rounds, iters=a.iters, warmup=a.warmup,
                      peers=a.peers.split(","), ft_modes=a.ftengine_modes.split(","), tool=a.tool, seq=a.seq,
                      image=a.image, samples=a.samples, overhead=a.overhead, check=not a.no_check, seed=a.seed,
                      cache=a.cache, libdir=a.torch_libdir, openblas=a.openblas_env, omp_wait=a.omp_wait,
                      ort_spinning=a.ort_spinning == "on", save=a.json)
    except ValueError as e:
        print("peers: %s" % e, file=sys.stderr)
        return 2
    import report_peers as rp
    md = "%s\n%s\n%s" % (rp.table_md(res, a.stat), rp.overhead_md(res, a.stat), rp.provenance_md(res))
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
