"""Load and validate autopar's plan report (``autopar-compile --report-json FILE``).

The report's fields are the contract of docs/interfaces.md ("Plan report"); this module reads
them into small dataclasses, checks types, ranges and the relations between fields, and
keeps everything it does not know in ``extra`` dicts (fields added later are tolerated).

    python3 -m autopar.plan REPORT.json            # validate, print a summary; exit 1 if invalid

    from autopar import plan
    r = plan.load("report.json")                   # raises plan.PlanReportError
    r.mesh.dp, r.predicted.step_time_s, r.stages[0].layers, r.alternatives[0].why_not
    r.warnings                                     # soft inconsistencies (sums that disagree)
    r.stage_orders[0]                              # [("F", 0), ("F", 1), ("B", 0), ...]

``stage_orders`` (docs/interfaces.md) is each pipeline stage's order as autopar-run executes
it, written by the planner from the runtime's pipelineSchedule(); it is parsed into
``[(kind, micro_batch), ...]`` per stage (kind "F" or "B") and checked: one order per stage,
every micro-batch's forward once, and in train mode its backward once after it (none in
infer mode).  Reports written before autopar-compile listed the orders have none:
``stage_orders`` is then None and the plan picture leaves the pipeline timeline out, saying
why (autopar.draw.timeline).

Optional fields read when present (not yet in docs/interfaces.md):
  stages[i].forward_s, stages[i].backward_s     time of ONE micro-batch's forward / backward
                                                (backward including recomputation) on stage i
  stages[i].seconds_per_micro_batch             forward + backward of one micro-batch there
  stages[i].memory_bytes, .memory_breakdown_bytes   that stage's peak memory per GPU
  device_memory_bytes                           memory of one GPU; also looked up in
                                                predicted.device_memory_bytes and
                                                cluster.gpu.memory_gib
  cluster, device, parameters, search           names and statistics for the header
  predicted.fits, alternatives[i].num_micro_batches, alternatives[i].schedule
Byte counts may be floating-point numbers (they are rounded).
"""

import json
import math
import sys
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from .schedule import BACKWARD, FORWARD, SCHEDULES, format_order, parse_order, step_parts

MODES = ("train", "infer")
PRECISIONS = ("fp32", "bf16", "fp16")
RECOMPUTE = ("none", "selective", "full")
ZERO_STAGES = (0, 1, 2, 3)
# The runtime's schedule names (scheduleKindName() in runtime/lib/PipelineSchedule.cpp).
# Others are accepted: the picture draws the report's stage_orders whatever the name.
KNOWN_SCHEDULES = SCHEDULES
# The keys of the two breakdowns named by docs/interfaces.md, in display order.
STEP_TIME_KEYS = ("compute", "exposed_communication", "bubble", "optimizer")
MEMORY_KEYS = ("parameters", "gradients", "optimizer_states", "activations",
               "communication", "other")
# Relative disagreement above which a sum that should match raises a warning.
SUM_TOLERANCE = 0.02


class PlanReportError(ValueError):
    """The report is not valid JSON or breaks the contract; the message names the field."""


# ---------------------------------------------------------------------------------------
# Field readers: each takes the containing dict, the key and the dotted path for messages.

_MISSING = object()


def _where(path, key):
    return f"{path}.{key}" if path else key


def _get(d, key, path, required):
    if key not in d or d[key] is None:
        if required:
            raise PlanReportError(f"{_where(path, key)}: missing")
        return _MISSING
    return d[key]


def _int(d, key, path, required=True, minimum=None, choices=None):
    v = _get(d, key, path, required)
    if v is _MISSING:
        return None
    # JSON writers sometimes emit 2.0 for 2; accept integral floats, never booleans.
    if isinstance(v, bool) or not isinstance(v, (int, float)) or \
            (isinstance(v, float) and (not math.isfinite(v) or v != int(v))):
        raise PlanReportError(f"{_where(path, key)}: expected an integer, got {v!r}")
    v = int(v)
    if minimum is not None and v < minimum:
        raise PlanReportError(f"{_where(path, key)}: must be >= {minimum}, got {v}")
    if choices is not None and v not in choices:
        raise PlanReportError(f"{_where(path, key)}: must be one of "
                              f"{', '.join(map(str, choices))}, got {v}")
    return v


def _float(d, key, path, required=True, minimum=0.0, maximum=None):
    v = _get(d, key, path, required)
    if v is _MISSING:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise PlanReportError(f"{_where(path, key)}: expected a finite number, got {v!r}")
    v = float(v)
    if minimum is not None and v < minimum:
        raise PlanReportError(f"{_where(path, key)}: must be >= {minimum:g}, got {v:g}")
    if maximum is not None and v > maximum:
        raise PlanReportError(f"{_where(path, key)}: must be <= {maximum:g}, got {v:g}")
    return v


def _bytes(d, key, path, required=True):
    """A byte count: any finite number >= 0 (the planner computes them in floating
    point), rounded to an int."""
    v = _float(d, key, path, required)
    return None if v is None else int(round(v))


def _str(d, key, path, required=True, choices=None, lower=False):
    v = _get(d, key, path, required)
    if v is _MISSING:
        return None
    if not isinstance(v, str):
        raise PlanReportError(f"{_where(path, key)}: expected a string, got {v!r}")
    if lower:
        v = v.lower()
    if choices is not None and v not in choices:
        raise PlanReportError(f"{_where(path, key)}: must be one of {', '.join(choices)}, "
                              f"got {v!r}")
    return v


def _obj(d, key, path, required=True):
    v = _get(d, key, path, required)
    if v is _MISSING:
        return None
    if not isinstance(v, dict):
        raise PlanReportError(f"{_where(path, key)}: expected an object, got {type(v).__name__}")
    return v


def _list(d, key, path, required=True):
    v = _get(d, key, path, required)
    if v is _MISSING:
        return None
    if not isinstance(v, list):
        raise PlanReportError(f"{_where(path, key)}: expected a list, got {type(v).__name__}")
    return v


def _number_map(d, key, path, required, integer):
    """An object of name -> non-negative number (seconds, or bytes when integer)."""
    obj = _obj(d, key, path, required)
    if obj is None:
        return None
    out = {}
    for k in obj:
        out[k] = (_bytes(obj, k, _where(path, key)) if integer
                  else _float(obj, k, _where(path, key)))
    return out


def _extra(d, known):
    return {k: v for k, v in d.items() if k not in known}


# ---------------------------------------------------------------------------------------

@dataclass
class Mesh:
    dp: int
    tp: int
    pp: int

    @property
    def size(self):
        return self.dp * self.tp * self.pp

    def __str__(self):
        return f"{self.dp}\u00d7{self.tp}\u00d7{self.pp}"

    @classmethod
    def from_dict(cls, d, path):
        return cls(dp=_int(d, "dp", path, minimum=1), tp=_int(d, "tp", path, minimum=1),
                   pp=_int(d, "pp", path, minimum=1))


@dataclass
class Stage:
    stage: int
    layers: Optional[str] = None
    onnx_nodes: Optional[int] = None
    forward_s: Optional[float] = None     # one micro-batch on this stage
    backward_s: Optional[float] = None    # one micro-batch, recomputation included
    seconds_per_micro_batch: Optional[float] = None   # forward (+ backward when training)
    memory_bytes: Optional[int] = None
    memory_breakdown_bytes: Optional[Dict[str, int]] = None
    # With virtual stages, the report lists one entry per virtual stage: its chunk and
    # its place in the pipeline (chunk * pp + stage).
    chunk: Optional[int] = None
    virtual_stage: Optional[int] = None
    extra: dict = field(default_factory=dict)

    KNOWN = ("stage", "layers", "onnx_nodes", "forward_s", "backward_s",
             "seconds_per_micro_batch", "memory_bytes", "memory_breakdown_bytes",
             "chunk", "virtual_stage")

    @classmethod
    def from_dict(cls, d, path):
        if not isinstance(d, dict):
            raise PlanReportError(f"{path}: expected an object, got {type(d).__name__}")
        layers = d.get("layers")
        if layers is not None and not isinstance(layers, (str, int)):
            raise PlanReportError(f"{path}.layers: expected a string like '0-35', got {layers!r}")
        return cls(stage=_int(d, "stage", path, minimum=0),
                   layers=None if layers is None else str(layers),
                   onnx_nodes=_int(d, "onnx_nodes", path, required=False, minimum=0),
                   forward_s=_float(d, "forward_s", path, required=False),
                   backward_s=_float(d, "backward_s", path, required=False),
                   seconds_per_micro_batch=_float(d, "seconds_per_micro_batch", path,
                                                  required=False),
                   memory_bytes=_bytes(d, "memory_bytes", path, required=False),
                   memory_breakdown_bytes=_number_map(d, "memory_breakdown_bytes", path,
                                                      False, integer=True),
                   chunk=_int(d, "chunk", path, required=False, minimum=0),
                   virtual_stage=_int(d, "virtual_stage", path, required=False,
                                      minimum=0),
                   extra=_extra(d, cls.KNOWN))


def _fold_chunks(chunks, pp):
    """One Stage per pipeline stage from the report's virtual stages (chunk c of stage
    s at c * pp + s): its layers listed per chunk, its times the sums over its chunks
    (None where a chunk lacks one), its memory (the report gives each chunk its
    stage's)."""
    def total(values):
        return None if any(v is None for v in values) else sum(values)
    folded = []
    for s in range(pp):
        mine = chunks[s::pp]
        layers = [c.layers for c in mine if c.layers]
        folded.append(Stage(
            stage=s, layers=", ".join(layers) if layers else None,
            onnx_nodes=total([c.onnx_nodes for c in mine]),
            forward_s=total([c.forward_s for c in mine]),
            backward_s=total([c.backward_s for c in mine]),
            seconds_per_micro_batch=total([c.seconds_per_micro_batch for c in mine]),
            memory_bytes=mine[0].memory_bytes,
            memory_breakdown_bytes=mine[0].memory_breakdown_bytes))
    return folded


@dataclass
class Predicted:
    step_time_s: Optional[float] = None
    tokens_per_s: Optional[float] = None
    tflops_per_gpu: Optional[float] = None
    mfu: Optional[float] = None
    bubble_fraction: Optional[float] = None
    step_time_breakdown_s: Dict[str, float] = field(default_factory=dict)
    memory_per_gpu_bytes: Optional[int] = None
    memory_breakdown_bytes: Dict[str, int] = field(default_factory=dict)
    fits: Optional[bool] = None           # the planner's verdict on memory, when given
    extra: dict = field(default_factory=dict)

    KNOWN = ("step_time_s", "tokens_per_s", "tflops_per_gpu", "mfu", "bubble_fraction",
             "step_time_breakdown_s", "memory_per_gpu_bytes", "memory_breakdown_bytes",
             "fits")

    @classmethod
    def from_dict(cls, d, path, required=True):
        """required=False for alternatives, whose predictions may be partial."""
        r = required
        return cls(step_time_s=_float(d, "step_time_s", path, r),
                   tokens_per_s=_float(d, "tokens_per_s", path, r),
                   tflops_per_gpu=_float(d, "tflops_per_gpu", path, r),
                   mfu=_float(d, "mfu", path, r, maximum=1.0),
                   bubble_fraction=_float(d, "bubble_fraction", path, r, maximum=1.0),
                   step_time_breakdown_s=_number_map(d, "step_time_breakdown_s", path, r,
                                                     integer=False) or {},
                   memory_per_gpu_bytes=_bytes(d, "memory_per_gpu_bytes", path, r),
                   memory_breakdown_bytes=_number_map(d, "memory_breakdown_bytes", path, r,
                                                      integer=True) or {},
                   fits=_bool(d, "fits", path),
                   extra=_extra(d, cls.KNOWN))


def _bool(d, key, path):
    v = d.get(key)
    if v is None:
        return None
    if not isinstance(v, bool):
        raise PlanReportError(f"{_where(path, key)}: expected true or false, got {v!r}")
    return v


@dataclass
class Alternative:
    mesh: Optional[Mesh]
    zero_stage: Optional[int]
    micro_batch_size: Optional[int]
    recompute: Optional[str]
    predicted: Predicted
    why_not: str
    num_micro_batches: Optional[int] = None
    schedule: Optional[str] = None
    extra: dict = field(default_factory=dict)

    KNOWN = ("mesh", "zero_stage", "micro_batch_size", "num_micro_batches", "recompute",
             "schedule", "predicted", "why_not")

    @classmethod
    def from_dict(cls, d, path):
        if not isinstance(d, dict):
            raise PlanReportError(f"{path}: expected an object, got {type(d).__name__}")
        mesh_d = _obj(d, "mesh", path, required=False)
        mesh = Mesh.from_dict(mesh_d, f"{path}.mesh") if mesh_d else None
        pred_d = _obj(d, "predicted", path, required=False) or {}
        return cls(mesh=mesh,
                   zero_stage=_int(d, "zero_stage", path, False, choices=ZERO_STAGES),
                   micro_batch_size=_int(d, "micro_batch_size", path, False, minimum=1),
                   recompute=_str(d, "recompute", path, False, RECOMPUTE, lower=True),
                   predicted=Predicted.from_dict(pred_d, f"{path}.predicted", required=False),
                   why_not=_str(d, "why_not", path, required=False) or "",
                   num_micro_batches=_int(d, "num_micro_batches", path, False, minimum=1),
                   schedule=_str(d, "schedule", path, False, lower=True),
                   extra=_extra(d, cls.KNOWN))


@dataclass
class PlanReport:
    model: str
    mode: str
    precision: str
    world_size: int
    mesh: Mesh
    zero_stage: int
    micro_batch_size: int
    num_micro_batches: int
    recompute: str
    schedule: str
    stages: List[Stage]
    predicted: Predicted
    search_time_s: Optional[float]
    alternatives: List[Alternative]
    device_memory_bytes: Optional[int] = None
    cluster: Optional[str] = None         # name of the cluster (a preset or the JSON's name)
    device: Optional[str] = None          # name of the GPU
    parameters: Optional[int] = None      # model parameters
    search: dict = field(default_factory=dict)   # search statistics, as given
    # Each stage's order, [(kind, micro_batch), ...] with kind "F" or "B"; None in a report
    # written before the planner listed them.
    stage_orders: Optional[List[List[Tuple[str, int]]]] = None
    # Where the ranks sit (the report's "placement"): its one-line "summary" and each
    # stage's (first_node, last_node); None in a report written before it existed.
    placement_summary: Optional[str] = None
    stage_nodes: Optional[List[Tuple[int, int]]] = None
    # Model chunks per pipeline stage (the interleaved 1F1B; 1 without).  Above 1,
    # `stages` has one entry per pipeline stage (its chunks folded: _fold_chunks) and
    # `chunk_stages` the report's entries, one per virtual stage.
    virtual_stages: int = 1
    chunk_stages: List[Stage] = field(default_factory=list)
    warnings: List[str] = field(default_factory=list)
    extra: dict = field(default_factory=dict)
    raw: dict = field(default_factory=dict, repr=False)

    KNOWN = ("model", "mode", "precision", "world_size", "mesh", "zero_stage",
             "micro_batch_size", "num_micro_batches", "recompute", "schedule", "stages",
             "predicted", "search_time_s", "alternatives", "device_memory_bytes",
             "cluster", "device", "parameters", "search", "stage_orders", "placement",
             "virtual_stages")

    @property
    def global_batch_size(self):
        """Sequences per optimizer step: dp x micro-batch size x micro-batch count."""
        return self.mesh.dp * self.micro_batch_size * self.num_micro_batches

    @property
    def schedule_known(self):
        return self.schedule in KNOWN_SCHEDULES

    @classmethod
    def from_dict(cls, d):
        if not isinstance(d, dict):
            raise PlanReportError(f"report: expected a JSON object, got {type(d).__name__}")
        mesh = Mesh.from_dict(_obj(d, "mesh", ""), "mesh")
        stages_l = _list(d, "stages", "")
        virtual = _int(d, "virtual_stages", "", required=False, minimum=1) or 1
        listed = [Stage.from_dict(s, f"stages[{i}]") for i, s in enumerate(stages_l)]
        alts_l = _list(d, "alternatives", "", required=False) or []
        r = cls(model=_str(d, "model", ""),
                mode=_str(d, "mode", "", choices=MODES, lower=True),
                precision=_str(d, "precision", "", choices=PRECISIONS, lower=True),
                world_size=_int(d, "world_size", "", minimum=1),
                mesh=mesh,
                zero_stage=_int(d, "zero_stage", "", choices=ZERO_STAGES),
                micro_batch_size=_int(d, "micro_batch_size", "", minimum=1),
                num_micro_batches=_int(d, "num_micro_batches", "", minimum=1),
                recompute=_str(d, "recompute", "", choices=RECOMPUTE, lower=True),
                schedule=_str(d, "schedule", "", lower=True),
                stages=listed,
                predicted=Predicted.from_dict(_obj(d, "predicted", ""), "predicted"),
                search_time_s=_float(d, "search_time_s", "", required=False),
                alternatives=[Alternative.from_dict(a, f"alternatives[{i}]")
                              for i, a in enumerate(alts_l)],
                device_memory_bytes=_device_memory(d),
                cluster=_cluster_name(d),
                device=_device_name(d),
                parameters=_bytes(d, "parameters", "", required=False),
                search=_obj(d, "search", "", required=False) or {},
                stage_orders=_stage_orders(d),
                extra=_extra(d, cls.KNOWN),
                raw=d)
        r.placement_summary, r.stage_nodes = _placement(d)
        r.virtual_stages, r.chunk_stages = virtual, listed
        if virtual > 1:
            r._check_chunks()
            r.stages = _fold_chunks(listed, mesh.pp)
        r._check_relations()
        return r

    def _check_chunks(self):
        """With virtual stages: one entry per virtual stage, in pipeline order."""
        pp, v = self.mesh.pp, self.virtual_stages
        if pp < 2:
            raise PlanReportError(f"virtual_stages: {v} model chunks per stage, but "
                                  f"mesh.pp is {pp}: no pipeline")
        if len(self.chunk_stages) != pp * v:
            raise PlanReportError(f"stages: {len(self.chunk_stages)} entries but mesh.pp "
                                  f"x virtual_stages is {pp} x {v} = {pp * v}")
        for k, s in enumerate(self.chunk_stages):
            want = (k % pp, k // pp)
            if (s.stage, s.chunk) != want:
                raise PlanReportError(f"stages[{k}]: stage {s.stage}, chunk {s.chunk}; "
                                      f"virtual stage {k} is chunk {want[1]} of stage "
                                      f"{want[0]}")

    def _check_relations(self):
        """Hard errors for contradictions; warnings for sums that disagree a little."""
        if self.mesh.size != self.world_size:
            raise PlanReportError(f"mesh: dp*tp*pp = {self.mesh} = {self.mesh.size} "
                                  f"but world_size is {self.world_size}")
        if self.stages:
            if len(self.stages) != self.mesh.pp:
                raise PlanReportError(f"stages: {len(self.stages)} entries but mesh.pp is "
                                      f"{self.mesh.pp}")
            for i, s in enumerate(self.stages):
                if s.stage != i:
                    raise PlanReportError(f"stages[{i}].stage: expected {i}, got {s.stage}")
        if self.stage_orders is not None:
            self._check_stage_orders()
        if self.stage_nodes is not None and len(self.stage_nodes) != self.mesh.pp:
            raise PlanReportError(f"placement.stages: {len(self.stage_nodes)} entries but "
                                  f"mesh.pp is {self.mesh.pp}")
        if self.mode == "infer" and self.mesh.pp > 1 and self.schedule == "1f1b":
            self.warnings.append("schedule is 1f1b in infer mode (forward only): "
                                 "drawn as a forward-only pipeline")
        p = self.predicted
        bd = p.step_time_breakdown_s
        if bd and p.step_time_s:
            total = sum(bd.values())
            if abs(total - p.step_time_s) > SUM_TOLERANCE * p.step_time_s:
                self.warnings.append(
                    f"step_time_breakdown_s sums to {total:.4g} s but step_time_s is "
                    f"{p.step_time_s:.4g} s")
        mb = p.memory_breakdown_bytes
        if mb and p.memory_per_gpu_bytes:
            total = sum(mb.values())
            if abs(total - p.memory_per_gpu_bytes) > SUM_TOLERANCE * p.memory_per_gpu_bytes:
                self.warnings.append(
                    f"memory_breakdown_bytes sums to {total / 2**30:.2f} GiB but "
                    f"memory_per_gpu_bytes is {p.memory_per_gpu_bytes / 2**30:.2f} GiB")
        if self.device_memory_bytes and p.memory_per_gpu_bytes and \
                p.memory_per_gpu_bytes > self.device_memory_bytes:
            self.warnings.append(
                f"the chosen plan needs {p.memory_per_gpu_bytes / 2**30:.1f} GiB per GPU, "
                f"more than the device's {self.device_memory_bytes / 2**30:.1f} GiB")
        for key in ("forward_s", "seconds_per_micro_batch"):
            given = [getattr(s, key) is not None for s in self.stages]
            if any(given) and not all(given):
                self.warnings.append(f"only some stages give {key}; it is ignored")

    def _check_stage_orders(self):
        """One order per stage; each runs every micro-batch's forward once and, in train
        mode, its backward once after it (in infer mode none)."""
        orders, m = self.stage_orders, self.num_micro_batches
        if len(orders) != self.mesh.pp:
            raise PlanReportError(f"stage_orders: {len(orders)} entries but mesh.pp is "
                                  f"{self.mesh.pp}")
        train = self.mode == "train"
        v = self.virtual_stages
        # A step's name as the report spells it: F3, or F3.1 with chunks.
        name = (lambda k, j, c: f"{k}{j}.{c}") if v > 1 else (lambda k, j, c: f"{k}{j}")
        for i, order in enumerate(orders):
            where = f"stage_orders[{i}]"
            seen = set()
            for step in order:
                kind, j, c = step_parts(step)
                if (len(step) > 2) != (v > 1) or c >= v:
                    raise PlanReportError(
                        f"{where}: step {format_order([step])}, but virtual_stages is {v}"
                        f" ({'each step names its chunk' if v > 1 else 'no chunks'})")
                if j >= m:
                    raise PlanReportError(f"{where}: micro-batch {j} but num_micro_batches "
                                          f"is {m}")
                if (kind, j, c) in seen:
                    raise PlanReportError(f"{where}: {name(kind, j, c)} runs twice")
                if kind == BACKWARD and not train:
                    raise PlanReportError(f"{where}: a backward ({name(kind, j, c)}) in "
                                          f"infer mode")
                if kind == BACKWARD and (FORWARD, j, c) not in seen:
                    raise PlanReportError(f"{where}: {name(kind, j, c)} before "
                                          f"{name(FORWARD, j, c)}")
                seen.add((kind, j, c))
            kinds = (FORWARD, BACKWARD) if train else (FORWARD,)
            missing = [name(k, j, c) for k in kinds for c in range(v) for j in range(m)
                       if (k, j, c) not in seen]
            if missing:
                raise PlanReportError(f"{where}: {', '.join(missing[:4])}"
                                      f"{', ...' if len(missing) > 4 else ''} never "
                                      f"run{'s' if len(missing) == 1 else ''}")


def _stage_orders(d):
    """stage_orders parsed, [[(kind, mb), ...] per stage], or None when the report has
    none (written before the planner listed them)."""
    orders = _list(d, "stage_orders", "", required=False)
    if orders is None:
        return None
    out = []
    for i, text in enumerate(orders):
        try:
            out.append(parse_order(text))
        except ValueError as e:
            raise PlanReportError(f"stage_orders[{i}]: {e}") from None
    return out


def _placement(d):
    """(summary, [(first_node, last_node) per stage]) from the optional "placement"
    object; (None, None) without it."""
    pl = _obj(d, "placement", "", required=False)
    if pl is None:
        return None, None
    summary = pl.get("summary")
    if summary is not None and not isinstance(summary, str):
        raise PlanReportError(f"placement.summary: expected a string, got {summary!r}")
    nodes = None
    stages = _list(pl, "stages", "placement", required=False)
    if stages is not None:
        nodes = []
        for i, st in enumerate(stages):
            where = f"placement.stages[{i}]"
            if not isinstance(st, dict):
                raise PlanReportError(f"{where}: expected an object, got {st!r}")
            first = _int(st, "first_node", where, minimum=0)
            last = _int(st, "last_node", where, minimum=first)
            nodes.append((first, last))
    return summary, nodes


def _cluster_name(d):
    c = d.get("cluster")
    if isinstance(c, str):
        return c
    if isinstance(c, dict) and isinstance(c.get("name"), str):
        return c["name"]
    return None


def _device_name(d):
    v = d.get("device")
    if isinstance(v, str):
        return v
    if isinstance(v, dict) and isinstance(v.get("name"), str):
        return v["name"]
    c = d.get("cluster")
    if isinstance(c, dict):
        g = c.get("gpu")
        if isinstance(g, str):
            return g
        if isinstance(g, dict) and isinstance(g.get("name"), str):
            return g["name"]
    return None


def _device_memory(d):
    """device_memory_bytes from wherever the report puts it, or None."""
    v = _bytes(d, "device_memory_bytes", "", required=False)
    if v:
        return v
    pred = d.get("predicted")
    if isinstance(pred, dict):
        v = _bytes(pred, "device_memory_bytes", "predicted", required=False)
        if v:
            return v
    cluster = d.get("cluster")
    if isinstance(cluster, dict):
        v = _bytes(cluster, "device_memory_bytes", "cluster", required=False)
        if v:
            return v
        gpu = cluster.get("gpu")
        if isinstance(gpu, dict):
            gib = _float(gpu, "memory_gib", "cluster.gpu", required=False)
            if gib:
                return int(round(gib * 2**30))
    return None


def from_dict(d):
    """Validates a parsed report; returns a PlanReport or raises PlanReportError."""
    return PlanReport.from_dict(d)


def loads(text):
    try:
        d = json.loads(text)
    except json.JSONDecodeError as e:
        raise PlanReportError(f"not valid JSON: {e}") from None
    return from_dict(d)


def load(path):
    """Reads and validates a report file; errors name the file and the field."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise PlanReportError(f"{path}: {e.strerror}") from None
    try:
        return loads(text)
    except PlanReportError as e:
        raise PlanReportError(f"{path}: {e}") from None


def summary(r):
    """A few human-readable lines about a report."""
    p = r.predicted
    lines = [
        f"model {r.model}: {r.mode}, {r.precision}, {r.world_size} GPUs",
        f"mesh dp\u00d7tp\u00d7pp = {r.mesh}, ZeRO {r.zero_stage}, "
        f"{r.num_micro_batches} micro-batches of {r.micro_batch_size}, "
        f"recompute {r.recompute}, schedule {r.schedule}",
        f"step {p.step_time_s:.4g} s, {p.tokens_per_s:,.0f} tokens/s, "
        f"{p.tflops_per_gpu:.1f} TFLOP/s per GPU, MFU {100 * p.mfu:.1f}%, "
        f"{p.memory_per_gpu_bytes / 2**30:.1f} GiB per GPU",
        f"{len(r.alternatives)} alternatives" +
        (f", searched in {r.search_time_s:.3g} s" if r.search_time_s is not None else ""),
    ]
    lines += [f"warning: {w}" for w in r.warnings]
    return "\n".join(lines)


def main(argv=None):
    import argparse
    ap = argparse.ArgumentParser(description="Validate an autopar plan report (JSON).")
    ap.add_argument("report", help="the file written by autopar-compile --report-json")
    args = ap.parse_args(argv)
    try:
        r = load(args.report)
    except PlanReportError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(summary(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
