"""Keras 3 twin of efficient attention (lesson 9); same names and signatures as torch_impl.

The readable algorithms of ``numpy_ref``, in ``keras.ops`` (TensorFlow backend): the
online softmax, tiled attention (FlashAttention's forward pass, in Python loops over
tiles: exact and memory-light, but not fast; ``keras.ops.dot_product_attention`` is the
fused kernel),
sparse masks, banded attention and linear attention.
Shapes: letters of ``utils/shapes.py``; here Tq queries, Tk keys, T one sequence
attending to itself, D query/key width, Dv value width, Tw window length; ``...`` are
leading batch axes. Masks are boolean keep-masks (True = may attend).
"""
from __future__ import annotations

import math
from typing import Any

from utils.runtime import prepare_tensorflow_env

prepare_tensorflow_env()

import keras  # noqa: E402
from keras import ops  # noqa: E402

from .. import checks  # noqa: E402
from ..attention import keras_impl as attention  # noqa: E402
from . import _checks, numpy_ref  # noqa: E402

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

Tensor = Any  # a Keras / TensorFlow tensor, or anything ops.convert_to_tensor takes


def _floats(x: Tensor) -> Tensor:
    x = ops.convert_to_tensor(x)
    return x if keras.backend.is_float_dtype(x.dtype) else ops.cast(x, "float32")


def _where_finite(x: Tensor) -> Tensor:
    return ops.where(ops.isfinite(x), x, ops.zeros_like(x))


def _nonzero(x: Tensor) -> Tensor:
    return ops.where(x == 0, ops.ones_like(x), x)


def online_softmax(scores: Tensor, block_size: int = 64) -> Tensor:
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
    m = ops.full(s.shape[:-1], float("-inf"), dtype=s.dtype)  # (...,) running maximum
    l = ops.zeros(s.shape[:-1], dtype=s.dtype)  # (...,) running sum of exp(s - m)
    for start in range(0, s.shape[-1], block_size):
        block = s[..., start : start + block_size]  # (..., block_size)
        m_new = ops.maximum(m, ops.max(block, axis=-1))
        m_safe = _where_finite(m_new)  # a row of only -inf so far
        l = l * ops.exp(m - m_safe) + ops.sum(ops.exp(block - m_safe[..., None]), axis=-1)
        m = m_new
    return ops.exp(s - _where_finite(m)[..., None]) / _nonzero(l)[..., None]


def tiled_attention(
    queries: Tensor,
    keys: Tensor,
    values: Tensor,
    block_q: int = 64,
    block_k: int = 64,
    causal: bool = False,
) -> Tensor:
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
    blocks = []
    for i0 in range(0, tq, block_q):
        q = queries[..., i0 : i0 + block_q, :] / math.sqrt(d)  # (..., block_q, D)
        rows = ops.arange(i0, min(i0 + block_q, tq))  # the queries of this block
        n_rows = min(i0 + block_q, tq) - i0
        m = ops.full(q.shape[:-1], float("-inf"), dtype=q.dtype)  # (..., block_q)
        l = ops.zeros(q.shape[:-1], dtype=q.dtype)  # (..., block_q)
        acc = ops.zeros(q.shape[:-1] + (v_shape[-1],), dtype=q.dtype)  # (..., block_q, Dv)
        key_end = min(tk, i0 + n_rows - 1 + offset + 1) if causal else tk  # later keys: all in the future
        for j0 in range(0, max(key_end, 0), block_k):
            k_blk = keys[..., j0 : j0 + block_k, :]  # (..., block_k, D)
            n_cols = k_blk.shape[-2]
            s = ops.matmul(q, ops.swapaxes(k_blk, -1, -2))  # (..., block_q, block_k)
            if causal and j0 + n_cols - 1 > i0 + offset:  # the tile crosses the diagonal
                cols = ops.arange(j0, j0 + n_cols)
                s = ops.where(cols[None, :] <= rows[:, None] + offset, s, float("-inf"))
            m_new = ops.maximum(m, ops.max(s, axis=-1))
            m_safe = _where_finite(m_new)  # rows with no key yet
            p = ops.exp(s - m_safe[..., None])  # (..., block_q, block_k)
            correction = ops.exp(m - m_safe)  # (..., block_q): rescales what was summed so far
            l = l * correction + ops.sum(p, axis=-1)
            acc = acc * correction[..., None] + ops.matmul(p, values[..., j0 : j0 + block_k, :])
            m = m_new
        blocks.append(acc / _nonzero(l)[..., None])
    return ops.concatenate(blocks, axis=-2)  # (..., Tq, Dv)


def sliding_window_mask(seq_len: int, half_width: int, causal: bool = False) -> Tensor:
    """Longformer's sliding window: query i sees keys i - half_width .. i + half_width.

    Lesson 2's local-m attention as a mask (``utils.attention``'s ``local_window_mask``
    with every query its own centre); ``causal`` keeps only the past half of the window.
    Shapes: -> (T, T) with T = seq_len, True = may attend.
    """
    checks.check_positive_int("seq_len", seq_len)
    half_width = _checks.half_width(half_width)
    keep = attention.local_window_mask(ops.arange(seq_len), seq_len, half_width)  # (T, T)
    return ops.logical_and(keep, attention.causal_mask(seq_len)) if causal else keep


def global_token_mask(seq_len: int, positions: Tensor) -> Tensor:
    """Longformer's global tokens: a global position attends to every key, and every query to it.

    Shapes: positions (n,) -> (T, T) with T = seq_len, True = may attend.
    """
    checks.check_positive_int("seq_len", seq_len)
    pos = _checks.positions(checks.to_numpy(positions), seq_len)
    is_global = ops.any(ops.arange(seq_len)[:, None] == ops.convert_to_tensor(pos, "int32")[None, :], axis=-1)  # (T,)
    return ops.logical_or(is_global[:, None], is_global[None, :])  # (T, T): global rows and columns


def random_block_mask(seq_len: int, block_size: int, num_random: int, seed: int = 0) -> Tensor:
    """BigBird's random attention: each block of queries sees ``num_random`` other key blocks.

    The blocks are drawn by NumPy (``numpy_ref.random_block_mask``), so every twin draws
    the same ones for the same seed.
    Shapes: -> (T, T) with T = seq_len, True = may attend.
    """
    return ops.convert_to_tensor(numpy_ref.random_block_mask(seq_len, block_size, num_random, seed))


def _windows(x: Tensor, w: int, idx: Tensor) -> Tensor:
    """Zero-pad the time axis by ``w`` at both ends and gather each query's window of rows."""
    pad = [[0, 0]] * (len(x.shape) - 2) + [[w, w], [0, 0]]
    return ops.take(ops.pad(x, pad), idx + w, axis=-2)  # (..., T, Tw, D)


def band_scores(queries: Tensor, keys: Tensor, half_width: int, causal: bool = False) -> Tensor:
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
    windows = _windows(keys, w, ops.convert_to_tensor(idx))  # (..., T, Tw, D): each query's keys
    scores = ops.einsum("...td,...twd->...tw", queries, windows) / math.sqrt(queries.shape[-1])
    return ops.where(ops.convert_to_tensor(inside), scores, float("-inf"))  # (..., T, Tw)


def banded_attention(queries: Tensor, keys: Tensor, values: Tensor, half_width: int, causal: bool = False) -> Tensor:
    """Sliding-window attention that computes only the window's scores: O(T * half_width) work.

    Equal to full attention under ``sliding_window_mask(T, half_width, causal)``.
    Shapes: queries (..., T, D), keys (..., T, D), values (..., T, Dv) -> (..., T, Dv).
    """
    values = _floats(values)
    t = _checks.self_attention(queries, keys, "banded_attention")
    checks.check_values(values, checks.shape_of(keys))
    w = _checks.half_width(half_width)
    weights = ops.softmax(band_scores(queries, keys, w, causal), axis=-1)  # (..., T, Tw); the query itself is always in
    windows = _windows(values, w, ops.convert_to_tensor(_checks.window_index(t, w, causal)[0]))  # (..., T, Tw, Dv)
    return ops.einsum("...tw,...twv->...tv", weights, windows)  # (..., T, Dv)


def elu_feature_map(x: Tensor) -> Tensor:
    """phi(x) = elu(x) + 1 (Katharopoulos et al., 2020): positive, so phi(q).phi(k) > 0.

    Shapes: x (..., D) -> (..., D).
    """
    return ops.elu(_floats(x)) + 1.0


def linear_attention(queries: Tensor, keys: Tensor, values: Tensor, causal: bool = False) -> Tensor:
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
        state = ops.matmul(ops.swapaxes(phi_k, -1, -2), values)  # (..., D, Dv)
        z = ops.sum(phi_k, axis=-2)  # (..., D)
        return ops.matmul(phi_q, state) / ops.matmul(phi_q, z[..., None])  # (..., Tq, Dv)
    states = ops.cumsum(phi_k[..., :, :, None] * values[..., :, None, :], axis=-3)  # (..., T, D, Dv)
    z = ops.cumsum(phi_k, axis=-2)  # (..., T, D)
    numerator = ops.einsum("...td,...tdv->...tv", phi_q, states)  # (..., T, Dv)
    return numerator / ops.einsum("...td,...td->...t", phi_q, z)[..., None]


def kernel_attention(queries: Tensor, keys: Tensor, values: Tensor, causal: bool = False) -> tuple[Tensor, Tensor]:
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
    sim = ops.matmul(elu_feature_map(queries), ops.swapaxes(elu_feature_map(keys), -1, -2))  # (..., Tq, Tk)
    if causal:
        sim = ops.where(attention.causal_mask(q[-2], k[-2]), sim, ops.zeros_like(sim))
    weights = sim / _nonzero(ops.sum(sim, axis=-1, keepdims=True))  # a causal row with no key (Tq > Tk): zeros
    return ops.matmul(weights, values), weights
