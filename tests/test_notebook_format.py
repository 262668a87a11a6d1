"""Committed notebooks are in their normal form: Colab cell first, no outputs; lessons end with
their reading list."""
from __future__ import annotations

import json
import re

import pytest

from tools import sync_notebooks as sync

NOTEBOOKS = sync.notebooks()
LESSONS = sync.lessons()
READING_HEAD = "## Further reading"
# A reference a reader can resolve for good: an arXiv abstract, a DOI or an ACL Anthology page.
REFERENCE_LINK = re.compile(
    r"\]\((https://(?:arxiv\.org/abs/\d{4}\.\d{4,5}|doi\.org/10\.\d{4,9}/[^\s)]+|aclanthology\.org/[A-Z0-9.-]+/?))\)"
)


def test_notebooks_found() -> None:
    assert any(p.parts[-3] == "lessons" for p in NOTEBOOKS)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[str(p.relative_to(sync.ROOT)) for p in NOTEBOOKS])
def test_notebook_is_in_committed_form(path) -> None:
    raw = json.loads(path.read_text(encoding="utf-8"))
    for i, cell in enumerate(raw["cells"]):
        if cell["cell_type"] == "code":
            assert cell["outputs"] == [] and cell["execution_count"] is None, f"{path.name}: cell {i} has outputs"
    first_code = next(c for c in raw["cells"] if c["cell_type"] == "code")
    assert "".join(first_code["source"]) == sync.colab_cell_source(), f"{path.name}: first code cell is not the Colab set-up"
    assert path.read_text(encoding="utf-8") == sync.render(path, sync.repository_url()), (
        f"{path.name} is not in normal form: run `python -m tools.sync_notebooks`"
    )


_ORDERED_MARKER = re.compile(r"^(\s*)\d+[.)](\s|$)")


def stray_list_markers(markdown: str) -> list[str]:
    """Lines a renderer would turn into a numbered list by accident: a wrapped line that
    starts with a number and a full stop ("... in section\n2. Introduces"), where the
    paragraph or list item it continues is not itself a numbered list at that indent."""
    found, markers, fenced = [], [], False
    lines = markdown.split("\n")
    for i, line in enumerate(lines):
        if line.strip().startswith("```"):
            fenced = not fenced
        if fenced:
            continue
        if not line.strip():
            markers = []
            continue
        m = _ORDERED_MARKER.match(line)
        if m and i > 0 and lines[i - 1].strip() and len(m.group(1)) not in markers:
            found.append(f"{lines[i - 1].strip()[-40:]!r} / {line.strip()[:40]!r}")
        if m:
            markers.append(len(m.group(1)))
    return found


def test_stray_list_markers_are_found() -> None:
    assert stray_list_markers("the model in section\n  2.\nmore") == ["'the model in section' / '2.'"]
    assert stray_list_markers("Steps:\n\n1. one\n   more of one\n2. two") == []
    assert stray_list_markers("in 2014.\nA sentence") == []


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[str(p.relative_to(sync.ROOT)) for p in NOTEBOOKS])
def test_markdown_has_no_accidental_numbered_list(path) -> None:
    raw = json.loads(path.read_text(encoding="utf-8"))
    bad = {i: stray_list_markers("".join(c["source"])) for i, c in enumerate(raw["cells"]) if c["cell_type"] == "markdown"}
    bad = {i: found for i, found in bad.items() if found}
    assert not bad, f"{path.name}: a wrapped line starts with 'N.', which renders as a numbered list (cell: lines): {bad}"


def test_colab_cell_installs_without_touching_frameworks() -> None:
    import tomllib

    source = sync.colab_cell_source()
    assert sync.repository_url() in source and "google.colab" in source
    deps = tomllib.loads((sync.ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    pinned = [d for d in deps if d.split(">")[0].split("=")[0].strip() in ("torch", "tensorflow", "tensorflow-cpu")]
    assert not pinned, f"the package's own dependencies must not name a framework (Colab has its own): {pinned}"
    exec(compile(source, "colab-cell", "exec"), {})  # off Colab: does nothing, raises nothing


def test_readme_lesson_map_is_current() -> None:
    text = (sync.ROOT / "README.md").read_text(encoding="utf-8")
    assert text == sync.render_readme(), "README's lesson map is out of date: run `python -m tools.sync_notebooks`"
    for lesson in sorted(p.name for p in (sync.ROOT / "lessons").iterdir() if p.is_dir()):
        assert f"lessons/{lesson}/{lesson}_tensorflow.ipynb" in text, f"README does not link {lesson}"


def test_environment_yml_mirrors_the_local_install() -> None:
    text = (sync.ROOT / "environment.yml").read_text()
    assert "-r requirements/local.txt" in text and "-e .[dev]" in text and "python=3.11" in text


def test_lessons_found() -> None:
    assert len(LESSONS) >= 7, LESSONS


@pytest.mark.parametrize("lesson", LESSONS)
def test_lesson_twins_end_with_the_same_further_reading(lesson: str) -> None:
    reading = {}
    for framework in ("pytorch", "tensorflow"):
        path = sync.ROOT / "lessons" / lesson / f"{lesson}_{framework}.ipynb"
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        last, before = cells[-1], "".join(cells[-2]["source"]) if len(cells) > 1 else ""
        source = "".join(last["source"])
        assert last["cell_type"] == "markdown" and source.splitlines()[:1] == [READING_HEAD], (
            f"{path.name}: the last cell should be a markdown cell headed `{READING_HEAD}`"
        )
        assert before.startswith("## Your assignment"), (
            f"{path.name}: `{READING_HEAD}` should come right after `## Your assignment`"
        )
        reading[framework] = source
    assert reading["pytorch"] == reading["tensorflow"], (
        f"{lesson}: the `{READING_HEAD}` cells of the two twins differ (they should be identical)"
    )
    links = set(REFERENCE_LINK.findall(reading["pytorch"]))
    assert len(links) >= 3, (
        f"{lesson}: `{READING_HEAD}` should link at least 3 arXiv, DOI or ACL Anthology references, "
        f"found {sorted(links)}"
    )
