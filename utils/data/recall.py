"""Associative recall: a list of key-value pairs, then one of the keys; the answer is its value.

``(k=17, v=3), (k=40, v=9), (k=5, v=3), ...  ? 40  ->  9``. A model that reads the pairs with
attention must find the one pair whose key matches the query and copy its value: an exact
lookup among ``num_pairs`` items. Lesson 9 trains softmax attention and linear attention on it
(the task is the "associative recall" of Ba et al. 2016 and of the Zoology benchmark, Arora et
al. 2023, in its simplest form). Keys are distinct within an example; values may repeat.

Everything is generated from a seed with NumPy: no download, no framework.
Shapes: letters of ``utils/shapes.py``; here N examples; ``num_pairs`` is a plain int.
"""
from __future__ import annotations

import numpy as np

from ..checks import check_positive_int

__all__ = ["make_recall"]


def make_recall(n: int, num_pairs: int, num_keys: int = 64, num_values: int = 16, seed: int = 0) -> dict[str, np.ndarray]:
    """``n`` recall examples of ``num_pairs`` pairs each, with keys in 0..num_keys-1 and values in 0..num_values-1.

    Returns ``{"keys", "values", "query", "answer"}``: the pairs' keys and values, the key
    asked about (one of the example's keys, chosen uniformly) and its value.
    Shapes: -> keys (N, num_pairs), values (N, num_pairs), query (N,), answer (N,); int64.
    """
    for name, value in (("n", n), ("num_pairs", num_pairs), ("num_keys", num_keys), ("num_values", num_values)):
        check_positive_int(name, value)
    if num_pairs > num_keys:
        raise ValueError(f"num_pairs: expected at most num_keys={num_keys} (keys are distinct within an example), got {num_pairs}")
    rng = np.random.default_rng(seed)
    keys = np.argsort(rng.random((n, num_keys)), axis=1)[:, :num_pairs]  # (N, num_pairs): distinct keys per row
    values = rng.integers(0, num_values, size=(n, num_pairs))  # (N, num_pairs)
    which = rng.integers(0, num_pairs, size=n)  # (N,): the pair asked about
    rows = np.arange(n)
    return {"keys": keys.astype(np.int64), "values": values.astype(np.int64),
            "query": keys[rows, which].astype(np.int64), "answer": values[rows, which].astype(np.int64)}
