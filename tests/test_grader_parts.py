"""The grader's parts on their own, without a kernel: fast, and each able to fail.

The whole runs (sandbox, kernel, nbgrader) are in tests/test_grading*.py.
"""
from __future__ import annotations

import json
import re
import os
import sys
import time
from pathlib import Path

import nbformat
import pytest

from grader import pages, plan, reference, runner
from grader.grade import id_problem, repair, shown_id
from grader.replay import read_result
from grader.workers import Workers

ROOT = Path(__file__).resolve().parent.parent


# --- the split of a test: what runs beside the student's code -----------------------------


def _test_cell(source: str, gid: str = "t"):
    cell = nbformat.v4.new_code_cell(source)
    cell.metadata["nbgrader"] = {"grade": True, "grade_id": gid, "points": 1, "locked": True, "solution": False}
    return cell


def test_a_visible_test_sends_its_run_part_only() -> None:
    cell = _test_cell(f"# Checks: x\nrun = grading.run(run_x, seed=1)\n{plan.MARKER_LINE}\ngrading.check_close(run.y, 1, 'y')")
    code = plan.sandbox_code(cell, "t", strict=True)
    assert "run_x" in code and "check_close" not in code


def test_a_hidden_test_sends_only_runner_calls_rebuilt_from_literals() -> None:
    cell = _test_cell("# Checks (hidden): big inputs\n### BEGIN HIDDEN TESTS\n"
                      "run = grading.run(run_x, seed=3, shape=(2, 3), mask='causal')  # SECRET comment\n"
                      f"{plan.MARKER_LINE}\ngrading.check_close(run.y, SECRET_EXPECTED, 'y')\n### END HIDDEN TESTS")
    code = plan.sandbox_code(cell, "t", strict=True)
    assert "grading.run(run_x, seed=3, shape=(2, 3), mask='causal')" in code
    assert "SECRET" not in code and "HIDDEN" not in code and "Checks" not in code


@pytest.mark.parametrize("run_part, why", [
    ("x = np.ones(3)\nrun = grading.run(run_x, x)", "may only call grading.run"),
    ("run = grading.run(run_x, seed=np.int64(3))", "literals"),
    ("run = grading.run(run_x, **kw)", "kwargs"),
    ("print(EXPECTED)", "may only call grading.run"),
])
def test_a_hidden_run_part_that_would_leak_is_refused(run_part: str, why: str) -> None:
    cell = _test_cell(f"### BEGIN HIDDEN TESTS\n{run_part}\n{plan.MARKER_LINE}\npass\n### END HIDDEN TESTS")
    with pytest.raises(plan.PlanError, match=why):
        plan.sandbox_code(cell, "t", strict=True)


def test_a_test_without_the_marker_is_legacy_and_refused_when_strict() -> None:
    cell = _test_cell("y = grading.run_student(f, 1)\ngrading.check_close(y, 1, 'y')")
    assert plan.sandbox_code(cell, "t") == cell.source
    with pytest.raises(plan.PlanError, match="checks"):
        plan.sandbox_code(cell, "t", strict=True)


SPLIT = sorted(p for p in (ROOT / "solutions").glob("*/*.ipynb")
               if not plan.legacy_tests(nbformat.read(p, as_version=4)))


@pytest.mark.parametrize("path", SPLIT, ids=[p.stem for p in SPLIT])
def test_split_assignments_follow_the_rules_and_name_their_reference(path: Path) -> None:
    """Every test of a split assignment is split; its hidden tests send only runner calls; its reference
    policy names functions the package has."""
    nb = nbformat.read(path, as_version=4)
    plan.check_source(nb, strict=True)
    policy = reference.policy_of(nb, path.stem)
    assert policy, f"{path.stem}: metadata.course.reference names nothing (what do the students write?)"


# --- the assignment's view of utils ---------------------------------------------------------------


def test_the_view_stubs_the_named_code_in_both_twins_and_copies_no_bytecode(tmp_path: Path) -> None:
    policy = {"modules": ["utils.attention.numpy_ref", "utils.attention.{fw}_impl"],
              "names": ["masked_softmax", "AdditiveAttention", "MultiHeadAttention.forward"]}
    view = reference.view(tmp_path, reference.policy_of(
        nbformat.v4.new_notebook(metadata={"course": {"reference": policy}}), "x_pytorch"))
    assert not list(view.rglob("__pycache__")) and not list(view.rglob("*.pyc"))
    for twin in ("numpy_ref", "torch_impl", "keras_impl"):
        text = (view / "utils" / "attention" / f"{twin}.py").read_text()
        assert "not available while your notebook is graded" in text, twin
        assert "def dot_scores" in text or twin == "numpy_ref"  # the rest is there
    sys.path.insert(0, str(view))
    # the course's own utils modules are put back afterwards: other tests hold references to them
    saved = {m: sys.modules.pop(m) for m in list(sys.modules) if m == "utils" or m.startswith("utils.")}
    try:
        import numpy as np

        import utils.attention.numpy_ref as ref

        assert ref.__file__.startswith(str(view))
        with pytest.raises(NotImplementedError, match="Write it yourself"):
            ref.masked_softmax(np.zeros((2, 3)))
        assert ref.dot_scores(np.ones((1, 2)), np.ones((3, 2))).shape == (1, 3)
    finally:
        sys.path.remove(str(view))
        for name in [m for m in sys.modules if m == "utils" or m.startswith("utils.")]:
            sys.modules.pop(name)
        sys.modules.update(saved)


def test_a_policy_naming_nothing_the_package_has_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(reference.PolicyError, match="no_such_function"):
        reference.view(tmp_path, {"modules": ["utils.attention.numpy_ref"], "names": ["no_such_function"]})


# --- what the runner accepts from the kernel, what the decider reads ---------------------------


def _report(entries, gid="t"):
    return [{"output_type": "display_data", "data": {runner.REPORT_MIME: {"test": gid, "entries": entries}}}]


def test_the_runner_takes_one_report_of_plain_data_for_the_asked_test() -> None:
    good = [{"kind": "return", "value": {"t": "float", "v": "1.0"}}]
    assert runner.take_report(_report(good), "t", 10_000) == (good, None)
    assert runner.take_report(_report(good) * 2, "t", 10_000)[1] == "your notebook sent this test's results more than once"
    assert "not the ones" in runner.take_report(_report(good, gid="other"), "t", 10_000)[1]
    assert "no results" in runner.take_report([], "t", 10_000)[1]
    deep: dict = {}
    for _ in range(100):
        deep = {"x": deep}
    assert "could not be read" in runner.take_report(_report([{"kind": "return", "value": deep}]), "t", 10**6)[1]
    assert "larger" in runner.take_report(_report([{"kind": "return", "value": "x" * 5000}]), "t", 1000)[1]


def test_the_decider_reads_only_a_regular_file_of_bounded_size(tmp_path: Path) -> None:
    good = tmp_path / "result.json"
    good.write_text(json.dumps({"state": "finished", "tests": {}}))
    assert read_result(good)["state"] == "finished"
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    started = time.monotonic()
    assert read_result(fifo) == {}
    assert time.monotonic() - started < 30  # did not wait for a writer (a hang would be hours)
    link = tmp_path / "link"
    link.symlink_to(good)
    assert read_result(link) == {}
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    assert read_result(deep) == {}
    (tmp_path / "big.json").write_bytes(b" " * (25 * 1024 * 1024))
    assert read_result(tmp_path / "big.json") == {}


def test_a_helper_that_hangs_costs_its_job_only(tmp_path: Path) -> None:
    """A worker past its time is killed and answers; the next job starts a fresh one."""
    (tmp_path / "hangs.py").write_text(
        "import sys, time\nfor line in sys.stdin:\n    if 'hang' in line:\n        time.sleep(3600)\n"
        "    print('{\"ok\": true}', flush=True)\n")
    workers = Workers("hangs", timeout_s=2)
    workers_env = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(tmp_path)
    try:
        assert workers.ask({"x": 1}) == {"ok": True}
        answer = workers.ask({"x": "hang"})
        assert answer["ok"] is False and answer.get("timeout"), answer
        assert workers.ask({"x": 2}) == {"ok": True}
    finally:
        workers.close()
        if workers_env is None:
            os.environ.pop("PYTHONPATH")
        else:
            os.environ["PYTHONPATH"] = workers_env


# --- repair: what of a submission is the student's -------------------------------------------------


def _release():
    nb = nbformat.v4.new_notebook()
    colab = nbformat.v4.new_code_cell("# Colab set-up")
    colab.metadata["tags"] = ["colab-setup"]
    setup = nbformat.v4.new_code_cell("import numpy as np")
    setup.metadata["nbgrader"] = {"grade": False, "grade_id": "setup", "locked": True, "solution": False}
    answer = nbformat.v4.new_code_cell("def f(x):\n    raise NotImplementedError()")
    answer.metadata["nbgrader"] = {"grade": False, "grade_id": "f", "locked": False, "solution": True}
    test = _test_cell("assert f(1) == 1", "test_f")
    nb.cells = [nbformat.v4.new_markdown_cell("# Title"), colab, setup, answer, test]
    return nb


def test_added_cells_are_kept_where_the_student_put_them() -> None:
    release = _release()
    sub = nbformat.from_dict(release)
    sub.cells[3].source = "def f(x):\n    return helper(x)"
    sub.cells.insert(0, nbformat.v4.new_code_cell("def helper(x):\n    return x"))  # above everything
    sub.cells.insert(4, nbformat.v4.new_markdown_cell("<img src=x onerror=alert(1)> my note"))
    sub.cells.append(nbformat.v4.new_code_cell("print('after the test')"))
    runnable, shown, notes, own = repair(sub, release, release)
    texts = [c.source for c in runnable.cells]
    assert texts[0].startswith("def helper"), texts
    assert texts.index("def f(x):\n    return helper(x)") < texts.index("print('after the test')")
    assert texts.index("# Colab set-up") == 2 and texts.count("# Colab set-up") == 1
    note = next(c.source for c in shown.cells if "my note" in c.source)
    assert "<img" not in note and "&lt;img" in note
    assert {shown.cells[i].source.splitlines()[0] for i in own} >= {"def helper(x):", "def f(x):"}
    assert notes == []


def test_deleted_and_duplicated_tests_come_from_the_release() -> None:
    release = _release()
    sub = nbformat.from_dict(release)
    dup = nbformat.from_dict(sub.cells[4])
    dup.source = "pass"
    sub.cells.insert(5, dup)
    sub.cells[4].source = "pass  # edited"
    runnable, _, notes, _ = repair(sub, release, release)
    assert [c.source for c in runnable.cells].count("assert f(1) == 1") == 1 and "pass" not in [c.source for c in runnable.cells]
    assert notes == ["a second copy of cell 'test_f' was ignored"]
    del sub.cells[4:6]
    _, _, notes, _ = repair(sub, release, release)
    assert notes == ["1 deleted test cell(s) restored before grading"]


@pytest.mark.parametrize("student, ok", [
    ("josé", True), ("Zoë Ångström", True), ("-dash", True), ("...", True), ("<b>x</b>", True), ("a\tb", False),
    ("line\nbreak", False), (" lead", False), ("bad\udce9", False),
])
def test_student_ids(student: str, ok: bool) -> None:
    assert (id_problem(student) is None) is ok
    assert shown_id(student).isprintable()


# --- pages ------------------------------------------------------------------------------------------


def test_markdown_from_students_is_inert() -> None:
    text = pages.safe_markdown("<script>x()</script> [a](JaVa\tScRiPt:alert(1)) [b](data:text/html,x) & more")
    assert "<" not in text and "javascript" not in text.lower().replace("\t", "") and "data:" not in text
    assert "cut by the grader" in pages.safe_markdown("x" * (pages.MAX_MARKDOWN + 5))


def test_a_page_keeps_its_styles_and_loses_every_script() -> None:
    page = pages.sanitize_page(
        "<html><head><title>T &amp; x</title><style>p{color:red}</style><script>evil()</script></head>"
        "<body><p onclick='evil()'>hi</p><a href='javascript:evil()'>l</a><img src='data:image/png;base64,AA'>"
        "<img src='data:image/svg+xml,<svg onload=evil()>'><iframe src='x'></iframe><svg onload=1></svg></body></html>")
    assert "evil" not in page and "<iframe" not in page and "<svg" not in page and "onclick" not in page
    assert "p{color:red}" in page and "<title>T &amp; x</title>" in page and "data:image/png" in page
    assert "<script" not in page.lower() and "cdn" not in page.lower()  # no script at all, not even MathJax


def test_the_class_report_names_the_mistake_a_message_recognised() -> None:
    from grader.report import mistake_of

    assert mistake_of("f: values differ. They match what you get when the scores are not scaled.") == \
        "the scores are not scaled"
    assert mistake_of("w: position (0, 1) is masked out but has weight 0.5.\n"
                      "Hint: the mask looks inverted: True means 'may attend'") == \
        "the mask looks inverted: True means 'may attend'"
    assert mistake_of("f: expected shape (2, 3), got (3, 2)") == "a wrong shape"
    assert mistake_of("w: masked out. Hint: the mask looks inverted") == "the mask looks inverted"  # one line
    assert mistake_of("something else entirely") == "another failed check"
    # the messages the grading benchmark's class report used to file under "another failed check"
    assert mistake_of("masked_softmax: uses '.softmax('. This exercise asks you to write it yourself, with plain "
                      "tensor operations.") == "called the framework's own function instead of writing it"
    assert mistake_of("f: uses eval (in `eval(s)`), which this check cannot follow: it reads your code to make sure "
                      "the exercise is not answered by a ready-made function.").startswith("code the own-code check")
    assert mistake_of("cosine_scores: NaN where a query or a key has length 0. A zero vector has no direction") == \
        "NaN where a query or a key has length 0"
    assert mistake_of("top_k_attention: your notebook sent no results for this test.").startswith("no results reached")
    assert mistake_of("x: NaN. <script>") == "another failed check"  # too short to be a check's own sentence


def test_the_grading_page_names_the_assignments_not_split_yet() -> None:
    """The grading promise (docs/grading.md) says which assignments it does not cover yet: that list is the truth."""
    readme = (ROOT / "docs" / "grading.md").read_text(encoding="utf-8")
    left = {re.sub(r"_(pytorch|tensorflow)$", "", a) for a in plan.unsplit_assignments(ROOT)}
    if "**Not yet in every assignment.**" not in readme:  # the promise covers every assignment
        assert not left, (f"{sorted(left)} are not split, but docs/grading.md promises the split everywhere: "
                          "name them in a '**Not yet in every assignment.**' point of it")
        return
    paragraph = readme[readme.index("**Not yet in every assignment.**"):]
    paragraph = paragraph[:paragraph.index("\n- **")]
    named = set(re.findall(r"`(\d\d_[a-z0-9_]+?)`", paragraph))
    assert named == left, f"docs/grading.md names {sorted(named)} as not split; the solutions say {sorted(left)}"
