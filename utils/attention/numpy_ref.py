"""NumPy reference of the attention core: the readable, exact version.

Shapes: letters of ``utils/shapes.py``; here B batch, Tq queries, Tk keys, D
query/key width, Dv value width, A additive hidden width, H heads, Dh = D / H;
``...`` are leading batch dims. Masks are boolean keep-masks (True = may attend)
broadcastable to (..., Tq, Tk).
"""
from __future__ import annotations

import numpy as np

from .. import checks

__all__ = [
    "masked_softmax",
    "masked_log_softmax",
    "dot_scores",
    "additive_scores",
    "gaussian_kernel_scores",
    "cosine_scores",
    "attend",
    "scaled_dot_product_attention",
    "additive_attention",
    "causal_mask",
    "padding_mask",
    "local_window_mask",
    "top_k_mask",
    "split_heads",
    "merge_heads",
    "multi_head_attention",
]


def masked_softmax(scores: np.ndarray, mask: np.ndarray | None = None, temperature: float = 1.0) -> np.ndarray:
    """Softmax over the last axis, giving masked-out positions exactly zero weight.

    A row whose every position is masked gets all zeros (not NaN).
    Shapes: scores (..., Tq, Tk), mask broadcastable to it -> (..., Tq, Tk).
    """
    scores = np.asarray(scores)
    if not np.issubdtype(scores.dtype, np.floating):
        scores = scores.astype(np.float64)
    checks.check_temperature(temperature)
    checks.check_mask(mask, scores.shape)
    scores = scores / temperature
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    row_max = scores.max(axis=-1, keepdims=True)
    row_max = np.where(np.isfinite(row_max), row_max, 0.0)  # fully masked rows
    e = np.exp(scores - row_max)  # exp(-inf) = 0 for masked positions
    total = e.sum(axis=-1, keepdims=True)
    return e / np.where(total == 0, 1.0, total)


def masked_log_softmax(scores: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
    """The log of ``masked_softmax``'s weights, computed in log space: a kept key far below its row's best
    gets its true (large negative) log-weight, never the -inf of a weight that underflowed to 0.

    -inf where the keep-mask is False; a row whose every position is masked is -inf everywhere (not NaN).
    Shapes: scores (..., Tq, Tk), mask broadcastable to it -> (..., Tq, Tk).
    """
    scores = np.asarray(scores)
    if not np.issubdtype(scores.dtype, np.floating):
        scores = scores.astype(np.float64)
    checks.check_mask(mask, scores.shape)
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    row_max = scores.max(axis=-1, keepdims=True)
    row_max = np.where(np.isfinite(row_max), row_max, 0.0)  # fully masked rows
    shifted = scores - row_max  # (..., Tq, Tk): <= 0 where kept, -inf where masked
    total = np.exp(shifted).sum(axis=-1, keepdims=True)  # >= 1 wherever a position is kept, 0 where none is
    return shifted - np.log(np.where(total == 0, 1.0, total))


def dot_scores(queries: np.ndarray, keys: np.ndarray, scale: bool = True) -> np.ndarray:
    """Dot-product scores q.k, divided by sqrt(D) when ``scale``.

    Shapes: queries (..., Tq, D), keys (..., Tk, D) -> (..., Tq, Tk).
    """
    checks.check_queries_keys(queries, keys)
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
    q, k = checks.check_queries_keys(queries, keys, same_width=False)
    checks.check_additive_weights(q, k, W_q, W_k, w_v)
    q_proj = (queries @ W_q)[..., :, None, :]  # (..., Tq, 1, A)
    k_proj = (keys @ W_k)[..., None, :, :]  # (..., 1, Tk, A)
    return np.tanh(q_proj + k_proj) @ w_v  # (..., Tq, Tk)


def gaussian_kernel_scores(queries: np.ndarray, keys: np.ndarray, width: float) -> np.ndarray:
    """Nadaraya-Watson scores -((q - k) * width)^2 / 2 for scalar inputs.

    Shapes: queries (..., Tq), keys (..., Tk) -> (..., Tq, Tk).
    """
    diff = queries[..., :, None] - keys[..., None, :]  # (..., Tq, Tk)
    return -((diff * width) ** 2) / 2


def cosine_scores(queries: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Cosine similarity q.k / (|q| |k|) of every query with every key: direction only, in [-1, 1].

    A zero vector has no direction: its lengths count as 1e-8, so it scores 0 against everything.
    Shapes: queries (..., Tq, D), keys (..., Tk, D) -> (..., Tq, Tk).
    """
    checks.check_queries_keys(queries, keys)
    q = queries / np.maximum(np.linalg.norm(queries, axis=-1, keepdims=True), 1e-8)  # (..., Tq, D), unit length
    k = keys / np.maximum(np.linalg.norm(keys, axis=-1, keepdims=True), 1e-8)  # (..., Tk, D), unit length
    return q @ np.swapaxes(k, -1, -2)  # (..., Tq, Tk)


def attend(weights: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Weighted sum of values: the 'read' of a soft lookup.

    Shapes: weights (..., Tq, Tk), values (..., Tk, Dv) -> (..., Tq, Dv).
    """
    w = checks.shape_of(weights)
    v = checks.shape_of(values)
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
    _, k = checks.check_queries_keys(queries, keys)
    checks.check_values(values, k)
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
    _, k = checks.check_queries_keys(queries, keys, same_width=False)
    checks.check_values(values, k)
    weights = masked_softmax(additive_scores(queries, keys, W_q, W_k, w_v), mask)
    return attend(weights, values), weights


# ----------------------------------------------------------------------------
# Masks and multi-head attention (lesson 5)
# ----------------------------------------------------------------------------


def causal_mask(num_queries: int, num_keys: int | None = None) -> np.ndarray:
    """Keep-mask that lets query i see keys 0..i (and nothing in its future).

    With more keys than queries (a decoder fed a prefix) the queries are the
    last ``num_queries`` positions: query i sees keys 0..i + num_keys - num_queries.
    Shapes: -> (Tq, Tk), True = may attend.
    """
    num_keys = num_queries if num_keys is None else num_keys
    checks.check_positive_int("num_queries", num_queries)
    checks.check_positive_int("num_keys", num_keys)
    return np.tril(np.ones((num_queries, num_keys), dtype=bool), k=num_keys - num_queries)


def padding_mask(lengths: np.ndarray, max_len: int) -> np.ndarray:
    """Keep-mask that hides the padding after each sequence's true length.

    Shapes: lengths (B,) -> (B, 1, 1, Tk=max_len), broadcastable to (B, H, Tq, Tk).
    """
    lengths = np.asarray(lengths)
    checks.check_lengths(lengths, max_len)
    keep = np.arange(max_len)[None, :] < lengths[:, None]  # (B, Tk)
    return keep[:, None, None, :]  # (B, 1, 1, Tk)


def local_window_mask(centers: np.ndarray, num_keys: int, half_width: int) -> np.ndarray:
    """Keep-mask of Luong et al.'s local attention: query t sees only keys j with |j - p_t| <= D.

    ``centers`` holds the aligned source position p_t of every query (local-m:
    p_t = t; local-p: a position the network predicts, possibly fractional);
    ``half_width`` is D, so a window holds up to 2D + 1 keys. A window wider
    than the keys is global attention.
    Shapes: centers (Tq,) -> (Tq, Tk); centers (B, Tq) -> (B, 1, Tq, Tk),
    broadcastable to (B, H, Tq, Tk); Tk = num_keys. True = may attend.
    """
    checks.check_window(centers, num_keys, half_width)
    c = np.asarray(centers)
    c = c if np.issubdtype(c.dtype, np.floating) else c.astype(np.float32)  # integers are exact in float32
    keep = np.abs(np.arange(num_keys, dtype=c.dtype) - c[..., None]) <= half_width  # (..., Tq, Tk)
    return keep if keep.ndim == 2 else keep[:, None]  # (Tq, Tk) or (B, 1, Tq, Tk)


def top_k_mask(scores: np.ndarray, k: int, mask: np.ndarray | None = None) -> np.ndarray:
    """Keep-mask of the k largest scores of each row, chosen among the positions ``mask`` keeps.

    Top-k attention: ``masked_softmax(scores, top_k_mask(scores, k, mask))`` spreads each
    query's weight over its k best keys only. A masked position never takes one of the k
    places; a row that keeps fewer than k positions keeps all of them; ties with the k-th
    largest score are all kept.
    Shapes: scores (..., Tq, Tk), mask broadcastable to it -> (..., Tq, Tk), True = may attend.
    """
    scores = np.asarray(scores)
    checks.check_top_k(k, scores.shape)
    checks.check_mask(mask, scores.shape)
    allowed = scores if mask is None else np.where(mask, scores, -np.inf)  # a masked key cannot be among the best
    kth = np.sort(allowed, axis=-1)[..., -k][..., None]  # (..., Tq, 1): the k-th largest allowed score
    keep = allowed >= kth  # (..., Tq, Tk); where fewer than k are allowed, kth is -inf and all pass
    return keep if mask is None else keep & mask


def split_heads(x: np.ndarray, num_heads: int) -> np.ndarray:
    """Cut the last axis into ``num_heads`` contiguous slices, one per head.

    Shapes: x (B, T, D) -> (B, H, T, Dh) with Dh = D / H.
    """
    b, t, d = checks.check_heads("x", x, num_heads)
    return x.reshape(b, t, num_heads, d // num_heads).transpose(0, 2, 1, 3)  # (B, H, T, Dh)


def merge_heads(x: np.ndarray) -> np.ndarray:
    """Undo ``split_heads``: concatenate the heads along the feature axis.

    Shapes: x (B, H, T, Dh) -> (B, T, H * Dh).
    """
    b, h, t, dh = checks.check_rank("x", x, 4, "(B, H, T, Dh)")
    return x.transpose(0, 2, 1, 3).reshape(b, t, h * dh)  # (B, T, D)


def multi_head_attention(
    queries: np.ndarray,
    keys: np.ndarray,
    values: np.ndarray,
    w_qkv: np.ndarray,
    b_qkv: np.ndarray | None,
    w_o: np.ndarray,
    b_o: np.ndarray | None,
    num_heads: int,
    mask: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Multi-head attention with given weights, in the x @ W convention.

    ``w_qkv`` holds the query, key and value projections side by side
    ([W_q | W_k | W_v], each (D, D)); inside each, head h owns the columns
    h*Dh .. (h+1)*Dh. ``w_o`` maps the concatenated heads back to D.
    Shapes: queries (B, Tq, D), keys (B, Tk, D), values (B, Tk, D),
    w_qkv (D, 3D), b_qkv (3D,), w_o (D, D), b_o (D,), mask broadcastable to
    (B, H, Tq, Tk) -> output (B, Tq, D), weights (B, H, Tq, Tk).
    """
    d = checks.check_mha_inputs(queries, keys, values, w_qkv, b_qkv, w_o, b_o, num_heads)
    b_qkv = np.zeros(3 * d, dtype=w_qkv.dtype) if b_qkv is None else b_qkv
    q = queries @ w_qkv[:, :d] + b_qkv[:d]  # (B, Tq, D)
    k = keys @ w_qkv[:, d : 2 * d] + b_qkv[d : 2 * d]  # (B, Tk, D)
    v = values @ w_qkv[:, 2 * d :] + b_qkv[2 * d :]  # (B, Tk, D)
    q, k, v = (split_heads(t, num_heads) for t in (q, k, v))  # (B, H, T, Dh)
    heads, weights = scaled_dot_product_attention(q, k, v, mask)  # (B, H, Tq, Dh), (B, H, Tq, Tk)
    out = merge_heads(heads) @ w_o  # (B, Tq, D)
    if b_o is not None:
        out = out + b_o
    return out, weights
