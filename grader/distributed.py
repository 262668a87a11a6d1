"""Grading beyond one machine: each student's grading is a task on a Dask distributed scheduler.

    make grade ASSIGNMENT=<id> SCHEDULER=tcp://scheduler-host:8786
    (python -m grader <id> --scheduler tcp://scheduler-host:8786)

A worker runs what ``make grade`` runs for one student on one machine (the
sandbox, the runner outside it, the trusted decider) and returns the result
and the notebook to record; the machine that asked records everything (the
gradebook, the CSV, the pages), so the results are the same as a local run's.
Each worker needs the course's environment, bubblewrap, and the course folder
at the same path as on the machine that asks (a shared file system): start
one in the course folder with

    .venv/bin/dask worker tcp://scheduler-host:8786 --nworkers 2 --nthreads 1

A task whose worker dies is run again on another worker by the scheduler; a
task that fails (an exception in the grader on that worker) is retried once.
A task that still fails (or whose workers keep dying) is an interruption, not a
verdict: that student's last good result, row, page and gradebook record stay,
with a note saying so (without one, the student gets a row saying so).
"""
from __future__ import annotations

import atexit
import shutil
import tempfile
import threading
import uuid
from pathlib import Path

import nbformat

_VIEWS: dict[tuple, tuple] = {}
_LOCK = threading.Lock()


def _prepared(course: str, assignment: str, unsafe: bool):
    """Per worker process, once per assignment: the notebooks, the assignment's view of utils (built
    here, from the course folder), a sandbox check and the decider's processes."""
    from grader import reference, sandbox
    from grader.workers import Workers

    key = (course, assignment, unsafe)
    with _LOCK:
        if key not in _VIEWS:
            root = Path(course)
            source = nbformat.read(root / "solutions" / assignment / f"{assignment}.ipynb", as_version=4)
            release = nbformat.read(root / "assignments" / assignment / f"{assignment}.ipynb", as_version=4)
            workroot = Path(tempfile.mkdtemp(prefix="course-view-"))
            atexit.register(shutil.rmtree, workroot, True)
            lib = reference.view(workroot / "lib", reference.policy_of(source, assignment))  # this worker's utils
            workroot.chmod(0o711)
            if not unsafe:
                reason = sandbox.check(lib)
                if reason:
                    raise RuntimeError(f"this worker cannot grade safely: {reason}")
            from grader.grade import REPLAY_TIMEOUT_S

            _VIEWS[key] = (release, source, workroot, lib, Workers("grader.replay", REPLAY_TIMEOUT_S))
        return _VIEWS[key]


def grade_remote(course: str, assignment: str, limits: dict, unsafe: bool, student: str) -> tuple:
    """One student's grading on a worker: (Result, the notebook to record as JSON text, or None)."""
    import time

    from grader import sandbox
    from grader.grade import Settings, grade_one

    release, source, workroot, lib, replays = _prepared(course, assignment, unsafe)
    settings = Settings(Path(course), assignment, sandbox.Limits(**limits), unsafe, workroot, lib)
    began = time.monotonic()
    result, nb = grade_one(student, settings, release, source, replays, threading.get_ident() % 1000)
    result.seconds = round(time.monotonic() - began, 1)
    return result, (nbformat.writes(nb) if nb is not None else None)


def grade_students(scheduler, settings, students: list[str], progress: bool) -> dict:
    """Every student's grading as a task on the scheduler at ``scheduler`` (an address, or a
    distributed Client); their outcomes, keyed by student."""
    from distributed import Client, as_completed

    from grader.grade import failed_task, progress_bar

    client = scheduler if isinstance(scheduler, Client) else Client(scheduler, timeout=60)
    run = uuid.uuid4().hex[:8]
    outcomes = {}
    bar = progress_bar(len(students), progress, settings.assignment)
    try:
        futures = {client.submit(grade_remote, str(settings.course), settings.assignment, settings.limits.__dict__,
                                 settings.unsafe, student, key=f"grade-{settings.assignment}-{run}-{i}",
                                 pure=False, retries=1): student
                   for i, student in enumerate(students)}
        for future in as_completed(futures):
            student = futures[future]
            try:
                result, text = future.result()
                outcomes[student] = (result, nbformat.reads(text, as_version=4) if text else None)
            except Exception as exc:  # noqa: BLE001 - one student's task, not the run
                # its worker died each time, or it failed twice: an interruption, not a verdict (an earlier
                # good result of this student stays; grader.grade.keep_beside)
                outcomes[student] = (failed_task(settings.course, settings.assignment, student, (
                    f"the grader failed on this notebook on a worker ({type(exc).__name__}: {str(exc)[:200]}); "
                    "grade it again")), None)
            bar.update(1)
    finally:
        bar.close()
        if client is not scheduler:
            client.close()
    return outcomes


def scheduler_info(address: str) -> dict:
    """Workers and threads a scheduler has (for the log and the benchmark)."""
    from distributed import Client

    with Client(address, timeout=30) as client:
        workers = client.scheduler_info()["workers"]
        return {"workers": len(workers), "threads": sum(w["nthreads"] for w in workers.values())}
