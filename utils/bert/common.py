"""Framework-free parts of BERT shared by both twins.

* ``BertConfig``: every size of the model in one typed place, and the table
  that maps its names to Hugging Face's and KerasHub's (``NAME_TABLE``).
* ``encode_texts``: WordPiece ids, segment ids and padding masks for a batch of
  texts (or text pairs) from a ``tokenizers.Tokenizer``; over-long texts are
  truncated with a warning, never an index error.
* ``warmup_linear_decay``: BERT's learning rate, a linear rise then a linear fall;
  ``warmup_linear_schedule`` makes it the schedule both twins' ``make_optimizer`` return.
* ``check_mlm_args``: the arguments of the masking function, checked once for both twins;
  ``MLM_SPLIT`` is BERT's 80/10/10 split of the chosen tokens.
* ``mask_whole_words``: whole-word masking (NumPy): a word's WordPiece pieces are chosen,
  and masked, together; the reference of assignment 7's exercise 1 in both frameworks.
* ``POOLINGS`` / ``check_pooling``: how a classifier turns the token vectors into
  one sentence vector ("cls": BERT's pooler on [CLS]; "mean": the average over
  the real tokens, as sentence-transformers checkpoints are trained).
* ``parameter_count``: the number of weights of a ``Bert`` from its config alone
  (embeddings + L blocks + pooler), e.g. about 110M for BERT-base.
* ``linear_probe``: logistic regression on frozen sentence vectors (NumPy), to
  compare what two kinds of vector know without fine-tuning anything.

Shapes: letters of ``utils/shapes.py``; here B batch, T tokens, D d_model, V
vocabulary size, F d_ff, L layers, N examples (N' another number of them).
"""
from __future__ import annotations

import warnings
from dataclasses import asdict, dataclass
from typing import Any, Sequence

import numpy as np

from utils.checks import check_attention_sizes, check_positive_int
from utils.training import batch_order  # one epoch's batches, bucketed by length: both twins' fine-tuning order

__all__ = [
    "BertConfig",
    "NAME_TABLE",
    "IGNORE_INDEX",
    "encode_texts",
    "warmup_linear_decay",
    "warmup_linear_schedule",
    "MLM_SPLIT",
    "check_mlm_args",
    "mask_whole_words",
    "trim_rows",
    "batch_order",
    "POOLINGS",
    "check_pooling",
    "parameter_count",
    "linear_probe",
]

IGNORE_INDEX = -100  # a label that no loss counts (PyTorch's cross_entropy default; Keras: ignore_class)

# The course's names, Hugging Face's BertConfig names and KerasHub's BertBackbone arguments.
NAME_TABLE = [
    # (course, Hugging Face config.json, KerasHub BertBackbone)
    ("vocab_size", "vocab_size", "vocabulary_size"),
    ("d_model", "hidden_size", "hidden_dim"),
    ("num_heads", "num_attention_heads", "num_heads"),
    ("d_ff", "intermediate_size", "intermediate_dim"),
    ("num_layers", "num_hidden_layers", "num_layers"),
    ("max_len", "max_position_embeddings", "max_sequence_length"),
    ("type_vocab_size", "type_vocab_size", "num_segments"),
    ("dropout", "hidden_dropout_prob", "dropout"),
    ("layer_norm_eps", "layer_norm_eps", "(fixed at 1e-12)"),
    ("pad_id", "pad_token_id", "(token id 0)"),
]


@dataclass(frozen=True)
class BertConfig:
    """Sizes of a BERT encoder (defaults: all-MiniLM-L6-v2, 6 layers of width 384).

    Post-LN blocks with GELU, LayerNorm epsilon 1e-12, learned positions,
    ``type_vocab_size`` segments. ``from_hf`` reads a Hugging Face config.json dict.
    """

    vocab_size: int = 30522
    d_model: int = 384
    num_heads: int = 12
    d_ff: int = 1536
    num_layers: int = 6
    max_len: int = 512
    type_vocab_size: int = 2
    dropout: float = 0.1
    layer_norm_eps: float = 1e-12
    pad_id: int = 0

    def __post_init__(self) -> None:
        for name in ("vocab_size", "d_model", "num_heads", "d_ff", "num_layers", "max_len", "type_vocab_size"):
            check_positive_int(name, getattr(self, name))
        check_attention_sizes(self.d_model, self.num_heads, self.dropout, self.layer_norm_eps)
        if not 0 <= self.pad_id < self.vocab_size:
            raise ValueError(f"pad_id: expected an id in [0, vocab_size={self.vocab_size}), got {self.pad_id!r}")

    @classmethod
    def from_hf(cls, hf: dict, dropout: float | None = None) -> "BertConfig":
        """The config of a Hugging Face BERT (the dict of its config.json)."""
        if hf.get("model_type", "bert") != "bert":
            raise ValueError(f"config.json: expected model_type 'bert', got {hf.get('model_type')!r}")
        if hf.get("hidden_act", "gelu") != "gelu":
            raise ValueError(f"config.json: expected hidden_act 'gelu' (the erf form), got {hf.get('hidden_act')!r}")
        if hf.get("position_embedding_type", "absolute") != "absolute":
            raise ValueError(
                f"config.json: expected position_embedding_type 'absolute', got {hf.get('position_embedding_type')!r}"
            )
        kwargs = {course: hf[name] for course, name, _ in NAME_TABLE if name in hf and hf[name] is not None}
        if dropout is not None:
            kwargs["dropout"] = dropout
        return cls(**kwargs)

    def to_dict(self) -> dict:
        return asdict(self)


def encode_texts(
    tokenizer: Any,
    texts: Sequence[str],
    max_len: int = 128,
    pairs: Sequence[str] | None = None,
    pad_id: int = 0,
) -> dict[str, np.ndarray]:
    """Token ids, segment ids and a padding mask for ``texts`` (``[CLS] a [SEP]`` or ``[CLS] a [SEP] b [SEP]``).

    ``tokenizer`` is a ``tokenizers.Tokenizer`` whose post-processor adds [CLS]
    and [SEP] (as a BERT tokenizer.json does). Texts longer than ``max_len``
    tokens are cut to ``max_len`` (keeping the final [SEP]) with one warning
    that says how many were cut. Rows are padded with ``pad_id`` to the longest row.
    Shapes: texts (B,) -> {"token_ids": (B, T), "segment_ids": (B, T), "padding_mask": (B, T) bool}, T <= max_len.
    """
    check_positive_int("max_len", max_len)
    if isinstance(texts, str):
        raise ValueError("texts: expected a list of strings, got one string (wrap it in a list)")
    texts = list(texts)
    if not all(isinstance(t, str) for t in texts):
        bad = next(t for t in texts if not isinstance(t, str))
        raise ValueError(f"texts: expected strings, got {type(bad).__name__} {bad!r}")
    if pairs is not None:
        pairs = list(pairs)
        if len(pairs) != len(texts):
            raise ValueError(f"pairs: expected one second text per text ({len(texts)}), got {len(pairs)}")
    if not texts:
        raise ValueError("texts: expected at least one text, got an empty list")
    tok = tokenizer.__class__.from_str(tokenizer.to_str())  # a copy: the caller's settings stay as they were
    tok.no_padding()
    tok.no_truncation()
    batch = tok.encode_batch(list(zip(texts, pairs)) if pairs is not None else texts)
    too_long = [i for i, e in enumerate(batch) if len(e.ids) > max_len]
    if too_long:
        warnings.warn(
            f"encode_texts: {len(too_long)} of {len(texts)} texts are longer than max_len={max_len} tokens "
            f"(the longest has {max(len(batch[i].ids) for i in too_long)}); they were truncated to {max_len}",
            stacklevel=2,
        )
        tok.enable_truncation(max_len)  # cuts the words, keeps [CLS] ... [SEP]
        fixed = tok.encode_batch([(texts[i], pairs[i]) if pairs is not None else texts[i] for i in too_long])
        for i, e in zip(too_long, fixed):
            batch[i] = e
    t = max(len(e.ids) for e in batch)
    token_ids = np.full((len(batch), t), pad_id, dtype=np.int64)  # (B, T)
    segment_ids = np.zeros((len(batch), t), dtype=np.int64)  # (B, T)
    for i, e in enumerate(batch):
        token_ids[i, : len(e.ids)] = e.ids
        segment_ids[i, : len(e.type_ids)] = e.type_ids
    padding_mask = np.zeros((len(batch), t), dtype=bool)
    for i, e in enumerate(batch):
        padding_mask[i, : len(e.ids)] = True
    return {"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask}


def warmup_linear_decay(step: int | np.ndarray, total_steps: int, warmup_steps: int, peak_lr: float) -> np.ndarray | float:
    """BERT's learning rate: a linear rise from 0 to ``peak_lr`` over ``warmup_steps``, then a linear fall to 0.

    Steps count from 1 (the first update uses peak_lr / warmup_steps).
    Shapes: step a scalar or an array of any shape -> the same shape.
    """
    check_positive_int("total_steps", total_steps)
    if isinstance(warmup_steps, bool) or not isinstance(warmup_steps, (int, np.integer)) or not 0 <= warmup_steps <= total_steps:
        raise ValueError(f"warmup_steps: expected an int in [0, total_steps={total_steps}], got {warmup_steps!r}")
    if not peak_lr > 0:
        raise ValueError(f"peak_lr: expected a positive number, got {peak_lr!r}")
    s = np.asarray(step, dtype=np.float64)
    if np.any(s < 0):
        raise ValueError(f"step: expected step >= 0, got {step!r}")
    rise = s / max(warmup_steps, 1)
    fall = (total_steps - s) / max(total_steps - warmup_steps, 1)
    lr = peak_lr * np.clip(np.where(s <= warmup_steps, rise, fall), 0.0, 1.0)
    return float(lr) if lr.ndim == 0 else lr


def warmup_linear_schedule(peak_lr: float, total_steps: int, warmup_fraction: float = 0.1):
    """``schedule(i)``: the learning rate of the 0-based step ``i`` of a run of ``total_steps``.

    ``warmup_linear_decay`` at step ``i + 1``, warming up over ``warmup_fraction`` of
    the steps. Both twins' ``make_optimizer`` return it beside the optimizer, and the
    course's training loop sets each step's rate from it, so the twins' rates are the
    same Python floats. Checks its arguments here, before any training starts.
    Shapes: none.
    """
    if not 0.0 <= warmup_fraction <= 1.0:
        raise ValueError(f"warmup_fraction: expected a fraction in [0, 1], got {warmup_fraction!r}")
    warmup = int(round(warmup_fraction * total_steps))
    warmup_linear_decay(1, total_steps, warmup, peak_lr)  # checks the arguments

    def schedule(i: int) -> float:
        return warmup_linear_decay(i + 1, total_steps, warmup, peak_lr)

    return schedule


MLM_SPLIT = (0.8, 0.1, 0.1)  # of the chosen tokens: [MASK], a random token, unchanged (BERT's 80/10/10)


def check_mlm_args(
    shape: tuple,
    mask_id: int,
    vocab_size: int,
    special_ids: Sequence[int],
    mlm_probability: float,
    split: Sequence[float] = MLM_SPLIT,
) -> np.ndarray:
    """Check the masking function's arguments; return the ids a random replacement may take.

    ``split``: the fractions of the chosen tokens that become [MASK], a random
    ordinary token, or stay as they are; three numbers >= 0 that sum to 1.
    Shapes: shape is (B, T); returns (V - number of special ids,).
    """
    if len(shape) != 2:
        raise ValueError(f"token_ids: expected (B, T), got shape {tuple(shape)}")
    check_positive_int("vocab_size", vocab_size)
    if not 0 <= int(mask_id) < vocab_size:
        raise ValueError(f"mask_id: expected an id in [0, vocab_size={vocab_size}), got {mask_id!r}")
    if not 0.0 < float(mlm_probability) < 1.0:
        raise ValueError(f"mlm_probability: expected a probability in (0, 1), got {mlm_probability!r}")
    parts = tuple(split) if isinstance(split, (list, tuple)) else ()
    if len(parts) != 3 or not all(isinstance(p, (int, float)) and p >= 0 for p in parts) or abs(sum(parts) - 1.0) > 1e-6:
        raise ValueError(f"split: expected three fractions ([MASK], random, kept) >= 0 that sum to 1, got {split!r}")
    special = np.asarray(sorted(set(int(i) for i in special_ids) | {int(mask_id)}), dtype=np.int64)
    allowed = np.setdiff1d(np.arange(vocab_size), special)
    if allowed.size == 0:
        raise ValueError(f"special_ids: every one of the {vocab_size} ids is special; no token could be masked")
    return allowed


def mask_whole_words(
    token_ids: np.ndarray,
    continues: np.ndarray,
    mask_id: int,
    vocab_size: int,
    special_ids: Sequence[int],
    mlm_probability: float = 0.15,
    seed: int = 0,
    split: Sequence[float] = MLM_SPLIT,
) -> tuple[np.ndarray, np.ndarray]:
    """Whole-word masking: a word's pieces are chosen together, and all become [MASK], all random or all stay.

    BERT's later checkpoints ("whole word masking") choose words, not WordPiece pieces:
    masking only ``##ing`` of ``play ##ing`` leaves a puzzle the visible ``play`` almost
    solves. ``continues`` is True where a piece continues the word before it (a ``##``
    piece). The draws, from ``np.random.default_rng(seed)``, in this order: one per word
    number of each row (chosen with ``mlm_probability``), one per word number (the
    ``split``: [MASK], random, kept), one random ordinary id per piece. Special ids and
    ``mask_id`` are never chosen and never drawn. The input is not changed.
    Shapes: token_ids (B, T) int, continues (B, T) bool -> inputs (B, T), labels (B, T)
    (the original id at every piece of a chosen word, IGNORE_INDEX elsewhere).
    """
    ids = np.array(token_ids, dtype=np.int64)  # (B, T): a copy; the caller's batch stays as it was
    continues = np.asarray(continues, dtype=bool)
    if continues.shape != ids.shape:
        raise ValueError(f"continues: expected the shape of token_ids {ids.shape}, got {continues.shape}")
    allowed = check_mlm_args(ids.shape, mask_id, vocab_size, special_ids, mlm_probability, split)
    special = sorted(set(int(i) for i in special_ids) | {int(mask_id)})
    rng = np.random.default_rng(seed)
    b, t = ids.shape
    word = np.cumsum(~continues, axis=1)  # (B, T): the number of the word each piece belongs to, 0..T
    chosen = np.take_along_axis(rng.random((b, t + 1)) < mlm_probability, word, axis=1)  # (B, T)
    chosen &= ~np.isin(ids, special)  # special tokens and padding are never chosen
    how = np.take_along_axis(rng.random((b, t + 1)), word, axis=1)  # (B, T): one split draw per word
    random_ids = allowed[rng.integers(len(allowed), size=(b, t))]  # (B, T)
    inputs = ids.copy()
    inputs[chosen & (how < split[0])] = mask_id
    swap = chosen & (how >= split[0]) & (how < split[0] + split[1])
    inputs[swap] = random_ids[swap]
    labels = np.where(chosen, ids, IGNORE_INDEX)  # (B, T)
    return inputs, labels


def trim_rows(inputs: dict, idx: np.ndarray, multiple: int = 16) -> dict[str, np.ndarray]:
    """Rows ``idx`` of every array in ``inputs``, with trailing all-padding columns cut.

    The length kept is the batch's longest real row rounded up to ``multiple``
    (few distinct shapes, so a compiled Keras step is traced only a few times).
    Both twins batch this way, so they see the same arrays.
    Shapes: inputs {name: (N, T)} -> {name: (len(idx), T')}, T' <= T.
    """
    rows = {k: np.asarray(v)[idx] for k, v in inputs.items()}
    keep = rows.get("padding_mask")
    if keep is None or keep.ndim != 2:
        return rows
    t = keep.shape[1]
    longest = int(keep.any(axis=0).nonzero()[0].max()) + 1 if keep.any() else 1
    width = min(t, -(-longest // multiple) * multiple)
    return {k: (v[:, :width] if v.ndim == 2 and v.shape[1] == t else v) for k, v in rows.items()}


POOLINGS = ("cls", "mean")  # BertClassifier(pooling=...): the pooled [CLS] vector, or the mean over real tokens


def check_pooling(pooling: str) -> str:
    """``pooling`` if it is one of ``POOLINGS``, else a ValueError that names the argument.

    Shapes: none.
    """
    if not isinstance(pooling, str) or pooling not in POOLINGS:
        raise ValueError(f"pooling: expected one of {POOLINGS}, got {pooling!r}")
    return pooling


def parameter_count(config: BertConfig) -> dict[str, int]:
    """The number of weights of a ``Bert`` (either twin, or Hugging Face's BertModel) with this config.

    * embeddings: token (V, D) + position (max_len, D) + segment (S, D) tables, LayerNorm (2D);
    * each of the L blocks: Q, K, V and output projections 4 (D*D + D), feed-forward
      D*F + F + F*D + D, two LayerNorms 4D;
    * pooler: D*D + D.
    A classification head (D*C + C) or an MLM head is not included.
    Returns {"embeddings", "per_block", "blocks", "pooler", "total"}.
    Shapes: none.
    """
    if not isinstance(config, BertConfig):
        raise ValueError(f"config: expected a BertConfig, got {type(config).__name__}")
    c = config
    d, f = c.d_model, c.d_ff
    embeddings = (c.vocab_size + c.max_len + c.type_vocab_size) * d + 2 * d
    attention = 4 * (d * d + d)  # w_qkv (D, 3D) + b_qkv (3D,) + w_o (D, D) + b_o (D,)
    feed_forward = d * f + f + f * d + d
    per_block = attention + feed_forward + 2 * (2 * d)  # two LayerNorms, gamma and beta each
    pooler = d * d + d
    blocks = c.num_layers * per_block
    return {"embeddings": embeddings, "per_block": per_block, "blocks": blocks, "pooler": pooler,
            "total": embeddings + blocks + pooler}


def linear_probe(train_x: np.ndarray, train_y: np.ndarray, test_x: np.ndarray, steps: int = 200, lr: float = 0.1) -> np.ndarray:
    """Logistic regression on fixed features; returns the probability of class 1 for each row of ``test_x``.

    A probe: it asks how much of a binary label a linear function of the
    (frozen) features can read, without changing the features. The features are
    standardised with the training rows' mean and standard deviation; the weights
    start at zero and take ``steps`` full-batch gradient steps on the mean
    cross-entropy (no penalty: stopping after a few hundred steps is the
    regulariser). Deterministic, NumPy only, so both twins get the same numbers.
    Shapes: train_x (N, D), train_y (N,) of 0/1, test_x (N', D) -> (N',).
    """
    x = np.asarray(train_x, dtype=np.float64)
    y = np.asarray(train_y)
    z = np.asarray(test_x, dtype=np.float64)
    if x.ndim != 2 or len(x) == 0:
        raise ValueError(f"train_x: expected features (N, D) with N >= 1, got shape {x.shape}")
    if y.shape != (len(x),) or not np.isin(y, (0, 1)).all():
        raise ValueError(f"train_y: expected ({len(x)},) labels of 0 or 1, got shape {y.shape} with values {np.unique(y)[:5]}")
    if z.ndim != 2 or z.shape[1] != x.shape[1]:
        raise ValueError(f"test_x: expected (N', {x.shape[1]}) like train_x, got shape {z.shape}")
    check_positive_int("steps", steps)
    if not lr > 0:
        raise ValueError(f"lr: expected a positive learning rate, got {lr!r}")
    mu, sd = x.mean(0), x.std(0) + 1e-6
    x, z = (x - mu) / sd, (z - mu) / sd  # (N, D), (M, D)
    y = y.astype(np.float64)
    w, b = np.zeros(x.shape[1]), 0.0
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-(x @ w + b)))  # (N,) predicted P(class 1)
        g = p - y  # gradient of the cross-entropy with respect to the logit
        w -= lr * (x.T @ g) / len(y)
        b -= lr * float(g.mean())
    return 1.0 / (1.0 + np.exp(-(z @ w + b)))
