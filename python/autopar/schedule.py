"""Pipeline schedules as the plan report lists them, and one step simulated from them.

The order in which each stage runs its micro-batches is not defined here.  It is defined
once, by the runtime's ``pipelineSchedule()`` in ``runtime/lib/PipelineSchedule.cpp``
(what autopar-run executes); the planner compiles that same file, and its plan report
(``autopar-compile --report-json``) lists each stage's order under ``"stage_orders"``:
one string per pipeline stage, ``"F0 F1 B0 F2 B1 B2"`` -- F (forward) or B (backward),
then the micro-batch index, space separated; forwards only in inference.  With virtual
stages (the interleaved 1F1B) each step also names its model chunk, ``"F0.1"``: micro-batch
0's forward through chunk 1 (virtual stage ``chunk * pp + stage``).  This module reads
those strings (:func:`parse_order`: ``(kind, mb)`` steps, or ``(kind, mb, chunk)`` with
chunks) and works from the orders:

    simulate       times one step given per-stage forward and backward times (transfers
                   between stages take no time);
    max_in_flight  the most micro-batches whose activations a stage holds, what the
                   planner's cost model charges (microBatchesInFlight() in
                   lib/Planner/Pipeline.cpp walks the same order).
"""

from dataclasses import dataclass

# scheduleKindName() in runtime/lib/PipelineSchedule.cpp: the names the report's
# "schedule" takes.  Only names; the orders come with the report.
GPIPE, ONE_F_ONE_B = "gpipe", "1f1b"
SCHEDULES = (GPIPE, ONE_F_ONE_B)

# StepPhase::Forward / StepPhase::Backward, as the report's stage_orders spell them.
FORWARD, BACKWARD = "F", "B"


@dataclass
class Block:
    stage: int
    kind: str          # FORWARD or BACKWARD
    micro_batch: int
    start: float       # seconds from the start of the step
    end: float
    chunk: int = 0     # the model chunk (virtual stages); 0 without


def step_parts(step):
    """(kind, micro_batch, chunk) of a parsed step, chunk 0 where it names none."""
    kind, mb, *chunk = step
    return kind, mb, chunk[0] if chunk else 0


def parse_order(text):
    """One stage's order as the report writes it, "F0 F1 B0 ...", as [(kind, mb), ...];
    with virtual stages, "F0.0 F1.0 F0.1 ...", as [(kind, mb, chunk), ...].

    Raises ValueError naming the token that is not F or B followed by a micro-batch
    index (a non-negative integer) and, optionally, a dot and a chunk index."""
    if not isinstance(text, str):
        raise ValueError(f"expected a string like 'F0 F1 B0', got {text!r}")
    order = []
    for token in text.split():
        kind, index = token[:1], token[1:]
        index, dot, chunk = index.partition(".")
        if kind not in (FORWARD, BACKWARD) or not index.isdigit() or \
                not index.isascii() or \
                (dot and (not chunk.isdigit() or not chunk.isascii())):
            raise ValueError(f"{token!r} is not F or B followed by a micro-batch index "
                             f"(and, with virtual stages, '.' and a chunk index)")
        order.append((kind, int(index), int(chunk)) if dot else (kind, int(index)))
    return order


def format_order(order):
    """[(kind, mb), ...] (or [(kind, mb, chunk), ...]) as the report writes it:
    "F0 F1 B0 ..." ("F0.0 F1.0 F0.1 ...")."""
    return " ".join(f"{step[0]}{step[1]}" + (f".{step[2]}" if len(step) > 2 else "")
                    for step in order)


def simulate(orders, forward_s, backward_s):
    """Simulates one pipelined step; returns the blocks sorted by stage and start.

    orders[i]: the order stage i works in, [(kind, mb), ...] (the report's
    ``stage_orders``, parsed).  forward_s[i], backward_s[i]: time of one micro-batch's
    forward / backward on stage i.  Each stage runs its order one step at a time; a
    forward on stage i waits for the same micro-batch's forward on stage i-1, a backward
    on stage i for its backward on stage i+1 (on the last stage: its own forward).
    With virtual stages (steps (kind, mb, chunk)), the same holds for the virtual
    stages ``chunk * p + i``: forward_s and backward_s then give each virtual stage's
    times, ``virtual_stages * p`` of them.  Transfers between stages take no time here.
    Raises ValueError when the orders cannot all run to the end (a step waits for one
    that never runs)."""
    p = len(orders)
    chunks = 1 + max((step_parts(step)[2] for order in orders for step in order),
                     default=0)
    n = p * chunks
    if len(forward_s) != n or len(backward_s) != n:
        raise ValueError(f"{p} stage orders of {chunks} chunk(s) ({n} virtual stages) "
                         f"but {len(forward_s)} forward and {len(backward_s)} backward "
                         f"times")
    done = {}
    pos = [0] * p
    free = [0.0] * p
    blocks = []
    left = sum(len(o) for o in orders)
    while left:
        progressed = False
        for s in range(p):
            while pos[s] < len(orders[s]):
                kind, j, c = step_parts(orders[s][pos[s]])
                v = c * p + s
                if kind == FORWARD:
                    dep = done.get((FORWARD, v - 1, j)) if v > 0 else 0.0
                elif v < n - 1:
                    dep = done.get((BACKWARD, v + 1, j))
                else:
                    dep = done.get((FORWARD, v, j))
                if dep is None:
                    break
                start = max(free[s], dep)
                end = start + (forward_s[v] if kind == FORWARD else backward_s[v])
                done[(kind, v, j)] = end
                free[s] = end
                blocks.append(Block(s, kind, j, start, end, c))
                pos[s] += 1
                left -= 1
                progressed = True
        if not progressed:
            stuck = ", ".join(f"stage {s} at {format_order([orders[s][pos[s]]])}"
                              for s in range(p) if pos[s] < len(orders[s]))
            raise ValueError(f"the stage orders cannot run to the end: {stuck} wait "
                             f"for steps that never run")
    blocks.sort(key=lambda b: (b.stage, b.start))
    return blocks


def max_in_flight(order):
    """Most micro-batches whose forward one stage has run and whose backward it has not,
    along its order [(kind, mb), ...]: the activations it holds at once (p - stage for
    1F1B, m for GPipe; microBatchesInFlight() in lib/Planner/Pipeline.cpp)."""
    live = peak = 0
    for step in order:
        live += 1 if step[0] == FORWARD else -1
        peak = max(peak, live)
    return peak
