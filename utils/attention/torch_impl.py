"""PyTorch twin of the attention core (same names and signatures as keras_impl).

Shapes: B batch, Tq queries, Tk keys, D query/key width, Dv value width,
A additive hidden width; ``...`` are leading batch dims. Masks are boolean
keep-masks (True = may attend) broadcastable to (..., Tq, Tk).
"""
from __future__ import annotations

import math

import torch
from torch import nn

from . import _checks

__all__ = [
    "masked_softmax",
    "dot_scores",
    "additive_scores",
    "gaussian_kernel_scores",
    "attend",
    "scaled_dot_product_attention",
    "additive_attention",
    "AdditiveAttention",
]


def masked_softmax(scores: torch.Tensor, mask: torch.Tensor | None = None, temperature: float = 1.0) -> torch.Tensor:
    """Softmax over the last axis, giving masked-out positions exactly zero weight.

    A row whose every position is masked gets all zeros (not NaN).
    Shapes: scores (..., Tq, Tk), mask broadcastable to it -> (..., Tq, Tk).
    """
    _checks.check_temperature(temperature)
    _checks.check_mask(mask, scores.shape)
    scores = scores / temperature
    if mask is None:
        return torch.softmax(scores, dim=-1)
    scores = scores.masked_fill(~mask, float("-inf"))
    row_max = scores.amax(dim=-1, keepdim=True)
    row_max = torch.where(torch.isfinite(row_max), row_max, torch.zeros_like(row_max))
    e = torch.exp(scores - row_max)  # exp(-inf) = 0 for masked positions
    total = e.sum(dim=-1, keepdim=True)
    return e / torch.where(total == 0, torch.ones_like(total), total)


def dot_scores(queries: torch.Tensor, keys: torch.Tensor, scale: bool = True) -> torch.Tensor:
    """Dot-product scores q.k, divided by sqrt(D) when ``scale``.

    Shapes: queries (..., Tq, D), keys (..., Tk, D) -> (..., Tq, Tk).
    """
    _checks.check_queries_keys(queries, keys)
    scores = queries @ keys.transpose(-1, -2)  # (..., Tq, Tk)
    if scale:
        scores = scores / math.sqrt(queries.shape[-1])
    return scores


def additive_scores(
    queries: torch.Tensor, keys: torch.Tensor, W_q: torch.Tensor, W_k: torch.Tensor, w_v: torch.Tensor
) -> torch.Tensor:
    """Additive (Bahdanau) scores w_v . tanh(q W_q + k W_k).

    Shapes: queries (..., Tq, D), keys (..., Tk, Dk), W_q (D, A), W_k (Dk, A),
    w_v (A,) -> (..., Tq, Tk).
    """
    q, k = _checks.check_queries_keys(queries, keys, same_width=False)
    _checks.check_additive_weights(q, k, W_q, W_k, w_v)
    q_proj = (queries @ W_q).unsqueeze(-2)  # (..., Tq, 1, A)
    k_proj = (keys @ W_k).unsqueeze(-3)  # (..., 1, Tk, A)
    return torch.tanh(q_proj + k_proj) @ w_v  # (..., Tq, Tk)


def gaussian_kernel_scores(queries: torch.Tensor, keys: torch.Tensor, width: float | torch.Tensor) -> torch.Tensor:
    """Nadaraya-Watson scores -((q - k) * width)^2 / 2 for scalar inputs.

    Shapes: queries (..., Tq), keys (..., Tk) -> (..., Tq, Tk).
    """
    diff = queries.unsqueeze(-1) - keys.unsqueeze(-2)  # (..., Tq, Tk)
    return -((diff * width) ** 2) / 2


def attend(weights: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """Weighted sum of values: the 'read' of a soft lookup.

    Shapes: weights (..., Tq, Tk), values (..., Tk, Dv) -> (..., Tq, Dv).
    """
    w = _checks.shape_of(weights)
    v = _checks.shape_of(values)
    if len(v) < 2 or v[-2] != w[-1]:
        raise ValueError(f"values: expected (..., Tk, Dv) with Tk={w[-1]} from weights {w}, got {v}")
    return weights @ values


def scaled_dot_product_attention(
    queries: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    mask: torch.Tensor | None = None,
    temperature: float = 1.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(q k^T / sqrt(D)) v, with an optional keep-mask.

    Shapes: queries (..., Tq, D), keys (..., Tk, D), values (..., Tk, Dv)
    -> output (..., Tq, Dv), weights (..., Tq, Tk).
    """
    _, k = _checks.check_queries_keys(queries, keys)
    _checks.check_values(values, k)
    weights = masked_softmax(dot_scores(queries, keys), mask, temperature)  # (..., Tq, Tk)
    return attend(weights, values), weights


def additive_attention(
    queries: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    W_q: torch.Tensor,
    W_k: torch.Tensor,
    w_v: torch.Tensor,
    mask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Additive attention with given weights.

    Shapes: queries (..., Tq, D), keys (..., Tk, Dk), values (..., Tk, Dv)
    -> output (..., Tq, Dv), weights (..., Tq, Tk).
    """
    _, k = _checks.check_queries_keys(queries, keys, same_width=False)
    _checks.check_values(values, k)
    weights = masked_softmax(additive_scores(queries, keys, W_q, W_k, w_v), mask)
    return attend(weights, values), weights


class AdditiveAttention(nn.Module):
    """Additive attention with learned W_q (D, A), W_k (Dk, A) and w_v (A,).

    Shapes: forward(queries (..., Tq, D), keys (..., Tk, Dk), values (..., Tk, Dv), mask)
    -> output (..., Tq, Dv), weights (..., Tq, Tk).
    """

    def __init__(self, d_query: int, d_key: int, d_attn: int) -> None:
        super().__init__()
        self.W_q = nn.Parameter(torch.empty(d_query, d_attn))
        self.W_k = nn.Parameter(torch.empty(d_key, d_attn))
        self.w_v = nn.Parameter(torch.empty(d_attn))
        nn.init.xavier_uniform_(self.W_q)
        nn.init.xavier_uniform_(self.W_k)
        nn.init.uniform_(self.w_v, -1 / math.sqrt(d_attn), 1 / math.sqrt(d_attn))

    def forward(
        self,
        queries: torch.Tensor,
        keys: torch.Tensor,
        values: torch.Tensor,
        mask: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        return additive_attention(queries, keys, values, self.W_q, self.W_k, self.w_v, mask)
