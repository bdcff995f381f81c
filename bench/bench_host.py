#!/usr/bin/python3
"""This machine measured against the local:N cluster model.

lib/Target/LocalCluster.cpp estimates a CPU rank from what the OS reports (cores, clock,
vector ISA) and two constants: the memory bandwidth one core sustains and MPI's
shared-memory link (bandwidth, latency). This script measures both with the
microbenchmarks in bench/host/ and prints them next to the model's values, read from the
plan report's `cluster_spec` (autopar-compile --plan-only --report-json):

  - stream_triad (one thread, 3 x 64 MiB arrays): memory GB/s of one core
  - mpi_pingpong (2 ranks under mpirun): one-way latency of 8 B, bandwidth of 4 MiB
  - sgemm through numpy (Debian's OpenBLAS, one thread), square sizes 64..2048: GFLOP/s
    against the model's fp32 peak of one core (cores x clock x FLOP/cycle / cores)

  bench/bench_host.py --build-dir build
  bench/bench_host.py --write-results     # also make it the current figures in bench/RESULTS.md

Needs cc and mpicc (scripts/setup.sh installs them). Nothing is written into the
repository unless --write-results is given.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

from autopar import models, tools  # noqa: E402

import results  # noqa: E402  (bench/results.py)

HERE = os.path.dirname(os.path.abspath(__file__))


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, **kw)
    if r.returncode != 0:
        raise SystemExit(f"error: {' '.join(cmd)} failed ({r.returncode}): {r.stderr.strip()[-400:]}")
    return r.stdout


def values(text):
    out = {}
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        try:
            out[key] = float(value)
        except ValueError:
            pass
    return out


GEMM_SCRIPT = """
import sys, time, numpy as np
for n in (64, 128, 256, 512, 1024, 2048):
    a = np.random.rand(n, n).astype(np.float32); b = np.random.rand(n, n).astype(np.float32)
    a @ b
    reps = max(3, int(2e9 / (2 * n ** 3)))
    best = 1e30
    for _ in range(reps):
        t = time.perf_counter(); a @ b; best = min(best, time.perf_counter() - t)
    print(f"gemm_{n} {2 * n ** 3 / best / 1e9:.3f}")
"""


def model_spec(build_dir, work):
    """The local:2 cluster model, from a plan report."""
    onnx = models.export("mlp", os.path.join(work, "models"), log=lambda *_: None)
    report = os.path.join(work, "report.json")
    run([os.path.join(build_dir, "bin", "autopar-compile"), onnx, "--cluster", "local:2",
         *models.get("mlp").shape_flag_list(), "--plan-only", "--report-json", report])
    with open(report) as f:
        return json.load(f)["cluster_spec"]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--build-dir", default=os.path.join(tools.REPO_ROOT, "build"))
    p.add_argument("--write-results", action="store_true")
    args = p.parse_args(argv)
    for tool in ("cc", "mpicc", "mpirun"):
        if not shutil.which(tool):
            raise SystemExit(f"error: {tool} not found (scripts/setup.sh installs it)")
    work = tempfile.mkdtemp(prefix="autopar-bench-host-")
    triad_bin, pingpong_bin = os.path.join(work, "stream_triad"), os.path.join(work, "mpi_pingpong")
    run(["cc", "-O2", "-o", triad_bin, os.path.join(HERE, "host", "stream_triad.c")])
    run(["mpicc", "-O2", "-o", pingpong_bin, os.path.join(HERE, "host", "mpi_pingpong.c")])

    triad = values(run([triad_bin]))["triad_gbytes_per_s"]
    mpirun = ["mpirun", "--oversubscribe", "-np", "2"]
    if os.geteuid() == 0:
        mpirun.insert(1, "--allow-run-as-root")
    ping = values(run(mpirun + [pingpong_bin]))

    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    gemm = values(run([sys.executable, "-c", GEMM_SCRIPT], env=env))

    spec = model_spec(args.build_dir, work)
    gpu, intra = spec["gpu"], spec["intra_node"]
    # The model's per-core figures, from its source line ("2 cores x 2.10 GHz x 64
    # FLOP/cycle (avx512), 10 GB/s per core, shared by 2 ranks").
    m = re.search(r"(\d+) cores x ([\d.]+) GHz x (\d+) FLOP/cycle", gpu["source"])
    bw = re.search(r"([\d.]+) GB/s per core", gpu["source"])
    if not m or not bw:
        raise SystemExit(f"error: cannot read the local model's per-core figures from: {gpu['source']}")
    cores = int(m.group(1))
    peak_core = float(m.group(2)) * float(m.group(3))  # GFLOP/s
    per_core_model = float(bw.group(1))
    rows = [
        ("memory bandwidth of one core (GB/s)", per_core_model, triad, "stream_triad"),
        ("MPI shared-memory bandwidth (GB/s)", intra["gbytes_per_s"], ping["bandwidth_gbytes_per_s"],
         "mpi_pingpong, 4 MiB"),
        ("MPI shared-memory latency (us)", intra["latency_us"], ping["latency_us"], "mpi_pingpong, 8 B"),
    ]
    for key in sorted(gemm, key=lambda k: int(k.split("_")[1])):
        n = key.split("_")[1]
        rows.append((f"fp32 GEMM {n}^3, one core (GFLOP/s): model = peak", peak_core, gemm[key],
                     "numpy sgemm (OpenBLAS), 1 thread"))
    lines = [f"- machine: {results.machine_words()}, {cores} physical cores; model from "
             "`autopar-compile --cluster local:2 --plan-only --report-json` (`cluster_spec`)",
             f"- commit: {results.git_commit()}",
             "- command: `bench/bench_host.py" + (" --write-results" if args.write_results else "") + "`", "",
             "| quantity | model | measured | model / measured | benchmark |",
             "| --- | --- | --- | --- | --- |"]
    for name, model, measured, bench in rows:
        lines.append(f"| {name} | {model:.3f} | {measured:.3f} | {model / measured:.2f} | {bench} |")
    print("\n".join(lines))
    shutil.rmtree(work, ignore_errors=True)
    if args.write_results:
        results.record("This machine against the local:N model", "\n".join(lines))
        print(f"recorded in {results.RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
