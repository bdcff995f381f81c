"""Tests of autopar.plan (report loading/validation) and autopar.draw (the plan picture).

    PYTHONPATH=python python3 -m unittest discover -s python/tests -t python
"""

import contextlib
import copy
import io
import json
import os
import re
import tempfile
import unittest
import xml.etree.ElementTree as ET

from autopar import draw, plan

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
GPT3 = os.path.join(DATA, "plan_gpt3_175b.json")          # 1F1B, balanced, pp 8
GPIPE = os.path.join(DATA, "plan_gpipe_stages.json")      # GPipe, per-stage times/memory
# stage_orders as the planner writes them, for small pipelines ("1f1b p4 m8 train").
STAGE_ORDERS = os.path.join(DATA, "stage_orders.json")


def load_json(path):
    with open(path) as f:
        return json.load(f)


def report_orders(kind, p, m, mode="train"):
    """The stage_orders the planner writes for this pipeline, parsed."""
    return [draw.parse_order(t) for t in load_json(STAGE_ORDERS)[f"{kind} p{p} m{m} {mode}"]]


def forwards_only(m):
    """One stage's order in inference, as the planner writes it: every forward in order."""
    return " ".join(f"F{j}" for j in range(m))


def with_placement(d):
    """The GPT-3 sample (dp 2, tp 8, pp 8 on 16 DGX nodes) with the placement the planner
    writes: each tp group is a node, each stage's two dp replicas two nodes."""
    d = copy.deepcopy(d)
    d["placement"] = {
        "rank_order": ["tp", "dp", "pp"], "gpus_per_node": 8, "nodes": 16,
        "tp": {"size": 8, "groups": 16, "within_node": True, "min_nodes_per_group": 1,
               "max_nodes_per_group": 1, "groups_across_nodes": 0},
        "stages": [{"stage": s, "first_node": 2 * s, "last_node": 2 * s + 1}
                   for s in range(8)],
        "summary": "tp=8 inside a node; dp=2 across 2 nodes; pp=8 across 8 nodes: "
                   "stage 0 on nodes 0-1, stage 1 on nodes 2-3, ..., stage 7 on nodes 14-15"}
    return d


class LoadTest(unittest.TestCase):
    def test_sample_fields(self):
        r = plan.load(GPT3)
        self.assertEqual(r.model, "gpt3-175b.onnx")
        self.assertEqual((r.mode, r.precision, r.world_size), ("train", "bf16", 128))
        self.assertEqual((r.mesh.dp, r.mesh.tp, r.mesh.pp), (2, 8, 8))
        self.assertEqual(str(r.mesh), "2\u00d78\u00d78")
        self.assertEqual((r.zero_stage, r.micro_batch_size, r.num_micro_batches), (1, 1, 32))
        self.assertEqual((r.recompute, r.schedule), ("selective", "1f1b"))
        self.assertEqual(r.global_batch_size, 64)
        self.assertEqual(len(r.stages), 8)
        self.assertEqual(r.stages[1].layers, "12-23")
        self.assertIsNone(r.stages[0].forward_s)
        self.assertAlmostEqual(r.predicted.mfu, 0.4546, places=4)
        self.assertEqual(set(r.predicted.step_time_breakdown_s), set(plan.STEP_TIME_KEYS))
        self.assertEqual(set(r.predicted.memory_breakdown_bytes), set(plan.MEMORY_KEYS))
        self.assertEqual(r.device_memory_bytes, 80 * 2**30)
        self.assertEqual(len(r.alternatives), 4)
        self.assertEqual(r.alternatives[0].mesh.pp, 4)
        self.assertIn("does not fit", r.alternatives[0].why_not)
        self.assertEqual(r.search_time_s, 0.41)
        self.assertEqual(r.warnings, [])
        # What the planner writes besides the contract (PlanReport.cpp).
        self.assertEqual((r.cluster, r.device), ("dgx-a100-80gb:16", "a100-80gb"))
        self.assertEqual(r.parameters, 174_604_259_328)
        self.assertEqual(r.search["candidates_evaluated"], 1872)
        self.assertIs(r.predicted.fits, True)
        self.assertIs(r.alternatives[0].predicted.fits, False)
        self.assertEqual(r.alternatives[0].num_micro_batches, 16)
        self.assertEqual(r.extra["global_batch"], 64)
        # Byte counts may be floats (the planner computes in double); they are rounded.
        self.assertIsInstance(r.predicted.memory_per_gpu_bytes, int)
        self.assertIsInstance(r.predicted.memory_breakdown_bytes["activations"], int)
        # Each stage's order (1F1B, 8 stages, 32 micro-batches), parsed.
        self.assertEqual(len(r.stage_orders), 8)
        self.assertEqual(r.stage_orders[0][:10], [("F", j) for j in range(8)] +
                         [("B", 0), ("F", 8)])
        self.assertEqual(r.stage_orders[7][:4], [("F", 0), ("B", 0), ("F", 1), ("B", 1)])
        self.assertNotIn("stage_orders", r.extra)

    def test_report_without_stage_orders(self):
        # Written before the planner listed the orders: loads, with none.
        d = load_json(GPT3)
        del d["stage_orders"]
        r = plan.from_dict(d)
        self.assertIsNone(r.stage_orders)
        self.assertEqual(r.warnings, [])

    def test_placement(self):
        r = plan.from_dict(with_placement(load_json(GPT3)))
        self.assertTrue(r.placement_summary.startswith("tp=8 inside a node; dp=2 across"))
        self.assertEqual(r.stage_nodes[:2], [(0, 1), (2, 3)])
        self.assertNotIn("placement", r.extra)
        # Reports written before the planner placed ranks have none.
        self.assertIsNone(plan.load(GPT3).stage_nodes)
        self.assertIsNone(plan.load(GPT3).placement_summary)
        bad = with_placement(load_json(GPT3))
        bad["placement"]["stages"][3]["last_node"] = 5
        with self.assertRaisesRegex(plan.PlanReportError,
                                    r"placement\.stages\[3\]\.last_node: must be >= 6"):
            plan.from_dict(bad)
        bad = with_placement(load_json(GPT3))
        del bad["placement"]["stages"][7]
        with self.assertRaisesRegex(plan.PlanReportError,
                                    r"placement\.stages: 7 entries but mesh\.pp is 8"):
            plan.from_dict(bad)

    def test_extra_fields_and_cluster_memory(self):
        r = plan.load(GPIPE)
        self.assertEqual(r.schedule, "gpipe")                      # "GPipe" in the file
        self.assertEqual(r.stages[0].extra, {"cost_note": "extra field, tolerated"})
        self.assertEqual(r.predicted.extra, {"binding_constraint": "memory of stage 3"})
        self.assertEqual((r.cluster, r.device), ("pcie-4090x8:2", "rtx-4090"))
        self.assertEqual(r.device_memory_bytes, 24 * 2**30)        # cluster.gpu.memory_gib
        self.assertEqual(r.stages[3].backward_s, 0.048)
        self.assertEqual(r.stages[3].memory_breakdown_bytes["activations"], int(9.5 * 2**30))
        alt = r.alternatives[2]
        self.assertIsNone(alt.predicted.step_time_s)               # partial predictions
        self.assertEqual(alt.why_not, "does not fit <even> with ZeRO-3 & full recomputation")

    def test_interfaces_example_shape(self):
        # The example of docs/interfaces.md (with its placeholder alternative) loads.
        d = load_json(GPT3)
        d["alternatives"] = [{"mesh": {}, "zero_stage": 0, "micro_batch_size": 1,
                              "recompute": "none", "predicted": {}, "why_not": "\u2026"}]
        r = plan.from_dict(d)
        self.assertIsNone(r.alternatives[0].mesh)

    def assertInvalid(self, d, *fragments):
        with self.assertRaises(plan.PlanReportError) as cm:
            plan.from_dict(d)
        for f in fragments:
            self.assertIn(f, str(cm.exception))

    def test_errors_name_the_field(self):
        base = load_json(GPT3)
        cases = [
            (lambda d: d.pop("mesh"), ["mesh", "missing"]),
            (lambda d: d["mesh"].update(dp="2"), ["mesh.dp", "integer"]),
            (lambda d: d["mesh"].update(tp=True), ["mesh.tp", "integer"]),
            (lambda d: d["mesh"].update(dp=0), ["mesh.dp", ">= 1"]),
            (lambda d: d.update(world_size=64), ["world_size", "128"]),
            (lambda d: d.update(mode="training"), ["mode", "train, infer"]),
            (lambda d: d.update(zero_stage=4), ["zero_stage"]),
            (lambda d: d.update(recompute="some"), ["recompute"]),
            (lambda d: d["predicted"].update(mfu=1.5), ["predicted.mfu", "<= 1"]),
            (lambda d: d["predicted"].update(step_time_s=-1), ["predicted.step_time_s"]),
            (lambda d: d["predicted"]["memory_breakdown_bytes"].update(activations="x"),
             ["predicted.memory_breakdown_bytes.activations"]),
            (lambda d: d["stages"].pop(), ["stages", "mesh.pp"]),
            (lambda d: d["stages"][2].update(stage=5), ["stages[2].stage"]),
            (lambda d: d["alternatives"][1]["mesh"].update(pp="x"), ["alternatives[1].mesh.pp"]),
            (lambda d: d.update(alternatives={}), ["alternatives", "list"]),
            (lambda d: d.update(stage_orders="F0 B0"), ["stage_orders", "list"]),
            (lambda d: d["stage_orders"].pop(), ["stage_orders", "7 entries", "mesh.pp"]),
            (lambda d: d["stage_orders"].__setitem__(1, "F0 X1"), ["stage_orders[1]", "'X1'"]),
            (lambda d: d["stage_orders"].__setitem__(2, 5), ["stage_orders[2]", "string"]),
            (lambda d: d["stage_orders"].__setitem__(3, d["stage_orders"][3] + " F32"),
             ["stage_orders[3]", "micro-batch 32", "num_micro_batches is 32"]),
            (lambda d: d["stage_orders"].__setitem__(4, d["stage_orders"][4] + " B5"),
             ["stage_orders[4]", "B5 runs twice"]),
            (lambda d: d["stage_orders"].__setitem__(5, "B0 " + d["stage_orders"][5]),
             ["stage_orders[5]", "B0 before F0"]),
            (lambda d: d["stage_orders"].__setitem__(6, d["stage_orders"][6][:-4]),
             ["stage_orders[6]", "B31 never runs"]),
            (lambda d: d.update(mode="infer"), ["stage_orders[0]", "backward", "infer mode"]),
        ]
        for change, fragments in cases:
            d = copy.deepcopy(base)
            change(d)
            with self.subTest(fragments=fragments):
                self.assertInvalid(d, *fragments)

    def test_not_json_and_not_object(self):
        with self.assertRaises(plan.PlanReportError) as cm:
            plan.loads("{not json")
        self.assertIn("not valid JSON", str(cm.exception))
        with self.assertRaises(plan.PlanReportError):
            plan.loads("[1, 2]")
        with tempfile.TemporaryDirectory() as d:
            bad = os.path.join(d, "r.json")
            with open(bad, "w") as f:
                f.write('{"model": 3}')
            with self.assertRaises(plan.PlanReportError) as cm:
                plan.load(bad)
            self.assertIn(bad, str(cm.exception))
            with self.assertRaises(plan.PlanReportError):
                plan.load(os.path.join(d, "absent.json"))

    def test_warnings_for_sums(self):
        d = load_json(GPT3)
        d["predicted"]["step_time_s"] *= 1.5
        d["predicted"]["memory_per_gpu_bytes"] = 100 * 2**30
        r = plan.from_dict(d)
        text = " ".join(r.warnings)
        self.assertIn("step_time_breakdown_s sums to", text)
        self.assertIn("memory_breakdown_bytes sums to", text)
        self.assertIn("more than the device", text)

    def test_cli(self):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            self.assertEqual(plan.main([GPT3]), 0)
        self.assertIn("dp\u00d7tp\u00d7pp = 2\u00d78\u00d78", out.getvalue())
        err = io.StringIO()
        with tempfile.TemporaryDirectory() as d, contextlib.redirect_stderr(err):
            p = os.path.join(d, "r.json")
            with open(p, "w") as f:
                f.write("{}")
            self.assertEqual(plan.main([p]), 1)
        self.assertIn("error:", err.getvalue())


class ScheduleTest(unittest.TestCase):
    def check_dependencies(self, blocks, p, m, train=True):
        end = {(b.kind, b.stage, b.micro_batch): b.end for b in blocks}
        self.assertEqual(len(blocks), p * m * (2 if train else 1))
        for b in blocks:
            if b.kind == draw.FORWARD and b.stage > 0:
                self.assertGreaterEqual(b.start, end[("F", b.stage - 1, b.micro_batch)] - 1e-12)
            if b.kind == draw.BACKWARD:
                dep = ("B", b.stage + 1, b.micro_batch) if b.stage < p - 1 else \
                    ("F", b.stage, b.micro_batch)
                self.assertGreaterEqual(b.start, end[dep] - 1e-12)
        for s in range(p):  # one thing at a time per stage
            mine = sorted((b for b in blocks if b.stage == s), key=lambda b: b.start)
            for a, b in zip(mine, mine[1:]):
                self.assertGreaterEqual(b.start, a.end - 1e-12)

    def test_balanced_makespan(self):
        # Both schedules take (m + p - 1) (t_f + t_b): bubble (p - 1) / m of compute.
        for sched in ("gpipe", "1f1b"):
            for p, m in ((1, 1), (1, 4), (4, 1), (4, 8), (8, 32), (5, 3)):
                with self.subTest(sched=sched, p=p, m=m):
                    blocks = draw.simulate(report_orders(sched, p, m), [1.0] * p, [2.0] * p)
                    self.check_dependencies(blocks, p, m)
                    self.assertAlmostEqual(max(b.end for b in blocks), (m + p - 1) * 3.0)

    def test_activations_in_flight(self):
        # Along the simulated blocks as along the orders: m for GPipe, p - s for 1F1B.
        p, m = 4, 8
        for sched, expected in (("gpipe", lambda s: m), ("1f1b", lambda s: p - s)):
            orders = report_orders(sched, p, m)
            blocks = draw.simulate(orders, [1.0] * p, [2.0] * p)
            for s in range(p):
                ran = [(b.kind, b.micro_batch) for b in blocks if b.stage == s]
                self.assertEqual(ran, orders[s])
                self.assertEqual(draw.max_in_flight(ran), expected(s))

    def test_forward_only_and_unbalanced(self):
        blocks = draw.simulate(report_orders("1f1b", 3, 4, "infer"), [1.0, 3.0, 1.0],
                               [0, 0, 0])
        self.check_dependencies(blocks, 3, 4, train=False)
        # The slow middle stage sets the pace: 1 + 4 * 3 + 1.
        self.assertAlmostEqual(max(b.end for b in blocks), 14.0)

    def test_timeline_balanced_from_report(self):
        r = plan.load(GPT3)
        tl = draw.build_timeline(r)
        self.assertEqual(tl.source, "balanced")
        bd = r.predicted.step_time_breakdown_s
        per_mb = bd["compute"] / r.num_micro_batches
        self.assertAlmostEqual(tl.forward_s[0], per_mb / 3)
        self.assertAlmostEqual(tl.backward_s[0], 2 * per_mb / 3)
        self.assertAlmostEqual(tl.total_s, r.predicted.step_time_s, places=3)
        self.assertAlmostEqual(draw.idle_time(tl), bd["bubble"], places=3)
        self.assertEqual([k for k, _ in tl.tail], ["exposed_communication", "optimizer"])

    def test_timeline_full_recompute_ratio(self):
        d = load_json(GPT3)
        d["recompute"] = "full"
        tl = draw.build_timeline(plan.from_dict(d))
        self.assertAlmostEqual(tl.backward_s[0], 3 * tl.forward_s[0])

    def test_timeline_from_stage_times(self):
        r = plan.load(GPIPE)
        tl = draw.build_timeline(r)
        self.assertEqual(tl.source, "stages")
        self.assertEqual(tl.schedule, "gpipe")
        self.assertEqual(tl.forward_s, [0.010, 0.012, 0.012, 0.016])
        self.assertAlmostEqual(tl.total_s, r.predicted.step_time_s, places=6)
        self.assertAlmostEqual(draw.idle_time(tl), r.predicted.step_time_breakdown_s["bubble"],
                               places=6)
        idle = draw.stage_idle(tl)
        self.assertGreater(max(idle), min(idle))       # unbalanced stages

    def test_timeline_from_seconds_per_micro_batch(self):
        # The planner's per-stage field: forward + backward of one micro-batch.
        d = load_json(GPT3)
        per_mb = [0.15, 0.2, 0.2, 0.2, 0.2, 0.2, 0.2, 0.25]
        for s, t in zip(d["stages"], per_mb):
            s["seconds_per_micro_batch"] = t
        r = plan.from_dict(d)
        tl = draw.build_timeline(r)
        self.assertEqual(tl.source, "stages-per-mb")
        self.assertAlmostEqual(tl.forward_s[7], 0.25 / 3)
        self.assertAlmostEqual(tl.backward_s[7], 0.25 * 2 / 3)
        self.assertIn("seconds_per_micro_batch", draw.timeline_caption(r, tl))
        # A partial set is ignored, with a warning.
        del d["stages"][3]["seconds_per_micro_batch"]
        r = plan.from_dict(d)
        self.assertEqual(draw.build_timeline(r).source, "balanced")
        self.assertTrue(any("seconds_per_micro_batch" in w for w in r.warnings))

    def test_timeline_stage_totals_are_recognized(self):
        d = load_json(GPIPE)
        m = d["num_micro_batches"]
        for s in d["stages"]:
            s["forward_s"] *= m
            s["backward_s"] *= m
        tl = draw.build_timeline(plan.from_dict(d))
        self.assertEqual(tl.source, "stages-totals")
        self.assertAlmostEqual(tl.forward_s[0], 0.010)

    def test_timeline_runs_the_reports_orders(self):
        r = plan.load(GPT3)
        tl = draw.build_timeline(r)
        for s in range(r.mesh.pp):
            self.assertEqual([(b.kind, b.micro_batch) for b in tl.blocks if b.stage == s],
                             r.stage_orders[s])

    def test_unknown_schedule_drawn_from_stage_orders(self):
        # The name is only a name: the report's orders are drawn, whatever it is.
        d = load_json(GPT3)
        d["schedule"] = "interleaved-1f1b"
        r = plan.from_dict(d)
        tl = draw.build_timeline(r)
        self.assertEqual(tl.schedule, "interleaved-1f1b")
        self.assertEqual(tl.blocks, draw.build_timeline(plan.load(GPT3)).blocks)
        self.assertIn("interleaved-1f1b", draw.timeline_caption(r, tl))

    def test_no_stage_orders_no_timeline(self):
        d = load_json(GPT3)
        del d["stage_orders"]
        self.assertIsNone(draw.build_timeline(plan.from_dict(d)))

    def test_orders_that_cannot_run(self):
        # Sound stage by stage, but stage 0 waits for stage 1's B0, which waits for
        # stage 0's F1: an error naming stage_orders, not a hang or a wrong picture.
        d = load_json(GPIPE)
        d["stage_orders"][0] = " ".join(f"F{j} B{j}" for j in range(8))
        r = plan.from_dict(d)
        with self.assertRaises(plan.PlanReportError) as cm:
            draw.build_timeline(r)
        self.assertIn("stage_orders", str(cm.exception))


def svg_elements(html_text):
    return re.findall(r"<svg\b.*?</svg>", html_text, flags=re.S)


class RenderTest(unittest.TestCase):
    def render(self, d):
        return draw.render_html(plan.from_dict(d) if isinstance(d, dict) else plan.load(d))

    def test_page_is_self_contained(self):
        for path in (GPT3, GPIPE):
            with self.subTest(path=os.path.basename(path)):
                page = self.render(path)
                self.assertTrue(page.startswith("<!DOCTYPE html>"))
                self.assertNotRegex(page, r"<script|<link|<img|\bsrc=|@import")
                urls = set(re.findall(r"https?://[^\s\"')]+", page))
                self.assertEqual(urls, {"http://www.w3.org/2000/svg"})
                svgs = svg_elements(page)
                self.assertEqual(len(svgs), 3)     # schedule, breakdown, memory
                for s in svgs:
                    ET.fromstring(s)                # well-formed XML

    def test_header_and_alternatives(self):
        page = self.render(GPT3)
        for text in ("2 \u00d7 8 \u00d7 8</b> = 128 GPUs", "ZeRO stage", "selective", "1F1B",
                     "dgx-a100-80gb:16 (a100-80gb)", "175B", "1,872 candidates",
                     "21.9% (bubble = 17.5% of the step)",
                     "7.56 s", "17,330", "45.5%", "410 ms", "global batch 64",
                     "does not fit: 93.4 GiB", "Assumption:", "stages are drawn balanced",
                     "device memory 80.0 GiB"):
            self.assertIn(text, page)
        self.assertEqual(page.count("<td>alt "), 4)
        # Forward and backward blocks for every micro-batch on every stage.
        self.assertEqual(len(re.findall(r"<title>stage \d+, forward of micro-batch", page)),
                         8 * 32)
        self.assertEqual(len(re.findall(r"<title>stage \d+, backward of micro-batch", page)),
                         8 * 32)

    def test_placement_in_header_stages_and_timeline(self):
        page = self.render(with_placement(load_json(GPT3)))
        self.assertIn("<th>Placement</th><td>tp=8 inside a node; dp=2 across 2 nodes", page)
        self.assertIn("<th>nodes</th>", page)
        self.assertIn("<td class=num>14-15</td>", page)
        # Each timeline row names its stage's nodes under the layers.
        self.assertIn(">layers 12-23, nodes 2-3</text>", page)
        plain = self.render(GPT3)
        self.assertNotIn("Placement", plain)
        self.assertNotIn("<th>nodes</th>", plain)

    def test_escaping_and_stage_memory(self):
        page = self.render(GPIPE)
        self.assertIn("does not fit &lt;even&gt; with ZeRO-3 &amp; full recomputation", page)
        self.assertNotIn("<even>", page)
        self.assertIn("Per-stage forward and backward times are the report", page)
        self.assertIn("per pipeline stage of the chosen plan", page)
        self.assertIn("device memory 24.0 GiB", page)
        self.assertNotIn("<b>Assumption:</b>", page)

    def test_no_device_memory_no_alternatives_infer(self):
        d = load_json(GPT3)
        del d["device_memory_bytes"]
        d.update(mode="infer", alternatives=[], stage_orders=[forwards_only(32)] * 8)
        page = self.render(d)
        self.assertNotIn("stroke-dasharray=\"6 4\"", page)     # no device line
        self.assertIn("no limit line is drawn", page)
        self.assertIn("lists no alternatives", page)
        self.assertIn("forward-only pipeline", page)
        self.assertNotIn("backward of micro-batch", page)

    def test_dense_pipeline_is_merged(self):
        d = load_json(GPT3)
        d.update(world_size=3072, mesh={"dp": 6, "tp": 8, "pp": 64}, num_micro_batches=512)
        d["stages"] = [{"stage": i, "layers": f"{2 * i}-{2 * i + 1}"} for i in range(64)]
        # GPipe's orders (every forward, then every backward), as the planner writes them.
        d.update(schedule="gpipe", stage_orders=[
            forwards_only(512) + " " + " ".join(f"B{j}" for j in range(512))] * 64)
        page = self.render(d)
        self.assertIn("too dense to draw one by one", page)
        self.assertLess(page.count("<rect"), 64 * 512)          # not one per block
        self.assertLess(len(page), 1_000_000)

    def test_report_without_stage_orders_says_why(self):
        d = load_json(GPT3)
        del d["stage_orders"]
        page = self.render(d)
        self.assertIn(draw.esc(draw.NO_STAGE_ORDERS), page)
        self.assertIn("<h2>Pipeline schedule</h2>", page)
        self.assertEqual(len(svg_elements(page)), 2)     # breakdown, memory
        self.assertNotIn("forward of micro-batch", page)
        self.assertIn("Step time breakdown", page)
        svg = draw.render_svg(plan.from_dict(d))
        ET.fromstring(svg)
        self.assertIn("Pipeline schedule: not drawn", svg)
        self.assertIn("Memory per GPU", svg)

    def test_warnings_are_shown(self):
        d = load_json(GPT3)
        d["predicted"]["step_time_s"] *= 2
        self.assertIn("Report inconsistencies", self.render(d))

    def test_cli_writes_html_and_svg(self):
        with tempfile.TemporaryDirectory() as d:
            html_path = os.path.join(d, "plan.html")
            svg_path = os.path.join(d, "plan.svg")
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                self.assertEqual(draw.main([GPIPE, "-o", html_path, "--svg", svg_path,
                                            "--title", "My <plan>"]), 0)
            with open(html_path, encoding="utf-8") as f:
                page = f.read()
            self.assertIn("<title>My &lt;plan&gt;</title>", page)
            root = ET.parse(svg_path).getroot()
            self.assertTrue(root.tag.endswith("svg"))
            with open(svg_path, encoding="utf-8") as f:
                svg = f.read()
            self.assertIn("Pipeline schedule (GPipe)", svg)
            self.assertIn("Memory per GPU", svg)
            # Invalid report: exit status 1, message on stderr, nothing written.
            bad = os.path.join(d, "bad.json")
            with open(bad, "w") as f:
                f.write('{"mesh": {"dp": 1}}')
            err = io.StringIO()
            with contextlib.redirect_stderr(err):
                self.assertEqual(draw.main([bad, "-o", os.path.join(d, "bad.html")]), 1)
            self.assertIn("error:", err.getvalue())
            self.assertFalse(os.path.exists(os.path.join(d, "bad.html")))
            # Stage orders that cannot run: the same, found while drawing.
            stuck = load_json(GPIPE)
            stuck["stage_orders"][0] = " ".join(f"F{j} B{j}" for j in range(8))
            with open(bad, "w") as f:
                json.dump(stuck, f)
            err = io.StringIO()
            with contextlib.redirect_stderr(err):
                self.assertEqual(draw.main([bad, "-o", os.path.join(d, "bad.html"),
                                            "--svg", os.path.join(d, "bad.svg")]), 1)
            self.assertIn("error:", err.getvalue())
            self.assertIn("stage_orders", err.getvalue())
            self.assertFalse(os.path.exists(os.path.join(d, "bad.html")))
            self.assertFalse(os.path.exists(os.path.join(d, "bad.svg")))

    def test_formatting_helpers(self):
        self.assertEqual(draw.fmt_time(7.5634), "7.56 s")
        self.assertEqual(draw.fmt_time(0.41), "410 ms")
        self.assertEqual(draw.fmt_gib(80 * 2**30), "80.0 GiB")
        self.assertEqual(draw.nice_step(7563, 8), 1000)
        self.assertEqual(draw.nice_step(678, 8), 100)
        self.assertEqual(draw.fmt_tick(2.5, 2.5), "2.5")


if __name__ == "__main__":
    unittest.main()
