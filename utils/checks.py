"""The course's argument checks, in one place: every package validates its inputs here.

They read only ``.shape`` and ``.dtype``, so they work on NumPy arrays, torch
tensors and TensorFlow tensors alike (and import neither framework), and raise a
``ValueError`` that names the argument, what was expected and what came back.
``to_numpy`` turns any of those into a NumPy array, for checks, plots and tests.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np


def to_numpy(x: Any) -> np.ndarray:
    """Convert a NumPy array, torch tensor, TF/Keras tensor or nested list to NumPy."""
    if hasattr(x, "detach"):  # torch
        x = x.detach().cpu()
        if str(x.dtype) == "torch.bfloat16":
            x = x.float()
        return x.numpy()
    if hasattr(x, "numpy") and not isinstance(x, np.ndarray):  # TensorFlow eager / Keras
        return np.asarray(x.numpy())
    return np.asarray(x)


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


# --- multi-head attention and masks (lesson 5) ---------------------------------


def check_positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int,)) and not hasattr(value, "__index__"):
        raise ValueError(f"{name}: expected a positive int, got {value!r}")
    if int(value) < 1:
        raise ValueError(f"{name}: expected a positive int, got {value!r}")
    return int(value)


def check_lengths(lengths: Any, max_len: int) -> None:
    """lengths (B,) of integers in 0..max_len."""
    check_positive_int("max_len", max_len)
    shape = shape_of(lengths)
    if len(shape) != 1:
        raise ValueError(f"lengths: expected (B,) one length per sequence, got shape {shape}")
    arr = np.asarray(lengths)
    if arr.size and (arr.min() < 0 or arr.max() > max_len):
        raise ValueError(f"lengths: expected values in 0..max_len={max_len}, got min {arr.min()} max {arr.max()}")


def check_window(centers: Any, num_keys: int, half_width: int) -> None:
    """centers (Tq,) or (B, Tq), finite, in 0..num_keys-1; half_width an int >= 0."""
    check_positive_int("num_keys", num_keys)
    if isinstance(half_width, bool) or not hasattr(half_width, "__index__") or int(half_width) < 0:
        raise ValueError(f"half_width: expected an int >= 0 (the window is centre +- half_width), got {half_width!r}")
    shape = shape_of(centers)
    if len(shape) not in (1, 2):
        raise ValueError(f"centers: expected (Tq,) or (B, Tq) one centre per query, got shape {shape}")
    arr = np.asarray(centers, dtype=float)
    if arr.size and not (np.isfinite(arr).all() and arr.min() >= 0 and arr.max() <= num_keys - 1):
        raise ValueError(
            f"centers: expected positions in 0..num_keys-1={num_keys - 1} (a centre off the keys leaves a window "
            f"with nothing to attend to), got min {arr.min()} max {arr.max()}"
        )


def check_top_k(k: Any, scores_shape: Sequence) -> int:
    """k: a positive int, at most Tk (the last axis of the scores (..., Tk))."""
    s = tuple(scores_shape)
    if not s:
        raise ValueError("scores: expected (..., Tk) with at least one axis, got a scalar")
    check_positive_int("k", k)
    if s[-1] is not None and int(k) > s[-1]:
        raise ValueError(f"k: expected at most Tk={s[-1]} (the keys of the scores {s}), got {k!r}")
    return int(k)


def check_heads(name: str, x: Any, num_heads: int) -> tuple:
    """x (B, T, D) with D divisible by num_heads."""
    check_positive_int("num_heads", num_heads)
    shape = check_rank(name, x, 3, "(B, T, D)")
    if len(shape) != 3:
        raise ValueError(f"{name}: expected (B, T, D), got shape {shape}")
    if shape[-1] is not None and shape[-1] % num_heads:
        raise ValueError(f"{name}: expected (B, T, D) with D divisible by num_heads={num_heads}, got {shape}")
    return shape


def check_mha_inputs(
    queries: Any, keys: Any, values: Any, w_qkv: Any, b_qkv: Any, w_o: Any, b_o: Any, num_heads: int
) -> int:
    """queries (B, Tq, D), keys/values (B, Tk, D), w_qkv (D, 3D), b_qkv (3D,), w_o (D, D), b_o (D,); returns D."""
    q = check_heads("queries", queries, num_heads)
    d = q[-1]
    for name, x in (("keys", keys), ("values", values)):
        s = shape_of(x)
        if len(s) != 3 or not _same(s[0], q[0]) or not _same(s[-1], d):
            raise ValueError(f"{name}: expected (B, Tk, D) with B={q[0]}, D={d} like queries {q}, got {s}")
    if not _same(shape_of(keys)[1], shape_of(values)[1]):
        raise ValueError(f"values: expected (B, Tk, D) with Tk={shape_of(keys)[1]} like keys, got {shape_of(values)}")
    expected = {"w_qkv": (d, 3 * d), "b_qkv": (3 * d,), "w_o": (d, d), "b_o": (d,)}
    for name, w in (("w_qkv", w_qkv), ("b_qkv", b_qkv), ("w_o", w_o), ("b_o", b_o)):
        if w is None and name.startswith("b_"):
            continue
        s = shape_of(w)
        if len(s) != len(expected[name]) or not all(_same(a, e) for a, e in zip(s, expected[name])):
            raise ValueError(f"{name}: expected shape {expected[name]} for D={d}, got {s}")
    return d


def check_attention_sizes(d_model: int, num_heads: int, dropout: float, layer_norm_eps: float) -> None:
    """The checks every attention config shares: heads divide the width, dropout and epsilon in range."""
    if d_model % num_heads:
        raise ValueError(f"num_heads: expected a divisor of d_model={d_model}, got {num_heads}")
    if not 0.0 <= dropout < 1.0:
        raise ValueError(f"dropout: expected a probability in [0, 1), got {dropout!r}")
    if not layer_norm_eps > 0:
        raise ValueError(f"layer_norm_eps: expected a positive number, got {layer_norm_eps!r}")
