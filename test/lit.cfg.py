# -*- Python -*- lit configuration for autopar's FileCheck tests.

import os

import lit.formats
from lit.llvm import llvm_config

config.name = "AUTOPAR"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
# .onnxtxt files are ONNX models in the textual syntax that autopar-opt
# imports directly; their RUN lines live in '#' comments.
config.suffixes = [".mlir", ".onnxtxt"]
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
