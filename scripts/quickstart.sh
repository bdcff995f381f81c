#!/usr/bin/env bash
# The main job on the bundled default: a GPT-style decoder (defined in
# python/autopar/models.py, exported with PyTorch) is planned and compiled for
# a local CPU cluster of 2 ranks (default), run on them under mpirun, and its
# outputs are checked against onnxruntime's. Then a tiny GPT is trained for
# 50 steps on text bundled with autopar and the trained model is run by
# onnxruntime (examples/tiny-gpt/train.sh).
# Usage: scripts/quickstart.sh [--cluster local:N] [--steps N]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cluster="local:2"
steps=5
while [ $# -gt 0 ]; do
  case "$1" in
    --cluster) cluster="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    *) echo "usage: $0 [--cluster local:N] [--steps N]" >&2; exit 2 ;;
  esac
done
ranks="${cluster#local:}"

"$root/scripts/setup.sh"
build="$root/build"
if [ ! -f "$build/build.ninja" ]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit
fi
ninja -C "$build" autopar-compile autopar-run

work="$build/quickstart"
mkdir -p "$work"
echo "== exporting the bundled GPT decoder (PyTorch -> ONNX)"
(cd "$root/python" && /usr/bin/python3 -m autopar.models --out "$work" --inputs gpt)

echo "== compiling for $cluster"
"$build/bin/autopar-compile" "$work/gpt.onnx" --cluster "$cluster" \
  --input-shape idx=2x32 -o "$work/gpt.artifact"

echo "== running on $ranks rank(s)"
launcher=()
if [ "$ranks" != 1 ]; then
  launcher=(mpirun --oversubscribe -np "$ranks")
  if [ "$(id -u)" = 0 ]; then launcher+=(--allow-run-as-root); fi
fi
rm -rf "$work/autopar.out" "$work/ort.out"
"${launcher[@]}" "$build/bin/autopar-run" "$work/gpt.artifact" \
  --inputs "$work/gpt.inputs" --outputs "$work/autopar.out" --steps "$steps"

echo "== checking against onnxruntime"
node "$root/tools/reference/ort-run.js" "$work/gpt.onnx" \
  --inputs "$work/gpt.inputs" --outputs "$work/ort.out"
(cd "$root/python" && /usr/bin/python3 -m autopar.compare "$work/ort.out" "$work/autopar.out")

echo "== training a tiny GPT (examples/tiny-gpt/train.sh)"
AUTOPAR_BUILD="$build" "$root/examples/tiny-gpt/train.sh"
