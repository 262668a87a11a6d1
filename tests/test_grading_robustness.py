"""Grading survives bad submissions: every one gets a score and feedback, and the run goes on."""
from __future__ import annotations

import csv
import os
from pathlib import Path

import nbformat
import pytest

from tests import grading_support as gs
from grader import sandbox
from grader.grade import grade

AID = "01_soft_attention_pytorch"
pytestmark = [pytest.mark.grading, pytest.mark.xdist_group("robustness")]


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> dict:
    course = gs.make_course(tmp_path_factory.mktemp("robust"), AID)
    gs.nbgrader(["generate_assignment", AID, "--force"], course)
    source = nbformat.read(course / "solutions" / AID / f"{AID}.ipynb", as_version=4)
    release = nbformat.read(course / "assignments" / AID / f"{AID}.ipynb", as_version=4)
    fills = gs.student_fill(source)
    subs = {
        "a_good": gs.fill_release(release, fills),
        "b_raises": gs.fill_release(release, {**fills, "masked_softmax": 'raise RuntimeError("half done")'}),
        "c_hangs": gs.fill_release(release, {**fills, "masked_softmax": "while True:\n    pass\n" + fills["masked_softmax"]}),
        "d_kills_kernel": gs.fill_release(release, {**fills, "top_k": "import os\nos._exit(1)"}),
        "e_huge_output": gs.fill_release(release, {**fills, "top_k": fills["top_k"] + '\nfor i in range(100000):\n    print("spam " * 20)'}),
        "f_deleted_tests": gs.fill_release(release, fills),
        "z_good_after": gs.fill_release(release, fills),
    }
    subs["f_deleted_tests"].cells = [c for c in subs["f_deleted_tests"].cells if not c.metadata.get("nbgrader", {}).get("grade")]
    for student, nb in subs.items():
        gs.write_submission(course, AID, student, nb)
    broken = course / "submitted" / "g_not_json" / AID
    broken.mkdir(parents=True)
    (broken / f"{AID}.ipynb").write_text("{ this is not a notebook")
    unsafe = sandbox.check() is not None and os.environ.get("CI") != "true"
    results = {r.student: r for r in grade(AID, course, timeout=10, unsafe=unsafe)}
    return {"course": course, "results": results, "by_hand": gs.hand_graded_points(source)}


def test_every_submission_gets_a_row_and_feedback(graded) -> None:
    course = graded["course"]
    rows = list(csv.DictReader((course / "grades" / f"{AID}.csv").open()))
    assert sorted(r["student"] for r in rows) == sorted(graded["results"])
    for student in graded["results"]:
        page = course / "feedback" / student / AID / f"{AID}.html"
        assert page.exists(), f"no feedback for {student}"


def test_good_submissions_get_full_marks_before_and_after_bad_ones(graded) -> None:
    for student in ("a_good", "z_good_after"):
        r = graded["results"][student]
        assert gs.full_marks(r, graded["by_hand"]), (student, r)


def test_exception_and_hang_give_partial_marks(graded) -> None:
    for student in ("b_raises", "c_hangs"):
        r = graded["results"][student]
        assert r.status == gs.graded_status(graded["by_hand"]) and 0 < r.score < r.max_score, (student, r)
    assert "10 s limit per cell" in graded["results"]["c_hangs"].note
    page = gs.visible_text((graded["course"] / "feedback" / "c_hangs" / AID / f"{AID}.html").read_text())
    assert "10 s limit per cell" in page


def test_dead_kernel_keeps_the_points_earned_before_it_died(graded) -> None:
    r = graded["results"]["d_kills_kernel"]
    assert r.status == gs.graded_status(graded["by_hand"]) and 0 < r.score < r.max_score and "kernel died" in r.note, r
    page = gs.visible_text((graded["course"] / "feedback" / "d_kills_kernel" / AID / f"{AID}.html").read_text())
    assert "kernel died" in page


def test_broken_file_gets_zero_with_a_reason(graded) -> None:
    r = graded["results"]["g_not_json"]
    assert r.status == "failed" and r.score == 0 and "not a valid notebook" in r.note, r
    page = (graded["course"] / "feedback" / "g_not_json" / AID / f"{AID}.html").read_text()
    assert "not a valid notebook" in page


def test_deleted_test_cells_are_restored_and_graded(graded) -> None:
    r = graded["results"]["f_deleted_tests"]
    assert gs.full_marks(r, graded["by_hand"]), r
    assert "restored" in r.note
    assert (graded["course"] / "grading_backups" / "f_deleted_tests" / AID / f"{AID}.ipynb").exists()


def test_huge_output_is_cut(graded) -> None:
    r = graded["results"]["e_huge_output"]
    assert gs.full_marks(r, graded["by_hand"]), r
    graded_nb = graded["course"] / "autograded" / "e_huge_output" / AID / f"{AID}.ipynb"
    assert graded_nb.stat().st_size < 500_000, f"autograded notebook is {graded_nb.stat().st_size} bytes"
