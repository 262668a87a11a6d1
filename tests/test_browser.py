"""The course as a student meets it: JupyterLab in a real (headless) Chromium.

One JupyterLab server, started from the course's environment on a free local
port, serves a throw-away copy of the course for the whole module; one browser
opens every lesson notebook (both twins), runs all cells in the ``smoke``
profile, and checks what the student would see:

* every code cell ran, and no cell shows an error or anything on stderr;
* every widget rendered (no "Error displaying widget", no "Loading widget...",
  no widget shown as its plain-text repr);
* each explorer redraws its plot when its first slider moves;
* each quiz gives "wrong" feedback to a wrong answer, "right" feedback to the
  right one, and its score line counts them.

The instructor side: JupyterLab shows nbgrader's menu, and the formgrader opens
and lists the course's assignments.

A failing notebook leaves a screenshot in ``build/browser-screenshots/``.

Needs Chromium, its driver and Selenium. Under ``CI=true`` these tests fail when
the browser is missing; elsewhere they skip with a message saying how to enable
them (Debian/Ubuntu: ``sudo apt-get install chromium chromium-driver``).
"""
from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tools.notebook_runner import ROOT
from tools.sync_notebooks import lessons
from utils import quiz

pytestmark = pytest.mark.xdist_group("browser")  # one server and one browser for the module

NOTEBOOKS = [f"{lesson}/{lesson}_{fw}.ipynb" for lesson in lessons() for fw in ("pytorch", "tensorflow")]
SHOTS = ROOT / "build" / "browser-screenshots"
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
HOW_TO_ENABLE = (
    "install Chromium and its driver (Debian/Ubuntu: `sudo apt-get install chromium chromium-driver`; "
    "macOS: `brew install --cask chromium chromedriver`) and Selenium (`pip install -e .[dev]`)"
)
RUN_TIMEOUT_S = 600
SLIDER_TIMEOUT_S = 60
WRONG_COLOUR, RIGHT_COLOUR = "#b42318", "#1a7f37"  # utils.quiz's feedback colours
# Copied into the served course: the lessons, the quizzes, and what the
# formgrader needs. Never the venv, git, or grading state.
COPY_IGNORE = shutil.ignore_patterns(
    ".venv", ".git", "build", "__pycache__", ".ipynb_checkpoints", "gradebook.db",
    "submitted", "autograded", "feedback", "exchange", "release", "source", ".pytest_cache",
)


def _missing() -> str | None:
    """What is missing for the browser tests, or None."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "Selenium is not installed"
    if not any(shutil.which(b) for b in BROWSERS):
        return "no Chromium found on PATH"
    if not shutil.which("chromedriver"):
        return "no chromedriver found on PATH"
    return None


def _require_browser() -> None:
    missing = _missing()
    if missing is None:
        return
    message = f"browser tests: {missing}; to run them, {HOW_TO_ENABLE}"
    if os.environ.get("CI") == "true":
        pytest.fail(message + " (CI=true: the browser tests must run)")
    pytest.skip(message)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _write_settings(folder: Path) -> None:
    """JupyterLab user settings for a test: every cell in the page (no virtual
    scrolling, so the page holds every output), no autosave, no news pop-up."""
    settings = {
        "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
        "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosave": False},
        "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false"},
    }
    for name, value in settings.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(value))


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory):
    """A JupyterLab server on a copy of the course; yields (base url, token, course folder)."""
    _require_browser()
    base = tmp_path_factory.mktemp("lab")
    course = base / "course"
    shutil.copytree(ROOT, course, ignore=COPY_IGNORE)
    _write_settings(base / "settings")
    port, token = _free_port(), secrets.token_hex(16)
    env = dict(os.environ)
    env.pop("MPLBACKEND", None)  # the tests' Agg backend would hide every plot: use the notebook's inline one
    env.update(
        COURSE_PROFILE="smoke", COURSE_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1",
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
        JUPYTER_CONFIG_DIR=str(base / "jupyter-config"), JUPYTER_RUNTIME_DIR=str(base / "runtime"),
    )
    argv = [
        sys.executable, "-m", "jupyter", "lab", "--no-browser", f"--port={port}", "--ip=127.0.0.1",
        f"--ServerApp.token={token}", f"--ServerApp.root_dir={course}",
        "--LabApp.expose_app_in_browser=True", f"--LabApp.user_settings_dir={base / 'settings'}",
        "--LabApp.news_url=", "--ServerApp.open_browser=False",
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        argv.append("--allow-root")
    log = open(base / "lab.log", "w")
    server = subprocess.Popen(argv, cwd=course, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                log.flush()
                pytest.fail(f"JupyterLab did not start; its log:\n{(base / 'lab.log').read_text()[-3000:]}")
            time.sleep(0.5)
        yield url, token, course
    finally:
        try:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(timeout=30)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(server.pid, signal.SIGKILL)
        log.close()


def chrome_driver(*extra_args: str, capabilities: dict | None = None):
    """A headless Chromium driven by the system's chromedriver (tests/test_hub.py and
    tests/test_grader_cli_class.py use it too), with ``extra_args`` and ``capabilities`` added."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1400,1000", "--no-first-run", "--disable-extensions", *extra_args):
        options.add_argument(arg)
    for name, value in (capabilities or {}).items():
        options.set_capability(name, value)
    options.binary_location = next(shutil.which(b) for b in BROWSERS if shutil.which(b))
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)
    driver.set_script_timeout(60)
    return driver


@pytest.fixture(scope="module")
def browser(lab):
    driver = chrome_driver()
    try:
        yield driver
    finally:
        driver.quit()


def _wait(what: str, probe, timeout: float, interval: float = 0.5):
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


# JavaScript run in the page. JupyterLab exposes its application object as
# `window.jupyterapp` (--LabApp.expose_app_in_browser).
_KERNEL_STATUS = """
const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;
if (!w || !w.sessionContext || !w.sessionContext.session || !w.sessionContext.session.kernel) return null;
if (!w.context.isReady) return null;
return w.sessionContext.session.kernel.status;
"""
_RUN_STATE = """
const w = window.jupyterapp.shell.currentWidget;
const cells = w.content.model.cells;
let pending = 0;
for (let i = 0; i < cells.length; i++) {
  const c = cells.get(i);
  if (c.type === 'code' && c.sharedModel.getSource().trim() && c.executionCount === null) pending++;
}
const running = [...document.querySelectorAll('.jp-InputPrompt')].some(e => e.textContent.includes('*'));
return {kernel: w.sessionContext.session.kernel.status, pending: pending, running: running};
"""
_CELL_REPORT = """
const cells = window.jupyterapp.shell.currentWidget.content.model.cells;
const out = {unrun: [], bad: [], widgets: 0};
for (let i = 0; i < cells.length; i++) {
  const c = cells.get(i);
  if (c.type !== 'code') continue;
  if (c.sharedModel.getSource().trim() && c.executionCount === null) out.unrun.push(i);
  for (const o of c.toJSON().outputs || []) {
    if (o.output_type === 'error') out.bad.push([i, 'error', o.ename + ': ' + o.evalue]);
    else if (o.output_type === 'stream' && o.name === 'stderr') out.bad.push([i, 'stderr', String(o.text).slice(0, 500)]);
    else if (o.data && o.data['application/vnd.jupyter.widget-view+json']) out.widgets++;
  }
}
return out;
"""
_WIDGET_REPORT = """
// Each widget output of the notebook model against what its output area shows: a rendered
// widget view, or nothing at all because the kernel closed the widget (a finished progress bar).
const problems = [], cells = window.jupyterapp.shell.currentWidget.content.widgets;
let pending = 0;
cells.forEach((cw, i) => {
  if (cw.model.type !== 'code') return;
  const areas = cw.outputArea.node.querySelectorAll(':scope > .jp-OutputArea-child > .jp-OutputArea-output');
  (cw.model.toJSON().outputs || []).forEach((o, k) => {
    const area = areas[k];
    const text = area ? area.innerText.trim() : '';
    for (const s of ['Error displaying widget', 'Loading widget...', 'Failed to load model class'])
      if (text.includes(s)) problems.push(`cell ${i}: ${s}`);
    if (/^(VBox|HBox|Box|IntSlider|FloatSlider|Output|Button|interactive|HTML|HTMLMath|Dropdown|Checkbox)\\(/.test(text))
      problems.push(`cell ${i}: plain-text widget: ${text.slice(0, 80)}`);
    if (!(o.data && o.data['application/vnd.jupyter.widget-view+json'])) return;
    const rendered = area && area.querySelector('.jupyter-widgets');
    const closed = area && area.classList.contains('lm-mod-hidden') && !text;
    if (!rendered && !closed) pending++;
  });
});
return {pending: pending, problems: problems};
"""
# An explorer: an output holding a slider and a plot (an image or an svg).
_EXPLORERS = """
return [...document.querySelectorAll('.jp-OutputArea-output')].filter(
  a => a.querySelector('.widget-slider') && a.querySelector('img, svg.main-svg, canvas'));
"""
_PLOTS_OF = """
return [...arguments[0].querySelectorAll('img')].map(i => i.getAttribute('src') || '').join('|');
"""
_QUIZZES = """
return [...document.querySelectorAll('.jp-OutputArea-output')].filter(a => {
  const h = a.querySelector('h3'); return h && /(pre|post)-lesson quiz/.test(h.textContent);});
"""


def _open_and_run(driver, lab, path: str) -> None:
    """Open ``path`` (relative to the served course) and run all its cells."""
    url, token, _ = lab
    driver.get(f"{url}/lab/tree/{path}?token={token}&reset")
    _wait("the notebook's kernel to start", lambda: driver.execute_script(_KERNEL_STATUS) == "idle", 180)
    # Not `return`ed: Selenium would wait for the command's promise, which settles only when every cell has run.
    driver.execute_script("window.jupyterapp.commands.execute('notebook:run-all-cells'); return null;")
    time.sleep(2)

    def finished() -> bool:
        state = driver.execute_script(_RUN_STATE)
        return state["kernel"] == "idle" and not state["running"]

    _wait("every cell to run (or the run to stop at an error)", finished, RUN_TIMEOUT_S, interval=1)
    # Idle between two cells is possible: confirm after a pause.
    time.sleep(2)
    _wait("every cell to run (or the run to stop at an error)", finished, RUN_TIMEOUT_S, interval=1)


def _move_first_slider(driver, explorer) -> None:
    """Press an arrow key on the explorer's first slider handle (right, or left at the top end)."""
    from selenium.webdriver.common.keys import Keys

    slider = explorer.find_element("css selector", ".widget-slider")
    handle = slider.find_element("css selector", ".noUi-handle")
    readout = slider.find_element("css selector", ".widget-readout")
    before = readout.text
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'}); arguments[0].focus();", handle)
    handle.send_keys(Keys.ARROW_RIGHT)
    time.sleep(0.3)
    if readout.text == before:
        handle.send_keys(Keys.ARROW_LEFT)
        time.sleep(0.3)
    assert readout.text != before, f"the slider {slider.text!r} did not move with the arrow keys"


def _check_explorers(driver, notebook: str, timeout: float = SLIDER_TIMEOUT_S) -> int:
    explorers = driver.execute_script(_EXPLORERS)
    for k, explorer in enumerate(explorers):
        before = driver.execute_script(_PLOTS_OF, explorer)
        _move_first_slider(driver, explorer)
        _wait(f"explorer {k + 1} of {notebook} to redraw its plot after its first slider moved",
              lambda: (now := driver.execute_script(_PLOTS_OF, explorer)) and now != before, timeout)
    return len(explorers)


def _tick(driver, boxes, chosen: set[int]) -> None:
    for i, box in enumerate(boxes):
        if box.is_selected() != (i in chosen):
            driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", box)
            box.click()
            time.sleep(0.2)
    _wait("the tick boxes to show the choice", lambda: [b.is_selected() for b in boxes] == [i in chosen for i in range(len(boxes))], 10, 0.2)


def _check_quizzes(driver, notebook: str, lesson: str, fw: str, parts: tuple = ("pre", "post")) -> int:
    """Answer the first question of each quiz on the page wrongly, then rightly, using
    ``lesson``'s bank for ``fw`` to know which is which; check feedback and score."""
    bank = quiz.load_bank(lesson)
    quizzes = driver.execute_script(_QUIZZES)
    for box in quizzes:
        part = "pre" if "pre-lesson quiz" in box.find_element("css selector", "h3").text else "post"
        if part not in parts:
            continue
        raw_tex = lambda: driver.execute_script(  # noqa: E731  quiz texts still showing TeX source
            "return [...arguments[0].querySelectorAll('.widget-htmlmath')].map(e => e.innerText)"
            ".filter(t => /\\$|\\\\(frac|sqrt|mathrm|text)/.test(t))", box)
        try:
            _wait(f"{notebook}: MathJax to typeset the {part}-lesson quiz", lambda: raw_tex() == [], 30)
        except AssertionError:
            raise AssertionError(f"{notebook}: quiz text showing raw TeX instead of maths: {raw_tex()[:3]}") from None
        questions = [quiz.shuffled(q, bank.lesson, part) for q in quiz.select_questions(bank, part, fw)]
        first = questions[0]
        ticks = box.find_elements("css selector", "input[type=checkbox]")[: len(first.answers)]
        check = next(b for b in box.find_elements("css selector", "button") if b.text.strip() == "Check")
        right = set(first.correct_set)
        wrong = {next(i for i in range(len(first.answers)) if i not in right)}
        score = lambda: box.find_elements("css selector", ".widget-htmlmath")[-1].text  # noqa: E731  the last line

        for chosen, colour, expect in ((wrong, WRONG_COLOUR, f"Score: 0 / {len(questions)}"),
                                       (right, RIGHT_COLOUR, f"Score: 1 / {len(questions)}")):
            _tick(driver, ticks, chosen)
            driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", check)
            check.click()
            _wait(f"{notebook}: the {part}-lesson quiz's feedback ({'right' if chosen == right else 'wrong'} answer)",
                  lambda c=colour: box.find_elements("css selector", f"[style*='{c}']"), 20, 0.2)
            _wait(f"{notebook}: the {part}-lesson quiz's score line to read {expect!r} (1 answered)",
                  lambda e=expect: e in score() and "(1 answered)" in score(), 20, 0.2)
    return len(quizzes)


@pytest.mark.notebook
@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[Path(n).stem for n in NOTEBOOKS])
def test_lesson_runs_clean_in_the_browser(browser, lab, notebook: str) -> None:
    start = time.monotonic()
    try:
        _open_and_run(browser, lab, f"lessons/{notebook}")
        cells = browser.execute_script(_CELL_REPORT)
        assert not cells["bad"], f"{notebook}: cells with an error or stderr output: {json.dumps(cells['bad'], indent=1)}"
        assert not cells["unrun"], f"{notebook}: code cells that never ran: {cells['unrun']}"
        try:
            widgets = _wait("every widget to render", lambda: (r := browser.execute_script(_WIDGET_REPORT))
                            and (r["pending"] == 0 or r["problems"]) and r, 60)
        except AssertionError:
            widgets = browser.execute_script(_WIDGET_REPORT)
            raise AssertionError(f"{notebook}: {widgets['pending']} widget outputs never rendered; {widgets['problems']}")
        assert not widgets["problems"], f"{notebook}: widgets that did not render: {widgets['problems']}"
        explorers = _check_explorers(browser, notebook)
        lesson, fw = notebook.split("/")[0], notebook.rsplit("_", 1)[1].removesuffix(".ipynb")
        quizzes = _check_quizzes(browser, notebook, lesson, fw)
        assert quizzes >= 1, f"{notebook}: no quiz found on the page"
        print(f"{notebook}: {time.monotonic() - start:.0f} s, {cells['widgets']} widgets, "
              f"{explorers} explorers, {quizzes} quizzes")
    except BaseException:
        SHOTS.mkdir(parents=True, exist_ok=True)
        shot = SHOTS / f"{Path(notebook).stem}.png"
        browser.save_screenshot(str(shot))
        print(f"screenshot: {shot}")
        raise
    finally:
        browser.execute_script(
            "const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;"
            "return w && w.sessionContext ? w.sessionContext.shutdown() : null;")


def test_formgrader_lists_the_course_assignments(browser, lab) -> None:
    url, token, course = lab
    browser.get(f"{url}/lab?token={token}&reset")
    _wait("JupyterLab to load", lambda: browser.execute_script("return !!(window.jupyterapp && window.jupyterapp.shell)"), 120)
    menus = _wait("the Nbgrader menu", lambda: [e for e in browser.find_elements("css selector", ".lm-MenuBar-itemLabel")
                                                if e.text.strip() == "Nbgrader"], 60)
    assert menus
    commands = browser.execute_script("return window.jupyterapp.commands.listCommands().filter(c => c.startsWith('nbgrader:'))")
    assert "nbgrader:open-formgrader" in commands, f"nbgrader's formgrader command is missing: {commands}"
    expected = sorted(p.name for p in (course / "solutions").iterdir() if p.is_dir())
    browser.get(f"{url}/formgrader?token={token}")
    try:
        page = _wait("the formgrader to list the assignments",
                     lambda: (t := browser.find_element("tag name", "body").text) and all(a in t for a in expected) and t, 120)
    except AssertionError:
        SHOTS.mkdir(parents=True, exist_ok=True)
        browser.save_screenshot(str(SHOTS / "formgrader.png"))
        raise
    assert "Manage Assignments" in page


# A notebook with every fault the checks above look for, to show each one fails.
_BROKEN_CELLS = [
    # a quiz whose text shows TeX source, and one whose Check buttons do nothing
    "from utils import quiz\npre = quiz.show('01_soft_attention', 'pre', 'pytorch')\n"
    "pre.children[1].children[0].value += ' \\\\frac{1}{2} without delimiters'\n"
    "post = quiz.show('01_soft_attention', 'post', 'pytorch')\n"
    "for item in post.children[1:-1]:\n"
    "    item.children[2]._click_handlers.callbacks.clear()\n"
    "display(pre, post)",
    "import sys\nprint('something went wrong', file=sys.stderr)",
    "import ipywidgets as w\nprint(repr(w.IntSlider(value=3)))",
    # an explorer whose slider does not change its plot
    "import ipywidgets as w, matplotlib.pyplot as plt\n"
    "from IPython.display import display\n"
    "out, s = w.Output(), w.IntSlider(value=1, min=0, max=5, description='k')\n"
    "def draw(_=None):\n"
    "    with out:\n"
    "        out.clear_output(wait=True)\n"
    "        fig, ax = plt.subplots(figsize=(2, 2)); ax.plot([0, 1], [0, 1]); plt.show()\n"
    "s.observe(draw, names='value'); draw()\n"
    "display(w.VBox([s, out]))",
    "raise RuntimeError('a cell that fails')",
    "print('never reached')",
]


def test_the_checks_catch_a_broken_notebook(browser, lab) -> None:
    import nbformat

    _, _, course = lab
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src) for src in _BROKEN_CELLS]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    (course / "broken.ipynb").write_text(nbformat.writes(nb))
    try:
        _open_and_run(browser, lab, "broken.ipynb")
        cells = browser.execute_script(_CELL_REPORT)
        assert [kind for _, kind, _ in cells["bad"]] == ["stderr", "error"], cells["bad"]
        assert cells["unrun"] == [5], f"the cell after the error should be the one left unrun: {cells['unrun']}"
        problems = browser.execute_script(_WIDGET_REPORT)["problems"]
        assert any("plain-text widget: IntSlider(" in p for p in problems), problems
        with pytest.raises(AssertionError, match="redraw its plot"):
            _check_explorers(browser, "broken.ipynb", timeout=5)
        with pytest.raises(AssertionError, match="raw TeX"):
            _check_quizzes(browser, "broken.ipynb", "01_soft_attention", "pytorch", parts=("pre",))
        with pytest.raises(AssertionError, match="quiz's feedback"):
            _check_quizzes(browser, "broken.ipynb", "01_soft_attention", "pytorch", parts=("post",))
    finally:
        browser.execute_script(
            "const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;"
            "return w && w.sessionContext ? w.sessionContext.shutdown() : null;")
