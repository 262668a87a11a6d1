"""NumPy reference of efficient attention: the readable, exact version (lesson 9).

Shapes: letters of ``utils/shapes.py``; here Tq queries, Tk keys, T one sequence
attending to itself, D query/key width, Dv value width; ``...`` are leading batch
axes. ``block_q``, ``block_k``, ``block_size`` and ``half_width`` are plain ints.
Masks are boolean keep-masks (True = may attend).
"""
from __future__ import annotations

import math

import numpy as np

from .. import checks
from . import _checks
from ..attention import numpy_ref as attention

__all__ = [
    "online_softmax",
    "tiled_attention",
    "sliding_window_mask",
    "global_token_mask",
    "random_block_mask",
    "band_scores",
    "banded_attention",
    "elu_feature_map",
    "linear_attention",
    "kernel_attention",
]


def _floats(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x)
    return x if np.issubdtype(x.dtype, np.floating) else x.astype(np.float64)


def online_softmax(scores: np.ndarray, block_size: int = 64) -> np.ndarray:
    """Softmax over the last axis from one streaming pass over the scores, ``block_size`` at a time.

    The pass keeps, per row, the running maximum m and the running sum l of exp(s - m);
    when a block raises the maximum, the sum so far is rescaled by exp(m_old - m_new).
    The weights are then exp(s - m) / l. Never exponentiates a positive number, so it
    does not overflow; a row of only -inf gets all zeros.
    Shapes: scores (..., Tk) -> (..., Tk).
    """
    s = _floats(scores)
    checks.check_rank("scores", s, 1, "(..., Tk)")
    checks.check_positive_int("block_size", block_size)
    m = np.full(s.shape[:-1], -np.inf, dtype=s.dtype)  # (...,) running maximum
    l = np.zeros(s.shape[:-1], dtype=s.dtype)  # (...,) running sum of exp(s - m)
    for start in range(0, s.shape[-1], block_size):
        block = s[..., start : start + block_size]  # (..., block_size)
        m_new = np.maximum(m, block.max(axis=-1))
        m_safe = np.where(np.isfinite(m_new), m_new, 0.0)  # a row of only -inf so far
        l = l * np.exp(m - m_safe) + np.exp(block - m_safe[..., None]).sum(axis=-1)
        m = m_new
    m_safe = np.where(np.isfinite(m), m, 0.0)
    return np.exp(s - m_safe[..., None]) / np.where(l == 0, 1.0, l)[..., None]


def tiled_attention(
    queries: np.ndarray,
    keys: np.ndarray,
    values: np.ndarray,
    block_q: int = 64,
    block_k: int = 64,
    causal: bool = False,
) -> np.ndarray:
    """Exact softmax(q k^T / sqrt(D)) v, one (block_q, block_k) tile of scores at a time.

    FlashAttention's forward pass: for each block of queries, loop over blocks of keys and
    values with the online softmax (running max m, running sum l, and the output
    accumulator rescaled with l), so no (Tq, Tk) matrix is ever formed. With ``causal``,
    query i sees keys 0 .. i + Tk - Tq (the convention of ``utils.attention``'s
    ``causal_mask``), and key blocks wholly in a query block's future are skipped.
    Shapes: queries (..., Tq, D), keys (..., Tk, D), values (..., Tk, Dv) -> (..., Tq, Dv).
    """
    queries, keys, values = _floats(queries), _floats(keys), _floats(values)
    q_shape, k_shape = checks.check_queries_keys(queries, keys)
    v_shape = checks.check_values(values, k_shape)
    checks.check_positive_int("block_q", block_q)
    checks.check_positive_int("block_k", block_k)
    tq, tk, d = q_shape[-2], k_shape[-2], q_shape[-1]
    offset = tk - tq  # causal: query i sees keys 0 .. i + offset
    dtype = np.result_type(queries, keys, values)
    out = np.zeros(q_shape[:-1] + v_shape[-1:], dtype=dtype)  # (..., Tq, Dv)
    for i0 in range(0, tq, block_q):
        q = queries[..., i0 : i0 + block_q, :] / math.sqrt(d)  # (..., block_q, D)
        rows = np.arange(i0, min(i0 + block_q, tq))  # the queries of this block
        m = np.full(q.shape[:-1], -np.inf, dtype=dtype)  # (..., block_q)
        l = np.zeros(q.shape[:-1], dtype=dtype)  # (..., block_q)
        acc = np.zeros(q.shape[:-1] + v_shape[-1:], dtype=dtype)  # (..., block_q, Dv)
        key_end = min(tk, rows[-1] + offset + 1) if causal else tk  # later keys: all in the future
        for j0 in range(0, max(key_end, 0), block_k):
            s = q @ np.swapaxes(keys[..., j0 : j0 + block_k, :], -1, -2)  # (..., block_q, block_k)
            if causal and j0 + s.shape[-1] - 1 > rows[0] + offset:  # the tile crosses the diagonal
                cols = np.arange(j0, j0 + s.shape[-1])
                s = np.where(cols[None, :] <= rows[:, None] + offset, s, -np.inf)
            m_new = np.maximum(m, s.max(axis=-1))
            m_safe = np.where(np.isfinite(m_new), m_new, 0.0)  # rows with no key yet
            p = np.exp(s - m_safe[..., None])  # (..., block_q, block_k)
            correction = np.exp(m - m_safe)  # (..., block_q): rescales what was summed so far
            l = l * correction + p.sum(axis=-1)
            acc = acc * correction[..., None] + p @ values[..., j0 : j0 + block_k, :]
            m = m_new
        out[..., i0 : i0 + block_q, :] = acc / np.where(l == 0, 1.0, l)[..., None]
    return out


def sliding_window_mask(seq_len: int, half_width: int, causal: bool = False) -> np.ndarray:
    """Longformer's sliding window: query i sees keys i - half_width .. i + half_width.

    Lesson 2's local-m attention as a mask (``utils.attention``'s ``local_window_mask``
    with every query its own centre); ``causal`` keeps only the past half of the window.
    Shapes: -> (T, T) with T = seq_len, True = may attend.
    """
    checks.check_positive_int("seq_len", seq_len)
    half_width = _checks.half_width(half_width)
    keep = attention.local_window_mask(np.arange(seq_len), seq_len, half_width)  # (T, T)
    return keep & attention.causal_mask(seq_len) if causal else keep


def global_token_mask(seq_len: int, positions: np.ndarray) -> np.ndarray:
    """Longformer's global tokens: a global position attends to every key, and every query to it.

    Shapes: positions (n,) -> (T, T) with T = seq_len, True = may attend.
    """
    checks.check_positive_int("seq_len", seq_len)
    pos = _checks.positions(positions, seq_len)
    keep = np.zeros((seq_len, seq_len), dtype=bool)  # (T, T)
    keep[pos, :] = True  # the global tokens' rows: they see everything
    keep[:, pos] = True  # their columns: everything sees them
    return keep


def random_block_mask(seq_len: int, block_size: int, num_random: int, seed: int = 0) -> np.ndarray:
    """BigBird's random attention: each block of queries sees ``num_random`` other key blocks.

    The sequence is cut into blocks of ``block_size`` positions (the last may be shorter);
    for each query block, ``num_random`` key blocks other than its own are drawn without
    replacement by ``np.random.default_rng(seed)``, so every twin draws the same ones.
    Shapes: -> (T, T) with T = seq_len, True = may attend.
    """
    checks.check_positive_int("seq_len", seq_len)
    checks.check_positive_int("block_size", block_size)
    num_random = _checks.nonnegative_int("num_random", num_random, "random key blocks per query block")
    n_blocks = -(-seq_len // block_size)
    rng = np.random.default_rng(seed)
    keep = np.zeros((seq_len, seq_len), dtype=bool)  # (T, T)
    for b in range(n_blocks):
        others = np.array([c for c in range(n_blocks) if c != b], dtype=np.int64)
        for c in rng.choice(others, size=min(num_random, len(others)), replace=False):
            keep[b * block_size : (b + 1) * block_size, c * block_size : (c + 1) * block_size] = True
    return keep


def band_scores(queries: np.ndarray, keys: np.ndarray, half_width: int, causal: bool = False) -> np.ndarray:
    """The scores of a sliding window only: entry [i, j] is query i with key i - half_width + j.

    The keys are padded with ``half_width`` zeros at both ends and gathered into one
    window per query; scores with a padding position are -inf, so a softmax gives them
    zero weight. ``causal`` keeps the window's past half (and the query itself).
    Shapes: queries (..., T, D), keys (..., T, D) -> (..., T, Tw) with
    Tw = 2 * half_width + 1, or half_width + 1 when causal.
    """
    queries, keys = _floats(queries), _floats(keys)
    t = _checks.self_attention(queries, keys, "band_scores")
    w = _checks.half_width(half_width)
    idx, inside = _checks.window_index(t, w, causal)
    pad = [(0, 0)] * (keys.ndim - 2) + [(w, w), (0, 0)]
    windows = np.pad(keys, pad)[..., idx + w, :]  # (..., T, Tw, D): each query's keys
    scores = np.einsum("...td,...twd->...tw", queries, windows) / math.sqrt(queries.shape[-1])
    return np.where(inside, scores, -np.inf)  # (..., T, Tw)


def banded_attention(
    queries: np.ndarray, keys: np.ndarray, values: np.ndarray, half_width: int, causal: bool = False
) -> np.ndarray:
    """Sliding-window attention that computes only the window's scores: O(T * half_width) work.

    Equal to full attention under ``sliding_window_mask(T, half_width, causal)``.
    Shapes: queries (..., T, D), keys (..., T, D), values (..., T, Dv) -> (..., T, Dv).
    """
    values = _floats(values)
    t = _checks.self_attention(queries, keys, "banded_attention")
    checks.check_values(values, checks.shape_of(keys))
    w = _checks.half_width(half_width)
    weights = attention.masked_softmax(band_scores(queries, keys, w, causal))  # (..., T, Tw)
    idx, _ = _checks.window_index(t, w, causal)
    pad = [(0, 0)] * (values.ndim - 2) + [(w, w), (0, 0)]
    windows = np.pad(values, pad)[..., idx + w, :]  # (..., T, Tw, Dv)
    return np.einsum("...tw,...twv->...tv", weights, windows)  # (..., T, Dv)


def elu_feature_map(x: np.ndarray) -> np.ndarray:
    """phi(x) = elu(x) + 1 (Katharopoulos et al., 2020): positive, so phi(q).phi(k) > 0.

    Shapes: x (..., D) -> (..., D).
    """
    x = _floats(x)
    return np.where(x > 0, x + 1.0, np.exp(np.minimum(x, 0.0)))


def linear_attention(queries: np.ndarray, keys: np.ndarray, values: np.ndarray, causal: bool = False) -> np.ndarray:
    """Linear attention: phi(q_i) S / phi(q_i) z with S = sum_j phi(k_j) v_j^T, z = sum_j phi(k_j).

    Non-causal, S and z sum over all keys: O(T D Dv) work, no (Tq, Tk) matrix. Causal
    (Tq = Tk), they sum over keys 0..i: the recurrence S_i = S_(i-1) + phi(k_i) v_i^T,
    here computed for all i at once by a cumulative sum (which stores every S_i).
    Shapes: queries (..., Tq, D), keys (..., Tk, D), values (..., Tk, Dv) -> (..., Tq, Dv).
    """
    queries, keys, values = _floats(queries), _floats(keys), _floats(values)
    _, k = checks.check_queries_keys(queries, keys)
    checks.check_values(values, k)
    if causal:
        _checks.self_attention(queries, keys, "causal linear_attention")
    phi_q, phi_k = elu_feature_map(queries), elu_feature_map(keys)  # (..., Tq, D), (..., Tk, D)
    if not causal:
        state = np.swapaxes(phi_k, -1, -2) @ values  # (..., D, Dv)
        z = phi_k.sum(axis=-2)  # (..., D)
        return (phi_q @ state) / (phi_q @ z[..., None])  # (..., Tq, Dv)
    states = np.cumsum(phi_k[..., :, :, None] * values[..., :, None, :], axis=-3)  # (..., T, D, Dv)
    z = np.cumsum(phi_k, axis=-2)  # (..., T, D)
    numerator = np.einsum("...td,...tdv->...tv", phi_q, states)  # (..., T, Dv)
    return numerator / np.einsum("...td,...td->...t", phi_q, z)[..., None]


def kernel_attention(
    queries: np.ndarray, keys: np.ndarray, values: np.ndarray, causal: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Linear attention's quadratic form: weights phi(q_i).phi(k_j) / sum_j phi(q_i).phi(k_j).

    The same output as ``linear_attention``, computed the attention way, with the
    (Tq, Tk) weights formed: exp(q.k) of softmax attention replaced by the kernel
    phi(q).phi(k). ``causal`` keeps keys 0 .. i + Tk - Tq for query i.
    Shapes: queries (..., Tq, D), keys (..., Tk, D), values (..., Tk, Dv)
    -> output (..., Tq, Dv), weights (..., Tq, Tk).
    """
    queries, keys, values = _floats(queries), _floats(keys), _floats(values)
    q, k = checks.check_queries_keys(queries, keys)
    checks.check_values(values, k)
    sim = elu_feature_map(queries) @ np.swapaxes(elu_feature_map(keys), -1, -2)  # (..., Tq, Tk)
    if causal:
        sim = np.where(attention.causal_mask(q[-2], k[-2]), sim, 0.0)
    total = sim.sum(axis=-1, keepdims=True)
    weights = sim / np.where(total == 0, 1.0, total)  # a causal row with no key (Tq > Tk): zeros
    return weights @ values, weights
