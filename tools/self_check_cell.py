"""Put the self-check cell last in every assignment's source notebook (``solutions/``).

    python -m tools.self_check_cell            # add or update the cell in every solution notebook
    python -m tools.self_check_cell --check    # list the notebooks whose cell is missing or stale; exit 1 if any

The cell runs ``utils.grading.check_all("<id>")``: the course's own grader on the notebook
as saved, what ``make check`` runs from a terminal. It is a plain code cell (no nbgrader
metadata: never graded, never run by the grader's replay), tagged ``self-check``, with the
id ``self-check``. Run this again after adding an assignment or merging one, then
regenerate the releases (``make assignments``), which also runs ``tools.sync_notebooks``.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
TAG = "self-check"


def cell_source(assignment: str) -> str:
    return f'''# Check your work with the course's own grader, hidden tests included. It reads this notebook
# as saved (on Colab: as it is in your browser), runs it again from the start, and prints your
# score per exercise, each failed test's message and, once you have written your answer, the
# model answer beside it. This cell is not graded. From a terminal, the same check:
#   make check ASSIGNMENT={assignment}
from utils import grading

grading.check_all("{assignment}")'''


def is_self_check(cell) -> bool:
    return cell.get("id") == TAG or TAG in cell.get("metadata", {}).get("tags", [])


def place(nb, assignment: str) -> None:
    """The notebook with exactly one self-check cell, last."""
    nb.cells = [c for c in nb.cells if not is_self_check(c)]
    cell = nbformat.v4.new_code_cell(cell_source(assignment))
    cell.id = TAG
    cell.metadata = {"tags": [TAG]}
    nb.cells.append(cell)


def sources(root: Path = ROOT) -> list[Path]:
    return sorted(p for p in (root / "solutions").glob("*/*.ipynb") if p.stem == p.parent.name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="only list notebooks whose cell is missing or stale")
    args = parser.parse_args(argv)
    stale = []
    for path in sources():
        nb = nbformat.read(path, as_version=4)
        before = nbformat.writes(nb)
        place(nb, path.stem)
        if nbformat.writes(nb) != before:
            stale.append(path)
            if not args.check:
                nbformat.write(nb, path)
    for path in stale:
        print(("stale: " if args.check else "updated: ") + str(path.relative_to(ROOT)))
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
