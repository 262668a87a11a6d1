"""Argument checks shared by the two seq2seq twins (NumPy only, no framework).

Shapes: letters of ``utils/shapes.py``; here B batch, Ts source length.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..checks import to_numpy


def decode_mask(attention_mask: Any, batch_size: int, max_len: int, num_keys: int) -> np.ndarray:
    """An extra keep-mask for greedy decoding, checked and broadcast to one (Ts,) row per output step.

    Shapes: attention_mask broadcastable to (B, 1, max_len, Ts) -> (B, max_len, Ts) bool.
    """
    m = np.asarray(to_numpy(attention_mask))
    target = (batch_size, 1, max_len, num_keys)
    if m.dtype != bool:
        raise ValueError(f"attention_mask: expected a boolean keep-mask (True = may attend), got dtype {m.dtype}")
    if m.ndim > 4 or not all(a == 1 or a == b for a, b in zip(m.shape[::-1], target[::-1])):
        raise ValueError(
            f"attention_mask: expected a shape broadcastable to (B, 1, max_len, Ts) = {target}, got {m.shape}"
        )
    return np.broadcast_to(m, target)[:, 0].copy()  # (B, max_len, Ts), writable (torch.as_tensor wants that)


def checked_weights(expected: dict[str, tuple], weights: Any) -> dict[str, np.ndarray]:
    """``weights`` (name -> array or tensor) as float32 NumPy arrays, with exactly the names and shapes expected.

    ``expected`` maps each name of ``export_weights``' layout to its shape.
    Shapes: as ``expected``.
    """
    if not hasattr(weights, "keys"):
        raise ValueError(f"weights: expected a mapping name -> array, got {type(weights).__name__}")
    missing = [n for n in expected if n not in weights]
    unexpected = sorted(n for n in weights if n not in expected)
    if missing or unexpected:
        raise ValueError(f"weights: expected the names {list(expected)}; missing {missing}, unexpected {unexpected}")
    out = {}
    for name, shape in expected.items():
        a = np.asarray(to_numpy(weights[name]), dtype=np.float32)
        if a.shape != tuple(shape):
            raise ValueError(f"weights[{name!r}]: expected shape {tuple(shape)}, got {a.shape}")
        out[name] = a
    return out


def gates_as_keras(a: np.ndarray) -> np.ndarray:
    """Reorder a GRU weight's last axis between (r, z, n), the layout's order, and Keras's (z, r, h).

    The map swaps the first two thirds, so it is its own inverse.
    Shapes: (..., 3G) -> (..., 3G).
    """
    r, z, n = np.split(a, 3, axis=-1)
    return np.concatenate([z, r, n], axis=-1)
