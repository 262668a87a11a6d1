"""Argument checks shared by the positional twins (NumPy, torch and TF tensors alike)."""
from __future__ import annotations

from typing import Any

from ..checks import check_positive_int, shape_of


def check_width(name: str, d_model: Any) -> int:
    """A positive even width: the encodings pair dimensions (2i, 2i + 1)."""
    if isinstance(d_model, bool) or not isinstance(d_model, int) or d_model < 2 or d_model % 2:
        raise ValueError(f"{name}: expected a positive even int (dims come in sin/cos pairs), got {d_model!r}")
    return d_model


def check_length(name: str, value: Any) -> int:
    return check_positive_int(name, value)


def check_base(base: Any) -> float:
    if not float(base) > 1.0:
        raise ValueError(f"base: expected a number greater than 1, got {base!r}")
    return float(base)


def check_offset(offset: Any) -> int:
    if isinstance(offset, bool) or not isinstance(offset, int):
        raise ValueError(f"offset: expected an int (a shift in positions), got {offset!r}")
    return offset


def check_sequence(name: str, x: Any, max_len: int | None, d_model: int | None, layout: str = "(B, T, D)") -> tuple:
    """x (..., T, D), with T <= max_len and the given D."""
    shape = shape_of(x)
    if len(shape) < 2:
        raise ValueError(f"{name}: expected {layout}, got shape {shape}")
    t, d = shape[-2], shape[-1]
    if d_model is not None and d is not None and d != d_model:
        raise ValueError(f"{name}: expected {layout} with D={d_model}, got {shape}")
    if d is not None and d % 2:
        raise ValueError(f"{name}: expected {layout} with an even D (sin/cos pairs), got {shape}")
    if max_len is not None and t is not None and t > max_len:
        raise ValueError(
            f"{name}: expected {layout} with T <= max_len={max_len}, got {shape}; "
            "a table of positions has no row for positions it was not built with"
        )
    return shape
