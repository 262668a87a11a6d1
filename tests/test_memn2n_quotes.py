"""Lesson 3 quotes the MemN2N benchmark only from what benchmarks/results/ recorded.

The lesson's section 12 prints its benchmark table from ``benchmarks/results/memn2n_*.json``
at run time; its prose around that table and its appendix quote percentages from the
benchmark's write-up, ``benchmarks/results/memn2n.md``. A figure that is not in the recorded
results is a stale one (the lesson once quoted 14.6% and 18.3% after the benchmark had moved
to 14.3% and 14.4%).
"""
from __future__ import annotations

import json
import re

import nbformat
import pytest

from benchmarks.memn2n import PAPER_PE_LS_RN
from tools.notebook_runner import ROOT

LESSON = "03_memory_networks"
RESULTS = ROOT / "benchmarks" / "results"
PERCENT = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)\s*%")
# The benchmark part of the lesson: from its section 12 up to the summary.
FIRST, LAST = re.compile(r"^## 12\. ", re.M), re.compile(r"^## Summary", re.M)


def benchmark_cells(framework: str, kind: str | None = None) -> list[str]:
    nb = nbformat.read(ROOT / "lessons" / LESSON / f"{LESSON}_{framework}.ipynb", as_version=4)
    cells, inside = [], False
    for cell in nb.cells:
        if cell.cell_type == "markdown" and FIRST.search(cell.source):
            inside = True
        if cell.cell_type == "markdown" and LAST.search(cell.source):
            cells.append(cell.source[: LAST.search(cell.source).start()])
            break
        if inside and kind in (None, cell.cell_type):
            cells.append(cell.source)
    assert inside, f"{LESSON}_{framework}: no '## 12.' section found"
    return cells


def recorded_numbers() -> set[str]:
    """The figures the recorded benchmark states: the prose of its write-up (not the per-task
    table, whose 60 numbers would let almost any quote pass) and the mean errors of both JSON files."""
    text = (RESULTS / "memn2n.md").read_text(encoding="utf-8")
    start, end = text.index("<!-- table:start -->"), text.index("<!-- table:end -->")
    numbers = set(re.findall(r"\d+(?:\.\d+)?", text[:start] + text[end:]))
    for fw in ("pytorch", "tensorflow"):
        result = json.loads((RESULTS / f"memn2n_{fw}.json").read_text(encoding="utf-8"))
        numbers |= {f"{result['mean_error']:.1f}", f"{result['kept_by_train_error']['mean_error']:.1f}"}
    return numbers


@pytest.mark.parametrize("framework", ["pytorch", "tensorflow"])
def test_lesson_3_quotes_only_recorded_benchmark_figures(framework: str) -> None:
    recorded = recorded_numbers()
    prose = "\n".join(benchmark_cells(framework, "markdown"))
    quoted = PERCENT.findall(prose)
    assert quoted, "expected the appendix to quote the benchmark's ablation figures"
    stale = sorted({q for q in quoted if q not in recorded})
    assert not stale, (f"{LESSON}_{framework}: section 12 and the appendix quote {stale}% which "
                       "benchmarks/results/ (memn2n.md, memn2n_*.json) does not hold; take the figure from there")


@pytest.mark.parametrize("framework", ["pytorch", "tensorflow"])
def test_lesson_3_reads_the_benchmark_table_and_the_paper_column_matches(framework: str) -> None:
    code = "\n".join(c for c in benchmark_cells(framework) if "memn2n_{fw}.json" in c)
    assert code, "section 12 should read benchmarks/results/memn2n_{fw}.json, not quote its figures"
    paper = re.search(r"^PAPER = (\[.*?\])", code, re.M | re.S)
    assert paper and json.loads(paper.group(1)) == PAPER_PE_LS_RN, (
        "the lesson's PAPER column should equal benchmarks.memn2n.PAPER_PE_LS_RN (Table 1, PE LS RN)")


def test_the_quote_reader_sees_a_stale_figure() -> None:
    """The lesson's old figures, 14.6% and 18.3%, are not recorded results (14.6 is a task-10 cell of the table)."""
    quoted = PERCENT.findall("a mean test error of 14.6% (PyTorch) and 18.3 % (TensorFlow), tasks above 5%")
    assert quoted == ["14.6", "18.3", "5"]
    assert {"14.6", "18.3"}.isdisjoint(recorded_numbers())
    assert {"14.3", "14.4", "54.4"} <= recorded_numbers()
