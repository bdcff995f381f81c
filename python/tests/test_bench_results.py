"""bench/results.py: --write-results replaces a benchmark's current block and logs the run."""

import os
import shutil
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import results  # noqa: E402

TABLE = "| model | ms |\n| --- | --- |\n| gpt | 1.000 |"


class RecordTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.path = os.path.join(self.dir, "RESULTS.md")
        shutil.copy(results.RESULTS, self.path)

    def tearDown(self):
        shutil.rmtree(self.dir)

    def sections(self):
        text = open(self.path).read()
        head, rest = text.split(results.CURRENT, 1)
        current, history = rest.split(results.HISTORY, 1)
        return head, current, history

    def test_checked_in_file_has_both_sections_and_no_machine_paths(self):
        text = open(results.RESULTS).read()
        self.assertLess(text.index(results.CURRENT), text.index(results.HISTORY))
        for bad in ("/work/", "/tmp/", "/home/"):
            self.assertNotIn(bad, text)

    def test_replaces_the_current_block_and_appends_to_history(self):
        _, current0, history0 = self.sections()
        titles0 = [l for l in current0.splitlines() if l.startswith("### ")]
        body = "- machine: test\n- commit: abc\n- command: `bench/bench_cpu.py`\n\n" + TABLE
        results.record("CPU against onnxruntime (one thread)", body, path=self.path,
                       stamp="2099-01-01T00:00:00")
        _, current, history = self.sections()
        titles = [l for l in current.splitlines() if l.startswith("### ")]
        # Same benchmarks in the same order; only the CPU block's date changed.
        self.assertEqual(len(titles), len(titles0))
        self.assertIn("### CPU against onnxruntime (one thread), 2099-01-01T00:00:00", titles)
        self.assertEqual(current.count("### CPU against onnxruntime"), 1)
        self.assertIn(TABLE, current)
        # History keeps everything it had, and ends with the new run.
        self.assertTrue(history.startswith(history0.rstrip("\n")))
        self.assertTrue(history.rstrip().endswith(TABLE))
        # Other current blocks are untouched.
        for t in titles0:
            if "CPU against onnxruntime" not in t:
                self.assertIn(t, titles)

    def test_new_benchmark_gets_a_current_block(self):
        results.record("Something new", "- machine: test\n\n" + TABLE, path=self.path,
                       stamp="2099-01-01T00:00:00")
        _, current, history = self.sections()
        self.assertIn("### Something new, 2099-01-01T00:00:00", current)
        self.assertIn("### Something new, 2099-01-01T00:00:00", history)

    def test_starts_a_missing_file(self):
        os.unlink(self.path)
        results.record("Planner", "- machine: test\n\n" + TABLE, path=self.path, stamp="2099")
        _, current, history = self.sections()
        self.assertIn("### Planner, 2099", current)
        self.assertIn("### Planner, 2099", history)

    def test_repo_path(self):
        self.assertEqual(results.repo_path(os.path.join(results.REPO_ROOT, "build", "bin")),
                         os.path.join("build", "bin"))
        self.assertEqual(results.repo_path("/elsewhere/x"), "/elsewhere/x")

    def test_machine_words_name_no_host(self):
        import platform
        words = results.machine_words()
        self.assertIn("logical CPUs", words)
        if len(platform.node()) > 3:
            self.assertNotIn(platform.node() + ":", words)


if __name__ == "__main__":
    unittest.main()
