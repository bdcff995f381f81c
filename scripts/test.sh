#!/usr/bin/env bash
# Installs what is missing, builds autopar (once; later runs are incremental)
# and runs every test suite:
# lit/FileCheck, GoogleTest, the ONNX conformance suite and the real-model
# integration tests. Usage: scripts/test.sh [BUILD_DIR] (default: build)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$root/build}"

# Safe to repeat: only missing packages are installed.
"$root/scripts/setup.sh"

if [ ! -f "$build/build.ninja" ]; then
  # ccache, when installed, makes rebuilds of a fresh checkout cheap (with
  # CCACHE_BASEDIR below, also in another directory).
  launcher=()
  if command -v ccache >/dev/null; then
    launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
  fi
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit "${launcher[@]}"
fi
# Paths under the checkout hash relative to it, so that a second checkout (a CI
# clone) reuses what ccache compiled for the first.
export CCACHE_BASEDIR="$root"
ninja -C "$build"
# Each suite parallelizes itself; ctest runs them one after another.
ctest --test-dir "$build" --output-on-failure
