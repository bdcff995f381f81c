"""README's "Supported ONNX" op list is the conformance script's SUPPORTED_OPS.

The script's list decides which ONNX node tests run, so an op added to the importer
and its conformance run but not to the README (as ScatterND, Sum and Mean once were)
fails here.
"""

import importlib.util
import os
import re
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def conformance_ops():
    path = os.path.join(ROOT, "test", "Conformance", "run_conformance.py")
    spec = importlib.util.spec_from_file_location("run_conformance", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return set(module.SUPPORTED_OPS)


def readme_ops():
    with open(os.path.join(ROOT, "README.md")) as f:
        text = f.read()
    match = re.search(r"Ops \((\d+)\):\s(.*?),\s+in\s+the\s+default\s+domain", text, re.S)
    if not match:
        raise AssertionError("README.md has no 'Ops (N): ... , in the default domain' list")
    ops = match.group(2).split()
    return int(match.group(1)), ops


class ReadmeOpsTest(unittest.TestCase):
    def test_readme_lists_every_supported_op_once(self):
        count, ops = readme_ops()
        self.assertEqual(len(ops), len(set(ops)), "an op is listed twice in README.md")
        self.assertEqual(count, len(ops), "README.md's 'Ops (N)' count is not the list's length")
        supported = conformance_ops()
        self.assertEqual(
            sorted(supported - set(ops)), [],
            "supported (run_conformance.py's SUPPORTED_OPS) but missing from README.md")
        self.assertEqual(
            sorted(set(ops) - supported), [],
            "in README.md but not in run_conformance.py's SUPPORTED_OPS")


if __name__ == "__main__":
    unittest.main()
