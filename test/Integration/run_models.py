#!/usr/bin/python3
"""Real models end to end: autopar's outputs against onnxruntime's.

For each model of autopar.models (default: gpt, bert, mlp, resnet18, mobilenet_v3_small,
lraspp_mobilenet_v3_large, paddleocr-rec; --models also takes the torchvision sweep's names):
  1. export it to WORK/models/NAME.onnx (cached; PyTorch models are seeded) and write
     deterministic inputs to WORK/NAME/inputs/<input>.npy;
  2. run the reference: node tools/reference/ort-run.js (CPU, 1 thread) -> WORK/NAME/reference;
  3. autopar-compile NAME.onnx --cluster local:1 --input-shape ... -o WORK/NAME/artifact;
  4. autopar-run WORK/NAME/artifact --inputs ... --outputs WORK/NAME/outputs;
  5. compare every output: max|out - ref| / max|ref| <= --tol (default 1e-4), same
     dtype and shape.
The last line printed is `P passed, F failed`; exit status 1 if anything failed.

  test/Integration/run_models.py --build-dir build
  test/Integration/run_models.py --models gpt,bert -v
  test/Integration/run_models.py --reference          # ORT stands in for autopar
  test/Integration/run_models.py --cluster local:2 --launcher 'mpirun -np 2'
  test/Integration/run_models.py --cluster local:2 --launcher 'mpirun -np 2' --check-comm
  test/Integration/run_models.py --models gpt --input-shape idx=8x32 ...  # another batch
  test/Integration/run_models.py --models resnet18,paddleocr-rec --batch 2 ...  # every model's batch
  test/Integration/run_models.py --models squeezenet1_1,googlenet --input-shape x=1x3x64x64
      # torchvision models of the sweep (autopar.models.TORCHVISION, bench/bench_torchvision.py)
      # also run; ctest's integration-torchvision runs a few small ones so

--check-comm: the compile writes its plan report, the run its measured collectives
(autopar-run --comm-stats-json), and every (axis, operation) must have exactly the
predicted number of calls and bus bytes (the runtime's own traffic, scattering inputs and
gathering outputs, is on the "world" scope and not part of the plan).
"""

import argparse
import json
import os
import shlex
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))

from autopar import compare, models, tools  # noqa: E402


def run_model(name, args, log):
    """Returns (ok, stage, message, compile_seconds)."""
    model = models.get(name)
    shapes = {k: v for k, v in args.input_shapes.items() if k in model.input_shapes()}
    if args.batch:
        for i in model.inputs:
            if 0 in model.dynamic_dims.get(i.name, {}) and i.name not in shapes:
                shapes[i.name] = [args.batch] + list(i.shape[1:])
    if shapes:
        try:
            model = models.with_shapes(name, shapes)
        except ValueError as e:  # a static dim of this model's input
            return False, "export", str(e), None
    work = os.path.join(args.work_dir, name)
    ins, ref, out = (os.path.join(work, d) for d in ("inputs", "reference", "outputs"))
    artifact = os.path.join(work, "artifact")
    try:
        path = models.export(name, args.models_dir, log=log)
        models.write_inputs(model, ins, seed=args.seed)
    except Exception as e:
        return False, "export", f"{type(e).__name__}: {e}", None
    env = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}

    r = tools.run_cmd(["node", tools.ORT_RUN, path, "--inputs", ins, "--outputs", ref, "--threads", "1"],
                      timeout=args.timeout)
    if not r.ok:
        return False, "reference", r.first_error_line(), None

    values = tools.template_values(args.build_dir, model=path, artifact=artifact, inputs=ins, outputs=out,
                                   shape_flags=" ".join(shlex.quote(f) for f in model.shape_flag_list()),
                                   cluster=args.cluster, steps=1)
    cmd = tools.format_cmd(args.compile_cmd, **values)
    report, comm = os.path.join(work, "report.json"), os.path.join(work, "comm-stats.json")
    if args.check_comm:
        cmd += ["--report-json", report]
    log(f"$ {' '.join(shlex.quote(c) for c in cmd)}")
    r = tools.run_cmd(cmd, timeout=args.timeout, env=env)
    compile_s = r.seconds
    if args.verbose and (r.stdout or r.stderr):
        log((r.stdout + r.stderr).rstrip())
    if not r.ok:
        return False, "compile", r.first_error_line(), compile_s

    os.makedirs(out, exist_ok=True)
    cmd = shlex.split(args.launcher) + tools.format_cmd(args.run_cmd, **values)
    if args.check_comm:
        cmd += ["--comm-stats-json", comm]
    log(f"$ {' '.join(shlex.quote(c) for c in cmd)}")
    r = tools.run_cmd(cmd, timeout=args.timeout, env=env)
    if args.verbose and (r.stdout or r.stderr):
        log((r.stdout + r.stderr).rstrip())
    if not r.ok:
        return False, "run", r.first_error_line(), compile_s

    results = compare.compare_dirs(ref, out, tol=args.tol, names=list(model.outputs))
    log(compare.format_table(results))
    if not all(x.ok for x in results):
        return False, "compare", compare.first_failure(results), compile_s
    worst = max(x.metric for x in results)
    if args.check_comm:
        with open(report) as f, open(comm) as g:
            predicted, measured = json.load(f), json.load(g)
        mismatches = compare.compare_collectives(predicted, measured)
        for m in mismatches:
            log(f"  communication: {m}")
        if mismatches:
            return False, "communication", mismatches[0], compile_s
        return True, "", f"max rel error {worst:.2e}; collectives as predicted " \
            f"({compare.describe_collectives(predicted)})", compile_s
    return True, "", f"max rel error {worst:.2e}", compile_s


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--build-dir", default=os.path.join(tools.REPO_ROOT, "build"),
                   help="build directory holding bin/autopar-compile and bin/autopar-run")
    p.add_argument("--work-dir", default=None,
                   help="exports (cached), inputs, reference and outputs (default BUILD_DIR/integration)")
    p.add_argument("--models-dir", default=None,
                   help="exported models (cached; default WORK_DIR/models), shareable between work dirs")
    p.add_argument("--models", default=",".join(models.MODELS),
                   help="comma-separated model names (default: %(default)s)")
    p.add_argument("--tol", type=float, default=1e-4, help="max |out-ref| / max |ref| (default 1e-4)")
    p.add_argument("--seed", type=int, default=0, help="input seed (default 0)")
    p.add_argument("--timeout", type=float, default=600, help="seconds per command (default 600)")
    p.add_argument("--cluster", default="local:1", help="--cluster for autopar-compile (default local:1)")
    p.add_argument("--launcher", default="", help="prefix for the run command, e.g. 'mpirun -np 2'")
    p.add_argument("--compile-cmd", default=tools.DEFAULT_COMPILE_CMD,
                   help="compile command template (see autopar/tools.py; default: %(default)s)")
    p.add_argument("--run-cmd", default=tools.DEFAULT_RUN_CMD,
                   help="run command template (default: %(default)s)")
    p.add_argument("--input-shape", action="append", default=[], metavar="NAME=D0xD1...",
                   help="use this shape for the models' input NAME (dynamic dims only; repeatable)")
    p.add_argument("--batch", type=int, default=0, metavar="N",
                   help="use batch N for every model: dim 0 of each input whose dim 0 is dynamic "
                        "(--input-shape takes precedence)")
    p.add_argument("--reference", action="store_true",
                   help="use onnxruntime instead of autopar, to check the harness")
    p.add_argument("--check-comm", action="store_true",
                   help="also check that the collectives each rank issued (autopar-run --comm-stats-json) "
                        "are exactly those the plan report predicted (calls and bus bytes per axis and op)")
    p.add_argument("-v", "--verbose", action="store_true", help="print commands, tool output and tables")
    args = p.parse_args(argv)
    if args.reference:
        args.compile_cmd, args.run_cmd = tools.REFERENCE_COMPILE_CMD, tools.REFERENCE_RUN_CMD
    args.input_shapes = {}
    for flag in args.input_shape:
        name, _, dims = flag.partition("=")
        try:
            args.input_shapes[name] = [int(d) for d in dims.split("x")]
        except ValueError:
            p.error(f"--input-shape {flag}: expected NAME=D0xD1x...")
    args.work_dir = os.path.abspath(args.work_dir or os.path.join(args.build_dir, "integration"))
    args.models_dir = os.path.abspath(args.models_dir or os.path.join(args.work_dir, "models"))
    names = [n for n in args.models.split(",") if n]
    for n in names:
        if n not in models.known():
            p.error(f"unknown model '{n}'; known: {', '.join(models.known())}")
    problem = tools.check_reference_installed()
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2

    def log(msg):
        if args.verbose:
            print(msg, flush=True)

    passed = failed = 0
    rows = []
    for n in names:
        start = time.monotonic()
        ok, stage, msg, compile_s = run_model(n, args, log)
        total = time.monotonic() - start
        passed, failed = passed + ok, failed + (not ok)
        rows.append((n, "PASS" if ok else f"FAIL [{stage}]",
                     f"{compile_s:.1f}" if compile_s is not None else "-", f"{total:.1f}", msg))
        print(f"{'PASS' if ok else 'FAIL'} {n}: {'' if ok else f'[{stage}] '}{msg}", flush=True)
    widths = [max(len(r[i]) for r in rows + [("model", "status", "compile_s", "total_s", "")])
              for i in range(4)]
    print()
    print("  ".join(h.ljust(w) for h, w in zip(("model", "status", "compile_s", "total_s"), widths)).rstrip())
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r[:4], widths)).rstrip())
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
