"""Every lesson and solution notebook executes headless in the smoke profile.

Discovered, not listed: a new lesson folder or solution is picked up without
touching this file. The twin notebooks of a lesson are run together so that
the key results they record (``utils.runtime.record``) can be compared.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tools.notebook_runner import ROOT, headings, run_notebook
from tools.sync_notebooks import lessons

LESSONS = lessons()
SOLUTIONS = sorted((ROOT / "solutions").glob("*/*.ipynb"))
FORBIDDEN = {"pytorch": {"tensorflow", "keras"}, "tensorflow": {"torch"}}


def twins(lesson: str) -> dict[str, Path]:
    return {fw: ROOT / "lessons" / lesson / f"{lesson}_{fw}.ipynb" for fw in ("pytorch", "tensorflow")}


def test_lessons_found() -> None:
    assert "01_soft_attention" in LESSONS


@pytest.mark.parametrize("lesson", LESSONS)
def test_lesson_has_both_twins_with_same_sections(lesson: str) -> None:
    paths = twins(lesson)
    for fw, p in paths.items():
        assert p.exists(), f"{lesson}: missing the {fw} notebook {p.name}"
    h = {fw: headings(p) for fw, p in paths.items()}
    assert h["pytorch"] == h["tensorflow"], f"{lesson}: the twins' section headings differ:\n{h}"
    assert len(h["pytorch"]) >= 3, f"{lesson}: expected a notebook with sections, found {h['pytorch']}"


@pytest.mark.notebook
@pytest.mark.parametrize("lesson", LESSONS)
def test_lesson_twins_run_and_agree(lesson: str, tmp_path: Path) -> None:
    records = {}
    for fw, path in twins(lesson).items():
        record_file = tmp_path / f"{fw}.json"
        result = run_notebook(path, record_file=record_file)
        print(f"{path.name}: {result['seconds']:.1f} s in the smoke profile")
        leaked = FORBIDDEN[fw] & set(result["modules"])
        assert not leaked, f"{path.name} imported {sorted(leaked)}: a {fw} notebook must not pay for the other framework"
        records[fw] = json.loads(record_file.read_text()) if record_file.exists() else {}
    shared = sorted(set(records["pytorch"]) & set(records["tensorflow"]))
    only = set(records["pytorch"]) ^ set(records["tensorflow"])
    assert not only, f"{lesson}: results recorded by one twin only: {sorted(only)}"
    for name in shared:
        a, b = records["pytorch"][name], records["tensorflow"][name]
        tol = max(a["tol"], b["tol"])
        assert abs(a["value"] - b["value"]) <= tol, (
            f"{lesson}: twins disagree on {name}: pytorch {a['value']:.6g} vs tensorflow {b['value']:.6g} (tol {tol})"
        )


@pytest.mark.notebook
@pytest.mark.parametrize("path", SOLUTIONS, ids=[p.parent.name for p in SOLUTIONS])
def test_solution_notebook_runs(path: Path) -> None:
    fw = "tensorflow" if path.stem.endswith("_tensorflow") else "pytorch"
    result = run_notebook(path)
    print(f"{path.name}: {result['seconds']:.1f} s")
    leaked = FORBIDDEN[fw] & set(result["modules"])
    assert not leaked, f"{path.name} imported {sorted(leaked)}"


def test_the_notebook_benchmark_records_wall_and_kernel_cpu_time(tmp_path: Path, monkeypatch) -> None:
    """`python -m benchmarks.notebooks` (the smoke run of `make bench notebooks`): one row per
    notebook with the wall time and the kernel's own CPU time, which a busy machine inflates less."""
    from benchmarks import notebooks as bench

    out = tmp_path / "times.json"
    raw = []  # the runner's unrounded figures, to check the row against them exactly
    real_run = bench.book.run
    monkeypatch.setattr(bench.book, "run", lambda *a, **k: raw.append(real_run(*a, **k)) or raw[-1])
    code = bench.main(["--profile", "smoke", "--lessons", "01_soft_attention", "--frameworks", "pytorch",
                       "--json", str(out), "--no-book-cache"])
    assert code == 0
    rows = json.loads(out.read_text())["results"]
    assert [(r["lesson"], r["framework"], r["profile"]) for r in rows] == [("01_soft_attention", "pytorch", "smoke")]
    row = rows[0]
    # the row holds the runner's figures, rounded to 0.1 s; the kernel did some work (a CPU clock
    # that ran code reads above zero) and cannot have used more CPU than its wall time times the cores
    (result,) = raw
    assert (row["seconds"], row["kernel_cpu_seconds"]) == (round(result["seconds"], 1), round(result["cpu_seconds"], 1))
    assert 0 < result["cpu_seconds"] <= result["seconds"] * (os.cpu_count() or 1), result["cpu_seconds"]
    with pytest.raises(SystemExit):
        bench.main(["--lessons", "99_no_such_lesson"])
