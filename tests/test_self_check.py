"""`make check`: the course's own grader on one learner's notebook, without a class.

One PyTorch and one TensorFlow assignment, three notebooks each, one `make check` run per
notebook (shared by the tests below): a correct one (written answer included), the blank
release, and a mistaken one whose mistake only a hidden test catches (a zero-length
vector gives NaN in ``cosine_scores``). The output and the feedback page must carry the
hidden tests' verdicts and messages, the per-exercise scores, where the code ran
(sandbox or not), and the model answer only after a written answer. A seventh run checks
the mistaken notebook in a course folder without ``solutions/``: only the visible tests
run, and the check says so, never that all tests pass. Nothing is written outside the
check's own folder.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import yaml

from grader import check as check_mod
from grader import plan, sandbox
from tests import grading_support as gs

pytestmark = [pytest.mark.xdist_group("self-check")]

ROOT = gs.ROOT
ASSIGNMENTS = ("01_soft_attention_pytorch", "01_soft_attention_tensorflow")
MISTAKE = "cosine, a zero vector gives NaN"  # the same mutant in both twins' files
HIDDEN_TEST, HIDDEN_MESSAGE = "test_cosine_hidden", "NaN where a query or a key has length 0"
WRITTEN = "explain_scores"
CLASS_STATE = ("gradebook.db", "submitted", "autograded", "feedback", "grades", "grading_backups")


def _notebooks(assignment: str, folder: Path) -> dict[str, Path]:
    source = nbformat.read(ROOT / "solutions" / assignment / f"{assignment}.ipynb", as_version=4)
    release = nbformat.read(ROOT / "assignments" / assignment / f"{assignment}.ipynb", as_version=4)
    fills = gs.student_fill(source)
    mutant = next(m for m in yaml.safe_load((ROOT / "tests" / "mutants" / f"{assignment}.yml").read_text())
                  if m["name"] == MISTAKE)
    code = fills[mutant["cell"]]
    for old, new in mutant["replace"]:
        assert old in code, f"the mutant {MISTAKE!r} no longer applies to {assignment}"
        code = code.replace(old, new)
    notebooks = {"correct": gs.fill_release(release, gs.student_fill(source, written=True)),
                 "blank": release, "mistaken": gs.fill_release(release, {**fills, mutant["cell"]: code})}
    paths = {}
    for name, nb in notebooks.items():
        paths[name] = folder / f"{name}.ipynb"
        nbformat.write(nb, paths[name])
    return paths


def _state() -> dict[str, float]:
    return {name: (ROOT / name).stat().st_mtime for name in CLASS_STATE if (ROOT / name).exists()}


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict:
    """(assignment, notebook) -> {"out": stdout, "page": the page's visible text, "rc": exit code}."""
    env = dict(os.environ, COURSE_PROFILE="smoke", COURSE_THREADS="1", OMP_NUM_THREADS="1")
    before = _state()
    done = {}
    for assignment in ASSIGNMENTS:
        folder = tmp_path_factory.mktemp(assignment)
        for name, path in _notebooks(assignment, folder).items():
            out = folder / f"check-{name}"
            argv = ["make", "--no-print-directory", "check", f"ASSIGNMENT={assignment}", f"NOTEBOOK={path}", f"OUT={out}"]
            proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
            page = out / f"{assignment}.html"
            done[assignment, name] = {"out": proc.stdout, "err": proc.stderr, "rc": proc.returncode, "dir": out,
                                      "page": gs.visible_text(page.read_text(encoding="utf-8")) if page.exists() else ""}
        if assignment.endswith("_pytorch"):  # the hub case: a course folder without solutions/
            course = folder / "course"
            (course / "assignments").mkdir(parents=True)
            os.symlink(ROOT / "assignments" / assignment, course / "assignments" / assignment)
            out = folder / "check-visible"
            proc = subprocess.run([sys.executable, "-m", "grader.check", assignment, "--course", str(course),
                                   "--notebook", str(folder / "mistaken.ipynb"), "--out", str(out)],
                                  cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
            done[assignment, "visible"] = {"out": proc.stdout, "err": proc.stderr, "rc": proc.returncode, "dir": out,
                                           "page": gs.visible_text((out / f"{assignment}.html").read_text(encoding="utf-8"))}
    done["state"] = (before, _state())
    return done


def _tests(assignment: str) -> dict[str, tuple[float, bool]]:
    """grade_id -> (points, hidden) of every automatic test of the assignment."""
    source = nbformat.read(ROOT / "solutions" / assignment / f"{assignment}.ipynb", as_version=4)
    return {c.metadata["nbgrader"]["grade_id"]: (float(c.metadata["nbgrader"].get("points", 0)), plan.is_hidden(c.source))
            for c in source.cells if plan.is_test(c)}


def _line(out: str, gid: str) -> str:
    found = [ln for ln in out.splitlines() if [w.rstrip(":") for w in ln.split()[1:2]] == [gid]]
    assert len(found) == 1, f"no single line for {gid} in:\n{out}"
    return found[0]


def _model_line(assignment: str) -> str:
    source = nbformat.read(ROOT / "solutions" / assignment / f"{assignment}.ipynb", as_version=4)
    cell = next(c for c in source.cells if c.metadata.get("nbgrader", {}).get("grade_id") == WRITTEN)
    # a line of plain prose (no list marker, emphasis or maths), as a page shows it too
    return next(ln.strip() for ln in check_mod.model_answer(cell).splitlines()
                if len(ln.strip()) > 40 and not re.search(r"^\s*(\d+\.|[*-])\s|[*_`$\\]", ln))


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_a_correct_notebook_passes_every_test_hidden_ones_included(runs, assignment):
    run = runs[assignment, "correct"]
    assert run["rc"] == 0, run["err"][-3000:]
    tests = _tests(assignment)
    total = sum(p for p, _ in tests.values())
    for gid, (points, hidden) in tests.items():
        assert _line(run["out"], gid).split()[0] == "passed", _line(run["out"], gid)
        assert ("(hidden)" in _line(run["out"], gid)) == hidden
    assert f"Score: {total:g} / {total:g} from the automatic tests." in run["out"]
    assert "Every test passes, the hidden tests included." in run["out"]
    assert f"Score: {total:.1f} / {total:.1f}" in run["page"], "the page does not show the full score"
    sandboxed = sandbox.check() is None
    assert ("Sandbox: bubblewrap" in run["out"]) == sandboxed and ("NO SANDBOX" in run["out"]) == (not sandboxed)
    # the written answer was written: its model answer and rubric are shown, in the output and on the page
    assert _model_line(assignment) in run["out"] and _model_line(assignment) in run["page"]
    assert "For your self-assessment" in run["page"]


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_a_blank_notebook_fails_every_test_with_a_message(runs, assignment):
    run = runs[assignment, "blank"]
    assert run["rc"] == 0, run["err"][-3000:]
    tests = _tests(assignment)
    for gid, (points, hidden) in tests.items():
        line = _line(run["out"], gid)
        assert line.split()[0] == "FAILED" and f"(0 / {points:g}):" in line, line
        assert len(line.split("):", 1)[1].strip()) > 10, f"no message for {gid}: {line}"
    assert f"Score: 0 / {sum(p for p, _ in tests.values()):g}" in run["out"]
    assert "Every test passes" not in run["out"] and "public tests pass" not in run["out"]
    # no answer written: no model answer anywhere
    assert _model_line(assignment) not in run["out"] and _model_line(assignment) not in run["page"]
    assert "not answered yet" in _line(run["out"], WRITTEN)


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_a_mistake_only_a_hidden_test_catches_is_named(runs, assignment):
    run = runs[assignment, "mistaken"]
    assert run["rc"] == 0, run["err"][-3000:]
    tests = _tests(assignment)
    assert tests[HIDDEN_TEST][1], f"{HIDDEN_TEST} is not a hidden test"
    failed = [gid for gid in tests if _line(run["out"], gid).split()[0] == "FAILED"]
    assert failed == [HIDDEN_TEST], f"expected only the hidden test to fail, got {failed}"
    assert HIDDEN_MESSAGE in _line(run["out"], HIDDEN_TEST)
    assert HIDDEN_MESSAGE in run["page"], "the page does not carry the hidden test's message"
    total = sum(p for p, _ in tests.values())
    assert f"Score: {total - tests[HIDDEN_TEST][0]:g} / {total:g}" in run["out"]
    assert "1 test(s) fail" in run["out"]
    # the written answer is empty here: no model answer
    assert _model_line(assignment) not in run["out"] + run["page"]


def test_without_solutions_only_the_public_tests_run_and_it_says_so(runs):
    assignment = ASSIGNMENTS[0]
    run = runs[assignment, "visible"]
    assert run["rc"] == 0, run["err"][-3000:]
    assert "The public tests pass; hidden tests run at grading" in run["out"]
    assert "Every test passes" not in run["out"] and "all tests pass" not in run["out"].lower()
    assert HIDDEN_MESSAGE not in run["out"] + run["page"], "a hidden test's message without its source?"
    for gid, (points, hidden) in _tests(assignment).items():
        assert _line(run["out"], gid).split()[0] == ("hidden" if hidden else "passed"), _line(run["out"], gid)
    assert "hidden tests run at grading" in run["page"]


def test_nothing_is_written_outside_the_checks_folder(runs):
    before, after = runs["state"]
    assert before == after, f"a check touched the class's state in the course folder: {before} -> {after}"
    for assignment in ASSIGNMENTS:
        assert not (ROOT / "build" / "check" / assignment / "work").exists()
        for name in ("correct", "blank", "mistaken"):
            assert sorted(p.name for p in runs[assignment, name]["dir"].iterdir()) == [f"{assignment}.html", "result.json"]


def test_a_check_names_a_missing_assignment_or_notebook(tmp_path):
    with pytest.raises(check_mod.CheckError, match="no assignment 'nope'.*ids: 01_soft_attention_pytorch"):
        check_mod.check("nope", out=tmp_path)
    with pytest.raises(check_mod.CheckError, match="no notebook"):
        check_mod.check(ASSIGNMENTS[0], tmp_path / "missing.ipynb", out=tmp_path)


def test_the_self_check_cell_never_runs_a_check_inside_a_run(monkeypatch):
    """A grading kernel, the grader's replay, nbgrader and headless runs: check_all does nothing."""
    from utils import grading

    assert sandbox.kernel_env()[sandbox.GRADING_ENV] == "1" and sandbox.GRADING_ENV == grading.GRADING_ENV
    for name in (grading.GRADING_ENV, grading.SELF_CHECK_ENV):
        monkeypatch.delenv(name, raising=False)
    assert grading._self_check_off() is None
    monkeypatch.setenv(grading.GRADING_ENV, "1")
    assert "being graded" in grading._self_check_off()
    assert grading.check_all(ASSIGNMENTS[0]) is None
    monkeypatch.delenv(grading.GRADING_ENV)
    monkeypatch.setenv(grading.SELF_CHECK_ENV, "off")
    assert "headless" in grading._self_check_off()
    monkeypatch.delenv(grading.SELF_CHECK_ENV)

    class Shell:  # nbgrader's kernels: --HistoryManager.hist_file=:memory:
        history_manager = type("H", (), {"hist_file": ":memory:"})()

    import IPython

    monkeypatch.setattr(IPython, "get_ipython", lambda: Shell())
    assert "nbgrader" in grading._self_check_off()


def test_the_self_check_cell_is_last_and_never_graded():
    from tools import self_check_cell

    assert self_check_cell.main(["--check"]) == 0, "run `python -m tools.self_check_cell` then `make assignments`"
    for folder in ("solutions", "assignments"):
        for path in sorted((ROOT / folder).glob("*/*.ipynb")):
            nb = nbformat.read(path, as_version=4)
            last = nb.cells[-1]
            assert self_check_cell.is_self_check(last), f"{path}: the last cell is not the self-check"
            assert "nbgrader" not in last.metadata, f"{path}: the self-check cell has nbgrader metadata"
            assert f'grading.check_all("{path.stem}")' in last.source
            assert sum(map(self_check_cell.is_self_check, nb.cells)) == 1
