#!/usr/bin/python3
"""Exports the tiny GPT (autopar.train_models.Gpt, byte vocabulary) for training.

    examples/tiny-gpt/export_model.py OUT.onnx [--batch 16] [--seq 64] [--layers 2]
        [--width 128] [--heads 4] [--dropout 0.1] [--seed 0]

The export is PyTorch's training mode (Dropout and the loss inside, no constant
folding), with inputs `idx` and `targets` ([batch, seq] int64) and output `loss`:
what `autopar-compile --mode train` takes.
"""

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from autopar.train_models import Gpt, export_for_training  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__)
    p.add_argument("out")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--width", type=int, default=128)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--seed", type=int, default=0, help="of the initial weights")
    args = p.parse_args(argv)
    if args.width % args.heads:
        p.error(f"--width {args.width} must be a multiple of --heads {args.heads}")
    torch.manual_seed(args.seed)
    model = Gpt(vocab=256, width=args.width, heads=args.heads, layers=args.layers,
                seq=args.seq, dropout=args.dropout)
    example = [torch.zeros(args.batch, args.seq, dtype=torch.long)] * 2
    export_for_training(model, example, ["idx", "targets"], args.out)
    params = sum(p.numel() for p in model.parameters())
    print(f"exported a GPT of {params} parameters ({args.layers} layers, width {args.width}, "
          f"{args.heads} heads, sequence {args.seq}, dropout {args.dropout}) to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
