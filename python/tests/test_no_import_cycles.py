"""No module of the autopar package imports itself back, directly or through others.

Every ``import`` and ``from ... import`` in every module under python/autopar is read with
``ast`` -- including the ones inside functions, which run later but still tie the modules
together -- and resolved to the autopar modules they name.  ``from . import x`` counts as
an import of the module ``x`` when there is one, else of the package.  A package's
``__init__`` importing its own submodules is normal and allowed; a submodule importing
its package's ``__init__`` back is a cycle like any other.
"""
import ast
import os
import unittest

PACKAGE_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                           "autopar")


def find_modules(package_dir=PACKAGE_DIR, package="autopar"):
    """{dotted module name: (path, is_package)} for every .py file under package_dir."""
    root = os.path.dirname(package_dir)
    modules = {}
    for dirpath, dirnames, filenames in os.walk(package_dir):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for f in sorted(filenames):
            if not f.endswith(".py"):
                continue
            rel = os.path.relpath(os.path.join(dirpath, f), root)[:-3].split(os.sep)
            is_package = rel[-1] == "__init__"
            if is_package:
                rel = rel[:-1]
            modules[".".join(rel)] = (os.path.join(dirpath, f), is_package)
    assert package in modules, f"{package_dir} is not a package"
    return modules


def imports_of(name, path, is_package, modules):
    """The autopar modules that module `name` imports, each once."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    own_package = name if is_package else name.rpartition(".")[0]
    found = []

    def add(target):
        # The longest prefix of `target` that is one of our modules.
        parts = target.split(".")
        for n in range(len(parts), 0, -1):
            candidate = ".".join(parts[:n])
            if candidate in modules:
                if candidate != name and candidate not in found:
                    found.append(candidate)
                return

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = own_package.split(".")
                if node.level > 1:
                    base = base[:-(node.level - 1)]
                base = ".".join(base + ([node.module] if node.module else []))
            else:
                base = node.module
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                add(sub if sub in modules else base)
    return found


def import_graph(modules=None):
    modules = modules or find_modules()
    return {name: imports_of(name, path, is_package, modules)
            for name, (path, is_package) in modules.items()}


def find_cycles(graph):
    """Every strongly connected group of more than one module (or a module importing
    itself), each as a sorted list; Tarjan's algorithm."""
    index, low, on_stack, stack, cycles = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1 or v in graph.get(v, ()):
                cycles.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return cycles


def cycle_path(graph, group):
    """One import chain a -> b -> ... -> a inside a strongly connected group."""
    members = set(group)
    start = group[0]
    path, seen = [start], {start}
    while True:
        nxt = next(w for w in graph[path[-1]] if w in members)
        if nxt in seen:
            return path[path.index(nxt):] + [nxt]
        path.append(nxt)
        seen.add(nxt)


class NoImportCycles(unittest.TestCase):
    def test_package_has_no_import_cycles(self):
        graph = import_graph()
        self.assertIn("autopar.draw", graph)
        chains = [" -> ".join(cycle_path(graph, g)) for g in find_cycles(graph)]
        self.assertEqual(chains, [], "import cycles in python/autopar:\n  " +
                         "\n  ".join(chains))

    def test_the_checker_sees_cycles(self):
        # Function-level imports, relative imports and "from . import module" count.
        graph = {"autopar.models": ["autopar.tools", "autopar.export"],
                 "autopar.export": ["autopar.models"], "autopar.tools": []}
        self.assertEqual(find_cycles(graph), [["autopar.export", "autopar.models"]])
        self.assertEqual(cycle_path(graph, ["autopar.export", "autopar.models"]),
                         ["autopar.export", "autopar.models", "autopar.export"])
        modules = find_modules()
        models = imports_of("autopar.models", *modules["autopar.models"], modules)
        self.assertIn("autopar.export", models)   # inside export(): still an edge
        self.assertIn("autopar.tools", models)    # from .tools import REFERENCE_DIR
        timeline = imports_of("autopar.draw.timeline", *modules["autopar.draw.timeline"],
                              modules)
        self.assertIn("autopar.plan", timeline)   # from .. import plan as planlib
        self.assertIn("autopar.schedule", timeline)
        self.assertIn("autopar.draw.svg", timeline)


if __name__ == "__main__":
    unittest.main()
