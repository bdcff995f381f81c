"""ONNX TensorProto ``.pb`` files <-> NumPy arrays and ``.npy`` files.

The ONNX backend test suite stores each test case as

    <test>/model.onnx
    <test>/test_data_set_0/input_0.pb, input_1.pb, ...   (TensorProto, in graph-input order)
    <test>/test_data_set_0/output_0.pb, ...               (TensorProto, in graph-output order)

autopar's tools read and write one ``<tensor name>.npy`` per graph input/output, so the
helpers here convert between the two.  bfloat16 tensors become ``uint16`` arrays holding
the raw bits, as docs/design/artifact.md specifies.
"""

import os

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper

# ONNX element type -> NumPy dtype, for the types autopar's tools accept.
ONNX_TO_NUMPY = {
    TensorProto.FLOAT: np.dtype(np.float32),
    TensorProto.DOUBLE: np.dtype(np.float64),
    TensorProto.FLOAT16: np.dtype(np.float16),
    TensorProto.BFLOAT16: np.dtype(np.uint16),  # raw bits
    TensorProto.INT8: np.dtype(np.int8),
    TensorProto.INT16: np.dtype(np.int16),
    TensorProto.INT32: np.dtype(np.int32),
    TensorProto.INT64: np.dtype(np.int64),
    TensorProto.UINT8: np.dtype(np.uint8),
    TensorProto.UINT16: np.dtype(np.uint16),
    TensorProto.UINT32: np.dtype(np.uint32),
    TensorProto.UINT64: np.dtype(np.uint64),
    TensorProto.BOOL: np.dtype(np.bool_),
}


class UnsupportedTensor(Exception):
    """A tensor that cannot be stored as .npy for autopar (strings, complex, ...)."""


def tensor_to_array(tensor):
    """Returns the NumPy array held by a TensorProto (bfloat16 as uint16 bits)."""
    dtype = tensor.data_type
    if dtype == TensorProto.STRING:
        raise UnsupportedTensor(f"tensor '{tensor.name}' holds strings")
    if dtype not in ONNX_TO_NUMPY:
        name = TensorProto.DataType.Name(dtype)
        raise UnsupportedTensor(f"tensor '{tensor.name}' has unsupported element type {name}")
    if dtype == TensorProto.BFLOAT16:
        shape = tuple(tensor.dims)
        if tensor.raw_data:
            return np.frombuffer(tensor.raw_data, dtype="<u2").reshape(shape).copy()
        return np.asarray(tensor.int32_data, dtype=np.uint32).astype(np.uint16).reshape(shape)
    # (not np.ascontiguousarray: it turns 0-d arrays into shape (1,))
    return np.array(numpy_helper.to_array(tensor), order="C", copy=True)


def load_tensor_pb(path):
    """Reads a serialized TensorProto; returns (name, array).  Raises UnsupportedTensor
    for string tensors and for files that hold a sequence/optional/map instead."""
    with open(path, "rb") as f:
        data = f.read()
    tensor = TensorProto()
    tensor.ParseFromString(data)
    if tensor.data_type == TensorProto.UNDEFINED:
        raise UnsupportedTensor(f"{path} does not hold a tensor (sequence, optional or map?)")
    return tensor.name, tensor_to_array(tensor)


def value_info_kind(value_info):
    """'tensor', 'sequence', 'optional', 'map', 'sparse_tensor' or 'unknown'."""
    kind = value_info.type.WhichOneof("value")
    return {"tensor_type": "tensor", "sequence_type": "sequence", "optional_type": "optional",
            "map_type": "map", "sparse_tensor_type": "sparse_tensor"}.get(kind, "unknown")


def graph_inputs(model):
    """The graph inputs that are not initializers (the ones a caller must feed)."""
    inits = {t.name for t in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in inits]


def safe_file_name(name):
    """True if ``name`` can be used as ``<name>.npy`` in one directory."""
    return bool(name) and name not in (".", "..") and "/" not in name and "\0" not in name


def convert_test_data_set(model, data_set_dir, inputs_dir, expected_dir):
    """Converts input_N.pb / output_N.pb of one ONNX test data set into
    ``inputs_dir/<input name>.npy`` and ``expected_dir/<output name>.npy``.
    Files map to graph inputs/outputs by position.  Returns (input names, output names)."""
    if isinstance(model, str):
        model = onnx.load(model, load_external_data=False)
    os.makedirs(inputs_dir, exist_ok=True)
    os.makedirs(expected_dir, exist_ok=True)
    ins = [i.name for i in graph_inputs(model)]
    outs = [o.name for o in model.graph.output]
    for names, prefix, dest in ((ins, "input", inputs_dir), (outs, "output", expected_dir)):
        for idx, name in enumerate(names):
            pb = os.path.join(data_set_dir, f"{prefix}_{idx}.pb")
            if not os.path.exists(pb):
                # Optional trailing inputs may be omitted by the test.
                if prefix == "input":
                    continue
                raise FileNotFoundError(f"{pb} is missing (expected {prefix} '{name}')")
            if not safe_file_name(name):
                raise UnsupportedTensor(f"{prefix} name '{name}' cannot be a file name")
            _, array = load_tensor_pb(pb)
            np.save(os.path.join(dest, f"{name}.npy"), array)
    return ins, outs


def pb_to_npy(pb_path, npy_path):
    """Converts one TensorProto file to .npy; returns the array."""
    _, array = load_tensor_pb(pb_path)
    np.save(npy_path, array)
    return array


def main(argv=None):
    import argparse

    p = argparse.ArgumentParser(description="Convert ONNX TensorProto .pb files to .npy.")
    p.add_argument("pb", nargs="+", help="TensorProto files")
    p.add_argument("-o", "--out", required=True, help="output directory")
    p.add_argument("--by-tensor-name", action="store_true",
                   help="name each file <tensor name>.npy instead of <pb stem>.npy")
    args = p.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    for pb in args.pb:
        name, array = load_tensor_pb(pb)
        stem = name if (args.by_tensor_name and safe_file_name(name)) else \
            os.path.splitext(os.path.basename(pb))[0]
        np.save(os.path.join(args.out, stem + ".npy"), array)
        print(f"{pb} -> {stem}.npy {array.dtype} {list(array.shape)}")


if __name__ == "__main__":
    main()
