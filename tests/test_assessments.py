"""What the assessments measure (issue 39): an exercise is not a lesson cell to copy, and
a find-and-fix does not tell the student its bug.

- ``tools.overlap`` measures the share of each exercise's model solution that stands in
  its lesson (runs of at least 12 identical tokens); no code exercise may exceed 35% and
  the median may not exceed 15%.
- A hidden test's message about a find-and-fix mistake appears neither in the lesson nor
  in the release (the student finds the bug from its symptoms; the grader names it).
"""
from __future__ import annotations

import re
import statistics
from pathlib import Path

import nbformat
import pytest
import yaml

from tests import grading_support as gs
from tools import overlap
from tools.notebook_runner import ROOT

LIMIT, MEDIAN_LIMIT = overlap.LIMIT, 0.15

ROWS = [row for a in overlap.assignments() for row in overlap.measure(a)]


# ---- the measure itself ----

LESSON = '''
def attend(q, k, v, mask=None):
    """Scaled dot-product attention."""
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])  # (B, Tq, Tk)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v
'''


def test_a_copy_with_other_comments_and_constants_counts_as_copied() -> None:
    copy = LESSON.replace("Scaled dot-product attention.", "My own words.").replace("# (B, Tq, Tk)", "# mine")
    copy = copy.replace('"-inf"', '"-infinity"').replace("-1", "-2")
    known = overlap.ngrams(overlap.tokens(LESSON))
    assert overlap.copied_count(overlap.tokens(copy), known) == len(overlap.tokens(copy))


def test_new_code_counts_as_new_and_a_short_shared_phrase_is_not_a_copy() -> None:
    new = "def attend(q, k, v):\n    w = np.exp(q @ k.T)\n    w /= w.sum(axis=1, keepdims=True)\n    return w @ v\n"
    known = overlap.ngrams(overlap.tokens(LESSON))
    assert overlap.copied_count(overlap.tokens(new), known) == 0
    shared = "w = torch.softmax(scores, dim=-1)\n"  # 11 tokens of the lesson's line: under a run
    assert overlap.copied_count(overlap.tokens(shared), known) == 0


def test_docstrings_and_comments_are_not_code() -> None:
    assert overlap.tokens('def f():\n    """Doc."""\n    # note\n    return "a" + 2\n') == \
        ["def", "f", "(", ")", ":", "return", '""', "+", "0"]


def test_the_table_covers_every_assignment_and_its_code_exercises() -> None:
    measured = {r.assignment for r in ROWS}
    assert measured == set(overlap.assignments()) and len(measured) == 18
    assert all(r.tokens > 0 for r in ROWS)


# ---- the course's exercises ----

def test_no_code_exercise_is_mostly_in_its_lesson() -> None:
    over = {(r.assignment, r.exercise): round(r.share, 3) for r in ROWS if r.share > LIMIT}
    assert not over, f"over {LIMIT:.0%} of the model solution stands in the lesson: {over}"


def test_the_median_exercise_is_mostly_new() -> None:
    median = statistics.median(r.share for r in ROWS)
    assert median <= MEDIAN_LIMIT, f"the median exercise has {median:.1%} of its solution in the lesson (at most {MEDIAN_LIMIT:.0%})"


# ---- find-and-fix: the bug is named only by the grader ----

def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower()


def find_and_fix_messages(solution: Path) -> list[tuple[str, str]]:
    """(section, message) for every mistake message of a hidden test in a find-and-fix section."""
    found = []
    for heading, cells in _sections(solution):
        if "find and fix" in heading.lower():
            hidden = [c for c in cells if c.cell_type == "code" and "### BEGIN HIDDEN TESTS" in c.source]
            found += [(heading, m) for m in gs.mistake_messages(nbformat.v4.new_notebook(cells=hidden))]
    return found


def test_the_leak_check_reads_the_hidden_mistakes_of_find_and_fix_sections_only(tmp_path: Path) -> None:
    def hidden(message: str):
        cell = nbformat.v4.new_code_cell("### BEGIN HIDDEN TESTS\n"
                                         f"grading.check_close(a, b, 'x', mistakes={{{message!r}: 1}})\n### END HIDDEN TESTS")
        cell.metadata["nbgrader"] = {"grade": True, "solution": False, "points": 1, "grade_id": message[:5]}
        return cell

    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("## Exercise 1: find and fix a colleague's softmax"), hidden("the scores were not scaled"),
        nbformat.v4.new_markdown_cell("## Exercise 2: from words"), hidden("the rows do not sum to one")])
    nbformat.write(nb, tmp_path / "nb.ipynb")
    assert find_and_fix_messages(tmp_path / "nb.ipynb") == [
        ("## Exercise 1: find and fix a colleague's softmax", "the scores were not scaled")]


@pytest.mark.parametrize("assignment", overlap.assignments())
def test_no_find_and_fix_mistake_is_named_before_the_student_looks(assignment: str) -> None:
    solution = ROOT / "solutions" / assignment / f"{assignment}.ipynb"
    places = {
        "the release": ROOT / "assignments" / assignment / f"{assignment}.ipynb",
        "the lesson": overlap.lesson_for(assignment),
    }
    texts = {name: _flat("\n".join(c.source for c in nbformat.read(p, as_version=4).cells)) for name, p in places.items()}
    named = [(section, message[:80], name) for section, message in find_and_fix_messages(solution)
             for name, text in texts.items() if _flat(message) in text]
    assert not named, f"{assignment}: a find-and-fix mistake stands where the student reads it: {named}"


# ---- every assignment: a find-and-fix with its "why", and a written answer ----

def _sections(solution: Path) -> list[tuple[str, list]]:
    """(heading, cells) for each ``## `` section of a notebook."""
    out: list[tuple[str, list]] = [("", [])]
    for cell in nbformat.read(solution, as_version=4).cells:
        if cell.cell_type == "markdown" and cell.source.startswith("## "):
            out.append((cell.source.splitlines()[0], []))
        out[-1][1].append(cell)
    return out


def _hand_graded(cell) -> bool:
    meta = cell.metadata.get("nbgrader", {})
    return cell.cell_type == "markdown" and bool(meta.get("solution")) and bool(meta.get("grade")) \
        and (meta.get("points") or 0) > 0 and "### BEGIN SOLUTION" in cell.source


@pytest.mark.parametrize("assignment", overlap.assignments())
def test_every_assignment_has_a_find_and_fix_with_its_why_and_a_written_answer(assignment: str) -> None:
    sections = _sections(ROOT / "solutions" / assignment / f"{assignment}.ipynb")
    fixes = [(h, cells) for h, cells in sections if "find and fix" in h.lower()]
    assert fixes, f"{assignment}: no '## Exercise n: find and fix ...' section"
    for heading, cells in fixes:
        assert any(_hand_graded(c) for c in cells), f"{assignment}: {heading!r} collects no written 'why' (a hand-graded answer)"
    written = [c for h, cells in sections if "find and fix" not in h.lower() for c in cells if _hand_graded(c)]
    assert written, f"{assignment}: no written answer outside the find-and-fix"
    for cell in written + [c for _, cells in fixes for c in cells if _hand_graded(c)]:
        model = cell.source.split("### BEGIN SOLUTION", 1)[1].lower()
        assert "rubric" in model, f"{assignment}: {cell.metadata['nbgrader']['grade_id']}: a model answer without a rubric"


@pytest.mark.parametrize("assignment", overlap.assignments())
def test_every_graded_code_exercise_has_a_correct_answer_written_another_way(assignment: str) -> None:
    """Issue 39, item 5: tests/mutants/<id>.yml holds, for every code exercise with automatic points,
    a ``correct: true`` alternative (test_grading checks that it gets full marks)."""
    alternatives = {m["cell"] for m in yaml.safe_load((ROOT / "tests" / "mutants" / f"{assignment}.yml").read_text())
                    if m.get("correct")}
    missing = []
    for heading, cells in _sections(ROOT / "solutions" / assignment / f"{assignment}.ipynb"):
        graded = any(c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("grade")
                     and (c.metadata["nbgrader"].get("points") or 0) > 0 for c in cells)
        for c in cells:
            meta = c.metadata.get("nbgrader", {})
            if graded and c.cell_type == "code" and meta.get("solution") and meta["grade_id"] not in alternatives:
                missing.append(meta["grade_id"])
    assert not missing, f"{assignment}: no correct alternative for {missing}"
