"""Hand-graded written answers, end to end, with nbgrader's own API in the instructor's place.

For one PyTorch and one TensorFlow assignment with a written answer: `make grade` leaves the answer
to the instructor (the CSV says provisional and which cells wait); the instructor's grade and comment,
written through the gradebook as the formgrader writes them, reach the final CSV and the feedback page
(`make feedback`); a resubmission with the same answer keeps them, a new answer waits again.
"""
from __future__ import annotations

import csv
import os
import subprocess
import sys

import nbformat
import pytest

from grader import gradebook, sandbox
from grader.grade import grade
from tests import grading_support as gs

pytestmark = [pytest.mark.grading]
UNSAFE = sandbox.check() is not None and os.environ.get("CI") != "true"


def _written(aid: str) -> list[str]:
    nb = nbformat.read(gs.ROOT / "solutions" / aid / f"{aid}.ipynb", as_version=4)
    return [c.metadata["nbgrader"]["grade_id"] for c in nb.cells
            if c.metadata.get("nbgrader", {}).get("grade") and c.metadata["nbgrader"].get("solution")]


def first_with_written_answers(framework: str) -> str | None:
    return next((aid for aid in gs.assignment_ids() if aid.endswith(framework) and _written(aid)), None)


@pytest.mark.parametrize("framework", ["pytorch", "tensorflow"])
def test_written_answers_wait_for_the_instructor_then_reach_csv_and_feedback(framework, tmp_path) -> None:
    aid = first_with_written_answers(framework)
    assert aid, f"no {framework} assignment has a hand-graded written answer"
    course = gs.make_course(tmp_path, aid)
    gs.nbgrader(["generate_assignment", aid, "--force"], course)
    source = nbformat.read(course / "solutions" / aid / f"{aid}.ipynb", as_version=4)
    release = nbformat.read(course / "assignments" / aid / f"{aid}.ipynb", as_version=4)
    gs.write_submission(course, aid, "ada", gs.fill_release(release, gs.student_fill(source, written=True)))
    r = grade(aid, course, jobs=1, unsafe=UNSAFE)[0]
    written = _written(aid)
    by_hand = sum(float(c.metadata["nbgrader"]["points"]) for c in source.cells
                  if c.metadata.get("nbgrader", {}).get("grade_id") in written)
    assert r.status == "provisional" and r.score == r.max_score - by_hand, (r.status, r.score, r.max_score)
    assert all(gid in r.note for gid in written), r.note
    row = next(csv.DictReader((course / "grades" / f"{aid}.csv").open()))
    assert row["status"] == "provisional"

    from nbgrader.api import Gradebook

    with Gradebook(gradebook.configured(course).db_url) as gb:  # what the formgrader writes
        for gid in written:
            grade_ = gb.find_grade(gid, aid, aid, "ada")
            assert grade_.needs_manual_grade
            points = float(grade_.max_score) - 1
            grade_.manual_score = points
            comment = gb.find_comment(gid, aid, aid, "ada")
            comment.manual_comment = f"RUBRIC-COMMENT-{gid}: right idea; the second point needs the measured numbers."
        gb.db.commit()
    proc = subprocess.run([sys.executable, "-m", "grader", aid, "--after-hand-grading", "--course", str(course)],
                          cwd=gs.ROOT, capture_output=True, text=True, timeout=600, env=gs.nbgrader_env())
    assert proc.returncode == 0, proc.stderr[-2000:]
    row = next(csv.DictReader((course / "grades" / f"{aid}.csv").open()))
    assert row["status"] == "graded" and float(row["score"]) == r.max_score - len(written), row
    page = gs.visible_text((course / "feedback" / "ada" / aid / f"{aid}.html").read_text(encoding="utf-8"))
    for gid in written:
        assert f"RUBRIC-COMMENT-{gid}" in page
    hidden = gs.secret_lines(source, gs.BEGIN_SOLUTION, gs.END_SOLUTION)
    own = "\n".join(gs.student_fill(source, written=True).values())
    assert not [line for line in hidden if line in page and line not in own]

    # Submitted again with new written answers: they wait for the instructor again. (The same answers
    # submitted again keep their grades: tests/test_grades_kept.py.)
    (course / "submitted" / "ada" / aid / "timestamp.txt").write_text("2026-01-02 00:00:00.000000 UTC")
    path = course / "submitted" / "ada" / aid / f"{aid}.ipynb"
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") in written:
            cell.source += "\n\nOn second thought: the measured numbers say otherwise."
    nbformat.write(nb, path)
    r = grade(aid, course, jobs=1, unsafe=UNSAFE)[0]
    assert r.status == "provisional", (r.status, r.note)
