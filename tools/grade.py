"""Grade every submission of one assignment: sandboxed, one student at a time, verdicts decided here.

    python -m tools.grade ASSIGNMENT [--jobs N] [--timeout S] [--budget S] [--unsafe]
    (or: make grade ASSIGNMENT=... JOBS=N)

Submissions are read from ``submitted/<student>/<assignment>/`` (where
``nbgrader collect`` puts them). For each student, on their own:

1. **Repair.** The notebook is rebuilt from the release: the student's answer
   cells (matched by grade_id, the first copy of a duplicated id) and any cells
   they added are kept; every test and locked cell, its nbgrader metadata and the
   file name come from the release, so deleted, edited or duplicated test cells
   do not matter. The original file is kept under ``grading_backups/``.
2. **Run in a sandbox** (tools/sandbox.py): a bubblewrap container that sees only
   this notebook, the Python installation and the course's ``utils`` package,
   with no network, a non-root user, memory / process / time limits and a
   wall-clock budget for the whole notebook. Values the tests take from student
   code are reported as plain data.
3. **Decide every test here** (tools/replay.py): each test cell of the source
   notebook (hidden tests included) runs again in a process where no student code
   runs, against the reported values. A test passes only if it passed in the
   student's kernel *and* here.
4. **Record**: the gradebook (nbgrader's), ``autograded/<student>/<id>/<id>.ipynb``
   (the student's code and the grader's verdicts; no output of student code, no
   hidden test), ``feedback/<student>/<id>/<id>.html`` and ``grades/<id>.csv``
   (columns student, score, max_score, status, note), written atomically.

Nothing a submission does can change another student's result or stop the run.
Without a working sandbox the command refuses, unless given ``--unsafe``.
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import csv
import html
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
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import nbformat

from tools import sandbox
from tools.replay import clean_text

ROOT = Path(__file__).resolve().parent.parent
STUDENT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@+-]{0,99}$")
MAX_NOTEBOOK_BYTES = 20 * 1024 * 1024


# The reference-implementation policy (README, "Grading"): while a graded test runs
# student code, these course implementations of the exercise refuse to run when the
# student's code reaches them, by any route (utils.grading.guard_reference).
# Keyed by lesson; "{fw}" is torch or keras. Only the exercise itself is listed,
# never what a test hands to the student (e.g. a whole reference model).
REFERENCE_POLICY: dict[str, tuple[list[str], list[str]]] = {
    "01_soft_attention": (["utils.attention.numpy_ref", "utils.attention.{fw}_impl"],
                          ["masked_softmax", "scaled_dot_product_attention", "additive_scores",
                           "additive_attention", "attend", "AdditiveAttention", "multi_head_attention",
                           "MultiHeadAttention"]),
    "02_seq2seq_attention": (["utils.attention.numpy_ref", "utils.attention.{fw}_impl", "utils.seq2seq.{fw}_impl"],
                             ["additive_attention", "additive_scores", "AdditiveAttention", "DecoderAttention",
                              "Decoder.step"]),
    "03_memory_networks": (["utils.memory.numpy_ref", "utils.memory.{fw}_impl"],
                           ["position_encoding", "memory_hop", "content_read", "content_addressing",
                            "memn2n_forward", "MemN2N"]),
    "04_positional_encoding": (["utils.positional.numpy_ref", "utils.positional.{fw}_impl"],
                               ["sinusoidal_encoding", "offset_matrix", "SinusoidalEncoding"]),
    "05_self_attention": (["utils.attention.numpy_ref", "utils.attention.{fw}_impl", "utils.attention.masks"],
                          ["causal_mask", "split_heads", "merge_heads", "multi_head_attention", "MultiHeadAttention",
                           "scaled_dot_product_attention"]),
    "06_transformer": (["utils.transformer.{fw}_impl"],
                       ["EncoderBlock", "DecoderBlock", "greedy_decode", "beam_search", "target_mask", "source_mask"]),
    "07_bert": (["utils.bert.{fw}_impl"], ["mask_tokens", "BertEmbeddings", "fine_tune_step", "fine_tune"]),
}


def reference_policy(assignment: str) -> str:
    """The guard argument for one assignment id, e.g. 05_self_attention_tensorflow ('' if none)."""
    lesson, _, framework = assignment.rpartition("_")
    if lesson not in REFERENCE_POLICY:
        return ""
    fw = {"pytorch": "torch", "tensorflow": "keras"}.get(framework, framework)
    modules, names = REFERENCE_POLICY[lesson]
    return json.dumps([[m.format(fw=fw) for m in modules], names])


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


def _env() -> dict:
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env.setdefault("COURSE_THREADS", "1")  # one thread per student; --jobs runs students side by side
    env.setdefault("OMP_NUM_THREADS", env["COURSE_THREADS"])
    return env


def _nbgrader(course: Path, *args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=course, env=_env(),
                          capture_output=True, text=True, timeout=timeout)


def _meta(cell) -> dict:
    return cell.metadata.get("nbgrader", {}) or {}


def _write_atomic(path: Path, data: str) -> None:
    """Write a file so that readers see the old or the new content, never half of it."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)  # something made a folder where our file goes
    elif path.is_symlink():
        path.unlink()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
        fh.write(data)
    os.replace(tmp, path)


# --- 1. repair ----------------------------------------------------------------------------


def find_submission(folder: Path, assignment: str) -> tuple[Path | None, str]:
    """The submitted notebook (any one .ipynb if the name was changed) and a note."""
    exact = folder / f"{assignment}.ipynb"
    if exact.is_file():
        return exact, ""
    others = sorted(p for p in folder.glob("*.ipynb") if p.is_file())
    if len(others) == 1:
        return others[0], f"the notebook was named {others[0].name!r}; graded as {exact.name}"
    if not others:
        return None, f"no {exact.name} in the submission"
    return None, f"no {exact.name} in the submission, and {len(others)} other notebooks: cannot tell which to grade"


def repair(submitted, release, source) -> tuple[nbformat.NotebookNode, nbformat.NotebookNode, list[str]]:
    """Rebuild a submission from the release: (notebook to run, notebook to show, notes).

    The notebook to run has the source's test cells (hidden tests included); the one
    to show has the release's. Both keep the student's answer cells and added cells.
    """
    notes = []
    release_ids = [_meta(c).get("grade_id") for c in release.cells]
    answers: dict[str, str] = {}
    extras_after: dict[int, list] = {}  # release cell index -> student's own cells after it
    last_release_index = -1
    seen = set()
    plain_release = {str(c.source) for c in release.cells if not _meta(c).get("grade_id")}
    for cell in submitted.cells:
        gid = _meta(cell).get("grade_id") or None
        if gid is None and str(cell.source) in plain_release:
            continue  # the release's own plain cell (e.g. the Colab set-up), already in place
        if gid in release_ids and gid not in seen:
            seen.add(gid)
            last_release_index = release_ids.index(gid)
            rcell = release.cells[last_release_index]
            if _meta(rcell).get("solution") and cell.cell_type == rcell.cell_type:
                answers[gid] = str(cell.source)
            continue
        if gid is not None and gid in release_ids:
            notes.append(f"a second copy of cell {gid!r} was ignored")
            continue
        if cell.cell_type in ("code", "markdown"):
            own = nbformat.v4.new_code_cell(str(cell.source)) if cell.cell_type == "code" \
                else nbformat.v4.new_markdown_cell(str(cell.source))
            extras_after.setdefault(last_release_index, []).append(own)
    missing = [gid for gid, c in zip(release_ids, release.cells) if gid and gid not in seen and _meta(c).get("grade")]
    if missing:
        notes.append(f"{len(missing)} deleted test cell(s) restored before grading")
    source_cells = {_meta(c).get("grade_id"): c for c in source.cells if _meta(c).get("grade_id")}

    def build(test_from_source: bool):
        nb = nbformat.v4.new_notebook(metadata=release.metadata)
        for cell in extras_after.get(-1, []):
            nb.cells.append(nbformat.from_dict(cell))
        for i, rcell in enumerate(release.cells):
            cell = nbformat.from_dict(rcell)
            gid = _meta(rcell).get("grade_id")
            if gid in answers:
                cell.source = answers[gid]
            elif test_from_source and _meta(rcell).get("grade") and gid in source_cells:
                cell.source = source_cells[gid].source
            if cell.cell_type == "code":
                cell.outputs, cell.execution_count = [], None
            nb.cells.append(cell)
            for own in extras_after.get(i, []):
                nb.cells.append(nbformat.from_dict(own))
        for i, cell in enumerate(nb.cells):
            cell["id"] = f"cell-{i}"
        return nb

    return build(True), build(False), notes


# --- 2 and 3: run and decide -----------------------------------------------------------------


class ReplayWorkers:
    """One trusted replay process per grading thread, started on first use."""

    def __init__(self, course: Path) -> None:
        self.course = course
        self.local = threading.local()
        self.all: list[subprocess.Popen] = []
        self.lock = threading.Lock()

    def ask(self, job: dict) -> dict:
        proc = getattr(self.local, "proc", None)
        if proc is None or proc.poll() is not None:
            proc = subprocess.Popen([sys.executable, "-m", "tools.replay", "--serve"], cwd=ROOT, env=_env(),
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                    text=True)
            self.local.proc = proc
            with self.lock:
                self.all.append(proc)
        proc.stdin.write(json.dumps(job) + "\n")
        proc.stdin.flush()
        line = proc.stdout.readline()
        if not line:
            self.local.proc = None
            return {"ok": False, "error": "the replay process stopped"}
        return json.loads(line)

    def close(self) -> None:
        for proc in self.all:
            try:
                proc.stdin.close()
                proc.wait(timeout=10)
            except Exception:  # noqa: BLE001
                proc.kill()


def _read_capped(path: Path, limit: int) -> str | None:
    if not path.is_file() or path.is_symlink():
        return None
    with path.open("rb") as fh:
        data = fh.read(limit + 1)
    return None if len(data) > limit else data.decode("utf-8", "replace")


def _in_kernel(outdir: Path) -> tuple[dict[str, str | None], dict]:
    cells: dict[str, str | None] = {}
    text = _read_capped(outdir / "cells.jsonl", 1_000_000) or ""
    for line in text.splitlines():
        try:
            entry = json.loads(line)
            cells.setdefault(str(entry["cell"]), entry.get("error"))
        except (ValueError, KeyError, TypeError):
            continue
    try:
        status = json.loads(_read_capped(outdir / "status.json", 10_000) or "{}")
    except ValueError:
        status = {}
    return cells, status if isinstance(status, dict) else {}


@dataclass
class Settings:
    course: Path
    assignment: str
    limits: sandbox.Limits
    unsafe: bool
    workroot: Path


def grade_one(student: str, settings: Settings, release, source, replays: ReplayWorkers, slot: int) -> tuple[Result, object]:
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
    if path.stat().st_size > MAX_NOTEBOOK_BYTES:
        result.status, result.note = "failed", f"{path.name} is larger than {MAX_NOTEBOOK_BYTES // 2**20} MB"
        return result, None
    try:
        submitted = nbformat.read(path, as_version=4)
        runnable, shown, repair_notes = repair(submitted, release, source)
    except Exception as exc:  # noqa: BLE001 - not JSON, not a notebook
        result.status = "failed"
        result.note = f"{path.name} is not a valid notebook ({type(exc).__name__}: {clean_text(exc, set(), 150)})"
        return result, None
    notes += repair_notes
    if repair_notes or note:
        backup = course / "grading_backups" / student / aid
        backup.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, backup / path.name)

    limits = settings.limits
    for attempt in (1, 2):
        work = settings.workroot / f"s{slot}-{abs(hash(student)) % 10**8}-{time.monotonic_ns()}"
        (work / "out").mkdir(parents=True)
        nbformat.write(runnable, work / "submission.ipynb")
        if settings.unsafe:
            env = _env()
            env["COURSE_GRADING_RECORD"] = str(work / "out" / "record.jsonl")
            argv = sandbox.runner_argv("submission.ipynb", limits, str(work / "out"), str(sandbox.RUNNER),
                                       reference_policy(aid))
            try:
                subprocess.run(argv, cwd=work, env=env, capture_output=True, timeout=limits.budget_s + 30)
                killed = False
            except subprocess.TimeoutExpired:
                killed = True
        else:
            argv = sandbox.runner_argv("submission.ipynb", limits, guard=reference_policy(aid))
            killed = sandbox.run(work, argv, limits).timed_out
        in_kernel, status = _in_kernel(work / "out")
        if killed or not str(status.get("state", "")).startswith("runner error") or attempt == 2:
            break
        # The runner itself failed (most often: the kernel did not start on a busy machine).
        # That is no verdict on the student: run the notebook once more from the start.
        shutil.rmtree(work, ignore_errors=True)

    answer_ids = [_meta(c).get("grade_id") for c in shown.cells if _meta(c).get("solution")]
    student_sources = {gid: c.source for c in shown.cells if (gid := _meta(c).get("grade_id")) in answer_ids}
    extra = [c.source for c in shown.cells if c.cell_type == "code" and not _meta(c)]
    source_path = course / "solutions" / aid / f"{aid}.ipynb"
    answer = replays.ask({"source": str(source_path), "student": student_sources, "extra": extra,
                          "records": str(work / "out" / "record.jsonl")})
    shutil.rmtree(work, ignore_errors=True)
    if not answer.get("ok"):
        result.status = "failed"
        result.note = "the grader could not check this notebook (tell your instructor): " + \
            answer.get("error", "").strip().splitlines()[-1][:200]
        return result, None
    verdicts = answer["results"]

    state = str(status.get("state", ""))
    if killed or state == "budget":
        notes.append(f"the notebook ran past its {limits.budget_s:g} s budget; tests after that point got no points")
    elif state == "kernel died":
        notes.append("the kernel died while running the notebook (os._exit, a crash, or too much memory); "
                     "tests after that point got no points")
    elif state.startswith("runner error"):
        notes.append(f"the grader's runner stopped twice ({state[len('runner error: '):][:60]}); tests that had "
                     "not run got no points: tell your instructor, who can grade this notebook again")
    if status.get("timeouts") and not killed:
        notes.append(f"{int(status['timeouts'])} cell(s) ran past the {limits.cell_timeout_s:g} s limit per cell "
                     "and were interrupted")
    if not status and not killed:
        notes.append("the notebook stopped the grader's runner (too much memory or output?); "
                     "tests that had not run got no points")
    for cell in shown.cells:
        meta = _meta(cell)
        gid = meta.get("grade_id")
        if not meta.get("grade"):
            continue
        points = float(meta.get("points", 0))
        verdict = verdicts.get(gid, {"passed": False, "message": "this test was not checked"})
        ran = gid in in_kernel
        ok = verdict["passed"] and ran and in_kernel.get(gid) is None
        if not verdict["passed"]:
            message = verdict["message"]
        elif not ran:
            message = "this test did not run in your notebook (it stopped earlier)"
        elif not ok:
            ename = re.sub(r"[^A-Za-z0-9_]", "", str(in_kernel.get(gid)))[:40] or "an error"
            message = (f"this test raised {ename} when your notebook ran. The grader's own check of your "
                       "results passed, but a test must also pass in your notebook: run it top to bottom.")
        else:
            message = ""
        result.tests[gid] = (points if ok else 0.0, points, clean_text(message, set(), 1200))
        cell.outputs = [] if ok else [nbformat.v4.new_output(
            "error", ename="TestFailed", evalue=result.tests[gid][2], traceback=[result.tests[gid][2]])]
    if notes:
        shown.cells.insert(0, nbformat.v4.new_markdown_cell(
            "**From the grader:** " + html.escape("; ".join(notes)) + ".", id="grader-notes"))
    result.score = sum(t[0] for t in result.tests.values())
    result.max_score = sum(t[1] for t in result.tests.values())
    result.note = "; ".join(n for n in notes if n)
    return result, shown


# --- 4. record -----------------------------------------------------------------------------------


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
        proc = _nbgrader(course, "generate_assignment", assignment, "--force", "--log-level=ERROR",
                         f"--CourseDirectory.release_directory={tmp}")
    if proc.returncode != 0:
        return "nbgrader generate_assignment failed: " + (proc.stderr or proc.stdout).strip()[-300:]
    return None


def record_gradebook(course: Path, assignment: str, result: Result) -> None:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        gb.update_or_create_student(result.student)
        gb.update_or_create_submission(assignment, result.student, timestamp=result.timestamp)
        for gid, (points, _, _) in result.tests.items():
            grade = gb.find_grade(gid, assignment, assignment, result.student)
            grade.auto_score = points
            grade.manual_score = None
            grade.extra_credit = None
            grade.needs_manual_grade = False
        gb.db.commit()


def _feedback(course: Path, assignment: str, graded: list[str], jobs: int) -> str:
    """nbgrader's feedback pages for ``graded``, in up to ``jobs`` nbgrader processes side by side."""
    chunks = [graded[i::jobs] for i in range(min(jobs, len(graded)))]
    folder = course / "autograded"
    everyone = sorted(p.name for p in folder.iterdir() if STUDENT_ID.match(p.name)) if folder.is_dir() else []

    def one(chunk: list[str]) -> str:
        args = ["generate_feedback", assignment, "--force", "--log-level=ERROR", "--HTMLExporter.sanitize_html=True"]
        if len(chunks) > 1:  # each process takes its own students only (ids have no commas: STUDENT_ID)
            others = sorted(set(everyone) - set(chunk))
            args.append(f"--CourseDirectory.student_id_exclude={','.join(others)}")
        proc = _nbgrader(course, *args)
        return proc.stdout[-5000:] + proc.stderr[-5000:]

    with cf.ThreadPoolExecutor(max_workers=len(chunks)) as pool:
        return "".join(pool.map(one, chunks))


def _failure_page(assignment: str, result: Result) -> str:
    rows = "".join(f"<li>{html.escape(gid)}: {t[0]:g} / {t[1]:g} {html.escape(t[2])}</li>" for gid, t in result.tests.items())
    return (
        f"<html><head><meta charset='utf-8'><title>{html.escape(assignment)}: {html.escape(result.student)}</title></head><body>"
        f"<h1>{html.escape(assignment)}</h1><p>Student: {html.escape(result.student)}</p>"
        f"<p><b>Score: {result.score:g} / {result.max_score:g}</b></p>"
        f"<p>{html.escape(result.note or 'Your notebook could not be graded.')}</p>"
        + (f"<ul>{rows}</ul>" if rows else "")
        + "<p>Open your notebook, run <i>Kernel → Restart &amp; Run All</i>, fix the first error, and submit again.</p>"
        "</body></html>"
    )


def grade(assignment: str, course: Path = ROOT, timeout: int | None = None, jobs: int | None = None,
          unsafe: bool = False, budget: float | None = None, limits: sandbox.Limits | None = None) -> list[Result]:
    course = Path(course).resolve()
    source_path = course / "solutions" / assignment / f"{assignment}.ipynb"
    release_path = course / "assignments" / assignment / f"{assignment}.ipynb"
    ids = sorted(p.name for p in (course / "solutions").iterdir()) if (course / "solutions").is_dir() else []
    if not source_path.exists():
        raise SystemExit(f"no assignment {assignment!r} under {course / 'solutions'} (ids: {' '.join(ids)})")
    if not release_path.exists():
        raise SystemExit(f"no release {release_path}: run `make assignments` first")
    if not unsafe:
        reason = sandbox.check()
        if reason:
            raise SystemExit(f"cannot grade safely: {reason}.\nStudent code would run with your rights. "
                             "Install the sandbox, or pass --unsafe (make grade ... UNSAFE=1) to grade "
                             "without it (only for submissions you trust).")
    limits = limits or sandbox.Limits()
    if timeout:
        limits.cell_timeout_s = float(timeout)
    if budget:
        limits.budget_s = float(budget)
    submitted = course / "submitted"
    students = sorted(name for name in (os.listdir(submitted) if submitted.is_dir() else [])
                      if (submitted / name / assignment).is_dir())
    if not students:
        raise SystemExit(f"no submissions of {assignment} under {submitted}/<student>/{assignment}/")
    release = nbformat.read(release_path, as_version=4)
    source = nbformat.read(source_path, as_version=4)
    jobs = max(1, jobs or os.cpu_count() or 1)
    log = io.StringIO()
    results: dict[str, Result] = {}
    shown: dict[str, object] = {}
    valid = []
    for student in students:
        if STUDENT_ID.match(student):
            valid.append(student)
        else:
            shown_id = student.encode("unicode_escape").decode("ascii")[:100]
            results[student] = Result(shown_id, status="failed", note=(
                "invalid student id (use letters, digits and . _ @ + - only): rename the folder "
                "under submitted/ and grade again"))
    workroot = Path(tempfile.mkdtemp(prefix=f"grading-{assignment}-"))
    os.chmod(workroot, 0o755)
    replays = ReplayWorkers(course)
    settings = Settings(course, assignment, limits, unsafe, workroot)
    slots = list(range(jobs))
    slot_lock = threading.Lock()

    def task(student: str):
        with slot_lock:
            slot = slots.pop()
        try:
            return grade_one(student, settings, release, source, replays, slot)
        finally:
            with slot_lock:
                slots.append(slot)

    try:
        with cf.ThreadPoolExecutor(max_workers=jobs) as pool:
            futures = {pool.submit(task, s): s for s in valid}
            for future in cf.as_completed(futures):
                student = futures[future]
                try:
                    results[student], shown[student] = future.result()
                except Exception as exc:  # noqa: BLE001 - a grader fault costs one student, not the run
                    results[student] = Result(student, status="failed",
                                              note=f"the grader failed on this notebook ({type(exc).__name__}: {str(exc)[:200]})")
                    shown[student] = None
                r = results[student]
                log.write(f"{student}: {r.score:g} / {r.max_score:g} {r.status} {r.note}\n")
    finally:
        replays.close()
        shutil.rmtree(workroot, ignore_errors=True)

    # Record: gradebook, autograded notebooks, feedback, CSV.
    problem = ensure_gradebook(course, assignment)
    max_score = sum(float(_meta(c).get("points", 0)) for c in source.cells if _meta(c).get("grade"))
    for student in valid:
        r = results[student]
        r.max_score = max_score
        nb = shown.get(student)
        if nb is not None:
            target = course / "autograded" / student / assignment
            _write_atomic(target / f"{assignment}.ipynb", nbformat.writes(nb))
            _write_atomic(target / "timestamp.txt", f"{r.timestamp:%Y-%m-%d %H:%M:%S.%f} UTC")
            secret = course / "submitted" / student / assignment / "submission_secret.txt"
            if secret.is_file() and not secret.is_symlink() and secret.stat().st_size < 10_000:
                # nbgrader's exchange matches returned feedback to the submission with it
                _write_atomic(target / secret.name, secret.read_text(encoding="utf-8", errors="replace"))
        elif r.status == "failed":
            r.tests = {}
        if problem is None:
            try:
                record_gradebook(course, assignment, r)
            except Exception as exc:  # noqa: BLE001 - e.g. another process holds the gradebook lock
                problem = f"{type(exc).__name__}: {str(exc)[:200]}"
        if problem:
            r.note = "; ".join(x for x in (r.note, f"not recorded in the gradebook ({problem})") if x)
    for r in results.values():
        if not STUDENT_ID.match(r.student):
            r.max_score = max_score
    graded = [s for s in valid if shown.get(s) is not None]
    if graded and problem is None:
        log.write(_feedback(course, assignment, graded, jobs))
    for student in valid:
        r = results[student]
        page = course / "feedback" / student / assignment / f"{assignment}.html"
        if r.status == "failed" or shown.get(student) is None or not page.is_file() or problem:
            if r.status == "graded" and not page.is_file():
                r.note = "; ".join(x for x in (r.note, "nbgrader made no feedback page; this one is the grader's own") if x)
            _write_atomic(page, _failure_page(assignment, r))

    grades = course / "grades"
    if grades.exists() and not grades.is_dir():
        grades.unlink()
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["student", "score", "max_score", "status", "note"])
    for key in sorted(results):
        r = results[key]
        writer.writerow([r.student, f"{r.score:g}", f"{r.max_score:g}", r.status, r.note])
    _write_atomic(grades / f"{assignment}.csv", out.getvalue())
    _write_atomic(grades / f"{assignment}.log", log.getvalue())
    return [results[k] for k in sorted(results)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("assignment")
    parser.add_argument("--jobs", type=int, default=None, help="students graded at once (default: the number of cores)")
    parser.add_argument("--timeout", type=int, default=None, help="seconds one cell may run (default 90)")
    parser.add_argument("--budget", type=float, default=None, help="seconds the whole notebook may run (default 300)")
    parser.add_argument("--unsafe", action="store_true", help="grade without the sandbox (trusted submissions only)")
    parser.add_argument("--course", type=Path, default=ROOT, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    start = time.monotonic()
    results = grade(args.assignment, args.course, args.timeout, args.jobs, args.unsafe, args.budget)
    width = max(len(r.student) for r in results)
    for r in results:
        print(f"{r.student:<{width}}  {r.score:>5g} / {r.max_score:<5g} {r.status:<7} {r.note}")
    print(f"{len(results)} submissions in {time.monotonic() - start:.0f} s; "
          f"grades: {args.course / 'grades' / (args.assignment + '.csv')}; feedback: {args.course / 'feedback'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
