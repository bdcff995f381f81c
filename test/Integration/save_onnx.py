#!/usr/bin/env python3
"""`autopar-run --train --save-onnx FILE`: the trained model as an inference ONNX model.

For an MLP, a CNN with BatchNorm (its running statistics train) and a GPT with
dropout, each trained a few steps by autopar with --save-onnx and --outputs:

1. the saved file passes onnx.checker, keeps the export's node names (less the
   Constant nodes that only fed Dropout's training_mode) and graph inputs and
   outputs, has no training-mode Dropout or BatchNorm left, and holds
   every initializer of the export;
2. on one batch, its loss from onnxruntime (tools/reference/ort-run.js), from
   autopar (compiled for inference) and from PyTorch's model.eval() loaded with
   autopar's trained parameters and buffers (--outputs) agree within 1e-5;
3. the saved weights are the trained ones: they differ from the export's.

Usage: save_onnx.py BUILD_DIR WORK_DIR
"""
import os
import subprocess
import sys

import numpy as np
import onnx
import torch
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
from gradcheck import Cnn, Gpt, Mlp  # noqa: E402
from train_vs_torch import autopar_train, load_trained, make_data  # noqa: E402
from autopar import tools  # noqa: E402

CONFIG = {"optimizer": {"type": "AdamW", "params": {"lr": 0.01}}}
STEPS = 4


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("FAILED: " + " ".join(cmd) + "\n" + r.stdout + r.stderr)


def check(build, work, name, model, batch):
    errors = []
    data = make_data(type(model), batch)
    config = dict(CONFIG, train_batch_size=batch)
    saved = os.path.join(work, name + "-trained.onnx")
    if os.path.exists(saved):
        os.remove(saved)
    _, out = autopar_train(build, work, name, model, data, config,
                           run_args=["--save-onnx", saved])
    exported = onnx.load(os.path.join(work, name + ".onnx"))
    trained = onnx.load(saved)
    try:
        onnx.checker.check_model(trained)
    except onnx.checker.ValidationError as e:
        errors.append(f"onnx.checker: {e}")
    # Every node keeps its name; only Constant nodes that fed Dropout's
    # training_mode (now dead) are gone.
    dropped = {n.input[2] for n in exported.graph.node
               if n.op_type == "Dropout" and len(n.input) > 2}
    kept = [n.name for n in exported.graph.node
            if not (n.op_type == "Constant" and n.output[0] in dropped)]
    if [n.name for n in trained.graph.node] != kept:
        errors.append("node names differ from the export's")
    for what in ("input", "output"):
        if [v.name for v in getattr(trained.graph, what)] != \
                [v.name for v in getattr(exported.graph, what)]:
            errors.append(f"graph {what}s differ from the export's")
    for node in trained.graph.node:
        if node.op_type == "Dropout" and len(node.input) > 2:
            errors.append(f"{node.name}: Dropout still has training_mode")
        if node.op_type == "BatchNormalization" and (
                len(node.output) != 1 or any(a.name == "training_mode" and a.i
                                             for a in node.attribute)):
            errors.append(f"{node.name}: BatchNormalization still trains")
    before = {t.name: numpy_helper.to_array(t) for t in exported.graph.initializer}
    after = {t.name: numpy_helper.to_array(t) for t in trained.graph.initializer}
    if set(before) != set(after):
        errors.append(f"initializers {sorted(set(before) ^ set(after))} "
                      "missing or extra")
    changed = [k for k in before if k in after and not np.array_equal(before[k], after[k])]
    if not changed:
        errors.append("no initializer changed: the saved weights are not the trained ones")

    # One batch through the three runtimes.
    inputs = os.path.join(work, name + "-batch")
    os.makedirs(inputs, exist_ok=True)
    example = {k: v[:batch] for k, v in data.items()}
    for k, v in example.items():
        np.save(os.path.join(inputs, k + ".npy"), v.numpy())
    ort_out = os.path.join(work, name + "-ort")
    run(["node", tools.ORT_RUN, saved, "--inputs", inputs, "--outputs", ort_out])
    art = os.path.join(work, name + "-inference")
    shapes = []
    for k, v in example.items():
        shapes += ["--input-shape", k + "=" + "x".join(map(str, v.shape))]
    run([os.path.join(build, "bin", "autopar-compile"), saved, "--cluster", "local:1",
         *shapes, "-o", art])
    ours_out = os.path.join(work, name + "-autopar")
    run([os.path.join(build, "bin", "autopar-run"), art, "--inputs", inputs,
         "--outputs", ours_out])
    load_trained(model, out)
    model.eval()
    with torch.no_grad():
        want = float(model(*example.values()))
    ort = float(np.load(os.path.join(ort_out, "loss.npy")))
    ours = float(np.load(os.path.join(ours_out, "loss.npy")))
    for who, got in (("onnxruntime", ort), ("autopar", ours)):
        if abs(got - want) > 1e-5 * max(1.0, abs(want)):
            errors.append(f"{who} loss {got} != PyTorch eval {want}")
    print(f"{name}: {len(changed)} of {len(before)} initializers trained; eval loss "
          f"PyTorch {want:.6f}, onnxruntime {ort:.6f}, autopar {ours:.6f}"
          + ("" if not errors else " FAIL: " + "; ".join(errors)))
    return errors


def main():
    build, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    torch.set_num_threads(1)
    problem = tools.check_reference_installed()
    if problem:
        sys.exit(f"save_onnx: {problem}")
    failures = []
    for name, make, batch in (("mlp", Mlp, 6), ("cnn", Cnn, 3),
                              ("gpt-dropout", lambda: Gpt(dropout=0.2), 3)):
        torch.manual_seed(0)
        if check(build, work, name, make(), batch):
            failures.append(name)
    print(f"{3 - len(failures)} passed, {len(failures)} failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
