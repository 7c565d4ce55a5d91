#!/usr/bin/env python3
"""ort_runner.py - ONNX Runtime's CPU execution provider for bench/peers.py through
the Python package onnxruntime, where it is installed (the GPU image has the CPU
build); elsewhere bench/baselines/ort_runner.js serves the same runtime through
onnxruntime-node. Same line protocol and replies as ort_runner.js:

  {"cmd": "info"}
  {"cmd": "load", "model": "m.onnx"}          a session (graph optimisations: all)
  {"cmd": "time", "inputs": "in.safetensors", "iters": N, "warmup": W}
  {"cmd": "run", "inputs": "in.safetensors", "out": "out.safetensors"}
  {"cmd": "end_profiling"}                    (with --profile) writes PREFIX_<date>.json

Session options: --threads N (intra-op; inter-op 1, sequential execution, the CPU
provider only), --no-spin (allow_spinning 0), --opt all|extended|basic|disabled, --optimized-out FILE, --profile
PREFIX. Needs onnxruntime and numpy (which it depends on); inputs and outputs are
safetensors files (bench/baselines/st.py).

    python3 bench/baselines/ort_runner.py --threads 1 '{"cmd": "load", "model": "m.onnx"}' \\
        '{"cmd": "time", "inputs": "in.safetensors", "iters": 10, "warmup": 2}'
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import st  # noqa: E402
import worker_loop  # noqa: E402

NP_TYPES = {"F32": "float32", "F64": "float64", "I64": "int64", "I32": "int32", "U8": "uint8", "I8": "int8"}
MAX_SESSIONS = 8
OPT_LEVELS = {"all": "ORT_ENABLE_ALL", "extended": "ORT_ENABLE_EXTENDED", "basic": "ORT_ENABLE_BASIC",
              "disabled": "ORT_DISABLE_ALL"}


class Runner:
    def __init__(self, ort, np, a):
        self.ort, self.np, self.a = ort, np, a
        self.session = None
        self.sessions = {}  # model path -> session, the most recent last (a few shapes stay loaded)

    def options(self):
        o = self.ort.SessionOptions()
        o.graph_optimization_level = getattr(self.ort.GraphOptimizationLevel, OPT_LEVELS[self.a.opt])
        o.intra_op_num_threads = self.a.threads
        o.inter_op_num_threads = 1
        o.execution_mode = self.ort.ExecutionMode.ORT_SEQUENTIAL
        if self.a.optimized_out:
            o.optimized_model_filepath = self.a.optimized_out
        if self.a.no_spin:
            o.add_session_config_entry("session.intra_op.allow_spinning", "0")
        if self.a.profile:
            o.enable_profiling = True
            o.profile_file_prefix = self.a.profile
        return o

    def cmd_info(self, c):
        return {"runtime": "ONNX Runtime", "route": "onnxruntime (Python %d.%d)" % sys.version_info[:2],
                "version": self.ort.__version__, "provider": "CPUExecutionProvider", "threads": self.a.threads,
                "inter_op_threads": 1, "graph_optimization": self.a.opt, "backend": "MLAS (ORT's own kernels)",
                "spinning": not self.a.no_spin,
                "available_providers": list(self.ort.get_available_providers())}

    def cmd_load(self, c):
        t0 = time.perf_counter()
        cached = c["model"] in self.sessions
        if cached:
            self.session = self.sessions.pop(c["model"])
        else:
            while len(self.sessions) >= MAX_SESSIONS:
                self.sessions.pop(next(iter(self.sessions)))
            self.session = self.ort.InferenceSession(c["model"], sess_options=self.options(),
                                                     providers=["CPUExecutionProvider"])
        self.sessions[c["model"]] = self.session
        return {"model": c["model"], "inputs": [i.name for i in self.session.get_inputs()],
                "outputs": [o.name for o in self.session.get_outputs()], "cached": cached,
                "load_ms": (time.perf_counter() - t0) * 1e3}

    def feeds(self, path):
        if self.session is None:
            raise RuntimeError('no model loaded ({"cmd": "load"} first)')
        t = st.read(path)
        out = {}
        for i in self.session.get_inputs():
            if i.name not in t:
                raise KeyError(f"{path} has no input {i.name}")
            dt, shape, arr = t[i.name]
            out[i.name] = self.np.frombuffer(arr.tobytes(), dtype=NP_TYPES[dt]).reshape(shape)
        return out

    def cmd_time(self, c):
        f = self.feeds(c["inputs"])
        iters, warmup = int(c.get("iters", 10)), int(c.get("warmup", 2))
        run = self.session.run
        t0 = time.perf_counter()
        run(None, f)
        first = (time.perf_counter() - t0) * 1e3
        for _ in range(warmup):
            run(None, f)
        ts = []
        for _ in range(iters):
            t0 = time.perf_counter()
            run(None, f)
            ts.append((time.perf_counter() - t0) * 1e3)
        return {"first_ms": first, "warmup": warmup, "samples_ms": ts}

    def cmd_end_profiling(self, c):
        return {"profile": self.session.end_profiling()}

    def cmd_run(self, c):
        names = [o.name for o in self.session.get_outputs()]
        outs = self.session.run(None, self.feeds(c["inputs"]))
        rev = {v: k for k, v in NP_TYPES.items()}
        st.write(c["out"], [(n, rev[str(o.dtype)], tuple(o.shape), self.np.ascontiguousarray(o).tobytes())
                            for n, o in zip(names, outs)])
        return {"out": c["out"], "outputs": names}

    def handle(self, c):
        try:
            fn = getattr(self, "cmd_" + str(c.get("cmd")), None)
            if fn is None:
                raise ValueError(f"unknown command {c.get('cmd')!r}")
            r = fn(c)
            r["ok"] = True
            return r
        except Exception as e:
            return {"ok": False, "error": f"{e.__class__.__name__}: {str(e)[:400]}"}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--opt", default="all", choices=sorted(OPT_LEVELS))
    ap.add_argument("--optimized-out")
    ap.add_argument("--profile")
    ap.add_argument("--serve", action="store_true")
    ap.add_argument("--no-spin", action="store_true", help="intra-op threads block instead of spinning")
    ap.add_argument("commands", nargs="*")
    a = ap.parse_args(argv)
    try:
        import numpy as np
        import onnxruntime as ort
    except Exception as e:
        print(json.dumps({"ok": False, "error": f"onnxruntime is not importable ({e.__class__.__name__}: {e})"}),
              flush=True)
        return 3
    r = Runner(ort, np, a)
    print(json.dumps({"ok": True, "ready": "onnxruntime"}), flush=True)
    return worker_loop.run(r.handle, a.commands, a.serve)


if __name__ == "__main__":
    sys.exit(main())
