"""NumPy reference of positional encodings: the readable, exact version.

Shapes: letters of ``utils/shapes.py``; here T positions, D model width (even);
``...`` are leading batch dims. Interleaved layout: dim 2i = sin(p * w_i), dim 2i +
1 = cos(p * w_i), w_i = base ** (-2i / D).
"""
from __future__ import annotations

import numpy as np

from . import _checks

__all__ = ["frequencies", "sinusoidal_encoding", "offset_matrix", "apply_rotary"]


def frequencies(d_model: int, base: float = 10000.0) -> np.ndarray:
    """Angular frequency w_i = base ** (-2i / D) of each sin/cos pair.

    Shapes: -> (D / 2,).
    """
    _checks.check_width("d_model", d_model)
    _checks.check_base(base)
    return base ** (-np.arange(0, d_model, 2, dtype=np.float64) / d_model)


def sinusoidal_encoding(max_len: int, d_model: int, base: float = 10000.0) -> np.ndarray:
    """The fixed sinusoidal encoding of positions 0..max_len-1, interleaved sin/cos.

    Shapes: -> (T=max_len, D), float32.
    """
    _checks.check_length("max_len", max_len)
    angles = np.arange(max_len, dtype=np.float64)[:, None] * frequencies(d_model, base)[None, :]  # (T, D/2)
    pe = np.empty((max_len, d_model), dtype=np.float64)
    pe[:, 0::2] = np.sin(angles)  # even dims
    pe[:, 1::2] = np.cos(angles)  # odd dims
    return pe.astype(np.float32)


def offset_matrix(offset: int, d_model: int, base: float = 10000.0) -> np.ndarray:
    """The matrix M_k with PE(p + k) = PE(p) @ M_k for every position p.

    It is block-diagonal: each (sin, cos) pair is rotated by the angle k * w_i,
    whatever p is. That is why a model can learn to attend "k positions back"
    with one linear map.
    Shapes: -> (D, D), float32.
    """
    _checks.check_offset(offset)
    angle = offset * frequencies(d_model, base)  # (D/2,)
    c, s = np.cos(angle), np.sin(angle)
    m = np.zeros((d_model, d_model), dtype=np.float64)
    m[0::2, 0::2] = np.diag(c)  # sin part -> sin part
    m[1::2, 0::2] = np.diag(s)  # cos part -> sin part
    m[0::2, 1::2] = np.diag(-s)  # sin part -> cos part
    m[1::2, 1::2] = np.diag(c)  # cos part -> cos part
    return m.astype(np.float32)


def apply_rotary(x: np.ndarray, offset: int = 0, base: float = 10000.0) -> np.ndarray:
    """Rotary position embedding: rotate each pair (x_2i, x_2i+1) at position p by p * w_i.

    Positions are offset, offset+1, ... along the T axis. After rotating queries
    and keys, q_m . k_n depends on m - n only (and on the contents).
    Shapes: x (..., T, D) -> (..., T, D).
    """
    _checks.check_offset(offset)
    shape = _checks.check_sequence("x", x, None, None, "(..., T, D)")
    t, d = shape[-2], shape[-1]
    angles = (offset + np.arange(t))[:, None] * frequencies(d, base)[None, :]  # (T, D/2)
    c, s = np.cos(angles), np.sin(angles)
    even, odd = x[..., 0::2], x[..., 1::2]  # (..., T, D/2)
    out = np.empty(x.shape, dtype=np.result_type(x.dtype, np.float32))
    out[..., 0::2] = even * c - odd * s
    out[..., 1::2] = even * s + odd * c
    return out


def apply_rotary_partial(x: np.ndarray, d_rot: int, offset: int = 0, base: float = 10000.0) -> np.ndarray:
    """Partial rotary embedding in the split-half layout (GPT-NeoX, GPT-J's ``rotary_dim``).

    Only the first ``d_rot`` dims carry position; dims ``d_rot`` and on pass through unchanged.
    Inside the rotated part, pair i is (x_i, x_{i + d_rot/2}) (the halves, not the interleaved
    pairs of ``apply_rotary``), and it turns by p * w_i at position p = offset, offset+1, ...,
    with the frequencies of a vector of width d_rot: w_i = base ** (-2i / d_rot). So the
    rotated part, read in the interleaved layout, is ``apply_rotary`` of a d_rot-wide vector.
    Shapes: x (..., T, D) -> (..., T, D), with d_rot even and 2 <= d_rot <= D.

    Assignment 4's reference only: the lessons never build it, so it has no PyTorch or Keras
    twin and stays out of ``__all__``.
    """
    _checks.check_offset(offset)
    shape = _checks.check_sequence("x", x, None, None, "(..., T, D)")
    t, d = shape[-2], shape[-1]
    _checks.check_width("d_rot", d_rot)
    if d_rot > d:
        raise ValueError(f"d_rot: expected at most D={d} dims to rotate, got {d_rot}")
    half = d_rot // 2
    angles = (offset + np.arange(t))[:, None] * frequencies(d_rot, base)[None, :]  # (T, d_rot/2)
    c, s = np.cos(angles), np.sin(angles)
    first, second = x[..., :half], x[..., half:d_rot]  # (..., T, d_rot/2): the two halves
    out = np.array(x, dtype=np.result_type(x.dtype, np.float32), copy=True)
    out[..., :half] = first * c - second * s
    out[..., half:d_rot] = first * s + second * c
    return out
