"""Locate and run autopar's tools and the onnxruntime reference executor.

Command templates (``--compile-cmd`` / ``--run-cmd`` in the test scripts) are strings
with ``{placeholders}``, split with shlex after substitution:

  compile: {model} {artifact} {shape_flags} {cluster} {build_dir} {bin}
  run:     {artifact} {inputs} {outputs} {model} {steps} {build_dir} {bin} {ort_run}

The defaults call build/bin/autopar-compile and build/bin/autopar-run.  REFERENCE_*
templates stand ORT in for autopar (useful to test the harnesses themselves): compile
copies nothing and just records the model, run executes it with ort-run.js.
"""

import os
import re
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass


def _is_checkout(path):
    return os.path.isfile(os.path.join(path, "python", "pyproject.toml")) and \
        os.path.isdir(os.path.join(path, "tools", "reference"))


def find_repo_root():
    """The autopar checkout (tools/reference, build/, bench/): the one this file lies in
    (python/autopar/tools.py, also with an editable install); for a package installed
    into a venv, $AUTOPAR_ROOT if set, else the nearest checkout at or above the current
    directory; else the directory two levels above this file."""
    here = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
    if _is_checkout(here):
        return here
    env = os.environ.get("AUTOPAR_ROOT")
    if env:
        return os.path.abspath(env)
    d = os.getcwd()
    while True:
        if _is_checkout(d):
            return d
        parent = os.path.dirname(d)
        if parent == d:
            return here
        d = parent


REPO_ROOT = find_repo_root()
REFERENCE_DIR = os.path.join(REPO_ROOT, "tools", "reference")
ORT_RUN = os.path.join(REFERENCE_DIR, "ort-run.js")

DEFAULT_COMPILE_CMD = "{bin}/autopar-compile {model} --cluster {cluster} {shape_flags} -o {artifact}"
DEFAULT_RUN_CMD = "{bin}/autopar-run {artifact} --inputs {inputs} --outputs {outputs} --steps {steps}"
# ORT standing in for autopar: "compiling" checks that ORT can load the model.
REFERENCE_COMPILE_CMD = "node {ort_run} {model} --info"
REFERENCE_RUN_CMD = "node {ort_run} {model} --inputs {inputs} --outputs {outputs} --repeat {steps}"


@dataclass
class CmdResult:
    cmd: list
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool = False

    @property
    def ok(self):
        return self.returncode == 0 and not self.timed_out

    def first_error_line(self):
        """The most useful single line of a failed command's output."""
        if self.timed_out:
            return f"timed out after {self.seconds:.0f} s"
        text = (self.stderr or "") + "\n" + (self.stdout or "")
        lines = [l.strip() for l in text.splitlines() if l.strip()]
        for pat in (r"\berror\b", r"Error", r"unsupported|not supported", r"fail|abort|assert"):
            for l in lines:
                if re.search(pat, l, re.IGNORECASE if pat != "Error" else 0):
                    return l[:300]
        if lines:
            return lines[0][:300]
        if self.returncode < 0:
            return f"killed by signal {-self.returncode}"
        return f"exit status {self.returncode}, no output"


def build_bin(build_dir):
    return os.path.join(os.path.abspath(build_dir), "bin")


def shape_flags(shapes):
    """{'idx': [2, 32]} -> '--input-shape idx=2x32' (shell-quoted)."""
    parts = []
    for name, dims in shapes.items():
        parts += ["--input-shape", f"{name}={'x'.join(str(d) for d in dims)}"]
    return " ".join(shlex.quote(p) for p in parts)


def format_cmd(template, **values):
    """Substitutes shell-quoted values into a template and splits it into argv."""
    quoted = {k: (v if k == "shape_flags" else shlex.quote(str(v))) for k, v in values.items()}
    return shlex.split(template.format(**quoted))


def run_cmd(argv, timeout=None, env=None, cwd=None):
    """Runs argv, capturing output; never raises for a failing or hanging command.
    On timeout the whole process group is killed (launchers may have children)."""
    full_env = dict(os.environ)
    for key, value in (env or {}).items():
        if value is None:  # None removes the variable
            full_env.pop(key, None)
        else:
            full_env[key] = value
    start = time.monotonic()
    try:
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             errors="replace", env=full_env, cwd=cwd, start_new_session=True)
    except OSError as e:
        return CmdResult(argv, 127, "", f"error: cannot run {argv[0]}: {e}", time.monotonic() - start)
    try:
        out, err = p.communicate(timeout=timeout)
        return CmdResult(argv, p.returncode, out, err, time.monotonic() - start)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            pass
        out, err = p.communicate()
        return CmdResult(argv, -9, out, err, time.monotonic() - start, timed_out=True)


def template_values(build_dir, **kw):
    values = {"build_dir": os.path.abspath(build_dir), "bin": build_bin(build_dir), "ort_run": ORT_RUN,
              "steps": 1, "shape_flags": "", "cluster": "local:1"}
    values.update(kw)
    return values


_STEP_RE = re.compile(r"^\s*(?:step|run)\s+(\d+)\s*/\s*(\d+)\s*:\s*([0-9.eE+-]+)\s*ms", re.MULTILINE)
_MEAN_RE = re.compile(r"mean_ms=([0-9.eE+-]+)")


def parse_step_times(text):
    """Per-step milliseconds from 'step I/N: X ms' (autopar-run) or 'run I/N: X ms'
    (ort-run.js) lines; falls back to a single 'mean_ms=' value."""
    times = [float(m.group(3)) for m in _STEP_RE.finditer(text)]
    if not times:
        m = _MEAN_RE.search(text)
        if m:
            times = [float(m.group(1))]
    return times


def check_reference_installed():
    """Returns an error string if node or onnxruntime-node is missing, else ''."""
    if not os.path.exists(os.path.join(REFERENCE_DIR, "node_modules", "onnxruntime-node")):
        return (f"onnxruntime-node is not installed; run: cd {REFERENCE_DIR} && "
                "ONNXRUNTIME_NODE_INSTALL=skip npm install")
    r = run_cmd(["node", "--version"], timeout=30)
    if not r.ok:
        return "node is not on PATH (Node.js >= 18 is needed for the reference executor)"
    return ""


def python_path_env():
    """Environment that lets child Python processes import autopar."""
    py = os.path.join(REPO_ROOT, "python")
    old = os.environ.get("PYTHONPATH", "")
    return {"PYTHONPATH": py + (os.pathsep + old if old else "")}


def python_exe():
    """The interpreter running us (scripts are meant for Debian's /usr/bin/python3)."""
    return sys.executable or "/usr/bin/python3"
