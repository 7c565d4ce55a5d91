"""report_text.py - report.md and the figures of a report directory (bench/report.py
runs the sweeps and calls render()): every number from the CSVs, every latency the
median over rounds with its interval (bench/studydata.py), every verdict from
bench/verdicts.py. Peer measurements (other runtimes on this host) plug in as
series: peer_series() returns them (bench/peers.py's runs via bench/report_peers.py,
and bench/baselines/hf_latency.py's files), Table 3 gets a row and, for a peer on the
main sweep's model and length, the latency figure a curve and the F1 table a column
for each; report_peers.section_md() adds the side-by-side section with the
mode-vs-framework verdicts.
"""
import glob
import json
import os

import report_peers as RP
import studydata as sd
import verdicts as V

# The paper's Table 3 (BERT-base, fp16, batch 1, sequence 128, RTX 8000 with a Xeon
# W-2295 host; Fernandez et al. 2023, Table 3).
PAPER_TABLE3 = (("PyTorch (eager)", 10.54), ("TorchScript", 6.14), ("PyTorch + CUDA Graphs", 2.82),
                ("ONNX Runtime", 2.56), ("ONNX Runtime + CUDA Graphs", 2.11))
MODES = ("eager", "graph", "static")
EMU_TABLE3_COST = 8  # us per op/step for Table 3's emulated rows: inside the paper's 4-17 us per call


def table(header, rows):
    out = "| " + " | ".join(header) + " |\n|" + "---|" * len(header) + "\n"
    for r in rows:
        out += "| " + " | ".join(str(x) for x in r) + " |\n"
    return out + "\n"


def est(e, digits=3):
    return e.fmt(digits) if e is not None else "-"


def ms(v):
    return "%.3f" % v if v is not None else "-"


def fig_md(files, outdir, alt):
    pngs = [f for f in files if f.endswith(".png")]
    if not pngs:
        return ""
    rel = os.path.relpath(pngs[0], outdir)
    return "![%s](%s) ([SVG](%s))\n\n" % (alt, rel, rel[:-4] + ".svg")


def first_row(rows):
    return next((r for r in rows if r.get("commit")), None)


def failures(data):
    out = []
    for name, rows in data.items():
        seen = set()
        for r in rows:
            if r.get("status") not in ("ok", None):
                key = (r.get("model"), r.get("mode"), r.get("batch"), r.get("op_cost_us"))
                if key in seen:
                    continue
                seen.add(key)
                out.append("%s: %s %s batch %s: %s (%s)" % (name, r.get("model"), r.get("mode"), r.get("batch"),
                                                           r.get("status"), r.get("error")))
    return out


def peer_series(outdir, meta=None):
    """Measured peer runtimes in the report directory, as series for Table 3, the latency
    figure and the F1 table: ([dict(label, points={batch: Est}, measured_on, note, curve,
    table3_label)], notes). Sources: the peer runs of bench/peers.py (peers-*.json, written
    by `make report` unless PEERS=0; the same statistic as the sweeps: median over rounds
    with its interval) and bench/baselines/hf_latency.py --json DIR/baseline-*.json
    (median of its forwards, no interval unless the file gives ci_lo_ms/ci_hi_ms).
    curve: the series is on the main sweep's model and length (a curve in the figure)."""
    series, notes = {}, []
    for p in sorted(glob.glob(os.path.join(outdir, "baseline*.json"))):
        try:
            with open(p) as f:
                d = json.load(f)
            for r in d.get("results", []):
                if r.get("median_ms") is None:
                    continue
                key = "%s %s" % (r["runner"], d.get("dtype", ""))
                lo, hi = r.get("ci_lo_ms"), r.get("ci_hi_ms")
                e = sd.Est(float(r["median_ms"]), lo, hi, r.get("ci_level", 0.0), r.get("rounds", 1))
                s = series.setdefault(key, dict(label="peer: " + key, points={}, measured_on=d.get("device", "?"),
                                                note="hf_latency.py", curve=True))
                s["points"][int(d["batch"])] = e
            notes.append("%s: %s seq %s on %s (torch %s)" % (os.path.basename(p), d.get("model"), d.get("seq"),
                                                            d.get("device"), d.get("torch")))
        except (OSError, ValueError, KeyError, TypeError) as e:
            notes.append("%s: unreadable (%s)" % (os.path.basename(p), e))
    out = [series[k] for k in sorted(series)]
    if (meta or {}).get("peers") != "off":
        pk = RP.load(outdir)
        for s in RP.series(pk):
            s["table3_label"] = "%s, %s length %s, fp32, %d thread(s)" % (
                RP.LABELS[s["peer"]], s["model"], s["size"], s["threads"])
            out.append(s)
        for job, res in sorted(pk.items()):
            notes.append("%s.json: %s, %d row(s), commit %s" % (job, ", ".join(res.get("job", {}).get("models", [])),
                                                                len(res.get("rows", [])), res.get("commit")))
    return out, notes


def model_desc(spec, i=0):
    m, ln = spec["models"][i]
    return "%s, %s, %s" % (m, "length %s" % ln if ln else "default length", spec["dtype"])


def level_text(rows):
    """"5 rounds, 94% intervals" for a sweep's rows."""
    n = len(set(sd.round_of(r) for r in sd.ok_rows(rows)))
    _, lvl = sd.ci_rank(n)
    return "%d round%s%s" % (n, "" if n == 1 else "s", ", %.0f%% intervals" % (100 * lvl) if lvl else ", no interval")


class Study:
    """The report directory's data, read once."""

    def __init__(self, outdir):
        with open(os.path.join(outdir, "study.json")) as f:
            self.meta = json.load(f)
        self.outdir = outdir
        self.sweeps = self.meta["sweeps"]
        self.by = {s["name"]: s for s in self.sweeps}
        self.data = {s["name"]: sd.read_rows(os.path.join(outdir, s["name"] + ".csv")) for s in self.sweeps}
        self.device = self.meta["device"]
        self.dtype = self.meta["dtype"]
        self.cpu = self.device == "cpu"
        self.main_name = "main-" + self.dtype
        self.main = self.data.get(self.main_name, [])
        self.mainspec = self.by.get(self.main_name)
        self.emu = self.data.get("emulation", [])
        self.emuspec = self.by.get("emulation")

    def rounds(self, name, mode="eager", key=sd.round_value, **filt):
        return sd.rounds(self.data.get(name, []), mode, key, **filt)

    def emu_costs(self):
        return sorted(set(sd.fnum(r.get("op_cost_us")) for r in sd.ok_rows(self.emu)) - {None})


def split_rows(st, rows, a, b, batches):
    """Table rows of the a-vs-b gap split at each batch."""
    lat = {m: sd.rounds(rows, m) for m in (a, b)}
    ker = {m: sd.rounds(rows, m, key=sd.kernel_ms) for m in (a, b)}
    out = []
    for bt in batches:
        if bt not in lat[a] or bt not in lat[b]:
            continue
        sp = V.gap_split(lat[a][bt], lat[b][bt], ker[a].get(bt, {}), ker[b].get(bt, {}))
        out.append([bt, "%s - %s" % (a, b), est(sp["gap"]), est(sp["kernel"]), est(sp["host"]),
                    sp["share"].fmt(0, 100, "%") if sp["share"] else "-", V.dominates(sp)])
    return out


def split_sentence(rows, a, b, batch, what):
    lat = {m: sd.rounds(rows, m) for m in (a, b)}
    ker = {m: sd.rounds(rows, m, key=sd.kernel_ms) for m in (a, b)}
    if batch not in lat[a] or batch not in lat[b]:
        return "", None
    sp = V.gap_split(lat[a][batch], lat[b][batch], ker[a].get(batch, {}), ker[b].get(batch, {}))
    dom = V.dominates(sp)
    if sp["gap"] is None or sp["kernel"] is None:
        return "%s: the %s-%s gap at batch %d has no split (no profiled pass)" % (what, a, b, batch), dom
    return ("%s: the %s-%s gap at batch %d is %s ms, of which kernel time %s ms and dispatch/host time %s ms "
            "(kernel share %s): **%s dominates**" % (
                what, a, b, batch, est(sp["gap"]), est(sp["kernel"]), est(sp["host"]),
                sp["share"].fmt(0, 100, "%") if sp["share"] else "-", dom)
            if dom in ("kernel time", "dispatch/host time") else
            "%s: the %s-%s gap at batch %d is %s ms, of which kernel time %s ms and dispatch/host time %s ms: %s" % (
                what, a, b, batch, est(sp["gap"]), est(sp["kernel"]), est(sp["host"]), dom)), dom


def study_files(outdir, meta):
    """The folder's files this report was made from: the planned sweeps' CSV/JSON,
    study.json, the peers' and baselines' JSON and the figures; a sweep an earlier
    plan left there is not one of them."""
    names = {s["name"] for s in meta.get("sweeps", [])}
    keep = []
    for p in glob.glob(os.path.join(outdir, "*")):
        base = os.path.basename(p)
        stem, ext = os.path.splitext(base)
        if ext in (".png", ".svg") or (ext in (".csv", ".json") and (
                stem in names or stem == "study" or stem.startswith(("peers-", "baseline")))):
            keep.append(base)
    return sorted(keep)


def render(outdir, figures_only=False):
    import plot
    if not os.path.exists(os.path.join(outdir, "study.json")):
        print("report: %s has no study.json (run `make report` first)" % outdir)
        return 1
    st = Study(outdir)
    meta, data, by, cpu, main = st.meta, st.data, st.by, st.cpu, st.main
    peers, peer_notes = peer_series(outdir, meta)
    ms_ = st.mainspec
    main_desc = model_desc(ms_) if ms_ else "?"
    own = meta.get("model")
    mode_rounds = {m: sd.rounds(main, m) for m in MODES}
    mode_curves = {m: sd.curve(main, m) for m in MODES}
    costs = st.emu_costs()
    emu_curves = [(c, {m: sd.curve(st.emu, m, op_cost=c) for m in MODES}) for c in costs]
    # depth and the models
    by_layers_r, by_layers = {}, {}
    dspec = by.get("depth")
    if dspec:
        for (preset, _), (_, layers) in zip(dspec["models"], _depths()):
            rr = st.rounds("depth", model=preset, batch=1).get(1)
            if rr:
                by_layers_r[layers] = rr
                by_layers[layers] = sd.estimate(list(rr.values()))
    model_pts, model_rows, model_rounds = [], [], {}
    for name in sorted(n for n in by if n.startswith("models-")):
        rows = data.get(name, [])
        for preset, length in by[name]["models"]:
            if preset in model_rounds:
                continue
            rr = sd.rounds(rows, "eager", model=preset)
            macs = sd.first_value(rows, lambda r: sd.fnum(r.get("macs")), model=preset, batch=1)
            model_rounds[preset] = (rr, macs, name, length)
    can_plot = plot.have_matplotlib()
    figs = {}
    if can_plot:
        cap = plot.caption_of(main)
        series = plot.mode_series(main) + [dict(label=p["label"], points=p["points"],
                                                style=dict(linestyle="--", marker=".")) for p in peers if p["curve"]]
        figs["latency"] = plot.latency_vs_batch(outdir, series, "Latency vs batch: " + main_desc, cap)
        kern = sd.curve(main, "eager", key=sd.kernel_ms)
        figs["band"] = plot.overhead_band(outdir, mode_curves["eager"], kern, "Kernel vs dispatch/host time, eager: "
                                          + main_desc, cap)
        shares = {m: sd.curve(main, m, key=lambda r: (sd.host_ms(r) / sd.round_value(r))
                              if sd.host_ms(r) is not None and sd.round_value(r) else None) for m in MODES}
        figs["share"] = plot.overhead_share(outdir, shares, "Dispatch/host share of the latency: " + main_desc, cap)
        panels = []
        for panel, title in _panels():
            pts = []
            for m in _models():
                if m["panel"] == panel and m["preset"] in model_rounds:
                    rr, macs, _, _ = model_rounds[m["preset"]]
                    if 1 in rr:
                        pts.append((m["label"], macs, sd.estimate(list(rr[1].values()))))
            panels.append((title, pts))
        anyrows = next((data[n] for n in by if n.startswith("models-") and data.get(n)), main)
        figs["models"] = plot.models_vs_macs(outdir, panels, "Latency vs MACs at batch 1 (eager)",
                                             plot.caption_of(anyrows))
        ec = []
        for c, cv in emu_curves:
            ec.append(("%g us eager" % c, cv["eager"], "-"))
            ec.append(("%g us graph" % c, cv["graph"], ":"))
        if st.emuspec:
            figs["emu"] = plot.emulation(outdir, ec, "Emulated framework cost: " + model_desc(st.emuspec),
                                         plot.caption_of(st.emu, " | per eager op and per graph step"))
        fitline = None
        if len(by_layers_r) >= 2:
            _, slope, icpt = V.depth_fits(by_layers_r)
            if slope and icpt:
                fitline = (icpt.med, slope.med)
        figs["depth"] = plot.depth(outdir, by_layers, fitline, "Depth at batch 1 (eager): BERT-base variants",
                                   plot.caption_of(data.get("depth", main)))
    if figures_only:
        n = sum(1 for v in figs.values() for f in v if f.endswith(".png"))
        print("plot: %d figures (PNG + SVG) in %s" % (n, outdir))
        return 0

    fr = first_row(main) or next((first_row(r) for r in data.values() if first_row(r)), {}) or {}
    L = []
    w = L.append
    w("# ftengine framework-tax report (%s%s%s)\n\n" % (st.device, ", QUICK" if meta.get("quick") else "",
                                                        ", MODEL=%s" % own if own else ""))
    if cpu:
        w("**Where this was verified.** Every number below was measured on a CPU (%s; host: %s). ftengine's CPU "
          "backend is checked against Hugging Face golden outputs, and its CUDA backend only for correctness, on "
          "a host emulator of the device (no timing); it has not run on a GPU yet. So nothing in this report is "
          "a GPU measurement, and the findings that are about GPU execution (CUDA Graphs, fp16) are not tested "
          "by it.\n\n" % (fr.get("device_label", "?"), fr.get("host", "?")))
    else:
        w("**Where this was verified.** Every number below was measured on %s (host CPU: %s).\n\n" % (
            fr.get("device_label", "?"), fr.get("host", "?")))
    la = meta.get("loadavg") or []
    prov = "**Provenance.** commit %s, measured %s .. %s (UTC)" % (fr.get("commit", "?"), meta.get("started", "?"),
                                                               meta.get("finished", "?"))
    if len(la) == 2 and None not in la:
        prov += "; host load average %.1f at the start, %.1f at the end (1-minute; above the core count the host " \
                "was shared and timings are noisy, which the intervals show)" % (la[0], la[1])
    if meta.get("note"):
        prov += ". " + meta["note"]
    w(prov + ".\n\n")
    w("**The statistic.** Each sweep measures in interleaved rounds: a round visits every point (model, emulated "
      "cost, mode, batch) once, in an order shuffled per round (seed recorded in the CSVs), so a change of host "
      "load lands on every point alike. A latency is the **median over rounds** of each round's median forward"
      "%s, shown with its **[interval]**: the distribution-free confidence interval of that median from the "
      "rounds' order statistics (its coverage depends on the number of rounds, given per sweep below). A ratio "
      "or difference of two points of one sweep is taken round by round, then summarised the same way. `min` "
      "columns are the fastest single forward of any round. A verdict is \"holds\" or \"does not hold\" only when "
      "the intervals it rests on are clear of its thresholds; otherwise it is \"inconclusive (within noise)\" "
      "with the numbers (bench/verdicts.py).\n\n" % ("" if cpu else " (the paper's protocol: each round's mean of "
                                                      "back-to-back forwards)"))
    w("## Setup\n\n")
    setup = [("device", fr.get("device_label", "?")), ("host CPU", fr.get("host", "?")),
             ("ftengine", "%s, commit %s" % (fr.get("ftengine_version", "?"), fr.get("commit", "?"))),
             ("build CUDA", fr.get("cuda_version") or "none"),
             ("CPU threads", fr.get("threads") or "n/a (CUDA)"),
             ("protocol", "synchronized forwards (each timed alone; CPU execution is synchronous)" if cpu else
              "the paper's: back-to-back forwards between two device syncs, a round's value = their mean"),
             ("mode", "QUICK (small presets, few iterations)" if meta.get("quick") else "full"),
             ("peers", meta["peers_note"] if meta.get("peers_note") else
              "PyTorch eager, TorchScript, ONNX Runtime where present (bench/peers.py; section \"ftengine's modes "
              "against the frameworks\")" if meta.get("peers") == "on" else "-"),
             ("report Python", meta.get("python", "?") + ("" if can_plot else " (no matplotlib: no figures)"))]
    w(table(["", ""], setup))
    w("Sweeps (one CSV, JSON and log each; per visit 1 untimed forward, the warm-up, then the timed ones; "
      "`--overhead` adds a profiled pass of as many forwards in the same visit):\n\n")
    w(table(["sweep", "models (length)", "modes", "batches", "emulated cost us", "dtype", "rounds x iters (warm-up)",
             "measured"],
            [[s["name"], ", ".join("%s (%s)" % (m, ln or "default") for m, ln in s["models"]), s["modes"],
              s["batches"], ",".join("%g" % c for c in s["costs"]) if s.get("costs") else "-", s["dtype"],
              "%d x %d (%d)" % (s.get("rounds", 1), s["iters"], s["warmup"]), level_text(data.get(s["name"], []))]
             for s in st.sweeps]))
    if meta.get("skipped_presets"):
        w("Presets of the per-model list this build of the tool does not know, skipped: %s.\n\n"
          % ", ".join(meta["skipped_presets"]))
    if cpu and not own:
        w("On the CPU, real-size models are bound by ftengine's kernels, not its dispatcher, at every batch: "
          "this study therefore uses %s for the batch curves, short inputs for the width, depth and per-model "
          "comparisons, and an emulated framework cost (`--op-cost-us` per eager op, `--step-cost-us` per "
          "graph-mode step: a PyTorch-like dispatcher and a TorchScript-like interpreter) for \"what if this "
          "engine paid a framework's per-call cost\". The verdicts are about what was measured here.\n\n" % main_desc)
    if own:
        w("A per-model study (`make report MODEL=%s`): the main and emulation sweeps on this model; the findings "
          "that need BERT variants or other models (F3-F7) are not part of it.\n\n" % own)
    if not can_plot:
        w("**No figures:** %s\n\n" % plot.INSTALL_HINT)
    bad = failures(data)
    if bad:
        w("Failed points (kept as rows with their status):\n\n" + "".join("- %s\n" % b for b in bad) + "\n")
    missing = [s["name"] for s in st.sweeps if not data.get(s["name"])]
    if missing:
        w("Sweeps without data yet (staged run?): %s\n\n" % ", ".join(missing))

    w("## Findings\n\nThresholds (bench/verdicts.py): %s.\n\n" % ", ".join(
        "%s %g" % kv for kv in V.THRESHOLDS.items()))

    _f1(w, st, figs, mode_rounds, mode_curves, emu_curves, main_desc, [p for p in peers if p["curve"]])
    _f2(w, st, mode_rounds, main_desc)
    _f3_to_f6(w, st, figs, by_layers_r, model_rounds)
    _f7_f8(w, st, figs, mode_rounds)
    _overhead(w, st, figs, main_desc)
    _table3(w, st, peers, peer_notes, main_desc, fr)
    w(RP.section_md(RP.load(outdir) if meta.get("peers") != "off" else {}, "median", meta.get("peers_note")))
    w("## Files\n\n" + ", ".join(study_files(outdir, meta)) + "\n")
    with open(os.path.join(outdir, "report.md"), "w") as f:
        f.write("".join(L))
    print("report: wrote %s" % os.path.join(outdir, "report.md"))
    return 0


def _depths():
    import report
    return report.DEPTHS


def _models():
    import report
    return report.MODELS


def _panels():
    import report
    return report.PANELS


def _f1(w, st, figs, mode_rounds, mode_curves, emu_curves, main_desc, peer_curves=()):
    w("### F1: At small batch, eager latency is flat in batch size, then grows\n\n")
    w(fig_md(figs.get("latency", []), st.outdir, "latency vs batch"))
    mins = {m: sd.min_curve(st.main, m) for m in MODES}
    bs = sorted(set(b for m in MODES for b in mode_curves[m]))
    w("Latency of %s, ms: median over rounds [interval]; min = the fastest forward (same sweep, same rounds).\n\n"
      % main_desc)
    w(table(["batch", *("%s ms" % m for m in MODES), *("%s min" % m for m in MODES)],
            [[b, *(est(mode_curves[m].get(b)) for m in MODES), *(ms(mins[m].get(b)) for m in MODES)] for b in bs]))
    if peer_curves:
        pb = sorted(set(b for p in peer_curves for b in p["points"]))
        w("The frameworks on the same model, length and batches, ms (median over rounds [interval], the same "
          "statistic; the dashed curves of the figure): %s. Their rounds are those of the peer run, which times "
          "ftengine's modes again beside them; the ratios to ftengine, round by round, are in the section \"ftengine's "
          "modes against the frameworks\" below.\n\n" % "; ".join(sorted(set(p["note"] for p in peer_curves))))
        w(table(["batch", *("%s ms" % p["label"].split(" (")[0] for p in peer_curves)],
                [[b, *(est(p["points"].get(b)) for p in peer_curves)] for b in pb]))
    surely, possibly, _ = V.plateau_bounds(mode_rounds["eager"])
    if surely is not None:
        w("Eager plateau (latency within %.2fx of batch 1): surely up to batch %s, possibly up to batch %s.\n\n"
          % (V.T["plateau_factor"], surely, possibly))
    if emu_curves and st.emuspec:
        parts = []
        for c, _ in emu_curves:
            s_, p_, _ = V.plateau_bounds(sd.rounds(st.emu, "eager", op_cost=c))
            parts.append("%g us/op: batch %s (possibly %s)" % (c, s_, p_))
        w("With an emulated framework cost per eager op (%s; emulation section), the plateau reaches: %s.\n\n"
          % (model_desc(st.emuspec), ", ".join(parts)))
    w(V.fmt(*V.f1(mode_rounds["eager"])) + "\n\n")


def _f2(w, st, mode_rounds, main_desc):
    w("### F2: At batch 1, eager > graph > static; the gaps shrink as batch grows\n\n")
    e, g, s = (mode_rounds[m] for m in MODES)
    common = sorted(set(e) & set(g))
    rows = []
    for b in common:
        rows.append([b, V.ci_text(sd.ratio(e[b], g[b])),
                     V.ci_text(sd.ratio(g[b], s[b])) if b in s else "-"])
    w("Ratios of %s, taken round by round (median [interval]):\n\n" % main_desc)
    w(table(["batch", "eager/graph", "graph/static"], rows))
    w("**Where each gap comes from.** Each gap split into kernel time (the profiled pass's time inside kernels, in "
      "the same visit: on the CPU the kernels' launch phases, on CUDA CUPTI's kernel/copy time) and dispatch/host "
      "time (the rest of the latency: the dispatcher's phases, the model code between ops, an interpreter), "
      "per batch, in ms, round by round:\n\n")
    sr = split_rows(st, st.main, "eager", "graph", common) + split_rows(st, st.main, "graph", "static", common)
    w(table(["batch", "gap", "gap ms", "kernel part ms", "dispatch/host part ms", "kernel share", "dominates"], sr))
    sent, dom = split_sentence(st.main, "eager", "graph", 1, "Measured")
    if sent:
        w(sent + ". ")
        if dom == "kernel time":
            w("Here the eager-graph gap is kernel work graph mode does not do (fusion: fewer, larger kernels, fewer "
              "passes over memory), not the framework tax: ftengine's eager dispatcher is a few microseconds per op. "
              "The paper's PyTorch-TorchScript gap is framework overhead; the emulation study below is this "
              "report's stand-in for it.\n\n")
        elif dom == "dispatch/host time":
            w("Here the eager-graph gap is dispatch/host time: the framework tax the paper measures.\n\n")
        else:
            w("\n\n")
    c = EMU_TABLE3_COST if EMU_TABLE3_COST in st.emu_costs() else (st.emu_costs() or [None])[-1]
    if c is not None:
        er = {m: sd.rounds(st.emu, m, op_cost=c) for m in MODES}
        if 1 in er["eager"] and 1 in er["graph"]:
            v = V.f2(er["eager"], er["graph"], er["static"], static_is_graph=False)
            sent2, _ = split_sentence([r for r in st.emu if sd.fnum(r.get("op_cost_us")) == c], "eager", "graph", 1,
                                      "Emulated (%g us per eager op and per graph step, %s)" % (c, model_desc(st.emuspec)))
            w("Under emulation the CPU can play the paper's frameworks: eager with %g us per op (PyTorch-like), graph "
              "with %g us per step (a TorchScript-like interpreter), static with none (a CUDA-Graph-like replay). "
              "There the F2 ordering test gives: %s (%s). %s.\n\n" % (c, c, v[0], v[1], sent2))
    w(V.fmt(*V.f2(e, g, s, static_is_graph=st.cpu)) + "\n\n")


def _f3_to_f6(w, st, figs, by_layers_r, model_rounds):
    w("### F3: Wider layers are nearly free at small batch in the framework-bound regime\n\n")
    wspec = st.by.get("width")
    if wspec:
        wr = st.data.get("width", [])
        base, wide = wspec["models"][0][0], wspec["models"][1][0]
        wb, ww = sd.rounds(wr, "eager", model=base), sd.rounds(wr, "eager", model=wide)
        bs = sorted(set(wb) & set(ww))
        w("BERT-base against bert-base-w2 (hidden 1536, FFN 6144, 24 heads of 64), eager, %s, both in the same "
          "rounds.\n\n" % ("length %s" % wspec["models"][0][1] if wspec["models"][0][1] else "default length"))
        w(table(["batch", "bert-base ms", "bert-base-w2 ms", "w2/base"],
                [[b, est(sd.estimate(list(wb[b].values()))), est(sd.estimate(list(ww[b].values()))),
                  V.ci_text(sd.ratio(ww[b], wb[b]))] for b in bs]))
        mb = sd.first_value(wr, lambda r: sd.fnum(r.get("macs")), model=base, batch=1)
        mw = sd.first_value(wr, lambda r: sd.fnum(r.get("macs")), model=wide, batch=1)
        if mb and mw:
            w("MACs at batch 1: %.2f G vs %.2f G (%.2fx).\n\n" % (mb / 1e9, mw / 1e9, mw / mb))
        w(V.fmt(*V.f3(wb, ww)) + "\n\n")
    else:
        w(V.fmt(V.INCON, "not part of this study") + "\n\n")

    w("### F4: Depth adds a near-constant cost per layer at batch 1\n\n")
    w(fig_md(figs.get("depth", []), st.outdir, "depth"))
    if by_layers_r:
        w(table(["layers", "eager ms at batch 1"],
                [[k, est(sd.estimate(list(by_layers_r[k].values())))] for k in sorted(by_layers_r)]))
        w(V.fmt(*V.f4(by_layers_r)) + "\n\n")
    else:
        w(V.fmt(V.INCON, "not part of this study" if "depth" not in st.by else "no depth measured yet") + "\n\n")

    _f5_f6(w, st, figs, model_rounds)


def _model_ratio(st, model_rounds, preset, ref):
    """(rounds of preset, rounds of ref in the same sweep, their MACs) or None."""
    if preset not in model_rounds:
        return None
    rr, macs, sweep, _ = model_rounds[preset]
    rows = st.data.get(sweep, [])
    brr = sd.rounds(rows, "eager", model=ref)
    if not brr:
        return None
    bm = sd.first_value(rows, lambda r: sd.fnum(r.get("macs")), model=ref, batch=1)
    return rr, brr, macs, bm


def _panel_verdict(st, model_rounds, panel):
    """F5's rule over one panel: its efficient models against its references."""
    models = [m for m in _models() if m["panel"] == panel and m["preset"] in model_rounds]
    refs = [m for m in models if m.get("ref")]
    pairs = []
    for m in models:
        if not m.get("efficient"):
            continue
        for r in refs:
            x = _model_ratio(st, model_rounds, m["preset"], r["preset"])
            if x is None:
                pairs.append((m["label"], r["label"], (V.INCON, "not measured")))
                continue
            rr, brr, macs, bm = x
            pairs.append((m["label"], r["label"], V.slower_than_bert(m["label"], rr, brr, macs, bm, "not faster",
                                                                     ref=r["label"])))
    return V.not_faster_panel(pairs), models, refs


def _f5_f6(w, st, figs, model_rounds):
    w("### F5: Efficient models are not faster than BERT at small batch despite fewer MACs\n\n")
    w(fig_md(figs.get("models", []), st.outdir, "latency vs MACs"))
    for panel, title in _panels():
        models = [m for m in _models() if m["panel"] == panel and m["preset"] in model_rounds]
        if not models:
            continue
        refs = [m for m in models if m.get("ref")]
        rows = []
        for m in models:
            rr, macs, sweep, length = model_rounds[m["preset"]]
            e1 = sd.estimate(list(rr[1].values())) if 1 in rr else None
            e2 = sd.estimate(list(rr[2].values())) if 2 in rr else None
            rel = []
            for r in refs:
                x = _model_ratio(st, model_rounds, m["preset"], r["preset"])
                rel.append(V.ci_text(sd.ratio(x[0][1], x[1][1])) if x and 1 in x[0] and 1 in x[1] and
                           r["preset"] != m["preset"] else "-")
            mn = sd.min_curve(st.data.get(sweep, []), "eager", model=m["preset"]).get(1)
            rows.append([m["label"] + (" (efficient)" if m.get("efficient") else ""), length or "its config's",
                         "%.2f" % (macs / 1e9) if macs else "-", est(e1), est(e2), *rel, ms(mn), sweep])
        w("%s panel: eager latency, ms (median over rounds [interval]); each ratio to a reference is taken round by "
          "round within the panel's sweep (all its models in the same rounds).\n\n" % title)
        w(table(["model", "input length", "GMACs (b1)", "b1 ms", "b2 ms", *("/ %s (b1)" % r["label"] for r in refs),
                 "b1 min ms", "sweep"], rows))
    skipped = st.meta.get("skipped_presets") or []
    if skipped:
        w("Skipped (not a preset of this build): %s.\n\n" % ", ".join(skipped))
    if not model_rounds:
        w(V.fmt(V.INCON, "not part of this study" if not any(n.startswith("models-") for n in st.by) else
                "no model measured yet") + "\n\n")
    else:
        (v, why), models, refs = _panel_verdict(st, model_rounds, "text")
        w("The text panel's efficient models (%s) against %s, each with fewer MACs at this input (a model without "
          "fewer MACs is no test): not faster when the ratio's interval is clearly >= %.2f.\n\n" % (
              ", ".join(m["label"] for m in models if m.get("efficient")), " and ".join(r["label"] for r in refs),
              V.T["not_faster"]))
        w(V.fmt(v, why) + "\n\n")
        for panel, title in _panels()[1:]:
            (pv, pwhy), pm, pr = _panel_verdict(st, model_rounds, panel)
            if any(m.get("efficient") for m in pm) and any(m["preset"] in model_rounds for m in pm):
                w("%s panel, the same rule (%s against %s): %s (%s).\n\n" % (
                    title, ", ".join(m["label"] for m in pm if m.get("efficient")),
                    " and ".join(r["label"] for r in pr), pv, pwhy))
    w("### F6: MobileBERT is slower than BERT at small batch despite ~4x fewer MACs\n\n")
    w("(Table under F5.)\n\n")
    x = _model_ratio(st, model_rounds, "mobilebert-uncased", "bert-base")
    if x is None:
        w(V.fmt(V.INCON, "MobileBERT or BERT-base not measured in this study") + "\n\n")
    else:
        rr, brr, macs, bm = x
        w(V.fmt(*V.slower_than_bert("MobileBERT", rr, brr, macs, bm, "slower")) + "\n\n")


def _f7_f8(w, st, figs, mode_rounds):
    w("### F7: fp16 stays framework-bound up to a larger batch than fp32\n\n")
    if st.cpu:
        v7 = V.f7({}, {}, measurable=False,
                  why="not measurable on the CPU: the CPU backend computes fp16 in f32 with conversions at every op "
                      "(slower than fp32, see `bench --dtype fp16`'s warning), with no tensor-core path that would "
                      "shorten kernel time the way fp16 does on a GPU, so the study does not run fp16 here")
    elif st.meta.get("model"):
        v7 = (V.INCON, "not part of a per-model study")
    else:
        c16 = mode_rounds["eager"] if st.dtype == "fp16" else sd.rounds(st.data.get("main-fp16", []), "eager")
        c32 = sd.rounds(st.data.get("main-fp32", []), "eager")
        w(table(["batch", "eager fp16 ms", "eager fp32 ms"],
                [[b, est(sd.estimate(list(c16[b].values()))) if b in c16 else "-",
                  est(sd.estimate(list(c32[b].values()))) if b in c32 else "-"] for b in sorted(set(c16) | set(c32))]))
        v7 = V.f7(c16, c32)
    w(V.fmt(*v7) + "\n\n")
    w("### F8: The static (CUDA Graph) advantage over graph mode vanishes at large batch\n\n")
    w(fig_md(figs.get("share", []), st.outdir, "dispatch/host share"))
    w(V.fmt(*V.f8(mode_rounds["graph"], mode_rounds["static"], static_is_graph=st.cpu)) + "\n\n")


def _overhead(w, st, figs, main_desc):
    w("## Where the time goes, and the emulation study\n\n")
    w(fig_md(figs.get("band", []), st.outdir, "kernel vs dispatch/host time"))
    w("%s, every column from the same visits of the same rounds (median over rounds [interval]): latency = the "
      "timed forwards; kernel time = the profiled pass's time inside kernels (%s); dispatch/host = latency - kernel "
      "time, round by round; dispatcher phases = check+infer+alloc+select of the profiled pass (part of "
      "dispatch/host); observer cost = the profiled pass's wall time per forward - the latency.\n\n" % (
          main_desc, "on the CPU the kernels' launch phases" if st.cpu else "CUPTI kernel, copy and memset time"))
    rows = []
    for b in sorted(set(b for m in MODES for b in sd.rounds(st.main, m))):
        for m in MODES:
            lat = sd.rounds(st.main, m).get(b)
            if not lat:
                continue
            k = sd.rounds(st.main, m, key=sd.kernel_ms).get(b, {})
            disp = sd.rounds(st.main, m, key=lambda r: sd.fnum(r.get("dispatch_ms"))).get(b, {})
            prof = sd.rounds(st.main, m, key=lambda r: sd.fnum(r.get("profiled_ms"))).get(b, {})
            host = sd.paired(lat, k, lambda x, y: x - y)
            share = sd.paired(lat, k, lambda x, y: (x - y) / x if x else None)
            obs = sd.paired(prof, lat, lambda x, y: x - y)
            rows.append([b, m, est(sd.estimate(list(lat.values()))), est(sd.estimate(list(k.values()))), est(host),
                         share.fmt(1, 100, "%") if share else "-", est(sd.estimate(list(disp.values()))), est(obs)])
    w(table(["batch", "mode", "latency ms", "kernel ms", "dispatch/host ms", "dispatch/host share",
             "dispatcher phases ms", "observer cost ms"], rows))
    if not st.emuspec:
        return
    w("Emulation study (%s): the latency when every eager op pays an emulated framework cost (`--op-cost-us`, a "
      "busy wait in the dispatcher's select phase) and every graph-mode step the same cost (`--step-cost-us`, an "
      "interpreter's per-node cost); static mode replays the plan without either. Median over rounds [interval], ms; "
      "all costs, modes and batches interleaved in the same rounds.\n\n" % model_desc(st.emuspec))
    w(fig_md(figs.get("emu", []), st.outdir, "emulation"))
    bs = sorted(set(int(r["batch"]) for r in sd.ok_rows(st.emu)))
    rows = []
    for c in st.emu_costs():
        for m in MODES:
            cv = sd.curve(st.emu, m, op_cost=c)
            if cv:
                rows.append(["%g us" % c, m, *(est(cv.get(b)) for b in bs)])
    w(table(["cost", "mode", *("b%d" % b for b in bs)], rows))
    srows = []
    for c in st.emu_costs():
        sub = [r for r in st.emu if sd.fnum(r.get("op_cost_us")) == c]
        for row in split_rows(st, sub, "eager", "graph", [1, bs[-1]] if bs else []):
            srows.append(["%g us" % c] + row)
    if srows:
        w("The eager-graph gap under emulation, split as in F2:\n\n")
        w(table(["cost", "batch", "gap", "gap ms", "kernel part ms", "dispatch/host part ms", "kernel share",
                 "dominates"], srows))


def _table3(w, st, peers, peer_notes, main_desc, fr):
    w("## Table 3: the paper's numbers beside ftengine's\n\n")
    sent, dom = split_sentence(st.main, "eager", "graph", 1, "Measured")
    c = EMU_TABLE3_COST if EMU_TABLE3_COST in st.emu_costs() else (st.emu_costs() or [None])[-1]
    emu_sent = ""
    if c is not None:
        sub = [r for r in st.emu if sd.fnum(r.get("op_cost_us")) == c]
        emu_sent, _ = split_sentence(sub, "eager", "graph", 1, "Under the %g us emulation" % c)
    w("The paper's rows are **the paper's measurements** (BERT-base, fp16, batch 1, sequence 128, RTX 8000 with a "
      "Xeon W-2295 host; Fernandez et al. 2023, Table 3), not ours: its gaps between PyTorch, TorchScript and CUDA "
      "Graphs are framework overhead. ftengine's rows are this report's batch-1 latencies (median over rounds "
      "[interval]) of %s on %s. %s%s%s\n\n" % (
          main_desc, fr.get("device_label", "?"), (sent + ".") if sent else "",
          " So ftengine's measured eager/graph ratio is not the paper's framework tax: it is mostly fusion."
          if dom == "kernel time" else "", (" " + emu_sent + ".") if emu_sent else ""))
    t3 = [["paper: " + n, "%.2f" % v, "RTX 8000 (paper)"] for n, v in PAPER_TABLE3]
    for m in MODES:
        e = sd.curve(st.main, m).get(1)
        t3.append(["ftengine " + m + (" (no CUDA Graph on the CPU)" if st.cpu and m == "static" else ""), est(e),
                   "this report"])
    if c is not None:
        names = {"eager": "PyTorch-like (%g us per op)", "graph": "TorchScript-like (%g us per step)",
                 "static": "CUDA-Graph-like replay (no per-step cost)"}
        for m in MODES:
            e = sd.curve(st.emu, m, op_cost=c).get(1)
            t3.append(["ftengine emulated %s: %s" % (m, names[m] % c if "%" in names[m] else names[m]), est(e),
                       "this report (%s)" % model_desc(st.emuspec)])
    for p in peers:
        if 1 in p["points"]:
            t3.append([p.get("table3_label", p["label"]), est(p["points"].get(1)),
                       "%s (%s)" % (p["measured_on"], p["note"])])
    if st.meta.get("peers") != "off":
        t3 += RP.table3_ftengine_rows(RP.load(st.outdir))
    w(table(["runtime", "latency ms (batch 1)", "measured on"], t3))
    if peer_notes:
        w("Peer measurements read: " + "; ".join(peer_notes) + "\n\n")
    else:
        w("No peer measurement in this directory (%s; bench/baselines/hf_latency.py --json DIR/baseline-*.json adds "
          "GPU ones).\n\n" % (st.meta.get("peers_note") or "PEERS=0" if st.meta.get("peers") == "off" else
                               st.meta.get("peers_note") or "no peer run"))
