"""studydata.py - reading the sweep CSVs of a report directory (bench/report.py,
bench/plot.py): rows by study, latency curves, and the numbers the findings
rest on. No third-party modules: the report and its tests run on a bare python3.
"""
import csv
import math
import os


def fnum(s):
    """A CSV number, or None for an empty field (not measured)."""
    if s is None or s == "":
        return None
    try:
        v = float(s)
    except ValueError:
        return None
    return v if math.isfinite(v) else None


def read_rows(path):
    """Every row of a sweep CSV as a dict (an absent file gives [])."""
    if not os.path.exists(path):
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def latency(row):
    """The latency of a row in ms: the median when the sweep has one (synchronized
    protocol), else the mean (the paper's back-to-back protocol)."""
    med = fnum(row.get("median_ms"))
    return med if med is not None else fnum(row.get("mean_ms"))


def ok_rows(rows):
    return [r for r in rows if r.get("status") == "ok" and latency(r) is not None]


def curve(rows, mode, key=latency):
    """{batch: value} of one mode's ok rows."""
    out = {}
    for r in ok_rows(rows):
        if r.get("mode") == mode:
            v = key(r)
            if v is not None:
                out[int(r["batch"])] = v
    return out


def at(rows, mode, batch, key=latency):
    return curve(rows, mode, key).get(batch)
