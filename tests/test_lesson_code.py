"""Each lesson writes what it teaches in its own cells, and keeps test plumbing out of them.

Read, not run (the notebooks run in tests/test_notebooks.py):

* ``tests/lesson_code/<lesson>.yml`` lists what the lesson defines in its own cells
  (functions and classes, at the top level of a code cell); both twins must define
  every listed name, and the twins must define the same names as each other.
* The lesson's last code cell is its *checks cell* (cell tag ``checks``): it holds what
  only the tests need (``runtime.record`` calls for the twin comparison, smoke-profile
  guards). No cell before it calls ``runtime.record``, reads ``is_smoke``, or asserts on
  a measured time; the rendered book hides it (tools/book.py).
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import nbformat
import pytest
import yaml

from tools.notebook_runner import ROOT
from tools.sync_notebooks import lessons

SPECS = ROOT / "tests" / "lesson_code"
CHECKS_TAG = "checks"
FRAMEWORKS = ("pytorch", "tensorflow")
BUILT = sorted(p.stem for p in SPECS.glob("*.yml"))
# Test plumbing a learner should not meet in a teaching cell.
PLUMBING = (
    (re.compile(r"\bruntime\.record\("), "runtime.record (twin records belong in the checks cell)"),
    (re.compile(r"\bis_smoke\b"), "is_smoke (a profile guard for the tests)"),
    (re.compile(r"^\s*assert\b.*\b(seconds|perf_counter|process_time|monotonic)\b", re.M),
     "an assert on a measured time (timing belongs in benchmarks/)"),
)


def _notebook(lesson: str, framework: str):
    return nbformat.read(ROOT / "lessons" / lesson / f"{lesson}_{framework}.ipynb", as_version=4)


def _code(cell) -> str:
    """A code cell's Python: IPython magics and shell lines blanked (they are not Python)."""
    return "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in cell.source.splitlines())


def defined_names(nb) -> list[str]:
    """Functions and classes the notebook defines at the top level of its code cells, in order."""
    names = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        for node in ast.parse(_code(cell)).body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name not in names:
                names.append(node.name)
    return names


def spec(lesson: str) -> dict:
    data = yaml.safe_load((SPECS / f"{lesson}.yml").read_text(encoding="utf-8")) or {}
    assert isinstance(data.get("defines"), list) and data["defines"], (
        f"tests/lesson_code/{lesson}.yml: expected a non-empty list under 'defines'")
    return data


def test_every_spec_names_a_lesson() -> None:
    unknown = sorted(set(BUILT) - set(lessons()))
    assert not unknown, f"tests/lesson_code/ has specs for lessons that do not exist: {unknown}"


@pytest.mark.parametrize("lesson", BUILT)
def test_lesson_defines_what_it_teaches_in_both_twins(lesson: str) -> None:
    wanted = spec(lesson)["defines"]
    defined = {fw: defined_names(_notebook(lesson, fw)) for fw in FRAMEWORKS}
    for fw in FRAMEWORKS:
        missing = [name for name in wanted if name not in defined[fw]]
        assert not missing, f"{lesson}_{fw}: the lesson's own cells do not define {missing}"
    only = {fw: sorted(set(defined[fw]) - set(defined[other]))
            for fw, other in (("pytorch", "tensorflow"), ("tensorflow", "pytorch"))}
    assert not only["pytorch"] and not only["tensorflow"], (
        f"{lesson}: the twins define different names: only in pytorch {only['pytorch']}, "
        f"only in tensorflow {only['tensorflow']}")


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("lesson", BUILT)
def test_test_plumbing_sits_in_the_checks_cell_only(lesson: str, framework: str) -> None:
    nb = _notebook(lesson, framework)
    code = [(i, c) for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    tagged = [i for i, c in code if CHECKS_TAG in c.metadata.get("tags", [])]
    assert len(tagged) == 1, f"{lesson}_{framework}: expected one code cell tagged {CHECKS_TAG!r}, found {len(tagged)}"
    assert tagged[0] == code[-1][0], f"{lesson}_{framework}: the checks cell must be the last code cell"
    for i, cell in code[:-1]:
        for pattern, what in PLUMBING:
            found = pattern.search(cell.source)
            assert not found, f"{lesson}_{framework}, cell {i}: {what}: {found.group(0).strip()!r}"


def test_the_checks_below_would_see_plumbing_and_a_missing_definition() -> None:
    """The readers above on made-up cells: a teaching cell that records, and a twin short of a class."""
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("%matplotlib inline\ndef attend(q):\n    return q\nclass Block:\n    pass"),
        nbformat.v4.new_code_cell("x = 1\nruntime.record('x', x)"),
    ])
    assert defined_names(nb) == ["attend", "Block"]
    assert PLUMBING[0][0].search(nb.cells[1].source)
    assert PLUMBING[2][0].search("assert seconds < 30, 'too slow'")
    assert not PLUMBING[2][0].search("assert weights.sum() == 1  # not a timing")
