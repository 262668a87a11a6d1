"""``utils.syntax.parse``: the grader parses student code from several threads at once.

CPython 3.11.7 raised ``SystemError: AST constructor recursion depth mismatch`` on good
code when two threads parsed while a garbage collection ran Python code (CI failed on
it: alice's full answer marked "the grader failed on this notebook" under ``JOBS=2``).
"""
from __future__ import annotations

import ast
import gc
import re
import threading

from tools.notebook_runner import ROOT
from utils.syntax import parse

SOURCE = "\n".join(
    f"def f{i}(x):\n    return [y * {i} for y in range(x) if (y and (x or (y + 1)))]" for i in range(200))


class _Finalised:
    def __del__(self) -> None:  # Python code that a collection runs in the middle of a parse
        sum(range(50))


def _parse_in_threads(parser, threads: int = 4, rounds: int = 25) -> list[BaseException]:
    errors: list[BaseException] = []

    def work() -> None:
        for _ in range(rounds):
            junk = [_Finalised() for _ in range(200)]
            for item in junk:
                item.me = item  # a cycle: only the collector frees it
            del junk
            try:
                tree = parser(SOURCE)
                assert len(tree.body) == 200
            except SystemError as e:
                errors.append(e)

    old = gc.get_threshold()
    gc.set_threshold(50, 5, 5)
    try:
        workers = [threading.Thread(target=work) for _ in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
    finally:
        gc.set_threshold(*old)
    return errors


def test_parsing_from_several_threads_never_raises() -> None:
    errors = _parse_in_threads(parse)
    assert not errors, f"{len(errors)} parses failed under threads: {errors[0]!r}"


def test_the_grader_parses_only_through_the_lock() -> None:
    # Every module the grading process runs in threads (the grader, and the own-code check
    # its replay calls) parses through utils.syntax; a bare ast.parse would bring the race back.
    files = sorted((ROOT / "grader").glob("*.py")) + [ROOT / "utils" / "own_code.py", ROOT / "utils" / "grading.py"]
    bare = [f"{f.relative_to(ROOT)}:{n}" for f in files
            for n, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1)
            if re.search(r"\bast\.parse\(", line)]
    assert not bare, f"parse through utils.syntax.parse, not ast.parse: {bare}"
    assert isinstance(parse("x = 1"), ast.Module)
