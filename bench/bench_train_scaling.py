#!/usr/bin/python3
"""Training strong scaling on local CPU ranks, per plan family, predicted against measured.

The GPT of bench_train.py (2 layers, width 128, sequence 64, vocabulary 256) with a
fixed global batch (strong scaling), AdamW with clipping, trained by
`mpirun -np N autopar-run --train` for each plan family the runtime executes on CPU
ranks: data parallelism with ZeRO 0, 1, 2 and 3 (`--zero`), tensor parallelism
(`--tp T`: N / T data-parallel replicas of tp groups of T) and pipeline parallelism
(`--pp P`: N / P replicas of a pipeline of P stages, the micro-batches the planner's;
with `--virtual-stages 1,2` each pipeline also with 2 model chunks per stage, Megatron-LM's
interleaved 1F1B)
and both (`--tp T --pp P` where T x P divides N: pipelines whose stages are tp groups).
For each:
  - autopar-compile --mode train --cluster local:N --zero Z (or --tp T, --pp P) --report-json R: the plan's
    predicted step time and memory per rank (report "predicted");
  - the median step time over steps --warmup+1..--steps (rank 0's --metrics records)
    and the peak resident memory of the largest rank (os.wait4 on mpirun: the
    maximum over its descendants; it includes the runtime, MPI and the code, about
    60-80 MB before any tensor);
  - the first and last loss, which must equal one rank's (the plans do not change the
    math: test/Integration/train_dp.py checks it within 1e-5);
  - with --checkpoint-every K, the checkpoints' cost: how long training stalled per
    save (copying the rank's shards, the directory, the metadata) and how long the
    background writer took, beside the step time, and how many steps ran while it
    wrote (docs/checkpoints.md).
speedup = one rank's step time / N ranks'; efficiency = speedup / N; pred/meas = the
predicted step time / the measured one.

  bench/bench_train_scaling.py --build-dir build
  bench/bench_train_scaling.py --ranks 1,2,4,8 --zero 0,2,3 --tp 2,4 --pp 2,4 --steps 20
  bench/bench_train_scaling.py --ranks 1,2 --zero 0 --tp '' --pp 2 --virtual-stages 1,2
  bench/bench_train_scaling.py --write-results     # the current figures in bench/RESULTS.md

This machine's cores are shared among the ranks (rows with more ranks than cores are
marked oversubscribed); the local:N cluster model knows the core count. Nothing is
written into the repository unless --write-results is given.
"""

import argparse
import json
import os
import re
import shlex
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import bench_train  # noqa: E402  (the GPT, its data and export, peak_rss_of)
from bench_scaling import launcher  # noqa: E402  (mpirun -np N)
import results  # noqa: E402  (bench/results.py)

# Let autopar-run share the cores among the ranks itself.
SHARED_CORES = {"OMP_NUM_THREADS": "", "OPENBLAS_NUM_THREADS": "", "MKL_NUM_THREADS": ""}


def prepare(args, batch):
    """The GPT's export and data (bench_train's), and a config for `batch`."""
    spec = dict(bench_train.MODELS["gpt"], batch=batch)
    work = os.path.join(args.work_dir, "gpt")
    os.makedirs(work, exist_ok=True)
    bench_train.child(spec, work, args.steps, prepare=True)
    config = os.path.join(work, "ds_config.json")
    with open(config, "w") as f:
        json.dump(dict(bench_train.CONFIG, train_batch_size=batch), f)
    import numpy as np  # noqa: E402  (after the child wrote the data)
    shapes = []
    for f in sorted(os.listdir(os.path.join(work, "data"))):
        arr = np.load(os.path.join(work, "data", f), mmap_mode="r")
        shapes += ["--input-shape", f[:-4] + "=" + "x".join(str(d) for d in (batch,) + arr.shape[1:])]
    return work, config, shapes


def bench_plan(work, config, shapes, n, zero, args, tp=1, pp=1, chunks=1):
    """One plan: ZeRO stage `zero` over n data-parallel ranks, or (tp > 1) n / tp
    replicas of tensor-parallel groups of tp, or (pp > 1) n / pp replicas of a
    pipeline of pp stages (of `chunks` model chunks each: the interleaved 1F1B), or
    (both) n / (tp pp) replicas of a pipeline whose stages are tp groups."""
    tag = (f"tp{tp}xpp{pp}-{n}" if tp > 1 and pp > 1 else f"tp{tp}-{n}" if tp > 1
           else f"pp{pp}-{n}" if pp > 1 else f"zero{zero}-{n}")
    if chunks > 1:
        tag += f"-v{chunks}"
    art, report = os.path.join(work, tag), os.path.join(work, tag + "-report.json")
    row = {"ranks": n, "zero": zero, "tp": tp, "pp": pp, "chunks": chunks, "error": "",
           "oversubscribed": n > os.cpu_count()}
    pin = ((["--tp", str(tp)] if tp > 1 else []) + (["--pp", str(pp)] if pp > 1 else [])
           or (["--dp", str(n), "--zero", str(zero)] if n > 1 else ["--zero", str(zero)]))
    if chunks > 1:
        pin += ["--virtual-stages", str(chunks)]
    cmd = [os.path.join(args.build_dir, "bin", "autopar-compile"), os.path.join(work, "model.onnx"),
           "--cluster", f"local:{n}", "--mode", "train", "--train-config", config, *shapes,
           *pin, "--report-json", report, "-o", art]
    row["compile_cmd"] = " ".join(shlex.quote(results.repo_path(c) if os.path.isabs(c) else c)
                                  for c in cmd)
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        row["error"] = "compile: " + (r.stderr.strip().splitlines() or ["?"])[0]
        return row
    with open(report) as f:
        plan = json.load(f)
    mesh = plan["mesh"]
    row["mesh"] = f"dp{mesh['dp']} tp{mesh['tp']} pp{mesh['pp']}"
    row["predicted_ms"] = plan["predicted"]["step_time_s"] * 1e3
    row["predicted_mb"] = plan["predicted"]["memory_per_gpu_bytes"] / 2**20
    metrics = os.path.join(work, tag + "-metrics.jsonl")
    if os.path.exists(metrics):
        os.remove(metrics)
    run = launcher(n) + [os.path.join(args.build_dir, "bin", "autopar-run"), art, "--train", "--data",
                         os.path.join(work, "data"), "--steps", str(args.steps), "--metrics", metrics]
    if args.checkpoint_every:
        ckpt = os.path.join(work, tag + "-ckpt")
        subprocess.run(["rm", "-rf", ckpt], check=True)
        run += ["--checkpoint-dir", ckpt, "--checkpoint-every", str(args.checkpoint_every)]
    env = dict(SHARED_CORES, _BENCH_OUT=os.path.join(work, tag + "-run.log"))
    rc, text, peak = bench_train.peak_rss_of(run, env)
    if rc != 0:
        row["error"] = "run: " + (text.strip().splitlines() or ["?"])[-1]
        return row
    with open(metrics) as f:
        records = [json.loads(line) for line in f]
    row["measured_ms"] = statistics.median(r["step_time_s"] for r in records[args.warmup:]) * 1e3
    row["peak_mb"] = peak
    saves = [(float(a), float(b), int(last or first) - int(first) + 1 if first else 0)
             for a, b, first, last in re.findall(
                 r"training stalled ([0-9.]+) ms; this rank's file written in the background in "
                 r"([0-9.]+) ms(?:, while steps? ([0-9]+)(?:-([0-9]+))? ran)?", text)]
    if saves:
        row["stall_ms"] = statistics.median(a for a, _, _ in saves)
        row["write_ms"] = statistics.median(b for _, b, _ in saves)
        row["overlapped_steps"] = statistics.median(c for _, _, c in saves)
    row["losses"] = (records[0]["loss"], records[-1]["loss"])
    return row


def fmt(v, spec):
    return "-" if v is None else format(v, spec)


def plan_name(r):
    chunks = f" x {r['chunks']} chunks" if r.get("chunks", 1) > 1 else ""
    if r.get("tp", 1) > 1 and r.get("pp", 1) > 1:
        return f"tp {r['tp']} x pp {r['pp']}{chunks}"
    if r.get("tp", 1) > 1:
        return f"tp {r['tp']}"
    if r.get("pp", 1) > 1:
        return f"pp {r['pp']}{chunks}"
    return f"dp ZeRO-{r['zero']}"


def format_table(rows, markdown=False):
    head = ["ranks", "plan", "mesh", "measured ms", "predicted ms", "pred/meas", "speedup",
            "efficiency", "peak MB (largest rank)", "predicted MB", "loss first / last"]
    saving = any("stall_ms" in r for r in rows)
    if saving:
        head += ["save: stall ms", "save: background write ms", "save: steps overlapped"]
    body = []
    for r in rows:
        meas, pred = r.get("measured_ms"), r.get("predicted_ms")
        losses = r.get("losses")
        body.append([str(r["ranks"]) + (" (oversubscribed)" if r["oversubscribed"] else ""),
                     plan_name(r), r.get("mesh", "-"), fmt(meas, ".2f"), fmt(pred, ".2f"),
                     fmt(pred / meas if meas and pred else None, ".2f"), fmt(r.get("speedup"), ".2f"),
                     fmt(r.get("efficiency"), ".2f"), fmt(r.get("peak_mb"), ".0f"),
                     fmt(r.get("predicted_mb"), ".1f"),
                     f"{losses[0]:.5f} / {losses[1]:.5f}" if losses else r["error"]]
                    + ([fmt(r.get("stall_ms"), ".2f"), fmt(r.get("write_ms"), ".2f"),
                        fmt(r.get("overlapped_steps"), ".1f")]
                       if saving else []))
    return "\n".join(results.table(head, body, markdown))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--build-dir", default=os.path.join(REPO, "build"))
    p.add_argument("--work-dir", default=None, help="default BUILD_DIR/bench-train-scaling")
    p.add_argument("--ranks", default="1,2,4", help="rank counts (default %(default)s)")
    p.add_argument("--zero", default="0,1,2,3", help="ZeRO stages on more than one rank (default %(default)s)")
    p.add_argument("--tp", default="2", help="tensor-parallel group sizes, each on the rank counts it "
                   "divides (default %(default)s; '' for none)")
    p.add_argument("--pp", default="2", help="pipeline stages, each on the rank counts it divides "
                   "(default %(default)s; empty: none)")
    p.add_argument("--virtual-stages", default="1", help="model chunks per pipeline stage, "
                   "each tried on every pipeline (default %(default)s: plain 1F1B)")
    p.add_argument("--batch", type=int, default=16, help="global batch, fixed (default %(default)s)")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3, help="leading steps left out of the median")
    p.add_argument("--checkpoint-every", type=int, default=0, metavar="K",
                   help="also checkpoint every K steps and report the saves' cost")
    p.add_argument("--write-results", action="store_true")
    args = p.parse_args(argv)
    args.build_dir = os.path.abspath(args.build_dir)
    args.work_dir = os.path.abspath(args.work_dir or os.path.join(args.build_dir, "bench-train-scaling"))
    if args.warmup >= args.steps:
        p.error("--warmup must be below --steps")
    ranks = [int(x) for x in args.ranks.split(",")]
    stages = [int(x) for x in args.zero.split(",")]
    tps = [int(x) for x in args.tp.split(",") if x]
    pps = [int(x) for x in args.pp.split(",") if x]
    chunk_counts = [int(x) for x in args.virtual_stages.split(",") if x] or [1]
    for n in ranks:
        if args.batch % n:
            p.error(f"the global batch {args.batch} does not divide into {n} ranks")

    work, config, shapes = prepare(args, args.batch)
    rows, base = [], None
    plans = [(n, zero, 1, 1, 1) for n in ranks for zero in (stages if n > 1 else [0])]
    plans += [(n, 0, tp, 1, 1) for n in ranks for tp in tps if 1 < tp <= n and n % tp == 0]
    plans += [(n, 0, 1, pp, v) for n in ranks for pp in pps for v in chunk_counts
              if 1 < pp <= n and n % pp == 0]
    plans += [(n, 0, tp, pp, v) for n in ranks for tp in tps for pp in pps
              for v in chunk_counts if tp > 1 and pp > 1 and n % (tp * pp) == 0]
    plans.sort(key=lambda p: p[0])
    for n, zero, tp, pp, chunks in plans:
        row = bench_plan(work, config, shapes, n, zero, args, tp, pp, chunks)
        if n == 1 and "measured_ms" in row:
            base = row["measured_ms"]
        if base and "measured_ms" in row:
            row["speedup"] = base / row["measured_ms"]
            row["efficiency"] = row["speedup"] / n
        rows.append(row)
        print(format_table([row]).splitlines()[-1], flush=True)
    print()
    print(f"# {results.machine_words()}; {bench_train.MODELS['gpt']['describe'].split(', batch')[0]}, "
          f"global batch {args.batch}; median of steps {args.warmup + 1}..{args.steps}")
    print(format_table(rows))
    if args.write_results:
        cmd = "bench/bench_train_scaling.py " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:]))
        body = [f"- machine: {results.machine_words()}; the CPUs shared among the ranks",
                f"- model: {bench_train.MODELS['gpt']['describe'].split(', batch')[0]}; global batch "
                f"{args.batch}; AdamW with clipping; median of steps {args.warmup + 1}..{args.steps}"
                + (f"; a checkpoint every {args.checkpoint_every} steps (save columns: medians "
                   "over rank 0's saves)" if args.checkpoint_every else ""),
                f"- commit: {results.git_commit()}",
                f"- command: `{cmd}`",
                "- speedup = one rank's time / N ranks' time; efficiency = speedup / N; pred/meas = "
                "the plan's predicted step time / the measured one; peak MB = the largest rank's "
                "maximum resident memory (runtime, MPI and code included); predicted MB = the "
                "plan's memory per rank (training state and activations only)", "",
                format_table(rows, markdown=True), ""]
        body += [f"- {r['ranks']} ranks {plan_name(r)}: `{r['compile_cmd']}`" for r in rows]
        results.record("Training strong scaling on local ranks", "\n".join(body))
        print(f"recorded in {results.RESULTS}")
    return 1 if any(r["error"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
