"""GPT-style decoder ONNX graphs of any size, without materializing the weights.

    python3 -m autopar.gpt_onnx --preset gpt-1t -o /tmp/gpt1t/model.onnx      # ~1 MB file
    python3 -m autopar.gpt_onnx --layers 2 --hidden 64 --heads 4 --vocab 100 --seq 16 \\
        -o /tmp/tiny/model.onnx --weights                                     # runnable
    python3 -m autopar.gpt_onnx --list-presets

(``bench/gen_gpt_onnx.py`` is the same command.)  Every weight is an initializer with
``data_location = EXTERNAL`` in one file (``weights.bin`` beside the model by default)
at offsets laid out as if the file existed; the file is written only with ``--weights``
(random values, for small sizes), so planning can be tested on a 1-trillion-parameter
graph whose .onnx is small and whose weights exist nowhere.

The graph (opset 17), for input ``idx`` int64 [batch, seq] (batch symbolic unless
``--batch N``) and output ``logits`` float [batch, seq, vocab]:

    x = Gather(wte, idx) + Slice(wpe, 0, seq)
    mask = Where(Cast<bool>(Trilu(ConstantOfShape([seq, seq], 1), upper=0)), 0, -1e9)
    per block i (names h.<i>.*):
      a = LayerNormalization(x, ln_1)
      q, k, v = Split(MatMul(a, attn.qkv.weight) + attn.qkv.bias)     (or three MatMuls
                                                                        with --separate-qkv)
      q, v -> Reshape [0, 0, heads, d] -> Transpose [0, 2, 1, 3];  k -> Transpose [0, 2, 3, 1]
      p = Softmax(MatMul(q, k) / sqrt(d) + mask)
      o = Reshape(Transpose(MatMul(p, v), [0, 2, 1, 3]), [0, 0, hidden])
      x = x + MatMul(o, attn.proj.weight) + attn.proj.bias
      m = MatMul(LayerNormalization(x, ln_2), mlp.fc1.weight) + mlp.fc1.bias
      g = m * (Erf(m / sqrt(2)) + 1) * 0.5                              (exact GELU)
      x = x + MatMul(g, mlp.fc2.weight) + mlp.fc2.bias
    logits = MatMul(LayerNormalization(x, ln_f), Transpose(wte))    (tied; --untied-lm-head
                                                                     adds lm_head.weight)

Parameter count: V*H + P*H + L*(12*H^2 + 13*H) + 2*H (+ H*V untied) for ffn-mult 4,
which is the formula of Narayanan et al. 2021 (Megatron-LM), so the presets reproduce
the published sizes.
"""

import argparse
import math
import os
import sys
from dataclasses import dataclass, asdict, replace
from typing import Optional

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
INPUT_NAME = "idx"
OUTPUT_NAME = "logits"
MASK_VALUE = -1e9


@dataclass(frozen=True)
class GptConfig:
    layers: int
    hidden: int
    heads: int
    vocab: int
    seq: int
    ffn_mult: int = 4
    max_pos: Optional[int] = None       # rows of the position table (default: seq)
    batch: Optional[int] = None         # None: symbolic dim "batch"
    fused_qkv: bool = True
    tied_lm_head: bool = True
    eps: float = 1e-5

    @property
    def positions(self):
        return self.max_pos or self.seq

    @property
    def head_dim(self):
        return self.hidden // self.heads

    @property
    def ffn(self):
        return self.ffn_mult * self.hidden

    def check(self):
        for k in ("layers", "hidden", "heads", "vocab", "seq", "ffn_mult"):
            if getattr(self, k) < 1:
                raise ValueError(f"--{k.replace('_', '-')} must be at least 1, "
                                 f"got {getattr(self, k)}")
        if self.hidden % self.heads:
            raise ValueError(f"--hidden {self.hidden} is not divisible by --heads {self.heads}")
        if self.positions < self.seq:
            raise ValueError(f"--max-pos {self.positions} is smaller than --seq {self.seq}")
        if self.batch is not None and self.batch < 1:
            raise ValueError(f"--batch must be at least 1, got {self.batch}")

    def weight_shapes(self):
        """[(initializer name, shape)] in file order."""
        H, F, V = self.hidden, self.ffn, self.vocab
        w = [("wte", (V, H)), ("wpe", (self.positions, H))]
        for i in range(self.layers):
            p = f"h.{i}."
            w += [(p + "ln_1.weight", (H,)), (p + "ln_1.bias", (H,))]
            if self.fused_qkv:
                w += [(p + "attn.qkv.weight", (H, 3 * H)), (p + "attn.qkv.bias", (3 * H,))]
            else:
                for n in "qkv":
                    w += [(p + f"attn.{n}.weight", (H, H)), (p + f"attn.{n}.bias", (H,))]
            w += [(p + "attn.proj.weight", (H, H)), (p + "attn.proj.bias", (H,)),
                  (p + "ln_2.weight", (H,)), (p + "ln_2.bias", (H,)),
                  (p + "mlp.fc1.weight", (H, F)), (p + "mlp.fc1.bias", (F,)),
                  (p + "mlp.fc2.weight", (F, H)), (p + "mlp.fc2.bias", (H,))]
        w += [("ln_f.weight", (H,)), ("ln_f.bias", (H,))]
        if not self.tied_lm_head:
            w.append(("lm_head.weight", (H, V)))
        return w

    def params(self):
        """Parameter count by formula (equals the sum over weight_shapes())."""
        H, F, V, L = self.hidden, self.ffn, self.vocab, self.layers
        per_layer = 4 * H * H + 2 * H * F + 9 * H + F       # + 4H LN, 3H+H+F+H biases
        n = V * H + self.positions * H + L * per_layer + 2 * H
        return n + (H * V if not self.tied_lm_head else 0)


# name -> (config, source).  Vocabularies: GPT-2/GPT-3 50257 (their BPE), Megatron-LM
# 51200 (50257 padded to a multiple of 1024 for tensor parallelism).
_MEGATRON = "Narayanan et al. 2021, 'Efficient Large-Scale Language Model Training on " \
            "GPU Clusters Using Megatron-LM', Table 1 (seq 2048, vocab 51200)"
_GPT3 = "Brown et al. 2020, 'Language Models are Few-Shot Learners', Table 2.1 " \
        "(n_ctx 2048, vocab 50257)"
_GPT2 = "Radford et al. 2019, GPT-2 (HF gpt2 configs: n_ctx 1024, vocab 50257)"
PRESETS = {
    "gpt2-small": (GptConfig(12, 768, 12, 50257, 1024), _GPT2),
    "gpt2-medium": (GptConfig(24, 1024, 16, 50257, 1024), _GPT2),
    "gpt2-large": (GptConfig(36, 1280, 20, 50257, 1024), _GPT2),
    "gpt2-xl": (GptConfig(48, 1600, 25, 50257, 1024), _GPT2),
    "gpt3-125m": (GptConfig(12, 768, 12, 50257, 2048), _GPT3),
    "gpt3-350m": (GptConfig(24, 1024, 16, 50257, 2048), _GPT3),
    "gpt3-2.7b": (GptConfig(32, 2560, 32, 50257, 2048), _GPT3),
    "gpt3-6.7b": (GptConfig(32, 4096, 32, 50257, 2048), _GPT3),
    "gpt3-175b": (GptConfig(96, 12288, 96, 50257, 2048), _GPT3),
    "megatron-1.7b": (GptConfig(24, 2304, 24, 51200, 2048), _MEGATRON),
    "megatron-3.6b": (GptConfig(30, 3072, 32, 51200, 2048), _MEGATRON),
    "megatron-7.5b": (GptConfig(36, 4096, 32, 51200, 2048), _MEGATRON),
    "megatron-18b": (GptConfig(40, 6144, 48, 51200, 2048), _MEGATRON),
    "megatron-39b": (GptConfig(48, 8192, 64, 51200, 2048), _MEGATRON),
    "megatron-76b": (GptConfig(60, 10240, 80, 51200, 2048), _MEGATRON),
    "megatron-145b": (GptConfig(80, 12288, 96, 51200, 2048), _MEGATRON),
    "megatron-310b": (GptConfig(96, 16384, 128, 51200, 2048), _MEGATRON),
    "megatron-530b": (GptConfig(105, 20480, 128, 51200, 2048), _MEGATRON),
    "megatron-1t": (GptConfig(128, 25600, 160, 51200, 2048), _MEGATRON),
    "gpt-1t": (GptConfig(128, 25600, 160, 51200, 2048), _MEGATRON),
}
# The sizes the sources publish (billions), for the tests and --list-presets.
PUBLISHED_PARAMS_B = {
    "gpt2-small": 0.124, "gpt2-medium": 0.355, "gpt2-large": 0.774, "gpt2-xl": 1.558,
    "gpt3-125m": 0.125, "gpt3-350m": 0.35, "gpt3-2.7b": 2.7, "gpt3-6.7b": 6.7,
    "gpt3-175b": 175.0,
    "megatron-1.7b": 1.7, "megatron-3.6b": 3.6, "megatron-7.5b": 7.5, "megatron-18b": 18.4,
    "megatron-39b": 39.1, "megatron-76b": 76.1, "megatron-145b": 145.6,
    "megatron-310b": 310.1, "megatron-530b": 529.6, "megatron-1t": 1008.0, "gpt-1t": 1008.0,
}


def human(n):
    for unit, div in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= div:
            return f"{n / div:.3g}{unit}"
    return str(n)


# ---------------------------------------------------------------------------------------
# Graph construction

class _Builder:
    def __init__(self):
        self.nodes = []
        self.count = {}

    def op(self, op_type, inputs, name, outputs=1, **attrs):
        outs = [f"{name}_out{i}" if outputs > 1 else f"{name}_out" for i in range(outputs)]
        self.nodes.append(helper.make_node(op_type, inputs, outs, name=name, **attrs))
        return outs if outputs > 1 else outs[0]

    def const(self, name, array):
        arr = np.asarray(array)
        return self.op("Constant", [], name, value=numpy_helper.from_array(arr, name))


def external_initializer(name, shape, data_file, offset, dtype=TensorProto.FLOAT):
    """A TensorProto that points at `length` bytes of `data_file` from `offset`."""
    t = TensorProto()
    t.name = name
    t.data_type = dtype
    t.dims.extend(shape)
    t.data_location = TensorProto.EXTERNAL
    length = int(np.prod(shape, dtype=np.int64)) * 4
    for k, v in (("location", data_file), ("offset", str(offset)), ("length", str(length))):
        e = t.external_data.add()
        e.key, e.value = k, v
    return t, length


def layout(cfg, align=4096):
    """[(name, shape, offset, length)]: where each weight sits in the data file."""
    out, off = [], 0
    for name, shape in cfg.weight_shapes():
        off = (off + align - 1) // align * align
        length = int(np.prod(shape, dtype=np.int64)) * 4
        out.append((name, shape, off, length))
        off += length
    return out


def build_model(cfg, data_file="weights.bin", align=4096):
    """The ModelProto (weights external, not read or written)."""
    cfg.check()
    H, nh, d, S = cfg.hidden, cfg.heads, cfg.head_dim, cfg.seq
    b = _Builder()
    inits = []
    for name, shape, off, _ in layout(cfg, align):
        t, _ = external_initializer(name, shape, data_file, off)
        inits.append(t)

    # Constants shared by all blocks.
    heads_shape = b.const("/const/heads_shape", np.array([0, 0, nh, d], np.int64))
    merge_shape = b.const("/const/merge_shape", np.array([0, 0, H], np.int64))
    scale = b.const("/const/sqrt_head_dim", np.array(math.sqrt(d), np.float32))
    sqrt2 = b.const("/const/sqrt2", np.array(math.sqrt(2.0), np.float32))
    one = b.const("/const/one", np.array(1.0, np.float32))
    half = b.const("/const/half", np.array(0.5, np.float32))

    # Embeddings.
    tok = b.op("Gather", ["wte", INPUT_NAME], "/wte/Gather", axis=0)
    pos = b.op("Slice", ["wpe", b.const("/wpe/starts", np.array([0], np.int64)),
                         b.const("/wpe/ends", np.array([S], np.int64)),
                         b.const("/wpe/axes", np.array([0], np.int64))], "/wpe/Slice")
    x = b.op("Add", [tok, pos], "/embed/Add")

    # Causal mask [S, S]: 0 on and below the diagonal, MASK_VALUE above.
    ones = b.op("ConstantOfShape", [b.const("/mask/shape", np.array([S, S], np.int64))],
                "/mask/ConstantOfShape",
                value=numpy_helper.from_array(np.array([1.0], np.float32), "one"))
    lower = b.op("Trilu", [ones], "/mask/Trilu", upper=0)
    keep = b.op("Cast", [lower], "/mask/Cast", to=TensorProto.BOOL)
    mask = b.op("Where", [keep, b.const("/mask/zero", np.array(0.0, np.float32)),
                          b.const("/mask/neg", np.array(MASK_VALUE, np.float32))],
                "/mask/Where")

    def ln(inp, prefix, name):
        return b.op("LayerNormalization", [inp, prefix + ".weight", prefix + ".bias"], name,
                    axis=-1, epsilon=cfg.eps)

    def linear(inp, prefix, name):
        mm = b.op("MatMul", [inp, prefix + ".weight"], name + "/MatMul")
        return b.op("Add", [mm, prefix + ".bias"], name + "/Add")

    for i in range(cfg.layers):
        p, n = f"h.{i}.", f"/h.{i}"
        a = ln(x, p + "ln_1", f"{n}/ln_1/LayerNormalization")
        if cfg.fused_qkv:
            qkv = linear(a, p + "attn.qkv", f"{n}/attn/qkv")
            split = b.const(f"{n}/attn/split_sizes", np.array([H, H, H], np.int64))
            q, k, v = b.op("Split", [qkv, split], f"{n}/attn/Split", outputs=3, axis=-1)
        else:
            q, k, v = (linear(a, p + f"attn.{c}", f"{n}/attn/{c}") for c in "qkv")
        q = b.op("Transpose", [b.op("Reshape", [q, heads_shape], f"{n}/attn/q/Reshape")],
                 f"{n}/attn/q/Transpose", perm=[0, 2, 1, 3])
        k = b.op("Transpose", [b.op("Reshape", [k, heads_shape], f"{n}/attn/k/Reshape")],
                 f"{n}/attn/k/Transpose", perm=[0, 2, 3, 1])
        v = b.op("Transpose", [b.op("Reshape", [v, heads_shape], f"{n}/attn/v/Reshape")],
                 f"{n}/attn/v/Transpose", perm=[0, 2, 1, 3])
        s = b.op("MatMul", [q, k], f"{n}/attn/scores/MatMul")
        s = b.op("Div", [s, scale], f"{n}/attn/scores/Div")
        s = b.op("Add", [s, mask], f"{n}/attn/mask/Add")
        s = b.op("Softmax", [s], f"{n}/attn/Softmax", axis=-1)
        o = b.op("MatMul", [s, v], f"{n}/attn/context/MatMul")
        o = b.op("Transpose", [o], f"{n}/attn/context/Transpose", perm=[0, 2, 1, 3])
        o = b.op("Reshape", [o, merge_shape], f"{n}/attn/context/Reshape")
        o = linear(o, p + "attn.proj", f"{n}/attn/proj")
        x = b.op("Add", [x, o], f"{n}/attn/residual/Add")
        m = linear(ln(x, p + "ln_2", f"{n}/ln_2/LayerNormalization"), p + "mlp.fc1",
                   f"{n}/mlp/fc1")
        g = b.op("Div", [m, sqrt2], f"{n}/mlp/gelu/Div")
        g = b.op("Erf", [g], f"{n}/mlp/gelu/Erf")
        g = b.op("Add", [g, one], f"{n}/mlp/gelu/Add")
        g = b.op("Mul", [m, g], f"{n}/mlp/gelu/Mul")
        g = b.op("Mul", [g, half], f"{n}/mlp/gelu/Mul_1")
        g = linear(g, p + "mlp.fc2", f"{n}/mlp/fc2")
        x = b.op("Add", [x, g], f"{n}/mlp/residual/Add")

    x = ln(x, "ln_f", "/ln_f/LayerNormalization")
    if cfg.tied_lm_head:
        head = b.op("Transpose", ["wte"], "/lm_head/Transpose", perm=[1, 0])
    else:
        head = "lm_head.weight"
    b.nodes.append(helper.make_node("MatMul", [x, head], [OUTPUT_NAME], name="/lm_head/MatMul"))

    batch = cfg.batch if cfg.batch is not None else "batch"
    graph = helper.make_graph(
        b.nodes, "gpt",
        [helper.make_tensor_value_info(INPUT_NAME, TensorProto.INT64, [batch, S])],
        [helper.make_tensor_value_info(OUTPUT_NAME, TensorProto.FLOAT, [batch, S, cfg.vocab])],
        initializer=inits)
    model = helper.make_model(graph, producer_name="autopar.gpt_onnx",
                              opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8
    meta = {k: str(v) for k, v in asdict(cfg).items()}
    meta["params"] = str(cfg.params())
    for k, v in sorted(meta.items()):
        e = model.metadata_props.add()
        e.key, e.value = f"gpt.{k}", v
    return model


def without_initializers(model):
    """A copy whose initializers are graph inputs of the same type and shape: what
    onnx.checker can check when the external-data file does not exist (ONNX 1.12's
    checker insists on opening it)."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    inits = list(m.graph.initializer)
    del m.graph.initializer[:]
    for t in inits:
        m.graph.input.append(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
    return m


def check(model, model_path=None):
    """onnx.checker with strict shape inference.  The real weights are checked only when
    the data file exists (model_path given and the file beside it); otherwise the graph
    is checked with its initializers turned into inputs."""
    if model_path is not None:
        base = os.path.dirname(os.path.abspath(model_path))
        files = {e.value for t in model.graph.initializer for e in t.external_data
                 if e.key == "location"}
        if all(os.path.exists(os.path.join(base, f)) for f in files):
            onnx.checker.check_model(model_path, full_check=True)
            return "checked with weights"
    onnx.checker.check_model(without_initializers(model), full_check=True)
    return "checked (weights absent: initializers checked as inputs)"


# ---------------------------------------------------------------------------------------
# Weights (small models only) and the NumPy reference

def random_weights(cfg, seed=0, std=0.02):
    """{name: float32 array}: N(0, std) matrices/embeddings/biases, LN scales ~N(1, 0.1)."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, shape in cfg.weight_shapes():
        if name.endswith(("ln_1.weight", "ln_2.weight")) or name == "ln_f.weight":
            a = 1.0 + 0.1 * rng.standard_normal(shape)
        else:
            a = std * rng.standard_normal(shape)
        out[name] = a.astype(np.float32)
    return out


def write_weights(path, cfg, weights, align=4096):
    """Writes `weights` at the offsets of layout() into `path`."""
    with open(path, "wb") as f:
        for name, shape, off, length in layout(cfg, align):
            a = np.ascontiguousarray(weights[name], dtype="<f4")
            assert a.shape == tuple(shape) and a.nbytes == length, name
            f.write(b"\0" * (off - f.tell()))
            f.write(a.tobytes())


def read_weights(model_path):
    """{name: array} read through the model's external-data entries (small models)."""
    model = onnx.load(model_path, load_external_data=False)
    base = os.path.dirname(os.path.abspath(model_path))
    out = {}
    for t in model.graph.initializer:
        info = {e.key: e.value for e in t.external_data}
        with open(os.path.join(base, info["location"]), "rb") as f:
            f.seek(int(info.get("offset", 0)))
            data = f.read(int(info["length"]))
        out[t.name] = np.frombuffer(data, "<f4").reshape(tuple(t.dims)).copy()
    return out


def _erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def reference_forward(cfg, w, idx):
    """The graph's math in float64 NumPy; returns float64 logits [B, S, V]."""
    w = {k: v.astype(np.float64) for k, v in w.items()}
    B, S = idx.shape
    H, nh, d = cfg.hidden, cfg.heads, cfg.head_dim

    def ln(x, p):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + cfg.eps) * w[p + ".weight"] + w[p + ".bias"]

    def lin(x, p):
        return x @ w[p + ".weight"] + w[p + ".bias"]

    mask = np.where(np.tril(np.ones((S, S))) != 0, 0.0, MASK_VALUE)
    x = w["wte"][idx] + w["wpe"][:S]
    for i in range(cfg.layers):
        p = f"h.{i}."
        a = ln(x, p + "ln_1")
        if cfg.fused_qkv:
            q, k, v = np.split(lin(a, p + "attn.qkv"), 3, axis=-1)
        else:
            q, k, v = (lin(a, p + f"attn.{c}") for c in "qkv")
        q, k, v = (t.reshape(B, S, nh, d).transpose(0, 2, 1, 3) for t in (q, k, v))
        s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d) + mask
        s = np.exp(s - s.max(-1, keepdims=True))
        s /= s.sum(-1, keepdims=True)
        o = (s @ v).transpose(0, 2, 1, 3).reshape(B, S, H)
        x = x + lin(o, p + "attn.proj")
        m = lin(ln(x, p + "ln_2"), p + "mlp.fc1")
        g = m * (_erf(m / math.sqrt(2.0)) + 1.0) * 0.5
        x = x + lin(g, p + "mlp.fc2")
    x = ln(x, "ln_f")
    head = w["wte"].T if cfg.tied_lm_head else w["lm_head.weight"]
    return x @ head


# ---------------------------------------------------------------------------------------

def write(cfg, path, data_file="weights.bin", weights=False, seed=0, align=4096,
          max_weight_bytes=1 << 30, std=0.02):
    """Writes the model (and, with weights=True, random weights).  Returns
    (ModelProto, total weight-file bytes)."""
    model = build_model(cfg, data_file, align)
    lay = layout(cfg, align)
    total = lay[-1][2] + lay[-1][3] if lay else 0
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    if weights:
        if total > max_weight_bytes:
            raise ValueError(f"--weights would write {total / 2**30:.1f} GiB "
                             f"(limit {max_weight_bytes / 2**30:.1f} GiB, --max-weight-bytes)")
        write_weights(os.path.join(d, data_file), cfg, random_weights(cfg, seed, std), align)
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
    return model, total


def config_from_args(args):
    base = PRESETS[args.preset][0] if args.preset else None
    fields = {}
    for k in ("layers", "hidden", "heads", "vocab", "seq", "ffn_mult", "max_pos", "batch"):
        v = getattr(args, k)
        if v is not None:
            fields[k] = v
    if args.separate_qkv:
        fields["fused_qkv"] = False
    if args.untied_lm_head:
        fields["tied_lm_head"] = False
    if base is not None:
        return replace(base, **fields)
    missing = [f"--{k}" for k in ("layers", "hidden", "heads", "vocab", "seq")
               if k not in fields]
    if missing:
        raise ValueError(f"give --preset or {', '.join(missing)}")
    return GptConfig(**fields)


def list_presets():
    lines = [f"{'preset':15} {'layers':>6} {'hidden':>6} {'heads':>5} {'vocab':>6} "
             f"{'seq':>5} {'params':>17} {'published':>9}  source"]
    for name, (c, src) in PRESETS.items():
        lines.append(f"{name:15} {c.layers:6} {c.hidden:6} {c.heads:5} {c.vocab:6} "
                     f"{c.seq:5} {c.params():17,} {PUBLISHED_PARAMS_B[name]:8g}B  "
                     f"{src.split(',')[0]}")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(
        description="Write a GPT-style decoder ONNX model whose weights are external "
                    "(and not written unless --weights).")
    ap.add_argument("--preset", choices=sorted(PRESETS), help="a published configuration")
    ap.add_argument("--list-presets", action="store_true", help="print the presets and exit")
    ap.add_argument("--layers", type=int)
    ap.add_argument("--hidden", type=int)
    ap.add_argument("--heads", type=int)
    ap.add_argument("--vocab", type=int)
    ap.add_argument("--seq", type=int, help="sequence length (static)")
    ap.add_argument("--batch", type=int, help="static batch (default: symbolic 'batch')")
    ap.add_argument("--ffn-mult", type=int, help="MLP width / hidden (default 4)")
    ap.add_argument("--max-pos", type=int, help="position-table rows (default: --seq)")
    ap.add_argument("--separate-qkv", action="store_true",
                    help="three q/k/v MatMuls instead of one fused MatMul + Split")
    ap.add_argument("--untied-lm-head", action="store_true",
                    help="a separate lm_head.weight instead of Transpose(wte)")
    ap.add_argument("-o", "--output", help="the .onnx file to write")
    ap.add_argument("--data-file", default="weights.bin",
                    help="external-data file name, relative to the model (default weights.bin)")
    ap.add_argument("--weights", action="store_true",
                    help="also write the data file with random weights (small models only)")
    ap.add_argument("--seed", type=int, default=0, help="seed of --weights")
    ap.add_argument("--init-std", type=float, default=0.02,
                    help="standard deviation of --weights (default 0.02)")
    ap.add_argument("--align", type=int, default=4096, help="offset alignment in bytes")
    ap.add_argument("--max-weight-bytes", type=int, default=1 << 30,
                    help="refuse --weights above this many bytes (default 1 GiB)")
    ap.add_argument("--no-check", action="store_true", help="skip onnx.checker")
    args = ap.parse_args(argv)
    if args.list_presets:
        print(list_presets())
        return 0
    if not args.output:
        ap.error("-o FILE.onnx is required")
    if os.sep in args.data_file or args.data_file.startswith(".."):
        ap.error("--data-file must be a plain file name (it lives beside the model)")
    try:
        cfg = config_from_args(args)
        cfg.check()
        model, total = write(cfg, args.output, args.data_file, args.weights, args.seed,
                             args.align, args.max_weight_bytes, args.init_std)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    checked = "not checked"
    if not args.no_check:
        checked = check(model, args.output)
    n = cfg.params()
    data = os.path.join(os.path.dirname(os.path.abspath(args.output)), args.data_file)
    print(f"wrote {args.output} ({os.path.getsize(args.output):,} bytes): {cfg.layers} layers, "
          f"hidden {cfg.hidden}, {cfg.heads} heads, vocab {cfg.vocab}, seq {cfg.seq}, "
          f"batch {cfg.batch if cfg.batch is not None else 'symbolic'}; {checked}")
    print(f"params {n:,} ({human(n)}); {args.data_file}: {total:,} bytes "
          f"({total / 2**30:.2f} GiB) " +
          (f"written to {data}" if args.weights else "laid out, not written"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
