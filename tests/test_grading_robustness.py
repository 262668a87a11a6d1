"""Grading survives bad submissions: every one gets a score and feedback, and the run goes on."""
from __future__ import annotations

import csv
from pathlib import Path

import nbformat
import pytest

from tests import grading_support as gs
from tools.grade import grade

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
        "d_kills_kernel": gs.fill_release(release, {**fills, "additive": "import os\nos._exit(1)"}),
        "e_huge_output": gs.fill_release(release, {**fills, "additive": fills["additive"] + '\nfor i in range(100000):\n    print("spam " * 20)'}),
        "f_deleted_tests": gs.fill_release(release, fills),
        "z_good_after": gs.fill_release(release, fills),
    }
    subs["f_deleted_tests"].cells = [c for c in subs["f_deleted_tests"].cells if not c.metadata.get("nbgrader", {}).get("grade")]
    for student, nb in subs.items():
        gs.write_submission(course, AID, student, nb)
    broken = course / "submitted" / "g_not_json" / AID
    broken.mkdir(parents=True)
    (broken / f"{AID}.ipynb").write_text("{ this is not a notebook")
    results = {r.student: r for r in grade(AID, course, timeout=10)}
    return {"course": course, "results": results}


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
        assert r.status == "graded" and r.score == r.max_score > 0, (student, r)


def test_exception_and_hang_give_partial_marks(graded) -> None:
    for student in ("b_raises", "c_hangs"):
        r = graded["results"][student]
        assert r.status == "graded" and 0 < r.score < r.max_score, (student, r)
    page = gs.visible_text((graded["course"] / "feedback" / "c_hangs" / AID / f"{AID}.html").read_text())
    assert "Timeout" in page or "KeyboardInterrupt" in page or "CellTimeoutError" in page


def test_dead_kernel_and_broken_file_get_zero_with_a_reason(graded) -> None:
    for student, words in (("d_kills_kernel", "kernel died"), ("g_not_json", "not a valid notebook")):
        r = graded["results"][student]
        assert r.status == "failed" and r.score == 0 and words in r.note, (student, r)
        page = (graded["course"] / "feedback" / student / AID / f"{AID}.html").read_text()
        assert words in page


def test_deleted_test_cells_are_restored_and_graded(graded) -> None:
    r = graded["results"]["f_deleted_tests"]
    assert r.status == "graded" and r.score == r.max_score, r
    assert "restored" in r.note
    assert (graded["course"] / "grading_backups" / "f_deleted_tests" / AID / f"{AID}.ipynb").exists()


def test_huge_output_is_cut(graded) -> None:
    r = graded["results"]["e_huge_output"]
    assert r.status == "graded" and r.score == r.max_score, r
    graded_nb = graded["course"] / "autograded" / "e_huge_output" / AID / f"{AID}.ipynb"
    assert graded_nb.stat().st_size < 500_000, f"autograded notebook is {graded_nb.stat().st_size} bytes"
