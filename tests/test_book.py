"""The book edition (`make book`): built for lesson 1 from smoke-profile runs, then read
as files and in a real headless Chromium.

Checks: the landing page, the lesson pages, the quizzes and assignments pages exist;
every relative link and image of every page resolves to a file of the site; nothing of
``solutions/`` (nbgrader's markers, distinctive solution and hidden-test lines) is
anywhere in the site; the lesson pages hold figures and leave out the lesson's checks cell
(tag ``checks``: the twin records and smoke guards the tests need); the quizzes hide their answers in
``<details>`` and their maths is typeset; in the browser the lesson page shows a loaded
image and the console has no error. Screenshots go to ``build/book-screenshots/``.

Needs Jupyter Book (``pip install -e .[book]``, which ``make book`` does) and, for the
browser part, Chromium, its driver and Selenium. Under ``CI=true`` a missing piece fails
the test; elsewhere the test skips and says how to enable it. Executed notebooks are
cached in ``build/book/executed/smoke/``, so a second run skips the execution.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import time
from html import unescape
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import nbformat
import pytest

from tests.test_browser import BROWSERS, HOW_TO_ENABLE, _missing as browser_missing
from tools import book
from tools.notebook_runner import ROOT

pytestmark = [pytest.mark.xdist_group("book"), pytest.mark.notebook]

LESSON = "01_soft_attention"
SHOTS = ROOT / "build" / "book-screenshots"
CELL_TIMEOUT_S = 60


def _skip_or_fail(message: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(message + " (CI=true: the book test must run)")
    pytest.skip(message)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    missing = book.jupyter_book_missing()
    if missing:
        _skip_or_fail(f"book test: {missing}")
    work = tmp_path_factory.mktemp("book")
    # A cell of lesson 1 in the smoke profile takes seconds: a 60-second cell timeout turns the
    # rare stall (the kernel idle, the cell's reply never read) into a quick retry, not 20 minutes.
    result = book.build("smoke", [LESSON], work=work, cache=ROOT / "build" / "book" / "executed", pin_threads=True,
                        timeout=CELL_TIMEOUT_S, log=lambda _: None)
    out = result["out"]
    (out / ".local-mathjax").write_text("yes" if (out / "_static" / "mathjax" / "tex-chtml.js").exists() else "no")
    return out


class _Refs(HTMLParser):
    """Every href/src of a page, every <img>, and the page's text."""

    def __init__(self) -> None:
        super().__init__()
        self.refs: list[tuple[str, str]] = []
        self.images: list[str] = []
        self.tags: dict[str, int] = {}
        self.text: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag, attrs):
        self.tags[tag] = self.tags.get(tag, 0) + 1
        attrs = dict(attrs)
        for key in ("href", "src"):
            if attrs.get(key):
                self.refs.append((tag, attrs[key]))
        if tag == "img":
            self.images.append(attrs.get("src", ""))
        if tag in ("script", "style"):
            self._skip += 1

    def handle_endtag(self, tag):
        if tag in ("script", "style") and self._skip:
            self._skip -= 1

    def handle_data(self, data):
        if not self._skip:
            self.text.append(data)


def _parse(page: Path) -> _Refs:
    parser = _Refs()
    parser.feed(page.read_text(encoding="utf-8"))
    return parser


def _pages(site: Path) -> list[Path]:
    return sorted(site.rglob("*.html"))


def _local_target(page: Path, ref: str) -> Path | None:
    """The file a relative reference points to, or None for an external one or an anchor."""
    parts = urlsplit(ref)
    if parts.scheme or parts.netloc or not parts.path:
        return None  # http(s), mailto, data:, javascript:, or "#anchor"
    return (page.parent / unquote(parts.path)).resolve()


def test_pages_exist(site: Path):
    for rel in ("index.html", f"lessons/{LESSON}/index.html", f"lessons/{LESSON}/{LESSON}_pytorch.html",
                f"lessons/{LESSON}/{LESSON}_tensorflow.html", "quizzes/index.html", f"quizzes/{LESSON}.html",
                "assignments/index.html", f"assignments/{LESSON}_pytorch/{LESSON}_pytorch.html"):
        assert (site / rel).is_file(), f"the book has no {rel}"
    landing = _parse(site / "index.html")
    hrefs = {h for tag, h in landing.refs if tag == "a"}
    assert f"lessons/{LESSON}/index.html" in hrefs, "the landing page does not link lesson 1's page"
    guides = book.guide_pages()
    assert len(guides) >= 6, f"docs/ holds {len(guides)} pages"
    for page in guides:  # every docs/ page is a page of the book, linked from the landing page
        assert (site / "guides" / f"{page.stem}.html").is_file(), f"the book has no page for docs/{page.name}"
        assert f"guides/{page.stem}.html" in hrefs, f"the landing page does not link docs/{page.name}"
        text = " ".join(_parse(site / "guides" / f"{page.stem}.html").text)
        title = next(ln[2:] for ln in page.read_text(encoding="utf-8").splitlines() if ln.startswith("# "))
        assert title.replace("`", "") in unescape(text).replace("\u2019", "'"), \
            f"guides/{page.stem}.html lost its title {title!r}"
    assert "not in this build" in " ".join(landing.text), "lessons left out of a subset build should say so"


def test_no_broken_internal_links_or_images(site: Path):
    broken = []
    pages = _pages(site)
    assert len(pages) >= 8
    for page in pages:
        for tag, ref in _parse(page).refs:
            target = _local_target(page, ref)
            if target is not None and not target.exists():
                broken.append(f"{page.relative_to(site)}: <{tag}> {ref}")
    assert not broken, "broken links or images:\n" + "\n".join(broken[:30])


def _solution_lines() -> list[str]:
    """Distinctive lines of lesson 1's solutions and hidden tests: long enough to mean
    something and found in no lesson or release notebook (which the book may show)."""
    allowed = ""
    for path in [*(ROOT / "lessons").rglob("*.ipynb"), *(ROOT / "assignments").rglob("*.ipynb")]:
        allowed += "\n".join(c.source for c in nbformat.read(path, as_version=4).cells)
    secret = []
    for fw in ("pytorch", "tensorflow"):
        nb = nbformat.read(ROOT / "solutions" / f"{LESSON}_{fw}" / f"{LESSON}_{fw}.ipynb", as_version=4)
        for cell in nb.cells:
            for begin, end in (("### BEGIN SOLUTION", "### END SOLUTION"), ("### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS")):
                for block in re.findall(re.escape(begin) + r"(.*?)" + re.escape(end), cell.source, re.S):
                    for line in block.splitlines():
                        line = line.strip()
                        if len(line) >= 25 and not line.startswith("#") and line not in allowed:
                            secret.append(line)
    return sorted(set(secret))


def _site_text(path: Path) -> str:
    """A file's text as a reader (or a search) would meet it: pages without markup,
    notebooks as their sources and outputs, anything else as it is."""
    raw = path.read_bytes().decode("utf-8", errors="ignore")
    if path.suffix == ".html":
        return raw + "\n" + unescape(" ".join(_parse(path).text))
    if path.suffix == ".ipynb":
        try:
            nb = nbformat.reads(raw, as_version=4)
        except Exception:
            return raw
        return raw + "\n" + "\n".join(c.source for c in nb.cells)
    return raw


def test_no_solution_or_hidden_test_text(site: Path):
    secret = _solution_lines()
    assert len(secret) >= 5, f"too few distinctive solution lines to check ({secret})"
    found = []
    squash = lambda s: re.sub(r"\s+", " ", s)  # noqa: E731
    for path in sorted(p for p in site.rglob("*") if p.is_file() and p.suffix not in (".png", ".woff", ".woff2", ".ico")):
        text = squash(_site_text(path))
        for marker in book.FORBIDDEN_MARKERS:
            if marker in text:
                found.append(f"{path.relative_to(site)}: '{marker}'")
        for line in secret:
            if squash(line) in text:
                found.append(f"{path.relative_to(site)}: {line!r}")
    assert not found, "solution or hidden-test text in the book:\n" + "\n".join(found[:20])


def test_lesson_pages_leave_out_the_checks_cell(site: Path):
    """The checks cell (tag "checks", the last code cell: twin records, smoke guards) is for the
    tests; tools/book.py skips it, so none of its code lines is on the rendered page."""
    squash = lambda s: re.sub(r"\s+", "", unescape(s))  # noqa: E731  (highlighting splits code into spans)
    for fw in ("pytorch", "tensorflow"):
        nb = nbformat.read(ROOT / "lessons" / LESSON / f"{LESSON}_{fw}.ipynb", as_version=4)
        code = [c for c in nb.cells if c.cell_type == "code"]
        checks = [c for c in code if "checks" in c.metadata.get("tags", [])]
        assert len(checks) == 1, f"{LESSON}_{fw}: expected one cell tagged 'checks', found {len(checks)}"
        lines = [line.strip() for line in checks[0].source.splitlines() if line.strip()]
        assert any("runtime.record(" in line for line in lines), "the checks cell should hold the twin records"
        page = squash("".join(_parse(site / "lessons" / LESSON / f"{LESSON}_{fw}.html").text))
        teaching = next(c for c in code if "def masked_softmax" in c.source).source.splitlines()[0]
        assert squash(teaching) in page, f"{fw} page: the reader above finds no teaching code ({teaching!r})"
        shown = [line for line in lines if squash(line) in page]
        assert not shown, f"{fw} page shows lines of the checks cell: {shown[:3]}"


def test_lessons_have_figures_and_quizzes_hide_answers(site: Path):
    for fw in ("pytorch", "tensorflow"):
        page = site / "lessons" / LESSON / f"{LESSON}_{fw}.html"
        parsed = _parse(page)
        pngs = [s for s in parsed.images if s.startswith("data:image/png") or s.endswith(".png")]
        assert len(pngs) >= 4, f"{page.name}: expected the lesson's figures, found images {parsed.images}"
        text = " ".join(parsed.text)
        assert "switch to" in text, f"{page.name}: no framework switch"
        assert "Error displaying widget" not in text and "VBox(children" not in text, f"{page.name}: a raw widget"
        dropdowns = page.read_text(encoding="utf-8").count('<details class="sd-sphinx-override sd-dropdown')
        assert dropdowns >= 5, f"{page.name}: the quizzes should show their answers in <details>"
    html_text = (site / "quizzes" / f"{LESSON}.html").read_text(encoding="utf-8")
    assert html_text.count('<details class="sd-sphinx-override sd-dropdown') >= 10
    assert 'class="math' in html_text, "the quiz's $...$ maths did not become maths"


@pytest.fixture(scope="module")
def chromium():
    missing = browser_missing()
    if missing:
        _skip_or_fail(f"book browser test: {missing}; to run it, {HOW_TO_ENABLE}")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1300,1000", "--no-first-run", "--disable-extensions", "--allow-file-access-from-files"):
        options.add_argument(arg)
    options.binary_location = next(shutil.which(b) for b in BROWSERS if shutil.which(b))
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def _open(driver, page: Path, shot: str) -> list[dict]:
    """Open a page from the file system, wait until it and its maths are done, save a
    screenshot; return the console's SEVERE entries."""
    driver.get(page.as_uri())
    deadline = time.monotonic() + 30
    while driver.execute_script("return document.readyState") != "complete" and time.monotonic() < deadline:
        time.sleep(0.2)
    driver.set_script_timeout(30)
    driver.execute_async_script(  # MathJax typesets after the page has loaded
        "const done = arguments[arguments.length - 1];"
        "if (window.MathJax && MathJax.startup && MathJax.startup.promise)"
        "  MathJax.startup.promise.then(() => done(true), () => done(false)); else done(null);")
    SHOTS.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(SHOTS / shot))
    return [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]


def test_in_the_browser(site: Path, chromium):
    local_mathjax = (site / ".local-mathjax").read_text() == "yes"
    errors = _open(chromium, site / "index.html", "landing.png")
    lesson = site / "lessons" / LESSON / f"{LESSON}_pytorch.html"
    errors += _open(chromium, lesson, "lesson.png")
    loaded = chromium.execute_script(
        "return Array.from(document.images).filter(i => i.complete && i.naturalWidth > 0).length")
    assert loaded >= 1, "the lesson page shows no loaded image"
    # a second picture of the lesson page, scrolled to its first figure
    chromium.execute_script("const i = Array.from(document.images).find(i => i.naturalWidth > 200);"
                            "if (i) i.scrollIntoView({block: 'center'});")
    time.sleep(0.5)
    chromium.save_screenshot(str(SHOTS / "lesson-figure.png"))
    if not local_mathjax:  # the CDN is out of reach offline: that one failure is expected
        errors = [e for e in errors if "mathjax" not in e.get("message", "").lower()]
    assert not errors, "console errors:\n" + json.dumps(errors, indent=1)
    if local_mathjax:
        typeset = chromium.execute_script("return document.querySelectorAll('mjx-container').length")
        assert typeset > 0, "MathJax typeset nothing on the lesson page"
    chromium.get((site / "quizzes" / f"{LESSON}.html").as_uri())
    time.sleep(1.5)
    first = chromium.find_element("css selector", "details.sd-dropdown")
    assert first.get_attribute("open") is None, "a quiz answer is shown before a click"
    first.find_element("css selector", "summary").click()
    assert first.get_attribute("open") is not None, "a click did not open the quiz answer"
    if local_mathjax:
        assert chromium.execute_script("return document.querySelectorAll('mjx-container').length") > 0, \
            "MathJax typeset nothing on the quiz page"
    chromium.save_screenshot(str(SHOTS / "quiz.png"))


def test_guides_point_course_files_at_the_repository(tmp_path: Path):
    """A docs/ page's links to other guides stay; links to the course's files go to the repository."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "other.md").write_text("# Other\n")
    text = ("[a](other.md) [b](other.md#part) [c](../grader/late.py) [d](../README.md#start) [e](https://x.org) "
            "[f](#here) [g](../grader/)")
    out = book.guide_markdown(text, "https://github.com/o/r/", docs)
    assert out == ("[a](other.md) [b](other.md#part) [c](https://github.com/o/r/blob/main/grader/late.py) "
                   "[d](https://github.com/o/r/blob/main/README.md#start) [e](https://x.org) [f](#here) "
                   "[g](https://github.com/o/r/tree/main/grader)"), out
    with pytest.raises(book.BookError, match="leaves the course"):
        book.guide_markdown("[x](../../../etc/passwd)", "https://github.com/o/r", docs)


def test_cache_key_follows_the_notebook_and_the_utils_it_imports(tmp_path: Path):
    """A lesson re-runs when it or a utils module it imports changes, and only then."""
    torch_nb = ROOT / "lessons" / LESSON / f"{LESSON}_pytorch.ipynb"
    used = {p.relative_to(ROOT).as_posix() for p in book.utils_closure(
        "\n".join(c.source for c in nbformat.read(torch_nb, as_version=4).cells if c.cell_type == "code"))}
    assert {"utils/attention/torch_impl.py", "utils/quiz.py", "utils/runtime.py"} <= used
    assert "utils/attention/keras_impl.py" not in used and "utils/bert/torch_impl.py" not in used
    key = book.cache_key(torch_nb, "smoke")
    assert key == book.cache_key(torch_nb, "smoke") != book.cache_key(torch_nb, "cpu")
    edited = tmp_path / torch_nb.name
    nb = nbformat.read(torch_nb, as_version=4)
    nb.cells[0].source += "\n\nOne more sentence."
    nbformat.write(nb, edited)
    assert book.cache_key(edited, "smoke") != key
