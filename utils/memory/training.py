"""Framework-free pieces of MemN2N training: the settings, the schedule, a batch with time noise, seeded start weights.

The epochs themselves run in the course's loop, ``utils.training.train_loop``.
"""
from __future__ import annotations

from dataclasses import dataclass
import numpy as np

__all__ = ["TrainConfig", "noisy_batch", "trim", "schedule", "initial_weights"]


@dataclass(frozen=True)
class TrainConfig:
    """Training settings of Sukhbaatar et al. (2015), Sec. 4.2, as run by the authors' code.

    Linear start (LS): the first ``linear_epochs`` epochs run without the softmax in
    the hops, at ``linear_lr``; then ``epochs`` epochs with the softmax, starting at
    ``lr`` and halved every ``anneal_every`` of them. The paper's text says the
    softmax goes back "when the validation loss stopped decreasing"; its released
    code (MemN2N-babi-matlab) simply runs 20 linear epochs, and that matters: ended
    by a 3-epoch patience on the validation loss, the linear phase stopped after 5
    to 11 epochs and task 16 stayed at 52-54% error instead of 1-3%.

    The loss is summed over the batch, as in the paper, and the gradient of each
    weight tensor (the embeddings, the temporal vectors) is clipped to norm
    ``clip_norm`` on its own, as in the authors' code, which clips every weight
    matrix separately. One norm over all the weights is not the same: during the
    linear start the temporal gradients are large, the joint clipping shrinks the
    embeddings' steps with them, and task 16 stayed at 55% error.
    ``optimizer``: "sgd" (the paper's) or "adam".
    ``time_noise``: fraction of empty memories inserted at random (RN).
    """

    epochs: int = 100
    optimizer: str = "sgd"
    batch_size: int = 32
    lr: float = 0.005
    linear_lr: float = 0.005
    anneal_every: int = 25
    linear_start: bool = True
    linear_epochs: int = 20
    time_noise: float = 0.1
    clip_norm: float = 40.0
    seed: int = 0


def schedule(cfg: TrainConfig) -> list[tuple[bool, float]]:
    """(linear, learning rate) for every epoch: the linear start, then the softmax phase.

    The rate of the softmax phase is halved every ``anneal_every`` epochs, counted
    from the end of the linear start.
    """
    for name in ("epochs", "linear_epochs", "anneal_every", "batch_size"):
        value = getattr(cfg, name)
        if not isinstance(value, int) or value < (0 if name == "linear_epochs" else 1):
            raise ValueError(f"config.{name}: expected a positive int, got {value!r}")
    if cfg.optimizer not in ("sgd", "adam"):
        raise ValueError(f"config.optimizer: expected 'sgd' or 'adam', got {cfg.optimizer!r}")
    linear = [(True, cfg.linear_lr)] * (cfg.linear_epochs if cfg.linear_start else 0)
    return linear + [(False, cfg.lr * 0.5 ** (e // cfg.anneal_every)) for e in range(cfg.epochs)]


def noisy_batch(data: dict[str, np.ndarray], idx: np.ndarray, cfg: TrainConfig, rng: np.random.Generator) -> tuple:
    """The rows ``idx`` as one training batch: stories with time noise (RN), queries, answers.

    Memory slots empty in every story of the batch are cut off.
    Shapes: idx (B,) -> stories (B, used, J), queries (B, J), answers (B,).
    """
    from utils.data.babi import add_time_noise

    s = data["stories"][idx]
    if cfg.time_noise > 0:
        s = add_time_noise(s, rng, cfg.time_noise)
    used = max(1, int((s != 0).any(-1).any(0).nonzero()[0].max(initial=0)) + 1)
    return s[:, :used], data["queries"][idx], data["answers"][idx]


def trim(data: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The same data without the memory slots that are empty in every example."""
    s = data["stories"]
    used = max(1, int((s != 0).any(-1).any(0).nonzero()[0].max(initial=0)) + 1)
    return {**data, "stories": s[:, :used]}  # (N, used, J)


def initial_weights(vocab_size: int, embed_dim: int, memory_size: int, hops: int, temporal_encoding: bool,
                    init_std: float, seed: int) -> dict[str, np.ndarray]:
    """MemN2N's starting weights drawn from N(0, init_std^2) by NumPy's generator seeded with ``seed``.

    Both twins' ``MemN2N(..., seed=s)`` start from these, so one seed gives the same
    model in PyTorch and TensorFlow (their own generators would give two different
    draws, and on bAbI the start decides whether a run leaves a 50% plateau).
    Shapes: -> {"embeddings": (K+1, V, D), "temporal": (K+1, M, D) if temporal_encoding} float32.
    """
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed: expected None or an int >= 0, got {seed!r}")
    rng = np.random.default_rng(seed)
    out = {"embeddings": rng.normal(0.0, init_std, (hops + 1, vocab_size, embed_dim)).astype(np.float32)}
    if temporal_encoding:
        out["temporal"] = rng.normal(0.0, init_std, (hops + 1, memory_size, embed_dim)).astype(np.float32)
    return out
