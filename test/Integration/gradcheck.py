#!/usr/bin/env python3
"""Gradients of autopar-differentiate against PyTorch and finite differences.

For each small model (one per family of adjoint rules) this exports a
training-mode ONNX file, compiles it with `autopar-compile --mode train
--emit-gradients` (the program returns the loss and every trained
parameter's gradient), runs it with `autopar-run`, and checks:

1. every gradient against torch.autograd on the same weights and data, in
   fp32, within 1e-4 of the gradient's largest magnitude;
2. in fp64, the directional derivative <grad, v> along a random direction v
   against the central difference (L(w + h v) - L(w - h v)) / 2h of
   autopar's own compiled loss (two more exports with shifted weights).

Usage: gradcheck.py BUILD_DIR WORK_DIR
"""
import os
import subprocess
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class Mlp(nn.Module):
    """Gemm, Relu, SoftmaxCrossEntropyLoss with an ignored target."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 5)

    def forward(self, x, y):
        return F.cross_entropy(self.fc2(F.relu(self.fc1(x))), y,
                               ignore_index=-1)

    @staticmethod
    def data(dtype):
        return {"x": torch.randn(6, 8, dtype=dtype),
                "y": torch.tensor([1, 0, 4, -1, 2, 3])}


class Block(nn.Module):
    """LayerNorm, batched matmuls, softmax, transpose/reshape, GELU (erf),
    tanh, sigmoid, exp/log, division, sqrt, slicing, concat, max and mean
    reductions, NLL on log_softmax."""

    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm(8)
        self.qkv = nn.Linear(8, 24)
        self.proj = nn.Linear(8, 8)
        self.scale = nn.Parameter(torch.rand(8) + 0.5)
        self.head = nn.Linear(16, 3)

    def forward(self, x, y):
        b, t, c = x.shape
        h = self.ln(x)
        q, k, v = self.qkv(h).split(8, dim=2)
        q = q.view(b, t, 2, 4).transpose(1, 2)
        k = k.view(b, t, 2, 4).transpose(1, 2)
        v = v.view(b, t, 2, 4).transpose(1, 2)
        att = torch.softmax(q @ k.transpose(-1, -2) / 2.0, dim=-1)
        o = (att @ v).transpose(1, 2).reshape(b, t, c)
        o = x + self.proj(o)
        g = F.gelu(o) * torch.tanh(o) + torch.sigmoid(o) * self.scale
        g = g / torch.sqrt(torch.exp(o * 0.1) + 1.0) + torch.log(self.scale)
        pooled = torch.cat([g.mean(dim=1), g.amax(dim=1)], dim=1)
        return F.nll_loss(F.log_softmax(self.head(pooled), dim=1), y)

    @staticmethod
    def data(dtype):
        return {"x": torch.randn(2, 5, 8, dtype=dtype),
                "y": torch.tensor([2, 0])}


class Cnn(nn.Module):
    """Convolutions (padded, strided, the second one's input gradient is a
    transposed convolution), BatchNormalization in training mode (batch
    statistics), overlapping max pooling, global average pooling."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 4, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(4)
        self.conv2 = nn.Conv2d(4, 6, 3, stride=2, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(6)
        self.fc = nn.Linear(6, 3)

    def forward(self, x, y):
        h = F.relu(self.bn1(self.conv1(x)))
        h = F.max_pool2d(h, 3, stride=2, padding=1)
        h = F.relu(self.bn2(self.conv2(h)))
        return F.cross_entropy(self.fc(h.mean((2, 3))), y)

    @staticmethod
    def data(dtype):
        return {"x": torch.randn(3, 3, 12, 12, dtype=dtype),
                "y": torch.tensor([2, 0, 1])}


class DilatedConv(nn.Module):
    """Convolutions with dilations, asymmetric strides and kernels, and
    biases: their input and filter gradients are convolutions too (named
    ops, reaching the runtime's GEMM kernel)."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(2, 3, 3, dilation=2, padding=1)
        self.conv2 = nn.Conv2d(3, 4, (3, 2), stride=(2, 3), dilation=(1, 2))
        self.fc = nn.Linear(4, 3)

    def forward(self, x, y):
        h = torch.tanh(self.conv1(x))
        h = torch.tanh(self.conv2(h))
        return F.cross_entropy(self.fc(h.mean((2, 3))), y)

    @staticmethod
    def data(dtype):
        return {"x": torch.randn(2, 2, 13, 14, dtype=dtype),
                "y": torch.tensor([1, 2])}


class Activations(nn.Module):
    """PRelu with a learned slope per feature (its gradient summed over the
    batch), Elu, Selu, Softplus, Tile (repeat) and Mod with fmod=1 (fmod by
    a learned divisor)."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 6)
        self.prelu = nn.PReLU(6)
        self.fc2 = nn.Linear(12, 6)
        self.divisor = nn.Parameter(torch.rand(6) + 0.5)
        self.head = nn.Linear(6, 3)

    def forward(self, x, y):
        h = self.prelu(self.fc1(x))
        h = F.elu(h, alpha=0.7) + F.selu(h)
        h = self.fc2(h.repeat(1, 2))
        h = F.softplus(h) + torch.fmod(h * 3.0, self.divisor)
        return F.cross_entropy(self.head(h), y)

    @staticmethod
    def data(dtype):
        return {"x": torch.randn(6, 8, dtype=dtype) * 2,
                "y": torch.tensor([1, 0, 2, 2, 1, 0])}


class Padding(nn.Module):
    """Pad in reflect, edge (replicate) and constant modes: reflect and edge
    become slices of the input joined by a concat (their adjoints add the
    mirrored and repeated elements' gradients back), constant a tensor.pad
    (its adjoint a slice of the gradient); CumSum, whose adjoint is the
    reverse cumulative sum."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 3, 3)
        self.weight = nn.Parameter(torch.randn(3, 7, 8))
        self.fc = nn.Linear(3, 3)

    def forward(self, x, y):
        h = torch.tanh(self.conv(x))
        h = (F.pad(h, (1, 2, 2, 1), mode="reflect") +
             F.pad(h, (2, 1, 1, 2), mode="replicate") * h.mean() +
             F.pad(h, (1, 2, 0, 3), value=0.5))
        h = torch.cumsum(h, 3) * 0.25
        return F.cross_entropy(self.fc((h * self.weight).mean((2, 3))), y)

    @staticmethod
    def data(dtype):
        return {"x": torch.randn(2, 2, 6, 7, dtype=dtype),
                "y": torch.tensor([2, 0])}


class Einsum(nn.Module):
    """Einsum (one linalg.generic; its adjoint is the generic rule): a
    batched contraction with heads, a '...' operand broadcast from size 1,
    a sum over a letter and an implicit-output form. (A diagonal read such
    as "ii->i" repeats a dim in its map, which the adjoint does not take.)"""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(2, 4, 3))
        self.d = nn.Parameter(torch.randn(3, 3))
        self.s = nn.Parameter(torch.randn(1, 3))
        self.fc = nn.Linear(3, 3)

    def forward(self, x, y):
        h = torch.einsum("bhk,hkc->bhc", x, self.w)        # [b, h, c]
        h = torch.einsum("...c,...c->...c", torch.tanh(h), self.s)
        g = torch.einsum("bhc->bc", h)                      # sum over h
        g = g + torch.einsum("bc,cd", g, self.d) * 0.5      # implicit: bd
        return F.cross_entropy(self.fc(g), y)

    @staticmethod
    def data(dtype):
        return {"x": torch.randn(5, 2, 4, dtype=dtype),
                "y": torch.tensor([0, 2, 1, 1, 0])}


class Gpt(nn.Module):
    """A GPT: token and position embeddings (Gather; the gradient of the
    token table is a scatter-add), a causal mask kept as a float buffer
    (masked_fill: Equal + Where; the buffer is not trained), multi-head
    attention, a GELU MLP, cross-entropy over flattened logits."""

    vocab, width, heads, seq = 11, 8, 2, 5

    def __init__(self, dropout=0.0):
        super().__init__()
        self.wte = nn.Embedding(self.vocab, self.width)
        self.wpe = nn.Embedding(self.seq, self.width)
        self.ln1 = nn.LayerNorm(self.width)
        self.qkv = nn.Linear(self.width, 3 * self.width)
        self.proj = nn.Linear(self.width, self.width)
        self.ln2 = nn.LayerNorm(self.width)
        self.fc = nn.Linear(self.width, 4 * self.width)
        self.out = nn.Linear(4 * self.width, self.width)
        self.lnf = nn.LayerNorm(self.width)
        self.head = nn.Linear(self.width, self.vocab, bias=False)
        self.drop = nn.Dropout(dropout)
        self.register_buffer("mask", torch.tril(
            torch.ones(self.seq, self.seq)).view(1, 1, self.seq, self.seq))

    def forward(self, idx, targets):
        b, t = idx.shape
        c, h = self.width, self.heads
        pos = torch.arange(0, t, dtype=torch.long).unsqueeze(0)
        x = self.drop(self.wte(idx) + self.wpe(pos))
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, h, c // h).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / (c // h) ** 0.5)
        att = att.masked_fill(self.mask[:, :, :t, :t] == 0, float("-inf"))
        att = self.drop(F.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).reshape(b, t, c)
        x = x + self.drop(self.proj(y))
        x = x + self.drop(self.out(F.gelu(self.fc(self.ln2(x)))))
        logits = self.head(self.lnf(x))
        return F.cross_entropy(logits.view(-1, self.vocab), targets.view(-1))

    @classmethod
    def data(cls, dtype):
        return {"idx": torch.randint(0, cls.vocab, (3, cls.seq)),
                "targets": torch.randint(0, cls.vocab, (3, cls.seq))}


class Upsampling(nn.Module):
    """Ops whose gradients come from the rules of the ops they are built
    from: ConvTranspose (a strided insert_slice of the input, a permuting
    generic and anti-identity contractions of the filter, a convolution),
    Resize (one constant contraction per resized dim; nearest and bilinear)
    and InstanceNormalization (reductions and elementwise); grouped and
    depthwise convolutions (conv_2d_ngchw_gfchw's rules); TopK's values (a
    sum of the selected element and zeros)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 4, 3, padding=1)
        self.up = nn.ConvTranspose2d(4, 4, 3, stride=2, padding=1,
                                     output_padding=1, groups=2)
        self.depthwise = nn.Conv2d(4, 4, 3, padding=1, groups=4, stride=2)
        self.norm = nn.InstanceNorm2d(4, affine=True)
        self.fc = nn.Linear(4, 3)

    def forward(self, x, y):
        h = torch.tanh(self.conv(x))
        # tanh between: InstanceNorm would cancel the bias (a zero gradient).
        h = self.norm(torch.tanh(self.up(h)))                  # 2x
        h = torch.tanh(self.depthwise(h)) + h[:, :, ::2, ::2]   # 1x
        h = (F.interpolate(h, scale_factor=0.5, mode="bilinear",
                           align_corners=False) +
             F.interpolate(h, scale_factor=0.5, mode="nearest"))
        top, _ = torch.topk(h.flatten(2), 3, dim=2)             # [b, c, 3]
        return F.cross_entropy(self.fc((h * h).mean((2, 3)) + top.mean(2)), y)

    @staticmethod
    def data(dtype):
        return {"x": torch.randn(2, 2, 5, 6, dtype=dtype),
                "y": torch.tensor([1, 2])}


def run(cmd):
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit("FAILED: " + " ".join(cmd) + "\n" + result.stdout +
                 result.stderr)


def autopar_gradients(build, work, name, model, data, tag):
    """Loss and gradients (by parameter name) computed by autopar."""
    onnx_path = os.path.join(work, f"{name}-{tag}.onnx")
    names = list(data)
    torch.onnx.export(model, tuple(data.values()), onnx_path,
                      training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False, input_names=names,
                      output_names=["loss"])
    inputs = os.path.join(work, f"{name}-in")
    os.makedirs(inputs, exist_ok=True)
    shapes = []
    for key, value in data.items():
        np.save(os.path.join(inputs, key + ".npy"), value.numpy())
        shapes += ["--input-shape",
                   key + "=" + "x".join(map(str, value.shape))]
    art = os.path.join(work, f"{name}-{tag}-art")
    out = os.path.join(work, f"{name}-{tag}-out")
    run([os.path.join(build, "bin", "autopar-compile"), onnx_path,
         "--cluster", "local:1", "--mode", "train", "--emit-gradients",
         *shapes, "-o", art])
    run([os.path.join(build, "bin", "autopar-run"), art, "--inputs", inputs,
         "--outputs", out])
    # Exactly the parameters are trained: buffers (a causal mask) are not.
    produced = sorted(f[:-len(".grad.npy")] for f in os.listdir(out)
                      if f.endswith(".grad.npy"))
    expected = sorted(pname for pname, _ in model.named_parameters())
    if produced != expected:
        sys.exit(f"FAILED: {name}: gradients for {produced}, expected "
                 f"{expected}")
    grads = {}
    for pname, _ in model.named_parameters():
        grads[pname] = np.load(os.path.join(out, pname + ".grad.npy"))
    return float(np.load(os.path.join(out, "loss.npy"))), grads


def check_against_torch(build, work, name, cls):
    model = cls()
    data = cls.data(torch.float32)
    loss, grads = autopar_gradients(build, work, name, model, data, "f32")
    ref = model(*data.values())
    ref.backward()
    failures = []
    if abs(loss - float(ref)) > 1e-5 * max(1.0, abs(float(ref))):
        failures.append(f"loss {loss} != torch {float(ref)}")
    for pname, p in model.named_parameters():
        want = p.grad.numpy()
        err = np.abs(grads[pname] - want).max() / max(np.abs(want).max(), 1e-6)
        status = "ok" if err <= 1e-4 else "FAIL"
        print(f"  {name} {pname}: relative error {err:.2e} {status}")
        if err > 1e-4:
            failures.append(f"{pname}: relative error {err:.2e}")
    return failures


def check_finite_differences(build, work, name, cls):
    model = cls().double()
    data = cls.data(torch.float64)
    _, grads = autopar_gradients(build, work, name, model, data, "f64")
    rng = np.random.default_rng(1)
    direction = {n: rng.standard_normal(p.shape) for n, p in
                 model.named_parameters()}
    analytic = sum(float((grads[n] * direction[n]).sum()) for n in grads)
    h = 1e-6
    losses = []
    for sign in (1, -1):
        shifted = cls().double()
        shifted.load_state_dict(model.state_dict())
        with torch.no_grad():
            for n, p in shifted.named_parameters():
                p += sign * h * torch.from_numpy(direction[n])
        loss, _ = autopar_gradients(build, work, name, shifted, data,
                                    "f64" + ("p" if sign > 0 else "m"))
        losses.append(loss)
    numeric = (losses[0] - losses[1]) / (2 * h)
    err = abs(numeric - analytic) / max(abs(analytic), 1e-8)
    status = "ok" if err <= 1e-6 else "FAIL"
    print(f"  {name} fp64 directional derivative: autopar {analytic:.10g}, "
          f"central difference {numeric:.10g}, relative error {err:.1e} "
          f"{status}")
    return [] if err <= 1e-6 else [f"{name}: finite differences {err:.1e}"]


class Scatter(nn.Module):
    """ScatterND with indices known at import time: Swin V2's
    `qkv_bias[length:2 * length].zero_()` on a parameter's copy (data a
    parameter, updates constant), and a block of an activation replaced by
    values computed from another block (data and updates both computed): the
    insert_slice's adjoints."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 12)
        self.head = nn.Linear(12, 3)

    def forward(self, x, y):
        bias = self.fc.bias.clone()
        length = bias.numel() // 3
        bias[length:2 * length] = 0.0  # zero_() exports the same from opset 17
        h = F.linear(x, self.fc.weight, bias)
        h = h.clone()
        h[:, 2:5] = torch.tanh(h[:, 6:9]) * 2
        return F.cross_entropy(self.head(h), y)

    @staticmethod
    def data(dtype):
        return {"x": torch.randn(5, 6, dtype=dtype),
                "y": torch.tensor([0, 2, 1, 1, 0])}


def main():
    build, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    torch.set_num_threads(1)
    failures = []
    for name, cls in [("mlp", Mlp), ("block", Block), ("cnn", Cnn),
                      ("dilated-conv", DilatedConv),
                      ("activations", Activations), ("padding", Padding),
                      ("einsum", Einsum), ("upsampling", Upsampling),
                      ("scatter", Scatter),
                      ("gpt", Gpt)]:
        failures += check_against_torch(build, work, name, cls)
        failures += check_finite_differences(build, work, name, cls)
    if failures:
        print("gradcheck: " + "; ".join(failures))
        print(f"0 passed, {len(failures)} failed")
        sys.exit(1)
    print("gradcheck: every gradient matches")


if __name__ == "__main__":
    main()
