"""The nbgrader round trip of every assignment, discovered from ``solutions/``.

For each assignment: the committed release equals a fresh
``nbgrader generate_assignment``; the release carries no solution and no hidden
test; graded by ``python -m grader`` (sandboxed, every verdict decided outside the
kernel), the solution, submitted as a student would, gets full marks; the
untouched release autogrades to zero, and so does every trivial answer (zeros of
the right shape, a constant, random values, the input unchanged: see
``grading_support.TRIVIAL_KINDS``); every wrong implementation listed in
``tests/mutants/<id>.yml`` gets partial marks and the message that names the
mistake, and every likely-mistake message the tests can print is reached by one
of them; and no feedback page shows hidden test code.
"""
from __future__ import annotations

import os
from pathlib import Path

import nbformat
import pytest
import yaml

from tests import grading_support as gs
from grader import sandbox
from grader.grade import grade
from tools.sync_notebooks import render, repository_url

ASSIGNMENTS = gs.assignment_ids()
pytestmark = pytest.mark.grading


def test_assignments_found() -> None:
    assert "01_soft_attention_pytorch" in ASSIGNMENTS and "01_soft_attention_tensorflow" in ASSIGNMENTS


def load_mutants(assignment: str) -> list[dict]:
    path = gs.ROOT / "tests" / "mutants" / f"{assignment}.yml"
    if not path.exists():
        return []
    mutants = yaml.safe_load(path.read_text()) or []
    for m in mutants:
        assert {"name", "cell", "replace"} <= set(m) and ("message" in m) != bool(m.get("correct")), \
            f"{path}: mutant {m} needs name, cell, replace, and a message or (a correct alternative) correct: true"
    return mutants


@pytest.fixture(scope="module", params=[pytest.param(a, marks=pytest.mark.xdist_group(a)) for a in ASSIGNMENTS], ids=ASSIGNMENTS)
def graded(request, tmp_path_factory) -> dict:
    """Generate, submit (solution, release, mutants), autograde and generate feedback once per assignment."""
    assignment = request.param
    course = gs.make_course(tmp_path_factory.mktemp(assignment), assignment)
    gs.nbgrader(["generate_assignment", assignment, "--force"], course)
    source_nb = nbformat.read(course / "solutions" / assignment / f"{assignment}.ipynb", as_version=4)
    release_path = course / "assignments" / assignment / f"{assignment}.ipynb"
    release_nb = nbformat.read(release_path, as_version=4)

    fills = gs.student_fill(source_nb)
    gs.write_submission(course, assignment, "solution", gs.fill_release(release_nb, gs.student_fill(source_nb, written=True)))
    gs.write_submission(course, assignment, "release", release_nb)
    mutants = load_mutants(assignment)
    for i, m in enumerate(mutants):
        assert m["cell"] in fills, f"mutant {m['name']!r}: no solution cell with grade_id {m['cell']!r}"
        code = fills[m["cell"]]
        for old, new in m["replace"]:
            assert old in code, f"mutant {m['name']!r}: {old!r} not found in cell {m['cell']!r}; update tests/mutants/{assignment}.yml"
            code = code.replace(old, new)
        gs.write_submission(course, assignment, f"mutant{i}", gs.fill_release(release_nb, {**fills, m["cell"]: code}))
    for kind in gs.TRIVIAL_KINDS:
        gs.write_submission(course, assignment, f"trivial-{kind}", gs.fill_release(release_nb, gs.trivial_fill(source_nb, kind)))
    results = grade(assignment, course, jobs=1, unsafe=sandbox.check() is not None and os.environ.get("CI") != "true")
    return {
        "id": assignment, "course": course, "source": source_nb, "release_path": release_path,
        "scores": gs.scores(course, assignment), "mutants": mutants, "results": {r.student: r for r in results},
    }


def test_release_in_sync(graded) -> None:
    """assignments/<id> is exactly what generate_assignment makes (after the notebook sync)."""
    aid, fresh_dir = graded["id"], graded["release_path"].parent
    committed_dir = gs.ROOT / "assignments" / aid
    fresh_files = sorted(p.name for p in fresh_dir.iterdir())
    committed_files = sorted(p.name for p in committed_dir.iterdir()) if committed_dir.exists() else []
    assert committed_files == fresh_files, f"{aid}: assignments/ has {committed_files}, a fresh release has {fresh_files}; run `make assignments`"
    fresh = render(graded["release_path"], repository_url())
    committed = (committed_dir / f"{aid}.ipynb").read_text(encoding="utf-8")
    assert committed == fresh, f"{aid}: the committed release differs from a fresh one; run `make assignments`"


def test_release_leaks_nothing(graded) -> None:
    """No solution code, no hidden test, no marker in any released file."""
    aid = graded["id"]
    text = "\n".join(p.read_text(encoding="utf-8") for p in (gs.ROOT / "assignments" / aid).iterdir())
    for marker in (gs.BEGIN_SOLUTION, gs.BEGIN_HIDDEN, "END HIDDEN TESTS"):
        assert marker not in text, f"{aid}: release contains {marker!r}"
    nb = nbformat.read(gs.ROOT / "assignments" / aid / f"{aid}.ipynb", as_version=4)
    release_lines = {line.strip() for cell in nb.cells for line in cell.source.splitlines()}
    hidden = gs.secret_lines(graded["source"], gs.BEGIN_HIDDEN, gs.END_HIDDEN)
    assert hidden, f"{aid}: expected at least one hidden test with lines of its own"
    for begin, end, what in ((gs.BEGIN_SOLUTION, gs.END_SOLUTION, "solution"), (gs.BEGIN_HIDDEN, gs.END_HIDDEN, "hidden test")):
        leaked = sorted(gs.secret_lines(graded["source"], begin, end) & release_lines)
        assert not leaked, f"{aid}: the release contains {what} lines: {leaked[:3]}"


def _hand_graded_points(source_nb) -> float:
    return sum(float(c.metadata["nbgrader"].get("points", 0)) for c in source_nb.cells
               if c.metadata.get("nbgrader", {}).get("grade") and c.metadata["nbgrader"].get("solution"))


def test_solution_gets_full_marks(graded) -> None:
    """Every automatic point; the written answers wait for the instructor (the status says so)."""
    score, maximum = graded["scores"]["solution"]
    by_hand = _hand_graded_points(graded["source"])
    assert maximum > 0 and score == maximum - by_hand, f"{graded['id']}: the solution scored {score} / {maximum}"
    result = graded["results"]["solution"]
    assert result.status == ("provisional" if by_hand else "graded"), (result.status, result.note)


def test_release_gets_zero(graded) -> None:
    score, maximum = graded["scores"]["release"]
    assert score == 0, f"{graded['id']}: the untouched release scored {score} / {maximum}"


def test_mutants_get_partial_marks_and_named_mistake(graded) -> None:
    aid, course = graded["id"], graded["course"]
    if not graded["mutants"]:
        pytest.skip(f"{aid}: no tests/mutants/{aid}.yml")
    for i, m in enumerate(graded["mutants"]):
        if m.get("correct"):
            continue
        score, maximum = graded["scores"][f"mutant{i}"]
        assert 0 < score < maximum, f"{aid}: mutant {m['name']!r} scored {score} / {maximum}; expected partial marks"
        nb = nbformat.read(course / "autograded" / f"mutant{i}" / aid / f"{aid}.ipynb", as_version=4)
        errors = gs.error_text(nb)
        assert m["message"] in errors, f"{aid}: mutant {m['name']!r}: expected the message {m['message']!r}, got:\n{errors}"
        page = gs.visible_text((course / "feedback" / f"mutant{i}" / aid / f"{aid}.html").read_text())
        assert m["message"] in page, f"{aid}: mutant {m['name']!r}: the feedback page does not show {m['message']!r}"


def test_feedback_shows_no_hidden_tests(graded) -> None:
    aid, course = graded["id"], graded["course"]
    hidden = gs.secret_lines(graded["source"], gs.BEGIN_HIDDEN, gs.END_HIDDEN)
    pages = sorted((course / "feedback").glob(f"*/{aid}/{aid}.html"))
    assert len(pages) == len(graded["scores"]), f"{aid}: {len(pages)} feedback pages for {len(graded['scores'])} submissions"
    for page in pages:
        text = gs.visible_text(page.read_text())
        leaked = sorted(line for line in hidden if line in text)
        assert not leaked, f"{aid}: {page.parent.parent.name}'s feedback shows hidden test code: {leaked[:3]}"


def test_class_feedback_shows_no_model_answer(graded) -> None:
    """A class's feedback never shows a written answer's rubric or model answer (the self-check,
    `make check`, shows them to a learner after their own answer); only the student who wrote
    the model answer as their own sees its text."""
    aid, course = graded["id"], graded["course"]
    model = set()
    for cell in graded["source"].cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "markdown" and meta.get("grade") and meta.get("solution"):
            for region in gs.regions(cell.source, gs.BEGIN_SOLUTION, gs.END_SOLUTION):
                model |= gs.significant_lines(region)
    assert model, f"{aid}: no written answer with a model answer (every assignment has one: issue 39)"
    for page in sorted((course / "feedback").glob(f"*/{aid}/{aid}.html")):
        if page.parent.parent.name == "solution":
            continue
        text = gs.visible_text(page.read_text())
        shown = sorted(line for line in model if line in text)
        assert not shown, f"{aid}: {page.parent.parent.name}'s feedback shows the model answer: {shown[:2]}"


@pytest.mark.parametrize("kind", gs.TRIVIAL_KINDS)
def test_trivial_answers_get_zero(graded, kind) -> None:
    """Points go to behaviour only: no test passes zeros, a constant, noise or the input handed back."""
    aid = graded["id"]
    result = graded["results"][f"trivial-{kind}"]
    graded_to_the_end = "provisional" if _hand_graded_points(graded["source"]) else "graded"  # written answers wait
    assert result.status == graded_to_the_end and result.tests, f"{aid}: the trivial answer {kind!r} was not graded: {result.note}"
    earned = {gid: points for gid, (points, _, _) in result.tests.items() if points > 0}
    assert not earned, f"{aid}: the trivial answer {kind!r} earned points in {earned} ({result.score:g} / {result.max_score:g})"


def test_every_mistake_message_is_reached(graded) -> None:
    """Each likely-mistake message in the tests is shown to at least one mutant (none is dead text)."""
    aid = graded["id"]
    # the grader's message per test: what the autograded notebook and the feedback page show
    shown = "\n".join(message for i in range(len(graded["mutants"]))
                      for _, _, message in graded["results"][f"mutant{i}"].tests.values())
    messages = gs.mistake_messages(graded["source"])
    unreached = [m for m in messages if m[:80] not in shown]
    assert not unreached, (f"{aid}: no mutant in tests/mutants/{aid}.yml reaches these messages: {unreached}; "
                           "add a mutant that makes each mistake, or drop a message no mistake can produce")


def test_each_mutant_is_told_its_own_mistake_and_no_other(graded) -> None:
    """A hint names the mistake that was made, or none: the likely-mistake messages a mutant is shown
    are its own only (a message shown for a mistake not made would send the student the wrong way)."""
    aid = graded["id"]
    messages = gs.mistake_messages(graded["source"])
    for i, m in enumerate(graded["mutants"]):
        shown = "\n".join(message for _, _, message in graded["results"][f"mutant{i}"].tests.values())
        own = [m["message"], *m.get("also", [])] if not m.get("correct") else []  # ``also``: other tests' words
        wrong = [msg for msg in messages
                 if msg[:80] in shown and not any(o in msg or msg in o for o in own)]
        assert not wrong, f"{aid}: mutant {m['name']!r} was also told {wrong}"


def test_each_mistake_costs_once(graded) -> None:
    """A mutant with ``loses_only: [<grade_id prefixes>]`` loses points in those tests only: an exercise that
    builds on an earlier one does not charge the earlier exercise's mistake again (issue 39, item 6)."""
    aid = graded["id"]
    marked = [(i, m) for i, m in enumerate(graded["mutants"]) if m.get("loses_only")]
    if not marked:
        pytest.skip(f"{aid}: no mutant says where alone it may lose points")
    for i, m in marked:
        lost = sorted(gid for gid, (points, maximum, _) in graded["results"][f"mutant{i}"].tests.items()
                      if points < maximum)
        assert lost, f"{aid}: mutant {m['name']!r} lost no points"
        elsewhere = [gid for gid in lost if not gid.startswith(tuple(m["loses_only"]))]
        assert not elsewhere, f"{aid}: mutant {m['name']!r} also lost points in {elsewhere}"


def test_correct_alternatives_get_full_marks(graded) -> None:
    """A mutant marked ``correct: true`` is a right answer written another way (another shape handling, a
    sort for a top-k, a helper named like the library's, comments naming the lesson, variables ``pos``,
    ``attn``, ``pref``): every automatic test gives it full marks (issue 39, item 5)."""
    aid = graded["id"]
    alternatives = [(i, m) for i, m in enumerate(graded["mutants"]) if m.get("correct")]
    if not alternatives:
        pytest.skip(f"{aid}: no correct alternative in tests/mutants/{aid}.yml")
    for i, m in alternatives:
        short = {gid: message for gid, (points, maximum, message) in graded["results"][f"mutant{i}"].tests.items()
                 if points < maximum}
        assert not short, f"{aid}: the correct alternative {m['name']!r} lost points in {short}"

