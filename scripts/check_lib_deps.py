#!/usr/bin/python3
"""Check the dependency graph of autopar's own compiler libraries.

Reads every CMakeLists.txt under lib/ and tools/, collects the targets they
define (add_library, add_executable, add_mlir_*library) and the links between
them (target_link_libraries, or LINK_LIBS of add_mlir_*library), keeps the
edges between autopar's own targets (MLIR, LLVM, protobuf... are dropped),
prints the graph, and fails when

  - the graph of libraries has a cycle, or
  - an edge is not in ALLOWED_EDGES below.

ALLOWED_EDGES is today's graph (docs/architecture.md draws it). A change of
the layout changes this list in the same commit, so that every new dependency
is a visible decision. Usage:

  scripts/check_lib_deps.py [--root REPO] [--mermaid]

Exit status: 0 when the graph is acyclic and every edge is allowed, 1
otherwise. Needs only the Python standard library (ctest runs it as
`lib-deps`).
"""

import argparse
import os
import re
import sys

# (from, to): `from` links `to`. Libraries first, then the tools.
ALLOWED_EDGES = {
    ("AutoparImport", "AutoparDialect"),
    ("AutoparConversion", "AutoparDialect"),
    ("AutoparPlanner", "AutoparDialect"),
    ("AutoparTarget", "AutoparPlanner"),
    ("AutoparTarget", "AutoparConversion"),
    ("AutoparTarget", "AutoparTransforms"),
    ("AutoparTarget", "AutoparImport"),
    ("AutoparTransforms", "AutoparPlanner"),
    ("AutoparTransforms", "AutoparDialect"),
    ("AutoparDriver", "AutoparTarget"),
    ("AutoparDriver", "AutoparTransforms"),
    ("AutoparDriver", "AutoparImport"),
    ("AutoparDriver", "AutoparConversion"),
    ("autopar-compile", "AutoparDriver"),
    ("autopar-opt", "AutoparDriver"),
    ("autopar-opt", "AutoparImport"),
    ("autopar-opt", "AutoparConversion"),
    ("autopar-opt", "AutoparTransforms"),
}

SCANNED = ("lib", "tools")
DEFINE = re.compile(r"\b(add_library|add_executable|add_mlir_\w*library)\s*\(\s*([\w.-]+)", re.I)
LINK = re.compile(r"\btarget_link_libraries\s*\(\s*([\w.-]+)([^)]*)\)", re.I | re.S)
MLIR_LIB = re.compile(r"\badd_mlir_\w*library\s*\(\s*([\w.-]+)([^)]*)\)", re.I | re.S)
KEYWORDS = {"PUBLIC", "PRIVATE", "INTERFACE", "LINK_PUBLIC", "LINK_PRIVATE"}
# Keywords of add_mlir_library that end its LINK_LIBS list.
MLIR_KEYWORDS = {"DEPENDS", "LINK_COMPONENTS", "ADDITIONAL_HEADER_DIRS", "EXCLUDE_FROM_LIBMLIR",
                 "PARTIAL_SOURCES_INTENDED", "DISABLE_INSTALL", "SHARED", "STATIC", "OBJECT",
                 "ENABLE_AGGREGATION", "MLIR_LIB_DEPENDS"}


def strip_comments(text):
    return "\n".join(line.split("#", 1)[0] for line in text.splitlines())


def cmake_files(root):
    for top in SCANNED:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
            dirnames.sort()
            if "CMakeLists.txt" in filenames:
                yield os.path.join(dirpath, "CMakeLists.txt")


def read_graph(root):
    """Returns (targets: {name: (kind, file)}, links: [(from, to, file)])."""
    targets, links = {}, []
    for path in cmake_files(root):
        with open(path) as f:
            text = strip_comments(f.read())
        rel = os.path.relpath(path, root)
        for m in DEFINE.finditer(text):
            kind = "tool" if m.group(1).lower() == "add_executable" else "library"
            targets[m.group(2)] = (kind, rel)
        for m in LINK.finditer(text):
            for word in m.group(2).split():
                if word not in KEYWORDS:
                    links.append((m.group(1), word, rel))
        for m in MLIR_LIB.finditer(text):
            words, on = m.group(2).split(), False
            for word in words:
                if word == "LINK_LIBS":
                    on = True
                elif word in MLIR_KEYWORDS:
                    on = False
                elif on and word not in KEYWORDS:
                    links.append((m.group(1), word, rel))
    own = [(a, b, rel) for a, b, rel in links if a in targets and b in targets]
    return targets, own


def find_cycle(nodes, edges):
    """A list of nodes forming a cycle, or None."""
    succ = {n: sorted(b for a, b in edges if a == n) for n in nodes}
    state, stack = {}, []

    def visit(n):
        state[n] = "open"
        stack.append(n)
        for m in succ.get(n, []):
            if state.get(m) == "open":
                return stack[stack.index(m):] + [m]
            if m not in state:
                found = visit(m)
                if found:
                    return found
        stack.pop()
        state[n] = "done"
        return None

    for n in sorted(nodes):
        if n not in state:
            found = visit(n)
            if found:
                return found
    return None


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    p.add_argument("--mermaid", action="store_true", help="print the graph as a mermaid flowchart")
    args = p.parse_args(argv)

    targets, links = read_graph(args.root)
    if not targets:
        print(f"error: no targets found under {', '.join(SCANNED)} of {args.root}", file=sys.stderr)
        return 1
    edges = sorted({(a, b) for a, b, _ in links})
    where = {(a, b): rel for a, b, rel in links}

    if args.mermaid:
        print("flowchart TD")
        for a, b in edges:
            print(f"  {a} --> {b}")
    else:
        for name in sorted(targets, key=lambda n: (targets[n][0], n)):
            kind, rel = targets[name]
            deps = [b for a, b in edges if a == name]
            print(f"{name} ({kind}, {rel}) -> {', '.join(deps) if deps else '(none of autopar)'}")

    problems = []
    cycle = find_cycle(list(targets), edges)
    if cycle:
        problems.append("cycle: " + " -> ".join(cycle))
    for a, b in edges:
        if (a, b) not in ALLOWED_EDGES:
            problems.append(f"edge {a} -> {b} ({where[(a, b)]}) is not in ALLOWED_EDGES of "
                            f"scripts/check_lib_deps.py; if it is intended, add it there and to "
                            f"the graph in docs/architecture.md")
    gone = sorted(e for e in ALLOWED_EDGES if e not in set(edges))
    for a, b in gone:
        print(f"note: allowed edge {a} -> {b} no longer exists; remove it from ALLOWED_EDGES")
    for msg in problems:
        print(f"error: {msg}", file=sys.stderr)
    if not problems:
        print(f"ok: {len(targets)} targets, {len(edges)} edges, no cycle, every edge allowed")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
