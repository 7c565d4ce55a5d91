#!/usr/bin/env python3
"""report_peers.py - the peers of bench/peers.py in the framework-tax report
(bench/report.py, `make report`; PEERS=0 skips them): the measured Table 3 rows
(ftengine's modes and PyTorch eager, TorchScript, ONNX Runtime timed in the same
interleaved rounds on this machine; the paper's rows kept beside them, labelled as
the paper's), the peers' latency-vs-batch curves for F1/F2, the framework-overhead
comparison (host cost per op: ftengine eager against PyTorch eager, graph against
TorchScript and ORT) and the verdicts that compare ftengine's modes with the
frameworks, decided from those rows. Also the markdown tables of peers.py's CLI.

Standard library only (the report runs on a bare python3); the measuring is
bench/peers.py's, whose workers find a python with torch by themselves.
"""
import glob
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peers as P  # noqa: E402

HOLDS, NOT, INCON = "holds", "does not hold", "inconclusive"
LABELS = {"pytorch-eager": "PyTorch eager", "torchscript": "TorchScript (trace + freeze)",
          "ort-cpu": "ONNX Runtime (CPU provider)", "ftengine-eager": "ftengine eager",
          "ftengine-graph": "ftengine graph", "ftengine-static": "ftengine static"}


def fmt_ms(row, stat="median"):
    if not row or row.get("status") != "ok":
        return "-"
    v, lo, hi = row[stat + "_ms"], row[stat + "_lo_ms"], row[stat + "_hi_ms"]
    nd = 3 if v < 10 else 2 if v < 100 else 1
    return "%.*f [%.*f, %.*f]" % (nd, v, nd, lo, nd, hi)


def index(res, point="curve"):
    """{(model, threads, batch): {peer: row}} of one kind of point."""
    out = {}
    for r in res["rows"]:
        if r.get("point", "curve") == point:
            out.setdefault((r["model"], r["threads"], r["batch"]), {})[r["peer"]] = r
    return out


def best_ftengine(rs, stat="median", modes=("graph", "static")):
    """(mode, row) of ftengine's fastest measured mode among `modes`, or (None, None)."""
    ok = [(r[stat + "_ms"], m, r) for m in modes for r in [rs.get("ftengine-" + m)] if r and r.get("status") == "ok"]
    if not ok:
        return None, None
    _, m, r = min(ok, key=lambda x: x[0])
    return m, r


def ratio(a, b, stat="median"):
    """a / b with the interval from the extreme rounds (a_lo / b_hi .. a_hi / b_lo)."""
    if not (a and b and a.get("status") == "ok" and b.get("status") == "ok"):
        return None
    return (a[stat + "_ms"] / b[stat + "_ms"], a[stat + "_lo_ms"] / b[stat + "_hi_ms"],
            a[stat + "_hi_ms"] / b[stat + "_lo_ms"])


def fmt_ratio(r):
    return "-" if r is None else "%.2f [%.2f, %.2f]" % r


def table_md(res, stat="median"):
    """The side-by-side table: every runner's latency and ftengine's best of graph/static
    over ORT, PyTorch eager and TorchScript."""
    idx = index(res)
    runners = []
    for r in res["rows"]:
        if r["peer"] not in runners:
            runners.append(r["peer"])
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


def overhead_md(res, stat="median"):
    """Per-forward latency at the near-zero-compute shape, ops per forward by each
    runtime's own count, and their quotient: the host cost per op."""
    idx = index(res, "overhead")
    if not idx:
        return ""
    out = ("| model | threads | shape | runtime | ms per forward | ops per forward | us per op |\n"
           "|---|---|---|---|---|---|---|\n")
    for (m, t, b), rs in sorted(idx.items()):
        for p, r in rs.items():
            ops = r.get("ops")
            per = "%.2f" % (r[stat + "_ms"] * 1e3 / ops) if ops and r.get("status") == "ok" else "-"
            out += "| %s | %d | b%d x %s | %s | %s | %s | %s |\n" % (m, t, b, r["size"], p, fmt_ms(r, stat),
                                                                   ops if ops else "-", per)
    return out


def provenance_md(res):
    lines = ["host: %s (%s CPUs), load average %s" % (res.get("host"), res.get("cpus"),
                                                    " .. ".join(str(x) for x in res.get("loadavg", []))),
             "ftengine commit: %s" % res.get("commit")]
    seen = set()
    for r in res["rows"]:
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
    for s in res["skipped"]:
        lines.append("skipped %s%s: %s" % (s["peer"], " (%s)" % s["model"] if s.get("model") else "", s["why"]))
    return "".join("- %s\n" % ln for ln in lines)




# --------------------------------------------------------------------------- the report's peer runs


def plan(device, quick, main_sweep, threads=1):
    """The peer runs of a report: on the CPU, the main sweep's model, length and batch curve
    (every runner, interleaved, plus the overhead shape) and, in a full report, the paper's
    Table 3 shape (BERT-base, batch 1, 128 tokens). None on a GPU report (its peers are
    bench/baselines/hf_latency.py's), with the reason."""
    if device != "cpu":
        return [], ("CPU peers are not run for a %s report (the GPU peers are bench/baselines/hf_latency.py's)"
                    % device)
    rounds, iters, warmup = (2, 5, 1) if quick else (3, main_sweep["iters"], main_sweep["warmup"])
    seq = main_sweep["seq"] or P.DEFAULT_SIZES[P.kind_of(main_sweep["model"])]
    jobs = [dict(name="peers-main", models=[main_sweep["model"]], batches=[int(b) for b in
                                                                          main_sweep["batches"].split(",")],
                 seq=seq, threads=[threads], rounds=rounds, iters=iters, warmup=warmup, overhead=True,
                 ft_modes=list(P.FT_MODES))]
    if not quick:
        jobs.append(dict(name="peers-paper", models=["bert-base"], batches=[1], seq=128, threads=[threads],
                         rounds=rounds, iters=max(5, iters // 2), warmup=warmup, overhead=False,
                         ft_modes=list(P.FT_MODES)))
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
                            warmup=j["warmup"], ft_modes=j["ft_modes"], tool=tool, seq=j["seq"],
                            overhead=j["overhead"], logdir=os.path.join(outdir, "peers-logs"))
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


def stat_of(stat):
    """The report's statistic as a peers row field (median, min or mean)."""
    return stat if stat in ("median", "min", "mean") else "median"


def curves(pk, stat="median"):
    """{label: {batch: ms}} of every peer on the main run's batch curve (the F1 figure)."""
    st_ = stat_of(stat)
    out = {}
    for r in (pk.get("peers-main") or {}).get("rows", []):
        if r.get("point") == "curve" and r.get("status") == "ok" and r["peer"] in P.PEERS:
            out.setdefault("%s (measured here)" % LABELS[r["peer"]], {})[r["batch"]] = r[st_ + "_ms"]
    return out


def curve_rows(pk, stat="median"):
    """[(label, {batch: ms})] for the F1/F2 latency table, peers after ftengine's modes."""
    return sorted(curves(pk, stat).items())


# --------------------------------------------------------------------------- verdicts


def interval_verdict(r, what, bound=1.0):
    """holds if the whole ratio interval is at or below `bound`, does not hold if it is
    wholly above, else inconclusive."""
    if r is None:
        return INCON, "not measured"
    nums = "%.2f (rounds %.2f..%.2f)" % r
    if r[2] <= bound:
        return HOLDS, "%s %s" % (what, nums)
    if r[1] > bound:
        return NOT, "%s %s" % (what, nums)
    return INCON, "%s %s: the interval straddles %.2f" % (what, nums, bound)


def per_op(row, stat):
    if not row or row.get("status") != "ok" or not row.get("ops"):
        return None
    v = row[stat + "_ms"] * 1e3 / row["ops"]
    return (v, row[stat + "_lo_ms"] * 1e3 / row["ops"], row[stat + "_hi_ms"] * 1e3 / row["ops"])


def verdicts(pk, stat="median", faster=1.05):
    """[(claim, verdict, reason)]: ftengine's modes against the frameworks they stand in for,
    from the interleaved rows of the main run (and the paper's shape where measured)."""
    st_ = stat_of(stat)
    res = pk.get("peers-main")
    if not res or not res.get("rows"):
        return []
    idx = index(res)
    out = []
    keys = sorted(idx)
    b1 = [k for k in keys if k[2] == 1]
    rs1 = idx[b1[0]] if b1 else {}
    ov = index(res, "overhead")
    ovr = next(iter(ov.values()), {})
    # eager ~ PyTorch eager: the host cost per op
    fe, pe = per_op(ovr.get("ftengine-eager"), st_), per_op(ovr.get("pytorch-eager"), st_)
    r = (fe[0] / pe[0], fe[1] / pe[2], fe[2] / pe[1]) if fe and pe else None
    v = interval_verdict(r, "ftengine eager / PyTorch eager host cost per op at the near-zero-compute shape")
    if fe and pe:
        v = (v[0], v[1] + " (%.2f vs %.2f us per op)" % (fe[0], pe[0]))
    out.append(("ftengine eager pays no more per op than PyTorch eager", *v))
    # graph ~ TorchScript: capturing the forward pays off at batch 1 in both
    claim_g = "graph mode gains over eager at batch 1, as TorchScript does over PyTorch eager"
    ge = ratio(rs1.get("ftengine-eager"), rs1.get("ftengine-graph"), st_)
    te = ratio(rs1.get("pytorch-eager"), rs1.get("torchscript"), st_)
    if ge and te:
        # a gain: eager/graph >= faster over the whole interval; none: below it throughout
        verdict = (HOLDS if ge[1] >= faster and te[1] >= faster else
                   NOT if ge[2] < faster or te[2] < faster else INCON)
        reason = ("batch 1: ftengine eager/graph %.2f (rounds %.2f..%.2f), PyTorch eager/TorchScript %.2f "
                  "(rounds %.2f..%.2f); a gain is >= %.2f over the whole interval" % (*ge, *te, faster))
        out.append((claim_g, verdict, reason))
    else:
        out.append((claim_g, INCON, "needs ftengine eager and graph, PyTorch eager and TorchScript at batch 1"))
    # the framework tax of the peers shrinks with batch (the paper's F2, for the frameworks)
    top = [k for k in keys if k[2] == max(k2[2] for k2 in keys)]
    if b1 and top and top[0] != b1[0]:
        a1 = ratio(rs1.get("pytorch-eager"), rs1.get("torchscript"), st_)
        an = ratio(idx[top[0]].get("pytorch-eager"), idx[top[0]].get("torchscript"), st_)
        if a1 and an:
            verdict = HOLDS if an[0] < a1[0] and an[2] < a1[1] else NOT if an[1] >= a1[2] else INCON
            out.append(("PyTorch eager's gap to TorchScript shrinks as batch grows", verdict,
                        "PyTorch eager/TorchScript %.2f at batch 1, %.2f at batch %d" % (a1[0], an[0], top[0][2])))
    # ftengine against the frameworks users would run instead, at every batch of the curve
    for peer, claim in (("ort-cpu", "ftengine's best of graph/static is at or below ONNX Runtime"),
                        ("pytorch-eager", "ftengine's best of graph/static is at or below PyTorch eager")):
        rr = [(k[2], ratio(best_ftengine(idx[k], st_)[1], idx[k].get(peer), st_)) for k in keys]
        rr = [(b, x) for b, x in rr if x]
        if not rr:
            out.append((claim + " at every batch", INCON, "%s not measured" % LABELS[peer]))
            continue
        vs = [interval_verdict(x, "")[0] for _, x in rr]
        verdict = HOLDS if all(v == HOLDS for v in vs) else NOT if any(v == NOT for v in vs) else INCON
        out.append((claim + " at every batch", verdict, "ftengine / %s per batch: %s" % (
            LABELS[peer], ", ".join("b%d %.2f [%.2f, %.2f]" % (b, *x) for b, x in rr))))
    return out


# --------------------------------------------------------------------------- the report's sections


def table3_rows(pk, stat="median"):
    """Measured Table 3 rows [runtime, latency ms at batch 1, measured on]: the paper's shape
    (BERT-base, 128 tokens) where a full report measured it, and the main run's batch 1."""
    st_ = stat_of(stat)
    out = []
    for job in ("peers-paper", "peers-main"):
        res = pk.get(job)
        if not res:
            continue
        for (m, t, b), rs in sorted(index(res).items()):
            if b != 1:
                continue
            for peer in list(P.PEERS) + ["ftengine-" + x for x in P.FT_MODES]:
                r = rs.get(peer)
                if not r:
                    continue
                val = fmt_ms(r, st_) if r.get("status") == "ok" else "failed: %s" % r.get("why", "?")[:80]
                out.append(["%s, %s %s, fp32, %d thread(s)" % (LABELS.get(peer, peer), m,
                                                              "length %s" % r["size"], t),
                            val, "this host, same run (%s.json%s)" % (job, ", %s %s" % (r.get("runtime"),
                                                                                       r.get("version") or ""))])
    return out


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
             "graph optimisations on) on the same model, shapes, fp32, threads and timing protocol, in interleaved "
             "rounds (bench/peers.py). Each cell: the %s forward latency in ms, median over rounds, with the "
             "lowest and highest round in brackets; ratios ftengine / peer (below 1: ftengine faster). Every peer "
             "was checked before timing: on the golden case against `ftengine run`, and at every timed shape "
             "against PyTorch eager.\n\n" % st_)
    for claim, verdict, reason in verdicts(pk, stat):
        L.append("- **%s: %s.** %s\n" % (claim, verdict, reason))
    L.append("\n")
    for job in ("peers-main", "peers-paper"):
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
                     "of the frozen graph; ORT: nodes after its graph rewrites). Their quotient bounds the host "
                     "cost per op from above.\n\n" % ", ".join("%s %s" % (k, v) for k, v in P.MIN_SIZES.items()))
            L.append(ov + "\n")
        L.append(provenance_md(res) + "\n")
    return "".join(L)
