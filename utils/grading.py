"""Assertions for nbgrader test cells that explain what went wrong.

A bare ``assert`` tells a student only ``AssertionError``. Every check here
says what was checked, what was expected, what came back and, where we can
tell, the likely mistake (e.g. "this matches the output with unscaled scores").
They accept NumPy arrays, torch tensors and TensorFlow tensors without
importing either framework.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import numpy as np

__all__ = [
    "GradingError",
    "to_numpy",
    "run_student",
    "check_type",
    "check_shape",
    "check_close",
    "check_rows_sum_to_one",
    "check_zero_where_masked",
    "check_true",
    "check_own_code",
]


class GradingError(AssertionError):
    """A failed check; its message is what the student reads in the feedback."""


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


def _fmt_shape(shape: Sequence) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def _with_hint(message: str, hint: str | None) -> str:
    return message + (f"\nHint: {hint}" if hint else "")


def run_student(fn: Callable, *args: Any, name: str | None = None, **kwargs: Any) -> Any:
    """Call a student's function; turn any exception into a readable failure."""
    label = name or getattr(fn, "__name__", "your function")
    try:
        result = fn(*args, **kwargs)
    except NotImplementedError:
        raise GradingError(f"{label}: not implemented yet (it raised NotImplementedError).") from None
    except Exception as exc:  # the student's code failed: say where, not a deep trace
        raise GradingError(f"{label}: calling it raised {type(exc).__name__}: {exc}") from None
    if result is None:
        raise GradingError(f"{label}: returned None. Did you forget the `return` statement?")
    return result


def check_type(value: Any, types: type | tuple[type, ...], name: str, hint: str | None = None) -> None:
    """The value is an instance of ``types``."""
    if not isinstance(value, types):
        names = types.__name__ if isinstance(types, type) else " or ".join(t.__name__ for t in types)
        raise GradingError(_with_hint(f"{name}: expected a {names}, got {type(value).__name__}.", hint))


def check_shape(actual: Any, expected: Sequence[int], name: str, hint: str | None = None) -> None:
    """The array has exactly the expected shape."""
    shape = tuple(int(d) for d in to_numpy(actual).shape)
    if shape != tuple(expected):
        raise GradingError(
            _with_hint(f"{name}: expected shape {_fmt_shape(expected)}, got {_fmt_shape(shape)}.", hint)
        )


def _close(a: np.ndarray, b: np.ndarray, atol: float, rtol: float) -> bool:
    return a.shape == b.shape and bool(np.allclose(a, b, atol=atol, rtol=rtol, equal_nan=False))


def check_close(
    actual: Any,
    expected: Any,
    name: str,
    atol: float = 1e-5,
    rtol: float = 1e-4,
    mistakes: Mapping[str, Any] | None = None,
    hint: str | None = None,
) -> None:
    """Values agree with the reference; if they match a known wrong variant, name it.

    ``mistakes`` maps a description of a usual mistake ("the scores were not
    divided by sqrt(d_k)") to the output that mistake produces.
    """
    a = to_numpy(actual).astype(np.float64)
    e = to_numpy(expected).astype(np.float64)
    if a.shape != e.shape:
        raise GradingError(
            _with_hint(f"{name}: expected shape {_fmt_shape(e.shape)}, got {_fmt_shape(a.shape)}.", hint)
        )
    if _close(a, e, atol, rtol):
        return
    if np.isnan(a).any():
        where = tuple(int(i) for i in np.argwhere(np.isnan(a))[0])
        message = f"{name}: contains NaN (first at index {where}); the reference has {e[where]:.6g} there."
        raise GradingError(_with_hint(message, hint or "a row with every position masked, or exp of a huge score?"))
    for label, wrong in (mistakes or {}).items():
        if _close(a, to_numpy(wrong).astype(np.float64), atol, rtol):
            raise GradingError(f"{name}: wrong values. They match what you get when {label}.")
    diff = np.abs(a - e)
    where = tuple(int(i) for i in np.unravel_index(int(np.argmax(diff)), diff.shape))
    message = (
        f"{name}: values differ from the reference by up to {diff.max():.3g} "
        f"(at index {where}: expected {e[where]:.6g}, got {a[where]:.6g})."
    )
    raise GradingError(_with_hint(message, hint))


def check_rows_sum_to_one(weights: Any, name: str, atol: float = 1e-5, hint: str | None = None) -> None:
    """Every row of attention weights (last axis) is a probability distribution."""
    w = to_numpy(weights).astype(np.float64)
    if (w < -atol).any():
        raise GradingError(_with_hint(f"{name}: has negative weights (min {w.min():.3g}); softmax output is never negative.", hint))
    sums = w.sum(axis=-1)
    bad = np.abs(sums - 1) > atol
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        raise GradingError(
            _with_hint(
                f"{name}: each row over the last axis should sum to 1, but row {where} sums to {sums[where]:.6g}.",
                hint or "is the softmax taken over the last axis (the keys)?",
            )
        )


def check_zero_where_masked(weights: Any, mask: Any, name: str, atol: float = 1e-7, hint: str | None = None) -> None:
    """Weights are zero wherever the keep-mask is False (True = may attend)."""
    w = to_numpy(weights)
    m = np.broadcast_to(to_numpy(mask).astype(bool), w.shape)
    leaked = (~m) & (np.abs(w) > atol)
    if leaked.any():
        where = tuple(int(i) for i in np.argwhere(leaked)[0])
        kept_zero = m & (np.abs(w) <= atol)
        guess = (
            "the mask looks inverted: True means 'may attend' in this course"
            if kept_zero.sum() >= m.sum() * 0.5 and m.sum() > 0
            else "masked positions must get exactly zero weight (fill their scores with -inf before the softmax)"
        )
        raise GradingError(
            _with_hint(f"{name}: position {where} is masked out but has weight {float(w[where]):.4g}.", hint or guess)
        )


def check_true(condition: bool, message: str) -> None:
    """A property that must hold; ``message`` says what and why."""
    if not bool(condition):
        raise GradingError(message)


def check_own_code(fn: Callable, forbidden: Sequence[str], name: str | None = None) -> None:
    """The student's function does not just call a ready-made implementation.

    ``forbidden`` lists source fragments (e.g. ``"utils.attention"``,
    ``"scaled_dot_product_attention("``) that would mean the exercise was skipped.
    """
    import ast
    import inspect
    import textwrap

    label = name or getattr(fn, "__name__", "your function")
    try:
        source = textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError):
        return  # defined somewhere we cannot read; nothing to check
    tree = ast.parse(source)
    node = tree.body[0]
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
        body = "\n".join(source.splitlines()[node.body[0].lineno - 1:])  # without the def line
    else:
        body = source
    for fragment in forbidden:
        if fragment in body:
            raise GradingError(
                f"{label}: uses {fragment!r}. This exercise asks you to write it yourself, "
                "with plain tensor operations."
            )
