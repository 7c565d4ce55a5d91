#!/usr/bin/env python3
"""test_torch_zoo_vision_b.py - tests of bench/torch_zoo_vision_b.py (the plain-torch
MobileNetV2, EfficientNet and ConvNeXt) and tools/golden/make_vision_variants.py,
runnable with any python3 (`make test` runs it with the python3 on PATH).

Always (standard library): the TF "SAME" padding arithmetic, the presets and
defaults registered beside the other architectures, the variant generator's
case table. Where torch imports (skipped with a line saying so otherwise): the
three golden cases through the torch models with HF's weights under the C golden
tests' criterion, hidden states included; a changed operation per architecture
that must fail that check; parameter counts equal to `ftengine info`'s for the
presets; the committed variant cases reproduced by the torch models.
Prints "RESULT: P passed, F failed, S skipped".
"""
import copy
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tools", "golden"))
import cpu_vs_torch as cvt  # noqa: E402
import hf_golden as hg  # noqa: E402
import make_vision_variants as mvv  # noqa: E402
import torch_models as tm  # noqa: E402
import torch_zoo_vision_b as tz  # noqa: E402

torch = tm.torch
TOOL = os.path.join(HERE, "..", os.environ.get("FT_BUILD") or "build", "ftengine")
NO_TORCH = f"torch is not importable ({tm.TORCH_ERROR}): torch models and golden checks not tested"
ARCHS = ("mobilenet_v2", "efficientnet", "convnext")
PRESETS = ("mobilenet_v2_1.0_224", "efficientnet-b0", "convnext-tiny-224")
VARIANTS = os.path.join(hg.GOLDEN_DIR, "variants")


class Plain(unittest.TestCase):
    def test_tf_same(self):
        # (size, kernel, stride, dilation) -> (before, after), as HF's apply_tf_padding
        for args, want in [((224, 3, 2), (0, 1)), ((225, 3, 2), (1, 1)), ((7, 3, 1), (1, 1)), ((7, 1, 1), (0, 0)),
                           ((14, 3, 1, 2), (2, 2)), ((10, 5, 2), (1, 2)), ((1, 3, 2), (1, 1))]:
            self.assertEqual(tz.tf_same(*args), want, args)

    def test_registered(self):
        for a in ARCHS:
            self.assertIn(a, tm.CLASSES)
            self.assertIn(a, hg.ARCHS)
        for p in PRESETS:
            self.assertIn(p, cvt.MODELS)
            self.assertEqual(cvt.kind(p), "vision")
        b0 = tm.preset_config("efficientnet-b0")
        self.assertEqual((b0["width_coefficient"], b0["depth_coefficient"], b0["hidden_dim"]), (1.0, 1.0, 1280))
        self.assertEqual(tm.preset_config("mobilenet_v2_1.0_224")["layer_norm_eps"], 1e-3)
        self.assertEqual(tm.preset_config("convnext-tiny-224")["layer_norm_eps"], 1e-12)

    def test_variant_table(self):
        for name, (cfg, batch, h, w, seed) in mvv.CASES.items():
            self.assertIn(cfg["model_type"], ARCHS, name)
            self.assertTrue(batch >= 1 and h >= 8 and w >= 8, name)
        self.assertEqual(mvv.main(["/nonexistent", "no-such-case"]), 2 if torch is not None else 0)


@unittest.skipIf(torch is None, NO_TORCH)
class Golden(unittest.TestCase):
    """HF's outputs reproduced by the torch models; each check fails on a mutation."""

    def check(self, case_dir):
        m, inputs, exp = hg.load_case(case_dir)
        with torch.no_grad():
            out = m(**inputs)
        names = [k for k in exp if k in out]
        self.assertIn("last_hidden_state", names)
        self.assertIn("pooler_output", names)
        for k in names:
            ok, line = hg.compare(k, out[k], exp[k])
            self.assertTrue(ok, f"{case_dir}: {line}")
        return m

    def fails(self, arch, mutate):
        m, inputs, exp = hg.load_case(os.path.join(hg.GOLDEN_DIR, arch))
        bad = copy.copy(m)
        bad.p = dict(m.p)
        mutate(bad)
        with torch.no_grad():
            out = bad(**inputs)
        self.assertFalse(hg.compare("last_hidden_state", out["last_hidden_state"], exp["last_hidden_state"])[0],
                         f"{arch}: the mutation still passed")

    def test_mobilenet_v2(self):
        self.check(os.path.join(hg.GOLDEN_DIR, "mobilenet_v2"))
        self.fails("mobilenet_v2", lambda m: setattr(m, "tf", False))  # symmetric padding instead of TF's
        self.fails("mobilenet_v2", lambda m: setattr(m, "eps", 1e-5))  # PyTorch's BatchNorm eps

    def test_efficientnet(self):
        self.check(os.path.join(hg.GOLDEN_DIR, "efficientnet"))
        # stride-2 depthwise padded k//2 on every side (PyTorch's way) instead of HF's TF emulation
        def symmetric(m):
            m.blocks = [(p, e, s, ed, (pad[1],) * 4 if s == 2 else pad, r) for p, e, s, ed, pad, r in m.blocks]
        self.fails("efficientnet", symmetric)

    def test_convnext(self):
        self.check(os.path.join(hg.GOLDEN_DIR, "convnext"))
        self.fails("convnext", lambda m: setattr(m, "scale", False))  # layer scale dropped

    @unittest.skipUnless(os.path.isdir(VARIANTS), "no tests/golden/variants")
    def test_variants(self):
        n = 0
        for name in sorted(os.listdir(VARIANTS)):
            cfg = os.path.join(VARIANTS, name, "config.json")
            if name in mvv.CASES and os.path.exists(cfg):
                self.check(os.path.join(VARIANTS, name))
                n += 1
        self.assertGreater(n, 0)

    @unittest.skipUnless(os.path.exists(TOOL), "build/ftengine not built: preset sizes not compared")
    def test_preset_sizes_match_ftengine(self):
        for name in PRESETS:
            r = subprocess.run([TOOL, "info", name], capture_output=True, text=True)
            line = [ln for ln in r.stdout.splitlines() if ln.startswith("parameters:")]
            self.assertTrue(line, r.stdout + r.stderr)
            self.assertEqual(tm.build_preset(name).n_params(), int(line[0].split()[1]), name)

    def test_generator_writes_a_case(self):
        d = tempfile.mkdtemp(prefix="ft_vv_")
        try:
            self.assertEqual(mvv.main([d, "convnext_p3_b3"]), 0)
            self.check(os.path.join(d, "convnext_p3_b3"))
        finally:
            subprocess.run(["rm", "-rf", d])


if __name__ == "__main__":
    import unittest_result

    unittest_result.main(2)
