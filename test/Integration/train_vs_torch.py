#!/usr/bin/env python3
"""One-rank training against PyTorch: same weights, same data, every step.

Each case builds a small model, exports it in training mode, trains it for
8 steps (the data has 3 batches, so the epoch wraps) with PyTorch (torch.optim,
clip_grad_norm_, DeepSpeed's LR schedule formulas) and with
`autopar-compile --mode train` + `autopar-run --train`, and requires every
step's loss and the final parameters to agree within 1e-4 (relative to the
largest magnitude of the tensor).

Usage: train_vs_torch.py BUILD_DIR WORK_DIR [CASE...]
"""
import json
import math
import os
import subprocess
import sys

import numpy as np
import onnx
import torch
from onnx import numpy_helper
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gradcheck import Block, Cnn, Gpt, Mlp  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "python"))
from autopar import dropout  # noqa: E402

STEPS, BATCHES = 8, 3


def deepspeed_lr(config, iteration):
    """The rate DeepSpeed's scheduler gives at last_batch_iteration
    `iteration` (deepspeed/runtime/lr_schedules.py), written independently
    of autopar's IR."""
    sched = config.get("scheduler")
    base = config["optimizer"]["params"]["lr"]
    if not sched:
        return base
    p = sched.get("params", {})
    warm = max(2, p.get("warmup_num_steps", 1000))
    log = p.get("warmup_type", "log") == "log"

    def rise():
        return (math.log(iteration + 1) / math.log(warm) if log
                else iteration / warm)

    if sched["type"] in ("WarmupLR", "WarmupDecayLR"):
        lo, hi = p.get("warmup_min_lr", 0.0), p.get("warmup_max_lr", 0.001)
        if iteration < warm:
            gamma = rise()
        elif sched["type"] == "WarmupLR":
            gamma = 1.0
        else:
            total = p["total_num_steps"]
            gamma = max(0.0, (total - iteration) / max(1.0, total - warm))
        return lo + (hi - lo) * gamma
    # WarmupCosineLR
    if iteration < warm:
        lo = p.get("warmup_min_ratio", 0.0)
        return base * (lo + rise() * (1 - lo))
    total = p["total_num_steps"]
    cos_min = p.get("cos_min_ratio", 0.0001)
    ratio = (1 + math.cos(math.pi * (iteration - warm + 1) / (total - warm))) / 2
    return base * max(0.0, cos_min + (1 - cos_min) * ratio)


def torch_train(model, data, config, skipped=()):
    """skipped: 0-based steps whose update is skipped (fp16 overflows): the
    batch is used up, the optimizer and the schedule do not move."""
    opt = config["optimizer"]
    params = dict(opt["params"])
    if opt["type"] == "SGD":
        optimizer = torch.optim.SGD(model.parameters(), **params)
    else:
        params.setdefault("weight_decay", 0.0)  # DeepSpeed's default
        optimizer = torch.optim.AdamW(model.parameters(), **params)
    batch = config["train_batch_size"]
    # Gradient accumulation gives one big batch's gradient, which the
    # reference computes in one pass; but BatchNorm's statistics are a
    # micro-batch's, so a BatchNorm model runs its micro-batches one by one
    # (its losses are means over equal counts: each weighs 1 / micro-batches).
    micro = config.get("train_micro_batch_size_per_gpu") or (
        batch // config.get("gradient_accumulation_steps", 1))
    if not any(isinstance(m, nn.BatchNorm2d) for m in model.modules()):
        micro = batch
    losses = []
    applied = 0
    for step in range(STEPS):
        if isinstance(getattr(model, "drop", None), TwinDropout):
            model.drop.start_step(step + 1)
        first = (step % BATCHES) * batch
        optimizer.zero_grad()
        loss = 0.0
        for part in range(first, first + batch, micro):
            args = [v[part:part + micro] for v in data.values()]
            part_loss = model(*args) * (micro / batch)
            part_loss.backward()
            loss += float(part_loss)
        losses.append(float(loss))
        if step in skipped:
            continue
        if config.get("gradient_clipping"):
            torch.nn.utils.clip_grad_norm_(model.parameters(),
                                           config["gradient_clipping"])
        for group in optimizer.param_groups:
            group["lr"] = deepspeed_lr(config, applied)
        optimizer.step()
        applied += 1
    return losses


def run(cmd):
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit("FAILED: " + " ".join(cmd) + "\n" + result.stdout +
                 result.stderr)
    return result.stdout


def autopar_train(build, work, name, model, data, config, run_args=(),
                  exported=None, output="loss", compile_args=()):
    """exported: the inputs the ONNX export takes (default: every data
    input); output: the name of its output."""
    onnx_path = os.path.join(work, name + ".onnx")
    batch = config["train_batch_size"]
    exported = list(data) if exported is None else exported
    example = tuple(data[k][:batch] for k in exported)
    torch.onnx.export(model, example, onnx_path,
                      training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False, input_names=exported,
                      output_names=[output])
    data_dir = os.path.join(work, name + "-data")
    os.makedirs(data_dir, exist_ok=True)
    shapes = []
    for key, value in data.items():
        np.save(os.path.join(data_dir, key + ".npy"), value.numpy())
        if key in exported:
            shapes += ["--input-shape", key + "=" +
                       "x".join(map(str, (batch,) + value.shape[1:]))]
    cfg = os.path.join(work, name + "-config.json")
    with open(cfg, "w") as f:
        json.dump(config, f)
    art, out = (os.path.join(work, name + s) for s in ("-art", "-out"))
    metrics = os.path.join(work, name + "-metrics.jsonl")
    if os.path.exists(metrics):
        os.remove(metrics)
    run([os.path.join(build, "bin", "autopar-compile"), onnx_path,
         "--cluster", "local:1", "--mode", "train", "--train-config", cfg,
         *shapes, *compile_args, "-o", art])
    run([os.path.join(build, "bin", "autopar-run"), art, "--train", "--data",
         data_dir, "--steps", str(STEPS), "--metrics", metrics, "--outputs",
         out, *run_args])
    with open(metrics) as f:
        records = [json.loads(line) for line in f]
    return [r["loss"] for r in records if "loss" in r], out


class TwinDropout(nn.Module):
    """Dropout with the masks autopar draws (autopar.dropout): the k-th call
    of a forward pass is the k-th Dropout node of the export, in graph order."""

    def __init__(self, onnx_path, seed):
        super().__init__()
        graph = onnx.load(onnx_path).graph
        self.nodes = [(n.output[0], numpy_helper.to_array(
            next(i for i in graph.initializer if i.name == n.input[1])
            if any(i.name == n.input[1] for i in graph.initializer)
            else next(c.attribute[0].t for c in graph.node
                      if c.op_type == "Constant" and c.output[0] == n.input[1])))
            for n in graph.node if n.op_type == "Dropout"]
        self.seed, self.step, self.call = seed, 0, 0

    def start_step(self, step):
        self.step, self.call = step, 0

    def forward(self, x):
        name, ratio = self.nodes[self.call]
        self.call += 1
        keep = dropout.dropout_keep(self.seed, self.step, name, x.shape, ratio)
        return (x * torch.from_numpy(keep.astype(np.float32)) *
                float(dropout.dropout_scale(ratio)))


CASES = [
    ("mlp-sgd", Mlp, {"train_batch_size": 6, "optimizer": {
        "type": "SGD", "params": {"lr": 0.1, "momentum": 0.9,
                                  "weight_decay": 1e-3}}}),
    ("mlp-nesterov", Mlp, {"train_batch_size": 6, "optimizer": {
        "type": "SGD", "params": {"lr": 0.05, "momentum": 0.8,
                                  "nesterov": True}}}),
    ("mlp-adamw-cosine", Mlp, {
        "train_batch_size": 6, "gradient_clipping": 0.5,
        "optimizer": {"type": "AdamW", "params": {
            "lr": 0.01, "betas": [0.9, 0.95], "eps": 1e-8,
            "weight_decay": 0.1}},
        "scheduler": {"type": "WarmupCosineLR", "params": {
            "warmup_num_steps": 3, "total_num_steps": 10}}}),
    ("block-sgd-warmup", Block, {
        "train_batch_size": 2,
        "optimizer": {"type": "SGD", "params": {"lr": 0.05, "momentum": 0.9}},
        "scheduler": {"type": "WarmupLR", "params": {
            "warmup_min_lr": 0.0, "warmup_max_lr": 0.05,
            "warmup_num_steps": 4}}}),
    # Gradient accumulation: the MLP's batches of 6 hold one ignored target
    # each, so its micro-batches of 2 have 2 or 1 valid targets and only the
    # whole batch's count gives PyTorch's mean; the CNN's BatchNorm computes
    # statistics per micro-batch, as PyTorch does.
    ("mlp-sgd-accumulate", Mlp, {
        "train_batch_size": 6, "gradient_accumulation_steps": 3,
        "optimizer": {"type": "SGD", "params": {"lr": 0.1, "momentum": 0.9}}}),
    ("gpt-adamw-accumulate", Gpt, {
        "train_batch_size": 3, "train_micro_batch_size_per_gpu": 1,
        "gradient_clipping": 1.0,
        "optimizer": {"type": "AdamW", "params": {
            "lr": 0.01, "betas": [0.9, 0.95], "eps": 1e-6}}}),
    ("cnn-adamw-accumulate", Cnn, {
        "train_batch_size": 3, "train_micro_batch_size_per_gpu": 1,
        "optimizer": {"type": "AdamW", "params": {"lr": 0.003}}}),
    # The key third of qkv.bias has an exactly zero gradient (softmax is
    # invariant to a per-query constant), so both sides see rounding noise
    # of ~1e-9 there; with eps = 1e-8 Adam would scale that noise up to
    # lr-sized, unrelated steps. eps = 1e-6 keeps those steps below 1e-5.
    ("gpt-adamw-cosine", Gpt, {
        "train_batch_size": 3, "gradient_clipping": 1.0,
        "optimizer": {"type": "AdamW", "params": {
            "lr": 0.01, "betas": [0.9, 0.95], "eps": 1e-6,
            "weight_decay": 0.1}},
        "scheduler": {"type": "WarmupCosineLR", "params": {
            "warmup_num_steps": 2, "total_num_steps": 8}}}),
    ("cnn-adamw-decay", Cnn, {
        "train_batch_size": 3, "gradient_clipping": 1.0,
        "optimizer": {"type": "AdamW", "params": {"lr": 0.003}},
        "scheduler": {"type": "WarmupDecayLR", "params": {
            "warmup_num_steps": 2, "total_num_steps": 12,
            "warmup_max_lr": 0.003, "warmup_type": "linear"}}}),
]


def make_data(cls, batch):
    """BATCHES global batches of the class's example inputs."""
    parts = [cls.data(torch.float32) for _ in range(BATCHES)]
    data = {}
    for key in parts[0]:
        tensors = [p[key] for p in parts]
        data[key] = torch.cat(tensors)[:batch * BATCHES]
    return data


def load_trained(model, out):
    """Loads into `model` the parameters and buffers autopar-run --outputs
    wrote to `out` (`<name>.npy`); the others keep their values."""
    state = model.state_dict()
    for key in state:
        path = os.path.join(out, key + ".npy")
        if os.path.exists(path):
            state[key] = torch.from_numpy(np.load(path))
    model.load_state_dict(state)


def compare(name, model, data, config, losses, out, named=None):
    """Trains the reference on the same weights; the errors, printed.
    named: the module whose parameter names the ONNX export has (default:
    the model)."""
    named = model if named is None else named
    reference = torch_train(model, data, config)
    errors = []
    for step, (got, want) in enumerate(zip(losses, reference), 1):
        if abs(got - want) > 1e-4 * max(1.0, abs(want)):
            errors.append(f"step {step} loss {got} != torch {want}")
    worst = 0.0
    # Parameters, and buffers (BatchNorm's running statistics, updated with
    # PyTorch's momentum and unbiased variance; a causal mask, unchanged).
    # num_batches_tracked is not in the ONNX export.
    tensors = list(named.named_parameters()) + [
        (n, b) for n, b in named.named_buffers()
        if not n.endswith("num_batches_tracked")]
    for pname, p in tensors:
        want = p.detach().numpy()
        got = np.load(os.path.join(out, pname + ".npy"))
        err = np.abs(got - want).max() / max(np.abs(want).max(), 1e-6)
        worst = max(worst, err)
        if err > 1e-4:
            errors.append(f"{pname}: relative error {err:.2e}")
    print(f"{name}: losses {reference[0]:.5f} -> {reference[-1]:.5f}, "
          f"max loss difference "
          f"{max(abs(a - b) for a, b in zip(losses, reference)):.2e}, "
          f"worst parameter error {worst:.2e}"
          f"{'' if not errors else ' FAIL: ' + '; '.join(errors)}")
    return errors


DROPOUT_CONFIG = {
    "train_batch_size": 3,
    "optimizer": {"type": "AdamW", "params": {"lr": 0.01, "eps": 1e-6}}}


def check_dropout(build, work):
    """A GPT with dropout 0.2 in four places (embeddings, attention
    probabilities, both residual branches): PyTorch fed autopar's masks
    (the twin in autopar.dropout) gives the same losses and parameters; the
    same seed gives bit-identical runs, another seed other masks; the loss
    of the first batch falls."""
    torch.manual_seed(0)
    model = Gpt(dropout=0.2)
    data = make_data(Gpt, DROPOUT_CONFIG["train_batch_size"])
    initial = {k: v.clone() for k, v in model.state_dict().items()}
    losses, out = autopar_train(build, work, "gpt-dropout", model, data,
                                DROPOUT_CONFIG, ["--seed", "7"])
    again, _ = autopar_train(build, work, "gpt-dropout-again", model, data,
                             DROPOUT_CONFIG, ["--seed", "7"])
    other, _ = autopar_train(build, work, "gpt-dropout-seed8", model, data,
                             DROPOUT_CONFIG, ["--seed", "8"])
    errors = []
    if again != losses:
        errors.append(f"the same seed gave other losses: {losses} vs {again}")
    if other == losses:
        errors.append("seeds 7 and 8 gave the same losses")
    if not losses[3] < losses[0]:
        errors.append(f"the first batch's loss did not fall: {losses}")
    # With gradient accumulation the masks follow the global sample index:
    # the micro-batches draw the whole batch's masks, so the losses are the
    # unaccumulated run's (up to the order of additions).
    accumulate = dict(DROPOUT_CONFIG, train_micro_batch_size_per_gpu=1)
    acc, _ = autopar_train(build, work, "gpt-dropout-acc", model, data,
                           accumulate, ["--seed", "7"])
    worst = max(abs(a - b) / abs(b) for a, b in zip(acc, losses))
    if len(acc) != len(losses) or worst > 1e-5:
        errors.append(f"accumulation: losses {acc} differ from the whole "
                      f"batch's {losses} (relative {worst:.1e})")
    model.load_state_dict(initial)
    model.drop = TwinDropout(os.path.join(work, "gpt-dropout.onnx"), 7)
    if len(model.drop.nodes) != 4:
        errors.append(f"{len(model.drop.nodes)} Dropout nodes, expected 4")
    errors += compare("gpt-dropout", model, data, DROPOUT_CONFIG, losses, out)
    if errors:
        print("gpt-dropout FAIL: " + "; ".join(errors))
    return errors


def check_bf16(build, work):
    """bf16 mixed precision ("bf16": {"enabled": true}): activations stored
    in bf16, GEMM operands rounded to bf16, f32 master weights, gradients
    and optimizer. Its numbers are not PyTorch's fp32 ones, so the check is
    that they are close (losses within 2%, SGD's parameters within 2%), that
    they are not fp32's (the rounding happened), that the parameters come
    back f32 and that the loss falls."""
    errors = []
    for name, cls, config in (
            ("mlp-sgd-bf16", Mlp, {
                "train_batch_size": 6, "optimizer": {
                    "type": "SGD", "params": {"lr": 0.1, "momentum": 0.9}}}),
            ("gpt-adamw-bf16", Gpt, {
                "train_batch_size": 3, "gradient_clipping": 1.0,
                "optimizer": {"type": "AdamW", "params": {
                    "lr": 0.01, "eps": 1e-6}}})):
        torch.manual_seed(0)
        model = cls()
        data = make_data(cls, config["train_batch_size"])
        fp32, _ = autopar_train(build, work, name + "-fp32", model, data,
                                config)
        bf16_config = dict(config, bf16={"enabled": True})
        losses, out = autopar_train(build, work, name, model, data,
                                    bf16_config)
        with open(os.path.join(work, name + "-art", "manifest.json")) as f:
            precision = json.load(f)["training"]["precision"]
        reference = torch_train(model, data, config)
        worst = max(abs(a - b) / abs(b) for a, b in zip(losses, reference))
        problems = []
        if precision != "bf16":
            problems.append(f"the manifest says precision {precision}")
        if worst > 2e-2:
            problems.append(f"losses {losses} vs PyTorch fp32 {reference}")
        if losses == fp32:
            problems.append("the same losses as fp32")
        if not losses[3] < losses[0]:
            problems.append(f"the first batch's loss did not fall: {losses}")
        for pname, p in model.named_parameters():
            got = np.load(os.path.join(out, pname + ".npy"))
            if got.dtype != np.float32:
                problems.append(f"{pname} comes back {got.dtype}")
            want = p.detach().numpy()
            err = np.abs(got - want).max() / max(np.abs(want).max(), 1e-6)
            if config["optimizer"]["type"] == "SGD" and err > 2e-2:
                problems.append(f"{pname}: relative error {err:.2e}")
        print(f"{name}: losses {losses[0]:.5f} -> {losses[-1]:.5f}, worst "
              f"relative loss difference to PyTorch fp32 {worst:.2e}"
              f"{'' if not problems else ' FAIL: ' + '; '.join(problems)}")
        errors += problems
    return errors


def check_fp16(build, work):
    """fp16 mixed precision with DeepSpeed's loss scaling. The GPT's
    gradients overflow fp16 at the default scale 2^16: as in DeepSpeed, the
    first overflow uses up the hysteresis (2), the second halves the scale,
    both steps are skipped (their batches used up, parameters, optimizer
    and schedule unchanged), and training goes on at 2^15 within 2% of
    PyTorch fp32 skipping the same steps. An MLP with a fixed scale of 128
    never overflows and stays within 2% of fp32. A scale that cannot get
    low enough (min_loss_scale 2^35) stops with an error naming the step."""
    errors = []
    torch.manual_seed(0)
    model = Gpt()
    config = {"train_batch_size": 3, "gradient_clipping": 1.0,
              "optimizer": {"type": "AdamW", "params": {"lr": 0.01,
                                                        "eps": 1e-6}},
              "scheduler": {"type": "WarmupLR", "params": {
                  "warmup_min_lr": 0.0, "warmup_max_lr": 0.01,
                  "warmup_num_steps": 4, "warmup_type": "linear"}}}
    data = make_data(Gpt, 3)
    losses, out = autopar_train(build, work, "gpt-fp16", model, data,
                                dict(config, fp16={"enabled": True}))
    with open(os.path.join(work, "gpt-fp16-metrics.jsonl")) as f:
        records = [json.loads(line) for line in f]
    scales = [r["loss_scale"] for r in records]
    skipped = [i for i, r in enumerate(records) if r["skipped"]]
    if scales[:3] != [65536, 65536, 32768] or skipped != [0, 1]:
        errors.append(f"gpt-fp16: loss scales {scales}, skipped steps "
                      f"{skipped}; expected 65536, 65536, 32768... and the "
                      f"first two skipped")
    reference = torch_train(model, data, config, skipped=(0, 1))
    worst = max(abs(a - b) / abs(b) for a, b in zip(losses, reference))
    if worst > 2e-2:
        errors.append(f"gpt-fp16: losses {losses} vs PyTorch fp32 "
                      f"{reference}")
    for pname, p in model.named_parameters():
        if np.load(os.path.join(out, pname + ".npy")).dtype != np.float32:
            errors.append(f"gpt-fp16: {pname} does not come back float32")
    print(f"gpt-fp16: loss scales {scales[:4]}..., skipped {skipped}, worst "
          f"relative loss difference to PyTorch fp32 {worst:.2e}")

    torch.manual_seed(0)
    model = Mlp()
    config = {"train_batch_size": 6, "optimizer": {
        "type": "SGD", "params": {"lr": 0.1, "momentum": 0.9}}}
    data = make_data(Mlp, 6)
    losses, _ = autopar_train(build, work, "mlp-fp16", model, data, dict(
        config, fp16={"enabled": True, "loss_scale": 128}))
    reference = torch_train(model, data, config)
    worst = max(abs(a - b) / abs(b) for a, b in zip(losses, reference))
    if worst > 2e-2:
        errors.append(f"mlp-fp16: losses {losses} vs PyTorch fp32 "
                      f"{reference}")
    print(f"mlp-fp16: fixed scale 128, worst relative loss difference to "
          f"PyTorch fp32 {worst:.2e}")

    torch.manual_seed(0)
    try:
        autopar_train(build, work, "gpt-fp16-min", Gpt(), make_data(Gpt, 3),
                      {"train_batch_size": 3, "fp16": {
                          "enabled": True, "initial_scale_power": 40,
                          "hysteresis": 1, "min_loss_scale": 2.0 ** 35}})
        errors.append("gpt-fp16-min: overflowing at the minimum scale did "
                      "not stop the run")
    except SystemExit as e:
        if "step 6: the fp16 gradients overflow at the minimum loss scale" \
                not in str(e):
            errors.append(f"gpt-fp16-min: unexpected failure: {e}")
    if errors:
        print("fp16 FAIL: " + "; ".join(errors))
    return errors


class TokenLogits(nn.Module):
    """Returns logits [batch, positions, vocabulary] and no loss: trained with
    --loss cross-entropy:logits, which adds F.cross_entropy's loss and a
    `labels` input (ignore_index -100 included)."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(7, 6)
        self.proj = nn.Linear(6, 7)

    def forward(self, idx):
        return self.proj(torch.tanh(self.embed(idx)))


class VocabLogits(nn.Module):
    """TokenLogits with a vocabulary of 300 (the loss kernels' rows span several
    warps) and two layers: the GPU round trip's cross-entropy training cases."""

    def __init__(self, vocab=300, width=32):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.hidden = nn.Linear(width, width)
        self.proj = nn.Linear(width, vocab)

    def forward(self, idx):
        return self.proj(torch.tanh(self.hidden(self.embed(idx))))


def vocab_data(batch, vocab=300, positions=16):
    """BATCHES batches of token ids and labels for VocabLogits, a few labels
    ignored (-100)."""
    generator = torch.Generator().manual_seed(1)
    data = {"idx": torch.randint(0, vocab, (batch * BATCHES, positions),
                                 generator=generator),
            "labels": torch.randint(0, vocab, (batch * BATCHES, positions),
                                    generator=generator)}
    data["labels"][::3, 5] = -100
    return data


class WithCrossEntropy(nn.Module):
    """The reference: the model and F.cross_entropy over flattened logits."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, idx, labels):
        logits = self.model(idx)
        return F.cross_entropy(logits.flatten(0, -2), labels.flatten())


def check_cross_entropy_loss(build, work):
    """--loss cross-entropy:logits against PyTorch's F.cross_entropy."""
    config = {"train_batch_size": 2, "optimizer": {
        "type": "SGD", "params": {"lr": 0.5, "momentum": 0.9}}}
    torch.manual_seed(1)
    data = {"idx": torch.randint(0, 7, (2 * BATCHES, 4)),
            "labels": torch.randint(0, 7, (2 * BATCHES, 4))}
    data["labels"][1, 2] = -100
    errors = []
    # Fused (autopar.softmax_cross_entropy, the default) and the linalg loss.
    for name, extra in (("logits-ce", []),
                        ("logits-ce-unfused", ["--fuse-cross-entropy=false"])):
        torch.manual_seed(0)  # the same weights: compare() trains them
        model = TokenLogits()
        losses, out = autopar_train(build, work, name, model, data, config,
                                    exported=["idx"], output="logits",
                                    compile_args=["--loss",
                                                  "cross-entropy:logits",
                                                  *extra])
        reference = WithCrossEntropy(model)
        errors += compare(name, reference, data, config, losses, out,
                          named=model)
    return errors


def check_eval(build, work):
    """--eval-data: after training, the mean loss of the held-out set's full
    batches equals PyTorch's model.eval() on autopar's trained parameters and
    buffers (Dropout off, BatchNorm on the trained running statistics), for
    the CNN and the GPT with dropout; every --eval-every step is recorded."""
    errors = []
    for name, make in (("cnn-eval", Cnn), ("gpt-eval", lambda: Gpt(dropout=0.2))):
        torch.manual_seed(0)
        model = make()
        batch = 3
        config = {"train_batch_size": batch,
                  "optimizer": {"type": "AdamW", "params": {"lr": 0.01}}}
        data = make_data(type(model), batch)
        held_out = make_data(type(model), batch)
        eval_dir = os.path.join(work, name + "-eval-data")
        os.makedirs(eval_dir, exist_ok=True)
        for key, value in held_out.items():
            np.save(os.path.join(eval_dir, key + ".npy"), value[:2 * batch + 1].numpy())
        _, out = autopar_train(build, work, name, model, data, config,
                               ["--eval-data", eval_dir, "--eval-every", "4"])
        with open(os.path.join(work, name + "-metrics.jsonl")) as f:
            evals = [r for r in map(json.loads, f) if "eval_loss" in r]
        if [r["step"] for r in evals] != [4, 8] or any(r["eval_batches"] != 2 for r in evals):
            errors.append(f"{name}: eval records {evals}")
            continue
        load_trained(model, out)
        model.eval()
        with torch.no_grad():
            want = sum(float(model(*[v[b * batch:(b + 1) * batch] for v in held_out.values()]))
                       for b in range(2)) / 2
        got = evals[-1]["eval_loss"]
        ok = abs(got - want) <= 1e-5 * max(1.0, abs(want))
        print(f"{name}: eval loss {got:.6f}, PyTorch eval {want:.6f}" + ("" if ok else " FAIL"))
        if not ok:
            errors.append(f"{name}: eval loss {got} != PyTorch {want}")
    return errors


def main():
    build, work = sys.argv[1], sys.argv[2]
    only = sys.argv[3:]  # case names to run (default: all)
    os.makedirs(work, exist_ok=True)
    torch.set_num_threads(1)
    passed, failures = 0, []
    for name, cls, config in CASES:
        if only and name not in only:
            continue
        torch.manual_seed(0)
        model = cls()
        data = make_data(cls, config["train_batch_size"])
        losses, out = autopar_train(build, work, name, model, data, config)
        if compare(name, model, data, config, losses, out):
            failures.append(name)
        else:
            passed += 1
    for name, check in [("gpt-dropout", check_dropout),
                        ("logits-ce", check_cross_entropy_loss),
                        ("eval", check_eval), ("bf16", check_bf16),
                        ("fp16", check_fp16)]:
        if only and name not in only:
            continue
        if check(build, work):
            failures.append(name)
        else:
            passed += 1
    print(f"{passed} passed, {len(failures)} failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
