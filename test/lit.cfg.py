# -*- Python -*- lit configuration for autopar's FileCheck tests.

import os
import shutil
import subprocess

import lit.formats
from lit.llvm import llvm_config

config.name = "AUTOPAR"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
# .onnxtxt files are ONNX models in the textual syntax that autopar-opt
# imports directly; their RUN lines live in '#' comments.
config.suffixes = [".mlir", ".onnxtxt", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.autopar_obj_root, "test")
# Integration/ and Conformance/ are driven by their own runners (ctest).
config.excludes = ["Integration", "Conformance", "Inputs", "lit.cfg.py", "external-data.onnxtxt.py",
                   "lit.site.cfg.py", "CMakeLists.txt"]

config.substitutions.append(("%PATH%", config.environment["PATH"]))
# Debian's python3 has numpy and onnx (the pyenv python3 on PATH may not).
config.substitutions.append(("%python", "/usr/bin/python3"))
llvm_config.with_system_environment(["HOME", "TMPDIR"])
llvm_config.use_default_substitutions()

tool_dirs = [config.autopar_tools_dir, config.llvm_tools_dir]
llvm_config.add_tool_substitutions(
    ["autopar-opt", "autopar-compile", "autopar-run"], tool_dirs)
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.autopar_tools_dir, append_path=True)

# GPU features. `cuda-toolkit`: ptxas is there, so GPU code generation (and
# the tests that compile for a GPU cluster and inspect the cubins) can run.
# `cuda-gpu`: an NVIDIA device is usable, so tests may run kernels.
def find_cuda_toolkit():
    for root in (config.autopar_cuda_path, os.environ.get("CUDA_HOME", ""),
                 os.environ.get("CUDA_PATH", ""), "/usr/local/cuda"):
        if root and os.access(os.path.join(root, "bin", "ptxas"), os.X_OK):
            return root
    ptxas = shutil.which("ptxas")
    return os.path.dirname(os.path.dirname(ptxas)) if ptxas else None


def nvidia_gpu_usable():
    smi = shutil.which("nvidia-smi")
    if not smi:
        return False
    try:
        r = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return False
    return r.returncode == 0 and "GPU" in r.stdout


cuda_toolkit = find_cuda_toolkit()
if cuda_toolkit:
    config.available_features.add("cuda-toolkit")
    config.substitutions.append(("%cuda_path", cuda_toolkit))
    llvm_config.with_environment("CUDA_HOME", cuda_toolkit)
if nvidia_gpu_usable():
    config.available_features.add("cuda-gpu")
