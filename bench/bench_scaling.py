#!/usr/bin/python3
"""Strong scaling on local CPU ranks, and predicted against measured step time.

For each model and each plan (the global batch stays fixed: strong scaling):
  - autopar-compile MODEL --cluster local:N [pins] --report-json R (the plan's predicted
    step time and collectives)
  - mpirun -np N autopar-run ARTIFACT --steps S --comm-stats-json C; each rank gets its
    share of the cores (autopar-run's default: cores / ranks BLAS threads, at least one),
    which is what the local:N cluster model assumes
The median step time after --warmup steps is compared with one rank's (speedup,
efficiency = speedup / N) and with the plan's prediction (predicted / measured), and the
measured collectives with the predicted ones (calls and bus bytes, per axis and op).

  bench/bench_scaling.py --build-dir build
  bench/bench_scaling.py --models mlp --ranks 1,2,4 --steps 50
  bench/bench_scaling.py --write-results     # also make them the current figures in bench/RESULTS.md

The local:N cluster model says what this machine is (docs/clusters.md): ranks beyond
the number of cores share them, which the prediction does not know about, so the
"oversubscribed" column marks those rows. Nothing is written into the repository unless
--write-results is given.
"""

import argparse
import json
import os
import shlex
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

from autopar import compare, models, tools  # noqa: E402

import results  # noqa: E402  (bench/results.py)

# Let autopar-run share the cores among the ranks itself (an inherited setting would win).
SHARED_CORES = {"OMP_NUM_THREADS": None, "OPENBLAS_NUM_THREADS": None, "MKL_NUM_THREADS": None}

# (label, extra autopar-compile flags, minimum ranks): the automatic plan, and pinned
# tensor parallelism where the model can be partitioned that way.
PLANS = {
    "mlp": [("auto", [], 1), ("tp", ["--tp", "{n}"], 2)],
    "gpt": [("auto", [], 1), ("tp", ["--tp", "{n}"], 2)],
    "bert": [("auto", [], 1), ("tp", ["--tp", "{n}"], 2)],
    "resnet18": [("auto", [], 1), ("tp", ["--tp", "{n}"], 2)],
    "mobilenet_v3_small": [("auto", [], 1), ("tp", ["--tp", "{n}"], 2)],
}


def launcher(n):
    cmd = ["mpirun", "--oversubscribe", "-np", str(n)]
    if os.geteuid() == 0:
        cmd.insert(1, "--allow-run-as-root")
    return cmd


def with_batch(name, batch):
    model = models.get(name)
    shapes = {}
    for inp in model.inputs:
        shape = list(inp.shape)
        if model.dynamic_dims.get(inp.name, {}).get(0) == "batch":
            shape[0] = batch
        shapes[inp.name] = shape
    return models.with_shapes(name, shapes)


def bench_plan(name, model, path, label, flags, n, args):
    work = os.path.join(args.work_dir, name, f"{label}-{n}")
    ins = os.path.join(args.work_dir, name, "inputs")
    artifact, report, comm = (os.path.join(work, f) for f in ("artifact", "report.json", "comm.json"))
    os.makedirs(work, exist_ok=True)
    row = {"model": name, "plan": label, "ranks": n, "error": "", "oversubscribed": n > os.cpu_count()}
    cmd = [tools.build_bin(args.build_dir) + "/autopar-compile", path, "--cluster", f"local:{n}",
           *model.shape_flag_list(), *[f.format(n=n) for f in flags], "--report-json", report, "-o", artifact]
    row["compile_cmd"] = " ".join(shlex.quote(results.repo_path(c) if os.path.isabs(c) else c) for c in cmd)
    r = tools.run_cmd(cmd, timeout=args.timeout, env=SHARED_CORES)
    if not r.ok:
        row["error"] = f"compile: {r.first_error_line()}"
        return row
    with open(report) as f:
        plan = json.load(f)
    mesh = plan["mesh"]
    row["mesh"] = f"dp{mesh['dp']} tp{mesh['tp']} pp{mesh['pp']}"
    row["predicted_ms"] = plan["predicted"]["step_time_s"] * 1e3
    cmd = launcher(n) + [tools.build_bin(args.build_dir) + "/autopar-run", artifact, "--inputs", ins,
                         "--steps", str(args.steps), "--comm-stats-json", comm]
    r = tools.run_cmd(cmd, timeout=args.timeout, env=SHARED_CORES)
    times = tools.parse_step_times(r.stdout + "\n" + r.stderr)
    if not r.ok or not times:
        row["error"] = f"run: {r.first_error_line() or 'no step times printed'}"
        return row
    kept = times[args.warmup:] if len(times) > args.warmup else times
    row["measured_ms"] = statistics.median(kept)
    with open(comm) as f:
        mismatches = compare.compare_collectives(plan, json.load(f))
    row["collectives"] = "as predicted" if not mismatches else f"DIFFER: {mismatches[0]}"
    return row


def fmt(v, spec):
    return "-" if v is None else format(v, spec)


def format_table(rows, markdown=False):
    head = ["model", "plan", "ranks", "mesh", "measured ms", "predicted ms", "pred/meas", "speedup",
            "efficiency", "collectives"]
    lines = []
    if markdown:
        lines += ["| " + " | ".join(head) + " |", "| " + " | ".join("---" for _ in head) + " |"]
    else:
        lines.append("  ".join(head))
    for r in rows:
        meas, pred = r.get("measured_ms"), r.get("predicted_ms")
        cells = [r["model"], r["plan"], str(r["ranks"]) + (" (oversubscribed)" if r["oversubscribed"] else ""),
                 r.get("mesh", "-"), fmt(meas, ".3f"), fmt(pred, ".3f"),
                 fmt(pred / meas if meas and pred else None, ".2f"), fmt(r.get("speedup"), ".2f"),
                 fmt(r.get("efficiency"), ".2f"), r.get("collectives", r["error"]) or r["error"]]
        lines.append(("| " + " | ".join(cells) + " |") if markdown else "  ".join(cells))
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--build-dir", default=os.path.join(tools.REPO_ROOT, "build"))
    p.add_argument("--work-dir", default=None, help="default BUILD_DIR/bench-scaling")
    p.add_argument("--models", default="mlp,gpt", help="comma-separated (default: %(default)s)")
    p.add_argument("--ranks", default="1,2,4", help="rank counts (default: %(default)s)")
    p.add_argument("--batch", type=int, default=16, help="global batch, fixed over rank counts (default 16)")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=3, help="steps dropped before the median")
    p.add_argument("--timeout", type=float, default=600)
    p.add_argument("--write-results", action="store_true")
    args = p.parse_args(argv)
    args.work_dir = os.path.abspath(args.work_dir or os.path.join(args.build_dir, "bench-scaling"))
    ranks = [int(x) for x in args.ranks.split(",")]

    rows = []
    for name in [m for m in args.models.split(",") if m]:
        model = with_batch(name, args.batch)
        path = models.export(name, os.path.join(args.work_dir, "models"), log=lambda m: None)
        models.write_inputs(model, os.path.join(args.work_dir, name, "inputs"))
        base = {}
        for label, flags, least in PLANS.get(name, [("auto", [], 1)]):
            for n in ranks:
                if n < least:
                    continue
                row = bench_plan(name, model, path, label, flags, n, args)
                if n == 1 and "measured_ms" in row:
                    base[name] = row["measured_ms"]
                if name in base and "measured_ms" in row:
                    row["speedup"] = base[name] / row["measured_ms"]
                    row["efficiency"] = row["speedup"] / n
                rows.append(row)
                print(format_table([row]).splitlines()[-1], flush=True)
    print()
    print(format_table(rows))
    if args.write_results:
        cmd = "bench/bench_scaling.py " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:]))
        body = [f"- machine: {results.machine_words()}; the CPUs shared among the ranks; global batch "
                f"{args.batch}; median of steps {args.warmup + 1}..{args.steps}",
                f"- commit: {results.git_commit()}",
                f"- command: `{cmd}`",
                "- speedup = one rank's time / N ranks' time; efficiency = speedup / N; "
                "pred/meas = the plan's predicted step time / the measured one", "",
                format_table(rows, markdown=True)]
        body += [f"- {r['model']} {r['plan']} {r['ranks']}: `{r['compile_cmd']}`"
                 for r in rows if r.get("compile_cmd")]
        results.record("Strong scaling on local ranks", "\n".join(body))
        print(f"recorded in {results.RESULTS}")
    return 1 if any(r["error"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
