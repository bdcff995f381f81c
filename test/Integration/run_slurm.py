#!/usr/bin/python3
"""autopar-run under Slurm's srun, on a private one-node Slurm cluster.

Starts munged, slurmctld and slurmd on this machine in a temporary directory (its own
slurm.conf with this host's name and CPU count, its own ports, state, spool and log
directories, and a fresh munge key), waits until the node is idle, and then:
  1. compiles real models and runs them with `srun -n 2` and `srun -n 4 --mpi=pmix`
     through run_models.py, which checks every output against onnxruntime and every
     rank's collectives against the plan report: the MLP and GPT data-parallel on 2
     ranks, the MLP tensor-parallel on 2, and GPT and the MLP with --pp 2 --tp 2 on 4;
  2. checks the errors: a wrong world size (srun -n 4 and -n 1 of a 2-rank artifact)
     and srun without PMIx (--mpi=none) stop every rank with one line naming the rank;
  3. checks the fault paths with the runtime tests' fault stage (if built): a rank that
     hangs is named by the watchdog (--timeout 2) and a killed rank ends the step, in
     seconds, leaving no rank behind;
  4. runs the sbatch example of docs/distributed.md (srun inside a batch script) and a
     plain one-rank autopar-run inside an `sbatch -n 2` script;
  5. trains the GPT of test/Integration/gradcheck.py data-parallel with `srun -n 4`
     and checks every step's loss and the final parameters against one rank's
     (train_dp.py's comparison); then runs the batch script `autopar-compile
     --emit-sbatch` wrote for it twice, as a requeued job (to step 3, then resumed
     to the end), and checks the losses of both parts against one rank's.
The daemons are always stopped at the end. Needs root (slurmd starts the tasks).
If Slurm is not installed, has no PMIx plugin or does not start, it prints why and
exits 77 (ctest: skipped). The last line is `P passed, F failed`; exit status 1 if
anything failed.

  test/Integration/run_slurm.py --build-dir build --work-dir build/integration-slurm \\
      --models-dir build/integration/models
  test/Integration/run_slurm.py --keep      # leave the cluster's directory (logs) behind
"""

import argparse
import glob
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

import numpy as np  # noqa: E402

from autopar import tools  # noqa: E402

SKIP = 77
SBIN = ["/usr/sbin", "/usr/bin", "/sbin", "/bin"]


class Skip(Exception):
    """Slurm cannot run here: the reason is printed and the test is skipped."""


def find(name):
    path = shutil.which(name) or shutil.which(name, path=os.pathsep.join(SBIN))
    if not path:
        raise Skip(f"{name} not found (install slurm-wlm and munge: scripts/setup.sh)")
    return path


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def clean_env(extra=None):
    """This process's environment without any launcher's variables: a test run inside
    a Slurm job or under mpirun must not hand its job or world to our srun."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SLURM_", "SRUN_", "SBATCH_", "SALLOC_", "PMI_", "PMIX_", "OMPI_"))}
    env.update(extra or {})
    return env


class Cluster:
    """munged + slurmctld + slurmd on 127.0.0.1, everything under one directory."""

    def __init__(self, root, log):
        self.root, self.log = root, log
        self.procs = []  # (name, Popen), each in its own session
        self.conf = os.path.join(root, "slurm.conf")
        self.env = clean_env({"SLURM_CONF": self.conf})
        self.host = socket.gethostname().split(".")[0]
        self.cpus = os.cpu_count() or 1

    def path(self, *parts):
        return os.path.join(self.root, *parts)

    def start(self, timeout=30):
        munged, slurmctld, slurmd = find("munged"), find("slurmctld"), find("slurmd")
        for name in ("srun", "sbatch", "sinfo", "squeue", "scancel"):
            find(name)
        if os.geteuid() != 0:
            raise Skip("slurmd must run as root to start tasks (run the test as root, as CI does)")
        # munged insists that its socket's directory is open to everyone, its key's not.
        os.chmod(self.root, 0o755)
        for d, mode in (("run", 0o755), ("munge", 0o700), ("state", 0o700), ("spool", 0o755),
                        ("log", 0o755)):
            os.makedirs(self.path(d), mode=mode, exist_ok=True)
            os.chmod(self.path(d), mode)
        key = self.path("munge", "munge.key")
        with open(os.open(key, os.O_WRONLY | os.O_CREAT, 0o600), "wb") as f:
            f.write(os.urandom(1024))
        self.socket = self.path("run", "munge.sock")
        self.spawn("munged", [munged, "-F", "--key-file", key, "--socket", self.socket,
                              "--pid-file", self.path("run", "munged.pid"),
                              "--log-file", self.path("log", "munged.log"),
                              "--seed-file", self.path("munge", "seed")])
        self.wait_for(lambda: os.path.exists(self.socket), 10, "munged did not create its socket")
        self.write_conf()
        self.spawn("slurmctld", [slurmctld, "-D", "-i", "-f", self.conf])
        self.spawn("slurmd", [slurmd, "-D", "-f", self.conf])
        self.wait_for(self.node_idle, timeout, f"node {self.host} did not become idle")
        self.log(f"slurm: node {self.host} idle ({self.cpus} CPUs), {self.root}")

    def write_conf(self):
        root = self.root
        lines = [
            "ClusterName=autopar-test",
            f"SlurmctldHost={self.host}(127.0.0.1)",
            f"SlurmctldPort={free_port()}",
            f"SlurmdPort={free_port()}",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={self.socket}",
            "SlurmUser=root",
            "SlurmdUser=root",
            f"StateSaveLocation={root}/state",
            f"SlurmdSpoolDir={root}/spool",
            f"SlurmctldPidFile={root}/run/slurmctld.pid",
            f"SlurmdPidFile={root}/run/slurmd.pid",
            f"SlurmctldLogFile={root}/log/slurmctld.log",
            f"SlurmdLogFile={root}/log/slurmd.log",
            # No cgroups: works in containers and on machines without Slurm's cgroup setup.
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "SwitchType=switch/none",
            "MpiDefault=none",  # Slurm's default, as on many clusters: the tests pass --mpi
            "SchedulerType=sched/builtin",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core",
            "ReturnToService=2",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/none",
            "SlurmctldTimeout=30",
            "SlurmdTimeout=30",
            "MessageTimeout=10",
            "KillWait=2",
            "InactiveLimit=0",
            "MinJobAge=2",
            f"NodeName={self.host} NodeAddr=127.0.0.1 CPUs={self.cpus} State=UNKNOWN",
            f"PartitionName=test Nodes={self.host} Default=YES MaxTime=10 State=UP",
        ]
        with open(self.conf, "w") as f:
            f.write("\n".join(lines) + "\n")

    def spawn(self, name, argv):
        out = open(self.path("log", f"{name}.out"), "w")
        self.procs.append((name, subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                                  env=self.env, start_new_session=True)))

    def wait_for(self, ready, timeout, what):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name, p in self.procs:
                if p.poll() is not None:
                    raise Skip(f"{name} exited with status {p.returncode}:\n{self.log_tail(name)}")
            if ready():
                return
            time.sleep(0.2)
        raise Skip(f"{what} within {timeout} s:\n" +
                   "\n".join(self.log_tail(n) for n, _ in self.procs))

    def node_idle(self):
        r = self.run(["sinfo", "-h", "-N", "-o", "%T"], timeout=10)
        return r.ok and r.stdout.strip().rstrip("*") == "idle"

    def log_tail(self, name, lines=15):
        text = ""
        for f in (self.path("log", f"{name}.log"), self.path("log", f"{name}.out")):
            if os.path.exists(f):
                with open(f, errors="replace") as fh:
                    text += "".join(fh.readlines()[-lines:])
        return f"--- {name} log ---\n{text.rstrip()}"

    def run(self, argv, timeout, env=None):
        full = dict(self.env)
        full.update(env or {})
        # tools.run_cmd overlays its env on os.environ: remove what clean_env removed.
        for k in os.environ:
            if k not in full:
                full[k] = None
        return tools.run_cmd(argv, timeout=timeout, env=full)

    def jobs(self):
        r = self.run(["squeue", "-h", "-o", "%i"], timeout=10)
        return r.stdout.split() if r.ok else []

    def stop(self):
        """Cancels every job, then stops the daemons (TERM, then KILL), each with its
        process group (slurmd's step daemons included)."""
        if any(p.poll() is None for n, p in self.procs if n == "slurmctld"):
            if self.jobs():
                self.run(["scancel", "--full", "-u", "root"], timeout=10)
                deadline = time.monotonic() + 10
                while self.jobs() and time.monotonic() < deadline:
                    time.sleep(0.2)
        for name, p in reversed(self.procs):
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except OSError:
                    pass
        for name, p in reversed(self.procs):
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
            try:
                os.killpg(p.pid, signal.SIGKILL)  # what is left of the group
            except OSError:
                pass
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.log(f"slurm: {name} (pid {p.pid}) did not exit")


class Checks:
    def __init__(self, log):
        self.log, self.results = log, []

    def record(self, name, ok, detail):
        self.results.append((name, ok))
        self.log(f"{'PASS' if ok else 'FAIL'} {name}: {detail}")

    def summary(self):
        passed = sum(ok for _, ok in self.results)
        return passed, len(self.results) - passed


def srun_flags(ranks, mpi="pmix"):
    # --overcommit: more ranks than this machine's CPUs (the node declares its real count).
    # --kill-on-bad-exit: a rank that exits with an error ends the step.
    return ["srun", "-n", str(ranks), "--overcommit", "--kill-on-bad-exit=1", f"--mpi={mpi}"]


def run_models_cases(cluster, args, checks):
    """Real models under srun through run_models.py (outputs against onnxruntime)."""
    compile_cmd = "{bin}/autopar-compile {model} --cluster {cluster} {shape_flags}"
    cases = [
        ("dp2", "mlp,gpt", 2, ""),
        ("tp2", "mlp", 2, "--tp 2"),
        ("pp2-tp2", "gpt,mlp", 4, "--pp 2 --tp 2"),
    ]
    for name, model_list, ranks, pins in cases:
        launcher = " ".join(srun_flags(ranks))
        argv = [tools.python_exe(), os.path.join(HERE, "run_models.py"),
                "--build-dir", args.build_dir, "--models", model_list,
                "--cluster", f"local:{ranks}",
                "--compile-cmd", f"{compile_cmd} {pins} -o {{artifact}}".replace("  ", " "),
                "--launcher", launcher, "--check-comm", "--timeout", str(args.timeout),
                "--work-dir", os.path.join(args.work_dir, name),
                "--models-dir", args.models_dir]
        args.log(f"$ {' '.join(shlex.quote(a) for a in argv)}")
        r = cluster.run(argv, timeout=args.timeout * 4, env=tools.python_path_env())
        out = (r.stdout + r.stderr).rstrip()
        if args.verbose or not r.ok:
            args.log(out)
        last = out.splitlines()[-1] if out else r.first_error_line()
        checks.record(f"models {name} ({launcher})", r.ok, last)


def expect_every_rank(checks, name, r, ranks, text, max_seconds):
    """r failed, within max_seconds, and every rank printed `rank R: ...text`."""
    missing = [k for k in range(ranks) if f"autopar-run: error: rank {k}: {text}" not in r.stderr]
    problems = []
    if r.ok:
        problems.append("it succeeded")
    if r.timed_out or r.seconds > max_seconds:
        problems.append(f"took {r.seconds:.1f} s (limit {max_seconds} s)")
    if missing:
        problems.append(f"ranks {missing} did not say '{text}'")
    detail = "; ".join(problems) if problems else f"every rank said so, {r.seconds:.1f} s"
    checks.record(name, not problems, detail)
    if problems:
        checks.log(r.stdout + r.stderr)


def error_cases(cluster, args, checks):
    """Launch errors: each must stop every rank with one line naming it."""
    run = os.path.join(tools.build_bin(args.build_dir), "autopar-run")
    art = os.path.join(args.work_dir, "dp2", "gpt", "artifact")
    if not os.path.exists(os.path.join(art, "manifest.json")):
        checks.record("errors", False, f"no 2-rank artifact at {art} (the dp2 case failed)")
        return
    r = cluster.run(srun_flags(4) + [run, art], timeout=60)
    expect_every_rank(checks, "srun -n 4 of a 2-rank artifact", r, 4,
                      "the artifact was compiled for world_size 2", 30)
    if "srun -n 2" not in r.stderr:
        checks.record("wrong world size names the launch", False, "no 'srun -n 2' in the message")
    r = cluster.run(srun_flags(1) + [run, art], timeout=60)
    ok = (not r.ok and "the artifact was compiled for world_size 2" in r.stderr
          and "started 1 process" in r.stderr)
    checks.record("srun -n 1 of a 2-rank artifact", ok, r.first_error_line())
    r = cluster.run(srun_flags(2, mpi="none") + [run, art], timeout=60)
    expect_every_rank(checks, "srun --mpi=none (no PMIx)", r, 2,
                      "srun started this rank without an MPI plugin (--mpi=none)", 30)


def fault_artifact(args, ranks):
    """The runtime tests' fault stage (y = all_reduce(x), x split over dp) as an artifact
    of `ranks` ranks; None if the unit tests were not built."""
    stage = os.path.join(args.build_dir, "unittests", "Runtime", "stages", "fault.so")
    if not os.path.exists(stage):
        return None
    art = os.path.join(args.work_dir, f"fault-{ranks}")
    os.makedirs(art, exist_ok=True)
    shutil.copyfile(stage, os.path.join(art, "stage0.so"))
    manifest = {
        "format": "autopar-artifact", "version": 1, "model": "fault.onnx",
        "cluster": f"local:{ranks}", "world_size": ranks,
        "grid": {"dp": ranks, "tp": 1, "pp": 1},
        "programs": [{"name": "stage0", "library": "stage0.so", "entry": "autopar_entry"}],
        "ranks": [{"rank": r, "program": "stage0", "coords": {"dp": r, "tp": 0, "pp": 0}}
                  for r in range(ranks)],
        "arguments": [
            {"kind": "input", "name": "x", "dtype": "float32", "shape": [2, 8],
             "global_shape": [2 * ranks, 8], "split": {"axis": "dp", "dim": 0}},
            {"kind": "output", "name": "y", "dtype": "float32", "shape": [2, 8]}],
    }
    with open(os.path.join(art, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=2)
    return art


def survivors(pid_dir):
    alive = []
    for f in glob.glob(os.path.join(pid_dir, "*.pid")):
        with open(f) as fh:
            pid = int(fh.read().strip() or 0)
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                if b"autopar-run" in fh.read():
                    alive.append(pid)
        except OSError:
            pass
    return alive


def fault_cases(cluster, args, checks):
    run = os.path.join(tools.build_bin(args.build_dir), "autopar-run")
    art = fault_artifact(args, 4)
    if not art:
        args.log("skipped fault checks: unittests/Runtime/stages/fault.so is not built")
        return
    for fault, rank, timeout in (("hang", 1, 2), ("kill", 3, 5)):
        pid_dir = os.path.join(args.work_dir, f"pids-{fault}")
        shutil.rmtree(pid_dir, ignore_errors=True)
        os.makedirs(pid_dir)
        env = {"AUTOPAR_TEST_FAULT": fault, "AUTOPAR_TEST_FAULT_RANK": str(rank),
               "AUTOPAR_TEST_PID_DIR": pid_dir, "OPENBLAS_NUM_THREADS": "1"}
        r = cluster.run(srun_flags(4) + [run, art, "--timeout", str(timeout), "--steps", "3"],
                        timeout=60, env=env)
        if fault == "hang":
            named = f"autopar-run: error: rank {rank}: timed out after {timeout} s in step 1" in r.stderr
        else:  # Rank 3 cannot speak: Slurm names the task, or a waiting rank's watchdog.
            named = f"task {rank}: Killed" in r.stderr or "waiting in all_reduce on axis dp" in r.stderr
        time.sleep(0.5)  # The step's other tasks are being killed.
        deadline = time.monotonic() + 10
        while survivors(pid_dir) and time.monotonic() < deadline:
            time.sleep(0.2)
        alive = survivors(pid_dir)
        pids = len(glob.glob(os.path.join(pid_dir, "*.pid")))
        # The step ends within seconds of the fault (srun then waits KillWait for its tasks).
        ok = not r.ok and named and not alive and pids == 4 and r.seconds < timeout + 15
        checks.record(f"a rank that {'hangs' if fault == 'hang' else 'is killed'} ends the srun step",
                      ok, f"{r.seconds:.1f} s, named: {named}, pid files {pids}/4, survivors {alive}, "
                          f"first line: {r.first_error_line()}")
        if not ok:
            args.log(r.stdout + r.stderr)


def sbatch_cases(cluster, args, checks):
    """The docs' sbatch example, and a one-rank autopar-run in an `sbatch -n 2` script."""
    bindir = tools.build_bin(args.build_dir)
    art = os.path.join(args.work_dir, "dp2", "mlp", "artifact")
    ins = os.path.join(args.work_dir, "dp2", "mlp", "inputs")
    ref = os.path.join(args.work_dir, "dp2", "mlp", "outputs")
    if not os.path.exists(os.path.join(art, "manifest.json")):
        checks.record("sbatch", False, f"no 2-rank artifact at {art} (the dp2 case failed)")
        return
    one = os.path.join(args.work_dir, "mlp-local1")
    shape = "x".join(str(d) for d in np.load(os.path.join(ins, "x.npy")).shape)
    r = cluster.run([os.path.join(bindir, "autopar-compile"),
                     os.path.join(args.models_dir, "mlp.onnx"), "--cluster", "local:1",
                     "--input-shape", f"x={shape}", "-o", one], timeout=args.timeout)
    if not r.ok:
        checks.record("sbatch: compile the one-rank MLP", False, r.first_error_line())
        return
    outs = os.path.join(args.work_dir, "sbatch-outputs")
    shutil.rmtree(outs, ignore_errors=True)
    script = os.path.join(args.work_dir, "job.sh")
    with open(script, "w") as f:
        f.write(f"""#!/bin/bash
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=2
#SBATCH --cpus-per-task=1
#SBATCH --time=5
#SBATCH --output={args.work_dir}/job.out
set -e
# The example of docs/distributed.md: one autopar-run per task, MPI through PMIx.
export OPENBLAS_NUM_THREADS=$SLURM_CPUS_PER_TASK
srun --mpi=pmix --cpus-per-task=$SLURM_CPUS_PER_TASK \\
    {bindir}/autopar-run {art} --inputs {ins} --outputs {outs} --steps 2
# Not a launch: the batch script is one process (SLURM_NTASKS=2 notwithstanding).
{bindir}/autopar-run {one} --steps 1
echo job-done
""")
    r = cluster.run(["sbatch", "--wait", "--overcommit", script], timeout=120)
    out = ""
    if os.path.exists(os.path.join(args.work_dir, "job.out")):
        with open(os.path.join(args.work_dir, "job.out"), errors="replace") as f:
            out = f.read()
    ok = r.ok and "job-done" in out and "world_size 2 (" in out and "world_size 1" in out
    same = False
    if ok:
        outputs = [n for n in sorted(os.listdir(ref)) if n.endswith(".npy")]
        same = bool(outputs) and all(
            np.array_equal(np.load(os.path.join(ref, n)), np.load(os.path.join(outs, n))) for n in outputs)
    checks.record("sbatch script: srun --mpi=pmix, then a one-rank run", ok and same,
                  f"{r.seconds:.1f} s, outputs equal to the srun run's: {same}")
    if not (ok and same):
        args.log(r.stdout + r.stderr + out)


def training_cases(cluster, args, checks):
    """The GPT trained data-parallel on 4 ranks under srun equals one rank."""
    import torch
    sys.path.insert(0, HERE)
    from gradcheck import Gpt
    import train_dp
    work = os.path.join(args.work_dir, "train")
    shutil.rmtree(work, ignore_errors=True)
    torch.manual_seed(0)
    data = {"idx": torch.randint(0, Gpt.vocab, (16, Gpt.seq)),
            "targets": torch.randint(0, Gpt.vocab, (16, Gpt.seq))}
    config = json.loads(json.dumps(train_dp.CONFIG))
    config["optimizer"]["params"]["eps"] = 1e-6  # train_dp.py's zero-gradient caveat
    case = train_dp.Case(args.build_dir, work, "gpt", Gpt(), data, 8, config)
    one = case.train("local1", case.compile("local1", 1)[0], 1, [])
    job = os.path.join(case.dir, "job.sh")
    art, _ = case.compile("local4", 4, "--emit-sbatch", job)
    metrics = os.path.join(case.dir, "srun-metrics.jsonl")
    out = os.path.join(case.dir, "srun-out")
    argv = [*srun_flags(4), os.path.join(tools.build_bin(args.build_dir), "autopar-run"),
            art, "--train", "--data", case.data, "--steps", str(train_dp.STEPS),
            "--metrics", metrics, "--outputs", out]
    args.log(f"$ {' '.join(shlex.quote(a) for a in argv)}")
    r = cluster.run(argv, timeout=args.timeout)
    if not r.ok:
        checks.record("train gpt dp4 (srun -n 4)", False, (r.stdout + r.stderr).strip()[-800:])
        return
    with open(metrics) as f:
        losses = [json.loads(line)["loss"] for line in f]
    params = {n[:-4]: np.load(os.path.join(out, n)) for n in os.listdir(out) if n.endswith(".npy")}
    errors = train_dp.compare("gpt dp4 under srun", one[:2], (losses, params),
                              noise_only={"qkv.bias": slice(Gpt.width, 2 * Gpt.width)})
    checks.record("train gpt dp4 (srun -n 4)", not errors,
                  "; ".join(errors) if errors else
                  f"{len(losses)} steps, losses and parameters equal one rank's within "
                  f"{train_dp.TOL}")

    # The script --emit-sbatch wrote, run twice as a requeued job would be: to step 3,
    # then to the end, resuming from its checkpoint; the metrics of both parts are
    # one rank's losses.
    metrics = os.path.join(case.dir, "sbatch-metrics.jsonl")
    ckpts = os.path.join(case.dir, "sbatch-checkpoints")
    env = {"AUTOPAR_DATA": case.data, "AUTOPAR_METRICS": metrics,
           "AUTOPAR_CHECKPOINT_DIR": ckpts, "AUTOPAR_CHECKPOINT_EVERY": "3"}
    outputs = []
    for steps in (3, train_dp.STEPS):
        r = cluster.run(["sbatch", "--wait", "--overcommit",
                         f"--output={os.path.join(case.dir, f'sbatch-{steps}.out')}", job],
                        timeout=args.timeout, env={**env, "AUTOPAR_STEPS": str(steps)})
        outputs.append(r)
        if not r.ok:
            checks.record("train gpt: the --emit-sbatch script, requeued", False,
                          (r.stdout + r.stderr).strip()[-800:])
            return
    with open(metrics) as f:
        sbatch_losses = [json.loads(line)["loss"] for line in f]
    worst = max((abs(a - b) / abs(b) for a, b in zip(sbatch_losses, one[0])), default=1.0)
    ok = len(sbatch_losses) == train_dp.STEPS and worst <= train_dp.TOL
    checks.record("train gpt: the --emit-sbatch script, requeued", ok,
                  f"steps 1-3 then resumed 4-{train_dp.STEPS}: {len(sbatch_losses)} losses, "
                  f"largest difference from one rank's {worst:.1e}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--build-dir", default=os.path.join(tools.REPO_ROOT, "build"))
    p.add_argument("--work-dir", default=None, help="default BUILD_DIR/integration-slurm")
    p.add_argument("--models-dir", default=None, help="exported models (default BUILD_DIR/integration/models)")
    p.add_argument("--timeout", type=float, default=120, help="seconds per command (default 120)")
    p.add_argument("--keep", action="store_true", help="keep the cluster's directory (its logs)")
    p.add_argument("-v", "--verbose", action="store_true")
    args = p.parse_args(argv)
    args.build_dir = os.path.abspath(args.build_dir)
    args.work_dir = os.path.abspath(args.work_dir or os.path.join(args.build_dir, "integration-slurm"))
    args.models_dir = os.path.abspath(args.models_dir or
                                      os.path.join(args.build_dir, "integration", "models"))
    os.makedirs(args.work_dir, exist_ok=True)

    def log(msg):
        print(msg, flush=True)
    args.log = log
    start = time.monotonic()

    root = tempfile.mkdtemp(prefix="autopar-slurm-")
    cluster = Cluster(root, log)
    checks = Checks(log)
    try:
        try:
            cluster.start()
            r = cluster.run(["srun", "--mpi=list"], timeout=30)
            if "pmix" not in r.stdout + r.stderr:
                raise Skip("this Slurm has no PMIx plugin (srun --mpi=list: "
                           f"{' '.join((r.stdout + r.stderr).split())}); Open MPI needs it under srun")
        except Skip as why:
            log(f"skipped: cannot run Slurm here: {why}")
            return SKIP
        run_models_cases(cluster, args, checks)
        error_cases(cluster, args, checks)
        fault_cases(cluster, args, checks)
        sbatch_cases(cluster, args, checks)
        training_cases(cluster, args, checks)
    finally:
        cluster.stop()
        logs = os.path.join(args.work_dir, "slurm-logs")
        shutil.rmtree(logs, ignore_errors=True)
        if os.path.isdir(cluster.path("log")):
            shutil.copytree(cluster.path("log"), logs)
            if os.path.exists(cluster.conf):
                shutil.copy(cluster.conf, logs)
        if args.keep:
            log(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    passed, failed = checks.summary()
    log(f"{time.monotonic() - start:.1f} s; Slurm's logs in {os.path.join(args.work_dir, 'slurm-logs')}")
    log(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
