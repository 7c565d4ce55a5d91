#!/usr/bin/env python3
"""test_torch_zoo_vision_a.py - tests of bench/torch_zoo_vision_a.py (ViT,
wav2vec2, HuBERT in plain torch) and tools/golden/make_variants_vision_a.py,
runnable with any python3 (`make test` runs it with the python3 on PATH; the
torch parts are skipped with a line saying so where torch is missing).

With torch: each golden case of tests/golden/{vit,wav2vec2,hubert} through the
torch model under the C golden criterion, and in float64 equal to HF's float64
outputs to the bit after rounding to float32 (hidden states included); a
changed operation per architecture that must fail; preset parameter counts
equal to `ftengine info`'s; the variant generator's cases load back (prefixes,
weight-norm parametrization names, dropped pooler) and, where build/ftengine
exists, ftengine matches them. Prints "RESULT: P passed, F failed, S skipped".
"""
import copy
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tools", "golden"))
import hf_golden as hg  # noqa: E402
import torch_models as tm  # noqa: E402

torch = tm.torch
TOOL = os.path.join(ROOT, os.environ.get("FT_BUILD") or "build", "ftengine")
NO_TORCH = f"torch is not importable ({tm.TORCH_ERROR}): ViT/wav2vec2/HuBERT torch models not tested"
ARCHS = ("vit", "wav2vec2", "hubert")


class Registry(unittest.TestCase):
    def test_registered(self):
        for a in ARCHS:
            self.assertIn(a, hg.ARCHS)
            self.assertIn(a, tm.CLASSES)
        for p in ("vit-base-patch16-224", "vit-base-patch32-224", "wav2vec2-base", "wav2vec2-large-lv60",
                  "hubert-base-ls960", "hubert-large-ll60k"):
            self.assertIn(p, tm.PRESETS)
        c = tm.preset_config("hubert-large-ll60k")
        self.assertEqual((c["hidden_size"], c["feat_extract_norm"], c["do_stable_layer_norm"], c["conv_bias"]),
                         (1024, "layer", True, True))


def mutate(model, what):
    m = copy.copy(model)
    m.p = dict(model.p)
    if what == "final LayerNorm skipped":
        m.ln = lambda x, name, eps: x if name == "layernorm" else model.ln(x, name, eps)
    elif what == "q scaled before its bias":
        orig = model.lin

        def lin(x, name):
            if name.endswith("q_proj"):
                d = model.d // model.nh
                return orig(x, name) - model.p[name + ".bias"] * (1 - d ** -0.5)
            return orig(x, name)
        m.lin = lin
    elif what == "projection LayerNorm skipped":
        m.ln = lambda x, name, eps: x if name == "feature_projection.layer_norm" else model.ln(x, name, eps)
    return m


@unittest.skipIf(torch is None, NO_TORCH)
class Golden(unittest.TestCase):
    def check(self, arch):
        res = hg.run_case(os.path.join(hg.GOLDEN_DIR, arch))
        for ok, line in res:
            self.assertTrue(ok, f"{arch}: {line}")
        return res

    def fails(self, arch, what):
        model, _, _ = hg.load_case(os.path.join(hg.GOLDEN_DIR, arch))
        res = hg.run_case(os.path.join(hg.GOLDEN_DIR, arch), model=mutate(model, what))
        self.assertFalse(all(ok for ok, _ in res), f"{arch} with {what} still passed: {res}")

    def test_vit(self):
        self.assertEqual(len(self.check("vit")), 2)
        self.fails("vit", "final LayerNorm skipped")

    def test_wav2vec2(self):
        self.assertEqual(len(self.check("wav2vec2")), 2)
        self.fails("wav2vec2", "q scaled before its bias")

    def test_hubert(self):
        self.assertEqual(len(self.check("hubert")), 1)
        self.fails("hubert", "projection LayerNorm skipped")

    def test_float64_is_hf_bitwise(self):
        """In float64 the torch definitions give HF's float64 outputs to the bit (stored as
        float32): every output the expected files hold, hidden states included."""
        for arch in ARCHS:
            model, inputs, expected = hg.load_case(os.path.join(hg.GOLDEN_DIR, arch))
            model.p = {k: v.double() for k, v in model.p.items()}
            with torch.no_grad():
                out = model(**{k: v.double() if v.is_floating_point() else v for k, v in inputs.items()})
            for k, e in expected.items():
                self.assertIn(k, out, f"{arch}: {k}")
                self.assertTrue(torch.equal(out[k].float(), e), f"{arch}: {k} differs from HF's float64")


@unittest.skipIf(torch is None, NO_TORCH)
class Presets(unittest.TestCase):
    @unittest.skipUnless(os.path.exists(TOOL), "build/ftengine not built: preset sizes not compared")
    def test_sizes_match_ftengine(self):
        want = {"vit-base-patch32-224": 88045824, "hubert-base-ls960": 94371712}
        for name, n in want.items():
            r = subprocess.run([TOOL, "info", name], capture_output=True, text=True)
            line = [ln for ln in r.stdout.splitlines() if ln.startswith("parameters:")]
            self.assertTrue(line, r.stdout + r.stderr)
            self.assertEqual(int(line[0].split()[1]), n, name)
            m = tm.build_preset(name)
            self.assertEqual(m.n_params(), n, name)
            del m


@unittest.skipIf(torch is None, NO_TORCH)
class Variants(unittest.TestCase):
    def setUp(self):
        import make_variants_vision_a as mv
        self.mv = mv
        self.dir = tempfile.mkdtemp(prefix="ft_variants_")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_cases_load_back_and_match_ftengine(self):
        names = ["vit_nonsquare_nopooler", "wav2vec2_large_mask", "hubert_large_noprojln_mask"]
        self.assertEqual(self.mv.main([self.dir] + names), 0)
        for n in names:
            d = os.path.join(self.dir, n)
            # the float32 model read back from the written checkpoint (prefixed names, weight
            # norm as parametrizations, heads to ignore) meets the golden criterion
            for ok, line in hg.run_case(d):
                self.assertTrue(ok, f"{n}: {line}")
            _, _, expected = hg.load_case(d)
            self.assertEqual("pooler_output" in expected, n.startswith("vit") and "nopooler" not in n)
            if os.path.exists(TOOL):
                out = os.path.join(self.dir, n + ".out.safetensors")
                r = subprocess.run([TOOL, "run", d, "--inputs", os.path.join(d, "inputs.safetensors"), "--out", out,
                                    "--mode", "graph"], capture_output=True, text=True)
                self.assertEqual(r.returncode, 0, r.stderr)
                got = hg.load_safetensors(out)
                for k in hg.required_outputs(expected):
                    ok, line = hg.compare(k, got[k], expected[k])
                    self.assertTrue(ok, f"ftengine on {n}: {line}")

    def test_unknown_case(self):
        self.assertEqual(self.mv.main([self.dir, "no_such_case"]), 2)


if __name__ == "__main__":
    import unittest_result

    unittest_result.main(2)
