"""Keras 3 twin of BERT (same names and signatures as torch_impl).

Written with ``keras.ops`` on the TensorFlow backend; fine-tuning runs the
PyTorch twin's loop with a compiled (``tf.function``) step. The blocks are ``utils.transformer``'s ``EncoderBlock`` with
``norm_first=False`` (post-LN) and GELU.
Shapes: letters of ``utils/shapes.py``; here B batch, T tokens, D d_model, H heads,
F d_ff, V vocabulary size, C classes, L layers, N examples. Masks: ``padding_mask``
(B, T) is True on real tokens; the blocks get the course's keep-mask (B, 1, 1, T).
Labels that no loss counts are -100 (``IGNORE_INDEX``), as in the PyTorch twin.
"""
from __future__ import annotations

import os
import time
from typing import Any, Callable, Sequence

from utils.runtime import prepare_tensorflow_env

prepare_tensorflow_env()

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from keras import ops  # noqa: E402

from utils.transformer.keras_impl import EncoderBlock, LayerNorm, Linear, _Dropout, export_weights, load_weights  # noqa: E402

from utils.training import batch_order, planned_steps, train_loop  # noqa: E402

from .common import IGNORE_INDEX, MLM_SPLIT, BertConfig, check_mlm_args, check_pooling, encode_texts, trim_rows, warmup_linear_decay, warmup_linear_schedule  # noqa: E402
from .weights import hf_to_course, read_hf_folder, resolve_model_dir  # noqa: E402

__all__ = [
    "encode_texts",
    "warmup_linear_decay",
    "export_weights",
    "load_weights",
    "BertEmbeddings",
    "Bert",
    "mean_pool",
    "BertClassifier",
    "BertForMaskedLM",
    "mask_tokens",
    "mlm_loss",
    "pretrain_mlm",
    "load_pretrained",
    "make_optimizer",
    "fine_tune_step",
    "fine_tune",
    "predict_proba",
    "sentence_vectors",
]

Tensor = Any


def _as_ids(name: str, ids: Any) -> Tensor:
    if isinstance(ids, np.ndarray) and ids.dtype.kind not in "iu":
        raise ValueError(f"{name}: expected integer ids (B, T), got dtype {ids.dtype}")
    t = ops.convert_to_tensor(ids)
    if len(t.shape) != 2:
        raise ValueError(f"{name}: expected token ids (B, T), got shape {tuple(t.shape)}")
    if "float" in str(t.dtype) or "bool" in str(t.dtype):
        raise ValueError(f"{name}: expected integer ids (B, T), got dtype {t.dtype}")
    return ops.cast(t, "int32")


def _same_shape(a: tuple, b: tuple) -> bool:
    """Shapes equal where both are known (a traced batch dimension is None)."""
    return len(a) == len(b) and all(x is None or y is None or x == y for x, y in zip(a, b))


def _keep_mask(ids: Tensor, padding_mask: Any, pad_id: int) -> Tensor:
    """The (B, T) keep-mask: ``padding_mask`` as booleans, or ``ids != pad_id`` when it is None."""
    if padding_mask is None:
        return ops.not_equal(ids, pad_id)  # (B, T)
    keep = ops.cast(ops.convert_to_tensor(padding_mask), "bool")
    if tuple(keep.shape) != tuple(ids.shape):
        raise ValueError(f"padding_mask: expected {tuple(ids.shape)} like token_ids, got {tuple(keep.shape)}")
    return keep


def _unpack(token_ids: Any, segment_ids: Any, padding_mask: Any) -> tuple:
    """Inputs may come as a dict {"token_ids", "segment_ids", "padding_mask"} (as ``encode_texts`` returns)."""
    if isinstance(token_ids, dict):
        d = token_ids
        if "token_ids" not in d:
            raise ValueError(f"token_ids: a dict of inputs needs the key 'token_ids', got keys {sorted(d)}")
        return d["token_ids"], d.get("segment_ids", segment_ids), d.get("padding_mask", padding_mask)
    return token_ids, segment_ids, padding_mask


class BertEmbeddings(keras.layers.Layer):
    """Token + learned position + segment embeddings, then LayerNorm and dropout.

    Tables are initialised N(0, 0.02) as in BERT, and (unlike the Transformer's)
    not scaled by sqrt(D).
    Shapes: call(token_ids (B, T), segment_ids (B, T) or None = all 0) -> (B, T, D).
    """

    def __init__(self, config: BertConfig, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        c = config
        self.config = c
        init = keras.initializers.RandomNormal(stddev=0.02)
        self.token = self.add_weight(shape=(c.vocab_size, c.d_model), initializer=init, name="token")  # (V, D)
        self.position = self.add_weight(shape=(c.max_len, c.d_model), initializer=init, name="position")  # (max_len, D)
        self.segment = self.add_weight(shape=(c.type_vocab_size, c.d_model), initializer=init, name="segment")  # (type_vocab_size, D)
        self.norm = LayerNorm(c.d_model, c.layer_norm_eps, name="norm")
        self._drop = _Dropout(c.dropout, name="dropout")
        self.built = True  # every weight exists already

    def call(self, token_ids: Any, segment_ids: Any = None, training: bool | None = None) -> Tensor:
        ids = _as_ids("token_ids", token_ids)
        b, t = ids.shape
        if t is not None and t > self.config.max_len:
            raise ValueError(
                f"token_ids: expected (B, T) with T <= max_len={self.config.max_len}, got {(b, t)}; "
                f"encode_texts(..., max_len={self.config.max_len}) truncates long texts"
            )
        if tf.executing_eagerly():
            lo, hi = int(ops.min(ids)), int(ops.max(ids))
            if lo < 0 or hi >= self.config.vocab_size:
                raise ValueError(f"token_ids: expected ids in [0, {self.config.vocab_size}), got min {lo}, max {hi}")
        seg = ops.zeros_like(ids) if segment_ids is None else _as_ids("segment_ids", segment_ids)
        if tuple(seg.shape) != tuple(ids.shape):
            raise ValueError(f"segment_ids: expected {tuple(ids.shape)} like token_ids, got {tuple(seg.shape)}")
        if tf.executing_eagerly():
            lo, hi = int(ops.min(seg)), int(ops.max(seg))
            if lo < 0 or hi >= self.config.type_vocab_size:
                raise ValueError(f"segment_ids: expected ids in [0, {self.config.type_vocab_size}), got min {lo}, max {hi}")
        t_now = ops.shape(ids)[1]
        x = (
            ops.take(self.token, ids, axis=0)
            + ops.expand_dims(self.position[:t_now], 0)
            + ops.take(self.segment, seg, axis=0)
        )  # (B, T, D)
        return self._drop(self.norm(x), training=training)

    def compute_mask(self, *args: Any, **kwargs: Any) -> None:
        return None


class Bert(keras.Model):
    """The BERT encoder: embeddings, L post-LN blocks (GELU), and the pooler tanh(W h_[CLS] + b).

    Shapes: call(token_ids (B, T), segment_ids (B, T), padding_mask (B, T) True = real token,
    default token_ids != pad_id) -> sequence (B, T, D), pooled (B, D), L attention weights (B, H, T, T).
    """

    def __init__(self, config: BertConfig, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not isinstance(config, BertConfig):
            raise ValueError(f"config: expected a BertConfig, got {type(config).__name__}")
        c = config
        self.config = c
        self.embeddings = BertEmbeddings(c, name="embeddings")
        self.blocks = [
            EncoderBlock.from_config(c, norm_first=False, activation="gelu", name=f"blocks_{i}")  # BERT: post-LN, GELU
            for i in range(c.num_layers)
        ]
        self.pooler = Linear(c.d_model, c.d_model, name="pooler")
        self.built = True

    def call(self, token_ids: Any, segment_ids: Any = None, padding_mask: Any = None, training: bool | None = None):
        token_ids, segment_ids, padding_mask = _unpack(token_ids, segment_ids, padding_mask)
        ids = _as_ids("token_ids", token_ids)
        keep = _keep_mask(ids, padding_mask, self.config.pad_id)  # (B, T)
        x = self.embeddings(ids, segment_ids, training=training)  # (B, T, D)
        mask = keep[:, None, None, :]  # (B, 1, 1, T)
        weights = []
        for block in self.blocks:
            x, w = block(x, mask, training=training)
            weights.append(w)
        pooled = ops.tanh(self.pooler(x[:, 0]))  # (B, D) from the [CLS] position
        return x, pooled, weights

    def compute_mask(self, *args: Any, **kwargs: Any) -> None:
        return None


def mean_pool(hidden: Tensor, padding_mask: Any) -> Tensor:
    """The average of the token vectors over the real tokens ([CLS] and [SEP] included, padding left out).

    This is the sentence vector that sentence-transformers models (all-MiniLM-L6-v2
    among them) are trained to produce. A row without real tokens gives zeros.
    Shapes: hidden (B, T, D), padding_mask (B, T) True on real tokens -> (B, D).
    """
    hidden = ops.convert_to_tensor(hidden)
    if len(hidden.shape) != 3:
        raise ValueError(f"hidden: expected token vectors (B, T, D), got shape {tuple(hidden.shape)}")
    keep = ops.convert_to_tensor(padding_mask)
    if not _same_shape(tuple(keep.shape), tuple(hidden.shape[:2])):
        raise ValueError(f"padding_mask: expected {tuple(hidden.shape[:2])} like hidden's (B, T), got {tuple(keep.shape)}")
    w = ops.expand_dims(ops.cast(keep, hidden.dtype), -1)  # (B, T, 1): 1 on real tokens, 0 on padding
    return ops.sum(hidden * w, axis=1) / ops.maximum(ops.sum(w, axis=1), 1.0)  # (B, D)


class BertClassifier(keras.Model):
    """BERT plus a sentence-classification head: dropout, then a linear layer on one vector per sentence.

    ``pooling`` chooses that vector: "cls" (default) is BERT's pooler,
    tanh(W h_[CLS] + b), the vector BERT itself was fine-tuned from; "mean" is
    ``mean_pool`` of the final token vectors, the vector sentence-transformers
    checkpoints such as all-MiniLM-L6-v2 were trained to give. With "mean" the
    pooler takes no part and gets no gradient (the optimiser skips it).
    Shapes: call(token_ids (B, T), ...) -> logits (B, C), or (logits, L weights (B, H, T, T))
    with ``return_attention``.
    """

    def __init__(self, config: BertConfig, num_classes: int = 2, pooling: str = "cls", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 2:
            raise ValueError(f"num_classes: expected an int >= 2, got {num_classes!r}")
        self.config, self.num_classes, self.pooling = config, num_classes, check_pooling(pooling)
        self.bert = Bert(config, name="bert")
        self.head = Linear(config.d_model, num_classes, name="head")
        # N(0, 0.02) like the rest of BERT, through a Keras initialiser so the course's seed reaches it
        self.head.w.assign(keras.initializers.RandomNormal(stddev=0.02)(shape=(config.d_model, num_classes)))
        self._drop = _Dropout(config.dropout, name="dropout")
        self.built = True

    def call(
        self,
        token_ids: Any,
        segment_ids: Any = None,
        padding_mask: Any = None,
        training: bool | None = None,
        return_attention: bool = False,
    ):
        token_ids, segment_ids, padding_mask = _unpack(token_ids, segment_ids, padding_mask)
        sequence, pooled, weights = self.bert(token_ids, segment_ids, padding_mask, training=training)  # (B, T, D), (B, D)
        if self.pooling == "mean":
            keep = _keep_mask(_as_ids("token_ids", token_ids), padding_mask, self.config.pad_id)  # (B, T)
            pooled = mean_pool(sequence, keep)  # (B, D)
        logits = self.head(self._drop(pooled, training=training))  # (B, C)
        return (logits, weights) if return_attention else logits

    def compute_mask(self, *args: Any, **kwargs: Any) -> None:
        return None


class BertForMaskedLM(keras.Model):
    """BERT plus the masked-language-model head: dense + GELU + LayerNorm, then scores against the token table (tied).

    Shapes: call(token_ids (B, T), ...) -> logits (B, T, V), L weights (B, H, T, T).
    """

    def __init__(self, config: BertConfig, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.config = config
        self.bert = Bert(config, name="bert")
        self.transform = Linear(config.d_model, config.d_model, name="transform")
        self.norm = LayerNorm(config.d_model, config.layer_norm_eps, name="norm")
        self.out_bias = self.add_weight(shape=(config.vocab_size,), initializer="zeros", name="out_bias")
        self.built = True

    def call(self, token_ids: Any, segment_ids: Any = None, padding_mask: Any = None, training: bool | None = None):
        x, _, weights = self.bert(token_ids, segment_ids, padding_mask, training=training)  # (B, T, D)
        return self.mlm_logits(x), weights  # (B, T, V)

    def mlm_logits(self, hidden: Tensor) -> Tensor:
        """The head alone, on any top vectors: dense + GELU + LayerNorm, then scores against the token table.

        Shapes: hidden (..., D) -> logits (..., V).
        """
        h = self.norm(ops.gelu(self.transform(hidden), approximate=False))  # (..., D)
        return ops.matmul(h, ops.transpose(self.bert.embeddings.token)) + self.out_bias  # (..., V), tied

    def compute_mask(self, *args: Any, **kwargs: Any) -> None:
        return None


def _chosen_loss(model: BertForMaskedLM, inputs: Tensor, labels: Tensor, keep: Tensor, training: bool) -> Tensor:
    """``mlm_loss(model(inputs, None, keep, training)[0], labels)``, with the head run at the chosen positions only.

    The loss reads nothing else, and the head's (B, T, V) scores are most of a
    small model's work: on lesson 7's tiny BERT a pre-training step takes about
    half the time. Shapes: inputs, labels, keep (B, T) -> scalar.
    """
    x, _, _ = model.bert(inputs, None, keep, training=training)  # (B, T, D)
    chosen = ops.not_equal(labels, IGNORE_INDEX)  # (B, T)
    logits = model.mlm_logits(tf.boolean_mask(x, chosen))  # (N, V): the chosen positions only
    y = tf.boolean_mask(labels, chosen)  # (N,)
    nll = keras.losses.sparse_categorical_crossentropy(y, ops.cast(logits, "float32"), from_logits=True)  # (N,)
    return ops.sum(nll) / ops.maximum(ops.cast(ops.size(y), "float32"), 1.0)


_GLOBAL_SEEDS: keras.random.SeedGenerator | None = None


def mask_tokens(
    token_ids: Any,
    mask_id: int,
    vocab_size: int,
    special_ids: Sequence[int],
    mlm_probability: float = 0.15,
    seed: int | None = None,
    split: Sequence[float] = MLM_SPLIT,
) -> tuple[Tensor, Tensor]:
    """BERT's masking: choose each non-special token with probability ``mlm_probability``;
    of the chosen, 80% become [MASK], 10% a random (non-special) token, 10% stay as they are
    (``split``, e.g. (1.0, 0.0, 0.0) to always write [MASK]).

    Special tokens ([CLS], [SEP], [PAD], ...) and padding are never chosen. Labels
    hold the original id at chosen positions and -100 (``IGNORE_INDEX``) elsewhere;
    ``mlm_loss`` (or Keras's ``SparseCategoricalCrossentropy(ignore_class=-100)``)
    skips them. ``seed`` makes the draw repeatable.
    Shapes: token_ids (B, T) -> inputs (B, T), labels (B, T).
    """
    global _GLOBAL_SEEDS
    ids = _as_ids("token_ids", token_ids)
    allowed = ops.convert_to_tensor(check_mlm_args(tuple(ids.shape), mask_id, vocab_size, special_ids, mlm_probability, split).astype("int32"))
    if seed is None:
        if _GLOBAL_SEEDS is None:
            _GLOBAL_SEEDS = keras.random.SeedGenerator()
        gen = _GLOBAL_SEEDS
    else:
        gen = keras.random.SeedGenerator(int(seed))  # one generator for the three draws: they must differ
    special = ops.convert_to_tensor(np.asarray(sorted(set(int(i) for i in special_ids) | {int(mask_id)}), dtype="int32"))
    eligible = ops.logical_not(ops.isin(ids, special))  # (B, T)
    shape = ops.shape(ids)
    chosen = ops.logical_and(keras.random.uniform(shape, seed=gen) < mlm_probability, eligible)  # (B, T)
    labels = ops.where(chosen, ids, ops.full_like(ids, IGNORE_INDEX))
    r = keras.random.uniform(shape, seed=gen)  # one draw decides [MASK] / random / keep
    p_mask, p_random = float(split[0]), float(split[0]) + float(split[1])  # r below p_mask: [MASK]; up to p_random: random
    to_mask = ops.logical_and(chosen, r < p_mask)
    to_random = ops.logical_and(chosen, ops.logical_and(r >= p_mask, r < p_random))
    pick = keras.random.randint(shape, 0, int(allowed.shape[0]), seed=gen)
    random_ids = ops.take(allowed, pick, axis=0)  # (B, T)
    inputs = ops.where(to_mask, ops.full_like(ids, int(mask_id)), ids)
    inputs = ops.where(to_random, random_ids, inputs)
    return inputs, labels


def mlm_loss(logits: Tensor, labels: Any) -> Tensor:
    """Mean cross-entropy over the chosen positions only (labels != -100).

    Shapes: logits (B, T, V), labels (B, T) -> scalar.
    """
    labels = _as_ids("labels", labels)
    if tuple(logits.shape[:2]) != tuple(labels.shape):
        raise ValueError(f"labels: expected {tuple(logits.shape[:2])} from logits {tuple(logits.shape)}, got {tuple(labels.shape)}")
    keep = ops.not_equal(labels, IGNORE_INDEX)  # (B, T)
    safe = ops.where(keep, labels, ops.zeros_like(labels))
    logp = ops.log_softmax(ops.cast(logits, "float32"), axis=-1)  # (B, T, V)
    nll = -ops.take_along_axis(logp, ops.expand_dims(safe, -1), axis=-1)[..., 0]  # (B, T)
    w = ops.cast(keep, "float32")
    return ops.sum(nll * w) / ops.maximum(ops.sum(w), 1.0)


def pretrain_mlm(
    model: BertForMaskedLM,
    token_ids: np.ndarray,
    mask_id: int,
    special_ids: Sequence[int],
    steps: int = 500,
    batch_size: int = 32,
    peak_lr: float = 1e-3,
    warmup_fraction: float = 0.1,
    seed: int = 0,
    max_seconds: float | None = None,
    progress: bool = True,
    split: Sequence[float] = MLM_SPLIT,
) -> dict[str, list[float]]:
    """Masked-language-model pre-training: draw a batch, mask it afresh, predict the chosen tokens.

    The loss is ``mlm_loss`` of the model's output, computed with the head at the
    chosen positions only (the same number, in about half the time). AdamW (weight decay 0.01), warm-up then linear decay, gradient clipping at 1,
    in the course's loop (``utils.training.train_loop``) as one epoch of ``steps``
    batches whose rows are drawn with replacement by a NumPy generator seeded
    with ``seed``. ``split`` is passed to ``mask_tokens`` (BERT's 80/10/10 by
    default). Returns the loop's history: "batch_loss", "lr" and
    "step_seconds" per step, "loss" and "seconds" for the whole run.
    Shapes: token_ids (N, T).
    """
    ids = np.asarray(token_ids)
    if ids.ndim != 2:
        raise ValueError(f"token_ids: expected (N, T), got shape {ids.shape}")
    optimizer, schedule = make_optimizer(model, peak_lr, steps, warmup_fraction)
    pad_id = model.config.pad_id
    done = [0]  # steps taken: each step masks with its own seed

    optimizer.build(model.trainable_variables)  # its slots exist before the first trace

    @tf.function(jit_compile=False)  # every batch has the same shape (B, T): traced once
    def update(inputs: Tensor, labels: Tensor, keep: Tensor) -> Tensor:
        with tf.GradientTape() as tape:
            loss = _chosen_loss(model, inputs, labels, keep, True)
        _apply(optimizer, tape.gradient(loss, model.trainable_variables), model.trainable_variables)
        return loss

    def step(rows: np.ndarray, lr: float) -> float:
        optimizer.learning_rate.assign(lr)
        batch = ids[rows]
        inputs, labels = mask_tokens(batch, mask_id, model.config.vocab_size, special_ids, seed=seed * 1_000_003 + done[0], split=split)
        done[0] += 1
        return float(update(inputs, labels, tf.convert_to_tensor(batch != pad_id)))

    return train_loop(step, len(ids), 1, batch_size, seed, schedule,
                      batches=lambda rng: [rng.integers(0, len(ids), batch_size) for _ in range(steps)],
                      max_seconds=max_seconds, progress=progress, desc="MLM pre-training")


class _AdamW(keras.optimizers.AdamW):
    """Keras's AdamW with epsilon where PyTorch puts it: m_hat / (sqrt(v_hat) + eps).

    Keras adds epsilon to sqrt(v) before the bias correction, which makes it
    1/sqrt(1 - beta_2^t) times larger in the first steps (about 30x at step 1);
    weights with tiny gradients then move differently in the two twins.
    """

    def update_step(self, gradient: Tensor, variable: Any, learning_rate: Any) -> None:
        dtype = variable.dtype
        lr, g = ops.cast(learning_rate, dtype), ops.cast(gradient, dtype)
        t = ops.cast(self.iterations + 1, dtype)
        correction_1 = 1.0 - ops.power(ops.cast(self.beta_1, dtype), t)
        correction_2 = 1.0 - ops.power(ops.cast(self.beta_2, dtype), t)
        i = self._get_variable_index(variable)
        m, v = self._momentums[i], self._velocities[i]
        self.assign(m, self.beta_1 * m + (1.0 - self.beta_1) * g)  # first moment
        self.assign(v, self.beta_2 * v + (1.0 - self.beta_2) * ops.square(g))  # second moment
        m_hat, v_hat = m / correction_1, v / correction_2
        self.assign_sub(variable, lr * m_hat / (ops.sqrt(v_hat) + self.epsilon))


def load_pretrained(
    name_or_path: str | os.PathLike | None = None, num_classes: int | None = None, dropout: float = 0.1, pooling: str = "cls"
):
    """The course's BERT holding pretrained Hugging Face weights.

    ``name_or_path``: None (the packaged all-MiniLM-L6-v2), a local Hugging Face
    folder, or a hub name (online; offline it falls back to the packaged weights
    with a warning). ``num_classes``: None gives a ``Bert``; a number gives a
    ``BertClassifier`` whose body is pretrained and whose head is new, reading
    the sentence vector that ``pooling`` names ("cls" or "mean", see ``BertClassifier``).
    Returns (model, folder); ``weights.load_tokenizer(folder)`` gives its tokenizer.
    Shapes: none.
    """
    check_pooling(pooling)
    folder = resolve_model_dir(name_or_path)
    hf_config, state = read_hf_folder(folder)
    config = BertConfig.from_hf(hf_config, dropout=dropout)
    course = hf_to_course(state, config)
    if num_classes is None:
        model = Bert(config)
        load_weights(model, course)
    else:
        model = BertClassifier(config, num_classes, pooling)
        weights = export_weights(model)
        weights.update({f"bert.{k}": v for k, v in course.items()})
        load_weights(model, weights)
    return model, folder


def make_optimizer(model: keras.Model, peak_lr: float, total_steps: int, warmup_fraction: float = 0.1, weight_decay: float = 0.01):
    """AdamW with BERT's schedule (linear warm-up over ``warmup_fraction`` of the steps, then linear decay to 0).

    The contract both twins keep: returns ``(optimizer, schedule)``, where
    ``schedule(i)`` is the learning rate of the 0-based step ``i``
    (``common.warmup_linear_schedule``) and the optimizer starts at ``schedule(0)``;
    the training loop sets each step's rate from the schedule. Biases and LayerNorm
    parameters get no weight decay. Gradients are clipped to a global norm of 1 as
    part of every update: here by the optimizer (``global_clipnorm``), in PyTorch by
    the step (``clip_grad_norm_``: a PyTorch optimizer cannot clip).
    Shapes: none.
    """
    schedule = warmup_linear_schedule(peak_lr, total_steps, warmup_fraction)
    optimizer = _AdamW(learning_rate=schedule(0), weight_decay=weight_decay, epsilon=1e-8, global_clipnorm=1.0, name="adamw")
    optimizer.exclude_from_weight_decay(var_list=[v for v in model.trainable_variables if len(v.shape) < 2])
    return optimizer, schedule


def _apply(optimizer: Any, grads: list, variables: list) -> None:
    pairs = [(g, v) for g, v in zip(grads, variables) if g is not None]  # e.g. the pooler gets none in MLM
    optimizer.apply_gradients(pairs)


def _classification_update(model: BertClassifier, optimizer: Any, batch: dict, y: Tensor) -> Tensor:
    """Forward in training mode, cross-entropy, gradients, clipped update; the loss before it.

    Runs eagerly (``fine_tune_step``) or traced (``_compiled_step``): the label check
    reads static shapes, known in both. With pooling="mean" the pooler takes no part:
    its gradients are None and ``_apply`` skips it, as torch's AdamW skips parameters
    without a gradient.
    """
    with tf.GradientTape() as tape:
        logits = model(batch, training=True)  # (B, C)
        if tuple(y.shape) != tuple(logits.shape[:1]):
            raise ValueError(f"labels: expected ({logits.shape[0]},) like the batch, got {tuple(y.shape)}")
        loss = ops.mean(keras.losses.sparse_categorical_crossentropy(y, logits, from_logits=True))
    _apply(optimizer, tape.gradient(loss, model.trainable_variables), model.trainable_variables)
    return loss


def fine_tune_step(model: BertClassifier, optimizer: Any, batch: dict, labels: Any) -> float:
    """One fine-tuning step: forward in training mode, cross-entropy, gradients, clipped update.

    Returns the batch's loss before the update.
    Shapes: batch {"token_ids": (B, T), "segment_ids": (B, T), "padding_mask": (B, T)}, labels (B,) -> float.
    """
    y = ops.cast(ops.convert_to_tensor(np.asarray(labels)), "int32")
    return float(_classification_update(model, optimizer, batch, y))


def _compiled_step(model: BertClassifier, optimizer: Any):
    """``fine_tune_step``'s maths as one TensorFlow graph: traced once per batch width
    (``trim_rows`` keeps widths to multiples of 16, so a handful of traces), then run
    without Python overhead. XLA stays off: compiling costs more than it saves here."""
    optimizer.build(model.trainable_variables)  # its slots exist before the first trace

    @tf.function(jit_compile=False)
    def step(batch: dict, y: Tensor) -> Tensor:
        return _classification_update(model, optimizer, batch, y)

    return step


def fine_tune(
    model: BertClassifier,
    inputs: dict,
    labels: np.ndarray,
    epochs: int = 1,
    batch_size: int = 32,
    peak_lr: float = 5e-5,
    warmup_fraction: float = 0.1,
    seed: int = 0,
    max_seconds: float | None = None,
    progress: bool = True,
    bucket: bool = False,
    clock: Callable[[], float] = time.perf_counter,
    max_steps: int | None = None,
) -> dict[str, list[float]]:
    """Fine-tune for sentence classification (AdamW, warm-up then linear decay, clipping at 1).

    Runs the compiled ``fine_tune_step`` in the course's loop (``utils.training.train_loop``),
    as the PyTorch twin does: batches drawn by a NumPy permutation seeded with ``seed``,
    trailing padding cut by ``trim_rows``. Stops after ``max_seconds``, checked after
    every step. ``bucket=True`` groups rows of similar length into a batch
    (``utils.training.batch_order``), so ``trim_rows`` cuts most of the padding:
    faster steps on short texts. ``clock`` measures ``max_seconds`` and the history's
    seconds (``time.process_time`` makes it a CPU-time budget). ``max_steps`` ends the
    run after that many steps, a last epoch cut short, and the learning-rate schedule
    is planned for them, so its decay completes.
    Returns the loop's history: "batch_loss", "lr", "step_seconds" per step; "loss", "seconds" per epoch.
    Shapes: inputs {"token_ids": (N, T), "segment_ids": (N, T), "padding_mask": (N, T)}, labels (N,).
    """
    y = np.asarray(labels)
    n = len(y)
    if any(len(np.asarray(v)) != n for v in inputs.values()):
        raise ValueError(f"inputs: expected {n} rows like labels, got {[len(np.asarray(v)) for v in inputs.values()]}")
    if bucket and "padding_mask" not in inputs:
        raise ValueError(f"inputs: bucket=True sorts rows by length and needs 'padding_mask', got keys {sorted(inputs)}")
    lengths = np.asarray(inputs["padding_mask"]).sum(axis=1) if bucket else None  # (N,) real tokens
    optimizer, schedule = make_optimizer(model, peak_lr, planned_steps(n, batch_size, epochs, max_steps), warmup_fraction)
    compiled = _compiled_step(model, optimizer)

    def step(idx: np.ndarray, lr: float) -> float:
        optimizer.learning_rate.assign(lr)
        batch = {k: tf.convert_to_tensor(v) for k, v in trim_rows(inputs, idx).items()}
        return float(compiled(batch, tf.convert_to_tensor(y[idx].astype("int32"))))

    return train_loop(step, n, epochs, batch_size, seed, schedule, batches=lambda rng: batch_order(n, batch_size, rng, lengths),
                      max_seconds=max_seconds, clock=clock, progress=progress, desc="fine-tuning", max_steps=max_steps)


def predict_proba(model: BertClassifier, inputs: dict, batch_size: int = 128, progress: bool = False) -> np.ndarray:
    """Class probabilities in evaluation mode, batch by batch.

    Shapes: inputs {"token_ids": (N, T), ...} -> (N, C).
    """
    from tqdm.auto import tqdm

    n = len(np.asarray(inputs["token_ids"]))
    out = []
    for i in tqdm(range(0, n, batch_size), desc="predicting", disable=not progress, leave=False):
        batch = trim_rows(inputs, np.arange(i, min(i + batch_size, n)))
        out.append(ops.convert_to_numpy(ops.softmax(model(batch, training=False), axis=-1)))
    return np.concatenate(out)


def sentence_vectors(model: Bert, inputs: dict, batch_size: int = 128, progress: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Both kinds of sentence vector from one pass of the encoder, batch by batch, in evaluation mode.

    ``model`` is a ``Bert`` (or a ``BertClassifier``, whose body is used).
    Returns (the pooler's tanh(W h_[CLS] + b), ``mean_pool`` of the final token vectors).
    Shapes: inputs {"token_ids": (N, T), ...} -> (N, D), (N, D).
    """
    from tqdm.auto import tqdm

    body = model.bert if isinstance(model, BertClassifier) else model
    if not isinstance(body, Bert):
        raise ValueError(f"model: expected a Bert or a BertClassifier, got {type(model).__name__}")
    n = len(np.asarray(inputs["token_ids"]))
    cls, mean = [], []
    for i in tqdm(range(0, n, batch_size), desc="encoding", disable=not progress, leave=False):
        batch = trim_rows(inputs, np.arange(i, min(i + batch_size, n)))
        sequence, pooled, _ = body(batch, training=False)  # (b, T, D), (b, D)
        keep = _keep_mask(_as_ids("token_ids", batch["token_ids"]), batch.get("padding_mask"), body.config.pad_id)  # (b, T)
        cls.append(ops.convert_to_numpy(pooled))
        mean.append(ops.convert_to_numpy(mean_pool(sequence, keep)))
    return np.concatenate(cls), np.concatenate(mean)
