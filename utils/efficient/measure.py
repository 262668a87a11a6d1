"""Measuring what lesson 9 claims: peak memory of a NumPy call, and how a cost grows with T.

``peak_bytes`` uses the standard library's ``tracemalloc``, which sees every buffer
NumPy allocates (NumPy reports its data buffers to it), so the figure is a property
of the algorithm and the array sizes, the same on every machine: a deterministic
measurement, unlike a timing. It does not see the memory torch or TensorFlow
allocate. No framework is imported here.

Shapes: letters of ``utils/shapes.py``; here T sequence length.
"""
from __future__ import annotations

import gc
import tracemalloc
from typing import Any, Callable, Sequence

import numpy as np

__all__ = ["peak_bytes", "growth_exponent"]


def peak_bytes(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> int:
    """The most memory ``fn(*args, **kwargs)`` held at once, in bytes, beyond what existed before.

    Counts every allocation traced while the call runs (its temporaries and its result),
    not the arguments, which exist already.
    Shapes: any.
    """
    if tracemalloc.is_tracing():
        raise RuntimeError("peak_bytes: tracemalloc is already tracing; stop it first (tracemalloc.stop())")
    gc.collect()
    tracemalloc.start()
    try:
        fn(*args, **kwargs)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return int(peak)


def growth_exponent(lengths: Sequence[float], costs: Sequence[float]) -> float:
    """The exponent p of cost ~ T^p: the slope of the least-squares line through (log T, log cost).

    1 for a cost that doubles when T doubles, 2 for one that quadruples.
    Shapes: lengths (n,), costs (n,) -> a float.
    """
    t = np.asarray(lengths, dtype=float)
    c = np.asarray(costs, dtype=float)
    if t.ndim != 1 or t.shape != c.shape or len(t) < 2:
        raise ValueError(f"costs: expected one cost per length, at least two, got lengths {t.shape} and costs {c.shape}")
    if (t <= 0).any() or (c <= 0).any():
        raise ValueError(f"costs: expected positive lengths and costs (their logarithms are fitted), got {c.tolist()}")
    slope, _ = np.polyfit(np.log(t), np.log(c), 1)
    return float(slope)
