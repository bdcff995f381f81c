#!/usr/bin/python3
"""Attention forward: fused (FlashAttention kernels) against unfused autopar and onnxruntime, one thread.

Two workloads, each compiled twice by autopar-compile --cluster local:1 (the default,
which rewrites softmax(Q Kᵀ · scale + mask) V into autopar.attention and runs the CPU
FlashAttention kernel, and --fuse-attention=false, the importer's ops), run by
autopar-run --steps N, and run by onnxruntime (node tools/reference/ort-run.js
--threads 1, as bench_cpu.py does), all with OMP/OPENBLAS/MKL_NUM_THREADS=1:

  1. attention alone: inputs q, k, v float32 [1, H, S, D] (H = 8, D = 64, seeded
     normal values), out = Softmax(MatMul(q, Transpose(k)) / sqrt(D) + mask) @ v.
     Cases (the "case" column):
       causal        the causal mask built in the graph exactly as the GPT exporter
                     (python/autopar/gpt_onnx.py) builds it: Where(Cast(Trilu(ones)),
                     0, -1e9), what a user's model gives
       causal const  the same mask as a graph input `mask` [S, S] frozen at compile
                     time with --const-input mask=mask.npy (ORT gets it as an input):
                     a compile-time constant, which the fusion recognises as causal
                     (the kernel skips the tiles above the diagonal, reads no mask)
       no mask       no mask at all (at --noncausal-sizes only)
  2. the GPT forward (bench/gen_gpt_onnx.py --layers 4 --hidden 256 --heads 4
     --vocab 1024 --seq S --weights; batch 1: --input-shape idx=1xS; logits checked).

For every row the fused compile is also run with --dump-ir: its model.ll must call
_mlir_ciface_autopar_cpu_attention_fwd_f32 (and the fused stage0.so reference it,
nm -D) and the unfused .so must not; the call's flags give the "kernel" column.
The fused output must equal the unfused one and ORT's within --tolerance (max |a - b|
/ max |b|); a mismatch or a missing kernel fails the script (exit status 1).

Columns:
  case, S           the workload (above) and sequence length
  fused ms          autopar, fused attention: median step time of autopar-run
  unfused ms        autopar --fuse-attention=false: the same
  ORT ms            onnxruntime (CPU EP, one intra-op thread, graph optimizations
                    'all'): median of its 'run i/N' times
  unfused/fused     speedup of fusing (above 1: the fused is faster)
  ORT/fused         above 1: the fused autopar is faster than onnxruntime
  fused MB, unfused MB, ORT MB
                    peak resident memory of the whole process (ru_maxrss through
                    os.wait4, bench_train.peak_rss_of): includes the runtime, the
                    code, the inputs and outputs; ORT's is the node process with
                    onnxruntime loaded (about 100 MB before any tensor)
  kernel            the fused kernel's flags: 'causal' (bit 0: tiles above the
                    diagonal skipped, no mask read), 'mask' (bit 1: an additive mask
                    tensor read), 'none'
  err unf, err ORT  max |fused - unfused| / max |unfused| and the same against ORT
The first --warmup steps of each tool are left out of the medians.

  bench/bench_attention.py                          # S = 512, 1024, 2048, 4096 and the GPT
  bench/bench_attention.py --quick                  # S = 512, 1024 (the GPT at 1024)
  bench/bench_attention.py --sizes 2048 --no-gpt --steps 5
  bench/bench_attention.py --write-results          # also the current figures in bench/RESULTS.md

Nothing is written into the repository unless --write-results is given; the models,
inputs and artifacts go under --work-dir (default BUILD_DIR/bench-attention).
"""

import argparse
import math
import os
import re
import shlex
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "python"))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from autopar import gpt_onnx, tools  # noqa: E402

import bench_train  # noqa: E402  (peak_rss_of)
import results  # noqa: E402  (bench/results.py)

SINGLE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
HEADS, HEAD_DIM = 8, 64
KERNEL = "_mlir_ciface_autopar_cpu_attention_fwd_f32"
GPT = dict(layers=4, hidden=256, heads=4, vocab=1024)


class BenchError(RuntimeError):
    pass


# ---------------------------------------------------------------------------------------
# Models and inputs

def attention_model(S, mask, path):
    """q, k, v [1, H, S, D] -> out; mask: 'graph' (gpt_onnx's Trilu/Where), 'input'
    (a graph input `mask` [S, S]) or None."""
    nodes = []

    def const(name, arr):
        nodes.append(helper.make_node("Constant", [], [name], name=name,
                                      value=numpy_helper.from_array(np.asarray(arr), name)))
        return name

    def op(op_type, inputs, out, **attrs):
        nodes.append(helper.make_node(op_type, inputs, [out], name=out, **attrs))
        return out

    kt = op("Transpose", ["k"], "k_t", perm=[0, 1, 3, 2])
    s = op("MatMul", ["q", kt], "scores")
    s = op("Div", [s, const("sqrt_d", np.array(math.sqrt(HEAD_DIM), np.float32))], "scaled")
    extra_inputs = []
    if mask == "graph":  # as python/autopar/gpt_onnx.py builds it
        ones = op("ConstantOfShape", [const("mask_shape", np.array([S, S], np.int64))], "mask_ones",
                  value=numpy_helper.from_array(np.array([1.0], np.float32), "one"))
        keep = op("Cast", [op("Trilu", [ones], "mask_lower", upper=0)], "mask_keep", to=TensorProto.BOOL)
        m = op("Where", [keep, const("mask_zero", np.array(0.0, np.float32)),
                         const("mask_neg", np.array(gpt_onnx.MASK_VALUE, np.float32))], "mask")
        s = op("Add", [s, m], "masked")
    elif mask == "input":
        extra_inputs.append(helper.make_tensor_value_info("mask", TensorProto.FLOAT, [S, S]))
        s = op("Add", [s, "mask"], "masked")
    p = op("Softmax", [s], "probs", axis=-1)
    op("MatMul", [p, "v"], "out")
    vi = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, HEADS, S, HEAD_DIM]) for n in "qkv"]
    graph = helper.make_graph(nodes, "attention", vi + extra_inputs,
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT,
                                                             [1, HEADS, S, HEAD_DIM])])
    model = helper.make_model(graph, producer_name="bench_attention",
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, path)


def causal_mask(S):
    return np.where(np.tril(np.ones((S, S), bool)), 0.0, gpt_onnx.MASK_VALUE).astype(np.float32)


def write_npy(d, arrays):
    os.makedirs(d, exist_ok=True)
    for k, v in arrays.items():
        np.save(os.path.join(d, k + ".npy"), v)
    return d


# ---------------------------------------------------------------------------------------
# Running

def median_ms(times, warmup):
    kept = times[warmup:] if len(times) > warmup else times
    return statistics.median(kept) if kept else None


def run_timed(cmd, log, warmup):
    """(median ms, peak MB) of cmd, which prints 'step i/N' or 'run i/N' lines."""
    rc, text, peak = bench_train.peak_rss_of(cmd, dict(SINGLE_THREAD, _BENCH_OUT=log))
    times = tools.parse_step_times(text)
    if rc != 0 or not times:
        tail = "\n".join(text.strip().splitlines()[-15:])
        raise BenchError(f"{' '.join(shlex.quote(c) for c in cmd)} failed (exit {rc}):\n{tail}")
    return median_ms(times, warmup), peak


def compile_artifact(args, model, out, flags, dump_ir=None):
    cmd = [os.path.join(tools.build_bin(args.build_dir), "autopar-compile"), model, "--cluster", "local:1",
           *flags, "-o", out] + (["--dump-ir", dump_ir] if dump_ir else [])
    r = tools.run_cmd(cmd, timeout=args.timeout, env=SINGLE_THREAD)
    if not r.ok:
        raise BenchError(f"autopar-compile failed: {r.first_error_line()}\n  {' '.join(cmd)}")
    return r.seconds


def references_kernel(artifact):
    """Whether the artifact's .so files import the fused forward kernel (nm -D)."""
    found = False
    for f in os.listdir(artifact):
        if f.endswith(".so"):
            r = subprocess.run(["nm", "-D", os.path.join(artifact, f)], capture_output=True, text=True)
            if r.returncode != 0:
                raise BenchError(f"nm -D {f} failed: {r.stderr.strip()}")
            found |= KERNEL in r.stdout
    return found


def kernel_flags(ir_dir):
    """The flags of every fused-kernel call in the dumped model.ll ('causal', 'mask', 'none')."""
    with open(os.path.join(ir_dir, "model.ll")) as f:
        text = f.read()
    words = []
    for m in re.finditer(rf"call void @{KERNEL}\(.*?, float [^,]+, i32 (\d+)\)", text):
        bits = int(m.group(1))
        words.append("causal" if bits & 1 else "mask" if bits & 2 else "none")
    return sorted(set(words))


def rel_err(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a.shape != b.shape:
        return float("inf")
    scale = np.abs(b).max()
    return float(np.abs(a - b).max() / (scale if scale > 0 else 1.0))


def bench_case(args, label, S, model, ins, ort_ins, out_name, shape_flags, fused_extra=()):
    """One row: compile fused and unfused, run both and ORT, check the outputs."""
    work = os.path.dirname(model)
    row = dict(case=label, S=S)
    fused, unfused, ir = (os.path.join(work, f"{label.replace(' ', '-')}-{x}") for x in ("fused", "unfused", "ir"))
    row["compile_s"] = compile_artifact(args, model, fused, [*shape_flags, *fused_extra], dump_ir=ir)
    compile_artifact(args, model, unfused, [*shape_flags, *fused_extra, "--fuse-attention=false"])
    if not references_kernel(fused):
        raise BenchError(f"{label} S={S}: the fused artifact does not call {KERNEL} (attention not fused)")
    if references_kernel(unfused):
        raise BenchError(f"{label} S={S}: the --fuse-attention=false artifact calls {KERNEL}")
    row["kernel"] = "+".join(kernel_flags(ir)) or "?"
    binr = os.path.join(tools.build_bin(args.build_dir), "autopar-run")
    outs = {}
    for side, art in (("fused", fused), ("unfused", unfused)):
        o = os.path.join(work, f"{label.replace(' ', '-')}-out-{side}")
        row[f"{side}_ms"], row[f"{side}_mb"] = run_timed(
            [binr, art, "--inputs", ins, "--outputs", o, "--steps", str(args.steps)],
            os.path.join(work, f"{label.replace(' ', '-')}-{side}.log"), args.warmup)
        outs[side] = np.load(os.path.join(o, out_name + ".npy"))
    o = os.path.join(work, f"{label.replace(' ', '-')}-out-ort")
    row["ort_ms"], row["ort_mb"] = run_timed(
        ["node", tools.ORT_RUN, model, "--inputs", ort_ins, "--outputs", o, "--repeat", str(args.steps),
         "--threads", "1"], os.path.join(work, f"{label.replace(' ', '-')}-ort.log"), args.warmup)
    outs["ort"] = np.load(os.path.join(o, out_name + ".npy"))
    row["err_unfused"] = rel_err(outs["fused"], outs["unfused"])
    row["err_ort"] = rel_err(outs["fused"], outs["ort"])
    row["ok"] = row["err_unfused"] <= args.tolerance and row["err_ort"] <= args.tolerance
    return row


def bench_attention(args, S, case):
    work = os.path.join(args.work_dir, f"attention-{S}")
    os.makedirs(work, exist_ok=True)
    rng = np.random.default_rng(S)
    qkv = {n: rng.standard_normal((1, HEADS, S, HEAD_DIM)).astype(np.float32) for n in "qkv"}
    ins = write_npy(os.path.join(work, "inputs"), qkv)
    if case == "causal":
        model = os.path.join(work, "causal.onnx")
        attention_model(S, "graph", model)
        return bench_case(args, case, S, model, ins, ins, "out", [])
    if case == "causal const":
        model = os.path.join(work, "causal-const.onnx")
        attention_model(S, "input", model)
        mask = os.path.join(work, "mask.npy")
        np.save(mask, causal_mask(S))
        ort_ins = os.path.join(work, "inputs-with-mask")
        os.makedirs(ort_ins, exist_ok=True)
        for n in "qkv":
            dst = os.path.join(ort_ins, n + ".npy")
            if os.path.lexists(dst):
                os.remove(dst)
            os.symlink(os.path.join(ins, n + ".npy"), dst)
        np.save(os.path.join(ort_ins, "mask.npy"), causal_mask(S))
        return bench_case(args, case, S, model, ins, ort_ins, "out", [], fused_extra=["--const-input", f"mask={mask}"])
    model = os.path.join(work, "nomask.onnx")
    attention_model(S, None, model)
    return bench_case(args, case, S, model, ins, ins, "out", [])


def bench_gpt(args):
    S = args.gpt_seq
    work = os.path.join(args.work_dir, f"gpt-{S}")
    os.makedirs(work, exist_ok=True)
    model = os.path.join(work, "model.onnx")
    argv = ["-o", model, "--seq", str(S), "--weights"] + [x for k, v in GPT.items() for x in (f"--{k}", str(v))]
    r = subprocess.run([sys.executable, os.path.join(HERE, "gen_gpt_onnx.py"), *argv], capture_output=True, text=True)
    if r.returncode != 0:
        raise BenchError(f"gen_gpt_onnx.py failed:\n{r.stderr[-2000:]}")
    idx = np.random.default_rng(0).integers(0, GPT["vocab"], (1, S)).astype(np.int64)
    ins = write_npy(os.path.join(work, "inputs"), {"idx": idx})
    return bench_case(args, "gpt", S, model, ins, ins, "logits", ["--input-shape", f"idx=1x{S}"])


# ---------------------------------------------------------------------------------------
# Report

def fmt(v, spec):
    return "-" if v is None else format(v, spec)


def format_table(rows, markdown=False):
    head = ["case", "S", "fused ms", "unfused ms", "ORT ms", "unfused/fused", "ORT/fused",
            "fused MB", "unfused MB", "ORT MB", "kernel", "err unf", "err ORT"]
    body = []
    for r in rows:
        f, u, o = r.get("fused_ms"), r.get("unfused_ms"), r.get("ort_ms")
        body.append([r["case"], str(r["S"]), fmt(f, ".2f"), fmt(u, ".2f"), fmt(o, ".2f"),
                     fmt(u / f if f and u else None, ".2f"), fmt(o / f if f and o else None, ".2f"),
                     fmt(r.get("fused_mb"), ".0f"), fmt(r.get("unfused_mb"), ".0f"), fmt(r.get("ort_mb"), ".0f"),
                     r.get("kernel", "-"), fmt(r.get("err_unfused"), ".1e"), fmt(r.get("err_ort"), ".1e")])
    return "\n".join(results.table(head, body, markdown))


def summary(rows):
    """Lines on the issue's targets: speedup at S = 2048, memory growth over S."""
    lines = []
    for case in ("causal", "causal const"):
        at = {r["S"]: r for r in rows if r["case"] == case}
        if 2048 in at:
            s = at[2048]["unfused_ms"] / at[2048]["fused_ms"]
            lines.append(f"- {case}, S = 2048: fused {s:.2f}x faster than unfused "
                         f"(target >= 2x: {'met' if s >= 2 else 'NOT met'})")
        ss = sorted(at)
        if len(ss) >= 2:
            a, b = ss[0], ss[-1]
            io = 4 * HEADS * HEAD_DIM * 4 * (b - a) / 2**20  # q, k, v, out
            lines.append(f"- {case}, S {a} -> {b}: peak memory grows {at[b]['fused_mb'] - at[a]['fused_mb']:.0f} MB "
                         f"fused, {at[b]['unfused_mb'] - at[a]['unfused_mb']:.0f} MB unfused, "
                         f"{at[b]['ort_mb'] - at[a]['ort_mb']:.0f} MB ORT (q, k, v and out grow {io:.0f} MB; "
                         f"one S x S x H f32 tensor is {4 * HEADS * b * b / 2**20:.0f} MB at S = {b})")
    return lines


def working_tree_note():
    try:
        r = subprocess.run(["git", "-C", REPO, "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True, timeout=10)
        return "the working tree had uncommitted changes" if r.stdout.strip() else "clean working tree"
    except (OSError, subprocess.SubprocessError):
        return "working tree state unknown"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--build-dir", default=os.path.join(REPO, "build"))
    p.add_argument("--work-dir", default=None, help="models, inputs, artifacts (default BUILD_DIR/bench-attention)")
    p.add_argument("--sizes", default="512,1024,2048,4096", help="sequence lengths (default: %(default)s)")
    p.add_argument("--quick", action="store_true", help="--sizes 512,1024")
    p.add_argument("--cases", default="causal,causal const",
                   help="attention cases at every size (default: %(default)s)")
    p.add_argument("--noncausal-sizes", default="1024", help="sizes of the 'no mask' case ('' for none; "
                   "default %(default)s)")
    p.add_argument("--gpt-seq", type=int, default=1024, help="the GPT's sequence length (default 1024)")
    p.add_argument("--no-gpt", action="store_true", help="skip the GPT forward")
    p.add_argument("--steps", type=int, default=12, help="steps per tool (default 12)")
    p.add_argument("--warmup", type=int, default=2, help="leading steps left out of the medians (default 2)")
    p.add_argument("--tolerance", type=float, default=1e-4, help="max relative error (default 1e-4)")
    p.add_argument("--timeout", type=float, default=600, help="per compile, seconds")
    p.add_argument("--write-results", action="store_true", help=f"record the table in {results.RESULTS}")
    args = p.parse_args(argv)
    args.build_dir = os.path.abspath(args.build_dir)
    args.work_dir = os.path.abspath(args.work_dir or os.path.join(args.build_dir, "bench-attention"))
    if args.quick:
        args.sizes = "512,1024"
    sizes = [int(x) for x in args.sizes.split(",") if x]
    nonc = [int(x) for x in args.noncausal_sizes.split(",") if x]
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    for c in cases:
        if c not in ("causal", "causal const", "no mask"):
            p.error(f"unknown case '{c}'; known: causal, causal const, no mask")
    if args.warmup >= args.steps:
        p.error("--warmup must be below --steps")
    problem = tools.check_reference_installed()
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2

    plan = [(c, S) for S in sizes for c in cases] + [("no mask", S) for S in nonc if "no mask" not in cases]
    rows, failures = [], []
    start = time.monotonic()
    for case, S in plan + ([("gpt", args.gpt_seq)] if not args.no_gpt else []):
        try:
            row = bench_gpt(args) if case == "gpt" else bench_attention(args, S, case)
        except BenchError as e:
            failures.append(f"{case} S={S}: {e}")
            print(f"error: {case} S={S}: {e}", file=sys.stderr, flush=True)
            continue
        rows.append(row)
        if not row["ok"]:
            failures.append(f"{case} S={S}: outputs differ: fused against unfused {row['err_unfused']:.2e}, "
                            f"against ORT {row['err_ort']:.2e} (tolerance {args.tolerance:g})")
        print(format_table([row]).splitlines()[-1], flush=True)

    print()
    print(f"# {results.machine_words()}")
    print(f"# median of steps {args.warmup + 1}..{args.steps}; one thread everywhere; "
          f"H = {HEADS}, D = {HEAD_DIM}; {time.monotonic() - start:.0f} s")
    table = format_table(rows)
    notes = summary(rows)
    gpt = (f"- gpt: bench/gen_gpt_onnx.py --layers {GPT['layers']} --hidden {GPT['hidden']} --heads "
           f"{GPT['heads']} --vocab {GPT['vocab']} --seq {args.gpt_seq} --weights, batch 1 (its mask: the "
           "causal case's Trilu/Where)") if not args.no_gpt else ""
    print(table)
    for line in notes + ([gpt] if gpt else []):
        print(line)
    for f in failures:
        print(f"FAILED: {f}", file=sys.stderr)
    if args.write_results:
        details = (f"- {working_tree_note()}\n"
                   f"- attention: q, k, v [1, {HEADS}, S, {HEAD_DIM}] f32; median of steps "
                   f"{args.warmup + 1}..{args.steps}; OMP/OPENBLAS_NUM_THREADS=1, ORT one thread; "
                   "MB = the process's peak resident memory; kernel = the fused kernel's flags; "
                   "err = max |fused - x| / max |x| (docstring of bench/bench_attention.py)")
        body = format_table(rows, markdown=True) + "\n\n" + "\n".join(notes + ([gpt] if gpt else []) +
                                                                     [f"- FAILED: {f}" for f in failures])
        results.record_run("Fused attention on CPU against unfused and onnxruntime (one thread)",
                           details, body.rstrip())
        print(f"recorded in {results.RESULTS}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
