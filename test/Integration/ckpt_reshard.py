#!/usr/bin/env python3
"""Checkpoints outlive their plan: resharded on load, and an elastic restart.

A checkpoint records every tensor by its global shape, as chunks that tile it
(docs/training.md, "Checkpoints"); any plan reads the blocks it holds. For the
GPT and the CNN with BatchNorm (test/Integration/gradcheck.py), each writer
plan trains steps 1-3 and checkpoints; a reader plan of another rank count or
ZeRO stage resumes at step 4 and trains to step 6. Steps 4-6's losses and the
final parameters must equal an uninterrupted one-rank run's within 1e-5
relative (train_dp.compare):
- dp4 ZeRO-3 -> dp2 ZeRO-1 (parameter blocks of 4 read as whole tensors, and
  states of 4 blocks as states of 2);
- local:1 -> local:4 with the plan the search picks;
- dp2 ZeRO-2 -> local:1;
and between tensor and pipeline parallelism and the rest:
- dp2 -> tp2 (whole tensors read as tp blocks; the CNN's channels, with
  BatchNorm's running statistics, split);
- tp2 x pp2 -> local:1 (each stage's tp blocks read as whole tensors);
- local:1 -> dp1 x tp2 x pp2, and tp2 -> pp2;
- 8 ranks (dp2 x tp2 x pp2, ZeRO-1) -> local:1, and local:1 -> 8 ranks
  (dp2 x tp2 x pp2, ZeRO-3), on the GPT.
The writers checksum their chunks in blocks of 64 bytes
(--checkpoint-block-bytes), so each reader reads only the blocks that hold
its part of a coarser chunk.
Elastic restart: a 4-rank ZeRO-3 GPT run checkpointing every 2 steps loses a
rank at step 4 (AUTOPAR_TEST_FAULT=kill); autopar-compile re-plans for
local:2, autopar-run --resume continues from step 2, and the loss curve
continues as one rank's.

Usage: ckpt_reshard.py BUILD_DIR WORK_DIR MPIRUN [MPIRUN_FLAG...]
"""
import os
import re
import subprocess
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import train_dp  # noqa: E402
from gradcheck import Cnn, Gpt  # noqa: E402

sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
from autopar import ckpt  # noqa: E402

STEPS = train_dp.STEPS  # 6
SPLIT = 3  # the writer trains steps 1-3


def reshard(case, one, writer, reader, launcher, noise_only=None):
    """The writer plan (ranks, flags) to step 3, the reader plan from there."""
    (wranks, wflags), (rranks, rflags) = writer, reader
    tag = f"{wranks}{''.join(wflags)}-to-{rranks}{''.join(rflags)}".replace("--", "-")
    ckpt = os.path.join(case.dir, tag + "-ckpt")
    train_dp.run(["rm", "-rf", ckpt])
    wart, _ = case.compile(f"w{wranks}{''.join(wflags)}", wranks, *wflags)
    # Chunks checksummed in blocks of 64 bytes: each reader reads the blocks
    # that hold its part of them (bytes read below).
    case_steps(case, wart, wranks, launcher, SPLIT, "--checkpoint-dir", ckpt,
               "--checkpoint-every", str(SPLIT), "--checkpoint-block-bytes", "64")
    rart, result = case.compile(f"r{rranks}{''.join(rflags)}", rranks, *rflags)
    resumed = case.train(tag, rart, rranks, launcher, "--checkpoint-dir", ckpt,
                         "--resume")
    read = re.search(r"this rank read (\d+) of the training state's (\d+) bytes",
                     resumed[2])
    share = f", rank 0 read {read.group(1)} of {read.group(2)} bytes" if read else ""
    return train_dp.compare(f"{case.name} {tag} ({mesh(result)}{share})",
                            (one[0][SPLIT:], one[1]), resumed, noise_only=noise_only)


def mesh(compiled):
    """'dp=2 tp=1 pp=1 zero 1 ...' from autopar-compile's plan table."""
    line = next((line for line in compiled.stdout.splitlines()
                 if line.strip().startswith("mesh")), "?")
    return " ".join(line.split()[1:6])


def case_steps(case, art, ranks, launcher, steps, *flags):
    """Trains `art` to `steps` (not train_dp's STEPS)."""
    cmd = [os.path.join(case.build, "bin", "autopar-run"), art, "--train", "--data",
           case.data, "--steps", str(steps), *flags]
    if ranks > 1:
        cmd = [*launcher, "-np", str(ranks), *cmd]
    train_dp.run(cmd)


def elastic(case, one, launcher, noise_only):
    """A rank of a 4-rank run dies at step 5; re-planned for 2 ranks, the run
    continues from the latest checkpoint: step 2's, or step 4's if its save
    (written in the background) completed before the fault."""
    ckpt = os.path.join(case.dir, "elastic-ckpt")
    train_dp.run(["rm", "-rf", ckpt])
    art4, _ = case.compile("elastic4", 4, "--zero", "3")
    cmd = [*launcher, "-np", "4", os.path.join(case.build, "bin", "autopar-run"), art4,
           "--train", "--data", case.data, "--steps", str(STEPS), "--checkpoint-dir",
           ckpt, "--checkpoint-every", "2", "--timeout", "10"]
    env = dict(os.environ, AUTOPAR_TEST_FAULT="kill", AUTOPAR_TEST_FAULT_RANK="2",
               AUTOPAR_TEST_FAULT_STEP="5")
    died = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    with open(os.path.join(ckpt, "latest")) as f:
        latest = f.read().strip()
    if died.returncode == 0 or latest not in ("step-00000002", "step-00000004"):
        return [f"elastic: the 4-rank run should have died at step 5 with step 2 or 4 "
                f"saved; exit {died.returncode}, latest {latest!r}"]
    at = int(latest.split("-")[1])
    art2, result = case.compile("elastic2", 2)
    resumed = case.train("elastic2", art2, 2, launcher, "--checkpoint-dir", ckpt,
                         "--resume")
    return train_dp.compare(f"{case.name} elastic: 4 ranks (ZeRO-3) lose one at step 5, "
                            f"re-planned for 2 ({mesh(result)}), resumed at step {at + 1}",
                            (one[0][at:], one[1]), resumed, noise_only=noise_only)


def docs_reader(case):
    """The 26-line reader of docs/checkpoints.md, run on the checkpoint of 4
    ZeRO-3 ranks, gives every tensor as autopar-ckpt does."""
    with open(os.path.join(HERE, "..", "..", "docs", "checkpoints.md")) as f:
        code = re.search(r"<!-- reader -->\n```python\n(.*?)```", f.read(), re.S).group(1)
    scope = {}
    exec(code, scope)
    ckpt_dir = os.path.join(case.dir, "4-zero3-to-2-zero1-ckpt")
    tensors = scope["read_checkpoint"](ckpt_dir)
    tool = ckpt.Checkpoint(ckpt_dir)
    chunked = sum(len(t["chunks"]) > 1 for t in tool.meta["tensors"])
    wrong = [name for name in tensors
             if not np.array_equal(tensors[name], tool.read(name))]
    if wrong or set(tensors) != {t["name"] for t in tool.meta["tensors"]} or not chunked:
        return [f"docs/checkpoints.md's reader: {wrong or 'other tensors'} differ "
                f"from autopar-ckpt's ({chunked} tensors in several chunks)"]
    print(f"PASS docs/checkpoints.md's reader: {len(tensors)} tensors ({chunked} in "
          f"blocks of 4 ranks) as autopar-ckpt reads them")
    return []


def main():
    build, work, launcher = sys.argv[1], sys.argv[2], sys.argv[3:]
    if not launcher:
        sys.exit("usage: ckpt_reshard.py BUILD_DIR WORK_DIR MPIRUN [FLAG...]")
    os.makedirs(work, exist_ok=True)
    torch.manual_seed(0)
    errors = []
    plans = [((4, ("--zero", "3")), (2, ("--zero", "1"))),
             ((1, ()), (4, ())),
             ((2, ("--zero", "2")), (1, ()))]

    gpt_config = dict(train_dp.CONFIG)
    gpt_config["optimizer"] = {"type": "AdamW", "params": dict(
        train_dp.CONFIG["optimizer"]["params"], eps=1e-6)}
    data = {"idx": torch.randint(0, Gpt.vocab, (12, Gpt.seq)),
            "targets": torch.randint(0, Gpt.vocab, (12, Gpt.seq))}
    gpt = train_dp.Case(build, work, "gpt", Gpt(), data, 4, gpt_config)
    one = gpt.train("one", gpt.compile("one", 1)[0], 1, launcher)
    # qkv.bias's key third has an exactly zero gradient (train_dp.py).
    noise = {"qkv.bias": slice(Gpt.width, 2 * Gpt.width)}
    tp_pp = ("--tp", "2", "--pp", "2")
    # 8 ranks (dp2 x tp2 x pp2, ZeRO) to one and one to 8.
    dp_tp_pp = ("--dp", "2", *tp_pp)
    for writer, reader in plans + [((2, ()), (2, ("--tp", "2"))),
                                   ((4, tp_pp), (1, ())),
                                   ((1, ()), (4, tp_pp)),
                                   ((2, ("--tp", "2")), (2, ("--pp", "2"))),
                                   ((8, (*dp_tp_pp, "--zero", "1")), (1, ())),
                                   ((1, ()), (8, (*dp_tp_pp, "--zero", "3")))]:
        errors += reshard(gpt, one, writer, reader, launcher, noise)
    errors += elastic(gpt, one, launcher, noise)
    errors += docs_reader(gpt)

    cnn_data = {"x": torch.randn(12, 3, 12, 12), "y": torch.randint(0, 3, (12,))}
    cnn = train_dp.Case(build, work, "cnn", Cnn(), cnn_data, 4, train_dp.CONFIG)
    one = cnn.train("one", cnn.compile("one", 1)[0], 1, launcher)
    # Under tp the convolutions' channels, and so BatchNorm's parameters and
    # running statistics, are split; under pp each stage holds its own.
    for writer, reader in plans + [((2, ()), (2, ("--tp", "2"))),
                                   ((4, tp_pp), (1, ())),
                                   ((1, ()), (4, tp_pp)),
                                   ((2, ("--tp", "2")), (2, ("--pp", "2")))]:
        errors += reshard(cnn, one, writer, reader, launcher)

    if errors:
        sys.exit("\n".join(errors))
    print("checkpoints resume under every other plan")


if __name__ == "__main__":
    main()
