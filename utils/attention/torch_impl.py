"""PyTorch twin of the attention core (same names and signatures as keras_impl).

Shapes: letters of ``utils/shapes.py``; here B batch, Tq queries, Tk keys, D
query/key width, Dv value width, A additive hidden width, H heads, Dh = D / H;
``...`` are leading batch dims. Masks are boolean keep-masks (True = may attend)
broadcastable to (..., Tq, Tk).
"""
from __future__ import annotations

import math

import torch
from torch import nn

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


def masked_softmax(scores: torch.Tensor, mask: torch.Tensor | None = None, temperature: float = 1.0) -> torch.Tensor:
    """Softmax over the last axis, giving masked-out positions exactly zero weight.

    A row whose every position is masked gets all zeros (not NaN).
    Shapes: scores (..., Tq, Tk), mask broadcastable to it -> (..., Tq, Tk).
    """
    checks.check_temperature(temperature)
    checks.check_mask(mask, scores.shape)
    scores = scores / temperature
    if mask is None:
        return torch.softmax(scores, dim=-1)
    scores = scores.masked_fill(~mask, float("-inf"))
    row_max = scores.amax(dim=-1, keepdim=True)
    row_max = torch.where(torch.isfinite(row_max), row_max, torch.zeros_like(row_max))
    e = torch.exp(scores - row_max)  # exp(-inf) = 0 for masked positions
    total = e.sum(dim=-1, keepdim=True)
    return e / torch.where(total == 0, torch.ones_like(total), total)


def masked_log_softmax(scores: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """The log of ``masked_softmax``'s weights, computed in log space: a kept key far below its row's best
    gets its true (large negative) log-weight, never the -inf of a weight that underflowed to 0.

    -inf where the keep-mask is False; a row whose every position is masked is -inf everywhere (not NaN).
    Shapes: scores (..., Tq, Tk), mask broadcastable to it -> (..., Tq, Tk).
    """
    checks.check_mask(mask, scores.shape)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    row_max = scores.amax(dim=-1, keepdim=True)
    row_max = torch.where(torch.isfinite(row_max), row_max, torch.zeros_like(row_max))  # fully masked rows
    shifted = scores - row_max  # (..., Tq, Tk): <= 0 where kept, -inf where masked
    total = torch.exp(shifted).sum(dim=-1, keepdim=True)  # >= 1 wherever a position is kept, 0 where none is
    return shifted - torch.log(torch.where(total == 0, torch.ones_like(total), total))


def dot_scores(queries: torch.Tensor, keys: torch.Tensor, scale: bool = True) -> torch.Tensor:
    """Dot-product scores q.k, divided by sqrt(D) when ``scale``.

    Shapes: queries (..., Tq, D), keys (..., Tk, D) -> (..., Tq, Tk).
    """
    checks.check_queries_keys(queries, keys)
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
    q, k = checks.check_queries_keys(queries, keys, same_width=False)
    checks.check_additive_weights(q, k, W_q, W_k, w_v)
    q_proj = (queries @ W_q).unsqueeze(-2)  # (..., Tq, 1, A)
    k_proj = (keys @ W_k).unsqueeze(-3)  # (..., 1, Tk, A)
    return torch.tanh(q_proj + k_proj) @ w_v  # (..., Tq, Tk)


def gaussian_kernel_scores(queries: torch.Tensor, keys: torch.Tensor, width: float | torch.Tensor) -> torch.Tensor:
    """Nadaraya-Watson scores -((q - k) * width)^2 / 2 for scalar inputs.

    Shapes: queries (..., Tq), keys (..., Tk) -> (..., Tq, Tk).
    """
    diff = queries.unsqueeze(-1) - keys.unsqueeze(-2)  # (..., Tq, Tk)
    return -((diff * width) ** 2) / 2


def cosine_scores(queries: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    """Cosine similarity q.k / (|q| |k|) of every query with every key: direction only, in [-1, 1].

    A zero vector has no direction: its lengths count as 1e-8, so it scores 0 against everything.
    Shapes: queries (..., Tq, D), keys (..., Tk, D) -> (..., Tq, Tk).
    """
    checks.check_queries_keys(queries, keys)
    q = queries / queries.norm(dim=-1, keepdim=True).clamp_min(1e-8)  # (..., Tq, D), unit length
    k = keys / keys.norm(dim=-1, keepdim=True).clamp_min(1e-8)  # (..., Tk, D), unit length
    return q @ k.transpose(-1, -2)  # (..., Tq, Tk)


def attend(weights: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """Weighted sum of values: the 'read' of a soft lookup.

    Shapes: weights (..., Tq, Tk), values (..., Tk, Dv) -> (..., Tq, Dv).
    """
    w = checks.shape_of(weights)
    v = checks.shape_of(values)
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
    _, k = checks.check_queries_keys(queries, keys)
    checks.check_values(values, k)
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
    _, k = checks.check_queries_keys(queries, keys, same_width=False)
    checks.check_values(values, k)
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


# ----------------------------------------------------------------------------
# Masks and multi-head attention (lesson 5)
# ----------------------------------------------------------------------------


def causal_mask(num_queries: int, num_keys: int | None = None) -> torch.Tensor:
    """Keep-mask that lets query i see keys 0..i (and nothing in its future).

    With more keys than queries (a decoder fed a prefix) the queries are the
    last ``num_queries`` positions: query i sees keys 0..i + num_keys - num_queries.
    Shapes: -> (Tq, Tk), True = may attend.
    """
    num_keys = num_queries if num_keys is None else num_keys
    checks.check_positive_int("num_queries", num_queries)
    checks.check_positive_int("num_keys", num_keys)
    return torch.ones(num_queries, num_keys, dtype=torch.bool).tril(diagonal=num_keys - num_queries)


def padding_mask(lengths: torch.Tensor, max_len: int) -> torch.Tensor:
    """Keep-mask that hides the padding after each sequence's true length.

    Shapes: lengths (B,) -> (B, 1, 1, Tk=max_len), broadcastable to (B, H, Tq, Tk).
    """
    lengths = torch.as_tensor(lengths)
    checks.check_lengths(lengths.cpu(), max_len)
    keep = torch.arange(max_len, device=lengths.device)[None, :] < lengths[:, None]  # (B, Tk)
    return keep[:, None, None, :]  # (B, 1, 1, Tk)


def local_window_mask(centers: torch.Tensor, num_keys: int, half_width: int) -> torch.Tensor:
    """Keep-mask of Luong et al.'s local attention: query t sees only keys j with |j - p_t| <= D.

    ``centers`` holds the aligned source position p_t of every query (local-m:
    p_t = t; local-p: a position the network predicts, possibly fractional);
    ``half_width`` is D, so a window holds up to 2D + 1 keys. A window wider
    than the keys is global attention.
    Shapes: centers (Tq,) -> (Tq, Tk); centers (B, Tq) -> (B, 1, Tq, Tk),
    broadcastable to (B, H, Tq, Tk); Tk = num_keys. True = may attend.
    """
    c = torch.as_tensor(centers)
    checks.check_window(c.cpu(), num_keys, half_width)
    c = c if c.is_floating_point() else c.to(torch.float32)  # integers are exact in float32
    keys = torch.arange(num_keys, device=c.device, dtype=c.dtype)  # (Tk,)
    keep = (keys - c[..., None]).abs() <= half_width  # (..., Tq, Tk)
    return keep if keep.dim() == 2 else keep[:, None]  # (Tq, Tk) or (B, 1, Tq, Tk)


def top_k_mask(scores: torch.Tensor, k: int, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Keep-mask of the k largest scores of each row, chosen among the positions ``mask`` keeps.

    Top-k attention: ``masked_softmax(scores, top_k_mask(scores, k, mask))`` spreads each
    query's weight over its k best keys only. A masked position never takes one of the k
    places; a row that keeps fewer than k positions keeps all of them; ties with the k-th
    largest score are all kept.
    Shapes: scores (..., Tq, Tk), mask broadcastable to it -> (..., Tq, Tk), True = may attend.
    """
    checks.check_top_k(k, scores.shape)
    checks.check_mask(mask, scores.shape)
    allowed = scores if mask is None else scores.masked_fill(~mask, float("-inf"))  # a masked key cannot be among the best
    kth = allowed.topk(k, dim=-1).values[..., -1:]  # (..., Tq, 1): the k-th largest allowed score
    keep = allowed >= kth  # (..., Tq, Tk); where fewer than k are allowed, kth is -inf and all pass
    return keep if mask is None else keep & mask


def split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    """Cut the last axis into ``num_heads`` contiguous slices, one per head.

    Shapes: x (B, T, D) -> (B, H, T, Dh) with Dh = D / H.
    """
    b, t, d = checks.check_heads("x", x, num_heads)
    return x.reshape(b, t, num_heads, d // num_heads).transpose(1, 2)  # (B, H, T, Dh)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """Undo ``split_heads``: concatenate the heads along the feature axis.

    Shapes: x (B, H, T, Dh) -> (B, T, H * Dh).
    """
    b, h, t, dh = checks.check_rank("x", x, 4, "(B, H, T, Dh)")
    return x.transpose(1, 2).reshape(b, t, h * dh)  # (B, T, D)


def project(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None = None) -> torch.Tensor:
    """A dense projection, x @ w + b, with the bias added inside one BLAS call (addmm).

    The course's one implementation, used by multi-head attention and by the
    Transformer's and BERT's dense layers (``Linear``, the tied output layer).
    Shapes: x (..., D_in), w (D_in, D_out), b (D_out,) or None -> (..., D_out).
    """
    return x @ w if b is None else torch.addmm(b, x.reshape(-1, x.shape[-1]), w).reshape(*x.shape[:-1], w.shape[1])


def _heads(
    queries: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    w_qkv: torch.Tensor,
    b_qkv: torch.Tensor | None,
    num_heads: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Project queries, keys and values with their thirds of ``w_qkv``; split each into heads.

    Two fast paths give the same numbers with fewer matmuls and copies:

    * self-attention (``queries is keys is values``): one (D, 3D) matmul instead of
      three, then one copy that lays every head's slice side by side in memory, so the
      batched matmuls that follow need no further copies;
    * ``keys is values`` (cross-attention on an encoder's memory): one (D, 2D) matmul
      for the keys and the values.

    Shapes: queries (B, Tq, D), keys and values (B, Tk, D) -> q (B, H, Tq, Dh), k and v (B, H, Tk, Dh).
    """
    d = queries.shape[-1]
    if queries is keys and keys is values:  # fast path: self-attention
        b, t, _ = queries.shape
        qkv = project(queries, w_qkv, b_qkv)  # (B, T, 3D)
        qkv = qkv.reshape(b, t, 3, num_heads, d // num_heads).permute(2, 0, 3, 1, 4).contiguous()  # (3, B, H, T, Dh)
        q, k, v = qkv.unbind(0)
        return q, k, v
    wq, wk, wv = w_qkv.split(d, dim=1)  # each (D, D)
    bq, bk, bv = (None, None, None) if b_qkv is None else b_qkv.split(d)  # each (D,)
    q = project(queries, wq, bq)  # (B, Tq, D)
    if keys is values:  # fast path: keys and values from one input
        k, v = project(keys, w_qkv[:, d:], None if b_qkv is None else b_qkv[d:]).split(d, dim=-1)
    else:
        k, v = project(keys, wk, bk), project(values, wv, bv)  # (B, Tk, D)
    return split_heads(q, num_heads), split_heads(k, num_heads), split_heads(v, num_heads)


def _softmax_over_keys(scores: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Softmax along the last axis (the keys); masked-out keys get weight 0.

    Fast path: when no gradient is needed (inference), the softmax writes over the
    scores, so a (B, H, Tq, Tk) buffer is allocated once instead of twice; at long
    sequence lengths this is most of the memory the layer uses.
    Shapes: scores (B, H, Tq, Tk), mask broadcastable to it -> weights (B, H, Tq, Tk).
    """
    if mask is not None:
        return masked_softmax(scores, mask)
    if not scores.requires_grad:  # fast path: in place
        return torch.softmax(scores, dim=-1, out=scores)
    return torch.softmax(scores, dim=-1)


def _attention_core(
    queries: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    w_qkv: torch.Tensor,
    b_qkv: torch.Tensor | None,
    w_o: torch.Tensor,
    b_o: torch.Tensor | None,
    num_heads: int,
    mask: torch.Tensor | None,
    dropout: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Lesson 5's multi-head attention, one step per line (the speed tricks live, named,
    in ``_heads`` and ``_softmax_over_keys``)."""
    q, k, v = _heads(queries, keys, values, w_qkv, b_qkv, num_heads)  # (B, H, Tq, Dh), 2 x (B, H, Tk, Dh)
    # Scale q before the matmul: the same as scaling the scores, on Tq x Dh entries instead of Tq x Tk.
    scores = (q * (1.0 / math.sqrt(q.shape[-1]))) @ k.transpose(-1, -2)  # (B, H, Tq, Tk)
    weights = _softmax_over_keys(scores, mask)  # (B, H, Tq, Tk)
    attn = torch.nn.functional.dropout(weights, dropout) if dropout > 0 else weights
    heads = attn @ v  # (B, H, Tq, Dh): each head's weighted sum of its values
    out = project(merge_heads(heads), w_o, b_o)  # (B, Tq, H * Dh) -> (B, Tq, D)
    return out, weights


def multi_head_attention(
    queries: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    w_qkv: torch.Tensor,
    b_qkv: torch.Tensor | None,
    w_o: torch.Tensor,
    b_o: torch.Tensor | None,
    num_heads: int,
    mask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Multi-head attention with given weights, in the x @ W convention.

    ``w_qkv`` holds the query, key and value projections side by side
    ([W_q | W_k | W_v], each (D, D)); inside each, head h owns the columns
    h*Dh .. (h+1)*Dh. ``w_o`` maps the concatenated heads back to D.
    Shapes: queries (B, Tq, D), keys (B, Tk, D), values (B, Tk, D),
    w_qkv (D, 3D), b_qkv (3D,), w_o (D, D), b_o (D,), mask broadcastable to
    (B, H, Tq, Tk) -> output (B, Tq, D), weights (B, H, Tq, Tk).
    """
    checks.check_mha_inputs(queries, keys, values, w_qkv, b_qkv, w_o, b_o, num_heads)
    q, k = queries.shape, keys.shape
    checks.check_mask(mask, (q[0], num_heads, q[1], k[1]))
    return _attention_core(queries, keys, values, w_qkv, b_qkv, w_o, b_o, num_heads, mask, 0.0)


class MultiHeadAttention(nn.Module):
    """Multi-head attention from scratch: project, split into heads, attend, concatenate, project.

    Weights (x @ W convention): ``w_qkv`` (D, 3D) = [W_q | W_k | W_v], ``b_qkv`` (3D,),
    ``w_o`` (D, D), ``b_o`` (D,). ``to_library`` / ``from_library`` copy them to and
    from ``torch.nn.MultiheadAttention``. ``dropout`` applies to the attention
    weights in training mode (the returned weights are before dropout).
    Shapes: forward(queries (B, Tq, D), keys (B, Tk, D), values (B, Tk, D), mask
    broadcastable to (B, H, Tq, Tk)) -> output (B, Tq, D), weights (B, H, Tq, Tk).
    """

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0, bias: bool = True) -> None:
        super().__init__()
        checks.check_positive_int("d_model", d_model)
        checks.check_positive_int("num_heads", num_heads)
        if d_model % num_heads:
            raise ValueError(f"num_heads: expected a divisor of d_model={d_model}, got {num_heads}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout: expected a probability in [0, 1), got {dropout!r}")
        self.d_model, self.num_heads, self.d_head = d_model, num_heads, d_model // num_heads
        self.dropout, self.bias = float(dropout), bool(bias)
        self.w_qkv = nn.Parameter(torch.empty(d_model, 3 * d_model))
        self.w_o = nn.Parameter(torch.empty(d_model, d_model))
        self.b_qkv = nn.Parameter(torch.zeros(3 * d_model)) if bias else None
        self.b_o = nn.Parameter(torch.zeros(d_model)) if bias else None
        for w in (self.w_qkv[:, :d_model], self.w_qkv[:, d_model : 2 * d_model], self.w_qkv[:, 2 * d_model :], self.w_o):
            with torch.no_grad():
                w.copy_(nn.init.xavier_uniform_(torch.empty(d_model, d_model)))

    def forward(
        self,
        queries: torch.Tensor,
        keys: torch.Tensor,
        values: torch.Tensor,
        mask: torch.Tensor | None = None,
        training: bool | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        checks.check_mha_inputs(queries, keys, values, self.w_qkv, self.b_qkv, self.w_o, self.b_o, self.num_heads)
        q, k = queries.shape, keys.shape
        checks.check_mask(mask, (q[0], self.num_heads, q[1], k[1]))
        training = self.training if training is None else training
        p = self.dropout if training else 0.0
        return _attention_core(queries, keys, values, self.w_qkv, self.b_qkv, self.w_o, self.b_o, self.num_heads, mask, p)


def to_library(mha: MultiHeadAttention) -> nn.MultiheadAttention:
    """A ``torch.nn.MultiheadAttention`` (batch_first) holding copies of ``mha``'s weights.

    torch keeps weights in the x @ W.T convention: in_proj_weight = w_qkv.T.
    Shapes: w_qkv (D, 3D) -> in_proj_weight (3D, D); w_o (D, D) -> out_proj.weight (D, D).
    """
    if not isinstance(mha, MultiHeadAttention):
        raise ValueError(f"mha: expected a utils.attention.torch_impl.MultiHeadAttention, got {type(mha).__name__}")
    lib = nn.MultiheadAttention(mha.d_model, mha.num_heads, dropout=mha.dropout, bias=mha.bias, batch_first=True)
    lib = lib.to(device=mha.w_qkv.device, dtype=mha.w_qkv.dtype)
    with torch.no_grad():
        lib.in_proj_weight.copy_(mha.w_qkv.T)  # (3D, D)
        lib.out_proj.weight.copy_(mha.w_o.T)  # (D, D)
        if mha.bias:
            lib.in_proj_bias.copy_(mha.b_qkv)
            lib.out_proj.bias.copy_(mha.b_o)
    return lib.train(mha.training)


def from_library(layer: nn.MultiheadAttention) -> MultiHeadAttention:
    """The course's ``MultiHeadAttention`` holding copies of a ``torch.nn.MultiheadAttention``'s weights.

    Shapes: in_proj_weight (3D, D) -> w_qkv (D, 3D); out_proj.weight (D, D) -> w_o (D, D).
    """
    if not isinstance(layer, nn.MultiheadAttention):
        raise ValueError(f"layer: expected a torch.nn.MultiheadAttention, got {type(layer).__name__}")
    if layer.in_proj_weight is None or layer.bias_k is not None or layer.add_zero_attn:
        raise ValueError("layer: expected equal query/key/value widths, no bias_k/bias_v, no add_zero_attn")
    bias = layer.in_proj_bias is not None
    mha = MultiHeadAttention(layer.embed_dim, layer.num_heads, dropout=layer.dropout, bias=bias)
    mha = mha.to(device=layer.in_proj_weight.device, dtype=layer.in_proj_weight.dtype)
    with torch.no_grad():
        mha.w_qkv.copy_(layer.in_proj_weight.T)
        mha.w_o.copy_(layer.out_proj.weight.T)
        if bias:
            mha.b_qkv.copy_(layer.in_proj_bias)
            mha.b_o.copy_(layer.out_proj.bias)
    return mha.train(layer.training)
