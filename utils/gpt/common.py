"""Framework-free parts of the GPT shared by both twins (and the NumPy reference).

* ``GPTConfig``: every size of the model in one typed place.
* ``init_weights``: GPT-2's initialisation as NumPy arrays under the twins' weight
  names, so that the PyTorch and the Keras model can start from the very same numbers.
* ``lr_schedule``: linear warm-up, then a cosine decay to a tenth of the peak.
* Sampling, on NumPy logits (``apply_temperature``, ``top_k_filter``,
  ``top_p_filter``, ``sample_next``): both twins hand their logits over, so the
  same logits and the same seed give the same tokens in both frameworks.
* ``generate_loop``: the decoding loop, written once; a twin passes a function
  that maps the new tokens to the logits of the next one (recomputing the prefix,
  or reading a KV cache).
* Costs computed from the sizes: ``kv_cache_bytes`` and ``decode_macs``.

Shapes: letters of ``utils/shapes.py``; here B batch, T sequence length, Tp prompt
length, V vocabulary size, D d_model, H heads, Hkv key-value heads, Dh = D / H,
F d_ff, L layers.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Callable

import numpy as np

from utils.checks import check_attention_sizes, check_positive_int

__all__ = [
    "GPTConfig",
    "init_weights",
    "lr_schedule",
    "apply_temperature",
    "top_k_filter",
    "top_p_filter",
    "typical_filter",
    "sample_next",
    "generate_loop",
    "kv_cache_bytes",
    "decode_macs",
]


@dataclass(frozen=True)
class GPTConfig:
    """Sizes of a decoder-only Transformer language model (GPT-2's layout, pre-LN, tied output).

    ``num_kv_heads``: the key-value heads of grouped-query attention; None (the
    default) means ``num_heads`` (multi-head attention), 1 is multi-query attention.
    ``d_ff``: None means 4 * d_model, as in GPT-2. ``max_len`` is the context: the
    number of learned positions.
    """

    vocab_size: int
    max_len: int = 128
    d_model: int = 64
    num_heads: int = 4
    num_layers: int = 4
    d_ff: int | None = None
    num_kv_heads: int | None = None
    layer_norm_eps: float = 1e-5

    def __post_init__(self) -> None:
        for name in ("vocab_size", "max_len", "d_model", "num_heads", "num_layers"):
            check_positive_int(name, getattr(self, name))
        check_attention_sizes(self.d_model, self.num_heads, 0.0, self.layer_norm_eps)
        if self.d_ff is not None:
            check_positive_int("d_ff", self.d_ff)
        check_kv_heads(self.num_heads, self.num_kv_heads)

    @property
    def ff_width(self) -> int:
        """F: the feed-forward width (``d_ff``, or 4 * d_model)."""
        return 4 * self.d_model if self.d_ff is None else self.d_ff

    @property
    def kv_heads(self) -> int:
        """Hkv: the key-value heads (``num_kv_heads``, or ``num_heads``)."""
        return self.num_heads if self.num_kv_heads is None else self.num_kv_heads

    def to_dict(self) -> dict:
        return asdict(self)


def check_kv_heads(num_heads: int, num_kv_heads: int | None) -> int:
    """Hkv, checked: a positive divisor of H (each key-value head serves H / Hkv query heads)."""
    if num_kv_heads is None:
        return num_heads
    check_positive_int("num_kv_heads", num_kv_heads)
    if num_heads % num_kv_heads:
        raise ValueError(f"num_kv_heads: expected a divisor of num_heads={num_heads}, got {num_kv_heads}")
    return num_kv_heads


def attention_widths(d_model: int, num_heads: int, num_kv_heads: int | None) -> tuple[int, int, int]:
    """(Dh, Hkv, width of w_qkv): queries take D columns, keys and values Hkv * Dh each."""
    kv = check_kv_heads(num_heads, num_kv_heads)
    d_head = d_model // num_heads
    return d_head, kv, d_model + 2 * kv * d_head


def init_weights(config: GPTConfig, seed: int = 0) -> dict[str, np.ndarray]:
    """GPT-2's initialisation under the twins' weight names, as float32 NumPy arrays.

    Every matrix and embedding is drawn from N(0, 0.02^2); the two projections that
    write into the residual stream (``attn.w_o``, ``ff.linear2.w``) from
    N(0, (0.02 / sqrt(2L))^2), so the stream's variance does not grow with depth;
    biases are 0, LayerNorm gains 1 and shifts 0.
    Shapes: token_embedding (V, D), position_embedding (max_len, D), per block
    attn.w_qkv (D, D + 2 Hkv Dh), attn.w_o (D, D), ff.linear1.w (D, F), ff.linear2.w (F, D).
    """
    if not isinstance(config, GPTConfig):
        raise ValueError(f"config: expected a GPTConfig, got {type(config).__name__}")
    rng = np.random.default_rng(seed)
    c, d, f = config, config.d_model, config.ff_width
    _, _, qkv = attention_widths(d, c.num_heads, c.num_kv_heads)
    small = 0.02 / math.sqrt(2 * c.num_layers)

    def normal(shape: tuple, std: float = 0.02) -> np.ndarray:
        return (rng.standard_normal(shape) * std).astype(np.float32)

    w = {"token_embedding": normal((c.vocab_size, d)), "position_embedding": normal((c.max_len, d))}
    for i in range(c.num_layers):
        p = f"blocks.{i}."
        w[p + "norm1.gamma"], w[p + "norm1.beta"] = np.ones(d, np.float32), np.zeros(d, np.float32)
        w[p + "attn.w_qkv"], w[p + "attn.b_qkv"] = normal((d, qkv)), np.zeros(qkv, np.float32)
        w[p + "attn.w_o"], w[p + "attn.b_o"] = normal((d, d), small), np.zeros(d, np.float32)
        w[p + "norm2.gamma"], w[p + "norm2.beta"] = np.ones(d, np.float32), np.zeros(d, np.float32)
        w[p + "ff.linear1.w"], w[p + "ff.linear1.b"] = normal((d, f)), np.zeros(f, np.float32)
        w[p + "ff.linear2.w"], w[p + "ff.linear2.b"] = normal((f, d), small), np.zeros(d, np.float32)
    w["final_norm.gamma"], w["final_norm.beta"] = np.ones(d, np.float32), np.zeros(d, np.float32)
    return w


def lr_schedule(step: int | np.ndarray, total_steps: int, peak: float, warmup_steps: int = 100) -> float | np.ndarray:
    """The learning rate of 0-based ``step``: linear warm-up to ``peak``, then a cosine down to peak / 10.

    Shapes: step a scalar or an array of any shape -> the same shape.
    """
    check_positive_int("total_steps", total_steps)
    check_positive_int("warmup_steps", warmup_steps)
    if not peak > 0:
        raise ValueError(f"peak: expected a positive learning rate, got {peak!r}")
    s = np.asarray(step, dtype=np.float64)
    warm = (s + 1) / warmup_steps
    done = np.clip((s - warmup_steps) / max(total_steps - warmup_steps, 1), 0.0, 1.0)
    lr = peak * np.where(s < warmup_steps, warm, 0.1 + 0.9 * 0.5 * (1 + np.cos(math.pi * done)))
    return float(lr) if lr.ndim == 0 else lr


# ----------------------------------------------------------------------------- sampling


def _logits(logits: np.ndarray) -> np.ndarray:
    x = np.asarray(logits, dtype=np.float64)
    if x.ndim < 1 or x.shape[-1] < 1:
        raise ValueError(f"logits: expected (..., V) with V >= 1, got shape {x.shape}")
    return x


def apply_temperature(logits: np.ndarray, temperature: float) -> np.ndarray:
    """Divide the logits by the temperature: below 1 sharpens the distribution, above 1 flattens it.

    Shapes: logits (..., V) -> (..., V) float64.
    """
    if not (isinstance(temperature, (int, float)) and temperature > 0):
        raise ValueError(f"temperature: expected a number > 0 (use sample_next's temperature=0 for greedy), got {temperature!r}")
    return _logits(logits) / float(temperature)


def top_k_filter(logits: np.ndarray, k: int) -> np.ndarray:
    """Keep the k largest logits of each row (and any that tie with the k-th); the others become -inf.

    Shapes: logits (..., V) -> (..., V) float64.
    """
    x = _logits(logits)
    check_positive_int("k", k)
    if k >= x.shape[-1]:
        return x.copy()
    kth = -np.partition(-x, k - 1, axis=-1)[..., k - 1 : k]  # (..., 1) the k-th largest logit
    return np.where(x >= kth, x, -np.inf)


def _check_p(p: float) -> None:
    if not (isinstance(p, (int, float)) and 0 < p <= 1):
        raise ValueError(f"p: expected a probability in (0, 1], got {p!r}")


def _keep_until_mass(x: np.ndarray, probs: np.ndarray, order: np.ndarray, p: float) -> np.ndarray:
    """The logits ``x`` with the tokens taken in ``order`` kept until their mass reaches ``p`` (the token
    that crosses ``p`` kept too), the others at -inf. Shapes: x, probs, order (..., V) -> (..., V)."""
    sorted_probs = np.take_along_axis(probs, order, axis=-1)
    mass_before = np.cumsum(sorted_probs, axis=-1) - sorted_probs  # (..., V) the mass of the tokens ahead
    keep_sorted = mass_before < p  # a token is needed while the ones ahead of it hold less than p
    keep = np.empty_like(keep_sorted)
    np.put_along_axis(keep, order, keep_sorted, axis=-1)
    return np.where(keep, x, -np.inf)


def top_p_filter(logits: np.ndarray, p: float) -> np.ndarray:
    """Nucleus filter: keep the smallest set of most likely tokens whose probability reaches ``p``.

    Tokens are taken in order of probability until their mass is at least ``p``;
    the token that crosses ``p`` is kept, so at least one token always is. Ties
    are broken by token id (the lower first).
    Shapes: logits (..., V) -> (..., V) float64, the dropped tokens at -inf.
    """
    x = _logits(logits)
    _check_p(p)
    probs = np.exp(x - x.max(axis=-1, keepdims=True))
    probs /= probs.sum(axis=-1, keepdims=True)  # (..., V)
    order = np.argsort(-probs, axis=-1, kind="stable")  # (..., V) most likely first
    return _keep_until_mass(x, probs, order, p)


def typical_filter(logits: np.ndarray, p: float) -> np.ndarray:
    """Locally typical filter (Meister et al., 2023): keep the tokens whose surprise is closest to the row's entropy.

    A token's surprise is -ln P; the entropy is its expected value. Tokens are taken in
    order of |surprise - entropy| (the most typical first) until their mass is at least
    ``p``; the token that crosses ``p`` is kept, so at least one token always is. Unlike
    top-p, this can drop the most likely token. Ties are broken by token id (the lower first).
    Shapes: logits (..., V) -> (..., V) float64, the dropped tokens at -inf.
    """
    x = _logits(logits)
    _check_p(p)
    log_probs = x - x.max(axis=-1, keepdims=True)
    log_probs = log_probs - np.log(np.exp(log_probs).sum(axis=-1, keepdims=True))  # (..., V) ln P
    probs = np.exp(log_probs)
    entropy = -(probs * np.where(probs > 0, log_probs, 0.0)).sum(axis=-1, keepdims=True)  # (..., 1) in nats; 0 ln 0 = 0
    distance = np.abs(-log_probs - entropy)  # (..., V) how far each token's surprise is from the expected one
    order = np.argsort(distance, axis=-1, kind="stable")  # (..., V) the most typical first
    return _keep_until_mass(x, probs, order, p)


def sample_next(
    logits: np.ndarray,
    rng: np.random.Generator,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
) -> np.ndarray:
    """Draw one token per row from the logits: temperature, then top-k, then top-p, then a draw.

    ``temperature=0`` is greedy decoding (the arg-max; ``rng`` is not used). The draw
    is by inverse CDF: one uniform number u per row, and the first token whose
    cumulative probability exceeds u, so the same logits and the same ``rng`` give
    the same tokens in every framework.
    Shapes: logits (B, V) -> ids (B,) int64.
    """
    x = _logits(logits)
    if x.ndim != 2:
        raise ValueError(f"logits: expected (B, V), got shape {x.shape}")
    if temperature == 0:
        return x.argmax(axis=-1).astype(np.int64)
    x = apply_temperature(x, temperature)
    if top_k is not None:
        x = top_k_filter(x, top_k)
    if top_p is not None:
        x = top_p_filter(x, top_p)
    probs = np.exp(x - x.max(axis=-1, keepdims=True))  # (B, V), exactly 0 where filtered
    cdf = np.cumsum(probs / probs.sum(axis=-1, keepdims=True), axis=-1)  # (B, V)
    u = rng.random((x.shape[0], 1))  # (B, 1)
    ids = (cdf <= u).sum(axis=-1)  # the first token whose cumulative probability exceeds u
    last = x.shape[1] - 1 - np.argmax(np.isfinite(x)[:, ::-1], axis=-1)  # rounding: never past the last kept token
    return np.minimum(ids, last).astype(np.int64)


NextLogits = Callable[[np.ndarray], np.ndarray]


def generate_loop(
    next_logits: NextLogits,
    prompt: np.ndarray,
    num_tokens: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    seed: int = 0,
) -> np.ndarray:
    """Append ``num_tokens`` tokens to each prompt, one at a time.

    ``next_logits(new)`` gets the tokens the model has not read yet (first the whole
    prompt, then the one token just drawn) and returns the logits of the next
    token; whether it recomputes the prefix or reads a cache is its own affair.
    Shapes: prompt (B, Tp) -> ids (B, Tp + num_tokens); next_logits: (B, t) -> (B, V).
    """
    prompt = np.asarray(prompt)
    if prompt.ndim != 2 or prompt.shape[1] < 1 or prompt.dtype.kind not in "iu":
        raise ValueError(f"prompt: expected integer token ids (B, Tp) with Tp >= 1, got {prompt.dtype} {prompt.shape}")
    if not isinstance(num_tokens, (int, np.integer)) or isinstance(num_tokens, bool) or num_tokens < 0:
        raise ValueError(f"num_tokens: expected an int >= 0, got {num_tokens!r}")
    rng = np.random.default_rng(seed)
    ids = prompt.astype(np.int64)
    new = ids
    for _ in range(num_tokens):
        y = sample_next(np.asarray(next_logits(new)), rng, temperature, top_k, top_p)  # (B,)
        new = y[:, None]  # (B, 1)
        ids = np.concatenate([ids, new], axis=1)
    return ids


# ----------------------------------------------------------------------------- costs


def kv_cache_bytes(num_layers: int, batch: int, length: int, num_kv_heads: int, d_head: int, bytes_per_value: int = 4) -> int:
    """Memory of a KV cache: a key and a value vector per layer, sequence, position and key-value head.

    2 * L * B * T * Hkv * Dh * bytes (4 for float32, 2 for float16 and bfloat16).
    Shapes: none (sizes in, bytes out).
    """
    for name, value in (("num_layers", num_layers), ("batch", batch), ("length", length),
                        ("num_kv_heads", num_kv_heads), ("d_head", d_head), ("bytes_per_value", bytes_per_value)):
        check_positive_int(name, value)
    return 2 * num_layers * batch * length * num_kv_heads * d_head * bytes_per_value


def decode_macs(config: GPTConfig, length: int, cached: bool) -> int:
    """Multiply-adds one decoding step spends to produce the token after a prefix of ``length`` tokens.

    Per position and layer the weights cost D (D + 2 Hkv Dh) (q, k, v) + D D (w_o)
    + 2 D F (feed-forward); attention over t keys costs 2 t D (scores and the
    weighted sum); the output layer D V. With a cache only the newest position is
    computed (attending to ``length`` keys); without, every position again, with
    all their logits, as ``model(ids)`` does.
    Shapes: none.
    """
    check_positive_int("length", length)
    c, d = config, config.d_model
    _, _, qkv = attention_widths(d, c.num_heads, c.num_kv_heads)
    per_position = c.num_layers * (d * qkv + d * d + 2 * d * c.ff_width) + d * c.vocab_size
    if cached:
        return per_position + c.num_layers * 2 * length * d
    return length * per_position + c.num_layers * d * length * (length + 1)  # sum over t = 1..length of 2 t D
