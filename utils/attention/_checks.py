"""Shape and argument checks shared by the three attention twins.

They read only ``.shape`` and ``.dtype``, so they work on NumPy arrays, torch
tensors and TensorFlow tensors alike, and raise a ``ValueError`` that names the
argument, what was expected and what came back.
"""
from __future__ import annotations

from typing import Any, Sequence


def shape_of(x: Any) -> tuple:
    """The shape of an array or tensor as a tuple (None for unknown dims)."""
    shape = getattr(x, "shape", None)
    if shape is None:
        raise ValueError(f"expected an array or tensor, got {type(x).__name__}")
    return tuple(None if d is None else int(d) for d in shape)


def _same(a: Any, b: Any) -> bool:
    return a is None or b is None or a == b


def check_rank(name: str, x: Any, min_rank: int, layout: str) -> tuple:
    shape = shape_of(x)
    if len(shape) < min_rank:
        raise ValueError(f"{name}: expected {layout}, got shape {shape}")
    return shape


def check_queries_keys(queries: Any, keys: Any, same_width: bool = True) -> tuple[tuple, tuple]:
    """queries (..., Tq, D) and keys (..., Tk, D) with the same leading dims."""
    q = check_rank("queries", queries, 2, "(..., Tq, D)")
    k = check_rank("keys", keys, 2, "(..., Tk, D)")
    if len(k) != len(q) or not all(_same(a, b) for a, b in zip(q[:-2], k[:-2])):
        raise ValueError(
            f"keys: expected (..., Tk, D) with the leading dims {q[:-2]} of queries {q}, got {k}"
        )
    if same_width and not _same(q[-1], k[-1]):
        raise ValueError(
            f"keys: expected (..., Tk, D) with D={q[-1]} (the width of queries {q}), got {k}"
        )
    return q, k


def check_values(values: Any, keys_shape: tuple) -> tuple:
    """values (..., Tk, Dv): one value per key."""
    v = check_rank("values", values, 2, "(..., Tk, Dv)")
    if len(v) != len(keys_shape) or not all(_same(a, b) for a, b in zip(v[:-1], keys_shape[:-1])):
        raise ValueError(
            f"values: expected (..., Tk, Dv) with (..., Tk)={keys_shape[:-1]} from keys {keys_shape}, got {v}"
        )
    return v


def check_mask(mask: Any, scores_shape: Sequence) -> None:
    """mask: boolean keep-mask broadcastable to the scores (..., Tq, Tk)."""
    if mask is None:
        return
    dtype = str(getattr(mask, "dtype", type(mask).__name__))
    if "bool" not in dtype:
        raise ValueError(
            f"mask: expected a boolean keep-mask (True = may attend), got dtype {dtype}; "
            "convert with mask.astype(bool) / mask.bool() / keras.ops.cast(mask, 'bool')"
        )
    m = shape_of(mask)
    s = tuple(scores_shape)
    ok = len(m) <= len(s) and all(
        a is None or b is None or a == 1 or a == b for a, b in zip(m[::-1], s[::-1])
    )
    if not ok:
        raise ValueError(f"mask: expected a shape broadcastable to the scores {s} (..., Tq, Tk), got {m}")


def check_temperature(temperature: float) -> None:
    if not float(temperature) > 0:
        raise ValueError(f"temperature: expected a positive number, got {temperature!r}")


def check_matrix(name: str, w: Any, rows: Any, layout: str) -> tuple:
    shape = shape_of(w)
    if len(shape) != 2 or not _same(shape[0], rows):
        raise ValueError(f"{name}: expected {layout} with {layout[1:].split(',')[0]}={rows}, got {shape}")
    return shape


def check_additive_weights(q_shape: tuple, k_shape: tuple, W_q: Any, W_k: Any, w_v: Any) -> None:
    """W_q (D, A), W_k (Dk, A), w_v (A,)."""
    wq = check_matrix("W_q", W_q, q_shape[-1], "(D, A)")
    wk = check_matrix("W_k", W_k, k_shape[-1], "(Dk, A)")
    if not _same(wk[1], wq[1]):
        raise ValueError(f"W_k: expected (Dk, A) with A={wq[1]} like W_q {wq}, got {wk}")
    wv = shape_of(w_v)
    if len(wv) != 1 or not _same(wv[0], wq[1]):
        raise ValueError(f"w_v: expected (A,) with A={wq[1]} like W_q {wq}, got {wv}")
