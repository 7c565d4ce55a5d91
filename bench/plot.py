#!/usr/bin/env python3
"""plot.py - the framework-tax figures from the sweep CSVs of a report directory
(`make report`, bench/report.py), as PNG and SVG beside them:

  latency_vs_batch   latency against batch size, log-log, one line per mode
  overhead_band      profiled total latency and the time inside kernels per batch,
                     the band between them (the framework overhead) shaded
  overhead_share     framework-overhead share of wall time against batch, per mode
  models_vs_macs     latency against MACs at batch 1, one point per model
  emulation          eager latency against batch at several emulated per-op costs
  depth              latency against the number of layers at batch 1

Matplotlib is optional: without it the script says how to install it and the
report keeps its tables. Usage: python3 bench/plot.py REPORT_DIR
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import studydata as sd  # noqa: E402

INSTALL_HINT = ("matplotlib is not installed: the report has its tables but no figures. "
                "Install it with `apt-get install python3-matplotlib` or `python3 -m pip install matplotlib`, "
                "then run `make report` again (the measurements are reused).")


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
    return "%s | commit %s | %s%s" % (r.get("device_label", "?"), r.get("commit", "?"), r.get("date", "?")[:10], extra)


def latency_vs_batch(outdir, rows, title, baselines=()):
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    allx = []
    for mode, (c, mk) in MODE_STYLE.items():
        cv = sd.curve(rows, mode)
        if cv:
            xs = sorted(cv)
            allx += xs
            ax.plot(xs, [cv[x] for x in xs], marker=mk, color=c, label="ftengine " + mode)
    for name, cv in baselines:
        xs = sorted(cv)
        allx += xs
        ax.plot(xs, [cv[x] for x in xs], linestyle="--", marker=".", label=name)
    if allx:
        _batch_axis(ax, allx)
    ax.set_yscale("log")
    ax.set_xlabel("batch size")
    ax.set_ylabel("latency per forward (ms)")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    return _save(fig, outdir, "latency_vs_batch", caption_of(rows))


def overhead_band(outdir, rows, title, mode="eager"):
    tot = sd.curve(rows, mode, lambda r: sd.fnum(r.get("profiled_ms")))
    busy = sd.curve(rows, mode, lambda r: sd.fnum(r.get("busy_ms")))
    xs = sorted(set(tot) & set(busy))
    if not xs:
        return []
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    t = [tot[x] for x in xs]
    k = [busy[x] for x in xs]
    ax.plot(xs, t, marker="o", color="black", label="total latency (profiled pass)")
    ax.plot(xs, k, marker="s", color="tab:blue", label="time inside kernels")
    ax.fill_between(xs, k, t, color="tab:orange", alpha=0.35, label="framework overhead")
    _batch_axis(ax, xs)
    ax.set_yscale("log")
    ax.set_xlabel("batch size")
    ax.set_ylabel("time per forward (ms)")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    return _save(fig, outdir, "overhead_band", caption_of(rows, " | %s mode" % mode))


def overhead_share(outdir, rows, title):
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    allx = []
    for mode, (c, mk) in MODE_STYLE.items():
        cv = sd.curve(rows, mode, lambda r: sd.fnum(r.get("overhead_share")))
        if cv:
            xs = sorted(cv)
            allx += xs
            ax.plot(xs, [100 * cv[x] for x in xs], marker=mk, color=c, label=mode)
    if not allx:
        _plt().close(fig)
        return []
    _batch_axis(ax, allx)
    ax.set_ylim(0, 100)
    ax.set_xlabel("batch size")
    ax.set_ylabel("framework overhead share of wall time (%)")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend()
    return _save(fig, outdir, "overhead_share", caption_of(rows))


def models_vs_macs(outdir, points, rows, title):
    """points: [(label, macs, latency_ms)]"""
    pts = [p for p in points if p[1] and p[2]]
    if not pts:
        return []
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    for label, macs, lat in pts:
        ax.scatter([macs / 1e9], [lat], s=40)
        ax.annotate(label, (macs / 1e9, lat), textcoords="offset points", xytext=(4, 4), fontsize=8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("MACs per forward at batch 1 (G)")
    ax.set_ylabel("eager latency at batch 1 (ms)")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    return _save(fig, outdir, "models_vs_macs", caption_of(rows))


def emulation(outdir, curves, rows, title):
    """curves: [(op_cost_us, {batch: ms})]"""
    if not curves:
        return []
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    allx = []
    for cost, cv in curves:
        xs = sorted(cv)
        allx += xs
        ax.plot(xs, [cv[x] for x in xs], marker="o", label="%g us per op" % cost)
    _batch_axis(ax, allx)
    ax.set_yscale("log")
    ax.set_xlabel("batch size")
    ax.set_ylabel("eager latency per forward (ms)")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(title="emulated framework cost")
    return _save(fig, outdir, "emulation", caption_of(rows))


def depth(outdir, by_layers, fit, rows, title):
    if len(by_layers) < 2:
        return []
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    xs = sorted(by_layers)
    ax.plot(xs, [by_layers[x] for x in xs], marker="o", label="measured")
    if fit:
        a, b = fit
        ax.plot(xs, [a + b * x for x in xs], linestyle="--", color="0.4", label="linear fit")
    ax.set_xlabel("encoder layers")
    ax.set_ylabel("eager latency at batch 1 (ms)")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend()
    return _save(fig, outdir, "depth", caption_of(rows))


def main(argv):
    if len(argv) != 2:
        print(__doc__)
        return 2
    if not have_matplotlib():
        print("plot.py: " + INSTALL_HINT)
        return 0
    import report  # the same figures report.py draws, from the same CSVs
    return report.render(argv[1], figures_only=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
