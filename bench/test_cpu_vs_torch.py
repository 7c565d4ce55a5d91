#!/usr/bin/env python3
"""test_cpu_vs_torch.py - tests of bench/cpu_vs_torch.py, runnable with the
system python3 (python3 bench/test_cpu_vs_torch.py). The parsing and table code
is tested always; the torch models only where torch imports (skipped with a
line saying so otherwise), and the side-by-side run only where build/ftengine
exists too."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cpu_vs_torch as cvt  # noqa: E402

TOOL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build", "ftengine")


class Parsing(unittest.TestCase):
    def test_latency_line(self):
        out = ("model: bert-tiny\nlatency ms: median 0.1432  mean 0.15  min 0.12  p90 0.2  "
               "(first call 1.2, 5 iters, 1 warmup)\n")
        self.assertAlmostEqual(cvt.parse_latency(out), 0.1432)
        self.assertIsNone(cvt.parse_latency("latency ms: mean 3\n"))

    def test_ratio_row(self):
        row = cvt.ratio_row("bert-base", 1, 2, 80.0, 100.0, "static")
        self.assertEqual(row, "| bert-base | 1 | 2 | 80.00 (static) | 100.00 | 0.80 |")
        self.assertEqual(cvt.TABLE_HEAD.count("|"), 14)

    def test_worker_env_sizes_every_pool(self):
        env = cvt.torch_env(3)
        for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            self.assertEqual(env[v], "3")

    def test_no_torch_exits_cleanly(self):
        saved = cvt.torch
        cvt.torch, cvt.TORCH_ERROR = None, "ModuleNotFoundError: test"
        try:
            self.assertEqual(cvt.main(["--models", "bert-tiny"]), 0)
        finally:
            cvt.torch = saved


@unittest.skipIf(cvt.torch is None, "torch is not importable: torch models not tested")
class TorchModels(unittest.TestCase):
    def test_shapes(self):
        cvt.torch.manual_seed(0)
        with cvt.torch.no_grad():
            bert = cvt.build_torch("bert-tiny")
            x, pooled = bert(*bert.inputs(2, 9))
            self.assertEqual(tuple(x.shape), (2, 9, 128))
            self.assertEqual(tuple(pooled.shape), (2, 128))
            # LayerNorm output with unit gamma: mean 0, variance 1 per row
            self.assertLess(float(x.mean(-1).abs().max()), 1e-4)
            distil = cvt.Bert("distilbert", layers=1, hidden=64, heads=4, inter=128)
            self.assertEqual(tuple(distil(*distil.inputs(1, 5)).shape), (1, 5, 64))
            net = cvt.ResNet("resnet", depths=(1, 1, 1, 1), widths=(256, 512, 1024, 2048))
            self.assertEqual(tuple(net(*net.inputs(1, 64)).shape), (1, 2048, 1, 1))

    @unittest.skipUnless(os.path.exists(TOOL), "build/ftengine not built")
    def test_side_by_side_smoke(self):
        rc = cvt.main(["--tool", TOOL, "--models", "bert-tiny", "--threads", "1", "--seq", "8",
                       "--rounds", "1", "--iters", "2", "--modes", "graph"])
        self.assertEqual(rc, 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
