"""Framework-free pieces of MemN2N training: the schedule, batching and time noise."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import numpy as np

__all__ = ["TrainConfig", "batches", "trim", "history_template", "lr_at", "switch_off_linear"]


@dataclass(frozen=True)
class TrainConfig:
    """Training settings, after Sukhbaatar et al. (2015), Sec. 4.2, with two changes.

    The loss is summed over the batch and gradients are clipped to norm 40, as in
    the paper. ``optimizer``: "adam" (default) or "sgd" (the paper's). On this
    code Adam learns tasks 2 and 16 where SGD stalls, and 60 epochs with the
    rate halved every 20 fit the CPU budget (the paper: 100 epochs, halved every 25).

    ``linear_start``: begin without the softmax in the hops (LS) and put it back
    when the validation loss stops falling (at most ``max_linear_epochs``).
    ``time_noise``: fraction of empty memories inserted at random (RN).
    ``lr`` is halved every ``anneal_every`` epochs once the softmax is in.
    """

    epochs: int = 60
    optimizer: str = "adam"
    batch_size: int = 32
    lr: float = 0.01
    linear_lr: float = 0.005
    anneal_every: int = 20
    linear_start: bool = True
    max_linear_epochs: int = 30
    linear_patience: int = 3
    time_noise: float = 0.1
    clip_norm: float = 40.0
    seed: int = 0


def history_template() -> dict[str, list]:
    return {"train loss": [], "valid loss": [], "valid error": [], "linear": []}


def lr_at(cfg: TrainConfig, epoch: int, linear: bool) -> float:
    """The learning rate of an epoch (halved every ``anneal_every`` epochs)."""
    if linear:
        return cfg.linear_lr
    return cfg.lr * 0.5 ** (epoch // cfg.anneal_every)


def switch_off_linear(history: dict[str, list], cfg: TrainConfig) -> bool:
    """True when the linear phase should end: validation loss stopped falling, or the phase ran long.

    The phase never takes more than half of the epochs: the model is used with its softmax,
    so it must be trained with it.
    """
    n = sum(history["linear"])
    losses = history["valid loss"]
    if n >= min(cfg.max_linear_epochs, max(1, cfg.epochs // 2)):  # at least half the epochs with the softmax
        return True
    best_at = int(np.argmin(losses))
    return len(losses) - 1 - best_at >= cfg.linear_patience


def batches(data: dict[str, np.ndarray], cfg: TrainConfig, rng: np.random.Generator) -> Iterator[tuple]:
    """Shuffled mini-batches (stories with time noise, queries, answers)."""
    from utils.data.babi import add_time_noise

    order = rng.permutation(len(data["queries"]))
    for i in range(0, len(order), cfg.batch_size):
        idx = order[i : i + cfg.batch_size]
        s = data["stories"][idx]
        if cfg.time_noise > 0:
            s = add_time_noise(s, rng, cfg.time_noise)
        used = max(1, int((s != 0).any(-1).any(0).nonzero()[0].max(initial=0)) + 1)
        yield s[:, :used], data["queries"][idx], data["answers"][idx]  # (B, used, J): skip empty tail slots


def trim(data: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The same data without the memory slots that are empty in every example."""
    s = data["stories"]
    used = max(1, int((s != 0).any(-1).any(0).nonzero()[0].max(initial=0)) + 1)
    return {**data, "stories": s[:, :used]}  # (N, used, J)
