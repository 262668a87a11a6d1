"""Hostile submissions: no attack gains a point, touches another student, leaks a hidden test or stops the run.

Each attack is written as a student would write it: code in the answer cells of
the released notebook. The course path is written into the attacks, as if the
student knew exactly where the instructor's files are. Two assignments are
attacked: 01 (PyTorch) and 05 (TensorFlow). The baseline for "gains nothing" is
the same wrong answer submitted without the attack.
"""
from __future__ import annotations

import csv
import hashlib
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import nbformat
import pytest

from tests import grading_support as gs
from tools import sandbox
from tools.grade import grade

pytestmark = [pytest.mark.grading]

if sandbox.check() is not None and os.environ.get("CI") != "true":  # under CI the sandbox must exist
    pytest.skip(f"grading sandbox unavailable: {sandbox.check()}", allow_module_level=True)

MARKER = f"bg-marker-{uuid.uuid4().hex[:10]}"


def _listener() -> tuple[int, list]:
    """A TCP server on the host's loopback that records any connection (a sandbox must not reach it)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(5)
    server.settimeout(0.5)
    seen: list = []

    def loop() -> None:
        end = time.time() + 900
        while time.time() < end:
            try:
                conn, _ = server.accept()
                seen.append(conn.recv(100))
                conn.close()
            except OSError:
                continue

    threading.Thread(target=loop, daemon=True).start()
    return server.getsockname()[1], seen


def attacks(course: Path, aid: str, port: int, zeros: dict[str, str], reference_alias: dict[str, str]) -> dict[str, dict]:
    """student -> {"cells": replacement answer sources, "base": 'good' | 'blank' | 'zeros'}."""
    c = repr(str(course))
    tamper = f"""
import glob, json, os, sqlite3
COURSE, AID = {c}, {aid!r}
for target in (COURSE + "/nbgrader_config.py", COURSE + "/grades/" + AID + ".csv"):
    try:
        with open(target, "a") as fh:
            fh.write("\\nc.GenerateFeedback.preprocessors = []\\n")
    except Exception:
        pass
try:
    db = sqlite3.connect(COURSE + "/gradebook.db")
    db.execute("update grade set manual_score = 100, extra_credit = 100")
    db.execute("update grade set auto_score = 0")
    db.commit()
except Exception:
    pass
for path in (COURSE + "/solutions/" + AID + "/" + AID + ".ipynb",
             COURSE + "/autograded/a_good/" + AID + "/" + AID + ".ipynb",
             COURSE + "/submitted/a_good/" + AID + "/" + AID + ".ipynb"):
    try:
        for cell in json.load(open(path))["cells"]:
            if cell["cell_type"] == "code" and "def " in "".join(cell["source"]):
                exec("".join(cell["source"]), globals())
    except Exception:
        pass
"""
    background = f"""
import os, subprocess, sys, time
loop = ("import time\\n"
        "for i in range(600):\\n"
        "    time.sleep(0.1)\\n"
        "    for p in ({c} + '/grades/{aid}.csv', '/tmp/escaped'):\\n"
        "        try: open(p, 'w').write('student,score\\\\nx_background,999\\\\n')\\n"
        "        except Exception: pass\\n")
subprocess.Popen([sys.executable, "-c", loop, {MARKER!r}], start_new_session=True,
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv(sys.executable, [sys.executable, "-c", loop, {MARKER!r}])
    os._exit(0)
import socket
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=2).sendall(b"escaped")
except Exception:
    pass
"""
    hook = """
ip = get_ipython()
def _leak(*args):
    print("LE" + "AKED", list(ip.user_ns.get("In", []))[-3:])
ip.events.register("post_run_cell", _leak)
ip.events.register("pre_run_cell", _leak)
print("LE" + "AKED", open(__file__).read() if "__file__" in globals() else "")
"""
    bomb = f"""
import subprocess
children = []
for _ in range(1000):  # more processes than the sandbox allows
    try:
        children.append(subprocess.Popen(["sh", "-c", "sleep 300; :", {MARKER!r}]))
    except Exception:
        break
"""
    patch = """
import numpy, utils.grading as g
numpy.allclose = lambda *a, **k: True
for _name in dir(g):
    if _name.startswith("check_"):
        setattr(g, _name, lambda *a, **k: None)
g.GradingError = type("Nothing", (Exception,), {})
"""
    transformer = 'get_ipython().input_transformers_cleanup.append(lambda lines: ["pass\\n"])\n'
    frame = """
import sys, numpy as _np
class Sneaky:
    def __init__(self, shape):
        self.shape = shape
    def __array__(self, dtype=None, copy=None):
        f = sys._getframe(1)
        while f is not None:
            for key in ("expected", "expected_w", "expected_out"):
                value = f.f_locals.get(key)
                if isinstance(value, _np.ndarray) and value.shape == self.shape:
                    return value
            f = f.f_back
        return _np.zeros(self.shape)
"""
    out = {
        "b_tamper_and_steal": {"prefix": tamper, "base": "zeros"},
        "c_background_and_fork": {"prefix": background, "base": "good"},
        "d_print_hidden_tests": {"prefix": hook, "base": "good"},
        "l_process_bomb": {"prefix": bomb, "base": "good"},
        "e_patch_the_checks": {"prefix": patch, "base": "zeros"},
        "f_input_transformer": {"prefix": transformer, "base": "blank"},
        "g_reference_alias": {"cells": dict(reference_alias), "base": "good"},
        "h_huge_output": {"prefix": 'for _ in range(50_000):\n    print("x" * 1000)\n', "base": "good"},
    }
    if "masked_softmax" in zeros:  # the frame reader fits assignment 1's array answers
        out["i_frame_reader"] = {"cells": {"masked_softmax": frame + (
            "\ndef masked_softmax(scores, mask=None):\n    return Sneaky(tuple(scores.shape))\n")}, "base": "zeros"}
    return out


ZEROS = {
    "01_soft_attention_pytorch": {
        "masked_softmax": "def masked_softmax(scores, mask=None):\n    return torch.zeros_like(scores)\n",
        "scaled_dot_product_attention": (
            "def scaled_dot_product_attention(queries, keys, values, mask=None):\n"
            "    w = torch.zeros(*queries.shape[:-1], keys.shape[-2])\n"
            "    return torch.zeros(*queries.shape[:-1], values.shape[-1]), w\n"),
    },
    "05_self_attention_tensorflow": {
        "causal_mask": "def causal_mask(T):\n    return np.ones((T, T), dtype=bool)\n",
    },
}
ALIAS = {
    "01_soft_attention_pytorch": {
        "masked_softmax": "from utils.attention.torch_impl import masked_softmax\n",
        "scaled_dot_product_attention": (
            'exec("def scaled_dot_product_attention(queries, keys, values, mask=None):\\n'
            '    import utils.attention.torch_impl as t\\n'
            '    return t.scaled_dot_product_attention(queries, keys, values, mask)")\n'),
        "additive": (
            "import importlib\n"
            "def additive_scores(queries, keys, W_q, W_k, w_v):\n"
            "    return getattr(importlib.import_module('utils.attention.torch_impl'), 'additive_scores')(queries, keys, W_q, W_k, w_v)\n"
            "def additive_attention(queries, keys, values, W_q, W_k, w_v, mask=None):\n"
            "    import utils.attention.torch_impl as t\n"
            "    return t.additive_attention(queries, keys, values, W_q, W_k, w_v, mask)\n"),
    },
    "05_self_attention_tensorflow": {
        "causal_mask": "from utils.attention.keras_impl import causal_mask\n",
    },
}


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _alive(marker: str) -> list[int]:
    pids = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if marker.encode() in (proc / "cmdline").read_bytes():
                    pids.append(int(proc.name))
            except OSError:
                continue
    return pids


@pytest.fixture(scope="module", params=[
    pytest.param("01_soft_attention_pytorch", marks=pytest.mark.xdist_group("security01")),
    pytest.param("05_self_attention_tensorflow", marks=pytest.mark.xdist_group("security05")),
])
def attacked(request, tmp_path_factory) -> dict:
    aid = request.param
    course = gs.make_course(tmp_path_factory.mktemp("security"), aid)
    gs.nbgrader(["generate_assignment", aid, "--force"], course)
    source = nbformat.read(course / "solutions" / aid / f"{aid}.ipynb", as_version=4)
    release = nbformat.read(course / "assignments" / aid / f"{aid}.ipynb", as_version=4)
    fills = gs.student_fill(source)
    zeros = {**fills, **ZEROS[aid]}
    blank = {}
    port, seen = _listener()
    bases = {"good": fills, "zeros": zeros, "blank": blank}
    gs.write_submission(course, aid, "a_good", gs.fill_release(release, fills))
    gs.write_submission(course, aid, "a_zeros", gs.fill_release(release, zeros))
    plan = attacks(course, aid, port, ZEROS[aid], ALIAS[aid])
    first = sorted(ZEROS[aid])[0]  # the answer cell the attacks are written into
    for student, attack in plan.items():
        cells = dict(bases[attack["base"]])
        if "prefix" in attack:
            cells[first] = attack["prefix"] + "\n" + cells.get(first, "raise NotImplementedError()")
        cells.update(attack.get("cells", {}))
        gs.write_submission(course, aid, student, gs.fill_release(release, cells))
    # Copy-pasted test cell (same grade_id), and every test cell edited to `pass`.
    dup = gs.fill_release(release, fills)
    index = next(i for i, c in enumerate(dup.cells) if c.metadata.get("nbgrader", {}).get("grade"))
    copy = nbformat.from_dict(dup.cells[index])
    copy.source = "pass"
    dup.cells.insert(index + 1, copy)
    gs.write_submission(course, aid, "j_duplicated_test_cell", dup)
    edited = gs.fill_release(release, zeros)
    for cell in edited.cells:
        if cell.metadata.get("nbgrader", {}).get("grade"):
            cell.source = "pass"
    gs.write_submission(course, aid, "k_edited_tests", edited)
    gs.write_submission(course, aid, "z_good_last", gs.fill_release(release, fills))

    config_before = _digest(course / "nbgrader_config.py")
    started = time.monotonic()
    results = {r.student: r for r in grade(aid, course, jobs=2)}
    return {"id": aid, "course": course, "results": results, "source": source, "plan": plan, "seen": seen,
            "config_before": config_before, "seconds": time.monotonic() - started}


def test_every_student_gets_a_row_and_a_page(attacked) -> None:
    course, aid = attacked["course"], attacked["id"]
    rows = list(csv.DictReader((course / "grades" / f"{aid}.csv").open()))
    assert sorted(r["student"] for r in rows) == sorted(attacked["results"])
    assert "x_background" not in {r["student"] for r in rows}
    for student in attacked["results"]:
        assert (course / "feedback" / student / aid / f"{aid}.html").is_file(), student


def test_good_submissions_get_full_marks(attacked) -> None:
    for student in ("a_good", "z_good_last", "c_background_and_fork", "d_print_hidden_tests",
                    "h_huge_output", "j_duplicated_test_cell"):
        r = attacked["results"][student]
        assert r.status == "graded" and r.score == r.max_score > 0, (student, r.score, r.max_score, r.note)


def test_no_attack_gains_a_point(attacked) -> None:
    results = attacked["results"]
    baseline = {"zeros": results["a_zeros"].score, "blank": 0.0, "good": results["a_good"].max_score}
    assert baseline["zeros"] < results["a_good"].max_score
    for student, attack in attacked["plan"].items():
        if attack["base"] != "good":
            assert results[student].score <= baseline[attack["base"]], (
                f"{student} scored {results[student].score}, the same answers without the attack {baseline[attack['base']]}")
    assert results["k_edited_tests"].score == baseline["zeros"], results["k_edited_tests"]


def test_reference_implementation_earns_nothing(attacked) -> None:
    """Import, alias, exec and getattr routes to the course's own code all fail the same way."""
    r = attacked["results"]["g_reference_alias"]
    lost = [gid for gid, (points, maximum, message) in r.tests.items() if points < maximum]
    assert lost, r.tests
    assert all("This exercise asks you to write it yourself" in r.tests[g][2] for g in lost), {g: r.tests[g][2] for g in lost}
    assert r.score < attacked["results"]["a_good"].max_score


def test_files_and_other_students_untouched(attacked) -> None:
    course, aid = attacked["course"], attacked["id"]
    assert _digest(course / "nbgrader_config.py") == attacked["config_before"]
    with sqlite3.connect(course / "gradebook.db") as db:
        assert db.execute("select count(*) from grade where manual_score is not null or extra_credit is not null").fetchone()[0] == 0
    scores = gs.scores(course, aid)
    for student, r in attacked["results"].items():
        assert scores[student][0] == r.score, (student, scores[student], r.score)
    assert not Path("/tmp/escaped").exists()


def test_nothing_survives_and_nothing_reaches_the_network(attacked) -> None:
    assert not _alive(MARKER), "a process started by a submission outlived its grading"
    assert not attacked["seen"], f"a sandbox reached the host's loopback: {attacked['seen']}"


def test_feedback_and_graded_notebooks_leak_nothing(attacked) -> None:
    course, aid = attacked["course"], attacked["id"]
    hidden = gs.secret_lines(attacked["source"], gs.BEGIN_HIDDEN, gs.END_HIDDEN)
    solution = gs.secret_lines(attacked["source"], gs.BEGIN_SOLUTION, gs.END_SOLUTION)
    assert hidden and solution
    for page in course.glob(f"feedback/*/{aid}/{aid}.html"):
        text = gs.visible_text(page.read_text(encoding="utf-8"))
        leaked = sorted(line for line in hidden if line in text)
        assert not leaked, f"{page}: hidden test text {leaked[:3]}"
        student = page.parent.parent.name
        own = nbformat.read(course / "submitted" / student / aid / f"{aid}.ipynb", as_version=4)
        own_text = "\n".join(cell.source for cell in own.cells)  # a solver's page shows their own code
        stolen = sorted(line for line in solution if line in text and line not in own_text)
        assert not stolen, f"{page}: solution text {stolen[:3]}"
        assert "LEAKED" not in text
        assert page.stat().st_size < 1_500_000
    for graded in course.glob(f"autograded/*/{aid}/{aid}.ipynb"):
        assert graded.stat().st_size < 500_000, graded


def test_duplicate_cells_are_noted(attacked) -> None:
    assert "second copy" in attacked["results"]["j_duplicated_test_cell"].note


# --- what stops the run for everyone ---------------------------------------------------------

AID = "01_soft_attention_pytorch"


@pytest.fixture(scope="module")
def small_course(tmp_path_factory) -> dict:
    course = gs.make_course(tmp_path_factory.mktemp("stops"), AID)
    gs.nbgrader(["generate_assignment", AID, "--force"], course)
    source = nbformat.read(course / "solutions" / AID / f"{AID}.ipynb", as_version=4)
    release = nbformat.read(course / "assignments" / AID / f"{AID}.ipynb", as_version=4)
    return {"course": course, "fills": gs.student_fill(source), "release": release}


@pytest.mark.xdist_group("security01")
def test_bad_ids_log_folder_and_a_locked_gradebook_do_not_stop_the_run(small_course) -> None:
    course, fills, release = small_course["course"], small_course["fills"], small_course["release"]
    gs.write_submission(course, AID, "good", gs.fill_release(release, fills))
    gs.write_submission(course, AID, "bad\nid", gs.fill_release(release, fills))
    (course / "grades" / f"{AID}.log").mkdir(parents=True)
    grade(AID, course, jobs=1)  # fills the gradebook
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sqlite3, time\n"
        f"db = sqlite3.connect({str(course / 'gradebook.db')!r}, isolation_level=None)\n"
        "db.execute('BEGIN EXCLUSIVE')\nprint('locked', flush=True)\ntime.sleep(600)\n")],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        results = {r.student: r for r in grade(AID, course, jobs=1)}
    finally:
        holder.kill()
    rows = {r["student"]: r for r in csv.DictReader((course / "grades" / f"{AID}.csv").open())}
    assert rows["good"]["score"] == rows["good"]["max_score"] == "12", rows["good"]
    assert "gradebook" in rows["good"]["note"]
    assert (course / "feedback" / "good" / AID / f"{AID}.html").is_file()
    bad = [r for r in results.values() if r.student != "good"]
    assert len(bad) == 1 and bad[0].status == "failed" and "invalid student id" in bad[0].note
    assert (course / "grades" / f"{AID}.log").is_file()


@pytest.mark.xdist_group("security01")
def test_a_notebook_budget_caps_slow_cells(small_course, tmp_path) -> None:
    """Many cells just under the cell timeout cannot multiply the time a student takes."""
    course, fills, release = small_course["course"], small_course["fills"], small_course["release"]
    for old in (course / "submitted").iterdir():
        shutil.rmtree(old)
    slow = gs.fill_release(release, fills)
    first = next(i for i, c in enumerate(slow.cells) if c.metadata.get("nbgrader", {}).get("grade"))
    for _ in range(8):
        slow.cells.insert(first, nbformat.v4.new_code_cell("import time\ntime.sleep(9)"))
    gs.write_submission(course, AID, "slow", slow)
    limits = sandbox.Limits(budget_s=30, cell_timeout_s=10)
    results = {r.student: r for r in grade(AID, course, jobs=1, limits=limits)}
    # the note comes from the budget itself (8 cells of 9 s would otherwise all run, 72 s > 30 s)
    r = results["slow"]
    assert "30 s budget" in r.note and r.score < r.max_score, (r.score, r.note)


@pytest.mark.skipif(os.geteuid() != 0, reason="the per-uid process limit applies when grading as root")
def test_a_process_bomb_cannot_starve_a_sandbox_of_another_grading_run(tmp_path) -> None:
    """Two grading runs side by side (two instructors' terminals, two test workers) must not share a uid.

    The process limit is counted per uid across the machine: a student who starts
    processes up to it would leave a neighbour sharing the uid unable to start a thread.
    """
    limits = sandbox.Limits(budget_s=40, processes=64)
    bomb_dir = tmp_path / "bomb"
    bomb_dir.mkdir()
    bomb = (
        "import os, subprocess, time\n"
        "children = []\n"
        "for _ in range(200):\n"
        "    try:\n"
        "        children.append(subprocess.Popen(['sleep', '60']))\n"
        "    except OSError:\n"
        "        break\n"
        "open('full', 'w').write(str(len(children)))\n"
        "for _ in range(300):  # hold the processes until the neighbour has run\n"
        "    if os.path.exists('done'):\n"
        "        break\n"
        "    time.sleep(0.1)\n")
    os.chmod(tmp_path, 0o755)
    thread = threading.Thread(target=sandbox.run, args=(bomb_dir, [sys.executable, "-c", bomb], limits),
                              kwargs={"grace_s": 0}, daemon=True)
    thread.start()
    end = time.monotonic() + 30
    while not (bomb_dir / "full").exists() and time.monotonic() < end:
        time.sleep(0.2)
    assert (bomb_dir / "full").exists(), "the bomb never reached the process limit"
    assert int((bomb_dir / "full").read_text()) < 200, "the process limit did not stop the bomb"
    # A second grading process on the same machine: its sandbox starts threads.
    neighbour_dir = tmp_path / "neighbour"
    neighbour_dir.mkdir()
    threads = ("import threading\n"
               "ts = [threading.Thread(target=lambda: None) for _ in range(16)]\n"
               "[t.start() for t in ts]\n[t.join() for t in ts]\nprint('threads-ok')\n")
    script = (f"import sys; sys.path.insert(0, {str(gs.ROOT)!r})\n"
              "from pathlib import Path\nfrom tools import sandbox\n"
              f"out = sandbox.run(Path({str(neighbour_dir)!r}), [sys.executable, '-c', {threads!r}], "
              "sandbox.Limits(budget_s=30, processes=64), grace_s=0)\n"
              "print(out.log)\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    (bomb_dir / "done").write_text("")
    thread.join(timeout=60)
    assert "threads-ok" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-2000:]


@pytest.mark.xdist_group("security01")
def test_a_runner_failure_is_retried_then_noted(small_course, monkeypatch) -> None:
    """A runner that fails (say, a kernel that did not start on a busy machine) is no verdict on the student."""
    course, fills, release = small_course["course"], small_course["fills"], small_course["release"]
    shutil.rmtree(course / "submitted", ignore_errors=True)
    gs.write_submission(course, AID, "good", gs.fill_release(release, fills))
    real_run, calls = sandbox.run, []

    def flaky(workdir, argv, limits, **kwargs):
        if not (workdir / "out").is_dir():  # the grader's own check that a sandbox starts
            return real_run(workdir, argv, limits, **kwargs)
        calls.append(workdir)
        if len(calls) in failing:
            (workdir / "out" / "status.json").write_text('{"state": "runner error: RuntimeError", "cells_run": 0}')
            return sandbox.Outcome(0, False, "")
        return real_run(workdir, argv, limits, **kwargs)

    monkeypatch.setattr(sandbox, "run", flaky)
    failing = {1}
    r = grade(AID, course, jobs=1)[0]
    assert len(calls) == 2 and r.score == r.max_score == 12 and r.note == "", (len(calls), r.score, r.note)
    calls.clear()
    failing = {1, 2}
    r = grade(AID, course, jobs=1)[0]
    assert len(calls) == 2 and r.score == 0, (len(calls), r.score)
    assert "runner stopped twice (RuntimeError)" in r.note and "grade this notebook again" in r.note, r.note
