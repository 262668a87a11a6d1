"""Keras 3 twin of the seq2seq models (same names and signatures as torch_impl).

Written with ``keras.ops`` on the TensorFlow backend; the training step uses
``tf.GradientTape`` inside a ``tf.function``.
Shapes: letters of ``utils/shapes.py``; here B batch, Ts source length, Tt target
length, E embedding width, G encoder GRU width per direction, De = 2G, Gd decoder
GRU width, A additive-attention width, Dq query width (= Gd), Dk projected-key
width, V vocabulary. Masks: boolean keep-masks (B, Ts), True = real token. See
``utils/seq2seq/__init__.py`` for the equations.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Mapping

import numpy as np

from utils.runtime import prepare_tensorflow_env

prepare_tensorflow_env()

import keras  # noqa: E402
from keras import ops  # noqa: E402

from .. import checks  # noqa: E402
from ..data.parallel import BOS_ID, EOS_ID, PAD_ID  # noqa: E402
from ..training import train_loop  # noqa: E402
from ..attention import keras_impl as attn  # noqa: E402
from . import _checks as _s2s_checks  # noqa: E402

__all__ = [
    "Encoder",
    "swap_directions",
    "DecoderAttention",
    "Decoder",
    "Seq2Seq",
    "sequence_loss",
    "train_seq2seq",
    "greedy_decode",
    "export_weights",
    "load_weights",
    "named_weights",
]

SCORES = ("additive", "dot", "general", "none")  # the values of ``attention`` (a constant, not in __all__)
Tensor = Any


def _check_ids(name: str, ids: Tensor, layout: str = "(B, T)") -> None:
    shape = checks.shape_of(ids)
    if len(shape) != 2:
        raise ValueError(f"{name}: expected token ids {layout}, got shape {shape}")


def _uniform(fan_in: int) -> keras.initializers.Initializer:
    """U(-1/sqrt(fan_in), 1/sqrt(fan_in)): torch's default for nn.Linear, nn.GRU and nn.GRUCell."""
    limit = 1 / math.sqrt(fan_in)
    return keras.initializers.RandomUniform(-limit, limit)


def _embedding(vocab_size: int, d_embed: int, name: str) -> keras.layers.Embedding:
    # N(0, 1) as torch's nn.Embedding: the twins start from the same distributions and train alike
    return keras.layers.Embedding(vocab_size, d_embed, embeddings_initializer=keras.initializers.RandomNormal(0.0, 1.0),
                                  name=name)


def _gru_inits(units: int) -> dict:
    return {f"{part}_initializer": _uniform(units) for part in ("kernel", "recurrent", "bias")}


def _check_kind(attention: str) -> None:
    if attention not in SCORES:
        raise ValueError(f"attention: expected one of {SCORES}, got {attention!r}")


class Encoder(keras.layers.Layer):
    """Embedding and a bidirectional GRU; padding (mask False) is skipped, not read.

    Shapes: call(src (B, Ts) ids, mask (B, Ts) bool) -> outputs (B, Ts, 2G),
    summary (B, 2G) = [last forward state; last backward state].
    """

    def __init__(self, vocab_size: int, d_embed: int, d_hidden: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.embedding = _embedding(vocab_size, d_embed, name="embedding")
        self.rnn = keras.layers.Bidirectional(
            keras.layers.GRU(d_hidden, return_sequences=True, return_state=True, **_gru_inits(d_hidden)), name="rnn"
        )

    def call(self, src: Tensor, mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
        _check_ids("src", src, "(B, Ts)")
        if mask is None:
            mask = ops.ones(ops.shape(src), dtype="bool")
        x = self.embedding(src)  # (B, Ts, E)
        out, h_fwd, h_bwd = self.rnn(x, mask=mask)  # (B, Ts, 2G), (B, G), (B, G)
        # padded steps repeat the last output in Keras; zero them as torch's packing does
        out = out * ops.expand_dims(ops.cast(mask, out.dtype), -1)  # (B, Ts, 2G)
        return out, ops.concatenate([h_fwd, h_bwd], axis=-1)  # (B, 2G)

    def compute_mask(self, *args: Any, **kwargs: Any) -> None:
        return None


def swap_directions(encoder: Encoder) -> None:
    """Exchange the weights of the encoder GRU's two directions, in place (call again to undo).

    The forward GRU then does what the backward one did and vice versa, so the
    encoder reads a reversed source into the summary it gave the source, halves
    exchanged: for a bidirectional encoder, reversing the source (Sutskever et
    al., 2014) is a relabelling of its two directions, not new information.
    Shapes: encoder(src (B, Ts)) summary (B, 2G) = [fwd; bwd]; after the swap
    encoder(reversed src) summary = [bwd; fwd] of the original.
    """
    if not encoder.built:
        raise ValueError("encoder: expected a built encoder (call it once), got one without weights yet")
    fwd, bwd = encoder.rnn.forward_layer, encoder.rnn.backward_layer
    old_fwd = fwd.get_weights()
    fwd.set_weights(bwd.get_weights())
    bwd.set_weights(old_fwd)


class DecoderAttention(keras.layers.Layer):
    """Scores one decoder state against every encoder output and reads a context.

    ``kind``: ``"additive"`` (Bahdanau; its weights are a ``utils.attention``
    ``AdditiveAttention``), ``"dot"`` (needs d_query == d_key) or ``"general"``.
    ``project_keys`` does the part that does not depend on the decoder state,
    once per sentence instead of once per output step.

    Shapes: call(query (B, Dq), memory (B, Ts, De), keys (B, Ts, Dk) or None,
    mask (B, Ts) or None) -> context (B, De), weights (B, Ts); Dk = A, Dq or De by ``kind``.
    """

    def __init__(self, kind: str, d_query: int, d_key: int, d_attn: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if kind not in ("additive", "dot", "general"):
            raise ValueError(f"kind: expected 'additive', 'dot' or 'general', got {kind!r}")
        if kind == "dot" and d_query != d_key:
            raise ValueError(f"d_query: expected d_query == d_key={d_key} for dot scores, got {d_query}")
        self.kind, self.d_query, self.d_key = kind, d_query, d_key
        if kind == "additive":
            self.additive = attn.AdditiveAttention(d_query, d_key, d_attn, name="additive")
        elif kind == "general":
            self.W = self.add_weight(shape=(d_key, d_query), initializer="glorot_uniform", name="W")

    def build(self, *args: Any, **kwargs: Any) -> None:  # every weight is made in __init__
        self.built = True

    def project_keys(self, memory: Tensor) -> Tensor:
        """The query-independent part of the scores. Shapes: (B, Ts, De) -> (B, Ts, Dk)."""
        if self.kind == "additive":
            return ops.matmul(memory, self.additive.W_k)  # (B, Ts, A)
        if self.kind == "general":
            return ops.matmul(memory, self.W)  # (B, Ts, Dq)
        return memory

    def scores(self, query: Tensor, keys: Tensor) -> Tensor:
        """Scores of one query per sentence against projected keys. Shapes: (B, Dq), (B, Ts, Dk) -> (B, Ts)."""
        if self.kind == "additive":
            # additive_scores(query, memory, W_q, W_k, w_v) with memory @ W_k done in project_keys
            q = ops.expand_dims(ops.matmul(query, self.additive.W_q), 1)  # (B, 1, A)
            return ops.tensordot(ops.tanh(q + keys), self.additive.w_v, axes=1)  # (B, Ts)
        return ops.squeeze(attn.dot_scores(ops.expand_dims(query, 1), keys), 1)  # (B, Ts)

    def call(
        self,
        query: Tensor,
        memory: Tensor,
        keys: Tensor | None = None,
        mask: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        q = checks.check_rank("query", query, 2, "(B, Dq)")
        m = checks.check_rank("memory", memory, 3, "(B, Ts, De)")
        if q[-1] != self.d_query or m[-1] != self.d_key or not (q[0] is None or m[0] is None or q[0] == m[0]):
            raise ValueError(
                f"query, memory: expected (B, {self.d_query}) and (B, Ts, {self.d_key}), got {q} and {m}"
            )
        if keys is None:
            keys = self.project_keys(memory)
        scores = ops.expand_dims(self.scores(query, keys), 1)  # (B, 1, Ts)
        mask3 = None if mask is None else ops.expand_dims(mask, 1)  # (B, 1, Ts)
        weights = attn.masked_softmax(scores, mask3)  # (B, 1, Ts)
        context = ops.squeeze(attn.attend(weights, memory), 1)  # (B, De)
        return context, ops.squeeze(weights, 1)


class Decoder(keras.layers.Layer):
    """A GRU decoder that reads a context at every step: attended, or one fixed summary.

    Shapes: call(tgt_in (B, Tt), memory (B, Ts, De), summary (B, De), mask (B, Ts))
    -> logits (B, Tt, V), weights (B, Tt, Ts) or None when ``attention="none"``.
    """

    def __init__(self, vocab_size: int, d_embed: int, d_hidden: int, d_enc: int,
                 attention: str = "additive", d_attn: int = 64, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        _check_kind(attention)
        self.attention_kind = attention
        self._d_enc = d_enc  # to build the layer before its first call (load_weights)
        self.embedding = _embedding(vocab_size, d_embed, name="embedding")
        self.init = keras.layers.Dense(d_hidden, kernel_initializer=_uniform(d_enc), bias_initializer=_uniform(d_enc),
                                       name="init")
        self.attention = (
            None if attention == "none" else DecoderAttention(attention, d_hidden, d_enc, d_attn, name="attention")
        )
        self.cell = keras.layers.GRUCell(d_hidden, **_gru_inits(d_hidden), name="cell")
        d_out_in = d_hidden + d_enc + d_embed
        self.out = keras.layers.Dense(vocab_size, kernel_initializer=_uniform(d_out_in),
                                      bias_initializer=_uniform(d_out_in), name="out")

    def initial_state(self, summary: Tensor) -> Tensor:
        """s_0 = tanh(W_init summary). Shapes: (B, De) -> (B, Gd)."""
        return ops.tanh(self.init(summary))

    def project_keys(self, memory: Tensor) -> Tensor | None:
        """Keys for every step of one sentence (None without attention). Shapes: (B, Ts, De) -> (B, Ts, Dk)."""
        return None if self.attention is None else self.attention.project_keys(memory)

    def step(
        self,
        y_prev: Tensor,
        state: Tensor,
        memory: Tensor,
        keys: Tensor | None,
        summary: Tensor,
        mask: Tensor | None = None,
    ) -> tuple[Tensor, Tensor, Tensor | None]:
        """One output token: attend with s_{i-1}, update the GRU, predict.

        Shapes: y_prev (B,) ids, state (B, Gd), memory (B, Ts, De), keys (B, Ts, Dk),
        summary (B, De), mask (B, Ts) -> logits (B, V), state (B, Gd), weights (B, Ts) or None.
        """
        emb = self.embedding(y_prev)  # (B, E)
        if self.attention is None:
            context, weights = summary, None  # the one fixed vector
        else:
            context, weights = self.attention(state, memory, keys, mask)  # (B, De), (B, Ts)
        state, _ = self.cell(ops.concatenate([emb, context], axis=-1), state)  # (B, Gd)
        logits = self.out(ops.concatenate([state, context, emb], axis=-1))  # (B, V)
        return logits, state, weights

    def call(
        self,
        tgt_in: Tensor,
        memory: Tensor,
        summary: Tensor,
        mask: Tensor | None = None,
    ) -> tuple[Tensor, Tensor | None]:
        _check_ids("tgt_in", tgt_in, "(B, Tt)")
        state = self.initial_state(summary)
        keys = self.project_keys(memory)
        logits, weights = [], []
        for i in range(checks.shape_of(tgt_in)[1]):  # teacher forcing: feed the true previous token
            step_logits, state, w = self.step(tgt_in[:, i], state, memory, keys, summary, mask)
            logits.append(step_logits)
            weights.append(w)
        all_weights = None if self.attention is None else ops.stack(weights, axis=1)  # (B, Tt, Ts)
        return ops.stack(logits, axis=1), all_weights  # (B, Tt, V)


class Seq2Seq(keras.Model):
    """Encoder + decoder; ``attention`` picks the score (or ``"none"``: the fixed-vector baseline).

    Token id 0 is padding in the source (it is masked out of the encoder and of attention).
    Shapes: call(src (B, Ts), tgt_in (B, Tt)) -> logits (B, Tt, V), weights (B, Tt, Ts) or None.
    """

    def __init__(self, src_vocab_size: int, tgt_vocab_size: int, d_embed: int = 32, d_hidden: int = 64,
                 attention: str = "additive", d_attn: int = 64, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        _check_kind(attention)
        self.attention_kind = attention
        self.encoder = Encoder(src_vocab_size, d_embed, d_hidden, name="encoder")
        self.decoder = Decoder(tgt_vocab_size, d_embed, 2 * d_hidden, 2 * d_hidden, attention, d_attn, name="decoder")

    def encode(self, src: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Shapes: src (B, Ts) -> memory (B, Ts, De), summary (B, De), mask (B, Ts)."""
        _check_ids("src", src, "(B, Ts)")
        src = ops.convert_to_tensor(src, dtype="int32")
        mask = ops.not_equal(src, PAD_ID)  # (B, Ts) keep-mask
        memory, summary = self.encoder(src, mask)
        return memory, summary, mask

    def call(self, src: Tensor, tgt_in: Tensor) -> tuple[Tensor, Tensor | None]:
        memory, summary, mask = self.encode(src)
        return self.decoder(ops.convert_to_tensor(tgt_in, dtype="int32"), memory, summary, mask)


def sequence_loss(logits: Tensor, tgt_out: Tensor) -> Tensor:
    """Mean cross-entropy over the real (non-padding) target tokens.

    Shapes: logits (B, Tt, V), tgt_out (B, Tt) ids with 0 = padding -> scalar.
    """
    ls, ts = checks.shape_of(logits), checks.shape_of(tgt_out)
    if ls[:2] != ts:
        raise ValueError(f"tgt_out: expected (B, Tt) = {ls[:2]} from logits {ls}, got {ts}")
    per_token = keras.losses.sparse_categorical_crossentropy(tgt_out, logits, from_logits=True)  # (B, Tt)
    keep = ops.cast(ops.not_equal(tgt_out, PAD_ID), per_token.dtype)  # (B, Tt)
    return ops.sum(per_token * keep) / ops.maximum(ops.sum(keep), 1.0)


def train_seq2seq(
    model: Seq2Seq,
    src: np.ndarray,
    tgt_in: np.ndarray,
    tgt_out: np.ndarray,
    epochs: int = 10,
    batch_size: int = 128,
    lr: float = 3e-3,
    seed: int = 0,
    progress: bool = True,
    on_epoch_end: Callable[[int], dict] | None = None,
) -> dict[str, list[float]]:
    """Teacher-forced training with Adam and gradient clipping at norm 1, in the course's loop.

    ``utils.training.train_loop`` shuffles the rows with a NumPy generator seeded
    with ``seed`` (both twins see the same batches), shows the progress bar and
    keeps the history: ``{"loss": per epoch, "batch_loss": per step, "lr", "seconds",
    "step_seconds", ...}`` plus what ``on_epoch_end(epoch)`` returns.
    Shapes: src (N, Ts), tgt_in (N, Tt), tgt_out (N, Tt).
    """
    import tensorflow as tf

    if not (len(src) == len(tgt_in) == len(tgt_out)):
        raise ValueError(f"src, tgt_in, tgt_out: expected the same N, got {len(src)}, {len(tgt_in)}, {len(tgt_out)}")
    optimizer = keras.optimizers.Adam(learning_rate=lr, epsilon=1e-8, global_clipnorm=1.0)
    if not model.built:
        model(src[:1], tgt_in[:1])

    # one trace serves every batch, the last shorter one too: the batch size is left open (the
    # lengths stay fixed: the decoder unrolls over Tt)
    s_spec, t_spec = (tf.TensorSpec([None, np.shape(a)[1]], tf.int32) for a in (src, tgt_in))

    @tf.function(input_signature=[s_spec, t_spec, t_spec])
    def train_step(s: Tensor, ti: Tensor, to: Tensor) -> Tensor:
        with tf.GradientTape() as tape:
            logits, _ = model(s, ti, training=True)
            loss = sequence_loss(logits, to)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    def step(idx: np.ndarray, _lr: float) -> float:
        return float(train_step(*(tf.constant(a[idx], tf.int32) for a in (src, tgt_in, tgt_out))))

    return train_loop(step, len(src), epochs, batch_size, seed, schedule=lambda i: lr, progress=progress,
                      desc="seq2seq", on_epoch_end=on_epoch_end)


def greedy_decode(
    model: Seq2Seq, src: np.ndarray, max_len: int, bos_id: int = BOS_ID, eos_id: int = EOS_ID, batch_size: int = 512,
    attention_mask: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray | None]:
    """Feed back the model's own most likely token, step by step (no teacher forcing).

    After <eos> a sequence emits padding (0). Returns NumPy ids and the
    attention weights of every step (None without attention).
    ``attention_mask`` (optional) narrows where each output step may look, on top
    of the padding mask: a boolean keep-mask (True = may attend), e.g. the local
    window of ``utils.attention``'s ``local_window_mask``. A step whose row keeps
    no real token gets all-zero weights and a zero context.
    Shapes: src (B, Ts), attention_mask broadcastable to (B, 1, max_len, Ts)
    -> tokens (B, max_len), weights (B, max_len, Ts) or None.
    """
    _check_ids("src", src, "(B, Ts)")
    if attention_mask is not None:
        if model.attention_kind == "none":
            raise ValueError("attention_mask: this model has no attention (attention='none') to mask")
        attention_mask = _s2s_checks.decode_mask(attention_mask, len(src), max_len, checks.shape_of(src)[1])
    src = np.asarray(src)
    all_tokens, all_weights = [], []
    for start in range(0, len(src), batch_size):
        s = src[start: start + batch_size]
        memory, summary, mask = model.encode(s)
        dec = model.decoder
        state, keys = dec.initial_state(summary), dec.project_keys(memory)
        y = ops.full((len(s),), bos_id, dtype="int32")
        done = np.zeros(len(s), dtype=bool)
        tokens, weights = [], []
        for i in range(max_len):
            step_mask = mask
            if attention_mask is not None:  # (b, Ts): padding and the caller's mask for this step
                step_mask = ops.logical_and(mask, attention_mask[start: start + batch_size, i])
            logits, state, w = dec.step(y, state, memory, keys, summary, step_mask)
            y = ops.cast(ops.argmax(logits, axis=-1), "int32")  # (B,)
            y_np = np.asarray(ops.convert_to_numpy(y))
            tokens.append(np.where(done, 0, y_np))
            done = done | (y_np == eos_id)
            if w is not None:
                weights.append(np.asarray(ops.convert_to_numpy(w)))
        all_tokens.append(np.stack(tokens, axis=1))  # (b, max_len)
        if weights:
            all_weights.append(np.stack(weights, axis=1))  # (b, max_len, Ts)
    return np.concatenate(all_tokens).astype(np.int64), (np.concatenate(all_weights) if all_weights else None)


# ----------------------------------------------------------------------------
# Weights under one layout, the same in both twins (see utils/seq2seq/__init__.py)
# ----------------------------------------------------------------------------


def _gru_table(prefix: str, cell: keras.layers.GRUCell) -> dict[str, tuple[Any, int | None, bool]]:
    # Keras keeps the gates in the order (z, r, h) and both biases in one (2, 3G) variable
    return {f"{prefix}W_x": (cell.kernel, None, True), f"{prefix}W_h": (cell.recurrent_kernel, None, True),
            f"{prefix}b_x": (cell.bias, 0, True), f"{prefix}b_h": (cell.bias, 1, True)}


def _ensure_built(layer: keras.layers.Layer) -> None:
    """Create a layer's weights (Keras makes some at the first call) with a call on a dummy input."""
    if not isinstance(layer, (Seq2Seq, Encoder, DecoderAttention, Decoder)):
        raise ValueError(
            f"layer: expected an Encoder, DecoderAttention, Decoder or Seq2Seq, got {type(layer).__name__}")
    if layer.built:
        return
    ids = ops.ones((1, 2), dtype="int32")  # two positions: a softmax over one would draw a Keras warning
    if isinstance(layer, Seq2Seq):
        layer(ids, ids)
    elif isinstance(layer, Encoder):
        layer(ids)
    elif isinstance(layer, Decoder):
        layer(ids, ops.zeros((1, 2, layer._d_enc)), ops.zeros((1, layer._d_enc)))


def _weight_table(layer: keras.layers.Layer) -> dict[str, tuple[Any, int | None, bool]]:
    """Each name of the layout -> (the Keras variable that holds it, its row in that variable or None,
    gates in Keras's order)."""
    if isinstance(layer, Seq2Seq):
        return {**{f"encoder.{k}": v for k, v in _weight_table(layer.encoder).items()},
                **{f"decoder.{k}": v for k, v in _weight_table(layer.decoder).items()}}
    if isinstance(layer, Encoder):
        table = {"embedding": (layer.embedding.embeddings, None, False)}
        table.update(_gru_table("fwd.", layer.rnn.forward_layer.cell))
        table.update(_gru_table("bwd.", layer.rnn.backward_layer.cell))
        return table
    if isinstance(layer, DecoderAttention):
        if layer.kind == "additive":
            return {n: (getattr(layer.additive, n), None, False) for n in ("W_q", "W_k", "w_v")}
        return {"W": (layer.W, None, False)} if layer.kind == "general" else {}
    if isinstance(layer, Decoder):
        table = {"embedding": (layer.embedding.embeddings, None, False), "W_init": (layer.init.kernel, None, False),
                 "b_init": (layer.init.bias, None, False)}
        if layer.attention is not None:
            table.update({f"attention.{k}": v for k, v in _weight_table(layer.attention).items()})
        table.update(_gru_table("cell.", layer.cell))
        table.update({"W_out": (layer.out.kernel, None, False), "b_out": (layer.out.bias, None, False)})
        return table
    raise ValueError(f"layer: expected an Encoder, DecoderAttention, Decoder or Seq2Seq, got {type(layer).__name__}")


def _export_one(variable: Any, row: int | None, keras_gates: bool) -> np.ndarray:
    a = np.array(ops.convert_to_numpy(variable))
    a = a if row is None else a[row]
    return _s2s_checks.gates_as_keras(a) if keras_gates else a


def export_weights(layer: keras.layers.Layer) -> dict[str, np.ndarray]:
    """The weights of a seq2seq layer as NumPy arrays, named and laid out as in both twins.

    ``layer``: an ``Encoder``, ``DecoderAttention``, ``Decoder`` or ``Seq2Seq``.
    Matrices act on the right (``x @ W``); a GRU's three gate blocks are side by side
    in the order (r, z, n); the table of names is in ``utils/seq2seq/__init__.py``.
    ``load_weights`` of either twin takes the result back.
    Shapes: e.g. "encoder.fwd.W_x" (E, 3G), "decoder.W_out" (Gd+De+E, V).
    """
    _ensure_built(layer)
    return {name: _export_one(*entry) for name, entry in _weight_table(layer).items()}


def load_weights(layer: keras.layers.Layer, weights: Mapping[str, Any]) -> None:
    """Overwrite a seq2seq layer's weights, in place, from the names and layout of ``export_weights``.

    ``weights`` maps every name of the layer's layout (no more, no fewer) to a NumPy
    array or a tensor of either framework, e.g. ``export_weights`` of the other twin,
    or ``named_weights`` of a layer written from scratch with the same attribute names.
    Shapes: as ``export_weights(layer)``.
    """
    _ensure_built(layer)
    table = _weight_table(layer)
    arrays = _s2s_checks.checked_weights({n: _export_one(*entry).shape for n, entry in table.items()}, weights)
    for name, (variable, row, keras_gates) in table.items():
        a = _s2s_checks.gates_as_keras(arrays[name]) if keras_gates else arrays[name]
        if row is not None:  # one row of the (2, 3G) bias: keep the other
            whole = np.array(ops.convert_to_numpy(variable))
            whole[row] = a
            a = whole
        variable.assign(a)


def named_weights(layer: keras.layers.Layer) -> dict[str, np.ndarray]:
    """Every weight of any layer under its attribute path ("cell.W_x"), as NumPy arrays.

    For a layer written from scratch whose attributes carry the names of
    ``export_weights`` (e.g. ``embedding``, ``fwd.W_x``), ``load_weights(package_layer,
    named_weights(layer))`` gives the package's layer the same weights. The walk
    follows public attributes that hold a variable or a layer, in the order they were set.
    Shapes: as the weights.
    """
    found: dict[str, np.ndarray] = {}

    def walk(obj: keras.layers.Layer, prefix: str) -> None:
        for name, value in vars(obj).items():
            if name.startswith("_"):
                continue
            if isinstance(value, keras.Variable):
                found[prefix + name] = np.array(ops.convert_to_numpy(value))
            elif isinstance(value, keras.layers.Layer):
                walk(value, f"{prefix}{name}.")

    walk(layer, "")
    return found
