"""A tiny class graded from the command line on a Dask cluster started as the README says, and what the
grader writes from it: spreadsheets that run nothing, LMS files in the LMS's own layout, a class report
that never names student text as a mistake, and pages that load nothing from outside.

The cluster is `dask scheduler` and `dask worker` as separate processes, with TLS certificates made by
`python -m grader.distributed --certificates` (make dask-certs), bound to 127.0.0.1, started in a
folder that is not the course, with no PYTHONPATH: the grader must reach the workers by itself. The
class (three submissions of assignment 01 PyTorch, two of which run a kernel):

* ``=HYPERLINK(...)`` as a student id: a full solution whose written answer has TeX, a tracking image
  and raw HTML;
* ``raiser``: a full solution except the first exercise, which raises an AssertionError whose text
  imitates a check's mistake sentence;
* ``bad_name``: one notebook named ``=HYPERLINK(...).ipynb`` that is not JSON (its row's note starts
  with the name).
"""
from __future__ import annotations

import csv
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import nbformat
import pytest

from grader import csvsafe, sandbox
from tests import grading_support as gs

AID = "01_soft_attention_pytorch"
pytestmark = [pytest.mark.grading, pytest.mark.xdist_group("distributed")]
UNSAFE = sandbox.check() is not None and os.environ.get("CI") != "true"
EVIL_ID = '=HYPERLINK("evil.example","grades")'
EVIL_NB = '=HYPERLINK("evil.example","nb").ipynb'
FORGED = "They match what you get when the instructor forgot the mask. Hint: the instructor forgot the mask"
WRITTEN = ("The scale is $\\frac{1}{\\sqrt{d_k}}$, so that $$\\operatorname{Var}(q \\cdot k) = 1$$ holds.\n\n"
           "![seen](https://tracker.example/pixel.png) <script>alert(1)</script>")
DATA = Path(__file__).parent / "data"
BIN = Path(sys.executable).parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env() -> dict:
    """The environment an instructor's shell has: no PYTHONPATH pointing at the course."""
    env = {k: v for k, v in gs.nbgrader_env().items() if k != "PYTHONPATH"}
    env["PATH"] = str(BIN) + os.pathsep + env.get("PATH", "")
    return env


@contextmanager
def _processes(*commands: list[str], cwd: Path, logs: Path):
    """Start each command (its own process group), stop them all at the end, by their ids."""
    started = []
    try:
        for i, command in enumerate(commands):
            log = (logs / f"process-{i}.log").open("w")
            started.append(subprocess.Popen(command, cwd=cwd, env=_env(), stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, start_new_session=True))
            time.sleep(3 if i == 0 else 0)  # the scheduler listens before its workers call
        yield started
    finally:
        for proc in reversed(started):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in reversed(started):
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)


def _wait_for_workers(address: str, tls: Path, count: int, logs: Path, timeout: float = 180) -> None:
    from distributed import Client
    from distributed.security import Security

    security = Security(tls_ca_file=str(tls / "ca.pem"), tls_client_cert=str(tls / "cert.pem"),
                        tls_client_key=str(tls / "key.pem"), require_encryption=True)
    deadline = time.monotonic() + timeout
    while True:
        try:
            with Client(address, security=security, timeout=10) as client:
                client.wait_for_workers(count, timeout=max(1, deadline - time.monotonic()))
                return
        except Exception as exc:  # noqa: BLE001 - not up yet
            if time.monotonic() > deadline:
                text = "\n".join(p.read_text()[-1500:] for p in sorted(logs.glob("process-*.log")))
                raise AssertionError(f"the cluster did not start ({exc}):\n{text}") from None
            time.sleep(1)


def _grader(course: Path, *args: str, timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "grader", AID, "--course", str(course), *args,
                           *(["--unsafe"] if UNSAFE else [])], cwd=gs.ROOT, env=_env(), capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("cli-class")
    course = gs.make_course(tmp, AID)
    gs.nbgrader(["generate_assignment", AID, "--force"], course)
    source = nbformat.read(course / "solutions" / AID / f"{AID}.ipynb", as_version=4)
    release = nbformat.read(course / "assignments" / AID / f"{AID}.ipynb", as_version=4)
    fills = gs.student_fill(source)
    first = next(iter(fills))
    gs.write_submission(course, AID, EVIL_ID, gs.fill_release(release, {**fills, "explain_scores": WRITTEN}))
    gs.write_submission(course, AID, "raiser", gs.fill_release(release, {
        **fills, first: f"def {first}(*args, **kwargs):\n    raise AssertionError({FORGED!r})\n"}))
    folder = course / "submitted" / "bad_name" / AID
    folder.mkdir(parents=True)
    (folder / EVIL_NB).write_text("not a notebook")
    (folder / "timestamp.txt").write_text("2026-01-01 00:00:00.000000 UTC")

    tls = tmp / "dask-tls"  # as `make dask-certs` makes them
    made = subprocess.run([sys.executable, "-m", "grader.distributed", "--certificates", str(tls)], cwd=gs.ROOT,
                          env=_env(), capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr[-2000:]
    flags = ["--tls-ca-file", str(tls / "ca.pem"), "--tls-cert", str(tls / "cert.pem"), "--tls-key", str(tls / "key.pem")]
    port = _free_port()
    address = f"tls://127.0.0.1:{port}"
    elsewhere = tmp / "elsewhere"  # the dask commands run outside the course: nothing puts it on their path
    elsewhere.mkdir()
    with _processes([str(BIN / "dask"), "scheduler", "--host", "127.0.0.1", "--port", str(port), "--protocol", "tls",
                     "--no-dashboard", *flags],
                    [str(BIN / "dask"), "worker", address, "--nworkers", "2", "--nthreads", "1", "--no-dashboard",
                     *flags], cwd=elsewhere, logs=tmp):
        _wait_for_workers(address, tls, 2, tmp)
        began = time.monotonic()
        run = _grader(course, "--scheduler", address, *flags)
        seconds = time.monotonic() - began
        no_certificates = _grader(course, "--scheduler", address, timeout=120)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    rows = {r["student"]: r for r in csv.DictReader((course / "grades" / f"{AID}.csv").open(encoding="utf-8"))}
    return {"course": course, "source": source, "rows": rows, "address": address, "seconds": seconds,
            "no_certificates": no_certificates, "tls": tls, "tmp": tmp}


def test_the_readme_s_dask_cluster_grades_the_class(graded) -> None:
    """`dask scheduler` and `dask worker` from the command line (TLS, 127.0.0.1): every row graded on
    the workers, none "failed" because a worker could not import the grader."""
    rows, source = graded["rows"], graded["source"]
    by_hand = gs.hand_graded_points(source)
    total = sum(float(c.metadata["nbgrader"].get("points", 0)) for c in source.cells
                if c.metadata.get("nbgrader", {}).get("grade"))
    assert set(rows) == {"'" + EVIL_ID, "raiser", "bad_name"}, rows
    full = rows["'" + EVIL_ID]
    assert full["status"] == "provisional" and float(full["score"]) == total - by_hand > 0, full
    assert rows["raiser"]["status"] == "provisional" and 0 < float(rows["raiser"]["score"]) < total - by_hand
    assert rows["bad_name"]["status"] == "failed" and "not a valid notebook" in rows["bad_name"]["note"]
    meta = json.loads((graded["course"] / "grades" / f"{AID}.json").read_text(encoding="utf-8"))
    assert meta["scheduler"] == graded["address"]
    assert (graded["course"] / "feedback" / EVIL_ID / AID / f"{AID}.html").is_file()
    print(f"graded 3 submissions on the command-line cluster in {graded['seconds']:.0f} s")


def test_the_cluster_refuses_a_grader_without_its_certificates(graded) -> None:
    proc = graded["no_certificates"]
    assert proc.returncode != 0 and "needs the cluster's certificates" in proc.stderr, proc.stderr[-2000:]


def test_a_plain_scheduler_off_the_loopback_is_refused(graded, tmp_path) -> None:
    """Named by a routable address, or listening on every interface though reached on 127.0.0.1."""
    proc = _grader(graded["course"], "--scheduler", "tcp://192.0.2.77:8786", timeout=120)
    assert proc.returncode != 0 and "refusing the scheduler at tcp://192.0.2.77:8786" in proc.stderr, proc.stderr
    from distributed.utils import get_ip

    routable = not get_ip().startswith("127.")  # the address a scheduler on every interface reports
    port = _free_port()
    with _processes([str(BIN / "dask"), "scheduler", "--host", "0.0.0.0", "--port", str(port), "--no-dashboard"],
                    cwd=tmp_path, logs=tmp_path):
        from grader import distributed

        distributed.configure()
        deadline = time.monotonic() + 60
        while True:
            try:
                client = distributed.connect(f"tcp://127.0.0.1:{port}")
                client.close()
                outcome = "accepted"
                break
            except SystemExit as exc:
                outcome = str(exc)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(1)
    if routable:
        assert "refusing the scheduler listening at tcp://" in outcome, outcome
    else:  # a machine with no network but its loopback: nothing is open to anyone else
        assert outcome == "accepted", outcome


# --- spreadsheets -----------------------------------------------------------------------------------


def test_csv_cells_never_start_a_formula_and_numbers_stay_numbers() -> None:
    for text in ("=1+1", "+1+cmd|' /C calc'!A0", "-2+3", "@SUM(A1)", "\tx", "\rx", EVIL_ID):
        assert csvsafe.cell(text) == "'" + text
    for number in ("-3", "-1.5", "+2", "-2e-3", "0", "12"):
        assert csvsafe.cell(number) == number
    assert csvsafe.cell(None) == "" and csvsafe.cell(-4.5) == "-4.5"


def test_the_grades_csv_neutralises_a_formula_id_and_notebook_name(graded) -> None:
    text = (graded["course"] / "grades" / f"{AID}.csv").read_text(encoding="utf-8")
    rows = list(csv.reader(text.splitlines()))
    for row in rows:
        for cell in row:
            assert not cell.startswith(csvsafe.FORMULA_START) or re.fullmatch(r"-?[0-9.]+", cell), (cell, row)
    assert any(row[0] == "'" + EVIL_ID for row in rows)
    assert any(row[-1].startswith("'" + EVIL_NB) for row in rows), rows


def _roster(path: Path) -> Path:
    rows = [{"student_id": EVIL_ID, "name": '=HYPERLINK("evil.example","name")', "canvas_id": "1001",
             "sis_user_id": "+u1", "sis_login_id": "@evil", "section": "-A", "email": "=cmd|'/C calc'!A0",
             "id_number": "N1"},
            {"student_id": "raiser", "name": "Ada Lovelace", "canvas_id": "1002", "sis_user_id": "u2",
             "sis_login_id": "ada", "section": "A", "email": "ada@uni.example", "id_number": "N2"},
            {"student_id": "bad_name", "name": "Alan Turing", "canvas_id": "1003", "sis_user_id": "u3",
             "sis_login_id": "alan", "section": "B", "email": "alan@uni.example", "id_number": "N3"},
            {"student_id": "absent", "name": "Grace Hopper", "canvas_id": "1004", "sis_user_id": "u4",
             "sis_login_id": "grace", "section": "B", "email": "grace@uni.example", "id_number": "N4"}]
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


def _export(course: Path, lms: str, roster: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    """`make export` as the Makefile runs it (python -m grader.export, in the course folder)."""
    env = gs.nbgrader_env()
    return subprocess.run([sys.executable, "-m", "grader.export", lms, "--roster", str(roster), "--to", str(out),
                           *extra], cwd=course, env=env, capture_output=True, text=True, timeout=300)


def _canvas_layout(rows: list[list[str]]) -> dict:
    """What Canvas's import reads from a gradebook CSV (its documented layout)."""
    header, points = rows[0], rows[1]
    assignments = {}
    for i, name in enumerate(header[5:], start=5):
        found = re.fullmatch(r"(.+) \((\d+)\)", name)
        if points[i] != "(read only)":
            assignments[found.group(1) if found else name] = (found.group(2) if found else None, points[i])
    return {"identity": header[:5], "points_label": points[0], "points_identity": points[1:5],
            "assignments": assignments, "students": rows[2:]}


def test_exports_refuse_provisional_scores_unless_allowed_and_match_the_lms_layouts(graded, tmp_path) -> None:
    course = graded["course"]
    roster = _roster(tmp_path / "roster.csv")
    config = course / "nbgrader_config.py"
    config.write_text(config.read_text() + f"\nc.CanvasExport.canvas_ids = {{{AID!r}: 4567}}\n")
    refused = _export(course, "canvas", roster, tmp_path / "refused.csv")
    said = refused.stdout + refused.stderr
    assert refused.returncode != 0 and not (tmp_path / "refused.csv").exists()
    assert "provisional" in said and "--allow-provisional" in said, said[-2000:]
    for student in (EVIL_ID, "raiser"):
        assert f"{student}: {AID}" in said, said[-2000:]

    example = _canvas_layout(list(csv.reader((DATA / "canvas_gradebook_export.csv").open(encoding="utf-8"))))
    assert example["assignments"]["Soft attention (PyTorch)"] == ("4567", "15.00")  # the checker reads Canvas's file
    for lms in ("canvas", "moodle"):
        out = tmp_path / f"{lms}.csv"
        done = _export(course, lms, roster, out, "--allow-provisional")
        assert done.returncode == 0, done.stderr[-3000:]
        assert "provisional" in done.stderr
        rows = list(csv.reader(out.open(encoding="utf-8")))
        for row in rows:
            for cell in row:
                assert not cell.startswith(csvsafe.FORMULA_START) or re.fullmatch(r"-?[0-9.]+", cell), (lms, cell)
        text = out.read_text(encoding="utf-8")
        assert "'=HYPERLINK" in text and "'=cmd" in text or lms == "canvas"
        if lms == "canvas":
            ours = _canvas_layout(rows)
            for key in ("identity", "points_label", "points_identity"):
                assert ours[key] == example[key], (key, ours[key], example[key])
            assert ours["assignments"] == {AID: ("4567", f"{float(graded['rows']['raiser']['max_score']):.2f}")}
            assert rows[0][5] == f"{AID} (4567)"
            by_login = {r[3]: r for r in ours["students"]}
            assert by_login["'@evil"][0] == "'" + '=HYPERLINK("evil.example","name")' and by_login["'@evil"][2] == "'+u1"
            assert by_login["grace"][5] == "" and float(by_login["ada"][5]) == float(graded["rows"]["raiser"]["score"])
        else:
            moodle = list(csv.reader((DATA / "moodle_grades_export.csv").open(encoding="utf-8")))
            assert rows[0][:6] == moodle[0][:6] and rows[0][6:] == [AID]
            by_id = {r[2]: r for r in rows[1:]}
            assert by_id["N2"][:2] == ["Ada", "Lovelace"] and by_id["N2"][5] == "ada@uni.example"
            assert by_id["N4"][6] == "" and by_id["N1"][5] == "'=cmd|'/C calc'!A0"

    # the instructor grades every written answer (as the formgrader does): nothing provisional is left
    from nbgrader.api import Gradebook

    source = nbformat.read(gs.ROOT / "solutions" / AID / f"{AID}.ipynb", as_version=4)
    written = list(gs.written_answers(source))
    assert written, f"{AID} has no written answer"
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for student in (EVIL_ID, "raiser", "bad_name"):
            for cell in written:
                grade = gb.find_grade(cell, AID, AID, student)
                grade.manual_score, grade.needs_manual_grade = 1.0, False
        gb.db.commit()
    final = _export(course, "canvas", roster, tmp_path / "final.csv")
    assert final.returncode == 0 and "provisional" not in final.stderr, final.stderr[-2000:]
    by_login = {r[3]: r for r in list(csv.reader((tmp_path / "final.csv").open(encoding="utf-8")))[2:]}
    assert float(by_login["ada"][5]) == float(graded["rows"]["raiser"]["score"]) + 1.0 * len(written)


# --- the class report -------------------------------------------------------------------------------


def test_the_report_never_names_a_student_s_raised_text_as_a_mistake(graded) -> None:
    course = graded["course"]
    data = json.loads((course / "grades" / f"{AID}-report.json").read_text(encoding="utf-8"))
    mistakes = [m["mistake"] for ex in data["exercises"] for m in ex["mistakes"]]
    assert "their code raised AssertionError" in mistakes, mistakes
    assert not [m for m in mistakes if "instructor" in m], mistakes
    assert "instructor forgot" not in (course / "grades" / f"{AID}-report.html").read_text(encoding="utf-8")


# --- pages, offline in Chromium ---------------------------------------------------------------------


def test_pages_load_nothing_from_outside_and_typeset_maths_offline(graded) -> None:
    """Chromium with no network (every host name unresolvable, a proxy that leads nowhere) opens a
    feedback page, the class report, the similarity page and the term's index: every request stays
    on the disk, the TeX of the student's answer is typeset (MathML laid out), no script, no outside image."""
    from tests.test_browser import _require_browser, chrome_driver

    _require_browser()
    course = graded["course"]
    for module in ("grader.similarity", "grader.report"):
        args = [AID] if module == "grader.similarity" else []
        proc = subprocess.run([sys.executable, "-m", module, *args, "--course", str(course)], cwd=gs.ROOT,
                              env=gs.nbgrader_env(), capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-2000:]
    feedback = course / "feedback" / EVIL_ID / AID / f"{AID}.html"
    pages = [feedback, course / "grades" / f"{AID}-report.html", course / "grades" / f"{AID}-similarity.html",
             course / "grades" / "report" / "index.html"]
    driver = chrome_driver("--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=http://127.0.0.1:9",
                           capabilities={"goog:loggingPrefs": {"performance": "ALL"}})
    try:
        for page in pages:
            driver.get(page.as_uri())
            time.sleep(1)
            requested = [json.loads(entry["message"])["message"] for entry in driver.get_log("performance")]
            urls = [m["params"]["request"]["url"] for m in requested if m.get("method") == "Network.requestWillBeSent"]
            assert urls and all(u.startswith(("file:", "data:")) for u in urls), (page.name, urls)
            assert driver.execute_script("return document.scripts.length") == 0, page.name
            images = driver.execute_script("return Array.from(document.images).map(i => i.getAttribute('src') || '')")
            assert all(src.startswith("data:image/") or not src for src in images), (page.name, images)
        driver.get(feedback.as_uri())
        maths = driver.execute_script(
            "return Array.from(document.querySelectorAll('math')).map(m => "
            "[m.getAttribute('display'), m.getBoundingClientRect().width, m.getBoundingClientRect().height,"
            " m.querySelectorAll('mfrac, msqrt').length])")
        assert len(maths) >= 2 and all(w > 0 and h > 0 for _, w, h, _ in maths), maths
        assert {"inline", "block"} <= {d for d, *_ in maths} and sum(n for *_, n in maths) >= 2, maths
        text = driver.execute_script("return document.body.innerText")
        assert "\\sqrt" not in text and "$$" not in text, text[-2000:]
        assert "<script>alert(1)</script>" in text  # the student's raw HTML, shown as text
    finally:
        driver.quit()
