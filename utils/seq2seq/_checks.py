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
