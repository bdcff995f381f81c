#!/usr/bin/python3
"""Turns text files into the token files `autopar-run --train --data DIR` reads.

Byte-level tokens (the vocabulary is the 256 byte values, so there is no
vocabulary file to keep): the text is cut into windows of SEQ + 1 bytes, every
STRIDE bytes; a window's first SEQ bytes are the inputs `idx` and its last SEQ
the next-token `targets`. The last --eval-fraction of the windows (taken from
the end of the text, so no training window overlaps them) go to OUT/eval.

    examples/tiny-gpt/prepare_data.py OUT TEXT... [--seq 64] [--stride 32]

writes OUT/train/{idx,targets}.npy and OUT/eval/{idx,targets}.npy (int64,
[windows, SEQ]).
"""

import argparse
import os
import sys

import numpy as np


def windows(data, seq, stride):
    starts = range(0, len(data) - seq - 1, stride)
    idx = np.stack([data[s:s + seq] for s in starts]).astype(np.int64)
    targets = np.stack([data[s + 1:s + seq + 1] for s in starts]).astype(np.int64)
    return idx, targets


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__)
    p.add_argument("out", help="output directory")
    p.add_argument("text", nargs="+", help="text files, concatenated")
    p.add_argument("--seq", type=int, default=64, help="tokens per sample (default 64)")
    p.add_argument("--stride", type=int, default=32, help="bytes between windows (default 32)")
    p.add_argument("--eval-fraction", type=float, default=0.1,
                   help="share of the windows held out (default 0.1)")
    args = p.parse_args(argv)
    if args.seq < 1 or args.stride < 1 or not 0 <= args.eval_fraction < 1:
        p.error("--seq and --stride must be positive, --eval-fraction in [0, 1)")
    text = b""
    for path in args.text:
        try:
            with open(path, "rb") as f:
                text += f.read() + b"\n"
        except OSError as e:
            p.error(f"cannot read {path}: {e.strerror}")
    data = np.frombuffer(text, dtype=np.uint8)
    if len(data) < 2 * (args.seq + 1):
        p.error(f"{len(data)} bytes of text: too short for windows of {args.seq + 1}")
    split = int(len(data) * (1 - args.eval_fraction))
    parts = {"train": data[:split], "eval": data[split:]}
    for name, part in parts.items():
        if len(part) < args.seq + 2:
            if name == "eval" and args.eval_fraction == 0:
                continue
            p.error(f"the {name} split has {len(part)} bytes, fewer than one window")
        idx, targets = windows(part, args.seq, args.stride)
        os.makedirs(os.path.join(args.out, name), exist_ok=True)
        np.save(os.path.join(args.out, name, "idx.npy"), idx)
        np.save(os.path.join(args.out, name, "targets.npy"), targets)
        print(f"{name}: {len(idx)} windows of {args.seq} tokens from {len(part)} bytes "
              f"-> {os.path.join(args.out, name)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
