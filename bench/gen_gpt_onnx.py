#!/usr/bin/env python3
"""Write a GPT-style decoder ONNX graph of any size without materializing its weights.

    bench/gen_gpt_onnx.py --preset gpt-1t -o /tmp/gpt1t/model.onnx
    bench/gen_gpt_onnx.py --layers 2 --hidden 64 --heads 4 --vocab 128 --seq 16 -o m.onnx --weights
    bench/gen_gpt_onnx.py --list-presets

Same as ``python3 -m autopar.gpt_onnx`` (python/autopar/gpt_onnx.py has the details).
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

from autopar.gpt_onnx import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
