"""Memory per GPU as stacked bars (chosen plan, per stage when given, and alternatives)."""

import math

from .. import plan as planlib
from .format import _num, esc, fmt_gib, fmt_tick, nice_step
from .svg import COLORS, _color, _label, _legend


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
