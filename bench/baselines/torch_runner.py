#!/usr/bin/env python3
"""torch_runner.py - the PyTorch side of the CPU peers (bench/peers.py): one model
from bench/torch_models.py (an ftengine preset, random init under a seed as
bench/cpu_vs_torch.py does, or a golden case's config and HF weights), run as

  eager        the plain-torch forward under torch.no_grad()
  torchscript  torch.jit.trace of that forward at the timed shape, then torch.jit.freeze

and exported with torch.onnx.export (one static-shape file per batch and length,
weights as initializers, constant folding on) for the ONNX Runtime runners.

A worker: thread counts come from the environment (bench/peers.py sets OMP, BLAS
and torch's before torch loads, so every pool has the same size) and --threads.
It answers JSON commands, one per line, from the command line (each JSON
argument) and then, with --serve, from stdin; every reply is one JSON line on
stdout ({"ok": false, "error": ...} on failure). Commands:

  {"cmd": "info"}                                   versions, threads, BLAS/oneDNN actually loaded
  {"cmd": "time", "runtime": R, "batch": B, "size": S, "iters": N, "warmup": W}
                                                    first call + N timed forwards (ms each)
  {"cmd": "check", "runtime": "torchscript", "batch": B, "size": S}
                                                    TorchScript's outputs against eager's
  {"cmd": "export", "batch": B, "size": S, "path": P, "inputs": Q}
                                                    ONNX file P and its inputs (safetensors Q)
  {"cmd": "compare", "batch": B, "size": S, "outputs": P}
                                                    a peer's outputs (safetensors) against eager's
  {"cmd": "run", "runtime": R, "batch": B, "size": S, "out": P}   outputs to a safetensors file
  {"cmd": "opcount", "runtime": R, "batch": B, "size": S}  aten ops (eager) / graph nodes per forward
  {"cmd": "onnx_nodes", "path": P}                  node count and op types of an ONNX file
  {"cmd": "profile", "runtime": R, "batch": B, "size": S, "iters": N}
                                                    self CPU ms per aten op and forward (torch.profiler)

With --case DIR (a tests/golden/<arch> folder) the inputs are the case's own and
batch/size are ignored. Needs torch (Debian's python3-torch is enough); onnx for
onnx_nodes only.

    python3 bench/baselines/torch_runner.py --model bert-base --threads 1 \\
        '{"cmd": "time", "runtime": "eager", "batch": 1, "size": 128, "iters": 10, "warmup": 2}'
"""
import argparse
import copy
import ctypes
import json
import os
import re
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
import st  # noqa: E402
import worker_loop  # noqa: E402
import torch_models as tm  # noqa: E402

torch = tm.torch
RUNTIMES = ("eager", "torchscript")
OPSET = 14
VIEW_RE = re.compile(r"->\s*\(?Tensor\([a-z]")  # a schema returning an alias of an input: a view


class Wrapped(torch.nn.Module if torch is not None else object):
    """An HFModel as an nn.Module for the tracer and the ONNX exporter: its weights (the
    same tensor objects as the model's dict) are buffers, inputs are positional in
    `names` order, outputs a tuple in `outs` order."""

    def __init__(self, model, names, outs):
        super().__init__()
        self.model, self.names, self.outs = model, list(names), list(outs)
        seen = set()
        tensors = list(model.p.values()) + [v for v in vars(model).values() if isinstance(v, torch.Tensor)]
        for i, t in enumerate(tensors):
            if id(t) not in seen:
                seen.add(id(t))
                self.register_buffer("w%d" % i, t)

    def forward(self, *args):
        out = self.model(**dict(zip(self.names, args)))
        return tuple(out[k] for k in self.outs)


def load_case_model(case_dir):
    """(model with the case's HF weights, the case's inputs) via bench/hf_golden.py's loader."""
    import hf_golden as hg
    model, inputs, _ = hg.load_case(case_dir)
    return model, inputs


class Worker:
    def __init__(self, model=None, case=None, seed=0, threads=None):
        if threads:
            torch.set_num_threads(threads)
        torch.manual_seed(seed)
        self.seed, self.case = seed, case
        if case:
            self.model, self.case_inputs = load_case_model(case)
            self.name = os.path.basename(os.path.normpath(case))
        else:
            if model not in tm.PRESETS:
                raise ValueError(f"unknown preset {model!r} (bench/torch_base.py PRESETS: {', '.join(tm.PRESETS)})")
            self.model, self.case_inputs = tm.build_preset(model), None
            self.name = model
        self.traced = {}   # (batch, size) -> frozen TorchScript module
        self.inputs_ = {}  # (batch, size) -> inputs dict
        self.eager_out = {}
        self.noise_ = {}

    # ---- shapes and inputs
    def inputs(self, batch, size):
        if self.case_inputs is not None:
            return self.case_inputs
        key = (batch, size)
        if key not in self.inputs_:
            self.inputs_ = {key: self.model.inputs(batch, size, seed=self.seed)}  # one shape kept
        return self.inputs_[key]

    def outputs_of(self, out):
        """The tensor outputs of a forward, in a fixed order (HF's names)."""
        return [k for k, v in out.items() if isinstance(v, torch.Tensor)]

    def eager(self, batch, size):
        key = (batch, size)
        if key not in self.eager_out:
            with torch.no_grad():
                self.eager_out = {key: self.model(**self.inputs(batch, size))}
        return self.eager_out[key]

    def fp32_noise(self, batch, size):
        """{output: relative L2 error of eager float32 against eager float64} at this shape,
        {} where the model does not run in float64 (then the golden criterion applies)."""
        key = (batch, size)
        if key not in self.noise_:
            noise = {}
            try:
                m64 = copy.copy(self.model)
                m64.p = {k: v.double() if v.is_floating_point() else v for k, v in self.model.p.items()}
                inp = {k: v.double() if v.is_floating_point() else v for k, v in self.inputs(batch, size).items()}
                with torch.no_grad():
                    out64 = m64(**inp)
                for k, v in self.eager(batch, size).items():
                    if isinstance(v, torch.Tensor) and k in out64 and out64[k].shape == v.shape:
                        ref = out64[k].double()
                        noise[k] = float(torch.linalg.norm(v.double() - ref) / max(float(torch.linalg.norm(ref)), 1e-30))
            except (RuntimeError, TypeError, AttributeError):
                noise = {}
            self.noise_ = {key: noise}  # one shape kept, as the inputs
        return self.noise_[key]

    def wrapped(self, batch, size):
        inp = self.inputs(batch, size)
        names = list(inp)
        return Wrapped(self.model, names, self.outputs_of(self.eager(batch, size))).eval(), tuple(inp[n] for n in names)

    def scripted(self, batch, size):
        key = (batch, size)
        if key not in self.traced:
            w, args = self.wrapped(batch, size)
            with torch.no_grad():
                tr = torch.jit.trace(w, args, check_trace=False)
                self.traced[key] = torch.jit.freeze(tr.eval())
        return self.traced[key]

    def forward_fn(self, runtime, batch, size):
        inp = self.inputs(batch, size)
        if runtime == "eager":
            return lambda: self.model(**inp)
        if runtime == "torchscript":
            m = self.scripted(batch, size)
            args = tuple(inp.values())
            return lambda: m(*args)
        raise ValueError(f"runtime {runtime!r} is not one of {', '.join(RUNTIMES)}")

    def named_outputs(self, runtime, batch, size):
        with torch.no_grad():
            out = self.forward_fn(runtime, batch, size)()
        if runtime == "eager":
            return {k: out[k] for k in self.outputs_of(out)}
        return dict(zip(self.outputs_of(self.eager(batch, size)), out))

    # ---- commands
    def cmd_info(self, c):
        return info()

    def cmd_time(self, c):
        b, s, runtime = c.get("batch"), c.get("size"), c.get("runtime", "eager")
        iters, warmup = int(c.get("iters", 10)), int(c.get("warmup", 2))
        t0 = time.perf_counter()
        fn = self.forward_fn(runtime, b, s)
        prep = (time.perf_counter() - t0) * 1e3
        ts = []
        with torch.no_grad():
            t0 = time.perf_counter()
            fn()
            first = (time.perf_counter() - t0) * 1e3
            for _ in range(warmup):
                fn()
            for _ in range(iters):
                t0 = time.perf_counter()
                fn()
                ts.append((time.perf_counter() - t0) * 1e3)
        return {"runtime": runtime, "batch": b, "size": s, "prepare_ms": prep, "first_ms": first,
                "warmup": warmup, "samples_ms": ts}

    def cmd_check(self, c):
        b, s = c.get("batch"), c.get("size")
        got = self.named_outputs(c.get("runtime", "torchscript"), b, s)
        return compare_outputs(got, self.named_outputs("eager", b, s), self.fp32_noise(b, s))

    def cmd_run(self, c):
        out = self.named_outputs(c.get("runtime", "eager"), c.get("batch"), c.get("size"))
        write_tensors(c["out"], out)
        return {"out": c["out"], "outputs": list(out)}

    def cmd_export(self, c):
        b, s = c.get("batch"), c.get("size")
        w, args = self.wrapped(b, s)
        t0 = time.perf_counter()
        tmp = c["path"] + ".tmp"
        with torch.no_grad():
            torch.onnx.export(w, args, tmp, input_names=w.names, output_names=w.outs, opset_version=OPSET,
                              do_constant_folding=True)
        os.replace(tmp, c["path"])
        ms = (time.perf_counter() - t0) * 1e3
        if c.get("inputs"):
            write_tensors(c["inputs"], dict(zip(w.names, args)))
        return {"path": c["path"], "inputs": w.names, "outputs": w.outs, "opset": OPSET, "export_ms": ms}

    def cmd_compare(self, c):
        got = {k: torch.frombuffer(bytearray(a.tobytes()), dtype=torch.float32).reshape(shape)
               for k, (dt, shape, a) in st.read(c["outputs"]).items() if dt == "F32"}
        return compare_outputs(got, self.named_outputs("eager", c.get("batch"), c.get("size")),
                               self.fp32_noise(c.get("batch"), c.get("size")))

    def cmd_opcount(self, c):
        """Ops of one forward: every aten op (aten_ops) and those that are not views
        (compute_ops: a view's result aliases its input and launches no work, and
        ftengine's kernel counts leave views out too)."""
        b, s, runtime = c.get("batch"), c.get("size"), c.get("runtime", "eager")
        if runtime == "torchscript":
            nodes = [n for n in self.scripted(b, s).graph.nodes() if n.kind().startswith("aten::")]
            # views, and shape arithmetic (aten::size and friends return no tensor)
            views = [n for n in nodes if VIEW_RE.search(n.schema())
                     or not all(o.type().kind() == "TensorType" for o in n.outputs())]
            return {"runtime": runtime, "aten_ops": len(nodes), "compute_ops": len(nodes) - len(views)}
        from torch.utils._python_dispatch import TorchDispatchMode

        class Count(TorchDispatchMode):
            n = views = 0

            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                Count.n += 1
                rets = func._schema.returns
                Count.views += bool(rets and rets[0].alias_info is not None)
                return func(*args, **(kwargs or {}))
        fn = self.forward_fn("eager", b, s)
        with torch.no_grad(), Count():
            fn()
        return {"runtime": runtime, "aten_ops": Count.n, "compute_ops": Count.n - Count.views}

    def cmd_profile(self, c):
        """Self CPU time per aten op and forward under torch.profiler (eager or TorchScript)."""
        b, s, runtime = c.get("batch"), c.get("size"), c.get("runtime", "eager")
        iters = int(c.get("iters", 3))
        fn = self.forward_fn(runtime, b, s)
        with torch.no_grad():
            for _ in range(3):
                fn()
            for _ in range(2):  # the first profiled session pays the profiler's own start-up: dropped
                with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
                    for _ in range(iters):
                        fn()
        ops = {e.key: e.self_cpu_time_total / 1e3 / iters for e in prof.key_averages()}
        return {"runtime": runtime, "iters": iters, "self_ms": dict(sorted(ops.items(), key=lambda kv: -kv[1]))}

    def cmd_onnx_nodes(self, c):
        return onnx_nodes(c["path"])

    def handle(self, c):
        try:
            fn = getattr(self, "cmd_" + str(c.get("cmd")), None)
            if fn is None:
                raise ValueError(f"unknown command {c.get('cmd')!r}")
            r = fn(c)
            r["ok"] = True
            return r
        except Exception as e:  # the orchestrator reports it per row
            return {"ok": False, "error": f"{e.__class__.__name__}: {str(e)[:400]}"}


def compare_outputs(got, want, noise=None):
    """Every output eager has, got against want (torch tensors), under the golden criterion
    with its absolute term scaled by the output's RMS where that exceeds 1: random weights at
    a real model's size give activations in the thousands (ResNet-50's last stage), where
    summation order alone moves elements by more than 1e-4 while the relative L2 error stays
    near 1e-6; on outputs of golden-case size (RMS <= 1) this is the golden criterion.
    noise: {output: eager float32's relative L2 error against float64 at this shape}
    (Worker.fp32_noise); where given, the bounds widen to four times that error when it
    exceeds the criterion's: two correct float32 implementations of a deep network differ
    by about their own rounding error (MobileNetV2-1.0 at 224: TorchScript and ORT both
    2.4e-5 from eager), while a changed operation stays orders of magnitude above it."""
    lines, ok = [], True
    for k, w in want.items():
        if k not in got:
            ok = False
            lines.append(f"{k}: missing")
            continue
        g = got[k].detach().double()
        w = w.detach().double()
        if tuple(g.shape) != tuple(w.shape):
            ok = False
            lines.append(f"{k}: shape {tuple(g.shape)}, expected {tuple(w.shape)}")
            continue
        d = (g - w).abs()
        rel = float(torch.linalg.norm(g - w) / max(float(torch.linalg.norm(w)), 1e-30))
        scale = max(1.0, float(w.pow(2).mean().sqrt())) if w.numel() else 1.0
        widen = max(1.0, 4.0 * (noise or {}).get(k, 0.0) / st.REL_L2)
        over = int((d > widen * (st.ATOL * scale + st.RTOL * w.abs())).sum())
        fin = bool(torch.isfinite(g).all())
        good = fin and over == 0 and rel <= st.REL_L2 * widen
        ok &= good
        lines.append(f"{k}: {'ok' if good else 'FAIL'} max abs err {float(d.max()):.2e} (RMS {scale:.3g}), "
                     f"rel L2 {rel:.2e}"
                     + ("" if fin else ", NaN/Inf") + (f", {over} over tolerance" if over else "")
                     + (f" (bounds x{widen:.1f}: eager's own float32 error)" if widen > 1 else ""))
    return {"match": ok, "lines": lines}


def write_tensors(path, named):
    out = []
    for k, t in named.items():
        t = t.detach().contiguous()
        dt = {torch.float32: "F32", torch.int64: "I64", torch.float64: "F64", torch.int32: "I32"}.get(t.dtype)
        if dt is None:
            t, dt = t.float(), "F32"
        out.append((k, dt, tuple(t.shape), t.numpy().tobytes()))
    st.write(path, out)


def onnx_nodes(path):
    import onnx
    m = onnx.load(path, load_external_data=False)
    types = {}
    for n in m.graph.node:
        key = (n.domain + "." if n.domain else "") + n.op_type
        types[key] = types.get(key, 0) + 1
    return {"nodes": len(m.graph.node), "op_types": dict(sorted(types.items(), key=lambda kv: -kv[1]))}


def blas_info():
    """The BLAS library torch actually loaded (Debian's torch calls the system
    libblas.so.3, whichever implementation it resolves to) and, for OpenBLAS, its
    build and the kernel set (core) it picked for this CPU."""
    a = torch.randn(64, 64)
    (a @ a).sum()  # makes sure the BLAS is loaded
    libs = []
    try:
        with open("/proc/self/maps") as f:
            for ln in f:
                p = ln.split()[-1] if len(ln.split()) >= 6 else ""
                base = os.path.basename(p)
                if re.search(r"blas|mkl_rt|libmkl|blis|dnnl", base) and p not in libs:
                    libs.append(p)
    except OSError:
        pass
    out = {"libraries": libs, "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE", "")}
    for p in libs:
        if "openblas" in os.path.basename(p):
            try:
                lib = ctypes.CDLL(p)
                lib.openblas_get_config.restype = ctypes.c_char_p
                lib.openblas_get_corename.restype = ctypes.c_char_p
                out["openblas_config"] = lib.openblas_get_config().decode()
                out["openblas_core"] = lib.openblas_get_corename().decode()
            except (OSError, AttributeError):
                pass
    real = [os.path.realpath(p) for p in libs]
    if "openblas_core" in out:
        out["name"] = "OpenBLAS %s (%s kernels, %s)" % (
            (re.search(r"OpenBLAS ([0-9.]+)", out["openblas_config"]) or [None, "?"])[1], out["openblas_core"],
            "OpenMP" if "USE_OPENMP" in out["openblas_config"] else "pthreads")
    elif any("mkl" in p for p in real):
        out["name"] = "MKL"
    elif any(re.search(r"/blas/libblas\.so", p) for p in real):
        out["name"] = "reference BLAS (netlib libblas.so.3: unoptimised; install OpenBLAS)"
    else:
        out["name"] = ", ".join(os.path.basename(p) for p in real) or "?"
    return out


def info():
    cfg = torch.__config__.show()
    onednn = re.search(r"(?:MKL-DNN|oneDNN) v?([0-9.]+)", cfg)
    cap = re.search(r"CPU capability usage: (\S+)", cfg)
    blas = blas_info()
    build = {}
    for ln in cfg.splitlines():
        if "Build settings" in ln:
            for kv in ln.split(":", 1)[1].split(","):
                k, _, v = kv.strip().partition("=")
                if k in ("BLAS_INFO", "LAPACK_INFO", "USE_MKLDNN", "USE_OPENMP", "TORCH_VERSION"):
                    build[k] = v
    par = torch.__config__.parallel_info()
    return {"runtime": "PyTorch", "version": torch.__version__, "threads": torch.get_num_threads(),
            "interop_threads": torch.get_num_interop_threads(),
            "onednn": onednn.group(1) if onednn else None, "mkldnn_enabled": bool(torch.backends.mkldnn.enabled),
            "cpu_capability": cap.group(1) if cap else None, "blas": blas, "build": build,
            "parallel_backend": (re.search(r"ATen parallel backend: (.*)", par) or [None, "?"])[1],
            "backend": "%s; oneDNN %s%s" % (blas["name"], onednn.group(1) if onednn else "?",
                                            ", %s" % cap.group(1) if cap else "")}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--model", help="an ftengine preset known to bench/torch_base.py")
    g.add_argument("--case", help="a golden case folder (config.json, model.safetensors, inputs.safetensors)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--serve", action="store_true", help="then read commands from stdin until EOF")
    ap.add_argument("commands", nargs="*")
    a = ap.parse_args(argv)
    if torch is None:
        print(json.dumps({"ok": False, "error": f"torch is not importable ({tm.TORCH_ERROR})"}), flush=True)
        return 3
    try:
        w = Worker(model=a.model, case=a.case, seed=a.seed, threads=a.threads)
    except Exception as e:
        print(json.dumps({"ok": False, "error": f"{e.__class__.__name__}: {e}"}), flush=True)
        return 2
    print(json.dumps({"ok": True, "ready": w.name}), flush=True)
    return worker_loop.run(w.handle, a.commands, a.serve)


if __name__ == "__main__":
    sys.exit(main())
