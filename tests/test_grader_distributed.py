"""Grading on a Dask cluster gives what a local run gives, and a worker lost mid-run loses no student.

A local cluster of two worker processes (each with its nanny, as `dask worker
--nworkers 2` starts them) grades a mixed class (good, partial, blank,
hostile); one worker is killed while it grades. Scores, CSV rows and feedback
pages are compared with the same class graded locally.
"""
from __future__ import annotations

import csv
import os
import threading
import time

import nbformat
import pytest
import yaml

from grader import sandbox
from grader.grade import grade
from tests import grading_support as gs

AID = "01_soft_attention_pytorch"
pytestmark = [pytest.mark.grading, pytest.mark.xdist_group("distributed")]
UNSAFE = sandbox.check() is not None and os.environ.get("CI") != "true"


def _die_soon() -> None:
    """Run on a worker: it dies a moment later, as a machine that goes away (its nanny starts a new one)."""
    threading.Timer(0.2, os._exit, args=(1,)).start()


def _rows(course) -> dict:
    return {r["student"]: {k: r[k] for k in ("score", "max_score", "status")}
            for r in csv.DictReader((course / "grades" / f"{AID}.csv").open())}


def test_a_dask_cluster_grades_as_a_local_run_does_and_survives_a_lost_worker(tmp_path) -> None:
    distributed = pytest.importorskip("distributed")
    course = gs.make_course(tmp_path, AID)
    gs.nbgrader(["generate_assignment", AID, "--force"], course)
    source = nbformat.read(course / "solutions" / AID / f"{AID}.ipynb", as_version=4)
    release = nbformat.read(course / "assignments" / AID / f"{AID}.ipynb", as_version=4)
    fills = gs.student_fill(source)
    m = yaml.safe_load((gs.ROOT / "tests" / "mutants" / f"{AID}.yml").read_text())[0]
    code = fills[m["cell"]]
    for old, new in m["replace"]:
        code = code.replace(old, new)
    first = next(iter(fills))
    hostile = ("import numpy, utils.grading as g\nnumpy.allclose = lambda *a, **k: True\n"
               "for _n in dir(g):\n    if _n.startswith('check_'):\n        setattr(g, _n, lambda *a, **k: None)\n")
    slow = "import time\ntime.sleep(12)  # long enough to be caught mid-grading\n"
    class_ = {"good": fills, "partial": {**fills, m["cell"]: code}, "blank": {},
              "hostile": {first: hostile + "raise NotImplementedError()"}, "slow_good": {**fills, first: slow + fills[first]}}
    for student, cells in class_.items():
        gs.write_submission(course, AID, student, gs.fill_release(release, cells))
    grade(AID, course, jobs=2, unsafe=UNSAFE)
    local = _rows(course)
    auto = float(local["good"]["max_score"]) - gs.hand_graded_points(source)  # written answers wait for the instructor
    assert float(local["good"]["score"]) == float(local["slow_good"]["score"]) == auto > 0
    assert 0 < float(local["partial"]["score"]) < float(local["good"]["max_score"])
    assert local["blank"]["score"] == local["hostile"]["score"] == "0"
    for page in course.glob(f"feedback/*/{AID}/{AID}.html"):
        page.unlink()

    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        done: dict = {}
        runner = threading.Thread(target=lambda: done.setdefault("results", grade(
            AID, course, unsafe=UNSAFE, force=True, scheduler=cluster.scheduler_address)))
        runner.start()
        killed = None
        end = time.monotonic() + 300
        while killed is None and time.monotonic() < end and runner.is_alive():
            busy = {w: keys for w, keys in client.processing().items() if keys}
            if busy:
                victim = sorted(busy)[0]
                time.sleep(2)  # its student's sandbox is running now
                client.run(_die_soon, workers=[victim])
                killed = victim
            time.sleep(0.2)
        runner.join(timeout=900)
    assert killed is not None, "no worker was ever busy: the kill never happened"
    assert "results" in done, "the distributed run did not finish"
    assert _rows(course) == local, (_rows(course), local)
    for student in class_:
        assert (course / "feedback" / student / AID / f"{AID}.html").is_file(), student
    meta = (course / "grades" / f"{AID}.json").read_text()
    assert cluster.scheduler_address in meta
