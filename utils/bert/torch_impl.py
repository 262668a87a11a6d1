"""PyTorch twin of BERT (same names and signatures as keras_impl).

BERT is the Transformer's encoder with learned positions, segment embeddings,
post-LN blocks (``utils.transformer``'s ``EncoderBlock`` with ``norm_first=False``
and GELU) and a pooler on the [CLS] token.
Shapes: letters of ``utils/shapes.py``; here B batch, T tokens, D d_model, H heads,
F d_ff, V vocabulary size, C classes, L layers, N examples. Masks: ``padding_mask``
(B, T) is True on real tokens; the blocks get the course's keep-mask (B, 1, 1, T).
"""
from __future__ import annotations

import os
import time
from typing import Any, Callable, Sequence

import numpy as np
import torch
from torch import nn

from utils.transformer.torch_impl import EncoderBlock, LayerNorm, Linear, export_weights, load_weights

from utils.training import batch_order, planned_steps, train_loop

from .common import IGNORE_INDEX, MLM_SPLIT, BertConfig, check_mlm_args, check_pooling, encode_texts, trim_rows, warmup_linear_decay, warmup_linear_schedule
from .weights import hf_to_course, read_hf_folder, resolve_model_dir

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


def _dropout(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    return nn.functional.dropout(x, p, training=True) if training and p > 0 else x


def _as_ids(name: str, ids: Any, device: torch.device | None = None) -> torch.Tensor:
    t = torch.as_tensor(np.asarray(ids) if not isinstance(ids, torch.Tensor) else ids, device=device)
    if t.ndim != 2:
        raise ValueError(f"{name}: expected token ids (B, T), got shape {tuple(t.shape)}")
    if t.dtype.is_floating_point or t.dtype == torch.bool:
        raise ValueError(f"{name}: expected integer ids (B, T), got dtype {t.dtype}")
    return t.long()


def _keep_mask(ids: torch.Tensor, padding_mask: Any, pad_id: int) -> torch.Tensor:
    """The (B, T) keep-mask: ``padding_mask`` as booleans, or ``ids != pad_id`` when it is None."""
    if padding_mask is None:
        return ids != pad_id  # (B, T)
    keep = torch.as_tensor(np.asarray(padding_mask) if not isinstance(padding_mask, torch.Tensor) else padding_mask, device=ids.device)
    if tuple(keep.shape) != tuple(ids.shape):
        raise ValueError(f"padding_mask: expected {tuple(ids.shape)} like token_ids, got {tuple(keep.shape)}")
    return keep.bool()


def _unpack(token_ids: Any, segment_ids: Any, padding_mask: Any) -> tuple:
    """Inputs may come as a dict {"token_ids", "segment_ids", "padding_mask"} (as ``encode_texts`` returns)."""
    if isinstance(token_ids, dict):
        d = token_ids
        if "token_ids" not in d:
            raise ValueError(f"token_ids: a dict of inputs needs the key 'token_ids', got keys {sorted(d)}")
        return d["token_ids"], d.get("segment_ids", segment_ids), d.get("padding_mask", padding_mask)
    return token_ids, segment_ids, padding_mask


class BertEmbeddings(nn.Module):
    """Token + learned position + segment embeddings, then LayerNorm and dropout.

    Tables are initialised N(0, 0.02) as in BERT, and (unlike the Transformer's)
    not scaled by sqrt(D).
    Shapes: forward(token_ids (B, T), segment_ids (B, T) or None = all 0) -> (B, T, D).
    """

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        c = config
        self.config = c
        self.token = nn.Parameter(torch.randn(c.vocab_size, c.d_model) * 0.02)  # (V, D)
        self.position = nn.Parameter(torch.randn(c.max_len, c.d_model) * 0.02)  # (max_len, D)
        self.segment = nn.Parameter(torch.randn(c.type_vocab_size, c.d_model) * 0.02)  # (type_vocab_size, D)
        self.norm = LayerNorm(c.d_model, c.layer_norm_eps)

    def forward(self, token_ids: Any, segment_ids: Any = None, training: bool | None = None) -> torch.Tensor:
        training = self.training if training is None else training
        ids = _as_ids("token_ids", token_ids, self.token.device)
        b, t = ids.shape
        if t > self.config.max_len:
            raise ValueError(
                f"token_ids: expected (B, T) with T <= max_len={self.config.max_len}, got {(b, t)}; "
                f"encode_texts(..., max_len={self.config.max_len}) truncates long texts"
            )
        if int(ids.min()) < 0 or int(ids.max()) >= self.config.vocab_size:
            raise ValueError(f"token_ids: expected ids in [0, {self.config.vocab_size}), got min {int(ids.min())}, max {int(ids.max())}")
        seg = torch.zeros_like(ids) if segment_ids is None else _as_ids("segment_ids", segment_ids, ids.device)
        if tuple(seg.shape) != (b, t):
            raise ValueError(f"segment_ids: expected {(b, t)} like token_ids, got {tuple(seg.shape)}")
        lo, hi = int(seg.min()), int(seg.max())
        if lo < 0 or hi >= self.config.type_vocab_size:
            raise ValueError(f"segment_ids: expected ids in [0, {self.config.type_vocab_size}), got min {lo}, max {hi}")
        x = self.token[ids] + self.position[:t][None] + self.segment[seg]  # (B, T, D)
        return _dropout(self.norm(x), self.config.dropout, training)


class Bert(nn.Module):
    """The BERT encoder: embeddings, L post-LN blocks (GELU), and the pooler tanh(W h_[CLS] + b).

    Shapes: forward(token_ids (B, T), segment_ids (B, T), padding_mask (B, T) True = real token,
    default token_ids != pad_id) -> sequence (B, T, D), pooled (B, D), L attention weights (B, H, T, T).
    """

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        if not isinstance(config, BertConfig):
            raise ValueError(f"config: expected a BertConfig, got {type(config).__name__}")
        c = config
        self.config = c
        self.embeddings = BertEmbeddings(c)
        self.blocks = nn.ModuleList(
            EncoderBlock.from_config(c, norm_first=False, activation="gelu")  # BERT: post-LN, GELU
            for _ in range(c.num_layers)
        )
        self.pooler = Linear(c.d_model, c.d_model)

    def forward(self, token_ids: Any, segment_ids: Any = None, padding_mask: Any = None, training: bool | None = None):
        training = self.training if training is None else training
        token_ids, segment_ids, padding_mask = _unpack(token_ids, segment_ids, padding_mask)
        ids = _as_ids("token_ids", token_ids, self.pooler.w.device)
        keep = _keep_mask(ids, padding_mask, self.config.pad_id)  # (B, T)
        x = self.embeddings(ids, segment_ids, training)  # (B, T, D)
        mask = keep[:, None, None, :]  # (B, 1, 1, T)
        weights = []
        for block in self.blocks:
            x, w = block(x, mask, training)
            weights.append(w)
        pooled = torch.tanh(self.pooler(x[:, 0]))  # (B, D) from the [CLS] position
        return x, pooled, weights


def mean_pool(hidden: torch.Tensor, padding_mask: Any) -> torch.Tensor:
    """The average of the token vectors over the real tokens ([CLS] and [SEP] included, padding left out).

    This is the sentence vector that sentence-transformers models (all-MiniLM-L6-v2
    among them) are trained to produce. A row without real tokens gives zeros.
    Shapes: hidden (B, T, D), padding_mask (B, T) True on real tokens -> (B, D).
    """
    if hidden.ndim != 3:
        raise ValueError(f"hidden: expected token vectors (B, T, D), got shape {tuple(hidden.shape)}")
    keep = torch.as_tensor(np.asarray(padding_mask) if not isinstance(padding_mask, torch.Tensor) else padding_mask, device=hidden.device)
    if tuple(keep.shape) != tuple(hidden.shape[:2]):
        raise ValueError(f"padding_mask: expected {tuple(hidden.shape[:2])} like hidden's (B, T), got {tuple(keep.shape)}")
    w = keep.to(hidden.dtype)[..., None]  # (B, T, 1): 1 on real tokens, 0 on padding
    return (hidden * w).sum(1) / w.sum(1).clamp_min(1.0)  # (B, D)


class BertClassifier(nn.Module):
    """BERT plus a sentence-classification head: dropout, then a linear layer on one vector per sentence.

    ``pooling`` chooses that vector: "cls" (default) is BERT's pooler,
    tanh(W h_[CLS] + b), the vector BERT itself was fine-tuned from; "mean" is
    ``mean_pool`` of the final token vectors, the vector sentence-transformers
    checkpoints such as all-MiniLM-L6-v2 were trained to give. With "mean" the
    pooler takes no part and gets no gradient (the optimiser skips it).
    Shapes: forward(token_ids (B, T), ...) -> logits (B, C), or (logits, L weights (B, H, T, T))
    with ``return_attention``.
    """

    def __init__(self, config: BertConfig, num_classes: int = 2, pooling: str = "cls") -> None:
        super().__init__()
        if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 2:
            raise ValueError(f"num_classes: expected an int >= 2, got {num_classes!r}")
        self.config, self.num_classes, self.pooling = config, num_classes, check_pooling(pooling)
        self.bert = Bert(config)
        self.head = Linear(config.d_model, num_classes)
        with torch.no_grad():
            self.head.w.normal_(0.0, 0.02)

    def forward(
        self,
        token_ids: Any,
        segment_ids: Any = None,
        padding_mask: Any = None,
        training: bool | None = None,
        return_attention: bool = False,
    ):
        training = self.training if training is None else training
        token_ids, segment_ids, padding_mask = _unpack(token_ids, segment_ids, padding_mask)
        sequence, pooled, weights = self.bert(token_ids, segment_ids, padding_mask, training)  # (B, T, D), (B, D)
        if self.pooling == "mean":
            keep = _keep_mask(_as_ids("token_ids", token_ids, sequence.device), padding_mask, self.config.pad_id)  # (B, T)
            pooled = mean_pool(sequence, keep)  # (B, D)
        logits = self.head(_dropout(pooled, self.config.dropout, training))  # (B, C)
        return (logits, weights) if return_attention else logits


class BertForMaskedLM(nn.Module):
    """BERT plus the masked-language-model head: dense + GELU + LayerNorm, then scores against the token table (tied).

    Shapes: forward(token_ids (B, T), ...) -> logits (B, T, V), L weights (B, H, T, T).
    """

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.config = config
        self.bert = Bert(config)
        self.transform = Linear(config.d_model, config.d_model)
        self.norm = LayerNorm(config.d_model, config.layer_norm_eps)
        self.out_bias = nn.Parameter(torch.zeros(config.vocab_size))

    def forward(self, token_ids: Any, segment_ids: Any = None, padding_mask: Any = None, training: bool | None = None):
        training = self.training if training is None else training
        x, _, weights = self.bert(token_ids, segment_ids, padding_mask, training)  # (B, T, D)
        return self.mlm_logits(x), weights  # (B, T, V)

    def mlm_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """The head alone, on any top vectors: dense + GELU + LayerNorm, then scores against the token table.

        Shapes: hidden (..., D) -> logits (..., V).
        """
        h = self.norm(nn.functional.gelu(self.transform(hidden)))  # (..., D)
        return h @ self.bert.embeddings.token.T + self.out_bias  # (..., V), tied to the input table


def _chosen_loss(model: BertForMaskedLM, inputs: torch.Tensor, labels: torch.Tensor, keep: torch.Tensor, training: bool) -> torch.Tensor:
    """``mlm_loss(model(inputs, None, keep, training)[0], labels)``, with the head run at the chosen positions only.

    The loss reads nothing else, and the head's (B, T, V) scores are most of a
    small model's work: on lesson 7's tiny BERT a pre-training step takes about
    half the time. Shapes: inputs, labels, keep (B, T) -> scalar.
    """
    x, _, _ = model.bert(inputs, None, keep, training)  # (B, T, D)
    chosen = labels != IGNORE_INDEX  # (B, T)
    if not bool(chosen.any()):
        return x.sum() * 0.0  # nothing chosen in this batch
    logits = model.mlm_logits(x[chosen])  # (N, V): the chosen positions only
    return nn.functional.cross_entropy(logits.float(), labels[chosen])


def mask_tokens(
    token_ids: Any,
    mask_id: int,
    vocab_size: int,
    special_ids: Sequence[int],
    mlm_probability: float = 0.15,
    seed: int | None = None,
    split: Sequence[float] = MLM_SPLIT,
) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT's masking: choose each non-special token with probability ``mlm_probability``;
    of the chosen, 80% become [MASK], 10% a random (non-special) token, 10% stay as they are
    (``split``, e.g. (1.0, 0.0, 0.0) to always write [MASK]).

    Special tokens ([CLS], [SEP], [PAD], ...) and padding are never chosen. Labels
    hold the original id at chosen positions and -100 (``IGNORE_INDEX``) elsewhere,
    so the loss counts only the chosen positions. ``seed`` makes the draw repeatable.
    Shapes: token_ids (B, T) -> inputs (B, T), labels (B, T).
    """
    ids = _as_ids("token_ids", token_ids)
    allowed = torch.as_tensor(check_mlm_args(tuple(ids.shape), mask_id, vocab_size, special_ids, mlm_probability, split), device=ids.device)
    gen = torch.Generator(device=ids.device)
    if seed is None:
        gen.seed()
    else:
        gen.manual_seed(int(seed))
    special = torch.as_tensor(sorted(set(int(i) for i in special_ids) | {int(mask_id)}), device=ids.device)
    eligible = ~torch.isin(ids, special)  # (B, T)
    chosen = (torch.rand(ids.shape, generator=gen, device=ids.device) < mlm_probability) & eligible  # (B, T)
    labels = torch.where(chosen, ids, torch.full_like(ids, IGNORE_INDEX))
    r = torch.rand(ids.shape, generator=gen, device=ids.device)  # one draw decides [MASK] / random / keep
    p_mask, p_random = float(split[0]), float(split[0]) + float(split[1])  # r below p_mask: [MASK]; up to p_random: random
    to_mask = chosen & (r < p_mask)
    to_random = chosen & (r >= p_mask) & (r < p_random)
    random_ids = allowed[torch.randint(len(allowed), ids.shape, generator=gen, device=ids.device)]  # (B, T)
    inputs = torch.where(to_mask, torch.full_like(ids, int(mask_id)), ids)
    inputs = torch.where(to_random, random_ids, inputs)
    return inputs, labels


def mlm_loss(logits: torch.Tensor, labels: Any) -> torch.Tensor:
    """Mean cross-entropy over the chosen positions only (labels != -100).

    Shapes: logits (B, T, V), labels (B, T) -> scalar.
    """
    labels = _as_ids("labels", labels, logits.device)
    if tuple(logits.shape[:2]) != tuple(labels.shape):
        raise ValueError(f"labels: expected {tuple(logits.shape[:2])} from logits {tuple(logits.shape)}, got {tuple(labels.shape)}")
    if not bool((labels != IGNORE_INDEX).any()):
        return logits.sum() * 0.0  # nothing chosen in this batch
    return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), labels.reshape(-1), ignore_index=IGNORE_INDEX)


def _device(model: nn.Module) -> torch.device:
    return next(model.parameters()).device


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
    device = _device(model)
    optimizer, schedule = make_optimizer(model, peak_lr, steps, warmup_fraction)
    done = [0]  # steps taken: each step masks with its own seed

    def step(rows: np.ndarray, lr: float) -> float:
        _set_lr(optimizer, lr)
        batch = torch.as_tensor(ids[rows], device=device)
        inputs, labels = mask_tokens(batch, mask_id, model.config.vocab_size, special_ids, seed=seed * 1_000_003 + done[0], split=split)
        done[0] += 1
        loss = _chosen_loss(model, inputs, labels, batch != model.config.pad_id, True)
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        return float(loss.detach())

    return train_loop(step, len(ids), 1, batch_size, seed, schedule,
                      batches=lambda rng: [rng.integers(0, len(ids), batch_size) for _ in range(steps)],
                      max_seconds=max_seconds, progress=progress, desc="MLM pre-training", set_training=model.train)


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
    return model.eval(), folder


def make_optimizer(model: nn.Module, peak_lr: float, total_steps: int, warmup_fraction: float = 0.1, weight_decay: float = 0.01):
    """AdamW with BERT's schedule (linear warm-up over ``warmup_fraction`` of the steps, then linear decay to 0).

    The contract both twins keep: returns ``(optimizer, schedule)``, where
    ``schedule(i)`` is the learning rate of the 0-based step ``i``
    (``common.warmup_linear_schedule``) and the optimizer starts at ``schedule(0)``;
    the training loop sets each step's rate from the schedule. Biases and LayerNorm
    parameters get no weight decay. Gradients are clipped to a global norm of 1 as
    part of every update: here by the step (``clip_grad_norm_``: a PyTorch optimizer
    cannot clip), in Keras by the optimizer (``global_clipnorm``).
    Shapes: none.
    """
    schedule = warmup_linear_schedule(peak_lr, total_steps, warmup_fraction)
    decay, no_decay = [], []
    for p in model.parameters():
        (decay if p.ndim >= 2 else no_decay).append(p)
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}], lr=schedule(0), eps=1e-8
    )
    return optimizer, schedule


def _set_lr(optimizer: torch.optim.Optimizer, lr: float) -> None:
    for group in optimizer.param_groups:
        group["lr"] = lr


def fine_tune_step(model: BertClassifier, optimizer: Any, batch: dict, labels: Any) -> float:
    """One fine-tuning step: forward in training mode, cross-entropy, backward, clip at 1, update.

    Returns the batch's loss before the update.
    Shapes: batch {"token_ids": (B, T), "segment_ids": (B, T), "padding_mask": (B, T)}, labels (B,) -> float.
    """
    device = _device(model)
    y = torch.as_tensor(np.asarray(labels) if not isinstance(labels, torch.Tensor) else labels, device=device).long()
    model.train()
    logits = model(batch, training=True)  # (B, C)
    if y.shape != logits.shape[:1]:
        raise ValueError(f"labels: expected ({logits.shape[0]},) like the batch, got {tuple(y.shape)}")
    loss = nn.functional.cross_entropy(logits, y)
    optimizer.zero_grad()
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    return float(loss.detach())


def _rows(batch: dict, idx: np.ndarray, device: torch.device) -> dict:
    return {k: torch.as_tensor(v, device=device) for k, v in trim_rows(batch, idx).items()}


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

    Runs ``fine_tune_step`` in the course's loop (``utils.training.train_loop``), as
    the Keras twin does: batches drawn by a NumPy permutation seeded with ``seed``,
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
    device = _device(model)

    def step(idx: np.ndarray, lr: float) -> float:
        _set_lr(optimizer, lr)
        return fine_tune_step(model, optimizer, _rows(inputs, idx, device), y[idx])

    return train_loop(step, n, epochs, batch_size, seed, schedule, batches=lambda rng: batch_order(n, batch_size, rng, lengths),
                      max_seconds=max_seconds, clock=clock, progress=progress, desc="fine-tuning", max_steps=max_steps, set_training=model.train)


@torch.no_grad()
def predict_proba(model: BertClassifier, inputs: dict, batch_size: int = 128, progress: bool = False) -> np.ndarray:
    """Class probabilities in evaluation mode, batch by batch.

    Shapes: inputs {"token_ids": (N, T), ...} -> (N, C).
    """
    from tqdm.auto import tqdm

    model.eval()
    device = _device(model)
    n = len(np.asarray(inputs["token_ids"]))
    out = []
    for i in tqdm(range(0, n, batch_size), desc="predicting", disable=not progress, leave=False):
        idx = np.arange(i, min(i + batch_size, n))
        out.append(torch.softmax(model(_rows(inputs, idx, device), training=False).float(), dim=-1).cpu().numpy())
    return np.concatenate(out)


@torch.no_grad()
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
    body.eval()
    device = _device(body)
    n = len(np.asarray(inputs["token_ids"]))
    cls, mean = [], []
    for i in tqdm(range(0, n, batch_size), desc="encoding", disable=not progress, leave=False):
        batch = _rows(inputs, np.arange(i, min(i + batch_size, n)), device)
        sequence, pooled, _ = body(batch, training=False)  # (b, T, D), (b, D)
        cls.append(pooled.float().cpu().numpy())
        mean.append(mean_pool(sequence, _keep_mask(batch["token_ids"], batch.get("padding_mask"), body.config.pad_id)).float().cpu().numpy())
    return np.concatenate(cls), np.concatenate(mean)
