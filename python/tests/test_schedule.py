"""autopar.schedule against the runtime's schedule: the cases of
unittests/Runtime/PipelineScheduleTest.cpp (pipelineSchedule() in
runtime/lib/PipelineSchedule.cpp), so that the two definitions stay in step."""
import unittest

from autopar import plan, schedule


def fmt(order):
    return " ".join(f"{kind}{mb}" for kind, mb in order)


class ScheduleMatchesRuntime(unittest.TestCase):
    def test_forward_only_is_every_forward_in_order(self):
        for kind in schedule.SCHEDULES:
            for stage in range(4):
                self.assertEqual(fmt(schedule.stage_order(kind, 4, 4, stage, train=False)),
                                 "F0 F1 F2 F3")

    def test_gpipe_runs_all_forwards_then_all_backwards(self):
        self.assertEqual(fmt(schedule.stage_order("gpipe", 2, 3, 0)), "F0 F1 F2 B0 B1 B2")

    def test_1f1b_warms_up_then_alternates(self):
        k = "1f1b"
        self.assertEqual(fmt(schedule.stage_order(k, 4, 6, 0)),
                         "F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5")
        self.assertEqual(fmt(schedule.stage_order(k, 4, 6, 2)),
                         "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 B5")
        self.assertEqual(fmt(schedule.stage_order(k, 4, 3, 3)), "F0 B0 F1 B1 F2 B2")
        self.assertEqual(fmt(schedule.stage_order(k, 4, 2, 0)), "F0 F1 B0 B1")

    def test_names(self):
        # scheduleKindName(); the plan report accepts the same names.
        self.assertEqual(schedule.SCHEDULES, ("gpipe", "1f1b"))
        self.assertEqual(plan.KNOWN_SCHEDULES, schedule.SCHEDULES)


if __name__ == "__main__":
    unittest.main()
