#!/usr/bin/env python3
"""test_torch_zoo_text_b.py - tests of bench/torch_zoo_text_b.py (SqueezeBERT and
DeBERTa in plain torch) and bench/make_zoo_text_b_variants.py, runnable with any
python3 (`make test` runs it with the python3 on PATH).

Always (standard library): the pos_att_type parsing, the presets and defaults
registered for both architectures, and the committed variant cases
(tests/golden/variants/squeezebert-*, deberta-*) readable, with configs the
generator still makes. Where torch imports (skipped with a line saying so
otherwise): both golden cases through the torch models under the golden
criterion, and a changed operation per architecture that must fail it; the
generator reproducing the committed cases; parameter counts equal to `ftengine
info`'s for the presets; and, where build/ftengine exists, every generated case
(the committed ones and the rest) through `ftengine run` in eager, graph and
static mode. Prints "RESULT: P passed, F failed, S skipped".
"""
import copy
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import hf_golden as hg  # noqa: E402
import make_zoo_text_b_variants as mv  # noqa: E402
import torch_models as tm  # noqa: E402
import torch_zoo_text_b as tz  # noqa: E402

torch = tm.torch
TOOL = os.path.join(HERE, "..", os.environ.get("FT_BUILD") or "build", "ftengine")
VARIANTS = os.path.join(hg.GOLDEN_DIR, "variants")
NO_TORCH = f"torch is not importable ({tm.TORCH_ERROR}): torch models, golden and variant checks not tested"


def committed():
    if not os.path.isdir(VARIANTS):
        return []
    return sorted(d for d in os.listdir(VARIANTS) if d in mv.CASES)


class Plain(unittest.TestCase):
    def test_pos_att_type(self):
        self.assertEqual(tz.pos_att_types("c2p|p2c"), ["c2p", "p2c"])
        self.assertEqual(tz.pos_att_types(" P2C | c2p "), ["p2c", "c2p"])
        self.assertEqual(tz.pos_att_types(["c2p"]), ["c2p"])
        self.assertEqual(tz.pos_att_types(None), [])
        self.assertEqual(tz.pos_att_types(""), [""])  # HF's split: one empty entry, still counted in the scale

    def test_registered(self):
        self.assertIs(tm.CLASSES["squeezebert"], tz.SqueezeBert)
        self.assertIs(tm.CLASSES["deberta"], tz.Deberta)
        self.assertIn("squeezebert", hg.ARCHS)
        self.assertIn("deberta", hg.ARCHS)
        c = tm.preset_config("deberta-base")
        self.assertEqual((c["relative_attention"], c["position_biased_input"], c["max_relative_positions"]),
                         (True, False, -1))
        self.assertEqual(tm.preset_config("squeezebert-uncased")["vocab_size"], 30528)

    def test_committed_variants(self):
        names = committed()
        self.assertGreaterEqual(len(names), 2, "no committed SqueezeBERT/DeBERTa variant cases")
        for n in names:
            for f in ("model", "inputs", "expected"):
                hdr, _, _ = hg.read_safetensors_header(os.path.join(VARIANTS, n, f + ".safetensors"))
                if f == "expected":
                    self.assertIn("last_hidden_state", hdr)
            with open(os.path.join(VARIANTS, n, "config.json")) as fh:
                cfg = json.load(fh)
            cfg.pop("architectures")
            self.assertEqual(cfg, mv.CASES[n][0], f"{n}: the generator's config changed")
            size = sum(os.path.getsize(os.path.join(VARIANTS, n, f)) for f in os.listdir(os.path.join(VARIANTS, n)))
            self.assertLess(size, 300 * 1024, n)


def mutate(model, what):
    """A copy of `model` with one operation changed (the golden check must catch it)."""
    m = copy.copy(model)
    m.p = dict(model.p)
    if what == "every group reads the first input group":
        def conv(x, name, groups):
            w, b = m.p[name + ".weight"], m.p[name + ".bias"]
            kg = w.shape[1]
            return tm.F.conv1d(x[:, :kg].repeat(1, groups, 1), w, b, groups=groups)
        m.conv = conv
    elif what == "encoder LayerNorm eps from the config":
        m.ln_channels = lambda x, name: tm.F.layer_norm(
            x.permute(0, 2, 1), (x.shape[1],), m.p[name + ".weight"], m.p[name + ".bias"], 1e-1).permute(0, 2, 1)
    elif what == "relative positions j - i":
        m.relative_position = lambda s: -model.relative_position(s)
    elif what == "masked probabilities not zeroed":
        m.xsoftmax = lambda scores, mask: torch.softmax(
            scores.masked_fill(~(mask.to(torch.bool)), torch.finfo(scores.dtype).min), -1)
    elif what == "scale 1/sqrt(d)":
        m.scale_factor = lambda: 1
    return m


def param_count(cfg):
    """Parameters of the torch model of cfg, from the declared shapes alone (nothing allocated)."""
    cls = tm.CLASSES[cfg["model_type"]]
    shapes = {}

    def param(self, name, shape, init="normal", std=0.02):
        shapes[name] = shape
        self.p[name] = None
    saved = tm.HFModel.param
    tm.HFModel.param = param
    try:
        cls(cfg)
    finally:
        tm.HFModel.param = saved
    total = 0
    for sh in shapes.values():
        n = 1
        for d in sh:
            n *= d
        total += n
    return total


@unittest.skipIf(torch is None, NO_TORCH)
class Golden(unittest.TestCase):
    def check(self, arch):
        for ok, line in hg.run_case(os.path.join(hg.GOLDEN_DIR, arch)):
            self.assertTrue(ok, f"{arch}: {line}")

    def fails(self, arch, what):
        model, _, _ = hg.load_case(os.path.join(hg.GOLDEN_DIR, arch))
        res = hg.run_case(os.path.join(hg.GOLDEN_DIR, arch), model=mutate(model, what))
        self.assertFalse(all(ok for ok, _ in res), f"{arch}: '{what}' still passes: {res}")

    def test_squeezebert(self):
        self.check("squeezebert")
        self.fails("squeezebert", "encoder LayerNorm eps from the config")
        self.fails("squeezebert", "every group reads the first input group")

    def test_deberta(self):
        self.check("deberta")
        self.fails("deberta", "relative positions j - i")
        self.fails("deberta", "masked probabilities not zeroed")
        self.fails("deberta", "scale 1/sqrt(d)")

    def test_hub_names_load(self):
        # Hub-style state dicts: prefixed, with the keys HF never loads into the bare model
        for arch, extra in (("squeezebert", "cls.predictions.bias"), ("deberta", "lm_predictions.lm_head.bias")):
            m, _, _ = hg.load_case(os.path.join(hg.GOLDEN_DIR, arch))
            sd = {m.prefix + k: v for k, v in m.p.items()}
            sd[extra] = torch.zeros(3)
            tm.build(m.cfg).load_state(sd)

    @unittest.skipUnless(os.path.exists(TOOL), "build/ftengine not built: preset sizes not compared")
    def test_preset_sizes_match_ftengine(self):
        for name in ("squeezebert-uncased", "deberta-base", "deberta-large"):
            r = subprocess.run([TOOL, "info", name], capture_output=True, text=True)
            line = [ln for ln in r.stdout.splitlines() if ln.startswith("parameters:")]
            self.assertTrue(line, r.stdout + r.stderr)
            self.assertEqual(param_count(tm.preset_config(name)), int(line[0].split()[1]), name)


@unittest.skipIf(torch is None, NO_TORCH)
class Variants(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="ft_zoo_b_var_")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_generator_reproduces_committed(self):
        for n in committed():
            mv.write_case(self.dir, n)
            for f in ("model", "inputs", "expected"):
                a = hg.load_safetensors(os.path.join(self.dir, n, f + ".safetensors"))
                b = hg.load_safetensors(os.path.join(VARIANTS, n, f + ".safetensors"))
                self.assertEqual(sorted(a), sorted(b), f"{n}/{f}")
                for k in a:
                    self.assertTrue(torch.allclose(a[k].double(), b[k].double(), rtol=1e-5, atol=1e-6), f"{n}/{f}/{k}")

    @unittest.skipUnless(os.path.exists(TOOL), "build/ftengine not built: variants not run through the engine")
    def test_engine_on_every_variant(self):
        for n in sorted(mv.CASES):
            d = mv.write_case(self.dir, n)
            exp = hg.load_safetensors(os.path.join(d, "expected.safetensors"))
            for mode in ("eager", "graph", "static"):
                out = os.path.join(self.dir, f"{n}-{mode}.safetensors")
                r = subprocess.run([TOOL, "run", d, "--inputs", os.path.join(d, "inputs.safetensors"), "--out", out,
                                    "--mode", mode, "--hidden-states"], capture_output=True, text=True)
                self.assertEqual(r.returncode, 0, f"{n} {mode}: {r.stderr}")
                got = hg.load_safetensors(out)
                for k in exp:
                    ok, line = hg.compare(k, got[k], exp[k])
                    self.assertTrue(ok, f"{n} {mode}: {line}")


if __name__ == "__main__":
    if torch is None:
        print(f"test_torch_zoo_text_b: {NO_TORCH}")
    import unittest_result

    unittest_result.main(1)
