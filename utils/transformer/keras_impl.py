"""Keras 3 twin of the Transformer (same names and signatures as torch_impl).

Written with ``keras.ops``; the training step uses TensorFlow's GradientTape
(the course runs Keras on the TensorFlow backend).
Shapes: letters of ``utils/shapes.py``; here B batch, T, Ts, Tt sequence, source and
target lengths, Tq, Tk query and key lengths, D d_model, H heads, Dh = D / H,
F d_ff, V vocabulary size, L layers. Masks are boolean keep-masks (True = may attend)
broadcastable to (B, H, Tq, Tk).
"""
from __future__ import annotations

import math
import time
from typing import Any, Callable

from utils.runtime import prepare_tensorflow_env

prepare_tensorflow_env()

import keras  # noqa: E402
import numpy as np  # noqa: E402
from keras import ops  # noqa: E402

from utils import checks  # noqa: E402
from utils.data.parallel import PAD_ID  # noqa: E402
from utils.training import train_loop  # noqa: E402
from utils.attention.keras_impl import (MultiHeadAttention, causal_mask, masked_softmax, merge_heads, project,  # noqa: E402
                                       split_heads)
from utils.positional.keras_impl import sinusoidal_encoding  # noqa: E402

from .common import (BlockFromConfig, TransformerConfig, beam_search_loop, cache_parents, check_activation,  # noqa: E402
                     greedy_search, length_penalty, trim_batch, warmup_schedule)

__all__ = [
    "warmup_schedule",
    "length_penalty",
    "Linear",
    "LayerNorm",
    "Embedding",
    "FeedForward",
    "EncoderBlock",
    "DecoderBlock",
    "source_mask",
    "target_mask",
    "Encoder",
    "Decoder",
    "Transformer",
    "label_smoothing_loss",
    "train_transformer",
    "greedy_decode",
    "beam_search",
    "export_weights",
    "load_weights",
]

Tensor = Any


def _check_ids(name: str, ids: Tensor, layout: str) -> tuple:
    shape = checks.shape_of(ids)
    if len(shape) != 2:
        raise ValueError(f"{name}: expected token ids {layout}, got shape {shape}")
    dtype = str(getattr(ids, "dtype", ""))
    if "float" in dtype:
        raise ValueError(f"{name}: expected integer token ids {layout}, got dtype {dtype}")
    return shape


class Linear(keras.layers.Layer):
    """y = x @ w + b, with w (D_in, D_out) (Glorot-uniform init).

    Shapes: call(x (..., D_in)) -> (..., D_out).
    """

    def __init__(self, d_in: int, d_out: int, bias: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.w = self.add_weight(shape=(d_in, d_out), initializer="glorot_uniform", name="w")
        self.b = self.add_weight(shape=(d_out,), initializer="zeros", name="b") if bias else None
        self.built = True  # every weight exists after construction

    def call(self, x: Tensor) -> Tensor:
        return project(x, self.w, self.b)


class LayerNorm(keras.layers.Layer):
    """Normalise each position's features to mean 0, variance 1, then scale by gamma and shift by beta.

    Shapes: call(x (..., D)) -> (..., D).
    """

    def __init__(self, d_model: int, eps: float = 1e-5, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.eps = float(eps)
        self.gamma = self.add_weight(shape=(d_model,), initializer="ones", name="gamma")
        self.beta = self.add_weight(shape=(d_model,), initializer="zeros", name="beta")
        self.built = True  # every weight exists after construction

    def call(self, x: Tensor) -> Tensor:
        mean = ops.mean(x, axis=-1, keepdims=True)
        var = ops.mean(ops.square(x - mean), axis=-1, keepdims=True)  # biased variance, as in the paper's LN
        return (x - mean) / ops.sqrt(var + self.eps) * self.gamma + self.beta


class Embedding(keras.layers.Layer):
    """A table of V learned vectors of width D, looked up by token id and scaled by sqrt(D).

    Shapes: call(ids (B, T)) -> (B, T, D).
    """

    def __init__(self, vocab_size: int, d_model: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.d_model = d_model
        init = keras.initializers.RandomNormal(stddev=d_model**-0.5)
        self.table = self.add_weight(shape=(vocab_size, d_model), initializer=init, name="table")  # (V, D)
        self.built = True  # every weight exists after construction

    def call(self, ids: Tensor) -> Tensor:
        return ops.take(self.table, ops.cast(ids, "int32"), axis=0) * math.sqrt(self.d_model)  # (B, T, D)


class _Dropout(keras.layers.Layer):
    def __init__(self, rate: float, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.rate = float(rate)
        self._seed = keras.random.SeedGenerator()

    def call(self, x: Tensor, training: bool | None = None) -> Tensor:
        return keras.random.dropout(x, self.rate, seed=self._seed) if training and self.rate > 0 else x


class FeedForward(keras.layers.Layer):
    """Position-wise feed-forward: the same two-layer network applied at every position.

    ``activation``: "relu" (the paper) or "gelu" (BERT; the exact erf form).
    Shapes: call(x (B, T, D)) -> (B, T, D), via (B, T, F).
    """

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0, activation: str = "relu", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.linear1 = Linear(d_model, d_ff, name="linear1")
        self.linear2 = Linear(d_ff, d_model, name="linear2")
        self.dropout = float(dropout)
        self.activation = check_activation(activation)
        self._drop = _Dropout(dropout)

    def call(self, x: Tensor, training: bool | None = None) -> Tensor:
        h = self.linear1(x)  # (B, T, F)
        h = ops.relu(h) if self.activation == "relu" else ops.gelu(h, approximate=False)
        return self.linear2(self._drop(h, training=training))  # (B, T, D)


class _Sublayer(keras.layers.Layer):
    """Residual + LayerNorm around one sublayer, pre-LN or post-LN."""

    def __init__(self, d_model: int, dropout: float, norm_first: bool, residual: bool, eps: float, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.norm = LayerNorm(d_model, eps, name="norm")
        self.norm_first, self.residual = bool(norm_first), bool(residual)
        self._drop = _Dropout(dropout)

    def apply(self, x: Tensor, f: Callable, training: bool | None):
        # pre-LN:  x + drop(f(LN(x)))     post-LN:  LN(x + drop(f(x)))
        y, extra = f(self.norm(x) if self.norm_first else x)
        y = self._drop(y, training=training)
        y = x + y if self.residual else y
        return (y if self.norm_first else self.norm(y)), extra


class EncoderBlock(BlockFromConfig, keras.layers.Layer):
    """Self-attention then feed-forward, each wrapped in a residual connection and LayerNorm.

    Shapes: call(x (B, Ts, D), mask broadcastable to (B, H, Ts, Ts)) -> x (B, Ts, D), weights (B, H, Ts, Ts).
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        d_ff: int,
        dropout: float = 0.0,
        norm_first: bool = True,
        residual: bool = True,
        layer_norm_eps: float = 1e-5,
        activation: str = "relu",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout, name="self_attn")
        self.ff = FeedForward(d_model, d_ff, dropout, activation, name="ff")
        self.sub_attn = _Sublayer(d_model, dropout, norm_first, residual, layer_norm_eps, name="sub_attn")
        self.sub_ff = _Sublayer(d_model, dropout, norm_first, residual, layer_norm_eps, name="sub_ff")

    def call(self, x: Tensor, mask: Tensor | None = None, training: bool | None = None):
        x, weights = self.sub_attn.apply(x, lambda h: self.self_attn(h, h, h, mask, training=training), training)
        x, _ = self.sub_ff.apply(x, lambda h: (self.ff(h, training=training), None), training)
        return x, weights

    def compute_mask(self, *args: Any, **kwargs: Any) -> None:
        return None


class DecoderBlock(BlockFromConfig, keras.layers.Layer):
    """Causal self-attention, attention over the encoder's output (cross-attention), feed-forward.

    Shapes: call(x (B, Tt, D), memory (B, Ts, D), self_mask to (B, H, Tt, Tt),
    memory_mask to (B, H, Tt, Ts)) -> x (B, Tt, D), self weights (B, H, Tt, Tt), cross weights (B, H, Tt, Ts).
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        d_ff: int,
        dropout: float = 0.0,
        norm_first: bool = True,
        residual: bool = True,
        layer_norm_eps: float = 1e-5,
        activation: str = "relu",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout, name="self_attn")
        self.cross_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout, name="cross_attn")
        self.ff = FeedForward(d_model, d_ff, dropout, activation, name="ff")
        self.sub_self = _Sublayer(d_model, dropout, norm_first, residual, layer_norm_eps, name="sub_self")
        self.sub_cross = _Sublayer(d_model, dropout, norm_first, residual, layer_norm_eps, name="sub_cross")
        self.sub_ff = _Sublayer(d_model, dropout, norm_first, residual, layer_norm_eps, name="sub_ff")

    def call(
        self,
        x: Tensor,
        memory: Tensor,
        self_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        training: bool | None = None,
    ):
        x, self_w = self.sub_self.apply(x, lambda h: self.self_attn(h, h, h, self_mask, training=training), training)
        # queries from the decoder, keys and values from the encoder's output
        x, cross_w = self.sub_cross.apply(
            x, lambda h: self.cross_attn(h, memory, memory, memory_mask, training=training), training
        )
        x, _ = self.sub_ff.apply(x, lambda h: (self.ff(h, training=training), None), training)
        return x, self_w, cross_w

    def compute_mask(self, *args: Any, **kwargs: Any) -> None:
        return None


def source_mask(src: Tensor, pad_id: int = PAD_ID) -> Tensor:
    """Keep-mask of the real (non-padding) source tokens, for every query.

    Shapes: src (B, Ts) -> (B, 1, 1, Ts).
    """
    _check_ids("src", src, "(B, Ts)")
    return ops.not_equal(src, pad_id)[:, None, None, :]  # (B, 1, 1, Ts)


def target_mask(tgt: Tensor, pad_id: int = PAD_ID) -> Tensor:
    """Causal keep-mask (position i sees 0..i) combined with the target's padding.

    Shapes: tgt (B, Tt) -> (B, 1, Tt, Tt).
    """
    _check_ids("tgt", tgt, "(B, Tt)")
    keep = ops.not_equal(tgt, pad_id)[:, None, None, :]  # (B, 1, 1, Tt)
    # the length is a tensor when a compiled step is traced with an open length (trimmed batches)
    return ops.logical_and(causal_mask(ops.shape(tgt)[1])[None, None], keep)  # (B, 1, Tt, Tt)


class Encoder(keras.layers.Layer):
    """Token embedding * sqrt(D) + sinusoidal positions, dropout, L encoder blocks (+ final LN if pre-LN).

    Shapes: call(src (B, Ts), src_mask to (B, H, Ts, Ts)) -> memory (B, Ts, D), L weights (B, H, Ts, Ts).
    """

    def __init__(self, config: TransformerConfig, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        c = config
        self.config = c
        self.embedding = Embedding(c.src_vocab_size, c.d_model, name="embedding")
        self._pe = sinusoidal_encoding(c.max_len, c.d_model)  # (max_len, D) constant
        self.blocks = [
            EncoderBlock.from_config(c, name=f"blocks_{i}")
            for i in range(c.num_encoder_layers)
        ]
        self.final_norm = LayerNorm(c.d_model, c.layer_norm_eps, name="final_norm") if c.norm_first else None
        self._drop = _Dropout(c.dropout)

    def call(self, src: Tensor, src_mask: Tensor | None = None, training: bool | None = None):
        _, t = _check_ids("src", src, "(B, Ts)")
        if t is not None and t > self.config.max_len:
            raise ValueError(f"src: expected (B, Ts) with Ts <= max_len={self.config.max_len}, got {tuple(src.shape)}")
        pe = self._pe[: ops.shape(src)[1]]  # (Ts, D); the length may be open while tracing
        x = self._drop(self.embedding(src) + pe, training=training)  # (B, Ts, D)
        weights = []
        for block in self.blocks:
            x, w = block(x, src_mask, training=training)
            weights.append(w)
        return (self.final_norm(x) if self.final_norm is not None else x), weights

    def compute_mask(self, *args: Any, **kwargs: Any) -> None:
        return None


class Decoder(keras.layers.Layer):
    """Target embedding + positions, L decoder blocks, then the projection to vocabulary logits.

    With ``tie_embeddings`` the projection is the target embedding table, transposed.
    Shapes: call(tgt (B, Tt), memory (B, Ts, D), tgt_mask, memory_mask)
    -> logits (B, Tt, V), L self weights (B, H, Tt, Tt), L cross weights (B, H, Tt, Ts).
    """

    def __init__(self, config: TransformerConfig, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        c = config
        self.config = c
        self.embedding = Embedding(c.tgt_vocab_size, c.d_model, name="embedding")
        self._pe = sinusoidal_encoding(c.max_len, c.d_model)  # (max_len, D) constant
        self.blocks = [
            DecoderBlock.from_config(c, name=f"blocks_{i}")
            for i in range(c.num_decoder_layers)
        ]
        self.final_norm = LayerNorm(c.d_model, c.layer_norm_eps, name="final_norm") if c.norm_first else None
        self.out = None if c.tie_embeddings else Linear(c.d_model, c.tgt_vocab_size, name="out")
        self.out_bias = (
            self.add_weight(shape=(c.tgt_vocab_size,), initializer="zeros", name="out_bias") if c.tie_embeddings else None
        )
        self._drop = _Dropout(c.dropout)

    def call(
        self,
        tgt: Tensor,
        memory: Tensor,
        tgt_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        training: bool | None = None,
    ):
        _, t = _check_ids("tgt", tgt, "(B, Tt)")
        if t is not None and t > self.config.max_len:
            raise ValueError(f"tgt: expected (B, Tt) with Tt <= max_len={self.config.max_len}, got {tuple(tgt.shape)}")
        pe = self._pe[: ops.shape(tgt)[1]]  # (Tt, D); the length may be open while tracing
        x = self._drop(self.embedding(tgt) + pe, training=training)  # (B, Tt, D)
        self_ws, cross_ws = [], []
        for block in self.blocks:
            x, sw, cw = block(x, memory, tgt_mask, memory_mask, training=training)
            self_ws.append(sw)
            cross_ws.append(cw)
        if self.final_norm is not None:
            x = self.final_norm(x)
        if self.out is not None:
            logits = self.out(x)
        else:
            logits = project(x, ops.transpose(self.embedding.table), self.out_bias)  # (B, Tt, V)
        return logits, self_ws, cross_ws

    def compute_mask(self, *args: Any, **kwargs: Any) -> None:
        return None


class Transformer(keras.Model):
    """The encoder-decoder Transformer: encode the source once, decode the target with teacher forcing.

    Shapes: call(src (B, Ts), tgt_in (B, Tt)) -> logits (B, Tt, V), attention
    {"encoder": L x (B, H, Ts, Ts), "decoder_self": L x (B, H, Tt, Tt), "cross": L x (B, H, Tt, Ts)}.
    """

    def __init__(self, config: TransformerConfig, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not isinstance(config, TransformerConfig):
            raise ValueError(f"config: expected a TransformerConfig, got {type(config).__name__}")
        self.config = config
        self.encoder = Encoder(config, name="encoder")
        self.decoder = Decoder(config, name="decoder")

    def encode(self, src: Tensor, training: bool | None = None):
        """Shapes: src (B, Ts) -> memory (B, Ts, D), src keep-mask (B, 1, 1, Ts), L encoder weights."""
        keep = source_mask(src)
        memory, weights = self.encoder(src, keep, training=training)
        return memory, keep, weights

    def decode(self, tgt_in: Tensor, memory: Tensor, src_keep: Tensor, training: bool | None = None):
        """Shapes: tgt_in (B, Tt), memory (B, Ts, D), src_keep (B, 1, 1, Ts) -> logits (B, Tt, V), self and cross weights."""
        return self.decoder(tgt_in, memory, target_mask(tgt_in), src_keep, training=training)

    def call(self, src: Tensor, tgt_in: Tensor, training: bool | None = None):
        s, t = _check_ids("src", src, "(B, Ts)"), _check_ids("tgt_in", tgt_in, "(B, Tt)")
        if s[0] is not None and t[0] is not None and s[0] != t[0]:
            raise ValueError(f"tgt_in: expected (B, Tt) with B={s[0]} like src {s}, got {t}")
        memory, keep, enc_w = self.encode(src, training)
        logits, self_w, cross_w = self.decode(tgt_in, memory, keep, training)
        return logits, {"encoder": enc_w, "decoder_self": self_w, "cross": cross_w}

    def compute_mask(self, *args: Any, **kwargs: Any) -> None:
        return None


def label_smoothing_loss(logits: Tensor, targets: Tensor, smoothing: float = 0.1, pad_id: int = PAD_ID) -> Tensor:
    """Cross-entropy against a smoothed target: 1 - smoothing on the right token, the rest spread evenly.

    The smoothed distribution puts ``smoothing / (V - 1)`` on every other token
    (padding positions are left out of the mean). ``smoothing=0`` gives the plain cross-entropy.
    Shapes: logits (B, T, V), targets (B, T) -> scalar (mean over non-padding tokens).
    """
    if not 0.0 <= smoothing < 1.0:
        raise ValueError(f"smoothing: expected a number in [0, 1), got {smoothing!r}")
    ls, ts = checks.shape_of(logits), checks.shape_of(targets)
    if len(ls) != 3 or ls[:2] != ts:
        raise ValueError(f"targets: expected (B, T) = {ls[:2]} from logits {ls} (B, T, V), got {ts}")
    v = ls[-1]
    logp = ops.log_softmax(ops.cast(logits, "float32"), axis=-1)  # (B, T, V)
    targets = ops.cast(targets, "int32")
    nll = -ops.sum(logp * ops.one_hot(targets, v), axis=-1)  # (B, T)
    others = -ops.sum(logp, axis=-1) - nll  # (B, T)
    per_token = (1.0 - smoothing) * nll + smoothing / (v - 1) * others
    keep = ops.cast(ops.not_equal(targets, pad_id), "float32")
    return ops.sum(per_token * keep) / ops.maximum(ops.sum(keep), 1.0)


def train_transformer(
    model: Transformer,
    src: np.ndarray,
    tgt_in: np.ndarray,
    tgt_out: np.ndarray,
    epochs: int = 10,
    batch_size: int = 64,
    warmup_steps: int = 400,
    lr_scale: float = 1.0,
    smoothing: float = 0.1,
    seed: int = 0,
    max_seconds: float | None = None,
    clock: Callable[[], float] = time.perf_counter,
    progress: bool = True,
    on_epoch_end: Callable[[int], dict] | None = None,
) -> dict[str, list[float]]:
    """Teacher-forced training: Adam (0.9, 0.98, 1e-9), the warm-up schedule, label smoothing, clipping at 1.

    Runs in the course's loop (``utils.training.train_loop``): rows shuffled by a
    NumPy generator seeded with ``seed``, so both twins see the same batches; stops
    after ``max_seconds`` as measured by ``clock`` (wall time by default;
    ``time.process_time`` gives a CPU-time budget), checked after every step, or when
    ``on_epoch_end(epoch)`` returns a dict with a true ``"stop"``. Returns
    ``{"loss": per epoch, "batch_loss": per step, "lr": per step, "seconds": at each epoch end, ...}``.
    Shapes: src (N, Ts), tgt_in (N, Tt), tgt_out (N, Tt).
    """
    import tensorflow as tf

    if not (len(src) == len(tgt_in) == len(tgt_out)):
        raise ValueError(f"src, tgt_in, tgt_out: expected the same N, got {len(src)}, {len(tgt_in)}, {len(tgt_out)}")
    d_model = model.config.d_model
    optimizer = keras.optimizers.Adam(learning_rate=1.0, beta_1=0.9, beta_2=0.98, epsilon=1e-9, global_clipnorm=1.0)
    variables = model.trainable_variables
    optimizer.build(variables)

    ids = tf.TensorSpec([None, None], tf.int64)

    @tf.function(input_signature=[ids, ids, ids])  # traced once: batches are trimmed to their own lengths
    def train_step(s, ti, to):
        with tf.GradientTape() as tape:
            logits, _ = model(s, ti, training=True)
            loss = label_smoothing_loss(logits, to, smoothing)
        grads = tape.gradient(loss, variables)
        optimizer.apply_gradients(zip(grads, variables))
        return loss

    def step(idx: np.ndarray, lr: float) -> float:
        optimizer.learning_rate.assign(lr)
        return float(train_step(*(tf.constant(a, tf.int64) for a in trim_batch(src, tgt_in, tgt_out, idx))))

    return train_loop(step, len(src), epochs, batch_size, seed, lambda i: warmup_schedule(i + 1, d_model, warmup_steps, lr_scale),
                      max_seconds=max_seconds, clock=clock, progress=progress, desc="Transformer", on_epoch_end=on_epoch_end)


def _next_log_probs(model: Transformer, src: np.ndarray, batch_size: int):
    """Encode ``src`` once (in chunks); return f(rows, prefixes) -> next-token log-probs."""
    parts = [model.encode(ops.convert_to_tensor(np.asarray(src[i : i + batch_size])), False)[:2]
             for i in range(0, len(src), batch_size)]
    memory = ops.concatenate([p[0] for p in parts], axis=0)  # (N, Ts, D)
    keep = ops.concatenate([p[1] for p in parts], axis=0)  # (N, 1, 1, Ts)

    def fn(rows: np.ndarray, prefixes: np.ndarray) -> np.ndarray:
        out = []
        for i in range(0, len(rows), batch_size):
            r = ops.convert_to_tensor(rows[i : i + batch_size])
            p = ops.convert_to_tensor(prefixes[i : i + batch_size])
            logits, _, _ = model.decode(p, ops.take(memory, r, axis=0), ops.take(keep, r, axis=0), False)
            out.append(ops.convert_to_numpy(ops.log_softmax(ops.cast(logits[:, -1], "float32"), axis=-1)))  # (b, V)
        return np.concatenate(out)

    return fn


# ----------------------------------------------------------------------------- decoding with a KV cache
# The decoder's causal self-attention never lets a position see a later one, so the keys
# and values of the target positions already decoded do not change when a token is added:
# each step can compute the newest position only and read the others' from a cache (the
# KV cache, lesson 8). The encoder's keys and values, read by every cross-attention, are
# computed once per source. Same weights, same numbers as re-running the decoder.


def _split_weights(mha: MultiHeadAttention) -> tuple:
    """(W_q, b_q, W_kv, b_kv): the queries' third of ``w_qkv`` and the keys' and values' two thirds, sliced once."""
    d = mha.d_model
    w = ops.convert_to_tensor(mha.w_qkv)
    b = (None, None) if mha.b_qkv is None else (ops.convert_to_tensor(mha.b_qkv)[:d], ops.convert_to_tensor(mha.b_qkv)[d:])
    return w[:, :d], b[0], w[:, d:], b[1]


def _heads(x: Tensor, w: Tensor, b: Tensor | None, num_heads: int, parts: int) -> list:
    """x W + b cut into ``parts`` blocks of D columns, each split into heads. Shapes: x (B, T, D) -> parts x (B, H, T, Dh)."""
    return [split_heads(y, num_heads) for y in ops.split(project(x, w, b), parts, axis=-1)]


def _attend(mha: MultiHeadAttention, q: Tensor, k: Tensor, v: Tensor, mask: Tensor) -> Tensor:
    """Lesson 5's attention and output projection on given heads. Shapes: q (B, H, Tq, Dh), k, v (B, H, Tk, Dh) -> (B, Tq, D)."""
    scores = ops.matmul(q * (1.0 / math.sqrt(checks.shape_of(q)[-1])), ops.swapaxes(k, -1, -2))  # (B, H, Tq, Tk)
    return project(merge_heads(ops.matmul(masked_softmax(scores, mask), v)), mha.w_o, mha.b_o)  # (B, Tq, D)


def _decode_cached(model: Transformer, tokens: Tensor, start: int, weights: list, memory_kv: list, src_keep: Tensor,
                   cache: list | None, tgt_keep: Tensor) -> tuple[Tensor, list]:
    """The decoder on target positions start .. start + T - 1, the earlier ones read from ``cache``.

    ``weights``: per layer, ``_split_weights`` of its self-attention and of its cross-attention.
    Shapes: tokens (B, T), memory_kv L x (k, v) each (B, H, Ts, Dh), src_keep (B, 1, 1, Ts),
    cache L x (k, v) each (B, H, start, Dh) or None, tgt_keep (B, 1, 1, start + T) the non-padding
    target keys -> logits (B, T, V), L x (k, v) each (B, H, start + T, Dh).
    """
    dec = model.decoder
    t = checks.shape_of(tokens)[1]
    x = dec.embedding(tokens) + dec._pe[start : start + t]  # (B, T, D)
    mask = ops.logical_and(causal_mask(t, start + t)[None, None], tgt_keep)  # (B, 1, T, start + T)
    new_cache = []
    for i, block in enumerate(dec.blocks):

        def self_attention(h: Tensor, i: int = i, block: DecoderBlock = block):
            (w_q, b_q, w_kv, b_kv), _ = weights[i]
            k, v = _heads(h, w_kv, b_kv, block.self_attn.num_heads, 2)  # (B, H, T, Dh): the new positions' only
            if cache is not None:
                k, v = ops.concatenate([cache[i][0], k], axis=2), ops.concatenate([cache[i][1], v], axis=2)
            new_cache.append((k, v))
            (q,) = _heads(h, w_q, b_q, block.self_attn.num_heads, 1)
            return _attend(block.self_attn, q, k, v, mask), None

        x, _ = block.sub_self.apply(x, self_attention, False)
        def cross_attention(h: Tensor, i: int = i, block: DecoderBlock = block):
            w_q, b_q, _, _ = weights[i][1]
            (q,) = _heads(h, w_q, b_q, block.cross_attn.num_heads, 1)
            return _attend(block.cross_attn, q, *memory_kv[i], src_keep), None

        x, _ = block.sub_cross.apply(x, cross_attention, False)
        x, _ = block.sub_ff.apply(x, lambda h, b=block: (b.ff(h, training=False), None), False)
    if dec.final_norm is not None:
        x = dec.final_norm(x)
    logits = dec.out(x) if dec.out is not None else project(x, ops.transpose(dec.embedding.table), dec.out_bias)
    return logits, new_cache  # (B, T, V)


def _cached_next_log_probs(model: Transformer, src: np.ndarray, batch_size: int):
    """Like ``_next_log_probs``, with a KV cache: each call computes only the newest target position.

    The prefixes of a call must extend those of the previous one by one token (found with
    ``cache_parents``; beam search reorders them); otherwise they are read from scratch.
    """
    parts = [model.encode(ops.convert_to_tensor(np.asarray(src[i : i + batch_size])), False)[:2]
             for i in range(0, len(src), batch_size)]
    memory = ops.concatenate([p[0] for p in parts], axis=0)  # (N, Ts, D)
    keep = ops.concatenate([p[1] for p in parts], axis=0)  # (N, 1, 1, Ts)
    weights = [(_split_weights(block.self_attn), _split_weights(block.cross_attn)) for block in model.decoder.blocks]
    memory_kv = [_heads(memory, w[1][2], w[1][3], block.cross_attn.num_heads, 2)  # L x (N, H, Ts, Dh) twice
                 for w, block in zip(weights, model.decoder.blocks)]
    state: dict = {"rows": None, "prefixes": None, "cache": None}

    def fn(rows: np.ndarray, prefixes: np.ndarray) -> np.ndarray:
        parents = None if state["prefixes"] is None else cache_parents(state["rows"], state["prefixes"], rows, prefixes)
        start = 0 if parents is None else prefixes.shape[1] - 1
        if parents is not None:
            old = [(ops.take(k, parents, axis=0), ops.take(v, parents, axis=0)) for k, v in state["cache"]]
        out, caches = [], []
        for i in range(0, len(rows), batch_size):
            r = ops.convert_to_tensor(rows[i : i + batch_size])
            p = np.asarray(prefixes[i : i + batch_size])
            past = None if parents is None else [(k[i : i + batch_size], v[i : i + batch_size]) for k, v in old]
            logits, cache = _decode_cached(model, ops.convert_to_tensor(p[:, start:]), start, weights,
                                           [(ops.take(k, r, axis=0), ops.take(v, r, axis=0)) for k, v in memory_kv],
                                           ops.take(keep, r, axis=0), past, ops.convert_to_tensor((p != PAD_ID)[:, None, None, :]))
            out.append(ops.convert_to_numpy(ops.log_softmax(ops.cast(logits[:, -1], "float32"), axis=-1)))  # (b, V)
            caches.append(cache)
        state.update(rows=np.asarray(rows), prefixes=np.asarray(prefixes),
                     cache=[(ops.concatenate([c[j][0] for c in caches], axis=0), ops.concatenate([c[j][1] for c in caches], axis=0))
                            for j in range(len(caches[0]))])
        return np.concatenate(out)

    return fn


def greedy_decode(
    model: Transformer, src: np.ndarray, max_len: int, bos_id: int = 1, eos_id: int = 2, batch_size: int = 256,
    use_cache: bool = True,
) -> np.ndarray:
    """Decode by feeding back the most likely token at every step (no teacher forcing).

    The source is encoded once. With ``use_cache`` (the default) each step computes only
    the newest target position and reads the earlier positions' keys and values from a
    cache; ``use_cache=False`` re-runs the decoder on the whole prefix. Same tokens.
    After <eos> a row emits padding (0).
    Shapes: src (B, Ts) -> tokens (B, max_len).
    """
    _check_ids("src", np.asarray(src), "(B, Ts)")
    make = _cached_next_log_probs if use_cache else _next_log_probs
    return greedy_search(make(model, np.asarray(src), batch_size), len(src), max_len, bos_id, eos_id)


def beam_search(
    model: Transformer,
    src: np.ndarray,
    max_len: int,
    beam_size: int = 4,
    alpha: float = 0.6,
    bos_id: int = 1,
    eos_id: int = 2,
    batch_size: int = 256,
    use_cache: bool = True,
) -> np.ndarray:
    """Beam search with the GNMT length penalty ((5 + |Y|) / 6) ** alpha.

    ``use_cache`` as in ``greedy_decode``: the cache follows each hypothesis as the
    beams are reordered. Same tokens either way.
    Shapes: src (B, Ts) -> tokens (B, max_len) (the best hypothesis of each source, padding after <eos>).
    """
    _check_ids("src", np.asarray(src), "(B, Ts)")
    fn = (_cached_next_log_probs if use_cache else _next_log_probs)(model, np.asarray(src), batch_size)
    return beam_search_loop(fn, len(src), max_len, beam_size, alpha, bos_id, eos_id)[0]


def _named_variables(layer: Any, prefix: str = "") -> dict[str, Any]:
    """Trainable variables keyed by the attribute path (the names torch's named_parameters gives)."""
    out: dict[str, Any] = {}
    for attr, value in vars(layer).items():
        if attr.startswith("_"):
            continue
        name = f"{prefix}{attr}"
        if isinstance(value, keras.Variable):
            if value.trainable:
                out[name] = value
        elif isinstance(value, keras.layers.Layer):
            out.update(_named_variables(value, name + "."))
        elif isinstance(value, (list, tuple)) and value and all(isinstance(v, keras.layers.Layer) for v in value):
            for i, v in enumerate(value):
                out.update(_named_variables(v, f"{name}.{i}."))
    return out


def export_weights(model: keras.layers.Layer) -> dict[str, np.ndarray]:
    """All weights as NumPy arrays under names both twins share (e.g. ``encoder.blocks.0.ff.linear1.w``).

    Shapes: every array keeps its variable's shape (the ``x @ W`` convention).
    """
    return {name: ops.convert_to_numpy(v).copy() for name, v in _named_variables(model).items()}


def load_weights(model: keras.layers.Layer, weights: dict[str, np.ndarray]) -> None:
    """Copy arrays from ``export_weights`` (of either twin) into ``model``, checking names and shapes.

    Shapes: each array must have the shape of the variable of the same name.
    """
    params = _named_variables(model)
    missing, unexpected = sorted(set(params) - set(weights)), sorted(set(weights) - set(params))
    if missing or unexpected:
        raise ValueError(f"weights: expected the names of the model's parameters; missing {missing[:5]}, unexpected {unexpected[:5]}")
    for name, v in params.items():
        w = np.asarray(weights[name])
        if tuple(w.shape) != tuple(v.shape):
            raise ValueError(f"weights[{name!r}]: expected shape {tuple(v.shape)}, got {tuple(w.shape)}")
        v.assign(w.astype(np.float32))
