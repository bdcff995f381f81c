"""autopar's Python side: drive the tools, export test models, compare outputs.

Pure Python; importing this package (or any module but ``autopar.export``) needs only
numpy and onnx.  ``autopar.export`` needs PyTorch and torchvision.

Modules:
  autopar.models     the table of test models (inputs, shapes, flags) and the export CLI
  autopar.export     PyTorch model definitions and ONNX export (imports torch)
  autopar.compare    compare two directories of .npy outputs (CLI and function)
  autopar.onnx_data  ONNX TensorProto .pb files <-> NumPy arrays / .npy files
  autopar.tools      locate and run autopar-compile, autopar-run and the ORT reference
  autopar.plan       load and validate the plan report (--report-json)
  autopar.schedule   one pipelined step simulated from the report's stage_orders (the
                     order is runtime/lib/PipelineSchedule.cpp's, not restated here)
  autopar.data       the order autopar-run --train visits the data (--shuffle), after
                     runtime/lib/DataLoader.cpp
  autopar.dropout    the dropout masks of a compiled training step, after
                     lib/Import/Dropout.cpp
  autopar.draw       the plan report as an HTML page with SVG pictures (package, CLI)
  autopar.gpt_onnx   GPT decoder ONNX graphs of any size, weights external (CLI)
  autopar.train_models  small PyTorch models with their loss inside (GPT, CNN) and
                     their training-mode export (imports torch)
"""

__all__ = ["compare", "data", "draw", "dropout", "gpt_onnx", "models", "onnx_data", "plan", "schedule", "tools", "train_models"]
