"""SVG building blocks of the plan picture: fonts, colours, labels, legends, documents.

Each chart (timeline, breakdown, memory) returns (svg elements as a string, width,
height); inline_svg() wraps one for the HTML page, standalone_svg() stacks several into
one SVG document.
"""

from ..schedule import BACKWARD, FORWARD
from .format import _num, esc

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
