#!/usr/bin/env python3
"""Checkpoints, resume and --shuffle of `autopar-run --train` on a compiled
training step (an MLP, AdamW with clipping and a warmup-cosine schedule):

1. resume: 6 steps straight vs 3 steps + checkpoint + `--resume` to 6, with
   `--shuffle`: the final parameters and every metrics record's loss, lr and
   grad_norm are bitwise equal;
2. a save killed with SIGKILL (AUTOPAR_TEST_CRASH_IN_CHECKPOINT) at each
   point of the save (AUTOPAR_TEST_CRASH_POINT: its directory made, half of
   a chunk written, its rank file written, the metadata written, the
   directory renamed, latest.tmp written) leaves the previous checkpoint
   valid and `latest` naming it, and resuming from it again gives the
   uninterrupted run's parameters bit for bit; a writer slower than the
   steps after its save (AUTOPAR_TEST_SLOW_WRITE_MS) lets them run and its
   checkpoint still resumes bit for bit;
3. shuffle order: PyTorch fed the batches of `autopar.data.batches` (the
   Python twin of the runtime's order) agrees with autopar-run --shuffle on
   every step's loss and the final parameters within 1e-4, and the in-order
   batches do not (so the comparison can fail);
4. dropout: an MLP with Dropout trained with --seed 3 resumes (without
   --seed: the checkpoint records it) bit for bit, and resuming it with
   another --seed is refused;
5. fp16: the dynamic loss scaler's state resumes bit for bit (loss scale
   and skipped steps included).

Usage: train_resume.py AUTOPAR_COMPILE AUTOPAR_RUN WORK_DIR
"""
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
from autopar import data as autopar_data  # noqa: E402
from gradcheck import Mlp  # noqa: E402
from train_vs_torch import deepspeed_lr  # noqa: E402

BATCH, SAMPLES, STEPS, SEED = 6, 21, 8, 5  # 3 batches per epoch, 3 left over
CONFIG = {
    "train_batch_size": BATCH, "gradient_clipping": 0.5,
    "optimizer": {"type": "AdamW", "params": {
        "lr": 0.01, "betas": [0.9, 0.95], "eps": 1e-8, "weight_decay": 0.1}},
    "scheduler": {"type": "WarmupCosineLR", "params": {
        "warmup_num_steps": 3, "total_num_steps": 10}}}


def run(cmd, env=None, expect_ok=True):
    result = subprocess.run(cmd, capture_output=True, text=True,
                            env=None if env is None else {**os.environ, **env})
    if expect_ok and result.returncode != 0:
        sys.exit("FAILED: " + " ".join(cmd) + "\n" + result.stdout +
                 result.stderr)
    return result


def read_metrics(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


def same_bits(a, b):
    return np.float32(a).tobytes() == np.float32(b).tobytes()


class DropoutMlp(torch.nn.Module):
    """Mlp with a training-mode Dropout between its layers."""

    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 16)
        self.drop = torch.nn.Dropout(0.3)
        self.fc2 = torch.nn.Linear(16, 5)

    def forward(self, x, y):
        return torch.nn.functional.cross_entropy(
            self.fc2(self.drop(torch.relu(self.fc1(x)))), y, ignore_index=-1)


class Case:
    def __init__(self, compiler, runner, work, model_class=Mlp,
                 config=CONFIG):
        self.runner, self.work = runner, work
        torch.manual_seed(0)
        self.model = model_class()
        self.data = {"x": torch.randn(SAMPLES, 8),
                     "y": torch.randint(0, 5, (SAMPLES,))}
        self.data["y"][4] = -1  # An ignored target, as Mlp.data has.
        self.initial = {k: v.detach().clone()
                        for k, v in self.model.state_dict().items()}
        onnx_path = os.path.join(work, "mlp.onnx")
        torch.onnx.export(self.model, (self.data["x"][:BATCH],
                                       self.data["y"][:BATCH]), onnx_path,
                          training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False, input_names=["x", "y"],
                          output_names=["loss"])
        self.data_dir = os.path.join(work, "data")
        os.makedirs(self.data_dir, exist_ok=True)
        for key, value in self.data.items():
            np.save(os.path.join(self.data_dir, key + ".npy"), value.numpy())
        cfg = os.path.join(work, "config.json")
        with open(cfg, "w") as f:
            json.dump(config, f)
        self.art = os.path.join(work, "art")
        run([compiler, onnx_path, "--cluster", "local:1", "--mode", "train",
             "--train-config", cfg, "--input-shape", f"x={BATCH}x8",
             "--input-shape", f"y={BATCH}", "-o", self.art])

    def train(self, name, steps, *flags, env=None, expect_ok=True):
        """autopar-run --train; returns (result, metrics path, outputs dir)."""
        metrics = os.path.join(self.work, name + ".jsonl")
        out = os.path.join(self.work, name + "-out")
        result = run([self.runner, self.art, "--train", "--data",
                      self.data_dir, "--steps", str(steps), "--metrics",
                      metrics, "--outputs", out, *flags], env, expect_ok)
        return result, metrics, out

    def torch_losses(self, seed):
        """PyTorch on the batches autopar.data.batches gives."""
        self.model.load_state_dict(self.initial)
        params = dict(CONFIG["optimizer"]["params"])
        optimizer = torch.optim.AdamW(self.model.parameters(), **params)
        losses = []
        for step, indices in enumerate(autopar_data.batches(
                SAMPLES, BATCH, STEPS, seed=seed)):
            index = torch.tensor(indices)
            optimizer.zero_grad()
            loss = self.model(self.data["x"][index], self.data["y"][index])
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.model.parameters(),
                                           CONFIG["gradient_clipping"])
            for group in optimizer.param_groups:
                group["lr"] = deepspeed_lr(CONFIG, step)
            optimizer.step()
            losses.append(float(loss))
        return losses


def check_bitwise(errors, tag, names, straight, resumed):
    """Every record of `resumed`'s metrics (a run that stopped and resumed,
    maybe repeating steps) equals the straight run's record of its step, and
    every step is there; the final parameters are equal."""
    (_, m1, o1), (_, m2, o2) = straight, resumed
    a = {r["step"]: r for r in read_metrics(m1)}
    b = read_metrics(m2)
    if sorted({r["step"] for r in b}) != sorted(a):
        errors.append(f"{tag}: steps {[r['step'] for r in b]}")
    for rb in b:
        ra = a.get(rb["step"], {})
        for key in ("loss", "lr", "grad_norm", "loss_scale", "skipped"):
            if key not in rb and key not in ra:
                continue
            if key not in ra or key not in rb or \
                    not same_bits(ra[key], rb[key]):
                errors.append(f"{tag}: step {rb['step']} {key} "
                              f"{rb[key]!r} != {ra.get(key)!r}")
    for name in names:
        x = np.load(os.path.join(o1, name + ".npy"))
        y = np.load(os.path.join(o2, name + ".npy"))
        if x.tobytes() != y.tobytes():
            errors.append(f"{tag}: {name} differs (max "
                          f"{np.abs(x - y).max():.3e})")


def main():
    compiler, runner, work = sys.argv[1:4]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    torch.set_num_threads(1)
    case = Case(compiler, runner, work)
    errors = []
    shuffle = ["--shuffle", str(SEED)]

    # 1. Straight vs stopped at 3 and resumed.
    straight = case.train("straight", 6, *shuffle)
    ckpt = os.path.join(work, "ckpt")
    case.train("resumed", 3, *shuffle, "--checkpoint-dir", ckpt)
    resumed = case.train("resumed", 6, *shuffle, "--checkpoint-dir", ckpt,
                         "--resume")
    if "resumed from" not in resumed[0].stdout:
        errors.append("resume: no 'resumed from' line:\n" + resumed[0].stdout)
    names = [name for name, _ in case.model.named_parameters()]
    check_bitwise(errors, "resume", names, straight, resumed)

    # 2. Killed while saving step 4, at every point of the save: `latest`
    # names step 2 (a step-4 directory, even a complete one, is not
    # `latest` until latest is renamed), and step 2 resumes bitwise.
    for point in ("directory", "mid-file", "file", "metadata", "rename",
                  "latest"):
        ckpt = os.path.join(work, "ckpt-killed-" + point)
        killed = case.train("killed-" + point, 6, *shuffle, "--checkpoint-dir",
                            ckpt, "--checkpoint-every", "2",
                            env={"AUTOPAR_TEST_CRASH_IN_CHECKPOINT": "4",
                                 "AUTOPAR_TEST_CRASH_POINT": point},
                            expect_ok=False)
        with open(os.path.join(ckpt, "latest")) as f:
            latest = f.read().strip()
        if killed[0].returncode != -9 or latest != "step-00000002":
            errors.append(f"save killed at {point}: exit "
                          f"{killed[0].returncode}, latest {latest!r} "
                          "(expected -9 and step-00000002)")
            continue
        again = case.train("killed-" + point, 6, *shuffle, "--checkpoint-dir",
                           ckpt, "--checkpoint-every", "2", "--resume")
        if "resumed from " + os.path.join(ckpt, "step-00000002") not in \
                again[0].stdout:
            errors.append(f"save killed at {point}: did not resume from "
                          f"step 2:\n" + again[0].stdout)
        check_bitwise(errors, f"save killed at {point}", names, straight,
                      again)
        # The step-4 save of the resumed run replaced what the crash left.
        with open(os.path.join(ckpt, "latest")) as f:
            if f.read().strip() != "step-00000006":
                errors.append(f"save killed at {point}: the resumed run's "
                              "checkpoints did not become latest")

    # 2b. A writer slower than the steps after it (AUTOPAR_TEST_SLOW_WRITE_MS):
    # training goes on while step 3's file is written; the save completes
    # when the step-6 save must start (at most one in flight), after steps
    # 4-6 ran, and it holds step 3's state although they changed it since.
    ckpt = os.path.join(work, "ckpt-slow-writer")
    slow = case.train("slow-writer", 6, *shuffle, "--checkpoint-dir", ckpt,
                      "--checkpoint-every", "3",
                      env={"AUTOPAR_TEST_SLOW_WRITE_MS": "1500"})
    lines = slow[0].stdout.splitlines()
    wrote = [i for i, line in enumerate(lines)
             if "wrote checkpoint" in line and "step-00000003" in line]
    step6 = [i for i, line in enumerate(lines) if line.startswith("step 6")]
    if not wrote or not step6 or wrote[0] < step6[0] or \
            "while steps 4-6 ran" not in lines[wrote[0]] or \
            "waited" not in lines[wrote[0]]:
        errors.append("slow writer: step 3's save did not complete after "
                      "steps 4-6 ran, waited for by step 6's save:\n" +
                      slow[0].stdout)
    else:
        print("slow writer: " + lines[wrote[0]])
    with open(os.path.join(ckpt, "latest"), "w") as f:
        f.write("step-00000003\n")
    again = case.train("slow-writer", 6, *shuffle, "--checkpoint-dir",
                       ckpt, "--resume")
    check_bitwise(errors, "slow writer's step-3 checkpoint", names, straight,
                  again)

    # 3. The shuffle order against PyTorch fed in the twin's order.
    shuffled = case.train("shuffled", STEPS, *shuffle)
    losses = [r["loss"] for r in read_metrics(shuffled[1])]
    want = case.torch_losses(SEED)
    worst = max(abs(a - b) / max(1.0, abs(b)) for a, b in zip(losses, want))
    if worst > 1e-4:
        errors.append(f"shuffle: losses {losses} != torch {want}")
    for name, p in case.model.named_parameters():
        want_p = p.detach().numpy()
        got = np.load(os.path.join(shuffled[2], name + ".npy"))
        err = np.abs(got - want_p).max() / max(np.abs(want_p).max(), 1e-6)
        if err > 1e-4:
            errors.append(f"shuffle: {name} relative error {err:.2e}")
    in_order = case.torch_losses(None)
    sensitivity = max(abs(a - b) for a, b in zip(losses, in_order))
    if sensitivity < 1e-3:
        errors.append("shuffle: the in-order losses are as close "
                      f"({sensitivity:.1e}); the check cannot fail")

    # 4. Dropout: the seed is part of the checkpoint.
    drop_work = os.path.join(work, "dropout")
    os.makedirs(drop_work)
    drop = Case(compiler, runner, drop_work, DropoutMlp)
    seed = ["--seed", "3"]
    straight = drop.train("straight", 6, *seed)
    ckpt = os.path.join(drop_work, "ckpt")
    drop.train("resumed", 3, *seed, "--checkpoint-dir", ckpt)
    resumed = drop.train("resumed", 6, "--checkpoint-dir", ckpt, "--resume")
    if "dropout masks from seed 3" not in resumed[0].stdout:
        errors.append("dropout: the resumed run did not take seed 3:\n" +
                      resumed[0].stdout)
    check_bitwise(errors, "dropout resume",
                  [n for n, _ in drop.model.named_parameters()], straight,
                  resumed)
    other = drop.train("other-seed", 6, "--seed", "4", "--checkpoint-dir",
                       ckpt, "--resume", expect_ok=False)
    if other[0].returncode == 0 or "--seed 3" not in other[0].stderr:
        errors.append("dropout: resuming with another --seed was not "
                      "refused:\n" + other[0].stdout + other[0].stderr)
    unseeded = drop.train("unseeded", 6)
    if same_bits(read_metrics(unseeded[1])[0]["loss"],
                 read_metrics(straight[1])[0]["loss"]):
        errors.append("dropout: seeds 0 and 3 gave the same first loss")

    # 5. fp16: the loss scaler's state (scale, hysteresis, the window,
    # applied steps) resumes with the checkpoint. 2^20 overflows at once
    # and a window of 2 grows it back, so the scale moves before and after
    # the stop.
    fp16_work = os.path.join(work, "fp16")
    os.makedirs(fp16_work)
    fp16 = Case(compiler, runner, fp16_work, config=dict(CONFIG, fp16={
        "enabled": True, "initial_scale_power": 20, "hysteresis": 1,
        "loss_scale_window": 2}))
    straight = fp16.train("straight", 6, *shuffle)
    ckpt = os.path.join(fp16_work, "ckpt")
    fp16.train("resumed", 3, *shuffle, "--checkpoint-dir", ckpt)
    resumed = fp16.train("resumed", 6, *shuffle, "--checkpoint-dir", ckpt,
                         "--resume")
    check_bitwise(errors, "fp16 resume", names, straight, resumed)
    scales = [r["loss_scale"] for r in read_metrics(straight[1])]
    if len(set(scales[:3])) < 2 or len(set(scales[3:])) < 2:
        errors.append(f"fp16 resume: the loss scale did not move on both "
                      f"sides of the stop: {scales}")

    print(f"resume: bitwise equal over 6 steps; killed save: resumed from "
          f"step 2; shuffle: max loss difference to torch {worst:.2e} "
          f"(fp16 loss scales {scales}) "
          f"(in order would be {sensitivity:.2e}); dropout: the seed "
          f"resumes with the checkpoint")
    for e in errors:
        print("FAIL:", e)
    print("train_resume: " + ("FAILED" if errors else "OK"))
    sys.exit(1 if errors else 0)


if __name__ == "__main__":
    main()
