#!/usr/bin/env python3
"""Planner benchmarks: search time at scale, and predictions against a published run.

1. Scale: GPT-style models (bench/gen_gpt_onnx.py, weights never written) planned for
   training with `autopar-compile --plan-only` on A100 clusters of growing size; prints
   the search time the planner reports and the wall time of the whole command.
2. Published: the 1-trillion-parameter GPT of Narayanan et al., "Efficient Large-Scale
   Language Model Training on GPU Clusters Using Megatron-LM" (SC'21): 128 layers,
   hidden 25600, 160 heads, sequence 2048, batch 3072 on 3072 A100-80GB (384 DGX A100
   nodes), tp=8, pp=64, reported at 502 petaFLOP/s aggregate. Their FLOP count per
   iteration, 96*B*s*l*h^2*(1 + s/(6h) + V/(16*l*h)) (which includes activation
   recomputation), turns that into a measured step time. autopar predicts the step time
   of that configuration pinned (same tp, pp, dp, micro-batch 1, full recomputation)
   and of its own automatic plan.

Usage: bench/bench_planner.py [--build-dir build] [--work-dir DIR] [--write-results]

The generated models and reports go to --work-dir (default BUILD_DIR/bench-planner);
--write-results makes the tables the current planner figures in bench/RESULTS.md.
"""

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "python"))
from autopar import gpt_onnx  # noqa: E402

import results  # noqa: E402  (bench/results.py)


def plan(compile_bin, model, cluster, shape, extra=()):
    report = os.path.join(os.path.dirname(model), "report.json")
    cmd = [compile_bin, model, "--cluster", cluster, "--input-shape", f"idx={shape}",
           "--mode", "train", "--plan-only", "--report-json", report, *extra]
    start = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if r.returncode != 0:
        if "fits on no plan" in r.stderr:
            return None, wall, r.stderr.strip()
        sys.exit(f"{' '.join(cmd)} failed:\n{r.stderr}")
    with open(report) as f:
        data = json.load(f)
    os.unlink(report)
    return data, wall, " ".join(results.repo_path(c) if os.path.isabs(c) else c for c in cmd)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    p.add_argument("--work-dir", default=None, help="models and reports (default BUILD_DIR/bench-planner)")
    p.add_argument("--write-results", action="store_true")
    args = p.parse_args()
    compile_bin = os.path.join(args.build_dir, "bin", "autopar-compile")
    work = os.path.abspath(args.work_dir or os.path.join(args.build_dir, "bench-planner"))
    os.makedirs(work, exist_ok=True)
    lines = []

    def out(s=""):
        print(s)
        lines.append(s)

    out("#### Planning time (training, bf16, sequence 2048, hidden 25600, 160 heads)")
    out("")
    out("| layers | parameters | cluster | GPUs | plans evaluated | search s | command wall s |")
    out("| --- | --- | --- | --- | --- | --- | --- |")
    for layers in (32, 64, 128):
        model = os.path.join(work, f"gpt-{layers}l.onnx")
        gpt_onnx.main(["--layers", str(layers), "--hidden", "25600", "--heads", "160",
                       "--vocab", "51200", "--seq", "2048", "-o", model, "--no-check"])
        for nodes in (8, 64, 384):
            data, wall, why = plan(compile_bin, model, f"dgx-a100-80gb:{nodes}", "1536x2048")
            if data is None:
                need = why.split("needs ")[1].split(" per GPU")[0]
                out(f"| {layers} | | dgx-a100-80gb:{nodes} | {nodes * 8} | fits nowhere "
                    f"(smallest plan needs {need}) | | {wall:.3f} |")
                continue
            out(f"| {layers} | {data['parameters'] / 1e9:.0f}B | dgx-a100-80gb:{nodes} | "
                f"{nodes * 8} | {data['search']['candidates_evaluated']} | "
                f"{data['search_time_s']:.3f} | {wall:.3f} |")

    out("")
    out("#### Predicted vs published: 1T GPT on 3072 A100-80GB (Megatron-LM, SC'21)")
    out("")
    model = os.path.join(work, "gpt-1t.onnx")
    gpt_onnx.main(["--preset", "gpt-1t", "-o", model, "--no-check"])
    B, s, l, h, V = 3072, 2048, 128, 25600, 51200
    flops = 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h))
    measured = flops / 502e15
    pinned, _, cmd_pinned = plan(compile_bin, model, "dgx-a100-80gb:384", "3072x2048",
                                 ["--tp", "8", "--pp", "64", "--dp", "6",
                                  "--micro-batch-size", "1", "--recompute", "full"])
    auto, _, cmd_auto = plan(compile_bin, model, "dgx-a100-80gb:384", "3072x2048")
    pt, at = pinned["predicted"]["step_time_s"], auto["predicted"]["step_time_s"]
    out(f"- published: 502 PFLOP/s with {flops:.3e} FLOPs per iteration -> {measured:.1f} s per step")
    out(f"- autopar, published configuration pinned (tp=8 pp=64 dp=6, micro-batch 1, full "
        f"recomputation): {pt:.1f} s per step, {pt / measured - 1:+.1%} vs published")
    m = auto["mesh"]
    out(f"- autopar, automatic plan (dp={m['dp']} tp={m['tp']} pp={m['pp']}, ZeRO "
        f"{auto['zero_stage']}, micro-batch {auto['micro_batch_size']}, recompute "
        f"{auto['recompute']}): {at:.1f} s per step ({at / pt:.2f}x the pinned prediction, "
        f"{at / measured:.2f}x the published measurement), search {auto['search_time_s']:.2f} s")
    out(f"- commands: `{cmd_pinned}` and `{cmd_auto}`")

    if args.write_results:
        cmd = "bench/bench_planner.py --write-results"
        if args.work_dir:
            cmd += f" --work-dir {results.repo_path(args.work_dir)}"
        results.record("Planner", f"- machine: {results.machine_words()}\n"
                       f"- commit: {results.git_commit()}\n- command: `{cmd}`\n\n" + "\n".join(lines))
        print(f"recorded in {results.RESULTS}")

if __name__ == "__main__":
    main()
