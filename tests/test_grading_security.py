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
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import uuid
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pytest

from tests import grading_support as gs
from grader import csvsafe, sandbox
from grader.grade import grade

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
    final, condition, target, args = PROBE_TARGETS[aid]
    probe = (PROBE.replace("COURSE_PATH", c).replace("FINAL_NAME", repr(final)).replace("FINAL_CONDITION", condition)
             .replace("REF_TARGET", repr(target)).replace("REF_ARGS", args))
    out["m_probe"] = {"prefix": probe, "base": "good"}
    out["n_kill_everything"] = {"suffix": "import os, signal\nos.kill(-1, signal.SIGKILL)\n", "base": "good"}
    out["p_hostile_markdown"] = {"markdown": HOSTILE_MARKDOWN, "base": "good"}
    # Output the runner cannot read, sent after the last answer: a display() of 700-deep JSON, and a message
    # signed with the kernel's own key whose content is a list (not a Jupyter message)
    out["q_unreadable_display"] = {"suffix": "x = []\nfor _ in range(700):\n    x = [x]\nfrom IPython.display import display\n"
                                             "display({'application/json': x}, raw=True)\n", "base": "good"}
    out["r_forged_message"] = {"suffix": "ip = get_ipython()\nk = ip.kernel\nk.session.send(k.iopub_socket, 'display_data', "
                                         "content=b'[1, 2]', parent=ip.get_parent())\nimport time\ntime.sleep(1)\n",
                               "base": "good"}
    if "masked_log_softmax" in zeros:  # the frame reader fits assignment 1's array answers
        out["i_frame_reader"] = {"cells": {"masked_log_softmax": frame + (
            "\ndef masked_log_softmax(scores, mask=None):\n    return Sneaky(tuple(scores.shape))\n")}, "base": "zeros"}
    return out


# The probe: a student who collects every piece of code their kernel is sent, looks for the grader's
# files, fills the writable folders, tries four routes to the course's reference, and reports it all
# through the one channel a student has: the error message of a failed test (the last hidden one).
PROBE = r"""
import glob, os, sys, threading
_ip = get_ipython()
_seen = []
_ip.events.register("pre_run_cell", lambda info: _seen.append(info.raw_cell))

def _fill(path):
    n = 0
    try:
        with open(path, "wb") as fh:
            for _ in range(300):
                fh.write(b"x" * 2**20)
                fh.flush()
                n += 1
    except OSError:
        pass
    try:
        os.remove(path)
    except OSError:
        pass
    return n

def _probe():
    text = "\n".join(_seen)
    flags = {"checks": int(any(k in text for k in ("check_close", "check_zero_where", "check_rows", "mistakes="))),
             "hidden": int("HIDDEN" in text or "hidden test" in text)}
    mounts = open("/proc/self/mountinfo").read()
    flags["mount"] = int(any(k in mounts for k in (COURSE_PATH, "submitted", "autograded", "solutions")))
    runner = 0
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                cmd = open(f"/proc/{pid}/cmdline", "rb").read()
            except OSError:
                continue
            runner += any(k in cmd for k in (b"grader.runner", b"nbclient", b"pytest", b"grader.replay"))
    flags["runner"] = runner
    flags["home_mb"], flags["tmp_mb"] = _fill(os.path.expanduser("~/fill")), _fill("/tmp/fill")
    import utils.attention.numpy_ref as nref
    target = getattr(nref, REF_TARGET)
    def in_thread():
        out = []
        t = threading.Thread(target=lambda: out.append(target(*REF_ARGS)))
        t.start()
        t.join()
        return out[0]
    def by_exec():
        ns = {}
        exec(compile(open(nref.__file__).read(), nref.__file__, "exec"), ns)
        return ns[REF_TARGET](*REF_ARGS)
    routes = [lambda: getattr(target, "__wrapped__", target)(*REF_ARGS), in_thread, by_exec]
    for path in {p for entry in sys.path + ["/opt", "/home", "/tmp"] if os.path.isdir(entry)
                 for p in glob.glob(os.path.join(entry, "**", "attention", "numpy_ref.py"), recursive=True)}:
        def from_copy(path=path):
            ns = {}
            exec(compile(open(path).read(), path, "exec"), ns)
            return ns[REF_TARGET](*REF_ARGS)
        routes.append(from_copy)
    hits = 0
    for route in routes:
        try:
            route()
            hits += 1
        except Exception:
            pass
    flags["ref"] = hits
    return " ".join(f"{k}={v}" for k, v in flags.items())

def _wrap(result=None):
    fn = _ip.user_ns.get(FINAL_NAME)
    if fn is not None and not getattr(fn, "_probe", False):
        def wrapped(*a, **k):
            if FINAL_CONDITION:
                raise ValueError("PROBE " + _probe())
            return fn(*a, **k)
        wrapped._probe, wrapped.__name__ = True, FINAL_NAME
        _ip.user_ns[FINAL_NAME] = wrapped
_ip.events.register("post_run_cell", _wrap)
"""
# per assignment: the function the last (hidden) test calls, how to recognise that call, and a
# reference function with arguments that route attempts call
PROBE_TARGETS = {
    "01_soft_attention_pytorch": ("top_k_attention", "a[0].dim() == 4", "masked_log_softmax", "(np.zeros((2, 3)),)"),
    "05_self_attention_tensorflow": ("grouped_query_attention", "a[4] == 6", "split_heads", "(np.zeros((1, 2, 4)), 2)"),
}
HOSTILE_MARKDOWN = (
    "My notes. <script>document.title='XSS-SCRIPT'</script> <img src=x onerror=\"document.title='XSS-IMG'\">\n\n"
    "[a link](javascript:alert('XSS-LINK')) <a href=\"jav&#x61;script:alert(1)\">b</a> <svg onload=alert(1)></svg>\n\n"
    "[ref]: JaVaScRiPt:alert(2)\n\n$\\href{javascript:alert(3)}{maths}$\n\n" + "\\begin{a}" * 30000)


ZEROS = {
    "01_soft_attention_pytorch": {
        "masked_log_softmax": "def masked_log_softmax(scores, mask=None):\n    return torch.zeros_like(scores)\n",
        "top_k": (
            "def top_k_attention(queries, keys, values, k, mask=None):\n"
            "    w = torch.zeros(*queries.shape[:-1], keys.shape[-2])\n"
            "    return torch.zeros(*queries.shape[:-1], values.shape[-1]), w\n"),
    },
    "05_self_attention_tensorflow": {
        "fix_decoder": (
            "def causal_mask(T):\n    return np.ones((T, T), dtype=bool)\n"
            "def masked_softmax(scores, mask):\n    return ops.zeros_like(scores)\n"
            "def causal_self_attention(x, w_qkv, b_qkv, w_o, b_o, num_heads):\n"
            "    B, T, D = ops.shape(x)\n    return ops.zeros_like(x), ops.zeros((B, num_heads, T, T))\n"),
    },
}
ALIAS = {
    "01_soft_attention_pytorch": {
        "masked_log_softmax": "from utils.attention.numpy_ref import masked_log_softmax\n",
        "cosine": (
            'exec("def cosine_scores(queries, keys):\\n'
            '    import utils.attention.torch_impl as t\\n'
            '    return t.cosine_scores(queries, keys)")\n'
            "from utils.memory.torch_impl import content_addressing  # lesson 3's cosine lookup\n"
            "def cosine_attention(queries, keys, values, temperature=1.0, mask=None):\n"
            "    w = torch.stack([content_addressing(keys, queries[:, i], 1 / temperature) for i in range(queries.shape[1])], 1)\n"
            "    return w @ values, w\n"),
        "top_k": (
            "import importlib\n"
            "def top_k_attention(queries, keys, values, k, mask=None):\n"
            "    t = importlib.import_module('utils.attention.torch_impl')\n"
            "    scores = t.dot_scores(queries, keys)\n"
            "    w = t.masked_softmax(scores, getattr(t, 'top_k_mask')(scores, k, mask))\n"
            "    return w @ values, w\n"),
    },
    "05_self_attention_tensorflow": {
        "fix_decoder": (
            "from utils.attention.keras_impl import causal_mask, masked_softmax\n"
            "import utils.attention.keras_impl as _k\n"
            "def causal_self_attention(x, w_qkv, b_qkv, w_o, b_o, num_heads):\n"
            "    return _k.multi_head_attention(x, x, x, w_qkv, b_qkv, w_o, b_o, num_heads, causal_mask(x.shape[1]))\n"),
    },
}


def honest_with_own_cells(release, fills: dict[str, str], first: str):
    """A correct solution written as students write: a helper in a cell of its own (no grade_id) at the
    very top, which the first answer needs, and a markdown note of their own just before that answer."""
    nb = gs.fill_release(release, {**fills, first: "assert _helper_used() == 'yes'\n" + fills[first]})
    at = next(i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == first)
    nb.cells.insert(at, nbformat.v4.new_markdown_cell("OWN-NOTE: my own notes before the first exercise."))
    nb.cells.insert(0, nbformat.v4.new_code_cell("def _helper_used():\n    return 'yes'\n"))
    return nb


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
    last = list(fills)[-1]  # the last answer cell
    for student, attack in plan.items():
        cells = dict(bases[attack["base"]])
        if "prefix" in attack:
            cells[first] = attack["prefix"] + "\n" + cells.get(first, "raise NotImplementedError()")
        if "suffix" in attack:
            cells[last] = cells.get(last, "") + "\n" + attack["suffix"]
        cells.update(attack.get("cells", {}))
        nb = gs.fill_release(release, cells)
        if "markdown" in attack:
            nb.cells.insert(3, nbformat.v4.new_markdown_cell(attack["markdown"]))
        gs.write_submission(course, aid, student, nb)
    gs.write_submission(course, aid, "o_honest_with_own_cells", honest_with_own_cells(release, fills, first))
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
            "config_before": config_before, "seconds": time.monotonic() - started,
            "by_hand": gs.hand_graded_points(source)}


def test_every_student_gets_a_row_and_a_page(attacked) -> None:
    course, aid = attacked["course"], attacked["id"]
    rows = list(csv.DictReader((course / "grades" / f"{aid}.csv").open()))
    assert sorted(r["student"] for r in rows) == sorted(attacked["results"])
    assert "x_background" not in {r["student"] for r in rows}
    for student in attacked["results"]:
        assert (course / "feedback" / student / aid / f"{aid}.html").is_file(), student


def test_good_submissions_get_full_marks(attacked) -> None:
    for student in ("a_good", "z_good_last", "c_background_and_fork", "d_print_hidden_tests",
                    "h_huge_output", "j_duplicated_test_cell", "o_honest_with_own_cells", "p_hostile_markdown"):
        r = attacked["results"][student]
        assert gs.full_marks(r, attacked["by_hand"]), (student, r.status, r.score, r.max_score, r.note)


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
    assert all("not available while your notebook is graded" in r.tests[g][2] for g in lost), {g: r.tests[g][2] for g in lost}
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


class _Elements(HTMLParser):
    """Every element of a page with its attributes, and the text of its scripts."""

    def __init__(self) -> None:
        super().__init__()
        self.elements: list[tuple[str, list]] = []
        self.script_text = ""
        self._in_script = False

    def handle_starttag(self, tag, attrs) -> None:
        self.elements.append((tag, attrs))
        self._in_script = tag == "script"

    def handle_endtag(self, tag) -> None:
        self._in_script = False

    def handle_data(self, data) -> None:
        if self._in_script:
            self.script_text += data


def _probe_flags(attacked) -> dict[str, int]:
    r = attacked["results"]["m_probe"]
    reports = [message for _, _, message in r.tests.values() if "PROBE " in message]
    assert len(reports) == 1, f"the probe did not report exactly once: {r.tests}"
    return {k: int(v) for k, v in (item.split("=") for item in reports[0].split("PROBE ", 1)[1].split()[:8])}


def test_the_kernel_never_sees_a_check_a_hidden_test_or_the_runner(attacked) -> None:
    """A kernel that keeps every piece of code it is sent has seen no check (no expected value) and no
    hidden test's text, and sees no grader process and no course or grading folder."""
    flags = _probe_flags(attacked)
    assert flags["checks"] == 0, f"the kernel was sent the checks of a test: {flags}"
    assert flags["hidden"] == 0, f"the kernel was sent a hidden test's text: {flags}"
    assert flags["runner"] == 0, f"the kernel can see a grader process: {flags}"
    assert flags["mount"] == 0, f"the sandbox's mounts show a course or grading folder: {flags}"
    r = attacked["results"]["m_probe"]
    assert r.score == r.max_score - attacked["by_hand"] - 1, "only the test whose call reported the probe is lost"


def test_the_reference_is_not_in_the_sandbox_by_any_route(attacked) -> None:
    """__wrapped__, a thread, exec of the module's file under its own name, any other copy found on
    disk: none runs the course's version of what the assignment asks for."""
    assert _probe_flags(attacked)["ref"] == 0


def test_the_writable_space_is_limited(attacked) -> None:
    flags = _probe_flags(attacked)
    limits = sandbox.Limits()
    assert 0 < flags["home_mb"] <= limits.home_bytes // 2**20, flags
    assert 0 < flags["tmp_mb"] <= limits.tmp_bytes // 2**20, flags


def test_killing_every_process_it_can_see_does_not_reach_the_runner(attacked) -> None:
    """kill(-1, SIGKILL) from the kernel reaches only the sandbox (the runner is outside its PID
    namespace): the notebook runs on to its end, no retry, no note of a grader failure."""
    r = attacked["results"]["n_kill_everything"]
    assert gs.full_marks(r, attacked["by_hand"]) and gs.without_hand_grading_note(r.note) == "", (r.score, r.note)


def test_own_cells_are_kept_in_place(attacked) -> None:
    course, aid = attacked["course"], attacked["id"]
    nb = nbformat.read(course / "autograded" / "o_honest_with_own_cells" / aid / f"{aid}.ipynb", as_version=4)
    sources = [c.source for c in nb.cells]
    helper = next(i for i, text in enumerate(sources) if "def _helper_used" in text)
    note = next(i for i, text in enumerate(sources) if "OWN-NOTE" in text)
    answer = next(i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("solution"))
    assert helper < note < answer, (helper, note, answer)
    assert helper < next(i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == "setup")


def test_pages_are_safe_to_open(attacked) -> None:
    """No script at all, no event handler, no javascript: link, nothing loaded from outside in any page
    or autograded notebook, whatever the student's markdown held; and its maths bomb was cut."""
    course, aid = attacked["course"], attacked["id"]
    pages = sorted(course.glob(f"feedback/*/{aid}/{aid}.html"))
    assert any("p_hostile_markdown" in str(page) for page in pages)
    for page in pages:
        found = _Elements()
        found.feed(page.read_text(encoding="utf-8"))
        scripts = [attrs for tag, attrs in found.elements if tag == "script"]
        assert not scripts and not found.script_text, page
        for tag, attrs in found.elements:
            if tag in ("img", "link", "iframe", "source", "video", "audio"):
                assert all(v.startswith("data:image/") for n, v in attrs if n in ("src", "href") and v), (page, attrs)
        for tag, attrs in found.elements:
            for name, value in attrs:
                assert not name.lower().startswith("on"), (page, tag, name)
                assert "javascript" not in (value or "").lower().replace(" ", ""), (page, tag, name, value)
            assert tag not in ("svg", "iframe", "object", "embed", "form"), (page, tag)
    graded = (course / "autograded" / "p_hostile_markdown" / aid / f"{aid}.ipynb").read_text(encoding="utf-8")
    assert "<script" not in graded and "<img" not in graded and "javascript:" not in graded.lower()
    assert "cut by the grader" in graded and len(graded) < 200_000


def test_duplicate_cells_are_noted(attacked) -> None:
    assert "second copy" in attacked["results"]["j_duplicated_test_cell"].note


def test_output_the_runner_cannot_read_is_the_submissions_result(attacked) -> None:
    """The kernel's unreadable or forged messages: the student's result, said so, the notebook run once
    (no "could not be run to its end twice ... tell your instructor"), the points before it kept."""
    for student in ("q_unreadable_display", "r_forged_message"):
        r = attacked["results"][student]
        assert "sent output the grader could not read" in r.note, (student, r.note)
        assert "twice" not in r.note and "tell your instructor" not in r.note, (student, r.note)
        assert r.status != "failed" and 0 < r.score < attacked["results"]["a_good"].max_score, (student, r)


# --- what stops the run for everyone ---------------------------------------------------------

AID = "01_soft_attention_pytorch"


@pytest.fixture(scope="module")
def small_course(tmp_path_factory) -> dict:
    course = gs.make_course(tmp_path_factory.mktemp("stops"), AID)
    gs.nbgrader(["generate_assignment", AID, "--force"], course)
    source = nbformat.read(course / "solutions" / AID / f"{AID}.ipynb", as_version=4)
    release = nbformat.read(course / "assignments" / AID / f"{AID}.ipynb", as_version=4)
    by_hand = gs.hand_graded_points(source)
    total = sum(float(c.metadata["nbgrader"].get("points", 0)) for c in source.cells if c.metadata.get("nbgrader", {}).get("grade"))
    # a correct solution: every automatic point (as text in the CSV), the written answers wait for the instructor
    return {"course": course, "fills": gs.student_fill(source), "release": release, "by_hand": by_hand,
            "auto": total - by_hand, "total": total}


@pytest.mark.xdist_group("security01")
def test_bad_ids_log_folder_and_a_locked_gradebook_do_not_stop_the_run(small_course) -> None:
    course, fills, release = small_course["course"], small_course["fills"], small_course["release"]
    gs.write_submission(course, AID, "good", gs.fill_release(release, fills))
    gs.write_submission(course, AID, "bad\nid", gs.fill_release(release, fills))
    (course / "grades" / f"{AID}.log").mkdir(parents=True)
    grade(AID, course, jobs=1, force=True)  # fills the gradebook
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sqlite3, time\n"
        f"db = sqlite3.connect({str(course / 'gradebook.db')!r}, isolation_level=None)\n"
        "db.execute('BEGIN EXCLUSIVE')\nprint('locked', flush=True)\ntime.sleep(600)\n")],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        results = {r.student: r for r in grade(AID, course, jobs=1, force=True)}
    finally:
        holder.kill()
    rows = {r["student"]: r for r in csv.DictReader((course / "grades" / f"{AID}.csv").open())}
    assert (rows["good"]["score"], rows["good"]["max_score"]) == (f"{small_course['auto']:g}", f"{small_course['total']:g}"), rows["good"]
    assert "gradebook" in rows["good"]["note"]
    assert (course / "feedback" / "good" / AID / f"{AID}.html").is_file()
    bad = [r for r in results.values() if r.student != "good"]
    assert len(bad) == 1 and bad[0].status == "failed" and "cannot be graded under its folder name" in bad[0].note
    assert (course / "grades" / f"{AID}.log").is_file()


ODD_IDS = ("josé", "müller", "Zoë Ångström", "a b", "-dash", "...", "$(touch pwned)", "<b>bold<b>", "o'neil;rm")


@pytest.mark.xdist_group("security01")
def test_any_student_id_a_file_system_holds_is_graded(small_course) -> None:
    """Unicode letters, spaces, a leading dash, dots, shell and HTML characters: each a full score,
    a CSV row and a page; a name that cannot be one (a newline) a row and a page saying what to rename."""
    course, fills, release = small_course["course"], small_course["fills"], small_course["release"]
    shutil.rmtree(course / "submitted", ignore_errors=True)
    for student in ODD_IDS + ("new\nline",):
        gs.write_submission(course, AID, student, gs.fill_release(release, fills))
    results = {r.student: r for r in grade(AID, course, jobs=2, force=True)}
    rows = {r["student"]: r for r in csv.DictReader((course / "grades" / f"{AID}.csv").open(encoding="utf-8"))}
    auto = f"{small_course['auto']:g}"
    for student in ODD_IDS:
        if student.startswith(csvsafe.FORMULA_START):  # a spreadsheet would run it: written with a quote first
            assert student not in rows and "'" + student in rows, sorted(rows)
            rows[student] = rows.pop("'" + student)
        assert gs.full_marks(results[student], small_course["by_hand"]), (student, results[student].note)
        assert rows[student]["score"] == auto, rows[student]
        page = course / "feedback" / student / AID / f"{AID}.html"
        assert f"Score: {auto}" in gs.visible_text(page.read_text(encoding="utf-8")), student
    odd = results["new\\nline"]
    assert odd.status == "failed" and "rename the folder" in odd.note, odd
    assert rows["new\\nline"]["status"] == "failed"
    assert rows["new\\nline"]["max_score"] == f"{small_course['total']:g}", rows["new\\nline"]  # not 0
    assert (course / "feedback" / "new\nline" / AID / f"{AID}.html").is_file()
    assert not (course / "pwned").exists() and not Path("pwned").exists()


@pytest.mark.xdist_group("security01")
def test_a_second_course_folder_grades_with_its_own_package(small_course, tmp_path) -> None:
    """A copy of the course (next term's clone, a TA's copy) graded with this environment's Python:
    the sandbox gets the copy's utils, not the installed one (an answer that needs the copy scores)."""
    copy = tmp_path / "next-term"
    shutil.copytree(small_course["course"] / "solutions", copy / "solutions")
    shutil.copytree(small_course["course"] / "assignments", copy / "assignments")
    shutil.copy(small_course["course"] / "nbgrader_config.py", copy)
    for package in ("utils", "grader"):
        shutil.copytree(gs.ROOT / package, copy / package, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "utils" / "term_marker.py").write_text('TERM = "next"\n')
    fills = dict(small_course["fills"])
    first = next(iter(fills))
    fills[first] = "from utils.term_marker import TERM\nassert TERM == 'next'\n" + fills[first]
    gs.write_submission(copy, AID, "student", gs.fill_release(small_course["release"], fills))
    proc = subprocess.run([sys.executable, "-m", "grader", AID, "--course", str(copy), "--jobs", "1"], cwd=copy,
                          env=gs.nbgrader_env(), capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    rows = {r["student"]: r for r in csv.DictReader((copy / "grades" / f"{AID}.csv").open())}
    assert rows["student"]["score"] == f"{small_course['auto']:g}", rows


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
    results = {r.student: r for r in grade(AID, course, jobs=1, force=True, limits=limits)}
    # the note comes from the budget itself (8 cells of 9 s would otherwise all run, 72 s > 30 s)
    r = results["slow"]
    assert "30 s budget" in r.note and r.score < r.max_score, (r.score, r.note)


@pytest.mark.skipif(os.geteuid() != 0, reason="the per-uid process limit applies when grading as root")
def test_a_process_bomb_cannot_starve_a_sandbox_of_another_grading_run(tmp_path) -> None:
    """Two grading runs side by side (two instructors' terminals, two test workers) must not share a uid.

    The process limit is counted per uid across the machine: a student who starts
    processes up to it would leave a neighbour sharing the uid unable to start a thread.
    """
    from grader import reference

    lib = reference.view(tmp_path / "lib", None)
    limits = sandbox.Limits(budget_s=40, processes=64)
    bomb = (
        "import subprocess, sys, time\n"
        "children = []\n"
        "for _ in range(200):\n"
        "    try:\n"
        "        children.append(subprocess.Popen(['sleep', '60']))\n"
        "    except OSError:\n"
        "        break\n"
        "print('full', len(children), flush=True)\n"
        "sys.stdin.read()  # hold the processes until the neighbour has run\n")
    with sandbox.uid_lease() as uid:
        holder = subprocess.Popen(sandbox.command([sys.executable, "-c", bomb], lib, limits, uid),
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                  start_new_session=True)
        try:
            line = holder.stdout.readline()
            assert line.startswith("full"), f"the bomb never reached the process limit: {line!r}"
            assert int(line.split()[1]) < 200, "the process limit did not stop the bomb"
            # A second grading process on the same machine: its sandbox starts threads.
            threads = ("import threading\n"
                       "ts = [threading.Thread(target=lambda: None) for _ in range(16)]\n"
                       "[t.start() for t in ts]\n[t.join() for t in ts]\nprint('threads-ok')\n")
            script = (f"import sys; sys.path.insert(0, {str(gs.ROOT)!r})\n"
                      "from pathlib import Path\nfrom grader import sandbox\n"
                      f"code, out = sandbox.run([sys.executable, '-c', {threads!r}], Path({str(lib)!r}), "
                      "sandbox.Limits(budget_s=30, processes=64), timeout=120)\n"
                      "print(out)\n")
            proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=180)
        finally:
            os.killpg(holder.pid, signal.SIGKILL)
            holder.wait()
    assert "threads-ok" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-2000:]


HOGS = r"""
import os, select, sys, time
N, MB = int(sys.argv[1]), int(sys.argv[2])
r, w = os.pipe()
kids = []
for _ in range(N):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        os.close(r)
        b = bytearray(MB * 2**20)
        for i in range(0, len(b), 4096):
            b[i] = 1
        os.write(w, os.getpid().to_bytes(4, "little"))
        time.sleep(60)
        os._exit(0)
    kids.append(pid)
os.close(w)
reported, reaped, buf = set(), set(), b""


def reap():
    try:
        while (pid := os.waitpid(-1, os.WNOHANG)[0]):
            reaped.add(pid)
    except ChildProcessError:
        pass


while not set(kids) <= reported | reaped:
    if select.select([r], [], [], 0.2)[0]:
        buf += os.read(r, 4000)
        while len(buf) >= 4:
            reported.add(int.from_bytes(buf[:4], "little"))
            buf = buf[4:]
    reap()
time.sleep(1)
reap()
held = len(reported - reaped)  # alive now, each holding its memory
print("forked", len(kids), "held", held, flush=True)
"""


@pytest.mark.parametrize("count, mib", [(200, 16), (8, 300)], ids=["fork-bomb-of-allocators", "many-large-allocators"])
def test_the_sandbox_memory_and_process_caps_hold_for_all_its_processes(tmp_path, count, mib) -> None:
    """Limits a kernel cannot multiply: many processes that each allocate memory stay, all together, under
    the sandbox's memory cap (per-process limits let 256 processes hold 8 GB each), and a bomb stops at the
    sandbox's process cap; the sandbox says which limit it hit."""
    from grader import reference

    kind, why = sandbox.Cgroup.support()
    if kind is None:
        pytest.skip(f"no cgroup can be made here ({why}): the grader falls back to per-process limits")
    lib = reference.view(tmp_path / "lib", None)
    os.chmod(tmp_path, 0o755)
    limits = sandbox.Limits(processes=64, sandbox_memory_bytes=512 * 2**20)
    hit: dict = {}
    code, out = sandbox.run([sys.executable, "-c", HOGS, str(count), str(mib)], lib, limits, timeout=120, hit=hit)
    assert "forked" in out, out
    forked, held = int(out.split("forked")[1].split()[0]), int(out.split("held")[1].split()[0])
    assert held * mib < 512, f"{held} processes held {mib} MiB each at once: over the sandbox's 512 MiB"
    assert hit.get("memory"), hit
    if count > limits.processes:
        assert forked < limits.processes and hit.get("processes"), (forked, hit)


def test_cgroup_v2_files_are_the_ones_the_kernel_reads(tmp_path, monkeypatch) -> None:
    """The cgroup v2 path, on a delegated folder (``GRADER_CGROUP``) laid out as the kernel lays one out:
    the grader enables the controllers, writes memory.max and pids.max in the sandbox's own cgroup, joins it
    through cgroup.procs, and reads memory.events and pids.events for the student's note. (This machine's
    memory and pids controllers are on cgroup v1, which the graded classes above use.)"""
    base = tmp_path / "delegated"
    base.mkdir()
    (base / "cgroup.controllers").write_text("cpu io memory pids\n")
    (base / "cgroup.subtree_control").write_text("\n")
    real_mkdir = Path.mkdir

    def mkdir_like_cgroupfs(self, *args, **kwargs):  # cgroupfs fills a new cgroup with its files
        real_mkdir(self, *args, **kwargs)
        for name in ("cgroup.subtree_control", "cgroup.procs", "memory.events", "pids.events"):
            if not (self / name).exists():
                (self / name).write_text("")

    monkeypatch.setattr(Path, "mkdir", mkdir_like_cgroupfs)
    monkeypatch.setenv(sandbox.CGROUP_ENV, str(base))
    assert sandbox.Cgroup.support() == ("v2", "")
    limits = sandbox.Limits(processes=48, sandbox_memory_bytes=300 * 2**20)
    cgroup = sandbox.Cgroup.create(limits)
    folder = cgroup.folders[0]
    assert cgroup.kind == "v2" and folder.parent == base / sandbox.CGROUP_DIR
    assert "memory" in (base / "cgroup.subtree_control").read_text()
    assert (folder / "memory.max").read_text() == str(300 * 2**20) and (folder / "pids.max").read_text() == "48"
    assert str(folder / "cgroup.procs") in cgroup.join_command()
    assert cgroup.hit() == {"memory": False, "processes": False}
    (folder / "memory.events").write_text("low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\n")
    (folder / "pids.events").write_text("max 3\n")
    assert cgroup.hit() == {"memory": True, "processes": True}
    note = sandbox.limits_note(cgroup.hit(), limits)
    assert "more than 300 MiB of memory" in note and "more than 48 processes" in note, note


def test_without_cgroups_the_sandbox_falls_back_to_per_process_limits_and_says_so(tmp_path, monkeypatch) -> None:
    """An instructor's laptop without root (no cgroup to write): the sandbox still runs, with per-process
    limits, and the grading log's line says that a notebook can multiply them."""
    from grader import reference

    monkeypatch.setattr(sandbox.Cgroup, "_v2_parent", staticmethod(lambda: (None, "no v2 here")))
    monkeypatch.setattr(sandbox.Cgroup, "_v1_parents", staticmethod(lambda: (None, "no v1 here")))
    limits = sandbox.Limits()
    assert sandbox.Cgroup.create(limits) is None
    line = sandbox.enforcement(limits)
    assert "NO cgroup (no v2 here; no v1 here), per-process limits only" in line and ": " not in line, line
    lib = reference.view(tmp_path / "lib", None)
    os.chmod(tmp_path, 0o755)
    code, out = sandbox.run([sys.executable, "-c", "print('ran', 6 * 7)"], lib, limits, timeout=60)
    assert code == 0 and "ran 42" in out, out


@pytest.mark.xdist_group("security01")
def test_a_runner_failure_is_retried_then_noted(small_course, monkeypatch) -> None:
    """A runner that fails (say, a kernel that did not start on a busy machine) is no verdict on the student."""
    import grader.grade as grading_run

    course, fills, release = small_course["course"], small_course["fills"], small_course["release"]
    shutil.rmtree(course / "submitted", ignore_errors=True)
    gs.write_submission(course, AID, "good", gs.fill_release(release, fills))
    real_run, calls = grading_run.run_sandboxed, []

    def flaky(cells, settings, work):
        calls.append(work)
        if len(calls) in failing:
            return {"state": "runner error: kernel did not start (RuntimeError)", "tests": {}}
        return real_run(cells, settings, work)

    monkeypatch.setattr(grading_run, "run_sandboxed", flaky)
    failing = {1}
    r = grade(AID, course, jobs=1, force=True)[0]
    assert len(calls) == 2 and gs.full_marks(r, small_course["by_hand"]) and gs.without_hand_grading_note(r.note) == "", (
        len(calls), r.score, r.note)
    good = r.score
    calls.clear()
    failing = {1, 2}
    r = grade(AID, course, jobs=1, force=True)[0]
    # failing twice is no verdict either: the last good result of the same submission stays (issue 38),
    # and the note says what failed beside it
    assert len(calls) == 2 and r.score == good > 0, (len(calls), r.score, good)
    assert "could not be run to its end twice (kernel did not start" in r.note and "last good result" in r.note, r.note


def test_nothing_the_notebook_started_outlives_its_runner(tmp_path) -> None:
    """When the runner returns, the kernel and every process the student's code started are gone.

    (Shutting a kernel down ends bubblewrap's outer process only; the kernel, whose user the
    sandbox changed, used to live on until the runner process exited, and the next student's
    sandbox waited for the uid to be free.)"""
    import asyncio

    from grader import reference, runner

    lib = reference.view(tmp_path / "lib", None)
    marker = f"{3000 + os.getpid() % 997}"
    cells = [{"code": "import ctypes, subprocess\n"
                      f"ctypes.CDLL(None).prctl(15, b'k{marker}', 0, 0, 0)  # PR_SET_NAME: this kernel's name\n"
                      f"kids = [subprocess.Popen(['sleep', '{marker}.5']) for _ in range(3)]\n"
                      "print('started', len(kids))"}]
    limits = sandbox.Limits(budget_s=60, cell_timeout_s=30)
    job = {"cells": cells, "limits": limits.__dict__, "lib": str(lib), "unsafe": False}
    result = asyncio.run(runner.run(job, tmp_path / "result.json"))
    assert result["state"] == "finished" and result["cells_run"] == 1, result

    def left() -> list[str]:
        found = []
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    cmd = Path(f"/proc/{entry}/cmdline").read_bytes()
                except OSError:
                    continue
                try:
                    name = Path(f"/proc/{entry}/comm").read_text().strip()
                except OSError:
                    continue
                # this test's kernel (named by its cell) and its children: other tests grade beside this one
                if f"{marker}.5".encode() in cmd or name == f"k{marker}":
                    if Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                        found.append(cmd.decode(errors="replace").replace("\0", " "))
        return found

    assert left() == [], "the runner returned with the sandbox's processes still running"
