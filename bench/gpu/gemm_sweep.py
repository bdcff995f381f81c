#!/usr/bin/python3
"""Measure the compute-roofline constants of the cost model (docs/cost-model.md).

lib/Planner/Compute.cpp models one kernel as

    time = max(flops / (peak * eff(minDim)), bytes / (bandwidth * memEff))
    eff(minDim) = gemmMax * minDim / (minDim + gemmHalfDim)

and its three constants (gemmMax, gemmHalfDim, memEff) are assumptions until
this script has been run on the device. It times, with torch:
  - square GEMMs M = N = K = 256 .. 16384 (minDim = the size), and thin ones
    M = N = 8192 with K = 64 .. 4096 (minDim = K), in --dtype;
  - a device-to-device copy of --copy-mib MiB (reads and writes: 2x bytes).
It prints achieved TFLOP/s and GB/s, their fraction of the datasheet peak
(--peak-tflops, --peak-gbytes-per-s: use the numbers of the device's preset,
`DeviceSpec` in lib/Target/ClusterPresets.cpp), and the constants fitted to
them. Nothing is written anywhere; paste the table into docs/cost-model.md and
the constants into lib/Planner/Compute.cpp with the date and the device.

    bench/gpu/gemm_sweep.py --peak-tflops 989.4 --peak-gbytes-per-s 3350   # H100 SXM, bf16
    bench/gpu/gemm_sweep.py --device cpu --dtype fp32 --max-size 4096 \\
        --peak-tflops 1.2 --peak-gbytes-per-s 20
"""

import argparse
import statistics
import sys
import time


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", default="cuda", help="cuda (default) or cpu")
    p.add_argument("--dtype", default="bf16", choices=["bf16", "fp16", "fp32", "tf32"])
    p.add_argument("--peak-tflops", type=float, help="dense datasheet peak for --dtype")
    p.add_argument("--peak-gbytes-per-s", type=float, help="datasheet memory bandwidth")
    p.add_argument("--min-size", type=int, default=256)
    p.add_argument("--max-size", type=int, default=16384)
    p.add_argument("--copy-mib", type=int, default=4096)
    p.add_argument("--reps", type=int, default=20, help="timed repetitions per shape")
    p.add_argument("--min-fit-ms", type=float, default=0.1,
                   help="GEMMs faster than this are left out of the fit (overhead-bound)")
    p.add_argument("--warmup", type=int, default=5)
    return p.parse_args()


def torch_or_exit():
    try:
        import torch  # noqa: F401
    except ImportError:
        sys.exit("gemm_sweep.py needs PyTorch (pip install torch) on the machine it measures")
    return sys.modules["torch"]


class Timer:
    """Median seconds of fn() over reps, after warmup; CUDA events on GPUs."""

    def __init__(self, torch, device, reps, warmup):
        self.torch, self.device, self.reps, self.warmup = torch, device, reps, warmup

    def __call__(self, fn):
        for _ in range(self.warmup):
            fn()
        times = []
        if self.device == "cuda":
            cuda = self.torch.cuda
            cuda.synchronize()
            for _ in range(self.reps):
                start, stop = cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)
                start.record()
                fn()
                stop.record()
                stop.synchronize()
                times.append(start.elapsed_time(stop) / 1e3)
        else:
            for _ in range(self.reps):
                t0 = time.perf_counter()
                fn()
                times.append(time.perf_counter() - t0)
        return statistics.median(times)


def sizes(lo, hi):
    s = lo
    while s <= hi:
        yield s
        s *= 2


def gemm_rows(torch, timer, device, dtype, args):
    """(series, M, N, K, seconds) for the square and thin-K series."""
    shapes = [("square", s, s, s) for s in sizes(args.min_size, args.max_size)]
    thin_mn = min(8192, args.max_size)
    shapes += [("thin-K", thin_mn, thin_mn, k) for k in sizes(64, min(4096, thin_mn // 2))]
    rows = []
    for series, m, n, k in shapes:
        a = torch.randn(m, k, device=device, dtype=dtype)
        b = torch.randn(k, n, device=device, dtype=dtype)
        c = torch.empty(m, n, device=device, dtype=dtype)
        seconds = timer(lambda: torch.matmul(a, b, out=c))
        rows.append((series, m, n, k, seconds))
        a = b = c = None  # free the device memory before the next shape
    return rows


def fit_curve(points):
    """Fits eff = gemmMax * d / (d + gemmHalfDim) to (d, eff) points by least squares
    on the relative error (a grid over both constants: two parameters, a few dozen
    points). The caller passes only points the curve describes: compute-bound GEMMs
    long enough that launch and timing overhead do not dominate (see main)."""
    if len(points) < 2:
        return 0.0, 0.0
    best = None
    for gmax_i in range(300, 1001, 5):
        gmax = gmax_i / 1000
        for half in range(1, 2049):
            err = sum(((gmax * d / (d + half)) / e - 1.0) ** 2 for d, e in points)
            if best is None or err < best[0]:
                best = (err, gmax, half)
    return best[1], float(best[2])


def fit_points(rows, peak_tflops, bytes_per_s, elem_size, min_seconds):
    """(minDim, eff) of the GEMMs the efficiency curve is about: those whose time is
    over min_seconds (shorter ones measure launch and timer overhead, which the cost
    model does not put in the curve) and at least twice their memory roof (reading A
    and B and writing C at the measured copy bandwidth: those are memory-bound, which
    the roofline's other term models). A GEMM slower than the next larger one of its
    series is a glitch of the measurement (seen once: a 1024^3 bf16 GEMM timed 4x
    slower than 2048^3), not a point of the curve, and is left out too."""
    points = []
    for i, (series, m, n, k, seconds) in enumerate(rows):
        bigger = [r for r in rows[i + 1:] if r[0] == series]
        if bigger and seconds > bigger[0][4]:
            continue
        memory_seconds = (m * k + k * n + m * n) * elem_size / bytes_per_s
        if seconds < min_seconds or seconds < 2 * memory_seconds:
            continue
        points.append((min(m, n, k), 2.0 * m * n * k / seconds / 1e12 / peak_tflops))
    return points


def main():
    args = parse_args()
    torch = torch_or_exit()
    device = args.device
    if device == "cuda" and not torch.cuda.is_available():
        sys.exit("no CUDA device visible to torch; use --device cpu to measure the CPU")
    torch.backends.cuda.matmul.allow_tf32 = args.dtype == "tf32"
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16,
             "fp32": torch.float32, "tf32": torch.float32}[args.dtype]
    timer = Timer(torch, device, args.reps, args.warmup)
    name = torch.cuda.get_device_name() if device == "cuda" else "cpu"
    print(f"# gemm_sweep: {name}, torch {torch.__version__}, dtype {args.dtype}")

    print("\n| series | M | N | K | minDim | ms | TFLOP/s | eff (of peak) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    rows = list(gemm_rows(torch, timer, device, dtype, args))
    for series, m, n, k, seconds in rows:
        tflops = 2.0 * m * n * k / seconds / 1e12
        eff = tflops / args.peak_tflops if args.peak_tflops else None
        eff_text = f"{eff:.3f}" if eff is not None else "-"
        print(f"| {series} | {m} | {n} | {k} | {min(m, n, k)} | {seconds * 1e3:.3f} "
              f"| {tflops:.1f} | {eff_text} |")

    elems = args.copy_mib * 1024 * 1024 // 4
    src = torch.empty(elems, device=device, dtype=torch.float32).fill_(1.0)
    dst = torch.empty_like(src)
    seconds = timer(lambda: dst.copy_(src))
    gbps = 2.0 * elems * 4 / seconds / 1e9
    mem_eff = gbps / args.peak_gbytes_per_s if args.peak_gbytes_per_s else None
    print(f"\ncopy {args.copy_mib} MiB: {seconds * 1e3:.3f} ms, {gbps:.1f} GB/s (read + write)"
          + (f", {mem_eff:.3f} of peak" if mem_eff is not None else ""))

    if args.peak_tflops and mem_eff is not None:
        elem_size = 2 if args.dtype in ("bf16", "fp16") else 4
        points = fit_points(rows, args.peak_tflops, gbps * 1e9, elem_size, args.min_fit_ms / 1e3)
        gmax, half = fit_curve(points)
        print(f"\n# fitted constants (lib/Planner/Compute.cpp, EfficiencyCurve), from "
              f"{len(points)} compute-bound GEMMs of at least {args.min_fit_ms} ms:")
        print(f"#   gemmMax = {gmax:.3f}, gemmHalfDim = {half:.0f}, memory = {mem_eff:.3f}")
    else:
        print("\n# give --peak-tflops and --peak-gbytes-per-s to fit the constants")


if __name__ == "__main__":
    main()
