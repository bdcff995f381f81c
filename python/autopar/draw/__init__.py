"""Draw an autopar plan report as a self-contained HTML page (inline SVG, no assets).

    python3 -m autopar.draw REPORT.json -o plan.html [--svg plan.svg] [--title TEXT]
    autopar-draw REPORT.json -o plan.html            # the same, once the package is installed

The page shows
  1. a header table: mesh dp x tp x pp, ZeRO stage, micro-batches, recomputation, schedule,
     predicted step time, tokens/s, TFLOP/s per GPU, MFU, memory, search time;
  2. the pipeline schedule of one step (GPipe or 1F1B) as a timeline per stage: forward and
     backward blocks per micro-batch, idle time (the bubble) hatched, then the exposed
     communication and the optimizer step; time axis in ms.  Each stage runs the order the
     report lists for it (``stage_orders``, the runtime's schedule as the planner writes
     it); a report without ``stage_orders`` (written before the planner listed them) gets
     no timeline, and the page says why in its place;
  3. the step time breakdown as one stacked bar;
  4. memory per GPU as stacked bars (parameters, gradients, optimizer states, activations,
     communication, other) for the chosen plan (per stage when the report gives per-stage
     memory) and the alternatives, against the device memory when the report gives it;
  5. the stages and the alternatives with why each lost.
``--svg FILE`` also writes the pictures (2-4) as one standalone SVG.

How the timeline is derived: with per-stage times (``stages[i].forward_s`` and
``backward_s``, one micro-batch each) the stages' orders are simulated with them.  Otherwise
stages are assumed balanced: every stage spends ``compute / num_micro_batches`` per
micro-batch (``compute`` from ``predicted.step_time_breakdown_s``), split forward :
backward = 1 : 2 in training (1 : 3 with full recomputation, which redoes the forward),
all forward in inference.  The page's caption says which was used.  See
docs/plan-picture.md.

Modules, one per job:
  autopar.draw.timeline   the pipeline schedule picture (2) and its caption; the order
                          each stage works in is the report's stage_orders, simulated
                          by autopar.schedule
  autopar.draw.breakdown  the step time breakdown bar (3)
  autopar.draw.memory     the memory bars (4) and their caption
  autopar.draw.page       header, tables (1, 5) and the page / standalone SVG assembly
  autopar.draw.svg        colours, labels, legends, SVG documents
  autopar.draw.format     numbers and text (ms, GiB, ticks, HTML escaping)
  autopar.draw.cli        the command line (python3 -m autopar.draw, autopar-draw)
The names below are re-exported so that ``from autopar import draw`` keeps working.
"""

from ..schedule import (BACKWARD, FORWARD, Block, format_order, max_in_flight, parse_order,
                        simulate)
from .breakdown import breakdown_svg
from .cli import main
from .format import (DASH, esc, fmt_count, fmt_gib, fmt_ms, fmt_pct, fmt_tick, fmt_time,
                     nice_step)
from .memory import memory_bars, memory_caption, memory_svg
from .page import CSS, render_html, render_svg
from .svg import COLORS, EXTRA_COLORS, FONT, LABELS, inline_svg, standalone_svg, svg_defs
from .timeline import (NO_STAGE_ORDERS, Timeline, build_timeline, idle_time, stage_idle,
                       timeline_caption, timeline_svg)

__all__ = [
    "BACKWARD", "FORWARD", "Block", "format_order", "max_in_flight", "parse_order",
    "simulate",
    "breakdown_svg", "main",
    "DASH", "esc", "fmt_count", "fmt_gib", "fmt_ms", "fmt_pct", "fmt_tick", "fmt_time",
    "nice_step",
    "memory_bars", "memory_caption", "memory_svg",
    "CSS", "render_html", "render_svg",
    "COLORS", "EXTRA_COLORS", "FONT", "LABELS", "inline_svg", "standalone_svg", "svg_defs",
    "NO_STAGE_ORDERS", "Timeline", "build_timeline", "idle_time", "stage_idle",
    "timeline_caption", "timeline_svg",
]
