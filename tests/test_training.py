"""The course's one training loop (utils.training), on its own: no framework, a step that records."""
from __future__ import annotations

import numpy as np
import pytest

from utils.training import HISTORY_KEYS, batch_order, train_loop


def _recording_step(seen: list):
    def step(rows: np.ndarray, lr: float) -> float:
        seen.append((rows.copy(), lr))
        return float(len(rows))  # a loss we can predict: the batch's size

    return step


def test_every_row_once_per_epoch_the_last_batch_shorter() -> None:
    seen: list = []
    h = train_loop(_recording_step(seen), 10, epochs=3, batch_size=4, rng=0, progress=False)
    assert [len(rows) for rows, _ in seen] == [4, 4, 2] * 3
    for e in range(3):
        rows = np.concatenate([r for r, _ in seen[3 * e : 3 * e + 3]])
        assert sorted(rows) == list(range(10)), f"epoch {e} did not see every row once: {rows}"
    assert not np.array_equal(seen[0][0], seen[3][0]), "each epoch reshuffles"
    assert set(HISTORY_KEYS) <= set(h)
    assert len(h["batch_loss"]) == len(h["lr"]) == len(h["step_seconds"]) == 9
    assert len(h["loss"]) == len(h["seconds"]) == 3
    # the epoch's loss weighs each batch by its rows: (4*4 + 4*4 + 2*2) / 10
    assert h["loss"] == pytest.approx([3.6] * 3)


def test_the_seed_decides_the_batches() -> None:
    a, b, c = [], [], []
    train_loop(_recording_step(a), 20, epochs=2, batch_size=6, rng=5, progress=False)
    train_loop(_recording_step(b), 20, epochs=2, batch_size=6, rng=np.random.default_rng(5), progress=False)
    train_loop(_recording_step(c), 20, epochs=2, batch_size=6, rng=6, progress=False)
    assert all(np.array_equal(x, y) for (x, _), (y, _) in zip(a, b))
    assert not all(np.array_equal(x, y) for (x, _), (y, _) in zip(a, c))


def test_schedule_gives_each_step_its_rate_and_is_recorded() -> None:
    seen: list = []
    h = train_loop(_recording_step(seen), 8, epochs=2, batch_size=3, schedule=lambda i: 0.1 * (i + 1), progress=False)
    assert [lr for _, lr in seen] == pytest.approx([0.1 * k for k in range(1, 7)])
    assert h["lr"] == [lr for _, lr in seen]
    seen.clear()
    train_loop(_recording_step(seen), 8, batch_size=3, progress=False)
    assert all(lr is None for _, lr in seen), "no schedule: the step keeps its optimizer's own rate"


def test_custom_batches_and_hooks() -> None:
    seen: list = []
    calls: list = []
    h = train_loop(
        _recording_step(seen), 100, epochs=4, batch_size=1,
        batches=lambda rng: [rng.integers(0, 100, 5) for _ in range(2)],
        on_epoch_start=lambda e: calls.append(("start", e)),
        on_epoch_end=lambda e: calls.append(("end", e)) or {"valid error": 1.0 / (e + 1), "stop": e == 2},
        progress=False,
    )
    assert [len(r) for r, _ in seen] == [5] * 6, "three epochs of two batches of five; the fourth never runs"
    assert calls == [("start", 0), ("end", 0), ("start", 1), ("end", 1), ("start", 2), ("end", 2)]
    assert h["valid error"] == pytest.approx([1.0, 0.5, 1 / 3]) and "stop" not in h


def test_the_clock_stops_the_run_in_the_middle_of_an_epoch() -> None:
    seen: list = []
    ticks = iter(range(1000))  # a clock that advances one second per reading
    h = train_loop(_recording_step(seen), 40, epochs=5, batch_size=4, max_seconds=2.5, clock=lambda: float(next(ticks)),
                   progress=False)
    # readings: 0 at the start, then 1, 2, 3 after steps 1-3 (3 > 2.5: stop), then 4 at the epoch's end
    assert len(seen) == 3 and h["step_seconds"] == [1.0, 2.0, 3.0]
    assert h["seconds"] == [4.0] and h["loss"] == pytest.approx([4.0]), "the partial epoch is recorded"


def test_max_steps_cuts_the_last_epoch_short() -> None:
    seen: list = []
    ends: list = []
    h = train_loop(_recording_step(seen), 20, epochs=3, batch_size=4, max_steps=7, progress=False,
                   on_epoch_end=lambda e: ends.append(e))
    # five steps a pass: the first whole, the second cut after two steps, the third never starts
    assert len(seen) == 7 and len(h["batch_loss"]) == 7 and len(h["loss"]) == 2 and ends == [0, 1]
    assert len(train_loop(_recording_step([]), 20, epochs=3, batch_size=4, max_steps=99, progress=False)["batch_loss"]) == 15


@pytest.mark.parametrize(
    "kwargs, match",
    [({"n": 0}, "n: expected"), ({"epochs": 0}, "epochs"), ({"batch_size": 2.5}, "batch_size"), ({"max_seconds": -1}, "max_seconds"),
     ({"max_steps": 0}, "max_steps")],
)
def test_bad_arguments_are_named(kwargs, match) -> None:
    args = {"n": 10, "epochs": 1, "batch_size": 2, **kwargs}
    with pytest.raises(ValueError, match=match):
        train_loop(lambda rows, lr: 0.0, progress=False, **args)


def test_batch_order_plain_and_bucketed() -> None:
    n, bs = 103, 8
    plain = batch_order(n, bs, np.random.default_rng(3))
    perm = np.random.default_rng(3).permutation(n)
    assert [list(b) for b in plain] == [list(perm[i : i + bs]) for i in range(0, n, bs)], "plain: the permutation, cut"
    lengths = np.random.default_rng(0).integers(3, 60, n)
    bucketed = batch_order(n, bs, np.random.default_rng(3), lengths, pool=4)
    assert sorted(np.concatenate(bucketed).tolist()) == list(range(n)), "every row exactly once"
    assert max(len(b) for b in bucketed) == bs
    spread = lambda batches: np.mean([np.ptp(lengths[b]) for b in batches])  # noqa: E731
    assert spread(bucketed) < 0.5 * spread(plain), (spread(bucketed), spread(plain))
    again = batch_order(n, bs, np.random.default_rng(3), lengths, pool=4)
    assert all(np.array_equal(a, b) for a, b in zip(bucketed, again)), "the seed decides the order"
    with pytest.raises(ValueError, match="lengths"):
        batch_order(n, bs, np.random.default_rng(0), lengths[:-1])


def test_set_training_switches_modes_around_steps_and_evaluation() -> None:
    log: list = []
    step = lambda rows, lr: log.append("step") or 1.0  # noqa: E731
    train_loop(step, 4, epochs=2, batch_size=2, set_training=lambda on: log.append(on),
               on_epoch_end=lambda e: log.append("eval"), progress=False)
    assert log == [True, "step", "step", False, "eval", True, "step", "step", False, "eval", False]
