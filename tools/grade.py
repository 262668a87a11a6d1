"""Grade every submission of one assignment, whatever state it is in.

    python -m tools.grade ASSIGNMENT [--timeout SECONDS]     (or: make grade ASSIGNMENT=...)

Submissions are read from ``submitted/<student>/<assignment>/`` (where
``nbgrader collect`` puts them). The run never stops at a bad submission:

* test cells a student deleted are put back (from the release) before grading,
  so their answers are still graded; the original file is kept under
  ``grading_backups/``;
* a cell that runs too long is interrupted (``--timeout``), huge output is cut;
* a notebook that is not valid JSON, or whose kernel dies, gets 0 points and a
  feedback page that says why.

Every student ends with a row in ``grades/<assignment>.csv`` and a page in
``feedback/<student>/<assignment>/``.
"""
from __future__ import annotations

import argparse
import csv
import html
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Result:
    student: str
    score: float = 0.0
    max_score: float = 0.0
    status: str = "graded"
    note: str = ""


def _env() -> dict:
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    return env


def _nbgrader(course: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=course, env=_env(),
                          capture_output=True, text=True)


def _grade_cells(nb) -> dict[str, int]:
    return {c.metadata["nbgrader"]["grade_id"]: i for i, c in enumerate(nb.cells)
            if c.metadata.get("nbgrader", {}).get("grade_id")}


def restore_deleted_cells(submitted, release) -> int:
    """Put back locked / test cells of the release that a submission lacks; return how many."""
    present = set(_grade_cells(submitted))
    restored = 0
    position = 0  # index in `submitted` after the last release cell we have seen there
    for cell in release.cells:
        meta = cell.metadata.get("nbgrader", {})
        gid = meta.get("grade_id")
        if not gid:
            continue
        if gid in present:
            position = _grade_cells(submitted)[gid] + 1
        elif meta.get("grade") or meta.get("locked"):
            submitted.cells.insert(position, nbformat.from_dict(cell))
            position += 1
            restored += 1
    return restored


def _failure_page(assignment: str, result: Result) -> str:
    return (
        f"<html><head><meta charset='utf-8'><title>{assignment}: {html.escape(result.student)}</title></head><body>"
        f"<h1>{html.escape(assignment)}</h1><p>Student: {html.escape(result.student)}</p>"
        f"<p><b>Score: 0 / {result.max_score:g}</b></p>"
        f"<p>Your notebook could not be graded: {html.escape(result.note)}</p>"
        "<p>Open it, run <i>Kernel → Restart &amp; Run All</i>, fix the first error, and submit again.</p>"
        "</body></html>"
    )


def grade(assignment: str, course: Path = ROOT, timeout: int | None = None) -> list[Result]:
    submitted = course / "submitted"
    release_path = course / "assignments" / assignment / f"{assignment}.ipynb"
    if not release_path.exists():
        raise SystemExit(f"no release {release_path}: run `make assignments` first (ids: {sorted(p.name for p in (course / 'solutions').iterdir())})")
    students = sorted(p.parent.name for p in submitted.glob(f"*/{assignment}") if p.is_dir())
    if not students:
        raise SystemExit(f"no submissions of {assignment} under {submitted}/<student>/{assignment}/")
    release = nbformat.read(release_path, as_version=4)
    results = {s: Result(s) for s in students}

    # 1. Check and repair the submissions (keeping the originals).
    for student in students:
        path = submitted / student / assignment / f"{assignment}.ipynb"
        if not path.exists():
            results[student].status, results[student].note = "failed", f"no {path.name} in the submission"
            continue
        try:
            nb = nbformat.read(path, as_version=4)
        except Exception as exc:  # not JSON, not a notebook
            results[student].status = "failed"
            results[student].note = f"{path.name} is not a valid notebook ({type(exc).__name__}: {str(exc)[:200]})"
            continue
        n = restore_deleted_cells(nb, release)
        if n:
            backup = course / "grading_backups" / student / assignment
            backup.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, backup / path.name)
            nbformat.write(nb, path)
            results[student].note = f"{n} deleted test cell(s) restored before grading"

    # 2. Autograde everyone; nbgrader moves on past a submission it cannot run.
    args = ["autograde", assignment, "--force"]
    if timeout:
        args.append(f"--Execute.timeout={timeout}")
    log = _nbgrader(course, *args)
    (course / "grades").mkdir(exist_ok=True)
    (course / "grades" / f"{assignment}.log").write_text(log.stdout + log.stderr)
    _nbgrader(course, "generate_feedback", assignment, "--force")

    # 3. Scores from the gradebook; a page for every submission nbgrader could not grade.
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        max_score = float(gb.find_assignment(assignment).max_score)
        for student, result in results.items():
            result.max_score = max_score
            graded = (course / "autograded" / student / assignment / f"{assignment}.ipynb").exists()
            if result.status == "graded" and not graded:
                result.status = "failed"
                result.note = ("the notebook stopped the grader: the kernel died "
                               "(e.g. os._exit, sys.exit in a loop, or too much memory)")
            if result.status == "graded":
                try:
                    result.score = float(gb.find_submission(assignment, student).score)
                except MissingEntry:
                    result.status, result.note = "failed", "no grade was recorded"
            if result.status == "failed":
                page = course / "feedback" / student / assignment / f"{assignment}.html"
                page.parent.mkdir(parents=True, exist_ok=True)
                page.write_text(_failure_page(assignment, result), encoding="utf-8")

    out = course / "grades" / f"{assignment}.csv"
    with out.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["student", "score", "max_score", "status", "note"])
        for r in results.values():
            writer.writerow([r.student, f"{r.score:g}", f"{r.max_score:g}", r.status, r.note])
    return list(results.values())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("assignment")
    parser.add_argument("--timeout", type=int, default=None, help="seconds a cell may run (default: nbgrader_config.py)")
    parser.add_argument("--course", type=Path, default=ROOT, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    results = grade(args.assignment, args.course, args.timeout)
    width = max(len(r.student) for r in results)
    for r in results:
        print(f"{r.student:<{width}}  {r.score:>5g} / {r.max_score:<5g} {r.status:<7} {r.note}")
    print(f"grades: {args.course / 'grades' / (args.assignment + '.csv')}; feedback: {args.course / 'feedback'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
