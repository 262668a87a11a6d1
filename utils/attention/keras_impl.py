"""Keras 3 twin of the attention core (same names and signatures as torch_impl).

Written with ``keras.ops`` and run on the TensorFlow backend in the course.
Shapes: B batch, Tq queries, Tk keys, D query/key width, Dv value width,
A additive hidden width; ``...`` are leading batch dims. Masks are boolean
keep-masks (True = may attend) broadcastable to (..., Tq, Tk).
"""
from __future__ import annotations

import math
from typing import Any

from utils.runtime import prepare_tensorflow_env

prepare_tensorflow_env()

import keras  # noqa: E402
from keras import ops  # noqa: E402

from . import _checks  # noqa: E402

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

Tensor = Any  # a Keras / TensorFlow tensor, or anything ops.convert_to_tensor takes


def masked_softmax(scores: Tensor, mask: Tensor | None = None, temperature: float = 1.0) -> Tensor:
    """Softmax over the last axis, giving masked-out positions exactly zero weight.

    A row whose every position is masked gets all zeros (not NaN).
    Shapes: scores (..., Tq, Tk), mask broadcastable to it -> (..., Tq, Tk).
    """
    _checks.check_temperature(temperature)
    _checks.check_mask(mask, _checks.shape_of(scores))
    scores = ops.convert_to_tensor(scores) / temperature
    if mask is None:
        return ops.softmax(scores, axis=-1)
    mask = ops.convert_to_tensor(mask)
    scores = ops.where(mask, scores, float("-inf"))
    row_max = ops.max(scores, axis=-1, keepdims=True)
    row_max = ops.where(ops.isfinite(row_max), row_max, ops.zeros_like(row_max))
    e = ops.exp(scores - row_max)  # exp(-inf) = 0 for masked positions
    total = ops.sum(e, axis=-1, keepdims=True)
    return e / ops.where(total == 0, ops.ones_like(total), total)


def dot_scores(queries: Tensor, keys: Tensor, scale: bool = True) -> Tensor:
    """Dot-product scores q.k, divided by sqrt(D) when ``scale``.

    Shapes: queries (..., Tq, D), keys (..., Tk, D) -> (..., Tq, Tk).
    """
    _checks.check_queries_keys(queries, keys)
    scores = ops.matmul(queries, ops.swapaxes(keys, -1, -2))  # (..., Tq, Tk)
    if scale:
        scores = scores / math.sqrt(_checks.shape_of(queries)[-1])
    return scores


def additive_scores(queries: Tensor, keys: Tensor, W_q: Tensor, W_k: Tensor, w_v: Tensor) -> Tensor:
    """Additive (Bahdanau) scores w_v . tanh(q W_q + k W_k).

    Shapes: queries (..., Tq, D), keys (..., Tk, Dk), W_q (D, A), W_k (Dk, A),
    w_v (A,) -> (..., Tq, Tk).
    """
    q, k = _checks.check_queries_keys(queries, keys, same_width=False)
    _checks.check_additive_weights(q, k, W_q, W_k, w_v)
    q_proj = ops.expand_dims(ops.matmul(queries, W_q), -2)  # (..., Tq, 1, A)
    k_proj = ops.expand_dims(ops.matmul(keys, W_k), -3)  # (..., 1, Tk, A)
    return ops.tensordot(ops.tanh(q_proj + k_proj), w_v, axes=1)  # (..., Tq, Tk)


def gaussian_kernel_scores(queries: Tensor, keys: Tensor, width: float | Tensor) -> Tensor:
    """Nadaraya-Watson scores -((q - k) * width)^2 / 2 for scalar inputs.

    Shapes: queries (..., Tq), keys (..., Tk) -> (..., Tq, Tk).
    """
    diff = ops.expand_dims(queries, -1) - ops.expand_dims(keys, -2)  # (..., Tq, Tk)
    return -ops.square(diff * width) / 2


def attend(weights: Tensor, values: Tensor) -> Tensor:
    """Weighted sum of values: the 'read' of a soft lookup.

    Shapes: weights (..., Tq, Tk), values (..., Tk, Dv) -> (..., Tq, Dv).
    """
    w = _checks.shape_of(weights)
    v = _checks.shape_of(values)
    if len(v) < 2 or v[-2] != w[-1]:
        raise ValueError(f"values: expected (..., Tk, Dv) with Tk={w[-1]} from weights {w}, got {v}")
    return ops.matmul(weights, values)


def scaled_dot_product_attention(
    queries: Tensor,
    keys: Tensor,
    values: Tensor,
    mask: Tensor | None = None,
    temperature: float = 1.0,
) -> tuple[Tensor, Tensor]:
    """softmax(q k^T / sqrt(D)) v, with an optional keep-mask.

    Shapes: queries (..., Tq, D), keys (..., Tk, D), values (..., Tk, Dv)
    -> output (..., Tq, Dv), weights (..., Tq, Tk).
    """
    _, k = _checks.check_queries_keys(queries, keys)
    _checks.check_values(values, k)
    weights = masked_softmax(dot_scores(queries, keys), mask, temperature)  # (..., Tq, Tk)
    return attend(weights, values), weights


def additive_attention(
    queries: Tensor,
    keys: Tensor,
    values: Tensor,
    W_q: Tensor,
    W_k: Tensor,
    w_v: Tensor,
    mask: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """Additive attention with given weights.

    Shapes: queries (..., Tq, D), keys (..., Tk, Dk), values (..., Tk, Dv)
    -> output (..., Tq, Dv), weights (..., Tq, Tk).
    """
    _, k = _checks.check_queries_keys(queries, keys, same_width=False)
    _checks.check_values(values, k)
    weights = masked_softmax(additive_scores(queries, keys, W_q, W_k, w_v), mask)
    return attend(weights, values), weights


class AdditiveAttention(keras.layers.Layer):
    """Additive attention with learned W_q (D, A), W_k (Dk, A) and w_v (A,).

    Shapes: call(queries (..., Tq, D), keys (..., Tk, Dk), values (..., Tk, Dv), mask)
    -> output (..., Tq, Dv), weights (..., Tq, Tk).
    """

    def __init__(self, d_query: int, d_key: int, d_attn: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.d_query, self.d_key, self.d_attn = d_query, d_key, d_attn
        limit = 1 / math.sqrt(d_attn)
        self.W_q = self.add_weight(shape=(d_query, d_attn), initializer="glorot_uniform", name="W_q")
        self.W_k = self.add_weight(shape=(d_key, d_attn), initializer="glorot_uniform", name="W_k")
        self.w_v = self.add_weight(
            shape=(d_attn,), initializer=keras.initializers.RandomUniform(-limit, limit), name="w_v"
        )

    def call(
        self,
        queries: Tensor,
        keys: Tensor,
        values: Tensor,
        mask: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        return additive_attention(queries, keys, values, self.W_q, self.W_k, self.w_v, mask)

    def get_config(self) -> dict:
        return {**super().get_config(), "d_query": self.d_query, "d_key": self.d_key, "d_attn": self.d_attn}
