"""How much of each exercise's model solution stands, word for word, in its lesson?

An exercise a student can answer by copying a lesson cell measures copying (issue 39).
This module measures it the way the issue defines it: the share of a solution's code
tokens that also stand in the same framework's lesson notebook inside a run of at least
``RUN`` identical tokens. Before comparing, both sides are read as Python tokens:

- comments and docstrings are dropped (a string standing alone as a statement);
- every number becomes ``0`` and every other string ``""`` (a changed constant does not
  make copied code new);
- names, keywords and operators are kept as they are (renaming every variable is work
  the student did, and the course's own test asks for none);
- line breaks and indentation are dropped.

A solution is the code between ``### BEGIN SOLUTION`` and ``### END SOLUTION`` in an
exercise's cell of ``solutions/<assignment>/<assignment>.ipynb``; a find-and-fix cell's
solution is its corrected version. Written answers (markdown) are not code and are not
measured. ``python -m tools.overlap`` prints the table; ``--json FILE`` writes it.
"""
from __future__ import annotations

import argparse
import io
import json
import re
import statistics
import sys
import textwrap
import tokenize
from dataclasses import asdict, dataclass
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
RUN = 12  # a run of this many identical tokens counts as copied
LIMIT = 0.35  # an exercise with more of its solution in the lesson measures copying (issue 39)
BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
_SKIP = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
         tokenize.ENCODING, tokenize.ENDMARKER}
_STATEMENT_START = {None, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.NL}


@dataclass
class Overlap:
    assignment: str
    exercise: str  # the solution cell's nbgrader grade_id
    tokens: int
    copied: int

    @property
    def share(self) -> float:
        return self.copied / self.tokens if self.tokens else 0.0


def tokens(source: str) -> list[str]:
    """The code tokens of ``source``: no comments or docstrings, numbers and strings folded."""
    lines = [ln for ln in source.splitlines() if not ln.lstrip().startswith(("%", "!"))]  # IPython magics
    text = "\n".join(lines) + "\n"
    out: list[str] = []
    previous = None  # the type of the last token read, blank lines and comments aside
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.STRING and previous in _STATEMENT_START:
                previous = tok.type  # a docstring (a string standing alone as a statement): dropped
                continue
            if tok.type not in (tokenize.COMMENT, tokenize.NL):
                previous = tok.type
            if tok.type in _SKIP:
                continue
            if tok.type == tokenize.NUMBER:
                out.append("0")
            elif tok.type in (tokenize.STRING, getattr(tokenize, "FSTRING_START", -1)):
                out.append('""')
            else:
                out.append(tok.string)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass  # a cell that does not tokenize to its end: what was read counts
    return out


def solution_parts(source: str) -> list[str]:
    """The code between each BEGIN/END SOLUTION pair of a cell."""
    parts, inside, current = [], False, []
    for line in source.splitlines():
        if line.strip() == BEGIN:
            inside, current = True, []
        elif line.strip() == END and inside:
            inside = False
            parts.append(textwrap.dedent("\n".join(current)))
        elif inside:
            current.append(line)
    return parts


def lesson_for(assignment: str) -> Path:
    """solutions' ``03_memory_networks_pytorch`` -> lessons/03_memory_networks/03_memory_networks_pytorch.ipynb."""
    topic = re.sub(r"_(pytorch|tensorflow)$", "", assignment)
    return ROOT / "lessons" / topic / f"{assignment}.ipynb"


def ngrams(sequence: list[str], n: int = RUN) -> set[tuple[str, ...]]:
    return {tuple(sequence[i:i + n]) for i in range(len(sequence) - n + 1)}


def copied_count(solution: list[str], known: set[tuple[str, ...]], n: int = RUN) -> int:
    """How many tokens of ``solution`` lie inside a run of ``n`` tokens found in ``known``."""
    covered = [False] * len(solution)
    for i in range(len(solution) - n + 1):
        if tuple(solution[i:i + n]) in known:
            for j in range(i, i + n):
                covered[j] = True
    return sum(covered)


def lesson_ngrams(path: Path) -> set[tuple[str, ...]]:
    nb = nbformat.read(path, as_version=4)
    grams: set[tuple[str, ...]] = set()
    for cell in nb.cells:
        if cell.cell_type == "code":
            grams |= ngrams(tokens(cell.source))  # a run never spans two cells
    return grams


def measure(assignment: str) -> list[Overlap]:
    """One ``Overlap`` per exercise cell with solution code, in notebook order."""
    source = ROOT / "solutions" / assignment / f"{assignment}.ipynb"
    known = lesson_ngrams(lesson_for(assignment))
    nb = nbformat.read(source, as_version=4)
    rows = []
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type != "code" or not meta.get("solution"):
            continue
        blocks = [tokens(part) for part in solution_parts(cell.source)]  # a run never spans two blocks
        total = sum(len(b) for b in blocks)
        if total:
            rows.append(Overlap(assignment, meta.get("grade_id", "?"), total,
                                sum(copied_count(b, known) for b in blocks)))
    return rows


def assignments() -> list[str]:
    return sorted(p.name for p in (ROOT / "solutions").iterdir() if (p / f"{p.name}.ipynb").exists())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("assignments", nargs="*", help="assignment names (default: all)")
    ap.add_argument("--json", type=Path, help="write the table as JSON here")
    args = ap.parse_args(argv)
    rows = [r for a in (args.assignments or assignments()) for r in measure(a)]
    for r in rows:
        flag = f"  over {LIMIT:.0%}" if r.share > LIMIT else ""
        print(f"{r.assignment:40s} {r.exercise:28s} {r.share:6.1%}  ({r.copied}/{r.tokens} tokens){flag}")
    if rows:
        print(f"median {statistics.median(r.share for r in rows):.1%} over {len(rows)} exercises; "
              f"{sum(r.share > LIMIT for r in rows)} over {LIMIT:.0%}")
    if args.json:
        args.json.write_text(json.dumps([asdict(r) | {"share": round(r.share, 4)} for r in rows], indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
