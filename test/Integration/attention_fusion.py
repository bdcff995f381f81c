#!/usr/bin/env python3
"""Attention fusion (autopar-fuse-attention) end to end, against PyTorch.

For each small exported model below this compiles the ONNX file twice on one CPU
rank, as is (attention fused) and with --fuse-attention=false, and checks:

1. that fusion happened: the fused artifact's stage0.so calls the FlashAttention
   kernel (`nm -D` lists _mlir_ciface_autopar_cpu_attention_fwd_f32), the unfused
   one does not; a model whose attention must stay unfused (the probabilities
   returned, need_weights=True) has it in neither;
2. both artifacts' outputs (autopar-run) against PyTorch's on the same inputs: max
   |out - torch| / max |torch| <= 1e-5 in fp32.

The models: GPT-style causal attention with masked_fill over a tril buffer
(odd sequence length 37, head dim 32); python/autopar/gpt_onnx.py's graph
(Trilu/Where mask; its float64 NumPy reference stands in for PyTorch);
grouped-query attention (8 query heads over 2 key/value heads) with
repeat_interleave, with expand+reshape and tiled (Tensor.repeat), where the
fused op must read the key and value unrepeated ([B, 2, T, D]: autopar-opt
runs the fusion on the imported program to check); nn.MultiheadAttention
(batch_first) with key_padding_mask, and with a causal attention mask too;
BERT-style padding masks from a [B, T] input; cross attention with head dim
128 and S != T; need_weights=True (must not fuse).

Training: the GQA model and the GPT-style one with a loss inside, compiled with
`--mode train --emit-gradients` fused (the artifact calls
_mlir_ciface_autopar_cpu_attention_bwd_f32) and unfused (it does not): the loss
and every parameter's gradient against torch.autograd, within 1e-5 of the
gradient's largest magnitude.

Usage: attention_fusion.py BUILD_DIR WORK_DIR
"""
import os
import re
import subprocess
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "python"))

from autopar import gpt_onnx  # noqa: E402

FWD = "_mlir_ciface_autopar_cpu_attention_fwd_f32"
BWD = "_mlir_ciface_autopar_cpu_attention_bwd_f32"
TOL = 1e-5


# --- inference models: forward(*inputs) -> one output ------------------------

class GptCausal(nn.Module):
    """nanoGPT's attention: masked_fill(tril buffer == 0, -inf), odd T."""
    B, T, C, H = 2, 37, 64, 2  # head dim 32

    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm(self.C)
        self.qkv = nn.Linear(self.C, 3 * self.C)
        self.proj = nn.Linear(self.C, self.C)
        self.register_buffer("mask", torch.tril(
            torch.ones(self.T, self.T)).view(1, 1, self.T, self.T))

    def forward(self, x):
        b, t, c = x.shape
        h = self.H
        q, k, v = self.qkv(self.ln(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, h, c // h).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / (c // h) ** 0.5)
        att = att.masked_fill(self.mask[:, :, :t, :t] == 0, float("-inf"))
        y = (F.softmax(att, dim=-1) @ v).transpose(1, 2).reshape(b, t, c)
        return x + self.proj(y)

    def inputs(self):
        return {"x": torch.randn(self.B, self.T, self.C)}


class Gqa(nn.Module):
    """Grouped-query attention: 8 query heads, 2 key/value heads, causal, the
    key/value heads repeated by repeat_interleave, by expand + reshape, or
    tiled (Tensor.repeat: the fused op then takes the heads in another
    order).
    No biases (as Llama): a key bias has a zero gradient (softmax does not
    see it), which no relative tolerance can check."""
    B, T, C, H, HKV, D = 2, 21, 64, 8, 2, 32

    def __init__(self, repeat="interleave"):
        super().__init__()
        self.repeat = repeat
        self.q = nn.Linear(self.C, self.H * self.D, bias=False)
        self.k = nn.Linear(self.C, self.HKV * self.D, bias=False)
        self.v = nn.Linear(self.C, self.HKV * self.D, bias=False)
        self.o = nn.Linear(self.H * self.D, self.C, bias=False)
        self.register_buffer("mask", torch.tril(
            torch.ones(self.T, self.T)).view(1, 1, self.T, self.T))

    def heads(self, z, n):
        b, t, _ = z.shape
        return z.view(b, t, n, self.D).transpose(1, 2)

    def forward(self, x):
        b, t, _ = x.shape
        g = self.H // self.HKV
        q = self.heads(self.q(x), self.H)
        k = self.heads(self.k(x), self.HKV)
        v = self.heads(self.v(x), self.HKV)
        if self.repeat == "interleave":
            k = k.repeat_interleave(g, dim=1)
            v = v.repeat_interleave(g, dim=1)
        elif self.repeat == "tile":  # query head h reads h % HKV
            k = k.repeat(1, g, 1, 1)
            v = v.repeat(1, g, 1, 1)
        else:
            k = k[:, :, None].expand(b, self.HKV, g, t, self.D).reshape(
                b, self.H, t, self.D)
            v = v[:, :, None].expand(b, self.HKV, g, t, self.D).reshape(
                b, self.H, t, self.D)
        att = (q @ k.transpose(-2, -1)) / self.D ** 0.5
        att = att.masked_fill(self.mask[:, :, :t, :t] == 0, float("-inf"))
        y = (F.softmax(att, dim=-1) @ v).transpose(1, 2).reshape(b, t, -1)
        return self.o(y)

    def inputs(self):
        return {"x": torch.randn(self.B, self.T, self.C)}


class Mha(nn.Module):
    """nn.MultiheadAttention, batch_first, with a key padding mask (and a
    boolean causal attention mask with `causal`); `weights` returns the
    head-averaged probabilities too (need_weights=True: not fusable)."""
    B, T, E, H = 2, 11, 64, 2

    def __init__(self, causal=False, weights=False):
        super().__init__()
        self.causal, self.weights = causal, weights
        self.mha = nn.MultiheadAttention(self.E, self.H, batch_first=True)

    def forward(self, x, pad):
        mask = None
        if self.causal:
            mask = torch.triu(torch.ones(self.T, self.T, dtype=torch.bool), 1)
        out, w = self.mha(x, x, x, key_padding_mask=pad, attn_mask=mask,
                          need_weights=self.weights)
        return out + w.sum() if self.weights else out

    def inputs(self):
        pad = torch.zeros(self.B, self.T, dtype=torch.bool)
        pad[1, 7:] = True
        return {"x": torch.randn(self.B, self.T, self.E), "pad": pad}


class Bert(nn.Module):
    """BERT's self-attention: (1 - mask) * -10000 from a [B, T] input."""
    B, T, C, H = 3, 16, 64, 2

    def __init__(self):
        super().__init__()
        self.q, self.k, self.v = (nn.Linear(self.C, self.C) for _ in range(3))

    def forward(self, x, mask):
        b, t, c = x.shape
        d = c // self.H
        q, k, v = (z(x).view(b, t, self.H, d).transpose(1, 2)
                   for z in (self.q, self.k, self.v))
        ext = (1.0 - mask[:, None, None, :]) * -10000.0
        att = q @ k.transpose(-1, -2) / d ** 0.5 + ext
        return (F.softmax(att, -1) @ v).transpose(1, 2).reshape(b, t, c)

    def inputs(self):
        mask = torch.ones(self.B, self.T)
        mask[1, 9:] = 0
        mask[2, 3:] = 0
        return {"x": torch.randn(self.B, self.T, self.C), "mask": mask}


class Cross(nn.Module):
    """Cross attention on [B, H, S, D] inputs, head dim 128, S != T."""

    def forward(self, q, k, v):
        att = (q @ k.transpose(-1, -2)) * 128 ** -0.5
        return F.softmax(att, dim=-1) @ v

    def inputs(self):
        return {"q": torch.randn(2, 2, 19, 128), "k": torch.randn(2, 2, 37, 128),
                "v": torch.randn(2, 2, 37, 128)}


# name, model, fused (None: must stay unfused; else the shapes of the fused
# op's key and value: GQA's are not repeated over the query heads).
INFERENCE = [
    ("gpt-causal", GptCausal, True),
    ("gqa-repeat-interleave", lambda: Gqa("interleave"), "2x2x21x32"),
    ("gqa-expand-reshape", lambda: Gqa("expand"), "2x2x21x32"),
    ("gqa-tile", lambda: Gqa("tile"), "2x2x21x32"),
    ("mha-key-padding", lambda: Mha(), True),
    ("mha-causal-key-padding", lambda: Mha(causal=True), True),
    ("bert-padding", Bert, True),
    ("cross-head128", Cross, True),
    ("mha-need-weights", lambda: Mha(weights=True), None),
]


# --- training models: forward(*inputs) -> scalar loss -------------------------

class GptTrain(GptCausal):
    T = 13

    def __init__(self):
        super().__init__()
        self.head = nn.Linear(self.C, 5)

    def forward(self, x, y):
        logits = self.head(super().forward(x))
        return F.cross_entropy(logits.view(-1, 5), y.view(-1))

    def inputs(self):
        return {"x": torch.randn(self.B, self.T, self.C),
                "y": torch.randint(0, 5, (self.B, self.T))}


class GqaTrain(Gqa):
    T = 13

    def __init__(self):
        super().__init__("interleave")
        self.head = nn.Linear(self.C, 5)

    def forward(self, x, y):
        logits = self.head(super().forward(x))
        return F.cross_entropy(logits.view(-1, 5), y.view(-1))

    def inputs(self):
        return {"x": torch.randn(self.B, self.T, self.C),
                "y": torch.randint(0, 5, (self.B, self.T))}


TRAINING = [("gpt-causal-train", GptTrain), ("gqa-train", GqaTrain)]


# --- driver -------------------------------------------------------------------

class Failed(Exception):
    pass


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise Failed(" ".join(cmd) + "\n" + (r.stdout + r.stderr)[-3000:])
    return r.stdout


def symbols(artifact):
    return run(["nm", "-D", os.path.join(artifact, "stage0.so")])


def relative_error(got, want):
    """max |got - want| / max |want|: got fp32, want as computed (PyTorch's
    fp32, or the fp64 NumPy reference)."""
    if got.shape != want.shape or got.dtype != np.float32:
        raise Failed(f"output {got.dtype}{list(got.shape)}, expected "
                     f"float32{list(want.shape)}")
    return float(np.abs(got.astype(np.float64) - want).max() /
                 max(np.abs(want).max(), 1e-30))


def write_inputs(directory, inputs):
    os.makedirs(directory, exist_ok=True)
    flags = []
    for name, value in inputs.items():
        np.save(os.path.join(directory, name + ".npy"), value)
        flags += ["--input-shape", name + "=" + "x".join(map(str, value.shape))]
    return flags


def compile_both(build, onnx_path, flags, work, extra=()):
    """The fused and the unfused artifact."""
    compile_ = os.path.join(build, "bin", "autopar-compile")
    arts = {}
    for tag, fuse in (("fused", []), ("unfused", ["--fuse-attention=false"])):
        arts[tag] = os.path.join(work, tag)
        run([compile_, onnx_path, "--cluster", "local:1", *flags, *extra,
             *fuse, "-o", arts[tag]])
    return arts


def check_key_value(build, onnx_path, flags, work, shape):
    """The fused op's key and value are `shape` (autopar-fuse-attention on
    the imported program, as the pipeline runs it first on one rank)."""
    ir = os.path.join(work, "ir")
    run([os.path.join(build, "bin", "autopar-compile"), onnx_path, "--cluster",
         "local:1", *flags, "--plan-only", "--dump-ir", ir])
    fused = run([os.path.join(build, "bin", "autopar-opt"),
                 os.path.join(ir, "imported.mlir"),
                 "--pass-pipeline=builtin.module(func.func("
                 "autopar-fuse-attention,canonicalize))"])
    ops = re.findall(r"autopar\.attention ins\([^:]*: ([^)]*)\)", fused)
    types = [re.findall(r"tensor<([0-9x]+)xf32>", t) for t in ops]
    if len(types) != 1 or types[0][1:3] != [shape, shape]:
        raise Failed(f"fused attention operands {types}, expected key and "
                     f"value {shape}")


def check_symbol(arts, symbol, fused_expected):
    has = {tag: symbol in symbols(art) for tag, art in arts.items()}
    if has["unfused"]:
        raise Failed(f"the --fuse-attention=false artifact calls {symbol}")
    if has["fused"] != fused_expected:
        raise Failed(f"the fused artifact {'lacks' if fused_expected else 'calls'}"
                     f" {symbol}")


def inference_case(build, work, name, make, fusable):
    torch.manual_seed(0)
    model = make().eval()
    inputs = model.inputs()
    with torch.no_grad():
        want = model(*inputs.values()).double().numpy()
    onnx_path = os.path.join(work, name + ".onnx")
    torch.onnx.export(model, tuple(inputs.values()), onnx_path, opset_version=17,
                      input_names=list(inputs), output_names=["out"])
    flags = write_inputs(os.path.join(work, name + "-in"),
                         {k: v.numpy() for k, v in inputs.items()})
    if isinstance(fusable, str):
        check_key_value(build, onnx_path, flags, os.path.join(work, name),
                        fusable)
    return check_artifacts(build, work, name, onnx_path, flags, want,
                           fusable is not None)


def gen_gpt_case(build, work):
    """gpt_onnx's graph (Trilu/Where causal mask), against its float64 NumPy
    reference (PyTorch has no model of it)."""
    name = "gen-gpt"
    cfg = gpt_onnx.GptConfig(layers=1, hidden=64, heads=2, vocab=50, seq=24,
                             batch=2)
    onnx_path = os.path.join(work, name, "model.onnx")
    gpt_onnx.write(cfg, onnx_path, weights=True, std=0.2)
    idx = np.random.default_rng(0).integers(0, cfg.vocab, (2, cfg.seq))
    want = gpt_onnx.reference_forward(cfg, gpt_onnx.read_weights(onnx_path), idx)
    flags = write_inputs(os.path.join(work, name + "-in"), {"idx": idx})
    return check_artifacts(build, work, name, onnx_path, flags, want, True)


def check_artifacts(build, work, name, onnx_path, flags, want, fusable):
    arts = compile_both(build, onnx_path, flags, os.path.join(work, name))
    check_symbol(arts, FWD, fusable)
    errors = {}
    for tag, art in arts.items():
        out = os.path.join(work, name, tag + "-out")
        run([os.path.join(build, "bin", "autopar-run"), art, "--inputs",
             os.path.join(work, name + "-in"), "--outputs", out])
        got = np.load(os.path.join(out, output_name(out)))
        errors[tag] = relative_error(got, want)
    bad = {t: e for t, e in errors.items() if not e <= TOL}
    print(f"  {name}: {'fused' if fusable else 'stays unfused'}; relative "
          f"error fused {errors['fused']:.1e}, unfused {errors['unfused']:.1e} "
          f"{'ok' if not bad else 'FAIL'}")
    if bad:
        raise Failed(f"relative error {bad} > {TOL}")


def output_name(out_dir):
    names = [f for f in os.listdir(out_dir) if f.endswith(".npy")]
    for preferred in ("out.npy", "logits.npy"):
        if preferred in names:
            return preferred
    if len(names) != 1:
        raise Failed(f"outputs {names}")
    return names[0]


def training_case(build, work, name, cls):
    torch.manual_seed(0)
    model = cls()
    inputs = model.inputs()
    onnx_path = os.path.join(work, name + ".onnx")
    torch.onnx.export(model, tuple(inputs.values()), onnx_path, opset_version=17,
                      training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False, input_names=list(inputs),
                      output_names=["loss"])
    loss = model(*inputs.values())
    loss.backward()
    flags = write_inputs(os.path.join(work, name + "-in"),
                         {k: v.numpy() for k, v in inputs.items()})
    arts = compile_both(build, onnx_path, flags, os.path.join(work, name),
                        extra=["--mode", "train", "--emit-gradients"])
    check_symbol(arts, BWD, True)
    worst = {}
    for tag, art in arts.items():
        out = os.path.join(work, name, tag + "-out")
        run([os.path.join(build, "bin", "autopar-run"), art, "--inputs",
             os.path.join(work, name + "-in"), "--outputs", out])
        got = float(np.load(os.path.join(out, "loss.npy")))
        errs = {"loss": abs(got - float(loss)) / max(abs(float(loss)), 1.0)}
        for pname, p in model.named_parameters():
            grad = np.load(os.path.join(out, pname + ".grad.npy"))
            want = p.grad.double().numpy()
            if grad.shape != want.shape:
                raise Failed(f"{tag} {pname}.grad shape {grad.shape}")
            errs[pname] = float(np.abs(grad - want).max() /
                                max(np.abs(want).max(), 1e-12))
        worst[tag] = max(errs.items(), key=lambda kv: kv[1])
    bad = {t: w for t, w in worst.items() if not w[1] <= TOL}
    print(f"  {name}: worst relative error fused {worst['fused'][1]:.1e} "
          f"({worst['fused'][0]}), unfused {worst['unfused'][1]:.1e} "
          f"({worst['unfused'][0]}) {'ok' if not bad else 'FAIL'}")
    if bad:
        raise Failed(f"gradients off: {bad}")


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    build, work = (os.path.abspath(a) for a in sys.argv[1:])
    os.makedirs(work, exist_ok=True)
    torch.set_num_threads(1)
    start = time.time()
    cases = [(name, lambda n=name, m=make, f=fusable:
              inference_case(build, work, n, m, f))
             for name, make, fusable in INFERENCE]
    cases.append(("gen-gpt", lambda: gen_gpt_case(build, work)))
    cases += [(name, lambda n=name, c=cls: training_case(build, work, n, c))
              for name, cls in TRAINING]
    failures = []
    for name, case in cases:
        try:
            case()
        except Failed as e:
            print(f"  {name}: FAILED: {e}")
            failures.append(name)
    print(f"{len(cases) - len(failures)} passed, {len(failures)} failed "
          f"({time.time() - start:.0f} s)")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
