#!/usr/bin/env python3
"""test_report.py - the report's Python side (bench/report.py, report_text.py,
verdicts.py, studydata.py, plot.py) with the standard library: the interval rule
(the same as tools/stats.c), verdicts on synthetic per-round data (clear data gives
holds / does not hold, data whose interval overlaps a threshold gives inconclusive),
the no-flip property on synthetic sweeps (two noisy sweeps of the same machine never
give opposite verdicts; the same rows always give the same report), a whole report
rendered from synthetic sweeps (F1-F8 each with one verdict line, the gap split, the
statistic named), the tool's CSV/JSON schema and its intervals against this module's,
`make report MODEL=` on the golden model, plot.py's --help and CSV mode, and the
figures when matplotlib is installed (skipped with a line saying so otherwise).
Prints "RESULT: P passed, F failed, S skipped" for tests/run_tests.sh.
"""
import contextlib
import csv
import io
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "bench"))
import peers as P  # noqa: E402
import plot  # noqa: E402
import report  # noqa: E402
import report_peers as RP  # noqa: E402
import report_text as RT  # noqa: E402
import studydata as sd  # noqa: E402
import verdicts as V  # noqa: E402

TOOL = os.path.join(ROOT, os.environ.get("FT_BUILD") or "build", "ftengine")
GOLDEN = os.path.join(ROOT, "tests", "golden", "bert")
COLS = ["model", "arch", "device", "dtype", "mode", "batch", "length", "protocol", "iters", "mean_ms",
        "median_ms", "min_ms", "first_ms", "kernels_per_forward", "overhead_ms", "overhead_share", "status",
        "error", "p90_ms", "max_ms", "profiled_ms", "busy_ms", "warmup", "op_cost_us", "params", "macs",
        "threads", "ftengine_version", "commit", "date", "host", "device_label", "cuda_version", "round",
        "rounds", "seed", "order", "step_cost_us", "dispatch_ms"]
CLEAR = (V.HOLDS, V.NOT)


def rounds_of(curve, n=5, noise=0.0, rng=None, load=None):
    """{batch: ms} -> {batch: {round: ms}}: each round scaled by a common load factor
    (load[r], what interleaving cancels in a paired ratio) and its own noise."""
    rng = rng or random.Random(1)
    load = load or [1.0] * n
    return {b: {r: v * load[r] * (1 + noise * rng.uniform(-1, 1)) for r in range(n)} for b, v in curve.items()}


class Stats(unittest.TestCase):
    def test_ci_rank(self):
        self.assertEqual(sd.ci_rank(1), (0, 0.0))
        k, lvl = sd.ci_rank(5)
        self.assertEqual(k, 1)
        self.assertAlmostEqual(lvl, 1 - 2 / 32)
        k, lvl = sd.ci_rank(10)
        self.assertEqual(k, 2)
        self.assertAlmostEqual(lvl, 1 - 2 * 11 / 1024)
        e = sd.estimate([5, 1, 4, 2, 3])
        self.assertEqual((e.med, e.lo, e.hi, e.n), (3, 1, 5, 5))
        e = sd.estimate([1.0, 2.0])
        self.assertEqual((e.med, e.lo, e.hi), (1.5, 1.0, 2.0))
        self.assertIsNone(sd.estimate([]))
        self.assertFalse(sd.estimate([2.0]).has_ci)

    def test_profiled_rows_join_their_visits(self):
        """A CUDA sweep with deferred profiling (tools/sweep_csv.c): a visit's row, later its
        profiled pass's row (protocol "profiled"); the reader sees one row per point and round."""
        v = [synth_row("m", "eager", 1, 2.0, rnd, protocol="paper", busy_ms="", profiled_ms="", dispatch_ms="",
                       overhead_share="", kernels_per_forward="") for rnd in range(3)]
        prof = [synth_row("m", "eager", 1, 0, rnd, protocol="profiled", mean_ms="", median_ms="", min_ms="",
                          busy_ms="%g" % (1.5 + rnd), profiled_ms="2.1", kernels_per_forward="40") for rnd in range(2)]
        prof.append(synth_row("m", "eager", 1, 0, 2, protocol="profiled", mean_ms="", median_ms="", min_ms="",
                              status="error", error="profiled pass: boom"))
        orphan = synth_row("m", "graph", 1, 0, 0, protocol="profiled", mean_ms="", median_ms="", min_ms="")
        d = tempfile.mkdtemp(prefix="ft_join_")
        try:
            write_csv(os.path.join(d, "s.csv"), v + prof + [orphan])
            rows = sd.read_rows(os.path.join(d, "s.csv"))
        finally:
            shutil.rmtree(d, ignore_errors=True)
        self.assertEqual(len(rows), 4)  # 3 visits + the failed pass (its status says so); the orphan dropped
        self.assertEqual(sd.rounds(rows, "eager", key=sd.kernel_ms), {1: {0: 1.5, 1: 2.5}})
        self.assertEqual(sd.curve(rows, "eager")[1].med, 2.0)
        self.assertEqual([r["kernels_per_forward"] for r in rows[:3]], ["40", "40", ""])
        self.assertEqual([r["status"] for r in rows], ["ok", "ok", "ok", "error"])

    def test_paired_ratio_cancels_common_load(self):
        load = [1.0, 3.0, 0.7, 2.0, 1.3]
        a = {r: 2.0 * load[r] for r in range(5)}
        b = {r: 1.0 * load[r] for r in range(5)}
        e = sd.ratio(a, b)
        self.assertAlmostEqual(e.lo, 2.0)
        self.assertAlmostEqual(e.hi, 2.0)


class Verdicts(unittest.TestCase):
    B = [1, 2, 4, 8, 16, 32, 64]

    def test_f1(self):
        self.assertEqual(V.f1(rounds_of({b: 10.0 for b in self.B}, noise=0.01))[0], V.HOLDS)
        self.assertEqual(V.f1(rounds_of({b: 1.5 * b for b in self.B}, noise=0.01))[0], V.NOT)
        c = rounds_of({b: max(10.0, 1.0 * b) for b in self.B}, noise=0.01)
        self.assertEqual(V.plateau(c), 8)
        self.assertEqual(V.f1(c)[0], V.HOLDS)
        self.assertEqual(V.f1(rounds_of({1: 1.0, 64: 3.0}))[0], V.INCON)
        # batch 4 at 1.25x batch 1, +-5% noise: the interval overlaps the band's edge
        v, why = V.f1(rounds_of({1: 10.0, 2: 11.0, 4: 12.5, 8: 30.0}, noise=0.05, rng=random.Random(3)))
        self.assertEqual(v, V.NOISE, why)
        self.assertEqual(V.f1(rounds_of({b: 10.0 for b in self.B}, n=1))[0], V.INCON)  # one round: no interval

    def test_f2(self):
        e = rounds_of({1: 10.0, 64: 100.0}, noise=0.01)
        g = rounds_of({1: 6.0, 64: 95.0}, noise=0.01, rng=random.Random(2))
        s = rounds_of({1: 3.0, 64: 94.0}, noise=0.01, rng=random.Random(4))
        self.assertEqual(V.f2(e, g, s)[0], V.HOLDS)
        self.assertEqual(V.f2(g, e, s)[0], V.NOT)  # "eager" faster than "graph"
        self.assertEqual(V.f2(e, g, s, static_is_graph=True)[0], V.INCON)
        self.assertEqual(V.f2(e, g, rounds_of({1: 6.0, 64: 95.0}, noise=0.05))[0], V.NOISE)  # graph ~ static
        grow = rounds_of({1: 6.0, 64: 60.0}, noise=0.01)  # the eager gap grows with batch
        self.assertEqual(V.f2(e, grow, rounds_of({1: 3.0, 64: 50.0}))[0], V.NOT)

    def test_f3_f4(self):
        self.assertEqual(V.f3(rounds_of({1: 10.0}), rounds_of({1: 11.0}, noise=0.02))[0], V.HOLDS)
        self.assertEqual(V.f3(rounds_of({1: 10.0}), rounds_of({1: 40.0}, noise=0.02))[0], V.NOT)
        self.assertEqual(V.f3(rounds_of({1: 10.0}), rounds_of({1: 13.5}, noise=0.01))[0], V.INCON)
        self.assertEqual(V.f3(rounds_of({1: 10.0}), rounds_of({1: 12.5}, noise=0.05))[0], V.NOISE)
        lin = {x: {r: 1.0 * x + 0.3 + 0.01 * r for r in range(5)} for x in (2, 4, 8, 12, 24)}
        self.assertEqual(V.f4(lin)[0], V.HOLDS)
        zig = {x: {r: v for r in range(5)} for x, v in ((2, 5.0), (4, 20.0), (8, 1.0), (12, 30.0), (24, 2.0))}
        self.assertEqual(V.f4(zig)[0], V.NOT)
        self.assertEqual(V.f4({2: {0: 1.0}, 4: {0: 2.0}})[0], V.INCON)
        a, b, r2 = V.linfit([1, 2, 3], [3, 5, 7])
        self.assertAlmostEqual(a, 1.0)
        self.assertAlmostEqual(b, 2.0)
        self.assertAlmostEqual(r2, 1.0)

    def test_f5_f6(self):
        bert = rounds_of({1: 10.0})
        self.assertEqual(V.slower_than_bert("M", rounds_of({1: 30.0}), bert, 2.5e9, 11e9, "slower")[0], V.HOLDS)
        self.assertEqual(V.slower_than_bert("M", rounds_of({1: 3.0}), bert, 2.5e9, 11e9, "slower")[0], V.NOT)
        self.assertEqual(V.slower_than_bert("F", rounds_of({1: 10.0}), bert, 8e9, 11e9, "not faster")[0], V.HOLDS)
        self.assertEqual(V.slower_than_bert("F", rounds_of({1: 5.0}), bert, 8e9, 11e9, "not faster")[0], V.NOT)
        self.assertEqual(V.slower_than_bert("F", rounds_of({1: 10.0}), bert, 12e9, 11e9, "not faster")[0], V.INCON)
        self.assertEqual(V.slower_than_bert("F", {}, bert, 8e9, 11e9, "not faster")[0], V.INCON)
        straddle = {1: dict(enumerate([9.3, 9.6, 9.4, 9.7, 9.5]))}
        self.assertEqual(V.slower_than_bert("F", straddle, bert, 8e9, 11e9, "not faster")[0], V.NOISE)

    def test_f7_f8(self):
        flat16 = rounds_of({b: 10.0 if b <= 16 else b for b in self.B}, noise=0.01)
        flat4 = rounds_of({b: 10.0 if b <= 4 else 3.0 * b for b in self.B}, noise=0.01)
        self.assertEqual(V.f7(flat16, flat4)[0], V.HOLDS)
        self.assertEqual(V.f7(flat4, flat16)[0], V.NOT)
        self.assertEqual(V.f7({}, {}, measurable=False, why="cpu")[0], V.INCON)
        g = rounds_of({1: 6.0, 64: 100.0}, noise=0.005)
        self.assertEqual(V.f8(g, rounds_of({1: 3.0, 64: 99.0}, noise=0.005))[0], V.HOLDS)
        self.assertEqual(V.f8(g, rounds_of({1: 3.0, 64: 50.0}))[0], V.NOT)
        self.assertEqual(V.f8(g, rounds_of({1: 5.9, 64: 99.0}))[0], V.INCON)
        self.assertEqual(V.f8(g, g, static_is_graph=True)[0], V.INCON)

    def test_gap_split(self):
        lat_e, lat_g = {r: 10.0 + 0.1 * r for r in range(5)}, {r: 6.0 for r in range(5)}
        ker_e, ker_g = {r: 9.0 + 0.1 * r for r in range(5)}, {r: 5.5 for r in range(5)}
        sp = V.gap_split(lat_e, lat_g, ker_e, ker_g)
        self.assertAlmostEqual(sp["gap"].med, 4.2)
        self.assertAlmostEqual(sp["kernel"].med, 3.7)
        self.assertAlmostEqual(sp["host"].med, 0.5)
        self.assertEqual(V.dominates(sp), "kernel time")
        sp = V.gap_split(lat_e, lat_g, {r: 6.0 for r in range(5)}, ker_g)
        self.assertEqual(V.dominates(sp), "dispatch/host time")
        self.assertIn("no clear gap", V.dominates(V.gap_split(lat_g, {r: 6.0 + (r - 2) * 0.1 for r in range(5)},
                                                                ker_g, ker_g)))

    def test_modes_against_frameworks(self):
        """bench/report_peers.py's verdicts: the interval rule, on {round: ms} paired by round."""
        load, dev = [1.0, 1.6, 0.8, 1.3, 1.1], [0.0, 1.0, -1.0, 0.5, -0.5]  # common load, own noise

        def r(v, noise=0.0):
            return {k: v * f * (1 + noise * d) for k, (f, d) in enumerate(zip(load, dev))}
        self.assertEqual(V.at_or_below(r(1.0), r(2.0), "x")[0], V.HOLDS)      # 0.5 in every round
        self.assertEqual(V.at_or_below(r(1.3), r(1.0), "x")[0], V.NOT)        # 1.3
        self.assertEqual(V.at_or_below(r(1.04), r(1.0, 0.05), "x")[0], V.NOISE)  # 1.04 +- 5%: over 1.05
        self.assertEqual(V.at_or_below({0: 1.0}, {0: 1.0}, "x")[0], V.INCON)  # one round: no interval
        ours = {1: r(1.0), 4: r(2.0)}
        self.assertEqual(V.at_or_below_every_batch(ours, {1: r(2.0), 4: r(4.0)}, "x")[0], V.HOLDS)
        self.assertEqual(V.at_or_below_every_batch(ours, {1: r(2.0), 4: r(1.0)}, "x")[0], V.NOT)
        self.assertEqual(V.at_or_below_every_batch(ours, {1: r(2.0), 4: r(1.96, 0.05)}, "x")[0], V.NOISE)
        self.assertEqual(V.at_or_below_every_batch(ours, {}, "x")[0], V.INCON)
        self.assertEqual(V.both_gain(r(1.3), r(1.0), r(2.0), r(1.5))[0], V.HOLDS)
        self.assertEqual(V.both_gain(r(1.0), r(1.0), r(2.0), r(1.5))[0], V.NOT)  # ftengine: no gain
        self.assertEqual(V.both_gain(r(1.3), r(1.0), r(1.05, 0.05), r(1.0))[0], V.NOISE)
        shrink = V.gap_shrinks({1: r(2.0), 8: r(10.0)}, {1: r(1.0), 8: r(9.0)}, "x")
        self.assertEqual(shrink[0], V.HOLDS, shrink[1])
        self.assertEqual(V.gap_shrinks({1: r(2.0), 8: r(20.0)}, {1: r(1.0), 8: r(9.0)}, "x")[0], V.NOT)
        self.assertEqual(V.gap_shrinks({1: r(2.0)}, {1: r(1.0)}, "x")[0], V.INCON)

    def test_not_faster_panel(self):
        h, n, z, i = (V.HOLDS, "a"), (V.NOT, "b"), (V.NOISE, "c"), (V.INCON, "d")
        self.assertEqual(V.not_faster_panel([("A", "BERT", h), ("B", "BERT", h), ("C", "BERT", i)])[0], V.HOLDS)
        v, why = V.not_faster_panel([("A", "BERT", h), ("B", "RoBERTa", n), ("C", "BERT", z)])
        self.assertEqual(v, V.NOT)
        self.assertIn("clearly faster: B/RoBERTa", why)
        self.assertEqual(V.not_faster_panel([("A", "BERT", h), ("C", "BERT", z)])[0], V.NOISE)
        v, why = V.not_faster_panel([("C", "BERT", i)])
        self.assertEqual(v, V.INCON)
        self.assertIn("no test: C/BERT", why)

    def test_fmt(self):
        self.assertEqual(V.fmt(V.HOLDS, "x"), "Verdict: holds (x)")
        self.assertEqual(V.fmt(V.NOISE, "x"), "Verdict: inconclusive (within noise) (x)")
        with self.assertRaises(AssertionError):
            V.fmt("maybe", "x")


class NoFlip(unittest.TestCase):
    """The rule behind every verdict: a clear verdict needs the intervals it rests on
    clear of their thresholds, on its side. So two sweeps that give opposite verdicts
    must have disjoint intervals for some quantity, and a sweep whose interval
    overlaps a threshold is inconclusive. Checked on many pairs of noisy synthetic
    sweeps of one machine whose true values sit at each finding's threshold (a host
    load that changes every round by up to 2x, 4% noise per point)."""
    TRIALS = 200

    def cases(self, rng):
        """[(finding, verdict, [the Est each quantity of the verdict has])]"""
        def load():
            return [rng.uniform(1.0, 2.0) for _ in range(6)]

        def r(curve, ld, noise=0.04):
            return rounds_of(curve, n=6, noise=noise, rng=rng, load=ld)
        out = []
        ld = load()
        c = r({1: 10.0, 2: 11.0, 4: 12.5, 8: 40.0}, ld)
        out.append(("F1", V.f1(c)[0], [sd.ratio(c[b], c[1]) for b in (2, 4, 8)]))
        ld = load()
        e, g, s_ = r({1: 10.5, 64: 100.0}, ld), r({1: 10.0, 64: 96.0}, ld), r({1: 9.5, 64: 95.0}, ld)
        q = {b: {k: e[b][k] / g[b][k] for k in e[b]} for b in e}
        out.append(("F2", V.f2(e, g, s_)[0], [sd.ratio(e[1], g[1]), sd.ratio(g[1], s_[1]), sd.ratio(q[64], q[1])]))
        ld = load()
        base, wide = r({1: 10.0}, ld), r({1: 12.5}, ld)
        out.append(("F3", V.f3(base, wide)[0], [sd.ratio(wide[1], base[1])]))
        ld = load()
        depth = {x: {k: (x + rng.uniform(-3.5, 3.5)) * ld[k] for k in range(6)} for x in (2, 4, 8, 12, 24)}
        r2, slope, _ = V.depth_fits(depth)
        out.append(("F4", V.f4(depth)[0], [r2, slope]))
        ld = load()
        f, b = r({1: 9.5}, ld), r({1: 10.0}, ld)
        out.append(("F5", V.slower_than_bert("F", f, b, 8e9, 11e9, "not faster")[0], [sd.ratio(f[1], b[1])]))
        ld = load()
        m, b = r({1: 10.5}, ld), r({1: 10.0}, ld)
        out.append(("F6", V.slower_than_bert("M", m, b, 3e9, 11e9, "slower")[0], [sd.ratio(m[1], b[1])]))
        ld = load()
        g, s_ = r({1: 11.0, 64: 105.0}, ld), r({1: 10.0, 64: 100.0}, ld)
        out.append(("F8", V.f8(g, s_)[0], [sd.ratio(g[1], s_[1]), sd.ratio(g[64], s_[64])]))
        return out

    def test_opposite_verdicts_need_disjoint_intervals(self):
        rng = random.Random(20261126)
        runs = [self.cases(rng) for _ in range(self.TRIALS)]
        seen = {}
        for run in runs:
            for name, v, _ in run:
                self.assertIn(v, V.VERDICTS)
                seen.setdefault(name, set()).add(v)
        flips = 0
        for i in range(0, len(runs) - 1):
            for j in (i + 1, len(runs) - 1 - i):
                if j <= i:
                    continue
                for (name, va, ea), (_, vb, eb) in zip(runs[i], runs[j]):
                    if {va, vb} != {V.HOLDS, V.NOT}:
                        continue
                    flips += 1
                    disjoint = any(x.hi < y.lo or y.hi < x.lo for x, y in zip(ea, eb) if x and y)
                    self.assertTrue(disjoint, "%s: %s and %s from overlapping intervals %s / %s" % (name, va, vb, ea, eb))
        for name, vs in seen.items():
            self.assertIn(V.NOISE, vs, "%s at its threshold was never within noise: %s" % (name, vs))

    def test_clear_data_is_clear(self):
        rng = random.Random(7)
        for _ in range(50):
            ld = [rng.uniform(1.0, 2.0) for _ in range(5)]
            flat = rounds_of({1: 10.0, 2: 10.2, 4: 10.5, 8: 30.0}, noise=0.02, rng=rng, load=ld)
            self.assertEqual(V.f1(flat)[0], V.HOLDS)
            steep = rounds_of({1: 10.0, 2: 20.0, 4: 40.0, 8: 80.0}, noise=0.02, rng=rng, load=ld)
            self.assertEqual(V.f1(steep)[0], V.NOT)
            self.assertEqual(V.f3(rounds_of({1: 10.0}, load=ld), rounds_of({1: 45.0}, noise=0.02, rng=rng, load=ld))[0],
                             V.NOT)

    def test_overlap_is_inconclusive(self):
        """An interval that straddles a threshold gives inconclusive, whatever its median."""
        bert = {1: {k: 10.0 for k in range(6)}}
        for vals in ([9.3, 9.6, 9.4, 9.7, 9.5, 9.55], [9.45, 9.9, 9.8, 9.7, 9.6, 10.1]):
            f = {1: {k: v for k, v in enumerate(vals)}}
            self.assertEqual(V.slower_than_bert("F", f, bert, 8e9, 11e9, "not faster")[0], V.NOISE)
        for vals in ([12.0, 12.6, 12.4, 12.7, 12.5, 12.45], [11.0, 12.51, 13.0, 14.0, 13.5, 12.9]):
            self.assertEqual(V.f3({1: {k: 10.0 for k in range(6)}}, {1: dict(enumerate(vals))})[0], V.NOISE)

    def test_deterministic(self):
        c = rounds_of({1: 10.0, 2: 11.0, 4: 12.4, 8: 30.0}, noise=0.05, rng=random.Random(9))
        shuffled = {b: dict(sorted(v.items(), key=lambda kv: -kv[0])) for b, v in reversed(list(c.items()))}
        self.assertEqual(V.f1(c), V.f1(shuffled))
        self.assertEqual(V.f1(c), V.f1(c))


def synth_row(name, mode, batch, lat, rnd=0, **kw):
    r = {c: "" for c in COLS}
    r.update(model=name, arch="BertModel", device="cpu", dtype="f32", mode=mode, batch=str(batch), length="8",
             protocol="sync", iters="3", mean_ms="%f" % lat, median_ms="%f" % lat, min_ms="%f" % (0.98 * lat),
             status="ok", warmup="1", params="1000", macs="%d" % (1e9 * batch), threads="1",
             ftengine_version="0.1.0", commit="abc1234", date="2026-11-25T00:00:00Z", host="Test CPU",
             device_label="Test CPU, 1 OpenMP threads", profiled_ms="%f" % (lat * 1.1), busy_ms="%f" % (0.8 * lat),
             overhead_share="0.1", dispatch_ms="%f" % (0.05 * lat), round=str(rnd), rounds="5", seed="1", order="0")
    r.update({k: str(v) for k, v in kw.items()})
    return r


def write_csv(path, rows):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLS)
        w.writeheader()
        for r in rows:
            w.writerow(r)


def synth_study(d, lat_fn, n_rounds=6, noise=0.0, seed=1, shuffle=False, sweeps=None, meta=True):
    """Writes every sweep of the CPU QUICK plan (or of `sweeps`) with lat_fn(sweep, model, mode, batch, cost) ms
    per point, each round scaled by a common load factor (up to 2x) and per-point noise; returns the plan."""
    rng = random.Random(seed)
    sweeps = sweeps or report.plan("cpu", "fp32", True)
    loads = [rng.uniform(1.0, 2.0) if noise else 1.0 for _ in range(n_rounds)]
    for s in sweeps:
        rows = []
        for rnd in range(n_rounds):
            for model, ln in s["models"]:
                for cost in (s.get("costs") or [None]):
                    for mode in s["modes"].split(","):
                        for b in map(int, s["batches"].split(",")):
                            lat = lat_fn(s["name"], model, mode, b, cost) * loads[rnd] * (1 + noise * rng.uniform(-1, 1))
                            kw = {}
                            if cost is not None:
                                kw = dict(op_cost_us="%g" % cost, step_cost_us="%g" % cost)
                            macs = {"funnel-small": 0.9e9, "mobilebert-uncased": 0.25e9, "bert-base-w2": 4e9}.get(model, 1e9)
                            rows.append(synth_row(model, mode, b, lat, rnd, length=ln or 8, macs="%d" % (macs * b), **kw))
        if s["name"] == "main-fp32":  # a failed point is reported, not dropped
            rows.append(synth_row(s["models"][0][0], "eager", 64, 0, 0, status="oom", error="out of memory",
                                  mean_ms="", median_ms="", min_ms=""))
        if shuffle:
            random.Random(seed + 1000).shuffle(rows)
        write_csv(os.path.join(d, s["name"] + ".csv"), rows)
    if meta:
        with open(os.path.join(d, "study.json"), "w") as f:
            json.dump({"device": "cpu", "dtype": "fp32", "quick": True, "sweeps": sweeps, "note": "synthetic"}, f)
    return sweeps


def clear_lat(sweep, model, mode, b, cost):
    if sweep.startswith("main"):
        return 10.0 if mode == "eager" else 6.0 + 0.01 * b
    if sweep == "depth":
        return {"bert-base-L2": 2.0, "bert-base-L4": 4.0, "bert-base-L8": 8.0, "bert-base": 12.0}.get(model, 24.0)
    if sweep == "width":
        return 40.0 * b if model.endswith("w2") else 10.0 * b
    if sweep.startswith("models"):
        return {"funnel-small": 10.0, "mobilebert-uncased": 30.0}.get(model, 10.0)
    return (1.0 + (cost or 0) / 10.0) * b * (0.5 if mode != "eager" else 1.0)


def verdicts_of(md):
    out = {}
    for n in range(1, 9):
        sec = re.search(r"### F%d: [^\n]+\n(.*?)(?=\n### F|\n## )" % n, md, re.S)
        out[n] = re.findall(r"^Verdict: (holds|does not hold|inconclusive \(within noise\)|inconclusive) \(.+\)$",
                            sec.group(1), re.M) if sec else None
    return out


class Span(unittest.TestCase):
    def test_span_is_the_rows_not_an_old_run(self):
        d = tempfile.mkdtemp()
        try:
            for name, dates in (("a", ["2026-11-26T14:25:23Z", "2026-11-26T14:20:01Z"]),
                                ("b", ["2026-11-26T14:31:00Z"])):
                with open(os.path.join(d, name + ".csv"), "w", newline="") as f:
                    w = csv.writer(f)
                    w.writerow(["model", "date"])
                    for x in dates:
                        w.writerow(["m", x])
            # a stale sweep the plan no longer has, and a missing one, do not count
            with open(os.path.join(d, "old.csv"), "w") as f:
                f.write("model,date\nm,2026-11-26T11:51:56Z\n")
            sweeps = [{"name": "a"}, {"name": "b"}, {"name": "missing"}]
            self.assertEqual(report.measured_span(d, sweeps), ("2026-11-26T14:20:01Z", "2026-11-26T14:31:00Z"))
            self.assertEqual(report.measured_span(d, [{"name": "missing"}]), (None, None))
        finally:
            shutil.rmtree(d, ignore_errors=True)


class Files(unittest.TestCase):
    def test_files_are_the_studys_own(self):
        d = tempfile.mkdtemp()
        try:
            for n in ("main-fp32.csv", "main-fp32.json", "models-1.csv", "models-1.json", "study.json",
                      "peers-main.json", "f.png", "f.svg", "notes.txt"):
                open(os.path.join(d, n), "w").close()
            meta = {"sweeps": [{"name": "main-fp32"}]}
            self.assertEqual(RT.study_files(d, meta), ["f.png", "f.svg", "main-fp32.csv", "main-fp32.json",
                                                      "peers-main.json", "study.json"])
        finally:
            shutil.rmtree(d, ignore_errors=True)


class Render(unittest.TestCase):
    """A whole report from synthetic sweeps: every finding has its heading and one
    verdict line computed from the data; noisy sweeps of the same machine never flip."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="ft_report_")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def render(self, d):
        self.assertEqual(report.render(d), 0)
        with open(os.path.join(d, "report.md")) as f:
            return f.read()

    def test_render(self):
        synth_study(self.dir, clear_lat)
        md = self.render(self.dir)
        v = verdicts_of(md)
        for n in range(1, 9):
            self.assertIsNotNone(v[n], "no section F%d" % n)
            self.assertEqual(len(v[n]), 1, "F%d: %s" % (n, v[n]))
        self.assertEqual(v[1], ["holds"])   # flat eager
        self.assertEqual(v[3], ["does not hold"])  # 4x the latency
        self.assertEqual(v[4], ["holds"])   # linear depth
        self.assertEqual(v[5], ["holds"])   # Funnel == BERT, MobileBERT slower (the others: no fewer MACs)
        self.assertEqual(v[6], ["holds"])   # MobileBERT 3x BERT
        self.assertIn("main-fp32: bert-tiny eager batch 64: oom (out of memory)", md)
        self.assertIn("paper: PyTorch (eager) | 10.54", md)
        self.assertIn("Test CPU, 1 OpenMP threads", md)
        self.assertIn("**Where this was verified.**", md.split("## Setup")[0])
        self.assertIn("has not run on a GPU yet", md)
        self.assertIn("median over rounds", md)
        self.assertIn("Where each gap comes from", md)
        self.assertRegex(md, r"Measured: the eager-graph gap at batch 1 is [0-9.]+ \[")
        self.assertIn("ftengine emulated eager: PyTorch-like (8 us per op)", md)
        self.assertNotIn("../shared", md)
        if plot.have_matplotlib():
            self.assertIn("![latency vs batch](latency_vs_batch.png)", md)
        else:
            self.assertIn("No figures:", md)

    def test_noisy_runs_do_not_flip(self):
        """Each finding's true value at or near its threshold, and a host whose load
        changes every round by up to 2x: over several runs no finding holds in one and
        fails in another, and the same rows in another order render the same verdicts."""
        def at_threshold(sweep, model, mode, b, cost):
            if sweep.startswith("main"):
                return {1: 10.0, 2: 11.0, 4: 12.5}.get(b, 3.0 * b) * (1.05 if mode == "eager" else 1.0)
            if sweep == "width":
                return 12.5 * b if model.endswith("w2") else 10.0 * b
            if sweep.startswith("models"):
                return {"funnel-small": 9.5, "mobilebert-uncased": 10.5}.get(model, 10.0)
            return clear_lat(sweep, model, mode, b, cost)
        seen = {}
        have, plot.have_matplotlib = plot.have_matplotlib, lambda: False  # figures: tested below, slow
        self.addCleanup(setattr, plot, "have_matplotlib", have)
        for seed in range(6):
            d = os.path.join(self.dir, "run%d" % seed)
            os.makedirs(d)
            synth_study(d, at_threshold, noise=0.04, seed=seed)
            v = verdicts_of(self.render(d))
            for n, vs in v.items():
                seen.setdefault(n, set()).update(vs)
            if seed == 0:  # the same rows shuffled: the same report
                d2 = os.path.join(self.dir, "shuffled")
                os.makedirs(d2)
                synth_study(d2, at_threshold, noise=0.04, seed=0, shuffle=True)
                self.assertEqual(verdicts_of(self.render(d2)), v)
        for n, vs in seen.items():
            self.assertFalse("holds" in vs and "does not hold" in vs, "F%d flipped across runs: %s" % (n, vs))
        for n in (1, 3, 5, 6):
            self.assertIn("inconclusive (within noise)", seen[n], "F%d at its threshold: %s" % (n, seen[n]))


def peer_result(model, batches, size, rounds=5):
    """A peer run as bench/peers.py writes it: ftengine's modes and the three peers on
    `model` at each batch (PyTorch eager 2x ftengine graph, TorchScript 1.5x, ORT 0.8x),
    plus the overhead shape, in `rounds` rounds under a common host load."""
    load = [1.0, 1.3, 0.9, 1.2, 1.1, 0.95, 1.05, 1.15, 0.85][:rounds]
    rows = []

    def row(peer, b, ms, point="curve", sz=size, **kw):
        rs = [P.round_stats([ms * f]) for f in load]
        r = dict(model=model, kind="text", peer=peer, threads=1, batch=b, size=sz, point=point, status="ok",
                 runtime="torch" if peer in ("pytorch-eager", "torchscript") else "ort", version="9",
                 provider="cpu", backend="test", **P.summarize(rs))
        r.update(kw)
        rows.append(r)
    for b in batches:
        for peer, k in (("ftengine-eager", 1.2), ("ftengine-graph", 1.0), ("ftengine-static", 1.0),
                        ("pytorch-eager", 2.0), ("torchscript", 1.5), ("ort-cpu", 0.8)):
            row(peer, b, k * (1 + b / 8))
    row("ftengine-eager", 1, 0.05, "overhead", sz=1, ops=50)
    row("pytorch-eager", 1, 0.2, "overhead", sz=1, ops=100)
    return {"rows": rows, "skipped": [], "commit": "abc1234", "golden": {}, "host": "test", "cpus": 2}


class ModelStudy(unittest.TestCase):
    """`make report MODEL=PRESET|DIR` through report.main, with and without peers: the
    sweeps, `ftengine info` and the peer run stubbed (synthetic rows), so the plumbing
    (the peers' plan for the model, their files, Table 3, the F1 curves, the section)
    is tested without a tool, torch or minutes of measuring."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="ft_report_model_")
        self.calls = []
        saved = (report.run_sweeps, report.model_kind, P.measure, P.ftengine_commit, P.VERBOSE)

        def restore():
            report.run_sweeps, report.model_kind, P.measure, P.ftengine_commit, P.VERBOSE = saved
        self.addCleanup(restore)
        self.addCleanup(shutil.rmtree, self.dir, True)
        report.run_sweeps = lambda tool, todo, device, outdir, threads: synth_study(
            outdir, clear_lat, sweeps=todo, meta=False) and []
        report.model_kind = lambda tool, model: "text"
        P.VERBOSE = False

        def measure(models, batches, threads, **kw):
            self.calls.append((models, batches, kw.get("seq"), kw.get("rounds")))
            return peer_result(models[0], batches, kw.get("seq"), kw.get("rounds"))
        P.measure = measure
        P.ftengine_commit = lambda tool: "abc1234"

    def run_report(self, model, *extra):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = report.main(["report.py", "--tool", sys.executable, "--device", "cpu", "--quick", "--dir", self.dir,
                              "--model", model, *extra])
        self.assertEqual(rc, 0, out.getvalue() + err.getvalue())
        with open(os.path.join(self.dir, "report.md")) as f:
            return f.read(), err.getvalue()

    def test_preset_with_peers(self):
        md, err = self.run_report("bert-tiny")
        main = next(s for s in report.plan("cpu", "fp32", True, model="bert-tiny", kinds={"bert-tiny": "text"})
                    if s["name"] == "main-fp32")
        # the peers on the study's model, length, batches and rounds
        self.assertEqual(self.calls, [(["bert-tiny"], [int(b) for b in main["batches"].split(",")], 8,
                                       main["rounds"])])
        self.assertIn("MODEL=bert-tiny", md)
        t3 = md[md.index("## Table 3"):]
        self.assertIn("paper: PyTorch (eager) | 10.54 | RTX 8000 (paper)", t3)
        # 2.25 ms under 9 rounds of load 0.85 .. 1.3: the median round 1.05x, the interval the 2nd lowest and highest
        self.assertIn("| PyTorch eager, bert-tiny length 8, fp32, 1 thread(s) | 2.363 [2.025, 2.700] | this host, same "
                      "run (peers-main.json, torch 9, 1 thread(s)) |", t3)
        f1 = md[md.index("### F1"):md.index("### F2")]
        self.assertIn("| batch | PyTorch eager ms | TorchScript ms | ONNX Runtime ms |", f1)
        sec = md[md.index("## ftengine's modes against the frameworks"):]
        got = dict(re.findall(r"^- \*\*(.+?): (holds|does not hold|inconclusive[^.]*)\.\*\*", sec, re.M))
        self.assertEqual(got["ftengine's best of graph/static is at or below PyTorch eager at every batch"], "holds")
        self.assertEqual(got["ftengine's best of graph/static is at or below ONNX Runtime (CPU provider) at every "
                             "batch"], "does not hold")  # 1.25x in every round
        for n in range(1, 9):
            self.assertEqual(len(verdicts_of(md)[n] or []), 1, "F%d" % n)
        with open(os.path.join(self.dir, "study.json")) as f:
            meta = json.load(f)
        self.assertEqual((meta["peers"], meta["peers_note"]), ("on", None))
        # a second report of the same commit keeps the peer run (a clean tree's commit)
        self.run_report("bert-tiny")
        self.assertEqual(len(self.calls), 1)

    def test_preset_peers_off(self):
        md, err = self.run_report("bert-tiny", "--no-peers")
        self.assertEqual(self.calls, [])
        self.assertIn("No peer run in this report: not run (PEERS=0).", md)
        self.assertNotIn("(measured here", md)
        self.assertIn("report: peers (PyTorch, TorchScript, ONNX Runtime): not run (PEERS=0)", err)

    def test_directory_and_unknown_model_skip_peers(self):
        md, err = self.run_report(GOLDEN)
        self.assertEqual(self.calls, [])
        self.assertIn("No peer run in this report: skipped: %s is a checkpoint directory" % GOLDEN, md)
        self.assertEqual(err.count("report: peers (PyTorch, TorchScript, ONNX Runtime): skipped:"), 1)
        md, err = self.run_report("bert-small")  # an ftengine preset bench/torch_base.py does not define
        self.assertEqual(self.calls, [])
        self.assertIn("skipped: bert-small has no torch definition", md)


class Panels(unittest.TestCase):
    """The per-model study in panels: one sweep each, F5 over the text panel's efficient
    models against BERT-base and RoBERTa-base, the vision panel's line, skipped presets."""

    def test_plan_and_render(self):
        known = set(m["preset"] for m in report.MODELS) - {"roberta-base", "gpt2"}
        sweeps = report.plan("cpu", "fp32", True, known=known)
        by = {s["name"]: s for s in sweeps if s["group"] == "models"}
        self.assertEqual(sorted(by), ["models-speech", "models-text", "models-vision"])
        self.assertEqual([m for m, _ in by["models-text"]["models"]],
                         ["bert-base", "distilbert-base", "mobilebert-uncased", "squeezebert-uncased",
                          "albert-base-v2", "deberta-base", "funnel-small"])
        vis = dict((m, ln) for m, ln in by["models-vision"]["models"])
        self.assertIsNone(vis["vit-base-patch16-224"])  # its config's 224 only
        self.assertEqual(vis["resnet-50"], 64)
        self.assertEqual([m for m, _ in by["models-speech"]["models"]], ["wavlm-base", "wav2vec2-base",
                                                                       "hubert-base-ls960"])
        d = tempfile.mkdtemp(prefix="ft_report_panels_")
        self.addCleanup(shutil.rmtree, d, True)
        sweeps = report.plan("cpu", "fp32", True)
        macs = {"distilbert-base": 0.5e9, "mobilebert-uncased": 0.25e9, "squeezebert-uncased": 0.3e9,
                "mobilenet_v2_1.0_224": 0.07e9, "efficientnet-b0": 0.09e9}

        def lat(sweep, model, mode, b, cost):
            own = {"distilbert-base": 5.0, "mobilebert-uncased": 30.0, "squeezebert-uncased": 12.0,
                   "mobilenet_v2_1.0_224": 11.0, "efficientnet-b0": 12.0}
            return own.get(model) or clear_lat(sweep, model, mode, b, cost)
        synth_study(d, lat, sweeps=sweeps)
        for s in sweeps:  # the panels' MACs
            p = os.path.join(d, s["name"] + ".csv")
            rows = sd.read_rows(p)
            for r in rows:
                if r["model"] in macs:
                    r["macs"] = "%d" % macs[r["model"]]
            write_csv(p, rows)
        with open(os.path.join(d, "study.json")) as f:
            meta = json.load(f)
        meta["skipped_presets"] = ["gpt2"]
        with open(os.path.join(d, "study.json"), "w") as f:
            json.dump(meta, f)
        have, plot.have_matplotlib = plot.have_matplotlib, lambda: False
        self.addCleanup(setattr, plot, "have_matplotlib", have)
        with contextlib.redirect_stdout(io.StringIO()):
            self.assertEqual(report.render(d), 0)
        with open(os.path.join(d, "report.md")) as f:
            md = f.read()
        f5 = md[md.index("### F5"):md.index("### F6")]
        self.assertIn("| model | input length | GMACs (b1) | b1 ms | b2 ms | / BERT-base (b1) | / RoBERTa-base (b1) |",
                      f5)
        self.assertIn("| ViT-B/16 | its config's |", f5)
        self.assertIn("Skipped (not a preset of this build): gpt2.", f5)
        # DistilBERT: half of BERT's latency with half its MACs, clearly faster: a counterexample
        self.assertEqual(verdicts_of(md)[5], ["does not hold"])
        self.assertIn("clearly faster: DistilBERT/BERT-base, DistilBERT/RoBERTa-base", f5)
        self.assertIn("Vision panel, the same rule (MobileNetV2, EfficientNet-B0 against ResNet-50): holds", f5)
        self.assertEqual(verdicts_of(md)[6], ["holds"])


@unittest.skipUnless(os.access(TOOL, os.X_OK), "no tool at %s (build it with make)" % TOOL)
class ToolData(unittest.TestCase):
    """The tool's files as the report reads them, on the golden model."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="ft_report_tool_")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def sweep(self, batches, *extra):
        c = os.path.join(self.dir, "s.csv")
        j = os.path.join(self.dir, "s.json")
        p = subprocess.run([TOOL, "sweep", GOLDEN, "--modes", "eager,graph", "--batches", batches, "--iters", "2",
                            "--warmup", "0", "--threads", "1", "--overhead", "--rounds", "3", "--csv", c,
                            "--json", j, *extra],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
        return p, c, j

    def test_schema_intervals_and_resume(self):
        p, c, j = self.sweep("1,2")
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(c, newline="") as f:
            rd = csv.DictReader(f)
            self.assertEqual(rd.fieldnames, COLS)
            rows = list(rd)
        self.assertEqual(len(rows), 12)
        for r in rows:
            self.assertEqual(r["status"], "ok")
            self.assertGreater(sd.round_value(r), 0)
            self.assertGreater(sd.fnum(r["profiled_ms"]), 0)
            self.assertIsNotNone(sd.fnum(r["busy_ms"]))
            self.assertIsNotNone(sd.fnum(r["dispatch_ms"]))
            self.assertRegex(r["date"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
            self.assertTrue(r["commit"] and r["host"] and r["device_label"])
            self.assertNotIn("-1", r.values())
        with open(j) as f:
            d = json.load(f)
        self.assertEqual(d["schema"], "ftengine-sweep/2")
        self.assertEqual(d["failed"], 0)
        self.assertEqual(len(d["points"]), 4)
        for k in ("commit", "date", "host", "device_label", "threads", "cuda_version", "ftengine_version"):
            self.assertIn(k, d["provenance"])
        # the tool's summary and this module compute the same median and interval
        for pt in d["points"]:
            e = sd.curve(rows, pt["mode"])[pt["batch"]]
            self.assertAlmostEqual(e.med, pt["latency_ms"], places=4)
            self.assertAlmostEqual(e.lo, pt["ci_lo_ms"], places=4)
            self.assertAlmostEqual(e.hi, pt["ci_hi_ms"], places=4)
            self.assertAlmostEqual(e.level, pt["ci_level"], places=4)
            self.assertEqual(len(pt["rounds"]), 3)
        # the report's resume: one more batch measures only that one
        p2, _, _ = self.sweep("1,2,3", "--resume")
        self.assertEqual(p2.returncode, 0, p2.stderr)
        self.assertIn("resumed: 12 of 18 rows", p2.stdout)
        with open(c, newline="") as f:
            rows2 = list(csv.DictReader(f))
        self.assertEqual(len(rows2), 18)
        self.assertEqual([r["date"] for r in rows2[:12]], [r["date"] for r in rows])

    def test_model_report(self):
        """`make report MODEL=tests/golden/bert QUICK=1`: the per-model parts, rendered."""
        d = os.path.join(self.dir, "own")
        p = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "report.py"), "--tool", TOOL, "--device", "cpu",
                            "--quick", "--dir", d, "--model", GOLDEN],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        with open(os.path.join(d, "report.md")) as f:
            md = f.read()
        self.assertIn("MODEL=%s" % GOLDEN, md)
        v = verdicts_of(md)
        for n in range(1, 9):
            self.assertEqual(len(v[n] or []), 1, "F%d: %s" % (n, v[n]))
        self.assertIn("not part of this study", md)
        self.assertRegex(md, r"Measured: the eager-graph gap at batch 1 is")
        with open(os.path.join(d, "study.json")) as f:
            names = [s["name"] for s in json.load(f)["sweeps"]]
        self.assertEqual(names, ["main-fp32", "emulation"])
        if not plot.have_matplotlib():
            self.assertIn("WARNING: no figures", p.stderr)
            self.assertIn(sys.executable, p.stderr)


class PlotCli(unittest.TestCase):
    def test_help(self):
        p = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "plot.py"), "--help"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("usage: plot.py", p.stdout)
        self.assertIn("CSV", p.stdout)

    def test_csv(self):
        d = tempfile.mkdtemp(prefix="ft_plot_csv_")
        try:
            rows = [synth_row("m", mode, b, 1.0 + b, rnd) for rnd in range(3) for mode in ("eager", "graph")
                    for b in (1, 2, 4)]
            path = os.path.join(d, "s.csv")
            write_csv(path, rows)
            p = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "plot.py"), path, "--out", d],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            if plot.have_matplotlib():
                self.assertTrue(os.path.getsize(os.path.join(d, "s.png")) > 1000)
            else:
                self.assertIn("matplotlib is not installed", p.stdout)
            bad = os.path.join(d, "x.csv")
            with open(bad, "w") as f:
                f.write("a,b\n1,2\n")
            p = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "plot.py"), bad],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
            self.assertEqual(p.returncode, 1 if plot.have_matplotlib() else 0, p.stderr)
        finally:
            shutil.rmtree(d, ignore_errors=True)


class Figures(unittest.TestCase):
    def test_figures(self):
        if not plot.have_matplotlib():
            self.skipTest("matplotlib not installed for %s (apt-get install python3-matplotlib, or make test "
                          "PYTHON=/path/to/python3 with it): figures not tested" % sys.executable)
        d = tempfile.mkdtemp(prefix="ft_plot_")
        try:
            rows = [synth_row("m", mode, b, 1.0 + b, rnd) for rnd in range(3) for mode in ("eager", "graph", "static")
                    for b in (1, 2, 4)]
            e = sd.estimate
            files = plot.latency_vs_batch(d, plot.mode_series(rows), "t", "c") + \
                plot.overhead_band(d, sd.curve(rows, "eager"), sd.curve(rows, "eager", key=sd.kernel_ms), "t", "c") + \
                plot.overhead_share(d, {"eager": {1: e([0.1, 0.2]), 2: e([0.1, 0.15])}}, "t", "c") + \
                plot.emulation(d, [("0 us eager", {1: e([1.0, 1.1]), 2: e([2.0, 2.1])}, "-")], "t", "c") + \
                plot.models_vs_macs(d, [("Text", [("a", 1e9, e([2.0, 2.2])), ("b", 2e9, e([1.0, 1.1]))]),
                                        ("Vision", [("c", 4e9, e([3.0, 3.1]))]), ("Speech", [])], "t", "c") + \
                plot.depth(d, {2: e([1.0, 1.1]), 4: e([2.0, 2.1])}, (0.0, 0.5), "t", "c")
            self.assertEqual(len(files), 12)
            for p in files:
                self.assertGreater(os.path.getsize(p), 1000, p)
        finally:
            shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    import unittest_result

    unittest_result.main(1)
