"""PyTorch definitions of autopar's test models and their ONNX export.

Imported only when a model is exported (it needs torch and torchvision).  Every model is
built from a fixed seed; nothing is downloaded.  This module imports nothing from autopar:
``autopar.models`` (the table) calls it and passes the table's entries and inputs in.  Export settings: opset 17, constant
folding on, dynamic axes as recorded in ``autopar.models``.

Exporter notes (torch 1.13):
- torch.nn.TransformerEncoderLayer in eval mode takes its "fast path"
  (aten::_transformer_encoder_layer_fwd, not exportable) when autograd is off or no
  parameter requires grad.  We export with grad enabled and parameters requiring grad, and
  enable_nested_tensor=False; export_model() rejects any non-ONNX op in the result.
- In eval mode the exporter folds BatchNormalization into the preceding Conv, so the CNN
  exports contain no BatchNormalization nodes (the randomized statistics live in the
  folded Conv weights and biases).
"""

import math
import os
import tempfile

import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F

OPSET = 17
SEED = 1234
# Parameters above this size are exported with external data (ONNX's protobuf limit is 2 GiB).
LARGE_MODEL_BYTES = 1800 * 2**20


# --------------------------------------------------------------------------- gpt
class CausalSelfAttention(nn.Module):
    def __init__(self, hidden, heads, context):
        super().__init__()
        self.heads = heads
        self.c_attn = nn.Linear(hidden, 3 * hidden)
        self.c_proj = nn.Linear(hidden, hidden)
        self.scale = 1.0 / math.sqrt(hidden // heads)
        self.register_buffer("mask", torch.tril(torch.ones(context, context)).view(1, 1, context, context))

    def forward(self, x):
        b, t, c = x.size()
        q, k, v = self.c_attn(x).split(c, dim=2)
        q = q.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        k = k.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        v = v.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * self.scale
        att = att.masked_fill(self.mask[:, :, :t, :t] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
        return self.c_proj(y)


class GptBlock(nn.Module):
    def __init__(self, hidden, heads, context):
        super().__init__()
        self.ln_1 = nn.LayerNorm(hidden)
        self.attn = CausalSelfAttention(hidden, heads, context)
        self.ln_2 = nn.LayerNorm(hidden)
        self.mlp = nn.Sequential(nn.Linear(hidden, 4 * hidden), nn.GELU(), nn.Linear(4 * hidden, hidden))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class Gpt(nn.Module):
    def __init__(self, vocab=512, hidden=128, heads=4, layers=4, context=32):
        super().__init__()
        self.wte = nn.Embedding(vocab, hidden)
        self.wpe = nn.Embedding(context, hidden)
        self.blocks = nn.ModuleList(GptBlock(hidden, heads, context) for _ in range(layers))
        self.ln_f = nn.LayerNorm(hidden)
        self.lm_head = nn.Linear(hidden, vocab, bias=False)

    def forward(self, idx):
        t = idx.size(1)
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.ln_f(x))


# --------------------------------------------------------------------------- bert
class Bert(nn.Module):
    def __init__(self, vocab=500, hidden=128, heads=4, ffn=512, layers=2, context=64):
        super().__init__()
        self.word = nn.Embedding(vocab, hidden)
        self.position = nn.Embedding(context, hidden)
        self.ln = nn.LayerNorm(hidden, eps=1e-12)
        layer = nn.TransformerEncoderLayer(hidden, heads, ffn, dropout=0.1, activation="gelu",
                                           batch_first=True, layer_norm_eps=1e-12)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.pooler = nn.Linear(hidden, hidden)

    def forward(self, input_ids):
        t = input_ids.size(1)
        pos = torch.arange(0, t, dtype=torch.long, device=input_ids.device)
        x = self.ln(self.word(input_ids) + self.position(pos))
        h = self.encoder(x)
        pooled = torch.tanh(self.pooler(h[:, 0]))
        return h, pooled


# --------------------------------------------------------------------------- mlp
def mlp():
    return nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))


# -------------------------------------------------------------- initialization
def randomize_transformer(module, generator):
    """Distinct, non-trivial values for every parameter.  Needed beyond default init:
    nn.TransformerEncoder deep-copies one layer (all layers would be equal), LayerNorm
    weights are all ones and biases all zeros, and the exporter deduplicates equal
    initializers into Identity nodes."""
    layer_norms = {id(m.weight) for m in module.modules() if isinstance(m, nn.LayerNorm)}
    with torch.no_grad():
        for _, p in module.named_parameters():
            if id(p) in layer_norms:
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=generator))
            elif p.dim() >= 2:
                p.copy_(0.02 * torch.randn(p.shape, generator=generator))
            else:
                p.copy_(0.02 * torch.randn(p.shape, generator=generator))


def randomize_batchnorm(module, generator):
    """Gives every BatchNorm non-trivial statistics and affine parameters."""
    for m in module.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            n = m.num_features
            with torch.no_grad():
                m.running_mean.copy_(torch.randn(n, generator=generator) * 0.1)
                m.running_var.copy_(torch.rand(n, generator=generator) * 1.0 + 0.5)
                m.weight.copy_(torch.rand(n, generator=generator) * 0.5 + 0.75)
                m.bias.copy_(torch.randn(n, generator=generator) * 0.1)


def randomize_torchvision(net, generator):
    """Non-trivial values where torchvision's initialization leaves trivial ones:
    BatchNorm statistics, Conv/Linear biases (zero; the exporter would merge the equal
    ones into Identity nodes), all-zero Conv/Linear weights (the classifier head of
    vit_*: logits would equal the bias whatever the input), and ConvNeXt's layer scale
    (1e-6: the residual branches would vanish from the outputs)."""
    randomize_batchnorm(net, generator)
    with torch.no_grad():
        for m in net.modules():
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                if not m.weight.any():
                    m.weight.copy_(0.02 * torch.randn(m.weight.shape, generator=generator))
                if m.bias is not None:
                    m.bias.copy_(0.01 * torch.randn(m.bias.shape, generator=generator))
        for name, p in net.named_parameters():
            if name.endswith("layer_scale"):
                p.copy_(0.1 + 0.1 * torch.rand(p.shape, generator=generator))


def torchvision_model(name):
    """A torchvision classifier (torchvision.models.NAME, weights=None), seeded."""
    import torchvision

    net = getattr(torchvision.models, name)(weights=None)
    randomize_torchvision(net, torch.Generator().manual_seed(SEED + 1))
    return net


class SegmentationOutput(nn.Module):
    """A torchvision segmentation model's 'out' map (its forward returns a dict)."""

    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, x):
        return self.net(x)["out"]


def segmentation_model(name):
    import torchvision

    net = getattr(torchvision.models.segmentation, name)(
        weights=None, weights_backbone=None, num_classes=5)
    randomize_batchnorm(net, torch.Generator().manual_seed(SEED + 1))
    return SegmentationOutput(net)


class FeatureMaps(nn.Module):
    """A detection backbone with its FPN (a torchvision BackboneWithFPN) returning the
    feature maps as a tuple, finest first (its forward returns an OrderedDict)."""

    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, x):
        return tuple(self.net(x).values())


DETECTION_BACKBONE_SUFFIX = "_backbone"


def detection_backbone(name):
    """'<detector>_backbone': the backbone and FPN of torchvision.models.detection.<detector>
    (weights=None, weights_backbone=None: every layer trainable, plain BatchNorm, which is
    randomized), as FeatureMaps."""
    import torchvision

    detector = getattr(torchvision.models.detection, name[:-len(DETECTION_BACKBONE_SUFFIX)])(
        weights=None, weights_backbone=None)
    net = detector.backbone
    randomize_torchvision(net, torch.Generator().manual_seed(SEED + 1))
    return FeatureMaps(net)


def torchvision_kind(name):
    """'classifier', 'segmentation', 'detection-backbone' or None: which torchvision
    family builds `name`."""
    import torchvision

    if name.endswith(DETECTION_BACKBONE_SUFFIX) and \
            name[:-len(DETECTION_BACKBONE_SUFFIX)] in torchvision.models.list_models(
                module=torchvision.models.detection):
        return "detection-backbone"
    if name in torchvision.models.list_models(module=torchvision.models.segmentation):
        return "segmentation"
    if name in torchvision.models.list_models(module=torchvision.models):
        return "classifier"
    return None


def build(name):
    """The seeded torch module for a model name, in eval mode."""
    torch.manual_seed(SEED)
    if name == "gpt":
        net = Gpt()
        randomize_transformer(net, torch.Generator().manual_seed(SEED + 1))
    elif name == "bert":
        net = Bert()
        randomize_transformer(net, torch.Generator().manual_seed(SEED + 1))
    elif name == "mlp":
        net = mlp()
    else:
        kind = torchvision_kind(name)
        if kind == "classifier":
            net = torchvision_model(name)
        elif kind == "segmentation":
            net = segmentation_model(name)
        elif kind == "detection-backbone":
            net = detection_backbone(name)
        else:
            raise KeyError(f"no torch definition for model '{name}'")
    return net.eval()


def example_inputs(model, arrays):
    """Torch tensors of NumPy arrays {input name: array} in the model's input order."""
    return tuple(torch.from_numpy(arrays[i.name]) for i in model.inputs)


def _register_symbolics():
    """torch 1.13's exporter has no symbolic for aten::zero (swin_v2_*'s
    `qkv_bias[length:2 * length].zero_()`): zeros of the input's shape and type."""
    def zero(g, self):
        return g.op("ConstantOfShape", g.op("Shape", self),
                    value_t=torch.zeros(1, dtype=torch.float32))

    torch.onnx.register_custom_op_symbolic("aten::zero", zero, OPSET)


def export_model(model, path, arrays):
    """Exports a torch model from the table (an autopar.models.Model) to path, traced with
    the example inputs `arrays` ({input name: array}, autopar.models.make_inputs)."""
    torch.set_num_threads(1)
    _register_symbolics()
    net = build(model.name)
    args = example_inputs(model, arrays)
    dynamic_axes = {k: dict(v) for k, v in model.dynamic_dims.items()}
    # Outputs share the leading dynamic axes of the first input (batch, and seq if any),
    # except where an output drops the sequence (bert's pooler).
    first = model.inputs[0].name
    lead = {a: s for a, s in model.dynamic_dims.get(first, {}).items() if a in (0, 1) and s in ("batch", "seq")}
    # An output that dynamic_dims names itself keeps its entry (segmentation maps and
    # feature maps: batch, height and width).
    for out in model.outputs:
        if out not in model.dynamic_dims:
            dynamic_axes[out] = {a: s for a, s in lead.items() if not (out == "pooler_output" and a == 1)}
    # Keep autograd on: see the module docstring (TransformerEncoderLayer fast path).
    kwargs = dict(opset_version=OPSET, do_constant_folding=True, input_names=[i.name for i in model.inputs],
                  output_names=list(model.outputs), dynamic_axes=dynamic_axes)
    if sum(p.numel() * p.element_size() for p in net.parameters()) < LARGE_MODEL_BYTES:
        torch.onnx.export(net, args, path, **kwargs)
    else:
        # Over 2 GiB the exporter writes one external data file per initializer next to
        # the model; export into a scratch directory and save the weights as one file,
        # PATH.data, instead.
        with tempfile.TemporaryDirectory(dir=os.path.dirname(os.path.abspath(path))) as tmp:
            scratch = os.path.join(tmp, os.path.basename(path))
            torch.onnx.export(net, args, scratch, **kwargs)
            del net
            if os.path.exists(path + ".data"):
                os.remove(path + ".data")  # onnx appends to an existing data file
            onnx.save_model(onnx.load(scratch), path, save_as_external_data=True, all_tensors_to_one_file=True,
                            location=os.path.basename(path) + ".data", size_threshold=1024)
    # By path: models over 2 GiB (vit_h_14, regnet_y_128gf) keep their weights in
    # external data files, and a ModelProto that large cannot be checked in memory.
    onnx.checker.check_model(path)
    m = onnx.load(path, load_external_data=False)
    foreign = sorted({f"{n.domain}::{n.op_type}" for n in m.graph.node if n.domain not in ("", "ai.onnx")})
    if foreign:
        raise RuntimeError(f"{path}: export produced non-ONNX ops {foreign}")
    return path


def torch_outputs(model, arrays):
    """Runs the torch module of `model` (an autopar.models.Model, e.g.
    autopar.models.get("gpt")) on NumPy inputs {input name: array}; returns a list of
    NumPy outputs (for checks)."""
    net = build(model.name)
    with torch.no_grad():
        out = net(*example_inputs(model, arrays))
    if isinstance(out, torch.Tensor):
        out = (out,)
    return [o.numpy() for o in out]
