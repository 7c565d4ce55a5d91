#!/usr/bin/env python3
"""test_torch_zoo_text_a.py - tests of bench/torch_zoo_text_a.py (RoBERTa, ALBERT
and GPT-2 in plain torch) and tools/golden/zoo_text_a_variants.py, runnable with
any python3 (`make test` runs it with the python3 on PATH; Debian's
/usr/bin/python3 has torch).

Without torch every test is skipped with a line saying so. With it: the golden
cases of tests/golden/{roberta,albert,gpt2} pass the C golden tests' criterion
in float32, and in float64 (as HF made them) every expected output, hidden
states included, comes out to within float32 rounding (so the reference cases the
generator writes carry HF's math); one changed operation per architecture fails
(positions from the mask, a floor group index, no causal mask, the erf GELU);
preset parameter counts equal `ftengine info`'s; the generator's cases read back
and, where build/ftengine exists, `ftengine run` matches them in every mode.
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
import hf_golden as hg  # noqa: E402
import torch_models as tm  # noqa: E402

torch = tm.torch
TOOL = os.path.join(HERE, "..", os.environ.get("FT_BUILD") or "build", "ftengine")
NO_TORCH = f"torch is not importable ({tm.TORCH_ERROR}): RoBERTa/ALBERT/GPT-2 torch models not tested"
ARCHS = ("roberta", "albert", "gpt2")


def case_dir(arch):
    return os.path.join(hg.GOLDEN_DIR, arch)


@unittest.skipIf(torch is None, NO_TORCH)
class Golden(unittest.TestCase):
    def test_fp32_criterion(self):
        for arch in ARCHS:
            for ok, line in hg.run_case(case_dir(arch)):
                self.assertTrue(ok, f"{arch}: {line}")

    def test_float64_matches_every_output(self):
        for arch in ARCHS:
            m, inputs, expected = hg.load_case(case_dir(arch))
            m.p = {k: v.double() for k, v in m.p.items()}
            with torch.no_grad():
                out = m(**inputs)
            for k, e in expected.items():
                self.assertIn(k, out, f"{arch}: {k} not produced")
                err = float((out[k].float().double() - e.double()).abs().max())
                self.assertLessEqual(err, 1e-6 * max(1.0, float(e.abs().max())), f"{arch} {k}: {err}")

    def fails(self, arch, change):
        m, _, _ = hg.load_case(case_dir(arch))
        bad = copy.copy(m)
        bad.p = dict(m.p)
        change(bad)
        res = hg.run_case(case_dir(arch), model=bad)
        self.assertFalse(all(ok for ok, _ in res), f"{arch}: the change still passed {res}")

    def test_changes_fail(self):
        # RoBERTa's positions taken as arange + pad + 1 (ignoring pad ids)
        self.fails("roberta", lambda m: setattr(m, "positions", lambda ids: torch.arange(ids.shape[1])[None] + 2))
        # ALBERT's gelu_new swapped for the erf GELU
        self.fails("albert", lambda m: setattr(m, "act", torch.nn.functional.gelu))

        # GPT-2 without the causal mask: attention over every key
        self.fails("gpt2", lambda m: setattr(m, "causal", False))

    def test_group_index_is_hfs(self):
        c = tm.full_config(dict(model_type="albert", num_hidden_layers=18, num_hidden_groups=14, hidden_size=16,
                                num_attention_heads=2, intermediate_size=32, embedding_size=8, vocab_size=10))
        a = tm.build(c)
        groups = [a.group_of(i) for i in range(18)]
        self.assertEqual(groups[9], 6)  # int(9 / (18 / 14)) = int(6.999...), not floor(9 * 14 / 18) = 7
        self.assertEqual(groups[-1], 13)

    @unittest.skipUnless(os.path.exists(TOOL), "build/ftengine not built: preset sizes not compared")
    def test_preset_sizes_match_ftengine(self):
        for name in ("roberta-base", "albert-base-v2", "albert-large-v2", "gpt2", "gpt2-medium"):
            r = subprocess.run([TOOL, "info", name], capture_output=True, text=True)
            line = [ln for ln in r.stdout.splitlines() if ln.startswith("parameters:")]
            self.assertTrue(line, r.stdout + r.stderr)
            m = tm.build_preset(name)
            self.assertEqual(m.n_params(), int(line[0].split()[1]), name)
            del m


@unittest.skipIf(torch is None, NO_TORCH)
class Variants(unittest.TestCase):
    def test_cases_read_back_and_ftengine_matches(self):
        import zoo_text_a_variants as zv
        d = tempfile.mkdtemp(prefix="ft_zoo_a_")
        try:
            names = ["roberta-pad0-nomask", "albert-l18-g14", "gpt2-layer-scale"]
            self.assertEqual(zv.main([d] + names), 0)
            for n in names:
                m, inputs, expected = hg.load_case(os.path.join(d, n))
                with torch.no_grad():
                    out = m(**inputs)
                ok, line = hg.compare("last_hidden_state", out["last_hidden_state"], expected["last_hidden_state"])
                self.assertTrue(ok, f"{n}: {line}")
                if not os.path.exists(TOOL):
                    continue
                for mode in ("eager", "graph", "static"):
                    o = os.path.join(d, n, f"out_{mode}.safetensors")
                    r = subprocess.run([TOOL, "run", os.path.join(d, n), "--inputs",
                                        os.path.join(d, n, "inputs.safetensors"), "--out", o, "--mode", mode,
                                        "--hidden-states", "--threads", "1"], capture_output=True, text=True)
                    self.assertEqual(r.returncode, 0, r.stderr)
                    got = hg.load_safetensors(o)
                    for k, e in expected.items():
                        ok, line = hg.compare(k, got[k], e)
                        self.assertTrue(ok, f"{n} {mode}: {line}")
        finally:
            subprocess.run(["rm", "-rf", d])


if __name__ == "__main__":
    import unittest_result

    unittest_result.main(2)
