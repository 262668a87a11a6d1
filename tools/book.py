"""Build the course as a static, offline-readable HTML book (Jupyter Book 1, Sphinx).

    python -m tools.book                                  # every lesson, cpu profile
    python -m tools.book --profile smoke                  # quick: the smoke profile
    python -m tools.book --lessons 01_soft_attention,04_positional_encoding

What it does, in order:

1. **Execute** each lesson twin headless with ``tools.notebook_runner`` in the chosen
   profile, one notebook at a time, unless ``build/book/executed/<profile>/`` already
   holds it under the same key. The key hashes the notebook, the profile, the runner
   and every ``utils`` module the notebook imports (followed through the package's own
   imports), so editing one lesson, or a module only it uses, re-runs only that lesson.
2. **Assemble** a Jupyter Book source tree under ``build/book/src/``: the landing page
   (the lesson map), one overview page per lesson with its PyTorch and TensorFlow pages,
   one quiz page per lesson (questions from ``quizzes/`` via ``utils.quiz``, answers in
   a click-to-open dropdown), the assignments (the student releases from
   ``assignments/``, unexecuted), and the guides (every ``docs/*.md`` page, its links to
   the course's files pointed at the repository). Widgets cannot run in a static page: an explorer shows
   the first drawing it made (kept by nbclient's widget state) with a note, a quiz shows
   its questions with the answers behind a click, a progress bar shows its last text.
   Nothing is ever read from ``solutions/``, and the build stops if an assignment
   release holds solution or hidden-test markers.
3. **Render** with ``jupyter-book build`` (no execution there: the notebooks arrive
   executed), then copy the site to ``build/book/html/``. Sources are rewritten only
   when they change, so Sphinx re-renders only the pages that did.

MathJax: a local copy is used when one is found (``--mathjax DIR``, ``$BOOK_MATHJAX``, or
``build/book/vendor/mathjax``, which ``--fetch-mathjax`` fills from npm's ``mathjax@3``);
without one the pages load MathJax from its CDN, and maths shows as TeX offline.
"""
from __future__ import annotations

import argparse
import ast
import hashlib
import html
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import nbformat

from tools import notebook_runner
from tools.notebook_runner import ROOT
from tools.sync_notebooks import FRAMEWORK_NAMES, lesson_info, lessons, repository_url

PROFILES = ("smoke", "cpu", "gpu")
WORK = ROOT / "build" / "book"
MATHJAX_VERSION = "3.2.2"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
# Text that must never reach the site: nbgrader's solution and hidden-test markers.
FORBIDDEN_MARKERS = ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS")
QUIZ_CALL = re.compile(r"""quiz\.show\(\s*["'](\w+)["']\s*,\s*["'](pre|post)["']""")


DOCS = ROOT / "docs"
# The guides' order in the book; a docs/ page not named here follows, by name.
GUIDES_ORDER = ("self-check", "instructors", "grading", "jupyterhub", "scale", "testing", "book", "course")
_MD_LINK = re.compile(r"(\]\()([^)\s]+)(\))")


class BookError(RuntimeError):
    """A build that cannot go on; the message says why."""


# ------------------------------------------------------------------ the execution cache


def _utils_module_file(dotted: str) -> Path | None:
    """The file of ``utils.x.y`` (a module or a package's ``__init__``), or None."""
    parts = dotted.split(".")
    if parts[0] != "utils":
        return None
    base = ROOT.joinpath(*parts)
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.exists():
            return candidate
    return None


def _imports(source: str, module: str | None = None, is_package: bool = False) -> set[str]:
    """Dotted names of the ``utils`` modules a piece of code imports (``module`` is the
    importing module's own name, for relative imports)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:  # IPython magics in a cell: read only its import lines
        lines = [ln for ln in source.splitlines() if re.match(r"\s*(from|import)\s", ln)]
        try:
            tree = ast.parse("\n".join(ln.strip() for ln in lines))
        except SyntaxError:
            return set()
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level and module:
                package = module.split(".")
                package = package[: len(package) - node.level + (1 if is_package else 0)]
                base = ".".join(package + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            found.add(base)
            found.update(f"{base}.{a.name}" for a in node.names)  # `from utils import quiz`
    return {name for name in found if name == "utils" or name.startswith("utils.")}


def utils_closure(code: str) -> list[Path]:
    """Every ``utils`` source file that ``code`` imports, directly or through others."""
    todo = sorted(_imports(code))
    seen: dict[str, Path] = {}
    while todo:
        name = todo.pop()
        # importing utils.a.b runs utils/__init__ and utils/a/__init__ too
        parts = name.split(".")
        for i in range(1, len(parts) + 1):
            dotted = ".".join(parts[:i])
            path = _utils_module_file(dotted)
            if path is None or dotted in seen:
                continue
            seen[dotted] = path
            todo += sorted(_imports(path.read_text(encoding="utf-8"), dotted, path.name == "__init__.py"))
    return sorted(set(seen.values()))


def cache_key(notebook: Path, profile: str) -> str:
    """What an executed notebook depends on: itself, the profile, the runner, its utils."""
    nb = nbformat.read(notebook, as_version=4)
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    h = hashlib.sha256()
    h.update(f"profile={profile}\n".encode())
    h.update(notebook.name.encode() + b"\0" + notebook.read_bytes() + b"\0")
    for path in [Path(notebook_runner.__file__), *utils_closure(code)]:
        h.update(str(path.resolve().relative_to(ROOT)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:20]


def cached(notebook: Path, profile: str, cache: Path) -> Path | None:
    """The cached executed copy of ``notebook`` for its current sources, or None."""
    target = cache / profile / f"{notebook.stem}.{cache_key(notebook, profile)}.ipynb"
    return target if target.exists() else None


def run(notebook: Path, profile: str, timeout: int, pin_threads: bool = False, log=print) -> dict:
    """Execute ``notebook`` as the book shows it (inline figures); one retry after a stall.

    Returns ``notebook_runner.run_notebook``'s result. ``pin_threads=False`` (the default)
    gives the kernel the machine's thread count, as a learner's kernel has: the book runs
    one notebook at a time.
    """
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    for attempt in (1, 2):
        log(f"  executing {notebook.relative_to(ROOT)} ({profile} profile) ...")
        try:
            return notebook_runner.run_notebook(notebook, profile=profile, timeout=timeout, inline_plots=True,
                                                pin_threads=pin_threads)
        except (CellTimeoutError, DeadKernelError) as exc:
            # Seen once on a loaded machine: the kernel went idle and the cell's reply never
            # came. Such a stall is not the notebook's fault: run it once more.
            if attempt == 2:
                raise BookError(f"{notebook.relative_to(ROOT)} stalled twice in the {profile} profile:\n{exc}") from None
            log(f"  {notebook.name}: {type(exc).__name__}; running it once more")
        except Exception as exc:  # a failing cell: say which notebook, keep the old cache entry
            raise BookError(f"{notebook.relative_to(ROOT)} failed in the {profile} profile:\n{exc}") from None
    raise AssertionError("unreachable")


def store(notebook: Path, profile: str, cache: Path, result: dict) -> Path:
    """Put a run's executed notebook in the cache (replacing older versions); return its path."""
    key = cache_key(notebook, profile)
    folder = cache / profile
    target = folder / f"{notebook.stem}.{key}.ipynb"
    nb = result["notebook"]
    if nb.cells and nb.cells[-1].source == notebook_runner._PROBE:
        nb.cells.pop()  # the runner's module probe
    nb.metadata["course_book"] = {"key": key, "profile": profile, "seconds": round(result["seconds"], 1),
                                  "cpu_seconds": round(result["cpu_seconds"], 1)}
    folder.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".tmp")
    nbformat.write(nb, tmp)
    for old in folder.glob(f"{notebook.stem}.*.ipynb"):  # older versions of this notebook
        old.unlink()
    tmp.replace(target)
    return target


def executed(notebook: Path, profile: str, cache: Path, timeout: int, pin_threads: bool = False,
             log=print) -> tuple[Path, bool]:
    """The executed copy of ``notebook`` (from the cache, or run now); True if it ran now."""
    target = cached(notebook, profile, cache)
    if target is not None:
        return target, False
    result = run(notebook, profile, timeout, pin_threads, log)
    target = store(notebook, profile, cache, result)
    log(f"  executed {notebook.name} in {result['seconds']:.0f} s ({result['cpu_seconds']:.0f} s kernel CPU)")
    return target, True


# ------------------------------------------------------------------ quizzes as static text

_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]<>()#+!|~&])")


def _md_text(text: str) -> str:
    """A bank text as MyST: plain parts escaped, ``$...$`` maths kept for MathJax."""
    parts = " ".join(text.split()).split("$")
    out = []
    for i, part in enumerate(parts):
        out.append(f"${part}$" if i % 2 else _MD_SPECIAL.sub(r"\\\1", part))
    return "".join(out)


def quiz_markdown(lesson: str, part: str, framework: str | None, heading: str = "###") -> str:
    """One part of a lesson's quiz: each question, its options in the widget's order,
    and the answer with every option's explanation in a dropdown (a ``<details>``)."""
    from utils import quiz

    bank = quiz.load_bank(lesson)
    questions = [quiz.shuffled(q, bank.lesson, part) for q in quiz.select_questions(bank, part, framework)]
    label = "pre-lesson" if part == "pre" else "post-lesson"
    lines = [f"{heading} {_md_text(bank.title)}: {label} quiz", ""]
    letters = "ABCDEFGHIJ"
    for n, q in enumerate(questions, 1):
        tag = f"\\[{FRAMEWORK_NAMES[q.framework]}\\] " if q.framework else ""
        how = "choose all that apply" if q.multiple else "choose one"
        if q.kind == "predict":
            how += "; work it out first, then compare with what the lesson computes"
        lines += [f"**Q{n}.** {tag}{_md_text(q.question)} *({how})*", ""]
        lines += [f"- **{letters[i]}.** {_md_text(a.text)}" for i, a in enumerate(q.answers)]
        right = ", ".join(letters[i] for i in sorted(q.correct_set))
        lines += ["", "::::{dropdown} Show the answer", f"**Answer: {right}**", ""]
        for i, a in enumerate(q.answers):
            verdict = "right" if a.correct else "wrong"
            lines.append(f"- **{letters[i]}** ({verdict}): {_md_text(a.explain)}")
        if q.section:
            lines += ["", f"Missed it? Reread *{_md_text(q.section)}*."]
        lines += ["::::", ""]
    return "\n".join(lines)


# ------------------------------------------------------------------ notebooks made static


def _widget_static(model_id: str, state: dict) -> tuple[list[dict], str]:
    """What a widget showed, as plain outputs: the outputs its Output widgets hold (an
    explorer's first drawing), else a progress bar's text; and what kind of widget it was."""
    outputs: list[dict] = []
    texts: list[str] = []
    kinds: set[str] = set()

    def walk(mid: str) -> None:
        model = state.get(mid)
        if model is None:
            return
        kinds.add(model.get("model_name", ""))
        st = model.get("state", {})
        if model.get("model_name") == "OutputModel":
            outputs.extend(o for o in st.get("outputs", []) if WIDGET_VIEW not in o.get("data", {}))
        if model.get("model_name") == "HTMLModel" and st.get("value"):
            texts.append(re.sub(r"<[^>]+>", "", html.unescape(st["value"])).strip())
        for child in st.get("children", []):
            walk(str(child).removeprefix("IPY_MODEL_"))

    walk(model_id)
    if outputs:
        return outputs, "explorer"
    if "FloatProgressModel" in kinds or "IntProgressModel" in kinds:
        text = " ".join(t for t in texts if t) or "done"
        return [nbformat.v4.new_output("stream", name="stdout", text=f"progress: {text}\n")], "progress"
    return [], "widget"


def _note(text: str) -> dict:
    return nbformat.v4.new_output(
        "display_data", data={"text/html": f'<p class="book-widget-note"><em>{html.escape(text)}</em></p>', "text/plain": text})


def static_lesson(nb, lesson: str, framework: str) -> None:
    """Make an executed lesson notebook readable without a kernel (in place)."""
    state = nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    other = next(fw for fw in FRAMEWORK_NAMES if fw != framework)
    cells = []
    for cell in nb.cells:
        tags = cell.get("metadata", {}).get("tags", [])
        if cell.cell_type == "code" and ("colab-setup" in tags or "checks" in tags):
            continue  # the Colab cell does nothing outside Colab; the checks cell is for the tests
        cells.append(cell)
        if cell.cell_type != "code":
            continue
        called = QUIZ_CALL.search(cell.source)
        outputs = []
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if WIDGET_VIEW not in data:
                outputs.append(out)
                continue
            if called:
                continue  # the quiz follows as text
            shown, kind = _widget_static(data[WIDGET_VIEW].get("model_id", ""), state)
            if kind == "explorer":
                outputs.append(_note("Interactive explorer: its sliders work when you run this notebook "
                                     "in JupyterLab or Colab. Below, the first picture it drew."))
            elif kind == "widget":
                outputs.append(_note("Interactive widget: run this notebook in JupyterLab or Colab to use it."))
            outputs.extend(shown)
        cell.outputs = outputs
        if called:
            quiz_md = quiz_markdown(called.group(1), called.group(2), framework, heading="####")
            cells.append(nbformat.v4.new_markdown_cell(
                "*In the notebook this is an interactive quiz; here, click to see each answer.*\n\n" + quiz_md))
    title = FRAMEWORK_NAMES[framework]
    switch = nbformat.v4.new_markdown_cell(
        ":::{div} book-switch\n"
        f"**Framework:** <span class=\"book-current\">{title}</span> "
        f"| [switch to {FRAMEWORK_NAMES[other]}]({lesson}_{other}.ipynb) "
        f"| [lesson overview](index.md) | [quiz with answers](../../quizzes/{lesson}.md)\n"
        ":::")
    cells.insert(0, switch)
    nb.cells = cells
    nb.metadata.pop("widgets", None)  # no widget manager from a CDN
    nb.metadata.pop("course_book", None)


def check_release(nb, where: str) -> None:
    """Refuse a release notebook that holds solution or hidden-test text."""
    text = nbformat.writes(nb)
    for marker in FORBIDDEN_MARKERS:
        if marker in text:
            raise BookError(f"{where} contains '### {marker}': regenerate it with `make assignments`")


# ------------------------------------------------------------------ the book's sources


def _write(path: Path, text: str) -> None:
    """Write only when the content changes (Sphinx re-reads what has a newer mtime)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")


def _intro(source: str) -> str:
    """A title cell without its heading line."""
    return "\n".join(source.splitlines()[1:]).strip()


def guide_pages(docs: Path = DOCS) -> list[Path]:
    """The docs/ pages, in the book's order."""
    rank = {name: i for i, name in enumerate(GUIDES_ORDER)}
    pages = docs.glob("*.md") if docs.is_dir() else []
    return sorted(pages, key=lambda p: (rank.get(p.stem, len(rank)), p.stem))


def guide_markdown(text: str, url: str, docs: Path = DOCS) -> str:
    """A docs/ page as the book shows it: links to other docs/ pages and anchors stay;
    a link to a file or folder of the course (``../grader/late.py``, ``../README.md``)
    points at the repository, where the book has no copy of it."""
    url = url.rstrip("/")

    def fix(match: re.Match) -> str:
        target = match.group(2)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I) or target.startswith("#"):
            return match.group(0)  # http(s), mailto, an anchor
        path, _, anchor = target.partition("#")
        if path.endswith(".md") and "/" not in path and (docs / path).is_file():
            return match.group(0)  # another guide
        resolved = (docs / path).resolve()
        try:
            rel = resolved.relative_to(docs.resolve().parent).as_posix()
        except ValueError:
            raise BookError(f"docs: a link leaves the course folder: {target}") from None
        kind = "tree" if path.endswith("/") or resolved.is_dir() else "blob"
        return f"{match.group(1)}{url}/{kind}/main/{rel}{'#' + anchor if anchor else ''}{match.group(3)}"

    return _MD_LINK.sub(fix, text)


def _guide_title(path: Path) -> str:
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return path.stem


def landing_page(infos: list[dict], built: set[str], profile: str) -> str:
    url = repository_url().rstrip("/")
    colab = url.replace("https://github.com/", "https://colab.research.google.com/github/")
    rows = ["| # | lesson | time | PyTorch | TensorFlow | quiz | assignment | on Colab |", "|---|---|---|---|---|---|---|---|"]
    for info in infos:
        name = info["name"]
        if name in built:
            cells = [f"[{info['title']}](lessons/{name}/index.md)",
                     *(f"[read]({info['notebooks'][fw]})" for fw in FRAMEWORK_NAMES),
                     f"[quiz](quizzes/{name}.md)",
                     ", ".join(f"[{FRAMEWORK_NAMES[fw]}](assignments/{name}_{fw}/{name}_{fw}.ipynb)" for fw in info["assignments"]) or "-"]
        else:
            cells = [info["title"], "*not in this build*", "", "", ""]
        run = " · ".join(f"[{label}]({colab}/blob/main/{info['notebooks'][fw]})" for fw, label in FRAMEWORK_NAMES.items())
        minutes = f"{info['minutes']} min" if info["minutes"] else "-"
        rows.append(f"| {info['number']} | {cells[0]} | {minutes} | {' | '.join(cells[1:])} | {run} |")
    return f"""# Attention, Memory Networks and Transformers

A hands-on course from the softmax to BERT: soft attention, sequence-to-sequence
attention, end-to-end memory networks, positional encoding, multi-head
self-attention, the Transformer and BERT fine-tuning. Every lesson comes in
**PyTorch** and in **TensorFlow (Keras 3)**, with the same sections and the same
numbers; a switch at the top of each lesson page takes you to the other framework.

This is the read-only edition: every lesson was run, with its outputs and figures,
in the `{profile}` profile. The sliders and quizzes of the notebooks are interactive
only in JupyterLab or Colab; here each explorer shows its first picture and each quiz
shows its answers on a click. To run the course yourself, see the
[repository]({url}).

## Lessons

{chr(10).join(rows)}

The [quizzes](quizzes/index.md) come with every answer explained; the
[assignments](assignments/index.md) are the exercise notebooks, without their
solutions, to download and solve.

## Guides

{chr(10).join(f"- [{_guide_title(page)}](guides/{page.stem}.md)" for page in guide_pages())}
"""


def lesson_page(info: dict, intro: str) -> str:
    name = info["name"]
    minutes = f" (about {info['minutes']} minutes)" if info["minutes"] else ""
    cards = []
    for fw, label in FRAMEWORK_NAMES.items():
        cards.append(f"""::::{{grid-item-card}} {label}
:link: {name}_{fw}
:link-type: doc

The lesson in {label}, executed, with every output and figure.
::::""")
    assignments = ", ".join(
        f"[{FRAMEWORK_NAMES[fw]}](../../assignments/{name}_{fw}/{name}_{fw}.ipynb)" for fw in info["assignments"])
    return f"""# Lesson {info['number']}: {info['title']}

{intro}

## Read it in your framework{minutes}

:::::{{grid}} 1 2 2 2
:gutter: 3

{chr(10).join(cards)}
:::::

Also: the [quiz with answers](../../quizzes/{name}.md){', and the assignment in ' + assignments if assignments else ''}.
"""


def assignment_summary(nb) -> tuple[str, str]:
    """An assignment's title and what it asks (its intro, up to "How this works")."""
    first = nb.cells[0].source
    title = first.splitlines()[0].lstrip("# ").strip()
    asks = _intro(first).split("**How this works.**")[0].strip()
    return title, asks


def write_sources(src: Path, names: list[str], executed_nbs: dict, profile: str, mathjax: Path | None) -> None:
    infos = [i for i in (lesson_info(n) for n in lessons()) if i]
    built = set(names)
    by_name = {i["name"]: i for i in infos}
    keep: set[Path] = set()

    def put(rel: str, text: str) -> None:
        _write(src / rel, text)
        keep.add(src / rel)

    put("index.md", landing_page(infos, built, profile))
    toc = ["format: jb-book", "root: index", "parts:", "  - caption: Lessons", "    chapters:"]
    for name in names:
        info = by_name[name]
        title_cell = nbformat.read(ROOT / info["notebooks"]["pytorch"], as_version=4).cells[0].source
        intro = "\n\n".join(par for par in _intro(title_cell).split("\n\n")
                              if "twin of this notebook" not in par)  # the overview names both
        put(f"lessons/{name}/index.md", lesson_page(info, intro))
        toc.append(f"      - file: lessons/{name}/index")
        toc.append("        sections:")
        for fw in FRAMEWORK_NAMES:
            nb = nbformat.read(executed_nbs[name, fw], as_version=4)
            static_lesson(nb, name, fw)
            put(f"lessons/{name}/{name}_{fw}.ipynb", nbformat.writes(nb))
            toc.append(f"          - file: lessons/{name}/{name}_{fw}")
    # quizzes
    quiz_index = ["# Quizzes", "", "Each lesson's pre- and post-lesson quiz, all questions of both frameworks "
                  "(those that differ are marked). Try each one before you open its answer.", ""]
    toc += ["  - caption: Quizzes", "    chapters:", "      - file: quizzes/index", "        sections:"]
    for name in names:
        info = by_name[name]
        quiz_index.append(f"- [Lesson {info['number']}: {info['title']}]({name}.md)")
        body = [f"# Quiz: lesson {info['number']}, {info['title']}", "",
                f"Back to [the lesson](../lessons/{name}/index.md).", ""]
        body += [quiz_markdown(name, part, None, heading="##") for part in ("pre", "post")]
        put(f"quizzes/{name}.md", "\n".join(body))
        toc.append(f"          - file: quizzes/{name}")
    put("quizzes/index.md", "\n".join(quiz_index) + "\n")
    # assignments: the student releases only, never solutions/
    a_index = ["# Assignments", "",
               "One exercise notebook per lesson and framework, graded by nbgrader. Download a notebook "
               "(or open it from `assignments/` in the course), write your code where it says "
               "`YOUR CODE HERE`, and run the tests under each exercise. Some tests are hidden and "
               "run only at grading. The pages below show the notebooks as you receive them, not run.", ""]
    toc += ["  - caption: Assignments", "    chapters:", "      - file: assignments/index", "        sections:"]
    for name in names:
        for fw in by_name[name]["assignments"]:
            aid = f"{name}_{fw}"
            path = ROOT / "assignments" / aid / f"{aid}.ipynb"
            nb = nbformat.read(path, as_version=4)
            check_release(nb, str(path.relative_to(ROOT)))
            for cell in nb.cells:
                if cell.cell_type == "code":
                    cell.outputs, cell.execution_count = [], None
            title, asks = assignment_summary(nb)
            a_index += [f"## {title}", "", asks, "",
                        f"[Read the notebook]({aid}/{aid}.ipynb) · "
                        f"{{download}}`download it <{aid}/{aid}.ipynb>`", ""]
            put(f"assignments/{aid}/{aid}.ipynb", nbformat.writes(nb))
            toc.append(f"          - file: assignments/{aid}/{aid}")
    put("assignments/index.md", "\n".join(a_index))
    guides = guide_pages()
    if guides:
        toc += ["  - caption: Guides", "    chapters:"]
        url = repository_url()
        for page in guides:
            put(f"guides/{page.stem}.md", guide_markdown(page.read_text(encoding="utf-8"), url))
            toc.append(f"      - file: guides/{page.stem}")
    put("_toc.yml", "\n".join(toc) + "\n")
    put("_config.yml", book_config(mathjax is not None))
    put("_vendor/book.css", BOOK_CSS)
    if mathjax is not None:
        target = src / "_vendor" / "mathjax"
        if not (target / "tex-chtml.js").exists():
            shutil.copytree(mathjax, target, dirs_exist_ok=True)
        keep.update(p for p in target.rglob("*") if p.is_file())
    for path in list(src.rglob("*")):  # pages of lessons left out of this build
        if path.is_file() and path not in keep:
            path.unlink()


BOOK_CSS = """
.book-switch { border: 2px solid var(--pst-color-primary, #0a7d91); border-radius: 6px;
  padding: 0.4em 0.8em; margin: 0.5em 0 1.2em; background: var(--pst-color-surface, #f3f6f8); }
.book-switch p { margin: 0; }
.book-current { font-weight: bold; }
.book-widget-note { color: #555; border-left: 3px solid #aaa; padding-left: 0.6em; }
"""


def book_config(local_mathjax: bool) -> str:
    config = {
        "title": "Attention, Memory Networks and Transformers",
        "author": "the attention-course authors",
        "only_build_toc_files": True,
        "execute": {"execute_notebooks": "off"},
        "parse": {"myst_enable_extensions": ["colon_fence", "dollarmath", "amsmath", "deflist", "html_image"],
                  "myst_heading_anchors": 3},
        "html": {"use_repository_button": False, "use_issues_button": False, "use_edit_page_button": False,
                 "use_multitoc_numbering": False},
        "launch_buttons": {"notebook_interface": "classic", "binderhub_url": "", "colab_url": "", "thebe": False},
        "sphinx": {"config": {
            # Not `_static`: Jupyter Book would add every .js file under the static paths to
            # every page (MathJax's components too) when a `_static` folder exists.
            "html_static_path": ["_vendor"],
            "html_css_files": ["book.css"],
            "html_show_copyright": False,
            "html_context": {"default_mode": "light"},  # else the theme logs an error on a first visit
            "suppress_warnings": ["myst.header"],
            "nb_merge_streams": True,
        }},
    }
    if local_mathjax:
        config["sphinx"]["config"]["mathjax_path"] = "mathjax/tex-chtml.js"
    return json.dumps(config, indent=1) + "\n"  # JSON is YAML


# ------------------------------------------------------------------ MathJax


def fetch_mathjax(vendor: Path, log=print) -> Path | None:
    """Unpack MathJax 3 (its CommonHTML TeX component, extensions and fonts) from npm's
    registry into ``vendor/mathjax``, once. None when npm or the network is missing."""
    target = vendor / "mathjax"
    if (target / "tex-chtml.js").exists():
        return target
    npm = shutil.which("npm")
    if npm is None:
        log("  no npm: MathJax will come from its CDN")
        return None
    with tempfile.TemporaryDirectory() as tmp:
        done = subprocess.run([npm, "pack", f"mathjax@{MATHJAX_VERSION}", "--pack-destination", tmp],
                              capture_output=True, text=True, timeout=300)
        tarballs = list(Path(tmp).glob("mathjax-*.tgz"))
        if done.returncode != 0 or not tarballs:
            log(f"  could not fetch MathJax from npm ({done.stderr.strip()[-200:]}): it will come from its CDN")
            return None
        wanted = ("tex-chtml.js", "input/", "output/chtml/", "ui/", "a11y/", "adaptors/")
        with tarfile.open(tarballs[0]) as tar:
            members = [m for m in tar.getmembers() if m.isfile() and m.name.startswith("package/es5/")
                       and m.name.removeprefix("package/es5/").startswith(wanted)]
            tar.extractall(tmp, members=members, filter="data")
        staging = vendor / "mathjax.tmp"
        shutil.rmtree(staging, ignore_errors=True)
        shutil.copytree(Path(tmp) / "package" / "es5", staging)
        staging.replace(target)
    log(f"  MathJax {MATHJAX_VERSION} unpacked into {target.relative_to(ROOT) if target.is_relative_to(ROOT) else target}")
    return target


def find_mathjax(given: Path | None, work: Path) -> Path | None:
    for candidate in (given, Path(os.environ["BOOK_MATHJAX"]) if os.environ.get("BOOK_MATHJAX") else None,
                      work / "vendor" / "mathjax", WORK / "vendor" / "mathjax"):
        if candidate is not None and (candidate / "tex-chtml.js").exists():
            return candidate
    return None


# ------------------------------------------------------------------ the build


_INLINE_SCRIPT = re.compile(r"^[ \t]*<script>[^<]*</script>[ \t]*\n", re.M)


def dedupe_inline_scripts(page: str) -> str:
    """Drop the second copy of a one-line inline ``<script>`` in a page's head.

    sphinx-thebe and sphinx-togglebutton (with Sphinx 7.4) add their configuration
    script twice, and the second ``const THEBE_JS_URL`` is a SyntaxError in the console.
    """
    seen: set[str] = set()

    def once(match: re.Match) -> str:
        line = match.group(0).strip()
        if line in seen:
            return ""
        seen.add(line)
        return match.group(0)

    head, sep, body = page.partition("</head>")
    return _INLINE_SCRIPT.sub(once, head) + sep + body


def jupyter_book_missing() -> str | None:
    import importlib.util

    if importlib.util.find_spec("jupyter_book") is None:
        return "Jupyter Book is not installed: `make book` installs it (or `make book-deps`, `pip install -e .[book]`)"
    return None


def build(profile: str = "cpu", names: list[str] | None = None, work: Path = WORK, out: Path | None = None,
          cache: Path | None = None, timeout: int = 1200, mathjax: Path | None = None,
          fetch: bool = False, pin_threads: bool = False, log=print) -> dict:
    """Build the book; return the output folder, what ran and the seconds each step took.

    ``pin_threads`` gives each kernel one thread (for a build beside other work, as in the
    tests); by default a kernel has the machine's threads, as a learner's has.
    """
    missing = jupyter_book_missing()
    if missing:
        raise BookError(missing)
    if profile not in PROFILES:
        raise BookError(f"profile: expected one of {PROFILES}, got {profile!r}")
    available = lessons()
    names = names or available
    unknown = [n for n in names if n not in available]
    if unknown:
        raise BookError(f"unknown lessons {unknown}; available: {', '.join(available)}")
    names = [n for n in available if n in names]  # course order
    work, out = Path(work), Path(out) if out else Path(work) / "html"
    cache = Path(cache) if cache else work / "executed"
    times: dict[str, float] = {}
    ran: list[str] = []
    start = time.perf_counter()
    executed_nbs = {}
    for name in names:
        for fw in FRAMEWORK_NAMES:
            path, now = executed(ROOT / "lessons" / name / f"{name}_{fw}.ipynb", profile, cache, timeout,
                                 pin_threads, log)
            executed_nbs[name, fw] = path
            if now:
                ran.append(path.name.split(".")[0])
    times["execute"] = time.perf_counter() - start
    if mathjax is None:
        mathjax = find_mathjax(None, work) or (fetch_mathjax(WORK / "vendor", log) if fetch else None)
    if mathjax is None:
        log("  no local MathJax (try --fetch-mathjax): the pages load it from its CDN")
    t = time.perf_counter()
    src = work / "src"
    write_sources(src, names, executed_nbs, profile, mathjax)
    argv = [sys.executable, "-c", "from jupyter_book.cli.main import main; main()", "build", str(src), "--path-output", str(work), "--builder", "html"]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT)
    text = re.sub(r"\x1b\[[0-9;]*m", "", done.stdout + done.stderr)  # no colours
    warnings = [ln for ln in text.splitlines() if "WARNING" in ln or "ERROR" in ln]
    if done.returncode != 0:
        raise BookError(f"jupyter-book build failed:\n{text[-4000:]}")
    for line in warnings:
        log("  " + line)
    site = work / "_build" / "html"
    if out.resolve() != site.resolve():
        shutil.rmtree(out, ignore_errors=True)
        shutil.copytree(site, out)
    for leftover in (out / "_static").glob("*macros.html"):  # the themes' Jinja macros, not pages
        leftover.unlink()
    for page in out.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        fixed = dedupe_inline_scripts(text)
        if fixed != text:
            page.write_text(fixed, encoding="utf-8")
    times["render"] = time.perf_counter() - t
    return {"out": out, "ran": ran, "seconds": times, "warnings": warnings, "lessons": names}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", default=os.environ.get("BOOK_PROFILE", "cpu"), choices=PROFILES,
                        help="run profile the lessons execute in (default: cpu, or $BOOK_PROFILE)")
    parser.add_argument("--lessons", default="", help="comma-separated lesson folders (default: all)")
    parser.add_argument("--work", type=Path, default=WORK, help="working folder (default: build/book)")
    parser.add_argument("--out", type=Path, default=None, help="site folder (default: WORK/html)")
    parser.add_argument("--cache", type=Path, default=None, help="executed-notebook cache (default: WORK/executed)")
    parser.add_argument("--timeout", type=int, default=1200,
                        help="seconds per cell (default 1200; the longest cpu-profile cell trains for ~10 min)")
    parser.add_argument("--mathjax", type=Path, default=None, help="a MathJax 3 es5 folder (holds tex-chtml.js)")
    parser.add_argument("--fetch-mathjax", action="store_true", help="fetch MathJax from npm once if none is found")
    args = parser.parse_args(argv)
    names = [n.strip().strip("/").removeprefix("lessons/") for n in args.lessons.split(",") if n.strip()]
    try:
        result = build(args.profile, names or None, args.work, args.out, args.cache, args.timeout,
                       args.mathjax, args.fetch_mathjax)
    except BookError as exc:
        print(f"make book: {exc}", file=sys.stderr)
        return 1
    secs = result["seconds"]
    print(f"book: {len(result['lessons'])} lessons ({args.profile} profile); executed {len(result['ran'])} "
          f"notebooks in {secs['execute']:.0f} s, rendered in {secs['render']:.0f} s")
    print(f"open {result['out'] / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
