"""PyTorch twin of efficient attention (lesson 9); same names and signatures as keras_impl.

The readable algorithms of ``numpy_ref``, in torch: the online softmax, tiled attention
(FlashAttention's forward pass, in Python loops over tiles: exact and memory-light, but
not fast; ``torch.nn.functional.scaled_dot_product_attention`` is the fused kernel),
sparse masks, banded attention and linear attention.
Shapes: letters of ``utils/shapes.py``; here Tq queries, Tk keys, T one sequence
attending to itself, D query/key width, Dv value width, Tw window length; ``...`` are
leading batch axes. Masks are boolean keep-masks (True = may attend).
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .. import checks
from ..attention import torch_impl as attention
from . import _checks, numpy_ref

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


def _floats(x: torch.Tensor) -> torch.Tensor:
    x = torch.as_tensor(x)
    return x if x.is_floating_point() else x.to(torch.float32)


def online_softmax(scores: torch.Tensor, block_size: int = 64) -> torch.Tensor:
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
    m = torch.full(s.shape[:-1], float("-inf"), dtype=s.dtype, device=s.device)  # (...,) running maximum
    l = torch.zeros(s.shape[:-1], dtype=s.dtype, device=s.device)  # (...,) running sum of exp(s - m)
    for start in range(0, s.shape[-1], block_size):
        block = s[..., start : start + block_size]  # (..., block_size)
        m_new = torch.maximum(m, block.amax(dim=-1))
        m_safe = torch.where(torch.isfinite(m_new), m_new, torch.zeros_like(m_new))  # a row of only -inf so far
        l = l * torch.exp(m - m_safe) + torch.exp(block - m_safe[..., None]).sum(dim=-1)
        m = m_new
    m_safe = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    return torch.exp(s - m_safe[..., None]) / torch.where(l == 0, torch.ones_like(l), l)[..., None]


def tiled_attention(
    queries: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    block_q: int = 64,
    block_k: int = 64,
    causal: bool = False,
) -> torch.Tensor:
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
    checks.check_values(values, k_shape)
    checks.check_positive_int("block_q", block_q)
    checks.check_positive_int("block_k", block_k)
    tq, tk, d = q_shape[-2], k_shape[-2], q_shape[-1]
    offset = tk - tq  # causal: query i sees keys 0 .. i + offset
    blocks = []
    for i0 in range(0, tq, block_q):
        q = queries[..., i0 : i0 + block_q, :] / math.sqrt(d)  # (..., block_q, D)
        rows = torch.arange(i0, min(i0 + block_q, tq), device=q.device)  # the queries of this block
        m = torch.full(q.shape[:-1], float("-inf"), dtype=q.dtype, device=q.device)  # (..., block_q)
        l = torch.zeros(q.shape[:-1], dtype=q.dtype, device=q.device)  # (..., block_q)
        acc = torch.zeros(*q.shape[:-1], values.shape[-1], dtype=q.dtype, device=q.device)  # (..., block_q, Dv)
        key_end = min(tk, int(rows[-1]) + offset + 1) if causal else tk  # later keys: all in the future
        for j0 in range(0, max(key_end, 0), block_k):
            s = q @ keys[..., j0 : j0 + block_k, :].transpose(-1, -2)  # (..., block_q, block_k)
            if causal and j0 + s.shape[-1] - 1 > int(rows[0]) + offset:  # the tile crosses the diagonal
                cols = torch.arange(j0, j0 + s.shape[-1], device=q.device)
                s = s.masked_fill(cols[None, :] > rows[:, None] + offset, float("-inf"))
            m_new = torch.maximum(m, s.amax(dim=-1))
            m_safe = torch.where(torch.isfinite(m_new), m_new, torch.zeros_like(m_new))  # rows with no key yet
            p = torch.exp(s - m_safe[..., None])  # (..., block_q, block_k)
            correction = torch.exp(m - m_safe)  # (..., block_q): rescales what was summed so far
            l = l * correction + p.sum(dim=-1)
            acc = acc * correction[..., None] + p @ values[..., j0 : j0 + block_k, :]
            m = m_new
        blocks.append(acc / torch.where(l == 0, torch.ones_like(l), l)[..., None])
    return torch.cat(blocks, dim=-2)  # (..., Tq, Dv)


def sliding_window_mask(seq_len: int, half_width: int, causal: bool = False) -> torch.Tensor:
    """Longformer's sliding window: query i sees keys i - half_width .. i + half_width.

    Lesson 2's local-m attention as a mask (``utils.attention``'s ``local_window_mask``
    with every query its own centre); ``causal`` keeps only the past half of the window.
    Shapes: -> (T, T) with T = seq_len, True = may attend.
    """
    checks.check_positive_int("seq_len", seq_len)
    half_width = _checks.half_width(half_width)
    keep = attention.local_window_mask(torch.arange(seq_len), seq_len, half_width)  # (T, T)
    return keep & attention.causal_mask(seq_len) if causal else keep


def global_token_mask(seq_len: int, positions: torch.Tensor) -> torch.Tensor:
    """Longformer's global tokens: a global position attends to every key, and every query to it.

    Shapes: positions (n,) -> (T, T) with T = seq_len, True = may attend.
    """
    checks.check_positive_int("seq_len", seq_len)
    pos = torch.as_tensor(_checks.positions(checks.to_numpy(positions), seq_len))
    keep = torch.zeros(seq_len, seq_len, dtype=torch.bool)  # (T, T)
    keep[pos, :] = True  # the global tokens' rows: they see everything
    keep[:, pos] = True  # their columns: everything sees them
    return keep


def random_block_mask(seq_len: int, block_size: int, num_random: int, seed: int = 0) -> torch.Tensor:
    """BigBird's random attention: each block of queries sees ``num_random`` other key blocks.

    The blocks are drawn by NumPy (``numpy_ref.random_block_mask``), so every twin draws
    the same ones for the same seed.
    Shapes: -> (T, T) with T = seq_len, True = may attend.
    """
    return torch.as_tensor(numpy_ref.random_block_mask(seq_len, block_size, num_random, seed))


def band_scores(queries: torch.Tensor, keys: torch.Tensor, half_width: int, causal: bool = False) -> torch.Tensor:
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
    idx, inside = (torch.as_tensor(a, device=keys.device) for a in _checks.window_index(t, w, causal))
    windows = F.pad(keys, (0, 0, w, w))[..., idx + w, :]  # (..., T, Tw, D): each query's keys
    scores = torch.einsum("...td,...twd->...tw", queries, windows) / math.sqrt(queries.shape[-1])
    return scores.masked_fill(~inside, float("-inf"))  # (..., T, Tw)


def banded_attention(
    queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, half_width: int, causal: bool = False
) -> torch.Tensor:
    """Sliding-window attention that computes only the window's scores: O(T * half_width) work.

    Equal to full attention under ``sliding_window_mask(T, half_width, causal)``.
    Shapes: queries (..., T, D), keys (..., T, D), values (..., T, Dv) -> (..., T, Dv).
    """
    values = _floats(values)
    t = _checks.self_attention(queries, keys, "banded_attention")
    checks.check_values(values, checks.shape_of(keys))
    w = _checks.half_width(half_width)
    weights = torch.softmax(band_scores(queries, keys, w, causal), dim=-1)  # (..., T, Tw); the query itself is always in
    idx = torch.as_tensor(_checks.window_index(t, w, causal)[0], device=values.device)
    windows = F.pad(values, (0, 0, w, w))[..., idx + w, :]  # (..., T, Tw, Dv)
    return torch.einsum("...tw,...twv->...tv", weights, windows)  # (..., T, Dv)


def elu_feature_map(x: torch.Tensor) -> torch.Tensor:
    """phi(x) = elu(x) + 1 (Katharopoulos et al., 2020): positive, so phi(q).phi(k) > 0.

    Shapes: x (..., D) -> (..., D).
    """
    return F.elu(_floats(x)) + 1.0


def linear_attention(
    queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, causal: bool = False
) -> torch.Tensor:
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
        state = phi_k.transpose(-1, -2) @ values  # (..., D, Dv)
        z = phi_k.sum(dim=-2)  # (..., D)
        return (phi_q @ state) / (phi_q @ z[..., None])  # (..., Tq, Dv)
    states = torch.cumsum(phi_k[..., :, :, None] * values[..., :, None, :], dim=-3)  # (..., T, D, Dv)
    z = torch.cumsum(phi_k, dim=-2)  # (..., T, D)
    numerator = torch.einsum("...td,...tdv->...tv", phi_q, states)  # (..., T, Dv)
    return numerator / torch.einsum("...td,...td->...t", phi_q, z)[..., None]


def kernel_attention(
    queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, causal: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
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
    sim = elu_feature_map(queries) @ elu_feature_map(keys).transpose(-1, -2)  # (..., Tq, Tk)
    if causal:
        sim = sim.masked_fill(~attention.causal_mask(q[-2], k[-2]).to(sim.device), 0.0)
    total = sim.sum(dim=-1, keepdim=True)
    weights = sim / torch.where(total == 0, torch.ones_like(total), total)  # a causal row with no key (Tq > Tk): zeros
    return weights @ values, weights
