"""Formatting of numbers and text for the plan picture (times, bytes, ticks, escaping)."""

import html
import math

DASH = "\u2013"


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


def _human(n):
    for unit, div in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= div:
            return f"{n / div:.3g}{unit}"
    return str(n)
