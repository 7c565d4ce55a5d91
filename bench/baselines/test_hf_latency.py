#!/usr/bin/env python3
"""test_hf_latency.py - tests of bench/baselines/hf_latency.py with the system
python3 (unittest): onnxruntime's providers are asked before anything is
exported, and a missing CUDA provider (or a missing onnxruntime) is a result
row with a status, not an error; the torch.compile peer runs in a child
process cut off at its time box. Tests that need torch, transformers or
onnxruntime are skipped with a line saying which module is missing.

    python3 bench/baselines/test_hf_latency.py      (or tests/test_baselines.sh)
"""
import importlib.util
import os
import sys
import time
import types
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_latency  # noqa: E402  (imports neither torch nor onnxruntime)


def have(module):
    return importlib.util.find_spec(module) is not None


class OrtProviders(unittest.TestCase):
    def rows(self, providers):
        """What ort_step records for these providers; fails if it builds a runner."""
        out = []

        def record(runner, make):
            out.append(("record", runner))
            make()

        def status(runner, text, extra):
            out.append(("status", runner, text, extra))

        def make():
            self.fail("the ORT runner (export, session) was built without a CUDA provider")

        hf_latency.ort_step(providers, record, status, make)
        return out

    def test_cpu_build_is_a_status_row(self):
        rows = self.rows(["AzureExecutionProvider", "CPUExecutionProvider"])
        self.assertEqual(rows, [("status", "ort-cuda", "ORT CUDA: not available",
                                 {"providers": ["AzureExecutionProvider", "CPUExecutionProvider"]})])

    def test_not_installed_is_a_status_row(self):
        self.assertEqual(self.rows(None)[0][:3], ("status", "ort-cuda", "ORT: not installed"))

    def test_cuda_provider_runs_the_runner(self):
        made = []
        hf_latency.ort_step(["CUDAExecutionProvider", "CPUExecutionProvider"],
                            lambda r, make: made.append((r, make())), None, lambda: "runner")
        self.assertEqual(made, [("ort-cuda", "runner")])

    def test_providers_are_read_from_the_module(self):
        fake = types.SimpleNamespace(get_available_providers=lambda: ["CPUExecutionProvider"])
        self.assertEqual(hf_latency.ort_providers(fake), ["CPUExecutionProvider"])
        broken = types.SimpleNamespace(get_available_providers=lambda: 1 / 0)
        self.assertEqual(hf_latency.ort_providers(broken), [])
        self.assertEqual(hf_latency.ort_unavailable([]), "ORT CUDA: not available")

    @unittest.skipUnless(have("onnxruntime"), "onnxruntime not installed: the real provider list is not checked")
    def test_installed_onnxruntime(self):
        providers = hf_latency.ort_providers()
        self.assertIsInstance(providers, list)
        self.assertTrue(providers, "onnxruntime lists no provider")


class CompileBox(unittest.TestCase):
    """The hf-compile-ro child gets a fixed time box (no torch needed: the child
    sleeps in place of compiling, HF_LATENCY_FAKE_COMPILE_S)."""
    ARGV = ["--model", "bert-base", "--batch", "1", "--seq", "128", "--dtype", "fp16"]

    def run_box(self, sleep_s, box):
        env = dict(os.environ, HF_LATENCY_FAKE_COMPILE_S=str(sleep_s))
        t = time.time()
        row = hf_latency.compile_boxed(self.ARGV, box, env=env)
        return row, time.time() - t

    def test_within_box_gives_the_childs_row(self):
        row, took = self.run_box(0, 20)
        self.assertEqual(row["runner"], "hf-compile-ro")
        self.assertEqual(row["median_ms"], 1.0)
        self.assertEqual(row["box_s"], 20)
        self.assertIn("build_and_time_s", row)

    def test_past_box_is_a_status_row_and_the_child_is_killed(self):
        row, took = self.run_box(30, 1)
        self.assertNotIn("median_ms", row)
        self.assertIn("timed out", row["status"])
        self.assertLess(took, 10, "the box did not cut the child off")

    def test_failed_child_is_a_status_row(self):
        row, _ = self.run_box("not-a-number", 20)
        self.assertIn("child failed", row["status"])


class PlainModel(unittest.TestCase):
    @unittest.skipUnless(have("torch"), "torch not installed: the plain PyTorch peer is not built")
    def test_plain_model_runs_on_the_given_device_and_dtype(self):
        import torch
        hf_latency.torch = torch
        m = hf_latency.plain_model("bert-tiny", torch.float64, "cpu")
        self.assertTrue(all(v.dtype == torch.float64 for v in m.p.values() if v.is_floating_point()))
        ids = torch.randint(0, 100, (2, 8))
        out = m(input_ids=ids, attention_mask=torch.ones_like(ids))
        self.assertEqual(tuple(out["last_hidden_state"].shape), (2, 8, 128))
        self.assertEqual(out["last_hidden_state"].dtype, torch.float64)


class Inputs(unittest.TestCase):
    @unittest.skipUnless(have("torch") and have("transformers"), "torch or transformers not installed")
    def test_inputs_shapes(self):
        import torch
        hf_latency.torch = torch
        cfg = types.SimpleNamespace(vocab_size=100)
        x = hf_latency.inputs("bert-base", cfg, 2, 16, torch.float32, "cpu")
        self.assertEqual(tuple(x["input_ids"].shape), (2, 16))
        self.assertEqual(tuple(hf_latency.inputs("resnet-50", cfg, 1, 32, torch.float32, "cpu")
                               ["pixel_values"].shape), (1, 3, 32, 32))


if __name__ == "__main__":
    unittest.main(verbosity=2)
