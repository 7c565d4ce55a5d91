#!/usr/bin/env python3
"""report_peers.py - the peers of bench/peers.py in the framework-tax report
(bench/report.py, `make report`; PEERS=0 skips them), and the markdown tables of
peers.py's CLI. What the report gets from here (bench/report_text.py places it):

  series()       each peer's latency-vs-batch curve (and the paper's Table 3 shape in a
                 full report) as report_text series: the F1 figure and table, Table 3
  table3_ftengine_rows()  Table 3's rows of ftengine timed beside the peers at the paper's shape
  section_md()   the side-by-side section: verdicts comparing ftengine's modes with the
                 frameworks, the table with ratios, the framework-overhead comparison
                 (host cost per op: ftengine eager against PyTorch eager, graph against
                 TorchScript and ONNX Runtime), provenance, what was skipped

The statistic is the study's (bench/studydata.py): a runner's value in a round is the
median of that round's timed forwards; its latency the median over rounds with the
order-statistics interval; a ratio of two runners is taken round by round (peers.py
times every runner in each round, interleaved), and the verdicts follow the interval
rule of bench/verdicts.py ("inconclusive (within noise)" when an interval straddles a
threshold). Standard library only; the measuring is bench/peers.py's, whose workers
find a python with torch by themselves.
"""
import glob
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peers as P  # noqa: E402
import studydata as sd  # noqa: E402
import verdicts as V  # noqa: E402

LABELS = {"pytorch-eager": "PyTorch eager", "torchscript": "TorchScript (trace + freeze)",
          "ort-cpu": "ONNX Runtime (CPU provider)", "ftengine-eager": "ftengine eager",
          "ftengine-graph": "ftengine graph", "ftengine-static": "ftengine static"}
# the framework each of ftengine's modes stands in for, in the overhead comparison, and the
# measure its verdict uses: an eager dispatcher's cost per op; a graph runtime's whole
# overhead per forward (its cost per op depends on how many ops it fuses away)
PAIRS = (("ftengine-eager", "pytorch-eager", "op"), ("ftengine-graph", "torchscript", "forward"),
         ("ftengine-graph", "ort-cpu", "forward"))
JOBS = ("peers-main", "peers-paper")


def stat_of(stat):
    """The statistic as a peers row field (median, min or mean)."""
    return stat if stat in ("median", "min", "mean") else "median"


def round_values(row, stat="median"):
    """{round: ms} of a measured row (each round's statistic over its timed forwards);
    {} for a failed or absent one, or one without its rounds. peers.py keeps a row's
    rounds in order, all of them."""
    if not row or row.get("status") != "ok":
        return {}
    st_ = stat_of(stat)
    return {i: r[st_] for i, r in enumerate(row.get("round_stats") or []) if r.get(st_) is not None}


def _summary_est(row, stat):
    """A row that kept only its summary (no round_stats): its median over rounds and, as the
    interval, its lowest and highest round."""
    st_ = stat_of(stat)
    if not row or row.get("status") != "ok" or row.get(st_ + "_ms") is None:
        return None
    return sd.Est(row[st_ + "_ms"], row.get(st_ + "_lo_ms"), row.get(st_ + "_hi_ms"),
                  row.get("interval_coverage", 0.0), row.get("rounds", 1))


def est(row, stat="median"):
    """Est (median over rounds, interval) of a row, or None."""
    rv = round_values(row, stat)
    return sd.estimate(list(rv.values())) if rv else _summary_est(row, stat)


def fmt_est(e):
    if e is None:
        return "-"
    nd = 3 if e.med < 10 else 2 if e.med < 100 else 1
    return e.fmt(nd)


def fmt_ms(row, stat="median"):
    return fmt_est(est(row, stat))


def index(res, point="curve"):
    """{(model, threads, batch): {peer: row}} of one kind of point."""
    out = {}
    for r in res.get("rows", []):
        if r.get("point", "curve") == point:
            out.setdefault((r["model"], r["threads"], r["batch"]), {})[r["peer"]] = r
    return out


def best_ftengine(rs, stat="median", modes=("graph", "static")):
    """(mode, row) of ftengine's fastest mode among `modes` (lowest median over rounds), or (None, None)."""
    ok = [(e.med, m, r) for m in modes for r in [rs.get("ftengine-" + m)] for e in [est(r, stat)] if e]
    if not ok:
        return None, None
    _, m, r = min(ok, key=lambda x: x[0])
    return m, r


def ratio(a, b, stat="median"):
    """Est of a/b taken round by round (both rows timed in the same rounds), or None. Rows
    that kept only their summary: the ratio of the medians, its interval from the extreme
    rounds (a_lo / b_hi .. a_hi / b_lo)."""
    ra, rb = round_values(a, stat), round_values(b, stat)
    if ra and rb:
        return sd.ratio(ra, rb)
    ea, eb = _summary_est(a, stat), _summary_est(b, stat)
    if ea is None or eb is None or not eb.med:
        return None
    if ea.has_ci and eb.has_ci and eb.lo and eb.hi:
        return sd.Est(ea.med / eb.med, ea.lo / eb.hi, ea.hi / eb.lo, 0.0, min(ea.n, eb.n))
    return sd.Est(ea.med / eb.med, None, None, 0.0, min(ea.n, eb.n))


def fmt_ratio(r):
    return V.ci_text(r, 2, "") if r is not None else "-"


def runners_of(res):
    out = []
    for r in res.get("rows", []):
        if r["peer"] not in out:
            out.append(r["peer"])
    return out


def table_md(res, stat="median"):
    """The side-by-side table: every runner's latency and ftengine's best of graph/static
    over ORT, PyTorch eager and TorchScript (round by round)."""
    idx = index(res)
    runners = runners_of(res)
    head = ["model", "threads", "batch", "length"] + ["%s ms" % p for p in runners] + [
        "ftengine best", "/ ORT", "/ PyTorch eager", "/ TorchScript"]
    out = "| " + " | ".join(head) + " |\n|" + "---|" * len(head) + "\n"
    for (m, t, b), rs in sorted(idx.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2])):
        mode, best = best_ftengine(rs, stat)
        size = next(iter(rs.values()))["size"]
        cells = [m, t, b, size] + [fmt_ms(rs.get(p), stat) for p in runners] + [mode or "-"]
        cells += [fmt_ratio(ratio(best, rs.get(p), stat)) for p in ("ort-cpu", "pytorch-eager", "torchscript")]
        out += "| " + " | ".join(str(c) for c in cells) + " |\n"
    return out


def per_op_rounds(row, stat="median"):
    """{round: us per op} of an overhead-point row: its latency over its op count."""
    ops = (row or {}).get("ops")
    if not ops:
        return {}
    return {k: v * 1e3 / ops for k, v in round_values(row, stat).items()}


def overhead_md(res, stat="median"):
    """The host cost per op at the near-zero-compute shape: per runtime, then ftengine's
    modes against the framework each stands in for (round by round)."""
    idx = index(res, "overhead")
    if not idx:
        return ""
    out = ("| model | threads | shape | runtime | ms per forward | ops per forward | us per op |\n"
           "|---|---|---|---|---|---|---|\n")
    for (m, t, b), rs in sorted(idx.items()):
        for p, r in rs.items():
            ops = r.get("ops")
            per = sd.estimate(list(per_op_rounds(r, stat).values()))
            out += "| %s | %d | b%d x %s | %s | %s | %s | %s |\n" % (m, t, b, r["size"], p, fmt_ms(r, stat),
                                                                   ops if ops else "-", per.fmt(2) if per else "-")
    out += ("\n| model | threads | ftengine mode | framework | ms per forward, ftengine / framework | us per op, "
            "ftengine / framework |\n|---|---|---|---|---|---|\n")
    for (m, t, b), rs in sorted(idx.items()):
        for ours, theirs, _ in PAIRS:
            fa, fz = round_values(rs.get(ours), stat), round_values(rs.get(theirs), stat)
            a, z = per_op_rounds(rs.get(ours), stat), per_op_rounds(rs.get(theirs), stat)
            out += "| %s | %d | %s | %s | %s | %s |\n" % (
                m, t, LABELS[ours], LABELS[theirs], fmt_ratio(sd.ratio(fa, fz)) if fa and fz else "-",
                fmt_ratio(sd.ratio(a, z)) if a and z else "-")
    return out


def provenance_md(res):
    lines = ["host: %s (%s CPUs), load average %s" % (res.get("host"), res.get("cpus"),
                                                    " .. ".join(str(x) for x in res.get("loadavg", []))),
             "ftengine commit: %s" % res.get("commit")]
    proto = res.get("protocol") or {}
    if proto:
        lines.append("protocol: %s rounds x %s timed forwards (%s warm-up), %s" % (
            proto.get("rounds"), proto.get("iters"), proto.get("warmup"), proto.get("timing", "")))
    seen = set()
    for r in res.get("rows", []):
        k = (r["peer"], r.get("version"), r.get("backend"), r.get("threads"))
        if k in seen or r["peer"].startswith("ftengine-"):
            continue
        seen.add(k)
        lines.append("%s: %s %s, %s, %s thread(s), %s%s" % (
            r["peer"], r.get("runtime"), r.get("version"), r.get("provider"), r.get("threads"), r.get("backend"),
            ", via %s" % r["route"] if r.get("route") else ""))
    for c in res.get("cells", []):
        lines.append("cell %s t%d: %s .. %s UTC, load average %s .. %s" % (c["model"], c["threads"], c["started"],
                                                                       c["finished"], *c["loadavg"]))
    if res.get("omp_wait"):
        lines.append("OpenMP wait: %s; ORT spinning: %s" % (res["omp_wait"], res.get("ort_spinning")))
    if res.get("torch_python"):
        lines.append("torch python: %s; BLAS directory first: %s; OpenBLAS environment: %s" % (
            res["torch_python"], res.get("torch_libdir") or "none (the system libblas.so.3)", res.get("openblas_env")))
    for m, g in res.get("golden", {}).items():
        lines.append("golden check %s: %s: %s" % (m, g["how"], "; ".join(
            "%s %s" % (p, "ok" if v["match"] else "FAIL (%s)" % "; ".join(v["lines"])) for p, v in g["peers"].items())
            or "not run"))
    for s in res.get("skipped", []):
        lines.append("skipped %s%s: %s" % (s["peer"], " (%s)" % s["model"] if s.get("model") else "", s["why"]))
    return "".join("- %s\n" % ln for ln in lines)


# --------------------------------------------------------------------------- the report's peer runs


def plan(device, quick, main_sweep, threads=1, kind=None, paper_shape=True):
    """(jobs, note): the peer runs of a report. On the CPU: the main sweep's model, length
    and batch curve (every runner, interleaved in the sweep's number of rounds, with its
    forwards per visit, plus the overhead shape) and, in a full report with paper_shape
    (the study, not a MODEL= one), the paper's Table 3 shape (BERT-base, batch 1, 128 tokens). No jobs,
    with the reason as note, on a GPU report (its peers are bench/baselines/hf_latency.py's)
    or for a model without a torch definition. kind: text, image or audio (`ftengine
    info`'s unit), else the preset's architecture says."""
    if device != "cpu":
        return [], ("CPU peers are not run for a %s report (the GPU peers are bench/baselines/hf_latency.py's)"
                    % device)
    model, length = main_sweep["models"][0]
    if os.path.isdir(model):
        return [], ("skipped: %s is a checkpoint directory, and the peers' torch models are built from the presets "
                    "of bench/torch_base.py; name a preset of the same architecture (MODEL=bert-base, ...) to measure "
                    "them" % model)
    if model not in P.tb.PRESETS:
        return [], ("skipped: %s has no torch definition (bench/torch_base.py PRESETS: %s)"
                    % (model, ", ".join(sorted(P.tb.PRESETS))))
    kind = {"image": "vision", "audio": "speech"}.get(kind, kind) or P.kind_of(model)
    seq = length or P.DEFAULT_SIZES[kind]
    rounds, iters, warmup = main_sweep.get("rounds", 3), main_sweep["iters"], main_sweep["warmup"]
    jobs = [dict(name="peers-main", models=[model], batches=[int(b) for b in main_sweep["batches"].split(",")],
                 seq=seq, threads=[threads], rounds=rounds, iters=iters, warmup=warmup, overhead=True,
                 ft_modes=list(P.FT_MODES))]
    if not quick and paper_shape:
        jobs.append(dict(name="peers-paper", models=["bert-base"], batches=[1], seq=128, threads=[threads],
                         rounds=rounds, iters=iters, warmup=warmup, overhead=False, ft_modes=list(P.FT_MODES)))
    return jobs, None


def run(outdir, tool, jobs):
    """Each job's peers.measure into OUTDIR/<name>.json; one measured by this commit with the
    same job is kept (a resumed report does not re-measure it)."""
    commit = P.ftengine_commit(tool) if os.path.exists(tool) else None
    for j in jobs:
        path = os.path.join(outdir, j["name"] + ".json")
        try:
            with open(path) as f:
                old = json.load(f)
            if old.get("job") == j and old.get("commit") == commit and commit and "dirty" not in commit:
                P.log("%s: kept (measured by commit %s)" % (path, commit))
                continue
        except (OSError, ValueError):
            pass
        P.log("%s: %s batches %s, %d round(s)" % (j["name"], ",".join(j["models"]),
                                                  ",".join(map(str, j["batches"])), j["rounds"]))
        try:
            res = P.measure(j["models"], j["batches"], j["threads"], rounds=j["rounds"], iters=j["iters"],
                            warmup=j["warmup"], ft_modes=j["ft_modes"], tool=tool, seq=j["seq"], image=j["seq"],
                            samples=j["seq"], overhead=j["overhead"], logdir=os.path.join(outdir, "peers-logs"))
        except Exception as e:  # the report goes on; its section says what happened
            P.log("%s failed: %s: %s" % (j["name"], e.__class__.__name__, e))
            res = {"rows": [], "skipped": [{"peer": "every peer", "why": "the peer run failed: %s: %s" % (
                e.__class__.__name__, e)}], "commit": None}
        res["job"] = j
        with open(path + ".tmp", "w") as f:
            json.dump(res, f, indent=1)
        os.replace(path + ".tmp", path)


def load(outdir):
    """{job name: result} of the peer runs in a report directory."""
    out = {}
    for p in sorted(glob.glob(os.path.join(outdir, "peers-*.json"))):
        try:
            with open(p) as f:
                out[os.path.basename(p)[:-5]] = json.load(f)
        except (OSError, ValueError):
            continue
    return out


def _provider(r):
    return "%s %s" % (r.get("runtime") or "", r.get("version") or "")


def series(pk, stat="median"):
    """The peers as report_text series, [dict(label, points={batch: Est}, measured_on, note,
    curve, peer, job)]: every peer of peers-main on the main sweep's curve (curve=True: the
    latency figure and the F1 table), and at the paper's shape (peers-paper: Table 3 only)."""
    out = []
    for job in JOBS:
        res = pk.get(job)
        if not res:
            continue
        by = {}
        for r in res.get("rows", []):
            if r.get("point", "curve") != "curve" or r["peer"] not in P.PEERS:
                continue
            e = est(r, stat)
            if e is None:
                continue
            key = (r["peer"], r["model"], r["size"], r["threads"])
            s = by.setdefault(key, dict(
                label="%s (measured here%s)" % (LABELS[r["peer"]], "" if job == "peers-main" else
                                                 ", %s length %s" % (r["model"], r["size"])),
                points={}, peer=r["peer"], job=job, curve=job == "peers-main", model=r["model"], size=r["size"],
                threads=r["threads"], measured_on="this host, same run",
                note="%s.json, %s, %d thread(s)" % (job, _provider(r).strip(), r["threads"])))
            s["points"][int(r["batch"])] = e
        out += [by[k] for k in sorted(by, key=lambda k: (P.PEERS.index(k[0]), k[1:]))]
    return out


def table3_ftengine_rows(pk, stat="median"):
    """Table 3 rows [runtime, latency ms at batch 1, measured on] of ftengine's modes at the
    paper's shape (BERT-base, 128 tokens), timed in the same rounds as the peers there
    (peers-paper, a full report); the peers themselves come as series()."""
    out = []
    res = pk.get("peers-paper")
    for (m, t, b), rs in sorted(index(res or {}).items()):
        for mode in P.FT_MODES:
            r = rs.get("ftengine-" + mode)
            if b != 1 or not r:
                continue
            val = fmt_ms(r, stat) if r.get("status") == "ok" else "failed: %s" % r.get("why", "?")[:80]
            out.append(["%s, %s length %s, fp32, %d thread(s)" % (LABELS[r["peer"]], m, r["size"], t), val,
                        "this host, same run as the peers (peers-paper.json, `ftengine bench`)"])
    return out


# --------------------------------------------------------------------------- verdicts


def _curves(idx, peer, stat):
    """{batch: {round: ms}} of one runner over the batch curve."""
    return {k[2]: round_values(rs.get(peer), stat) for k, rs in idx.items() if round_values(rs.get(peer), stat)}


def _best_curve(idx, stat):
    """{batch: {round: ms}} of ftengine's best of graph/static (by median over rounds) per batch."""
    out = {}
    for k, rs in idx.items():
        _, row = best_ftengine(rs, stat)
        if row:
            out[k[2]] = round_values(row, stat)
    return out


def verdicts(pk, stat="median"):
    """[(claim, verdict, reason)]: ftengine's modes against the frameworks they stand in for,
    from the runners timed in the same rounds of the main peer run, decided with the
    interval rule of bench/verdicts.py."""
    res = pk.get("peers-main")
    if not res or not res.get("rows"):
        return []
    idx = index(res)
    out = []
    ov = index(res, "overhead")
    ovr = next(iter(ov.values()), {})
    for ours, theirs, measure in PAIRS:
        if measure == "op":
            a, z = per_op_rounds(ovr.get(ours), stat), per_op_rounds(ovr.get(theirs), stat)
            claim = "%s's host cost per op is at or below %s's" % (LABELS[ours], LABELS[theirs])
            unit = "us per op"
        else:
            a, z = round_values(ovr.get(ours), stat), round_values(ovr.get(theirs), stat)
            claim = "%s's overhead per forward is at or below %s's" % (LABELS[ours], LABELS[theirs])
            unit = "ms per forward"
        if not a or not z:
            out.append((claim, V.INCON, "%s or %s not measured at the overhead shape" % (LABELS[ours],
                                                                                        LABELS[theirs])))
            continue
        v, why = V.at_or_below(a, z, "%s / %s %s at the near-zero-compute shape" % (ours, theirs, unit))
        ea, ez = sd.estimate(list(a.values())), sd.estimate(list(z.values()))
        out.append((claim, v, "%s; %s vs %s %s" % (why, ea.fmt(2 if measure == "op" else 3),
                                                   ez.fmt(2 if measure == "op" else 3), unit)))
    b1 = next((rs for k, rs in sorted(idx.items()) if k[2] == 1), {})
    claim = "graph mode gains over eager at batch 1, as TorchScript does over PyTorch eager"
    out.append((claim, *V.both_gain(*(round_values(b1.get(p), stat) for p in (
        "ftengine-eager", "ftengine-graph", "pytorch-eager", "torchscript")))))
    out.append(("PyTorch eager's gap to TorchScript shrinks as batch grows",
                *V.gap_shrinks(_curves(idx, "pytorch-eager", stat), _curves(idx, "torchscript", stat),
                               "PyTorch eager/TorchScript")))
    best = _best_curve(idx, stat)
    for peer in ("ort-cpu", "pytorch-eager", "torchscript"):
        claim = "ftengine's best of graph/static is at or below %s at every batch" % LABELS[peer]
        theirs = _curves(idx, peer, stat)
        if not theirs:
            out.append((claim, V.INCON, "%s not measured" % LABELS[peer]))
            continue
        out.append((claim, *V.at_or_below_every_batch(best, theirs, "ftengine best / %s" % LABELS[peer])))
    return out


# --------------------------------------------------------------------------- the report's section


def section_md(pk, stat="median", skipped_why=None):
    """The framework comparison: verdicts, the side-by-side table with ratios, the host cost
    per op, provenance and what was skipped."""
    st_ = stat_of(stat)
    L = ["## ftengine's modes against the frameworks, measured here\n\n"]
    if not pk:
        L.append("No peer run in this report: %s.\n\n" % (skipped_why or "PEERS=0, or none measured"))
        return "".join(L)
    if not any(res.get("rows") for res in pk.values()):
        L.append("No peer could run on this host; each one skipped, with the reason:\n\n")
        skipped = {(x["peer"], x["why"]) for res in pk.values() for x in res.get("skipped", [])}
        L.append("".join("- %s: %s\n" % s for s in sorted(skipped)) + "\n")
        return "".join(L)
    L.append("ftengine's modes and PyTorch eager, TorchScript (trace + freeze) and ONNX Runtime (CPU provider, "
             "graph optimisations on) on the same model, shapes, fp32, threads and timing protocol, every runner "
             "timed once per round, interleaved (bench/peers.py). Each cell: the %s forward latency in ms, the "
             "median over rounds with its interval, as for ftengine's sweeps; ratios ftengine / peer are taken "
             "round by round (below 1: ftengine faster). Every peer was checked before timing: on the golden case "
             "against `ftengine run`, and at every timed shape against PyTorch eager. A verdict holds or fails "
             "only when its intervals are clear of the threshold (bench/verdicts.py: %.2fx for \"at or below\", "
             "%.2fx for a gain).\n\n" % (st_, V.T["not_slower"], V.T["faster_ratio"]))
    for claim, verdict, reason in verdicts(pk, stat):
        L.append("- **%s: %s.** %s\n" % (claim, verdict, reason))
    L.append("\n")
    for job in JOBS:
        res = pk.get(job)
        if not res:
            continue
        L.append("%s (%s):\n\n" % (job, ", ".join(res.get("job", {}).get("models", []))))
        L.append(table_md(res, st_) + "\n")
        ov = overhead_md(res, st_)
        if ov:
            L.append("Framework overhead, measured: each runtime at batch 1 on a near-zero-compute shape (%s), its "
                     "latency per forward and its ops per forward by its own count (ftengine: kernels, eager "
                     "counted from the traced forward; PyTorch eager: dispatched aten ops; TorchScript: aten nodes "
                     "of the frozen graph; ORT: nodes after its graph rewrites). At that shape the forward is "
                     "nearly all overhead, and its quotient by the ops bounds the host cost per op from above. The "
                     "second table sets each of ftengine's modes against the framework it stands in for, round by "
                     "round: eager against PyTorch eager per op (a dispatcher's cost), graph against TorchScript and "
                     "ONNX Runtime per forward (a graph runtime's whole overhead; per op it also depends on how many "
                     "ops its passes fuse away).\n\n" % ", ".join(
                         "%s %s" % (k, v) for k, v in P.MIN_SIZES.items()))
            L.append(ov + "\n")
        L.append(provenance_md(res) + "\n")
    return "".join(L)
