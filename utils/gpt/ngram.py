"""Count-based n-gram language models: lesson 8's baselines.

An n-gram model predicts a token from the n - 1 tokens before it, by counting how
often each token followed that context in the training text. Unseen pairs would get
probability 0 (infinitely many bits), so the counts are smoothed by *interpolated
absolute discounting* (Ney, Essen and Kneser, 1994): every seen count gives up
``discount`` (d), and the mass freed goes to the (n - 1)-gram's estimate:

    P_n(c | h) = max(C(h c) - d, 0) / C(h) + d * N(h) / C(h) * P_{n-1}(c | h')

where C counts in the training text, N(h) is the number of different tokens seen
after h, and h' is h without its oldest token. A context never seen falls back to
P_{n-1} whole; P_0 is uniform over the V tokens. Kneser-Ney smoothing refines this
by replacing the lower orders' counts with counts of distinct contexts.

Everything is counted with NumPy: each n-gram becomes one integer (its tokens as the
digits of a base-V number), ``np.unique`` counts them and ``np.searchsorted`` looks
them up.

Shapes: letters of ``utils/shapes.py``; here N tokens of the training text, N' of the
text scored, V vocabulary size.
"""
from __future__ import annotations

import numpy as np

from utils.checks import check_positive_int

__all__ = ["ngram_keys", "ngram_bits"]


def ngram_keys(ids: np.ndarray, n: int, vocab_size: int) -> np.ndarray:
    """Each n-gram of ``ids`` as one integer: its n tokens read as the digits of a base-V number.

    Entry i is the n-gram that ends at ids[i + n - 1]. The context of a key is
    ``key // V``, its last token ``key % V``.
    Shapes: ids (N,) -> (N - n + 1,) int64.
    """
    check_positive_int("n", n)
    check_positive_int("vocab_size", vocab_size)
    if float(vocab_size) ** n >= 2.0**62:
        raise ValueError(f"n: expected vocab_size ** n < 2 ** 62 to fit an int64, got n={n} with vocab_size={vocab_size}")
    ids = np.asarray(ids, dtype=np.int64)
    if ids.ndim != 1 or len(ids) < n:
        raise ValueError(f"ids: expected at least n={n} token ids (N,), got shape {ids.shape}")
    keys = np.zeros(len(ids) - n + 1, dtype=np.int64)
    for j in range(n):
        keys = keys * vocab_size + ids[j : len(ids) - n + 1 + j]
    return keys


def _lookup(sorted_keys: np.ndarray, values: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """values[i] where sorted_keys[i] == query, else 0."""
    i = np.minimum(np.searchsorted(sorted_keys, queries), len(sorted_keys) - 1)
    return np.where(sorted_keys[i] == queries, values[i], 0)


def ngram_bits(train_ids: np.ndarray, val_ids: np.ndarray, n: int, vocab_size: int, discount: float = 0.75) -> np.ndarray:
    """-log2 P_n of every token of ``val_ids`` after the first, under the smoothed n-gram model of ``train_ids``.

    The first tokens of ``val_ids`` have fewer than n - 1 tokens before them; their
    context is padded on the left with copies of val_ids[0].
    Shapes: train_ids (N,), val_ids (N',) -> bits (N' - 1,); entry i is for val_ids[i + 1].
    """
    train_ids, val_ids = np.asarray(train_ids, dtype=np.int64), np.asarray(val_ids, dtype=np.int64)
    check_positive_int("n", n)
    if not 0 < discount < 1:
        raise ValueError(f"discount: expected a number in (0, 1), got {discount!r}")
    for name, ids in (("train_ids", train_ids), ("val_ids", val_ids)):
        if ids.ndim != 1 or len(ids) < 2 or ids.min() < 0 or ids.max() >= vocab_size:
            raise ValueError(f"{name}: expected at least 2 token ids in 0..{vocab_size - 1} (N,), got shape {ids.shape}")
    p = np.full(len(val_ids) - 1, 1.0 / vocab_size)  # P_0: uniform
    for m in range(1, n + 1):
        keys, counts = np.unique(ngram_keys(train_ids, m, vocab_size), return_counts=True)  # sorted m-grams
        padded = np.concatenate([np.full(m - 1, val_ids[0]), val_ids])
        query = ngram_keys(padded, m, vocab_size)[1:]  # (N' - 1,) the m-gram ending at each scored token
        seen = _lookup(keys, counts, query)  # C(h c)
        contexts, first = np.unique(keys // vocab_size, return_index=True)  # m-grams sorted: contexts in runs
        context_total = np.add.reduceat(counts, first)  # C(h)
        followers = np.diff(np.append(first, len(keys)))  # N(h): distinct tokens after h
        total = _lookup(contexts, context_total, query // vocab_size).astype(np.float64)
        kinds = _lookup(contexts, followers, query // vocab_size).astype(np.float64)
        safe = np.maximum(total, 1.0)
        p = np.where(total > 0, np.maximum(seen - discount, 0.0) / safe + discount * kinds / safe * p, p)
    return -np.log2(p)
