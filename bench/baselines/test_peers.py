#!/usr/bin/env python3
"""test_peers.py - tests of the CPU peer runners (bench/peers.py, report_peers.py,
bench/baselines/torch_runner.py, ort_runner.py, ort_runner.js, st.py), run by
tests/test_baselines.sh in `make test` with the python3 on PATH.

Always (standard library): safetensors round trips and the golden criterion
(which must fail on a perturbed, NaN or mis-shaped output), the round statistics
and ratio intervals, the workers' environment (thread pools, the OpenBLAS pin),
the tables, the CLI's refusals, a run with every peer missing (skipped, each with
its reason, nothing failing), and ort_runner.py's protocol against a stand-in
onnxruntime module. Where a python with torch is found (this one or another
python3 on PATH; FT_TORCH_PYTHON names one) and build/ftengine exists: PyTorch
eager and TorchScript on the BERT and ResNet golden cases against `ftengine run`'s
outputs, ONNX Runtime (Python module or onnxruntime-node) on the same exports, a
changed activation that must fail that check, and a short interleaved measurement
with every runner. Skipped with a line naming what is missing otherwise.
"""
import contextlib
import io
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
import peers as P  # noqa: E402
import report_peers as RP  # noqa: E402
import st  # noqa: E402

P.VERBOSE = False
TOOL = os.path.join(ROOT, os.environ.get("FT_BUILD") or "build", "ftengine")
GOLDEN = os.path.join(ROOT, "tests", "golden")
TPY, TWHY = P.find_python("torch", "FT_TORCH_PYTHON")
NO_TORCH = "no python with torch (%s): the peers' golden checks against ftengine were not run" % TWHY
NO_TOOL = "%s not built: nothing to compare the peers with" % TOOL


def f32(vals):
    return struct.pack("<%df" % len(vals), *vals)


class SafetensorsAndCriterion(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="ft_peers_")

    def tearDown(self):
        shutil.rmtree(self.dir)

    def test_round_trip(self):
        p = os.path.join(self.dir, "a.safetensors")
        st.write(p, [("x", "F32", (2, 3), f32([0.5 * i for i in range(6)])),
                     ("ids", "I64", (2,), struct.pack("<2q", 7, -3))], metadata={"k": 1})
        t = st.read(p)
        self.assertEqual(t["x"][:2], ("F32", (2, 3)))
        self.assertEqual(list(t["x"][2]), [0.5 * i for i in range(6)])
        self.assertEqual(list(t["ids"][2]), [7, -3])
        with open(p, "rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
        self.assertEqual(n % 8, 0)
        with self.assertRaisesRegex(ValueError, "bytes for F32"):
            st.write(p, [("x", "F32", (3,), f32([1, 2]))])
        with open(p, "wb") as f:
            f.write(struct.pack("<Q", 1000) + b"{}")
        with self.assertRaisesRegex(ValueError, "truncated"):
            st.read(p)

    def test_criterion_fails_where_it_should(self):
        base = [1.0, -2.0, 3.0, 0.25] * 8
        exp = ("F32", (32,), base)
        self.assertTrue(st.compare("y", ("F32", (32,), [v * (1 + 1e-7) for v in base]), exp)[0])
        bad = list(base)
        bad[3] += 1e-3
        ok, line = st.compare("y", ("F32", (32,), bad), exp)
        self.assertFalse(ok)
        self.assertIn("over tolerance", line)
        self.assertFalse(st.compare("y", ("F32", (32,), base[:-1] + [float("nan")]), exp)[0])
        self.assertFalse(st.compare("y", ("F32", (4, 8), base), exp)[0])


class Statistics(unittest.TestCase):
    def test_summary_and_interval(self):
        rounds = [P.round_stats(s) for s in ([3.0, 1.0, 2.0], [4.0, 5.0, 6.0], [2.0, 2.5, 9.0])]
        self.assertEqual(rounds[0], {"median": 2.0, "min": 1.0, "mean": 2.0})
        s = P.summarize(rounds)
        self.assertEqual((s["median_ms"], s["median_lo_ms"], s["median_hi_ms"]), (2.5, 2.0, 5.0))
        self.assertEqual((s["min_ms"], s["min_lo_ms"], s["min_hi_ms"]), (2.0, 1.0, 4.0))
        self.assertAlmostEqual(s["interval_coverage"], 0.75)
        self.assertAlmostEqual(P.summarize(rounds * 2)["interval_coverage"], 1 - 1 / 32)

    def test_ratio_interval(self):
        # the report's rule (bench/studydata.py): per round, then the median and its
        # order-statistics interval; a load common to both rows of a round cancels
        load = [1.0, 1.5, 0.8, 1.2, 0.9]
        a = {"status": "ok", "round_stats": [{"median": 2.0 * f} for f in load]}
        b = {"status": "ok", "round_stats": [{"median": 4.0 * f * (1 + d)} for f, d in
                                             zip(load, (0, 0.1, -0.1, 0.05, -0.05))]}
        r = RP.ratio(a, b)
        self.assertAlmostEqual(r.med, 0.5)
        self.assertAlmostEqual(r.lo, 0.5 / 1.1)
        self.assertAlmostEqual(r.hi, 0.5 / 0.9)
        e = RP.est(a)
        self.assertEqual((e.med, e.lo, e.hi, e.n), (2.0, 1.6, 3.0, 5))
        self.assertIsNone(RP.ratio(a, dict(b, status="failed")))
        self.assertIsNone(RP.est({"status": "failed"}))


class Environment(unittest.TestCase):
    def test_pools_and_openblas_pin(self):
        saved = {k: os.environ.get(k) for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
        os.environ["OPENBLAS_CORETYPE"], os.environ["OPENBLAS_L2_SIZE"] = "Haswell", "512"
        try:
            env = P.worker_env(3, "/nonexistent/lib")
            for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
                self.assertEqual(env[v], "3")
            self.assertNotIn("OPENBLAS_CORETYPE", env)  # auto: OpenBLAS detects the CPU
            self.assertNotIn("OPENBLAS_L2_SIZE", env)
            self.assertTrue(env["LD_LIBRARY_PATH"].startswith("/nonexistent/lib"))
            self.assertEqual(P.worker_env(1, openblas="keep")["OPENBLAS_CORETYPE"], "Haswell")
            self.assertEqual(P.worker_env(1, openblas="SkylakeX")["OPENBLAS_CORETYPE"], "SkylakeX")
            if not (os.environ.get("OMP_WAIT_POLICY") or os.environ.get("GOMP_SPINCOUNT")):
                self.assertEqual(env["GOMP_SPINCOUNT"], P.TOOL_SPINCOUNT)  # as ftengine bench waits
                self.assertNotIn("GOMP_SPINCOUNT", P.worker_env(1, omp_wait="default"))
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v

    def test_spincount_is_the_tools(self):
        with open(os.path.join(ROOT, "tools", "omp_policy.c")) as f:
            m = re.search(r'#define FT_TOOL_SPINCOUNT "(\d+)"', f.read())
        self.assertEqual(m.group(1), P.TOOL_SPINCOUNT)

    def test_kinds_and_golden_cases(self):
        self.assertEqual(P.kind_of("bert-base"), "text")
        self.assertEqual(P.kind_of("resnet-50"), "vision")
        self.assertEqual(P.kind_of("wavlm-base"), "speech")
        if os.path.exists(TOOL):  # the tool's own word for the length agrees
            for m in ("bert-base", "resnet-50", "wavlm-base"):
                self.assertEqual(P.kind_of(m, TOOL), P.kind_of(m))
        self.assertEqual(os.path.basename(P.golden_case("bert-mini")), "bert")
        self.assertEqual(os.path.basename(P.golden_case("resnet-50")), "resnet")
        self.assertIsNone(P.golden_case("distilbert-base"))


LOAD = [1.0, 0.95, 1.05, 0.9, 1.1]  # a host load common to every runner of a round
DEV = [0.0, 1.0, -1.0, 0.5, -0.5]  # a runner's own noise, per round


def synthetic_result():
    """A peer run on bert-tiny (batch 1 and 4, 5 rounds): ftengine static the best mode,
    PyTorch eager and TorchScript clearly slower (PyTorch eager/TorchScript 1.33 at batch 1,
    1.48 at batch 4), ORT a little slower than static with a
    noise of its own (its ratio interval straddles the 1.05 threshold), the overhead shape
    with ftengine eager at 1 us and PyTorch eager at 2 us per op, ORT failed there."""
    def row(peer, batch, ms, point="curve", noise=0.0, **kw):
        rs = [P.round_stats([ms * f * (1 + noise * d)]) for f, d in zip(LOAD, DEV)]
        r = dict(model="bert-tiny", kind="text", peer=peer, threads=1, batch=batch, size=8, point=point, status="ok",
                 runtime="x", version="1", provider="cpu", backend="b", **P.summarize(rs))
        r.update(kw)
        return r
    rows = []
    for b, k in ((1, 1.0), (4, 2.0)):
        rows += [row("ftengine-eager", b, 1.2 * k), row("ftengine-graph", b, 1.0 * k),
                 row("ftengine-static", b, 0.9 * k),
                 row("pytorch-eager", b, 2.0 * k), row("torchscript", b, 1.5 * k * (0.9 if b == 4 else 1.0)),
                 row("ort-cpu", b, 0.87 * k, noise=0.06)]
    rows += [row("ftengine-eager", 1, 0.05, "overhead", size=1, ops=50), row("pytorch-eager", 1, 0.2, "overhead",
                                                                            size=1, ops=100),
             dict(row("ort-cpu", 1, 0.05, "overhead", size=1, ops=None), status="failed", why="x")]
    return {"rows": rows, "host": "cpu", "cpus": 2, "loadavg": [0.5, 0.7], "commit": "abc1234", "skipped":
            [{"peer": "ort-cpu", "why": "not installed"}], "golden": {}}


class Tables(unittest.TestCase):
    def test_side_by_side(self):
        md = RP.table_md(synthetic_result())
        lines = md.strip().splitlines()
        self.assertEqual(len(lines), 4)
        # batch 1: the best of graph/static is static (0.9); / ORT round by round: 0.9 / (0.87 (1 + 0.06 d)),
        # d = -1 .. 1: median 1.03, interval [0.98, 1.10] (5 rounds: the whole range); / PyTorch eager 0.45
        # and / TorchScript 0.60 in every round (the host load cancels)
        self.assertIn("| 0.900 [0.810, 0.990] | 2.000 [1.800, 2.200] |", lines[2])
        self.assertIn("| static | 1.03 [0.98, 1.10] | 0.45 [0.45, 0.45] | 0.60 [0.60, 0.60] |", lines[2])
        ov = RP.overhead_md(synthetic_result())
        self.assertIn("| ftengine-eager | 0.050 [0.045, 0.055] | 50 | 1.00 [0.90, 1.10] |", ov)  # 50 us / 50 ops
        self.assertIn("| pytorch-eager | 0.200 [0.180, 0.220] | 100 | 2.00 [1.80, 2.20] |", ov)
        self.assertIn("| ort-cpu | - | - | - |", ov)
        # each of ftengine's modes against the framework it stands in for, round by round
        # (per forward 0.05 / 0.2, per op 1 / 2 us)
        self.assertIn("| ftengine eager | PyTorch eager | 0.25 [0.25, 0.25] | 0.50 [0.50, 0.50] |", ov)
        self.assertIn("| ftengine graph | TorchScript (trace + freeze) | - | - |", ov)
        pv = RP.provenance_md(synthetic_result())
        self.assertIn("skipped ort-cpu: not installed", pv)
        self.assertIn("ftengine commit: abc1234", pv)


class Cli(unittest.TestCase):
    def test_refusals(self):
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            self.assertEqual(P.main(["--models", "no-such-model"]), 2)
            self.assertEqual(P.main(["--models", "bert-tiny", "--ftengine-modes", "warp"]), 2)
            self.assertEqual(P.main(["--models", "bert-tiny", "--batches", "1,x"]), 2)
            self.assertEqual(P.main(["--models", "bert-tiny", "--rounds", "0"]), 2)
        for what in ("unknown model no-such-model", "unknown ftengine mode warp", "comma-separated integers",
                     "must be positive"):
            self.assertIn(what, err.getvalue())
        with self.assertRaisesRegex(ValueError, "unknown peer"):
            P.measure(["bert-tiny"], [1], [1], peers=["tvm"], ft_modes=[])

    def test_every_peer_missing_is_skipped(self):
        saved = P.find_python, P.find_ort
        P.find_python = lambda module, env: (None, "%s is not importable (test)" % module)
        d = tempfile.mkdtemp(prefix="ft_peers_")
        try:
            res = P.measure(["bert-tiny"], [1], [1], peers=P.PEERS, ft_modes=[], tool=None, cache=d, logdir=d)
        finally:
            P.find_python, P.find_ort = saved
            shutil.rmtree(d)
        self.assertEqual(res["rows"], [])
        self.assertEqual(sorted(s["peer"] for s in res["skipped"]), sorted(P.PEERS))
        for s in res["skipped"]:
            self.assertIn("not importable", s["why"])


class Profiles(unittest.TestCase):
    def test_parsers_and_groups(self):
        import profile_peers as PP
        text = ("profile: host time per iteration (us): ops 73.7\n"
                "profile: op (per iter)       calls    host us   us/call    check\n"
                "profile: linear                9.0       60.9      6.77      0.0\n"
                "profile: attention             2.0        5.1      2.54      0.0\n"
                "memory: x\n")
        ph = PP.parse_phases(text)
        self.assertEqual(sorted(ph), ["attention", "linear"])
        self.assertAlmostEqual(ph["linear"], 0.0609)
        self.assertAlmostEqual(ph["attention"], 0.0051)
        d = tempfile.mkdtemp(prefix="ft_peers_")
        try:
            p = os.path.join(d, "prof.json")
            run = {"cat": "Session", "name": "model_run"}
            node = {"cat": "Node", "name": "x_kernel_time"}
            ev = [dict(run, ts=0), dict(node, ts=1, dur=5000, args={"op_name": "MatMul"}),
                  dict(run, ts=10), dict(node, ts=11, dur=2000, args={"op_name": "MatMul"}),
                  dict(node, ts=12, dur=1000, args={"op_name": "Softmax"}),
                  dict(run, ts=20), dict(node, ts=21, dur=4000, args={"op_name": "MatMul"})]
            with open(p, "w") as f:
                json.dump(ev, f)
            ops = PP.ort_ops(p)  # the first run is left out, the others averaged
            self.assertEqual(ops, {"MatMul": 3.0, "Softmax": 0.5})
            self.assertEqual(PP.grouped({"aten::addmm": 1.0, "FusedConv": 2.0, "Softmax": 0.5, "linear": 1.0,
                                         "SkipLayerNormalization": 0.25, "Gather": 0.1}),
                             {"matmul": 2.0, "conv": 2.0, "attention": 0.5, "norm": 0.25, "other": 0.1})
        finally:
            shutil.rmtree(d)

    @unittest.skipIf(TPY is None, NO_TORCH)
    @unittest.skipUnless(os.path.exists(TOOL), NO_TOOL)
    def test_profile_smoke(self):
        import profile_peers as PP
        d = tempfile.mkdtemp(prefix="ft_peers_prof_")
        try:
            res = PP.profile("bert-tiny", 1, 8, 1, TOOL, iters=2, cache=d)
        finally:
            shutil.rmtree(d)
        rts = res["runtimes"]
        self.assertGreater(rts["ftengine-graph"]["groups"]["matmul"], 0)
        self.assertGreater(rts["pytorch-eager"]["groups"]["matmul"], 0)
        if "ort-cpu" in rts:
            self.assertGreater(rts["ort-cpu"]["groups"]["matmul"], 0)
        else:
            self.assertTrue(any(s["runtime"] == "ort-cpu" for s in res["skipped"]))


def write_sweeps(d, sweeps, rounds=5):
    """Minimal sweep CSVs for report.render: every model, cost, mode and batch ok in every
    round, eager slower."""
    import csv
    cols = ["model", "mode", "batch", "length", "median_ms", "mean_ms", "min_ms", "status", "macs", "commit",
            "device_label", "threads", "round", "op_cost_us", "step_cost_us"]
    for s in sweeps:
        with open(os.path.join(d, s["name"] + ".csv"), "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=cols)
            w.writeheader()
            for rnd in range(rounds):
                for model, length in s["models"]:
                    for cost in s.get("costs") or [None]:
                        for mode in s["modes"].split(","):
                            for b in map(int, s["batches"].split(",")):
                                lat = (3.0 if mode == "eager" else 2.0) * (1 + b / 16) * LOAD[rnd % len(LOAD)]
                                w.writerow(dict(model=model, mode=mode, batch=b, length=length or 8, median_ms=lat,
                                                mean_ms=lat, min_ms=lat, status="ok", macs=int(1e9 * b),
                                                commit="abc1234", device_label="Test CPU", threads=1, round=rnd,
                                                op_cost_us="" if cost is None else cost,
                                                step_cost_us="" if cost is None else cost))


class ReportIntegration(unittest.TestCase):
    """The report with the peers (report_text.py's series, report_peers.py's section): Table 3
    rows, the F1 curves and table, the section and its interval-based verdicts."""

    def setUp(self):
        import report
        self.report = report
        self.dir = tempfile.mkdtemp(prefix="ft_peers_report_")
        self.sweeps = report.plan("cpu", "fp32", True)
        write_sweeps(self.dir, self.sweeps)

    def tearDown(self):
        shutil.rmtree(self.dir)

    def render(self, peers="on", note=None, pk=None):
        with open(os.path.join(self.dir, "study.json"), "w") as f:
            json.dump({"device": "cpu", "dtype": "fp32", "quick": True, "sweeps": self.sweeps, "peers": peers,
                       "peers_note": note}, f)
        if pk is not None:
            with open(os.path.join(self.dir, "peers-main.json"), "w") as f:
                json.dump(pk, f)
        with contextlib.redirect_stdout(io.StringIO()):
            self.assertEqual(self.report.render(self.dir), 0)
        with open(os.path.join(self.dir, "report.md")) as f:
            return f.read()

    def test_measured_rows_and_verdicts(self):
        md = self.render(pk=synthetic_result())
        t3 = md[md.index("## Table 3"):]
        self.assertIn("paper: ONNX Runtime | 2.56", t3)  # the paper's rows stay, labelled
        self.assertIn("| ONNX Runtime (CPU provider), bert-tiny length 8, fp32, 1 thread(s) | 0.870 [0.806, 0.928] "
                      "| this host, same run (peers-main.json, x 1, 1 thread(s)) |", t3)
        self.assertIn("| PyTorch eager, bert-tiny length 8, fp32, 1 thread(s) | 2.000 [1.800, 2.200] |", t3)
        f1 = md[md.index("### F1"):md.index("### F2")]
        self.assertIn("| batch | PyTorch eager ms | TorchScript ms | ONNX Runtime ms |", f1)
        self.assertIn("| 4 | 4.000 [3.600, 4.400] | 2.700 [2.430, 2.970] |", f1)
        sec = md[md.index("## ftengine's modes against the frameworks"):]
        verdicts = re.findall(r"^- \*\*(.+?): (holds|does not hold|inconclusive \(within noise\)|inconclusive)\.\*\*",
                              sec, re.M)
        self.assertEqual(len(verdicts), 8, sec[:3000])
        got = dict(verdicts)
        self.assertEqual(got["ftengine eager's host cost per op is at or below PyTorch eager's"], "holds")  # 1 vs 2
        self.assertEqual(got["ftengine graph's overhead per forward is at or below TorchScript (trace + freeze)'s"],
                         "inconclusive")  # not measured at the overhead shape
        self.assertEqual(got["graph mode gains over eager at batch 1, as TorchScript does over PyTorch eager"],
                         "holds")  # 1.2 and 1.33 in every round
        # PyTorch eager/TorchScript is 1.33 at batch 1 and 1.48 at batch 4 in every round: clearly growing
        self.assertEqual(got["PyTorch eager's gap to TorchScript shrinks as batch grows"], "does not hold")
        self.assertEqual(got["ftengine's best of graph/static is at or below PyTorch eager at every batch"], "holds")
        # static 0.9 against ORT 0.87 with ORT's own 6% noise: the ratio's interval [0.98, 1.10] straddles 1.05
        self.assertEqual(got["ftengine's best of graph/static is at or below ONNX Runtime (CPU provider) at every "
                             "batch"], "inconclusive (within noise)")
        self.assertIn("| pytorch-eager | 0.200 [0.180, 0.220] | 100 | 2.00 [1.80, 2.20] |", sec)
        self.assertIn("skipped ort-cpu: not installed", sec)

    def test_clear_ort_gap_does_not_hold(self):
        pk = synthetic_result()
        for r in pk["rows"]:
            if r["peer"] == "ort-cpu" and r["status"] == "ok":  # ORT clearly faster: 0.6 of static, every round
                r["round_stats"] = [P.round_stats([0.54 * f * (2.0 if r["batch"] == 4 else 1.0)]) for f in LOAD]
        md = self.render(pk=pk)
        self.assertRegex(md, r"- \*\*ftengine's best of graph/static is at or below ONNX Runtime \(CPU provider\) "
                             r"at every batch: does not hold\.\*\* ftengine best / ONNX Runtime \(CPU provider\) per "
                             r"batch: b1 1\.67x \[1\.67, 1\.67\], b4 1\.67x")

    def test_peers_off_and_none_available(self):
        md = self.render(peers="off", note="not run (PEERS=0)", pk=synthetic_result())
        self.assertIn("No peer run in this report: not run (PEERS=0).", md)
        self.assertNotIn("(measured here", md)
        self.assertNotIn("ONNX Runtime (CPU provider), bert-tiny", md)
        none = {"rows": [], "skipped": [{"peer": "pytorch-eager", "why": "torch is not importable"}]}
        md = self.render(pk=none)
        self.assertIn("No peer could run on this host; each one skipped, with the reason:", md)
        self.assertIn("- pytorch-eager: torch is not importable", md)

    def test_plan_and_resume(self):
        main = next(s for s in self.sweeps if s["name"] == "main-fp32")
        jobs, why = RP.plan("cpu", True, main)
        self.assertEqual([j["name"] for j in jobs], ["peers-main"])
        self.assertEqual(jobs[0]["batches"], [int(b) for b in main["batches"].split(",")])
        self.assertEqual((jobs[0]["models"], jobs[0]["seq"]), ([main["models"][0][0]], main["models"][0][1]))
        # the sweep's protocol: its rounds and forwards per visit, so the intervals are alike
        self.assertEqual((jobs[0]["rounds"], jobs[0]["iters"], jobs[0]["warmup"]),
                         (main["rounds"], main["iters"], main["warmup"]))
        self.assertEqual([j["name"] for j in RP.plan("cpu", False, main)[0]], ["peers-main", "peers-paper"])
        self.assertEqual([j["name"] for j in RP.plan("cpu", False, main, paper_shape=False)[0]], ["peers-main"])
        jobs_gpu, why = RP.plan("cuda", False, main)
        self.assertEqual(jobs_gpu, [])
        self.assertIn("hf_latency.py", why)
        # a MODEL= study: a checkpoint directory or a preset without a torch definition is skipped, with why
        own = dict(main, models=[[GOLDEN + "/bert", 8]])
        self.assertEqual(RP.plan("cpu", True, own), ([], RP.plan("cpu", True, own)[1]))
        self.assertIn("is a checkpoint directory", RP.plan("cpu", True, own)[1])
        self.assertIn("has no torch definition", RP.plan("cpu", True, dict(main, models=[["no-such", 8]]))[1])
        vit = RP.plan("cpu", True, dict(main, models=[["vit-base-patch16-224", None]]))[0]
        self.assertEqual(vit[0]["seq"], 224)  # the architecture's own input
        calls = []
        saved = P.measure, P.ftengine_commit
        P.measure = lambda *a, **k: calls.append(a) or {"rows": [], "skipped": [], "commit": "abc1234"}
        P.ftengine_commit = lambda tool: "abc1234"
        try:
            RP.run(self.dir, sys.executable, jobs)
            RP.run(self.dir, sys.executable, jobs)  # measured by this commit: kept
            P.ftengine_commit = lambda tool: "abc1234-dirty"
            RP.run(self.dir, sys.executable, jobs)  # a dirty tree is never trusted
        finally:
            P.measure, P.ftengine_commit = saved
        self.assertEqual(len(calls), 2)
        # a peer run that breaks leaves the report a line saying so
        saved = P.measure
        P.measure = lambda *a, **k: 1 / 0
        try:
            RP.run(self.dir, sys.executable, jobs)
        finally:
            P.measure = saved
        md = self.render()
        self.assertIn("- every peer: the peer run failed: ZeroDivisionError", md)


STUB_ORT = '''
import struct
__version__ = "0.0-stub"
class _Opt:
    pass
class SessionOptions(_Opt):
    def add_session_config_entry(self, k, v):
        CONFIG[k] = v
class GraphOptimizationLevel:
    ORT_ENABLE_ALL = 99
    ORT_ENABLE_EXTENDED = 2
    ORT_ENABLE_BASIC = 1
    ORT_DISABLE_ALL = 0
class ExecutionMode:
    ORT_SEQUENTIAL = 0
def get_available_providers():
    return ["CPUExecutionProvider"]
class _Meta:
    def __init__(self, n):
        self.name = n
LOADS = []
CONFIG = {}
class InferenceSession:
    def __init__(self, path, sess_options=None, providers=None):
        assert sess_options.graph_optimization_level == 99 and sess_options.inter_op_num_threads == 1
        self.threads = sess_options.intra_op_num_threads
        LOADS.append(path)
    def get_inputs(self):
        return [_Meta("x")]
    def get_outputs(self):
        return [_Meta("y")]
    def run(self, names, feeds):
        import numpy
        assert CONFIG.get("session.intra_op.allow_spinning") == "0"
        x = feeds["x"]
        return [numpy.Arr([2 * v + self.threads for v in x.vals], x.shape, "float32")]
'''
STUB_NUMPY = '''
import struct
class Arr:
    def __init__(self, vals, shape, dtype):
        self.vals, self.shape, self.dtype = vals, tuple(shape), dtype
    def reshape(self, shape):
        return Arr(self.vals, shape, self.dtype)
    def tobytes(self):
        return struct.pack("<%df" % len(self.vals), *self.vals)
def frombuffer(b, dtype):
    assert dtype == "float32"
    return Arr(list(struct.unpack("<%df" % (len(b) // 4), b)), (len(b) // 4,), dtype)
def ascontiguousarray(a):
    return a
'''


class OrtRunnerProtocol(unittest.TestCase):
    """ort_runner.py's commands against a stand-in onnxruntime (y = 2x + threads)."""

    def test_stub_session(self):
        d = tempfile.mkdtemp(prefix="ft_peers_")
        try:
            for name, src in (("onnxruntime.py", STUB_ORT), ("numpy.py", STUB_NUMPY)):
                with open(os.path.join(d, name), "w") as f:
                    f.write(src)
            inp, out = os.path.join(d, "in.safetensors"), os.path.join(d, "out.safetensors")
            st.write(inp, [("x", "F32", (2, 2), f32([1, 2, 3, 4]))])
            cmds = [{"cmd": "info"}, {"cmd": "time", "inputs": inp}, {"cmd": "load", "model": "m.onnx"},
                    {"cmd": "load", "model": "m.onnx"}, {"cmd": "time", "inputs": inp, "iters": 3, "warmup": 1},
                    {"cmd": "run", "inputs": inp, "out": out}, {"cmd": "fly"}]
            env = dict(os.environ, PYTHONPATH=d)
            r = subprocess.run([sys.executable, os.path.join(HERE, "ort_runner.py"), "--threads", "3", "--no-spin"] +
                               [json.dumps(c) for c in cmds], capture_output=True, text=True, env=env, timeout=60)
            rep = [json.loads(ln) for ln in r.stdout.splitlines()]
            self.assertEqual(rep[0], {"ok": True, "ready": "onnxruntime"})
            self.assertEqual((rep[1]["version"], rep[1]["threads"], rep[1]["provider"]),
                             ("0.0-stub", 3, "CPUExecutionProvider"))
            self.assertFalse(rep[2]["ok"])
            self.assertIn("no model loaded", rep[2]["error"])
            self.assertEqual((rep[3]["cached"], rep[4]["cached"]), (False, True))
            self.assertEqual((len(rep[5]["samples_ms"]), rep[5]["warmup"]), (3, 1))
            self.assertTrue(rep[6]["ok"])
            self.assertEqual(list(st.read(out)["y"][2]), [5.0, 7.0, 9.0, 11.0])
            self.assertIn("unknown command", rep[7]["error"])
            self.assertEqual(r.returncode, 1)  # a failed command shows in the exit status
        finally:
            shutil.rmtree(d)


@unittest.skipIf(shutil.which("node") is None, "no node on PATH: ort_runner.js not tested")
class NodeRunner(unittest.TestCase):
    def test_refusals_or_missing_package(self):
        r = subprocess.run(["node", os.path.join(HERE, "ort_runner.js"), "--threads", "0"], capture_output=True,
                           text=True, timeout=60)
        self.assertEqual(r.returncode, 2)
        self.assertIn("--threads needs a positive integer", r.stdout)
        r = subprocess.run(["node", os.path.join(HERE, "ort_runner.js"), '{"cmd": "time", "inputs": "x"}'],
                           capture_output=True, text=True, timeout=60)
        first = json.loads(r.stdout.splitlines()[0])
        if not first["ok"]:  # not installed: the one line says how to install it
            self.assertIn("npm --prefix bench/baselines install --ignore-scripts", first["error"])
            return
        self.assertIn("no model loaded", json.loads(r.stdout.splitlines()[1])["error"])
        self.assertEqual(r.returncode, 1)


def torch_run(case, *cmds):
    """Replies of torch_runner.py (in the python that has torch) on a golden case."""
    r = subprocess.run([TPY, os.path.join(HERE, "torch_runner.py"), "--case", case, "--threads", "1"] +
                       [json.dumps(c) for c in cmds], capture_output=True, text=True, timeout=600,
                       env=P.worker_env(1, P.torch_libdir()))
    out = [json.loads(ln) for ln in r.stdout.splitlines() if ln.startswith("{")]
    if not out or not out[0].get("ok"):
        raise AssertionError("torch_runner failed: %s %s" % (r.stdout[-500:], r.stderr[-800:]))
    return out[1:]


@unittest.skipIf(TPY is None, NO_TORCH)
@unittest.skipUnless(os.path.exists(TOOL), NO_TOOL)
class GoldenAgainstFtengine(unittest.TestCase):
    """Each peer's outputs on a golden case under the golden criterion against ftengine's."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="ft_peers_golden_")
        cls.ort = P.find_ort()

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir)

    def ftengine(self, case):
        out = os.path.join(self.dir, os.path.basename(case) + "-ft.safetensors")
        r = subprocess.run([TOOL, "run", case, "--inputs", os.path.join(case, "inputs.safetensors"), "--out", out,
                            "--mode", "graph"], capture_output=True, text=True, timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr)
        return st.read(out)

    def agree(self, got_path, want, label):
        got = st.read(got_path)
        for k in ("last_hidden_state", "pooler_output"):
            ok, line = st.compare(k, got[k], want[k])
            self.assertTrue(ok, "%s %s" % (label, line))

    def check_case(self, arch):
        case = os.path.join(GOLDEN, arch)
        want = self.ftengine(case)
        eager, ts, onnx_p, inp = (os.path.join(self.dir, arch + s) for s in
                                  ("-eager.safetensors", "-ts.safetensors", ".onnx", "-in.safetensors"))
        rep = torch_run(case, {"cmd": "run", "runtime": "eager", "out": eager},
                        {"cmd": "run", "runtime": "torchscript", "out": ts},
                        {"cmd": "export", "path": onnx_p, "inputs": inp})
        self.assertTrue(all(r["ok"] for r in rep), rep)
        self.agree(eager, want, arch + " PyTorch eager")
        self.agree(ts, want, arch + " TorchScript")
        # and both against HF's own outputs
        self.agree(eager, st.read(os.path.join(case, "expected.safetensors")), arch + " PyTorch eager vs HF")
        if not self.ort[0]:
            self.skipTest("ONNX Runtime not available (%s): %s's ORT check not run" % (self.ort[1], arch))
        ow = P.ort_worker(self.ort[0], self.ort[1], 1, self.dir, arch)
        try:
            out = os.path.join(self.dir, arch + "-ort.safetensors")
            self.assertTrue(ow.ask(cmd="load", model=onnx_p)["ok"])
            self.assertTrue(ow.ask(cmd="run", inputs=inp, out=out)["ok"])
        finally:
            ow.close()
        self.agree(out, want, arch + " ONNX Runtime")

    def test_bert(self):
        self.check_case("bert")

    def test_resnet(self):
        self.check_case("resnet")

    def test_a_changed_model_fails(self):
        # the tanh GELU for BERT's erf GELU: the check against ftengine must fail
        case = os.path.join(self.dir, "bert-tanh")
        shutil.copytree(os.path.join(GOLDEN, "bert"), case)
        with open(os.path.join(case, "config.json")) as f:
            cfg = json.load(f)
        cfg["hidden_act"] = "gelu_new"
        with open(os.path.join(case, "config.json"), "w") as f:
            json.dump(cfg, f)
        out = os.path.join(self.dir, "tanh.safetensors")
        torch_run(case, {"cmd": "run", "runtime": "torchscript", "out": out})
        got, want = st.read(out), self.ftengine(os.path.join(GOLDEN, "bert"))
        self.assertFalse(st.compare("last_hidden_state", got["last_hidden_state"], want["last_hidden_state"])[0])


CHECK_SNIPPET = r"""
import sys, torch
sys.path.insert(0, sys.argv[1])
import torch_runner as tr
g = torch.Generator().manual_seed(0)
big = torch.randn(4, 1000, generator=g) * 4000          # a real-size ResNet's magnitudes
small = torch.randn(4, 1000, generator=g)
res = [tr.compare_outputs({"y": big + 0.01 * torch.randn(4, 1000, generator=g)}, {"y": big})["match"],
       tr.compare_outputs({"y": big * (1 + 1e-4)}, {"y": big})["match"],
       tr.compare_outputs({"y": small + 2e-4}, {"y": small})["match"],
       tr.compare_outputs({"y": small + 2e-6}, {"y": small})["match"],
       tr.compare_outputs({"y": small[:2]}, {"y": small})["match"],
       # eager's own float32 error at 1e-4: a peer 1e-4 away passes, one 1e-2 away does not
       tr.compare_outputs({"y": big * (1 + 1e-4)}, {"y": big}, {"y": 1e-4})["match"],
       tr.compare_outputs({"y": small * (1 + 1e-2)}, {"y": small}, {"y": 1e-4})["match"],
       tr.compare_outputs({"y": small + 2e-4}, {"y": small}, {"y": 1e-7})["match"]]
print(res)
"""


@unittest.skipIf(TPY is None, NO_TORCH)
class PerShapeCheck(unittest.TestCase):
    def test_scaled_criterion(self):
        # summation-order noise at RMS 4000 passes; a 1e-4 relative error, 2e-4 on unit-sized
        # outputs (the golden criterion there) and a shape change fail
        r = subprocess.run([TPY, "-c", CHECK_SNIPPET, HERE], capture_output=True, text=True, timeout=120)
        self.assertEqual(r.stdout.strip().splitlines()[-1], "[True, False, False, True, False, True, False, False]", r.stderr[-500:])


@unittest.skipIf(TPY is None, NO_TORCH)
@unittest.skipUnless(os.path.exists(TOOL), NO_TOOL)
class InterleavedRun(unittest.TestCase):
    def test_every_runner_measured(self):
        d = tempfile.mkdtemp(prefix="ft_peers_run_")
        try:
            res = P.measure(["bert-tiny"], [1, 2], [1], rounds=2, iters=2, warmup=1, ft_modes=["eager", "graph"],
                            tool=TOOL, seq=8, cache=d, logdir=d, overhead=True)
        finally:
            shutil.rmtree(d)
        skipped = {s["peer"]: s["why"] for s in res["skipped"]}
        want = [p for p in P.PEERS if p not in skipped] + ["ftengine-eager", "ftengine-graph"]
        for b, s in ((1, 8), (2, 8), (1, 1)):
            rs = {r["peer"]: r for r in res["rows"] if (r["batch"], r["size"]) == (b, s)}
            for p in want:
                self.assertEqual(rs[p]["status"], "ok", rs[p].get("why"))
                self.assertEqual(rs[p]["rounds"], 2)
                self.assertLessEqual(rs[p]["median_lo_ms"], rs[p]["median_ms"])
                self.assertTrue(rs[p]["version"] and rs[p]["ftengine_commit"], rs[p])
                if p in P.PEERS and p != "pytorch-eager":
                    self.assertTrue(rs[p]["check"]["match"], rs[p]["check"])
            if s == 1:
                self.assertGreater(rs["pytorch-eager"]["ops"], rs["ftengine-graph"]["ops"])
        for p in ("pytorch-eager", "torchscript"):
            self.assertIn("oneDNN", next(r for r in res["rows"] if r["peer"] == p)["backend"])
        self.assertTrue(all(v["match"] for v in res["golden"]["bert-tiny"]["peers"].values()))


if __name__ == "__main__":
    unittest.main(verbosity=2)
