"""NumPy reference of the attention core: the readable, exact version.

Shapes: B batch, Tq queries, Tk keys, D query/key width, Dv value width,
A additive hidden width; ``...`` are leading batch dims. Masks are boolean
keep-masks (True = may attend) broadcastable to (..., Tq, Tk).
"""
from __future__ import annotations

import numpy as np

from . import _checks

__all__ = [
    "masked_softmax",
    "dot_scores",
    "additive_scores",
    "gaussian_kernel_scores",
    "attend",
    "scaled_dot_product_attention",
    "additive_attention",
]


def masked_softmax(scores: np.ndarray, mask: np.ndarray | None = None, temperature: float = 1.0) -> np.ndarray:
    """Softmax over the last axis, giving masked-out positions exactly zero weight.

    A row whose every position is masked gets all zeros (not NaN).
    Shapes: scores (..., Tq, Tk), mask broadcastable to it -> (..., Tq, Tk).
    """
    scores = np.asarray(scores)
    if not np.issubdtype(scores.dtype, np.floating):
        scores = scores.astype(np.float64)
    _checks.check_temperature(temperature)
    _checks.check_mask(mask, scores.shape)
    scores = scores / temperature
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    row_max = scores.max(axis=-1, keepdims=True)
    row_max = np.where(np.isfinite(row_max), row_max, 0.0)  # fully masked rows
    e = np.exp(scores - row_max)  # exp(-inf) = 0 for masked positions
    total = e.sum(axis=-1, keepdims=True)
    return e / np.where(total == 0, 1.0, total)


def dot_scores(queries: np.ndarray, keys: np.ndarray, scale: bool = True) -> np.ndarray:
    """Dot-product scores q.k, divided by sqrt(D) when ``scale``.

    Shapes: queries (..., Tq, D), keys (..., Tk, D) -> (..., Tq, Tk).
    """
    _checks.check_queries_keys(queries, keys)
    scores = queries @ np.swapaxes(keys, -1, -2)  # (..., Tq, Tk)
    if scale:
        scores = scores / np.sqrt(queries.shape[-1])
    return scores


def additive_scores(
    queries: np.ndarray, keys: np.ndarray, W_q: np.ndarray, W_k: np.ndarray, w_v: np.ndarray
) -> np.ndarray:
    """Additive (Bahdanau) scores w_v . tanh(q W_q + k W_k).

    Shapes: queries (..., Tq, D), keys (..., Tk, Dk), W_q (D, A), W_k (Dk, A),
    w_v (A,) -> (..., Tq, Tk).
    """
    q, k = _checks.check_queries_keys(queries, keys, same_width=False)
    _checks.check_additive_weights(q, k, W_q, W_k, w_v)
    q_proj = (queries @ W_q)[..., :, None, :]  # (..., Tq, 1, A)
    k_proj = (keys @ W_k)[..., None, :, :]  # (..., 1, Tk, A)
    return np.tanh(q_proj + k_proj) @ w_v  # (..., Tq, Tk)


def gaussian_kernel_scores(queries: np.ndarray, keys: np.ndarray, width: float) -> np.ndarray:
    """Nadaraya-Watson scores -((q - k) * width)^2 / 2 for scalar inputs.

    Shapes: queries (..., Tq), keys (..., Tk) -> (..., Tq, Tk).
    """
    diff = queries[..., :, None] - keys[..., None, :]  # (..., Tq, Tk)
    return -((diff * width) ** 2) / 2


def attend(weights: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Weighted sum of values: the 'read' of a soft lookup.

    Shapes: weights (..., Tq, Tk), values (..., Tk, Dv) -> (..., Tq, Dv).
    """
    w = _checks.shape_of(weights)
    v = _checks.shape_of(values)
    if len(v) < 2 or v[-2] != w[-1]:
        raise ValueError(f"values: expected (..., Tk, Dv) with Tk={w[-1]} from weights {w}, got {v}")
    return weights @ values


def scaled_dot_product_attention(
    queries: np.ndarray,
    keys: np.ndarray,
    values: np.ndarray,
    mask: np.ndarray | None = None,
    temperature: float = 1.0,
) -> tuple[np.ndarray, np.ndarray]:
    """softmax(q k^T / sqrt(D)) v, with an optional keep-mask.

    Shapes: queries (..., Tq, D), keys (..., Tk, D), values (..., Tk, Dv)
    -> output (..., Tq, Dv), weights (..., Tq, Tk).
    """
    _, k = _checks.check_queries_keys(queries, keys)
    _checks.check_values(values, k)
    weights = masked_softmax(dot_scores(queries, keys), mask, temperature)  # (..., Tq, Tk)
    return attend(weights, values), weights


def additive_attention(
    queries: np.ndarray,
    keys: np.ndarray,
    values: np.ndarray,
    W_q: np.ndarray,
    W_k: np.ndarray,
    w_v: np.ndarray,
    mask: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Additive attention with given weights.

    Shapes: queries (..., Tq, D), keys (..., Tk, Dk), values (..., Tk, Dv)
    -> output (..., Tq, Dv), weights (..., Tq, Tk).
    """
    _, k = _checks.check_queries_keys(queries, keys, same_width=False)
    _checks.check_values(values, k)
    weights = masked_softmax(additive_scores(queries, keys, W_q, W_k, w_v), mask)
    return attend(weights, values), weights
