#!/usr/bin/env python3
"""test_report.py - the report's Python side (bench/report.py, verdicts.py,
studydata.py, plot.py) with the system python3 and its standard library:
verdicts on synthetic curves (a flat curve holds F1, a linear one does not),
reading the CSVs, a whole report rendered from synthetic sweeps (F1-F8 each with
a verdict line), resuming a report through the tool on the golden model, the
tool's CSV/JSON schema, and the figures when matplotlib is installed (skipped
with a line saying so otherwise). Prints "RESULT: P passed, F failed, S skipped"
for tests/run_tests.sh.
"""
import csv
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "bench"))
import plot  # noqa: E402
import report  # noqa: E402
import studydata as sd  # noqa: E402
import verdicts as V  # noqa: E402

TOOL = os.path.join(ROOT, os.environ.get("FT_BUILD") or "build", "ftengine")
GOLDEN = os.path.join(ROOT, "tests", "golden", "bert")
COLS = ["model", "arch", "device", "dtype", "mode", "batch", "length", "protocol", "iters", "mean_ms",
        "median_ms", "min_ms", "first_ms", "kernels_per_forward", "overhead_ms", "overhead_share", "status",
        "error", "p90_ms", "max_ms", "profiled_ms", "busy_ms", "warmup", "op_cost_us", "params", "macs",
        "threads", "ftengine_version", "commit", "date", "host", "device_label", "cuda_version"]


class Verdicts(unittest.TestCase):
    B = [1, 2, 4, 8, 16, 32, 64]

    def test_f1_flat_holds(self):
        v, why = V.f1({b: 10.0 for b in self.B})
        self.assertEqual(v, V.HOLDS, why)

    def test_f1_linear_does_not_hold(self):
        v, why = V.f1({b: 1.5 * b for b in self.B})
        self.assertEqual(v, V.NOT, why)

    def test_f1_plateau_then_growth(self):
        c = {b: max(10.0, 1.0 * b) for b in self.B}  # flat to 8, then linear
        self.assertEqual(V.plateau(c), 8)
        self.assertEqual(V.f1(c)[0], V.HOLDS)

    def test_f1_too_few_points(self):
        self.assertEqual(V.f1({1: 1.0, 64: 3.0})[0], V.INCON)

    def test_f2(self):
        e = {1: 10.0, 64: 100.0}
        g = {1: 6.0, 64: 95.0}
        s = {1: 3.0, 64: 94.0}
        self.assertEqual(V.f2(e, g, s)[0], V.HOLDS)
        self.assertEqual(V.f2(g, e, s)[0], V.NOT)  # "eager" faster than "graph"
        self.assertEqual(V.f2(e, g, s, static_is_graph=True)[0], V.INCON)
        self.assertEqual(V.f2(e, g, {1: 6.0, 64: 95.0})[0], V.INCON)  # graph == static: noise band

    def test_f3(self):
        self.assertEqual(V.f3({1: 10.0}, {1: 11.0})[0], V.HOLDS)
        self.assertEqual(V.f3({1: 10.0}, {1: 40.0})[0], V.NOT)
        self.assertEqual(V.f3({1: 10.0}, {1: 13.5})[0], V.INCON)

    def test_f4(self):
        self.assertEqual(V.f4({2: 2.0, 4: 4.0, 8: 8.1, 12: 12.0, 24: 24.2})[0], V.HOLDS)
        self.assertEqual(V.f4({2: 5.0, 4: 20.0, 8: 1.0, 12: 30.0, 24: 2.0})[0], V.NOT)
        self.assertEqual(V.f4({2: 1.0, 4: 2.0})[0], V.INCON)
        a, b, r2 = V.linfit([1, 2, 3], [3, 5, 7])
        self.assertAlmostEqual(a, 1.0)
        self.assertAlmostEqual(b, 2.0)
        self.assertAlmostEqual(r2, 1.0)

    def test_f5_f6(self):
        bert = {1: 10.0}
        self.assertEqual(V.slower_than_bert("M", {1: 30.0}, bert, 2.5e9, 11e9, "slower")[0], V.HOLDS)
        self.assertEqual(V.slower_than_bert("M", {1: 3.0}, bert, 2.5e9, 11e9, "slower")[0], V.NOT)
        self.assertEqual(V.slower_than_bert("F", {1: 10.0}, bert, 8e9, 11e9, "not faster")[0], V.HOLDS)
        self.assertEqual(V.slower_than_bert("F", {1: 5.0}, bert, 8e9, 11e9, "not faster")[0], V.NOT)
        self.assertEqual(V.slower_than_bert("F", {1: 10.0}, bert, 12e9, 11e9, "not faster")[0], V.INCON)
        self.assertEqual(V.slower_than_bert("F", {}, bert, 8e9, 11e9, "not faster")[0], V.INCON)

    def test_f7_f8(self):
        flat16 = {b: 10.0 if b <= 16 else b for b in self.B}
        flat4 = {b: 10.0 if b <= 4 else 3.0 * b for b in self.B}
        self.assertEqual(V.f7(flat16, flat4)[0], V.HOLDS)
        self.assertEqual(V.f7(flat4, flat16)[0], V.NOT)
        self.assertEqual(V.f7({}, {}, measurable=False, why="cpu")[0], V.INCON)
        g = {1: 6.0, 64: 100.0}
        self.assertEqual(V.f8(g, {1: 3.0, 64: 99.0})[0], V.HOLDS)
        self.assertEqual(V.f8(g, {1: 3.0, 64: 50.0})[0], V.NOT)
        self.assertEqual(V.f8(g, {1: 5.9, 64: 99.0})[0], V.INCON)
        self.assertEqual(V.f8(g, g, static_is_graph=True)[0], V.INCON)

    def test_fmt(self):
        self.assertEqual(V.fmt(V.HOLDS, "x"), "Verdict: holds (x)")
        with self.assertRaises(AssertionError):
            V.fmt("maybe", "x")


def synth_row(name, mode, batch, lat, **kw):
    r = {c: "" for c in COLS}
    r.update(model=name, arch="BertModel", device="cpu", dtype="f32", mode=mode, batch=str(batch), length="8",
             protocol="sync", iters="5", mean_ms="%f" % lat, median_ms="%f" % lat, min_ms="%f" % lat,
             status="ok", warmup="1", params="1000", macs="%d" % (1e9 * batch), threads="1",
             ftengine_version="0.1.0", commit="abc1234", date="2026-11-25T00:00:00Z", host="Test CPU",
             device_label="Test CPU, 1 OpenMP threads", profiled_ms="%f" % (lat * 1.1), busy_ms="%f" % lat,
             overhead_share="0.1")
    r.update({k: str(v) for k, v in kw.items()})
    return r


def write_csv(path, rows):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLS)
        w.writeheader()
        for r in rows:
            w.writerow(r)


class Render(unittest.TestCase):
    """A whole report from synthetic sweeps: every finding has its heading and one
    verdict line computed from the data."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="ft_report_")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_render(self):
        sweeps = report.plan("cpu", "fp32", True)
        for s in sweeps:
            rows = []
            for mode in s["modes"].split(","):
                for b in map(int, s["batches"].split(",")):
                    lat = 10.0 if s["name"].startswith("main") and mode == "eager" else 2.0 * b
                    if s["name"].startswith("depth-L"):
                        lat = float(s["name"][7:])
                    rows.append(synth_row(s["model"], mode, b, lat))
            if s["name"] == "main-fp32":  # a failed point is reported, not dropped
                rows.append(synth_row(s["model"], "eager", 64, 0, status="oom", error="out of memory",
                                      mean_ms="", median_ms="", min_ms=""))
            write_csv(os.path.join(self.dir, s["name"] + ".csv"), rows)
        with open(os.path.join(self.dir, "study.json"), "w") as f:
            json.dump({"device": "cpu", "dtype": "fp32", "quick": True, "sweeps": sweeps}, f)
        self.assertEqual(report.render(self.dir), 0)
        with open(os.path.join(self.dir, "report.md")) as f:
            md = f.read()
        for n in range(1, 9):
            sec = re.search(r"### F%d: [^\n]+\n(.*?)(?=\n### F|\n## )" % n, md, re.S)
            self.assertIsNotNone(sec, "no section F%d" % n)
            verdicts = re.findall(r"^Verdict: (holds|does not hold|inconclusive) \(.+\)$", sec.group(1), re.M)
            self.assertEqual(len(verdicts), 1, "F%d: %s" % (n, sec.group(1)[-300:]))
        self.assertIn("Verdict: holds", re.search(r"### F1.*?### F2", md, re.S).group(0))  # flat eager
        self.assertIn("Verdict: holds", re.search(r"### F4.*?### F5", md, re.S).group(0))  # linear depth
        self.assertIn("main-fp32: eager batch 64: oom (out of memory)", md)
        self.assertIn("paper: PyTorch (eager) | 10.54", md)
        self.assertIn("Test CPU, 1 OpenMP threads", md)
        if plot.have_matplotlib():
            self.assertIn("![latency vs batch](latency_vs_batch.png)", md)
        else:
            self.assertIn("No figures:", md)


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
                            "--warmup", "0", "--threads", "1", "--overhead", "--csv", c, "--json", j, *extra],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
        return p, c, j

    def test_schema_and_resume(self):
        p, c, j = self.sweep("1,2")
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(c, newline="") as f:
            rd = csv.DictReader(f)
            self.assertEqual(rd.fieldnames, COLS)
            rows = list(rd)
        self.assertEqual(len(rows), 4)
        for r in rows:
            self.assertEqual(r["status"], "ok")
            self.assertGreater(sd.latency(r), 0)
            self.assertGreater(sd.fnum(r["profiled_ms"]), 0)
            self.assertIsNotNone(sd.fnum(r["busy_ms"]))
            self.assertRegex(r["date"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
            self.assertTrue(r["commit"] and r["host"] and r["device_label"])
            self.assertNotIn("-1", r.values())
        with open(j) as f:
            d = json.load(f)
        self.assertEqual(d["schema"], "ftengine-sweep/1")
        self.assertEqual(d["failed"], 0)
        self.assertEqual(len(d["points"]), 4)
        for k in ("commit", "date", "host", "device_label", "threads", "cuda_version", "ftengine_version"):
            self.assertIn(k, d["provenance"])
        self.assertEqual(set(pt["mode"] for pt in d["points"]), {"eager", "graph"})
        # the report's resume: the same sweep with one more batch measures only that one
        p2, _, _ = self.sweep("1,2,3", "--resume")
        self.assertEqual(p2.returncode, 0, p2.stderr)
        self.assertIn("resumed: 4 of 6 points", p2.stdout)
        with open(c, newline="") as f:
            rows2 = list(csv.DictReader(f))
        self.assertEqual(len(rows2), 6)
        self.assertEqual([r["date"] for r in rows2[:4]], [r["date"] for r in rows])
        with open(j) as f:
            self.assertEqual(len(json.load(f)["points"]), 6)


class Figures(unittest.TestCase):
    def test_figures(self):
        if not plot.have_matplotlib():
            self.skipTest("matplotlib not installed (apt-get install python3-matplotlib): figures not tested")
        d = tempfile.mkdtemp(prefix="ft_plot_")
        try:
            rows = [synth_row("m", mode, b, 1.0 + b) for mode in ("eager", "graph", "static") for b in (1, 2, 4)]
            files = plot.latency_vs_batch(d, rows, "t") + plot.overhead_band(d, rows, "t") + \
                plot.overhead_share(d, rows, "t") + plot.emulation(d, [(0, {1: 1.0, 2: 2.0})], rows, "t") + \
                plot.models_vs_macs(d, [("a", 1e9, 2.0), ("b", 2e9, 1.0)], rows, "t")
            self.assertEqual(len(files), 10)
            for p in files:
                self.assertGreater(os.path.getsize(p), 1000, p)
        finally:
            shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    res = unittest.main(exit=False, verbosity=1).result
    skipped = len(res.skipped)
    for t, why in res.skipped:
        print("SKIP %s: %s" % (t.id(), why))
    failed = len(res.failures) + len(res.errors)
    print("RESULT: %d passed, %d failed, %d skipped" % (res.testsRun - failed - skipped, failed, skipped))
    sys.exit(1 if failed else 0)
