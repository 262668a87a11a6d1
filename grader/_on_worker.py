"""What a Dask worker runs first: the grader of the course folder that asked, found on the shared file system.

The scheduler unpickles every task graph it is sent, and a worker every task:
a task that named ``grader.distributed.grade_remote`` would need the grader
importable on both, and the ``dask`` command puts no course on the path. So a
grading task is ``pickle.loads(payload)``: the payload (``Call``, made by
cloudpickle with this module *by value*) is opaque bytes to the scheduler, and
on the worker unpickling it runs ``call``, which puts the asking grader's folder
(the course folder, at the same path on every machine) first on ``sys.path``
and calls the grader from there. A worker that a nanny starts again after a
crash gets it with its next task. Imports only the standard library.
"""
from __future__ import annotations


def use_grader(root: str) -> None:
    """Make ``import grader`` on this worker load the grader under ``root``, or say why it cannot."""
    import importlib
    import os
    import socket
    import sys

    root = os.path.abspath(root)
    if not os.path.isfile(os.path.join(root, "grader", "__init__.py")):
        raise RuntimeError(
            f"this worker ({socket.gethostname()}) cannot see the grader at {root}: the course folder must be on "
            "a file system every worker shares, mounted at the same path as on the machine that grades")
    loaded = sys.modules.get("grader")
    if loaded is not None and getattr(loaded, "__file__", None):
        where = os.path.dirname(os.path.dirname(os.path.abspath(loaded.__file__)))
        if where != root:
            raise RuntimeError(f"this worker ({socket.gethostname()}) already runs the grader of {where}; "
                               f"start workers of their own for the course at {root}")
        return
    if root not in sys.path:
        sys.path.insert(0, root)
        importlib.invalidate_caches()


def call(root: str, module: str, name: str, *args):
    """``module.name(*args)`` from the grader under ``root``."""
    import importlib

    use_grader(root)
    return getattr(importlib.import_module(module), name)(*args)


class Call:
    """``call(root, module, name, *args)``, made when a worker unpickles it (cloudpickle, by value)."""

    def __init__(self, root: str, module: str, name: str, args: tuple) -> None:
        self.root, self.module, self.name, self.args = root, module, name, tuple(args)

    def __reduce__(self):
        return call, (self.root, self.module, self.name, *self.args)


def check(root: str) -> str | None:
    """Run on every worker before grading: None if this worker can grade, else why not."""
    import sys

    try:
        use_grader(root)
        import grader.grade  # noqa: F401 - the grader and what it needs (nbformat, nbgrader's plug-ins)
    except Exception as exc:  # noqa: BLE001 - reported to the machine that asked
        return f"{type(exc).__name__}: {exc} (Python {sys.executable})"
    return None
