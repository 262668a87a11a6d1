"""Keras 3 twin of the attention core (same names and signatures as torch_impl).

Written with ``keras.ops`` and run on the TensorFlow backend in the course.
Shapes: letters of ``utils/shapes.py``; here B batch, Tq queries, Tk keys, D
query/key width, Dv value width, A additive hidden width, H heads, Dh = D / H;
``...`` are leading batch dims. Masks are boolean keep-masks (True = may attend)
broadcastable to (..., Tq, Tk).
"""
from __future__ import annotations

import math
from typing import Any

from utils.runtime import prepare_tensorflow_env

prepare_tensorflow_env()

import keras  # noqa: E402
import numpy as np  # noqa: E402
from keras import ops  # noqa: E402

from .. import checks  # noqa: E402

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
    "AdditiveAttention",
    "causal_mask",
    "padding_mask",
    "local_window_mask",
    "top_k_mask",
    "split_heads",
    "merge_heads",
    "project",
    "multi_head_attention",
    "MultiHeadAttention",
    "to_library",
    "from_library",
]

Tensor = Any  # a Keras / TensorFlow tensor, or anything ops.convert_to_tensor takes


def masked_softmax(scores: Tensor, mask: Tensor | None = None, temperature: float = 1.0) -> Tensor:
    """Softmax over the last axis, giving masked-out positions exactly zero weight.

    A row whose every position is masked gets all zeros (not NaN).
    Shapes: scores (..., Tq, Tk), mask broadcastable to it -> (..., Tq, Tk).
    """
    checks.check_temperature(temperature)
    checks.check_mask(mask, checks.shape_of(scores))
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


def masked_log_softmax(scores: Tensor, mask: Tensor | None = None) -> Tensor:
    """The log of ``masked_softmax``'s weights, computed in log space: a kept key far below its row's best
    gets its true (large negative) log-weight, never the -inf of a weight that underflowed to 0.

    -inf where the keep-mask is False; a row whose every position is masked is -inf everywhere (not NaN).
    Shapes: scores (..., Tq, Tk), mask broadcastable to it -> (..., Tq, Tk).
    """
    checks.check_mask(mask, checks.shape_of(scores))
    scores = ops.convert_to_tensor(scores)
    if mask is not None:
        scores = ops.where(ops.convert_to_tensor(mask), scores, float("-inf"))
    row_max = ops.max(scores, axis=-1, keepdims=True)
    row_max = ops.where(ops.isfinite(row_max), row_max, ops.zeros_like(row_max))  # fully masked rows
    shifted = scores - row_max  # (..., Tq, Tk): <= 0 where kept, -inf where masked
    total = ops.sum(ops.exp(shifted), axis=-1, keepdims=True)  # >= 1 wherever a position is kept, 0 where none is
    return shifted - ops.log(ops.where(total == 0, ops.ones_like(total), total))


def dot_scores(queries: Tensor, keys: Tensor, scale: bool = True) -> Tensor:
    """Dot-product scores q.k, divided by sqrt(D) when ``scale``.

    Shapes: queries (..., Tq, D), keys (..., Tk, D) -> (..., Tq, Tk).
    """
    checks.check_queries_keys(queries, keys)
    scores = ops.matmul(queries, ops.swapaxes(keys, -1, -2))  # (..., Tq, Tk)
    if scale:
        scores = scores / math.sqrt(checks.shape_of(queries)[-1])
    return scores


def additive_scores(queries: Tensor, keys: Tensor, W_q: Tensor, W_k: Tensor, w_v: Tensor) -> Tensor:
    """Additive (Bahdanau) scores w_v . tanh(q W_q + k W_k).

    Shapes: queries (..., Tq, D), keys (..., Tk, Dk), W_q (D, A), W_k (Dk, A),
    w_v (A,) -> (..., Tq, Tk).
    """
    q, k = checks.check_queries_keys(queries, keys, same_width=False)
    checks.check_additive_weights(q, k, W_q, W_k, w_v)
    q_proj = ops.expand_dims(ops.matmul(queries, W_q), -2)  # (..., Tq, 1, A)
    k_proj = ops.expand_dims(ops.matmul(keys, W_k), -3)  # (..., 1, Tk, A)
    return ops.tensordot(ops.tanh(q_proj + k_proj), w_v, axes=1)  # (..., Tq, Tk)


def gaussian_kernel_scores(queries: Tensor, keys: Tensor, width: float | Tensor) -> Tensor:
    """Nadaraya-Watson scores -((q - k) * width)^2 / 2 for scalar inputs.

    Shapes: queries (..., Tq), keys (..., Tk) -> (..., Tq, Tk).
    """
    diff = ops.expand_dims(queries, -1) - ops.expand_dims(keys, -2)  # (..., Tq, Tk)
    return -ops.square(diff * width) / 2


def cosine_scores(queries: Tensor, keys: Tensor) -> Tensor:
    """Cosine similarity q.k / (|q| |k|) of every query with every key: direction only, in [-1, 1].

    A zero vector has no direction: its lengths count as 1e-8, so it scores 0 against everything.
    Shapes: queries (..., Tq, D), keys (..., Tk, D) -> (..., Tq, Tk).
    """
    checks.check_queries_keys(queries, keys)
    q = queries / ops.maximum(ops.norm(queries, axis=-1, keepdims=True), 1e-8)  # (..., Tq, D), unit length
    k = keys / ops.maximum(ops.norm(keys, axis=-1, keepdims=True), 1e-8)  # (..., Tk, D), unit length
    return ops.matmul(q, ops.swapaxes(k, -1, -2))  # (..., Tq, Tk)


def attend(weights: Tensor, values: Tensor) -> Tensor:
    """Weighted sum of values: the 'read' of a soft lookup.

    Shapes: weights (..., Tq, Tk), values (..., Tk, Dv) -> (..., Tq, Dv).
    """
    w = checks.shape_of(weights)
    v = checks.shape_of(values)
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
    _, k = checks.check_queries_keys(queries, keys)
    checks.check_values(values, k)
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
    _, k = checks.check_queries_keys(queries, keys, same_width=False)
    checks.check_values(values, k)
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
        self.built = True  # every weight exists after construction

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


# ----------------------------------------------------------------------------
# Masks and multi-head attention (lesson 5)
# ----------------------------------------------------------------------------


def causal_mask(num_queries: int, num_keys: int | None = None) -> Tensor:
    """Keep-mask that lets query i see keys 0..i (and nothing in its future).

    With more keys than queries (a decoder fed a prefix) the queries are the
    last ``num_queries`` positions: query i sees keys 0..i + num_keys - num_queries.
    A length may also be a scalar tensor (``ops.shape(x)[1]`` of a step traced with
    an open length); Python lengths are checked.
    Shapes: -> (Tq, Tk), True = may attend.
    """
    num_keys = num_queries if num_keys is None else num_keys
    for name, n in (("num_queries", num_queries), ("num_keys", num_keys)):
        if not ops.is_tensor(n):  # a traced length is checked by the graph's shapes instead
            checks.check_positive_int(name, n)
    rows = ops.arange(num_queries)[:, None]  # (Tq, 1)
    cols = ops.arange(num_keys)[None, :]  # (1, Tk)
    return cols <= rows + (num_keys - num_queries)  # (Tq, Tk)


def padding_mask(lengths: Tensor, max_len: int) -> Tensor:
    """Keep-mask that hides the padding after each sequence's true length.

    Shapes: lengths (B,) -> (B, 1, 1, Tk=max_len), broadcastable to (B, H, Tq, Tk).
    """
    lengths = ops.convert_to_tensor(lengths)
    checks.check_lengths(ops.convert_to_numpy(lengths), max_len)
    keep = ops.arange(max_len)[None, :] < ops.cast(lengths, "int32")[:, None]  # (B, Tk)
    return keep[:, None, None, :]  # (B, 1, 1, Tk)


def local_window_mask(centers: Tensor, num_keys: int, half_width: int) -> Tensor:
    """Keep-mask of Luong et al.'s local attention: query t sees only keys j with |j - p_t| <= D.

    ``centers`` holds the aligned source position p_t of every query (local-m:
    p_t = t; local-p: a position the network predicts, possibly fractional);
    ``half_width`` is D, so a window holds up to 2D + 1 keys. A window wider
    than the keys is global attention.
    Shapes: centers (Tq,) -> (Tq, Tk); centers (B, Tq) -> (B, 1, Tq, Tk),
    broadcastable to (B, H, Tq, Tk); Tk = num_keys. True = may attend.
    """
    c = ops.convert_to_tensor(centers)
    checks.check_window(ops.convert_to_numpy(c), num_keys, half_width)
    if not keras.backend.is_float_dtype(c.dtype):
        c = ops.cast(c, "float32")  # integers are exact in float32
    keys = ops.arange(num_keys, dtype=c.dtype)  # (Tk,)
    keep = ops.abs(keys - ops.expand_dims(c, -1)) <= half_width  # (..., Tq, Tk)
    return keep if len(keep.shape) == 2 else ops.expand_dims(keep, 1)  # (Tq, Tk) or (B, 1, Tq, Tk)


def top_k_mask(scores: Tensor, k: int, mask: Tensor | None = None) -> Tensor:
    """Keep-mask of the k largest scores of each row, chosen among the positions ``mask`` keeps.

    Top-k attention: ``masked_softmax(scores, top_k_mask(scores, k, mask))`` spreads each
    query's weight over its k best keys only. A masked position never takes one of the k
    places; a row that keeps fewer than k positions keeps all of them; ties with the k-th
    largest score are all kept.
    Shapes: scores (..., Tq, Tk), mask broadcastable to it -> (..., Tq, Tk), True = may attend.
    """
    checks.check_top_k(k, checks.shape_of(scores))
    checks.check_mask(mask, checks.shape_of(scores))
    scores = ops.convert_to_tensor(scores)
    allowed = scores if mask is None else ops.where(mask, scores, float("-inf"))  # a masked key cannot be among the best
    kth = ops.top_k(allowed, k)[0][..., -1:]  # (..., Tq, 1): the k-th largest allowed score
    keep = allowed >= kth  # (..., Tq, Tk); where fewer than k are allowed, kth is -inf and all pass
    return keep if mask is None else ops.logical_and(keep, mask)


def split_heads(x: Tensor, num_heads: int) -> Tensor:
    """Cut the last axis into ``num_heads`` contiguous slices, one per head.

    Shapes: x (B, T, D) -> (B, H, T, Dh) with Dh = D / H.
    """
    _, _, d = checks.check_heads("x", x, num_heads)
    x = ops.reshape(x, (ops.shape(x)[0], ops.shape(x)[1], num_heads, d // num_heads))  # (B, T, H, Dh)
    return ops.transpose(x, (0, 2, 1, 3))  # (B, H, T, Dh)


def merge_heads(x: Tensor) -> Tensor:
    """Undo ``split_heads``: concatenate the heads along the feature axis.

    Shapes: x (B, H, T, Dh) -> (B, T, H * Dh).
    """
    _, h, _, dh = checks.check_rank("x", x, 4, "(B, H, T, Dh)")
    x = ops.transpose(x, (0, 2, 1, 3))  # (B, T, H, Dh)
    return ops.reshape(x, (ops.shape(x)[0], ops.shape(x)[1], h * dh))  # (B, T, D)


def project(x: Tensor, w: Tensor, b: Tensor | None = None) -> Tensor:
    """A dense projection, x @ w + b.

    The course's one implementation, used by multi-head attention and by the
    Transformer's and BERT's dense layers (``Linear``, the tied output layer).
    Shapes: x (..., D_in), w (D_in, D_out), b (D_out,) or None -> (..., D_out).
    """
    y = ops.matmul(x, w)
    return y if b is None else y + b


def _attention_core(
    queries: Tensor,
    keys: Tensor,
    values: Tensor,
    w_qkv: Tensor,
    b_qkv: Tensor | None,
    w_o: Tensor,
    b_o: Tensor | None,
    num_heads: int,
    mask: Tensor | None,
    dropout: float,
    seed: Any = None,
) -> tuple[Tensor, Tensor]:
    d = checks.shape_of(queries)[-1]
    if queries is keys and keys is values:  # self-attention: one matmul for q, k and v
        q, k, v = ops.split(project(queries, w_qkv, b_qkv), 3, axis=-1)  # 3 x (B, T, D)
    else:  # cross-attention: project each input with its third of the weights
        bq, bk, bv = (None, None, None) if b_qkv is None else (b_qkv[:d], b_qkv[d : 2 * d], b_qkv[2 * d :])
        q = project(queries, w_qkv[:, :d], bq)  # (B, Tq, D)
        if keys is values:
            k, v = ops.split(project(keys, w_qkv[:, d:], None if b_qkv is None else b_qkv[d:]), 2, axis=-1)
        else:
            k, v = project(keys, w_qkv[:, d : 2 * d], bk), project(values, w_qkv[:, 2 * d :], bv)  # (B, Tk, D)
    q = split_heads(q, num_heads)  # (B, H, Tq, Dh)
    k = split_heads(k, num_heads)  # (B, H, Tk, Dh)
    v = split_heads(v, num_heads)  # (B, H, Tk, Dh)
    # Scale q before the matmul: the same numbers as scaling the scores, on Tq x Dh
    # entries instead of Tq x Tk.
    q = q * (1.0 / math.sqrt(d // num_heads))
    scores = ops.matmul(q, ops.swapaxes(k, -1, -2))  # (B, H, Tq, Tk)
    weights = ops.softmax(scores, axis=-1) if mask is None else masked_softmax(scores, mask)  # (B, H, Tq, Tk)
    attn = keras.random.dropout(weights, dropout, seed=seed) if dropout > 0 else weights
    out = project(merge_heads(ops.matmul(attn, v)), w_o, b_o)  # (B, Tq, D)
    return out, weights


def multi_head_attention(
    queries: Tensor,
    keys: Tensor,
    values: Tensor,
    w_qkv: Tensor,
    b_qkv: Tensor | None,
    w_o: Tensor,
    b_o: Tensor | None,
    num_heads: int,
    mask: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """Multi-head attention with given weights, in the x @ W convention.

    ``w_qkv`` holds the query, key and value projections side by side
    ([W_q | W_k | W_v], each (D, D)); inside each, head h owns the columns
    h*Dh .. (h+1)*Dh. ``w_o`` maps the concatenated heads back to D.
    Shapes: queries (B, Tq, D), keys (B, Tk, D), values (B, Tk, D),
    w_qkv (D, 3D), b_qkv (3D,), w_o (D, D), b_o (D,), mask broadcastable to
    (B, H, Tq, Tk) -> output (B, Tq, D), weights (B, H, Tq, Tk).
    """
    checks.check_mha_inputs(queries, keys, values, w_qkv, b_qkv, w_o, b_o, num_heads)
    q, k = checks.shape_of(queries), checks.shape_of(keys)
    checks.check_mask(mask, (q[0], num_heads, q[1], k[1]))
    return _attention_core(queries, keys, values, w_qkv, b_qkv, w_o, b_o, num_heads, mask, 0.0)


def _qkv_initializer(d_model: int) -> Any:
    glorot = keras.initializers.GlorotUniform()

    def init(shape: Any, dtype: Any = None) -> Tensor:
        # Glorot per (D, D) block, as if W_q, W_k and W_v were separate layers.
        return ops.concatenate([glorot((d_model, d_model), dtype=dtype) for _ in range(3)], axis=1)

    return init


class MultiHeadAttention(keras.layers.Layer):
    """Multi-head attention from scratch: project, split into heads, attend, concatenate, project.

    Weights (x @ W convention): ``w_qkv`` (D, 3D) = [W_q | W_k | W_v], ``b_qkv`` (3D,),
    ``w_o`` (D, D), ``b_o`` (D,). ``to_library`` / ``from_library`` copy them to and
    from ``keras.layers.MultiHeadAttention``. ``dropout`` applies to the attention
    weights in training mode (the returned weights are before dropout).
    Shapes: call(queries (B, Tq, D), keys (B, Tk, D), values (B, Tk, D), mask
    broadcastable to (B, H, Tq, Tk)) -> output (B, Tq, D), weights (B, H, Tq, Tk).
    """

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0, bias: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        checks.check_positive_int("d_model", d_model)
        checks.check_positive_int("num_heads", num_heads)
        if d_model % num_heads:
            raise ValueError(f"num_heads: expected a divisor of d_model={d_model}, got {num_heads}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout: expected a probability in [0, 1), got {dropout!r}")
        self.d_model, self.num_heads, self.d_head = d_model, num_heads, d_model // num_heads
        self.dropout, self.bias = float(dropout), bool(bias)
        self.w_qkv = self.add_weight(shape=(d_model, 3 * d_model), initializer=_qkv_initializer(d_model), name="w_qkv")
        self.w_o = self.add_weight(shape=(d_model, d_model), initializer="glorot_uniform", name="w_o")
        self.b_qkv = self.add_weight(shape=(3 * d_model,), initializer="zeros", name="b_qkv") if bias else None
        self.b_o = self.add_weight(shape=(d_model,), initializer="zeros", name="b_o") if bias else None
        self._seed = keras.random.SeedGenerator()
        self.built = True  # every weight exists after construction

    def call(
        self,
        queries: Tensor,
        keys: Tensor,
        values: Tensor,
        mask: Tensor | None = None,
        training: bool | None = None,
    ) -> tuple[Tensor, Tensor]:
        checks.check_mha_inputs(queries, keys, values, self.w_qkv, self.b_qkv, self.w_o, self.b_o, self.num_heads)
        q, k = checks.shape_of(queries), checks.shape_of(keys)
        checks.check_mask(mask, (q[0], self.num_heads, q[1], k[1]))
        p = self.dropout if training else 0.0
        return _attention_core(
            queries, keys, values, self.w_qkv, self.b_qkv, self.w_o, self.b_o, self.num_heads, mask, p, self._seed
        )

    def compute_mask(self, *args: Any, **kwargs: Any) -> None:
        return None

    def get_config(self) -> dict:
        return {
            **super().get_config(),
            "d_model": self.d_model,
            "num_heads": self.num_heads,
            "dropout": self.dropout,
            "bias": self.bias,
        }


def to_library(mha: MultiHeadAttention) -> keras.layers.MultiHeadAttention:
    """A built ``keras.layers.MultiHeadAttention`` holding copies of ``mha``'s weights.

    Keras keeps one EinsumDense per projection with the heads as their own axis.
    Shapes: w_qkv (D, 3D) -> query/key/value kernels (D, H, Dh) and biases (H, Dh);
    w_o (D, D) -> output kernel (H, Dh, D).
    """
    if not isinstance(mha, MultiHeadAttention):
        raise ValueError(f"mha: expected a utils.attention.keras_impl.MultiHeadAttention, got {type(mha).__name__}")
    d, h, dh = mha.d_model, mha.num_heads, mha.d_head
    lib = keras.layers.MultiHeadAttention(num_heads=h, key_dim=dh, dropout=mha.dropout, use_bias=mha.bias, dtype=mha.dtype_policy)
    lib.build(query_shape=(None, None, d), value_shape=(None, None, d), key_shape=(None, None, d))
    w = ops.convert_to_numpy(mha.w_qkv)
    denses = (lib.query_dense, lib.key_dense, lib.value_dense)
    for i, dense in enumerate(denses):
        dense.kernel.assign(w[:, i * d : (i + 1) * d].reshape(d, h, dh))  # (D, H, Dh)
    lib.output_dense.kernel.assign(ops.convert_to_numpy(mha.w_o).reshape(h, dh, d))  # (H, Dh, D)
    if mha.bias:
        b = ops.convert_to_numpy(mha.b_qkv)
        for i, dense in enumerate(denses):
            dense.bias.assign(b[i * d : (i + 1) * d].reshape(h, dh))  # (H, Dh)
        lib.output_dense.bias.assign(ops.convert_to_numpy(mha.b_o))
    return lib


def from_library(layer: keras.layers.MultiHeadAttention) -> MultiHeadAttention:
    """The course's ``MultiHeadAttention`` holding copies of a built ``keras.layers.MultiHeadAttention``'s weights.

    Shapes: query/key/value kernels (D, H, Dh) -> w_qkv (D, 3D); output kernel (H, Dh, D) -> w_o (D, D).
    """
    if not isinstance(layer, keras.layers.MultiHeadAttention):
        raise ValueError(f"layer: expected a keras.layers.MultiHeadAttention, got {type(layer).__name__}")
    if not layer.built:
        raise ValueError("layer: expected a built layer (call it once or call build()), got an unbuilt one")
    h, dh = layer.num_heads, layer.key_dim
    d = h * dh
    kernels = [ops.convert_to_numpy(x.kernel) for x in (layer.query_dense, layer.key_dense, layer.value_dense)]
    out_kernel = ops.convert_to_numpy(layer.output_dense.kernel)
    if any(k.shape != (d, h, dh) for k in kernels) or out_kernel.shape != (h, dh, d) or layer.value_dim != dh:
        raise ValueError(
            f"layer: expected kernels (D, H, Dh)=({d}, {h}, {dh}) and output (H, Dh, D) with D = H * key_dim, got "
            f"{[k.shape for k in kernels]} and {out_kernel.shape}"
        )
    mha = MultiHeadAttention(d, h, dropout=layer.dropout, bias=layer.use_bias, dtype=layer.dtype_policy)
    mha.w_qkv.assign(np.concatenate([k.reshape(d, d) for k in kernels], axis=1))  # (D, 3D)
    mha.w_o.assign(out_kernel.reshape(d, d))  # (D, D)
    if layer.use_bias:
        biases = [ops.convert_to_numpy(x.bias).reshape(d) for x in (layer.query_dense, layer.key_dense, layer.value_dense)]
        mha.b_qkv.assign(np.concatenate(biases))
        mha.b_o.assign(ops.convert_to_numpy(layer.output_dense.bias))
    return mha
