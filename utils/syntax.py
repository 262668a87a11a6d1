"""``parse``: ``ast.parse`` that is safe to call from several threads at once.

CPython 3.11 (up to at least 3.11.7) keeps the depth counter it uses while turning a
parse tree into ``ast`` objects in one place per interpreter, not per thread. Two
threads parsing at the same moment (the grader marks two students at once with
``JOBS=2``, and each replay reads the student's code) can interleave when a garbage
collection runs Python code in the middle of a parse; the counter then comes back
wrong and ``ast.parse`` raises ``SystemError: AST constructor recursion depth
mismatch`` on perfectly good code. One lock around every parse the grader makes
keeps the counter to one thread at a time. The module imports nothing beyond the
standard library, so the student's kernel can use it too.
"""
from __future__ import annotations

import ast
import threading

__all__ = ["parse"]

_LOCK = threading.RLock()


def parse(source: str, filename: str = "<unknown>", mode: str = "exec") -> ast.AST:
    """``ast.parse(source, filename, mode)``, one thread at a time."""
    with _LOCK:
        return ast.parse(source, filename, mode)
