"""The `utils` package's layering, read from the code's own imports (every
``import`` statement, including those inside functions):

* no import cycle between modules;
* no module imports one from a package above it in the lesson order
  (runtime, checks -> attention, data, plots, ... -> positional, memory, seq2seq
  -> transformer -> bert, efficient);
* plots, widgets and explorers do not import ``grading`` (the grader's module);
* no private module (``_name.py``) is imported from outside its own package.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tools.notebook_runner import ROOT

# The floor each top-level part of `utils` sits on. A module may import from its own
# floor or below, never above. Same-floor packages may use each other's public modules.
FLOORS = {
    "runtime": 0, "checks": 0, "training": 0, "shapes": 0, "own_code": 0, "syntax": 0,
    "attention": 1, "data": 1, "plots": 1, "widgets": 1, "grading": 1, "quiz": 1,
    "positional": 2, "memory": 2, "seq2seq": 2,
    "transformer": 3,
    "bert": 4,
    "gpt": 4,  # lesson 8: the decoder-only model, on the transformer's blocks
    "efficient": 4,  # lesson 9: efficient attention, above the Transformer
    "diagrams": 5,  # the opening figure of every lesson may draw from any of them
}
NO_GRADING = ("plots", "widgets", "explorer")


def import_graph(package: Path) -> dict[str, set[str]]:
    """{module: modules of the same package it imports}, dotted names rooted at the package."""
    root = package.name
    modules = {}
    for path in package.rglob("*.py"):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        here = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        found = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = here.split(".")[: len(here.split(".")) - (node.level - 1)]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                named = [f"{target}.{a.name}" for a in node.names]
                # `from pkg import mod` depends on pkg.mod; `from pkg import name` on pkg itself
                candidates = [n for n in named if n in modules] + ([target] if any(n not in modules for n in named) else [])
            elif isinstance(node, ast.Import):
                candidates = [a.name for a in node.names]
            else:
                continue
            found |= {c for c in candidates if c in modules and c != name and c != root}
        graph[name] = found
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every import cycle found by a depth-first search (each reported once, from its first module)."""
    found, state, stack = [], {}, []

    def visit(node: str) -> None:
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                found.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node)
    return found


def upward_imports(graph: dict[str, set[str]], floors: dict[str, int]) -> list[str]:
    part = lambda m: m.split(".")[1]  # noqa: E731  utils.<part>...
    bad = []
    for a, targets in graph.items():
        for b in targets:
            if "." in a and "." in b and floors[part(b)] > floors[part(a)]:
                bad.append(f"{a} (floor {floors[part(a)]}) imports {b} (floor {floors[part(b)]})")
    return sorted(bad)


def private_imports(graph: dict[str, set[str]]) -> list[str]:
    bad = []
    for a, targets in graph.items():
        for b in targets:
            owner = b.rsplit(".", 1)[0]
            if b.rsplit(".", 1)[1].startswith("_") and not (a == owner or a.startswith(owner + ".")):
                bad.append(f"{a} imports the private {b}")
    return sorted(bad)


GRAPH = import_graph(ROOT / "utils")


def test_every_part_of_utils_has_a_floor() -> None:
    parts = {m.split(".")[1] for m in GRAPH if "." in m}
    assert parts <= set(FLOORS), f"give these a floor in FLOORS: {sorted(parts - set(FLOORS))}"
    assert GRAPH["utils.bert.common"] >= {"utils.checks"}, "the graph misses a known import"


def test_no_import_cycles() -> None:
    assert cycles(GRAPH) == []


def test_no_module_imports_from_a_floor_above() -> None:
    assert upward_imports(GRAPH, FLOORS) == []


def test_plots_widgets_and_explorers_do_not_import_grading() -> None:
    bad = [m for m, targets in GRAPH.items() if m.rsplit(".", 1)[-1].startswith(NO_GRADING) and "utils.grading" in targets]
    assert bad == []


def test_no_private_module_is_imported_from_outside_its_package() -> None:
    assert private_imports(GRAPH) == []


@pytest.fixture()
def tangled(tmp_path: Path) -> dict[str, set[str]]:
    """A small package with one fault of each kind."""
    pkg = tmp_path / "utils"
    (pkg / "attention").mkdir(parents=True)
    (pkg / "bert").mkdir()
    files = {
        "__init__.py": "",
        "checks.py": "from utils.bert import model\n",  # up two floors, and a cycle with bert.model
        "attention/__init__.py": "",
        "attention/_private.py": "",
        "attention/explorer.py": "def f():\n    from utils import grading\n",  # inside a function still counts
        "grading.py": "",
        "bert/__init__.py": "",
        "bert/model.py": "from ..checks import x\nfrom utils.attention import _private\n",
    }
    for name, text in files.items():
        (pkg / name).write_text(text)
    return import_graph(pkg)


def test_the_layering_checks_find_each_fault(tangled: dict[str, set[str]]) -> None:
    assert cycles(tangled) == [["utils.bert.model", "utils.checks", "utils.bert.model"]]
    assert upward_imports(tangled, FLOORS) == ["utils.checks (floor 0) imports utils.bert.model (floor 4)"]
    assert private_imports(tangled) == ["utils.bert.model imports the private utils.attention._private"]
    assert "utils.grading" in tangled["utils.attention.explorer"]
