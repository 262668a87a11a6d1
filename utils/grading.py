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

from .checks import to_numpy  # noqa: F401  (kept here: tests and notebooks import it from grading)

__all__ = [
    "GradingError",
    "to_numpy",
    "run_student",
    "run_student_watching",
    "handed",
    "check_type",
    "check_shape",
    "check_close",
    "check_rows_sum_to_one",
    "check_zero_where_masked",
    "check_true",
    "check_own_code",
    "observe",
    "run",
    "assert_setup",
    "perturb",
    "SetupError",
    "check_all",
]


class GradingError(AssertionError):
    """A failed check; its message is what the student reads in the feedback."""




def _fmt_shape(shape: Sequence) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def _with_hint(message: str, hint: str | None) -> str:
    return message + (f"\nHint: {hint}" if hint else "")


# --- Grading outside the student's kernel --------------------------------------
# When the grader (``python -m grader``) runs a submission, its kernel is sandboxed
# and cannot be trusted, and it never receives a test's checks: only the part of
# each test cell that builds the inputs and calls the student's code (see
# grader/plan.py). Every value that part obtains from student code
# (``run_student``'s return value, or a value passed through ``observe``) is kept
# here as plain data and handed to the grader's runner at the end of the test
# (``_end_test``). The grader then runs the whole test cell in its own process,
# where ``run_student`` and ``observe`` hand back those values instead of running
# anything, so every pass or fail is decided where no student code ever ran and
# every expected value is computed there (see grader/replay.py).
REPORT_MIME = "application/vnd.attention-course.report+json"
_state: dict[str, Any] = {"cell": None, "replay": None, "records": []}


def _begin_test(grade_id: str) -> None:
    """Called by the grader's runner before a test's run part (record mode)."""
    _state["cell"], _state["records"] = grade_id, []


def _end_test() -> None:
    """Called by the grader's runner after a test's run part: publish what it recorded."""
    from IPython.display import display

    report = {"test": _state["cell"], "entries": list(_state["records"])}
    _state["cell"], _state["records"] = None, []
    display({REPORT_MIME: report}, raw=True)


def _record(kind: str, value: Any) -> None:
    if _state["cell"] is None:
        return
    _state["records"].append({"kind": kind, "value": encode_value(value)})


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


def run(runner: Callable, *args: Any, **kwargs: Any) -> Any:
    """Run a test's ``runner`` (a function the release shows, which builds the inputs and calls
    the student's code through ``run_student``) and return what it returns.

    A hidden test calls only runners, with literal arguments: when a notebook is
    graded, the sandbox receives the call (the runner's name and arguments), never
    the hidden test's text.
    """
    return runner(*args, **kwargs)


def run_student(fn: Callable, *args: Any, name: str | None = None, **kwargs: Any) -> Any:
    """Call a student's function; turn any exception into a readable failure."""
    label = name or getattr(fn, "__name__", "your function")
    replay = _state["replay"]
    if replay is not None:
        return replay.next_value("return", label)
    try:
        result = fn(*args, **kwargs)
    except NotImplementedError as exc:
        _record("raise", f"NotImplementedError: {exc}")
        if "not available while your notebook is graded" in str(exc):  # the assignment's view of utils
            raise GradingError(f"{label}: {exc}") from None
        raise GradingError(f"{label}: not implemented yet (it raised NotImplementedError).") from None
    except Exception as exc:  # the student's code failed: say where, not a deep trace
        _record("raise", f"{type(exc).__name__}: {exc}")
        raise GradingError(f"{label}: calling it raised {type(exc).__name__}: {exc}") from None
    _record("return", result)
    if result is None:
        raise GradingError(f"{label}: returned None. Did you forget the `return` statement?")
    return result


def run_student_watching(fn: Callable, namespace: dict, watched: str, *args: Any, name: str | None = None,
                         **kwargs: Any) -> tuple[Any, list]:
    """``run_student(fn, ...)`` while the calls ``fn`` makes of the student's function ``watched`` (a
    name in ``namespace``, the notebook's globals) are recorded: returns (result, calls), each call a
    dict ``{"args": [...], "kwargs": {...}, "result": ...}`` (the first 4).

    A test of an exercise that builds on an earlier one judges what the student's code handed the
    earlier function, so that a mistake in the earlier exercise is charged in its own tests only.
    In a graded notebook the calls are reported like any other value and read back by the replay.
    """
    replay = _state["replay"]
    if replay is not None:
        result = run_student(fn, *args, name=name, **kwargs)
        calls = replay.next_value("observe", f"the calls of your {watched}")
        return result, calls if isinstance(calls, list) else []
    original = namespace.get(watched)
    calls: list = []
    if callable(original):
        def watching(*a: Any, **k: Any) -> Any:
            out = original(*a, **k)
            if len(calls) < 4:
                calls.append({"args": list(a), "kwargs": dict(k), "result": out})
            return out

        namespace[watched] = watching
    try:
        result = run_student(fn, *args, name=name, **kwargs)
    finally:
        if callable(original) and namespace.get(watched) is not original:
            namespace[watched] = original
    return result, observe(calls, f"the calls of your {watched}")


def handed(calls: list, returned: Any, scores: Any, keep: Any, atol: float = 1e-5) -> bool:
    """Whether one of ``calls`` (from ``run_student_watching``) of a masked softmax got ``scores`` with the
    keep-mask ``keep`` and gave back ``returned``: the caller did its part right, whatever the softmax did.

    A call ``(s, mask)`` or ``(s, mask=...)`` counts when the keys it leaves visible (the mask, and the
    scores that are finite and above -1e30) are exactly ``keep``, ``s`` equals ``scores`` on them, and
    what it returned could come from a softmax of them, right or wrong (a higher score never gets less
    weight; zeros or a constant do not count: a trivial answer earns nothing).
    """
    want_keep = np.broadcast_to(to_numpy(keep).astype(bool), to_numpy(scores).shape)
    want = np.asarray(to_numpy(scores), dtype=np.float64)
    got = to_numpy(returned).astype(np.float64)
    for call in calls if isinstance(calls, list) else []:
        try:
            args, kwargs = list(call.get("args", [])), dict(call.get("kwargs", {}))
            s = np.asarray(to_numpy(args[0] if args else kwargs["scores"]), dtype=np.float64)
            mask = args[1] if len(args) > 1 else kwargs.get("mask")
            if s.shape != want.shape or not _close(to_numpy(call.get("result")).astype(np.float64), got, atol, 1e-4):
                continue
            visible = np.isfinite(s) & (s > -1e30)
            if mask is not None:
                visible &= np.broadcast_to(to_numpy(mask).astype(bool), s.shape)
            if (visible == want_keep).all() and np.allclose(s[visible], want[visible], atol=atol, rtol=1e-4) \
                    and _follows_scores(got, want, want_keep, atol):
                return True
        except Exception:  # noqa: BLE001 - a call of another form is not this one
            continue
    return False


def _follows_scores(weights: np.ndarray, scores: np.ndarray, keep: np.ndarray, atol: float) -> bool:
    """Weights that a softmax of the scores could give, whatever its mistakes: over the kept keys of each
    row, a higher score never gets less weight, and some row tells its keys apart (zeros or a constant,
    which ignore the scores, do not count)."""
    if weights.shape != scores.shape:
        return False
    told_apart = False
    for w, sc, k in zip(weights.reshape(-1, weights.shape[-1]), scores.reshape(-1, scores.shape[-1]),
                        np.broadcast_to(keep, scores.shape).reshape(-1, scores.shape[-1])):
        order = np.argsort(sc[k], kind="stable")
        kept = w[k][order]
        if kept.size > 1 and (np.diff(kept) < -atol).any():
            return False
        told_apart |= kept.size > 1 and float(kept.max() - kept.min()) > atol
    return told_apart


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
    divided by sqrt(d_k)") to the output that mistake produces. A hint names the
    mistake that was made, or none: a value that matches no listed mistake gets
    the numbers only; ``hint`` is shown only when the *shape* is wrong (say what
    the shape should be made of), and NaN gets its own note.
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
        raise GradingError(_with_hint(message, "a row with every position masked, or exp of a huge score?"))
    for label, wrong in (mistakes or {}).items():
        if _close(a, to_numpy(wrong).astype(np.float64), atol, rtol):
            raise GradingError(f"{name}: wrong values. They match what you get when {label}.")
    with np.errstate(invalid="ignore"):
        diff = np.where(a == e, 0.0, np.abs(a - e))  # the same infinity in both is no difference (inf - inf is NaN)
    where = tuple(int(i) for i in np.unravel_index(int(np.argmax(diff)), diff.shape))
    message = (
        f"{name}: values differ from the reference by up to {diff.max():.3g} "
        f"(at index {where}: expected {e[where]:.6g}, got {a[where]:.6g})."
    )
    raise GradingError(message)


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


class SetupError(AssertionError):
    """A test's own inputs do not exercise what the test claims to check: the test is broken."""


def assert_setup(condition: bool, message: str) -> None:
    """A test states that its own inputs exercise what it checks ("the mask hides some keys",
    "the model emits <eos> in some row"); if not, the test itself is wrong, not the student."""
    if not bool(condition):
        raise SetupError(f"test set-up: {message}")


def perturb(obj: Any, seed: int, scale: float = 0.1) -> Any:
    """Move every parameter of a torch module or Keras layer away from its initial value (LayerNorm
    gains off 1, biases off 0), so that a test's weights are generic; returns ``obj``."""
    rng = np.random.default_rng(seed)
    if hasattr(obj, "parameters") and callable(obj.parameters):  # torch
        import torch

        with torch.no_grad():
            for p in obj.parameters():
                p.add_(torch.as_tensor(rng.normal(0.0, scale, tuple(p.shape)), dtype=p.dtype))
    else:  # Keras: its variables
        for v in obj.weights:
            v.assign(to_numpy(v) + rng.normal(0.0, scale, tuple(v.shape)).astype(to_numpy(v).dtype))
    return obj


def check_true(condition: bool, message: str) -> None:
    """A property that must hold; ``message`` says what and why."""
    if not bool(condition):
        raise GradingError(message)


def _live_sources(fn: Callable) -> list[str]:
    """The code a live kernel ran: the notebook's cells in the order they ran (IPython's history),
    or the source file of the function's module; [] when neither can be read."""
    import inspect
    import sys

    module = sys.modules.get(getattr(fn, "__module__", "") or "")
    if getattr(fn, "__module__", None) == "__main__":
        try:
            shell = get_ipython()  # type: ignore[name-defined]  # noqa: F821 - defined in a kernel
            history = shell.user_ns.get("In") or []
            if history:
                return [str(cell) for cell in history if cell]
        except NameError:
            pass
    try:
        return [inspect.getsource(module)] if module is not None else [inspect.getsource(fn)]
    except (OSError, TypeError):
        try:
            return [inspect.getsource(fn)]
        except (OSError, TypeError):
            return []


def check_own_code(fn: Callable, forbidden: Sequence[str], name: str | None = None) -> None:
    """The student's function does not call a ready-made implementation of what it was asked to write.

    ``forbidden`` lists dotted names (``"utils"``, ``"torch.nn.functional.softmax"``, a set-up
    helper's name) and attributes (``".softmax"``, any attribute of that name). The check reads the
    code, not the text (see ``utils.own_code``): it follows imports under other names, aliases,
    ``getattr`` with constant names and the student's own helpers, and never matches comments,
    docstrings, strings or the student's own names. When the grader replays a test, it reads the
    submitted cells (and the assignment's set-up cells for the names they bind), never a live object.
    """
    from .own_code import describe, find_forbidden

    label = name or getattr(fn, "__name__", "your function")
    replay = _state["replay"]
    if replay is not None:  # the grader reads the submitted source text instead of a live object
        target = getattr(fn, "_replay_name", None) or getattr(fn, "__name__", None)
        label = name or (target.split(".")[-1] if isinstance(target, str) else label)
        if not isinstance(target, str):
            raise GradingError(f"{label}: the grader could not find your definition of it in your notebook.")
        findings = find_forbidden(target, list(forbidden), list(replay.sources), list(getattr(replay, "setup", [])))
        if findings is None:
            raise GradingError(f"{label}: the grader could not find your definition of it in your notebook "
                               f"(write it as `def {target.split('.')[-1]}(...)` in the exercise's cell).")
    else:
        target = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
        sources = _live_sources(fn)
        if isinstance(target, str) and "<locals>" in target:  # defined inside a function: read it alone
            import inspect
            import textwrap

            target = getattr(fn, "__name__", "")
            try:
                sources = [textwrap.dedent(inspect.getsource(fn))]
            except (OSError, TypeError):
                sources = []
        if not isinstance(target, str) or "<" in target or not sources:
            return  # a lambda or a function we cannot read: the grader's replay decides
        findings = find_forbidden(target, list(forbidden), sources)
        if findings is None:
            return
    if findings:
        raise GradingError(describe(label, findings))



# --- Checking a whole notebook from inside it ------------------------------------
# The last cell of every assignment calls ``check_all``: the course's own grader on the
# notebook as saved (``python -m grader.check``, what ``make check`` runs), hidden tests
# included where the course's solutions/ folder is there. It never runs where the
# notebook is itself being run by a machine: in a grading kernel (the grader sets
# COURSE_GRADING), in the grader's replay, under nbgrader (autograde and validate start
# their kernels with an in-memory history file) or in a headless run of the course's
# tools, which set COURSE_SELF_CHECK=off; so a check never starts a check.
SELF_CHECK_ENV, GRADING_ENV = "COURSE_SELF_CHECK", "COURSE_GRADING"
# What the grader needs beyond the course's package (pyproject.toml's dev extra); Colab lacks them.
GRADER_REQUIREMENTS = ("nbclient>=0.8", "nbformat>=5.9", "nbgrader>=0.9.6", "nh3>=0.2.15")


def _self_check_off() -> str | None:
    """Why the self-check must not run here (None: it may)."""
    import os

    if os.environ.get(GRADING_ENV):
        return "this notebook is being graded"
    if _state["replay"] is not None:
        return "the grader is deciding this notebook's tests"
    if os.environ.get(SELF_CHECK_ENV, "").lower() in ("0", "off", "no", "false"):
        return f"{SELF_CHECK_ENV}={os.environ[SELF_CHECK_ENV]} (a headless run of the notebook)"
    try:
        from IPython import get_ipython

        shell = get_ipython()
    except ImportError:
        shell = None
    if shell is not None and getattr(getattr(shell, "history_manager", None), "hist_file", None) == ":memory:":
        return "nbgrader is running this notebook (autograde or validate)"
    return None


def _course_root():
    """The course folder that holds the grader (a clone: on Colab, the set-up cell's), or None."""
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    return root if (root / "grader" / "check.py").is_file() and (root / "assignments").is_dir() else None


def _on_colab() -> bool:
    try:
        import google.colab  # noqa: F401
    except ImportError:
        return False
    return True


def _saved_notebook(assignment: str, root, notebook: str | None):
    """The notebook to check: the one named; on Colab the notebook as the browser holds it; else
    the saved file of this session (JupyterLab names it), the one in the working folder, or the
    learner's copy in assignments/."""
    import json
    import os
    from pathlib import Path

    if notebook:
        return Path(notebook), "the notebook you named"
    if _on_colab():
        from google.colab import _message

        reply = _message.blocking_request("get_ipynb", request="", timeout_sec=120)
        path = root / "build" / "check" / assignment / "from-colab.ipynb"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(reply["ipynb"]), encoding="utf-8")
        return path, "the notebook as it is in your browser"
    candidates = [os.environ.get("JPY_SESSION_NAME", ""), Path.cwd() / f"{assignment}.ipynb",
                  root / "assignments" / assignment / f"{assignment}.ipynb"]
    for candidate in candidates:
        if candidate and str(candidate).endswith(".ipynb") and Path(candidate).is_file():
            return Path(candidate), "the notebook as last saved: save it first (Ctrl+S) if you changed it since"
    raise FileNotFoundError(f"no saved notebook for {assignment}: pass notebook='path/to/it.ipynb'")


def check_all(assignment: str, notebook: str | None = None, timeout: float = 1200) -> dict | None:
    """Check this notebook with the course's own grader, as ``make check`` does: every test,
    the hidden ones included where the course's ``solutions/`` folder is there (a clone, a
    laptop, Colab), the visible ones only where it is not (and it says so). Prints the score
    per exercise and each failed test's message; a written answer, once written, is shown
    beside its rubric and model answer. Writes the feedback page to
    ``build/check/<assignment>/`` and returns the check's result (``result.json``), or None
    where it did not run. It checks the notebook as saved (on Colab: as the browser holds it).
    """
    import json
    import subprocess
    import sys

    why_not = _self_check_off()
    if why_not:
        print(f"(The self-check does not run here: {why_not}.)")
        return None
    root = _course_root()
    if root is None:
        print("The course's grader is not here (only its `utils` package is installed), so this cell cannot "
              "check your notebook: run the test cells above (the public tests); hidden tests run at grading.")
        return None
    path, which = _saved_notebook(assignment, root, notebook)
    if _on_colab():
        import importlib.util

        missing = [r for r in GRADER_REQUIREMENTS if importlib.util.find_spec(r.split(">")[0]) is None]
        if missing:
            print(f"Installing what the grader needs ({', '.join(missing)}) ...")
            subprocess.run([sys.executable, "-m", "pip", "install", "-q", *missing], check=True)
    print(f"Checking {path} ({which}). This runs your whole notebook again: a minute or more.", flush=True)
    done = subprocess.run([sys.executable, "-m", "grader.check", assignment, "--notebook", str(path)],
                          cwd=root, capture_output=True, text=True, timeout=timeout)
    print(done.stdout)
    if done.returncode != 0:
        print(done.stderr[-3000:])
        return None
    result_path = root / "build" / "check" / assignment / "result.json"
    result = json.loads(result_path.read_text(encoding="utf-8"))
    _show_page_link(result["page"])
    return result


def _show_page_link(page: str) -> None:
    """A link to the feedback page where the notebook's front end can open it; on Colab, where
    to find it."""
    import html
    import os
    from pathlib import Path

    from IPython.display import HTML, display

    if _on_colab():
        display(HTML(f"<p>The feedback page: <code>{html.escape(page)}</code> (Colab: the Files panel on the "
                     "left; download it and open it in your browser).</p>"))
        return
    try:
        href = Path(os.path.relpath(page, Path.cwd())).as_posix()
    except ValueError:  # another drive, on Windows
        href = Path(page).as_uri()
    display(HTML(f'<p><a href="{html.escape(href)}" target="_blank">Open the feedback page</a> '
                 f"(<code>{html.escape(page)}</code>)</p>"))
