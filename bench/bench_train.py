#!/usr/bin/python3
"""Training step time and peak memory: autopar against PyTorch, both on one CPU thread.

For each model (autopar.train_models: a GPT and a CNN with BatchNorm), from the same
initial weights and data, AdamW with gradient clipping:
  - PyTorch (python3-torch): forward, backward, clip_grad_norm_, optimizer.step(),
    in a child process with torch.set_num_threads(1);
  - autopar: the training-mode export compiled with autopar-compile --mode train
    (timed: compile_s) and trained with autopar-run --train (OMP_NUM_THREADS =
    OPENBLAS_NUM_THREADS = 1); step times from its --metrics.
The median step time over steps --warmup+1..--steps is reported, the first loss of
both (they start from the same weights, so they must agree), and each process's peak
resident memory (ru_maxrss: PyTorch's includes the interpreter and libtorch, about
250 MB before any model; `torch idle MB` is that baseline). ratio = torch ms /
autopar ms (above 1: autopar is faster).

  bench/bench_train.py --build-dir build
  bench/bench_train.py --models gpt --steps 30
  bench/bench_train.py --write-results      # also the current figures in bench/RESULTS.md
  bench/bench_train.py --models gpt-vocab8k --unfused-loss   # fused vs unfused cross-entropy

--unfused-loss also trains autopar with --fuse-cross-entropy=false (the model's
F.cross_entropy as the importer writes it: a log-softmax and a one-hot pick) and
reports its step time and peak memory beside the fused loss's.

Nothing is written into the repository unless --write-results is given.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "python"))
sys.path.insert(0, HERE)

import results  # noqa: E402  (bench/results.py)

SINGLE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}

# name: (model constructor source, batch, input names, example-data source)
MODELS = {
    "gpt": dict(
        make="Gpt(vocab=256, width=128, heads=4, layers=2, seq=64)",
        data="{'idx': torch.randint(0, 256, (n, 64)), 'targets': torch.randint(0, 256, (n, 64))}",
        batch=8, describe="GPT: 2 layers, width 128, 4 heads, sequence 64, vocabulary 256, batch 8"),
    "gpt-vocab8k": dict(
        make="Gpt(vocab=8192, width=128, heads=4, layers=1, seq=64)",
        data="{'idx': torch.randint(0, 8192, (n, 64)), 'targets': torch.randint(0, 8192, (n, 64))}",
        batch=8, describe="GPT whose loss dominates: 1 layer, width 128, sequence 64, "
                          "vocabulary 8192 (logits [512, 8192]), batch 8"),
    "cnn": dict(
        make="Cnn(channels=3, width=32, classes=10, image=32)",
        data="{'x': torch.randn(n, 3, 32, 32), 'y': torch.randint(0, 10, (n,))}",
        batch=16, describe="CNN: 3 conv+BatchNorm+pool stages (32-64-128 channels), 32x32 images, batch 16"),
}
CONFIG = {"gradient_clipping": 1.0,
          "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "weight_decay": 0.01}}}

# Runs in a child process (its own peak memory): prepares the model, its data and
# the ONNX export, or trains with PyTorch and prints a JSON line.
CHILD = textwrap.dedent("""
    import json, os, resource, sys, time
    import numpy as np
    import torch
    sys.path.insert(0, {python!r})
    from autopar.train_models import Cnn, Gpt, export_for_training
    torch.set_num_threads(1)
    idle = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    torch.manual_seed(0)
    model = {make}
    n = {batch} * {steps}
    torch.manual_seed(1)
    data = {data}
    work = {work!r}
    if {prepare}:
        os.makedirs(os.path.join(work, "data"), exist_ok=True)
        for k, v in data.items():
            np.save(os.path.join(work, "data", k + ".npy"), v.numpy())
        export_for_training(model, [v[:{batch}] for v in data.values()], list(data),
                            os.path.join(work, "model.onnx"))
        sys.exit(0)
    opt = torch.optim.AdamW(model.parameters(), lr={lr}, weight_decay={wd})
    times, losses = [], []
    for s in range({steps}):
        args = [v[s * {batch}:(s + 1) * {batch}] for v in data.values()]
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = model(*args)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), {clip})
        opt.step()
        times.append(time.perf_counter() - t0)
        losses.append(float(loss))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({{"times": times, "losses": losses, "peak_mb": peak, "idle_mb": idle}}))
""")


def child(spec, work, steps, prepare):
    code = CHILD.format(python=os.path.join(REPO, "python"), make=spec["make"], data=spec["data"],
                        batch=spec["batch"], steps=steps, work=work, prepare=prepare,
                        lr=CONFIG["optimizer"]["params"]["lr"],
                        wd=CONFIG["optimizer"]["params"]["weight_decay"],
                        clip=CONFIG["gradient_clipping"])
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=dict(os.environ, **SINGLE_THREAD))
    if r.returncode != 0:
        raise RuntimeError(f"PyTorch child failed:\n{r.stderr[-3000:]}")
    return None if prepare else json.loads(r.stdout.strip().splitlines()[-1])


def peak_rss_of(cmd, env):
    """Runs cmd with its output in env['_BENCH_OUT']; returns (exit code,
    output, peak resident MB from os.wait4's rusage)."""
    pid = os.fork()
    if pid == 0:  # child
        try:
            os.environ.update(env)
            out = os.open(env["_BENCH_OUT"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            os.dup2(out, 1)
            os.dup2(out, 2)
            os.execvp(cmd[0], cmd)  # a name is looked up on PATH
        finally:
            os._exit(127)
    _, status, usage = os.wait4(pid, 0)
    with open(env["_BENCH_OUT"]) as f:
        text = f.read()
    return os.waitstatus_to_exitcode(status), text, usage.ru_maxrss / 1024


def bench_model(name, args):
    spec = MODELS[name]
    work = os.path.join(args.work_dir, name)
    os.makedirs(work, exist_ok=True)
    steps = args.steps
    child(spec, work, steps, prepare=True)
    cfg = dict(CONFIG, train_batch_size=spec["batch"])
    with open(os.path.join(work, "ds_config.json"), "w") as f:
        json.dump(cfg, f)

    import numpy as np  # noqa: E402  (after the child wrote the data)
    shapes = []
    for f in sorted(os.listdir(os.path.join(work, "data"))):
        arr = np.load(os.path.join(work, "data", f), mmap_mode="r")
        shapes += ["--input-shape", f[:-4] + "=" + "x".join(str(d) for d in (spec["batch"],) + arr.shape[1:])]
    import time  # noqa: E402
    keep = slice(args.warmup, None)

    def train(tag, *flags):
        """Compiles and trains autopar's step: (compile s, records, peak MB)."""
        art = os.path.join(work, tag)
        compile_cmd = [os.path.join(args.build_dir, "bin", "autopar-compile"),
                       os.path.join(work, "model.onnx"), "--cluster", "local:1", "--mode", "train",
                       "--train-config", os.path.join(work, "ds_config.json"), *shapes, *flags,
                       "-o", art]
        t0 = time.perf_counter()
        r = subprocess.run(compile_cmd, capture_output=True, text=True)
        compile_s = time.perf_counter() - t0
        if r.returncode != 0:
            raise RuntimeError(f"autopar-compile failed:\n{r.stderr[-3000:]}")
        metrics = os.path.join(work, tag + "-metrics.jsonl")
        if os.path.exists(metrics):
            os.remove(metrics)
        run_cmd = [os.path.join(args.build_dir, "bin", "autopar-run"), art, "--train", "--data",
                   os.path.join(work, "data"), "--steps", str(steps), "--metrics", metrics]
        rc, text, peak = peak_rss_of(run_cmd, dict(SINGLE_THREAD,
                                                   _BENCH_OUT=os.path.join(work, tag + "-run.log")))
        if rc != 0:
            raise RuntimeError(f"autopar-run failed:\n{text[-3000:]}")
        with open(metrics) as f:
            records = [json.loads(line) for line in f]
        return compile_s, records, peak

    compile_s, records, autopar_peak = train("art")
    torch_run = child(spec, work, steps, prepare=False)
    autopar_ms = statistics.median(r["step_time_s"] for r in records[keep]) * 1e3
    torch_ms = statistics.median(torch_run["times"][keep]) * 1e3
    row = dict(model=name, describe=spec["describe"], compile_s=compile_s,
               autopar_ms=autopar_ms, torch_ms=torch_ms, ratio=torch_ms / autopar_ms,
               autopar_mb=autopar_peak, torch_mb=torch_run["peak_mb"], torch_idle_mb=torch_run["idle_mb"],
               first_loss=(records[0]["loss"], torch_run["losses"][0]),
               last_loss=(records[-1]["loss"], torch_run["losses"][-1]))
    if args.unfused_loss:
        _, unfused, unfused_peak = train("art-unfused-loss", "--fuse-cross-entropy=false")
        row["unfused_ms"] = statistics.median(r["step_time_s"] for r in unfused[keep]) * 1e3
        row["unfused_mb"] = unfused_peak
        row["unfused_first_loss"] = unfused[0]["loss"]
    return row


def format_table(rows, markdown=False):
    head = ["model", "autopar ms/step", "torch ms/step", "ratio", "autopar peak MB",
            "torch peak MB", "torch idle MB", "compile s", "loss step 1 (autopar / torch)",
            "loss last step (autopar / torch)"]
    body = [[r["model"], f"{r['autopar_ms']:.2f}", f"{r['torch_ms']:.2f}", f"{r['ratio']:.2f}",
             f"{r['autopar_mb']:.0f}", f"{r['torch_mb']:.0f}", f"{r['torch_idle_mb']:.0f}",
             f"{r['compile_s']:.1f}", f"{r['first_loss'][0]:.5f} / {r['first_loss'][1]:.5f}",
             f"{r['last_loss'][0]:.5f} / {r['last_loss'][1]:.5f}"] for r in rows]
    if any("unfused_ms" in r for r in rows):
        head += ["unfused-loss ms/step", "fused speedup", "unfused-loss peak MB",
                 "unfused loss step 1"]
        for b, r in zip(body, rows):
            b += ([f"{r['unfused_ms']:.2f}", f"{r['unfused_ms'] / r['autopar_ms']:.2f}",
                   f"{r['unfused_mb']:.0f}", f"{r['unfused_first_loss']:.5f}"]
                  if "unfused_ms" in r else ["", "", "", ""])
    lines = results.table(list(head), [list(b) for b in body], markdown)
    lines += [""] + [f"- {r['model']}: {r['describe']}" for r in rows]
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--build-dir", default=os.path.join(REPO, "build"))
    p.add_argument("--work-dir", default=None, help="exports, data, artifacts (default BUILD_DIR/bench-train)")
    p.add_argument("--models", default="gpt,cnn", help="comma-separated (default gpt,cnn)")
    p.add_argument("--steps", type=int, default=30, help="steps per side (default 30)")
    p.add_argument("--warmup", type=int, default=3, help="leading steps left out of the median (default 3)")
    p.add_argument("--unfused-loss", action="store_true",
                   help="also train autopar with --fuse-cross-entropy=false, for comparison")
    p.add_argument("--write-results", action="store_true", help=f"record the table in {results.RESULTS}")
    args = p.parse_args(argv)
    args.build_dir = os.path.abspath(args.build_dir)
    args.work_dir = os.path.abspath(args.work_dir or os.path.join(args.build_dir, "bench-train"))
    names = [n for n in args.models.split(",") if n]
    for n in names:
        if n not in MODELS:
            p.error(f"unknown model '{n}'; known: {', '.join(MODELS)}")
    if args.warmup >= args.steps:
        p.error("--warmup must be below --steps")
    rows = [bench_model(n, args) for n in names]
    print(f"# {results.machine_words()}")
    print(f"# median of steps {args.warmup + 1}..{args.steps}; one thread on both sides; AdamW + clipping")
    print(format_table(rows))
    if args.write_results:
        results.record_run("Training on CPU against PyTorch (one thread)",
                           f"- median of steps {args.warmup + 1}..{args.steps}; ratio = torch ms / "
                           "autopar ms; peak MB = the process's maximum resident memory",
                           format_table(rows, markdown=True))
        print(f"recorded in {results.RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
