"""Argument checks for multi-head attention and masks (lesson 5).

Like ``_checks`` they read only ``.shape`` and ``.dtype``, so they work on NumPy
arrays and on torch and TensorFlow tensors, and raise a ``ValueError`` naming the
argument, what was expected and what came back.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ._checks import _same, check_rank, shape_of


def check_positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int,)) and not hasattr(value, "__index__"):
        raise ValueError(f"{name}: expected a positive int, got {value!r}")
    if int(value) < 1:
        raise ValueError(f"{name}: expected a positive int, got {value!r}")
    return int(value)


def check_lengths(lengths: Any, max_len: int) -> None:
    """lengths (B,) of integers in 0..max_len."""
    check_positive_int("max_len", max_len)
    shape = shape_of(lengths)
    if len(shape) != 1:
        raise ValueError(f"lengths: expected (B,) one length per sequence, got shape {shape}")
    arr = np.asarray(lengths)
    if arr.size and (arr.min() < 0 or arr.max() > max_len):
        raise ValueError(f"lengths: expected values in 0..max_len={max_len}, got min {arr.min()} max {arr.max()}")


def check_window(centers: Any, num_keys: int, half_width: int) -> None:
    """centers (Tq,) or (B, Tq), finite, in 0..num_keys-1; half_width an int >= 0."""
    check_positive_int("num_keys", num_keys)
    if isinstance(half_width, bool) or not hasattr(half_width, "__index__") or int(half_width) < 0:
        raise ValueError(f"half_width: expected an int >= 0 (the window is centre +- half_width), got {half_width!r}")
    shape = shape_of(centers)
    if len(shape) not in (1, 2):
        raise ValueError(f"centers: expected (Tq,) or (B, Tq) one centre per query, got shape {shape}")
    arr = np.asarray(centers, dtype=float)
    if arr.size and not (np.isfinite(arr).all() and arr.min() >= 0 and arr.max() <= num_keys - 1):
        raise ValueError(
            f"centers: expected positions in 0..num_keys-1={num_keys - 1} (a centre off the keys leaves a window "
            f"with nothing to attend to), got min {arr.min()} max {arr.max()}"
        )


def check_heads(name: str, x: Any, num_heads: int) -> tuple:
    """x (B, T, D) with D divisible by num_heads."""
    check_positive_int("num_heads", num_heads)
    shape = check_rank(name, x, 3, "(B, T, D)")
    if len(shape) != 3:
        raise ValueError(f"{name}: expected (B, T, D), got shape {shape}")
    if shape[-1] is not None and shape[-1] % num_heads:
        raise ValueError(f"{name}: expected (B, T, D) with D divisible by num_heads={num_heads}, got {shape}")
    return shape


def check_mha_inputs(
    queries: Any, keys: Any, values: Any, w_qkv: Any, b_qkv: Any, w_o: Any, b_o: Any, num_heads: int
) -> int:
    """queries (B, Tq, D), keys/values (B, Tk, D), w_qkv (D, 3D), b_qkv (3D,), w_o (D, D), b_o (D,); returns D."""
    q = check_heads("queries", queries, num_heads)
    d = q[-1]
    for name, x in (("keys", keys), ("values", values)):
        s = shape_of(x)
        if len(s) != 3 or not _same(s[0], q[0]) or not _same(s[-1], d):
            raise ValueError(f"{name}: expected (B, Tk, D) with B={q[0]}, D={d} like queries {q}, got {s}")
    if not _same(shape_of(keys)[1], shape_of(values)[1]):
        raise ValueError(f"values: expected (B, Tk, D) with Tk={shape_of(keys)[1]} like keys, got {shape_of(values)}")
    expected = {"w_qkv": (d, 3 * d), "b_qkv": (3 * d,), "w_o": (d, d), "b_o": (d,)}
    for name, w in (("w_qkv", w_qkv), ("b_qkv", b_qkv), ("w_o", w_o), ("b_o", b_o)):
        if w is None and name.startswith("b_"):
            continue
        s = shape_of(w)
        if len(s) != len(expected[name]) or not all(_same(a, e) for a, e in zip(s, expected[name])):
            raise ValueError(f"{name}: expected shape {expected[name]} for D={d}, got {s}")
    return d
