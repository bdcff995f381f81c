#!/usr/bin/python3
"""The torchvision sweep: every model of autopar.models.TORCHVISION against onnxruntime.

For each model (every classifier of Debian's torchvision 0.14, the segmentation models,
detection backbones with their FPN; `python3 -m autopar.models --list --torchvision`):
  1. export it with torch.onnx.export (autopar.export: seeded weights, opset 17; cached
     in WORK/models) and write a deterministic N(0,1) image, batch 1, --size x --size;
  2. onnxruntime (node tools/reference/ort-run.js, --threads intra-op threads, default
     one) runs it --steps times:
     the reference outputs and its per-run times;
  3. autopar-compile MODEL --cluster local:1 --input-shape x=1x3xSxS (timed), then
     autopar-run ARTIFACT --steps N --threads T with OMP_NUM_THREADS=OPENBLAS_NUM_THREADS=T
     (T = --threads, default 1);
  4. every output compared with onnxruntime's: max|out - ref| / max|ref| <= --tol (1e-4),
     same dtype and shape.
Times are medians of the steps after the first (--warmup); ratio = ort ms / autopar ms
(above 1: autopar is faster).  params counts the initializers' elements, ops the graph's
nodes.  A model that fails says at which stage (export, reference, compile, run,
compare) and the tool's error line, listed under the table; a command that runs past
--timeout seconds is killed and reported as such.  Exit status 1 if any model failed.

  bench/bench_torchvision.py --build-dir build                    # all (hours on 2 cores)
  bench/bench_torchvision.py --models resnet50,convnext_tiny -v   # some
  bench/bench_torchvision.py --skip 'regnet_y_128gf,vit_h_14'     # all but some
  bench/bench_torchvision.py --write-results                      # record in bench/RESULTS.md
  bench/bench_torchvision.py --models mobilenet_v3_large --threads 2   # both sides on 2 threads
  bench/bench_torchvision.py --reference                          # ORT on both sides (checks the script)
  bench/bench_torchvision.py --models resnet50 --openblas-too     # also autopar with OpenBLAS's GEMMs

Nothing is written into the repository unless --write-results is given.
"""

import argparse
import fnmatch
import json
import os
import shlex
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

from autopar import compare, models, tools  # noqa: E402

import results  # noqa: E402  (bench/results.py)

TITLE = "torchvision sweep against onnxruntime (one thread)"


def thread_env(threads):
    """The environment of autopar's commands: every BLAS and OpenMP on `threads`."""
    return {k: str(threads) for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}


def threads_words(threads):
    return "one thread" if threads == 1 else f"{threads} threads"


def median_after(times, warmup):
    kept = times[warmup:] if len(times) > warmup else times
    return statistics.median(kept) if kept else None


def graph_size(path):
    """(parameters, nodes) of an ONNX file: elements of its initializers (external data
    not read) and nodes of its main graph."""
    import onnx

    m = onnx.load(path, load_external_data=False)
    params = 0
    for t in m.graph.initializer:
        n = 1
        for d in t.dims:
            n *= d
        params += n
    return params, len(m.graph.node)


def bench_model(name, args, log):
    """One row: {model, params, ops, status, stage, error, max_rel, compile_s, autopar_ms,
    ort_ms, seconds}."""
    start = time.monotonic()
    row = {"model": name, "params": None, "ops": None, "status": "FAIL", "stage": "", "error": "",
           "max_rel": None, "compile_s": None, "autopar_ms": None, "ort_ms": None, "openblas_ms": None}

    def fail(stage, error):
        row.update(stage=stage, error=error, seconds=time.monotonic() - start,
                   status="TIMEOUT" if error.startswith("timed out") else "FAIL")
        return row

    model = models.get(name)
    x = model.inputs[0]
    shape = [1, 3, args.size, args.size]
    if x.shape != shape:
        try:
            model = models.with_shapes(name, {x.name: shape})
        except ValueError as e:
            return fail("export", str(e))
    work = os.path.join(args.work_dir, name)
    ins, ref, out = (os.path.join(work, d) for d in ("inputs", "reference", "outputs"))
    artifact = os.path.join(work, "artifact")
    try:
        path = models.export(name, args.models_dir, log=log)
        models.write_inputs(model, ins)
        row["params"], row["ops"] = graph_size(path)
    except Exception as e:  # an exporter error is a result, not a crash of the sweep
        msg = " ".join(f"{type(e).__name__}: {e}".split())
        return fail("export", msg[:500])

    cmd = ["node", tools.ORT_RUN, path, "--inputs", ins, "--outputs", ref, "--repeat", str(args.steps),
           "--threads", str(args.threads)]
    log(f"$ {' '.join(shlex.quote(c) for c in cmd)}")
    r = tools.run_cmd(cmd, timeout=args.timeout)
    if not r.ok:
        return fail("reference", r.first_error_line())
    row["ort_ms"] = median_after(tools.parse_step_times(r.stdout), args.warmup)

    values = tools.template_values(args.build_dir, model=path, artifact=artifact, inputs=ins, outputs=out,
                                   shape_flags=" ".join(shlex.quote(f) for f in model.shape_flag_list()),
                                   cluster="local:1", steps=args.steps)
    cmd = tools.format_cmd(args.compile_cmd, **values)
    log(f"$ {' '.join(shlex.quote(c) for c in cmd)}")
    r = tools.run_cmd(cmd, timeout=args.timeout, env=thread_env(1))
    if args.verbose and not r.ok:
        log((r.stdout + r.stderr).rstrip())
    if not r.ok:
        return fail("compile", r.first_error_line() if r.timed_out else _full_error(r))
    row["compile_s"] = r.seconds

    os.makedirs(out, exist_ok=True)
    cmd = tools.format_cmd(args.run_cmd, **values)
    if args.run_cmd == tools.DEFAULT_RUN_CMD:
        cmd += ["--threads", str(args.threads)]
    log(f"$ {' '.join(shlex.quote(c) for c in cmd)}")
    r = tools.run_cmd(cmd, timeout=args.timeout, env=thread_env(args.threads))
    if not r.ok:
        return fail("run", r.first_error_line())
    row["autopar_ms"] = median_after(tools.parse_step_times(r.stdout + "\n" + r.stderr), args.warmup)
    if args.openblas_too:
        # The same artifact with every GEMM on OpenBLAS (AUTOPAR_CPU_GEMM), in
        # this run: what oneDNN's sgemm gains on this machine.
        r = tools.run_cmd(cmd, timeout=args.timeout,
                          env={**thread_env(args.threads), "AUTOPAR_CPU_GEMM": "openblas"})
        if not r.ok:
            return fail("run (OpenBLAS GEMMs)", r.first_error_line())
        row["openblas_ms"] = median_after(tools.parse_step_times(r.stdout + "\n" + r.stderr),
                                          args.warmup)

    cmp = compare.compare_dirs(ref, out, tol=args.tol, names=list(model.outputs))
    log(compare.format_table(cmp))
    row["max_rel"] = max((c.metric for c in cmp), default=None)
    if not all(c.ok for c in cmp):
        return fail("compare", compare.first_failure(cmp))
    row.update(status="PASS", seconds=time.monotonic() - start)
    return row


def _full_error(r):
    """A compile error: the whole 'error:' line (the list of unsupported nodes is one
    line), else the most useful line."""
    for line in (r.stderr + "\n" + r.stdout).splitlines():
        if "error:" in line:
            return line.strip()
    return r.first_error_line()


def format_table(rows, markdown=False):
    head = ("model", "params", "ops", "status", "max rel err", "compile s", "autopar ms", "ort ms",
            "ratio ort/autopar")
    openblas = any(r.get("openblas_ms") for r in rows)
    if openblas:
        head += ("autopar ms, OpenBLAS GEMMs", "ratio ort/that")

    def f(v, fmt):
        return "-" if v is None else format(v, fmt)

    body = []
    for r in rows:
        ratio = r["ort_ms"] / r["autopar_ms"] if r["ort_ms"] and r["autopar_ms"] else None
        status = r["status"] + (f" [{r['stage']}]" if r["stage"] else "")
        body.append([r["model"], f"{r['params'] / 1e6:.1f}M" if r["params"] is not None else "-",
                     f(r["ops"], "d"), status, f(r["max_rel"], ".1e"), f(r["compile_s"], ".1f"),
                     f(r["autopar_ms"], ".1f"), f(r["ort_ms"], ".1f"), f(ratio, ".2f")])
        if openblas:
            that = r["ort_ms"] / r["openblas_ms"] if r["ort_ms"] and r.get("openblas_ms") else None
            body[-1] += [f(r.get("openblas_ms"), ".1f"), f(that, ".2f")]
    lines = results.table(list(head), body, markdown)
    notes = []
    for r in rows:
        if r["error"]:
            notes.append(f"- {r['model']}: [{r['stage']}] {r['error']}" if markdown
                         else f"{r['model']}: [{r['stage']}] {r['error']}")
    return "\n".join(lines + ([""] if notes else []) + notes)


def summary(rows):
    passed = sum(r["status"] == "PASS" for r in rows)
    timed_out = sum(r["status"] == "TIMEOUT" for r in rows)
    return f"{passed} passed, {len(rows) - passed - timed_out} failed, {timed_out} timed out"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--build-dir", default=os.path.join(tools.REPO_ROOT, "build"),
                   help="build directory holding bin/autopar-compile and bin/autopar-run")
    p.add_argument("--work-dir", default=None, help="inputs, outputs, artifacts (default BUILD_DIR/bench-torchvision)")
    p.add_argument("--models-dir", default=None, help="exported models, cached (default WORK_DIR/models)")
    p.add_argument("--models", default="", help="comma-separated names (default: every torchvision entry)")
    p.add_argument("--skip", default="", help="comma-separated names or globs to leave out")
    p.add_argument("--size", type=int, default=224, help="image height and width (default 224)")
    p.add_argument("--steps", type=int, default=3, help="runs per tool (default 3)")
    p.add_argument("--threads", type=int, default=1,
                   help="threads of both: autopar-run --threads and onnxruntime's intra-op threads (default 1)")
    p.add_argument("--warmup", type=int, default=1, help="leading runs left out of the median (default 1)")
    p.add_argument("--tol", type=float, default=1e-4, help="max |out-ref| / max |ref| (default 1e-4)")
    p.add_argument("--timeout", type=float, default=900, help="seconds per command (default 900)")
    p.add_argument("--compile-cmd", default=tools.DEFAULT_COMPILE_CMD, help="default: %(default)s")
    p.add_argument("--run-cmd", default=tools.DEFAULT_RUN_CMD, help="default: %(default)s")
    p.add_argument("--reference", action="store_true", help="ORT on both sides (checks the script)")
    p.add_argument("--openblas-too", action="store_true",
                   help="also time autopar with every GEMM on OpenBLAS (AUTOPAR_CPU_GEMM=openblas)")
    p.add_argument("--write-results", action="store_true", help=f"record the table in {results.RESULTS}")
    p.add_argument("--json", default=None, help="also write the rows to this JSON file (after every model)")
    p.add_argument("-v", "--verbose", action="store_true", help="print commands and comparison tables")
    args = p.parse_args(argv)
    if args.threads < 1:
        p.error(f"--threads expects at least 1, got {args.threads}")
    if args.reference:
        args.compile_cmd, args.run_cmd = tools.REFERENCE_COMPILE_CMD, tools.REFERENCE_RUN_CMD
    args.work_dir = os.path.abspath(args.work_dir or os.path.join(args.build_dir, "bench-torchvision"))
    args.models_dir = os.path.abspath(args.models_dir or os.path.join(args.work_dir, "models"))
    names = [n for n in args.models.split(",") if n] or list(models.TORCHVISION)
    for n in names:
        if n not in models.TORCHVISION and n not in models.MODELS:
            p.error(f"unknown model '{n}'; known: {', '.join(models.TORCHVISION)}")
    skips = [s for s in args.skip.split(",") if s]
    names = [n for n in names if not any(fnmatch.fnmatch(n, s) for s in skips)]
    problem = tools.check_reference_installed()
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2

    def log(msg):
        if args.verbose:
            print(msg, flush=True)

    rows = []
    for n in names:
        row = bench_model(n, args, log)
        rows.append(row)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(rows, f, indent=1)
        err = f" [{row['stage']}] {row['error'][:200]}" if row["error"] else ""
        rel = f", max rel error {row['max_rel']:.1e}" if row["max_rel"] is not None else ""
        print(f"{row['status']} {n} ({row['seconds']:.0f} s{rel}){err}", flush=True)
    print()
    print(f"# {results.machine_words()}")
    print(f"# {args.size}x{args.size}, batch 1; median of runs {args.warmup + 1}..{args.steps}; "
          f"{threads_words(args.threads)} on both sides")
    if args.compile_cmd != tools.DEFAULT_COMPILE_CMD or args.run_cmd != tools.DEFAULT_RUN_CMD:
        print(f"# the 'autopar' column ran: {args.compile_cmd} ; {args.run_cmd}")
    print(format_table(rows))
    print(summary(rows))
    if args.write_results:
        # A subset (--models, --skip) is its own block, so that it does not
        # replace the whole sweep's table among the current figures.
        title = TITLE if len(names) == len(models.TORCHVISION) and not args.models else (
            f"torchvision subset against onnxruntime ({threads_words(args.threads)}): {', '.join(names)}")
        if len(names) == len(models.TORCHVISION) and args.threads != 1:
            title = title.replace("(one thread)", f"({threads_words(args.threads)})")
        results.record_run(
            title,
            f"- {args.size}x{args.size} images, batch 1, seeded weights (autopar.export); outputs within "
            f"{args.tol:g} of onnxruntime's (max|out - ref| / max|ref|); median of runs "
            f"{args.warmup + 1}..{args.steps}; {threads_words(args.threads)} on both sides (autopar-run "
            f"--threads, onnxruntime's intra-op threads); ratio = ort ms / autopar ms; per-command timeout "
            f"{args.timeout:g} s\n- {summary(rows)}",
            format_table(rows, markdown=True))
        print(f"recorded in {results.RESULTS}")
    return 1 if any(r["status"] != "PASS" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
