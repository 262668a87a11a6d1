"""A class on JupyterHub (deploy/): real system users, nbgrader's exchange, a real browser.

One hub (deploy/jupyterhub_config.py, the pure-Python configurable-http-proxy) serves three system
users created for the test: two students and an instructor, each in their own JupyterLab started
as their own user. The course folder is a copy closed by deploy/setup_course.sh (2770, the
instructor's and the graders' group's), and the hub runs from that copy's deploy/; the students'
environment is the repository's .venv, outside it. The exchange is set up by
deploy/setup_exchange.sh; the hub runs the submission desk (deploy/seal_submissions.py). In Chromium:

* student A logs in, fetches assignment 1 from the Assignments tab, (fills it: written to the
  notebook on disk, as A's own file) and submits it there; student B fetches and submits it blank;
  the desk seals both into sealed/, with its own time;
* as real users, before collection: B submits under A's id (nbgrader's --student, and by hand past
  the client), A hands in a folder of A's own claiming an early time and rewrites its time and
  notebook through files held open across the sealing; the sealed copy is then changed as root;
* the instructor collects (``nbgrader collect``: refusals reported, A's honest submission at the
  desk's time collected), grades (``python -m grader``, as root in the course folder, as an admin
  would: the grader's sandbox is bubblewrap, which needs root or user namespaces, and root can
  always use it) and releases feedback (``nbgrader release_feedback``); the instructor's JupyterLab
  has the formgrader and it lists the assignment; the students' have neither its menu command nor
  its server pages;
* student A fetches the feedback in the Assignments tab and opens the page: it shows A's score.

Then, as student A, every way to what is not A's is refused: the course folder (solutions, the
gradebook, submitted/, autograded/, feedback/, grades/ and B's files in them), the exchange's
inbound, sealed and feedback folders, B's sealed submission at its exact name, A's own sealed time
and notebook, B's home; A's server has no COURSE_DIR; and through the hub, B's server's pages and
files with A's login.

Users are created with ``useradd`` (names with a random part) and removed with their homes at the
end, also when a step fails. Skips where users cannot be created (not root) or JupyterHub is not
installed (``pip install -e .[hub]``); under ``CI=true`` those fail instead. Screenshots of the key
pages go to build/hub-screenshots/.
"""
from __future__ import annotations

import json
import re
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from shlex import quote

import nbformat
import pytest

from tests import grading_support as gs
from tests.test_browser import _free_port, _require_browser, _wait, chrome_driver
from tools.notebook_runner import ROOT

pytestmark = pytest.mark.xdist_group("hub")

AID = "01_soft_attention_pytorch"
COURSE_ID = "attention-course"
SHOTS = ROOT / "build" / "hub-screenshots"
VENV = Path(sys.prefix)
PASSWORD = secrets.token_hex(12)


def q(path) -> str:
    """A path (or text) quoted for the shell: nbgrader's submission names hold spaces."""
    return quote(str(path))


def _skip_or_fail(message: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(message + " (CI=true: the JupyterHub test must run)")
    pytest.skip(message)


def _run(argv: list[str], check: bool = True, **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=kw.pop("timeout", 600), **kw)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(map(str, argv))} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


def _opening(paths: list[Path]) -> str:
    """Shell lines that, inside a private mount namespace, let every user reach ``paths``.

    A folder on the way that other users cannot enter (this machine's Python lives under /root) is
    covered by an empty tmpfs that they can enter, and only the one entry leading to the path is
    bound back into it. Nothing changes outside the namespace, which only the hub and the commands
    the test runs as a user live in. Empty where every path is reachable already (a CI machine's
    system Python)."""
    children: dict[Path, set[Path]] = {}
    for path in paths:
        parts = path.resolve().parts
        for i in range(2, len(parts)):
            top = Path(*parts[:i])
            if not os.stat(top).st_mode & 0o001:
                children.setdefault(top, set()).add(top / parts[i])
                break
    lines = []
    for top, kids in children.items():
        kids = sorted(kids)
        lines += [f'd{n}=$(mktemp -d); mount --bind "{kid}" "$d{n}"' for n, kid in enumerate(kids)]
        lines.append(f'mount -t tmpfs -o mode=755 tmpfs "{top}"')
        lines += [f'mkdir -p "{kid}"; mount --move "$d{n}" "{kid}"; rmdir "$d{n}"' for n, kid in enumerate(kids)]
    return "; ".join(lines)


class Class:
    """The class on one hub: users, folders, the hub process, and commands as a user."""

    def __init__(self) -> None:
        tag = secrets.token_hex(3)
        self.a, self.b, self.teacher = f"zzc{tag}ann", f"zzc{tag}bob", f"zzc{tag}tea"
        self.graders = f"zzc{tag}grd"
        self.base = Path(tempfile.mkdtemp(prefix="course-hub-"))
        os.chmod(self.base, 0o755)
        self.course, self.exchange, self.homes = self.base / "course", self.base / "exchange", self.base / "home"
        self.inbound = self.exchange / COURSE_ID / "inbound"
        self.sealed = self.exchange / COURSE_ID / "sealed"
        self.student_config = self.base / "student-config"  # the hub's copy, outside the course folder
        self.users: list[str] = []
        self.hub: subprocess.Popen | None = None
        self.log = self.base / "hub.log"
        # The course's environment: here the repository's .venv, outside the course folder (its
        # package an editable install of the repository, not of the course folder under test).
        self.opening = _opening([Path(sys.executable).resolve(), VENV, ROOT / "utils"])

    # -- commands -------------------------------------------------------------------------
    def ns(self, argv: list[str]) -> list[str]:
        """``argv`` inside the namespace where the course's environment is reachable (see _opening)."""
        if not self.opening:
            return argv
        return ["unshare", "-m", "--propagation", "private", "bash", "-c", self.opening + '; exec "$@"', "_", *argv]

    def env_of(self, user: str, **extra: str) -> list[str]:
        home = self.homes / user
        return ["env", "-i", f"HOME={home}", f"USER={user}", f"LOGNAME={user}", "LANG=C.UTF-8",
                f"PATH={VENV / 'bin'}:/usr/local/bin:/usr/bin:/bin", *(f"{k}={v}" for k, v in extra.items())]

    def as_user(self, user: str, argv: list[str], cwd: Path | None = None, check: bool = True,
                **extra: str) -> subprocess.CompletedProcess:
        return _run(self.ns(["runuser", "-u", user, "--", *self.env_of(user, **extra), *argv]), check=check,
                    cwd=cwd or self.homes / user)

    def as_student(self, user: str, argv: list[str], check: bool = True) -> subprocess.CompletedProcess:
        """``argv`` as a student in a terminal of their JupyterLab: the students' config, never the course folder."""
        return self.as_user(user, argv, check=check, JUPYTER_CONFIG_PATH=str(self.student_config),
                            COURSE_EXCHANGE=str(self.exchange), COURSE_ID=COURSE_ID)

    def shell_as(self, user: str, script: str) -> subprocess.CompletedProcess:
        """A shell command as ``user`` (no Python needed), never checked: the caller asserts."""
        return _run(["runuser", "-u", user, "--", *self.env_of(user), "sh", "-c", script], check=False, cwd="/")

    # -- set-up and tear-down -------------------------------------------------------------
    def create(self) -> None:
        self.homes.mkdir(mode=0o755)
        for user in (self.a, self.b, self.teacher):
            _run(["useradd", "--create-home", "--base-dir", str(self.homes), "--shell", "/bin/sh", user])
            self.users.append(user)
            os.chmod(self.homes / user, 0o700)  # Debian's useradd makes homes 0755: every student could read every home
        # The course folder is the instructor's: the repository's tracked files, without git or the venv.
        files = _run(["git", "ls-files", "-z"], cwd=ROOT).stdout.split("\0")
        for name in filter(None, files):
            src = ROOT / name
            if src.is_file():
                dst = self.course / name
                dst.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, dst)
        # Closed to students (2770 teacher:graders), as deploy/setup_course.sh makes it.
        _run([str(ROOT / "deploy" / "setup_course.sh"), str(self.course), self.teacher, self.graders])
        _run([str(ROOT / "deploy" / "setup_exchange.sh"), str(self.exchange), COURSE_ID, self.teacher, self.graders])
        probe = self.as_user(self.a, [sys.executable, "-c", "import nbgrader, jupyterhub, utils"], check=False)
        if probe.returncode != 0:
            pytest.fail(f"the course's environment {VENV} cannot be used by another user:\n{probe.stderr[-2000:]}")

    def start(self, port: int) -> str:
        extra = self.base / "extra-config"
        extra.mkdir()
        (extra / "jupyter_server_config.json").write_text(json.dumps(
            {"LabApp": {"expose_app_in_browser": True, "news_url": None}}))
        os.chmod(extra, 0o755)
        os.chmod(extra / "jupyter_server_config.json", 0o644)
        state = self.base / "hub-state"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "PYTEST", "COURSE_"))}
        env.update(
            COURSE_STUDENTS=f"{self.a},{self.b}", COURSE_INSTRUCTORS=self.teacher, HUB_TRIAL_PASSWORD=PASSWORD,
            COURSE_DIR=str(self.course), COURSE_ENV=str(VENV), COURSE_EXCHANGE=str(self.exchange), COURSE_ID=COURSE_ID,
            HUB_STUDENT_CONFIG=str(self.student_config),
            HUB_STATE=str(state), HUB_PORT=str(port), HUB_API_PORT=str(_free_port()),
            HUB_PROXY_API_PORT=str(_free_port()), COURSE_EXTRA_CONFIG=str(extra), COURSE_PROFILE="smoke",
            PATH=f"{VENV / 'bin'}:{env.get('PATH', '/usr/bin:/bin')}",
        )
        # The hub's config from the (closed) course folder, as on a real server.
        argv = self.ns([str(VENV / "bin" / "jupyterhub"), "-f", str(self.course / "deploy" / "jupyterhub_config.py")])
        with open(self.log, "w") as log:
            self.hub = subprocess.Popen(argv, cwd=self.base, env=env, stdout=log, stderr=subprocess.STDOUT,
                                        start_new_session=True)
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"{url}/hub/api", timeout=5) as r:
                    if r.status == 200:
                        return url
            except OSError:
                pass
            if self.hub.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"JupyterHub did not start; its log:\n{self.log.read_text()[-4000:]}")
            time.sleep(0.5)

    def close(self) -> None:
        if self.hub is not None:
            try:
                os.killpg(self.hub.pid, signal.SIGTERM)
                self.hub.wait(timeout=30)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(self.hub.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        # The hub stops the users' servers as it exits; whatever still runs as a user this test
        # created (a kernel left behind) is ended by its process id.
        for user in self.users:
            pids = subprocess.run(["ps", "-o", "pid=", "-u", user], capture_output=True, text=True).stdout.split()
            for pid in map(int, pids):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        time.sleep(0.5)
        for user in self.users:
            subprocess.run(["userdel", "--force", "--remove", user], capture_output=True)
        subprocess.run(["groupdel", self.graders], capture_output=True)
        if self.log.exists():  # the hub's log (and the desk's) beside the screenshots
            SHOTS.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(self.log, SHOTS / "hub.log")
        shutil.rmtree(self.base, ignore_errors=True)


@pytest.fixture(scope="module")
def klass():
    if sys.platform != "linux" or os.geteuid() != 0:
        _skip_or_fail("the JupyterHub test creates system users (useradd) and runs the hub as root: run it as root")
    if not (VENV / "bin" / "jupyterhub").exists() or not (VENV / "bin" / "configurable-http-proxy").exists():
        _skip_or_fail("JupyterHub is not installed in the course's environment: `pip install -e .[hub]`")
    for tool in ("useradd", "userdel", "runuser", "unshare"):
        if not shutil.which(tool):
            _skip_or_fail(f"`{tool}` is missing")
    _require_browser()
    k = Class()
    try:
        k.create()
        k.url = k.start(_free_port())
        # The instructor releases assignment 1 to the shared exchange.
        k.as_user(k.teacher, [sys.executable, "-m", "nbgrader", "release_assignment", AID, f"--Exchange.root={k.exchange}"],
                  cwd=k.course)
        yield k
    finally:
        k.close()


@pytest.fixture(scope="module")
def browser(klass):
    driver = chrome_driver()
    try:
        yield driver
    finally:
        driver.quit()


# -- browser steps -------------------------------------------------------------------------
def _shot(driver, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(SHOTS / f"{name}.png"))


def _log_in(driver, k: Class, user: str) -> None:
    driver.execute_cdp_cmd("Network.clearBrowserCookies", {})  # every path: the hub's and each server's
    driver.get(f"{k.url}/hub/login")
    _wait("the hub's login page", lambda: driver.find_elements("id", "username_input"), 60)
    driver.find_element("id", "username_input").send_keys(user)
    driver.find_element("id", "password_input").send_keys(PASSWORD)
    driver.find_element("id", "login_submit").click()
    # The hub starts the user's server and sends the browser on to JupyterLab.
    _wait(f"{user}'s JupyterLab to load", lambda: driver.execute_script(
        "return !!(window.jupyterapp && window.jupyterapp.shell && document.querySelector('.lm-MenuBar-itemLabel'))"), 180)
    assert f"/user/{user}/lab" in driver.current_url, driver.current_url


def _nbgrader_commands(driver) -> list[str]:
    return driver.execute_script("return window.jupyterapp.commands.listCommands().filter(c => c.startsWith('nbgrader:'))")


def _button(driver, text: str, timeout: float = 60):
    return _wait(f"the {text!r} button in the Assignments tab", lambda: [
        b for b in driver.find_elements("xpath", f"//button[normalize-space()='{text}']") if b.is_displayed()] or None, timeout)[0]


def _open_assignments(driver) -> None:
    driver.execute_script("window.jupyterapp.commands.execute('nbgrader:open-assignment-list'); return null;")
    _wait("the Assignments tab to list assignment 1", lambda: AID in driver.find_element("tag name", "body").text, 60)


def _fetch_and_submit(driver, k: Class, user: str, fills: dict[str, str]) -> None:
    _log_in(driver, k, user)
    commands = _nbgrader_commands(driver)
    assert "nbgrader:open-assignment-list" in commands, commands
    assert "nbgrader:open-formgrader" not in commands and "nbgrader:open-create-assignment" not in commands, \
        f"a student's JupyterLab offers the instructor's tools: {commands}"
    _open_assignments(driver)
    _shot(driver, f"1-{'a' if user == k.a else 'b'}-assignments-released")
    _button(driver, "Fetch").click()
    path = k.homes / user / AID / f"{AID}.ipynb"
    _wait(f"{user}'s fetched notebook {path}", path.exists, 60)
    assert path.stat().st_uid == _uid(user), "the fetched notebook is not the student's own file"
    if fills:
        # Filling in the answers is typing in the notebook; the test writes them into the file the
        # student fetched (as the student: the file stays theirs).
        nb = gs.fill_release(nbformat.read(path, as_version=4), fills)
        filled = k.base / f"{user}-filled.ipynb"
        nbformat.write(nb, filled)
        os.chmod(filled, 0o644)
        assert k.shell_as(user, f"cp {q(filled)} {q(path)}").returncode == 0
        assert nbformat.read(path, as_version=4) == nb
    submit = _button(driver, "Submit")
    before = set(os.listdir(k.sealed))
    submit.click()
    # The course's submission desk takes it out of inbound/ into sealed/, with its own time.
    _wait(f"{user}'s submission sealed by the desk",
          lambda: [n for n in set(os.listdir(k.sealed)) - before if n.startswith(f"{user}+{AID}+")], 60)
    cache = k.homes / user / ".local" / "share" / "jupyter" / "nbgrader_cache" / COURSE_ID
    stamp = max(p.name for p in cache.glob(f"{user}+{AID}+*")).split("+")[2][:19]  # as the Assignments tab shows it
    _wait(f"the Assignments tab to list the submission of {stamp}", lambda: stamp in driver.find_element("tag name", "body").text
          or driver.find_elements("css selector", ".jp-Dialog"), 60)
    dialogs = driver.find_elements("css selector", ".jp-Dialog")
    assert not dialogs, f"{user}'s submission failed: {dialogs[0].text[:2000]}"
    _shot(driver, f"2-{'a' if user == k.a else 'b'}-submitted")


def _uid(user: str) -> int:
    import pwd

    return pwd.getpwnam(user).pw_uid


# A student who keeps files open in a submission of their own making, marks it ready, and once the
# desk has taken it writes an earlier time and another notebook through them (run as that student).
LATE_EDIT = r"""
import os, shutil, sys, time
folder, notebook = sys.argv[1], sys.argv[2]
os.mkdir(folder)
os.chmod(folder, 0o770)  # as PrivateSubmit leaves it: the desk (a grader) may remove it
name = os.path.join(folder, os.path.basename(notebook))
shutil.copyfile(notebook, name)
stamp = open(os.path.join(folder, "timestamp.txt"), "w")
stamp.write("2020-01-01 00:00:00.000000 UTC")
stamp.flush()
nb = open(name, "r+")
open(os.path.join(folder, ".ready"), "w").close()
deadline = time.monotonic() + 30
while os.path.lexists(folder):
    if time.monotonic() > deadline:
        sys.exit("the desk did not take the submission in 30 s")
    time.sleep(0.1)
stamp.seek(0); stamp.write("2019-01-01 00:00:00.000000 UTC"); stamp.flush()
nb.seek(0); nb.write("{}"); nb.truncate(); nb.flush()
print("written after sealing")
"""


def _students_cannot_forge(k: Class, a_sub: Path) -> None:
    """Before the instructor collects: B submits under A's id; A makes a submission whose time and
    notebook A rewrites after submitting. Collection then shows what counted (see _story)."""
    # B, through nbgrader's submit, with A's id: refused, and said why.
    proc = k.as_student(k.b, [sys.executable, "-m", "nbgrader", "submit", AID, f"--student={k.a}"], check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and f"a submission is accepted only under your own id, not '{k.a}'" in out, \
        f"B could submit as A through nbgrader (rc={proc.returncode}):\n{out[-2000:]}"
    # B, past the client, by hand: a blank notebook in a folder named as A's, with a later time,
    # marked ready. The desk refuses it (B created it), it stays out of sealed/.
    forged = k.inbound / f"{k.a}+{AID}+2099-01-01 00:00:00.000000 UTC+forged"
    blank = k.homes / k.b / AID / f"{AID}.ipynb"
    script = (f"mkdir {q(forged)} && cp {q(blank)} {q(forged)}/ && "
              f"echo '2099-01-01 00:00:00.000000 UTC' > {q(forged / 'timestamp.txt')} && touch {q(forged / '.ready')}")
    proc = k.shell_as(k.b, script)
    assert proc.returncode == 0, proc.stderr
    _wait("the desk to refuse B's submission under A's id", lambda: f"refused {forged.name!r}" in k.log.read_text(), 30)
    assert not [n for n in os.listdir(k.sealed) if n.endswith("+forged")], "the desk sealed B's work as A's"

    # A rewrites the time and the notebook through files held open since before submitting.
    mine = k.homes / k.a / AID / f"{AID}.ipynb"
    script_file = k.base / "late_edit.py"
    script_file.write_text(LATE_EDIT)
    os.chmod(script_file, 0o644)
    late = k.inbound / f"{k.a}+{AID}+2020-01-01 00:00:00.000000 UTC+latefd"
    proc = k.as_user(k.a, [sys.executable, str(script_file), str(late), str(mine)], check=False)
    assert proc.returncode == 0 and "written after sealing" in proc.stdout, proc.stdout + proc.stderr
    [sealed] = [p for p in k.sealed.iterdir() if p.name.endswith("+latefd")]
    received = (sealed / "timestamp.txt").read_text()
    assert received == sealed.name.split("+")[2] and received > (a_sub / "timestamp.txt").read_text(), \
        f"the sealed time {received!r} is not the desk's"
    assert json.loads((sealed / ".seal.json").read_text())["claimed"] == "2020-01-01 00:00:00.000000 UTC"
    assert (sealed / f"{AID}.ipynb").read_bytes() == mine.read_bytes(), "a write after sealing reached the sealed copy"
    # Nobody but the desk's owner can change it now; if they do (here root, standing in for a
    # careless grader), collection says so and takes A's previous submission (checked in _story).
    with open(sealed / f"{AID}.ipynb", "a") as fh:
        fh.write(" ")


def _status(driver, url: str) -> int:
    """The HTTP status the logged-in browser finally gets for ``url`` (same origin, redirects
    followed), sent with the page's XSRF token as JupyterLab sends its own requests."""
    return driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "const m = document.cookie.match(/(?:^|; )_xsrf=([^;]*)/);"
        "fetch(arguments[0], {credentials: 'include', headers: m ? {'X-XSRFToken': decodeURIComponent(m[1])} : {}})"
        ".then(r => done(r.status)).catch(e => done(-1));", url)


def test_a_class_on_jupyterhub(klass: Class, browser) -> None:
    try:
        _story(klass, browser)
    except BaseException:
        _shot(browser, "failed")
        raise


def _story(k: Class, driver) -> None:
    source = nbformat.read(k.course / "solutions" / AID / f"{AID}.ipynb", as_version=4)

    # 1. Students fetch and submit in their own JupyterLab: A a full solution, B a blank.
    _fetch_and_submit(driver, k, k.a, gs.student_fill(source))
    _fetch_and_submit(driver, k, k.b, {})
    subs = {u: [n for n in os.listdir(k.sealed) if n.startswith(f"{u}+{AID}+")] for u in (k.a, k.b)}
    assert all(len(v) == 1 for v in subs.values()), subs
    assert not os.listdir(k.inbound), f"the desk left submissions in inbound/: {os.listdir(k.inbound)}"
    a_sub, b_sub = k.sealed / subs[k.a][0], k.sealed / subs[k.b][0]
    honest_a = (a_sub / "timestamp.txt").read_text()
    assert honest_a == subs[k.a][0].split("+")[2], "the sealed time is not the desk's"
    assert (a_sub / "timestamp.txt").stat().st_uid == _uid(k.teacher), "the student still owns their sealed time"
    _students_cannot_forge(k, a_sub)

    # 2. The instructor: the formgrader in their JupyterLab; students have no formgrader pages.
    assert _status(driver, f"{k.url}/user/{k.b}/formgrader") == 404, "a student's server serves the formgrader"
    _log_in(driver, k, k.teacher)
    assert "nbgrader:open-formgrader" in _nbgrader_commands(driver)
    driver.get(f"{k.url}/user/{k.teacher}/formgrader")
    _wait("the formgrader to list assignment 1", lambda: AID in driver.find_element("tag name", "body").text
          and "Manage Assignments" in driver.find_element("tag name", "body").text, 120)
    _shot(driver, "3-instructor-formgrader")

    # Collect (only what the desk sealed, each file checked against its record), grade, release feedback.
    collect = k.as_user(k.teacher, [sys.executable, "-m", "nbgrader", "collect", AID, f"--Exchange.root={k.exchange}"],
                        cwd=k.course)
    log = collect.stdout + collect.stderr
    assert re.search(rf"Refused: '{re.escape(k.a)}\+{AID}\+[^']*' was submitted by '{k.b}' under the id '{k.a}'", log), \
        f"collect did not report B's submission under A's id:\n{log[-3000:]}"
    assert re.search(rf"Refused: the sealed submission '{re.escape(k.a)}\+{AID}\+[^']*\+latefd' was changed after "
                     rf"the desk received it \({AID}.ipynb changed\)", log), f"collect did not report the edit:\n{log[-3000:]}"
    for u in (k.a, k.b):
        assert (k.course / "submitted" / u / AID / f"{AID}.ipynb").exists(), f"{u}'s submission was not collected"
    # A's honest submission, at the desk's time: not B's blank under A's id, not the edited one.
    assert (k.course / "submitted" / k.a / AID / "timestamp.txt").read_text() == honest_a
    assert (k.course / "submitted" / k.a / AID / f"{AID}.ipynb").read_bytes() == (a_sub / f"{AID}.ipynb").read_bytes()
    assert not (k.course / "submitted" / k.a / AID / ".seal.json").exists()
    _run([sys.executable, "-m", "grader", AID, "--course", str(k.course), "--jobs", "2"], cwd=k.course,
         env={**os.environ, "COURSE_PROFILE": "smoke"})
    _run([str(ROOT / "deploy" / "setup_course.sh"), str(k.course), k.teacher, k.graders])  # after root's run
    scores = gs.scores(k.course, AID)
    # A: every automatic point (the written answers wait for the instructor's hand grading); B: none.
    assert scores[k.a][0] == scores[k.a][1] - gs.hand_graded_points(source) > 0, scores
    assert scores[k.b][0] == 0, scores
    k.as_user(k.teacher, [sys.executable, "-m", "nbgrader", "release_feedback", AID, f"--Exchange.root={k.exchange}"], cwd=k.course)
    released = list((k.exchange / COURSE_ID / "feedback").glob("*.html"))
    assert len(released) == 2, released

    # 3. Student A fetches the feedback in the Assignments tab and opens the page.
    _log_in(driver, k, k.a)
    _open_assignments(driver)
    _button(driver, "Fetch Feedback").click()
    _wait("the feedback to be fetched", lambda: "(view feedback)" in driver.find_element("tag name", "body").text, 60)
    _shot(driver, "4-a-feedback-fetched")
    pages = list((k.homes / k.a / AID / "feedback").glob(f"*/{AID}.html"))
    assert len(pages) == 1, pages
    driver.find_element("xpath", "//a[contains(., 'view feedback')]").click()
    rel = pages[0].relative_to(k.homes / k.a)
    driver.get(f"{k.url}/user/{k.a}/files/{rel.as_posix()}")
    expected = f"Score: {scores[k.a][0]:.1f} / {scores[k.a][1]:.1f}"
    _wait(f"A's feedback page to show {expected!r}", lambda: expected in driver.find_element("tag name", "body").text, 30)
    _shot(driver, "5-a-feedback-page")

    # 4. Student A against what is not A's: the course folder, B's work in the exchange, B's home ...
    inbound, feedback, c = k.inbound, k.exchange / COURSE_ID / "feedback", k.course
    targets = {
        "list the course folder": ("ls", c),
        "list solutions/": ("ls", c / "solutions"),
        "read the solution with its hidden tests": ("cat", c / "solutions" / AID / f"{AID}.ipynb"),
        "read the gradebook": ("cat", c / "gradebook.db"),
        "list submitted/": ("ls", c / "submitted"),
        "read B's collected notebook": ("cat", c / "submitted" / k.b / AID / f"{AID}.ipynb"),
        "list autograded/": ("ls", c / "autograded"),
        "read B's autograded notebook": ("cat", c / "autograded" / k.b / AID / f"{AID}.ipynb"),
        "list feedback/": ("ls", c / "feedback"),
        "read B's feedback page in the course": ("cat", c / "feedback" / k.b / AID / f"{AID}.html"),
        "list the grades folder": ("ls", c / "grades"),
        "read the grades": ("cat", c / "grades" / f"{AID}.csv"),
        "list the inbound folder": ("ls", inbound),
        "list the sealed folder": ("ls", k.sealed),
        "list the feedback folder": ("ls", feedback),
        "list B's submission": ("ls", b_sub),
        "read B's notebook": ("cat", b_sub / f"{AID}.ipynb"),
        "read B's submission secret": ("cat", b_sub / "submission_secret.txt"),
        "list B's home": ("ls", k.homes / k.b),
        "read B's fetched copy": ("cat", k.homes / k.b / AID / f"{AID}.ipynb"),
    }
    attempts = {what: f"{cmd} {q(path)}" for what, (cmd, path) in targets.items()}
    for what, (_, path) in targets.items():
        assert path.exists(), f"nothing to try: {path} ({what}) is missing"
    attempts.update({
        "write into B's submission": f"echo x > {q(b_sub / 'extra.txt')}",
        "remove B's submission": f"rm -rf {q(b_sub)}",
        "rename B's submission": f"mv {q(b_sub)} {q(k.sealed / f'{k.a}+stolen')}",
        "rewrite A's own sealed time": f"echo '2020-01-01 00:00:00.000000 UTC' > {q(a_sub / 'timestamp.txt')}",
        "edit A's own sealed notebook": f"echo '{{}}' > {q(a_sub / f'{AID}.ipynb')}",
    })
    for what, script in attempts.items():
        proc = k.shell_as(k.a, script)
        # EACCES from the modes ("Permission denied"), EPERM from the sticky bit ("Operation not permitted")
        assert proc.returncode != 0 and re.search("Permission denied|Operation not permitted", proc.stderr), \
            f"student A could {what} ({script}): rc={proc.returncode} {proc.stdout[:300]} {proc.stderr[:300]}"
    assert (b_sub / f"{AID}.ipynb").exists() and not (b_sub / "extra.txt").exists()
    assert (a_sub / "timestamp.txt").read_text() == honest_a
    # ... while the released assignment stays A's to read, and A's server knows nothing of the course folder.
    assert k.shell_as(k.a, f"ls {q(k.exchange / COURSE_ID / 'outbound' / AID)}").returncode == 0
    servers = [pid for pid in _run(["pgrep", "-u", k.a, "-f", "jupyterhub-singleuser"], check=False).stdout.split()]
    assert servers, "A's server is not running"
    environ = Path(f"/proc/{servers[0]}/environ").read_bytes().decode(errors="replace")
    assert "COURSE_DIR=" not in environ and str(k.course) not in environ, "A's server is given the course folder"

    # ... and through the hub, logged in as A: B's server refuses every page; A's own answers.
    # From A's JupyterLab (the feedback page is served sandboxed: its scripts have no origin to
    # fetch from), with A's XSRF token as JupyterLab sends it: a refusal is not for a missing token.
    driver.get(f"{k.url}/user/{k.a}/lab")
    _wait("A's JupyterLab", lambda: driver.execute_script("return !!(window.jupyterapp && window.jupyterapp.shell)"), 120)
    own = _status(driver, f"{k.url}/user/{k.a}/api/contents/{AID}")
    assert own == 200, f"A's own contents API answered {own}"
    for path in (f"/user/{k.b}/api/contents/{AID}", f"/user/{k.b}/files/{AID}/{AID}.ipynb",
                 f"/user/{k.b}/api/contents/{AID}/{AID}.ipynb", f"/user/{k.b}/lab",
                 f"/user/{k.a}/api/contents/..%2F{k.b}%2F{AID}", f"/hub/api/users/{k.b}"):
        status = _status(driver, k.url + path)
        assert status in (403, 404), f"as student A, {path} answered {status}"
    # B's JupyterLab, as a student would try it: the hub itself says no.
    driver.get(f"{k.url}/user/{k.b}/lab")
    body = _wait("the hub's answer to A opening B's JupyterLab", lambda: driver.find_element("tag name", "body").text, 30)
    assert "403" in body and "You do not have permission to access Server" in body, f"A opened B's JupyterLab: {body[:500]}"
    assert not driver.execute_script("return !!window.jupyterapp"), "A's browser got B's JupyterLab"
    _shot(driver, "6-a-refused-b-lab")


# -- the hub's configuration refuses an unsafe set-up (no users, no root needed) ---------------
def _hub_config(tmp_path: Path, **settings: str) -> subprocess.CompletedProcess:
    """deploy/jupyterhub_config.py as JupyterHub reads it, with ``settings`` as its environment."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "COURSE_", "HUB_"))}
    env.update({"COURSE_STUDENTS": "ann", "COURSE_INSTRUCTORS": "teacher", "HUB_TRIAL_PASSWORD": "x",
                "HUB_STATE": str(tmp_path / "state"), "HUB_STUDENT_CONFIG": str(tmp_path / "student-config"), **settings})
    code = ("import runpy, sys; from traitlets.config import Config; c = Config(); "
            "runpy.run_path(sys.argv[1], init_globals={'get_config': lambda: c})")
    return subprocess.run([sys.executable, "-c", code, str(ROOT / "deploy" / "jupyterhub_config.py")],
                          capture_output=True, text=True, env=env, timeout=120)


def test_hub_config_refuses_unsafe_setups(tmp_path: Path) -> None:
    closed, open_ = tmp_path / "closed-course", tmp_path / "open-course"
    closed.mkdir(mode=0o770)
    open_.mkdir(mode=0o755)
    os.chmod(closed, 0o2770)
    os.chmod(open_, 0o755)
    cases = {
        # the one trial password on every interface: anyone who reaches the port could log in
        "dummy authenticator on 0.0.0.0": ({"HUB_IP": "0.0.0.0", "COURSE_DIR": str(closed)},
                                           "HUB_IP=0.0.0.0: this configuration logs everyone in with one trial password"),
        "course folder open to every user": ({"COURSE_DIR": str(open_), "COURSE_ENV": str(VENV)},
                                             f"the course folder {open_} is open to every user (mode 0755)"),
        "environment inside the course folder": ({"COURSE_DIR": str(closed), "COURSE_ENV": str(closed / ".venv")},
                                                 f"COURSE_ENV={closed / '.venv'} is inside the course folder"),
        "students' config inside the course folder": (
            {"COURSE_DIR": str(closed), "COURSE_ENV": str(VENV), "HUB_STUDENT_CONFIG": str(closed / "student")},
            f"HUB_STUDENT_CONFIG={closed / 'student'} is inside the course folder"),
    }
    for what, (settings, message) in cases.items():
        proc = _hub_config(tmp_path, **settings)
        assert proc.returncode != 0 and message in proc.stderr, f"{what}: rc={proc.returncode}\n{proc.stderr[-2000:]}"
    # The same settings, safe, get past every check but the exchange's (none was set up yet).
    safe = {"COURSE_DIR": str(closed), "COURSE_ENV": str(VENV), "COURSE_EXCHANGE": str(tmp_path / "exchange")}
    proc = _hub_config(tmp_path, **safe)
    if os.stat(VENV).st_uid != 0 or os.stat(VENV / "bin").st_uid != 0:  # a developer's own venv: not a hub's
        assert proc.returncode != 0 and "must be root's and writable by root only" in proc.stderr, proc.stderr[-2000:]
        return
    assert proc.returncode != 0 and "sealed is missing or open to every user" in proc.stderr, proc.stderr[-2000:]
    for folder in ("inbound", "sealed"):
        (tmp_path / "exchange" / COURSE_ID / folder).mkdir(parents=True, mode=0o750)
    # The students' config copy never replaces a folder that holds anything else (here a stand-in for /etc).
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "passwd").write_text("root:x:0:0::/root:/bin/sh\n")
    proc = _hub_config(tmp_path, **safe, HUB_STUDENT_CONFIG=str(etc))
    assert proc.returncode != 0 and "holds files the hub did not put there (['passwd'])" in proc.stderr, proc.stderr[-2000:]
    assert (etc / "passwd").exists()
    # And with everything in place, the hub's configuration loads and copies the students' config.
    proc = _hub_config(tmp_path, **safe)
    assert proc.returncode == 0, proc.stderr[-2000:]
    copied = tmp_path / "student-config"
    assert (copied / "private_exchange.py").stat().st_mode & 0o777 == 0o644 and (copied / "nbgrader_config.py").exists()


# -- the submission desk and the sealed collection, on files (no hub, no browser) ---------------
def _deploy_module(name: str):
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"deploy_{name}", ROOT / "deploy" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_desk_takes_only_the_students_own_files(tmp_path: Path) -> None:
    """What the hub test cannot cheaply stage: links, other users' files, pipes; a changed sealed copy."""
    import pwd
    from datetime import datetime, timezone

    desk, private = _deploy_module("seal_submissions"), _deploy_module("private_exchange")
    me = pwd.getpwuid(os.getuid()).pw_name
    inbound, sealed = tmp_path / "inbound", tmp_path / "sealed"
    inbound.mkdir()
    sealed.mkdir()
    secret = tmp_path / "not-yours.txt"
    secret.write_text("the grader's secret")
    when = datetime(2030, 5, 6, 7, 8, 9, 123456, tzinfo=timezone.utc)

    def submission(tag: str, owner: str = me, ready: bool = True) -> str:
        name = f"{owner}+{AID}+2020-01-01 00:00:00.000000 UTC+{tag}"
        (inbound / name).mkdir()
        (inbound / name / f"{AID}.ipynb").write_text("{}")
        (inbound / name / "timestamp.txt").write_text("2020-01-01 00:00:00.000000 UTC")
        if ready:
            (inbound / name / ".ready").touch()
        return name

    # An honest one: sealed with the desk's time, the student's claim kept in the record.
    name = submission("honest")
    (inbound / name / "data").mkdir()
    (inbound / name / "data" / "x.csv").write_text("1,2")
    out = Path(desk.seal_one(str(inbound), str(sealed), name, now=lambda: when))
    assert out.name == f"{me}+{AID}+2030-05-06 07:08:09.123456 UTC+honest"
    assert (out / "timestamp.txt").read_text() == "2030-05-06 07:08:09.123456 UTC"
    assert not (out / ".ready").exists() and (out / "data" / "x.csv").read_text() == "1,2"
    record = json.loads((out / ".seal.json").read_text())
    assert record["claimed"] == "2020-01-01 00:00:00.000000 UTC" and record["inbound_name"] == name
    assert private.verify_sealed(str(out)) == []
    assert desk.sealed_names(str(sealed)) == {name}
    # Not marked ready: left alone.
    assert desk.seal_one(str(inbound), str(sealed), submission("unready", ready=False)) is None
    # Refused: a link (to a file the student may not read), a pipe, a name that is not the owner's.
    linked = submission("link")
    os.symlink(secret, inbound / linked / "answer.txt")
    piped = submission("pipe")
    os.mkfifo(inbound / piped / "answer.txt")
    other = "nobody" if me != "nobody" else "root"
    cases = {linked: "is not a regular file or folder", piped: "is not a regular file or folder",
             submission("impostor", owner=other): f"submitted under the id '{other}' by '{me}'"}
    if os.geteuid() == 0:  # a file someone else owns, inside the student's folder
        foreign = submission("foreign")
        os.chown(inbound / foreign / f"{AID}.ipynb", pwd.getpwnam("nobody").pw_uid, -1)
        cases[foreign] = "belongs to uid"
    for bad, reason in cases.items():
        with pytest.raises(desk.Refused, match=re.escape(reason)):
            desk.seal_one(str(inbound), str(sealed), bad)
    assert sorted(p.name for p in sealed.iterdir()) == [out.name], "the desk sealed what it refused"
    # A sweep seals what is ready, leaves the refused, removes what it sealed from inbound.
    shutil.rmtree(out)
    refused: dict[str, str] = {}
    assert desk.sweep(str(inbound), str(sealed), set(), refused, log=lambda m: None) == 1
    assert not (inbound / name).exists() and set(refused) == set(cases)
    # Changed after sealing: the record says so.
    [again] = [p for p in sealed.iterdir() if p.name.endswith("+honest")]
    (again / f"{AID}.ipynb").write_text('{"cells": []}')
    (again / "data" / "x.csv").unlink()
    (again / "extra.txt").write_text("x")
    assert private.verify_sealed(str(again)) == [f"{AID}.ipynb changed", "data/x.csv removed", "extra.txt added"]
