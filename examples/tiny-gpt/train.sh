#!/usr/bin/env bash
# The training quick start: a tiny GPT (byte vocabulary, 2 layers, 0.5M
# parameters) trained for 50 steps on text bundled with autopar (its own
# docs), then the trained model run by onnxruntime on held-out text.
#
#   examples/tiny-gpt/train.sh [--steps N] [--text FILE]... [--work DIR]
#
# Needs a build (build/bin/autopar-compile, autopar-run): scripts/quickstart.sh
# builds one and runs this at its end.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="${AUTOPAR_BUILD:-$root/build}"
steps=50
work="$build/tiny-gpt"
texts=()
while [ $# -gt 0 ]; do
  case "$1" in
    --steps) steps="$2"; shift 2 ;;
    --text) texts+=("$2"); shift 2 ;;
    --work) work="$2"; shift 2 ;;
    *) echo "usage: $0 [--steps N] [--text FILE]... [--work DIR]" >&2; exit 2 ;;
  esac
done
if [ ${#texts[@]} = 0 ]; then
  texts=("$root"/README.md "$root"/docs/*.md "$root"/docs/design/*.md)
fi
py=/usr/bin/python3
mkdir -p "$work"

echo "== tokens: ${#texts[@]} text file(s) -> $work/data"
"$py" "$here/prepare_data.py" "$work/data" "${texts[@]}"

echo "== model: PyTorch -> ONNX (training mode, loss inside)"
"$py" "$here/export_model.py" "$work/gpt.onnx" --batch 16 --seq 64

echo "== compiling one training step for one CPU rank"
"$build/bin/autopar-compile" "$work/gpt.onnx" --cluster local:1 --mode train \
  --train-config "$here/ds_config.json" \
  --input-shape idx=16x64 --input-shape targets=16x64 -o "$work/artifact"

echo "== training $steps steps (loss going down from ln 256 = 5.55)"
rm -f "$work/metrics.jsonl"
"$build/bin/autopar-run" "$work/artifact" --train --data "$work/data/train" \
  --steps "$steps" --shuffle 1 --metrics "$work/metrics.jsonl" \
  --eval-data "$work/data/eval" --eval-every 25 \
  --checkpoint-dir "$work/checkpoints" --outputs "$work/trained" \
  --save-onnx "$work/gpt-trained.onnx"

echo "== the trained model in onnxruntime, on held-out text"
"$py" - "$work" <<'PY'
import os, sys
import numpy as np
work = sys.argv[1]
batch = os.path.join(work, "eval-batch")
os.makedirs(batch, exist_ok=True)
for name in ("idx", "targets"):
    np.save(os.path.join(batch, name + ".npy"), np.load(os.path.join(work, "data", "eval", name + ".npy"))[:16])
PY
rm -rf "$work/ort-out" "$work/autopar-out"
node "$root/tools/reference/ort-run.js" "$work/gpt-trained.onnx" \
  --inputs "$work/eval-batch" --outputs "$work/ort-out" > /dev/null
"$build/bin/autopar-compile" "$work/gpt-trained.onnx" --cluster local:1 \
  --input-shape idx=16x64 --input-shape targets=16x64 -o "$work/inference" > /dev/null
"$build/bin/autopar-run" "$work/inference" --inputs "$work/eval-batch" \
  --outputs "$work/autopar-out" > /dev/null
"$py" - "$work" <<'PY'
import json, os, sys
import numpy as np
work = sys.argv[1]
records = [json.loads(line) for line in open(os.path.join(work, "metrics.jsonl"))]
evals = [r for r in records if "eval_loss" in r]
records = [r for r in records if "loss" in r]
ort = float(np.load(os.path.join(work, "ort-out", "loss.npy")))
ours = float(np.load(os.path.join(work, "autopar-out", "loss.npy")))
print(f"training loss: step 1 {records[0]['loss']:.3f} -> step {records[-1]['step']} "
      f"{records[-1]['loss']:.3f}")
print(f"held-out loss of the trained model: onnxruntime {ort:.4f}, autopar {ours:.4f} "
      f"on one batch, {evals[-1]['eval_loss']:.4f} over the {evals[-1]['eval_batches']} "
      f"held-out batches (untrained: 5.55)")
if abs(ort - ours) > 1e-3 * max(1.0, abs(ort)):
    sys.exit("error: onnxruntime and autopar disagree on the trained model")
if not ort < records[0]["loss"]:
    sys.exit("error: the held-out loss did not fall below the first step's loss")
print(f"trained model: {os.path.join(work, 'gpt-trained.onnx')}")
PY
