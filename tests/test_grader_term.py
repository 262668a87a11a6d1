"""The instructor's term after grading, driven as an instructor drives it: files in, files out.

One small class of assignment 01 (PyTorch) is graded once and shared: the class
report and its mistake counts, the similarity check (a renamed copy flagged, an
independent solution not), the LMS exports with a roster, a late penalty from
nbgrader's plug-in, regrading one student, a rerun that keeps unchanged work,
and the term's pages across assignments.
"""
from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path

import nbformat
import pytest
import yaml

from grader import gradebook, sandbox
from grader.grade import grade
from tests import grading_support as gs

AID = "01_soft_attention_pytorch"
pytestmark = [pytest.mark.grading, pytest.mark.xdist_group("term")]
UNSAFE = sandbox.check() is not None and os.environ.get("CI") != "true"


def renamed(code: str) -> str:
    """A copy with every variable and parameter a student would rename changed, and a comment added."""
    import ast
    import re

    names = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
    for i, name in enumerate(sorted(names - {"self"})):
        code = re.sub(rf"(?<![.\w]){name}\b", f"my_{i}_{name[::-1]}", code)  # not attributes: `.values` stays
    return "# my own work\n" + code


def as_handed_in(code: str) -> str:
    """The solution's find-and-fix cell shows the colleague's function and then the fixed one; a student
    hands in the fixed one alone."""
    fixed = code.find("def masked_log_softmax(scores, mask=None):  # fixed")
    return code[fixed:] if fixed >= 0 else code


@pytest.fixture(scope="module")
def term(tmp_path_factory) -> dict:
    course = gs.make_course(tmp_path_factory.mktemp("term"), AID)
    gs.nbgrader(["generate_assignment", AID, "--force"], course)
    source = nbformat.read(course / "solutions" / AID / f"{AID}.ipynb", as_version=4)
    release = nbformat.read(course / "assignments" / AID / f"{AID}.ipynb", as_version=4)
    fills = gs.student_fill(source)
    mutants = yaml.safe_load((gs.ROOT / "tests" / "mutants" / f"{AID}.yml").read_text())[:2]
    subs = {"alice": fills, "bob_copy": {k: renamed(as_handed_in(v)) for k, v in fills.items()}, "erin_blank": {}}
    for i, m in enumerate(mutants):
        code = fills[m["cell"]]
        for old, new in m["replace"]:
            code = code.replace(old, new)
        subs[f"mutant{i}"] = {**fills, m["cell"]: code}
    for student, cells in subs.items():
        gs.write_submission(course, AID, student, gs.fill_release(release, cells))
    # frank submits 2.5 days after the due date set below
    due = datetime(2026, 1, 10, 12, 0, 0)
    late = gs.write_submission(course, AID, "frank_late", gs.fill_release(release, fills))
    (late.parent / "timestamp.txt").write_text(f"{due + timedelta(days=2, hours=12):%Y-%m-%d %H:%M:%S}.000000 UTC")
    results = {r.student: r for r in grade(AID, course, jobs=2, unsafe=UNSAFE)}
    from nbgrader.api import Gradebook

    with Gradebook(gradebook.configured(course).db_url) as gb:  # as `nbgrader db assignment add --duedate` does
        gb.update_or_create_assignment(AID, duedate=due)
    results = {r.student: r for r in grade(AID, course, jobs=2, unsafe=UNSAFE, students=["frank_late"])}
    return {"course": course, "results": results, "mutants": mutants, "source": source, "fills": fills,
            "release": release}


def test_the_class_report_shows_each_mistake_with_its_count(term) -> None:
    course = term["course"]
    data = json.loads((course / "grades" / f"{AID}-report.json").read_text(encoding="utf-8"))
    assert data["students"] == 6 and sorted(data["scores"]) == sorted(
        r.score - r.penalty for r in term["results"].values())
    found = {m["mistake"]: m["students"] for ex in data["exercises"] for m in ex["mistakes"]}
    # the renamed copy is a right answer: it scores what alice scores and shows in no mistake's count
    assert term["results"]["bob_copy"].score == term["results"]["alice"].score > 0, term["results"]["bob_copy"].note
    told = {s: "\n".join(message for _, _, message in r.tests.values()) for s, r in term["results"].items()}
    for m in term["mutants"]:
        hits = [name for name in found if m["message"] in name]
        # the mutant's student, and erin where her blank notebook keeps the release's find-and-fix bug
        expected = 1 + (m["message"] in told["erin_blank"])
        assert hits and all(found[name] == expected for name in hits), (m["message"], expected, found)
    assert found.get("not implemented") == 1  # erin, in each exercise
    page = (course / "grades" / f"{AID}-report.html").read_text(encoding="utf-8")
    assert page.count('src="data:image/png;base64,') == 2 and "What to reteach" in page
    source_text = "\n".join(c.source for c in term["source"].cells if c.cell_type == "code")
    answers = gs.significant_lines("\n".join(term["fills"].values()))
    assert not [line for line in answers if line in gs.visible_text(page)], "the report shows student code"
    hidden = gs.secret_lines(term["source"], gs.BEGIN_HIDDEN, gs.END_HIDDEN)
    assert hidden and not [line for line in hidden if line in page], "the report shows hidden test text"
    assert source_text  # the source was read


def test_similarity_flags_a_renamed_copy_and_not_independent_work(term) -> None:
    course = term["course"]
    proc = subprocess.run([sys.executable, "-m", "grader.similarity", AID, "--course", str(course)],
                          cwd=gs.ROOT, capture_output=True, text=True, timeout=600, env=gs.nbgrader_env())
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = json.loads((course / "grades" / f"{AID}-similarity.json").read_text())
    pairs = {tuple(p["students"]): p["similarity"] for p in data["pairs"]}
    assert ("alice", "bob_copy") in pairs and pairs[("alice", "bob_copy")] >= 0.9, pairs
    assert not [pair for pair in pairs if "erin_blank" in pair], "the release's stubs are boilerplate"
    page = (course / "grades" / f"{AID}-similarity.html").read_text()
    assert "alice" in page and "bob_copy" in page and "<script" not in page.lower()


def test_similarity_leaves_two_independent_correct_answers_alone(term, tmp_path) -> None:
    from grader import similarity

    course = tmp_path / "course"
    for part in ("solutions", "assignments"):
        (course / part).mkdir(parents=True)
        os.symlink(term["course"] / part / AID, course / part / AID)
    gs.write_submission(course, AID, "alice", gs.fill_release(term["release"], term["fills"]))
    gs.write_submission(course, AID, "gina", gs.fill_release(term["release"], {"masked_log_softmax": (
        "def masked_log_softmax(scores, mask=None):\n"
        "    if mask is not None:\n"
        "        scores = scores.masked_fill(~mask, float('-inf'))\n"
        "    top = scores.max(dim=-1, keepdim=True).values.nan_to_num(neginf=0.0)\n"
        "    lse = top + torch.exp(scores - top).sum(dim=-1, keepdim=True).clamp(min=1e-30).log()\n"
        "    return scores - lse\n")}))
    assert similarity.compare(course, AID)["pairs"] == []


def test_lms_exports_use_the_roster_and_leave_no_silent_zero(term, tmp_path) -> None:
    course = term["course"]
    roster = tmp_path / "roster.csv"
    students = sorted(term["results"])
    rows = [{"student_id": s, "name": s.title(), "canvas_id": str(1000 + i), "sis_user_id": f"u{i}",
             "sis_login_id": f"{s}@uni", "section": "A", "email": f"{s}@uni.example", "id_number": f"N{i}"}
            for i, s in enumerate(students + ["henry_absent"])]
    with roster.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    for lms, lead in (("Canvas", "Student"), ("Moodle", "First name")):
        out = tmp_path / f"{lms}.csv"
        # the written answers wait for hand grading: provisional scores leave only when asked for
        gs.nbgrader(["export", f"--exporter=grader.export.{lms}Export", f"--{lms}Export.roster={roster}",
                     f"--{lms}Export.allow_provisional=True", f"--to={out}"], course)
        table = [r for r in csv.DictReader(out.open()) if r[lead].strip() != "Points Possible"]
        assert list(table[0])[0] == lead and AID in table[0]
        by = {r["SIS Login ID"].split("@")[0] if lms == "Canvas" else r["Email address"].split("@")[0]: r for r in table}
        assert by["henry_absent"][AID] == "", "a student without a submission gets an empty grade, not 0"
        assert float(by["alice"][AID]) == term["results"]["alice"].max_score - gs.hand_graded_points(term["source"])
        assert float(by["frank_late"][AID]) == term["results"]["frank_late"].score - term["results"]["frank_late"].penalty
    short = tmp_path / "short.csv"
    short.write_text("student_id,name\nalice,Alice\n")
    proc = gs.nbgrader(["export", "--exporter=grader.export.CanvasExport", f"--CanvasExport.roster={short}",
                        "--CanvasExport.allow_provisional=True", f"--to={tmp_path / 'x.csv'}"], course, check=False)
    assert proc.returncode != 0 and "not on the roster" in proc.stdout + proc.stderr


def test_a_late_submission_loses_what_the_configured_plugin_says(term) -> None:
    """nbgrader_config.py: one point per started day late, at most three (2.5 days: 3 points)."""
    course, frank = term["course"], term["results"]["frank_late"]
    auto = frank.max_score - gs.hand_graded_points(term["source"])  # written answers wait for the instructor
    assert frank.score == auto and frank.penalty == 3.0, (frank.score, frank.penalty)
    row = next(r for r in csv.DictReader((course / "grades" / f"{AID}.csv").open()) if r["student"] == "frank_late")
    assert row["late_penalty"] == "3" and float(row["score"]) == auto - 3 and "late" in row["note"]
    from nbgrader.api import Gradebook

    with Gradebook(gradebook.configured(course).db_url) as gb:
        assert gb.find_submission_notebook(AID, AID, "frank_late").late_submission_penalty == 3.0
    page = gs.visible_text((course / "feedback" / "frank_late" / AID / f"{AID}.html").read_text())
    assert "Late submission penalty (Score: -3.0)" in page


def test_regrading_one_student_leaves_the_others_and_an_unchanged_rerun_runs_nothing(term) -> None:
    course = term["course"]
    before = {r["student"]: r for r in csv.DictReader((course / "grades" / f"{AID}.csv").open())}
    assert set(before) == set(term["results"]) and before["alice"]["score"] == "12"
    log = (course / "grades" / f"{AID}.log").read_text()
    graded = [line.split(": ")[0] for line in log.splitlines() if ": " in line]  # (the sandbox's line has none)
    assert graded == ["frank_late"], log  # only frank was graded again
    # a rerun of everyone: nothing changed, nothing runs
    grade(AID, course, jobs=2, unsafe=UNSAFE)
    log = (course / "grades" / f"{AID}.log").read_text()
    assert log.count("unchanged since the last run, kept") == len(term["results"]), log
    after = {r["student"]: r for r in csv.DictReader((course / "grades" / f"{AID}.csv").open())}
    assert after == before


def test_the_term_report_has_a_page_per_student(term) -> None:
    course = term["course"]
    proc = subprocess.run([sys.executable, "-m", "grader.report", "--course", str(course)], cwd=gs.ROOT,
                          capture_output=True, text=True, timeout=300, env=gs.nbgrader_env())
    assert proc.returncode == 0, proc.stderr[-2000:]
    index = (course / "grades" / "report" / "index.html").read_text()
    assert AID in index and "frank_late" in index
    page = gs.visible_text((course / "grades" / "report" / "students" / "frank_late.html").read_text())
    frank = term["results"]["frank_late"]
    assert f"{frank.score - frank.penalty:g} / {frank.max_score:g}" in page, page
