"""Pipeline schedules as the plan report lists them, and one step simulated from them.

The order in which each stage runs its micro-batches is not defined here.  It is defined
once, by the runtime's ``pipelineSchedule()`` in ``runtime/lib/PipelineSchedule.cpp``
(what autopar-run executes); the planner compiles that same file, and its plan report
(``autopar-compile --report-json``) lists each stage's order under ``"stage_orders"``:
one string per pipeline stage, ``"F0 F1 B0 F2 B1 B2"`` -- F (forward) or B (backward),
then the micro-batch index, space separated; forwards only in inference.  This module
reads those strings (:func:`parse_order`) and works from the orders:

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


def parse_order(text):
    """One stage's order as the report writes it, "F0 F1 B0 ...", as [(kind, mb), ...].

    Raises ValueError naming the token that is not F or B followed by a micro-batch
    index (a non-negative integer)."""
    if not isinstance(text, str):
        raise ValueError(f"expected a string like 'F0 F1 B0', got {text!r}")
    order = []
    for token in text.split():
        kind, index = token[:1], token[1:]
        if kind not in (FORWARD, BACKWARD) or not index.isdigit() or not index.isascii():
            raise ValueError(f"{token!r} is not F or B followed by a micro-batch index")
        order.append((kind, int(index)))
    return order


def format_order(order):
    """[(kind, mb), ...] as the report writes it: "F0 F1 B0 ..."."""
    return " ".join(f"{kind}{mb}" for kind, mb in order)


def simulate(orders, forward_s, backward_s):
    """Simulates one pipelined step; returns the blocks sorted by stage and start.

    orders[i]: the order stage i works in, [(kind, mb), ...] (the report's
    ``stage_orders``, parsed).  forward_s[i], backward_s[i]: time of one micro-batch's
    forward / backward on stage i.  Each stage runs its order one step at a time; a
    forward on stage i waits for the same micro-batch's forward on stage i-1, a backward
    on stage i for its backward on stage i+1 (on the last stage: its own forward).
    Transfers between stages take no time here.  Raises ValueError when the orders
    cannot all run to the end (a step waits for one that never runs)."""
    p = len(orders)
    if len(forward_s) != p or len(backward_s) != p:
        raise ValueError(f"{p} stage orders but {len(forward_s)} forward and "
                         f"{len(backward_s)} backward times")
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
    for kind, _ in order:
        live += 1 if kind == FORWARD else -1
        peak = max(peak, live)
    return peak
