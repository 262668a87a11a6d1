"""The course's one training loop: epochs of batches, a clock budget, a progress bar, a history.

Every model the lessons train (seq2seq, MemN2N, the Transformer, BERT's
pre-training and fine-tuning) runs through :func:`train_loop`, in both
frameworks. The loop knows nothing of PyTorch or Keras: each twin hands it a
``step`` that trains on one batch of rows and returns that batch's loss, and
keeps only what its framework needs (the forward pass, the gradients, the
update). So both twins batch the same way, stop the same way and return the
same history:

======================  =====================================================
``history["loss"]``     per epoch: the mean batch loss, each batch weighted by
                        its number of rows
``history["batch_loss"]`` per step: the loss ``step`` returned
``history["lr"]``       per step: the learning rate ``schedule`` gave the step
``history["seconds"]``  per epoch: ``clock`` time since the start, at its end
``history["step_seconds"]`` per step: ``clock`` time since the start, after it
anything else           per epoch: what ``on_epoch_end`` returned
======================  =====================================================

A run that stops in the middle of an epoch (out of time) still records that
epoch's partial ``loss`` and ``seconds``.

Shapes: letters of ``utils/shapes.py``; here N rows of training data, B rows per
batch.
"""
from __future__ import annotations

import math
import time
from typing import Callable

import numpy as np

from utils.checks import check_positive_int

__all__ = ["batch_order", "train_loop", "HISTORY_KEYS"]

HISTORY_KEYS = ("loss", "batch_loss", "lr", "seconds", "step_seconds")


def batch_order(n: int, batch_size: int, rng: np.random.Generator, lengths: np.ndarray | None = None,
                pool: int = 50) -> list[np.ndarray]:
    """One epoch's batches: lists of row indices covering the ``n`` rows once.

    Without ``lengths``: a permutation of the rows cut into batches of
    ``batch_size`` (the last may be shorter: every row is seen every epoch).
    With ``lengths`` (real tokens per row), batches are bucketed by length: the
    permutation is cut into pools of ``pool`` batches, each pool is sorted by
    length and cut into batches, and the batches are shuffled. Rows in a batch
    then have similar lengths, so trimming the padding saves most of it; the
    order of the examples stays random at the scale of a pool.
    Shapes: lengths (n,) -> list of (<= batch_size,) int arrays covering 0..n-1 once.
    """
    check_positive_int("batch_size", batch_size)
    check_positive_int("pool", pool)
    order = rng.permutation(n)
    if lengths is None:
        return [order[i : i + batch_size] for i in range(0, n, batch_size)]
    lengths = np.asarray(lengths)
    if lengths.shape != (n,):
        raise ValueError(f"lengths: expected ({n},), one length per row, got shape {lengths.shape}")
    batches = []
    span = batch_size * pool
    for i in range(0, n, span):
        chunk = order[i : i + span]
        chunk = chunk[np.argsort(lengths[chunk], kind="stable")]
        batches += [chunk[j : j + batch_size] for j in range(0, len(chunk), batch_size)]
    return [batches[k] for k in rng.permutation(len(batches))]


def planned_steps(n: int, batch_size: int, epochs: int, max_steps: int | None = None) -> int:
    """The steps a run of ``epochs`` passes over ``n`` rows makes, at most ``max_steps``:
    what a learning-rate schedule is planned for (``train_loop`` stops at ``max_steps``)."""
    steps = math.ceil(n / check_positive_int("batch_size", batch_size)) * check_positive_int("epochs", epochs)
    return steps if max_steps is None else min(steps, check_positive_int("max_steps", max_steps))


def train_loop(
    step: Callable[[np.ndarray, float], float],
    n: int,
    epochs: int = 1,
    batch_size: int = 32,
    rng: np.random.Generator | int = 0,
    schedule: Callable[[int], float] | None = None,
    batches: Callable[[np.random.Generator], list[np.ndarray]] | None = None,
    max_seconds: float | None = None,
    clock: Callable[[], float] = time.perf_counter,
    progress: bool = True,
    desc: str = "training",
    max_steps: int | None = None,
    on_epoch_start: Callable[[int], None] | None = None,
    on_epoch_end: Callable[[int], dict | None] | None = None,
    set_training: Callable[[bool], object] | None = None,
) -> dict[str, list]:
    """Run ``epochs`` epochs of ``step(rows, lr) -> loss`` over batches of row indices.

    ``n`` rows are shuffled each epoch by ``rng`` (a NumPy generator, or a seed
    for one) and cut into batches of ``batch_size``, the last one shorter
    (:func:`batch_order`); ``batches(rng)`` replaces that with any other list of
    index arrays for an epoch (bucketed by length, drawn with replacement...).
    ``schedule(i)`` is the learning rate of the 0-based step ``i`` (default: None,
    passed on as ``lr=None`` for a step that keeps its optimizer's own rate).
    The run stops after ``max_seconds`` of ``clock`` (wall time by default;
    ``time.process_time`` makes it a CPU-time budget), checked after every step,
    after ``max_steps`` steps (a last, partial epoch; default: every epoch whole),
    or when ``on_epoch_end(epoch)`` returns a dict with a true ``"stop"``; its
    other entries are recorded per epoch. ``on_epoch_start(epoch)`` runs first
    in every epoch. ``set_training(True)`` is called before an epoch's steps and
    ``set_training(False)`` before ``on_epoch_end`` and at the end of the run (a
    PyTorch twin passes ``model.train``: dropout on while training, off while
    evaluating). The progress bar counts steps over the whole run, so its time
    estimate covers the whole run too.
    Returns the history described in the module's docstring.
    Shapes: rows (B,) int indices into the N training rows.
    """
    from tqdm.auto import tqdm

    check_positive_int("epochs", epochs)
    check_positive_int("batch_size", batch_size)
    if max_steps is not None:
        check_positive_int("max_steps", max_steps)
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < 1:
        raise ValueError(f"n: expected the number of training rows, a positive int, got {n!r}")
    if max_seconds is not None and not max_seconds >= 0:
        raise ValueError(f"max_seconds: expected None or a number >= 0, got {max_seconds!r}")
    rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    draw = batches or (lambda g: batch_order(int(n), batch_size, g))
    history: dict[str, list] = {key: [] for key in HISTORY_KEYS}
    start, i, out_of_budget = clock(), 0, False
    bar = None  # made once the first epoch's batches are drawn: then its total, and its time estimate, are known
    try:
        for epoch in range(epochs):
            if on_epoch_start is not None:
                on_epoch_start(epoch)
            epoch_batches = draw(rng)
            if set_training is not None:
                set_training(True)
            if bar is None:
                planned = epochs * len(epoch_batches) if max_steps is None else min(epochs * len(epoch_batches), max_steps)
                bar = tqdm(total=planned, desc=desc, disable=not progress, leave=False)
            total, rows = 0.0, 0
            for idx in epoch_batches:
                lr = schedule(i) if schedule is not None else None
                loss = float(step(idx, lr))
                i += 1
                total, rows = total + loss * len(idx), rows + len(idx)
                history["batch_loss"].append(loss)
                history["lr"].append(lr)
                history["step_seconds"].append(clock() - start)
                bar.update(1)
                bar.set_postfix(epoch=f"{epoch + 1}/{epochs}", loss=f"{total / rows:.4f}", refresh=False)
                if (max_seconds is not None and history["step_seconds"][-1] > max_seconds) or i == max_steps:
                    out_of_budget = True  # out of time, or of steps
                    break
            history["loss"].append(total / max(rows, 1))
            history["seconds"].append(clock() - start)
            if set_training is not None:
                set_training(False)
            extra = dict(on_epoch_end(epoch) or {}) if on_epoch_end is not None else {}
            stop = bool(extra.pop("stop", False))
            for key, value in extra.items():
                history.setdefault(key, []).append(value.item() if isinstance(value, np.generic) else value)
            if stop or out_of_budget:
                break
    finally:
        if bar is not None:
            bar.close()
        if set_training is not None:
            set_training(False)
    return history
