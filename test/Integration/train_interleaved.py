#!/usr/bin/env python3
"""Interleaved 1F1B (virtual stages) on CPU ranks equals training on one rank.

`autopar-compile --mode train --pp P --virtual-stages V` cuts the forward into
P x V virtual stages (chunk c of stage s is virtual stage c * P + s), gives
each a forward and a backward program and each stage one step over all its
chunks' parameters (one optimizer, one gradient-norm all-reduce over pp).
autopar-run walks Megatron-LM's interleaved order: the chunks' steps in
groups of P x V micro-batch steps, each steady-state forward paired with the
backward after it in one exchange (docs/distributed-training.md,
"Interleaved 1F1B").

Each case trains the same steps on the same data on one rank and on the
interleaved pipeline and requires every step's loss within 1e-5 relative
and every final parameter within 1e-5 of its largest magnitude, and the
messages and collectives each rank ran to equal the plan report's
predicted ones, call for call and byte for byte (--check-comm):

- mlp: pp2 x 2 chunks (4 micro-batches), with recompute full, dp2 x pp2 x 2
  with ZeRO-1 and pp2 x 3 chunks (6 virtual stages, more than the MLP has
  layers: some chunks run only the loss's parts or nothing trainable);
  each rank holds the parameters and optimizer states the report predicts;
- gpt: pp2 x 2 chunks, its checkpoint at step 3 resumed under the same plan
  bitwise and on one rank; tp2 x pp2 x 2 (each virtual stage partitioned
  over its tp group); tied weights (GPT-2's head is its token table, held
  by virtual stages 0 and 3 on different stages): the gradient summed over
  them;
- --eval-data: the eval losses equal one rank's for the MLP on pp2 x 2,
  dp2 x pp2 x 2 with ZeRO-1 and pp2 x 3, the GPT on pp2 x 2 and
  tp2 x pp2 x 2 (each chunk's eval program, in the interleaved forward
  order);
- every run's activations kept per stage (the peak of its chunk
  micro-batches' residuals) within 10% of the report's (its walk of the
  interleaved order over what each chunk keeps);
- refusals: --virtual-stages with GPipe, for inference, with --pp 1 and
  with more virtual stages than the model has segments: errors that say
  what to change; and a manifest whose virtual_stages the micro-batches do
  not fit.

Usage: train_interleaved.py BUILD_DIR WORK_DIR MPIRUN [MPIRUN_FLAG...]
"""
import json
import os
import re
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_dp import (CONFIG, Case, compare,  # noqa: E402
                      eval_equals_one_rank, on_one_rank, resumed_bitwise, run)
from train_pp import (TiedGpt, gpt_setup, mlp_data,  # noqa: E402
                      pipelined_case)
from train_tp import WideGpt, WideMlp, check_model_state  # noqa: E402


def compile_interleaved(case, tag, ranks, pp, chunks, errors, *flags,
                        config=None):
    """Compiles `case` for `pp` stages of `chunks` model chunks each: the
    manifest must list a forward, a backward and an eval program per
    virtual stage, named stage<s>.chunk<c>, one step per stage, and the
    report the virtual stages with their stage and chunk."""
    art, result = case.compile(tag, ranks, "--pp", str(pp),
                               "--virtual-stages", str(chunks), *flags,
                               config=config)
    if (f"interleaved over {chunks} model chunks per stage"
            not in result.stdout):
        errors.append(f"{case.name} {tag}: the compiler did not report the "
                      f"interleaved pipeline:\n{result.stdout}")
    with open(os.path.join(art, "manifest.json")) as f:
        manifest = json.load(f)
    if manifest["pipeline"].get("virtual_stages") != chunks:
        errors.append(f"{case.name} {tag}: manifest pipeline "
                      f"{manifest['pipeline']}")
    phases = sorted((p["stage"], p["phase"], p["name"])
                    for p in manifest["programs"] if "phase" in p)
    want = sorted((c * pp + s, ph, f"stage{s}.chunk{c}.{ph}")
                  for s in range(pp) for c in range(chunks)
                  for ph in ("forward", "backward", "eval"))
    steps = sorted(p["name"] for p in manifest["programs"]
                   if "phase" not in p)
    if phases != want or steps != [f"stage{s}" for s in range(pp)]:
        errors.append(f"{case.name} {tag}: programs {phases} and steps "
                      f"{steps}, expected {want}")
    with open(art + "-report.json") as f:
        report = json.load(f)
    listed = [(s["stage"], s["chunk"], s["virtual_stage"])
              for s in report["stages"]]
    if (report["virtual_stages"] != chunks or
            listed != [(k % pp, k // pp, k) for k in range(pp * chunks)]):
        errors.append(f"{case.name} {tag}: report virtual_stages "
                      f"{report['virtual_stages']}, stages {listed}")
    # Every stage's order names each chunk's steps ("F0.1": micro-batch 0's
    # forward through chunk 1).
    for s, order in enumerate(report["stage_orders"]):
        chunks_seen = {int(step.split(".")[1]) for step in order.split()}
        if chunks_seen != set(range(chunks)):
            errors.append(f"{case.name} {tag}: stage {s}'s order {order!r}")
    return art


# As training-pp holds its stages' activations: within 10%, or a few
# scalars' bytes on a stage that keeps almost nothing.
ACTIVATION_TOLERANCE = 0.10
ACTIVATION_SLACK_BYTES = 16


def activations(tag, art, stdout, errors):
    """Each stage's activations kept (autopar-run's peak of its chunk
    micro-batches' residuals) within ACTIVATION_TOLERANCE of the report's
    prediction (its walk of the interleaved order over what each chunk
    keeps: the chunks keep unequal activations)."""
    with open(art + "-report.json") as f:
        report = json.load(f)
    measured = [int(b) for b in re.findall(r"stage \d+ (\d+) B \(", stdout)]
    if len(measured) != report["mesh"]["pp"]:
        errors.append(f"{tag}: no activations kept per stage in:\n{stdout}")
    for s, got in enumerate(measured):
        predicted = next(st["memory_breakdown_bytes"]["activations"]
                         for st in report["stages"] if st["stage"] == s)
        print(f"  {tag} stage {s}: activations kept {got} B, "
              f"predicted {predicted:.0f} B")
        if abs(got - predicted) > max(ACTIVATION_TOLERANCE * predicted,
                                      ACTIVATION_SLACK_BYTES):
            errors.append(f"{tag} stage {s}: activations kept {got} B, the "
                          f"report predicts {predicted:.0f} B")


def expect_refusal(case, tag, ranks, flags, wanted, errors, config=None):
    """autopar-compile refuses `flags` with an error holding `wanted`."""
    _, result = case.compile(tag, ranks, *flags, config=config,
                             expect_ok=False)
    text = result.stdout + result.stderr
    if result.returncode == 0 or wanted not in text:
        errors.append(f"{case.name} {tag}: expected a refusal holding "
                      f"{wanted!r}, got rc {result.returncode}:\n{text}")
    else:
        print(f"PASS {case.name} {tag}: refused ({wanted})")


def main():
    build, work, launcher = sys.argv[1], sys.argv[2], sys.argv[3:]
    if not launcher:
        sys.exit("usage: train_interleaved.py BUILD_DIR WORK_DIR MPIRUN "
                 "[FLAG...]")
    os.makedirs(work, exist_ok=True)
    errors = []
    torch.manual_seed(0)

    # MLP: 24 samples, batches of 8 in 4 micro-batches of 2 (a multiple of
    # pp), AdamW with clipping (the global norm adds every chunk's sums),
    # warmup-cosine.
    data = mlp_data()
    mlp, micro, one = pipelined_case(build, work, launcher, "mlp", WideMlp(),
                                     data, 8, 2, CONFIG, "--shuffle", "3")
    for tag, ranks, chunks, flags in (
            ("pp2x2", 2, 2, ()),
            ("pp2x2-recompute", 2, 2, ("--recompute", "full")),
            ("dp2xpp2x2-zero1", 4, 2, ("--zero", "1")),
            ("pp2x3", 2, 3, ())):
        art = compile_interleaved(mlp, tag, ranks, 2, chunks, errors, *flags,
                                  config=micro)
        result = mlp.train(tag, art, ranks, launcher, "--shuffle", "3")
        errors += compare(f"mlp {tag}", one[:2], result)
        if f"interleaved over {chunks} model chunks" not in result[2]:
            errors.append(f"mlp {tag}: autopar-run did not say it runs the "
                          f"interleaved schedule:\n{result[2]}")
        check_model_state(f"mlp {tag}", art, result[2], errors)
        activations(f"mlp {tag}", art, result[2], errors)

    # --eval-data: every stage runs its chunks' eval programs over the
    # held-out micro-batches in the interleaved forward order.
    errors += eval_equals_one_rank(build, mlp, launcher,
                                   (("pp2x2", 2), ("dp2xpp2x2-zero1", 4),
                                    ("pp2x3", 2)))

    # GPT: 12 sequences, batches of 4 in 4 micro-batches of 1.
    data, key_bias, gpt_config = gpt_setup()
    gpt, gpt_micro, gpt_one = pipelined_case(build, work, launcher, "gpt",
                                             WideGpt(), data, 4, 1, gpt_config)
    art = compile_interleaved(gpt, "pp2x2", 2, 2, 2, errors,
                              config=gpt_micro)
    whole = gpt.train("pp2x2", art, 2, launcher)
    errors += compare("gpt pp2x2", gpt_one[:2], whole, noise_only=key_bias)
    activations("gpt pp2x2", art, whole[2], errors)
    # Each stage checkpoints every chunk's parameters: resumed under the
    # same plan bitwise, and on one rank.
    ckpt = resumed_bitwise(gpt, "pp2x2", art, 2, launcher, whole, errors)
    errors += on_one_rank(gpt, "pp2x2", gpt_one, ckpt, launcher, key_bias)
    # Each virtual stage partitioned over its tp group (attention by heads,
    # the MLP by columns then rows).
    art_tp = compile_interleaved(gpt, "tp2xpp2x2", 4, 2, 2, errors, "--tp",
                                 "2", config=gpt_micro)
    result = gpt.train("tp2xpp2x2", art_tp, 4, launcher)
    errors += compare("gpt tp2xpp2x2", gpt_one[:2], result,
                      noise_only=key_bias)
    check_model_state("gpt tp2xpp2x2", art_tp, result[2], errors)
    activations("gpt tp2xpp2x2", art_tp, result[2], errors)

    errors += eval_equals_one_rank(build, gpt, launcher,
                                   (("pp2x2", 2), ("tp2xpp2x2", 4)))

    # Tied weights: the token table in virtual stage 0 (stage 0) and the
    # head in virtual stage 3 (stage 1); its gradient summed over them.
    tied, tied_micro, tied_one = pipelined_case(
        build, work, launcher, "gpt-tied", TiedGpt(), data, 4, 1, gpt_config)
    art_tied = compile_interleaved(tied, "pp2x2", 2, 2, 2, errors,
                                   config=tied_micro)
    errors += compare("gpt (tied) pp2x2", tied_one[:2],
                      tied.train("pp2x2", art_tied, 2, launcher),
                      noise_only=key_bias)

    # Refusals, each saying what to change.
    expect_refusal(mlp, "gpipe", 2,
                   ("--pp", "2", "--virtual-stages", "2",
                    "--pipeline-schedule", "gpipe"),
                   "runs the interleaved 1F1B schedule, not "
                   "--pipeline-schedule gpipe", errors, config=micro)
    expect_refusal(mlp, "pp1", 2,
                   ("--pp", "1", "--virtual-stages", "2"),
                   "--pp=1 has no pipeline", errors, config=micro)
    expect_refusal(mlp, "too-many", 2,
                   ("--pp", "2", "--virtual-stages", "64"),
                   "fewer than 128 virtual stages", errors, config=micro)
    expect_refusal(mlp, "zero-chunks", 2,
                   ("--pp", "2", "--virtual-stages", "0"),
                   "--virtual-stages 0 must be at least 1", errors,
                   config=micro)
    infer = run([os.path.join(build, "bin", "autopar-compile"),
                 os.path.join(mlp.dir, "model.onnx"), "--cluster", "local:2",
                 "--pp", "2", "--virtual-stages", "2", "--plan-only"],
                expect_ok=False)
    if (infer.returncode == 0 or "--virtual-stages applies to training"
            not in infer.stdout + infer.stderr):
        errors.append("inference with --virtual-stages was not refused:\n" +
                      infer.stdout + infer.stderr)
    # A manifest whose micro-batches the interleaved schedule cannot group.
    with open(os.path.join(art, "manifest.json")) as f:
        manifest = json.load(f)
    manifest["pipeline"]["micro_batches"] = 3
    bad = os.path.join(gpt.dir, "bad-art")
    run(["rm", "-rf", bad])
    run(["cp", "-r", art, bad])
    with open(os.path.join(bad, "manifest.json"), "w") as f:
        json.dump(manifest, f)
    result = run([os.path.join(build, "bin", "autopar-run"), bad, "--train",
                  "--data", os.path.join(gpt.dir, "data"), "--steps", "1"],
                 expect_ok=False)
    if (result.returncode == 0 or "pipeline.virtual_stages" not in
            result.stderr or "not a multiple" not in result.stderr):
        errors.append("a manifest of 3 micro-batches over 2 interleaved "
                      "stages was not refused:\n" + result.stdout +
                      result.stderr)

    errors += Case.comm_errors
    if errors:
        sys.exit("FAILED:\n" + "\n".join(errors))
    print("PASS: interleaved pipelines train to one rank's numbers")


if __name__ == "__main__":
    main()
