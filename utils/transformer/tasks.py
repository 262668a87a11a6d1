"""Small synthetic tasks for the Transformer lesson (framework-free, generated from a seed).

Token ids follow ``utils.data.parallel``: 0 padding, 1 <bos>, 2 <eos>, 3 <unk>;
symbols start at 4.
"""
from __future__ import annotations

import numpy as np

from utils.data.parallel import BOS_ID, EOS_ID, PAD_ID, SPECIALS

__all__ = ["FIRST_SYMBOL", "reverse_task", "sequence_accuracy"]

FIRST_SYMBOL = len(SPECIALS)  # symbols come after <pad>, <bos>, <eos>, <unk>


def reverse_task(
    n: int, min_len: int = 3, max_len: int = 10, num_symbols: int = 10, seed: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Random symbol strings and their reversal, padded, ready for teacher forcing.

    ``src`` holds the string (no specials); ``tgt_in`` is <bos> + reversed;
    ``tgt_out`` is reversed + <eos>. Lengths are uniform in min_len..max_len.
    Shapes: -> src (n, max_len), tgt_in (n, max_len + 1), tgt_out (n, max_len + 1), int64.
    """
    if n < 1 or min_len < 1 or max_len < min_len or num_symbols < 2:
        raise ValueError(
            f"n, min_len, max_len, num_symbols: expected n >= 1, 1 <= min_len <= max_len, num_symbols >= 2, "
            f"got {n}, {min_len}, {max_len}, {num_symbols}"
        )
    rng = np.random.default_rng(seed)
    src = np.full((n, max_len), PAD_ID, dtype=np.int64)  # (N, Ts)
    tgt_in = np.full((n, max_len + 1), PAD_ID, dtype=np.int64)  # (N, Tt)
    tgt_out = np.full((n, max_len + 1), PAD_ID, dtype=np.int64)  # (N, Tt)
    lengths = rng.integers(min_len, max_len + 1, size=n)
    for i, length in enumerate(lengths):
        s = rng.integers(FIRST_SYMBOL, FIRST_SYMBOL + num_symbols, size=length)
        src[i, :length] = s
        tgt_in[i, 0], tgt_in[i, 1 : length + 1] = BOS_ID, s[::-1]
        tgt_out[i, :length], tgt_out[i, length] = s[::-1], EOS_ID
    return src, tgt_in, tgt_out


def sequence_accuracy(predicted: np.ndarray, tgt_out: np.ndarray, eos_id: int = EOS_ID) -> float:
    """Fraction of rows whose decoded tokens, up to and including <eos>, equal the target exactly.

    Shapes: predicted (N, Tp), tgt_out (N, Tt) -> float in [0, 1].
    """
    predicted, tgt_out = np.asarray(predicted), np.asarray(tgt_out)
    if predicted.ndim != 2 or tgt_out.ndim != 2 or len(predicted) != len(tgt_out):
        raise ValueError(f"predicted, tgt_out: expected (N, Tp) and (N, Tt) with the same N, got {predicted.shape}, {tgt_out.shape}")

    def cut(row: np.ndarray) -> tuple:
        hits = np.flatnonzero(row == eos_id)
        return tuple(row[: hits[0] + 1]) if len(hits) else tuple(row[row != PAD_ID])

    return float(np.mean([cut(p) == cut(t) for p, t in zip(predicted, tgt_out)]))
