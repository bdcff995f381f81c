#!/usr/bin/env python3
"""Per-kernel GPU time of one autopar-run step, from Nsight Compute (ncu).

    bench/gpu/kernel_profile.py [--top 30] [--csv OUT.csv] -- autopar-run ARTIFACT --steps 1

Runs the command under `ncu --metrics gpu__time_duration.sum --csv --clock-control none`
(one pass per kernel: every launch is timed alone, serialized), then prints the launches
grouped by kernel name (and launch shape), largest total first, with their share of the
total GPU time. The names are the outlined kernels of the artifact's cubin
(`main_kernel_N`, see `cuobjdump -elf device/*.cubin`) and the library's (cuBLASLt, NCCL).
"""
import argparse
import collections
import csv
import io
import subprocess
import sys


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--top", type=int, default=30)
    p.add_argument("--csv", help="also write the raw ncu CSV here")
    p.add_argument("--ncu", default="ncu")
    p.add_argument("command", nargs=argparse.REMAINDER)
    args = p.parse_args(argv)
    cmd = [c for c in args.command if c != "--"]
    r = subprocess.run([args.ncu, "--metrics", "gpu__time_duration.sum", "--csv",
                        "--clock-control", "none", *cmd], capture_output=True, text=True)
    text = r.stdout
    if args.csv:
        with open(args.csv, "w") as f:
            f.write(text)
    start = text.find('"ID"')
    if r.returncode != 0 or start < 0:
        print(r.stdout[-3000:], r.stderr[-3000:], file=sys.stderr)
        return 1
    groups = collections.defaultdict(lambda: [0, 0.0])
    total = 0.0
    for row in csv.DictReader(io.StringIO(text[start:])):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        ns = float(row["Metric Value"].replace(",", ""))
        unit = row.get("Metric Unit", "ns")
        ns *= {"ns": 1, "nsecond": 1, "us": 1e3, "usecond": 1e3, "ms": 1e6, "msecond": 1e6}.get(unit, 1)
        key = (row["Kernel Name"][:90], row.get("Grid Size", ""), row.get("Block Size", ""))
        groups[key][0] += 1
        groups[key][1] += ns
        total += ns
    print(f"{sum(g[0] for g in groups.values())} launches, {total / 1e6:.3f} ms of GPU time")
    print(f"{'ms':>9} {'share':>6} {'calls':>5}  kernel [grid] [block]")
    for (name, grid, block), (calls, ns) in sorted(groups.items(), key=lambda kv: -kv[1][1])[:args.top]:
        print(f"{ns / 1e6:9.3f} {ns / total:6.1%} {calls:5d}  {name} {grid} {block}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
