"""Writes a 3-layer MLP (Gemm, Relu, Gemm, Relu, Gemm) with random weights.

Without residual connections every op's result is the only live activation,
so the planner cuts a segment after each op: the model tests that shardings
carry across those cuts. Usage: mlp_chain.py OUT.onnx
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(0)
sizes = [256, 512, 512, 16]
nodes, inits = [], []
x = "x"
for i in range(3):
    w = numpy_helper.from_array(rng.standard_normal((sizes[i + 1], sizes[i])).astype(np.float32), f"w{i}")
    b = numpy_helper.from_array(rng.standard_normal(sizes[i + 1]).astype(np.float32), f"b{i}")
    inits += [w, b]
    y = f"gemm{i}" if i < 2 else "y"
    nodes.append(helper.make_node("Gemm", [x, f"w{i}", f"b{i}"], [y], name=f"fc{i}", transB=1))
    if i < 2:
        nodes.append(helper.make_node("Relu", [y], [f"relu{i}"], name=f"relu{i}"))
        x = f"relu{i}"
graph = helper.make_graph(nodes, "mlp_chain",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", sizes[0]])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", sizes[-1]])], inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
onnx.save(model, sys.argv[1])
