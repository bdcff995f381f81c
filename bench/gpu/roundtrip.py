#!/usr/bin/env python3
"""The GPU round trip: compile here, run on a lent GPU machine, compare and time there.

The GPU machine has CUDA, PyTorch, onnxruntime and NumPy but no MLIR and no network, and
takes at most 64 MiB of files. So the work is split in two halves:

  prepare (on the build machine, needs the build tree and the reference tools):
      bench/gpu/roundtrip.py prepare --build-dir build --bundle .gpu
    writes BUNDLE/ (git-ignored) with
      rt/         autopar-run, libautopar_cuda.so, AutoparCudaDeviceTests and its test
                  stages, and deps.tar.xz: the shared libraries autopar-run needs that a
                  CUDA machine may lack (OpenBLAS, Open MPI's libmpi); cuBLASLt and NCCL
                  are NOT carried: the device's own (PyTorch's nvidia-* wheels) are used
      cases/      per model and precision: the artifact compiled for one GPU (sources
                  relative, the .onnx copied in), inputs and onnxruntime's outputs
      race/       per GPT-2 preset: the artifact (bf16, and fp32 for the smallest) and
                  its .onnx; the weights are written on the device from the same seed
                  (they are hundreds of MiB)
      train/      per training case (the models of test/Integration/train_vs_torch.py:
                  MLP, GPT, CNN with BatchNorm): the training artifact compiled for one
                  GPU, its data, and PyTorch's losses and trained parameters (fp32,
                  computed here on the same weights and data)
      bundle.json what is where, with tolerances

  device (on the GPU machine, from the repository root, BUNDLE carried):
      python3 bench/gpu/roundtrip.py device --bundle .gpu --out "$OUT"
    runs, in order, the parts named by --parts (default all):
      env        versions, the GPU, where cuBLASLt/NCCL were found, ldd of the runtime
      tests      AutoparCudaDeviceTests (the ctest -L cuda unit test)
      attention  the fused attention kernels (AutoparCudaDeviceTests' timing mode,
                 AUTOPAR_ATTENTION_TIMING=1) against PyTorch's scaled_dot_product_attention:
                 bf16, causal, forward and forward + backward, at GPT-2 small's shape
                 (B 8, H 12, S 1024, D 64) and B 4, H 16, S 2048, D 128
      models     every case: autopar-run, compare with onnxruntime's outputs (--tol)
      race       GPT-2 forward: autopar vs PyTorch eager and torch.compile (same weights,
                 logits compared), tokens/s and MFU; PyTorch's training step for scale
      train      every training case: autopar-run --train on the GPU, every step's loss
                 and the trained parameters against PyTorch's (the cross-entropy cases
                 run the fused softmax cross-entropy kernels)
      profile    Nsight Compute over one step of the trainrace artifact (after trainrace):
                 each kernel's GPU time, grouped, largest first (kernel_profile.py)
      calibrate  bench/gpu/gemm_sweep.py (bf16 and fp32) and the kernel launch overhead
    and prints one table per part; everything is also written to OUT/results.json and
    OUT/log.txt.

Figures go to bench/RESULTS.md with the command that made them; constants fitted by the
calibration go to lib/Planner/Compute.cpp and docs/cost-model.md.
"""

import argparse
import datetime
import glob
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(REPO, "python"))

# Libraries of the build machine that are part of every Linux or come with CUDA on the
# device; everything else autopar-run and libautopar_cuda.so link is carried.
SYSTEM_LIBS = re.compile(r"^(linux-vdso|ld-linux|libc|libm|libdl|librt|libpthread|libstdc\+\+|"
                         r"libgcc_s|libcublas|libcublasLt|libnccl|libcudart|libcuda)\.")

CASE_MODELS = ["mlp", "gpt", "bert", "resnet18", "mobilenet_v3_small"]
PRECISION_TOL = {"fp32": 1e-4, "bf16": 5e-2}
RACE_PRESETS = {"gpt2-small": 8, "gpt2-medium": 4}  # preset -> batch (sequence 1024)
# Training on one GPU: (case, model class of test/Integration/gradcheck.py, DeepSpeed
# config, precision). fp32 must match PyTorch fp32 within 1e-4 (losses and parameters);
# bf16 mixed precision's losses within 1e-2 relative of PyTorch fp32.
TRAIN_STEPS = 20
TRAIN_CASES = [
    ("mlp-adamw-cosine", "Mlp", {
        "train_batch_size": 6, "gradient_clipping": 0.5,
        "optimizer": {"type": "AdamW", "params": {
            "lr": 0.01, "betas": [0.9, 0.95], "eps": 1e-8, "weight_decay": 0.1}},
        "scheduler": {"type": "WarmupCosineLR", "params": {
            "warmup_num_steps": 3, "total_num_steps": 30}}}, "fp32"),
    ("gpt-adamw-cosine", "Gpt", {
        "train_batch_size": 3, "gradient_clipping": 1.0,
        "optimizer": {"type": "AdamW", "params": {
            "lr": 0.01, "betas": [0.9, 0.95], "eps": 1e-6, "weight_decay": 0.1}},
        "scheduler": {"type": "WarmupCosineLR", "params": {
            "warmup_num_steps": 2, "total_num_steps": 30}}}, "fp32"),
    ("cnn-adamw-decay", "Cnn", {
        "train_batch_size": 3, "gradient_clipping": 1.0,
        "optimizer": {"type": "AdamW", "params": {"lr": 0.003}},
        "scheduler": {"type": "WarmupDecayLR", "params": {
            "warmup_num_steps": 2, "total_num_steps": 30,
            "warmup_max_lr": 0.003, "warmup_type": "linear"}}}, "fp32"),
    ("gpt-sgd-accumulate", "Gpt", {
        "train_batch_size": 3, "train_micro_batch_size_per_gpu": 1,
        "optimizer": {"type": "SGD", "params": {"lr": 0.1, "momentum": 0.9}}}, "fp32"),
    ("gpt-adamw-bf16", "Gpt", {
        "train_batch_size": 3, "gradient_clipping": 1.0,
        "optimizer": {"type": "AdamW", "params": {"lr": 0.01, "eps": 1e-6}}}, "bf16"),
    ("cnn-adamw-bf16", "Cnn", {
        "train_batch_size": 3,
        "optimizer": {"type": "AdamW", "params": {"lr": 0.003}}}, "bf16"),
]
TRAIN_TOL = {"fp32": 1e-4, "bf16": 1e-2}
# Training with --loss cross-entropy:logits (the fused softmax cross-entropy kernels):
# test/Integration/train_vs_torch.py's VocabLogits (vocabulary 300, ignored labels), its
# losses and parameters against PyTorch's F.cross_entropy in fp32, as TRAIN_CASES.
LOSS_TRAIN_CASES = [
    ("logits-ce-fp32", {
        "train_batch_size": 4,
        "optimizer": {"type": "AdamW", "params": {"lr": 0.01}}}, "fp32"),
    ("logits-ce-bf16", {
        "train_batch_size": 4,
        "optimizer": {"type": "AdamW", "params": {"lr": 0.01}}}, "bf16"),
]
# The GPT-2 training step raced against PyTorch's (AdamW, clipping, bf16 mixed precision
# with f32 master weights: the GPU default).
GPT_TRAIN_CONFIG = {"gradient_clipping": 1.0, "optimizer": {
    "type": "AdamW", "params": {"lr": 1e-4, "weight_decay": 0.01}}}
H100_SXM_BF16_TFLOPS = 989.4  # dense, datasheet; the MFU denominator


def log_to(path):
    f = open(path, "a") if path else None

    def log(msg=""):
        print(msg, flush=True)
        if f:
            f.write(msg + "\n")
            f.flush()
    return log


def run(argv, env=None, timeout=600, cwd=None):
    start = time.monotonic()
    try:
        r = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout,
                           cwd=cwd)
        return r.returncode, r.stdout, r.stderr, time.monotonic() - start
    except subprocess.TimeoutExpired as e:
        return 124, e.stdout or "", (e.stderr or "") + f"\ntimed out after {timeout} s", timeout
    except OSError as e:
        return 127, "", f"{argv[0]}: {e}", time.monotonic() - start


# ---------------------------------------------------------------------------------------
# prepare


def ldd_closure(paths):
    """Carried shared libraries {soname: resolved path} of the given ELF files."""
    found = {}
    for p in paths:
        rc, out, err, _ = run(["ldd", p])
        if rc != 0:
            raise RuntimeError(f"ldd {p}: {err.strip()}")
        for line in out.splitlines():
            m = re.match(r"\s*(\S+) => (\S+)", line)
            if m and not SYSTEM_LIBS.match(m.group(1)):
                found[m.group(1)] = os.path.realpath(m.group(2))
    return found


def relative_sources(artifact, rename):
    """Rewrites the parameter sources (and the model path) of the artifact's manifest.
    rename: {source path on this machine: the path to use, relative to the artifact}."""
    path = os.path.join(artifact, "manifest.json")
    with open(path) as f:
        manifest = json.load(f)
    for arg in manifest["arguments"]:
        src = arg.get("source")
        if src:
            src["file"] = rename[src["file"]]
    manifest["model"] = os.path.basename(manifest.get("model", "model.onnx"))
    with open(path, "w") as f:
        json.dump(manifest, f, indent=1)


def prepare(args):
    if args.models or args.race or args.train_race:
        # NumPy, ONNX and PyTorch: not needed for a bundle of the runtime alone
        # (--models '' --race '' --train '' --train-race '': the tests and attention parts).
        from autopar import models, tools, gpt_onnx
    bundle = os.path.abspath(args.bundle)
    build_bin = os.path.join(os.path.abspath(args.build_dir), "bin")
    build_lib = os.path.join(os.path.abspath(args.build_dir), "lib")
    log = log_to(None)
    if os.path.exists(bundle):
        shutil.rmtree(bundle)
    os.makedirs(os.path.join(bundle, "rt", "bin"))
    os.makedirs(os.path.join(bundle, "rt", "lib"))
    cluster = os.path.join(HERE, "h100-1gpu.json")

    # The runtime and its unit test.
    binaries = [os.path.join(build_bin, "autopar-run"),
                os.path.join(build_bin, "AutoparCudaDeviceTests")]
    cuda_rt = os.path.join(build_lib, "libautopar_cuda.so")
    for b in binaries:
        shutil.copy(b, os.path.join(bundle, "rt", "bin"))
    shutil.copy(cuda_rt, os.path.join(bundle, "rt", "lib"))
    stages = os.path.join(os.path.abspath(args.build_dir), "unittests", "Runtime", "stages")
    shutil.copytree(stages, os.path.join(bundle, "rt", "stages"))
    deps = ldd_closure(binaries + [cuda_rt])
    with tarfile.open(os.path.join(bundle, "rt", "deps.tar.xz"), "w:xz") as tar:
        for soname, real in sorted(deps.items()):
            tar.add(real, arcname=soname)
    log(f"runtime: {len(deps)} carried libraries ({', '.join(sorted(deps))})")

    compile_bin = os.path.join(build_bin, "autopar-compile")
    models_dir = os.path.join(os.path.abspath(args.build_dir), "integration", "models")
    cases = []
    for name in [m for m in args.models.split(",") if m]:
        model = models.get(name)
        onnx_path = models.export(name, models_dir, log=lambda m: None)
        os.makedirs(os.path.join(bundle, "models"), exist_ok=True)
        shutil.copy(onnx_path, os.path.join(bundle, "models", model.file))
        for precision in args.precisions.split(","):
            case = f"{name}-{precision}"
            d = os.path.join(bundle, "cases", case)
            ins, ref, art = (os.path.join(d, x) for x in ("inputs", "reference", "artifact"))
            models.write_inputs(name, ins, seed=0)
            if not os.path.isdir(ref):
                rc, out, err, _ = run(["node", tools.ORT_RUN, onnx_path, "--inputs", ins,
                                       "--outputs", ref, "--threads", "1"])
                if rc != 0:
                    raise RuntimeError(f"onnxruntime on {name}: {err.strip()[-400:]}")
            cmd = [compile_bin, onnx_path, "--cluster", cluster, "--precision", precision,
                   *model.shape_flag_list(), "-o", art]
            rc, out, err, secs = run(cmd)
            if rc != 0:
                log(f"COMPILE FAIL {case}: {(out + err).strip().splitlines()[-1]}")
                continue
            relative_sources(art, {onnx_path: f"../../../models/{model.file}"})
            cases.append({"name": case, "model": name, "precision": precision,
                          "tol": PRECISION_TOL[precision], "outputs": list(model.outputs)})
            log(f"case {case}: compiled in {secs:.1f} s")

    race = []
    for preset in [p for p in args.race.split(",") if p]:
        batch = RACE_PRESETS[preset]
        for precision in (["bf16", "fp32"] if preset == "gpt2-small" else ["bf16"]):
            d = os.path.join(bundle, "race", f"{preset}-{precision}")
            os.makedirs(d)
            onnx_path = os.path.join(d, "model.onnx")
            gpt_onnx.main(["--preset", preset, "--batch", str(batch), "-o", onnx_path,
                           "--no-check"])
            art = os.path.join(d, "artifact")
            cmd = [compile_bin, onnx_path, "--cluster", cluster, "--precision", precision,
                   "-o", art, "--report-json", os.path.join(d, "report.json")]
            rc, out, err, secs = run(cmd)
            if rc != 0:
                log(f"COMPILE FAIL race {preset} {precision}: {(out + err).strip()[-400:]}")
                continue
            weights = os.path.join(d, "weights.bin")
            relative_sources(art, {weights: "../weights.bin"})
            with open(os.path.join(d, "report.json")) as f:
                predicted = json.load(f)["predicted"]["step_time_s"] * 1e3
            race.append({"preset": preset, "precision": precision, "batch": batch,
                         "dir": os.path.relpath(d, bundle), "predicted_ms": predicted})
            log(f"race {preset} {precision}: batch {batch}, compiled in {secs:.1f} s")

    train = prepare_train(compile_bin, bundle, cluster, args.train, log) if args.train else []
    train_race = []
    variants = [("", [])]
    if args.train_race_unfused:
        # The same step with attention unfused: the fused kernels' effect on this GPU.
        variants.append(("unfused", ["--fuse-attention=false"]))
    if args.train_race_unfused_loss:
        # The same step with the cross-entropy unfused (linalg, f32 loss head).
        variants.append(("unfused-loss", ["--fuse-cross-entropy=false"]))
    for preset, (variant, extra) in [(p, v) for p in args.train_race.split(",") if p
                                     for v in variants]:
        batch = RACE_PRESETS[preset]
        d = os.path.join(bundle, "train-race", preset + (f"-{variant}" if variant else ""))
        os.makedirs(d)
        onnx_path = os.path.join(d, "model.onnx")
        gpt_onnx.main(["--preset", preset, "--batch", str(batch), "-o", onnx_path,
                       "--no-check"])
        cfg = os.path.join(d, "config.json")
        with open(cfg, "w") as f:
            json.dump(GPT_TRAIN_CONFIG, f)
        art = os.path.join(d, "artifact")
        cmd = [compile_bin, onnx_path, "--cluster", cluster, "--mode", "train",
               "--loss", "cross-entropy:logits", "--train-config", cfg, "-o", art,
               "--report-json", os.path.join(d, "report.json")] + extra
        rc, out, err, secs = run(cmd, timeout=1800)
        if rc != 0:
            log(f"COMPILE FAIL train-race {preset} {variant}: {(out + err).strip()[-800:]}")
            continue
        relative_sources(art, {os.path.join(d, "weights.bin"): "../weights.bin"})
        with open(os.path.join(d, "report.json")) as f:
            predicted = json.load(f)["predicted"]["step_time_s"] * 1e3
        train_race.append({"preset": preset, "batch": batch, "predicted_ms": predicted,
                           "dir": os.path.relpath(d, bundle), "variant": variant})
        log(f"train-race {preset} {variant}: batch {batch}, compiled in {secs:.1f} s")

    rev = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"],
                         capture_output=True, text=True).stdout.strip()
    with open(os.path.join(bundle, "bundle.json"), "w") as f:
        json.dump({"created": datetime.datetime.now(datetime.timezone.utc).isoformat(),
                   "commit": rev, "cases": cases, "race": race, "train": train,
                   "train_race": train_race}, f, indent=1)
    size = sum(os.path.getsize(os.path.join(dp, fn)) for dp, _, fns in os.walk(bundle)
               for fn in fns)
    log(f"bundle {bundle}: {size / 2**20:.1f} MiB (the device takes at most 64 MiB with the "
        f"repository)")
    return 0


def prepare_train(compile_bin, bundle, cluster, names, log):
    """The training cases: export, data, the GPU artifact and PyTorch's reference."""
    import numpy as np
    import torch
    sys.path.insert(0, os.path.join(REPO, "test", "Integration"))
    import gradcheck
    import train_vs_torch
    train_vs_torch.STEPS = TRAIN_STEPS
    torch.set_num_threads(1)
    wanted = names.split(",")
    entries = []
    for name, cls_name, config, precision in TRAIN_CASES:
        if wanted != ["all"] and name not in wanted:
            continue
        cls = getattr(gradcheck, cls_name)
        d = os.path.join(bundle, "train", name)
        os.makedirs(d)
        torch.manual_seed(0)
        model = cls()
        batch = config["train_batch_size"]
        data = train_vs_torch.make_data(cls, batch)
        onnx_path = os.path.join(d, "model.onnx")
        torch.onnx.export(model, tuple(v[:batch] for v in data.values()), onnx_path,
                          training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False, input_names=list(data),
                          output_names=["loss"])
        data_dir = os.path.join(d, "data")
        os.makedirs(data_dir)
        shapes = []
        for key, value in data.items():
            np.save(os.path.join(data_dir, key + ".npy"), value.numpy())
            shapes += ["--input-shape",
                       key + "=" + "x".join(map(str, (batch,) + tuple(value.shape[1:])))]
        cfg = os.path.join(d, "config.json")
        with open(cfg, "w") as f:
            json.dump(config, f)
        art = os.path.join(d, "artifact")
        cmd = [compile_bin, onnx_path, "--cluster", cluster, "--mode", "train",
               "--train-config", cfg, "--precision", precision, *shapes, "-o", art]
        rc, out, err, secs = run(cmd)
        if rc != 0:
            log(f"COMPILE FAIL train {name}: {(out + err).strip()[-1500:]}")
            continue
        relative_sources(art, {onnx_path: "../model.onnx"})
        # The initial weights, for PyTorch's own bf16 run on the device.
        np.savez(os.path.join(d, "initial.npz"),
                 **{k: v.numpy() for k, v in model.state_dict().items()})
        # PyTorch in fp32 on the same weights and data (the model was not trained yet).
        reference_config = {k: v for k, v in config.items() if k != "bf16"}
        losses = train_vs_torch.torch_train(model, data, reference_config)
        tensors = {n: p.detach().numpy() for n, p in model.named_parameters()}
        tensors.update({n: b.numpy() for n, b in model.named_buffers()
                        if not n.endswith("num_batches_tracked")})
        np.savez(os.path.join(d, "reference.npz"), **tensors)
        entries.append({"name": name, "model": cls_name, "precision": precision,
                        "inputs": list(data),
                        "steps": TRAIN_STEPS, "tol": TRAIN_TOL[precision],
                        "reference_losses": losses, "config": config})
        log(f"train {name} ({precision}): compiled in {secs:.1f} s; PyTorch losses "
            f"{losses[0]:.5f} -> {losses[-1]:.5f}")
    for name, config, precision in LOSS_TRAIN_CASES:
        if wanted != ["all"] and name not in wanted:
            continue
        d = os.path.join(bundle, "train", name)
        os.makedirs(d)
        torch.manual_seed(0)
        model = train_vs_torch.VocabLogits()
        batch = config["train_batch_size"]
        data = train_vs_torch.vocab_data(batch)
        onnx_path = os.path.join(d, "model.onnx")
        torch.onnx.export(model, (data["idx"][:batch],), onnx_path,
                          training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False, input_names=["idx"],
                          output_names=["logits"])
        data_dir = os.path.join(d, "data")
        os.makedirs(data_dir)
        for key, value in data.items():
            np.save(os.path.join(data_dir, key + ".npy"), value.numpy())
        cfg = os.path.join(d, "config.json")
        with open(cfg, "w") as f:
            json.dump(config, f)
        art = os.path.join(d, "artifact")
        cmd = [compile_bin, onnx_path, "--cluster", cluster, "--mode", "train",
               "--loss", "cross-entropy:logits", "--train-config", cfg,
               "--precision", precision, "--input-shape",
               "idx=" + "x".join(map(str, (batch,) + tuple(data["idx"].shape[1:]))),
               "-o", art]
        rc, out, err, secs = run(cmd)
        if rc != 0:
            log(f"COMPILE FAIL train {name}: {(out + err).strip()[-1500:]}")
            continue
        relative_sources(art, {onnx_path: "../model.onnx"})
        losses = train_vs_torch.torch_train(train_vs_torch.WithCrossEntropy(model), data,
                                            config)
        np.savez(os.path.join(d, "reference.npz"),
                 **{n: p.detach().numpy() for n, p in model.named_parameters()})
        entries.append({"name": name, "model": None, "precision": precision,
                        "inputs": list(data), "steps": TRAIN_STEPS,
                        "tol": TRAIN_TOL[precision], "reference_losses": losses,
                        "config": config})
        log(f"train {name} ({precision}): compiled in {secs:.1f} s; PyTorch losses "
            f"{losses[0]:.5f} -> {losses[-1]:.5f}")
    return entries


# ---------------------------------------------------------------------------------------
# device


def find_libs():
    """Directories holding libcublasLt.so.13 and libnccl.so.2 on this machine."""
    dirs = []
    roots = [p for p in sys.path if os.path.isdir(p)] + ["/usr/local/cuda/lib64",
                                                         "/usr/local/cuda/lib"]
    for want in ("libcublasLt.so.13", "libnccl.so.2", "libcublas.so.13"):
        for root in roots:
            hits = glob.glob(os.path.join(root, "nvidia", "*", "lib", want)) + \
                glob.glob(os.path.join(root, "nvidia", "*", "*", "lib", want)) + \
                glob.glob(os.path.join(root, want))
            if hits:
                d = os.path.dirname(hits[0])
                if d not in dirs:
                    dirs.append(d)
                break
    return dirs


class Device:
    def __init__(self, args):
        self.args = args
        self.bundle = os.path.abspath(args.bundle)
        self.out = os.path.abspath(args.out)
        os.makedirs(self.out, exist_ok=True)
        self.log = log_to(os.path.join(self.out, "log.txt"))
        with open(os.path.join(self.bundle, "bundle.json")) as f:
            self.spec = json.load(f)
        self.results = {"bundle": self.spec, "date": datetime.date.today().isoformat()}
        deps = "/tmp/autopar-deps"
        os.makedirs(deps, exist_ok=True)
        with tarfile.open(os.path.join(self.bundle, "rt", "deps.tar.xz")) as tar:
            tar.extractall(deps)
        self.libdirs = [deps] + find_libs()
        self.env = dict(os.environ)
        self.env["LD_LIBRARY_PATH"] = ":".join(self.libdirs + [self.env.get("LD_LIBRARY_PATH", "")])
        self.run_bin = os.path.join(self.bundle, "rt", "bin", "autopar-run")
        for b in glob.glob(os.path.join(self.bundle, "rt", "bin", "*")):
            os.chmod(b, 0o755)

    def save(self):
        with open(os.path.join(self.out, "results.json"), "w") as f:
            json.dump(self.results, f, indent=1)

    # -- env
    def part_env(self):
        info = {}
        rc, out, err, _ = run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,"
                               "clocks.max.sm,compute_cap", "--format=csv,noheader"])
        info["gpu"] = out.strip()
        import torch
        info["torch"] = torch.__version__
        info["torch_cuda"] = torch.version.cuda
        info["libdirs"] = self.libdirs
        for lib in ("libcublasLt.so.13", "libnccl.so.2"):
            hits = [os.path.join(d, lib) for d in self.libdirs if os.path.exists(os.path.join(d, lib))]
            info[lib] = os.path.realpath(hits[0]) if hits else None
        rc, out, err, _ = run(["ldd", os.path.join(self.bundle, "rt", "lib", "libautopar_cuda.so")],
                              env=self.env)
        missing = [l.strip() for l in out.splitlines() if "not found" in l]
        info["ldd_missing"] = missing
        self.results["env"] = info
        for k, v in info.items():
            self.log(f"env {k}: {v}")

    # -- tests
    def part_tests(self):
        env = dict(self.env, AUTOPAR_RUN_PATH=self.run_bin,
                   AUTOPAR_TEST_STAGE_DIR=os.path.join(self.bundle, "rt", "stages"))
        argv = [os.path.join(self.bundle, "rt", "bin", "AutoparCudaDeviceTests")]
        if not shutil.which("mpirun"):
            # No MPI launcher on the device machine: the two-rank test needs one.
            argv.append("--gtest_filter=-*TwoRanks*")
        rc, out, err, secs = run(argv, env=env, timeout=300)
        self.log((out + err)[-6000:])
        self.results["tests"] = {"rc": rc, "seconds": secs, "argv": argv}
        self.log(f"tests: AutoparCudaDeviceTests exit {rc} in {secs:.1f} s")

    # -- attention
    def part_attention(self):
        import torch
        import torch.nn.functional as F
        env = dict(self.env, AUTOPAR_ATTENTION_TIMING="1")
        argv = [os.path.join(self.bundle, "rt", "bin", "AutoparCudaDeviceTests"),
                "--gtest_filter=CudaAttentionTiming.*:CudaCrossEntropyTiming.*"]
        rc, out, err, secs = run(argv, env=env, timeout=300)
        self.log((out + err)[-3000:])
        rows = [json.loads(line.split(" ", 1)[1]) for line in out.splitlines()
                if line.startswith("attention-timing ")]
        xent_rows = [json.loads(line.split(" ", 1)[1]) for line in out.splitlines()
                     if line.startswith("cross-entropy-timing ")]
        for row in xent_rows:
            # PyTorch's F.cross_entropy on the same bf16 logits: its forward,
            # and forward + backward (the logits' gradient).
            try:
                N, C = row["N"], row["C"]
                x = torch.randn(N, C, device="cuda", dtype=torch.bfloat16,
                                requires_grad=True)
                y = torch.randint(0, C, (N,), device="cuda")

                def xent_forward():
                    with torch.no_grad():
                        F.cross_entropy(x, y)

                def xent_both():
                    torch.autograd.grad(F.cross_entropy(x, y), (x,))
                row["torch_fwd_ms"] = time_cuda(xent_forward, 20)
                row["torch_fwdbwd_ms"] = time_cuda(xent_both, 20)
                row["fwd_ratio"] = row["fwd_ms"] / row["torch_fwd_ms"]
                row["fwdbwd_ratio"] = row["fwdbwd_ms"] / row["torch_fwdbwd_ms"]
                x = y = None
                torch.cuda.empty_cache()
            except Exception as e:  # noqa: BLE001 - keep autopar's figures
                row["torch_error"] = f"{type(e).__name__}: {str(e)[:300]}"
            self.log("cross-entropy " + format_fields(row))
        self.results["cross_entropy"] = xent_rows
        for row in rows:
            B, H, S, D = row["B"], row["H"], row["S"], row["D"]
            try:
                q, k, v, do = (torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16)
                               for _ in range(4))
                for t in (q, k, v):
                    t.requires_grad_(True)

                def forward():
                    with torch.no_grad():
                        F.scaled_dot_product_attention(q, k, v, is_causal=True)

                def both():
                    o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                    torch.autograd.grad(o, (q, k, v), do)
                row["torch_fwd_ms"] = time_cuda(forward, 20)
                row["torch_fwdbwd_ms"] = time_cuda(both, 20)
                flops = 4.0 * B * H * S * S * D / 2  # causal: half of S x S
                row["torch_fwd_tflops"] = flops / row["torch_fwd_ms"] * 1e-9
                row["torch_fwdbwd_tflops"] = 3.5 * flops / row["torch_fwdbwd_ms"] * 1e-9
                # > 1: autopar takes longer than PyTorch.
                row["fwd_ratio"] = row["fwd_ms"] / row["torch_fwd_ms"]
                row["fwdbwd_ratio"] = row["fwdbwd_ms"] / row["torch_fwdbwd_ms"]
                q = k = v = do = None
                torch.cuda.empty_cache()
            except Exception as e:  # noqa: BLE001 - keep autopar's figures
                row["torch_error"] = f"{type(e).__name__}: {str(e)[:300]}"
            self.log("attention " + format_fields(row))
        self.results["attention"] = {"rc": rc, "seconds": secs, "torch": torch.__version__,
                                     "rows": rows}
        if rc != 0 or not rows:
            raise RuntimeError(f"AutoparCudaDeviceTests' timing mode exited {rc} with "
                               f"{len(rows)} timings")

    # -- models
    def part_models(self):
        from autopar import compare, tools
        rows = []
        for case in self.spec["cases"]:
            d = os.path.join(self.bundle, "cases", case["name"])
            outs = os.path.join("/tmp/autopar-out", case["name"])
            shutil.rmtree(outs, ignore_errors=True)
            os.makedirs(outs)
            cmd = [self.run_bin, os.path.join(d, "artifact"), "--inputs", os.path.join(d, "inputs"),
                   "--outputs", outs, "--steps", str(self.args.steps)]
            rc, out, err, secs = run(cmd, env=self.env, timeout=300)
            row = {"case": case["name"], "rc": rc}
            if rc != 0:
                row["error"] = (err or out).strip().splitlines()[-1] if (err or out).strip() else "?"
                self.log(f"FAIL {case['name']} [run]: {(out + err).strip()[-1500:]}")
            else:
                times = tools.parse_step_times(out)
                row["step_ms"] = statistics.median(times[1:] or times) if times else None
                res = compare.compare_dirs(os.path.join(d, "reference"), outs, tol=case["tol"],
                                           names=case["outputs"])
                row["max_rel_err"] = max(r.metric for r in res)
                row["ok"] = all(r.ok for r in res)
                self.log(f"{'PASS' if row['ok'] else 'FAIL'} {case['name']}: max rel error "
                         f"{row['max_rel_err']:.2e} (tol {case['tol']:.0e}), step "
                         f"{row['step_ms']} ms")
                if not row["ok"]:
                    self.log(compare.format_table(res))
            rows.append(row)
            self.save()
        self.results["models"] = rows

    # -- race
    def part_race(self):
        import numpy as np
        import torch
        from autopar import gpt_onnx, tools
        rows = []
        for entry in self.spec["race"]:
            if self.args.race_only and f"{entry['preset']}-{entry['precision']}" not in \
                    self.args.race_only.split(","):
                continue
            preset, precision, batch = entry["preset"], entry["precision"], entry["batch"]
            d = os.path.join(self.bundle, entry["dir"])
            cfg = gpt_onnx.PRESETS[preset][0]
            cfg = gpt_onnx.replace(cfg, batch=batch)
            weights_path = os.path.join(d, "weights.bin")
            if not os.path.exists(weights_path):
                t0 = time.monotonic()
                w = gpt_onnx.random_weights(cfg, seed=0)
                gpt_onnx.write_weights(weights_path, cfg, w)
                self.log(f"race {preset}: wrote weights in {time.monotonic() - t0:.1f} s")
            else:
                w = gpt_onnx.random_weights(cfg, seed=0)
            S, V = cfg.seq, cfg.vocab
            tokens = batch * S
            rng = np.random.default_rng(1)
            idx = rng.integers(0, V, size=(batch, S), dtype=np.int64)
            ins = os.path.join("/tmp/autopar-race", preset + precision, "in")
            outs = os.path.join("/tmp/autopar-race", preset + precision, "out")
            os.makedirs(ins, exist_ok=True)
            os.makedirs(outs, exist_ok=True)
            np.save(os.path.join(ins, "idx.npy"), idx)
            flops = forward_flops(cfg) * batch
            row = {"preset": preset, "precision": precision, "batch": batch, "seq": S,
                   "forward_gflop": flops / 1e9}
            # autopar: one run that writes the logits, then a timed run.
            cmd = [self.run_bin, os.path.join(d, "artifact"), "--inputs", ins, "--outputs",
                   outs, "--steps", "1"]
            rc, out, err, secs = run(cmd, env=self.env, timeout=400)
            if rc != 0:
                row["autopar_error"] = (out + err).strip()[-800:]
                self.log(f"race {preset} {precision}: autopar-run failed: {row['autopar_error']}")
            else:
                cmd = [self.run_bin, os.path.join(d, "artifact"), "--inputs", ins,
                       "--steps", str(self.args.race_steps)]
                rc, out, err, secs = run(cmd, env=self.env, timeout=400)
                times = tools.parse_step_times(out)
                if rc == 0 and times:
                    ms = statistics.median(times[2:] or times)
                    row["autopar_ms"] = ms
                    self.log(f"race {preset} {precision}: autopar steps {times}")
                else:
                    row["autopar_error"] = (out + err).strip()[-800:]
            # PyTorch with the same weights.
            torch_dtype = torch.bfloat16 if precision == "bf16" else torch.float32
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
            model = TorchGpt(cfg, w).cuda().to(torch_dtype).eval()
            x = torch.from_numpy(idx).cuda()
            with torch.no_grad():
                ref = model(x).float()
                if "autopar_error" not in row:
                    got = torch.from_numpy(np.load(os.path.join(outs, "logits.npy"))).cuda().float()
                    row["logits_max_rel_err"] = float((got - ref).abs().max() / ref.abs().max())
                row["eager_ms"] = time_cuda(lambda: model(x), self.args.race_steps)
                try:
                    if self.args.no_torch_compile:
                        raise RuntimeError("skipped (--no-torch-compile)")
                    compiled = torch.compile(model)
                    row["compile_ms"] = time_cuda(lambda: compiled(x), self.args.race_steps)
                except Exception as e:  # noqa: BLE001 - report, do not stop the race
                    row["compile_error"] = f"{type(e).__name__}: {str(e)[:300]}"
            if precision == "bf16":
                row.update(torch_training(cfg, w, x, self.args.race_steps,
                                          not self.args.no_torch_compile))
            for k in ("autopar_ms", "eager_ms", "compile_ms", "train_eager_ms", "train_compile_ms"):
                if row.get(k):
                    row[k.replace("_ms", "_tokens_per_s")] = tokens / (row[k] / 1e3)
                    mult = 3 if k.startswith("train") else 1
                    row[k.replace("_ms", "_mfu")] = mult * flops / (row[k] / 1e3) / \
                        (H100_SXM_BF16_TFLOPS * 1e12)
            self.log(f"race {json.dumps(row)}")
            rows.append(row)
            model = compiled = None
            torch.cuda.empty_cache()
            self.results["race"] = rows
            self.save()

    # -- train
    def part_train(self):
        import numpy as np
        from autopar import tools
        rows = []
        for case in self.spec.get("train", []):
            d = os.path.join(self.bundle, "train", case["name"])
            out = os.path.join("/tmp/autopar-train", case["name"])
            shutil.rmtree(out, ignore_errors=True)
            os.makedirs(out)
            metrics = os.path.join(out, "metrics.jsonl")
            cmd = [self.run_bin, os.path.join(d, "artifact"), "--train", "--data",
                   os.path.join(d, "data"), "--steps", str(case["steps"]), "--metrics",
                   metrics, "--outputs", os.path.join(out, "params")]
            rc, stdout, err, secs = run(cmd, env=self.env, timeout=300)
            row = {"case": case["name"], "precision": case["precision"], "rc": rc}
            if rc != 0:
                row["error"] = (stdout + err).strip()[-1500:]
                self.log(f"FAIL train {case['name']} [run]: {row['error']}")
                rows.append(row)
                continue
            with open(metrics) as f:
                records = [json.loads(line) for line in f]
            losses = [r["loss"] for r in records if "loss" in r]
            want = case["reference_losses"]
            tol = case["tol"]
            if case["precision"] == "fp32":
                loss_err = max(abs(a - b) / max(1.0, abs(b)) for a, b in zip(losses, want))
            else:
                loss_err = max(abs(a - b) / abs(b) for a, b in zip(losses, want))
            reference = np.load(os.path.join(d, "reference.npz"))
            param_err = 0.0
            for pname in reference.files:
                path = os.path.join(out, "params", pname + ".npy")
                if not os.path.exists(path):
                    continue
                w = reference[pname]
                g = np.load(path)
                param_err = max(param_err, float(np.abs(g - w).max() /
                                                 max(np.abs(w).max(), 1e-6)))
            times = [r["step_time_s"] * 1e3 for r in records if "step_time_s" in r]
            row.update({"steps": len(losses), "loss_err": loss_err, "param_err": param_err,
                        "first_loss": losses[0] if losses else None,
                        "last_loss": losses[-1] if losses else None,
                        "step_ms": statistics.median(times[2:] or times) if times else None})
            # fp32: losses and parameters; bf16: the loss curve only.
            row["ok"] = len(losses) == case["steps"] and loss_err <= tol and (
                case["precision"] != "fp32" or param_err <= tol)
            if case["precision"] == "bf16" and case.get("model"):
                # PyTorch's own bf16 autocast on this GPU, from the same weights: how far
                # bf16 training drifts from fp32 anyway.
                try:
                    torch_losses = torch_bf16_losses(case, d)
                    row["torch_bf16_loss_err"] = max(
                        abs(a - b) / abs(b) for a, b in zip(torch_losses, want))
                except Exception as e:  # noqa: BLE001 - report it, keep the row
                    row["torch_bf16_error"] = f"{type(e).__name__}: {str(e)[:300]}"
            self.log(f"{'PASS' if row['ok'] else 'FAIL'} train {case['name']} "
                     f"({case['precision']}): loss {losses[0]:.5f} -> {losses[-1]:.5f}, max "
                     f"loss error {loss_err:.2e}, max parameter error {param_err:.2e} "
                     f"(tol {tol:.0e}), step {row['step_ms']} ms"
                     + (f"; PyTorch bf16 autocast's own loss error "
                        f"{row['torch_bf16_loss_err']:.2e}"
                        if "torch_bf16_loss_err" in row else ""))
            if not row["ok"]:
                self.log(f"  autopar {losses}\n  PyTorch {want}\n{stdout[-1500:]}")
            rows.append(row)
            self.results["train"] = rows
            self.save()
        self.results["train"] = rows

    # -- trainrace
    def part_trainrace(self):
        """autopar's GPT-2 training step (bf16 mixed precision) on the GPU: step time,
        tokens/s and MFU, and its first loss against PyTorch's on the same weights and
        batch; PyTorch's own training step is timed by the race part."""
        import numpy as np
        import torch
        import torch.nn.functional as F
        from autopar import gpt_onnx
        rows = []
        runs = [(entry, {}, entry.get("variant", ""))
                for entry in self.spec.get("train_race", [])]
        if self.args.trainrace_env:
            # The same artifacts again under runtime settings (an A/B of a runtime
            # switch on the same GPU, in the same run).
            settings = dict(kv.split("=", 1) for kv in self.args.trainrace_env.split(","))
            label = "env " + self.args.trainrace_env
            runs += [(entry, settings, label)
                     for entry in self.spec.get("train_race", []) if not entry.get("variant")]
        for entry, settings, variant in runs:
            preset, batch = entry["preset"], entry["batch"]
            d = os.path.join(self.bundle, entry["dir"])
            cfg = gpt_onnx.replace(gpt_onnx.PRESETS[preset][0], batch=batch)
            w = gpt_onnx.random_weights(cfg, seed=0)
            gpt_onnx.write_weights(os.path.join(d, "weights.bin"), cfg, w)
            S, V = cfg.seq, cfg.vocab
            rng = np.random.default_rng(1)
            idx = rng.integers(0, V, size=(3 * batch, S), dtype=np.int64)
            labels = np.roll(idx, -1, axis=1)
            data = os.path.join("/tmp/autopar-trainrace", preset)
            os.makedirs(data, exist_ok=True)
            np.save(os.path.join(data, "idx.npy"), idx)
            np.save(os.path.join(data, "labels.npy"), labels)
            metrics = os.path.join(data, "metrics.jsonl")
            if os.path.exists(metrics):
                os.remove(metrics)
            steps = self.args.race_steps + 2
            cmd = [self.run_bin, os.path.join(d, "artifact"), "--train", "--data", data,
                   "--steps", str(steps), "--metrics", metrics]
            rc, out, err, secs = run(cmd, env=dict(self.env, **settings), timeout=400)
            row = {"preset": preset, "batch": batch, "seq": S,
                   "predicted_ms": entry["predicted_ms"],
                   "variant": variant, "dir": entry["dir"],
                   "data": data}
            if rc != 0:
                row["error"] = (out + err).strip()[-1500:]
                self.log(f"trainrace {preset}: autopar-run failed: {row['error']}")
                rows.append(row)
                continue
            with open(metrics) as f:
                records = [json.loads(line) for line in f]
            row.update(device_memory_of(out, os.path.join(d, "report.json")))
            times = [r["step_time_s"] * 1e3 for r in records]
            row["autopar_ms"] = statistics.median(times[2:])
            row["losses"] = [r["loss"] for r in records]
            flops = 3 * forward_flops(cfg) * batch
            row["autopar_tokens_per_s"] = batch * S / (row["autopar_ms"] / 1e3)
            row["autopar_mfu"] = flops / (row["autopar_ms"] / 1e3) / \
                (H100_SXM_BF16_TFLOPS * 1e12)
            with torch.no_grad():
                model = TorchGpt(cfg, w).cuda()
                x = torch.from_numpy(idx[:batch]).cuda()
                y = torch.from_numpy(labels[:batch]).cuda()
                ref = float(F.cross_entropy(model(x).view(-1, V), y.view(-1)))
            row["torch_fp32_first_loss"] = ref
            row["first_loss_rel_err"] = abs(row["losses"][0] - ref) / abs(ref)
            self.log(f"trainrace {json.dumps(row)}")
            rows.append(row)
            model = None
            torch.cuda.empty_cache()
            self.results["train_race"] = rows
            self.save()
        self.results["train_race"] = rows

    # -- profile
    def part_profile(self):
        """Nsight Compute over one step of the first trainrace artifact (fused): the GPU
        time of every kernel, grouped (bench/gpu/kernel_profile.py); run after trainrace,
        which wrote its weights and data."""
        rows = [r for r in self.results.get("train_race", [])
                if "autopar_ms" in r and not r.get("variant")]
        if not rows:
            raise RuntimeError("profile needs a successful trainrace part before it")
        row = rows[0]
        csv_path = os.path.join(self.out, "ncu.csv")
        cmd = [sys.executable, os.path.join(HERE, "kernel_profile.py"), "--top", "25",
               "--csv", csv_path, "--", self.run_bin,
               os.path.join(self.bundle, row["dir"], "artifact"), "--train", "--data",
               row["data"], "--steps", "1"]
        rc, out, err, secs = run(cmd, env=self.env, timeout=self.args.profile_timeout)
        self.log(out[-6000:] + err[-2000:])
        self.results["profile"] = {"rc": rc, "seconds": secs, "table": out,
                                   "preset": row["preset"]}
        if rc != 0:
            raise RuntimeError(f"kernel_profile exited {rc}")

    # -- calibrate
    def part_calibrate(self):
        cal = {}
        for dtype, peak in (("bf16", 989.4), ("fp32", 66.9)):
            argv = [sys.executable, os.path.join(HERE, "gemm_sweep.py"), "--dtype", dtype,
                    "--peak-tflops", str(peak), "--peak-gbytes-per-s", "3350"]
            if dtype == "fp32":
                argv += ["--max-size", "8192"]
            rc, out, err, secs = run(argv, timeout=400)
            self.log(out + err)
            cal[dtype] = {"rc": rc, "output": out, "seconds": secs}
        cal["launch"] = launch_overhead()
        self.log(f"launch overhead: {cal['launch']}")
        self.results["calibrate"] = cal
        self.save()


def torch_bf16_losses(case, d):
    """PyTorch's losses for a training case under bf16 autocast on the GPU, from the
    case's initial weights (test/Integration's models and training loop)."""
    import numpy as np
    import torch
    sys.path.insert(0, os.path.join(REPO, "test", "Integration"))
    import gradcheck
    import train_vs_torch
    train_vs_torch.STEPS = case["steps"]
    model = getattr(gradcheck, case["model"])()
    initial = np.load(os.path.join(d, "initial.npz"))
    model.load_state_dict({k: torch.from_numpy(initial[k]) for k in initial.files})

    class Autocast(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, *args):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                return self.inner(*args).float()

    data = {}
    for name in case["inputs"]:
        data[name] = torch.from_numpy(np.load(os.path.join(d, "data", name + ".npy"))).cuda()
    config = {k: v for k, v in case["config"].items() if k != "bf16"}
    return train_vs_torch.torch_train(Autocast(model.cuda()), data, config)


def forward_flops(cfg):
    """Matrix-multiply FLOPs of one sequence's forward (attention unmasked, as the
    generated graph computes it): per layer 2 S (4 H^2 + 2 H F) + 4 S^2 H, plus the
    LM head 2 S H V."""
    S, H, V, L = cfg.seq, cfg.hidden, cfg.vocab, cfg.layers
    return L * 2 * S * (4 * H * H + 2 * H * cfg.ffn) + L * 4 * S * S * H + 2 * S * H * V


def format_fields(row):
    """`key value, ...` for a log line, floats to four digits."""
    return ", ".join(f"{key} {val:.4g}" if isinstance(val, float) else f"{key} {val}"
                     for key, val in row.items())


def time_cuda(fn, steps, warmup=3):
    import torch
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(steps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def device_memory_of(output, report_path):
    """The training step's GPU memory: autopar-run's peak (its caching allocator's
    high-water mark and what it took from the driver) and the plan report's prediction
    (memory_per_gpu_bytes and its breakdown), in MiB."""
    row = {}
    m = re.search(r"device memory: peak ([0-9.]+) MiB in use, ([0-9.]+) MiB allocated",
                  output)
    if m:
        row["autopar_peak_mib"] = float(m.group(1))
        row["autopar_reserved_mib"] = float(m.group(2))
    m = re.search(r"([0-9.]+) MiB more in use on the device", output)
    if m:
        # The CUDA context and the libraries' workspaces: what the plan's
        # "other" assumes.
        row["autopar_context_mib"] = float(m.group(1))
    if os.path.exists(report_path):
        with open(report_path) as f:
            predicted = json.load(f)["predicted"]
        if "memory_per_gpu_bytes" in predicted:
            row["predicted_mib"] = predicted["memory_per_gpu_bytes"] / 2**20
            row["predicted_breakdown_mib"] = {
                k: v / 2**20 for k, v in predicted.get("memory_breakdown_bytes", {}).items()}
    return row


def torch_training(cfg, w, x, steps, with_compile):
    """PyTorch's training step (AdamW, bf16 autocast, fp32 master weights), eager and
    compiled, as the scale the autopar training step is to be raced against."""
    import torch
    import torch.nn.functional as F
    out = {}
    for mode in ("eager", "compile") if with_compile else ("eager",):
        try:
            model = TorchGpt(cfg, w).cuda().train()
            opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
            fwd = torch.compile(model) if mode == "compile" else model
            target = torch.roll(x, -1, dims=1)

            def step():
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    logits = fwd(x)
                loss = F.cross_entropy(logits.float().view(-1, logits.shape[-1]), target.view(-1))
                loss.backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            out[f"train_{mode}_ms"] = time_cuda(step, max(steps // 2, 5))
            # The step's high-water mark (weights, AdamW states, activations, the
            # caching allocator's blocks in use), comparable with autopar-run's peak.
            out[f"train_{mode}_peak_mib"] = torch.cuda.max_memory_allocated() / 2**20
            free, total = torch.cuda.mem_get_info()
            out[f"train_{mode}_context_mib"] = \
                (total - free - torch.cuda.memory_reserved()) / 2**20
            model = opt = fwd = None
            torch.cuda.empty_cache()
        except Exception as e:  # noqa: BLE001
            out[f"train_{mode}_error"] = f"{type(e).__name__}: {str(e)[:300]}"
    return out


def launch_overhead():
    """Microseconds per launch of an empty kernel: back to back from the host, and
    replayed from a CUDA graph."""
    import torch
    x = torch.zeros(1, device="cuda")
    n = 2000
    for _ in range(10):
        x.add_(1)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        x.add_(1)
    torch.cuda.synchronize()
    eager = (time.perf_counter() - t0) / n * 1e6
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        with torch.cuda.graph(g):
            for _ in range(100):
                x.add_(1)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n // 100):
        g.replay()
    torch.cuda.synchronize()
    graph = (time.perf_counter() - t0) / n * 1e6
    return {"eager_us_per_launch": eager, "graph_us_per_launch": graph}


def TorchGpt(cfg, w):
    """The gpt_onnx graph as a torch module (fused QKV, x @ W weights, tied head,
    exact GELU, scaled_dot_product_attention with a causal mask)."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    def param(name):
        return nn.Parameter(torch.from_numpy(w[name].copy()))

    class Block(nn.Module):
        def __init__(self, i):
            super().__init__()
            p = f"h.{i}."
            for n in ("ln_1.weight", "ln_1.bias", "attn.qkv.weight", "attn.qkv.bias",
                      "attn.proj.weight", "attn.proj.bias", "ln_2.weight", "ln_2.bias",
                      "mlp.fc1.weight", "mlp.fc1.bias", "mlp.fc2.weight", "mlp.fc2.bias"):
                self.register_parameter(n.replace(".", "_"), param(p + n))

        def forward(self, x):
            B, S, H = x.shape
            nh = cfg.heads
            a = F.layer_norm(x, (H,), self.ln_1_weight, self.ln_1_bias, cfg.eps)
            q, k, v = (a @ self.attn_qkv_weight + self.attn_qkv_bias).split(H, dim=-1)
            q, k, v = (t.view(B, S, nh, H // nh).transpose(1, 2) for t in (q, k, v))
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            o = o.transpose(1, 2).reshape(B, S, H)
            x = x + o @ self.attn_proj_weight + self.attn_proj_bias
            m = F.layer_norm(x, (H,), self.ln_2_weight, self.ln_2_bias, cfg.eps)
            m = F.gelu(m @ self.mlp_fc1_weight + self.mlp_fc1_bias)
            return x + m @ self.mlp_fc2_weight + self.mlp_fc2_bias

    class Gpt(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = param("wte")
            self.wpe = param("wpe")
            self.blocks = nn.ModuleList(Block(i) for i in range(cfg.layers))
            self.ln_f_weight = param("ln_f.weight")
            self.ln_f_bias = param("ln_f.bias")

        def forward(self, idx):
            S = idx.shape[1]
            x = self.wte[idx] + self.wpe[:S]
            for b in self.blocks:
                x = b(x)
            x = F.layer_norm(x, (x.shape[-1],), self.ln_f_weight, self.ln_f_bias, cfg.eps)
            return x @ self.wte.t()

    return Gpt()


def device(args):
    dev = Device(args)
    parts = args.parts.split(",")
    for part in parts:
        start = time.monotonic()
        dev.log(f"== {part}")
        try:
            getattr(dev, f"part_{part}")()
        except Exception as e:  # noqa: BLE001 - one part failing must not lose the others
            import traceback
            dev.log(f"part {part} failed: {type(e).__name__}: {e}\n{traceback.format_exc()}")
            dev.results.setdefault("failed_parts", []).append(part)
        dev.log(f"== {part} took {time.monotonic() - start:.1f} s")
        dev.save()
    summary(dev.results, dev.log)
    return 0


def summary(results, log):
    log("\n==== summary")
    for row in results.get("models", []):
        status = "PASS" if row.get("ok") else "FAIL"
        log(f"{status} {row['case']:28} err {row.get('max_rel_err', float('nan')):.2e} "
            f"step {row.get('step_ms')} ms {row.get('error', '')}")
    for row in results.get("race", []):
        log(f"race {row['preset']} {row['precision']} b{row['batch']}: " + ", ".join(
            f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in row.items()
            if k not in ("preset", "precision", "batch")))
    for row in results.get("train_race", []):
        log(f"trainrace {row['preset']} b{row['batch']}: autopar "
            f"{row.get('autopar_ms')} ms, MFU {row.get('autopar_mfu')}, first loss error "
            f"{row.get('first_loss_rel_err')}, GPU memory peak {row.get('autopar_peak_mib')} MiB "
            f"(predicted {row.get('predicted_mib')}) {row.get('error', '')[-300:]}")
    for row in results.get("train", []):
        log(f"{'PASS' if row.get('ok') else 'FAIL'} train {row['case']:24} "
            f"loss err {row.get('loss_err', float('nan')):.2e} param err "
            f"{row.get('param_err', float('nan')):.2e} step {row.get('step_ms')} ms "
            f"{row.get('error', '')[-300:]}")
    for row in results.get("attention", {}).get("rows", []):
        log(f"attention bf16 causal B{row['B']} H{row['H']} S{row['S']} D{row['D']}: "
            f"fwd {row['fwd_ms']:.3f} ms ({row['fwd_tflops']:.0f} TFLOP/s), fwd+bwd "
            f"{row['fwdbwd_ms']:.3f} ms ({row['fwdbwd_tflops']:.0f} TFLOP/s); time / "
            f"PyTorch's: fwd {row.get('fwd_ratio', float('nan')):.2f}x, fwd+bwd "
            f"{row.get('fwdbwd_ratio', float('nan')):.2f}x")
    if "tests" in results:
        log(f"AutoparCudaDeviceTests exit {results['tests']['rc']}")


def report(args):
    """Markdown for bench/RESULTS.md from a device run's results.json."""
    with open(args.results) as f:
        r = json.load(f)
    env, spec = r.get("env", {}), r.get("bundle", {})
    out = [f"### GPU round trip, {r.get('date')}", "",
           f"- device: {env.get('gpu', '?')}; torch {env.get('torch', '?')} (CUDA "
           f"{env.get('torch_cuda', '?')}); autopar commit {spec.get('commit', '?')}",
           "- commands: `bench/gpu/roundtrip.py prepare --build-dir build` here, then on the "
           "GPU machine `python3 bench/gpu/roundtrip.py device --bundle .gpu --out OUT"
           + (f" {args.device_flags}" if args.device_flags else "") + "`", ""]
    if "tests" in r:
        out += [f"- `AutoparCudaDeviceTests` (ctest -L cuda): exit {r['tests']['rc']}", ""]
    if r.get("attention", {}).get("rows"):
        a = r["attention"]
        out += ["#### Fused attention against PyTorch's scaled_dot_product_attention", "",
                f"bf16, causal, E = D; TFLOP/s count 4·B·H·S²·D/2 forward and 3.5x that for "
                f"forward + backward; PyTorch {a.get('torch', '?')}. Ratio: autopar's time / "
                "PyTorch's.", "",
                "| B | H | S | D | fwd ms | fwd TFLOP/s | PyTorch fwd ms | fwd ratio | "
                "fwd+bwd ms | fwd+bwd TFLOP/s | PyTorch fwd+bwd ms | fwd+bwd ratio |",
                "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]

        def h(v, fmt="{:.3f}"):
            return "" if v is None else fmt.format(v)
        for row in a["rows"]:
            out.append(f"| {row['B']} | {row['H']} | {row['S']} | {row['D']} | "
                       f"{h(row['fwd_ms'])} | {h(row['fwd_tflops'], '{:.0f}')} | "
                       f"{h(row.get('torch_fwd_ms'))} | {h(row.get('fwd_ratio'), '{:.2f}x')} | "
                       f"{h(row['fwdbwd_ms'])} | {h(row['fwdbwd_tflops'], '{:.0f}')} | "
                       f"{h(row.get('torch_fwdbwd_ms'))} | "
                       f"{h(row.get('fwdbwd_ratio'), '{:.2f}x')} |")
        out.append("")
    if r.get("models"):
        out += ["#### Models on one GPU against onnxruntime (CPU)", "",
                "| model | precision | max rel error | tolerance | step ms | result |",
                "| --- | --- | --- | --- | --- | --- |"]
        cases = {c["name"]: c for c in spec.get("cases", [])}
        for row in r["models"]:
            c = cases.get(row["case"], {})
            err, ms = row.get("max_rel_err"), row.get("step_ms")
            err_text = "" if err is None else f"{err:.2e}"
            ms_text = "" if ms is None else f"{ms:.3f}"
            result = "pass" if row.get("ok") else "FAIL " + row.get("error", "")
            out.append(f"| {c.get('model', row['case'])} | {c.get('precision', '')} | "
                       f"{err_text} | {c.get('tol', '')} | {ms_text} | {result} |")
        out.append("")
    if r.get("race"):
        predicted = {(e["preset"], e["precision"]): e.get("predicted_ms")
                     for e in spec.get("race", [])}
        out += ["#### GPT-2 forward: autopar against PyTorch, sequence 1024", "",
                "MFU counts the matrix products of the forward (2·params·tokens plus "
                "attention's 4·S²·H per layer, unmasked) against 989.4 dense bf16 TFLOP/s. "
                "Logits error: max |autopar − PyTorch| / max |PyTorch| with the same weights.",
                "",
                "| model | precision | batch | autopar ms | predicted ms | eager ms | "
                "torch.compile ms | autopar time / eager's | autopar time / compile's | autopar MFU | "
                "logits error |",
                "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for row in r["race"]:
            a, e, c = row.get("autopar_ms"), row.get("eager_ms"), row.get("compile_ms")
            p = predicted.get((row["preset"], row["precision"]))

            def f(v, fmt="{:.2f}"):
                return "" if v is None else fmt.format(v)
            out.append(f"| {row['preset']} | {row['precision']} | {row['batch']} | {f(a)} | "
                       f"{f(p)} | {f(e)} | {f(c) or 'not run'} | "
                       f"{f(a / e if a and e else None, '{:.2f}x')} | "
                       f"{f(a / c if a and c else None, '{:.2f}x')} | "
                       f"{f(row.get('autopar_mfu'), '{:.1%}')} | "
                       f"{f(row.get('logits_max_rel_err'), '{:.1e}')} |")
        train = [row for row in r["race"] if row.get("train_eager_ms")]
        if train:
            out += ["", "PyTorch's training step on the same device (AdamW, bf16 autocast, "
                    "fp32 master weights), what autopar's GPU training step will race:", "",
                    "| model | batch | eager ms | eager MFU | torch.compile ms | compile MFU |",
                    "| --- | --- | --- | --- | --- | --- |"]
            for row in train:
                cm = row.get("train_compile_ms")
                cm_text = "not run" if cm is None else f"{cm:.2f}"
                cmfu = "" if cm is None else f"{row['train_compile_mfu']:.1%}"
                out.append(f"| {row['preset']} | {row['batch']} | {row['train_eager_ms']:.2f} | "
                           f"{row['train_eager_mfu']:.1%} | {cm_text} | {cmfu} |")
        out.append("")
    if r.get("train_race"):
        torch_rows = {row["preset"]: row for row in r.get("race", [])
                      if row.get("precision") == "bf16"}
        out += ["#### GPT-2 training step on one GPU: autopar against PyTorch, sequence 1024",
                "",
                "AdamW with clipping, bf16 mixed precision with f32 master weights on both "
                "sides (PyTorch: autocast, fused AdamW). MFU counts 3x the forward's matrix "
                "products. First loss: autopar's against PyTorch fp32's on the same weights "
                "and batch.", "",
                "| model | batch | autopar ms | predicted ms | eager ms | torch.compile ms | "
                "autopar time / eager's | autopar time / compile's | autopar MFU | "
                "first loss error |",
                "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for row in r["train_race"]:
            t = torch_rows.get(row["preset"], {})
            a, e, c = row.get("autopar_ms"), t.get("train_eager_ms"), t.get("train_compile_ms")

            def g(v, fmt="{:.2f}"):
                return "" if v is None else fmt.format(v)
            variant = row.get("variant", "")
            name = row["preset"] + (" (attention unfused)" if variant == "unfused"
                                    else f" ({variant})" if variant else "")
            if a is None:
                out.append(f"| {name} | {row['batch']} | FAIL | | | | | | | |")
                continue
            out.append(f"| {name} | {row['batch']} | {g(a)} | "
                       f"{g(row.get('predicted_ms'))} | {g(e)} | {g(c)} | "
                       f"{g(a / e if e else None, '{:.2f}x')} | "
                       f"{g(a / c if c else None, '{:.2f}x')} | "
                       f"{g(row.get('autopar_mfu'), '{:.1%}')} | "
                       f"{g(row.get('first_loss_rel_err'), '{:.1e}')} |")
        out.append("")
        memory_rows = [row for row in r["train_race"] if row.get("autopar_peak_mib")]
        if memory_rows:
            out += ["GPU memory of the training step: autopar-run's peak in use (its caching "
                    "allocator's high-water mark) and what it took from the driver, against "
                    "the plan report's `memory_per_gpu_bytes` and PyTorch eager's "
                    "`torch.cuda.max_memory_allocated()` over its timed steps (MiB). The "
                    "predicted total includes `other`, the CUDA context and workspaces, "
                    "which neither peak counts; the last column measures it (the driver's "
                    "used memory less the allocator's).", "",
                    "| model | batch | predicted | autopar peak in use | from the driver | "
                    "PyTorch eager peak | autopar / predicted | autopar / PyTorch | "
                    "predicted breakdown | context and libraries: autopar, PyTorch |",
                    "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
            for row in memory_rows:
                t = torch_rows.get(row["preset"], {})
                a, p, e = (row.get("autopar_peak_mib"), row.get("predicted_mib"),
                           t.get("train_eager_peak_mib"))
                parts = ", ".join(f"{k} {v:.0f}" for k, v in
                                  row.get("predicted_breakdown_mib", {}).items() if v >= 0.5)
                variant = row.get("variant", "")
                name = row["preset"] + (f" ({variant})" if variant else "")
                out.append(f"| {name} | {row['batch']} | {g(p, '{:.0f}')} | {g(a, '{:.0f}')} | "
                           f"{g(row.get('autopar_reserved_mib'), '{:.0f}')} | "
                           f"{g(e, '{:.0f}')} | {g(a / p if p else None, '{:.2f}x')} | "
                           f"{g(a / e if e else None, '{:.2f}x')} | {parts} | "
                           f"{g(row.get('autopar_context_mib'), '{:.0f}')}, "
                           f"{g(t.get('train_eager_context_mib'), '{:.0f}')} |")
            out.append("")
    if r.get("train"):
        out += ["#### Training on one GPU against PyTorch (fp32 reference, same weights and "
                "data)", "",
                "Loss error: max over steps of |autopar - PyTorch| / max(1, |PyTorch|) "
                "(fp32) or / |PyTorch| (bf16 against PyTorch fp32); PyTorch bf16's: "
                "the same for PyTorch's own bf16 autocast on the GPU from the same weights; "
                "parameter error: max |difference| / max |PyTorch| over the trained tensors.",
                "",
                "| case | precision | steps | loss first -> last | loss error | "
                "PyTorch bf16's loss error | parameter error | step ms | result |",
                "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for row in r["train"]:
            if row.get("rc"):
                out.append(f"| {row['case']} | {row['precision']} | | | | | | | FAIL (run) |")
                continue
            out.append(f"| {row['case']} | {row['precision']} | {row['steps']} | "
                       f"{row['first_loss']:.4f} -> {row['last_loss']:.4f} | "
                       f"{row['loss_err']:.1e} | "
                       + (f"{row['torch_bf16_loss_err']:.1e}" if "torch_bf16_loss_err" in row
                          else "") + f" | {row['param_err']:.1e} | "
                       f"{row['step_ms']:.2f} | {'pass' if row['ok'] else 'FAIL'} |")
        out.append("")
    if r.get("profile", {}).get("table"):
        # kernel_profile.py's table: "N launches, T ms of GPU time", a header, then
        # "ms share calls kernel [grid] [block]" rows.
        lines = [line for line in r["profile"]["table"].splitlines() if line.strip()]
        out += [f"#### Where the {r['profile'].get('preset', '')} training step's time goes "
                "(ncu, one step)", "",
                "`bench/gpu/kernel_profile.py` over one step (each kernel timed alone, so the "
                f"sum exceeds the step time): {lines[0] if lines else ''}.", "",
                "| ms | share | calls | kernel [grid] [block] |", "| --- | --- | --- | --- |"]
        for line in lines[2:]:
            parts = line.split(None, 3)
            if len(parts) == 4:
                out.append(f"| {parts[0]} | {parts[1]} | {parts[2]} | {parts[3]} |")
        out.append("")
    print("\n".join(out))
    return 0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    pp = sub.add_parser("prepare")
    pp.add_argument("--build-dir", default=os.path.join(REPO, "build"))
    pp.add_argument("--bundle", default=os.path.join(REPO, ".gpu"))
    pp.add_argument("--models", default=",".join(CASE_MODELS))
    pp.add_argument("--precisions", default="fp32,bf16")
    pp.add_argument("--race", default=",".join(RACE_PRESETS))
    pp.add_argument("--train-race-unfused", action="store_true",
                    help="also compile each --train-race step with --fuse-attention=false")
    pp.add_argument("--train-race-unfused-loss", action="store_true",
                    help="also compile each --train-race step with "
                         "--fuse-cross-entropy=false")
    pp.add_argument("--train-race", default="gpt2-small",
                    help="GPT-2 presets whose training step races PyTorch's ('' for none)")
    pp.add_argument("--train", default="all",
                    help="comma-separated training cases, 'all' (default) or '' for none")
    pd = sub.add_parser("device")
    pd.add_argument("--bundle", default=os.path.join(REPO, ".gpu"))
    pd.add_argument("--out", default=os.environ.get("OUT", "/tmp/autopar-gpu-out"))
    pd.add_argument("--parts",
                    default="env,tests,attention,models,train,race,trainrace,calibrate")
    pd.add_argument("--steps", type=int, default=3)
    pd.add_argument("--profile-timeout", type=int, default=150,
                    help="seconds for the profile part's Nsight Compute run")
    pd.add_argument("--race-steps", type=int, default=10)
    pd.add_argument("--race-only", default="",
                    help="comma-separated PRESET-PRECISION entries of the race to run "
                         "(default: all the bundle has)")
    pd.add_argument("--trainrace-env", default="",
                    help="NAME=VALUE[,NAME=VALUE]: also run each fused trainrace step "
                         "with these runtime settings (e.g. "
                         "AUTOPAR_GEMM_ALIGNMENT_COPIES=never), as a variant row")
    pd.add_argument("--no-torch-compile", action="store_true",
                    help="skip torch.compile in the race (its compilation takes minutes)")
    pr = sub.add_parser("report", help="markdown for bench/RESULTS.md from a results.json")
    pr.add_argument("results")
    pr.add_argument("--device-flags", default="", help="the device command's extra flags")
    args = p.parse_args(argv)
    return {"prepare": prepare, "device": device, "report": report}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
