"""Tests of the GPT ONNX generator (autopar.gpt_onnx, bench/gen_gpt_onnx.py).

    PYTHONPATH=python python3 -m unittest discover -s python/tests -t python

The end-to-end check runs the generated graph with onnxruntime (tools/reference/ort-run.js)
and compares it with the NumPy reference; it is skipped when Node.js or onnxruntime-node
is not installed.
"""

import contextlib
import io
import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np
import onnx
from onnx import TensorProto

from autopar import gpt_onnx as g
from autopar import tools

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TINY = g.GptConfig(layers=2, hidden=32, heads=4, vocab=50, seq=8)


def ext(t):
    return {e.key: e.value for e in t.external_data}


class ConfigTest(unittest.TestCase):
    def test_formula_equals_shapes(self):
        for cfg in (TINY, g.GptConfig(3, 48, 6, 77, 12, ffn_mult=3, max_pos=20),
                    g.GptConfig(2, 32, 4, 50, 8, fused_qkv=False, tied_lm_head=False),
                    g.PRESETS["gpt-1t"][0]):
            with self.subTest(cfg=cfg):
                n = sum(int(np.prod(s, dtype=np.int64)) for _, s in cfg.weight_shapes())
                self.assertEqual(cfg.params(), n)

    def test_presets_match_published_sizes(self):
        exact = {"gpt2-small": 124_439_808, "gpt2-medium": 354_823_168,
                 "gpt2-large": 774_030_080, "gpt2-xl": 1_557_611_200}   # HF transformers
        for name, (cfg, _) in g.PRESETS.items():
            with self.subTest(preset=name):
                n = cfg.params()
                if name in exact:
                    self.assertEqual(n, exact[name])
                pub = g.PUBLISHED_PARAMS_B[name] * 1e9
                # GPT-3's table rounds loosely ("2.7B" is 2.65B); Megatron's to 0.1B.
                if name.startswith("gpt3"):
                    self.assertLess(abs(n - pub) / pub, 0.025, f"{n:,} vs {pub:,.0f}")
                else:
                    self.assertLessEqual(abs(n - pub), 0.05e9, f"{n:,} vs {pub:,.0f}")
        self.assertEqual(g.PRESETS["gpt-1t"][0], g.PRESETS["megatron-1t"][0])
        c = g.PRESETS["gpt3-175b"][0]
        self.assertEqual((c.layers, c.hidden, c.heads, c.seq), (96, 12288, 96, 2048))
        c = g.PRESETS["gpt-1t"][0]
        self.assertEqual((c.layers, c.hidden, c.heads, c.seq, c.vocab),
                         (128, 25600, 160, 2048, 51200))

    def test_bad_configs(self):
        with self.assertRaises(ValueError):
            g.GptConfig(2, 30, 4, 50, 8).check()          # 30 % 4
        with self.assertRaises(ValueError):
            g.GptConfig(2, 32, 4, 50, 8, max_pos=4).check()
        err = io.StringIO()
        with tempfile.TemporaryDirectory() as d, contextlib.redirect_stderr(err):
            self.assertEqual(g.main(["--layers", "1", "--hidden", "30", "--heads", "4",
                                     "--vocab", "9", "--seq", "4", "-o",
                                     os.path.join(d, "m.onnx")]), 2)
            self.assertEqual(g.main(["--layers", "1", "-o", os.path.join(d, "m.onnx")]), 2)
        self.assertIn("not divisible", err.getvalue())
        self.assertIn("--hidden", err.getvalue())


class TrillionTest(unittest.TestCase):
    """The 1T preset: small file, valid graph, weights laid out but never written."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        cls.path = os.path.join(cls.dir.name, "gpt1t.onnx")
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            rc = g.main(["--preset", "gpt-1t", "-o", cls.path])
        cls.rc, cls.stdout = rc, out.getvalue()

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def test_cli_output(self):
        self.assertEqual(self.rc, 0)
        self.assertIn("params 1,008,038,758,400 (1.01T)", self.stdout)
        self.assertIn("laid out, not written", self.stdout)
        self.assertIn("checked", self.stdout)

    def test_small_file_no_weights(self):
        self.assertLess(os.path.getsize(self.path), 2 << 20)
        self.assertEqual(os.listdir(self.dir.name), ["gpt1t.onnx"])

    def test_loads_and_checks_without_data(self):
        m = onnx.load(self.path, load_external_data=False)
        self.assertEqual(m.opset_import[0].version, 17)
        inits = list(m.graph.initializer)
        self.assertEqual(len(inits), 2 + 128 * 12 + 2)
        n = 0
        end = 0
        for t in sorted(inits, key=lambda t: int(ext(t)["offset"])):
            self.assertEqual(t.data_location, TensorProto.EXTERNAL)
            self.assertEqual(len(t.raw_data), 0)
            e = ext(t)
            self.assertEqual(e["location"], "weights.bin")
            off, length = int(e["offset"]), int(e["length"])
            self.assertEqual(off % 4096, 0)
            self.assertGreaterEqual(off, end)                     # no overlap
            count = int(np.prod(t.dims, dtype=np.int64))
            self.assertEqual(length, 4 * count)
            n += count
            end = off + length
        self.assertEqual(n, 1_008_038_758_400)
        meta = {p.key: p.value for p in m.metadata_props}
        self.assertEqual(meta["gpt.params"], str(n))
        self.assertIn("checked (weights absent", g.check(m, self.path))

    def test_shape_inference(self):
        m = onnx.load(self.path, load_external_data=False)
        inferred = onnx.shape_inference.infer_shapes(m, strict_mode=True)
        out = inferred.graph.output[0].type.tensor_type.shape.dim
        self.assertEqual([d.dim_param or d.dim_value for d in out], ["batch", 2048, 51200])
        inp = m.graph.input[0]
        self.assertEqual(inp.name, "idx")
        self.assertEqual(inp.type.tensor_type.elem_type, TensorProto.INT64)

    def test_ops(self):
        m = onnx.load(self.path, load_external_data=False)
        ops = {}
        for node in m.graph.node:
            ops[node.op_type] = ops.get(node.op_type, 0) + 1
        L = 128
        self.assertEqual(ops["LayerNormalization"], 2 * L + 1)
        self.assertEqual(ops["MatMul"], 6 * L + 1)               # qkv, scores, ctx, proj, fc1, fc2
        self.assertEqual(ops["Erf"], L)
        self.assertEqual(ops["Softmax"], L)
        self.assertEqual(ops["Split"], L)
        for op in ("Gather", "Slice", "Trilu", "Where", "Reshape", "Transpose", "Div", "Mul"):
            self.assertIn(op, ops)


def ort_problem():
    return tools.check_reference_installed()


class EndToEndTest(unittest.TestCase):
    """Tiny configs with --weights: onnxruntime vs the NumPy reference."""

    def run_case(self, cfg_args, cfg, batch=3, std=0.2):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "model.onnx")
            argv = [sys.executable, os.path.join(REPO, "bench", "gen_gpt_onnx.py"), *cfg_args,
                    "-o", path, "--weights", "--init-std", str(std), "--seed", "3"]
            r = subprocess.run(argv, capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn(f"params {cfg.params():,}", r.stdout)
            self.assertIn("checked with weights", r.stdout)
            w = g.read_weights(path)
            self.assertEqual(set(w), {n for n, _ in cfg.weight_shapes()})
            np.testing.assert_array_equal(w["wte"], g.random_weights(cfg, 3, std)["wte"])
            idx = np.random.default_rng(7).integers(0, cfg.vocab, (batch, cfg.seq))
            ref = g.reference_forward(cfg, w, idx)
            self.assertEqual(ref.shape, (batch, cfg.seq, cfg.vocab))
            problem = ort_problem()
            if problem:
                self.skipTest(problem)
            os.makedirs(os.path.join(d, "in"))
            np.save(os.path.join(d, "in", "idx.npy"), idx.astype(np.int64))
            r = subprocess.run(["node", tools.ORT_RUN, path, "--inputs", os.path.join(d, "in"),
                                "--outputs", os.path.join(d, "out")],
                               capture_output=True, text=True, timeout=300)
            self.assertEqual(r.returncode, 0, r.stderr)
            got = np.load(os.path.join(d, "out", "logits.npy"))
            self.assertEqual(got.dtype, np.float32)
            self.assertEqual(got.shape, ref.shape)
            err = np.abs(got - ref).max() / np.abs(ref).max()
            self.assertLess(err, 1e-5)
            # The causal mask matters: changing the last token changes only the last position.
            idx2 = idx.copy()
            idx2[:, -1] = (idx2[:, -1] + 1) % cfg.vocab
            ref2 = g.reference_forward(cfg, w, idx2)
            np.testing.assert_allclose(ref2[:, :-1], ref[:, :-1], rtol=0, atol=1e-12)
            self.assertGreater(np.abs(ref2[:, -1] - ref[:, -1]).max(), 1e-3)

    def test_fused_qkv_tied(self):
        self.run_case(["--layers", "2", "--hidden", "32", "--heads", "4", "--vocab", "50",
                       "--seq", "8"], TINY)

    def test_separate_qkv_untied_static_batch(self):
        cfg = g.GptConfig(3, 24, 3, 40, 6, ffn_mult=2, max_pos=10, batch=2, fused_qkv=False,
                          tied_lm_head=False)
        self.run_case(["--layers", "3", "--hidden", "24", "--heads", "3", "--vocab", "40",
                       "--seq", "6", "--ffn-mult", "2", "--max-pos", "10", "--batch", "2",
                       "--separate-qkv", "--untied-lm-head"], cfg, batch=2)

    def test_weights_refused_when_large(self):
        err = io.StringIO()
        with tempfile.TemporaryDirectory() as d, contextlib.redirect_stderr(err):
            rc = g.main(["--preset", "gpt2-small", "-o", os.path.join(d, "m.onnx"),
                         "--weights", "--max-weight-bytes", "1000000"])
            self.assertEqual(rc, 2)
            self.assertFalse(os.path.exists(os.path.join(d, "weights.bin")))
        self.assertIn("--max-weight-bytes", err.getvalue())


if __name__ == "__main__":
    unittest.main()
