#!/usr/bin/python3
"""ONNX backend node tests through autopar-compile + autopar-run.

Walks DATA/*/model.onnx (default: Debian's libonnx-testdata), keeps the tests whose
ops are all in SUPPORTED_OPS (expanded function bodies included), converts each
test_data_set_N/input_*.pb to .npy, compiles the model with
    autopar-compile model.onnx --cluster local:1 [--input-shape ...] -o ARTIFACT
runs it with
    autopar-run ARTIFACT --inputs IN --outputs OUT
and compares every output to output_*.pb like ONNX's backend tests
(assert_allclose, rtol=1e-3, atol=1e-7, plus dtype and shape).

The last line printed is `P passed, F failed` (`, S skipped` when tests were skipped:
selected by op but using strings, sequences, optionals or other types autopar's tools
cannot exchange as .npy).  Exit status: 1 if a failure is not listed in
--expect-failures or the pass rate (passed / (passed + failed)) is below --min-pass-rate;
else 0.

  test/Conformance/run_conformance.py --build-dir build              # all selected tests
  test/Conformance/run_conformance.py --filter '^test_gemm' -v       # some
  test/Conformance/run_conformance.py --list                         # what would run/skip
  test/Conformance/run_conformance.py --reference                    # ORT stands in for autopar
"""

import argparse
import concurrent.futures
import datetime
import os
import re
import shutil
import sys
import tempfile
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import TensorProto  # noqa: E402

from autopar import compare, dropout, onnx_data, tools  # noqa: E402

SUPPORTED_OPS = frozenset("""
Abs Add And Cast Concat Constant ConstantOfShape Div Equal Erf Exp Expand Flatten Gather
Einsum Gemm Greater GreaterOrEqual Identity LayerNormalization Less LessOrEqual Log LogSoftmax
MatMul Max Min Mul Neg Not Or Pow Range Reciprocal ReduceMax ReduceMean ReduceSum Relu
Reshape Shape Sigmoid Slice Softmax Split Sqrt Squeeze Sub Tanh Transpose Trilu Unsqueeze
Where Conv MaxPool AveragePool GlobalAveragePool BatchNormalization HardSigmoid HardSwish
LeakyRelu Clip Dropout SoftmaxCrossEntropyLoss NegativeLogLikelihoodLoss PRelu Elu Selu
Softplus Softsign Mod Tile Pad DepthToSpace SpaceToDepth
ArgMax ArgMin CumSum LpNormalization InstanceNormalization GlobalMaxPool ConvTranspose Resize TopK
Sum Mean ReduceL1 ReduceL2 ReduceSumSquare ScatterND
""".split())

# Variants of a supported op that autopar refuses by design, with the reason
# (autopar-compile says the same): such tests are skipped, not failed.
UNSUPPORTED_ATTRIBUTES = {
    ("Resize", "mode", "cubic"): "Resize mode 'cubic' is not supported (nearest, linear are)",
    ("Resize", "coordinate_transformation_mode", "tf_crop_and_resize"):
        "Resize coordinate_transformation_mode 'tf_crop_and_resize' is not supported",
}

DATA_ROOT = "/usr/share/libonnx-testdata/data"
# The ONNX backend node tests, and the models PyTorch's exporter made of torch.nn modules
# (pytorch-converted) and of torch operators (pytorch-operator).
DEFAULT_DATA = [os.path.join(DATA_ROOT, d) for d in ("node", "pytorch-converted", "pytorch-operator")]
# Tests whose expected outputs depend on the random number generator of the
# implementation that produced them (training-mode Dropout with a non-zero
# ratio). They run, and are checked against autopar's own masks instead
# (check_random_mask): the mask equals autopar.dropout's for --seed 0, step 1,
# kept elements are x / (1 - ratio), dropped ones 0.
NONDETERMINISTIC = re.compile(r"^test_training_dropout(?!.*zero_ratio)")
RTOL, ATOL = 1e-3, 1e-7


class Test:
    def __init__(self, name, path):
        self.name = name
        self.path = path
        self.ops = set()
        self.skip = ""  # reason the test is selected by op but cannot run
        self.status = ""  # passed / failed / skipped
        self.reason = ""
        self.stage = ""  # compile / run / compare / setup


def collect_ops(model):
    """(op types, problems) over the graph, its subgraphs and model-local functions."""
    ops, problems = set(), []

    def visit_attr(a):
        if a.type == onnx.AttributeProto.TENSOR and a.t.data_type == TensorProto.STRING:
            problems.append("string tensor attribute")
        if a.type == onnx.AttributeProto.STRINGS and a.name == "value_strings":
            problems.append("string tensor attribute")
        if a.name == "to" and a.type == onnx.AttributeProto.INT and a.i == TensorProto.STRING:
            problems.append("cast to string")
        if a.type == onnx.AttributeProto.GRAPH:
            walk(a.g)
        for g in a.graphs:
            walk(g)

    def walk(graph):
        for n in graph.node:
            ops.add(n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}::{n.op_type}")
            for a in n.attribute:
                visit_attr(a)
                reason = UNSUPPORTED_ATTRIBUTES.get(
                    (n.op_type, a.name, a.s.decode() if a.type == onnx.AttributeProto.STRING
                     else None))
                if reason:
                    problems.append(reason)
        for t in graph.initializer:
            if t.data_type == TensorProto.STRING:
                problems.append("string initializer")

    walk(model.graph)
    for f in model.functions:
        for n in f.node:
            ops.add(n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}::{n.op_type}")
            for a in n.attribute:
                visit_attr(a)
    return ops, problems


def io_problems(model):
    """Why the graph's inputs/outputs cannot be exchanged as .npy ('' if they can)."""
    for vi in list(onnx_data.graph_inputs(model)) + list(model.graph.output):
        kind = onnx_data.value_info_kind(vi)
        if kind != "tensor":
            return f"{kind} type ({vi.name})"
        et = vi.type.tensor_type.elem_type
        if et == TensorProto.STRING:
            return f"string tensor ({vi.name})"
        if et not in onnx_data.ONNX_TO_NUMPY:
            return f"element type {TensorProto.DataType.Name(et)} ({vi.name})"
        if not onnx_data.safe_file_name(vi.name):
            return f"name '{vi.name}' is not a file name"
    return ""


def discover(data_dir, name_filter):
    """All tests whose ops are supported; returns (selected tests, [(name, unsupported op
    types)] of the others)."""
    selected, other = [], []
    for name in sorted(os.listdir(data_dir)):
        path = os.path.join(data_dir, name)
        model_path = os.path.join(path, "model.onnx")
        if not os.path.isfile(model_path):
            continue
        if name_filter and not re.search(name_filter, name):
            continue
        try:
            model = onnx.load(model_path, load_external_data=False)
        except Exception as e:  # malformed test model: report, do not crash
            t = Test(name, path)
            t.skip = f"cannot load model.onnx: {e}"
            selected.append(t)
            continue
        ops, problems = collect_ops(model)
        if not ops <= SUPPORTED_OPS:
            other.append((name, sorted(ops - SUPPORTED_OPS)))
            continue
        t = Test(name, path)
        t.ops = ops
        t.skip = problems[0] if problems else io_problems(model)
        if not t.skip and not data_sets(path):
            t.skip = "no test_data_set_* directory"
        selected.append(t)
    return selected, other


def data_sets(path):
    return sorted(d for d in os.listdir(path) if d.startswith("test_data_set_")
                  and os.path.isdir(os.path.join(path, d)))


def dynamic_shape_flags(model, inputs_dir):
    """--input-shape flags for inputs whose declared shape is not fully static, taken
    from the test's input data."""
    shapes = {}
    for vi in onnx_data.graph_inputs(model):
        tt = vi.type.tensor_type
        static = tt.HasField("shape") and all(d.HasField("dim_value") for d in tt.shape.dim)
        npy = os.path.join(inputs_dir, vi.name + ".npy")
        if not static and os.path.exists(npy):
            shapes[vi.name] = list(np.load(npy, mmap_mode="r").shape)
    return tools.shape_flags(shapes)


def run_test(t, args, work_root):
    """Runs one test; sets t.status / t.reason."""
    work = os.path.join(work_root, t.name)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    model_path = os.path.join(t.path, "model.onnx")
    env = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    try:
        model = onnx.load(model_path, load_external_data=False)
        sets = []
        for ds in data_sets(t.path):
            ins, exp = os.path.join(work, ds, "inputs"), os.path.join(work, ds, "expected")
            onnx_data.convert_test_data_set(model, os.path.join(t.path, ds), ins, exp)
            sets.append((ds, ins, exp))
    except onnx_data.UnsupportedTensor as e:
        t.status, t.stage, t.reason = "skipped", "setup", str(e)
        return t
    except Exception as e:
        t.status, t.stage, t.reason = "failed", "setup", f"cannot convert test data: {e}"
        return t

    artifact = os.path.join(work, "artifact")
    values = tools.template_values(args.build_dir, model=model_path, artifact=artifact,
                                   shape_flags=dynamic_shape_flags(model, sets[0][1]))
    r = tools.run_cmd(tools.format_cmd(args.compile_cmd, **values), timeout=args.timeout, env=env)
    log = [f"$ {' '.join(r.cmd)}", r.stdout, r.stderr]
    # autopar compiles static shapes: an input that decides a shape (a Reshape
    # target, Slice bounds given as graph inputs) must be frozen with
    # --const-input, as a user would. The compiler names the input to freeze.
    frozen = []
    while not r.ok and len(frozen) < 8:
        m = re.search(r"--const-input (\S+)=FILE\.npy", r.stderr)
        if not m or m.group(1) in frozen:
            break
        frozen.append(m.group(1))
        values["shape_flags"] += f" --const-input {m.group(1)}={os.path.join(sets[0][1], m.group(1) + '.npy')}"
        r = tools.run_cmd(tools.format_cmd(args.compile_cmd, **values), timeout=args.timeout, env=env)
        log += [f"$ {' '.join(r.cmd)}", r.stdout, r.stderr]
    if frozen:
        t.note = "frozen inputs: " + ", ".join(frozen)
    if not r.ok:
        t.status, t.stage, t.reason = "failed", "compile", r.first_error_line()
        _write_log(work, log)
        return t
    for ds, ins, exp in sets:
        out = os.path.join(work, ds, "outputs")
        os.makedirs(out, exist_ok=True)
        values.update(inputs=ins, outputs=out, steps=1)
        r = tools.run_cmd(tools.format_cmd(args.run_cmd, **values), timeout=args.timeout, env=env)
        log += [f"$ {' '.join(r.cmd)}", r.stdout, r.stderr]
        if not r.ok:
            t.status, t.stage, t.reason = "failed", "run", r.first_error_line()
            _write_log(work, log)
            return t
        if NONDETERMINISTIC.search(t.name):
            results = check_random_mask(model, ins, out)
        else:
            results = compare_outputs(model, exp, out)
        log.append(compare.format_table(results))
        if not all(x.ok for x in results):
            t.status, t.stage = "failed", "compare"
            t.reason = (f"{ds}: " if len(sets) > 1 else "") + compare.first_failure(results)
            _write_log(work, log)
            return t
    t.status = "passed"
    _write_log(work, log)
    return t


def bf16_to_f32(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def compare_outputs(model, expected_dir, actual_dir):
    """assert_allclose(rtol=1e-3, atol=1e-7) per output, dtype and shape equal.
    bfloat16 outputs (stored as uint16 bits) are compared as values to within one
    bfloat16 ulp: ONNX 1.12's reference data truncates float -> bfloat16, while an
    implementation may round to nearest even."""
    bf16 = {o.name for o in model.graph.output if o.type.tensor_type.elem_type == TensorProto.BFLOAT16}
    plain = [o.name for o in model.graph.output if o.name not in bf16]
    results = compare.compare_dirs(expected_dir, actual_dir, rtol=RTOL, atol=ATOL, names=plain) if plain else []
    for name in sorted(bf16):
        bits = compare.compare_dirs(expected_dir, actual_dir, names=[name])[0]
        if bits.ok or bits.dtype != "uint16" or "dtype" in bits.note or "shape" in bits.note \
                or "missing" in bits.note or "cannot" in bits.note:
            results.append(bits)
            continue
        ref = np.load(os.path.join(expected_dir, name + ".npy"))
        act = np.load(os.path.join(actual_dir, name + ".npy"))
        results.append(compare.compare_arrays(name, bf16_to_f32(ref), bf16_to_f32(act), rtol=2.0 ** -7, atol=0.0))
    return results


def check_random_mask(model, inputs_dir, actual_dir):
    """A training-mode Dropout test: the outputs against autopar's own mask
    (autopar.dropout, --seed 0, step 1) instead of the reference's random
    one."""
    node = next(n for n in model.graph.node if n.op_type == "Dropout")
    x = np.load(os.path.join(inputs_dir, node.input[0] + ".npy"))
    ratio = 0.5
    if len(node.input) > 1 and node.input[1]:
        ratio = float(np.load(os.path.join(inputs_dir, node.input[1] + ".npy")))
    keep = dropout.dropout_keep(0, 1, node.output[0], x.shape, np.float32(ratio))
    want = {node.output[0]: np.where(keep, x * dropout.dropout_scale(ratio, x.dtype.type),
                                     np.zeros_like(x))}
    if len(node.output) > 1 and node.output[1]:
        want[node.output[1]] = keep
    results = []
    for name, expected in want.items():
        path = os.path.join(actual_dir, name + ".npy")
        if not os.path.exists(path):
            results.append(compare.Result(name=name, ok=False, dtype=str(expected.dtype),
                                          shape=tuple(expected.shape), note="missing"))
            continue
        results.append(compare.compare_arrays(name, expected, np.load(path), rtol=1e-6, atol=0.0))
    return results


def _write_log(work, lines):
    with open(os.path.join(work, "log.txt"), "w") as f:
        f.write("\n".join(l for l in lines if l) + "\n")


def read_expect_file(path):
    """Test names, one per line; '#' starts a comment."""
    names = set()
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                names.add(line.split()[0])
    return names


def md_escape(s):
    return s.replace("|", "\\|").replace("\n", " ")


def write_report(path, tests, other, args, summary):
    failed = [t for t in tests if t.status == "failed"]
    skipped = [t for t in tests if t.status == "skipped"]
    with open(path, "w") as f:
        f.write(f"# ONNX node conformance\n\n{summary}\n\n")
        f.write(f"- date: {datetime.datetime.now().isoformat(timespec='seconds')}\n")
        f.write(f"- data: {', '.join(f'`{d}`' for d in args.data)}\n- compile: `{args.compile_cmd}`\n- run: `{args.run_cmd}`\n")
        f.write(f"- comparison: assert_allclose rtol={RTOL:g} atol={ATOL:g}, dtype and shape equal\n\n")
        f.write("## Failures\n\n")
        if failed:
            f.write("| test | stage | expected | reason |\n| --- | --- | --- | --- |\n")
            for t in failed:
                f.write(f"| {t.name} | {t.stage} | {'yes' if t.name in args.expected else 'no'} | "
                        f"{md_escape(t.reason)} |\n")
        else:
            f.write("None.\n")
        if skipped:
            f.write("\n## Skipped\n\n| test | reason |\n| --- | --- |\n")
            for t in skipped:
                f.write(f"| {t.name} | {md_escape(t.reason)} |\n")
        if other:
            f.write("\n## Not selected (op types outside the supported list)\n\n| test | op types |\n"
                    "| --- | --- |\n")
            for name, ops in other:
                f.write(f"| {name} | {' '.join(ops)} |\n")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--build-dir", default=os.path.join(tools.REPO_ROOT, "build"),
                   help="build directory holding bin/autopar-compile and bin/autopar-run")
    p.add_argument("--data", action="append", default=None, metavar="DIR",
                   help="a test directory (repeatable; default: "
                        f"{', '.join(os.path.relpath(d, DATA_ROOT) for d in DEFAULT_DATA)} under {DATA_ROOT})")
    p.add_argument("--filter", default=None, help="only tests whose name matches this regex")
    p.add_argument("--list", action="store_true", help="list selected and skipped tests, run nothing")
    p.add_argument("-j", "--jobs", type=int, default=2, help="tests run in parallel (default 2)")
    p.add_argument("--report", default=None, help="write a markdown report of failures here")
    p.add_argument("--expect-failures", default=None,
                   help="file listing known failures (one test name per line, # comments)")
    p.add_argument("--min-pass-rate", type=float, default=0.95, help="default 0.95")
    p.add_argument("--timeout", type=float, default=300, help="seconds per command (default 300)")
    p.add_argument("--work-dir", default=None, help="keep per-test files (npy, artifact, log.txt) here")
    p.add_argument("--compile-cmd", default=tools.DEFAULT_COMPILE_CMD,
                   help="compile command template; placeholders {model} {artifact} {shape_flags} "
                        "{cluster} {bin} {build_dir} {ort_run} (default: %(default)s)")
    p.add_argument("--run-cmd", default=tools.DEFAULT_RUN_CMD,
                   help="run command template; placeholders {artifact} {inputs} {outputs} {model} "
                        "{steps} {bin} {build_dir} {ort_run} (default: %(default)s)")
    p.add_argument("--reference", action="store_true",
                   help="use onnxruntime (tools/reference/ort-run.js) instead of autopar, "
                        "to check the harness")
    p.add_argument("-v", "--verbose", action="store_true", help="print every test's result")
    args = p.parse_args(argv)
    if args.reference:
        args.compile_cmd, args.run_cmd = tools.REFERENCE_COMPILE_CMD, tools.REFERENCE_RUN_CMD
    args.data = args.data or DEFAULT_DATA
    for d in args.data:
        if not os.path.isdir(d):
            p.error(f"test data directory not found: {d} (apt-get install libonnx-testdata)")
    args.expected = read_expect_file(args.expect_failures) if args.expect_failures else set()

    tests, other, seen = [], [], {}
    for d in args.data:
        found, rest = discover(d, args.filter)
        for t in found:
            if t.name in seen:  # names key the expected failures and the work dirs
                p.error(f"test {t.name} is in both {seen[t.name]} and {d}")
            seen[t.name] = d
        tests += found
        other += rest
    runnable = [t for t in tests if not t.skip]
    for t in tests:
        if t.skip:
            t.status, t.reason = "skipped", t.skip
    if args.list:
        for t in tests:
            print(f"{t.name:60} {'skip: ' + t.skip if t.skip else ' '.join(sorted(t.ops))}")
        for name, ops in other:
            print(f"{name:60} not selected: {' '.join(ops)}")
        print(f"{len(runnable)} selected, {len(tests) - len(runnable)} skipped, "
              f"{len(other)} not selected (ops outside the supported list)")
        return 0
    if not args.reference:
        for tool in ("autopar-compile", "autopar-run"):
            exe = os.path.join(tools.build_bin(args.build_dir), tool)
            if "{bin}" in args.compile_cmd + args.run_cmd and not os.access(exe, os.X_OK):
                print(f"warning: {exe} not found; every test will fail (build first, or pass "
                      "--build-dir)", file=sys.stderr)

    work_root = args.work_dir or tempfile.mkdtemp(prefix="autopar-conformance-")
    os.makedirs(work_root, exist_ok=True)
    lock = threading.Lock()
    done = [0]

    def job(t):
        try:
            run_test(t, args, work_root)
        except Exception as e:  # a harness bug must not hide the other results
            t.status, t.stage, t.reason = "failed", "harness", f"{type(e).__name__}: {e}"
        with lock:
            done[0] += 1
            if args.verbose or t.status == "failed":
                tag = "PASS" if t.status == "passed" else t.status.upper()
                extra = f" [{t.stage}] {t.reason}" if t.status != "passed" else ""
                print(f"[{done[0]}/{len(runnable)}] {tag} {t.name}{extra}", flush=True)
        return t

    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            list(pool.map(job, runnable))
    finally:
        if not args.work_dir:
            shutil.rmtree(work_root, ignore_errors=True)

    passed = [t for t in tests if t.status == "passed"]
    failed = [t for t in tests if t.status == "failed"]
    skipped = [t for t in tests if t.status == "skipped"]
    unexpected = [t for t in failed if t.name not in args.expected]
    fixed = sorted(n for n in args.expected if n in {t.name for t in passed})
    rate = len(passed) / max(1, len(passed) + len(failed))
    summary = f"{len(passed)} passed, {len(failed)} failed" + (f", {len(skipped)} skipped" if skipped else "")
    if args.report:
        write_report(args.report, tests, other, args, summary)
    if args.expect_failures:
        if unexpected:
            print(f"unexpected failures ({len(unexpected)}): " + " ".join(t.name for t in unexpected))
        if fixed:
            print(f"listed as expected failures but passed ({len(fixed)}): " + " ".join(fixed))
    if rate < args.min_pass_rate:
        print(f"pass rate {rate:.1%} is below {args.min_pass_rate:.0%}")
    print(summary)
    # Without --expect-failures every failure is unexpected.
    return 1 if unexpected or rate < args.min_pass_rate else 0


if __name__ == "__main__":
    sys.exit(main())
