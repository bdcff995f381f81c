"""autopar's Python side: drive the tools, export test models, compare outputs.

Pure Python; importing this package (or any module but ``autopar.export``) needs only
numpy and onnx.  ``autopar.export`` needs PyTorch and torchvision.

Modules:
  autopar.models     the table of test models (inputs, shapes, flags) and the export CLI
  autopar.export     PyTorch model definitions and ONNX export (imports torch)
  autopar.compare    compare two directories of .npy outputs (CLI and function)
  autopar.onnx_data  ONNX TensorProto .pb files <-> NumPy arrays / .npy files
  autopar.tools      locate and run autopar-compile, autopar-run and the ORT reference
"""

__all__ = ["compare", "models", "onnx_data", "tools"]
