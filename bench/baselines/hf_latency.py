#!/usr/bin/env python3
"""hf_latency.py - model-level baselines beside `ftengine bench`: the same model
(HF class, random init at the real size), the same inputs (batch, length, dtype)
and the same clock (wall time of one forward followed by a device synchronize,
median over many iterations after warm-up) in

  torch-eager   PyTorch eager (the framework tax ftengine's eager mode reproduces)
  torch-graph   the same module captured into a CUDA Graph by torch.cuda.graph
  torch-compile torch.compile(mode="max-autotune-no-cudagraphs") (--compile; slow to build)
  ort-cuda      ONNX Runtime, CUDA execution provider, on a torch.onnx export (--ort)

With --peers (the GPU day's peer step, tests/gpu_session.sh) the rows are the
peers of ftengine on the same GPU and shapes, each saying what it is ("what"):

  torch-eager   plain PyTorch: bench/torch_models.py's module (ftengine's math,
                written out from HF's), eager
  torch-graph   that module captured into one CUDA Graph (torch.cuda.graph)
  hf-eager      HF transformers' own class (BertModel ...), eager, SDPA attention
  hf-graph      the HF module captured into one CUDA Graph
  hf-compile-ro torch.compile(HF module, mode="reduce-overhead") (CUDA Graphs
                inside), built and timed in a child process that gets
                --compile-box seconds (default 45): past that the row says it
                timed out, and the child and its compile workers are killed

Optional tooling: needs torch and transformers (onnxruntime for --ort); the C
build and tests never run it (its own tests: bench/baselines/test_hf_latency.py).
Prints one line per runner and, with --json FILE, writes them as JSON. A runner
that cannot run here is a result row with a "status" instead of timings: with
--ort, onnxruntime's providers are asked first, and without the CUDA execution
provider (the CPU build of onnxruntime) the row says "ORT CUDA: not available"
and nothing is exported.

    python3 bench/baselines/hf_latency.py --model bert-base --batch 1 --seq 128 --dtype fp16 [--ort] [--compile]
"""
import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

torch = None  # imported by main(): the ORT checks below are testable without it
tf = None

MODELS = {
    "bert-base": ("BertModel", "BertConfig", {}),
    "bert-large": ("BertModel", "BertConfig",
                   dict(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16,
                        intermediate_size=4096)),
    "distilbert-base": ("DistilBertModel", "DistilBertConfig", {}),
    "funnel-small": ("FunnelModel", "FunnelConfig", {}),
    "mobilebert-uncased": ("MobileBertModel", "MobileBertConfig", {}),
    "resnet-50": ("ResNetModel", "ResNetConfig", {}),
    "wavlm-base": ("WavLMModel", "WavLMConfig", {}),
}


def build(name, dtype, dev):
    cls, cfg_cls, kw = MODELS[name]
    cfg = getattr(tf, cfg_cls)(**kw)
    try:
        cfg._attn_implementation = "sdpa"  # PyTorch's fastest stock path
    except Exception:
        pass
    model = getattr(tf, cls)(cfg).eval().to(dev, dtype)
    return model, cfg


def inputs(name, cfg, batch, length, dtype, dev):
    g = torch.Generator().manual_seed(0)
    if name.startswith("resnet"):
        return {"pixel_values": torch.rand(batch, 3, length or 224, length or 224, generator=g).to(dev, dtype)}
    if name.startswith("wavlm"):
        return {"input_values": torch.rand(batch, length or 32000, generator=g).to(dev, dtype)}
    ids = torch.randint(0, cfg.vocab_size, (batch, length or 128), generator=g).to(dev)
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}


def median_ms(fn, iters, warmup):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        t = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times), min(times)


def torch_graph_runner(model, inp):
    static_in = {k: v.clone() for k, v in inp.items()}
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s), torch.no_grad():
        for _ in range(3):
            model(**static_in)
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph), torch.no_grad():
        model(**static_in)
    return graph.replay


def plain_model(name, dtype, dev):
    """bench/torch_models.py's plain-PyTorch model of the preset, random weights on dev."""
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import torch_models as tm
    m = tm.build_preset(name)
    m.p = {k: (v.to(dev, dtype) if v.is_floating_point() else v.to(dev)) for k, v in m.p.items()}
    return m


def compile_boxed(argv, box, env=None):
    """Runs this script with argv (an --only-compile child) in a session of its
    own, for at most box seconds: the child's result row, or a status row when
    it failed or ran past its box (then its whole process group is killed, the
    compiler's workers included)."""
    fd, out = tempfile.mkstemp(prefix="hf_latency_compile_", suffix=".json")
    os.close(fd)
    cmd = [sys.executable, os.path.abspath(__file__)] + list(argv) + ["--only-compile", "--json", out]
    t0 = time.time()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True, env=env)
    try:
        log, _ = p.communicate(timeout=box)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            pass
        p.communicate()
        os.unlink(out)
        return {"runner": "hf-compile-ro", "status": "timed out: not built and timed within its %g s box" % box}
    took = time.time() - t0
    row = None
    try:
        with open(out) as f:
            rows = json.load(f).get("results", [])
        row = rows[0] if rows else None
    except (OSError, ValueError):
        pass
    os.unlink(out)
    if p.returncode != 0 or row is None:
        tail = (log or b"").decode("utf-8", "replace").strip().splitlines()[-3:]
        return {"runner": "hf-compile-ro", "status": "child failed (exit %s): %s" % (p.returncode, " | ".join(tail))}
    row["box_s"] = box
    row["build_and_time_s"] = round(took, 1)
    return row


def ort_providers(ort=None):
    """onnxruntime's available execution providers, or None when it cannot be imported."""
    if ort is None:
        try:
            import onnxruntime as ort
        except Exception:
            return None
    try:
        return list(ort.get_available_providers())
    except Exception:
        return []


def ort_unavailable(providers):
    """Why ORT cannot run on CUDA here (the status row's text), or None if it can."""
    if providers is None:
        return "ORT: not installed"
    if "CUDAExecutionProvider" not in providers:
        return "ORT CUDA: not available"
    return None


def ort_step(providers, record, status, make):
    """The ort-cuda row: a status when there is no CUDA provider (asked before
    anything is exported: an export of a large model takes minutes), else the
    timed runner make() builds."""
    why = ort_unavailable(providers)
    if why:
        status("ort-cuda", why, {"providers": providers})
    else:
        record("ort-cuda", make)


def ort_runner(model, inp, path):
    import onnxruntime as ort
    names = list(inp)
    args = tuple(inp[k] for k in names)
    with torch.no_grad():
        errors = []
        # the TorchScript exporter where it still exists, else the dynamo one (needs onnxscript)
        for kw in ({"dynamo": False}, {"dynamo": True}, {}):
            try:
                torch.onnx.export(model, args, path, input_names=names,
                                  output_names=["last_hidden_state"], opset_version=18, **kw)
                break
            except Exception as e:  # try the next exporter
                errors.append(f"{kw}: {e.__class__.__name__}: {str(e)[:120]}")
        else:
            raise RuntimeError("ONNX export failed: " + " | ".join(errors))
    sess = ort.InferenceSession(path, providers=["CUDAExecutionProvider"])
    if "CUDAExecutionProvider" not in sess.get_providers():
        raise RuntimeError(f"ORT has no CUDA provider here ({sess.get_providers()})")
    import numpy as np
    np_dtype = {torch.float16: np.float16, torch.float32: np.float32, torch.int64: np.int64,
                torch.int32: np.int32}
    binding = sess.io_binding()
    for k in names:
        v = inp[k].contiguous()
        inp[k] = v  # keep the bound memory alive
        binding.bind_input(k, "cuda", 0, np_dtype[v.dtype], list(v.shape), v.data_ptr())
    binding.bind_output("last_hidden_state", "cuda")
    return lambda: sess.run_with_iobinding(binding)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="bert-base", choices=sorted(MODELS))
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--seq", type=int, default=0, help="sequence length / image side / samples (0: default)")
    ap.add_argument("--dtype", default="fp16", choices=["fp32", "fp16", "bf16"])
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--ort", action="store_true")
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--peers", action="store_true", help="plain PyTorch, HF and torch.compile peers (see above)")
    ap.add_argument("--compile-box", type=float, default=45.0, help="seconds for the hf-compile-ro child")
    ap.add_argument("--only-compile", action="store_true", help=argparse.SUPPRESS)  # the child
    ap.add_argument("--json")
    a = ap.parse_args()
    fake = os.environ.get("HF_LATENCY_FAKE_COMPILE_S")
    if a.only_compile and fake is not None:  # the tests' stand-in for a compile: sleep, then a row
        time.sleep(float(fake))
        row = {"runner": "hf-compile-ro", "median_ms": 1.0, "min_ms": 1.0, "what": "fake compile (tests)"}
        with open(a.json, "w") as f:
            json.dump({"results": [row]}, f)
        return 0
    global torch, tf
    try:
        import torch
        import transformers as tf
    except Exception as e:  # optional tooling
        print(f"hf_latency: needs torch and transformers ({e.__class__.__name__}); skipping")
        return 0
    if not torch.cuda.is_available():
        print("hf_latency: no CUDA device; skipping")
        return 0
    dt = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[a.dtype]
    torch.backends.cuda.matmul.allow_tf32 = False
    model, cfg = build(a.model, dt, "cuda")
    inp = inputs(a.model, cfg, a.batch, a.seq, dt, "cuda")
    results = []

    def record(runner, make, what=""):
        try:
            fn = make()
            med, mn = median_ms(fn, a.iters, a.warmup)
            results.append({"runner": runner, "median_ms": med, "min_ms": mn, "what": what})
            print(f"{a.model} b{a.batch} {a.dtype} {runner:<14} median {med:8.4f} ms  min {mn:8.4f} ms  ({what})")
        except Exception as e:  # one runner failing must not hide the others
            results.append({"runner": runner, "error": f"{e.__class__.__name__}: {e}"[:300], "what": what})
            print(f"{a.model} b{a.batch} {a.dtype} {runner:<14} FAILED: {e.__class__.__name__}: {str(e)[:200]}")

    def status(runner, text, extra):
        results.append(dict({"runner": runner, "status": text}, **extra))
        print(f"{a.model} b{a.batch} {a.dtype} {runner:<14} {text} {extra}")

    def eager():
        def f():
            with torch.no_grad():
                model(**inp)
        return f

    cls = MODELS[a.model][0]
    if a.only_compile:  # the hf-compile-ro child of --peers
        def compiled_ro():
            cm = torch.compile(model, mode="reduce-overhead")

            def f():
                with torch.no_grad():
                    cm(**inp)
            return f
        record("hf-compile-ro", compiled_ro, f'torch.compile(transformers {cls}, mode="reduce-overhead")')
    elif a.peers:
        try:
            pm = plain_model(a.model, dt, "cuda")
            # ftengine's bench feeds ids with an all-ones mask: the same here, on the device
            pin = {k: v for k, v in inp.items() if k in ("input_ids", "attention_mask", "pixel_values",
                                                          "input_values")}

            def plain():
                with torch.no_grad():
                    pm(**pin)
            record("torch-eager", lambda: plain, "plain PyTorch module (bench/torch_models.py), eager")
            record("torch-graph", lambda: torch_graph_runner(pm, pin),
                   "plain PyTorch module, one CUDA Graph (torch.cuda.graph)")
        except Exception as e:  # noqa: BLE001  (a missing preset must not hide the HF rows)
            status("torch-eager", f"plain module unavailable: {e.__class__.__name__}: {str(e)[:160]}", {})
        record("hf-eager", eager, f"transformers {cls}, eager, attention {getattr(cfg, '_attn_implementation', '?')}")
        record("hf-graph", lambda: torch_graph_runner(model, inp), f"transformers {cls}, one CUDA Graph")
        child = ["--model", a.model, "--batch", str(a.batch), "--seq", str(a.seq), "--dtype", a.dtype,
                 "--iters", str(a.iters), "--warmup", str(a.warmup)]
        row = compile_boxed(child, a.compile_box)
        row.setdefault("what", f'torch.compile(transformers {cls}, mode="reduce-overhead"), built in a '
                               f'{a.compile_box:g} s box')
        results.append(row)
        if "median_ms" in row:
            print(f"{a.model} b{a.batch} {a.dtype} {'hf-compile-ro':<14} median {row['median_ms']:8.4f} ms  "
                  f"min {row['min_ms']:8.4f} ms  ({row['what']}; built and timed in {row.get('build_and_time_s')} s)")
        else:
            print(f"{a.model} b{a.batch} {a.dtype} {'hf-compile-ro':<14} {row.get('status') or row.get('error')} "
                  f"({row['what']})")
    else:
        record("torch-eager", eager, f"transformers {cls}, eager")
        record("torch-graph", lambda: torch_graph_runner(model, inp), f"transformers {cls}, one CUDA Graph")
    if a.compile and not a.only_compile:
        def compiled():
            cm = torch.compile(model, mode="max-autotune-no-cudagraphs")

            def f():
                with torch.no_grad():
                    cm(**inp)
            return f
        record("torch-compile", compiled)
    if a.ort and not a.only_compile:
        ort_step(ort_providers(), record, status,
                 lambda: ort_runner(model, inp, f"/tmp/hf_latency_{a.model}.onnx"))
    meta = {"model": a.model, "batch": a.batch, "seq": a.seq, "dtype": a.dtype,
            "torch": torch.__version__, "transformers": tf.__version__,
            "device": torch.cuda.get_device_name(0), "iters": a.iters, "results": results}
    if a.json:
        with open(a.json, "w") as f:
            json.dump(meta, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
