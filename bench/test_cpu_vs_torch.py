#!/usr/bin/env python3
"""test_cpu_vs_torch.py - tests of bench/cpu_vs_torch.py, bench/torch_models.py
and bench/hf_golden.py, runnable with any python3 (python3
bench/test_cpu_vs_torch.py; `make test` runs it with the python3 on PATH).

Always (standard library): the bench output parsing and table, the argument
checks, the safetensors header reader on synthetic good and broken files and
on the golden cases. Where torch imports (skipped with a line saying so
otherwise): every golden case of tests/golden/ through the torch models with
HF's weights, under the C golden tests' criterion (this is what makes the
timing's torch side "HF's math"); a changed or dropped operation per
architecture that must fail that check (so the check can fail); parameter
counts equal to `ftengine info`'s for the presets; and a short side-by-side run
where build/ftengine exists. Prints "RESULT: P passed, F failed, S skipped".
"""
import contextlib
import copy
import io
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import cpu_vs_torch as cvt  # noqa: E402
import hf_golden as hg  # noqa: E402
import torch_models as tm  # noqa: E402

torch = tm.torch
TOOL = os.path.join(HERE, "..", os.environ.get("FT_BUILD") or "build", "ftengine")
NO_TORCH = f"torch is not importable ({tm.TORCH_ERROR}): torch models and golden checks not tested"


class Parsing(unittest.TestCase):
    def test_ratio_row(self):
        def r(ms):
            return {"status": "ok", "median_ms": ms, "median_lo_ms": ms * 0.9, "median_hi_ms": ms * 1.1}
        rows = {"ftengine-graph": r(90.0), "ftengine-static": r(80.0), "pytorch-eager": r(100.0), "ort-cpu": r(64.0),
                "torchscript": dict(r(1.0), status="failed")}
        row = cvt.ratio_row("bert-base", 1, 2, rows)
        self.assertEqual(row, "| bert-base | 1 | 2 | 80.00 [72.00, 88.00] (static) | 100.0 [90.0, 110.0] | - "
                              "| 64.00 [57.60, 70.40] | 1.25 [1.02, 1.53] | 0.80 [0.65, 0.98] |")
        self.assertEqual(cvt.TABLE_HEAD.count("|"), 20)
        self.assertIn("ftengine / ORT", cvt.TABLE_HEAD)

    def test_render_saved_run(self):
        d = tempfile.mkdtemp(prefix="ft_cvt_")
        try:
            js = os.path.join(d, "run.json")
            r = {"status": "ok", "model": "bert-base", "threads": 1, "batch": 1, "size": 128, "point": "curve"}
            rows = [dict(r, peer=p, median_ms=v, median_lo_ms=v, median_hi_ms=v, min_ms=v / 2, min_lo_ms=v / 2,
                         min_hi_ms=v / 2) for p, v in (("ftengine-graph", 80.0), ("ort-cpu", 100.0))]
            with open(js, "w") as f:
                json.dump({"rows": rows, "host": "h", "cpus": 2, "loadavg": [0, 0], "skipped": []}, f)
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                self.assertEqual(cvt.main(["--render", js, "--stat", "min"]), 0)
            self.assertIn("| bert-base | 1 | 1 | 40.00 [40.00, 40.00] (graph) | - | - | 50.00 [50.00, 50.00] "
                          "| 0.80 [0.80, 0.80] | - |", out.getvalue())
        finally:
            shutil.rmtree(d)

    def test_no_torch_exits_cleanly(self):
        saved = cvt.torch, cvt.P.find_python
        cvt.torch, cvt.TORCH_ERROR = None, "ModuleNotFoundError: test"
        cvt.P.find_python = lambda module, env: (None, "not importable (test)")
        try:
            self.assertEqual(cvt.main(["--models", "bert-tiny"]), 0)
        finally:
            cvt.torch, cvt.P.find_python = saved

    def test_models_and_sizes(self):
        # every architecture the table names, each as an ftengine preset
        for m in ("bert-base", "distilbert-base", "mobilebert-uncased", "funnel-small", "funnel-small-base",
                  "resnet-50", "wavlm-base"):
            self.assertIn(m, cvt.MODELS)
        self.assertEqual(cvt.kind("wavlm-base"), "speech")
        self.assertEqual(cvt.kind("resnet-50"), "vision")
        self.assertEqual(cvt.kind("funnel-small"), "text")
        self.assertEqual(cvt.main(["--models", "bert-base,no-such-model"]), 2)

    def test_preset_configs(self):
        c = tm.preset_config("mobilebert-uncased")
        self.assertEqual((c["hidden_size"], c["num_hidden_layers"], c["num_feedforward_networks"]), (512, 24, 4))
        self.assertFalse(c["classifier_activation"])
        self.assertEqual(tm.preset_config("funnel-small-base")["architectures"], ["FunnelBaseModel"])
        with self.assertRaises(ValueError):
            tm.full_config({"model_type": "no_such_model"})


def write_st(path, header, data=b"", hlen=None):
    raw = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw) if hlen is None else hlen) + raw + data)


class SafetensorsHeader(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="ft_st_")
        self.p = os.path.join(self.dir, "t.safetensors")

    def tearDown(self):
        for f in os.listdir(self.dir):
            os.remove(os.path.join(self.dir, f))
        os.rmdir(self.dir)

    def test_good_file(self):
        write_st(self.p, {"__metadata__": {"format": "pt"}, "a": {"dtype": "F32", "shape": [2, 3],
                 "data_offsets": [0, 24]}, "n": {"dtype": "I64", "shape": [], "data_offsets": [24, 32]}},
                 bytes(32))
        hdr, start, dlen = hg.read_safetensors_header(self.p)
        self.assertEqual(sorted(hdr), ["a", "n"])
        self.assertEqual(dlen, 32)
        self.assertEqual(start, os.path.getsize(self.p) - 32)

    def test_broken_files(self):
        cases = [
            ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, b"", None, "outside"),
            ({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, bytes(8), None, "bytes for F32"),
            ({"a": {"dtype": "Q4", "shape": [2], "data_offsets": [0, 8]}}, bytes(8), None, "unknown dtype"),
            ({"a": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}}, bytes(8), None, "bad shape"),
            ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, bytes(8), 10 ** 6, "truncated"),
        ]
        for hdr, data, hlen, why in cases:
            write_st(self.p, hdr, data, hlen)
            with self.assertRaisesRegex(ValueError, why):
                hg.read_safetensors_header(self.p)
        with open(self.p, "wb") as f:
            f.write(b"\x01\x00")
        with self.assertRaisesRegex(ValueError, "too short"):
            hg.read_safetensors_header(self.p)

    def test_golden_headers(self):
        for arch in hg.ARCHS:
            hdr, _, _ = hg.read_safetensors_header(os.path.join(hg.GOLDEN_DIR, arch, "expected.safetensors"))
            self.assertIn("last_hidden_state", hdr)
            self.assertEqual(hg.required_outputs(hdr)[0], "last_hidden_state")


@unittest.skipIf(torch is None, NO_TORCH)
class TorchModels(unittest.TestCase):
    def test_shapes(self):
        torch.manual_seed(0)
        with torch.no_grad():
            bert = cvt.build_torch("bert-tiny")
            out = bert(**bert.inputs(2, 9))
            self.assertEqual(tuple(out["last_hidden_state"].shape), (2, 9, 128))
            self.assertEqual(tuple(out["pooler_output"].shape), (2, 128))
            # LayerNorm output with unit gamma: mean 0 per row
            self.assertLess(float(out["last_hidden_state"].mean(-1).abs().max()), 1e-4)
            distil = tm.build(dict(model_type="distilbert", dim=64, n_heads=4, n_layers=1, hidden_dim=128))
            self.assertEqual(tuple(distil(**distil.inputs(1, 5))["last_hidden_state"].shape), (1, 5, 64))
            fb = tm.build(dict(model_type="funnel", d_model=32, n_head=2, d_head=16, d_inner=64, block_sizes=[1, 1, 1],
                               architectures=["FunnelBaseModel"]))
            self.assertEqual(tuple(fb(**fb.inputs(2, 16))["last_hidden_state"].shape), (2, 4, 32))
            w = tm.build(dict(model_type="wavlm", hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                              intermediate_size=64, conv_dim=[16] * 7, num_conv_pos_embeddings=16,
                              num_conv_pos_embedding_groups=4))
            self.assertEqual(tuple(w(**w.inputs(1, 32000))["last_hidden_state"].shape), (1, 99, 32))

    def test_safetensors_values(self):
        d = tempfile.mkdtemp(prefix="ft_st_")
        p = os.path.join(d, "v.safetensors")
        try:
            a = torch.arange(6, dtype=torch.float32).reshape(2, 3) / 4
            h = torch.tensor([1.5, -2.0], dtype=torch.float16)
            i = torch.tensor([7, -3], dtype=torch.int64)
            data = a.numpy().tobytes() + h.numpy().tobytes() + i.numpy().tobytes()
            write_st(p, {"a": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
                         "h": {"dtype": "F16", "shape": [2], "data_offsets": [24, 28]},
                         "i": {"dtype": "I64", "shape": [2], "data_offsets": [28, 44]}}, data)
            t = hg.load_safetensors(p)
            self.assertTrue(torch.equal(t["a"], a) and torch.equal(t["h"], h) and torch.equal(t["i"], i))
        finally:
            os.remove(p)
            os.rmdir(d)

    def test_load_state_refuses_mismatch(self):
        m, _, _ = hg.load_case(os.path.join(hg.GOLDEN_DIR, "bert"))
        sd = dict(m.p)
        sd.pop("pooler.dense.bias")
        with self.assertRaisesRegex(KeyError, "pooler.dense.bias"):
            tm.build(m.cfg).load_state(sd)
        sd = dict(m.p, **{"pooler.dense.bias": torch.zeros(3)})
        with self.assertRaisesRegex(ValueError, "pooler.dense.bias"):
            tm.build(m.cfg).load_state(sd)
        # a Hub checkpoint's base-model prefix is taken off
        tm.build(m.cfg).load_state({"bert." + k: v for k, v in m.p.items()})

    def test_distilbert_is_berts_path(self):
        # no golden case for DistilBERT: with BERT's golden weights under DistilBERT's names
        # and BERT's token-type rows zeroed, the two forwards must agree
        bert, inputs, _ = hg.load_case(os.path.join(hg.GOLDEN_DIR, "bert"))
        c = bert.cfg
        names = dict(zip(tm.Bert.names.values(), tm.DistilBert.names.values()))
        sd = {}
        for k, v in bert.p.items():
            if k.startswith(("pooler.", "embeddings.token_type")):
                continue
            for a, b in names.items():
                k = k.replace(a + ".", b + ".") if a != "encoder.layer" else k.replace("encoder.layer.", b + ".")
            sd[k] = v
        distil = tm.build(dict(model_type="distilbert", vocab_size=c["vocab_size"], dim=c["hidden_size"],
                               n_layers=c["num_hidden_layers"], n_heads=c["num_attention_heads"],
                               hidden_dim=c["intermediate_size"], max_position_embeddings=c["max_position_embeddings"]))
        distil.load_state(sd)
        bert.p["embeddings.token_type_embeddings.weight"] = torch.zeros_like(
            bert.p["embeddings.token_type_embeddings.weight"])
        with torch.no_grad():
            want = bert(**inputs)["last_hidden_state"]
            got = distil(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"])["last_hidden_state"]
            self.assertTrue(hg.compare("distilbert", got, want)[0], hg.compare("distilbert", got, want)[1])
            # and the comparison is not vacuous: an erf-GELU swap is seen
            distil.act = tm.gelu_new
            self.assertFalse(hg.compare("distilbert", distil(input_ids=inputs["input_ids"],
                             attention_mask=inputs["attention_mask"])["last_hidden_state"], want)[0])

    @unittest.skipUnless(os.path.exists(TOOL), "build/ftengine not built: preset sizes not compared")
    def test_preset_sizes_match_ftengine(self):
        for name in ("mobilebert-uncased", "funnel-small", "funnel-small-base", "wavlm-base", "distilbert-base",
                     "resnet-50"):
            r = subprocess.run([TOOL, "info", name], capture_output=True, text=True)
            line = [ln for ln in r.stdout.splitlines() if ln.startswith("parameters:")]
            self.assertTrue(line, r.stdout + r.stderr)
            m = tm.build_preset(name)
            self.assertEqual(m.n_params(), int(line[0].split()[1]), name)
            del m

    @unittest.skipUnless(os.path.exists(TOOL), "build/ftengine not built")
    def test_side_by_side_smoke(self):
        d = tempfile.mkdtemp(prefix="ft_cvt_")
        try:
            js = os.path.join(d, "out.json")
            rc = cvt.main(["--tool", TOOL, "--models", "mobilebert-uncased", "--threads", "1", "--seq", "8",
                           "--rounds", "1", "--iters", "2", "--modes", "graph", "--json", js])
            self.assertEqual(rc, 0)
            with open(js) as f:
                res = json.load(f)
            skipped = {s["peer"] for s in res["skipped"]}
            rows = {r["peer"]: r for r in res["rows"]}
            for p in ["ftengine-graph"] + [p for p in cvt.P.PEERS if p not in skipped]:
                self.assertEqual(rows[p]["status"], "ok", rows[p].get("why"))
        finally:
            shutil.rmtree(d)


def mutate(model, what):
    """A copy of `model` with one operation changed or dropped (the check must catch it)."""
    m = copy.copy(model)
    m.p = dict(model.p)
    if what == "tanh GELU for erf GELU":
        m.act = tm.gelu_new
    elif what == "erf GELU for gelu_new":
        m.act = torch.nn.functional.gelu
    elif what == "one FFN block dropped":
        m.n_ffn = model.n_ffn - 1
    elif what == "BatchNorm statistics ignored":
        for k in m.p:
            if k.endswith("running_mean"):
                m.p[k] = torch.zeros_like(m.p[k])
            elif k.endswith("running_var"):
                m.p[k] = torch.ones_like(m.p[k])
    elif what == "weight norm skipped":
        m.pos_w = model.p["encoder.pos_conv_embed.conv.weight_v"]
    elif what == "token-type term dropped":
        m.attention_inputs = lambda h, mask, tt: model.attention_inputs(h, mask, torch.zeros_like(tt))
    return m


@unittest.skipIf(torch is None, NO_TORCH)
class Golden(unittest.TestCase):
    """HF's outputs reproduced by the torch models; each check fails on a mutation."""

    def check(self, arch, **kw):
        res = hg.run_case(os.path.join(hg.GOLDEN_DIR, arch), **kw)
        for ok, line in res:
            self.assertTrue(ok, f"{arch}: {line}")
        return res

    def fails(self, arch, what):
        model, _, _ = hg.load_case(os.path.join(hg.GOLDEN_DIR, arch))
        res = hg.run_case(os.path.join(hg.GOLDEN_DIR, arch), model=mutate(model, what))
        self.assertFalse(all(ok for ok, _ in res), f"{arch} with {what} still passed: {res}")

    def test_bert(self):
        self.assertEqual(len(self.check("bert")), 2)
        self.fails("bert", "tanh GELU for erf GELU")

    def test_funnel(self):
        self.assertEqual(len(self.check("funnel")), 3)
        self.fails("funnel", "erf GELU for gelu_new")
        self.fails("funnel", "token-type term dropped")

    def test_mobilebert(self):
        self.assertEqual(len(self.check("mobilebert")), 2)
        self.fails("mobilebert", "one FFN block dropped")

    def test_resnet(self):
        self.assertEqual(len(self.check("resnet")), 2)
        self.fails("resnet", "BatchNorm statistics ignored")

    def test_wavlm(self):
        self.assertEqual(len(self.check("wavlm", fold_weight_norm=True)), 2)
        self.check("wavlm", fold_weight_norm=False)
        self.fails("wavlm", "weight norm skipped")

    def test_cli(self):
        self.assertEqual(hg.main([hg.GOLDEN_DIR, "--arch", "bert"]), 0)


if __name__ == "__main__":
    import unittest_result

    unittest_result.main(2)
