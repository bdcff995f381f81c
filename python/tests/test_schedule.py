"""autopar.schedule: the report's stage orders read and simulated.

The orders are not defined in Python: the planner writes them into the plan report
(``stage_orders``, from the runtime's pipelineSchedule() in runtime/lib/PipelineSchedule.cpp,
held to Megatron-LM's orders by unittests/Planner/ScheduleAgreementTest.cpp).  The orders
used here are such reports' (python/tests/data: plan_*.json and stage_orders.json, small
pipelines as pipelineStageOrder() writes them)."""
import json
import os
import unittest

from autopar import plan, schedule

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")


def report_orders(kind, p, m, mode="train"):
    """The stage_orders the planner writes for this pipeline, parsed."""
    with open(os.path.join(DATA, "stage_orders.json")) as f:
        table = json.load(f)
    return [schedule.parse_order(t) for t in table[f"{kind} p{p} m{m} {mode}"]]


class ParseOrder(unittest.TestCase):
    def test_round_trip(self):
        text = "F0 F1 B0 F2 B1 B2"
        order = schedule.parse_order(text)
        self.assertEqual(order, [("F", 0), ("F", 1), ("B", 0), ("F", 2), ("B", 1), ("B", 2)])
        self.assertEqual(schedule.format_order(order), text)
        self.assertEqual(schedule.parse_order("F10  B10"), [("F", 10), ("B", 10)])
        self.assertEqual(schedule.parse_order(""), [])

    def test_rejects_what_the_planner_never_writes(self):
        for bad in ("X0", "F", "F-1", "Fa", "f0", "F\u00b2", "F0,F1", None, 3):
            with self.subTest(bad=bad), self.assertRaises(ValueError):
                schedule.parse_order(bad)

    def test_names(self):
        # scheduleKindName(); the plan report accepts the same names.
        self.assertEqual(schedule.SCHEDULES, ("gpipe", "1f1b"))
        self.assertEqual(plan.KNOWN_SCHEDULES, schedule.SCHEDULES)


class FromTheReportsOrders(unittest.TestCase):
    def test_activations_in_flight(self):
        # microBatchesInFlight(): m for GPipe, p - stage for 1F1B (m >= p).
        p, m = 4, 8
        for order in report_orders("gpipe", p, m):
            self.assertEqual(schedule.max_in_flight(order), m)
        for s, order in enumerate(report_orders("1f1b", p, m)):
            self.assertEqual(schedule.max_in_flight(order), p - s)
        # Fewer micro-batches than stages: min(m, p - stage).
        for s, order in enumerate(report_orders("1f1b", 5, 3)):
            self.assertEqual(schedule.max_in_flight(order), min(3, 5 - s))
        self.assertEqual(schedule.max_in_flight(schedule.parse_order("F0 F1 B0 F2 B1 B2")), 2)
        self.assertEqual(schedule.max_in_flight([]), 0)

    def test_forward_only(self):
        for order in report_orders("1f1b", 3, 4, "infer"):
            self.assertEqual(schedule.format_order(order), "F0 F1 F2 F3")
            self.assertEqual(schedule.max_in_flight(order), 4)

    def test_simulate_checks_its_inputs(self):
        orders = report_orders("gpipe", 4, 8)
        with self.assertRaises(ValueError):
            schedule.simulate(orders, [1.0] * 3, [2.0] * 4)
        # Each stage's order is sound on its own, but stage 0 waits for stage 1's B0,
        # which comes after stage 1's F1, which waits for stage 0's F1, after its B0.
        stuck = [schedule.parse_order("F0 B0 F1 B1"), schedule.parse_order("F0 F1 B0 B1")]
        with self.assertRaises(ValueError) as cm:
            schedule.simulate(stuck, [1.0, 1.0], [2.0, 2.0])
        self.assertIn("stage 0 at B0", str(cm.exception))


if __name__ == "__main__":
    unittest.main()
