#!/usr/bin/env python3
"""report.py - `make report`: the framework-tax study (Fernandez et al., "The
Framework Tax", EMNLP 2023) regenerated from ftengine's own measurements.

    python3 bench/report.py --tool build/ftengine --device cpu|cuda [--dtype fp32|fp16]
                            [--quick] [--dir build/report] [--only GROUP[,GROUP]] [--no-sweeps]
                            [--model DIR|PRESET [--seq N]] [--no-peers]

Runs the sweeps the findings need with `ftengine sweep ... --csv DIR/<name>.csv
--resume` in interleaved rounds (every point of a sweep once per round, in a
shuffled order; the models a finding compares share a sweep, so they share its
rounds; rows already measured by this commit on this device are kept, so an
interrupted or staged report continues where it stopped), draws the figures
(bench/plot.py, when matplotlib is installed) and writes DIR/report.md: where it
was verified, the setup, one section per finding F1-F8 with its numbers, their
intervals and a verdict computed by bench/verdicts.py, where each mode gap comes
from (kernel vs dispatch/host time), and the paper's Table 3 beside ftengine's
modes. On the CPU the frameworks ftengine's modes stand in for (PyTorch eager,
TorchScript, ONNX Runtime: bench/peers.py, planned and read by bench/report_peers.py)
run after the sweeps on the main sweep's model, length, batches and rounds
(--no-peers, PEERS=0, skips them; a model without a torch definition skips them with
one line): they add Table 3 rows, curves to the latency figure and the
mode-vs-framework section. The per-model study (F5, F6) runs in text, vision and
speech panels, one sweep each (MODELS). Groups (--only) let a GPU session run the
study in stages: main, emulation, width, depth, models. --model runs the per-model
parts (main and emulation, and the peers) on a checkpoint directory or preset.
docs/report.md describes the study.
"""
import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report_text as RT  # noqa: E402
import report_peers as RP  # noqa: E402
import studydata as sd  # noqa: E402
import verdicts as V  # noqa: E402

GROUPS = ("main", "emulation", "width", "depth", "models")
# us per eager op and per graph step; the paper puts PyTorch at 4-17 us per module call
EMU_COSTS = (0, 2, 8, 20, 100)
DEPTHS = (("bert-base-L2", 2), ("bert-base-L4", 4), ("bert-base-L8", 8), ("bert-base", 12), ("bert-base-L24", 24))
# The per-model comparison (F5, F6, their table and the latency-vs-MACs figure): one
# entry per preset, in panels of one modality each (the paper's): each panel is one
# sweep, so its models share rounds and every ratio to a panel's reference (ref) is
# taken round by round. kind picks the input length on the CPU (text: tokens, image:
# side, audio: samples); fixed: the architecture's own input only (ViT: its config's
# image size, 224). efficient: a model the paper calls efficient (fewer MACs or
# parameters), whose "not faster at small batch" F5 judges against the panel's refs.
# A preset this build of the tool does not know (`ftengine info --presets`) is
# skipped with a line in the report. F6 reads mobilebert-uncased.
MODELS = (
    dict(preset="bert-base", label="BERT-base", kind="text", panel="text", ref=True),
    dict(preset="roberta-base", label="RoBERTa-base", kind="text", panel="text", ref=True),
    dict(preset="distilbert-base", label="DistilBERT", kind="text", panel="text", efficient=True),
    dict(preset="mobilebert-uncased", label="MobileBERT", kind="text", panel="text", efficient=True),
    dict(preset="squeezebert-uncased", label="SqueezeBERT", kind="text", panel="text", efficient=True),
    dict(preset="albert-base-v2", label="ALBERT-base-v2", kind="text", panel="text", efficient=True),
    dict(preset="deberta-base", label="DeBERTa-base", kind="text", panel="text"),
    dict(preset="gpt2", label="GPT-2", kind="text", panel="text"),
    # the paper's Funnel finding (F5 before the text panel grew), kept beside the others
    dict(preset="funnel-small", label="Funnel-small", kind="text", panel="text", efficient=True),
    dict(preset="resnet-50", label="ResNet-50", kind="image", panel="vision", ref=True),
    dict(preset="mobilenet_v2_1.0_224", label="MobileNetV2", kind="image", panel="vision", efficient=True),
    dict(preset="efficientnet-b0", label="EfficientNet-B0", kind="image", panel="vision", efficient=True),
    dict(preset="vit-base-patch16-224", label="ViT-B/16", kind="image", panel="vision", fixed=True),
    dict(preset="convnext-tiny-224", label="ConvNeXt-tiny", kind="image", panel="vision"),
    dict(preset="wavlm-base", label="WavLM-base", kind="audio", panel="speech", ref=True),
    dict(preset="wav2vec2-base", label="wav2vec2-base", kind="audio", panel="speech"),
    dict(preset="hubert-base-ls960", label="HuBERT-base", kind="audio", panel="speech"),
)
PANELS = (("text", "Text"), ("vision", "Vision"), ("speech", "Speech"))
# architectures measured at their config's input only (a MODEL= study of one of them too)
FIXED_ARCHS = ("ViTModel",)


def plan(device, dtype, quick, model=None, seq=None, kinds=None, known=None):
    """The sweeps of the study for this device: [dict(group, name, models=[[preset, length]], ...)].
    model: a MODEL= study (main and emulation on that model only). kinds: {preset: kind}
    for model (from `ftengine info`); known: the presets the tool knows (None: all)."""
    cpu = device == "cpu"
    S = []

    def add(group, name, models, modes="eager", batches="1", costs=None, overhead=False, dt=None, shape=False):
        it, wu, rounds = (shape_it, shape_wu, shape_rounds) if shape else (main_it, main_wu, main_rounds)
        if costs is not None:
            it, wu, rounds = emu_it, emu_wu, emu_rounds
        S.append(dict(group=group, name=name, models=[list(m) for m in models], modes=modes, batches=batches,
                      costs=list(costs) if costs is not None else None, iters=it, warmup=wu, rounds=rounds,
                      overhead=overhead, dtype=dt or dtype, protocol="sync" if cpu else "paper"))

    if cpu:
        # On a CPU ftengine's kernels, not its dispatcher, set the latency of real-size
        # models; small presets and short sequences keep the study within minutes and
        # give the dispatcher a chance to show (the emulation group adds a PyTorch-like cost).
        # 9 rounds: the interval drops the most extreme round at each end (12: two), so
        # one disturbed round cannot make a verdict inconclusive; 3+ timed forwards per
        # visit: a round's median ignores one disturbed forward
        main_it, main_wu, main_rounds = (3, 1, 9) if quick else (5, 1, 12)
        emu_it, emu_wu, emu_rounds = main_it, main_wu, main_rounds
        shape_it, shape_wu, shape_rounds = (3, 0, 9) if quick else (3, 1, 12)
        main_model, main_seq = ("bert-tiny", 8) if quick else ("bert-mini", 16)
        emu_model, emu_seq = "bert-tiny", 8
        batches = "1,2,4,8,16,32" if quick else "1,2,4,8,16,32,64"
        shape_seq = 8
        width_batches = "1,2" if quick else "1,2,4"
        model_batches = "1" if quick else "1,2"
        kind_len = {"text": 8 if quick else 16, "image": 64 if quick else 112, "audio": 4000 if quick else 8000}
        own_batches = "1,2,4,8" if quick else "1,2,4,8,16"
    else:
        # a GPU session stage has 10 minutes: the emulation sweep (5 costs x 3 modes, up to
        # 100 us per op on ~300 ops) gets fewer forwards per visit
        main_it, main_wu, main_rounds = (5, 1, 9) if quick else (10, 2, 10)
        emu_it, emu_wu, emu_rounds = (3, 1, 9)
        shape_it, shape_wu, shape_rounds = main_it, main_wu, main_rounds
        main_model, main_seq = "bert-base", None
        emu_model, emu_seq = main_model, main_seq
        batches = "1,4,16,64" if quick else "1,2,4,8,16,32,64,128"
        shape_seq = None
        width_batches = "1,2,4" if quick else "1,2,4,8,16"
        model_batches = "1" if quick else "1,2,4,8"
        kind_len = {}
        own_batches = batches
    if model:  # the user's model: the per-model parts only
        kind = (kinds or {}).get(model, "text")
        length = seq or (None if kind == "fixed" else kind_len.get(kind))
        add("main", "main-" + dtype, [(model, length)], modes="eager,graph,static", batches=own_batches, overhead=True)
        add("emulation", "emulation", [(model, length)], modes="eager,graph,static", batches=own_batches,
            costs=EMU_COSTS, overhead=True)
        return S
    add("main", "main-" + dtype, [(main_model, main_seq)], modes="eager,graph,static", batches=batches,
        overhead=True)
    if not cpu and dtype != "fp32":  # F7 compares with fp32
        add("main", "main-fp32", [(main_model, main_seq)], modes="eager", batches=batches, overhead=True, dt="fp32")
    add("emulation", "emulation", [(emu_model, emu_seq)], modes="eager,graph,static", batches=batches,
        costs=EMU_COSTS, overhead=True)
    add("width", "width", [("bert-base", shape_seq), ("bert-base-w2", shape_seq)], batches=width_batches, shape=True)
    add("depth", "depth", [(p, shape_seq) for p, _ in DEPTHS], batches="1", shape=True)
    for panel, _ in PANELS:
        ms = [m for m in MODELS if m["panel"] == panel and (known is None or m["preset"] in known)]
        if not ms:
            continue
        add("models", "models-" + panel,
            [(m["preset"], None if m.get("fixed") else m.get("length") or kind_len.get(m["kind"])) for m in ms],
            batches=model_batches, shape=True)
    return S


def sweep_cmd(tool, s, device, outdir, threads):
    models = s["models"]
    cmd = [tool, "sweep"]
    if len(models) == 1:
        cmd.append(models[0][0])
        if models[0][1]:
            cmd += ["--seq", str(models[0][1])]
    else:
        cmd += ["--models", ",".join(m if not ln else "%s@%s" % (m, ln) for m, ln in models)]
    cmd += ["--device", device, "--dtype", s["dtype"], "--modes", s["modes"], "--batches", s["batches"],
            "--iters", str(s["iters"]), "--warmup", str(s["warmup"]), "--rounds", str(s["rounds"]),
            "--protocol", s["protocol"], "--csv", os.path.join(outdir, s["name"] + ".csv"), "--resume",
            "--json", os.path.join(outdir, s["name"] + ".json")]
    if s.get("costs") is not None:
        c = ",".join("%g" % x for x in s["costs"])
        cmd += ["--op-cost-us", c, "--step-cost-us", c]
    if s["overhead"]:
        cmd.append("--overhead")
    if threads and device == "cpu":
        cmd += ["--threads", str(threads)]
    return cmd


def set_aside_stale(outdir, name):
    """A CSV written before sweeps had rounds cannot be resumed: it is renamed
    <name>.csv.old (kept, not deleted) and the sweep starts afresh."""
    p = os.path.join(outdir, name + ".csv")
    try:
        with open(p) as f:
            head = f.readline().strip().split(",")
    except OSError:
        return
    if "round" not in head:
        os.replace(p, p + ".old")
        sys.stderr.write("report: %s has no round column (an older ftengine): kept as %s.old, measured afresh\n"
                         % (p, os.path.basename(p)))


def run_sweeps(tool, sweeps, device, outdir, threads):
    t0 = time.time()
    failed = []
    for k, s in enumerate(sweeps, 1):
        set_aside_stale(outdir, s["name"])
        cmd = sweep_cmd(tool, s, device, outdir, threads)
        el = time.time() - t0
        left = ", roughly %.0f s left" % (el / (k - 1) * (len(sweeps) - k + 1)) if k > 1 else ""
        sys.stderr.write("report: sweep %d of %d (%s), %.0f s elapsed%s\n" % (k, len(sweeps), s["name"], el, left))
        sys.stderr.flush()
        with open(os.path.join(outdir, s["name"] + ".log"), "w") as log:
            log.write("$ " + " ".join(cmd) + "\n")
            log.flush()
            rc = subprocess.call(cmd, stdout=log, stderr=log)
        if rc != 0:  # failed points are rows in the CSV; the report says what is missing
            failed.append((s["name"], rc))
            sys.stderr.write("report: sweep %s exited %d (see %s.log)\n" % (s["name"], rc, s["name"]))
    return failed


def tool_presets(tool):
    """The preset names `ftengine info --presets` lists, or None when it cannot say."""
    try:
        out = subprocess.run([tool, "info", "--presets"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             universal_newlines=True, timeout=120).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    names = set(line.split()[0] for line in out.splitlines()[1:] if line.strip())
    return names or None


def model_kind(tool, model):
    """text, image or audio for a MODEL= study, from the unit `ftengine info` names; fixed
    for an architecture measured at its config's input only (FIXED_ARCHS)."""
    try:
        out = subprocess.run([tool, "info", model], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             universal_newlines=True, timeout=300)
    except (OSError, subprocess.SubprocessError) as e:
        sys.exit("report: cannot run %s info %s: %s" % (tool, model, e))
    if out.returncode != 0:
        sys.exit("report: --model %s: %s" % (model, out.stderr.strip() or "ftengine info failed"))
    if any("architecture: %s" % a in out.stdout for a in FIXED_ARCHS):
        return "fixed"
    return "image" if "(image side)" in out.stdout else "audio" if "(samples)" in out.stdout else "text"


def measured_span(outdir, sweeps):
    """(first, last) row date of the sweeps' CSVs, ISO strings, or (None, None): the
    study's time span is that of the rows it shows, not of an earlier run whose
    study.json was left in the folder."""
    import csv
    dates = []
    for sw in sweeps:
        try:
            with open(os.path.join(outdir, sw["name"] + ".csv"), newline="") as f:
                dates += [r["date"] for r in csv.DictReader(f) if r.get("date")]
        except (OSError, KeyError, csv.Error):
            continue
    return (min(dates), max(dates)) if dates else (None, None)


def loadavg():
    """The host's 1-minute load average (a shared host makes timings noisy), or None."""
    try:
        with open("/proc/loadavg") as f:
            return float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def matplotlib_elsewhere():
    """Another python3 on this machine that has matplotlib (for the hint), or None."""
    cands = [shutil.which("python3"), "/usr/bin/python3", "/usr/local/bin/python3", shutil.which("python")]
    seen = {os.path.realpath(sys.executable)}
    for c in cands:
        if not c or not os.path.exists(c) or os.path.realpath(c) in seen:
            continue
        seen.add(os.path.realpath(c))
        try:
            if subprocess.run([c, "-c", "import matplotlib"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              timeout=60).returncode == 0:
                return c
        except (OSError, subprocess.SubprocessError):
            continue
    return None


def warn_no_figures():
    other = matplotlib_elsewhere()
    sys.stderr.write(
        "report: WARNING: no figures: the Python running the report (%s, Python %d.%d) has no matplotlib.\n"
        "report: the tables and verdicts are written; for the figures, run it with a Python that has "
        "matplotlib: %s\n" % (sys.executable, sys.version_info[0], sys.version_info[1],
                              "make report PYTHON=%s (%s has it)" % (other, other) if other else
                              "install it (apt-get install python3-matplotlib, or python3 -m pip install "
                              "matplotlib) or point make report PYTHON=/path/to/python3 at one that has it"))


def render(outdir, figures_only=False, args=None):
    """Figures and report.md from the CSVs of outdir (bench/report_text.py)."""
    return RT.render(outdir, figures_only)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tool", default="build/ftengine")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--dtype", default=None, help="fp32 or fp16 (default: fp32 on cpu, fp16 on cuda)")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--dir", default="build/report")
    ap.add_argument("--threads", type=int, default=1, help="CPU threads (the paper's harness used 1)")
    ap.add_argument("--only", default="", help="comma-separated groups: " + ",".join(GROUPS))
    ap.add_argument("--no-sweeps", action="store_true", help="render from the CSVs already there")
    ap.add_argument("--model", default=None, help="the per-model study (main, emulation) of a checkpoint or preset")
    ap.add_argument("--seq", type=int, default=None, help="--model: the input length (default: by modality)")
    ap.add_argument("--no-peers", action="store_true", help="no PyTorch/TorchScript/ONNX Runtime runs (PEERS=0)")
    ap.add_argument("--note", default=os.environ.get("REPORT_NOTE", ""), help="a line for the setup table")
    a = ap.parse_args(argv[1:])
    dtype = a.dtype or ("fp32" if a.device == "cpu" else "fp16")
    if dtype not in ("fp32", "fp16", "bf16"):
        ap.error("--dtype must be fp32, fp16 or bf16")
    if a.seq is not None and (a.seq < 1 or not a.model):
        ap.error("--seq needs --model and a positive length")
    os.makedirs(a.dir, exist_ok=True)
    only = [g for g in a.only.split(",") if g]
    for g in only:
        if g not in GROUPS:
            ap.error("unknown group %s (%s)" % (g, ", ".join(GROUPS)))
    meta_p = os.path.join(a.dir, "study.json")
    if a.no_sweeps and os.path.exists(meta_p):
        rc = render(a.dir, args=a)
        import plot
        if not plot.have_matplotlib():
            warn_no_figures()
        return rc
    kind = None
    if a.model:
        kind = model_kind(a.tool, a.model)
        sweeps = plan(a.device, dtype, a.quick, model=a.model, seq=a.seq, kinds={a.model: kind})
        known, skipped = None, []
    else:
        known = tool_presets(a.tool)
        skipped = [m["preset"] for m in MODELS if known is not None and m["preset"] not in known]
        sweeps = plan(a.device, dtype, a.quick, known=known)
    for p in skipped:
        sys.stderr.write("report: preset %s is not known to %s (`ftengine info --presets`): skipped in the per-model "
                         "study\n" % (p, a.tool))
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    if os.path.exists(meta_p):
        try:
            with open(meta_p) as f:
                old = json.load(f)
            if (old.get("device"), old.get("dtype"), old.get("quick"), old.get("model")) == (
                    a.device, dtype, a.quick, a.model):
                started = old.get("started", started)
        except (OSError, ValueError):
            pass
    load0 = loadavg()
    if not a.no_sweeps:
        todo = [s for s in sweeps if not only or s["group"] in only]
        failed = run_sweeps(a.tool, todo, a.device, a.dir, a.threads)
        for name, rc in failed:
            print("report: sweep %s had failed points or failed (exit %d): see %s/%s.log" % (name, rc, a.dir, name))
    peer_jobs, peers_note = RP.plan(a.device, a.quick, next(s for s in sweeps if s["name"] == "main-" + dtype),
                                    a.threads, kind=None if kind == "fixed" else kind, paper_shape=not a.model)
    if a.no_peers:
        peers_note = "not run (PEERS=0)"
    elif peer_jobs and not a.no_sweeps and (not only or "main" in only):
        RP.run(a.dir, a.tool, peer_jobs)
    if peers_note:
        sys.stderr.write("report: peers (PyTorch, TorchScript, ONNX Runtime): %s\n" % peers_note)
    first, last = measured_span(a.dir, sweeps)
    started = first or started
    meta = {"device": a.device, "dtype": dtype, "quick": a.quick, "sweeps": sweeps, "started": started,
            "model": a.model, "skipped_presets": skipped, "stat": "median over rounds",
            "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "note": a.note,
            "loadavg": [load0, loadavg()], "python": sys.executable, "peers": "off" if a.no_peers else "on",
            "peers_note": peers_note}
    with open(meta_p, "w") as f:
        json.dump(meta, f, indent=1)
    rc = render(a.dir, args=a)
    import plot
    if not plot.have_matplotlib():
        warn_no_figures()
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv))
