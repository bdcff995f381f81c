#!/usr/bin/env python3
"""Pipeline-parallel training on CPU ranks equals training on one rank.

The invariant of distributed training (docs/distributed-training.md): a plan
does not change the model's math. `autopar-compile --mode train --pp P` on
`local:N` cuts the forward into P stages as the planner places them,
differentiates each stage on its own (its outputs' cotangents in, its
inputs' cotangents out), splits each into a forward and a backward program
(the forward values the backward reads kept per micro-batch, or, with
recompute full, recomputed from the stage's inputs) and gives each stage a
step that normalises the sums over the micro-batches and the replicas as one
rank would and updates the stage's parameters. autopar-run walks each
stage's GPipe or 1F1B schedule over the micro-batches.

Each case trains the same steps on the same data on one rank and on the
pipeline and requires every step's loss within 1e-5 relative and every final
parameter within 1e-5 of its largest magnitude, and the messages and
collectives each rank ran to equal the plan report's predicted ones, call
for call and byte for byte (--check-comm):

- mlp: pp2 with 1F1B and with GPipe, 4 micro-batches; pp2 with recompute
  full and selective; dp2 x pp2 on 4 ranks, also with ZeRO-1 (each
  replica updates a block of its stage's optimizer states), ZeRO-2
  (from its block of the gradients, reduce-scattered once per step) and
  ZeRO-3 (holding blocks of the parameters, gathered by each micro-batch's
  forward and backward; resumed bitwise);
  tp2 x pp2 (each stage partitioned over its tp group), also with
  recompute full; dp2 x tp2 x pp2 on 8 ranks, also with ZeRO-1 and ZeRO-3
  over the replicas of the tp blocks (each rank holding a block, dim 0
  over dp, of its tp block: resumed bitwise, and on one rank); each rank
  holds the
  parameters and optimizer states the report predicts; pp4, deeper than
  the MLP's layers (the planner cuts the loss's own chain; the loss's parts
  still come out of the last stage);
- gpt: embeddings, attention, LayerNorm, a GELU MLP and cross-entropy, pp2
  with AdamW, dp2 x pp2, tp2 x pp2, and with Dropout (masks by global
  sample index: each micro-batch's forward is told its first sample), also
  with recompute selective, and tp2 x pp2 with it; dp2 x tp2 x pp2 with
  ZeRO-2 on 8 ranks, holding the model state the report predicts;
- faults: a rank of a dp2 x pp2 run killed or hung at step 5 ends every
  rank within the timeout, and the last checkpoint resumes bitwise;
- the automatic plan (no --dp, --tp or --pp) for the GPT on 2 and 4 ranks,
  whichever family the search picks;
- tied weights: a GPT whose head is its token table (GPT-2's) on pp2,
  pp3 (the middle stage holds no copy, yet joins the all-reduce),
  dp2 x pp2, dp2 x pp2 with ZeRO-2 and ZeRO-3, and tp2 x pp2 (both stages
  split the table by vocabulary): each stage holds the table, its gradient
  (or block) summed over the stages; stopped at step 3 and resumed
  bitwise, and on one rank;
- --save-onnx: the GPT on pp2 and tp2 x pp2 and the tied GPT on pp2 and
  tp2 x pp2 write one trained model whose initializers are the run's parameters;
- checkpoints: the GPT on pp2 and on tp2 x pp2 stopped at step 3 and
  resumed under the same plan equals the uninterrupted run bitwise (each
  stage writes its parameters, each tp rank its blocks); the checkpoints
  resume on one rank, and one rank's on pp2;
- cnn: convolutions with BatchNorm in both stages (each stage's forward
  updates its running statistics, carried across micro-batches; replicas
  share their batch statistics), pp2, pp2 with recompute full, dp2 x pp2
  with ZeRO-1, tp2 x pp2 (channels, and so running statistics, split within
  the tp groups), and pp2 with 2 micro-batches the user asks for (per
  micro-batch statistics, as one rank's with the same micro-batches); the
  running statistics are compared as parameters, checkpointed (resumed
  bitwise, and on one rank) and written by --save-onnx;
- a stage that trains nothing: one linear layer on pp2, its loss alone in
  stage 1;
- mixed precision: the GPT in bf16 and in fp16 (dynamic loss scaling) on
  pp2, tp2 x pp2 and dp2 x pp2 with ZeRO-1 against one rank in the same
  precision and micro-batches (within MIXED_TOL: 16-bit rounding at other
  points); under fp16 every run skips the steps one rank skips, at its
  loss scales, and pp2 stopped at step 3 resumes bitwise;
- --eval-data: every stage runs its eval program over the held-out
  micro-batches; the eval losses equal one rank's for the MLP on pp4 and
  dp2 x tp2 x pp2 with ZeRO-3, the GPT on pp2,
  dp2 x pp2 and tp2 x pp2, the tied GPT on tp2 x pp2 and dp2 x pp2 with
  ZeRO-3, the GPT with Dropout on pp2 (Dropout off) and the CNN on pp2,
  dp2 x pp2 with ZeRO-1 and tp2 x pp2 (BatchNorm on its running
  statistics);
- refusals: a weight tied across stages in roles their tp plans cut
  differently, under --tp and --pp: an error naming it, the stages and
  their cuts.

Usage: train_pp.py BUILD_DIR WORK_DIR MPIRUN [MPIRUN_FLAG...]
"""
import json
import os
import re
import sys

import numpy as np
import onnx
import onnx.numpy_helper
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_dp import (CONFIG, Case, check_faults,  # noqa: E402
                      check_mixed_precision, compare, eval_equals_one_rank,
                      on_one_rank, resumed_bitwise, run)
from train_tp import WideGpt, WideMlp, check_model_state  # noqa: E402


class PipelineCnn(nn.Module):
    """Three convolutions with BatchNorm, average pooling and a linear head:
    the planner's pipeline of two stages puts BatchNorm in both."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        self.conv2 = nn.Conv2d(16, 32, 3, stride=2, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(32)
        self.conv3 = nn.Conv2d(32, 32, 3, padding=1, bias=False)
        self.bn3 = nn.BatchNorm2d(32)
        self.fc = nn.Linear(32, 10)

    def forward(self, x, y):
        h = F.relu(self.bn1(self.conv1(x)))
        h = F.relu(self.bn2(self.conv2(h)))
        h = F.relu(self.bn3(self.conv3(h)))
        h = F.adaptive_avg_pool2d(h, 1).flatten(1)
        return F.cross_entropy(self.fc(h), y)


class Linear(nn.Module):
    """One linear layer (no bias) and cross-entropy."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 4, bias=False)

    def forward(self, x, y):
        return F.cross_entropy(self.fc(x), y)


class TiedGpt(WideGpt):
    """The GPT with its language-model head tied to the token embedding (as
    GPT-2's): the exported graph reads `wte.weight` in a Gather (stage 0)
    and a Transpose for the head (the last stage)."""

    def __init__(self):
        super().__init__()
        self.head.weight = self.wte.weight


class TiedAcrossRoles(nn.Module):
    """A weight tied across stages in two roles: the first GEMM of stage 0's
    pair (split by columns within a tp group) and the second of stage 1's,
    which the stage's plan keeps whole. The stages cannot sum its gradient
    block by block, so tp x pp is refused."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(16, 16, bias=False)
        self.b = nn.Linear(16, 16, bias=False)
        self.c = nn.Linear(16, 16, bias=False)
        self.head = nn.Linear(16, 10)

    def forward(self, x, y):
        h = self.b(F.gelu(self.a(x)))
        h = F.linear(F.gelu(self.c(h)), self.a.weight)
        return F.cross_entropy(self.head(h), y)


def pipeline_config(base, batch, micro_batch):
    return {**base, "train_batch_size": batch,
            "train_micro_batch_size_per_gpu": micro_batch}


def pipelined_case(build, work, launcher, name, model, data, batch,
                   micro_batch, config, *train_flags):
    """`model` exported as a Case, a config of `batch` samples in
    micro-batches of `micro_batch` written beside it, and its run on one
    rank: (case, the config's path, one rank's (losses, params, stdout))."""
    case = Case(build, work, name, model, data, batch, config)
    micro = os.path.join(case.dir, "micro.json")
    with open(micro, "w") as f:
        json.dump(pipeline_config(config, batch, micro_batch), f)
    one = case.train("local1", case.compile("local1", 1)[0], 1, launcher,
                     *train_flags)
    return case, micro, one


def mlp_data():
    """The MLP's data: 24 samples of 64 features, 16 classes."""
    return {"x": torch.randn(24, 64), "y": torch.randint(0, 16, (24,))}


def gpt_setup():
    """The GPT's data (12 sequences), the entries whose gradient is exactly
    zero (the key third of qkv.bias: softmax is invariant to a per-query
    constant; compared at the noise's level) and its config."""
    data = {"idx": torch.randint(0, WideGpt.vocab, (12, WideGpt.seq)),
            "targets": torch.randint(0, WideGpt.vocab, (12, WideGpt.seq))}
    key_bias = {"qkv.bias": slice(WideGpt.width, 2 * WideGpt.width)}
    gpt_config = json.loads(json.dumps(CONFIG))
    gpt_config["optimizer"]["params"]["eps"] = 1e-6
    return data, key_bias, gpt_config


def compile_pp(case, tag, ranks, pp, errors, *flags, config=None,
               no_eval=None):
    """Compiles `case` for `pp` stages on `ranks` ranks: every stage must
    have its forward, backward and eval programs, or, where `no_eval` names
    the reason, no eval program and that reason in the manifest."""
    art, result = case.compile(tag, ranks, "--pp", str(pp), *flags,
                               config=config)
    if f"pipeline      {pp} stages" not in result.stdout:
        errors.append(f"{case.name} {tag}: the compiler did not report the "
                      f"pipeline:\n{result.stdout}")
    with open(os.path.join(art, "manifest.json")) as f:
        manifest = json.load(f)
    phases = sorted((p["stage"], p["phase"]) for p in manifest["programs"]
                    if "phase" in p)
    want = sorted((s, ph) for s in range(pp)
                  for ph in ("forward", "backward") + (() if no_eval
                                                       else ("eval",)))
    why = manifest["training"].get("eval_unavailable", "")
    if phases != want or (no_eval and no_eval not in why):
        errors.append(f"{case.name} {tag}: programs {phases}, expected a "
                      f"forward and a backward per stage, and "
                      f"{'no eval: ' + no_eval if no_eval else 'an eval'}; "
                      f"eval_unavailable: {why!r}")
    return art


# How far a stage's measured activations may be from the plan report's:
# 10%, or a few scalars' bytes on a stage that keeps almost nothing (the
# planner prices the loss's label flags on the stage that held its count).
ACTIVATION_TOLERANCE = 0.10
ACTIVATION_SLACK_BYTES = 16


def activations_kept(tag, art, stdout, table, held=True):
    """Adds to `table` each stage's activations kept between forward and
    backward (autopar-run's 'activations kept per stage' line: residuals
    per micro-batch times the micro-batches in flight) beside the plan
    report's prediction, which main() requires within
    ACTIVATION_TOLERANCE (docs/distributed-training.md, "Activation
    memory") where `held`."""
    with open(art + "-report.json") as f:
        report = json.load(f)
    measured = [int(b) for b in re.findall(r"stage \d+ (\d+) B \(", stdout)]
    for k, stage in enumerate(report["stages"]):
        predicted = stage["memory_breakdown_bytes"]["activations"]
        got = measured[k] if k < len(measured) else None
        table.append((tag, k, report["recompute"], report["schedule"], got,
                      predicted, held))



def check_mixed_precision_pp(build, work, launcher, data, gpt_config,
                             key_bias, errors, kept):
    """bf16 and fp16 (dynamic loss scaling) under pp2, tp2 x pp2 and
    dp2 x pp2 with ZeRO-1 (check_mixed_precision): each stage's programs
    store activations in the low type (the residuals kept per micro-batch,
    printed beside the plan's activation memory), the master weights,
    gradients and optimizer stay f32. Under fp16 the last stage scales the
    loss; every stage's step holds the loss scaler and reads the overflow
    off the global norm summed over the stages, so that every rank skips
    the same steps and moves the scale alike; pp2 stopped at step 3 resumes
    bitwise (the scaler's state checkpointed once, read back by every
    stage)."""
    def compile_stages(case, tag, ranks, *flags):
        return compile_pp(case, tag, ranks, 2, errors, *flags)

    def after(case, precision, tag, art, ranks, result):
        # Printed, not held (docs/distributed-training.md, "Mixed precision
        # under a plan": measured 0.80-1.00 of the prediction).
        activations_kept(f"gpt {precision} {tag}", art, result[2], kept,
                         held=False)
        if precision == "fp16" and tag == "pp2":
            resumed_bitwise(case, tag, art, ranks, launcher, result, errors)

    check_mixed_precision(
        build, work, launcher, "gpt", WideGpt, data, 4,
        pipeline_config(gpt_config, 4, 1),
        (("pp2", 2, ()), ("tp2xpp2", 4, ("--tp", "2")),
         ("dp2xpp2-zero1", 4, ("--zero", "1"))),
        key_bias, errors, compile_stages, after)


def main():
    build, work, launcher = sys.argv[1], sys.argv[2], sys.argv[3:]
    if not launcher:
        sys.exit("usage: train_pp.py BUILD_DIR WORK_DIR MPIRUN [FLAG...]")
    os.makedirs(work, exist_ok=True)
    errors = []
    # (tag, stage, recompute, schedule, measured, predicted, held)
    kept = []
    torch.manual_seed(0)

    # MLP: 24 samples, batches of 8 in 4 micro-batches of 2, AdamW with
    # clipping (the global norm adds the stages' sums), warmup-cosine.
    data = mlp_data()
    mlp, micro, one = pipelined_case(build, work, launcher, "mlp", WideMlp(),
                                     data, 8, 2, CONFIG, "--shuffle", "3")
    for tag, ranks, pp, flags in (
            ("pp2", 2, 2, ()),
            ("pp2-gpipe", 2, 2, ("--pipeline-schedule", "gpipe")),
            ("pp2-recompute", 2, 2, ("--recompute", "full")),
            ("pp2-selective", 2, 2, ("--recompute", "selective")),
            ("dp2xpp2", 4, 2, ()),
            ("dp2xpp2-zero1", 4, 2, ("--zero", "1")),
            ("dp2xpp2-zero2", 4, 2, ("--zero", "2")),
            ("dp2xpp2-zero3", 4, 2, ("--zero", "3")),
            ("tp2xpp2", 4, 2, ("--tp", "2")),
            ("tp2xpp2-recompute", 4, 2, ("--tp", "2", "--recompute", "full")),
            ("dp2xtp2xpp2", 8, 2, ("--tp", "2")),
            # ZeRO over the replicas of tp blocks: each rank holds dim 0's
            # block (over dp) of its tp block (PyTorch FSDP2's layout).
            ("dp2xtp2xpp2-zero1", 8, 2, ("--tp", "2", "--zero", "1")),
            ("dp2xtp2xpp2-zero3", 8, 2, ("--tp", "2", "--zero", "3")),
            # Deeper than the MLP has layers: the planner cuts the loss's own
            # chain, and the loss's parts still come out of the last stage.
            ("pp4", 4, 4, ())):
        art = compile_pp(mlp, tag, ranks, pp, errors, *flags, config=micro)
        result = mlp.train(tag, art, ranks, launcher, "--shuffle", "3")
        errors += compare(f"mlp {tag}", one[:2], result)
        check_model_state(f"mlp {tag}", art, result[2], errors)
        activations_kept(f"mlp {tag}", art, result[2], kept)
        if tag == "dp2xpp2":
            four = art, result
        if tag in ("dp2xpp2-zero3", "dp2xtp2xpp2-zero3"):
            # Each replica writes its blocks of the stage's parameters
            # (under tp, its blocks of its tp blocks).
            ckpt = resumed_bitwise(mlp, tag, art, ranks, launcher,
                                   result[:2], errors, ("--shuffle", "3"))
            if tag == "dp2xtp2xpp2-zero3":
                # The blocks of blocks tile each tensor: one rank reads
                # them back whole.
                errors += on_one_rank(mlp, tag, one, ckpt, launcher, None,
                                      ("--shuffle", "3"))
    # Faults: a rank of the 4 killed, or hung, at step 5 ends every rank
    # within the timeout (the exchanges of the stages wait under the
    # watchdog too), and the latest checkpoint (step 2's or step 4's)
    # resumes bitwise.
    # Rank 2 (stage 1's first replica) writes a checkpoint file; rank 1, a
    # second replica, writes none.
    errors += check_faults(mlp, four[0], four[1], launcher, save_rank=2)
    # --eval-data on 4 stages (the loss's parts alone in the last ones) and
    # on tp groups of ZeRO-3 replicas (each stage's eval program gathers
    # its replicas' blocks of its tp blocks).
    errors += eval_equals_one_rank(build, mlp, launcher,
                                   (("pp4", 4), ("dp2xtp2xpp2-zero3", 8)))

    # GPT: 12 sequences, batches of 4 in 4 micro-batches of 1.
    data, key_bias, gpt_config = gpt_setup()
    gpt, micro, one = pipelined_case(build, work, launcher, "gpt", WideGpt(),
                                     data, 4, 1, gpt_config)
    art = compile_pp(gpt, "pp2", 2, 2, errors, config=micro)
    whole = gpt.train("pp2", art, 2, launcher)
    errors += compare("gpt pp2", one[:2], whole, noise_only=key_bias)
    activations_kept("gpt pp2", art, whole[2], kept)
    art4 = compile_pp(gpt, "dp2xpp2", 4, 2, errors,
                      config=micro)
    errors += compare("gpt dp2xpp2", one[:2],
                      gpt.train("dp2xpp2", art4, 4, launcher),
                      noise_only=key_bias)
    # Tensor parallelism within the stages: each stage's forward planned for
    # its tp group (attention by heads, the MLP split by columns then rows)
    # and partitioned with its backward.
    art_tp = compile_pp(gpt, "tp2xpp2", 4, 2, errors, "--tp", "2",
                        config=micro)
    whole_tp = gpt.train("tp2xpp2", art_tp, 4, launcher)
    errors += compare("gpt tp2xpp2", one[:2], whole_tp, noise_only=key_bias)
    activations_kept("gpt tp2xpp2", art_tp, whole_tp[2], kept)

    # ZeRO-2 over the replicas of the GPT's tp blocks (attention by heads,
    # the MLP by columns and rows; each gradient block reduce-scattered).
    art8 = compile_pp(gpt, "dp2xtp2xpp2-zero2", 8, 2, errors, "--tp", "2",
                     "--zero", "2", config=micro)
    result = gpt.train("dp2xtp2xpp2-zero2", art8, 8, launcher)
    errors += compare("gpt dp2xtp2xpp2 zero2", one[:2], result,
                      noise_only=key_bias)
    check_model_state("gpt dp2xtp2xpp2 zero2", art8, result[2], errors)

    # The automatic plan: without --dp, --tp or --pp the search chooses
    # among data and tensor parallelism and pipelines of either (any ZeRO
    # stage); whatever it picks trains to one rank's numbers.
    for ranks in (2, 4):
        art_auto, result = gpt.compile(f"auto{ranks}", ranks, config=micro,
                                       automatic=True)
        mesh = next((line.split("mesh", 1)[1].strip()
                     for line in result.stdout.splitlines()
                     if line.strip().startswith("mesh")), "?")
        errors += compare(f"gpt automatic plan on {ranks} ranks ({mesh})",
                          one[:2],
                          gpt.train(f"auto{ranks}", art_auto, ranks, launcher),
                          noise_only=key_bias)

    # Checkpoints: stopped at step 3 and resumed under the same plan, the
    # run is bitwise the uninterrupted one; each stage wrote its own part.
    # The same checkpoint on one rank (each stage wrote its own tensors), and
    # one rank's checkpoint on the pipeline: the model hash is the plan's
    # neither way.
    ckpt = resumed_bitwise(gpt, "pp2", art, 2, launcher, whole, errors)
    errors += on_one_rank(gpt, "pp2", one, ckpt, launcher, key_bias)
    ckpt1 = os.path.join(gpt.dir, "local1-ckpt")
    run(["rm", "-rf", ckpt1])
    gpt.train("local1-saved", os.path.join(gpt.dir, "local1-art"), 1,
              launcher, "--checkpoint-dir", ckpt1, "--checkpoint-every", "3")
    run(["sh", "-c", f"echo step-00000003 > {ckpt1}/latest"])
    errors += compare("gpt one rank's checkpoint resumed on pp2",
                      (one[0][3:], one[1]),
                      gpt.train("local1-on-pp2", art, 2, launcher,
                                "--checkpoint-dir", ckpt1, "--resume"),
                      noise_only=key_bias)

    # Under tp x pp too: each tp rank writes its blocks, each stage its
    # tensors; resumed under the same plan it is bitwise the uninterrupted
    # run, and on one rank it continues one rank's curve.
    ckpt = resumed_bitwise(gpt, "tp2xpp2", art_tp, 4, launcher, whole_tp,
                           errors)
    errors += on_one_rank(gpt, "tp2xpp2", one, ckpt, launcher, key_bias)

    # Tied weights (GPT-2's head is its token table): stages 0 and 1 each
    # hold the table, and its gradient is summed over them (one all-reduce
    # over pp of a bucket, Megatron's embedding group); the first stage
    # counts it in the global norm and checkpoints it.
    tied, tied_micro, tied_one = pipelined_case(
        build, work, launcher, "gpt-tied", TiedGpt(), data, 4, 1, gpt_config)
    art_tied = compile_pp(tied, "pp2", 2, 2, errors, config=tied_micro)
    whole_tied = tied.train("pp2", art_tied, 2, launcher)
    errors += compare("gpt (tied) pp2", tied_one[:2], whole_tied,
                      noise_only=key_bias)
    errors += compare("gpt (tied) dp2xpp2", tied_one[:2],
                      tied.train("dp2xpp2",
                                 compile_pp(tied, "dp2xpp2", 4, 2, errors,
                                            config=tied_micro),
                                 4, launcher),
                      noise_only=key_bias)
    # Under ZeRO-2 and 3 each replica's copy gets its block of the gradient,
    # and the stages' all-reduce of tied gradients sums blocks; under ZeRO-3
    # each stage gathers its copy's blocks where it reads it.
    for zero in ("2", "3"):
        errors += compare(f"gpt (tied) dp2xpp2 ZeRO-{zero}", tied_one[:2],
                          tied.train(f"dp2xpp2-zero{zero}",
                                     compile_pp(tied, f"dp2xpp2-zero{zero}",
                                                4, 2, errors, "--zero", zero,
                                                config=tied_micro),
                                     4, launcher),
                          noise_only=key_bias)
    # Within tp groups too: both stages split the table by vocabulary (the
    # embedding's gather and the head's columns), and the stages' all-reduce
    # sums a tp rank's block with the same block of the other stage.
    art_tied_tp = compile_pp(tied, "tp2xpp2", 4, 2, errors, "--tp", "2",
                             config=tied_micro)
    whole_tied_tp = tied.train("tp2xpp2", art_tied_tp, 4, launcher)
    errors += compare("gpt (tied) tp2xpp2", tied_one[:2], whole_tied_tp,
                      noise_only=key_bias)
    # Three stages: the middle one holds no copy, yet takes part in the
    # all-reduce over pp (riding with the loss's sums, which it reads, so
    # that it is not erased as dead code there).
    errors += compare("gpt (tied) pp3", tied_one[:2],
                      tied.train("pp3",
                                 compile_pp(tied, "pp3", 3, 3, errors,
                                            config=tied_micro),
                                 3, launcher),
                      noise_only=key_bias)
    ckpt = resumed_bitwise(tied, "pp2", art_tied, 2, launcher, whole_tied,
                           errors)
    errors += on_one_rank(tied, "pp2", tied_one, ckpt, launcher, key_bias)

    # bf16 and fp16 (dynamic loss scaling) under pipelines.
    check_mixed_precision_pp(build, work, launcher, data, gpt_config,
                             key_bias, errors, kept)

    # CNN with BatchNorm in both stages: each stage's forward updates its
    # running statistics, carried from one micro-batch to the next; the
    # replicas of a stage share their batch statistics (SyncBatchNorm's
    # all-reduces over dp in the forward and the backward). The planner cuts
    # no micro-batches of it unless asked: with 2 of 4 (the user's opt-in)
    # the statistics are per micro-batch, as one rank's with 2 of 4.
    cnn_data = {"x": torch.randn(24, 3, 16, 16),
                "y": torch.randint(0, 10, (24,))}
    cnn_config = {"optimizer": {"type": "SGD",
                                "params": {"lr": 0.1, "momentum": 0.9}}}
    cnn = Case(build, work, "cnn", PipelineCnn(), cnn_data, 8, cnn_config)
    cnn_micro = os.path.join(cnn.dir, "micro.json")
    with open(cnn_micro, "w") as f:
        json.dump(pipeline_config(cnn_config, 8, 4), f)
    cnn_one = cnn.train("local1", cnn.compile("local1", 1)[0], 1, launcher)
    cnn_one_micro = cnn.train(
        "local1-micro", cnn.compile("local1-micro", 1, config=cnn_micro)[0],
        1, launcher)
    for tag, ranks, flags, ref, config in (
            ("pp2", 2, (), cnn_one, None),
            ("pp2-recompute", 2, ("--recompute", "full"), cnn_one, None),
            ("dp2xpp2-zero1", 4, ("--zero", "1"), cnn_one, None),
            ("tp2xpp2", 4, ("--tp", "2"), cnn_one, None),
            ("pp2-micro", 2, (), cnn_one_micro, cnn_micro)):
        art_cnn = compile_pp(cnn, tag, ranks, 2, errors, *flags,
                             config=config)
        with open(os.path.join(art_cnn, "manifest.json")) as f:
            updates = [(p["stage"], a) for p in json.load(f)["programs"]
                       if p.get("phase") == "forward"
                       for a in p["arguments"]
                       if a["kind"] == "update" and "running" in a["name"]]
        updating = sorted({stage for stage, _ in updates})
        if updating != [0, 1]:
            errors.append(f"cnn {tag}: the stages whose forward updates "
                          f"running statistics are {updating}, expected "
                          f"both (the test's split no longer covers them)")
        # Within tp groups the channels, and so the running statistics and
        # their updates, are split: each rank updates its block.
        split = [a["name"] for _, a in updates if "split" in a]
        if "--tp" in flags and not split:
            errors.append(f"cnn {tag}: no running statistic is split over "
                          "tp (the test no longer covers split updates)")
        result = cnn.train(tag, art_cnn, ranks, launcher)
        activations_kept(f"cnn {tag}", art_cnn, result[2], kept)
        errors += compare(f"cnn {tag}", ref[:2], result)
        if tag == "pp2":
            art_cnn_pp2, whole_cnn = art_cnn, result
    ckpt = resumed_bitwise(cnn, "pp2", art_cnn_pp2, 2, launcher, whole_cnn,
                           errors)
    errors += on_one_rank(cnn, "pp2", cnn_one, ckpt, launcher, {})

    # A stage that trains nothing: one Linear layer and its loss on pp2 (a
    # batch of 3 no data-parallel plan divides) puts the loss alone in stage
    # 1. It passes cotangents back and takes part in the loss's and the
    # clipping norm's sums over the stages.
    linear = Case(build, work, "linear", Linear(),
                  {"x": torch.randn(9, 8), "y": torch.randint(0, 4, (9,))}, 3,
                  CONFIG)
    linear_one = linear.train("local1", linear.compile("local1", 1)[0], 1,
                              launcher)
    art_linear = compile_pp(linear, "pp2", 2, 2, errors)
    with open(art_linear + "-report.json") as f:
        notes = json.load(f).get("notes", [])
    if not any("stage 1 trains no parameter" in n for n in notes):
        errors.append(f"linear pp2: the report's notes {notes} do not say "
                      "that stage 1 trains nothing (the test no longer "
                      "covers such a stage)")
    result = linear.train("pp2", art_linear, 2, launcher)
    errors += compare("linear pp2 (stage 1 trains nothing)", linear_one[:2],
                      result)
    activations_kept("linear pp2", art_linear, result[2], kept)

    # --save-onnx: the first rank gathers every stage's parameters (a tp
    # stage's blocks, a tied weight once) into the trained model, which
    # onnx's checker accepts and whose initializers are the run's
    # parameters, exactly.
    for case, tag, art_save, ranks, ref in (
            (gpt, "pp2", art, 2, whole), (gpt, "tp2xpp2", art_tp, 4, whole_tp),
            (tied, "pp2", art_tied, 2, whole_tied),
            (tied, "tp2xpp2", art_tied_tp, 4, whole_tied_tp),
            (cnn, "pp2", art_cnn_pp2, 2, whole_cnn)):
        path = os.path.join(case.dir, f"{tag}-trained.onnx")
        saved = case.train(f"{tag}-save", art_save, ranks, launcher,
                           "--save-onnx", path)
        model = onnx.load(path)
        onnx.checker.check_model(model)
        inits = {i.name: onnx.numpy_helper.to_array(i)
                 for i in model.graph.initializer}
        wrong = sorted(name for name, value in saved[1].items()
                       if name not in inits or
                       not np.array_equal(inits[name], value))
        if wrong or saved[0] != ref[0]:
            errors.append(f"{case.name} {tag} --save-onnx: the model's "
                          f"initializers differ from the run's parameters: "
                          f"{wrong}, or the losses from the run without it")
        else:
            print(f"PASS {case.name} {tag} --save-onnx: the trained model "
                  f"holds the run's {len(saved[1])} parameters")

    # --eval-data: each stage runs its eval program (Dropout off, BatchNorm
    # on its running statistics) over the held-out micro-batches, sending
    # activations on as its forward does; the last stage adds up the loss.
    # The eval losses equal one rank's. Within tp groups each stage's eval
    # program holds the blocks its step holds (a tied table too); under
    # ZeRO-3 it gathers its replicas' blocks where it reads them.
    errors += eval_equals_one_rank(build, gpt, launcher,
                                   (("pp2", 2), ("dp2xpp2", 4),
                                    ("tp2xpp2", 4)))
    errors += eval_equals_one_rank(build, tied, launcher,
                                   (("tp2xpp2", 4), ("dp2xpp2-zero3", 4)))
    errors += eval_equals_one_rank(build, cnn, launcher,
                                   (("pp2", 2), ("dp2xpp2-zero1", 4),
                                    ("tp2xpp2", 4)))

    # GPT with Dropout: each micro-batch's forward draws the masks of its
    # samples' global indices, as one rank does.
    drop = Case(build, work, "gpt-dropout", WideGpt(dropout=0.1), data, 4,
                gpt_config)
    one = drop.train("local1", drop.compile("local1", 1)[0], 1, launcher,
                     "--seed", "5")
    art = compile_pp(drop, "pp2", 2, 2, errors, config=micro)
    result = drop.train("pp2", art, 2, launcher, "--seed", "5")
    errors += compare("gpt (Dropout) pp2", one[:2], result,
                      noise_only=key_bias)
    errors += eval_equals_one_rank(build, drop, launcher, (("pp2", 2),))
    activations_kept("gpt (Dropout) pp2", art, result[2], kept)
    # Selective recomputation recomputes the memory-bound ops (LayerNorm,
    # GELU, the softmax chain) in the backward, but not the masks.
    art = compile_pp(drop, "pp2-selective", 2, 2, errors, "--recompute",
                     "selective", config=micro)
    result = drop.train("pp2-selective", art, 2, launcher, "--seed", "5")
    errors += compare("gpt (Dropout) pp2 recompute selective", one[:2],
                      result, noise_only=key_bias)
    activations_kept("gpt (Dropout) pp2 selective", art, result[2], kept)
    # And within tp groups: the partitioned masks are the whole masks'
    # blocks; selective recomputation keeps what tp all-reduced.
    # Its eval graph (no Dropout) is planned otherwise within the tp
    # groups: --eval-data says why it cannot run.
    art = compile_pp(drop, "tp2xpp2-selective", 4, 2, errors, "--tp", "2",
                     "--recompute", "selective", config=micro,
                     no_eval="the eval program's tensor-parallel plan of "
                     "pipeline stage 0 holds parameter 'wpe.weight' split "
                     "along dim 0 (tensor<4x32xf32>), the step's split along "
                     "dim 1 (tensor<8x16xf32>)")
    errors += compare("gpt (Dropout) tp2xpp2 recompute selective", one[:2],
                      drop.train("tp2xpp2-selective", art, 4, launcher,
                                 "--seed", "5"),
                      noise_only=key_bias)
    want = ("--eval-data: " + os.path.join(art, "manifest.json") +
            " has no eval program for pipeline stage ")
    refused = run([*launcher, "-np", "4",
                   os.path.join(build, "bin", "autopar-run"), art, "--train",
                   "--data", drop.data, "--steps", "1", "--eval-data",
                   drop.data], expect_ok=False)
    if refused.returncode == 0 or want not in refused.stderr:
        errors.append(f"gpt (Dropout) tp2xpp2 --eval-data: expected an error "
                      f"saying '{want}...', got exit {refused.returncode}:\n"
                      f"{refused.stderr}")
    else:
        print("PASS gpt (Dropout) tp2xpp2 --eval-data refused, saying why")

    # Refusals at compile time.
    roles = Case(build, work, "tied-roles", TiedAcrossRoles(),
                 {"x": torch.randn(16, 16), "y": torch.randint(0, 10, (16,))},
                 8, CONFIG)
    for case, tag, flags, want in (
            (roles, "tp2xpp2", ("--pp", "2", "--tp", "2"),
             "parameter 'a.weight' is read by pipeline stages 0 and 1 (tied "
             "weights), whose tensor-parallel plans lay it out differently: "
             "stage 0 splits its dim 0 over 2 ranks, stage 1 keeps it whole"),
    ):
        result = case.compile(tag, 4, *flags, expect_ok=False)[1]
        if result.returncode == 0 or want not in result.stderr:
            errors.append(f"{case.name} {tag}: expected an error saying "
                          f"'{want}', got exit {result.returncode}:\n"
                          f"{result.stderr}")
        else:
            print(f"PASS {case.name} {tag} refused, saying why")

    print("activations kept between forward and backward, per stage "
          "(measured; the plan report's prediction beside it):")
    for tag, k, recompute, schedule, got, predicted, held in kept:
        ratio = f"{got / predicted:.2f}" if got and predicted else "-"
        print(f"  {tag:<28} stage {k}  recompute {recompute:<9} "
              f"{schedule:<5} measured {got} B  predicted {predicted} B  "
              f"measured/predicted {ratio}{'' if held else ' (not held)'}")
        if held and (got is None or abs(got - predicted) > max(
                ACTIVATION_TOLERANCE * predicted, ACTIVATION_SLACK_BYTES)):
            errors.append(f"{tag} stage {k}: activations kept {got} B, the "
                          f"plan report predicts {predicted} B (more than "
                          f"{ACTIVATION_TOLERANCE:.0%} apart)")

    errors += Case.comm_errors
    if errors:
        sys.exit("FAILED:\n" + "\n".join(errors))
    print("pipeline-parallel training equals one rank's")


if __name__ == "__main__":
    main()
