"""Lesson 6 quotes lesson 2's date benchmark only from what benchmarks/results/ recorded.

Section 7 of lesson 6 compares its Transformer with lesson 2's GRU with additive
attention, quoting that benchmark's exact match and training seconds per framework.
The figures must be the ones in ``benchmarks/results/seq2seq_dates_*.json``: a rerun of
the benchmark that moves them makes this test fail until the prose follows.
"""
from __future__ import annotations

import json
import re

import nbformat
import pytest

from tools.notebook_runner import ROOT

LESSON = "06_transformer"
RESULTS = ROOT / "benchmarks" / "results"
QUOTE = re.compile(
    r"GRU with additive attention reached\s+(?P<pt_acc>[\d.]+)% \(PyTorch\)\s+and\s+(?P<tf_acc>[\d.]+)% \(Keras\)"
    r"\s+exact match in\s+(?P<pt_s>\d+) s and (?P<tf_s>\d+) s"
)


def recorded(framework: str) -> tuple[float, float]:
    result = json.loads((RESULTS / f"seq2seq_dates_{framework}.json").read_text(encoding="utf-8"))
    return 100 * result["attention"]["exact_match"], result["attention"]["seconds"]


@pytest.mark.parametrize("framework", ["pytorch", "tensorflow"])
def test_lesson_6_quotes_lesson_2s_recorded_date_benchmark(framework: str) -> None:
    nb = nbformat.read(ROOT / "lessons" / LESSON / f"{LESSON}_{framework}.ipynb", as_version=4)
    prose = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    match = QUOTE.search(prose)
    assert match, f"{LESSON}_{framework}: the comparison with lesson 2's GRU is not where this test looks"
    for fw, acc, seconds in (("pytorch", "pt_acc", "pt_s"), ("tensorflow", "tf_acc", "tf_s")):
        acc_recorded, seconds_recorded = recorded(fw)
        assert abs(float(match[acc]) - acc_recorded) < 0.05 + 1e-9, (
            f"{LESSON}_{framework} quotes {match[acc]}% for lesson 2 ({fw}); the benchmark recorded {acc_recorded:.2f}%")
        assert int(match[seconds]) == round(seconds_recorded), (
            f"{LESSON}_{framework} quotes {match[seconds]} s for lesson 2 ({fw}); the benchmark recorded {seconds_recorded} s")
