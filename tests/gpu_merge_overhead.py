#!/usr/bin/env python3
"""gpu_merge_overhead.py - the GPU session's report stage (tests/gpu_session.sh
report): fills the overhead columns of an unprofiled sweep's CSV from a
profiled sweep of the same points run in another process.

Why two processes: once a process has profiled, CUPTI stays in it (one session
per process, engine/cupti.c), so `ftengine sweep --overhead` times every point
after its first in a process with CUPTI on. The report takes its latencies from
a sweep without --overhead and only the overhead columns (overhead_ms,
overhead_share, profiled_ms, busy_ms) from the profiled one, matched by model,
dtype, mode, batch and length. Standard library only.

    python3 tests/gpu_merge_overhead.py DIR PROFILED_DIR NAME [NAME ...]

rewrites DIR/NAME.csv for each NAME (PROFILED_DIR/NAME.csv beside it) and
prints how many rows got their overhead. Exit 1 if a DIR/NAME.csv is missing;
a missing profiled CSV leaves that sweep's overhead empty, said so.
"""
import csv
import os
import sys

COLUMNS = ("overhead_ms", "overhead_share", "profiled_ms", "busy_ms")
KEY = ("model", "dtype", "mode", "batch", "length")


def key(row):
    return tuple(row.get(k, "") for k in KEY)


def read(path):
    with open(path, newline="") as f:
        r = csv.DictReader(f)
        return list(r.fieldnames or []), list(r)


def merge(timing_path, profiled_path):
    """Rewrites timing_path with the overhead columns of profiled_path's matching
    ok rows; returns (rows given overhead, rows)."""
    fields, rows = read(timing_path)
    _, prof = read(profiled_path)
    by = {key(p): p for p in prof if p.get("status", "ok") == "ok"}
    done = 0
    for row in rows:
        p = by.get(key(row))
        if p is None or row.get("status", "ok") != "ok":
            continue
        for c in COLUMNS:
            if c in fields:
                row[c] = p.get(c, "")
        done += 1
    tmp = timing_path + ".tmp"
    with open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    os.replace(tmp, timing_path)
    return done, len(rows)


def main(argv):
    if len(argv) < 4:
        sys.stderr.write(__doc__)
        return 2
    d, pd, names = argv[1], argv[2], argv[3:]
    rc = 0
    for n in names:
        t, p = os.path.join(d, n + ".csv"), os.path.join(pd, n + ".csv")
        if not os.path.exists(t):
            print("merge: %s: no unprofiled sweep (%s)" % (n, t))
            rc = 1
            continue
        if not os.path.exists(p):
            print("merge: %s: no profiled sweep (%s): overhead left empty" % (n, p))
            continue
        done, total = merge(t, p)
        print("merge: %s: overhead for %d of %d points" % (n, done, total))
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv))
