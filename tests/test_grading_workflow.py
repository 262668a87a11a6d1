"""The whole nbgrader workflow through nbgrader's own exchange, with ``python -m grader`` in the middle.

release -> fetch -> submit (three students, each with their own home folder) ->
collect -> grade -> release feedback -> fetch feedback -> export.
"""
from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from tests import grading_support as gs
from grader import sandbox
from grader.grade import grade

AID = "01_soft_attention_pytorch"
COURSE_ID = "attention-course"
pytestmark = [pytest.mark.grading, pytest.mark.xdist_group("workflow")]


def student_run(args: list[str], home: Path, user: str, exchange: Path) -> subprocess.CompletedProcess:
    """An nbgrader command as a student would run it: in their own home, as their own user name."""
    env = gs.nbgrader_env()
    env.update(HOME=str(home), USER=user, LOGNAME=user)
    # On a shared JupyterHub nbgrader takes the student id from the login; here every student
    # is the same OS user, so the id is given as nbgrader allows.
    proc = subprocess.run([sys.executable, "-m", "nbgrader", *args, f"--course={COURSE_ID}",
                           f"--Exchange.root={exchange}", f"--student={user}"], cwd=home, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, f"nbgrader {' '.join(args)} as {user}: {proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    return proc


def test_release_fetch_submit_collect_grade_feedback_export(tmp_path) -> None:
    course = gs.make_course(tmp_path, AID)
    exchange = course / "exchange"
    exchange.mkdir(mode=0o777)
    os.chmod(exchange, 0o777)
    gs.nbgrader(["generate_assignment", AID, "--force"], course)
    gs.nbgrader(["release_assignment", AID, "--force"], course)

    source = nbformat.read(course / "solutions" / AID / f"{AID}.ipynb", as_version=4)
    fills = gs.student_fill(source)
    answers = {"alice": fills, "bob": {**fills, "top_k": "raise RuntimeError('not done')"}, "carol": {}}
    homes = {}
    for student, fill in answers.items():
        home = tmp_path / "home" / student
        home.mkdir(parents=True)
        homes[student] = home
        student_run(["fetch_assignment", AID], home, student, exchange)
        path = home / AID / f"{AID}.ipynb"
        assert path.exists(), f"{student}: fetch_assignment made no {path}"
        nb = gs.fill_release(nbformat.read(path, as_version=4), fill)
        nbformat.write(nb, path)
        student_run(["submit", AID], home, student, exchange)

    gs.nbgrader(["collect", AID], course)
    for student in answers:
        assert (course / "submitted" / student / AID / f"{AID}.ipynb").exists(), f"{student} was not collected"

    unsafe = sandbox.check() is not None and os.environ.get("CI") != "true"
    results = {r.student: r for r in grade(AID, course, jobs=2, unsafe=unsafe)}
    assert gs.full_marks(results["alice"], gs.hand_graded_points(source)), results["alice"]
    assert 0 < results["bob"].score < results["bob"].max_score
    assert results["carol"].score == 0

    gs.nbgrader(["release_feedback", AID], course)
    for student in answers:
        student_run(["fetch_feedback", AID], homes[student], student, exchange)
        pages = list((homes[student] / AID / "feedback").glob(f"*/{AID}.html"))
        assert len(pages) == 1, f"{student}: fetched feedback pages {pages}"
        text = gs.visible_text(pages[0].read_text(encoding="utf-8"))
        assert f"Score: {results[student].score:.1f} / {results[student].max_score:.1f}" in text, text[:500]

    export = course / "grades_export.csv"
    gs.nbgrader(["export", f"--to={export}"], course)
    rows = {r["student_id"]: r for r in csv.DictReader(export.open()) if r["assignment"] == AID}
    assert sorted(rows) == sorted(answers)
    for student, r in results.items():
        assert float(rows[student]["score"]) == r.score, (student, rows[student], r.score)


def test_grading_benchmark_runs(tmp_path) -> None:
    """A tiny run of ``python -m benchmarks.grading``: every submission graded, the documented fields."""
    from benchmarks import grading as bench

    if sandbox.check() is not None and os.environ.get("CI") != "true":
        pytest.skip(f"grading sandbox unavailable: {sandbox.check()}")

    out = bench.main(["--assignment", AID, "--count", "4", "--jobs", "1", "--skip-nbgrader",
                      "--json", str(tmp_path / "g.json")])
    run = out["runs"]["grader_jobs1"]
    assert run["graded"] == 4 and run["per_minute"] > 0
    assert run["mean_score_by_kind"]["correct"] == 12 and run["mean_score_by_kind"]["partial"] < 12
    assert run["report"]["all_counted"] and sum(run["report"]["expected"].values()) == 1, run["report"]
    assert (tmp_path / "g.json").exists()
