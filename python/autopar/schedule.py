"""The pipeline schedule: the order in which each stage runs its micro-batches.

This is the only Python definition of the schedule.  The source of truth is the runtime's
``pipelineSchedule()`` in ``runtime/lib/PipelineSchedule.cpp`` (what autopar-run executes);
``lib/Planner/Pipeline.cpp`` (``microBatchesInFlight``, the cost model's bubble) follows
the same two schedules.  The plan report (``autopar-compile --report-json``) names the
schedule (``"schedule": "gpipe"`` or ``"1f1b"``) but does not list the order, so the plan
picture (``autopar.draw``) derives it here; keep :func:`stage_order` in step with the C++.

    gpipe  every forward, then every backward.
    1f1b   PipeDream-Flush as in Megatron-LM: ``min(stages - stage - 1, micro_batches)``
           warm-up forwards, then one forward / one backward alternately, then the
           remaining backwards.
Forward only (inference) both are every forward in order.

:func:`simulate` times one step of such a schedule given per-stage forward and backward
times (transfers between stages take no time).
"""

from dataclasses import dataclass

# scheduleKindName() in runtime/lib/PipelineSchedule.cpp.
GPIPE, ONE_F_ONE_B = "gpipe", "1f1b"
SCHEDULES = (GPIPE, ONE_F_ONE_B)

# StepPhase::Forward / StepPhase::Backward.
FORWARD, BACKWARD = "F", "B"


@dataclass
class Block:
    stage: int
    kind: str          # FORWARD or BACKWARD
    micro_batch: int
    start: float       # seconds from the start of the step
    end: float


def stage_order(schedule, num_stages, num_micro_batches, stage, train=True):
    """The order in which one stage runs its forward/backward passes: [(kind, mb), ...].

    Mirrors ``pipelineSchedule(kind, stages, stage, microBatches, withBackward)`` in
    runtime/lib/PipelineSchedule.cpp.  gpipe: all forwards, then all backwards.  1f1b
    (PipeDream-Flush, as in Megatron-LM): ``num_stages - stage - 1`` warm-up forwards,
    then one forward / one backward alternately, then the remaining backwards.  Forward
    only when not training.  Any schedule other than "gpipe" is taken as 1f1b."""
    p, m = num_stages, num_micro_batches
    if not train:
        return [(FORWARD, j) for j in range(m)]
    if schedule == GPIPE:
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
    (activations held at once) -- p - stage for 1F1B, m for GPipe (microBatchesInFlight()
    in lib/Planner/Pipeline.cpp)."""
    live = peak = 0
    for b in sorted((b for b in blocks if b.stage == stage), key=lambda b: b.start):
        live += 1 if b.kind == FORWARD else -1
        peak = max(peak, live)
    return peak
