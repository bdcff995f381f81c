"""Draw an autopar plan report as a self-contained HTML page (inline SVG, no assets).

    python3 -m autopar.draw REPORT.json -o plan.html [--svg plan.svg] [--title TEXT]

The page shows
  1. a header table: mesh dp x tp x pp, ZeRO stage, micro-batches, recomputation, schedule,
     predicted step time, tokens/s, TFLOP/s per GPU, MFU, memory, search time;
  2. the pipeline schedule of one step (GPipe or 1F1B) as a timeline per stage: forward and
     backward blocks per micro-batch, idle time (the bubble) hatched, then the exposed
     communication and the optimizer step; time axis in ms;
  3. the step time breakdown as one stacked bar;
  4. memory per GPU as stacked bars (parameters, gradients, optimizer states, activations,
     communication, other) for the chosen plan (per stage when the report gives per-stage
     memory) and the alternatives, against the device memory when the report gives it;
  5. the stages and the alternatives with why each lost.
``--svg FILE`` also writes the pictures (2-4) as one standalone SVG.

How the timeline is derived: with per-stage times (``stages[i].forward_s`` and
``backward_s``, one micro-batch each) the schedule is simulated with them.  Otherwise
stages are assumed balanced: every stage spends ``compute / num_micro_batches`` per
micro-batch (``compute`` from ``predicted.step_time_breakdown_s``), split forward :
backward = 1 : 2 in training (1 : 3 with full recomputation, which redoes the forward),
all forward in inference.  The page's caption says which was used.  See
docs/plan-picture.md.
"""

import argparse
import html
import math
import os
import sys
from dataclasses import dataclass

from autopar import plan as planlib

# ---------------------------------------------------------------------------------------
# The schedule

FORWARD, BACKWARD = "F", "B"
DASH = "\u2013"


@dataclass
class Block:
    stage: int
    kind: str          # FORWARD or BACKWARD
    micro_batch: int
    start: float       # seconds from the start of the step
    end: float


def stage_order(schedule, num_stages, num_micro_batches, stage, train=True):
    """The order in which one stage runs its forward/backward passes: [(kind, mb), ...].

    gpipe: all forwards, then all backwards.  1f1b (PipeDream-Flush, as in Megatron-LM):
    ``num_stages - stage - 1`` warm-up forwards, then one forward / one backward
    alternately, then the remaining backwards.  Forward only when not training."""
    p, m = num_stages, num_micro_batches
    if not train:
        return [(FORWARD, j) for j in range(m)]
    if schedule == "gpipe":
        return [(FORWARD, j) for j in range(m)] + [(BACKWARD, j) for j in range(m)]
    warmup = min(p - stage - 1, m)
    order = [(FORWARD, j) for j in range(warmup)]
    f, b = warmup, 0
    while f < m:
        order.append((FORWARD, f))
        f += 1
        order.append((BACKWARD, b))
        b += 1
    order += [(BACKWARD, j) for j in range(b, m)]
    return order


def simulate(schedule, forward_s, backward_s, num_micro_batches, train=True):
    """Simulates one pipelined step; returns the blocks sorted by stage and start.

    forward_s[i], backward_s[i]: time of one micro-batch's forward / backward on stage i.
    A forward on stage i waits for the same micro-batch's forward on stage i-1; a
    backward on stage i for its backward on stage i+1 (on the last stage: its forward).
    Transfers between stages take no time here."""
    p, m = len(forward_s), num_micro_batches
    orders = [stage_order(schedule, p, m, s, train) for s in range(p)]
    done = {}
    pos = [0] * p
    free = [0.0] * p
    blocks = []
    left = sum(len(o) for o in orders)
    while left:
        progressed = False
        for s in range(p):
            while pos[s] < len(orders[s]):
                kind, j = orders[s][pos[s]]
                if kind == FORWARD:
                    dep = done.get((FORWARD, s - 1, j)) if s > 0 else 0.0
                elif s < p - 1:
                    dep = done.get((BACKWARD, s + 1, j))
                else:
                    dep = done.get((FORWARD, s, j))
                if dep is None:
                    break
                start = max(free[s], dep)
                end = start + (forward_s[s] if kind == FORWARD else backward_s[s])
                done[(kind, s, j)] = end
                free[s] = end
                blocks.append(Block(s, kind, j, start, end))
                pos[s] += 1
                left -= 1
                progressed = True
        if not progressed:  # cannot happen for the orders above
            raise RuntimeError("pipeline schedule deadlocked")
    blocks.sort(key=lambda b: (b.stage, b.start))
    return blocks


def max_in_flight(blocks, stage):
    """Most micro-batches whose forward ran on `stage` and whose backward has not ended
    (activations held at once) -- p - stage for 1F1B, m for GPipe."""
    live = peak = 0
    for b in sorted((b for b in blocks if b.stage == stage), key=lambda b: b.start):
        live += 1 if b.kind == FORWARD else -1
        peak = max(peak, live)
    return peak


@dataclass
class Timeline:
    blocks: list
    num_stages: int
    pipeline_s: float          # when the last stage drains
    tail: list                 # [(key, seconds)] drawn after the pipeline on every stage
    total_s: float
    forward_s: list
    backward_s: list
    source: str                # 'stages', 'stages-totals' or 'balanced'
    schedule: str              # the schedule simulated
    notes: list                # sentences for the caption


def _fb_ratio(report):
    """Backward time over forward time assumed for balanced stages."""
    if report.mode != "train":
        return 0.0
    return 3.0 if report.recompute == "full" else 2.0


def build_timeline(report):
    """Derives the timeline of one step from a PlanReport (see the module docstring)."""
    p, m = report.mesh.pp, report.num_micro_batches
    train = report.mode == "train"
    pred = report.predicted
    bd = dict(pred.step_time_breakdown_s)
    notes = []
    schedule = report.schedule if report.schedule in planlib.KNOWN_SCHEDULES else "1f1b"
    if report.schedule not in planlib.KNOWN_SCHEDULES and train and p > 1:
        notes.append(f"The report's schedule '{report.schedule}' is not one this drawing "
                     f"knows; it is drawn as 1F1B.")

    compute = bd.get("compute")
    if compute is None:
        others = sum(v for k, v in bd.items() if k != "compute")
        compute = max(pred.step_time_s - others, 0.0) if pred.step_time_s else 0.0
        notes.append("The report gives no compute time; it is taken as the step time "
                     "minus the other parts of the breakdown.")

    stages = report.stages
    have_stage_times = bool(stages) and all(
        s.forward_s is not None and (s.backward_s is not None or not train) for s in stages)
    have_stage_totals = bool(stages) and all(
        s.seconds_per_micro_batch is not None for s in stages)
    r = _fb_ratio(report)
    if not have_stage_times and have_stage_totals:
        # forward + backward per micro-batch per stage: split by the assumed ratio.
        fwd = [s.seconds_per_micro_batch / (1 + r) for s in stages]
        bwd = [s.seconds_per_micro_batch * r / (1 + r) for s in stages]
        source = "stages-per-mb"
    elif have_stage_times:
        fwd = [s.forward_s for s in stages]
        bwd = [(s.backward_s or 0.0) if train else 0.0 for s in stages]
        source = "stages"
        busiest = max(f + b for f, b in zip(fwd, bwd))
        # Per micro-batch is the contract; a report that gives whole-step totals instead
        # (busiest stage ~ compute rather than ~ compute / m) is recognized and scaled.
        if m > 1 and compute > 0 and busiest > 0 and \
                abs(math.log(busiest / compute)) < abs(math.log(busiest * m / compute)):
            fwd = [f / m for f in fwd]
            bwd = [b / m for b in bwd]
            source = "stages-totals"
            notes.append(f"stages[i].forward_s/backward_s look like whole-step totals (the "
                         f"busiest stage's sum is close to the compute time); they are "
                         f"divided by the {m} micro-batches.")
    else:
        per_mb = compute / m if m else 0.0
        fwd = [per_mb / (1 + r)] * p
        bwd = [per_mb * r / (1 + r)] * p
        source = "balanced"

    blocks = simulate(schedule, fwd, bwd, m, train)
    pipeline_s = max((b.end for b in blocks), default=0.0)
    tail = [(k, bd[k]) for k in ("exposed_communication", "optimizer") if bd.get(k)]
    tail += [(k, v) for k, v in bd.items()
             if k not in planlib.STEP_TIME_KEYS and v > 0]
    total = pipeline_s + sum(v for _, v in tail)
    return Timeline(blocks=blocks, num_stages=p, pipeline_s=pipeline_s, tail=tail,
                    total_s=total, forward_s=fwd, backward_s=bwd, source=source,
                    schedule=schedule, notes=notes)


def stage_idle(tl):
    """Idle seconds of each stage while the pipeline runs (0 to pipeline_s)."""
    busy = [0.0] * tl.num_stages
    for b in tl.blocks:
        busy[b.stage] += b.end - b.start
    return [tl.pipeline_s - x for x in busy]


def idle_time(tl):
    """The bubble in the report's sense: idle time of the busiest stage (the pipeline's
    length minus its compute); stage_idle() gives every stage's."""
    idle = stage_idle(tl)
    return min(idle) if idle else 0.0


# ---------------------------------------------------------------------------------------
# Formatting

def fmt_ms(seconds, digits=3):
    ms = seconds * 1e3
    if ms == 0:
        return "0 ms"
    if ms >= 1000:
        return f"{ms:,.0f} ms"
    return f"{ms:.{digits}g} ms"


def fmt_time(seconds):
    if seconds is None:
        return "\u2013"
    if seconds >= 1:
        return f"{seconds:.3g} s"
    return fmt_ms(seconds)


def fmt_gib(nbytes, digits=1):
    if nbytes is None:
        return "\u2013"
    return f"{nbytes / 2**30:.{digits}f} GiB"


def fmt_count(x):
    if x is None:
        return "\u2013"
    return f"{x:,.0f}"


def fmt_pct(x, digits=1):
    if x is None:
        return "\u2013"
    return f"{100 * x:.{digits}f}%"


def _num(v):
    """Short decimal for SVG coordinates."""
    return f"{v:.2f}".rstrip("0").rstrip(".")


def nice_step(span, target=8):
    """A 1/2/2.5/5 x 10^k tick step giving about `target` ticks over `span`."""
    if span <= 0:
        return 1.0
    raw = span / target
    mag = 10 ** math.floor(math.log10(raw))
    for f in (1, 2, 2.5, 5, 10):
        if f * mag >= raw * 0.999:
            return f * mag
    return 10 * mag


def fmt_tick(v, step):
    decimals = max(0, -int(math.floor(math.log10(step))) + (1 if step / 10 ** math.floor(
        math.log10(step)) == 2.5 else 0))
    return f"{v:,.{decimals}f}"


def esc(s):
    return html.escape(str(s), quote=True)


# ---------------------------------------------------------------------------------------
# SVG pieces.  Each chart returns (svg elements as a string, width, height).

FONT = "font-family:system-ui,-apple-system,'Segoe UI',Helvetica,Arial,sans-serif"
COLORS = {
    FORWARD: "#4c78a8", BACKWARD: "#59a14f", "dense": "#6f8f9f",
    "exposed_communication": "#e15759", "optimizer": "#b07aa1", "bubble": "#d9d9d9",
    "compute": "#4c78a8",
    "parameters": "#4c78a8", "gradients": "#76b7b2", "optimizer_states": "#b07aa1",
    "activations": "#f28e2b", "communication": "#e15759", "other": "#9d9d9d",
    "total": "#c7c7c7",
}
EXTRA_COLORS = ["#edc948", "#ff9da7", "#9c755f", "#bab0ac", "#86bcb6", "#f1ce63"]
LABELS = {
    "compute": "compute", "exposed_communication": "exposed communication",
    "bubble": "bubble (idle)", "optimizer": "optimizer step",
    "parameters": "parameters", "gradients": "gradients",
    "optimizer_states": "optimizer states", "activations": "activations",
    "communication": "communication buffers", "other": "other",
    "total": "total only (no breakdown given)",
}


def _color(key, extra_keys):
    if key in COLORS:
        return COLORS[key]
    return EXTRA_COLORS[extra_keys.index(key) % len(EXTRA_COLORS)] if key in extra_keys \
        else "#bab0ac"


def _label(key):
    return LABELS.get(key, key.replace("_", " "))


def svg_defs():
    return ('<defs><pattern id="ap-idle" width="6" height="6" patternUnits="userSpaceOnUse" '
            'patternTransform="rotate(45)"><rect width="6" height="6" fill="#f3f3f3"/>'
            '<line x1="0" y1="0" x2="0" y2="6" stroke="#c8c8c8" stroke-width="2"/></pattern>'
            '</defs>')


def _cut(s, n):
    return s if len(s) <= n else s[:n - 1] + "\u2026"


def _text_w(s, size=12):
    return len(s) * size * 0.56


def _legend(items, x, y, max_w, size=12):
    """items: [(fill, label)]; returns (svg, height).  Wraps to new lines."""
    out, cx, cy = [], x, y
    for fill, label in items:
        w = 14 + 6 + _text_w(label, size) + 18
        if cx > x and cx + w > x + max_w:
            cx, cy = x, cy + size + 8
        out.append(f'<rect x="{_num(cx)}" y="{_num(cy)}" width="14" height="{size}" '
                   f'fill="{fill}" stroke="#555" stroke-width="0.5"/>')
        out.append(f'<text x="{_num(cx + 20)}" y="{_num(cy + size - 2)}" font-size="{size}">'
                   f'{esc(label)}</text>')
        cx += w
    return "".join(out), cy - y + size + 4


def timeline_svg(report, tl, width=1100):
    p = tl.num_stages
    right = 24
    row_h = max(6.0, min(34.0, 420.0 / p))
    gap = max(1.0, row_h * 0.18)
    # Layer ranges go under the stage name when rows are tall enough; long ones are cut.
    show_layers = row_h >= 26 and any(st.layers for st in report.stages)
    layer_labels = [_cut(f"layers {st.layers}", 30) if st.layers else ""
                    for st in report.stages] if show_layers else []
    left = int(max([96] + [_text_w(t, 10) + 16 for t in layer_labels]))
    plot_w = width - left - right
    out = []
    legend_items = [(COLORS[FORWARD], "forward (micro-batch j)"),
                    (COLORS[BACKWARD], "backward")]
    if report.mode != "train":
        legend_items = [(COLORS[FORWARD], "forward (micro-batch j)")]
    legend_items.append(("url(#ap-idle)", "idle (pipeline bubble)"))
    extra_keys = [k for k, _ in tl.tail if k not in COLORS]
    for k, _ in tl.tail:
        legend_items.append((_color(k, extra_keys), _label(k)))

    total = tl.total_s if tl.total_s > 0 else 1.0
    scale = plot_w / total

    def X(t):
        return left + t * scale

    # Blocks narrower than this many pixels are merged into "dense" runs.
    dense_px = 1.6
    dense_used = any((b.end - b.start) * scale < dense_px for b in tl.blocks)
    if dense_used:
        legend_items.insert(2, (COLORS["dense"],
                                "forward and backward too dense to draw one by one"))
    leg, leg_h = _legend(legend_items, left, 0, plot_w)
    out.append(leg)

    top = leg_h + 10
    label_every = max(1, math.ceil(12 / (row_h + gap)))
    for s in range(p):
        y = top + s * (row_h + gap)
        out.append(f'<rect x="{_num(X(0))}" y="{_num(y)}" width="{_num(total * scale)}" '
                   f'height="{_num(row_h)}" fill="url(#ap-idle)"/>')
        if s % label_every == 0 or (s == p - 1 and s % label_every >= label_every / 2):
            fs = min(12, max(8, row_h * 0.8))
            ty = y + row_h / 2 + fs * 0.35
            if show_layers and s < len(layer_labels) and layer_labels[s]:
                out.append(f'<text x="{left - 8}" y="{_num(y + row_h / 2 - 2)}" '
                           f'text-anchor="end" font-size="12">stage {s}</text>')
                out.append(f'<text x="{left - 8}" y="{_num(y + row_h / 2 + 11)}" '
                           f'text-anchor="end" font-size="10" fill="#666">'
                           f'{esc(layer_labels[s])}</text>')
            else:
                out.append(f'<text x="{left - 8}" y="{_num(ty)}" text-anchor="end" '
                           f'font-size="{_num(fs)}">stage {s}</text>')

    # Pipeline blocks, merging runs of sub-pixel blocks.
    by_stage = [[] for _ in range(p)]
    for b in tl.blocks:
        by_stage[b.stage].append(b)
    for s, blocks in enumerate(by_stage):
        y = top + s * (row_h + gap)
        i = 0
        while i < len(blocks):
            b = blocks[i]
            if (b.end - b.start) * scale < dense_px:
                j, end = i, b.end
                while j + 1 < len(blocks) and \
                        (blocks[j + 1].end - blocks[j + 1].start) * scale < dense_px and \
                        (blocks[j + 1].start - end) * scale < 0.75:
                    j += 1
                    end = blocks[j].end
                kinds = {blocks[k].kind for k in range(i, j + 1)}
                fill = COLORS[kinds.pop()] if len(kinds) == 1 else COLORS["dense"]
                out.append(f'<rect x="{_num(X(b.start))}" y="{_num(y)}" '
                           f'width="{_num(max((end - b.start) * scale, 0.5))}" '
                           f'height="{_num(row_h)}" fill="{fill}"/>')
                i = j + 1
                continue
            w = (b.end - b.start) * scale
            name = "forward" if b.kind == FORWARD else "backward"
            out.append(f'<rect x="{_num(X(b.start))}" y="{_num(y)}" width="{_num(w)}" '
                       f'height="{_num(row_h)}" fill="{COLORS[b.kind]}" stroke="#fff" '
                       f'stroke-width="{0.8 if w > 4 else 0.3}"><title>stage {s}, {name} of '
                       f'micro-batch {b.micro_batch}: {fmt_ms(b.start)} \u2013 '
                       f'{fmt_ms(b.end)}</title></rect>')
            label = str(b.micro_batch)
            fs = min(11, row_h * 0.6)
            if w >= _text_w(label, fs) + 4 and fs >= 7:
                out.append(f'<text x="{_num(X(b.start) + w / 2)}" '
                           f'y="{_num(y + row_h / 2 + fs * 0.36)}" text-anchor="middle" '
                           f'font-size="{_num(fs)}" fill="#fff">{label}</text>')
            i += 1

    # The tail: exposed communication, optimizer, anything else, on every stage.
    t = tl.pipeline_s
    for k, v in tl.tail:
        for s in range(p):
            y = top + s * (row_h + gap)
            out.append(f'<rect x="{_num(X(t))}" y="{_num(y)}" width="{_num(v * scale)}" '
                       f'height="{_num(row_h)}" fill="{_color(k, extra_keys)}" stroke="#fff" '
                       f'stroke-width="0.5"><title>{esc(_label(k))}: {fmt_ms(v)}</title>'
                       f'</rect>')
        t += v

    rows_bottom = top + p * (row_h + gap) - gap
    # Axis
    ax_y = rows_bottom + 6
    out.append(f'<line x1="{left}" y1="{_num(ax_y)}" x2="{_num(left + plot_w)}" '
               f'y2="{_num(ax_y)}" stroke="#333"/>')
    step_ms = nice_step(total * 1e3)
    v = 0.0
    while v <= total * 1e3 * 1.0001:
        x = X(v / 1e3)
        out.append(f'<line x1="{_num(x)}" y1="{_num(ax_y)}" x2="{_num(x)}" y2="{_num(ax_y + 5)}" '
                   f'stroke="#333"/>')
        out.append(f'<line x1="{_num(x)}" y1="{_num(top)}" x2="{_num(x)}" '
                   f'y2="{_num(rows_bottom)}" stroke="#000" stroke-opacity="0.07"/>')
        out.append(f'<text x="{_num(x)}" y="{_num(ax_y + 18)}" text-anchor="middle" '
                   f'font-size="11">{fmt_tick(v, step_ms)}</text>')
        v += step_ms
    out.append(f'<text x="{_num(left + plot_w / 2)}" y="{_num(ax_y + 36)}" '
               f'text-anchor="middle" font-size="12">time (ms)</text>')

    # Dashed markers where the pipeline drains (if something follows) and the step ends.
    for tm in ([tl.pipeline_s] if tl.tail else []) + [tl.total_s]:
        if tm > 0:
            out.append(f'<line x1="{_num(X(tm))}" y1="{_num(top - 4)}" x2="{_num(X(tm))}" '
                       f'y2="{_num(rows_bottom + 4)}" stroke="#222" stroke-dasharray="4 3">'
                       f'<title>{fmt_ms(tm)}</title></line>')
    height = ax_y + 44
    return "".join(out), width, height


def breakdown_svg(report, width=1100):
    """The step time breakdown as one horizontal stacked bar."""
    pred = report.predicted
    bd = pred.step_time_breakdown_s
    keys = [k for k in planlib.STEP_TIME_KEYS if bd.get(k)] + \
           [k for k in bd if k not in planlib.STEP_TIME_KEYS and bd[k] > 0]
    items = [(k, bd[k]) for k in keys]
    total = pred.step_time_s or sum(v for _, v in items)
    unaccounted = total - sum(v for _, v in items)
    if unaccounted > planlib.SUM_TOLERANCE * total:
        items.append(("unaccounted", unaccounted))
    extra_keys = [k for k, _ in items if k not in COLORS]
    left, right = 96, 24
    plot_w = width - left - right
    full = max(total, sum(v for _, v in items)) or 1.0
    out = [f'<text x="{left - 8}" y="22" text-anchor="end" font-size="12">step</text>']
    x = left
    for k, v in items:
        w = v / full * plot_w
        fill = "url(#ap-idle)" if k == "bubble" else _color(k, extra_keys)
        out.append(f'<rect x="{_num(x)}" y="6" width="{_num(w)}" height="24" fill="{fill}" '
                   f'stroke="#fff" stroke-width="1"><title>{esc(_label(k))}: {fmt_ms(v)} '
                   f'({100 * v / total:.1f}%)</title></rect>')
        label = f"{_label(k)} {fmt_time(v)} ({100 * v / total:.1f}%)"
        if w > _text_w(label, 11) + 8:
            color = "#222" if k == "bubble" else "#fff"
            out.append(f'<text x="{_num(x + w / 2)}" y="22" text-anchor="middle" '
                       f'font-size="11" fill="{color}">{esc(label)}</text>')
        x += w
    leg_items = [("url(#ap-idle)" if k == "bubble" else _color(k, extra_keys),
                  f"{_label(k)}: {fmt_time(v)} ({100 * v / total:.1f}%)") for k, v in items]
    leg, leg_h = _legend(leg_items, left, 40, plot_w, size=11)
    out.append(leg)
    return "".join(out), width, 40 + leg_h + 4


def memory_bars(report):
    """[(label, sublabel, {key: bytes} or None, total bytes, is_chosen)]."""
    bars = []
    pred = report.predicted
    sub = f"{report.mesh} Z{report.zero_stage}"
    stage_mem = [s.memory_breakdown_bytes for s in report.stages]
    if stage_mem and all(stage_mem):
        for s, mem in enumerate(stage_mem):
            bars.append((f"stage {s}", "chosen", mem, sum(mem.values()), True))
    else:
        mem = pred.memory_breakdown_bytes or None
        total = pred.memory_per_gpu_bytes if pred.memory_per_gpu_bytes is not None else \
            sum((mem or {}).values())
        bars.append(("chosen", sub, mem, total, True))
    for i, a in enumerate(report.alternatives):
        ap = a.predicted
        mem = ap.memory_breakdown_bytes or None
        total = ap.memory_per_gpu_bytes if ap.memory_per_gpu_bytes is not None else \
            (sum(mem.values()) if mem else None)
        if total is None:
            continue
        asub = f"{a.mesh if a.mesh else '?'}" + \
            (f" Z{a.zero_stage}" if a.zero_stage is not None else "")
        bars.append((f"alt {i + 1}", asub, mem, total, False))
    return bars


def memory_svg(report, width=1100, height=340):
    bars = memory_bars(report)
    device = report.device_memory_bytes
    keys = list(planlib.MEMORY_KEYS)
    for _, _, mem, _, _ in bars:
        for k in (mem or {}):
            if k not in keys:
                keys.append(k)
    extra_keys = [k for k in keys if k not in COLORS]
    used = [k for k in keys if any((mem or {}).get(k) for _, _, mem, _, _ in bars)]
    if any(mem is None for _, _, mem, _, _ in bars):
        used.append("total")
    left, right = 70, 24
    plot_w = width - left - right
    leg_items = [(_color(k, extra_keys), _label(k)) for k in used]
    if device:
        leg_items.append(("#d62728", f"device memory {fmt_gib(device)}"))
    leg, leg_h = _legend(leg_items, left, 0, plot_w)
    out = [leg]
    top = leg_h + 14
    plot_h = height - top - 44
    ymax_b = max([b[3] for b in bars] + [device or 0]) * 1.12 or 1
    step = nice_step(ymax_b / 2**30, 6)
    ymax = math.ceil(ymax_b / 2**30 / step) * step * 2**30

    def Y(nbytes):
        return top + plot_h - nbytes / ymax * plot_h

    v = 0.0
    while v <= ymax / 2**30 + 1e-9:
        y = Y(v * 2**30)
        out.append(f'<line x1="{left}" y1="{_num(y)}" x2="{_num(left + plot_w)}" '
                   f'y2="{_num(y)}" stroke="#000" stroke-opacity="{0.5 if v == 0 else 0.08}"/>')
        out.append(f'<text x="{left - 6}" y="{_num(y + 4)}" text-anchor="end" '
                   f'font-size="11">{fmt_tick(v, step)}</text>')
        v += step
    out.append(f'<text x="14" y="{_num(top + plot_h / 2)}" font-size="12" '
               f'text-anchor="middle" transform="rotate(-90 14 {_num(top + plot_h / 2)})">'
               f'GiB per GPU</text>')
    n = len(bars)
    slot = plot_w / max(n, 1)
    bw = min(64.0, slot * 0.6)
    for i, (label, sub, mem, total, chosen) in enumerate(bars):
        cx = left + slot * (i + 0.5)
        x0 = cx - bw / 2
        if mem:
            acc = 0
            for k in keys:
                val = mem.get(k, 0)
                if not val:
                    continue
                y1, y0 = Y(acc + val), Y(acc)
                out.append(f'<rect x="{_num(x0)}" y="{_num(y1)}" width="{_num(bw)}" '
                           f'height="{_num(max(y0 - y1, 0.3))}" fill="{_color(k, extra_keys)}" '
                           f'stroke="#fff" stroke-width="0.6"><title>{esc(label)}: '
                           f'{esc(_label(k))} {fmt_gib(val, 2)}</title></rect>')
                acc += val
        else:
            out.append(f'<rect x="{_num(x0)}" y="{_num(Y(total))}" width="{_num(bw)}" '
                       f'height="{_num(Y(0) - Y(total))}" fill="{COLORS["total"]}">'
                       f'<title>{esc(label)}: {fmt_gib(total, 2)}</title></rect>')
        if chosen:
            out.append(f'<rect x="{_num(x0 - 2)}" y="{_num(Y(total) - 2)}" '
                       f'width="{_num(bw + 4)}" height="{_num(Y(0) - Y(total) + 2)}" '
                       f'fill="none" stroke="#222" stroke-width="1.2"/>')
        out.append(f'<text x="{_num(cx)}" y="{_num(Y(total) - 6)}" text-anchor="middle" '
                   f'font-size="11" font-weight="{"bold" if chosen else "normal"}">'
                   f'{total / 2**30:.1f}</text>')
        out.append(f'<text x="{_num(cx)}" y="{_num(top + plot_h + 16)}" text-anchor="middle" '
                   f'font-size="12" font-weight="{"bold" if chosen else "normal"}">'
                   f'{esc(label)}</text>')
        out.append(f'<text x="{_num(cx)}" y="{_num(top + plot_h + 31)}" text-anchor="middle" '
                   f'font-size="10" fill="#555">{esc(sub)}</text>')
    if device:
        y = Y(device)
        out.append(f'<line x1="{left}" y1="{_num(y)}" x2="{_num(left + plot_w)}" '
                   f'y2="{_num(y)}" stroke="#d62728" stroke-width="1.5" '
                   f'stroke-dasharray="6 4"/>')
        out.append(f'<text x="{_num(left + plot_w - 4)}" y="{_num(y - 5)}" text-anchor="end" '
                   f'font-size="11" fill="#d62728">device memory {fmt_gib(device)}</text>')
    return "".join(out), width, height


def standalone_svg(parts, title=None, width=1100):
    """Stacks chart parts [(svg, w, h, heading)] into one <svg> document."""
    out, y = [], 0
    if title:
        out.append(f'<text x="8" y="22" font-size="16" font-weight="bold">{esc(title)}</text>')
        y = 34
    for svg, w, h, heading in parts:
        if heading:
            out.append(f'<text x="8" y="{y + 16}" font-size="14" font-weight="bold">'
                       f'{esc(heading)}</text>')
            y += 26
        out.append(f'<g transform="translate(0,{_num(y)})">{svg}</g>')
        y += h + 16
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{_num(y)}" '
            f'viewBox="0 0 {width} {_num(y)}" style="{FONT}" font-size="12">'
            f'<rect width="100%" height="100%" fill="#fff"/>{svg_defs()}{"".join(out)}</svg>')


def inline_svg(svg, w, h):
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{_num(h)}" '
            f'viewBox="0 0 {w} {_num(h)}" font-size="12">{svg_defs()}{svg}</svg>')


# ---------------------------------------------------------------------------------------
# Captions and tables

def _schedule_name(report, schedule):
    if report.mode != "train":
        return "forward-only pipeline" if report.mesh.pp > 1 else "forward only"
    return {"gpipe": "GPipe", "1f1b": "1F1B"}.get(schedule, schedule)


def timeline_caption(report, tl):
    p, m = report.mesh.pp, report.num_micro_batches
    sched = _schedule_name(report, tl.schedule)
    what = "training step (forward, backward, optimizer)" if report.mode == "train" \
        else "inference step (forward only)"
    group = report.mesh.dp * report.mesh.tp
    s = [f"Pipeline schedule of one {what}: {sched}, {p} stage{'s' if p > 1 else ''} \u00d7 "
         f"{m} micro-batch{'es' if m > 1 else ''} of {report.micro_batch_size} "
         f"sequence{'s' if report.micro_batch_size > 1 else ''}. Each row is one pipeline "
         f"stage; its dp\u00d7tp = {group} GPU{'s' if group > 1 else ''} run the same "
         f"timeline. Block numbers are micro-batch indices; hatched time is idle (the "
         f"pipeline bubble)."]
    fb = ""
    if report.mode == "train":
        r = _fb_ratio(report)
        fb = (f", split forward : backward = 1 : {r:g}"
              + (" (full recomputation redoes the forward during the backward)"
                 if report.recompute == "full" else
                 " (selective recomputation is not drawn separately)"
                 if report.recompute == "selective" else ""))
    if tl.source == "balanced":
        s.append(f"<b>Assumption:</b> the report gives no per-stage times, so stages are "
                 f"drawn balanced: every stage takes compute / {m} = "
                 f"{fmt_ms(tl.forward_s[0] + tl.backward_s[0])} per micro-batch{fb}.")
    elif tl.source == "stages-per-mb":
        s.append("Per-stage times are the report's (stages[i].seconds_per_micro_batch)"
                 + (f"; <b>assumed</b>{fb}." if fb else "."))
    else:
        s.append("Per-stage forward and backward times are the report's "
                 "(stages[i].forward_s, backward_s, per micro-batch).")
    s += [esc(n) for n in tl.notes]
    if tl.tail:
        names = [_label(k) for k, _ in tl.tail]
        names = ", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else names[0]
        s.append(f"{names[0].upper()}{esc(names[1:])} {'are' if len(tl.tail) > 1 else 'is'} "
                 f"drawn after the pipeline drains, on every stage"
                 + (" (in reality part of the communication overlaps the last "
                    "backwards)." if report.mode == "train" else "."))
    s.append("Transfers between stages are not drawn.")
    bubble_sim = idle_time(tl)
    idle = stage_idle(tl)
    rep_bubble = report.predicted.step_time_breakdown_s.get("bubble")
    cmp = f"Drawn bubble (idle time of the busiest stage): {fmt_ms(bubble_sim)}"
    if tl.total_s > 0:
        cmp += f" ({100 * bubble_sim / tl.total_s:.1f}% of the drawn step)"
    if idle and max(idle) - min(idle) > 0.01 * max(tl.total_s, 1e-12):
        cmp += (f", stages idle {fmt_ms(min(idle))} to {fmt_ms(max(idle))} "
                f"(unbalanced stages)")
    if rep_bubble is not None:
        cmp += f"; the report predicts a bubble of {fmt_ms(rep_bubble)}"
    cmp += f". Drawn step: {fmt_ms(tl.total_s)}"
    if report.predicted.step_time_s:
        cmp += f"; predicted step time: {fmt_ms(report.predicted.step_time_s)}"
    s.append(cmp + ".")
    return " ".join(s)


def memory_caption(report):
    pred = report.predicted
    s = ["Memory per GPU at its peak, on the most loaded rank"]
    if report.stages and all(st.memory_breakdown_bytes for st in report.stages):
        s[0] = "Memory per GPU at its peak, per pipeline stage of the chosen plan"
    s[0] += (", for the chosen plan (outlined) and the alternatives (totals only where "
             "the report gives no breakdown). Numbers above bars are GiB (2<sup>30</sup> "
             "bytes).")
    if report.device_memory_bytes:
        s.append(f"Dashed line: the device's {fmt_gib(report.device_memory_bytes)}.")
    else:
        s.append("The report does not give the device memory, so no limit line is drawn.")
    if pred.memory_breakdown_bytes and report.zero_stage is not None:
        s.append(f"ZeRO stage {report.zero_stage}, {report.precision}, recompute "
                 f"{report.recompute}.")
    return " ".join(s)


def _header_rows(report):
    r, p = report, report.predicted
    mem = fmt_gib(p.memory_per_gpu_bytes)
    if r.device_memory_bytes:
        mem += (f" of {fmt_gib(r.device_memory_bytes)} "
                f"({100 * p.memory_per_gpu_bytes / r.device_memory_bytes:.0f}%)")
    sched = {"gpipe": "GPipe", "1f1b": "1F1B"}.get(r.schedule, r.schedule)
    rows = [
        ("Model", esc(r.model)),
        ("Mode, precision", f"{esc(r.mode)}, {esc(r.precision)}"),
        ("Mesh dp \u00d7 tp \u00d7 pp",
         f"<b>{r.mesh.dp} \u00d7 {r.mesh.tp} \u00d7 {r.mesh.pp}</b> = {r.world_size} GPUs"),
        ("ZeRO stage", str(r.zero_stage)),
        ("Micro-batches", f"{r.num_micro_batches} \u00d7 {r.micro_batch_size} "
                          f"sequence{'s' if r.micro_batch_size > 1 else ''} "
                          f"(global batch {r.global_batch_size:,} = dp {r.mesh.dp} \u00d7 "
                          f"{r.num_micro_batches} \u00d7 {r.micro_batch_size})"),
        ("Recompute", esc(r.recompute)),
        ("Schedule", esc(sched)),
    ]
    if r.cluster or r.device:
        rows.insert(1, ("Cluster", esc(r.cluster or "") +
                        (f" ({esc(r.device)})" if r.device and r.cluster else
                         esc(r.device) if r.device else "")))
    if r.parameters:
        rows.insert(1, ("Parameters", f"{r.parameters:,} ({_human(r.parameters)})"))
    rows2 = [
        ("Predicted step time", f"<b>{fmt_time(p.step_time_s)}</b>"),
        ("Throughput", f"<b>{fmt_count(p.tokens_per_s)}</b> tokens/s"),
        ("TFLOP/s per GPU", "\u2013" if p.tflops_per_gpu is None else f"{p.tflops_per_gpu:.1f}"),
        ("MFU", f"<b>{fmt_pct(p.mfu)}</b>"),
        ("Bubble fraction", fmt_pct(p.bubble_fraction) + (
            f" (bubble = {fmt_pct(bub / p.step_time_s)} of the step)"
            if (bub := p.step_time_breakdown_s.get("bubble")) is not None and p.step_time_s
            else "")),
        ("Memory per GPU", mem),
        ("Search time", fmt_time(r.search_time_s) + _search_stats(r.search)),
    ]
    return rows, rows2


def _human(n):
    for unit, div in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= div:
            return f"{n / div:.3g}{unit}"
    return str(n)


def _search_stats(search):
    """' (1,234 candidates, 96 segments, 1 distinct)' from the report's search object."""
    parts = []
    for key, label in (("candidates_evaluated", "candidates"), ("segments", "segments"),
                       ("distinct_segments", "distinct")):
        v = search.get(key)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            parts.append(f"{v:,.0f} {label}")
    return f" ({', '.join(parts)})" if parts else ""


def _kv_table(rows):
    return "<table class=kv>" + "".join(
        f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in rows) + "</table>"


def _stages_table(report):
    if not report.stages:
        return ""
    times = any(s.forward_s is not None for s in report.stages)
    mem = any(s.memory_breakdown_bytes for s in report.stages)
    head = "<tr><th>stage</th><th>layers</th><th>ONNX nodes</th>"
    if times:
        head += "<th>forward / micro-batch</th><th>backward / micro-batch</th>"
    if mem:
        head += "<th>peak memory</th>"
    rows = [head + "</tr>"]
    for s in report.stages:
        row = (f"<tr><td class=num>{s.stage}</td><td>{esc(s.layers or '')}</td>"
               f"<td class=num>{'' if s.onnx_nodes is None else f'{s.onnx_nodes:,}'}</td>")
        if times:
            row += (f"<td class=num>{'' if s.forward_s is None else fmt_ms(s.forward_s)}</td>"
                    f"<td class=num>{'' if s.backward_s is None else fmt_ms(s.backward_s)}</td>")
        if mem:
            mb = s.memory_breakdown_bytes
            row += f"<td class=num>{fmt_gib(sum(mb.values())) if mb else ''}</td>"
        rows.append(row + "</tr>")
    return "<table class=grid>" + "".join(rows) + "</table>"


def _alternatives_table(report):
    r, p = report, report.predicted
    head = ("<tr><th></th><th>dp\u00d7tp\u00d7pp</th><th>ZeRO</th>"
            "<th>micro-batches<br>count \u00d7 size</th><th>recompute</th><th>step time</th>"
            "<th>tokens/s</th><th>MFU</th>"
            "<th>memory / GPU</th><th>why not</th></tr>")

    def row(tag, mesh, zero, mbs, rc, pr, why, cls=""):
        rel = ""
        if pr.step_time_s and p.step_time_s and tag != "chosen":
            d = pr.step_time_s / p.step_time_s - 1
            rel = f' <span class=rel>({"+" if d >= 0 else ""}{100 * d:.1f}%)</span>'
        mem = fmt_gib(pr.memory_per_gpu_bytes)
        if pr.fits is False or (r.device_memory_bytes and pr.memory_per_gpu_bytes and
                                pr.memory_per_gpu_bytes > r.device_memory_bytes):
            mem = f"<span class=over>{mem}</span>"
        size, count = mbs
        mbs = None if size is None and count is None else \
            f"{DASH if count is None else count} \u00d7 {DASH if size is None else size}"
        return (f"<tr{cls}><td>{tag}</td><td>{esc(mesh) if mesh else DASH}</td>"
                f"<td class=num>{DASH if zero is None else zero}</td>"
                f"<td class=num>{DASH if mbs is None else mbs}</td>"
                f"<td>{esc(rc) if rc else DASH}</td>"
                f"<td class=num>{fmt_time(pr.step_time_s)}{rel}</td>"
                f"<td class=num>{fmt_count(pr.tokens_per_s)}</td>"
                f"<td class=num>{fmt_pct(pr.mfu)}</td><td class=num>{mem}</td>"
                f"<td class=why>{why}</td></tr>")

    rows = [head, row("chosen", str(r.mesh), r.zero_stage,
                      (r.micro_batch_size, r.num_micro_batches), r.recompute,
                      p, "", " class=chosen")]
    for i, a in enumerate(r.alternatives):
        rows.append(row(f"alt {i + 1}", str(a.mesh) if a.mesh else None, a.zero_stage,
                        (a.micro_batch_size, a.num_micro_batches), a.recompute, a.predicted,
                        esc(a.why_not) if a.why_not else "<i>(not given)</i>"))
    return "<table class=grid>" + "".join(rows) + "</table>"


CSS = """
body{%s;margin:24px;color:#222;max-width:1140px}
h1{font-size:22px;margin:0 0 4px} h2{font-size:17px;margin:28px 0 8px}
.sub{color:#555;margin-bottom:16px}
.cols{display:flex;gap:32px;flex-wrap:wrap}
table{border-collapse:collapse;font-size:13px}
table.kv th{text-align:left;font-weight:normal;color:#555;padding:3px 14px 3px 0;white-space:nowrap}
table.kv td{padding:3px 0}
table.grid th{background:#f2f2f2;text-align:left;padding:5px 8px;border-bottom:1px solid #ccc}
table.grid td{padding:4px 8px;border-bottom:1px solid #e6e6e6;vertical-align:top}
td.num{text-align:right;white-space:nowrap} td.why{max-width:420px}
tr.chosen td{background:#eef4fb;font-weight:600}
.rel{color:#777;font-weight:normal} .over{color:#c62828;font-weight:600}
figure{margin:0}
figcaption{font-size:12.5px;color:#444;max-width:1100px;line-height:1.45;margin-top:4px}
.warn{background:#fff6d6;border:1px solid #e6c955;padding:8px 12px;margin:12px 0;font-size:13px}
.foot{color:#888;font-size:11px;margin-top:28px}
""" % FONT


def render_html(report, title=None, source=None):
    """The whole page as a string."""
    tl = build_timeline(report)
    t_svg = timeline_svg(report, tl)
    b_svg = breakdown_svg(report)
    m_svg = memory_svg(report)
    title = title or f"autopar plan \u2013 {report.model}"
    pred = report.predicted
    rows1, rows2 = _header_rows(report)
    warn = ""
    if report.warnings:
        warn = ('<div class=warn><b>Report inconsistencies:</b><ul>' +
                "".join(f"<li>{esc(w)}</li>" for w in report.warnings) + "</ul></div>")
    sub = (f"{esc(report.mode)} \u00b7 {esc(report.precision)} \u00b7 {report.world_size} GPUs "
           f"\u00b7 predicted {fmt_time(pred.step_time_s)} per step, MFU {fmt_pct(pred.mfu)}")
    parts = [
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8>",
        f"<title>{esc(title)}</title><style>{CSS}</style></head><body>",
        f"<h1>{esc(title)}</h1><div class=sub>{sub}</div>",
        f"<div class=cols>{_kv_table(rows1)}{_kv_table(rows2)}</div>",
        warn,
        "<h2>Pipeline schedule</h2><figure>", inline_svg(*t_svg),
        f"<figcaption>{timeline_caption(report, tl)}</figcaption></figure>",
        "<h2>Step time breakdown</h2><figure>", inline_svg(*b_svg),
        "<figcaption>Predicted time of one step by component (predicted."
        "step_time_breakdown_s); the bubble is idle pipeline time.</figcaption></figure>",
        "<h2>Memory per GPU</h2><figure>", inline_svg(*m_svg),
        f"<figcaption>{memory_caption(report)}</figcaption></figure>",
    ]
    if report.stages:
        parts += ["<h2>Pipeline stages</h2>", _stages_table(report)]
    parts += ["<h2>Alternatives</h2>",
              _alternatives_table(report) if report.alternatives else
              "<p>The report lists no alternatives.</p>"]
    foot = "Drawn by autopar.draw"
    if source:
        foot += f" from {esc(os.path.basename(source))}"
    parts += [f"<div class=foot>{foot}.</div></body></html>\n"]
    return "".join(parts)


def render_svg(report, title=None):
    tl = build_timeline(report)
    t, tw, th = timeline_svg(report, tl)
    b, bw, bh = breakdown_svg(report)
    m, mw, mh = memory_svg(report)
    p = report.predicted
    title = title or (f"autopar plan \u2013 {report.model}: dp\u00d7tp\u00d7pp {report.mesh}, "
                      f"ZeRO {report.zero_stage}, {report.num_micro_batches}\u00d7"
                      f"{report.micro_batch_size} micro-batches, {fmt_time(p.step_time_s)}/step, "
                      f"MFU {fmt_pct(p.mfu)}")
    sched = _schedule_name(report, tl.schedule)
    note = " (stages assumed balanced)" if tl.source == "balanced" else ""
    return standalone_svg([(t, tw, th, f"Pipeline schedule ({sched}){note}"),
                           (b, bw, bh, "Step time breakdown"),
                           (m, mw, mh, "Memory per GPU")], title=title)


def main(argv=None):
    ap = argparse.ArgumentParser(
        description="Draw an autopar plan report (--report-json) as an HTML page.")
    ap.add_argument("report", help="plan report JSON written by autopar-compile --report-json")
    ap.add_argument("-o", "--output", help="HTML file to write (default: REPORT with .html)")
    ap.add_argument("--svg", metavar="FILE", help="also write the pictures as one SVG file")
    ap.add_argument("--title", help="page title (default: 'autopar plan - MODEL')")
    args = ap.parse_args(argv)
    try:
        report = planlib.load(args.report)
    except planlib.PlanReportError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    out = args.output or os.path.splitext(args.report)[0] + ".html"
    with open(out, "w", encoding="utf-8") as f:
        f.write(render_html(report, args.title, source=args.report))
    print(f"wrote {out}")
    if args.svg:
        with open(args.svg, "w", encoding="utf-8") as f:
            f.write(render_svg(report, args.title))
        print(f"wrote {args.svg}")
    for w in report.warnings:
        print(f"warning: {w}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
