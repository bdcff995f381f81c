"""The predicted step time by component as one horizontal stacked bar."""

from .. import plan as planlib
from .format import _num, esc, fmt_ms, fmt_time
from .svg import COLORS, _color, _label, _legend, _text_w


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
