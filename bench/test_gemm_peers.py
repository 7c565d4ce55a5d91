#!/usr/bin/env python3
"""test_gemm_peers.py - bench/gemm_peers.py's parsing, merging and table without running
a benchmark; the ONNX model writer where the onnx module imports (skipped otherwise)."""
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gemm_peers as gp  # noqa: E402

OUT = """# openblas: libopenblas.so.0, core SkylakeX
# 1 threads, 1 rounds x 3 calls; ms per call
shape                   M      N      K impl          best_ms  median_ms     cpu_ms      GF/s  GF/cpu-s
bert.b1.qkv           128   2304    768 ft              2.000      2.500      1.900     226.5     238.4
bert.b1.qkv           128   2304    768 openblas        3.000      3.500      2.900     151.0     156.2
"""
ORT = """# ort: onnxruntime-node 1.30.0, 1 threads
shape                   M      N      K impl          best_ms  median_ms     cpu_ms      GF/s  GF/cpu-s
bert.b1.qkv           128   2304    768 ort             2.200      2.600      2.100     205.9     215.7
"""


class GemmPeersTest(unittest.TestCase):
    def test_parse_skips_comments_and_header(self):
        rows = gp.parse_table(OUT)
        self.assertEqual([r["impl"] for r in rows], ["ft", "openblas"])
        self.assertEqual((rows[0]["m"], rows[0]["n"], rows[0]["k"]), (128, 2304, 768))
        self.assertAlmostEqual(rows[0]["cpu_ms"], 1.9)
        self.assertEqual(gp.parse_table("garbage line\n1 2 3\n"), [])

    def test_merge_keeps_the_best_of_rounds(self):
        best = {}
        gp.merge(best, gp.parse_table(OUT), 1)
        worse = OUT.replace("2.000      2.500      1.900", "9.000      9.500      8.900")
        better = OUT.replace("2.000      2.500      1.900", "1.500      2.500      1.800")
        gp.merge(best, gp.parse_table(worse), 1)
        gp.merge(best, gp.parse_table(better), 1)
        r = best[(1, "bert.b1.qkv", "ft")]
        self.assertAlmostEqual(r["best_ms"], 1.5)
        self.assertAlmostEqual(r["cpu_ms"], 1.8)
        self.assertEqual(len(r["medians"]), 3)

    def test_render_ratio_by_cpu_at_one_thread_by_wall_at_two(self):
        best = {}
        gp.merge(best, gp.parse_table(OUT), 1)
        gp.merge(best, gp.parse_table(ORT), 1)
        gp.merge(best, gp.parse_table(OUT), 2)
        gp.merge(best, gp.parse_table(ORT), 2)
        md = gp.render(best, [1, 2], ["ft", "openblas", "ort"])
        lines = [l for l in md.splitlines() if l.startswith("| bert")]
        self.assertEqual(len(lines), 2)
        # 1 thread: ft/ort by CPU time 2.1 / 1.9
        self.assertTrue(lines[0].endswith(f" {2.1 / 1.9:.2f} |"), lines[0])
        # 2 threads: by the best wall call 2.2 / 2.0
        self.assertTrue(lines[1].endswith(f" {2.2 / 2.0:.2f} |"), lines[1])
        self.assertIn("| 226 / 238 |", lines[0])

    def test_models(self):
        try:
            import numpy  # noqa: F401
            import onnx
        except ImportError as e:
            self.skipTest(f"no {e.name} module: the ONNX model writer is not tested")
        with tempfile.TemporaryDirectory() as d:
            out = gp.write_models([("s", 3, 5, 7)], d)
            m = onnx.load(out[0]["model"])
            onnx.checker.check_model(m)
            self.assertEqual(m.graph.node[0].op_type, "MatMul")
            self.assertEqual(list(m.graph.initializer[0].dims), [7, 5])


if __name__ == "__main__":
    import unittest_result

    unittest_result.main(2)
