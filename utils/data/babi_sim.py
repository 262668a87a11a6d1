"""An offline bAbI simulator: stories in the bAbI v1.2 format for tasks 1, 2, 6 and 16.

So the tests and the default lesson need no download. ``utils.data.babi`` reads
what it writes exactly as it reads the real files.

* :func:`simulate_task`: the text of one task's stories.
* :func:`write_simulated`: ``qa{task}_{name}_{train,test}.txt`` files in a folder.
* :func:`simulated_dir`: a cached folder of all four tasks, written on first use.

This module imports no deep-learning framework.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from .babi import TASK_NAMES, _check_task

__all__ = ["SIMULATED_TASKS", "simulate_task", "write_simulated", "simulated_dir"]

SIMULATED_TASKS = (1, 2, 6, 16)
_PEOPLE = ("Mary", "John", "Daniel", "Sandra")
_PLACES = ("bathroom", "bedroom", "garden", "hallway", "kitchen", "office")
_MOVES = ("moved to", "went to", "journeyed to", "travelled to", "went back to")
_OBJECTS = ("apple", "football", "milk")
_GETS = ("got", "grabbed", "picked up", "took")
_DROPS = ("dropped", "discarded", "put down", "left")
_NAMES16 = ("Lily", "Bernhard", "Greg", "Julius", "Brian")
_ANIMALS = ("frog", "lion", "swan", "rhino")
_COLORS = ("green", "white", "yellow", "gray")


class _Writer:
    """Numbers the lines of one story."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def say(self, text: str) -> int:
        self.lines.append(f"{len(self.lines) + 1} {text}")
        return len(self.lines)

    def ask(self, question: str, answer: str, support: Sequence[int]) -> None:
        ids = " ".join(str(i) for i in support)
        self.lines.append(f"{len(self.lines) + 1} {question}\t{answer}\t{ids}")


def _story_task1(rng: np.random.Generator, yes_no: bool = False) -> list[str]:
    w, where, line_of = _Writer(), {}, {}
    for _ in range(5):
        for _ in range(2):
            p = str(rng.choice(_PEOPLE))
            place = str(rng.choice([x for x in _PLACES if x != where.get(p)]))
            where[p], line_of[p] = place, w.say(f"{p} {rng.choice(_MOVES)} the {place}.")
        p = str(rng.choice(sorted(where)))
        if yes_no:
            asked = where[p] if rng.random() < 0.5 else str(rng.choice([x for x in _PLACES if x != where[p]]))
            w.ask(f"Is {p} in the {asked}? ", "yes" if asked == where[p] else "no", [line_of[p]])
        else:
            w.ask(f"Where is {p}? ", where[p], [line_of[p]])
    return w.lines


def _story_task2(rng: np.random.Generator) -> list[str]:
    w = _Writer()
    where: dict[str, str] = {}
    moved_at: dict[str, int] = {}
    holder: dict[str, str | None] = {}
    obj_at: dict[str, tuple[str, int, int]] = {}  # dropped object: place, drop line, move line
    touched_at: dict[str, int] = {}
    asked = 0
    while asked < 5:
        p = str(rng.choice(_PEOPLE))
        r = rng.random()
        carried = [o for o, h in holder.items() if h == p]
        free = [o for o in _OBJECTS if holder.get(o) is None and (o not in obj_at or obj_at[o][0] == where.get(p))]
        if p in where and r < 0.3 and free:
            o = str(rng.choice(free))
            holder[o] = p
            touched_at[o] = w.say(f"{p} {rng.choice(_GETS)} the {o} there.")
            obj_at.pop(o, None)
        elif p in where and r < 0.4 and carried:
            o = str(rng.choice(carried))
            holder[o] = None
            drop = w.say(f"{p} {rng.choice(_DROPS)} the {o}.")
            obj_at[o] = (where[p], drop, moved_at[p])
        else:
            place = str(rng.choice([x for x in _PLACES if x != where.get(p)]))
            where[p] = place
            moved_at[p] = w.say(f"{p} {rng.choice(_MOVES)} the {place}.")
        askable = [o for o in _OBJECTS if holder.get(o) is not None or o in obj_at]
        if askable and rng.random() < 0.35:
            o = str(rng.choice(askable))
            if holder.get(o) is not None:
                h = holder[o]
                w.ask(f"Where is the {o}? ", where[h], [touched_at[o], moved_at[h]])
            else:
                place, drop, move = obj_at[o]
                w.ask(f"Where is the {o}? ", place, [drop, move])
            asked += 1
    return w.lines


def _story_task16(rng: np.random.Generator) -> list[str]:
    w = _Writer()
    names = [str(n) for n in rng.permutation(_NAMES16)]
    target, others = names[0], names[1:]
    kind = {n: str(rng.choice(_ANIMALS)) for n in others}
    kind[target] = kind[str(rng.choice(others))]  # at least one other of the target's kind
    colour_of_kind: dict[str, str] = {}
    colour = {n: colour_of_kind.setdefault(kind[n], str(rng.choice(_COLORS))) for n in others}
    remaining = {n: ["kind", "color"] for n in others}
    line_of: dict[tuple[str, str], int] = {}
    while remaining:  # interleave the facts; each name's kind comes before its colour
        n = str(rng.choice(sorted(remaining)))
        what = remaining[n].pop(0)
        text = f"{n} is a {kind[n]}." if what == "kind" else f"{n} is {colour[n]}."
        line_of[(n, what)] = w.say(text)
        if not remaining[n]:
            del remaining[n]
    line_of[(target, "kind")] = w.say(f"{target} is a {kind[target]}.")
    witness = max((n for n in others if kind[n] == kind[target]), key=lambda n: line_of[(n, "color")])
    w.ask(f"What color is {target}?", colour[witness],
          [line_of[(target, "kind")], line_of[(witness, "kind")], line_of[(witness, "color")]])
    return w.lines


def simulate_task(task: int, n_questions: int, seed: int = 0) -> str:
    """Stories in bAbI v1.2 format for one simulated task, at least ``n_questions`` questions.

    Tasks: 1 (where is a person), 2 (where is an object: two supporting facts),
    6 (yes/no: is a person in a place), 16 (basic induction: what colour).
    """
    task = _check_task(task)
    if task not in SIMULATED_TASKS:
        raise ValueError(f"task: the simulator writes tasks {SIMULATED_TASKS}, got {task}")
    if n_questions < 1:
        raise ValueError(f"n_questions: expected a positive int, got {n_questions!r}")
    rng = np.random.default_rng([seed, task])
    make = {1: _story_task1, 2: _story_task2, 6: lambda r: _story_task1(r, yes_no=True), 16: _story_task16}[task]
    lines: list[str] = []
    count = 0
    while count < n_questions:
        story = make(rng)
        lines.extend(story)
        count += sum("\t" in s for s in story)
    return "\n".join(lines) + "\n"


def write_simulated(
    dest: str | Path | None = None,
    tasks: Sequence[int] = SIMULATED_TASKS,
    n_train: int = 1000,
    n_test: int = 1000,
    seed: int = 0,
) -> Path:
    """Write ``qa{task}_{name}_{train,test}.txt`` files for simulated tasks; return the folder.

    The default folder is ``utils.runtime.cache_dir()/babi_simulated``.
    """
    from utils.runtime import cache_dir

    folder = Path(dest) if dest is not None else cache_dir() / "babi_simulated"
    folder.mkdir(parents=True, exist_ok=True)
    for task in tasks:
        for split, n, offset in (("train", n_train, 0), ("test", n_test, 1)):
            text = simulate_task(task, n, seed=seed * 2 + offset)
            (folder / f"qa{task}_{TASK_NAMES[task]}_{split}.txt").write_text(text, encoding="utf-8")
    return folder


def simulated_dir(n_train: int = 1000, n_test: int = 1000, seed: int = 0) -> Path:
    """The cached folder of simulated tasks 1, 2, 6, 16 (written on first use)."""
    from utils.runtime import cache_dir

    folder = cache_dir() / f"babi_simulated_{n_train}_{n_test}_{seed}"
    if len(list(folder.glob("qa*_*.txt"))) != 2 * len(SIMULATED_TASKS):
        write_simulated(folder, n_train=n_train, n_test=n_test, seed=seed)
    return folder
