"""Keras 3 twin of the GPT (same names and signatures as torch_impl).

What lesson 8 writes step by step, with what the lesson leaves out: input checks,
grouped key-value heads, the KV cache in every layer, the training loop (the lesson writes its step
and checks it against ``train_gpt``'s first losses), evaluation and
generation. Written with ``keras.ops``; the blocks reuse lesson 6's ``LayerNorm``
and ``FeedForward`` (``utils.transformer``), with GPT-2's GELU.

Fast paths (same numbers to 1e-5): the training step, the evaluation and every
decoding step run as TensorFlow graphs (``tf.function``), each traced once with
open lengths, so a decoding step does not pay Python's cost per layer and per op.
The training step is also compiled by XLA (one fixed batch shape): on two CPU cores
it takes about half the time of the plain graph.

Shapes: letters of ``utils/shapes.py``; here B batch, T new positions, T' cached
positions, Tk = T' + T keys, D d_model, H heads, Hkv key-value heads, Dh = D / H,
F d_ff, V vocabulary size, L layers, N tokens of a text.
"""
from __future__ import annotations

import math
import time
import weakref
from typing import Any, Callable

from utils.runtime import prepare_tensorflow_env

prepare_tensorflow_env()

import keras  # noqa: E402
import numpy as np  # noqa: E402
from keras import ops  # noqa: E402

from utils import checks  # noqa: E402
from utils.attention.keras_impl import causal_mask, project  # noqa: E402
from utils.training import train_loop  # noqa: E402
from utils.transformer.keras_impl import FeedForward, LayerNorm, export_weights, load_weights  # noqa: E402

from .common import (GPTConfig, apply_temperature, attention_widths, generate_loop, lr_schedule, sample_next,  # noqa: E402
                     top_k_filter, top_p_filter, typical_filter)

__all__ = [
    "apply_temperature",
    "top_k_filter",
    "top_p_filter",
    "typical_filter",
    "sample_next",
    "causal_self_attention",
    "CausalSelfAttention",
    "Block",
    "GPT",
    "lm_loss",
    "token_bits",
    "train_gpt",
    "generate",
    "export_weights",
    "load_weights",
]

Tensor = Any
Cache = tuple[Tensor, Tensor]
LN2 = math.log(2.0)
_INIT = keras.initializers.RandomNormal(stddev=0.02)


def causal_self_attention(
    x: Tensor,
    w_qkv: Tensor,
    b_qkv: Tensor | None,
    w_o: Tensor,
    b_o: Tensor | None,
    num_heads: int,
    num_kv_heads: int | None = None,
    cache: Cache | None = None,
) -> tuple[Tensor, Cache]:
    """Causal self-attention of new positions, given the keys and values of the earlier ones.

    ``w_qkv`` holds [W_q | W_k | W_v]: D columns for the queries, Hkv * Dh for the keys
    and as many for the values (with Hkv = H it is lesson 5's (D, 3D) layout). Query
    head h reads key-value head h // (H / Hkv). The new positions come after the
    ``cache``'s; each sees the cached keys and the new ones up to itself.
    Returns the output and the keys and values of all positions so far (the new cache).
    Shapes: x (B, T, D), cache (k, v) each (B, Hkv, T', Dh) or None
    -> y (B, T, D), (k, v) each (B, Hkv, Tk, Dh).
    """
    shape = checks.check_rank("x", x, 3, "(B, T, D)")
    d = shape[-1]
    d_head, kv, width = attention_widths(d, num_heads, num_kv_heads)
    if checks.shape_of(w_qkv) != (d, width):
        raise ValueError(f"w_qkv: expected (D, D + 2 Hkv Dh) = {(d, width)}, got {checks.shape_of(w_qkv)}")
    b, t = ops.shape(x)[0], ops.shape(x)[1]  # tensors while a graph is traced with open sizes
    qkv = project(x, w_qkv, b_qkv)  # (B, T, D + 2 Hkv Dh)
    q = ops.transpose(ops.reshape(qkv[..., :d], (b, t, num_heads, d_head)), (0, 2, 1, 3))  # (B, H, T, Dh)
    k = ops.transpose(ops.reshape(qkv[..., d : d + kv * d_head], (b, t, kv, d_head)), (0, 2, 1, 3))  # (B, Hkv, T, Dh)
    v = ops.transpose(ops.reshape(qkv[..., d + kv * d_head :], (b, t, kv, d_head)), (0, 2, 1, 3))  # (B, Hkv, T, Dh)
    if cache is not None:
        cs = [checks.shape_of(c) for c in cache]
        if len(cs) != 2 or len(cs[0]) != 4 or cs[0][1] != kv or cs[0][3] != d_head:
            raise ValueError(f"cache: expected (k, v) each (B, Hkv, T', Dh) with Hkv={kv}, Dh={d_head}, got {cs}")
        k = ops.concatenate([cache[0], k], axis=2)  # (B, Hkv, Tk, Dh): the earlier keys, then the new ones
        v = ops.concatenate([cache[1], v], axis=2)
    group = num_heads // kv
    k_h = ops.repeat(k, group, axis=1) if group > 1 else k  # (B, H, Tk, Dh): head h reads kv head h // group
    v_h = ops.repeat(v, group, axis=1) if group > 1 else v
    scores = ops.matmul(q * (1.0 / math.sqrt(d_head)), ops.swapaxes(k_h, -1, -2))  # (B, H, T, Tk)
    scores = ops.where(causal_mask(t, ops.shape(k)[2]), scores, float("-inf"))  # the new queries are the last T positions
    # Fast path: a plain softmax (every row keeps its own key, so none is all -inf), with no checks
    weights = ops.exp(scores - ops.max(scores, axis=-1, keepdims=True))
    weights = weights / ops.sum(weights, axis=-1, keepdims=True)  # (B, H, T, Tk)
    heads = ops.matmul(weights, v_h)  # (B, H, T, Dh)
    y = project(ops.reshape(ops.transpose(heads, (0, 2, 1, 3)), (b, t, d)), w_o, b_o)  # (B, T, D)
    return y, (k, v)


class CausalSelfAttention(keras.layers.Layer):
    """Masked multi-head self-attention with ``num_kv_heads`` key-value heads and a KV cache.

    Weights (x @ W convention): ``w_qkv`` (D, D + 2 Hkv Dh), ``b_qkv``, ``w_o`` (D, D), ``b_o``.
    Shapes: call(x (B, T, D), cache (k, v) each (B, Hkv, T', Dh) or None)
    -> y (B, T, D), (k, v) each (B, Hkv, Tk, Dh).
    """

    def __init__(self, d_model: int, num_heads: int, num_kv_heads: int | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        checks.check_positive_int("d_model", d_model)
        checks.check_positive_int("num_heads", num_heads)
        if d_model % num_heads:
            raise ValueError(f"num_heads: expected a divisor of d_model={d_model}, got {num_heads}")
        _, self.num_kv_heads, width = attention_widths(d_model, num_heads, num_kv_heads)
        self.num_heads = num_heads
        self.w_qkv = self.add_weight(shape=(d_model, width), initializer=_INIT, name="w_qkv")
        self.b_qkv = self.add_weight(shape=(width,), initializer="zeros", name="b_qkv")
        self.w_o = self.add_weight(shape=(d_model, d_model), initializer=_INIT, name="w_o")
        self.b_o = self.add_weight(shape=(d_model,), initializer="zeros", name="b_o")
        self.built = True  # every weight exists after construction

    def call(self, x: Tensor, cache: Cache | None = None) -> tuple[Tensor, Cache]:
        return causal_self_attention(x, self.w_qkv, self.b_qkv, self.w_o, self.b_o, self.num_heads, self.num_kv_heads, cache)

    def compute_mask(self, *args: Any, **kwargs: Any) -> None:
        return None


class Block(keras.layers.Layer):
    """A pre-LN decoder block without cross-attention: x + attn(LN(x)), then x + FFN(LN(x)).

    Shapes: call(x (B, T, D), cache (k, v) or None) -> x (B, T, D), (k, v) each (B, Hkv, Tk, Dh).
    """

    def __init__(self, d_model: int, num_heads: int, d_ff: int, num_kv_heads: int | None = None,
                 layer_norm_eps: float = 1e-5, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.norm1 = LayerNorm(d_model, layer_norm_eps, name="norm1")
        self.attn = CausalSelfAttention(d_model, num_heads, num_kv_heads, name="attn")
        self.norm2 = LayerNorm(d_model, layer_norm_eps, name="norm2")
        self.ff = FeedForward(d_model, d_ff, 0.0, "gelu", name="ff")
        self.built = True

    def call(self, x: Tensor, cache: Cache | None = None) -> tuple[Tensor, Cache]:
        h, cache = self.attn(self.norm1(x), cache)
        x = x + h
        return x + self.ff(self.norm2(x)), cache

    def compute_mask(self, *args: Any, **kwargs: Any) -> None:
        return None


def _check_ids(ids: Tensor, max_len: int, past: Any) -> tuple:
    shape = checks.shape_of(ids)
    dtype = str(getattr(ids, "dtype", ""))
    if len(shape) != 2 or "float" in dtype:
        raise ValueError(f"ids: expected integer token ids (B, T), got {dtype} {shape}")
    if isinstance(past, int) and shape[1] is not None and past + shape[1] > max_len:
        raise ValueError(f"ids: expected at most max_len={max_len} positions in all, got {past} cached + {shape[1]} new")
    return shape


class GPT(keras.Model):
    """A decoder-only Transformer language model (GPT-2's layout).

    Token embedding + learned position embedding, L pre-LN blocks, a final LayerNorm,
    and the token embedding, transposed, as the output layer (tied). ``cache`` holds
    each layer's keys and values of the positions read so far; the new ids come after them.
    Shapes: call(ids (B, T), cache L x (k, v) or None) -> logits (B, T, V), L x (k, v) each (B, Hkv, Tk, Dh).
    """

    def __init__(self, config: GPTConfig, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not isinstance(config, GPTConfig):
            raise ValueError(f"config: expected a GPTConfig, got {type(config).__name__}")
        c = self.config = config
        self.token_embedding = self.add_weight(shape=(c.vocab_size, c.d_model), initializer=_INIT, name="token_embedding")
        self.position_embedding = self.add_weight(shape=(c.max_len, c.d_model), initializer=_INIT, name="position_embedding")
        self.blocks = [Block(c.d_model, c.num_heads, c.ff_width, c.num_kv_heads, c.layer_norm_eps, name=f"blocks_{i}")
                       for i in range(c.num_layers)]
        self.final_norm = LayerNorm(c.d_model, c.layer_norm_eps, name="final_norm")
        self.built = True

    def call(self, ids: Tensor, cache: list[Cache] | None = None) -> tuple[Tensor, list[Cache]]:
        if cache is not None and len(cache) != len(self.blocks):
            raise ValueError(f"cache: expected one (k, v) per layer, {len(self.blocks)}, got {len(cache)}")
        past = 0 if cache is None else checks.shape_of(cache[0][0])[2]
        past = ops.shape(cache[0][0])[2] if past is None else past  # open while a graph is traced
        _check_ids(ids, self.config.max_len, past)
        t = ops.shape(ids)[1]
        positions = ops.slice(self.position_embedding, (past, 0), (t, self.config.d_model))  # (T, D)
        x = ops.take(self.token_embedding, ops.cast(ids, "int32"), axis=0) + positions  # (B, T, D)
        new_cache = []
        for i, block in enumerate(self.blocks):
            x, kv = block(x, None if cache is None else cache[i])
            new_cache.append(kv)
        return project(self.final_norm(x), ops.transpose(self.token_embedding)), new_cache  # (B, T, V), tied

    def compute_mask(self, *args: Any, **kwargs: Any) -> None:
        return None


def lm_loss(logits: Tensor, targets: Tensor) -> Tensor:
    """Mean cross-entropy of the next-token predictions, in nats (divide by ln 2 for bits).

    Shapes: logits (B, T, V), targets (B, T) -> scalar.
    """
    ls, ts = checks.shape_of(logits), checks.shape_of(targets)
    if len(ls) != 3 or ls[:2] != ts:
        raise ValueError(f"targets: expected (B, T) = {ls[:2]} from logits {ls} (B, T, V), got {ts}")
    return ops.mean(_token_nats(logits, targets))


def _token_nats(logits: Tensor, targets: Tensor) -> Tensor:
    """-log p of each target. Shapes: (B, T, V), (B, T) -> (B, T)."""
    return keras.losses.sparse_categorical_crossentropy(ops.cast(targets, "int32"), ops.cast(logits, "float32"),
                                                        from_logits=True)


_COMPILED: "weakref.WeakKeyDictionary[GPT, dict]" = weakref.WeakKeyDictionary()


def _compiled(model: GPT) -> dict:
    """The model's graph functions (fast path), traced once per model with open lengths."""
    if model not in _COMPILED:
        import tensorflow as tf

        c = model.config
        ids = tf.TensorSpec([None, None], tf.int32)
        kv = tf.TensorSpec([None, c.kv_heads, None, c.d_model // c.num_heads], tf.float32)

        @tf.function(input_signature=[ids])
        def fresh(new):
            return model(new)

        @tf.function(input_signature=[ids, [(kv, kv)] * c.num_layers])
        def cached(new, cache):
            return model(new, cache)

        @tf.function(input_signature=[ids, ids])
        def nats(inputs, targets):
            return _token_nats(model(inputs)[0], targets)

        _COMPILED[model] = {"fresh": fresh, "cached": cached, "nats": nats}
    return _COMPILED[model]


def token_bits(model: GPT, ids: np.ndarray, batch_size: int = 64, context: int | None = None) -> np.ndarray:
    """The model's surprise, -log2 p, at every token of a text after the first.

    The text is cut into windows of ``context`` tokens (default: max_len) that the model
    reads one after the other, each from scratch: the token at place j of a window is
    predicted from the j tokens before it in that window (the first of a window from one).
    Shapes: ids (N,) -> bits (N - 1,); entry i is for ids[i + 1].
    """
    ids = np.asarray(ids)
    if ids.ndim != 1 or len(ids) < 2 or ids.dtype.kind not in "iu":
        raise ValueError(f"ids: expected a text of at least 2 integer token ids (N,), got {ids.dtype} {ids.shape}")
    nats, length = _compiled(model)["nats"], _context(model, context)
    windows = [(s, min(s + length + 1, len(ids))) for s in range(0, len(ids) - 1, length)]
    out = np.empty(len(ids) - 1, dtype=np.float64)
    full = [w for w in windows if w[1] - w[0] == length + 1]
    for i in range(0, len(full), batch_size):
        part = full[i : i + batch_size]
        rows = np.stack([ids[s:e] for s, e in part]).astype(np.int32)  # (B, T + 1)
        bits = ops.convert_to_numpy(nats(rows[:, :-1], rows[:, 1:])) / LN2  # (B, T)
        for (s, _), row in zip(part, bits):
            out[s : s + length] = row
    for s, e in windows[len(full):]:  # the last, shorter window
        row = ids[s:e][None].astype(np.int32)  # (1, T + 1)
        out[s : e - 1] = ops.convert_to_numpy(nats(row[:, :-1], row[:, 1:]))[0] / LN2
    return out


def _context(model: GPT, context: int | None) -> int:
    if context is None:
        return model.config.max_len
    checks.check_positive_int("context", context)
    if context > model.config.max_len:
        raise ValueError(f"context: expected at most max_len={model.config.max_len} tokens, got {context}")
    return int(context)


def train_gpt(
    model: GPT,
    ids: np.ndarray,
    steps: int,
    batch_size: int = 32,
    lr: float = 3e-3,
    warmup_steps: int = 100,
    seed: int = 0,
    eval_every: int = 100,
    val_ids: np.ndarray | None = None,
    max_seconds: float | None = None,
    clock: Callable[[], float] = time.perf_counter,
    progress: bool = True,
) -> dict[str, list]:
    """Next-token training on windows of max_len + 1 tokens cut at random places of ``ids``.

    Adam (0.9, 0.99, eps 1e-8, added where each library adds it: PyTorch to sqrt(v_hat),
    Keras to sqrt(v) before the bias correction, so the twins drift apart by rounding and a
    little more), ``lr_schedule`` (warm-up, then cosine to lr / 10),
    gradients clipped at global norm 1. The window starts come from a NumPy generator
    seeded with ``seed``, so both twins train on the same batches. Runs in the course's
    loop (``utils.training.train_loop``), ``eval_every`` steps to an "epoch"; after
    each, the mean ``token_bits`` of ``val_ids`` (if given) is recorded as ``val_bits``.
    ``history["loss"]`` and ``history["batch_loss"]`` are in bits per token.
    Shapes: ids (N,), val_ids (N',).
    """
    import tensorflow as tf

    ids = np.asarray(ids)
    length = model.config.max_len
    checks.check_positive_int("steps", steps)
    checks.check_positive_int("eval_every", eval_every)
    if ids.ndim != 1 or len(ids) < length + 2:
        raise ValueError(f"ids: expected a text of more than max_len + 1 = {length + 1} token ids (N,), got shape {ids.shape}")
    optimizer = keras.optimizers.Adam(learning_rate=lr, beta_1=0.9, beta_2=0.99, epsilon=1e-8, global_clipnorm=1.0)
    variables = model.trainable_variables
    optimizer.build(variables)
    data = tf.constant(ids.astype(np.int32))
    offsets = tf.range(length + 1)

    # XLA (jit_compile) fuses the step's many small ops: about half the time per step on a CPU
    @tf.function(input_signature=[tf.TensorSpec([None], tf.int32)], jit_compile=True)
    def train_step(starts):
        rows = tf.gather(data, starts[:, None] + offsets[None, :])  # (B, T + 1)
        with tf.GradientTape() as tape:
            logits, _ = model(rows[:, :-1])
            loss = lm_loss(logits, rows[:, 1:])
        optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
        return loss

    def step(starts: np.ndarray, rate: float) -> float:
        optimizer.learning_rate.assign(rate)
        return float(train_step(starts.astype(np.int32))) / LN2

    def batches(rng: np.random.Generator) -> list[np.ndarray]:
        return [rng.integers(0, len(ids) - length - 1, size=batch_size) for _ in range(eval_every)]

    def on_epoch_end(epoch: int) -> dict:
        return {} if val_ids is None else {"val_bits": float(token_bits(model, val_ids).mean())}

    return train_loop(step, len(ids), math.ceil(steps / eval_every), batch_size, seed,
                      lambda i: lr_schedule(i, steps, lr, warmup_steps), batches=batches, max_seconds=max_seconds,
                      clock=clock, progress=progress, desc="GPT", max_steps=steps, on_epoch_end=on_epoch_end)


def generate(
    model: GPT,
    prompt: np.ndarray,
    num_tokens: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    seed: int = 0,
    use_cache: bool = True,
    step_seconds: list | None = None,
) -> np.ndarray:
    """Continue each prompt by ``num_tokens`` tokens (``sample_next``; temperature 0 is greedy).

    ``use_cache=True`` reads the prompt once, then feeds only the newest token with
    every layer's cached keys and values; ``use_cache=False`` runs the model over the
    whole prefix at every step. Same weights, same tokens. ``step_seconds``, a list,
    receives the wall time of each step (the first reads the prompt).
    Shapes: prompt (B, Tp) -> ids (B, Tp + num_tokens); Tp + num_tokens - 1 <= max_len.
    """
    prompt = np.asarray(prompt)
    if prompt.ndim != 2 or prompt.dtype.kind not in "iu":
        raise ValueError(f"prompt: expected integer token ids (B, Tp), got {prompt.dtype} {prompt.shape}")
    if prompt.shape[1] + num_tokens - 1 > model.config.max_len:
        raise ValueError(f"num_tokens: expected Tp + num_tokens - 1 <= max_len={model.config.max_len} "
                         f"(the positions the model reads), got Tp={prompt.shape[1]} and num_tokens={num_tokens}")
    fns = _compiled(model)
    state: dict = {"cache": None, "ids": None}

    def next_logits(new: np.ndarray) -> np.ndarray:
        start = time.perf_counter()
        new = new.astype(np.int32)
        if use_cache:
            if state["cache"] is None:
                logits, state["cache"] = fns["fresh"](new)
            else:
                logits, state["cache"] = fns["cached"](new, state["cache"])
        else:  # recompute: the whole prefix again
            state["ids"] = new if state["ids"] is None else np.concatenate([state["ids"], new], axis=1)
            logits, _ = fns["fresh"](state["ids"])
        out = ops.convert_to_numpy(logits[:, -1]).astype(np.float32)  # (B, V)
        if step_seconds is not None:
            step_seconds.append(time.perf_counter() - start)
        return out

    return generate_loop(next_logits, prompt, num_tokens, temperature, top_k, top_p, seed)
