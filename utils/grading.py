"""Assertions for nbgrader test cells that explain what went wrong.

A bare ``assert`` tells a student only ``AssertionError``. Every check here
says what was checked, what was expected, what came back and, where we can
tell, the likely mistake (e.g. "this matches the output with unscaled scores").
They accept NumPy arrays, torch tensors and TensorFlow tensors without
importing either framework.
"""
from __future__ import annotations

import json
import os
import re
import sys
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from .checks import to_numpy  # noqa: F401  (kept here: tests and notebooks import it from grading)

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
    "observe",
    "guard_reference",
]


class GradingError(AssertionError):
    """A failed check; its message is what the student reads in the feedback."""




def _fmt_shape(shape: Sequence) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def _with_hint(message: str, hint: str | None) -> str:
    return message + (f"\nHint: {hint}" if hint else "")


# --- Grading outside the student's kernel --------------------------------------
# When ``tools.grade`` runs a submission, its kernel is sandboxed and cannot be
# trusted. Every value a test obtains from student code (``run_student``'s return
# value, or a value passed through ``observe``) is then written, as plain data, to
# the file named by $COURSE_GRADING_RECORD. The grader later replays each test
# cell in its own process, where ``run_student`` and ``observe`` hand back those
# recorded values instead of running anything, so every pass or fail is decided
# where no student code ever ran (see tools/replay.py).
_RECORD_ENV = "COURSE_GRADING_RECORD"
_state: dict[str, Any] = {"cell": None, "replay": None}


def _begin_test(grade_id: str) -> None:
    """Called by the grader before each graded test cell (record mode)."""
    _state["cell"] = grade_id


def _record(kind: str, value: Any) -> None:
    path = os.environ.get(_RECORD_ENV)
    if not path or _state["cell"] is None:
        return
    entry = {"cell": _state["cell"], "kind": kind, "value": encode_value(value)}
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(entry) + "\n")


def encode_value(value: Any, depth: int = 0) -> Any:
    """A JSON-able description of a value: arrays keep dtype, shape and framework."""
    if depth > 6:
        return {"t": "opaque", "type": "nested too deep"}
    if value is None or isinstance(value, (bool, int, float, str)):
        if isinstance(value, float) and not np.isfinite(value):
            return {"t": "float", "v": repr(value)}
        return value if not isinstance(value, str) else {"t": "str", "v": value[:2000]}
    if isinstance(value, (np.integer, np.floating, np.bool_)):
        value = np.asarray(value)
    framework = "np" if isinstance(value, np.ndarray) else (
        "torch" if hasattr(value, "detach") else ("tf" if hasattr(value, "numpy") and hasattr(value, "dtype") else None))
    if framework:
        try:
            array = to_numpy(value)
        except Exception:  # noqa: BLE001 - anything odd is reported as opaque
            return {"t": "opaque", "type": type(value).__name__[:40]}
        if array.dtype.kind not in "biuf" or array.size > 2_000_000:
            return {"t": "opaque", "type": f"array of {array.dtype} {array.shape}"[:80]}
        return {"t": "array", "fw": framework, "dtype": str(array.dtype), "shape": list(array.shape),
                "data": [repr(float(x)) if array.dtype.kind == "f" else int(x) for x in array.reshape(-1)]}
    if isinstance(value, (tuple, list)):
        return {"t": type(value).__name__, "items": [encode_value(v, depth + 1) for v in list(value)[:64]]}
    if isinstance(value, dict):
        return {"t": "dict", "items": [[str(k)[:100], encode_value(v, depth + 1)] for k, v in list(value.items())[:64]]}
    return {"t": "opaque", "type": type(value).__name__[:40]}


# --- The reference-implementation policy -----------------------------------------
# While a graded test runs student code (inside ``run_student``), the course's
# own implementations of that exercise refuse to run when student code reaches
# them: through an import, an alias, ``getattr``, ``exec``, a subclass or a
# lambda alike. They still run when the test itself, or other course code (a
# reference model the test hands to the student), calls them.
_LIBRARY_DIRS: tuple[str, ...] = ()
_CELL_FILE = re.compile(r"[/\\]ipykernel_\d+[/\\][^/\\]+\.py$")  # where ipykernel compiles each cell


def _library_dirs() -> tuple[str, ...]:
    global _LIBRARY_DIRS
    if not _LIBRARY_DIRS:
        import sysconfig

        paths = {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")}
        _LIBRARY_DIRS = tuple(os.path.realpath(p) + os.sep for p in paths)
    return _LIBRARY_DIRS


def _caller_allowed(frame: Any) -> bool:
    """May the code that called a guarded reference (``frame`` and outwards) use it?"""
    package = os.path.dirname(os.path.realpath(__file__)) + os.sep
    here = os.path.realpath(__file__)
    cells = []
    f = frame
    while f is not None:  # the outermost notebook cell on the stack is the running test cell
        name = f.f_code.co_filename
        if _CELL_FILE.search(name) or name.startswith("<ipython-input"):  # not ipykernel_launcher.py
            cells.append(name)
        f = f.f_back
    test_cell = cells[-1] if cells else None
    f = frame
    while f is not None:
        name = f.f_code.co_filename
        real = os.path.realpath(name) if not name.startswith("<") else name
        if real == here:
            return f.f_code.co_name != "run_student"  # run_student calling it directly: an alias
        if real.startswith(package):
            return True  # course code using its own parts (e.g. a reference model the test passed in)
        if name.startswith("<frozen") or real.startswith(_library_dirs()):
            f = f.f_back  # framework internals (e.g. Module.__call__): look further out
            continue
        return name == test_cell  # the test's own helper, or student code (cells, exec strings)
    return True


def _guarded(target: Callable, label: str) -> Callable:
    import functools

    @functools.wraps(target)
    def guard(*args: Any, **kwargs: Any) -> Any:
        if _state.get("depth", 0) > 0 and not _caller_allowed(sys._getframe(1)):
            raise GradingError(
                f"{label} is the course's own implementation of this exercise. "
                "This exercise asks you to write it yourself.")
        return target(*args, **kwargs)

    guard.__course_guarded__ = True
    return guard


def guard_reference(modules: Sequence[str], names: Sequence[str]) -> list[str]:
    """Arm the policy for ``names`` (functions, classes, ``Class.method``) in ``modules``.

    Returns the qualified names guarded. Called by the grader before a submission
    runs; a missing module or name is skipped.
    """
    import importlib

    done = []
    for module_name in modules:
        try:
            module = importlib.import_module(module_name)
        except Exception:  # noqa: BLE001 - e.g. the other framework's twin
            continue
        for name in names:
            owner_name, _, method = name.partition(".")
            owner = getattr(module, owner_name, None)
            if owner is None:
                continue
            if isinstance(owner, type):
                for attr in ([method] if method else ["forward", "call", "__call__"]):
                    fn = owner.__dict__.get(attr)
                    if callable(fn) and not getattr(fn, "__course_guarded__", False):
                        setattr(owner, attr, _guarded(fn, f"{owner_name}.{attr}"))
                        done.append(f"{module_name}.{owner_name}.{attr}")
            elif callable(owner) and not method and not getattr(owner, "__course_guarded__", False):
                setattr(module, owner_name, _guarded(owner, f"{module_name}.{owner_name}"))
                done.append(f"{module_name}.{owner_name}")
    return done


def observe(value: Any, name: str = "a value your code produced") -> Any:
    """Hand a value that student code produced (e.g. weights it updated) to the grader.

    In a student's kernel this returns ``value`` unchanged (and records it when
    graded); when the grader replays the test it returns the recorded value.
    """
    replay = _state["replay"]
    if replay is not None:
        return replay.next_value("observe", name)
    _record("observe", value)
    return value


def run_student(fn: Callable, *args: Any, name: str | None = None, **kwargs: Any) -> Any:
    """Call a student's function; turn any exception into a readable failure."""
    label = name or getattr(fn, "__name__", "your function")
    replay = _state["replay"]
    if replay is not None:
        return replay.next_value("return", label)
    _state["depth"] = _state.get("depth", 0) + 1
    try:
        result = fn(*args, **kwargs)
    except NotImplementedError:
        _record("raise", "NotImplementedError")
        raise GradingError(f"{label}: not implemented yet (it raised NotImplementedError).") from None
    except Exception as exc:  # the student's code failed: say where, not a deep trace
        _record("raise", f"{type(exc).__name__}: {exc}")
        raise GradingError(f"{label}: calling it raised {type(exc).__name__}: {exc}") from None
    finally:
        _state["depth"] -= 1
    _record("return", result)
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
    replay = _state["replay"]
    if replay is not None:  # the grader checks the submitted source text instead of a live object
        source = replay.source_of(fn)
        if source is None:
            return
        source = textwrap.dedent(source)
        label = name or getattr(fn, "_replay_name", label)
    else:
        try:
            source = textwrap.dedent(inspect.getsource(fn))
        except (OSError, TypeError):
            return  # defined somewhere we cannot read; nothing to check
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return
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
