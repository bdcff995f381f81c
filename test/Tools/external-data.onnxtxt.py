# Writes ext.onnx (MatMul + Add with weights in weights.bin), an input and the
# numpy result into the directory given.
import os
import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper

out = sys.argv[1]
rng = np.random.default_rng(0)
w = rng.standard_normal((16, 8)).astype(np.float32)
b = rng.standard_normal((8,)).astype(np.float32)
x = rng.standard_normal((4, 16)).astype(np.float32)
graph = helper.make_graph(
    [helper.make_node("MatMul", ["X", "W"], ["H"], name="fc"),
     helper.make_node("Add", ["H", "B"], ["Y"], name="bias")],
    "ext",
    [helper.make_tensor_value_info("X", onnx.TensorProto.FLOAT, ["batch", 16])],
    [helper.make_tensor_value_info("Y", onnx.TensorProto.FLOAT, ["batch", 8])],
    [numpy_helper.from_array(w, "W"), numpy_helper.from_array(b, "B")])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
onnx.save_model(model, os.path.join(out, "ext.onnx"), save_as_external_data=True,
                all_tensors_to_one_file=True, location="weights.bin",
                size_threshold=0)
np.save(os.path.join(out, "in", "X.npy"), x)
np.save(os.path.join(out, "expected.npy"), x @ w + b)
