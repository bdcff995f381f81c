"""The pipeline schedule of one step as a timeline per stage: derivation, SVG, caption.

How the timeline is derived: with per-stage times (``stages[i].forward_s`` and
``backward_s``, one micro-batch each) the stages' orders are simulated with them.
Otherwise stages are assumed balanced: every stage spends ``compute / num_micro_batches`` per
micro-batch (``compute`` from ``predicted.step_time_breakdown_s``), split forward :
backward = 1 : 2 in training (1 : 3 with full recomputation, which redoes the forward),
all forward in inference.  The page's caption says which was used.

The order each stage works in is the report's ``stage_orders`` (written by the planner from
the runtime's pipelineSchedule() in runtime/lib/PipelineSchedule.cpp, the order autopar-run
executes); nothing here derives it from the schedule's name.  A report without
``stage_orders`` (written before the planner listed them) gets no timeline:
:func:`build_timeline` returns None and the page shows :data:`NO_STAGE_ORDERS` in its place,
as it draws what a report gives and says what it leaves out.
"""

import math
from dataclasses import dataclass

from .. import plan as planlib
from ..schedule import BACKWARD, FORWARD, simulate
from .format import _num, esc, fmt_ms, fmt_tick, nice_step
from .svg import COLORS, _color, _cut, _label, _legend, _text_w


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
    schedule: str              # the report's schedule name (the orders are its stage_orders)
    notes: list                # sentences for the caption


# Shown where the timeline would be when the report has no stage_orders.
NO_STAGE_ORDERS = ("The report lists no stage_orders (the order each pipeline stage runs its "
                   "micro-batches in): it was written before autopar-compile wrote them, so "
                   "the pipeline schedule is not drawn. Write the report again with "
                   "autopar-compile --report-json to draw it.")


def _fb_ratio(report):
    """Backward time over forward time assumed for balanced stages."""
    if report.mode != "train":
        return 0.0
    return 3.0 if report.recompute == "full" else 2.0


def build_timeline(report):
    """Derives the timeline of one step from a PlanReport (see the module docstring): the
    report's stage_orders simulated with the stage times.  None when the report has no
    stage_orders (see NO_STAGE_ORDERS)."""
    if report.stage_orders is None:
        return None
    p, m = report.mesh.pp, report.num_micro_batches
    train = report.mode == "train"
    pred = report.predicted
    bd = dict(pred.step_time_breakdown_s)
    notes = []

    compute = bd.get("compute")
    if compute is None:
        others = sum(v for k, v in bd.items() if k != "compute")
        compute = max(pred.step_time_s - others, 0.0) if pred.step_time_s else 0.0
        notes.append("The report gives no compute time; it is taken as the step time "
                     "minus the other parts of the breakdown.")

    # With virtual stages the simulation runs the chunks: their times, per virtual
    # stage (chunk c of stage s at c * pp + s).
    chunks = getattr(report, "virtual_stages", 1)
    stages = report.chunk_stages if chunks > 1 else report.stages
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
        busiest = max(sum(fwd[s::p]) + sum(bwd[s::p]) for s in range(p))
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
        per_mb = compute / m / chunks if m else 0.0
        fwd = [per_mb / (1 + r)] * (p * chunks)
        bwd = [per_mb * r / (1 + r)] * (p * chunks)
        source = "balanced"

    try:
        blocks = simulate(report.stage_orders, fwd, bwd)
    except ValueError as e:
        raise planlib.PlanReportError(f"stage_orders: {e}") from None
    pipeline_s = max((b.end for b in blocks), default=0.0)
    tail = [(k, bd[k]) for k in ("exposed_communication", "optimizer") if bd.get(k)]
    tail += [(k, v) for k, v in bd.items()
             if k not in planlib.STEP_TIME_KEYS and v > 0]
    total = pipeline_s + sum(v for _, v in tail)
    return Timeline(blocks=blocks, num_stages=p, pipeline_s=pipeline_s, tail=tail,
                    total_s=total, forward_s=fwd, backward_s=bwd, source=source,
                    schedule=report.schedule, notes=notes)


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


def timeline_svg(report, tl, width=1100):
    p = tl.num_stages
    chunked = len(tl.forward_s) > p
    right = 24
    row_h = max(6.0, min(34.0, 420.0 / p))
    gap = max(1.0, row_h * 0.18)
    # Layer ranges go under the stage name when rows are tall enough; long ones are cut.
    # The nodes each stage runs on (the report's placement) join them.
    nodes = report.stage_nodes or []

    def sublabel(i, st):
        parts = [f"layers {st.layers}"] if st.layers else []
        if i < len(nodes):
            first, last = nodes[i]
            parts.append(f"node {first}" if first == last else f"nodes {first}-{last}")
        return _cut(", ".join(parts), 30)

    show_layers = row_h >= 26 and (any(st.layers for st in report.stages) or bool(nodes))
    layer_labels = [sublabel(i, st) for i, st in enumerate(report.stages)] \
        if show_layers else []
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
                       f'micro-batch {b.micro_batch}'
                       f'{f" through chunk {b.chunk}" if chunked else ""}: '
                       f'{fmt_ms(b.start)} \u2013 '
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


def _schedule_name(report, schedule):
    if report.mode != "train":
        return "forward-only pipeline" if report.mesh.pp > 1 else "forward only"
    return {"gpipe": "GPipe", "1f1b": "1F1B"}.get(schedule, schedule)


def timeline_caption(report, tl):
    p, m = report.mesh.pp, report.num_micro_batches
    chunks = len(tl.forward_s) // max(tl.num_stages, 1)
    sched = _schedule_name(report, tl.schedule)
    if chunks > 1:
        sched = (f"interleaved {sched} over {chunks} model chunks per stage (each block "
                 f"one chunk's step; hover for its chunk)")
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
                 f"{fmt_ms((tl.forward_s[0] + tl.backward_s[0]) * chunks)} per "
                 f"micro-batch{fb}.")
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
