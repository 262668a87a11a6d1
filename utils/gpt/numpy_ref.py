"""NumPy reference of the GPT: causal self-attention with a KV cache and grouped key-value
heads, and the whole model's forward pass, written for reading, not for speed.

Both twins are tested against it with the same weights (``init_weights``, or a
twin's ``export_weights``).

Shapes: letters of ``utils/shapes.py``; here B batch, T new positions, T' cached
positions, Tk = T' + T keys, D d_model, H heads, Hkv key-value heads, Dh = D / H,
V vocabulary size, L layers.
"""
from __future__ import annotations

import math

import numpy as np

from utils.attention.numpy_ref import causal_mask, masked_softmax

from .common import (GPTConfig, apply_temperature, attention_widths, init_weights, sample_next, top_k_filter,
                     top_p_filter, typical_filter)

__all__ = [
    "apply_temperature",
    "top_k_filter",
    "top_p_filter",
    "typical_filter",
    "sample_next",
    "causal_self_attention",
    "GPT",
    "export_weights",
    "load_weights",
]

Cache = tuple[np.ndarray, np.ndarray]


def _layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def _gelu(x: np.ndarray) -> np.ndarray:  # the exact (erf) form, as utils.transformer's FeedForward
    from math import erf

    return 0.5 * x * (1.0 + np.vectorize(erf)(x / math.sqrt(2.0)))


def causal_self_attention(
    x: np.ndarray,
    w_qkv: np.ndarray,
    b_qkv: np.ndarray | None,
    w_o: np.ndarray,
    b_o: np.ndarray | None,
    num_heads: int,
    num_kv_heads: int | None = None,
    cache: Cache | None = None,
) -> tuple[np.ndarray, Cache]:
    """Causal self-attention of new positions, given the keys and values of the earlier ones.

    ``w_qkv`` holds [W_q | W_k | W_v]: D columns for the queries, Hkv * Dh for the keys
    and as many for the values (with Hkv = H it is lesson 5's (D, 3D) layout). Query
    head h reads key-value head h // (H / Hkv). The new positions come after the
    ``cache``'s; each sees the cached keys and the new ones up to itself.
    Returns the output and the keys and values of all positions so far (the new cache).
    Shapes: x (B, T, D), cache (k, v) each (B, Hkv, T', Dh) or None
    -> y (B, T, D), (k, v) each (B, Hkv, Tk, Dh).
    """
    b, t, d = x.shape
    d_head, kv, _ = attention_widths(d, num_heads, num_kv_heads)
    qkv = x @ w_qkv + (0 if b_qkv is None else b_qkv)  # (B, T, D + 2 Hkv Dh)
    q = qkv[..., :d].reshape(b, t, num_heads, d_head).transpose(0, 2, 1, 3)  # (B, H, T, Dh)
    k = qkv[..., d : d + kv * d_head].reshape(b, t, kv, d_head).transpose(0, 2, 1, 3)  # (B, Hkv, T, Dh)
    v = qkv[..., d + kv * d_head :].reshape(b, t, kv, d_head).transpose(0, 2, 1, 3)  # (B, Hkv, T, Dh)
    if cache is not None:
        k = np.concatenate([cache[0], k], axis=2)  # (B, Hkv, Tk, Dh)
        v = np.concatenate([cache[1], v], axis=2)
    group = num_heads // kv
    k_h, v_h = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)  # (B, H, Tk, Dh): head h reads kv head h // group
    scores = q @ k_h.transpose(0, 1, 3, 2) / math.sqrt(d_head)  # (B, H, T, Tk)
    weights = masked_softmax(scores, causal_mask(t, k.shape[2]))  # the new queries are the last T positions
    heads = weights @ v_h  # (B, H, T, Dh)
    y = heads.transpose(0, 2, 1, 3).reshape(b, t, d) @ w_o + (0 if b_o is None else b_o)  # (B, T, D)
    return y, (k, v)


class GPT:
    """The whole GPT in NumPy: token + learned position embeddings, L pre-LN blocks, final
    LayerNorm, and the token embedding (transposed) as the output layer.

    ``weights`` starts as ``init_weights(config)``; ``load_weights`` replaces it.
    Shapes: GPT(config)(ids (B, T), cache L x (k, v) or None) -> logits (B, T, V), L x (k, v).
    """

    def __init__(self, config: GPTConfig) -> None:
        if not isinstance(config, GPTConfig):
            raise ValueError(f"config: expected a GPTConfig, got {type(config).__name__}")
        self.config = config
        self.weights = init_weights(config)

    def __call__(self, ids: np.ndarray, cache: list[Cache] | None = None) -> tuple[np.ndarray, list[Cache]]:
        c, w = self.config, {k: np.asarray(v, dtype=np.float64) for k, v in self.weights.items()}
        ids = np.asarray(ids)
        past = 0 if cache is None else cache[0][0].shape[2]
        x = w["token_embedding"][ids] + w["position_embedding"][past : past + ids.shape[1]]  # (B, T, D)
        new_cache = []
        for i in range(c.num_layers):
            p = f"blocks.{i}."
            h = _layer_norm(x, w[p + "norm1.gamma"], w[p + "norm1.beta"], c.layer_norm_eps)
            a, kv = causal_self_attention(h, w[p + "attn.w_qkv"], w[p + "attn.b_qkv"], w[p + "attn.w_o"],
                                          w[p + "attn.b_o"], c.num_heads, c.num_kv_heads,
                                          None if cache is None else cache[i])
            x = x + a
            h = _layer_norm(x, w[p + "norm2.gamma"], w[p + "norm2.beta"], c.layer_norm_eps)
            x = x + _gelu(h @ w[p + "ff.linear1.w"] + w[p + "ff.linear1.b"]) @ w[p + "ff.linear2.w"] + w[p + "ff.linear2.b"]
            new_cache.append(kv)
        x = _layer_norm(x, w["final_norm.gamma"], w["final_norm.beta"], c.layer_norm_eps)
        return x @ w["token_embedding"].T, new_cache  # (B, T, V): the output layer is the embedding, tied


def export_weights(model: GPT) -> dict[str, np.ndarray]:
    """The model's weights under the names both twins share.

    Shapes: every array keeps its shape.
    """
    return {k: np.array(v, copy=True) for k, v in model.weights.items()}


def load_weights(model: GPT, weights: dict[str, np.ndarray]) -> None:
    """Replace the model's weights by ``weights`` (from ``init_weights`` or a twin's ``export_weights``).

    Shapes: each array must have the shape of the weight of the same name.
    """
    missing, unexpected = sorted(set(model.weights) - set(weights)), sorted(set(weights) - set(model.weights))
    if missing or unexpected:
        raise ValueError(f"weights: expected the names of the model's weights; missing {missing[:5]}, unexpected {unexpected[:5]}")
    for name, old in model.weights.items():
        new = np.asarray(weights[name])
        if new.shape != old.shape:
            raise ValueError(f"weights[{name!r}]: expected shape {old.shape}, got {new.shape}")
    model.weights = {k: np.array(weights[k], dtype=np.float32, copy=True) for k in model.weights}
