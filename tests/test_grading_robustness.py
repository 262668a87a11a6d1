"""Grading survives bad submissions: every one gets a score and feedback, and the run goes on."""
from __future__ import annotations

import base64
import csv
import os
import time
from pathlib import Path

import nbformat
import pytest

from tests import grading_support as gs
from grader import sandbox
from grader.grade import grade

AID = "01_soft_attention_pytorch"
# Limits of the whole sandbox for this class: every student's processes together (a cgroup)
PROCESSES, SANDBOX_MIB = 64, 1536
# A message the kernel sends with the session's own key, as the student's code can: content the runner
# cannot read. (The kernel holds the connection file's key; nothing it sends is trusted.)
SEND = ("ip = get_ipython()\nk = ip.kernel\n"
        "k.session.send(k.iopub_socket, 'display_data', content={content}, parent=ip.get_parent())\n"
        "import time\ntime.sleep(1)\n")
UNREADABLE = {
    "n_deep_json": SEND.format(content="b'[' * 200000 + b']' * 200000"),
    "o_long_integer": SEND.format(content="""b'{"data": {"text/plain": "x"}, "metadata": {}, "n": ' + b'7' * 50000 + b'}'"""),
    "p_list_content": SEND.format(content="b'[1, 2, 3]'"),
    "q_display_deep": "x = []\nfor _ in range(700):\n    x = [x]\nfrom IPython.display import display\n"
                      "display({'application/json': x}, raw=True)\n",
    "r_forged_status": ("ip = get_ipython()\nk = ip.kernel\n"
                        "k.session.send(k.iopub_socket, 'status', content={'state': 'idle'}, parent=ip.get_parent())\n"
                        "import time\ntime.sleep(1)\n"),
}
FORK_BOMB = ("import os, time\nfor _ in range(1000):\n    try:\n        if os.fork() == 0:\n"
             "            time.sleep(30)\n            os._exit(0)\n    except OSError:\n        break\n")
MEMORY_HOGS = ("import os, time\nfor _ in range(6):\n    if os.fork() == 0:\n"
               "        b = bytearray(400 * 2**20)\n        for i in range(0, len(b), 4096):\n            b[i] = 1\n"
               "        time.sleep(30)\n        os._exit(0)\ntime.sleep(8)\n")
pytestmark = [pytest.mark.grading, pytest.mark.xdist_group("robustness")]


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> dict:
    course = gs.make_course(tmp_path_factory.mktemp("robust"), AID)
    gs.nbgrader(["generate_assignment", AID, "--force"], course)
    source = nbformat.read(course / "solutions" / AID / f"{AID}.ipynb", as_version=4)
    release = nbformat.read(course / "assignments" / AID / f"{AID}.ipynb", as_version=4)
    fills = gs.student_fill(source)
    subs = {
        "a_good": gs.fill_release(release, fills),
        "b_raises": gs.fill_release(release, {**fills, "masked_log_softmax": 'raise RuntimeError("half done")'}),
        "c_hangs": gs.fill_release(release, {**fills, "masked_log_softmax": "while True:\n    pass\n" + fills["masked_log_softmax"]}),
        "d_kills_kernel": gs.fill_release(release, {**fills, "top_k": "import os\nos._exit(1)"}),
        "e_huge_output": gs.fill_release(release, {**fills, "top_k": fills["top_k"] + '\nfor i in range(100000):\n    print("spam " * 20)'}),
        "f_deleted_tests": gs.fill_release(release, fills),
        "h_fork_bomb": gs.fill_release(release, {**fills, "top_k": fills["top_k"] + "\n" + FORK_BOMB}),
        "i_memory_hogs": gs.fill_release(release, {**fills, "top_k": fills["top_k"] + "\n" + MEMORY_HOGS}),
        "j_ignores_sigint": gs.fill_release(release, {**fills, "top_k": (
            fills["top_k"] + "\nimport signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass\n")}),
        **{name: gs.fill_release(release, {**fills, "top_k": fills["top_k"] + "\n" + code})
           for name, code in UNREADABLE.items()},
        "z_good_after": gs.fill_release(release, fills),
    }
    subs["f_deleted_tests"].cells = [c for c in subs["f_deleted_tests"].cells if not c.metadata.get("nbgrader", {}).get("grade")]
    for student, nb in subs.items():
        gs.write_submission(course, AID, student, nb)
    broken = course / "submitted" / "g_not_json" / AID
    broken.mkdir(parents=True)
    (broken / f"{AID}.ipynb").write_text("{ this is not a notebook")
    # A file name that is not UTF-8 (a Latin-1 é, as another system may write it) and content that is not JSON
    odd = course / "submitted" / "k_bad_file_name" / AID
    odd.mkdir(parents=True)
    (Path(os.fsdecode(bytes(odd) + b"/caf\xe9.ipynb"))).write_bytes(b"\xff\xfe not json")
    # A lone surrogate in a cell of the student's own (JSON allows it; UTF-8 cannot carry it)
    surrogate = gs.fill_release(release, fills)
    surrogate.cells.insert(1, nbformat.v4.new_code_cell("note = 'half a pair: \\ud800'\n"))
    folder = course / "submitted" / "l_lone_surrogate" / AID
    folder.mkdir(parents=True)
    import json
    (folder / f"{AID}.ipynb").write_text(json.dumps(nbformat.from_dict(surrogate)).replace("\\\\ud800", "\\ud800"))
    (folder / "timestamp.txt").write_text("2026-01-01 00:00:00.000000 UTC")
    # An honest notebook saved with a large image in its outputs (30 MB): outputs are not graded
    big = gs.fill_release(release, fills)
    cell = next(c for c in big.cells if c.cell_type == "code")
    cell.outputs = [nbformat.v4.new_output("display_data", data={"image/png": base64.b64encode(os.urandom(22 * 2**20)).decode()})]
    gs.write_submission(course, AID, "m_large_outputs", big)
    unsafe = sandbox.check() is not None and os.environ.get("CI") != "true"
    limits = sandbox.Limits(processes=PROCESSES, sandbox_memory_bytes=SANDBOX_MIB * 2**20)
    started = time.monotonic()
    results = {r.student: r for r in grade(AID, course, timeout=10, unsafe=unsafe, limits=limits, jobs=2)}
    return {"course": course, "results": results, "by_hand": gs.hand_graded_points(source), "unsafe": unsafe,
            "seconds": time.monotonic() - started, "cgroup": sandbox.Cgroup.support()}


def test_every_submission_gets_a_row_and_feedback(graded) -> None:
    course = graded["course"]
    rows = list(csv.DictReader((course / "grades" / f"{AID}.csv").open()))
    assert sorted(r["student"] for r in rows) == sorted(graded["results"])
    for student in graded["results"]:
        page = course / "feedback" / student / AID / f"{AID}.html"
        assert page.exists(), f"no feedback for {student}"


def test_good_submissions_get_full_marks_before_and_after_bad_ones(graded) -> None:
    for student in ("a_good", "z_good_after"):
        r = graded["results"][student]
        assert gs.full_marks(r, graded["by_hand"]), (student, r)


def test_exception_and_hang_give_partial_marks(graded) -> None:
    for student in ("b_raises", "c_hangs"):
        r = graded["results"][student]
        assert r.status == gs.graded_status(graded["by_hand"]) and 0 < r.score < r.max_score, (student, r)
    assert "10 s limit per cell" in graded["results"]["c_hangs"].note
    page = gs.visible_text((graded["course"] / "feedback" / "c_hangs" / AID / f"{AID}.html").read_text())
    assert "10 s limit per cell" in page


def test_dead_kernel_keeps_the_points_earned_before_it_died(graded) -> None:
    r = graded["results"]["d_kills_kernel"]
    assert r.status == gs.graded_status(graded["by_hand"]) and 0 < r.score < r.max_score and "kernel died" in r.note, r
    page = gs.visible_text((graded["course"] / "feedback" / "d_kills_kernel" / AID / f"{AID}.html").read_text())
    assert "kernel died" in page


def test_broken_file_gets_zero_with_a_reason(graded) -> None:
    r = graded["results"]["g_not_json"]
    assert r.status == "failed" and r.score == 0 and "not a valid notebook" in r.note, r
    page = (graded["course"] / "feedback" / "g_not_json" / AID / f"{AID}.html").read_text()
    assert "not a valid notebook" in page


def test_deleted_test_cells_are_restored_and_graded(graded) -> None:
    r = graded["results"]["f_deleted_tests"]
    assert gs.full_marks(r, graded["by_hand"]), r
    assert "restored" in r.note
    assert (graded["course"] / "grading_backups" / "f_deleted_tests" / AID / f"{AID}.ipynb").exists()


def test_huge_output_is_cut(graded) -> None:
    r = graded["results"]["e_huge_output"]
    assert gs.full_marks(r, graded["by_hand"]), r
    graded_nb = graded["course"] / "autograded" / "e_huge_output" / AID / f"{AID}.ipynb"
    assert graded_nb.stat().st_size < 500_000, f"autograded notebook is {graded_nb.stat().st_size} bytes"


# --- the sandbox's own limits, each notebook's cost, what the kernel sends, what the submission names ---


def _sandboxed(graded) -> None:
    if graded["unsafe"]:
        pytest.skip("no sandbox here (bubblewrap): the limits below are the sandbox's")


def test_process_and_memory_limits_hold_for_the_whole_sandbox(graded) -> None:
    """A fork bomb and many processes that each allocate memory: the student is told which limit their
    notebook hit, loses what did not run, and the next student is graded as usual."""
    _sandboxed(graded)
    if graded["cgroup"][0] is None:
        pytest.skip(f"no cgroup can be made here ({graded['cgroup'][1]}): per-process limits only")
    bomb, hogs = graded["results"]["h_fork_bomb"], graded["results"]["i_memory_hogs"]
    assert f"more than {PROCESSES} processes" in bomb.note and bomb.status != "failed", bomb
    assert f"more than {SANDBOX_MIB} MiB of memory" in hogs.note and hogs.status != "failed", hogs
    assert 0 < hogs.score <= hogs.max_score and 0 < bomb.score <= bomb.max_score, (hogs, bomb)
    page = gs.visible_text((graded["course"] / "feedback" / "i_memory_hogs" / AID / f"{AID}.html").read_text())
    assert f"more than {SANDBOX_MIB} MiB" in page
    assert gs.full_marks(graded["results"]["z_good_after"], graded["by_hand"])
    log = (graded["course"] / "grades" / f"{AID}.log").read_text(encoding="utf-8")
    assert f"[sandbox limits] cgroup {graded['cgroup'][0]}, {SANDBOX_MIB} MiB of memory and {PROCESSES} processes" in log


def test_a_kernel_that_ignores_interrupts_costs_one_cell_timeout(graded) -> None:
    """SIGINT ignored and a busy loop: the sandbox is killed a few seconds past the 10 s cell timeout (it used
    to hold its worker until the runner's own limit, 450 s), and the points earned before it stay."""
    _sandboxed(graded)
    r = graded["results"]["j_ignores_sigint"]
    assert "did not stop when interrupted" in r.note and 0 < r.score < r.max_score, r
    assert r.seconds < 10 + 5 + 40, f"the notebook held its worker {r.seconds} s"


@pytest.mark.parametrize("student", sorted(UNREADABLE))
def test_output_the_runner_cannot_read_is_the_submissions_result(graded, student) -> None:
    """Too deep, a number too long, content that is a list, a forged status: the student's own result, said
    so, run once (not "run twice ... tell your instructor")."""
    _sandboxed(graded)
    r = graded["results"][student]
    assert "sent output the grader could not read" in r.note, r.note
    assert "twice" not in r.note and "tell your instructor" not in r.note, r.note
    assert r.status != "failed" and 0 < r.score < r.max_score, r  # points earned before it stay


def test_names_and_texts_a_submission_controls_do_not_stop_the_run(graded) -> None:
    """A file name that is not UTF-8 (and not JSON inside), a lone surrogate in a cell: each gets its row
    and page, and everyone else theirs (the run used to end with no CSV at all)."""
    course, results = graded["course"], graded["results"]
    bad = results["k_bad_file_name"]
    assert bad.status == "failed" and "caf\\xe9.ipynb" in bad.note and "not a valid notebook" in bad.note, bad
    page = gs.visible_text((course / "feedback" / "k_bad_file_name" / AID / f"{AID}.html").read_text(encoding="utf-8"))
    assert "caf\\xe9.ipynb is not a valid notebook" in page
    odd = results["l_lone_surrogate"]
    assert gs.full_marks(odd, graded["by_hand"]) and "not valid text" in odd.note, odd
    rows = {r["student"]: r for r in csv.DictReader((course / "grades" / f"{AID}.csv").open(encoding="utf-8"))}
    assert set(rows) == set(results) and rows["k_bad_file_name"]["max_score"] == rows["a_good"]["max_score"]


def test_an_honest_notebook_with_large_outputs_is_graded(graded) -> None:
    """30 MB of stored image output: outputs are stripped before the size check (the grader runs the notebook
    again), and the note says what to do next time."""
    r = graded["results"]["m_large_outputs"]
    assert gs.full_marks(r, graded["by_hand"]), r
    assert "outputs" in r.note and "clear outputs before submitting" in r.note, r.note


def test_one_students_page_failing_never_stops_the_others(tmp_path, monkeypatch) -> None:
    """Whatever breaks one student's page (here the page writer itself raises): that student gets a
    plain-text page with their score, the others their own pages, and the log says what happened."""
    import io

    import grader.grade as grading

    real = grading.failure_page

    def breaks_for_one(assignment, result):
        if result.student == "b_breaks":
            raise UnicodeEncodeError("utf-8", "\udcff", 0, 1, "surrogates not allowed")
        return real(assignment, result)

    monkeypatch.setattr(grading, "failure_page", breaks_for_one)
    results = {s: grading.Result(s, score=3, max_score=15, note=f"note of {s}") for s in ("a_first", "b_breaks", "c_last")}
    log = io.StringIO()
    grading.write_feedback(tmp_path, AID, sorted(results), results, {}, False, 2, log)
    for student in results:
        page = (tmp_path / "feedback" / student / AID / f"{AID}.html").read_text(encoding="utf-8")
        assert f"note of {student}" in page and "Score: 3 / 15" in gs.visible_text(page), (student, page)
    assert "b_breaks" in log.getvalue() and "UnicodeEncodeError" in log.getvalue(), log.getvalue()


def test_a_large_notebook_changed_is_graded_again(tmp_path) -> None:
    """A notebook over 20 MB is graded now (outputs stripped), so its content is part of what decides
    whether a rerun can keep the last result: a resubmission that changes it is never 'unchanged'."""
    from grader.grade import MAX_NOTEBOOK_BYTES, fingerprint

    folder = tmp_path / "submitted" / "s" / AID
    folder.mkdir(parents=True)
    path = folder / f"{AID}.ipynb"
    path.write_bytes(b"a" * (MAX_NOTEBOOK_BYTES + 1000))
    before = fingerprint(tmp_path, AID, "s", b"settings")
    path.write_bytes(b"b" * (MAX_NOTEBOOK_BYTES + 1000))
    assert fingerprint(tmp_path, AID, "s", b"settings") != before
