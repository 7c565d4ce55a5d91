#!/usr/bin/env python3
"""report.py - `make report`: the framework-tax study (Fernandez et al., EMNLP 2023;
../shared/specs/paper.md) regenerated from ftengine's own measurements.

    python3 bench/report.py --tool build/ftengine --device cpu|cuda [--dtype fp32|fp16]
                            [--quick] [--dir build/report] [--only GROUP[,GROUP]] [--no-sweeps]

Runs the sweeps the findings need with `ftengine sweep ... --csv DIR/<name>.csv
--resume` (points already measured by this commit on this device are kept, so an
interrupted or staged report continues where it stopped), draws the figures
(bench/plot.py, when matplotlib is installed) and writes DIR/report.md: the setup,
one section per finding F1-F8 with its numbers and a verdict computed by
bench/verdicts.py, and the paper's Table 3 beside ftengine's modes. Groups (--only)
let a GPU session run the study in stages under a time limit: main, emulation,
width, depth, models. docs/report.md describes the study.
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report_peers as RP  # noqa: E402
import studydata as sd  # noqa: E402
import verdicts as V  # noqa: E402

GROUPS = ("main", "emulation", "width", "depth", "models")
EMU_COSTS = (0, 2, 8, 20, 100)  # us per eager op; the paper puts PyTorch at 4-17 us per module call, 50-145 us of latency per module
DEPTHS = (("bert-base-L2", 2), ("bert-base-L4", 4), ("bert-base-L8", 8), ("bert-base", 12), ("bert-base-L24", 24))
MODELS = (("bert-base", "BERT-base"), ("distilbert-base", "DistilBERT"), ("funnel-small", "Funnel-small"),
          ("mobilebert-uncased", "MobileBERT"), ("resnet-50", "ResNet-50"), ("wavlm-base", "WavLM-base"))

# The paper's Table 3 (BERT-base, fp16, batch 1, sequence 128, RTX 8000 with a Xeon
# W-2295 host; ../shared/specs/paper.md 2.1, values verified from the paper's repository).
PAPER_TABLE3 = (("PyTorch (eager)", 10.54), ("TorchScript", 6.14), ("PyTorch + CUDA Graphs", 2.82),
                ("ONNX Runtime", 2.56), ("ONNX Runtime + CUDA Graphs", 2.11))


def plan(device, dtype, quick):
    """The sweeps of the study for this device: [dict(group, name, model, ...)]."""
    cpu = device == "cpu"
    S = []

    def add(group, name, model, modes="eager", batches="1", seq=None, op_cost=None, iters=None,
            warmup=None, overhead=False, dt=None):
        S.append(dict(group=group, name=name, model=model, modes=modes, batches=batches, seq=seq,
                      op_cost=op_cost, iters=iters or it, warmup=warmup if warmup is not None else wu,
                      overhead=overhead, dtype=dt or dtype, protocol="sync" if cpu else "paper"))

    if cpu:
        # On a CPU ftengine's kernels, not its dispatcher, set the latency of real-size
        # models; small presets and short sequences keep the study within minutes and
        # give the dispatcher a chance to show (the emulation group adds a PyTorch-like cost).
        it, wu = (5, 1) if quick else (15, 2)
        main_model, main_seq = ("bert-tiny", 8) if quick else ("bert-mini", 16)
        # the dispatcher's share is largest on the smallest preset: the emulated costs show there
        emu_model, emu_seq = "bert-tiny", 8
        batches = "1,2,4,8,16,32" if quick else "1,2,4,8,16,32,64"
        shape_seq = 8
        shape_it = 3 if quick else 5
        width_batches = "1,2" if quick else "1,2,4"
        model_batches = "1" if quick else "1,2"
        model_seq = {"resnet-50": 64 if quick else 112, "wavlm-base": 4000 if quick else 8000}
        text_seq = 8 if quick else 16
    else:
        it, wu = (5, 1) if quick else (20, 2)
        main_model, main_seq = "bert-base", None
        emu_model, emu_seq = main_model, main_seq
        batches = "1,4,16,64" if quick else "1,2,4,8,16,32,64,128"
        shape_seq = None
        shape_it = it
        width_batches = "1,2,4" if quick else "1,2,4,8,16"
        model_batches = "1" if quick else "1,2,4,8"
        model_seq = {}
        text_seq = None
    add("main", "main-" + dtype, main_model, modes="eager,graph,static", batches=batches, seq=main_seq,
        overhead=True)
    if not cpu and dtype != "fp32":  # F7 compares with fp32
        add("main", "main-fp32", main_model, modes="eager", batches=batches, seq=main_seq, overhead=True,
            dt="fp32")
    for c in EMU_COSTS:
        add("emulation", "emu-%gus" % c, emu_model, batches=batches, seq=emu_seq, op_cost=c)
    add("width", "width-base", "bert-base", batches=width_batches, seq=shape_seq, iters=shape_it, warmup=1)
    add("width", "width-w2", "bert-base-w2", batches=width_batches, seq=shape_seq, iters=shape_it, warmup=1)
    for preset, layers in DEPTHS:
        add("depth", "depth-L%d" % layers, preset, batches="1", seq=shape_seq, iters=shape_it, warmup=1)
    for preset, _ in MODELS:
        add("models", "model-" + preset, preset, batches=model_batches,
            seq=model_seq.get(preset, text_seq), iters=shape_it, warmup=1)
    return S


def sweep_cmd(tool, s, device, outdir, threads):
    cmd = [tool, "sweep", s["model"], "--device", device, "--dtype", s["dtype"], "--modes", s["modes"],
           "--batches", s["batches"], "--iters", str(s["iters"]), "--warmup", str(s["warmup"]),
           "--protocol", s["protocol"], "--csv", os.path.join(outdir, s["name"] + ".csv"), "--resume",
           "--json", os.path.join(outdir, s["name"] + ".json")]
    if s["seq"]:
        cmd += ["--seq", str(s["seq"])]
    if s["op_cost"] is not None:
        cmd += ["--op-cost-us", "%g" % s["op_cost"]]
    if s["overhead"]:
        cmd.append("--overhead")
    if threads and device == "cpu":
        cmd += ["--threads", str(threads)]
    return cmd


def run_sweeps(tool, sweeps, device, outdir, threads):
    t0 = time.time()
    failed = []
    for k, s in enumerate(sweeps, 1):
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


# ---- the report ----

def load(outdir, sweeps):
    return {s["name"]: sd.read_rows(os.path.join(outdir, s["name"] + ".csv")) for s in sweeps}


def baselines(outdir):
    """Peer baselines (bench/baselines/hf_latency.py --json) in the report directory:
    {runner: {batch: median_ms}} plus their descriptions."""
    curves, notes = {}, []
    for p in sorted(glob.glob(os.path.join(outdir, "baseline*.json"))):
        try:
            with open(p) as f:
                d = json.load(f)
            for r in d.get("results", []):
                if r.get("median_ms") is not None:
                    key = "%s %s" % (r["runner"], d.get("dtype", ""))
                    curves.setdefault(key, {})[int(d["batch"])] = float(r["median_ms"])
            notes.append("%s: %s seq %s on %s (torch %s)" % (os.path.basename(p), d.get("model"), d.get("seq"),
                                                            d.get("device"), d.get("torch")))
        except (OSError, ValueError, KeyError, TypeError) as e:
            notes.append("%s: unreadable (%s)" % (os.path.basename(p), e))
    return curves, notes


def first_row(rows):
    return next((r for r in rows if r.get("commit")), None)


def fig_md(files, outdir, alt):
    pngs = [f for f in files if f.endswith(".png")]
    if not pngs:
        return ""
    rel = os.path.relpath(pngs[0], outdir)
    return "![%s](%s) ([SVG](%s))\n\n" % (alt, rel, rel[:-4] + ".svg")


def table(header, rows):
    out = "| " + " | ".join(header) + " |\n|" + "---|" * len(header) + "\n"
    for r in rows:
        out += "| " + " | ".join(str(x) for x in r) + " |\n"
    return out + "\n"


def ms(v):
    return "%.3f" % v if v is not None else "-"


def curve_table(curves, batches=None):
    """curves: [(label, {batch: ms})] -> a markdown table, batches as columns."""
    bs = batches or sorted(set(b for _, c in curves for b in c))
    return table(["", *("b%d" % b for b in bs)], [[lab, *(ms(c.get(b)) for b in bs)] for lab, c in curves])


def failures(data):
    out = []
    for name, rows in data.items():
        for r in rows:
            if r.get("status") not in ("ok", None):
                out.append("%s: %s batch %s: %s (%s)" % (name, r.get("mode"), r.get("batch"), r.get("status"),
                                                         r.get("error")))
    return out


def render(outdir, figures_only=False, args=None):
    meta_p = os.path.join(outdir, "study.json")
    if not os.path.exists(meta_p):
        print("report: %s has no study.json (run `make report` first)" % outdir)
        return 1
    with open(meta_p) as f:
        meta = json.load(f)
    sweeps = meta["sweeps"]
    device = meta["device"]
    dtype = meta["dtype"]
    cpu = device == "cpu"
    sd.STAT = meta.get("stat", "median")
    data = load(outdir, sweeps)
    by = {s["name"]: s for s in sweeps}
    import plot
    figs = {}
    can_plot = plot.have_matplotlib()
    main_name = "main-" + dtype
    main = data.get(main_name, [])
    mainspec = by[main_name]
    base_curves, base_notes = baselines(outdir)
    peer_runs = RP.load(outdir) if meta.get("peers") != "off" else {}  # bench/peers.py, this run
    seq_txt = ("sequence %s" % mainspec["seq"]) if mainspec["seq"] else "default length"
    main_desc = "%s, %s, %s" % (mainspec["model"], seq_txt, mainspec["dtype"])
    eager, graph, static = (sd.curve(main, m) for m in ("eager", "graph", "static"))
    emu = [(c, sd.curve(data.get("emu-%gus" % c, []), "eager")) for c in EMU_COSTS]
    emu = [(c, cv) for c, cv in emu if cv]
    by_layers = {}
    for preset, layers in DEPTHS:
        v = sd.at(data.get("depth-L%d" % layers, []), "eager", 1)
        if v is not None:
            by_layers[layers] = v
    fit = None
    if len(by_layers) >= 2:
        a, b, _ = V.linfit(sorted(by_layers), [by_layers[x] for x in sorted(by_layers)])
        fit = (a, b)
    model_pts = []
    for preset, label in MODELS:
        rows = data.get("model-" + preset, [])
        r1 = [r for r in sd.ok_rows(rows) if r["batch"] == "1"]
        if r1:
            model_pts.append((label, sd.fnum(r1[0].get("macs")), sd.latency(r1[0])))
    if can_plot:
        figs["latency"] = plot.latency_vs_batch(outdir, main, "Latency vs batch: " + main_desc,
                                                sorted(base_curves.items()) + RP.curve_rows(peer_runs, sd.STAT))
        figs["band"] = plot.overhead_band(outdir, main, "Framework overhead, eager: " + main_desc)
        figs["share"] = plot.overhead_share(outdir, main, "Overhead share vs batch: " + main_desc)
        figs["models"] = plot.models_vs_macs(outdir, model_pts, data.get("model-bert-base", main),
                                             "Latency vs MACs at batch 1 (eager)")
        figs["emu"] = plot.emulation(outdir, emu, data.get("emu-0us", main),
                                     "Emulated framework cost: %s, %s" % (
                                         by["emu-0us"]["model"],
                                         "sequence %s" % by["emu-0us"]["seq"] if by["emu-0us"]["seq"] else "default length"))
        figs["depth"] = plot.depth(outdir, by_layers, fit, data.get("depth-L12", main),
                                   "Depth at batch 1 (eager): BERT-base variants")
    if figures_only:
        n = sum(1 for v in figs.values() for f in v if f.endswith(".png"))
        print("plot: %d figures (PNG + SVG) in %s" % (n, outdir))
        return 0

    fr = first_row(main) or next((first_row(r) for r in data.values() if first_row(r)), {}) or {}
    L = []
    w = L.append
    w("# ftengine framework-tax report (%s%s)\n\n" % (device, ", QUICK" if meta["quick"] else ""))
    w("Generated by `make report` (bench/report.py) from ftengine's own measurements; every number and "
      "verdict below is computed from the CSV files in this directory. The study and its thresholds are "
      "described in docs/report.md; the paper is Fernandez et al., \"The Framework Tax\", EMNLP 2023.\n\n")
    w("## Setup\n\n")
    setup = [("device", fr.get("device_label", "?")), ("host CPU", fr.get("host", "?")),
             ("ftengine", "%s, commit %s" % (fr.get("ftengine_version", "?"), fr.get("commit", "?"))),
             ("build CUDA", fr.get("cuda_version") or "none"),
             ("CPU threads", fr.get("threads") or "n/a (CUDA)"),
             ("measured", "%s .. %s (UTC)" % (meta.get("started", "?"), meta.get("finished", "?"))),
             ("protocol", "synchronized forwards, latency = %s of the timed forwards (CPU execution is synchronous, "
                          "so the paper's back-to-back protocol times the same thing; on a shared host the "
                          "least-disturbed forward measures the engine, the median and mean are in the CSVs)"
              % sd.STAT if cpu else "the paper's: back-to-back forwards between two device syncs, latency = mean"),
             ("iterations", "main and emulation: %d timed after %d warm-up (+1 untimed first call); "
                            "width/depth/models: %d after 1" % (mainspec["iters"], mainspec["warmup"],
                                                             by["width-base"]["iters"])),
             ("mode", "QUICK (small presets, few iterations)" if meta["quick"] else "full")]
    la = meta.get("loadavg") or []
    if len(la) == 2 and None not in la:
        setup.append(("host load average", "%.1f at the start, %.1f at the end of the sweeps (1-minute; "
                                           "above the core count the host was shared and timings are noisy)"
                      % (la[0], la[1])))
    if meta.get("note"):
        setup.append(("note", meta["note"]))
    w(table(["", ""], setup))
    w("Sweeps (one CSV, JSON and log each):\n\n")
    w(table(["sweep", "model", "modes", "batches", "length", "dtype", "emulated cost"],
            [[s["name"], s["model"], s["modes"], s["batches"], s["seq"] or "default", s["dtype"],
              "%g us/op" % s["op_cost"] if s["op_cost"] is not None else "-"] for s in sweeps]))
    if cpu:
        w("On the CPU, real-size models are bound by ftengine's kernels, not its dispatcher, at every batch: "
          "this study therefore uses %s for the batch curves, sequence %s for the width and depth variants, "
          "short inputs for the per-model comparison (table above), and an emulated per-op framework cost "
          "(`--op-cost-us`, the emulation group) for \"what if this engine dispatched like PyTorch\". The "
          "verdicts are about what was measured here, not about a GPU.\n\n"
          % (main_desc, by["width-base"]["seq"]))
    if not can_plot:
        w("**No figures:** %s\n\n" % plot.INSTALL_HINT)
    bad = failures(data)
    if bad:
        w("Failed points (kept as rows with their status):\n\n" + "".join("- %s\n" % b for b in bad) + "\n")
    missing = [s["name"] for s in sweeps if not data.get(s["name"])]
    if missing:
        w("Sweeps without data yet (staged run?): %s\n\n" % ", ".join(missing))

    w("## Findings\n\nThresholds (bench/verdicts.py): %s.\n\n" % ", ".join(
        "%s %g" % kv for kv in V.THRESHOLDS.items()))

    # F1
    w("### F1: At small batch, eager latency is flat in batch size, then grows\n\n")
    w(fig_md(figs.get("latency", []), outdir, "latency vs batch"))
    w(curve_table([("eager", eager), ("graph", graph), ("static", static)] + RP.curve_rows(peer_runs, sd.STAT)))
    v = V.f1(eager)
    w("Eager plateau: latency within %.2fx of batch 1 up to batch %s.\n\n" % (
        V.T["plateau_factor"], V.plateau(eager)))
    emuspec = by["emu-0us"]
    emu_desc = "%s, %s" % (emuspec["model"], ("sequence %s" % emuspec["seq"]) if emuspec["seq"] else "default length")
    if emu:
        w("With an emulated framework cost per eager op (%s; emulation section), the plateau reaches: " % emu_desc
          + ", ".join("%g us/op: batch %s" % (c, V.plateau(cv)) for c, cv in emu) + ".\n\n")
    w(V.fmt(*v) + "\n\n")

    # F2
    w("### F2: At batch 1, eager > graph > static; the gaps shrink as batch grows\n\n")
    rows2 = []
    for b in sorted(set(eager) & set(graph)):
        rows2.append([b, ms(eager.get(b)), ms(graph.get(b)), ms(static.get(b)),
                      "%.2f" % (eager[b] / graph[b]),
                      "%.2f" % (graph[b] / static[b]) if b in static else "-"])
    w(table(["batch", "eager ms", "graph ms", "static ms", "eager/graph", "graph/static"], rows2))
    w(V.fmt(*V.f2(eager, graph, static, static_is_graph=cpu)) + "\n\n")

    # F3
    wb, ww = (sd.curve(data.get(n, []), "eager") for n in ("width-base", "width-w2"))
    mb = sd.fnum((sd.ok_rows(data.get("width-base", [])) or [{}])[0].get("macs"))
    mw = sd.fnum((sd.ok_rows(data.get("width-w2", [])) or [{}])[0].get("macs"))
    w("### F3: Wider layers are nearly free at small batch in the framework-bound regime\n\n")
    w("BERT-base against bert-base-w2 (hidden 1536, FFN 6144, 24 heads of 64), eager, %s.\n\n" % (
        "sequence %s" % by["width-base"]["seq"] if by["width-base"]["seq"] else "default length"))
    w(curve_table([("bert-base", wb), ("bert-base-w2", ww)]))
    if mb and mw:
        w("MACs at batch 1: %.2f G vs %.2f G (%.2fx).\n\n" % (mb / 1e9, mw / 1e9, mw / mb))
    w(V.fmt(*V.f3(wb, ww)) + "\n\n")

    # F4
    w("### F4: Depth adds a near-constant cost per layer at batch 1\n\n")
    w(fig_md(figs.get("depth", []), outdir, "depth"))
    w(table(["layers", "eager ms at batch 1"], [[k, ms(by_layers[k])] for k in sorted(by_layers)]))
    w(V.fmt(*V.f4(by_layers)) + "\n\n")

    # F5, F6
    def model_curve(preset):
        rows = data.get("model-" + preset, [])
        macs = sd.fnum((sd.ok_rows(rows) or [{}])[0].get("macs"))
        return sd.curve(rows, "eager"), macs
    bert_c, bert_m = model_curve("bert-base")
    w("### F5: Funnel is not faster than BERT at small batch despite fewer MACs\n\n")
    w(fig_md(figs.get("models", []), outdir, "latency vs MACs"))
    mrows = []
    for preset, label in MODELS:
        c, m = model_curve(preset)
        spec = by["model-" + preset]
        mrows.append([label, spec["seq"] or "default", "%.2f" % (m / 1e9) if m else "-",
                      *(ms(c.get(b)) for b in (1, 2))])
    w(table(["model", "input length", "GMACs (b1)", "eager ms b1", "eager ms b2"], mrows))
    fc, fm = model_curve("funnel-small")
    w(V.fmt(*V.slower_than_bert("Funnel", fc, bert_c, fm, bert_m, "not faster")) + "\n\n")
    w("### F6: MobileBERT is slower than BERT at small batch despite ~4x fewer MACs\n\n")
    mc, mm = model_curve("mobilebert-uncased")
    w("(Table under F5.)\n\n")
    w(V.fmt(*V.slower_than_bert("MobileBERT", mc, bert_c, mm, bert_m, "slower")) + "\n\n")

    # F7
    w("### F7: fp16 stays framework-bound up to a larger batch than fp32\n\n")
    if cpu:
        v7 = V.f7({}, {}, measurable=False,
                  why="not measurable on the CPU: the CPU backend has no fp16 tensor-core path that would shorten "
                      "kernel time the way fp16 does on a GPU, so the study does not run fp16 here")
    else:
        c16 = eager if dtype == "fp16" else sd.curve(data.get("main-fp16", []), "eager")
        c32 = sd.curve(data.get("main-fp32", []), "eager")
        w(curve_table([("eager fp16", c16), ("eager fp32", c32)]))
        v7 = V.f7(c16, c32)
    w(V.fmt(*v7) + "\n\n")

    # F8
    w("### F8: The static (CUDA Graph) advantage over graph mode vanishes at large batch\n\n")
    w(fig_md(figs.get("share", []), outdir, "overhead share"))
    w(V.fmt(*V.f8(graph, static, static_is_graph=cpu)) + "\n\n")

    # overhead and emulation
    w("## Framework overhead and the emulation study\n\n")
    w(fig_md(figs.get("band", []), outdir, "overhead band"))
    tot = sd.curve(main, "eager", lambda r: sd.fnum(r.get("profiled_ms")))
    busy = sd.curve(main, "eager", lambda r: sd.fnum(r.get("busy_ms")))
    share = {m: sd.curve(main, m, lambda r: sd.fnum(r.get("overhead_share"))) for m in ("eager", "graph", "static")}
    w("Profiled pass (eager): total per forward, time inside %s, overhead share per mode.\n\n" % (
        "kernels (CPU: the kernels' launch phases)" if cpu else "kernels (CUPTI)"))
    w(table(["batch", "eager total ms", "eager in kernels ms", "eager share", "graph share", "static share"],
            [[b, ms(tot.get(b)), ms(busy.get(b)),
              *("%.1f%%" % (100 * share[m][b]) if b in share[m] else "-" for m in ("eager", "graph", "static"))]
             for b in sorted(tot)]))
    w("Emulation study (%s): eager latency when every eager op also pays an emulated framework cost "
      "(`--op-cost-us`), i.e. what this engine would measure if it dispatched like PyTorch.\n\n" % emu_desc)
    w(fig_md(figs.get("emu", []), outdir, "emulation"))
    if emu:
        w(curve_table([("%g us/op" % c, cv) for c, cv in emu]))

    # Table 3
    w("## Table 3: the paper's numbers beside ftengine's\n\n")
    w("The paper's rows are **the paper's measurements** (BERT-base, fp16, batch 1, sequence 128, RTX 8000 "
      "with a Xeon W-2295 host; ../shared/specs/paper.md 2.1), not ours. ftengine's rows are this report's "
      "batch-1 latencies of %s on %s.\n\n" % (main_desc, fr.get("device_label", "?")))
    t3 = [["paper: " + n, "%.2f" % v, "RTX 8000 (paper)"] for n, v in PAPER_TABLE3]
    for m in ("eager", "graph", "static"):
        c = sd.curve(main, m)
        t3.append(["ftengine " + m + (" (no CUDA Graph on the CPU)" if cpu and m == "static" else ""),
                   ms(c.get(1)), "this report"])
    for k, c in sorted(base_curves.items()):
        t3.append(["peer baseline: " + k, ms(c.get(1)), "this report's host (hf_latency.py)"])
    t3 += RP.table3_rows(peer_runs, sd.STAT)
    w(table(["runtime", "latency ms (batch 1)", "measured on"], t3))
    if base_notes:
        w("Peer baselines read: " + "; ".join(base_notes) + "\n\n")
    else:
        w("No peer baseline in this directory (bench/baselines/hf_latency.py --json DIR/baseline-*.json adds them).\n\n")
    w(RP.section_md(peer_runs, sd.STAT, meta.get("peers_note")))
    w("## Files\n\n" + ", ".join(sorted(os.path.basename(p) for p in glob.glob(os.path.join(outdir, "*"))
                                        if p.endswith((".csv", ".json", ".png", ".svg")))) + "\n")
    with open(os.path.join(outdir, "report.md"), "w") as f:
        f.write("".join(L))
    print("report: wrote %s" % os.path.join(outdir, "report.md"))
    return 0


def loadavg():
    """The host's 1-minute load average (a shared host makes timings noisy), or None."""
    try:
        with open("/proc/loadavg") as f:
            return float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


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
    ap.add_argument("--no-peers", action="store_true", help="no PyTorch/TorchScript/ONNX Runtime runs (PEERS=0)")
    ap.add_argument("--note", default=os.environ.get("REPORT_NOTE", ""), help="a line for the setup table")
    a = ap.parse_args(argv[1:])
    dtype = a.dtype or ("fp32" if a.device == "cpu" else "fp16")
    if dtype not in ("fp32", "fp16", "bf16"):
        ap.error("--dtype must be fp32, fp16 or bf16")
    os.makedirs(a.dir, exist_ok=True)
    sweeps = plan(a.device, dtype, a.quick)
    only = [g for g in a.only.split(",") if g]
    for g in only:
        if g not in GROUPS:
            ap.error("unknown group %s (%s)" % (g, ", ".join(GROUPS)))
    meta_p = os.path.join(a.dir, "study.json")
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    if os.path.exists(meta_p):
        try:
            with open(meta_p) as f:
                old = json.load(f)
            if (old.get("device"), old.get("dtype"), old.get("quick")) == (a.device, dtype, a.quick):
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
                                    a.threads)
    if a.no_peers:
        peers_note = "not run (PEERS=0)"
    elif peer_jobs and not a.no_sweeps and (not only or "main" in only):
        RP.run(a.dir, a.tool, peer_jobs)
    meta = {"device": a.device, "dtype": dtype, "quick": a.quick, "sweeps": sweeps, "started": started,
            "stat": "min" if a.device == "cpu" else "mean",
            "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "note": a.note,
            "loadavg": [load0, loadavg()], "peers": "off" if a.no_peers else "on", "peers_note": peers_note}
    with open(meta_p, "w") as f:
        json.dump(meta, f, indent=1)
    return render(a.dir, args=a)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
