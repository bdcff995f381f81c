#!/usr/bin/python3
"""Real models on NVIDIA GPUs: compile for a GPU cluster, check the device code, and
(when a GPU is usable) run them and compare with onnxruntime.

For each model (default mlp,gpt):
  1. compile it for --cluster (default dgx-h100:1, 8 GPUs: data-parallel, the global
     batch scaled up to a multiple of 8) and check the artifact without a GPU: the
     manifest's "target" and "device_code", every cubin with llvm-readelf (ELF machine
     NVIDIA CUDA, the cluster's sm_XX in the flags, .text.<kernel> sections), and that
     stage0.so leaves undefined only what the CUDA runtime provides (mgpu*,
     autopar_cuda_*, autopar_rt_*) and libc (docs/design/gpu-backend.md);
  2. if a GPU is usable (nvidia-smi -L lists one): compile it for one GPU of this
     machine's architecture in fp32, run it with autopar-run, and compare every output
     with onnxruntime's exactly as test/Integration/run_models.py does (--tol); then
     the same in bf16 (parameters and activations in bf16, f32 arithmetic), within
     --bf16-tol.
Without a usable GPU, step 2 is skipped: the script prints
"skipped: no usable NVIDIA GPU" and exits 77 (ctest's SKIP_RETURN_CODE) if step 1
passed. Exit status 1 if anything failed.

  test/Integration/run_models_gpu.py --build-dir build
  test/Integration/run_models_gpu.py --models mlp -v
"""

import argparse
import json
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
sys.path.insert(0, HERE)

from autopar import models, tools  # noqa: E402
import run_models  # noqa: E402

SKIP = 77
# What the host code of a GPU program may leave undefined (gpu-backend.md), besides
# the loader's weak symbols and libc.
ALLOWED_UNDEFINED = re.compile(
    r"^(mgpu[A-Za-z0-9]+|_mlir_ciface_autopar_(cuda|rt)_[a-z0-9_]+|autopar_rt_[a-z_]+"
    r"|_ITM_[A-Za-z]+|__cxa_finalize|__gmon_start__|malloc|free|memcpy|memset)$")


def find_tool(names, extra_dirs=()):
    for d in extra_dirs:
        for n in names:
            p = os.path.join(d, n)
            if os.access(p, os.X_OK):
                return p
    for n in names:
        p = shutil.which(n)
        if p:
            return p
    return None


def usable_gpu_arch():
    """'sm_90' for the first GPU nvidia-smi lists, or None when no GPU is usable."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return None
    try:
        listed = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=60)
        if listed.returncode != 0 or "GPU" not in listed.stdout:
            return None
        cap = subprocess.run([smi, "--query-gpu=compute_cap", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.match(r"\s*(\d+)\.(\d+)", cap.stdout)
    return f"sm_{m.group(1)}{m.group(2)}" if m and cap.returncode == 0 else None


def one_gpu_cluster(path, arch):
    """A cluster file with one GPU of this machine's architecture (the numbers only
    steer the planner, which has nothing to choose on one GPU)."""
    cluster = {
        "name": "this-gpu", "nodes": 1, "gpus_per_node": 1,
        "gpu": {"name": f"local-{arch}", "memory_gib": 16, "arch": arch,
                "peak_tflops": {"fp32": 20, "tf32": 100, "bf16": 200, "fp16": 200},
                "memory_gbytes_per_s": 1000},
        "intra_node": {"kind": "pcie", "gbytes_per_s": 32, "latency_us": 5},
        "inter_node": {"kind": "none", "nic_gbits_per_s": 0, "nics_per_node": 0, "latency_us": 0},
    }
    with open(path, "w") as f:
        json.dump(cluster, f, indent=2)
    return path


def scaled_shape_flags(model, multiple):
    """The model's --input-shape flags with the leading (batch) dim scaled to a multiple
    of `multiple`, so that data parallelism over that many GPUs divides it."""
    flags = []
    for i in model.inputs:
        if i.name not in model.dynamic_dims:
            continue
        shape = list(i.shape)
        shape[0] = shape[0] * multiple // math.gcd(shape[0], multiple)
        flags += ["--input-shape", f"{i.name}={'x'.join(str(d) for d in shape)}"]
    return flags


def cuda_library_symbols(build_dir):
    """The `_mlir_ciface_autopar_cuda_*` entry points libautopar_cuda.so exports, or
    None when the build has no CUDA runtime library."""
    lib = os.path.join(os.path.abspath(build_dir), "lib", "libautopar_cuda.so")
    if not os.path.exists(lib):
        return None
    r = tools.run_cmd(["nm", "-D", "--defined-only", lib], timeout=60)
    if not r.ok:
        return None
    return {line.split()[-1] for line in r.stdout.splitlines()
            if "_mlir_ciface_autopar_cuda_" in line}


def check_artifact(artifact, arch, readelf, log, cuda_symbols=None):
    """Returns a list of problems with a GPU artifact (empty when it is fine)."""
    problems = []
    with open(os.path.join(artifact, "manifest.json")) as f:
        manifest = json.load(f)
    target = manifest.get("target", {})
    if target.get("kind") != "cuda" or target.get("arch") != arch:
        problems.append(f"manifest target is {target}, expected kind cuda, arch {arch}")
    cubins = [c for p in manifest.get("programs", []) for c in p.get("device_code", [])]
    if not cubins:
        problems.append("manifest lists no device_code")
    for cubin in cubins:
        path = os.path.join(artifact, cubin)
        if not os.path.exists(path):
            problems.append(f"{cubin} is listed but missing")
            continue
        r = tools.run_cmd([readelf, "-h", "-S", path], timeout=60)
        text = r.stdout
        if not r.ok:
            problems.append(f"llvm-readelf {cubin}: {r.first_error_line()}")
        elif "NVIDIA CUDA" not in text:
            problems.append(f"{cubin}: ELF machine is not NVIDIA CUDA")
        elif not re.search(rf"Flags:.*\b{arch}\b", text):
            problems.append(f"{cubin}: the ELF flags do not name {arch}")
        elif ".text." not in text:
            problems.append(f"{cubin}: no .text.<kernel> section")
        else:
            log(f"  {cubin}: {len(re.findall(r'[.]text[.]', text))} kernels for {arch}")
    r = tools.run_cmd(["nm", "-D", "--undefined-only", os.path.join(artifact, "stage0.so")],
                      timeout=60)
    if not r.ok:
        problems.append(f"nm stage0.so: {r.first_error_line()}")
    else:
        names = [l.split()[-1] for l in r.stdout.splitlines() if l.strip()]
        bad = [n for n in names if not ALLOWED_UNDEFINED.match(n)]
        # The kernels it calls (GEMMs, fused attention) must be the library's: a name
        # the compiler and the runtime spell differently fails only on a GPU otherwise.
        if cuda_symbols is not None:
            bad += [n for n in names if n.startswith("_mlir_ciface_autopar_cuda_")
                    and n not in cuda_symbols]
        if bad:
            problems.append("stage0.so needs symbols the CUDA runtime does not provide: "
                            + ", ".join(bad))
    return problems


def compile_check(name, args, arch, readelf, log):
    """Step 1: (ok, message)."""
    model = models.get(name)
    try:
        path = models.export(name, os.path.join(args.models_dir), log=log)
    except Exception as e:  # noqa: BLE001 - report any export failure as a test failure
        return False, f"[export] {type(e).__name__}: {e}"
    artifact = os.path.join(args.work_dir, name, f"artifact-{args.cluster.replace(':', '-')}")
    shutil.rmtree(artifact, ignore_errors=True)
    cmd = [os.path.join(tools.build_bin(args.build_dir), "autopar-compile"), path,
           "--cluster", args.cluster, *scaled_shape_flags(model, args.scale_batch), "-o", artifact]
    log(f"$ {' '.join(shlex.quote(c) for c in cmd)}")
    r = tools.run_cmd(cmd, timeout=args.timeout)
    if args.verbose and (r.stdout or r.stderr):
        log((r.stdout + r.stderr).rstrip())
    if not r.ok:
        return False, f"[compile] {r.first_error_line()}"
    problems = check_artifact(artifact, arch, readelf, log,
                              cuda_library_symbols(args.build_dir))
    if problems:
        return False, "[device code] " + "; ".join(problems)
    return True, f"compiled for {args.cluster} ({r.seconds:.1f} s), cubins check out"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--build-dir", default=os.path.join(tools.REPO_ROOT, "build"))
    p.add_argument("--work-dir", default=None, help="default BUILD_DIR/integration-gpu")
    p.add_argument("--models-dir", default=None,
                   help="exported models, cached (default BUILD_DIR/integration/models, shared "
                        "with run_models.py)")
    p.add_argument("--models", default="mlp,gpt", help="comma-separated (default %(default)s)")
    p.add_argument("--cluster", default="dgx-h100:1", help="GPU cluster to compile for in step 1")
    p.add_argument("--arch", default="sm_90", help="the architecture of --cluster's GPU")
    p.add_argument("--scale-batch", type=int, default=8,
                   help="step 1 scales the global batch to a multiple of this (the GPUs of "
                        "--cluster, default %(default)s)")
    p.add_argument("--tol", type=float, default=1e-4, help="max |out-ref| / max |ref| in fp32")
    p.add_argument("--bf16-tol", type=float, default=5e-2,
                   help="the same for bf16 (default %(default)s; bf16 keeps 8 significant bits)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout", type=float, default=600)
    p.add_argument("--no-run", action="store_true", help="step 1 only, even with a GPU")
    p.add_argument("--assume-gpu", metavar="ARCH", default=None,
                   help="run step 2 as if a GPU of ARCH (sm_90) were usable, without asking "
                        "nvidia-smi (to test this script, or when nvidia-smi is missing)")
    p.add_argument("-v", "--verbose", action="store_true")
    args = p.parse_args(argv)
    args.work_dir = os.path.abspath(args.work_dir or os.path.join(args.build_dir, "integration-gpu"))
    args.models_dir = os.path.abspath(args.models_dir or
                                      os.path.join(args.build_dir, "integration", "models"))
    names = [n for n in args.models.split(",") if n]
    for n in names:
        if n not in models.MODELS:
            p.error(f"unknown model '{n}'; known: {', '.join(models.MODELS)}")

    def log(msg):
        if args.verbose:
            print(msg, flush=True)

    readelf = find_tool(["llvm-readelf", "llvm-readelf-22"], ["/usr/lib/llvm-22/bin"])
    if not readelf:
        print("error: llvm-readelf not found (the cubin checks need it)", file=sys.stderr)
        return 2

    failed = 0
    for n in names:
        start = time.monotonic()
        ok, msg = compile_check(n, args, args.arch, readelf, log)
        failed += not ok
        print(f"{'PASS' if ok else 'FAIL'} {n} (device code): {msg} "
              f"[{time.monotonic() - start:.1f} s]", flush=True)

    arch = None if args.no_run else (args.assume_gpu or usable_gpu_arch())
    if arch is None:
        print(f"{len(names) - failed} passed, {failed} failed")
        if failed:
            return 1
        print("skipped: no usable NVIDIA GPU" if not args.no_run else "skipped: --no-run",
              flush=True)
        return SKIP

    problem = tools.check_reference_installed()
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    os.makedirs(args.work_dir, exist_ok=True)
    cluster = one_gpu_cluster(os.path.join(args.work_dir, f"one-{arch}.json"), arch)
    # The same harness as the CPU integration tests, on one GPU: fp32 (the
    # CPU tests' tolerance), then bf16.
    passed = 0
    for precision, tol in (("fp32", args.tol), ("bf16", args.bf16_tol)):
        run_args = argparse.Namespace(
            work_dir=os.path.join(args.work_dir, precision), cluster=cluster, launcher="",
            tol=tol, seed=args.seed, timeout=args.timeout, verbose=args.verbose,
            build_dir=args.build_dir,
            compile_cmd=tools.DEFAULT_COMPILE_CMD + f" --precision {precision}",
            run_cmd=tools.DEFAULT_RUN_CMD)
        for n in names:
            ok, stage, msg, _ = run_models.run_model(n, run_args, log)
            passed += ok
            failed += not ok
            print(f"{'PASS' if ok else 'FAIL'} {n} ({precision} on {arch}): "
                  f"{'' if ok else f'[{stage}] '}{msg}", flush=True)
    print(f"{passed} passed on {arch}, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
