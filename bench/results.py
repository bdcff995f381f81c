"""bench/RESULTS.md: current figures first, one block per benchmark; the history below.

Each benchmark's `--write-results` calls record(): its block under "## Current figures"
(found by its title) is replaced by the new run, and the new run is also appended to
"## History", which keeps every run in order. Blocks are

    ### <title>, <ISO date and time>

    - machine: <words, no host name>
    - commit: <short hash>
    - command: `<command, relative to the repository root>`
    ...table...

Paths are written relative to the repository root (repo_path()), never as this
machine's absolute paths.
"""

import datetime
import os
import platform
import re
import subprocess

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(REPO_ROOT, "bench", "RESULTS.md")
CURRENT = "## Current figures"
HISTORY = "## History"

SKELETON = f"""# Benchmark results

The figures below were measured by the scripts in `bench/`; each block names the
machine, the commit and the command that reproduces it (run from the repository root
after building into `build/`; `--write-results` updates this file). Compare ratios
within one block: timings on a shared VM move between runs.

{CURRENT}

{HISTORY}

Every run, oldest first, with the notes written after it.
"""


def now():
    return datetime.datetime.now().isoformat(timespec="seconds")


def repo_path(path):
    """`path` relative to the repository root when it lies inside it."""
    path = os.path.abspath(path)
    rel = os.path.relpath(path, REPO_ROOT)
    return path if rel.startswith("..") else rel


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_words():
    """The machine in words: CPUs, VM or not, OS; no host name, no paths."""
    virtual = False
    try:
        with open("/proc/cpuinfo") as f:
            virtual = any(line.startswith("flags") and " hypervisor" in line for line in f)
    except OSError:
        pass
    distro = ""
    try:
        with open("/etc/os-release") as f:
            for line in f:
                if line.startswith("PRETTY_NAME="):
                    distro = line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    words = f"{os.cpu_count()} logical CPUs ({cpu_name()})"
    if virtual:
        words = "VM, " + words
    return ", ".join(x for x in (words, distro, f"{platform.system()} {platform.release()}") if x)


def git_commit():
    try:
        return subprocess.run(["git", "-C", REPO_ROOT, "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, timeout=10).stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _blocks(section):
    """Splits a section's text into (preamble, [block]) at '### ' headings."""
    parts = re.split(r"(?m)^(?=### )", section)
    return parts[0], parts[1:]


def table(head, body, markdown=False):
    """Rows of cells under `head`: a Markdown table, or columns padded for a
    terminal with a rule under the head."""
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
        return lines + ["| " + " | ".join(b) + " |" for b in body]
    widths = [max(len(x[i]) for x in [head] + body) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(x, widths)).rstrip() for x in [head] + body]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return lines


def record(title, body, path=RESULTS, stamp=None):
    """Makes `title`'s current block the run in `body` and appends it to the history.

    `body` is the markdown under the heading (machine, commit, command, table).
    Returns the block written."""
    stamp = stamp or now()
    block = f"### {title}, {stamp}\n\n{body.strip()}\n\n"
    text = open(path).read() if os.path.exists(path) else SKELETON
    if CURRENT not in text or HISTORY not in text:
        raise SystemExit(f"error: {path} has no '{CURRENT}' or '{HISTORY}' section")
    head, rest = text.split(CURRENT, 1)
    current, history = rest.split(HISTORY, 1)
    pre, blocks = _blocks(current)
    for i, b in enumerate(blocks):
        if b.startswith(f"### {title}, "):
            blocks[i] = block
            break
    else:
        blocks.append(block)
    if not pre.strip():
        pre = "\n\n"
    history = history.rstrip("\n") + "\n\n" + block.rstrip("\n") + "\n"
    text = head + CURRENT + pre + "".join(blocks) + HISTORY + history
    with open(path, "w") as f:
        f.write(text)
    return block


def record_run(title, details, table, argv=None):
    """record() for a benchmark run by this process: machine, commit and the
    command (sys.argv, repository-relative) first, then `details` (markdown
    lines) and the table. Returns the block written."""
    import shlex
    import sys
    argv = sys.argv if argv is None else argv
    cmd = " ".join(shlex.quote(a) for a in [repo_path(argv[0])] + argv[1:])
    body = (f"- machine: {machine_words()}\n- commit: {git_commit()}\n"
            f"- command: `{cmd}`\n{details.rstrip()}\n\n{table}")
    return record(title, body)

