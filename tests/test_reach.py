"""What an exercise asks for is out of the graded kernel's reach (issue 40, item 1).

Per assignment: the functions each exercise asks for (the top-level definitions of its answer cells,
and the names of its reference policy) and the set-up's helpers that compute answers (the library's
attention the tests compare with, the variants a mistake produces). Each must be unreachable from
the sandboxed kernel: by name in any module of the package the sandbox sees (another lesson's twin
included), and through the set-up's globals (the sandbox's copy of the set-up defines a stub).
Static for every assignment (cheap); one assignment is also run for real in a fresh interpreter.
"""
from __future__ import annotations

import ast
import re
import json
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from grader import plan, reference

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted((ROOT / "solutions").glob("*/*.ipynb"))

# The set-up helpers that compute what an exercise asks for, per assignment (both frameworks):
# listed by hand, so that a change of the automatic rule (plan.check_only_helpers) cannot drop one.
ANSWER_HELPERS = {
    "05_self_attention": {"library_attention", "library_layer", "library_gqa"},
    "06_transformer": {"reference_block", "reference_greedy"},
    "08_gpt": {"greedy_until_end"},
    "09_efficient_attention": {"attention", "log_sum_exp", "window_tiles", "window_mistakes", "kernel_parts",
                               "given_causal_linear_attention"},
}


def _meta(cell) -> dict:
    return cell.metadata.get("nbgrader", {}) or {}


def asked_for(nb) -> set[str]:
    """What the exercises ask for: the answer cells' top-level definitions and the policy's names."""
    names = set()
    for cell in nb.cells:
        if cell.cell_type == "code" and _meta(cell).get("solution"):
            for node in ast.parse(cell.source).body:
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    names.add(node.name)
    raw = (nb.metadata.get("course") or {}).get("reference") or {}
    return names | {str(n) for n in raw.get("names", [])}


def _is_stub(node: ast.AST) -> bool:
    if isinstance(node, ast.ClassDef):
        return all(_is_stub(n) for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))) \
            and any(isinstance(n, ast.FunctionDef) for n in node.body)
    body = node.body
    return len(body) == 1 and isinstance(body[0], ast.Raise) and "NotImplementedError" in ast.unparse(body[0])


def live_definitions(package: Path, names: set[str]) -> list[str]:
    """Every definition of one of ``names`` (``f``, ``Class``, ``Class.method``) in the package that is not a stub."""
    out = []
    for path in sorted(package.rglob("*.py")):
        module = ".".join(path.relative_to(package.parent).with_suffix("").parts)
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                if node.name in names and not _is_stub(node):
                    out.append(f"{module}.{node.name}")
                if isinstance(node, ast.ClassDef):
                    for item in node.body:
                        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                                f"{node.name}.{item.name}" in names and not _is_stub(item):
                            out.append(f"{module}.{node.name}.{item.name}")
    return out


@pytest.mark.parametrize("path", SOURCES, ids=[p.stem for p in SOURCES])
def test_what_an_exercise_asks_for_is_out_of_reach(path: Path, tmp_path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    names = asked_for(nb)
    assert names, path.stem
    view = reference.view(tmp_path, reference.policy_of(nb, path.stem)) / "utils"
    assert live_definitions(view, names) == [], f"{path.stem}: reachable in the sandbox's utils"
    # Through the set-up's globals: the sandbox's copy of each set-up cell stubs the answer helpers.
    family = path.stem.rsplit("_", 1)[0]
    helpers = plan.check_only_helpers(nb)
    assert ANSWER_HELPERS.get(family, set()) <= helpers, f"{path.stem}: {ANSWER_HELPERS[family] - helpers} kept"
    sandboxed = [c["code"] for c in plan.cells_for_sandbox(nb, nb) if "test" not in c]
    defined = {}
    for code in sandboxed:
        for node in ast.parse(code).body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                defined.setdefault(node.name, []).append(node)
    setup_defs = {n.name for c in nb.cells if plan.is_setup(c) for n in ast.parse(c.source).body
                  if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    for name in helpers | (names & setup_defs):
        assert name in defined and all(_is_stub(n) for n in defined[name] if name not in
                                       {m.name for c in nb.cells if _meta(c).get("solution") and c.cell_type == "code"
                                        for m in ast.parse(c.source).body if hasattr(m, "name")}), \
            f"{path.stem}: the sandbox's set-up still defines {name}"


def test_reach_check_can_fail(tmp_path: Path) -> None:
    """The scan finds a live twin and a kept helper."""
    package = tmp_path / "utils"
    package.mkdir()
    (package / "twin.py").write_text("def causal_self_attention(x):\n    return x\n"
                                     "def other(x):\n    raise NotImplementedError('stub')\n")
    assert live_definitions(package, {"causal_self_attention", "other"}) == ["utils.twin.causal_self_attention"]


def test_the_sandbox_cannot_call_them(tmp_path: Path) -> None:
    """Assignment 5 (PyTorch) for real: its set-up as the sandbox runs it, on the sandbox's view of utils,
    in a fresh interpreter; every name the exercises ask for, by every route, raises the graded note."""
    path = ROOT / "solutions" / "05_self_attention_pytorch" / "05_self_attention_pytorch.ipynb"
    nb = nbformat.read(path, as_version=4)
    reference.view(tmp_path, reference.policy_of(nb, path.stem))
    setup = "\n\n".join(c["code"] for c in plan.cells_for_sandbox(nb, nb)
                        if "test" not in c and "runtime.setup" in c["code"])
    routes = {
        "library_attention": "library_attention(None, None, None, 4)",
        "library_layer": "library_layer(None, None, None, None, 4)",
        "the setup's globals": "globals()['library_attention'](None, None, None, 4)",
        "ref.masked_softmax": "ref.masked_softmax(np.zeros((1, 2)))",
        "utils.attention.torch_impl": "__import__('utils.attention.torch_impl', fromlist=['x']).scaled_dot_product_attention(1, 2, 3)",
        "lesson 8's twin": "__import__('utils.gpt.torch_impl', fromlist=['x']).causal_self_attention(*[None] * 6)",
        "lesson 8's NumPy twin": "__import__('utils.gpt.numpy_ref', fromlist=['x']).causal_self_attention(*[None] * 6)",
    }
    probe = setup + "\n\nimport json\nout = {}\n" + "".join(
        f"try:\n    {code}\n    out[{name!r}] = 'ran'\nexcept NotImplementedError as exc:\n"
        f"    out[{name!r}] = 'graded' if 'not available while your notebook is graded' in str(exc) else str(exc)\n"
        f"except Exception as exc:\n    out[{name!r}] = type(exc).__name__ + ': ' + str(exc)\n"
        for name, code in routes.items()) + "print('RESULT' + json.dumps(out))\n"
    (tmp_path / "probe.py").write_text(probe)
    done = subprocess.run([sys.executable, str(tmp_path / "probe.py")], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path), "HOME": str(tmp_path),
                                            "MPLBACKEND": "Agg"})
    line = next((l for l in done.stdout.splitlines() if l.startswith("RESULT")), None)
    assert line, done.stderr[-3000:]
    assert json.loads(line[len("RESULT"):]) == {name: "graded" for name in routes}


@pytest.mark.parametrize("path", SOURCES, ids=[p.stem for p in SOURCES])
def test_the_self_check_without_solutions_stubs_only_what_the_hidden_tests_use(path: Path) -> None:
    """A course folder without solutions/ (a hub's self-check) plans from the release, whose answer cells
    are blank: a set-up helper the student is given to use must stay callable there too
    (``metadata.course.given``); only helpers of the hidden tests, which do not run there, may differ."""
    source = nbformat.read(path, as_version=4)
    release = nbformat.read(ROOT / "assignments" / path.stem / f"{path.stem}.ipynb", as_version=4)
    extra = plan.check_only_helpers(release) - plan.check_only_helpers(source)
    visible = "\n".join(c.source.split("### BEGIN HIDDEN TESTS")[0] for c in source.cells if c.cell_type == "code")
    used = sorted(n for n in extra if re.search(rf"\b{re.escape(n)}\b", visible.replace(f"def {n}(", "")))
    assert not used, f"{path.stem}: the release's plan stubs {used}, which grading keeps and visible code uses"
