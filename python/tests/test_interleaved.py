"""The plan report of an interleaved pipeline (virtual stages) read, simulated and drawn.

python/tests/data/plan_interleaved.json is the planner's report for a 4-layer GPT on one
DGX H100 node, dp 1 x tp 4 x pp 2 with 2 model chunks per stage (`autopar-compile
--virtual-stages 2`), 16 micro-batches: its `stages` list the 4 virtual stages and its
`stage_orders` name each step's chunk ("F0.1").
"""
import copy
import json
import os
import unittest

from autopar import draw, plan, schedule

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
INTERLEAVED = os.path.join(DATA, "plan_interleaved.json")


def load_json(path):
    with open(path) as f:
        return json.load(f)


class ParseChunks(unittest.TestCase):
    def test_round_trip(self):
        text = "F0.0 F1.0 F0.1 B0.1 B0.0"
        order = schedule.parse_order(text)
        self.assertEqual(order, [("F", 0, 0), ("F", 1, 0), ("F", 0, 1), ("B", 0, 1),
                                 ("B", 0, 0)])
        self.assertEqual(schedule.format_order(order), text)
        self.assertEqual(schedule.step_parts(("F", 3)), ("F", 3, 0))
        self.assertEqual(schedule.step_parts(("B", 3, 2)), ("B", 3, 2))

    def test_rejects_malformed_chunks(self):
        for bad in ("F0.", "F0.x", "F0.1.2", "F.1", "F0.-1"):
            with self.subTest(bad=bad), self.assertRaises(ValueError):
                schedule.parse_order(bad)


class LoadInterleaved(unittest.TestCase):
    def test_stages_fold_their_chunks(self):
        r = plan.load(INTERLEAVED)
        self.assertEqual(r.virtual_stages, 2)
        self.assertEqual(len(r.chunk_stages), 4)
        self.assertEqual([(s.stage, s.chunk) for s in r.chunk_stages],
                         [(0, 0), (1, 0), (0, 1), (1, 1)])
        # One Stage per pipeline stage: its chunks' layers, time summed, memory its own.
        self.assertEqual(len(r.stages), 2)
        for s in range(2):
            chunks = r.chunk_stages[s::2]
            self.assertAlmostEqual(r.stages[s].seconds_per_micro_batch,
                                   sum(c.seconds_per_micro_batch for c in chunks))
            self.assertEqual(r.stages[s].layers, ", ".join(c.layers for c in chunks))
            self.assertEqual(r.stages[s].memory_bytes, chunks[0].memory_bytes)
        self.assertEqual(r.stage_orders[0][:3], [("F", 0, 0), ("F", 1, 0), ("F", 0, 1)])
        self.assertEqual(r.warnings, [])

    def test_contradictions_are_errors(self):
        d = load_json(INTERLEAVED)
        cases = []
        bad = copy.deepcopy(d)
        bad["stages"].pop()
        cases.append((bad, "stages: 3 entries but mesh.pp x virtual_stages is 2 x 2 = 4"))
        bad = copy.deepcopy(d)
        bad["stages"][1], bad["stages"][2] = bad["stages"][2], bad["stages"][1]
        cases.append((bad, "stages[1]: stage 0, chunk 1; virtual stage 1 is chunk 0 of "
                           "stage 1"))
        bad = copy.deepcopy(d)
        bad["stage_orders"][0] = bad["stage_orders"][0].replace("F0.0", "F0", 1)
        cases.append((bad, "stage_orders[0]: step F0, but virtual_stages is 2 (each "
                           "step names its chunk)"))
        bad = copy.deepcopy(d)
        bad["stage_orders"][1] = bad["stage_orders"][1].replace(" B15.0", "")
        cases.append((bad, "stage_orders[1]: B15.0 never runs"))
        bad = copy.deepcopy(d)
        bad["mesh"] = {"dp": 2, "tp": 4, "pp": 1}
        cases.append((bad, "virtual_stages: 2 model chunks per stage, but mesh.pp is 1"))
        for report, message in cases:
            with self.subTest(message=message):
                with self.assertRaises(plan.PlanReportError) as e:
                    plan.PlanReport.from_dict(report)
                self.assertIn(message, str(e.exception))


class SimulateInterleaved(unittest.TestCase):
    def test_bubble_shrinks_by_the_chunks(self):
        # Equal chunks, forward 0.5 and backward 1 each: a stage works 3 per
        # micro-batch. 1F1B takes (m + p - 1) x 3; interleaved over v chunks
        # m x 3 + (p - 1) x 3 / v (Narayanan et al., SC 2021, sec. 2.2).
        r = plan.load(INTERLEAVED)
        m, p, v = r.num_micro_batches, r.mesh.pp, r.virtual_stages
        blocks = schedule.simulate(r.stage_orders, [0.5] * (p * v), [1.0] * (p * v))
        self.assertAlmostEqual(max(b.end for b in blocks), m * 3 + (p - 1) * 3 / v)
        self.assertEqual({b.chunk for b in blocks}, {0, 1})
        # The report's orders need a time per virtual stage.
        with self.assertRaisesRegex(ValueError, "2 stage orders of 2 chunk\\(s\\) "
                                                "\\(4 virtual stages\\)"):
            schedule.simulate(r.stage_orders, [1.0] * p, [1.0] * p)

    def test_page_draws_the_chunks(self):
        r = plan.load(INTERLEAVED)
        tl = draw.build_timeline(r)
        self.assertEqual(tl.num_stages, 2)
        self.assertEqual(len(tl.forward_s), 4)
        page = draw.render_html(r)
        self.assertIn("interleaved 1F1B over 2 model chunks per stage", page)
        self.assertIn("through chunk 1", page)


if __name__ == "__main__":
    unittest.main()
