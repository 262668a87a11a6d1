"""Grade every submission of one assignment: sandboxed, one student at a time, verdicts decided here.

    python -m grader ASSIGNMENT [--jobs N] [--timeout S] [--budget S] [--unsafe]
    (or: make grade ASSIGNMENT=... JOBS=N)

Submissions are read from ``submitted/<student>/<assignment>/`` (where
``nbgrader collect`` puts them). For each student, on their own:

1. **Repair.** The notebook is rebuilt from the release: the student's answer
   cells (matched by grade_id, the first copy of a duplicated id) and the cells
   they added (kept in place, after the release cell they followed) stay; every
   test and locked cell, its nbgrader metadata and the file name come from the
   release, so deleted, edited or duplicated test cells do not matter. The
   original file is kept under ``grading_backups/``.
2. **Run in a sandbox** (grader/runner.py, grader/sandbox.py): the kernel runs in
   a bubblewrap container that sees the Python installation and the
   assignment's view of ``utils`` (what the students write is absent:
   grader/reference.py) and nothing else; the runner stays outside. The kernel
   gets the student's cells and, for each test, only the part that calls the
   student's code (grader/plan.py), never a check, an expected value or a hidden
   test's text; it reports what the student's code returned, as plain data.
3. **Decide every test here** (grader/replay.py): each test cell of the source
   notebook, hidden tests included, runs whole in a trusted process where no
   student code runs, against the reported values.
4. **Record**: the gradebook (nbgrader's), ``autograded/<student>/<id>/<id>.ipynb``
   (the student's code, markdown made inert, and the grader's verdicts; no output
   of student code, no hidden test), ``feedback/<student>/<id>/<id>.html``
   (nbgrader's feedback template, sanitized) and ``grades/<id>.csv`` (columns
   student, score, max_score, status, note), written atomically.

Every step has a time and memory limit; nothing a submission does can change
another student's result or stop the run. Without a working sandbox the command
refuses, unless given ``--unsafe``.
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unicodedata
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import nbformat

from grader import csvsafe, late, pages, plan, reference, sandbox
from grader.feedback import write_atomic
from grader.replay import clean_text
from grader.workers import Workers, memory_limit, trusted_env

ROOT = Path(__file__).resolve().parent.parent
MAX_NOTEBOOK_BYTES = 20 * 1024 * 1024  # a notebook without its outputs (the grader runs it again)
MAX_FILE_BYTES = 100 * 1024 * 1024  # a submitted file read at all (outputs are stripped from it first)
MAX_OWN_CELLS = 300  # cells a student added (beyond them: left out, with a note)
RUNNER_MEMORY = 4 * 1024**3  # the trusted runner process (it only relays the kernel's messages)
REPLAY_TIMEOUT_S = 300.0  # deciding one notebook's tests (a test may train a tiny model)
FEEDBACK_TIMEOUT_S = 60.0  # rendering one feedback page
GRADER_VERSION = "2"  # part of each result's fingerprint: a new grader regrades everything


@dataclass
class Result:
    student: str
    score: float = 0.0
    max_score: float = 0.0
    status: str = "graded"
    note: str = ""
    tests: dict = field(default_factory=dict)  # grade_id -> (points, max points, message)
    # when it was submitted (naive UTC, as nbgrader keeps it)
    timestamp: datetime = field(default_factory=lambda: datetime.now(timezone.utc).replace(tzinfo=None))
    penalty: float = 0.0  # late penalty (points off; the CSV's score is score - penalty)
    fingerprint: str | None = None  # what the result depends on (grader.grade.fingerprint)
    seconds: float = 0.0  # wall time of this student's grading


def _meta(cell) -> dict:
    return cell.metadata.get("nbgrader", {}) or {}


def id_problem(student: str) -> str | None:
    """Why a submission folder's name cannot be a student id here (None: it can).

    Any name a file system holds is graded (letters of any script, spaces, dots,
    dashes...), except one that is not valid text (bytes the file system kept
    but UTF-8 cannot read) or holds control characters: neither can be written
    to the gradebook, the CSV and the pages faithfully.
    """
    try:
        student.encode("utf-8")
    except UnicodeEncodeError:
        return "the folder name is not valid UTF-8 text"
    if any(unicodedata.category(ch) in ("Cc", "Cf", "Cs") for ch in student):
        return "the folder name holds control characters (a newline, a tab, ...)"
    if student.strip() != student or not student.strip():
        return "the folder name starts or ends with a space"
    return None


def shown_id(student: str) -> str:
    """A faithful, printable form of any folder name, for the CSV and the log."""
    return student.encode("utf-8", "backslashreplace").decode("utf-8").encode("unicode_escape").decode("ascii") \
        if id_problem(student) else student


def text_safe(text: str) -> str:
    """Text a submission controls made writable anywhere: a character that is not valid text (a lone
    surrogate, a file name's byte that is not UTF-8) becomes its escape (``\\udcff``)."""
    return str(text).encode("utf-8", "backslashreplace").decode("utf-8")


def file_name(path: Path) -> str:
    """A submitted file's name as the student can recognise it: bytes that are not UTF-8 shown as ``\\xff``."""
    return os.fsencode(path.name).decode("utf-8", "backslashreplace")


class TooLarge(Exception):
    pass


def read_submission(path: Path) -> tuple[nbformat.NotebookNode, list[str]]:
    """The submitted notebook and notes. Outputs are not graded (the grader runs the notebook again), so a
    file over ``MAX_NOTEBOOK_BYTES`` is read without them; text that is not valid (lone surrogates in a
    cell) is replaced, with a note."""
    notes = []
    size = path.stat().st_size
    clear = ("clear its outputs (Kernel > Restart Kernel and Clear All Outputs, or Edit > Clear All Outputs), "
             "save, and submit again")
    if size > MAX_FILE_BYTES:
        raise TooLarge(f"{file_name(path)} is larger than {MAX_FILE_BYTES // 2**20} MB: {clear}")
    data = path.read_bytes()
    if size > MAX_NOTEBOOK_BYTES:
        raw = json.loads(data)
        for cell in (raw.get("cells") if isinstance(raw, dict) and isinstance(raw.get("cells"), list) else []):
            if isinstance(cell, dict):
                if "outputs" in cell:
                    cell["outputs"] = []
                cell.pop("attachments", None)
        data = json.dumps(raw).encode("utf-8", "surrogatepass")
        if len(data) > MAX_NOTEBOOK_BYTES:
            raise TooLarge(f"{file_name(path)} is larger than {MAX_NOTEBOOK_BYTES // 2**20} MB even without its "
                           "outputs: make it smaller (remove large text or data pasted into cells) and submit again")
        notes.append(f"the notebook's outputs ({size / 2**20:.0f} MB with them) were removed before grading "
                     "(the grader runs the notebook again); next time, clear outputs before submitting")
    nb = nbformat.reads(data.decode("utf-8", "surrogatepass"), as_version=4)
    bad = 0
    for cell in nb.cells:
        source = str(cell.get("source", ""))
        fixed = source.encode("utf-8", "replace").decode("utf-8") if any("\ud800" <= ch <= "\udfff" for ch in source) else source
        if fixed != source:
            bad += 1
            cell.source = fixed
    if bad:
        notes.append(f"{bad} cell(s) held characters that are not valid text (lone surrogates); "
                     "they were replaced by '?' before grading")
    return nb, notes


# --- 1. repair ----------------------------------------------------------------------------


def find_submission(folder: Path, assignment: str) -> tuple[Path | None, str]:
    """The submitted notebook (any one .ipynb if the name was changed) and a note."""
    exact = folder / f"{assignment}.ipynb"
    if exact.is_file() and not exact.is_symlink():
        return exact, ""
    others = sorted(p for p in folder.glob("*.ipynb") if p.is_file() and not p.is_symlink())
    if len(others) == 1:
        return others[0], f"the notebook was named {others[0].name!r}; graded as {exact.name}"
    if not others:
        return None, f"no {exact.name} in the submission"
    return None, f"no {exact.name} in the submission, and {len(others)} other notebooks: cannot tell which to grade"


def repair(submitted, release, source) -> tuple[nbformat.NotebookNode, nbformat.NotebookNode, list[str], set[int]]:
    """Rebuild a submission from the release.

    Returns (notebook to run, notebook to show, notes, indexes in the shown notebook
    of the cells the student wrote). The notebook to run has the source's test
    cells (hidden tests included); the one to show has the release's. Both keep the
    student's answer cells and added cells, each added cell after the release cell
    it followed in the submission.
    """
    notes = []
    release_ids = [_meta(c).get("grade_id") for c in release.cells]
    graded_ids = {gid for gid in release_ids if gid}
    # The release's cells without a grade_id (e.g. the Colab set-up): matched by cell id, else by
    # their exact text, each once. Anything else the student has is theirs.
    plain = {i for i, gid in enumerate(release_ids) if not gid}
    plain_by_id = {release.cells[i].get("id"): i for i in plain if release.cells[i].get("id")}
    answers: dict[str, str] = {}
    extras_after: dict[int, list] = {}  # release cell index -> the student's own cells after it
    last = -1
    seen: set[str] = set()
    used_plain: set[int] = set()
    dropped = 0
    for cell in submitted.cells:
        gid = _meta(cell).get("grade_id") or None
        if gid is not None and gid in graded_ids:
            if gid in seen:
                notes.append(f"a second copy of cell {gid!r} was ignored")
                continue
            seen.add(gid)
            last = release_ids.index(gid)
            rcell = release.cells[last]
            if _meta(rcell).get("solution") and cell.cell_type == rcell.cell_type:
                answers[gid] = str(cell.source)
            continue
        match = plain_by_id.get(cell.get("id"))
        if match is None or match in used_plain:
            match = next((i for i in sorted(plain - used_plain)
                          if str(release.cells[i].source) == str(cell.source)
                          and release.cells[i].cell_type == cell.cell_type), None)
        if gid is None and match is not None and match not in used_plain:
            used_plain.add(match)
            last = match
            continue
        if cell.cell_type in ("code", "markdown"):
            if sum(map(len, extras_after.values())) >= MAX_OWN_CELLS:
                dropped += 1
                continue
            extras_after.setdefault(last, []).append((cell.cell_type, str(cell.source)))
    if dropped:
        notes.append(f"{dropped} cell(s) of your own beyond the first {MAX_OWN_CELLS} were left out")
    missing = [gid for gid, c in zip(release_ids, release.cells) if gid and gid not in seen and _meta(c).get("grade")]
    if missing:
        notes.append(f"{len(missing)} deleted test cell(s) restored before grading")
    source_cells = {_meta(c).get("grade_id"): c for c in source.cells if _meta(c).get("grade_id")}

    def build(test_from_source: bool, for_showing: bool):
        nb = nbformat.v4.new_notebook(metadata=release.metadata)
        own: set[int] = set()

        def add_own(kind: str, text: str) -> None:
            own.add(len(nb.cells))
            if kind == "code":
                nb.cells.append(nbformat.v4.new_code_cell(text))
            else:
                nb.cells.append(nbformat.v4.new_markdown_cell(pages.safe_markdown(text) if for_showing else text))

        for kind, text in extras_after.get(-1, []):
            add_own(kind, text)
        for i, rcell in enumerate(release.cells):
            cell = nbformat.from_dict(rcell)
            gid = _meta(rcell).get("grade_id")
            if gid in answers:
                own.add(len(nb.cells))
                cell.source = pages.safe_markdown(answers[gid]) if for_showing and cell.cell_type == "markdown" \
                    else answers[gid]
            elif test_from_source and _meta(rcell).get("grade") and gid in source_cells:
                cell.source = source_cells[gid].source
            if cell.cell_type == "code":
                cell.outputs, cell.execution_count = [], None
            cell.pop("attachments", None)
            nb.cells.append(cell)
            for kind, text in extras_after.get(i, []):
                add_own(kind, text)
        for i, cell in enumerate(nb.cells):
            cell["id"] = f"cell-{i}"
        return nb, own

    runnable, _ = build(True, False)
    shown, own = build(False, True)
    return runnable, shown, notes, own


# --- 2 and 3: run and decide -----------------------------------------------------------------


@dataclass
class Settings:
    course: Path
    assignment: str
    limits: sandbox.Limits
    unsafe: bool
    workroot: Path
    lib: Path  # the assignment's view of utils


def run_sandboxed(cells: list[dict], settings: Settings, work: Path) -> dict:
    """Run the student's code (grader.runner in its own trusted process); its result, or a state."""
    job, result_path = work / "job.json", work / "result.json"
    job.write_text(json.dumps({"cells": cells, "limits": settings.limits.__dict__, "lib": str(settings.lib),
                               "unsafe": settings.unsafe}))
    limit = settings.limits.budget_s + 150  # the budget, the kernel's start, the shutdown
    try:
        subprocess.run([sys.executable, "-m", "grader.runner", str(job), str(result_path)], cwd=ROOT,
                       env=trusted_env(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=limit, preexec_fn=memory_limit(RUNNER_MEMORY))
        stopped = None
    except subprocess.TimeoutExpired:
        stopped = "budget"
    from grader.replay import read_result

    result = read_result(result_path)
    if not result:
        result = {"state": "runner error: the runner stopped (out of memory?)", "tests": {}}
    if stopped or result.get("state") in ("running", "starting"):
        result["state"] = stopped or "runner error: the runner stopped (out of memory?)"
    return result


def grade_one(student: str, settings: Settings, release, source, replays: Workers, slot: int) -> tuple[Result, object]:
    """Everything for one student; returns the result and the notebook to record (or None)."""
    aid, course = settings.assignment, settings.course
    result = Result(student)
    stamp = course / "submitted" / student / aid / "timestamp.txt"
    if stamp.is_file() and not stamp.is_symlink() and stamp.stat().st_size < 200:
        try:
            from nbgrader.utils import parse_utc

            result.timestamp = parse_utc(stamp.read_text().strip()).replace(tzinfo=None)
        except Exception:  # noqa: BLE001 - an unreadable timestamp counts as "now"
            pass
    path, note = find_submission(course / "submitted" / student / aid, aid)
    notes = [note] if note else []
    if path is None:
        result.status, result.note = "failed", note
        return result, None
    try:
        submitted, read_notes = read_submission(path)
        runnable, shown, repair_notes, _ = repair(submitted, release, source)
    except TooLarge as exc:
        result.status, result.note = "failed", text_safe(exc)
        return result, None
    except Exception as exc:  # noqa: BLE001 - not JSON, not a notebook, nested too deep
        result.status = "failed"
        result.note = f"{file_name(path)} is not a valid notebook ({type(exc).__name__}: {clean_text(exc, set(), 150)})"
        return result, None
    notes += read_notes + repair_notes
    if repair_notes or note:
        backup = course / "grading_backups" / student / aid
        backup.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, backup / path.name)

    cells = plan.cells_for_sandbox(runnable, source)
    for attempt in (1, 2):
        work = Path(tempfile.mkdtemp(prefix=f"s{slot}-", dir=settings.workroot))
        outcome = run_sandboxed(cells, settings, work)
        state = str(outcome.get("state", ""))
        if not state.startswith("runner error") or attempt == 2:
            break
        # The runner failed (most often: a kernel that did not start on a busy machine). That is
        # no verdict on the student: run the notebook once more from the start.
        shutil.rmtree(work, ignore_errors=True)

    answer_ids = [_meta(c).get("grade_id") for c in shown.cells if _meta(c).get("solution")]
    student_sources = {gid: c.source for c in runnable.cells if (gid := _meta(c).get("grade_id")) in answer_ids}
    extra = [c.source for c in runnable.cells if c.cell_type == "code" and not _meta(c)]
    source_path = course / "solutions" / aid / f"{aid}.ipynb"
    answer = replays.ask({"source": str(source_path), "student": student_sources, "extra": extra,
                          "result": str(work / "result.json")})
    shutil.rmtree(work, ignore_errors=True)
    if not answer.get("ok"):
        result.status = "failed"
        why = (answer.get("error") or "").strip().splitlines()
        result.note = ("the grader could not check this notebook in time (tell your instructor)" if answer.get("timeout")
                       else "the grader could not check this notebook (tell your instructor): " + (why[-1][:200] if why else ""))
        return result, None
    verdicts = answer["results"] if isinstance(answer.get("results"), dict) else {}

    ran = outcome.get("tests", {}) if isinstance(outcome.get("tests"), dict) else {}
    limits = settings.limits
    if state == "budget":
        notes.append(f"the notebook ran past its {limits.budget_s:g} s budget; tests after that point got no points")
    elif state == "kernel died":
        notes.append("the kernel died while running the notebook (os._exit, a crash, or too much memory); "
                     "tests after that point got no points")
    elif state == "interrupt ignored":
        notes.append(f"a cell ran past the {limits.cell_timeout_s:g} s limit per cell and did not stop when "
                     "interrupted, so the notebook was stopped there; tests after that point got no points")
    elif state.startswith("unreadable output"):
        notes.append(f"your notebook sent output the grader could not read ({state.split(': ', 1)[-1][:60]}), so "
                     "the notebook was stopped there (output nested too deeply, a number too long, or a message "
                     "sent past Jupyter's own display functions); tests after that point got no points")
    elif state.startswith("runner error"):
        notes.append(f"the notebook could not be run to its end twice ({state[len('runner error: '):][:80]}); tests "
                     "that had not run got no points: if your notebook does not cause this, tell your instructor, "
                     "who can grade it again")
    hit = outcome.get("limits_hit") if isinstance(outcome.get("limits_hit"), dict) else {}
    if sandbox.limits_note(hit, limits):
        notes.append(sandbox.limits_note(hit, limits) + "; tests that did not run got no points")
    if outcome.get("timeouts") and state != "interrupt ignored":
        notes.append(f"{int(outcome['timeouts'])} cell(s) ran past the {limits.cell_timeout_s:g} s limit per cell "
                     "and were interrupted")
    for cell in shown.cells:
        meta = _meta(cell)
        gid = meta.get("grade_id")
        if not meta.get("grade") or meta.get("solution"):
            continue  # not a test, or an answer graded by hand
        points = float(meta.get("points", 0))
        verdict = verdicts.get(gid) if isinstance(verdicts.get(gid), dict) else {}
        passed = bool(verdict.get("passed"))
        if gid not in ran:
            ok, message = False, "this test did not run in your notebook (it stopped earlier)"
        elif not passed:
            ok, message = False, str(verdict.get("message") or "this test was not checked")
        else:
            ok, message = True, ""
        result.tests[gid] = (points if ok else 0.0, points, clean_text(message, set(), 1200))
        cell.outputs = [] if ok else [nbformat.v4.new_output(
            "error", ename="TestFailed", evalue=result.tests[gid][2], traceback=[result.tests[gid][2]])]
    if notes:
        shown.cells.insert(0, nbformat.v4.new_markdown_cell(
            "**From the grader:** " + pages.safe_markdown("; ".join(notes)) + ".", id="grader-notes"))
    result.score = sum(t[0] for t in result.tests.values())
    result.max_score = sum(t[1] for t in result.tests.values())
    result.note = "; ".join(n for n in notes if n)
    return result, shown


# --- 4. record -----------------------------------------------------------------------------------


def _nbgrader(course: Path, *args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=course, env=trusted_env(),
                          capture_output=True, text=True, timeout=timeout)


def ensure_gradebook(course: Path, assignment: str) -> str | None:
    """Make sure the gradebook knows the assignment and its cells (a fresh clone has no gradebook)."""
    from nbgrader.api import Gradebook, MissingEntry

    try:
        with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
            a = gb.find_assignment(assignment)
            if a.notebooks and a.max_score > 0:
                return None
    except MissingEntry:
        pass
    except Exception as exc:  # noqa: BLE001 - locked or damaged gradebook
        return f"{type(exc).__name__}: {str(exc)[:200]}"
    with tempfile.TemporaryDirectory(prefix="release-") as tmp:
        try:
            proc = _nbgrader(course, "generate_assignment", assignment, "--force", "--log-level=ERROR",
                             f"--CourseDirectory.release_directory={tmp}")
        except subprocess.TimeoutExpired:
            return "nbgrader generate_assignment did not finish in 600 s"
    if proc.returncode != 0:
        return "nbgrader generate_assignment failed: " + (proc.stderr or proc.stdout).strip()[-300:]
    return None


def manual_cells(source) -> list[str]:
    """The answers graded by hand (nbgrader: a cell that is both a solution and a grade cell)."""
    return [_meta(c)["grade_id"] for c in source.cells if _meta(c).get("grade") and _meta(c).get("solution")]


def record_gradebook(course: Path, assignment: str, result: Result, manual: list[str]) -> None:
    """The automatic scores; the hand-graded cells keep the instructor's grades and comments unless the
    submission changed since (then they wait for hand grading again)."""
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        gb.update_or_create_student(result.student)
        try:
            before = gb.find_submission(assignment, result.student).timestamp
        except MissingEntry:
            before = None
        gb.update_or_create_submission(assignment, result.student, timestamp=result.timestamp)
        for gid, (points, _, _) in result.tests.items():
            grade = gb.find_grade(gid, assignment, assignment, result.student)
            grade.auto_score = points
            grade.manual_score = None
            grade.extra_credit = None
            grade.needs_manual_grade = False
        for gid in manual:
            grade = gb.find_grade(gid, assignment, assignment, result.student)
            if before is not None and before != result.timestamp:
                grade.manual_score = grade.extra_credit = None  # a new submission: grade it again
                comment = gb.find_comment(gid, assignment, assignment, result.student)
                comment.manual_comment = None
            grade.auto_score = None
            grade.needs_manual_grade = grade.manual_score is None
        gb.db.commit()


def hand_grades(course: Path, assignment: str, student: str, manual: list[str]) -> tuple[float, list[str]]:
    """(points given by hand so far, the hand-graded cells still waiting) for one student."""
    from nbgrader.api import Gradebook, MissingEntry

    points, pending = 0.0, []
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for gid in manual:
            try:
                grade = gb.find_grade(gid, assignment, assignment, student)
            except MissingEntry:
                pending.append(gid)
                continue
            if grade.manual_score is None:
                pending.append(gid)
            else:
                points += float(grade.manual_score) + float(grade.extra_credit or 0)
    return points, pending


def settle(course: Path, assignment: str, result: Result, manual: list[str]) -> None:
    """Add the hand grades to an automatic result: final when every hand-graded cell has its grade,
    otherwise provisional, with the cells that wait named in the note."""
    if result.status == "failed" or not manual:
        return
    points, pending = hand_grades(course, assignment, result.student, manual)
    result.score = sum(t[0] for t in result.tests.values()) + points
    if pending:
        result.status = "provisional"
        waiting = f"hand grading pending ({', '.join(pending)}): the score is provisional"
        result.note = "; ".join(x for x in (result.note, waiting) if x)
    else:
        result.status = "graded"


def plain_text_page(assignment: str, result: Result) -> str:
    """The last resort when a student's page cannot be written: escaped text, nothing to render."""
    import html

    lines = [f"{assignment}", f"Student: {result.student}", f"Score: {result.score:g} / {result.max_score:g}",
             result.note or "", *(f"{gid}: {t[0]:g} / {t[1]:g} {t[2]}" for gid, t in result.tests.items())]
    text = html.escape(text_safe("\n".join(lines)))
    return f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{html.escape(text_safe(assignment))}</title></head>" \
           f"<body><pre>{text}</pre></body></html>\n"


def write_page_safely(page: Path, render, result: Result) -> str:
    """Write one student's page; if that fails, a plain-text page; a log line for what failed ("" if nothing)."""
    try:
        write_atomic(page, render())
        return ""
    except Exception as exc:  # noqa: BLE001 - logged; the run goes on
        why = f"{type(exc).__name__}: {text_safe(str(exc))[:200]}"
    try:
        write_atomic(page, plain_text_page(page.stem, result))
        return f"{shown_id(result.student)}: the page could not be written ({why}); a plain-text page instead\n"
    except Exception as exc:  # noqa: BLE001
        return f"{shown_id(result.student)}: no page could be written ({why}; {type(exc).__name__})\n"


def failure_page(assignment: str, result: Result) -> str:
    items = [f"{gid}: {t[0]:g} / {t[1]:g} {t[2]}" for gid, t in result.tests.items()]
    return pages.simple_page(f"{assignment}", [
        f"Student: {result.student}", f"Score: {result.score:g} / {result.max_score:g}",
        result.note or "Your notebook could not be graded.",
        "Open your notebook, run Kernel > Restart & Run All, fix the first error, and submit again."], items)


# --- the run -----------------------------------------------------------------------------------------


def fingerprint(course: Path, assignment: str, student: str, inputs: bytes) -> str | None:
    """What a student's result depends on: the submitted folder's files, the assignment's source and
    release and the grading settings (``inputs``). None if the folder cannot be read."""
    h = hashlib.sha256(inputs)
    folder = course / "submitted" / student / assignment
    try:
        for path in sorted(folder.iterdir()):
            if path.is_file() and not path.is_symlink() and path.stat().st_size <= MAX_FILE_BYTES:  # a large notebook is graded: its content counts
                h.update(path.name.encode("utf-8", "surrogateescape") + b"\0" + path.read_bytes())
    except OSError:
        return None
    return h.hexdigest()


def results_path(course: Path, assignment: str) -> Path:
    return course / "grades" / f"{assignment}.json"


def load_results(course: Path, assignment: str) -> dict[str, Result]:
    """The last run's results (grades/<id>.json), keyed by the submission folder's name."""
    path = results_path(course, assignment)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    out = {}
    for folder, row in data.get("students", {}).items():
        r = Result(row["student"], row["score"], row["max_score"], row["status"], row["note"],
                   {gid: tuple(t) for gid, t in row.get("tests", {}).items()},
                   datetime.fromisoformat(row["timestamp"]))
        r.penalty, r.fingerprint, r.seconds = row.get("penalty", 0.0), row.get("fingerprint"), row.get("seconds", 0.0)
        out[folder] = r
    return out


def save_results(course: Path, assignment: str, results: dict[str, Result], meta: dict) -> None:
    students = {folder: {"student": r.student, "score": r.score, "max_score": r.max_score, "status": r.status,
                         "note": r.note, "tests": r.tests, "timestamp": r.timestamp.isoformat(),
                         "penalty": r.penalty, "fingerprint": r.fingerprint, "seconds": r.seconds}
                for folder, r in results.items()}
    write_atomic(results_path(course, assignment), json.dumps({**meta, "students": students}, indent=1,
                                                              ensure_ascii=False, default=str))


def grade(assignment: str, course: Path = ROOT, timeout: int | None = None, jobs: int | None = None,
          unsafe: bool = False, budget: float | None = None, limits: sandbox.Limits | None = None,
          students: list[str] | None = None, force: bool = False, progress: bool = False,
          scheduler: str | None = None) -> list[Result]:
    """Grade the assignment's submissions; the results of every student, graded now or kept.

    ``students`` grades only those (the others' rows stay as they were); without ``force``
    a student whose submission, assignment and settings are unchanged since the last run
    keeps that run's result. ``scheduler`` sends each student's grading to a Dask
    scheduler at that address instead of local threads (grader/distributed.py).
    """
    course = Path(course).resolve()
    source_path = course / "solutions" / assignment / f"{assignment}.ipynb"
    release_path = course / "assignments" / assignment / f"{assignment}.ipynb"
    ids = sorted(p.name for p in (course / "solutions").iterdir()) if (course / "solutions").is_dir() else []
    if not source_path.exists():
        raise SystemExit(f"no assignment {assignment!r} under {course / 'solutions'} (ids: {' '.join(ids)})")
    if not release_path.exists():
        raise SystemExit(f"no release {release_path}: run `make assignments` first")
    release = nbformat.read(release_path, as_version=4)
    source = nbformat.read(source_path, as_version=4)
    try:
        plan.check_source(source)
        policy = reference.policy_of(source, assignment)
    except (plan.PlanError, reference.PolicyError) as exc:
        raise SystemExit(f"{source_path}: {exc}") from None
    limits = limits or sandbox.Limits()
    if timeout:
        limits.cell_timeout_s = float(timeout)
    if budget:
        limits.budget_s = float(budget)
    workroot = Path(tempfile.mkdtemp(prefix="course-view-"))
    os.chmod(workroot, 0o700)
    try:
        lib = reference.view(workroot / "lib", policy)
        os.chmod(workroot, 0o711)  # the sandbox's uid reaches the library view, nothing else here
        if not unsafe and scheduler is None:  # a distributed worker checks its own sandbox
            reason = sandbox.check(lib)
            if reason:
                raise SystemExit(f"cannot grade safely: {reason}.\nStudent code would run with your rights. "
                                 "Install the sandbox, or pass --unsafe (make grade ... UNSAFE=1) to grade "
                                 "without it (only for submissions you trust).")
        settings = Settings(course, assignment, limits, unsafe, workroot, lib)
        return _grade_all(settings, release, source, source_path, release_path, policy, jobs, students, force,
                          progress, scheduler)
    finally:
        shutil.rmtree(workroot, ignore_errors=True)


def _grade_all(settings: Settings, release, source, source_path: Path, release_path: Path, policy, jobs,
               chosen: list[str] | None, force: bool, progress: bool, scheduler: str | None) -> list[Result]:
    course, assignment, limits = settings.course, settings.assignment, settings.limits
    started = time.monotonic()
    submitted = course / "submitted"
    students = sorted(name for name in (os.listdir(submitted) if submitted.is_dir() else [])
                      if (submitted / name / assignment).is_dir())
    if not students:
        raise SystemExit(f"no submissions of {assignment} under {submitted}/<student>/{assignment}/")
    unknown = sorted(set(chosen or []) - set(students))
    if unknown:
        raise SystemExit(f"no submission of {assignment} from {unknown} under {submitted}/")
    jobs = max(1, jobs or os.cpu_count() or 1)
    log = io.StringIO()
    limits_line = "" if settings.unsafe or scheduler else sandbox.enforcement(limits) + "\n"  # for the log's end
    if limits_line and sandbox.Cgroup.support()[0] is None:  # (a distributed worker's sandbox is its machine's)
        print(f"warning: {limits_line.strip()}", file=sys.stderr)
    previous = load_results(course, assignment)
    results: dict[str, Result] = {f: r for f, r in previous.items() if f in students}  # kept unless regraded
    inputs = (source_path.read_bytes() + release_path.read_bytes() + GRADER_VERSION.encode()
              + json.dumps(limits.__dict__, sort_keys=True).encode() + json.dumps(policy, sort_keys=True).encode())
    to_grade = []
    for student in (chosen or students):
        problem = id_problem(student)
        if problem is not None:
            results[student] = Result(shown_id(student), status="failed", note=(
                f"this submission cannot be graded under its folder name ({problem}): rename the folder "
                f"submitted/{shown_id(student)} to the student's id and grade again"))
            continue
        fp = fingerprint(course, assignment, student, inputs)
        old = previous.get(student)
        done = (course / "autograded" / student / assignment / f"{assignment}.ipynb").is_file() or (old and old.status == "failed")
        if not force and not chosen and old is not None and fp is not None and old.fingerprint == fp and done:
            log.write(f"{student}: unchanged since the last run, kept ({old.score:g} / {old.max_score:g})\n")
            continue
        to_grade.append((student, fp))

    shown: dict[str, object] = {}
    fresh: list[str] = []
    if to_grade:
        if scheduler:
            from grader import distributed

            outcomes = distributed.grade_students(scheduler, settings, [s for s, _ in to_grade], progress)
        else:
            outcomes = _grade_locally(settings, release, source, [s for s, _ in to_grade], jobs, progress)
        for (student, fp) in to_grade:
            result, nb = outcomes[student]
            result.note = text_safe(result.note)
            result.fingerprint = fp if result.status != "failed" or nb is None else None
            results[student], shown[student] = result, nb
            fresh.append(student)
            log.write(f"{student}: {result.score:g} / {result.max_score:g} {result.status} {result.note}\n")

    # Record: gradebook, autograded notebooks, late penalties, feedback, CSV, the class report.
    problem = ensure_gradebook(course, assignment)
    manual = manual_cells(source)
    max_score = sum(float(_meta(c).get("points", 0)) for c in source.cells if _meta(c).get("grade"))
    late_plugin, due = late.plugin(course), due_date(course, assignment) if problem is None else None
    valid = [s for s in fresh if id_problem(s) is None]
    for student in valid:
        r = results[student]
        r.max_score = max_score
        nb = shown.get(student)
        if nb is not None:
            target = course / "autograded" / student / assignment
            write_atomic(target / f"{assignment}.ipynb", nbformat.writes(nb))
            write_atomic(target / "timestamp.txt", f"{r.timestamp:%Y-%m-%d %H:%M:%S.%f} UTC")
            secret = course / "submitted" / student / assignment / "submission_secret.txt"
            if secret.is_file() and not secret.is_symlink() and secret.stat().st_size < 10_000:
                # nbgrader's exchange matches returned feedback to the submission with it
                write_atomic(target / secret.name, secret.read_text(encoding="utf-8", errors="replace"))
        elif r.status == "failed":
            r.tests = {}
        if problem is None:
            try:
                record_gradebook(course, assignment, r, manual)
                settle(course, assignment, r, manual)
                apply_late_penalty(course, assignment, r, late_plugin, due)
            except Exception as exc:  # noqa: BLE001 - e.g. another process holds the gradebook lock
                problem = f"{type(exc).__name__}: {str(exc)[:200]}"
        if problem:
            r.note = "; ".join(x for x in (r.note, f"not recorded in the gradebook ({problem})") if x)
    for student in results:  # the assignment's points, whether or not the folder name could be graded
        if student in fresh or id_problem(student) is not None:
            results[student].max_score = max_score
    # Late penalties of the students kept from the last run follow today's due date and plug-in too.
    refresh = []
    if problem is None:
        for student, r in results.items():
            if student not in fresh and r.status != "failed" and id_problem(student) is None:
                before = r.penalty
                try:
                    apply_late_penalty(course, assignment, r, late_plugin, due)
                except Exception as exc:  # noqa: BLE001 - e.g. a locked gradebook: the old penalty stays
                    log.write(f"{student}: late penalty not updated ({type(exc).__name__})\n")
                    continue
                if r.penalty != before:
                    refresh.append(student)
                    shown[student] = True
    write_feedback(course, assignment, valid + refresh, results, shown, problem is None, jobs, log)
    for student in results:  # every student gets a page, whatever their folder is called
        if student not in valid and (student in fresh or id_problem(student) is not None):
            page = course / "feedback" / student / assignment / f"{assignment}.html"
            log.write(write_page_safely(page, lambda: failure_page(assignment, results[student]), results[student]))
    seconds = time.monotonic() - started
    meta = {"assignment": assignment, "graded_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "seconds": round(seconds, 1), "graded_now": len(fresh), "kept": len(results) - len(fresh),
            "jobs": jobs, "scheduler": scheduler, "max_score": max_score}
    save_results(course, assignment, results, meta)
    write_csv(course, assignment, results)
    write_atomic(course / "grades" / f"{assignment}.log", log.getvalue() + limits_line)
    from grader import report

    report.write_assignment_report(course, assignment, source, results, meta)
    return [results[k] for k in sorted(results)]


def _grade_locally(settings: Settings, release, source, students: list[str], jobs: int,
                   progress: bool) -> dict[str, tuple[Result, object]]:
    """Each student on a thread of their own (at most ``jobs`` at once), with a progress bar."""
    replays = Workers("grader.replay", REPLAY_TIMEOUT_S)
    slots = list(range(jobs))
    slot_lock = threading.Lock()
    outcomes: dict[str, tuple[Result, object]] = {}

    def task(student: str):
        with slot_lock:
            slot = slots.pop()
        began = time.monotonic()
        try:
            result, nb = grade_one(student, settings, release, source, replays, slot)
            result.seconds = round(time.monotonic() - began, 1)
            return result, nb
        finally:
            with slot_lock:
                slots.append(slot)

    bar = progress_bar(len(students), progress, settings.assignment)
    try:
        with cf.ThreadPoolExecutor(max_workers=jobs) as pool:
            futures = {pool.submit(task, s): s for s in students}
            for future in cf.as_completed(futures):
                student = futures[future]
                try:
                    outcomes[student] = future.result()
                except Exception as exc:  # noqa: BLE001 - a grader fault costs one student, not the run
                    outcomes[student] = (Result(student, status="failed", note=(
                        f"the grader failed on this notebook ({type(exc).__name__}: {str(exc)[:200]})")), None)
                bar.update(1)
    finally:
        bar.close()
        replays.close()
    return outcomes


def progress_bar(total: int, shown: bool, assignment: str):
    """tqdm's bar (with its estimate of the time left) on stderr, or a silent stand-in."""
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=f"grading {assignment}", unit="student", disable=not shown, file=sys.stderr)


CSV_COLUMNS = ["student", "score", "max_score", "late_penalty", "status", "note"]


def write_csv(course: Path, assignment: str, results: dict[str, Result]) -> None:
    """grades/<id>.csv: the score after any late penalty (shown beside it)."""
    grades = course / "grades"
    if grades.exists() and not grades.is_dir():
        grades.unlink()
    out = io.StringIO()
    writer = csvsafe.writer(out)  # no cell a spreadsheet would run as a formula
    writer.writerow(CSV_COLUMNS)
    for key in sorted(results):
        r = results[key]
        writer.writerow([r.student, f"{r.score - r.penalty:g}", f"{r.max_score:g}", f"{r.penalty:g}", r.status, r.note])
    write_atomic(grades / f"{assignment}.csv", out.getvalue())


def due_date(course: Path, assignment: str) -> datetime | None:
    """The assignment's due date from the gradebook (naive UTC), if it has one."""
    from nbgrader.api import Gradebook, MissingEntry

    try:
        with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
            return gb.find_assignment(assignment).duedate
    except MissingEntry:
        return None


def apply_late_penalty(course: Path, assignment: str, r: Result, late_plugin, due: datetime | None) -> None:
    """The course's late-submission plug-in's penalty, in the result and in the gradebook."""
    from nbgrader.api import Gradebook

    points, seconds = late.penalty(late_plugin, r.student, r.score, r.timestamp, due)
    r.penalty = points
    r.note = re.sub(r"(; )?submitted [0-9.]+ day\(s\) late: [0-9.]+ point\(s\) off", "", r.note).strip("; ")
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        notebook = gb.find_submission_notebook(assignment, assignment, r.student)
        notebook.late_submission_penalty = points or None
        gb.db.commit()
    if points:
        r.note = "; ".join(x for x in (r.note, f"submitted {seconds / 86_400:.1f} day(s) late: {points:g} point(s) off") if x)


def after_hand_grading(assignment: str, course: Path = ROOT, jobs: int | None = None) -> list[Result]:
    """After hand grading in the formgrader: the final scores, CSV and feedback pages (with the
    instructor's comments), from the gradebook and the last grading run; no notebook runs again."""
    course = Path(course).resolve()
    source = nbformat.read(course / "solutions" / assignment / f"{assignment}.ipynb", as_version=4)
    manual = manual_cells(source)
    results = load_results(course, assignment)
    if not results:
        raise SystemExit(f"no {results_path(course, assignment)}: grade the assignment first "
                         f"(make grade ASSIGNMENT={assignment})")
    from nbgrader.api import Gradebook

    late_plugin, due = late.plugin(course), due_date(course, assignment)
    shown: dict[str, object] = {}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for folder, r in results.items():
            r.note = re.sub(r"(; )?(hand grading pending \([^)]*\): the score is provisional"
                            r"|submitted [0-9.]+ day\(s\) late: [0-9.]+ point\(s\) off)", "", r.note).strip("; ")
            if r.status == "failed" or not (course / "autograded" / folder / assignment / f"{assignment}.ipynb").is_file():
                continue
            for gid in list(r.tests):
                grade = gb.find_grade(gid, assignment, assignment, folder)
                r.tests[gid] = (float(grade.score), float(grade.max_score), r.tests[gid][2])
            r.score = sum(t[0] for t in r.tests.values())
            shown[folder] = True
    for folder, r in results.items():
        if shown.get(folder):
            settle(course, assignment, r, manual)
            apply_late_penalty(course, assignment, r, late_plugin, due)
    graded = [folder for folder in results if shown.get(folder)]
    write_feedback(course, assignment, graded, results, shown, True, max(1, jobs or os.cpu_count() or 1), io.StringIO())
    meta = json.loads(results_path(course, assignment).read_text(encoding="utf-8"))
    meta.pop("students", None)
    meta["hand_grades_read_at"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    save_results(course, assignment, results, meta)
    write_csv(course, assignment, results)
    from grader import report

    report.write_assignment_report(course, assignment, source, results, meta)
    return [results[k] for k in sorted(results)]


def write_feedback(course: Path, assignment: str, valid: list[str], results: dict, shown: dict, recorded: bool,
                   jobs: int, log: io.StringIO) -> None:
    """One page per student: nbgrader's template (sanitized) where the notebook was graded and recorded,
    else the grader's plain page; a page that takes too long to render gets the plain page too."""
    renderers = Workers("grader.feedback", FEEDBACK_TIMEOUT_S)

    def one(student: str) -> str:
        page = course / "feedback" / student / assignment / f"{assignment}.html"
        try:
            return one_page(student, page)
        except Exception as exc:  # noqa: BLE001 - one student's page never ends the run
            r = results[student]
            return (f"{shown_id(student)}: writing the feedback page failed ({type(exc).__name__}: "
                    f"{text_safe(str(exc))[:200]}); " + write_page_safely(page, lambda: plain_text_page(assignment, r), r))

    def one_page(student: str, page: Path) -> str:
        r = results[student]
        # nbgrader's exchange (release_feedback) reads the submission's time and secret beside each page
        write_atomic(page.parent / "timestamp.txt", f"{r.timestamp:%Y-%m-%d %H:%M:%S.%f} UTC")
        secret = course / "autograded" / student / assignment / "submission_secret.txt"
        if secret.is_file() and not secret.is_symlink():
            write_atomic(page.parent / secret.name, secret.read_text(encoding="utf-8", errors="replace"))
        if r.status != "failed" and shown.get(student) is not None and recorded:
            answer = renderers.ask({"course": str(course), "assignment": assignment, "student": student,
                                    "notebook": str(course / "autograded" / student / assignment / f"{assignment}.ipynb"),
                                    "out": str(page)})
            if answer.get("ok"):
                return ""
            why = "it took too long to render" if answer.get("timeout") else "nbgrader could not render it"
            r.note = "; ".join(x for x in (r.note, f"the full feedback page is missing ({why}); this one is the grader's own") if x)
        write_atomic(page, failure_page(assignment, r))
        return f"{student}: plain feedback page ({r.note[-120:]})\n"

    try:
        with cf.ThreadPoolExecutor(max_workers=max(1, min(jobs, len(valid) or 1))) as pool:
            for line in pool.map(one, valid):
                log.write(line)
    finally:
        renderers.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("assignment")
    parser.add_argument("--jobs", type=int, default=None, help="students graded at once (default: the number of cores)")
    parser.add_argument("--timeout", type=int, default=None, help="seconds one cell may run (default 90)")
    parser.add_argument("--budget", type=float, default=None, help="seconds the whole notebook may run (default 300)")
    parser.add_argument("--unsafe", action="store_true", help="grade without the sandbox (trusted submissions only)")
    parser.add_argument("--student", action="append", default=None,
                        help="grade only this student (repeat for several); the others' rows stay")
    parser.add_argument("--force", action="store_true",
                        help="grade again submissions that have not changed since the last run")
    parser.add_argument("--scheduler", default=None,
                        help="a Dask scheduler's address (tls://host:8786, or tcp://127.0.0.1:8786): grade on its workers")
    parser.add_argument("--tls-ca-file", default=None, help="the Dask cluster's CA certificate (make dask-certs)")
    parser.add_argument("--tls-cert", default=None, help="the grader's certificate for the Dask cluster")
    parser.add_argument("--tls-key", default=None, help="the grader's private key for the Dask cluster")
    parser.add_argument("--insecure-scheduler", action="store_true",
                        help="accept a plain tcp:// scheduler off this machine (no encryption, no authentication)")
    parser.add_argument("--course", type=Path, default=ROOT, help="the course folder (default: the one holding this grader)")
    parser.add_argument("--after-hand-grading", action="store_true",
                        help="write the final CSV and feedback pages from the gradebook (after grading by hand "
                             "in the formgrader); runs no notebook")
    args = parser.parse_args(argv)
    start = time.monotonic()
    if args.scheduler:
        from grader import distributed

        distributed.configure(args.scheduler, args.tls_ca_file, args.tls_cert, args.tls_key, args.insecure_scheduler)
    if args.after_hand_grading:
        results = after_hand_grading(args.assignment, args.course, args.jobs)
    else:
        results = grade(args.assignment, args.course, args.timeout, args.jobs, args.unsafe, args.budget,
                        students=args.student, force=args.force, progress=sys.stderr.isatty(),
                        scheduler=args.scheduler)
    width = max(len(r.student) for r in results)
    for r in results:
        print(f"{r.student:<{width}}  {r.score - r.penalty:>5g} / {r.max_score:<5g} {r.status:<11} {r.note}")
    print(f"{len(results)} submissions in {time.monotonic() - start:.0f} s; "
          f"grades: {args.course / 'grades' / (args.assignment + '.csv')}; report: "
          f"{args.course / 'grades' / (args.assignment + '-report.html')}; feedback: {args.course / 'feedback'}")
    return 0
