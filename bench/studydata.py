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


# The statistic a report uses (study.json "stat"): "min" on a CPU study (a shared
# host disturbs forwards at random; the least-disturbed one measures the engine),
# "median" or "mean" otherwise. A row without it falls back to median, then mean.
STAT = "median"


def latency(row):
    """The latency of a row in ms by STAT; the mean for the paper's back-to-back
    protocol, which has only that."""
    for key in (STAT + "_ms", "median_ms", "mean_ms"):
        v = fnum(row.get(key))
        if v is not None:
            return v
    return None


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
