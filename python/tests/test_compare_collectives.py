"""compare.compare_collectives: the plan's predicted collectives against autopar-run's."""
import unittest

from autopar import compare

REPORT = {"predicted_collectives": {"tp": {"all_gather": {"calls": 2, "bus_bytes": 8448},
                                           "reduce_scatter": {"calls": 1, "bus_bytes": 256}}}}


def measured(tp, steps=1, world=True):
    stats = {"steps": steps, "collectives": {"tp": tp}}
    if world:  # the runtime's own traffic: never part of the plan
        stats["collectives"]["world"] = {"broadcast": {"calls": 1, "bus_bytes": 4096.0, "seconds": 1e-4}}
    return stats


class CompareCollectivesTest(unittest.TestCase):
    def test_equal_passes_and_world_is_ignored(self):
        tp = {"all_gather": {"calls": 2, "bus_bytes": 8448.0, "seconds": 1e-5},
              "reduce_scatter": {"calls": 1, "bus_bytes": 256.0, "seconds": 1e-5}}
        self.assertEqual(compare.compare_collectives(REPORT, measured(tp)), [])

    def test_steps_multiply_the_prediction(self):
        tp = {"all_gather": {"calls": 6, "bus_bytes": 3 * 8448.0, "seconds": 1e-5},
              "reduce_scatter": {"calls": 3, "bus_bytes": 3 * 256.0, "seconds": 1e-5}}
        self.assertEqual(compare.compare_collectives(REPORT, measured(tp, steps=3)), [])

    def test_different_bytes_calls_and_ops_are_reported(self):
        tp = {"all_gather": {"calls": 2, "bus_bytes": 8192.0, "seconds": 1e-5},
              "all_reduce": {"calls": 1, "bus_bytes": 512.0, "seconds": 1e-5}}
        problems = compare.compare_collectives(REPORT, measured(tp))
        self.assertEqual(len(problems), 3)
        self.assertIn("tp all_gather: predicted 2 calls, 8448 bus bytes; measured 2 calls, 8192", problems[0])
        self.assertIn("tp all_reduce: predicted 0 calls", problems[1])
        self.assertIn("tp reduce_scatter: predicted 1 calls, 256 bus bytes; measured 0 calls", problems[2])

    def test_report_without_prediction(self):
        self.assertIn("no 'predicted_collectives'", compare.compare_collectives({}, measured({}))[0])

    def test_describe(self):
        self.assertEqual(compare.describe_collectives(REPORT),
                         "tp all_gather 2x 8448 B, tp reduce_scatter 1x 256 B")
        self.assertEqual(compare.describe_collectives({"predicted_collectives": {}}), "none")


if __name__ == "__main__":
    unittest.main()
