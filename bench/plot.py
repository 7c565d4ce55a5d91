#!/usr/bin/env python3
"""plot.py - figures from `ftengine sweep` CSVs, as PNG and SVG: any sweep CSV
(latency against batch, one line per mode, the interval over rounds as a band),
or a whole report directory (`make report`, bench/report.py) redrawn:

  latency_vs_batch   latency against batch size, log-log, one line per mode (and
                     per peer series the report adds), interval band
  overhead_band      kernel time and latency per batch (eager), dispatch/host time
                     between them shaded
  overhead_share     dispatch/host share of the latency against batch, per mode
  models_vs_macs     latency against MACs at batch 1, one point per model, error bars, one
                     panel per modality (text, vision, speech)
  emulation          latency against batch at several emulated framework costs
  depth              latency against the number of layers at batch 1, error bars

Every value is the median over the sweep's rounds with its interval
(bench/studydata.py); the caption names the device, commit and date. Matplotlib
is optional: without it the script says how to get it and exits 0 (the report
keeps its tables).

usage: plot.py [-h] [--out DIR] [--name NAME] CSV [CSV ...]
       plot.py REPORT_DIR
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import studydata as sd  # noqa: E402

INSTALL_HINT = ("matplotlib is not installed for %s: no figures. Install it (`apt-get install "
                "python3-matplotlib` or `python3 -m pip install matplotlib`) or run with a Python that has it "
                "(make report PYTHON=/path/to/python3); the measurements are reused.") % sys.executable


def have_matplotlib():
    try:
        import matplotlib  # noqa: F401
        return True
    except Exception:
        return False


def _plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


MODE_STYLE = {"eager": ("tab:red", "o"), "graph": ("tab:blue", "s"), "static": ("tab:green", "^")}


def _save(fig, outdir, name, caption):
    fig.text(0.01, 0.01, caption, fontsize=7, color="0.3", ha="left", va="bottom")
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    files = []
    for ext in ("png", "svg"):
        p = os.path.join(outdir, "%s.%s" % (name, ext))
        fig.savefig(p, dpi=120)
        files.append(p)
    _plt().close(fig)
    return files


def _batch_axis(ax, xs):
    """Log2 batch axis labelled with the batch sizes themselves."""
    from matplotlib.ticker import FixedLocator, NullLocator
    ax.set_xscale("log", base=2)
    ticks = sorted(set(xs))
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticklabels([str(int(t)) for t in ticks])


def caption_of(rows, extra=""):
    r = next((x for x in rows if x.get("commit")), {})
    return "%s | commit %s | %s | median over rounds, band/bars: interval%s" % (
        r.get("device_label", "?"), r.get("commit", "?"), (r.get("date") or "?")[:10], extra)


def _line(ax, pts, scale=1.0, band=True, **kw):
    """pts {x: Est}: the medians as a line, the intervals as a band (or error bars)."""
    xs = sorted(x for x in pts if pts[x] is not None)
    if not xs:
        return []
    ys = [pts[x].med * scale for x in xs]
    line = ax.plot(xs, ys, **kw)[0]
    lo = [(pts[x].lo if pts[x].has_ci else pts[x].med) * scale for x in xs]
    hi = [(pts[x].hi if pts[x].has_ci else pts[x].med) * scale for x in xs]
    if band:
        ax.fill_between(xs, lo, hi, color=line.get_color(), alpha=0.2, linewidth=0)
    else:
        ax.errorbar(xs, ys, yerr=[[y - l for y, l in zip(ys, lo)], [h - y for y, h in zip(ys, hi)]],
                    fmt="none", ecolor=line.get_color(), capsize=3)
    return xs


def latency_vs_batch(outdir, series, title, caption, name="latency_vs_batch"):
    """series: [dict(label=..., points={batch: Est}, style=dict(color, marker, linestyle))],
    ftengine's modes first, then any peer series (bench/report.py's Table 3 rows)."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    allx = []
    for s in series:
        allx += _line(ax, s["points"], label=s["label"], **s.get("style", {}))
    if not allx:
        plt.close(fig)
        return []
    _batch_axis(ax, allx)
    ax.set_yscale("log")
    ax.set_xlabel("batch size")
    ax.set_ylabel("latency per forward (ms)")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, outdir, name, caption)


def mode_series(rows, prefix="ftengine ", **filt):
    """The latency series of each mode in rows (one sweep's), styled per mode."""
    out = []
    for mode, (c, mk) in MODE_STYLE.items():
        pts = sd.curve(rows, mode, **filt)
        if pts:
            out.append(dict(label=prefix + mode, points=pts, style=dict(color=c, marker=mk)))
    return out


def overhead_band(outdir, total, kernel, title, caption):
    """total, kernel: {batch: Est} of one mode (latency and kernel time)."""
    xs = sorted(set(total) & set(kernel))
    if not xs:
        return []
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    _line(ax, {x: total[x] for x in xs}, marker="o", color="black", label="latency (timed forwards)")
    _line(ax, {x: kernel[x] for x in xs}, marker="s", color="tab:blue", label="kernel time (profiled pass)")
    ax.fill_between(xs, [kernel[x].med for x in xs], [total[x].med for x in xs], color="tab:orange", alpha=0.35,
                    label="dispatch/host time")
    _batch_axis(ax, xs)
    ax.set_yscale("log")
    ax.set_xlabel("batch size")
    ax.set_ylabel("time per forward (ms)")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, outdir, "overhead_band", caption)


def overhead_share(outdir, shares, title, caption):
    """shares: {mode: {batch: Est of the host share of the latency}}."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    allx = []
    for mode, (c, mk) in MODE_STYLE.items():
        if shares.get(mode):
            allx += _line(ax, shares[mode], scale=100, band=False, marker=mk, color=c, label=mode)
    if not allx:
        plt.close(fig)
        return []
    _batch_axis(ax, allx)
    ax.set_xlabel("batch size")
    ax.set_ylabel("dispatch/host time, % of latency")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend()
    return _save(fig, outdir, "overhead_share", caption)


def _log_span(ax, xs, ys):
    """Log axes over at least a factor of 4 each way (models of one size would otherwise
    get a sliver of an axis), ticks written as plain numbers."""
    from matplotlib.ticker import FuncFormatter, LogLocator
    for vals, scale, lim, axis in ((xs, ax.set_xscale, ax.set_xlim, ax.xaxis), (ys, ax.set_yscale, ax.set_ylim,
                                                                                 ax.yaxis)):
        scale("log")
        lo, hi = min(vals), max(vals)
        if lo > 0 and hi / lo < 4:
            mid = (lo * hi) ** 0.5
            lim(mid / 2.5, mid * 2.5)
        axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        axis.set_major_formatter(FuncFormatter(lambda v, _: "%g" % v))
        axis.set_minor_formatter(FuncFormatter(lambda v, _: ""))


def models_vs_macs(outdir, points, title, caption):
    """points: [(label, macs, Est of latency)], or panels [(panel title, [(label, macs, Est)])]
    (the per-model study's text, vision and speech panels side by side, each on its own axes:
    a model is compared with the others of its panel)."""
    panels = points if points and isinstance(points[0][1], list) else [("", points)]
    panels = [(t, [p for p in pts if p[1] and p[2] is not None]) for t, pts in panels]
    panels = [(t, pts) for t, pts in panels if pts]
    if not panels:
        return []
    plt = _plt()
    fig, axes = plt.subplots(1, len(panels), figsize=(4.6 * len(panels) + 1.8, 4.4), squeeze=False)
    for ax, (ptitle, pts) in zip(axes[0], panels):
        placed = []
        for label, macs, e in pts:
            lo = e.med - (e.lo if e.has_ci else e.med)
            hi = (e.hi if e.has_ci else e.med) - e.med
            ax.errorbar([macs / 1e9], [e.med], yerr=[[lo], [hi]], fmt="o", capsize=3)
            # models of about the same MACs and latency: their labels stacked, not on top of each other
            near = sum(1 for x, y in placed
                       if max(x, macs) / min(x, macs) < 1.3 and max(y, e.med) / min(y, e.med) < 1.3)
            placed.append((macs, e.med))
            ax.annotate(label, (macs / 1e9, e.med), textcoords="offset points", xytext=(6, 4 - 11 * near),
                        fontsize=8)
        _log_span(ax, [macs / 1e9 for _, macs, _ in pts], [e.med for _, _, e in pts])
        ax.set_xlabel("MACs per forward at batch 1 (G)")
        ax.set_ylabel("eager latency at batch 1 (ms)")
        ax.set_title(ptitle or title, fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
    if len(panels) > 1:
        fig.suptitle(title)
    return _save(fig, outdir, "models_vs_macs", caption)


def emulation(outdir, curves, title, caption):
    """curves: [(label, {batch: Est}, linestyle)]"""
    if not curves:
        return []
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    allx = []
    colors = {}
    for label, cv, ls in curves:
        cost = label.split(" ")[0]
        kw = dict(marker="o" if ls == "-" else "s", linestyle=ls, label=label)
        if cost in colors:
            kw["color"] = colors[cost]
        allx += _line(ax, cv, **kw)
        colors.setdefault(cost, ax.lines[-1].get_color())
    if not allx:
        plt.close(fig)
        return []
    _batch_axis(ax, allx)
    ax.set_yscale("log")
    ax.set_xlabel("batch size")
    ax.set_ylabel("latency per forward (ms)")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(title="emulated framework cost", fontsize=7)
    return _save(fig, outdir, "emulation", caption)


def depth(outdir, by_layers, fit, title, caption):
    """by_layers: {layers: Est}; fit: (intercept, slope) or None."""
    if len(by_layers) < 2:
        return []
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    xs = _line(ax, by_layers, band=False, marker="o", label="measured")
    if fit:
        a, b = fit
        ax.plot(xs, [a + b * x for x in xs], linestyle="--", color="0.4", label="linear fit (median per-round line)")
    ax.set_xlabel("encoder layers")
    ax.set_ylabel("eager latency at batch 1 (ms)")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend()
    return _save(fig, outdir, "depth", caption)


# ---- any sweep CSV ----

def _key(r):
    return (r.get("model", ""), sd.fnum(r.get("op_cost_us")), sd.fnum(r.get("step_cost_us")))


def plot_csv(path, outdir, name=None):
    """One latency-vs-batch figure per (model, emulated cost) of a sweep CSV, every mode
    a line with its interval band. Returns the files written."""
    rows = sd.read_rows(path)
    if not rows:
        raise ValueError("%s: no rows (not a sweep CSV, or empty)" % path)
    if "mode" not in rows[0] or "batch" not in rows[0]:
        raise ValueError("%s: not a sweep CSV (no mode/batch columns)" % path)
    groups = sorted(set(_key(r) for r in sd.ok_rows(rows)), key=lambda k: (k[0], k[1] or -1, k[2] or -1))
    base = name or os.path.splitext(os.path.basename(path))[0]
    files = []
    for model, oc, scost in groups:
        filt = dict(model=model, op_cost=oc, step_cost=scost)
        sel = sd.select(rows, **filt)
        length = sd.first_value(sel, lambda r: r.get("length") or None)
        cost = "".join(s for s in (" op %gus" % oc if oc is not None else "",
                                   " step %gus" % scost if scost is not None else ""))
        tag = base + ("" if len(groups) == 1 else "-" + "".join(
            c if c.isalnum() or c in "-." else "_" for c in (os.path.basename(model.rstrip("/")) + cost.replace(" ", "-"))))
        title = "%s%s%s" % (model, ", length %s" % length if length else "", cost)
        files += latency_vs_batch(outdir, mode_series(rows, prefix="", **filt), title, caption_of(sel), name=tag)
    return files


def main(argv):
    ap = argparse.ArgumentParser(
        prog="plot.py", description="Figures (PNG + SVG) from `ftengine sweep` CSV files: latency against "
        "batch, one line per mode, the median over rounds with its interval as a band; one figure per model "
        "and emulated cost of each CSV. Given a report directory (it holds study.json) instead, redraws that "
        "report's figures.", epilog="Needs matplotlib (without it: a message and exit 0). Example: "
        "build/ftengine sweep bert-tiny --csv s.csv && python3 bench/plot.py s.csv --out figs")
    ap.add_argument("inputs", nargs="+", metavar="CSV", help="sweep CSV files (or one report directory)")
    ap.add_argument("--out", default=None, help="where the figures go (default: beside each CSV)")
    ap.add_argument("--name", default=None, help="file name stem (one CSV only; default: the CSV's name)")
    a = ap.parse_args(argv[1:])
    if not have_matplotlib():
        print("plot.py: " + INSTALL_HINT)
        return 0
    if len(a.inputs) == 1 and os.path.isdir(a.inputs[0]):
        import report  # the same figures report.py draws, from the same CSVs
        return report.render(a.inputs[0], figures_only=True)
    if a.name and len(a.inputs) > 1:
        ap.error("--name needs exactly one CSV")
    n = 0
    for p in a.inputs:
        out = a.out or os.path.dirname(os.path.abspath(p))
        os.makedirs(out, exist_ok=True)
        try:
            files = plot_csv(p, out, a.name)
        except (OSError, ValueError, KeyError) as e:
            print("plot.py: %s" % e, file=sys.stderr)
            return 1
        for f in files:
            print("plot.py: wrote %s" % f)
        n += len(files)
    return 0 if n else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
