#!/usr/bin/python3
"""CPU inference time: autopar against onnxruntime, both on one thread, in one run.

For each model (default gpt and bert, see autopar.models):
  - autopar-compile MODEL --cluster local:1 --input-shape ... (timed: compile_s)
  - autopar-run ARTIFACT --inputs ... --steps N   with OMP_NUM_THREADS=OPENBLAS_NUM_THREADS=1
  - node tools/reference/ort-run.js MODEL --inputs ... --repeat N --threads 1
Each tool's per-step times are parsed ('step i/N: X ms', 'run i/N: X ms'); the first
--warmup steps are dropped and the median of the rest is reported.  ratio = ort_ms /
autopar_ms (above 1: autopar is faster).

  bench/bench_cpu.py --build-dir build
  bench/bench_cpu.py --models gpt --batch 8 --steps 50
  bench/bench_cpu.py --write-results        # also make it the current figures in bench/RESULTS.md

Nothing is written into the repository unless --write-results is given.
"""

import argparse
import os
import shlex
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

from autopar import models, tools  # noqa: E402

import results  # noqa: E402  (bench/results.py)

SINGLE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def summarize(times, warmup):
    """Median of the per-step times after dropping the warmup steps (kept if too few)."""
    kept = times[warmup:] if len(times) > warmup else times
    return statistics.median(kept) if kept else float("nan")


def bench_model(name, args):
    shapes = {}
    model = models.get(name)
    for inp in model.inputs:
        dyn = model.dynamic_dims.get(inp.name, {})
        shape = list(inp.shape)
        if args.batch and dyn.get(0) == "batch":
            shape[0] = args.batch
        if args.seq and dyn.get(1) == "seq":
            shape[1] = args.seq
        shapes[inp.name] = shape
    model = models.with_shapes(name, shapes)
    work = os.path.join(args.work_dir, name)
    ins, artifact = os.path.join(work, "inputs"), os.path.join(work, "artifact")
    path = models.export(name, os.path.join(args.work_dir, "models"), log=lambda m: None)
    models.write_inputs(model, ins)
    row = {"model": name, "shape": " ".join(f"{k}={'x'.join(map(str, v))}" for k, v in shapes.items()),
           "compile_s": None, "autopar_ms": None, "ort_ms": None, "error": ""}

    values = tools.template_values(args.build_dir, model=path, artifact=artifact, inputs=ins,
                                   outputs=os.path.join(work, "outputs"), steps=args.steps,
                                   shape_flags=" ".join(shlex.quote(f) for f in model.shape_flag_list()))
    r = tools.run_cmd(tools.format_cmd(args.compile_cmd, **values), timeout=args.timeout, env=SINGLE_THREAD)
    if not r.ok:
        row["error"] = f"compile: {r.first_error_line()}"
    else:
        row["compile_s"] = r.seconds
        os.makedirs(values["outputs"], exist_ok=True)
        r = tools.run_cmd(tools.format_cmd(args.run_cmd, **values), timeout=args.timeout, env=SINGLE_THREAD)
        times = tools.parse_step_times(r.stdout + "\n" + r.stderr)
        if not r.ok or not times:
            row["error"] = f"run: {r.first_error_line() if not r.ok else 'no step times in output'}"
        else:
            row["autopar_ms"] = summarize(times, args.warmup)

    r = tools.run_cmd(["node", tools.ORT_RUN, path, "--inputs", ins, "--repeat", str(args.steps),
                       "--threads", "1"], timeout=args.timeout)
    times = tools.parse_step_times(r.stdout)
    if not r.ok or not times:
        row["error"] += ("; " if row["error"] else "") + f"ort: {r.first_error_line()}"
    else:
        row["ort_ms"] = summarize(times, args.warmup)
    return row


def format_table(rows, markdown=False):
    head = ("model", "input shape", "autopar ms", "ort ms", "ratio ort/autopar", "compile s")

    def f(v, fmt):
        return "-" if v is None else format(v, fmt)

    body = []
    for r in rows:
        ratio = r["ort_ms"] / r["autopar_ms"] if r["ort_ms"] and r["autopar_ms"] else None
        body.append((r["model"], r["shape"], f(r["autopar_ms"], ".3f"), f(r["ort_ms"], ".3f"),
                     f(ratio, ".2f"), f(r["compile_s"], ".2f")))
    lines = results.table(list(head), [list(b) for b in body], markdown)
    notes = [f"{r['model']}: {r['error']}" for r in rows if r["error"]]
    return "\n".join(lines + ([""] if notes else []) + notes)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--build-dir", default=os.path.join(tools.REPO_ROOT, "build"))
    p.add_argument("--work-dir", default=None, help="exports, inputs, artifacts (default BUILD_DIR/bench)")
    p.add_argument("--models", default="gpt,bert", help="comma-separated (default gpt,bert)")
    p.add_argument("--steps", type=int, default=20, help="steps per tool (default 20)")
    p.add_argument("--warmup", type=int, default=1, help="leading steps left out of the median (default 1)")
    p.add_argument("--batch", type=int, default=None, help="override the batch dim of the inputs")
    p.add_argument("--seq", type=int, default=None, help="override the sequence dim (gpt: at most 32)")
    p.add_argument("--timeout", type=float, default=600)
    p.add_argument("--compile-cmd", default=tools.DEFAULT_COMPILE_CMD, help="default: %(default)s")
    p.add_argument("--run-cmd", default=tools.DEFAULT_RUN_CMD, help="default: %(default)s")
    p.add_argument("--reference", action="store_true", help="ORT on both sides (checks the script)")
    p.add_argument("--write-results", action="store_true", help=f"record the table in {results.RESULTS}")
    args = p.parse_args(argv)
    if args.reference:
        args.compile_cmd, args.run_cmd = tools.REFERENCE_COMPILE_CMD, tools.REFERENCE_RUN_CMD
    args.work_dir = os.path.abspath(args.work_dir or os.path.join(args.build_dir, "bench"))
    problem = tools.check_reference_installed()
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    names = [n for n in args.models.split(",") if n]
    for n in names:
        if n not in models.MODELS:
            p.error(f"unknown model '{n}'; known: {', '.join(models.MODELS)}")
    rows = []
    for n in names:
        try:
            rows.append(bench_model(n, args))
        except ValueError as e:
            p.error(str(e))
    print(f"# {results.machine_words()}")
    print(f"# median of steps {args.warmup + 1}..{args.steps}; single thread on both sides")
    if args.compile_cmd != tools.DEFAULT_COMPILE_CMD or args.run_cmd != tools.DEFAULT_RUN_CMD:
        print(f"# the 'autopar' column ran: {args.compile_cmd} ; {args.run_cmd}")
    print(format_table(rows))
    if args.write_results:
        results.record_run("CPU against onnxruntime (one thread)",
                           f"- median of steps {args.warmup + 1}..{args.steps}; ratio = ort ms / autopar ms",
                           format_table(rows, markdown=True))
        print(f"recorded in {results.RESULTS}")
    return 1 if any(r["error"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
