"""No grade is ever lost, on the gradebook nbgrader is configured with.

One class of two (assignment 01, PyTorch) lives through a term's accidents on a SQLite gradebook
outside the course folder (set in the course's nbgrader_config.py, as an instructor would): ann's
notebook was put in submitted/ by hand (no timestamp.txt) before the due date; both written answers
are graded in the formgrader's place; then FORCE=1, a one-student regrade, the grader crashing on
ann, a runner that fails twice, ben rewriting his written answer, and on a Dask cluster a worker
killed mid-student and a task that fails twice. Each step's files and gradebook are kept in
``story`` and checked by the tests below. A class of one is graded on a real PostgreSQL server.
"""
from __future__ import annotations

import copy
import csv
import json
import os
import re
import shutil
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import nbformat
import pytest
from distributed.diagnostics.plugin import WorkerPlugin

import grader.grade as grading
from grader import sandbox
from grader.grade import CSV_COLUMNS, after_hand_grading, grade
from tests import grading_support as gs

AID = "01_soft_attention_pytorch"
pytestmark = [pytest.mark.grading, pytest.mark.xdist_group("kept")]
UNSAFE = sandbox.check() is not None and os.environ.get("CI") != "true"
ARRIVED = datetime(2026, 1, 5, 9, 30)  # when ann's notebook was put in submitted/ (UTC), 5 days before
DUE = datetime(2026, 1, 10, 12, 0)  # the due date
BEN_WROTE = "1. The scaled scores keep the same order, so the same key wins. 2. I measured nothing."


class DoomedOnWorker(WorkerPlugin):
    """On every Dask worker (a restarted one too): grading a student whose fate is "die" kills the worker
    mid-student (after it has prepared the assignment), "raise" fails; every time. Each attempt is
    written to ``tally`` (a line with the student's id)."""

    name = "doomed-students"

    def __init__(self, fates: dict[str, str], tally: str) -> None:
        self.fates, self.tally = dict(fates), tally

    def setup(self, worker) -> None:
        import grader.grade as on_worker
        from grader import distributed as prepared

        real, fates, tally = on_worker.grade_one, self.fates, self.tally

        def doomed(student, *args, **kwargs):
            if student in fates:
                with open(tally, "a") as fh:
                    fh.write(student + "\n")
            if fates.get(student) == "die":
                for view in prepared._VIEWS.values():  # what the worker's exit would have removed
                    shutil.rmtree(view[2], ignore_errors=True)
                os._exit(1)
            if fates.get(student) == "raise":
                raise RuntimeError(f"the grader failed on {student}'s notebook")
            return real(student, *args, **kwargs)

        on_worker.grade_one = doomed


def _rows(course: Path) -> dict[str, dict]:
    with (course / "grades" / f"{AID}.csv").open(encoding="utf-8") as fh:
        return {r["student"]: r for r in csv.DictReader(fh)}


def _pages(course: Path) -> dict[str, bytes]:
    return {s: (course / "feedback" / s / AID / f"{AID}.html").read_bytes() for s in ("ann", "ben")}


def _hand(url: str, cell: str) -> dict[str, tuple]:
    """What the formgrader shows for each student's written answer: (points, comment, waits for grading)."""
    from nbgrader.api import Gradebook

    with Gradebook(url) as gb:
        out = {}
        for s in ("ann", "ben"):
            g, c = gb.find_grade(cell, AID, AID, s), gb.find_comment(cell, AID, AID, s)
            out[s] = (g.manual_score, c.manual_comment, g.needs_manual_grade)
        return out


def formgrader_grade(url: str, student: str, cell: str, points: float, comment: str) -> None:
    """What the formgrader's grade and comment boxes write (nbgrader's GradeHandler, CommentHandler)."""
    from nbgrader.api import Gradebook

    with Gradebook(url) as gb:
        g = gb.find_grade(cell, AID, AID, student)
        g.manual_score = points
        g.needs_manual_grade = False
        gb.find_comment(cell, AID, AID, student).manual_comment = comment
        gb.db.commit()


def formgrader_view(course: Path):
    """nbgrader's own API (what the formgrader serves), configured from the course's nbgrader_config.py."""
    from nbgrader.apps.api import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory
    from traitlets.config.loader import PyFileConfigLoader

    config = PyFileConfigLoader("nbgrader_config.py", path=str(course)).load_config()
    return NbGraderAPI(coursedir=CourseDirectory(config=config), config=config)


def _snapshot(course: Path, url: str, cell: str) -> dict:
    return {"rows": _rows(course), "pages": _pages(course), "hand": _hand(url, cell),
            "log": (course / "grades" / f"{AID}.log").read_text(encoding="utf-8")}


@pytest.fixture(scope="module")
def story(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("kept")
    course = gs.make_course(tmp, AID)
    db = tmp / "elsewhere" / "term.db"
    db.parent.mkdir()
    url = f"sqlite:///{db}"
    with (course / "nbgrader_config.py").open("a") as fh:
        fh.write(f"\nc.CourseDirectory.db_url = {url!r}  # the gradebook lives outside the course folder\n")
    gs.nbgrader(["generate_assignment", AID, "--force"], course)
    source = nbformat.read(course / "solutions" / AID / f"{AID}.ipynb", as_version=4)
    release = nbformat.read(course / "assignments" / AID / f"{AID}.ipynb", as_version=4)
    written = gs.written_answers(source)
    cell = "explain_scores"  # the story follows this written answer; the others are graded once, in full
    assert cell in written and written[cell] == 3, written
    full = gs.fill_release(release, gs.student_fill(source, written=True))
    ann = gs.write_submission(course, AID, "ann", full)
    (ann.parent / "timestamp.txt").unlink()  # put in submitted/ by hand, as the README allows
    arrived = ARRIVED.replace(tzinfo=timezone.utc).timestamp()
    os.utime(ann, (arrived, arrived))
    gs.write_submission(course, AID, "ben", full)  # timestamp.txt: 2026-01-01
    from nbgrader.api import Gradebook

    with Gradebook(url) as gb:  # as `nbgrader db assignment add --duedate` does
        gb.update_or_create_assignment(AID, duedate=DUE)
    seen: dict = {"course": course, "url": url, "db": db, "cell": cell, "source": source}

    seen["first"] = {r.student: r for r in grade(AID, course, jobs=2, unsafe=UNSAFE)}
    seen["first_files"] = _snapshot(course, url, cell)
    seen["first_view"] = {s: formgrader_view(course).get_submission(AID, s) for s in ("ann", "ben")}

    # The instructor grades both written answers in the formgrader, then `make feedback`.
    formgrader_grade(url, "ann", cell, 2.0, "ANN-COMMENT: right idea, the second point needs numbers.")
    formgrader_grade(url, "ben", cell, 3.0, "BEN-COMMENT: complete.")
    for other, points in written.items():
        if other != cell:
            for student in ("ann", "ben"):
                formgrader_grade(url, student, other, float(points), "")
    after_hand_grading(AID, course, jobs=1)
    seen["final"] = _snapshot(course, url, cell)

    # FORCE=1: everyone graded again, nothing changed.
    grade(AID, course, jobs=2, unsafe=UNSAFE, force=True)
    seen["force"] = _snapshot(course, url, cell)
    # One student again (make grade STUDENT=ann).
    grade(AID, course, jobs=1, unsafe=UNSAFE, students=["ann"])
    seen["one"] = _snapshot(course, url, cell)

    # The grader crashes while it grades ann.
    def crash(student, *args, **kwargs):
        raise MemoryError("the grading thread died")

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(grading, "grade_one", crash)
        grade(AID, course, jobs=1, unsafe=UNSAFE, students=["ann"])
    seen["crash"] = _snapshot(course, url, cell)

    # ann's runner fails twice (a kernel that cannot start on a busy machine, both times).
    runs = []

    def runner_fails(cells, settings, work):
        runs.append(work)
        return {"state": "runner error: the runner stopped (out of memory?)", "tests": {}}

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(grading, "run_sandboxed", runner_fails)
        grade(AID, course, jobs=1, unsafe=UNSAFE, students=["ann"])
    seen["runner"] = _snapshot(course, url, cell)
    seen["runner_runs"] = len(runs)

    # ben rewrites his written answer and submits again; timestamp.txt is the first one's.
    path = course / "submitted" / "ben" / AID / f"{AID}.ipynb"
    nb = nbformat.read(path, as_version=4)
    for c in nb.cells:
        if c.metadata.get("nbgrader", {}).get("grade_id") == cell:
            c.source = BEN_WROTE
    nbformat.write(nb, path)
    grade(AID, course, jobs=1, unsafe=UNSAFE)
    seen["changed"] = _snapshot(course, url, cell)
    seen["ledger"] = json.loads((course / "grades" / "hand-grades" / f"{AID}.json").read_text(encoding="utf-8"))
    return seen


def test_a_submission_without_timestamp_txt_is_dated_by_its_arrival_not_by_grading(story) -> None:
    ann, row = story["first"]["ann"], story["first_files"]["rows"]["ann"]
    assert ann.timestamp == ARRIVED and ann.penalty == 0, (ann.timestamp, ann.penalty)
    assert row["late_penalty"] == "0" and "no timestamp.txt" in row["note"] and "2026-01-05 09:30" in row["note"], row
    # the gradebook holds what nbgrader itself reads (no time), so the formgrader counts ann as autograded
    view = story["first_view"]["ann"]
    assert view["autograded"] and view["timestamp"] is None, view
    assert story["first_view"]["ben"]["autograded"]


def test_the_log_says_what_the_csv_says(story) -> None:
    rows, log = story["first_files"]["rows"], story["first_files"]["log"]
    for student, row in rows.items():
        assert f"{student}: {row['score']} / {row['max_score']} {row['status']}" in log, (row, log)
    assert rows["ben"]["status"] == "provisional" and float(rows["ben"]["max_score"]) > float(rows["ben"]["score"])


def test_force_and_one_student_regrades_keep_hand_grades_and_comments(story) -> None:
    final = story["final"]
    assert final["rows"]["ann"]["status"] == final["rows"]["ben"]["status"] == "graded", final["rows"]
    assert final["hand"]["ann"][:2] == (2.0, "ANN-COMMENT: right idea, the second point needs numbers.")
    for step in ("force", "one"):
        assert story[step]["hand"] == final["hand"], (step, story[step]["hand"])
        assert story[step]["rows"] == final["rows"], (step, story[step]["rows"], final["rows"])
    assert "ANN-COMMENT" in gs.visible_text(story["one"]["pages"]["ann"].decode())
    for student in ("ann", "ben"):  # FORCE=1 graded both again
        assert re.search(rf"^{student}: [0-9.]+ / [0-9.]+ graded", story["force"]["log"], re.M), story["force"]["log"]


def test_a_crash_and_a_runner_that_fails_twice_leave_the_good_result_in_place(story) -> None:
    good = story["one"]
    assert story["runner_runs"] == 2, "the runner was not tried a second time"
    for step, why in (("crash", "MemoryError"), ("runner", "could not be run to its end twice")):
        after = story[step]
        assert after["pages"] == good["pages"], f"{step}: a feedback page was replaced"
        assert after["hand"] == good["hand"], f"{step}: {after['hand']}"
        ann, before = after["rows"]["ann"], good["rows"]["ann"]
        assert {k: ann[k] for k in CSV_COLUMNS if k != "note"} == {k: before[k] for k in CSV_COLUMNS if k != "note"}
        assert ann["note"].startswith(before["note"]) and "could not finish" in ann["note"] and why in ann["note"], ann
        assert "last good result" in ann["note"] and "same submission" in ann["note"], ann["note"]
        assert after["rows"]["ben"] == good["rows"]["ben"]
        assert re.search(rf"^ann: grading could not finish \(.*{why}.*the last good result stays", after["log"], re.M)
    # the second report replaced the first rather than piling up
    assert story["runner"]["rows"]["ann"]["note"].count("could not finish") == 1


def test_a_changed_written_answer_waits_again_and_its_old_grade_is_kept_on_record(story) -> None:
    after, before = story["changed"], story["runner"]
    ben = after["rows"]["ben"]
    assert ben["status"] == "provisional" and story["cell"] in ben["note"], ben
    assert float(ben["score"]) == float(before["rows"]["ben"]["score"]) - 3, (ben, before["rows"]["ben"])
    assert after["hand"]["ben"] == (None, None, True), after["hand"]["ben"]
    assert after["hand"]["ann"] == before["hand"]["ann"] and after["rows"]["ann"] == before["rows"]["ann"]
    (kept,) = [e for e in story["ledger"]["set_aside"] if e["student"] == "ben"]
    assert (kept["cell"], kept["manual_score"], kept["comment"]) == (story["cell"], 3.0, "BEN-COMMENT: complete.")
    assert kept["answer"] != kept["replaced_by"]
    assert "BEN-COMMENT" not in gs.visible_text(after["pages"]["ben"].decode())


def test_the_gradebook_is_the_configured_one(story) -> None:
    course = story["course"]
    assert story["db"].is_file() and not (course / "gradebook.db").exists(), "a second gradebook in the course folder"
    view = formgrader_view(course)
    rows = _rows(course)
    for s in ("ann", "ben"):
        sub = view.get_submission(AID, s)
        assert float(rows[s]["score"]) == sub["score"] - float(rows[s]["late_penalty"]), (rows[s], sub)
    assert view.get_submission(AID, "ben")["needs_manual_grade"]


def test_a_worker_killed_mid_student_and_a_task_that_fails_twice_keep_the_good_results(story, tmp_path) -> None:
    import dask
    import distributed

    course, url, cell = story["course"], story["url"], story["cell"]
    before = _snapshot(course, url, cell)
    logs = {}
    # allowed-failures 0: the first worker lost with ann's task fails it (as if every retry had died too).
    # One student per run, so ben's task is never on the dying worker: it fails twice by itself.
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
        with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                      dashboard_address=":0") as cluster, distributed.Client(cluster) as client:
            tally = tmp_path / "attempts.txt"
            client.register_plugin(DoomedOnWorker({"ann": "die", "ben": "raise"}, str(tally)))
            for student in ("ann", "ben"):
                grade(AID, course, unsafe=UNSAFE, students=[student], scheduler=cluster.scheduler_address)
                logs[student] = (course / "grades" / f"{AID}.log").read_text(encoding="utf-8")
    after = _snapshot(course, url, cell)
    assert sorted(tally.read_text().split()) == ["ann", "ben", "ben"], tally.read_text()  # ben's task: tried twice
    assert after["pages"] == before["pages"] and after["hand"] == before["hand"]
    for student, why in (("ann", "KilledWorker"), ("ben", "RuntimeError")):
        row, old = after["rows"][student], before["rows"][student]
        assert {k: row[k] for k in CSV_COLUMNS if k != "note"} == {k: old[k] for k in CSV_COLUMNS if k != "note"}, row
        assert why in row["note"] and "last good result" in row["note"], row["note"]
        assert re.search(rf"^{student}: grading could not finish \(.*{why}", logs[student], re.M), logs[student]


def test_csv_columns_are_those_the_readme_and_the_docstring_list(story) -> None:
    with (story["course"] / "grades" / f"{AID}.csv").open(encoding="utf-8") as fh:
        assert next(csv.reader(fh)) == CSV_COLUMNS
    texts = {str(p.relative_to(gs.ROOT)): p.read_text(encoding="utf-8")
             for p in [gs.ROOT / "README.md", *sorted((gs.ROOT / "docs").glob("**/*.md"))]}
    texts["grader/grade.py"] = grading.__doc__
    assert "grades/<id>.csv" in "".join(texts.values())
    for name, text in texts.items():
        for found in re.findall(r"grades/<id>\.csv`*\s*\((?:columns\s+)?([a-z_, \n]+?)[);:]", text):
            assert [c.strip() for c in found.split(",")] == CSV_COLUMNS, (name, found)


def test_make_grade_puts_an_absolute_venv_first_on_path() -> None:
    venv = Path(sys.executable).parent.parent.absolute()
    proc = subprocess.run(["make", "-n", "grade", f"ASSIGNMENT={AID}", f"VENV={venv}"], cwd=gs.ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    (line,) = [x for x in proc.stdout.splitlines() if "-m grader" in x]
    path = re.search(r'PATH="([^"]*?):\$PATH"', line).group(1)
    assert Path(path) == venv / "bin" and (Path(path) / "alembic").is_file(), line


# --- a real PostgreSQL server ---------------------------------------------------------------------


@pytest.fixture
def postgres():
    try:
        server = gs.PostgresServer()
    except (RuntimeError, ImportError, OSError, subprocess.SubprocessError) as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"a PostgreSQL server is needed under CI=true: {exc}")
        pytest.skip(f"no PostgreSQL server could be started here: {exc}")
    try:
        yield server
    finally:
        server.close()


def test_a_postgresql_gradebook_is_shared_by_make_grade_and_the_formgrader(postgres, tmp_path, monkeypatch,
                                                                          capsys) -> None:
    course = gs.make_course(tmp_path, AID)
    gs.nbgrader(["generate_assignment", AID, "--force"], course)
    (course / "gradebook.db").unlink()  # the release is made; the course's gradebook is PostgreSQL from here on
    with (course / "nbgrader_config.py").open("a") as fh:
        fh.write(f"\nc.CourseDirectory.db_url = {postgres.url!r}\n")
    source = nbformat.read(course / "solutions" / AID / f"{AID}.ipynb", as_version=4)
    release = nbformat.read(course / "assignments" / AID / f"{AID}.ipynb", as_version=4)
    gs.write_submission(course, AID, "ann", gs.fill_release(release, gs.student_fill(source, written=True)))
    # make grade with a PATH that lacks the environment's bin folder (as VENV=<absolute path> gave it):
    # nbgrader needs its `alembic` command to create the gradebook's tables
    env = {**gs.nbgrader_env(), "PATH": "/usr/bin:/bin"}
    command = [sys.executable, "-m", "grader", AID, "--course", str(course), "--jobs", "1"] + (["--unsafe"] * UNSAFE)
    proc = subprocess.run(command, cwd=gs.ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "Warning" not in proc.stderr, proc.stderr[-3000:]  # SQLAlchemy's about nbgrader's sessions included
    assert not (course / "gradebook.db").exists(), "the grader wrote a SQLite gradebook beside the configured one"
    assert postgres.query("SELECT student_id FROM submitted_assignment") == [("ann",)]
    by_hand = gs.hand_graded_points(source)
    view = formgrader_view(course).get_submission(AID, "ann")
    row = _rows(course)["ann"]
    assert view["autograded"] and view["needs_manual_grade"] and row["status"] == "provisional", (view, row)
    assert view["score"] == float(row["score"]) == float(row["max_score"]) - by_hand > 0, (view, row)

    written = list(gs.written_answers(source).items())
    assert sum(points for _, points in written) == by_hand and written[-1][1] >= 1, written
    for cell, points in written[:-1]:  # every written answer graded; the last one loses a point
        formgrader_grade(postgres.url, "ann", cell, points, "")
    formgrader_grade(postgres.url, "ann", written[-1][0], written[-1][1] - 1, "PG-COMMENT: nearly.")
    proc = subprocess.run([sys.executable, "-m", "grader", AID, "--after-hand-grading", "--course", str(course)],
                          cwd=gs.ROOT, env=gs.nbgrader_env(), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    row = _rows(course)["ann"]
    view = formgrader_view(course).get_submission(AID, "ann")
    assert row["status"] == "graded" and float(row["score"]) == view["score"] == float(row["max_score"]) - 1, (row, view)
    assert "PG-COMMENT" in gs.visible_text((course / "feedback" / "ann" / AID / f"{AID}.html").read_text())

    # The database goes away: the run still writes its rows, but says so and fails.
    postgres.stop()
    last = grading.load_results(course, AID)["ann"]
    monkeypatch.setattr(grading, "grade_one", lambda student, *a, **k: (copy.deepcopy(last), None))
    code = grading.main([AID, "--course", str(course), "--student", "ann", "--jobs", "1"] + (["--unsafe"] * UNSAFE))
    err = capsys.readouterr().err
    assert code != 0 and "not recorded in the gradebook" in err and "ann" in err, err
    assert "not recorded in the gradebook" in _rows(course)["ann"]["note"]
