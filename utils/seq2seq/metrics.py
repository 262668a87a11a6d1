"""Scoring decoded sequences, framework-free (NumPy only).

Shapes: letters of ``utils/shapes.py``; here B batch, Tp predicted length, Tt target
length, N examples. Ids use the course's vocabulary layout
(``utils.data.parallel``): 0 = <pad>, 2 = <eos>.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..checks import to_numpy
from ..data.parallel import EOS_ID, PAD_ID

__all__ = ["strip_ids", "exact_match", "exact_match_per_example", "accuracy_by_length"]


def strip_ids(ids: Sequence[int], eos_id: int = EOS_ID, pad_id: int = PAD_ID) -> tuple[int, ...]:
    """The ids up to (not including) the first <eos>, with padding removed."""
    out = []
    for i in ids:
        i = int(i)
        if i == eos_id:
            break
        if i != pad_id:
            out.append(i)
    return tuple(out)


def exact_match_per_example(predicted: Any, target: Any, eos_id: int = EOS_ID, pad_id: int = PAD_ID) -> np.ndarray:
    """True where the whole predicted sequence equals the target (up to <eos>).

    Shapes: predicted (B, Tp), target (B, Tt) -> (B,) bool.
    """
    p, t = to_numpy(predicted), to_numpy(target)
    if p.ndim != 2 or t.ndim != 2 or p.shape[0] != t.shape[0]:
        raise ValueError(f"predicted, target: expected (B, Tp) and (B, Tt) with the same B, got {p.shape} and {t.shape}")
    return np.array([strip_ids(a, eos_id, pad_id) == strip_ids(b, eos_id, pad_id) for a, b in zip(p, t)])


def exact_match(predicted: Any, target: Any, eos_id: int = EOS_ID, pad_id: int = PAD_ID) -> float:
    """Fraction of sequences predicted exactly right. Shapes: (B, Tp), (B, Tt) -> float."""
    return float(exact_match_per_example(predicted, target, eos_id, pad_id).mean())


def accuracy_by_length(
    correct: Any, lengths: Any, bins: Sequence[int]
) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Mean of ``correct`` in input-length buckets ``[bins[k], bins[k+1])``.

    Returns the bucket labels, the accuracy per bucket (NaN where empty) and
    the count per bucket. Shapes: correct (N,), lengths (N,) -> accuracy and count, each (len(bins) - 1,).
    """
    c = np.asarray(correct, dtype=float)
    n = np.asarray(lengths)
    if c.shape != n.shape or c.ndim != 1:
        raise ValueError(f"correct, lengths: expected two (N,) arrays, got {c.shape} and {n.shape}")
    if len(bins) < 2 or list(bins) != sorted(set(bins)):
        raise ValueError(f"bins: expected at least two increasing edges, got {list(bins)}")
    labels, acc, count = [], [], []
    for lo, hi in zip(bins[:-1], bins[1:]):
        sel = (n >= lo) & (n < hi)
        labels.append(f"{lo}-{hi - 1}")
        count.append(int(sel.sum()))
        acc.append(float(c[sel].mean()) if sel.any() else float("nan"))
    return labels, np.array(acc), np.array(count)
