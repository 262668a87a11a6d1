"""Helpers for the nbgrader round-trip tests: a throw-away course, submissions, scores."""
from __future__ import annotations

import html
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
BEGIN_SOLUTION, END_SOLUTION = "### BEGIN SOLUTION", "### END SOLUTION"
BEGIN_HIDDEN, END_HIDDEN = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"


def assignment_ids() -> list[str]:
    return sorted(p.parent.name for p in (ROOT / "solutions").glob("*/*.ipynb") if p.stem == p.parent.name)


def nbgrader_env() -> dict:
    env = dict(os.environ)
    # nbgrader runs `alembic` from the environment's bin folder when it creates a gradebook
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env.update(COURSE_PROFILE="smoke", COURSE_THREADS="1", OMP_NUM_THREADS="1", MPLBACKEND="Agg")
    return env


def nbgrader(args: list[str], course: Path, check: bool = True, timeout: int = 900) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [sys.executable, "-m", "nbgrader", *args], cwd=course, env=nbgrader_env(),
        capture_output=True, text=True, timeout=timeout,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"nbgrader {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}")
    return proc


def make_course(tmp: Path, assignment: str) -> Path:
    """A private copy of the course's grading set-up with one assignment's source."""
    course = tmp / "course"
    (course / "solutions").mkdir(parents=True)
    shutil.copy(ROOT / "nbgrader_config.py", course / "nbgrader_config.py")
    shutil.copytree(ROOT / "solutions" / assignment, course / "solutions" / assignment)
    return course


def regions(source: str, begin: str, end: str) -> list[str]:
    """Text between begin/end marker lines (exclusive), one string per region."""
    out, current = [], None
    for line in source.splitlines():
        if line.strip().startswith(begin):
            current = []
        elif line.strip().startswith(end) and current is not None:
            out.append("\n".join(current))
            current = None
        elif current is not None:
            current.append(line)
    return out


def significant_lines(text: str) -> set[str]:
    """Lines worth searching for in a release or a feedback page (not blank, not tiny, not comments)."""
    lines = {line.strip() for line in text.splitlines()}
    return {line for line in lines if len(line) >= 12 and not line.startswith("#")}


def student_fill(source_nb) -> dict[str, str]:
    """What a student who solved everything writes into each solution cell (marker lines dropped)."""
    fills = {}
    for cell in source_nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution") and cell.cell_type == "code":
            fills[meta["grade_id"]] = "\n".join(
                line for line in cell.source.splitlines()
                if line.strip() not in (BEGIN_SOLUTION, END_SOLUTION)
            )
    return fills


def write_submission(course: Path, assignment: str, student: str, nb) -> Path:
    folder = course / "submitted" / student / assignment
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{assignment}.ipynb"
    nbformat.write(nb, path)
    (folder / "timestamp.txt").write_text("2026-01-01 00:00:00.000000 UTC")
    return path


def fill_release(release_nb, fills: dict[str, str]):
    nb = nbformat.from_dict(release_nb)
    for cell in nb.cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        if gid in fills:
            cell.source = fills[gid]
    return nb


def scores(course: Path, assignment: str) -> dict[str, tuple[float, float]]:
    """student -> (score, max score) from the gradebook."""
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        out = {}
        for sub in gb.assignment_submissions(assignment):
            out[sub.student_id] = (float(sub.score), float(sub.max_score))
        return out


def visible_text(page: str) -> str:
    """An HTML page as the reader sees it: tags dropped, entities decoded."""
    page = re.sub(r"<style.*?</style>|<script.*?</script>", "", page, flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", "", page))


def error_text(nb) -> str:
    """All error names and messages a graded notebook shows."""
    parts = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                parts.append(f"{out.get('ename')}: {out.get('evalue')}")
    return "\n".join(parts)


def secret_lines(source_nb, begin: str, end: str) -> set[str]:
    """Significant lines that occur only inside begin/end regions of the source notebook."""
    inside, outside = set(), set()
    for cell in source_nb.cells:
        for region in regions(cell.source, begin, end):
            inside |= significant_lines(region)
        kept, skipping = [], False
        for line in cell.source.splitlines():
            if line.strip().startswith(begin):
                skipping = True
            elif line.strip().startswith(end):
                skipping = False
            elif not skipping:
                kept.append(line)
        outside |= significant_lines("\n".join(kept))
    return inside - outside
