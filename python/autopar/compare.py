"""Compare two directories of ``.npy`` outputs (reference vs. actual).

    python3 -m autopar.compare REF_DIR ACTUAL_DIR [--tol 1e-4] [--names a,b]
    python3 -m autopar.compare REF_DIR ACTUAL_DIR --rtol 1e-3 --atol 1e-7   # allclose mode

Every ``<name>.npy`` in REF_DIR must exist in ACTUAL_DIR with the same dtype and shape.
Default metric, per output: max|actual - ref| / max|ref| (max|actual - ref| when the
reference is all zeros); an output passes if the metric is <= tol.  Integer and bool
outputs must match exactly.  NaNs must sit at the same positions; infinities must match.
With --rtol/--atol the check is numpy.testing.assert_allclose's instead:
|actual - ref| <= atol + rtol * |ref| elementwise.
Exit status: 0 if all outputs pass, 1 otherwise, 2 on usage errors.
"""

import argparse
import os
import sys
from dataclasses import dataclass, field

import numpy as np


@dataclass
class Result:
    name: str
    ok: bool
    dtype: str = ""
    shape: tuple = ()
    max_abs_err: float = float("nan")
    max_abs_ref: float = float("nan")
    metric: float = float("nan")
    mismatches: int = 0
    note: str = ""
    details: dict = field(default_factory=dict)


def _special_mismatch(ref, act):
    """Compares NaN/inf placement; returns (message or None, finite mask)."""
    rn, an = np.isnan(ref), np.isnan(act)
    if not np.array_equal(rn, an):
        return f"NaN positions differ ({int(rn.sum())} in reference, {int(an.sum())} in actual)", None
    ri, ai = np.isinf(ref), np.isinf(act)
    if not np.array_equal(ri, ai) or not np.array_equal(ref[ri], act[ai]):
        return "infinities differ", None
    return None, ~(rn | ri)


def compare_arrays(name, ref, act, tol=1e-4, rtol=None, atol=None):
    """Compares one output.  tol: relative-to-max metric; rtol/atol (if either is given):
    elementwise allclose.  Returns a Result."""
    r = Result(name=name, ok=False, dtype=str(ref.dtype), shape=tuple(ref.shape))
    if ref.dtype != act.dtype:
        r.note = f"dtype {act.dtype}, expected {ref.dtype}"
        return r
    if ref.shape != act.shape:
        r.note = f"shape {list(act.shape)}, expected {list(ref.shape)}"
        return r
    if ref.dtype.kind in "biu" or ref.dtype == np.bool_:
        bad = ref != act
        r.mismatches = int(bad.sum())
        if ref.size:
            diff = np.abs(ref.astype(np.float64) - act.astype(np.float64))
            r.max_abs_err = float(diff.max())
            r.max_abs_ref = float(np.abs(ref.astype(np.float64)).max())
        else:
            r.max_abs_err = r.max_abs_ref = 0.0
        r.metric = r.max_abs_err
        r.ok = r.mismatches == 0
        if not r.ok:
            first = tuple(int(i) for i in np.argwhere(bad)[0])
            r.note = (f"{r.mismatches} of {ref.size} elements differ (exact match required); "
                      f"first at {first}: {act[first]!r} vs {ref[first]!r}")
        return r
    if ref.dtype.kind not in "fc":
        r.note = f"cannot compare dtype {ref.dtype}"
        return r
    with np.errstate(invalid="ignore"):  # NaN payloads
        ref64 = ref.astype(np.float64)
        act64 = act.astype(np.float64)
    msg, finite = _special_mismatch(ref64, act64)
    if msg:
        r.note = msg
        return r
    rf, af = ref64[finite], act64[finite]
    diff = np.abs(rf - af)
    r.max_abs_err = float(diff.max()) if diff.size else 0.0
    r.max_abs_ref = float(np.abs(rf).max()) if rf.size else 0.0
    if rtol is not None or atol is not None:
        rtol = 0.0 if rtol is None else rtol
        atol = 0.0 if atol is None else atol
        bound = atol + rtol * np.abs(rf)
        bad = diff > bound
        r.mismatches = int(bad.sum())
        with np.errstate(divide="ignore", invalid="ignore"):
            rel = np.where(np.abs(rf) > 0, diff / np.abs(rf), np.where(diff > 0, np.inf, 0.0))
        r.metric = float(rel.max()) if rel.size else 0.0
        r.ok = r.mismatches == 0
        if not r.ok:
            idx = np.flatnonzero(finite)[np.argmax(np.where(bad, diff - bound, -np.inf))]
            pos = tuple(int(i) for i in np.unravel_index(idx, ref.shape))
            r.note = (f"{r.mismatches} of {ref.size} elements exceed atol={atol:g} + rtol={rtol:g}*|ref|; "
                      f"worst at {pos}: {act.flat[idx]!r} vs {ref.flat[idx]!r}")
        return r
    r.metric = r.max_abs_err / r.max_abs_ref if r.max_abs_ref > 0 else r.max_abs_err
    r.mismatches = int((diff > tol * (r.max_abs_ref if r.max_abs_ref > 0 else 1.0)).sum())
    r.ok = r.metric <= tol
    if not r.ok:
        idx = np.flatnonzero(finite)[int(np.argmax(diff))]
        pos = tuple(int(i) for i in np.unravel_index(idx, ref.shape))
        r.note = (f"max rel error {r.metric:.3g} > tol {tol:g}; worst at {pos}: "
                  f"{act.flat[idx]!r} vs {ref.flat[idx]!r}")
    return r


def compare_dirs(ref_dir, act_dir, tol=1e-4, names=None, rtol=None, atol=None):
    """Compares every <name>.npy of ref_dir (or just ``names``) against act_dir."""
    if names is None:
        names = sorted(f[:-4] for f in os.listdir(ref_dir) if f.endswith(".npy"))
        if not names:
            return [Result(name="(none)", ok=False, note=f"no .npy files in {ref_dir}")]
    results = []
    for name in names:
        rp = os.path.join(ref_dir, name + ".npy")
        ap = os.path.join(act_dir, name + ".npy")
        if not os.path.exists(rp):
            results.append(Result(name=name, ok=False, note=f"reference {rp} is missing"))
            continue
        if not os.path.exists(ap):
            results.append(Result(name=name, ok=False, note=f"output {ap} is missing"))
            continue
        try:
            ref, act = np.load(rp, allow_pickle=False), np.load(ap, allow_pickle=False)
        except Exception as e:  # unreadable or malformed .npy
            results.append(Result(name=name, ok=False, note=f"cannot read: {e}"))
            continue
        results.append(compare_arrays(name, ref, act, tol=tol, rtol=rtol, atol=atol))
    return results


def format_table(results):
    """A fixed-width table, one row per output."""
    rows = [("output", "dtype", "shape", "max_abs_err", "max_abs_ref", "metric", "status")]
    for r in results:
        rows.append((r.name, r.dtype, "x".join(map(str, r.shape)) if r.shape else "scalar" if r.dtype else "",
                     f"{r.max_abs_err:.3e}", f"{r.max_abs_ref:.3e}", f"{r.metric:.3e}",
                     "ok" if r.ok else "FAIL"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    for r in results:
        if r.note:
            lines.append(f"  {r.name}: {r.note}")
    return "\n".join(lines)


def first_failure(results):
    """One line describing the first failing output, or '' if all pass."""
    for r in results:
        if not r.ok:
            return f"{r.name}: {r.note or 'mismatch'}"
    return ""


def compare_collectives(report, comm_stats):
    """Predicted against measured collectives: a list of mismatch messages.

    report: a plan report (autopar-compile --report-json) with "predicted_collectives"
    {axis: {op: {"calls", "bus_bytes"}}} for one step; comm_stats: autopar-run
    --comm-stats-json output {"steps": N, "collectives": {scope: {op: {...}}}}.
    Both are per rank (the busiest). The "world" scope is the runtime's own traffic
    (inputs and outputs), not the plan's, and is ignored. Calls must match exactly, bus
    bytes within 1e-9 relative (they are sums of whole bytes held in doubles).
    """
    if "predicted_collectives" not in report:
        return ["the plan report has no 'predicted_collectives' (an older autopar-compile?)"]
    steps = comm_stats.get("steps", 1)
    predicted = report["predicted_collectives"]
    measured = {scope: ops for scope, ops in comm_stats.get("collectives", {}).items() if scope != "world"}
    problems = []
    for axis in sorted(set(predicted) | set(measured)):
        p_ops, m_ops = predicted.get(axis, {}), measured.get(axis, {})
        for op in sorted(set(p_ops) | set(m_ops)):
            p = p_ops.get(op, {"calls": 0, "bus_bytes": 0})
            m = m_ops.get(op, {"calls": 0, "bus_bytes": 0})
            p_calls, p_bytes = p["calls"] * steps, p["bus_bytes"] * steps
            if m["calls"] != p_calls or abs(m["bus_bytes"] - p_bytes) > 1e-9 * max(1.0, p_bytes):
                problems.append(f"{axis} {op}: predicted {p_calls:g} calls, {p_bytes:.0f} bus bytes; "
                                f"measured {m['calls']:g} calls, {m['bus_bytes']:.0f} bus bytes")
    return problems


def describe_collectives(report):
    """'tp all_reduce 2 calls 65536 B' ... or 'none', for logs."""
    parts = [f"{axis} {op} {v['calls']:g}x {v['bus_bytes']:.0f} B"
             for axis, ops in sorted(report.get("predicted_collectives", {}).items())
             for op, v in sorted(ops.items())]
    return ", ".join(parts) if parts else "none"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("reference", help="directory of reference .npy files")
    p.add_argument("actual", help="directory of .npy files to check")
    p.add_argument("--tol", type=float, default=1e-4,
                   help="max |actual-ref| / max |ref| allowed per output (default 1e-4)")
    p.add_argument("--rtol", type=float, default=None, help="use allclose with this rtol")
    p.add_argument("--atol", type=float, default=None, help="use allclose with this atol")
    p.add_argument("--names", default=None, help="comma-separated output names (default: all in reference)")
    args = p.parse_args(argv)
    for d in (args.reference, args.actual):
        if not os.path.isdir(d):
            p.error(f"not a directory: {d}")
    names = args.names.split(",") if args.names else None
    results = compare_dirs(args.reference, args.actual, tol=args.tol, names=names,
                           rtol=args.rtol, atol=args.atol)
    print(format_table(results))
    ok = all(r.ok for r in results)
    print("PASS" if ok else f"FAIL ({sum(not r.ok for r in results)} of {len(results)} outputs)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
