"""Decide every graded test outside the student's kernel.

The sandboxed kernel ran only the run part of each test (grader/plan.py) and
reported, as plain data, each value its code obtained from student code
(``utils.grading.run_student`` and ``observe``); the runner checked and kept
those reports (grader/runner.py). Here, in a process where no student code ever
runs, each test cell of the *instructor's* source notebook (hidden tests
included) is executed whole: the set-up cells run for real, the names the
student defined are inert stand-ins, the run part rebuilds the test's inputs
from the same seeds, and ``run_student`` / ``observe`` hand back the reported
values. Expected values are computed here only, from the course's own code on
the test's own inputs; the student's kernel never saw them.

Usage (one JSON job per line on stdin, one JSON result per line on stdout)::

    python -m grader.replay --serve

A job is ``{"source": <source notebook>, "student": {<grade_id>: <cell source>},
"extra": [<sources of cells the student added>], "result": <the runner's result file>}``;
the answer maps each test cell's grade_id to ``{"passed": bool, "message": str}``.
The student's sources are only parsed (``ast``), never executed.
"""
from __future__ import annotations

import ast
import json
import os
import re
import stat
import sys
import traceback
from pathlib import Path
from typing import Any

import nbformat

from utils.syntax import parse

MAX_RESULT_BYTES = 24 * 1024 * 1024
_SAFE_NAME = re.compile(r"[^A-Za-z0-9_.]")


def _meta(cell) -> dict:
    return cell.metadata.get("nbgrader", {}) or {}


class Stub:
    """Stands in for anything the student defined: absorbs attribute access and calls."""

    def __init__(self, name: str) -> None:
        object.__setattr__(self, "_replay_name", name)

    @property
    def __name__(self) -> str:  # noqa: A003 - labels in messages use it
        return self._replay_name.split(".")[-1]

    def __getattr__(self, attr: str) -> "Stub":
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        return Stub(f"{self._replay_name}.{attr}")

    def __setattr__(self, attr: str, value: Any) -> None:
        pass

    def __call__(self, *args: Any, **kwargs: Any) -> "Stub":
        return Stub(self._replay_name)

    def __repr__(self) -> str:
        return f"<your {self._replay_name}>"


def clean_text(text: str, secrets: set[str], limit: int = 300) -> str:
    """Student-controlled text made safe for feedback: printable, short, no secret lines."""
    text = "".join(ch if ch.isprintable() else " " for ch in str(text))[: limit * 4]
    for line in secrets:
        if line and line in text:
            text = text.replace(line, "[...]")
    return text[:limit] + ("..." if len(text) > limit else "")


def secret_lines(source_nb) -> set[str]:
    """Significant lines of the instructor's hidden tests and solutions (never shown to students)."""
    inside_lines, outside_lines = set(), set()
    for cell in source_nb.cells:
        inside = False
        for line in cell.source.splitlines():
            stripped = line.strip()
            if stripped.startswith(("### BEGIN HIDDEN TESTS", "### BEGIN SOLUTION")):
                inside = True
            elif stripped.startswith(("### END HIDDEN TESTS", "### END SOLUTION")):
                inside = False
            elif len(stripped) >= 12 and not stripped.startswith("#"):
                (inside_lines if inside else outside_lines).add(stripped)
    return inside_lines - outside_lines  # a line the release shows anyway is no secret


def _decode(value: Any, frameworks: dict) -> Any:
    import numpy as np

    if not isinstance(value, dict):
        return value
    tag = value.get("t")
    if tag == "str":
        return str(value.get("v", ""))
    if tag == "float":
        return float(value.get("v", "nan"))
    if tag in ("tuple", "list"):
        items = [_decode(v, frameworks) for v in value.get("items", [])]
        return tuple(items) if tag == "tuple" else items
    if tag == "dict":
        return {str(k): _decode(v, frameworks) for k, v in value.get("items", [])}
    if tag == "array":
        dtype = np.dtype(value["dtype"])
        if dtype.kind not in "biuf":
            raise ValueError("unsupported dtype")
        data = [float(x) for x in value["data"]] if dtype.kind == "f" else value["data"]
        array = np.asarray(data, dtype=dtype).reshape([int(d) for d in value["shape"]])
        fw = value.get("fw")
        if fw == "torch" and "torch" in frameworks:
            return frameworks["torch"].from_numpy(array.copy())
        if fw == "tf" and "tf" in frameworks:
            return frameworks["tf"].convert_to_tensor(array)
        return array
    if tag == "opaque":
        return Stub(_SAFE_NAME.sub("_", str(value.get("type", "object")))[:40] + " object")
    raise ValueError(f"unknown value tag {tag!r}")


class Replay:
    """What ``utils.grading`` consults while a test cell is replayed."""

    def __init__(self, entries: list[dict], student_sources: list[str], secrets: set[str], frameworks: dict,
                 problem: str | None = None, setup: list[str] | None = None) -> None:
        self.entries = entries
        self.sources = student_sources
        self.setup = list(setup or [])  # the source notebook's set-up cells: the names they bind count
        self.secrets = secrets
        self.frameworks = frameworks
        self.problem = problem

    def next_value(self, kind: str, label: str) -> Any:
        from utils.grading import GradingError

        label = clean_text(label, self.secrets, 80)
        if self.problem:
            raise GradingError(f"{label}: {self.problem}.")
        if not self.entries:
            raise GradingError(
                f"{label}: your notebook produced no result for this check (it stopped before it, "
                "ran out of time, or the test did not run).")
        entry = self.entries.pop(0)
        if entry.get("kind") == "raise":
            text = clean_text(entry.get("value", {}).get("v", "") if isinstance(entry.get("value"), dict) else "",
                              self.secrets, 600)
            if text.startswith("NotImplementedError") and "not available while your notebook is graded" in text:
                raise GradingError(f"{label}: {text.split(': ', 1)[-1]}")
            if text.startswith("NotImplementedError"):
                raise GradingError(f"{label}: not implemented yet (it raised NotImplementedError).")
            raise GradingError(f"{label}: calling it raised {text}")
        if entry.get("kind") != kind:
            raise GradingError(f"{label}: your notebook ran this test differently from the original test cell.")
        try:
            return _decode(entry.get("value"), self.frameworks)
        except Exception:  # noqa: BLE001 - malformed data from the kernel
            raise GradingError(f"{label}: the result your notebook reported could not be read.") from None


class Namespace(dict):
    """The replay's globals: a name the tests use but nobody defined is the student's (e.g. made by exec)."""

    def __missing__(self, name: str) -> Any:
        import builtins

        if hasattr(builtins, name) or name.startswith("__"):
            raise KeyError(name)
        return Stub(name)


def defined_names(sources: list[str]) -> set[str]:
    """Top-level names that the student's cells bind (parsed, not run)."""
    names = set()
    for source in sources:
        try:
            tree = parse(source)
        except SyntaxError:
            continue
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    for sub in ast.walk(target):
                        if isinstance(sub, ast.Name):
                            names.add(sub.id)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                for alias in node.names:
                    names.add((alias.asname or alias.name).split(".")[0])
    return names


def read_result(path: Path) -> dict:
    """The runner's result file: opened without following links, a regular file of bounded size."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return {}
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            return {}
        data = fh.read(MAX_RESULT_BYTES + 1)
    if len(data) > MAX_RESULT_BYTES:
        return {}
    try:
        result = json.loads(data.decode("utf-8", "replace"))
    except (ValueError, RecursionError):
        return {}
    return result if isinstance(result, dict) else {}


def replay(source_path: str, student: dict[str, str], extra: list[str], result_path: str) -> dict[str, dict]:
    """Replay every test cell of the source notebook against the reported values."""
    import utils.grading as grading

    source_nb = nbformat.read(source_path, as_version=4)
    secrets = secret_lines(source_nb)
    tests = read_result(Path(result_path)).get("tests", {})
    tests = tests if isinstance(tests, dict) else {}
    student_sources = [student[k] for k in student] + list(extra)
    frameworks: dict[str, Any] = {}
    text = "\n".join(c.source for c in source_nb.cells if c.cell_type == "code")
    if "import torch" in text:
        import torch

        frameworks["torch"] = torch
    if "import tensorflow" in text or "from keras" in text or "import keras" in text:
        import tensorflow as tf

        frameworks["tf"] = tf

    setup_sources = [c.source for c in source_nb.cells if c.cell_type == "code" and _meta(c).get("locked")
                     and not _meta(c).get("grade") and not _meta(c).get("solution")]
    namespace: dict[str, Any] = Namespace(__name__="__main__")
    for name in defined_names(student_sources):
        namespace[name] = Stub(name)
    results: dict[str, dict] = {}
    setup_error = None
    for cell in source_nb.cells:
        meta = _meta(cell)
        if cell.cell_type != "code" or meta.get("solution"):
            continue
        gid = meta.get("grade_id")
        if not meta.get("grade"):
            if not meta.get("locked"):
                continue  # e.g. the Colab set-up cell: nothing the tests need
            try:
                exec(compile(cell.source, f"<setup {gid}>", "exec"), namespace)  # instructor's code
            except Exception as exc:  # noqa: BLE001
                setup_error = f"{type(exc).__name__}: {exc}"
            continue
        if setup_error:
            results[gid] = {"passed": False, "message": f"the grader's set-up failed ({setup_error}); tell your instructor"}
            continue
        reported = tests.get(gid) if isinstance(tests.get(gid), dict) else {}
        entries = reported.get("entries") if isinstance(reported.get("entries"), list) else []
        problem = reported.get("problem") if isinstance(reported.get("problem"), str) else None
        replay_state = Replay(list(entries), student_sources, secrets, frameworks, problem, setup_sources)
        grading._state["replay"] = replay_state
        try:
            exec(compile(cell.source, f"<test {gid}>", "exec"), namespace)  # instructor's code
            results[gid] = {"passed": True, "message": ""}
        except grading.SetupError as exc:  # the test's own inputs are wrong: the instructor's to fix
            results[gid] = {"passed": False, "message": clean_text(
                f"this test is broken ({exc}); tell your instructor", secrets, 600)}
        except grading.GradingError as exc:  # the course's own message (student text in it was cleaned)
            results[gid] = {"passed": False, "message": clean_text(str(exc), set(), 1200)}
        except Exception as exc:  # noqa: BLE001 - e.g. a result of the wrong structure
            results[gid] = {"passed": False, "message": clean_text(
                f"the test could not use your result ({type(exc).__name__}: {exc})", secrets, 600)}
        finally:
            grading._state["replay"] = None
    return results


def serve() -> int:
    """Answer jobs from stdin, one per line, until it closes."""
    out = sys.stdout
    sys.stdout = sys.stderr  # anything the course code prints must not corrupt the answers
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            job = json.loads(line)
            answer = {"ok": True, "results": replay(job["source"], job["student"], job.get("extra", []), job["result"])}
        except Exception:  # noqa: BLE001 - report and go on with the next job
            answer = {"ok": False, "error": traceback.format_exc(limit=5)[-2000:]}
        out.write(json.dumps(answer) + "\n")
        out.flush()
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ.setdefault("MPLBACKEND", "Agg")
    if sys.argv[1:] == ["--serve"]:
        sys.exit(serve())
    print(__doc__)
    sys.exit(2)
