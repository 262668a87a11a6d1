"""Argument checks and index arithmetic the three twins of ``utils.efficient`` share.

Framework-free: they read only shapes and plain ints (``utils.checks`` does the rest).
Shapes: letters of ``utils/shapes.py``; here T sequence length, Tw window length.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .. import checks


def nonnegative_int(name: str, value: Any, meaning: str) -> int:
    """An int >= 0 (``meaning`` says what it counts, for the error message)."""
    if isinstance(value, bool) or not hasattr(value, "__index__") or int(value) < 0:
        raise ValueError(f"{name}: expected an int >= 0 ({meaning}), got {value!r}")
    return int(value)


def half_width(value: Any) -> int:
    return nonnegative_int("half_width", value, "each query sees keys i - half_width .. i + half_width")


def self_attention(queries: Any, keys: Any, what: str) -> int:
    """queries and keys (..., T, D) of one sequence; returns T."""
    q, k = checks.check_queries_keys(queries, keys)
    if q[-2] != k[-2]:
        raise ValueError(f"keys: expected (..., T, D) with T={q[-2]} like queries {q} ({what} is self-attention: "
                         f"one sequence attends to itself), got {k}")
    return q[-2]


def positions(values: Any, seq_len: int) -> np.ndarray:
    """A 1-D list of integer positions in 0..seq_len-1."""
    pos = np.asarray(values)
    if pos.ndim != 1 or (pos.size and not np.issubdtype(pos.dtype, np.integer)):
        raise ValueError(f"positions: expected a 1-D list of integer positions, got {pos.tolist()!r}")
    if pos.size and (pos.min() < 0 or pos.max() >= seq_len):
        raise ValueError(f"positions: expected positions in 0..seq_len-1={seq_len - 1}, got {pos.tolist()}")
    return pos.astype(np.int64)


def window_index(seq_len: int, half_width: int, causal: bool) -> tuple[np.ndarray, np.ndarray]:
    """For each query i, the keys i + offset of its window, and which of them exist.

    Shapes: -> idx (T, Tw), inside (T, Tw) with Tw = 2 * half_width + 1 (half_width + 1 if causal).
    """
    offsets = np.arange(-half_width, (0 if causal else half_width) + 1)  # (Tw,)
    idx = np.arange(seq_len)[:, None] + offsets[None, :]  # (T, Tw): the key each score is with
    return idx, (idx >= 0) & (idx < seq_len)
