"""The one place where the course's mask convention meets the libraries' conventions.

The course uses one mask everywhere: a boolean **keep-mask**, True = may
attend, broadcastable to the scores (B, H, Tq, Tk). The libraries differ:

=============================================  ==========================  ==================
library argument                               shape                       True means
=============================================  ==========================  ==================
``torch.nn.MultiheadAttention(attn_mask=)``    (Tq, Tk) or (B*H, Tq, Tk)   may NOT attend
``torch.nn.MultiheadAttention(key_padding_mask=)``  (B, Tk)                may NOT attend
``torch.nn.functional.scaled_dot_product_attention(attn_mask=)``  broadcastable to (B, H, Tq, Tk)  may attend
``keras.layers.MultiHeadAttention(attention_mask=)``  (B, Tq, Tk)          may attend
=============================================  ==========================  ==================

Mixing these up is how public tutorials leaked future tokens, so every
conversion goes through this module and is tested against the library on a
causal case. The module imports no framework at import time; each converter
imports the one it needs when called.

Shapes: letters of ``utils/shapes.py``; here B batch, H heads, Tq queries, Tk keys.
"""
from __future__ import annotations

from typing import Any

from ..checks import shape_of

__all__ = [
    "to_torch_attn_mask",
    "to_torch_key_padding_mask",
    "from_torch_attn_mask",
    "from_torch_key_padding_mask",
    "to_torch_sdpa_mask",
    "to_keras_attention_mask",
    "from_keras_attention_mask",
]


def _check_bool(name: str, mask: Any) -> tuple:
    dtype = str(getattr(mask, "dtype", type(mask).__name__))
    if "bool" not in dtype:
        raise ValueError(f"{name}: expected a boolean mask, got dtype {dtype}")
    return shape_of(mask)


def _check_broadcast(name: str, m: tuple, target: tuple) -> None:
    ok = len(m) <= len(target) and all(a == 1 or a == b for a, b in zip(m[::-1], target[::-1]))
    if not ok:
        raise ValueError(f"{name}: expected a shape broadcastable to {target} (B, H, Tq, Tk), got {m}")


def to_torch_attn_mask(mask: Any, batch_size: int, num_heads: int, num_queries: int, num_keys: int) -> Any:
    """Course keep-mask -> ``attn_mask`` of ``torch.nn.MultiheadAttention`` (True = blocked).

    A mask without batch and head axes stays (Tq, Tk); otherwise it is expanded
    to one matrix per (example, head), in the order torch expects (b * H + h).
    Shapes: mask broadcastable to (B, H, Tq, Tk) -> (Tq, Tk) or (B*H, Tq, Tk).
    """
    import torch

    m = _check_bool("mask", mask)
    target = (batch_size, num_heads, num_queries, num_keys)
    _check_broadcast("mask", m, target)
    mask = torch.as_tensor(mask)
    if len(m) <= 2:
        return ~mask.expand(num_queries, num_keys)  # (Tq, Tk)
    full = mask.expand(*target)  # (B, H, Tq, Tk)
    return ~full.reshape(batch_size * num_heads, num_queries, num_keys)  # (B*H, Tq, Tk)


def to_torch_key_padding_mask(keep: Any) -> Any:
    """Course per-key keep-mask -> ``key_padding_mask`` (True = padding, ignore).

    Accepts the (B, Tk) keep vector or the (B, 1, 1, Tk) output of ``padding_mask``.
    Shapes: (B, Tk) or (B, 1, 1, Tk) -> (B, Tk).
    """
    import torch

    m = _check_bool("keep", keep)
    keep = torch.as_tensor(keep)
    if len(m) == 4 and m[1] == 1 and m[2] == 1:
        keep = keep[:, 0, 0, :]  # (B, Tk)
    elif len(m) != 2:
        raise ValueError(f"keep: expected (B, Tk) or (B, 1, 1, Tk), got {m}")
    return ~keep  # (B, Tk)


def from_torch_attn_mask(attn_mask: Any, num_heads: int) -> Any:
    """``attn_mask`` of ``torch.nn.MultiheadAttention`` -> course keep-mask.

    A boolean mask is inverted; a float mask (added to the scores) keeps the
    positions where it is finite.
    Shapes: (Tq, Tk) -> (Tq, Tk); (B*H, Tq, Tk) -> (B, H, Tq, Tk).
    """
    import torch

    m = shape_of(attn_mask)
    keep = ~attn_mask if attn_mask.dtype == torch.bool else torch.isfinite(attn_mask)
    if len(m) == 2:
        return keep  # (Tq, Tk)
    if len(m) != 3 or m[0] % num_heads:
        raise ValueError(f"attn_mask: expected (Tq, Tk) or (B*H, Tq, Tk) with H={num_heads}, got {m}")
    return keep.reshape(m[0] // num_heads, num_heads, m[1], m[2])  # (B, H, Tq, Tk)


def from_torch_key_padding_mask(key_padding_mask: Any) -> Any:
    """``key_padding_mask`` (True = ignore) -> course keep-mask.

    Shapes: (B, Tk) -> (B, 1, 1, Tk).
    """
    m = _check_bool("key_padding_mask", key_padding_mask)
    if len(m) != 2:
        raise ValueError(f"key_padding_mask: expected (B, Tk), got {m}")
    return (~key_padding_mask)[:, None, None, :]  # (B, 1, 1, Tk)


def to_torch_sdpa_mask(mask: Any) -> Any:
    """Course keep-mask -> ``attn_mask`` of ``torch.nn.functional.scaled_dot_product_attention``.

    That function already uses keep-mask polarity (True = may attend), so this is
    the identity plus a check; it is here so that every conversion has one home.
    Shapes: broadcastable to (B, H, Tq, Tk) -> the same.
    """
    _check_bool("mask", mask)
    return mask


def to_keras_attention_mask(mask: Any, batch_size: int, num_queries: int, num_keys: int) -> Any:
    """Course keep-mask -> ``attention_mask`` of ``keras.layers.MultiHeadAttention``.

    Keras uses the same polarity (True = may attend) but one matrix per example,
    shared by all heads: a head axis longer than 1 cannot be expressed.
    Shapes: broadcastable to (B, 1, Tq, Tk) -> (B, Tq, Tk).
    """
    from keras import ops

    m = _check_bool("mask", mask)
    _check_broadcast("mask", m, (batch_size, 1, num_queries, num_keys))
    mask = ops.convert_to_tensor(mask)
    if len(m) == 4:
        mask = mask[:, 0]  # (B?, Tq?, Tk?)
    return ops.broadcast_to(mask, (batch_size, num_queries, num_keys))  # (B, Tq, Tk)


def from_keras_attention_mask(attention_mask: Any) -> Any:
    """``attention_mask`` of ``keras.layers.MultiHeadAttention`` -> course keep-mask.

    Shapes: (B, Tq, Tk) -> (B, 1, Tq, Tk).
    """
    from keras import ops

    m = shape_of(attention_mask)
    if len(m) != 3:
        raise ValueError(f"attention_mask: expected (B, Tq, Tk), got {m}")
    return ops.cast(attention_mask, "bool")[:, None]  # (B, 1, Tq, Tk)
