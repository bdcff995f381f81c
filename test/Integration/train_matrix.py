#!/usr/bin/env python3
"""The whole distributed-training matrix: every model under every plan against one rank.

Issue 14's invariant (docs/distributed-training.md): any plan gives the loss
curve and the parameters one rank gives, within 1e-5 relative (per tensor:
max |difference| / max |reference|; entries with an exactly zero gradient,
where Adam scales rounding noise up, at the noise's level). This script runs
the matrix: the MLP, the GPT, the GPT with Dropout and the CNN with
BatchNorm, each on local:2, 4 and 8, under dp, tp, pp, dp x tp, tp x pp,
dp x pp, dp x tp x pp, ZeRO 1/2/3 (also with pp, tp, and tp x pp),
recompute selective and full, sequence parallelism (tp, dp x tp, tp x pp: the
models without repeated layers refuse it), and the automatic plan. A plan the compiler refuses (not built yet, or not
applicable to the model: a convolution under tp, BatchNorm under tp x pp)
is listed with the compiler's reason; every other plan must train to one
rank's numbers, and its collectives must equal the plan report's
(--check-comm).

CI runs a representative part of this matrix (training-dp, training-tp,
training-pp); this script runs all of it (about 10 to 20 minutes on 2 cores):

  test/Integration/train_matrix.py build build/train-matrix mpirun --allow-run-as-root --oversubscribe
  test/Integration/train_matrix.py build build/train-matrix mpirun ... --ranks 2,4 --models mlp,gpt
  test/Integration/train_matrix.py build build/train-matrix mpirun ... --plans "dp x tp ZeRO-1,tp x pp"

It prints one line per cell and a table at the end, and exits 1 if any plan
that compiled differs from one rank (refusals do not fail it).
"""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gradcheck import Gpt  # noqa: E402
from train_dp import CONFIG, Case, compare  # noqa: E402
from train_tp import WideCnn, WideGpt, WideMlp  # noqa: E402

# (name, pins for `ranks`) -- None where the plan does not fit the rank count.
PLANS = [
    ("dp", lambda n: ["--dp", str(n)]),
    ("dp ZeRO-1", lambda n: ["--dp", str(n), "--zero", "1"]),
    ("dp ZeRO-2", lambda n: ["--dp", str(n), "--zero", "2"]),
    ("dp ZeRO-3", lambda n: ["--dp", str(n), "--zero", "3"]),
    ("dp recompute selective", lambda n: ["--dp", str(n), "--recompute", "selective"]),
    ("dp recompute full", lambda n: ["--dp", str(n), "--recompute", "full"]),
    ("tp", lambda n: ["--tp", str(n)]),
    ("dp x tp", lambda n: ["--tp", "2"] if n >= 4 else None),
    ("dp x tp ZeRO-1", lambda n: ["--tp", "2", "--zero", "1"] if n >= 4 else None),
    ("dp x tp ZeRO-3", lambda n: ["--tp", "2", "--zero", "3"] if n >= 4 else None),
    ("pp", lambda n: ["--pp", str(n)]),
    ("dp x pp", lambda n: ["--pp", "2"] if n >= 4 else None),
    ("dp x pp ZeRO-1", lambda n: ["--pp", "2", "--zero", "1"] if n >= 4 else None),
    ("dp x pp ZeRO-2", lambda n: ["--pp", "2", "--zero", "2"] if n >= 4 else None),
    ("dp x pp ZeRO-3", lambda n: ["--pp", "2", "--zero", "3"] if n >= 4 else None),
    ("pp recompute selective", lambda n: ["--pp", "2", "--recompute", "selective"]),
    ("pp recompute full", lambda n: ["--pp", "2", "--recompute", "full"]),
    ("pp gpipe", lambda n: ["--pp", "2", "--pipeline-schedule", "gpipe"]),
    ("tp x pp", lambda n: ["--tp", "2", "--pp", "2"] if n >= 4 else None),
    ("dp x tp x pp", lambda n: ["--tp", "2", "--pp", "2"] if n >= 8 else None),
    ("dp x tp x pp ZeRO-1", lambda n: ["--tp", "2", "--pp", "2", "--zero", "1"] if n >= 8 else None),
    ("dp x tp x pp ZeRO-3", lambda n: ["--tp", "2", "--pp", "2", "--zero", "3"] if n >= 8 else None),
    ("tp sequence-parallel", lambda n: ["--tp", str(n), "--sequence-parallel", "on"]),
    ("dp x tp sequence-parallel", lambda n: ["--tp", "2", "--sequence-parallel", "on"] if n >= 4 else None),
    ("tp x pp sequence-parallel", lambda n: ["--tp", "2", "--pp", "2", "--sequence-parallel", "on"] if n >= 4 else None),
    ("automatic", lambda n: []),
]


def models(batch):
    """(name, module, data, batch, config, zero-gradient entries)."""
    torch.manual_seed(0)
    gpt_config = json.loads(json.dumps(CONFIG))
    gpt_config["optimizer"]["params"]["eps"] = 1e-6
    key_bias = {"qkv.bias": slice(WideGpt.width, 2 * WideGpt.width)}
    tokens = {"idx": torch.randint(0, WideGpt.vocab, (3 * batch, WideGpt.seq)),
              "targets": torch.randint(0, WideGpt.vocab, (3 * batch, WideGpt.seq))}
    return [
        ("mlp", WideMlp(), {"x": torch.randn(3 * batch, 64),
                            "y": torch.randint(0, 16, (3 * batch,))},
         CONFIG, {}),
        ("gpt", WideGpt(), tokens, gpt_config, key_bias),
        ("gpt-dropout", WideGpt(dropout=0.1), tokens, gpt_config, key_bias),
        ("cnn", WideCnn(), {"x": torch.randn(3 * batch, 3, 16, 16),
                            "y": torch.randint(0, 10, (3 * batch,))},
         # A gentle rate: at 1 or 2 samples per replica, BatchNorm's backward
         # amplifies rounding; lr 0.1 with momentum grows 1e-7 differences
         # of the first steps to 1e-3 of the tiny BN biases by step 6.
         {"optimizer": {"type": "SGD", "params": {"lr": 0.01, "momentum": 0.9}}},
         {}),
    ]


def main():
    argv = sys.argv[1:]
    opts = {"--ranks": "2,4,8", "--models": "mlp,gpt,gpt-dropout,cnn",
            "--batch": "8", "--plans": ",".join(name for name, _ in PLANS)}
    for flag in opts:
        if flag in argv:
            i = argv.index(flag)
            opts[flag] = argv[i + 1]
            del argv[i:i + 2]
    if len(argv) < 3 or argv[0] in ("-h", "--help"):
        print(__doc__)
        sys.exit(2)
    build, work, launcher = argv[0], argv[1], argv[2:]
    args = argparse.Namespace(build=build, work=work, ranks=opts["--ranks"],
                              models=opts["--models"],
                              batch=int(opts["--batch"]))
    ranks = [int(r) for r in args.ranks.split(",")]
    wanted = set(args.models.split(","))
    plans = [(name, pins) for name, pins in PLANS
             if name in opts["--plans"].split(",")]
    unknown = set(opts["--plans"].split(",")) - {name for name, _ in PLANS}
    if unknown:
        sys.exit(f"--plans: unknown {sorted(unknown)}; the plans are "
                 f"{', '.join(name for name, _ in PLANS)}")
    os.makedirs(args.work, exist_ok=True)
    rows, failures = [], []
    for name, module, data, config, noise in models(args.batch):
        if name not in wanted:
            continue
        case = Case(args.build, args.work, name, module, data, args.batch, config)
        seed = ["--seed", "5"] if "dropout" in name else []
        one = case.train("local1", case.compile("local1", 1)[0], 1, launcher, *seed)
        for n in ranks:
            for plan, pins in plans:
                flags = pins(n)
                if flags is None:
                    continue
                tag = f"{plan.replace(' ', '-')}-{n}"
                art, result = case.compile(tag, n, *flags, expect_ok=False,
                                           automatic=not flags)
                if result.returncode != 0:
                    lines = result.stderr.strip().splitlines() or ["?"]
                    reason = next((line for line in lines if "error:" in line),
                                  lines[-1])
                    reason = reason.split("error:", 1)[-1].strip()
                    rows.append((name, n, plan, "not yet", reason[:110]))
                    print(f"REFUSED {name} local:{n} {plan}: {reason}", flush=True)
                    continue
                mesh = next((line.split("mesh", 1)[1].split("schedule")[0].strip()
                             for line in result.stdout.splitlines()
                             if line.strip().startswith("mesh")), "?")
                errors = compare(f"{name} local:{n} {plan}", one[:2],
                                 case.train(tag, art, n, launcher, *seed),
                                 noise_only=noise)
                rows.append((name, n, plan, "FAIL" if errors else "equal", " ".join(mesh.split())))
                failures += errors
    failures += Case.comm_errors
    print()
    print(f"{'model':12} {'ranks':>5}  {'plan':24} {'result':8} mesh / reason")
    for name, n, plan, result, detail in rows:
        print(f"{name:12} {n:>5}  {plan:24} {result:8} {detail}")
    if failures:
        sys.exit("FAILED:\n" + "\n".join(failures))
    print("every plan that compiled equals one rank's")


if __name__ == "__main__":
    main()
