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
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


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
    lines = ["host: %s (%s CPUs), load average %s .. %s" % (res["host"], res["cpus"], *res["loadavg"]),
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


