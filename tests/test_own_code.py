"""check_own_code reads code, not text (utils/own_code.py), on every code exercise of every assignment.

Cheap: nothing is executed. For each ``grading.check_own_code(<target>, <forbidden>)`` call in the test
cells of a source notebook, the forbidden list is read from the set-up cell and the check is run the
way the grader's replay runs it (the set-up cells bind names, the student's cells are the solution
cells). A correct solution must pass as written, and written another way (comments and docstrings
that name the lesson and every forbidden thing, variables ``pos``, ``attn``, ``ref``, ``pref`` with
method calls, a helper of the student's own named like a library function); each trick that reaches
a forbidden thing under another name must be refused.
"""
from __future__ import annotations

import ast
from pathlib import Path

import nbformat
import pytest

from utils import grading
from utils.own_code import describe, find_forbidden

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted((ROOT / "solutions").glob("*/*.ipynb"))


def _meta(cell) -> dict:
    return cell.metadata.get("nbgrader", {}) or {}


def _exercises(path: Path) -> list[tuple[str, str, list[str], list[str], list[str]]]:
    """(test id, target, forbidden, setup sources, student sources) for each check_own_code call."""
    nb = nbformat.read(path, as_version=4)
    setup = [c.source for c in nb.cells if c.cell_type == "code" and _meta(c).get("locked")
             and not _meta(c).get("grade") and not _meta(c).get("solution")]
    student = [c.source for c in nb.cells if c.cell_type == "code" and _meta(c).get("solution")]
    lists = {}
    for source in setup:
        for node in ast.parse(source).body:
            if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name) and \
                    node.targets[0].id.isupper():
                try:
                    lists[node.targets[0].id] = ast.literal_eval(node.value)
                except ValueError:
                    continue
    out = []
    for cell in [c for c in nb.cells if c.cell_type == "code"]:
        for node in ast.walk(ast.parse(cell.source)):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "check_own_code":
                target = ast.unparse(node.args[0])
                forbidden = eval(compile(ast.Expression(node.args[1]), "<forbidden>", "eval"), {}, dict(lists))  # noqa: S307
                gid = _meta(cell).get("grade_id") or "setup"
                out.append((f"{path.stem}:{gid}:{target}", target, list(forbidden), setup, student))
    return out


EXERCISES = [e for path in SOURCES for e in _exercises(path)]
UNIQUE = list({(e[0].split(":")[0], e[1], tuple(e[2])): e for e in EXERCISES}.values())


def test_every_assignment_checks_own_code() -> None:
    assert len(SOURCES) == 18
    assert {e[0].split(":")[0] for e in EXERCISES} == {p.stem for p in SOURCES}


NOISE = ('"""Same as the lesson\'s EncoderBlock: like softmax(S) V; ref.masked_softmax, utils.attention,\n'
         'F.scaled_dot_product_attention(q, k, v), torch.softmax, cat(, concat, pad(, pos., attn., ref."""\n')


def another_way(source: str) -> str:
    """The same code written another way: every function opens with a docstring and comments that name
    the lesson and the forbidden things, and variables named pos, attn, ref, pref with method calls."""
    tree = ast.parse(source)
    lines = source.splitlines()
    inserts = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            indent = " " * first.col_offset
            text = [indent + "# as in the lesson: softmax(S) V, ref.masked_softmax(...), utils.attention.torch_impl",
                    indent + 'pos = attn = ref = pref = "F.scaled_dot_product_attention"  # not the library: strings',
                    indent + "_unused = (pos.upper(), attn.lower(), ref.strip(), pref.title(), len(pref))"]
            inserts.append((first.lineno - 1, text))
    for lineno, text in sorted(inserts, reverse=True):
        lines[lineno:lineno] = text
    helper = ("\n\ndef scaled_dot_product_attention(q, k, v):  # the student's own helper, not the library's\n"
              "    " + NOISE.replace("\n", "\n    ").rstrip() + "\n    return q\n")
    return "# A comment naming utils.attention and torch.softmax(x)\n" + "\n".join(lines) + helper


@pytest.mark.parametrize("exercise", UNIQUE, ids=[e[0] for e in UNIQUE])
def test_correct_solutions_pass_written_either_way(exercise) -> None:
    name, target, forbidden, setup, student = exercise
    assert find_forbidden(target, forbidden, student, setup) == [], name
    # In the student's own kernel the check reads every cell that ran, the set-up's among them.
    assert find_forbidden(target, forbidden, setup + student) == [], name
    rewritten = [another_way(s) for s in student]
    findings = find_forbidden(target, forbidden, rewritten, setup)
    assert findings == [], (name, findings and describe(target, findings))


def _tricks(entry: str) -> list[tuple[str, str]]:
    """(module-level code, expression inside the function) that reach ``entry`` under other names."""
    if entry.startswith("."):
        attr = entry[1:]
        return [("import numpy as _np_renamed\n_alias = _np_renamed." + attr, "_alias"),
                (f"from numpy import {attr} as _imported", "_imported"),
                ("import numpy.linalg as _sub", f"getattr(_sub, {attr!r})"),
                ("", f"args_probe.{attr}(-1)")]
    parts = entry.split(".")
    if len(parts) == 1:  # a package or a set-up helper
        return [(f"import {entry} as _renamed\n_alias = _renamed", "_alias.anything"),
                (f"_alias = {entry}\n_partial = __import__('functools').partial(_alias)", "_alias"),
                (f"_alias = [{entry}][0]", "_alias")] if entry != "utils" else \
               [("import utils as _renamed", "_renamed.attention.torch_impl.masked_softmax"),
                ("from utils.attention import numpy_ref as _r", "_r.masked_softmax"),
                ("import utils.attention.torch_impl as _t\n_alias = _t", "getattr(_alias, 'masked_softmax')")]
    head, last = ".".join(parts[:-1]), parts[-1]
    return [(f"import {head} as _renamed", f"_renamed.{last}"), (f"from {head} import {last} as _alias", "_alias")]


def _inject(source: str, target: str, module_code: str, expression: str) -> str | None:
    """The student's source with module_code at the top and ``_probe = expression`` opening ``target``."""
    tree = ast.parse(source)
    nodes, found = tree.body, None
    for part in target.split("."):
        found = next((n for n in reversed(nodes) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                                    ast.ClassDef)) and n.name == part), None)  # the last wins
        if found is None:
            return None
        nodes = found.body
    first = found.body[0]
    lines = source.splitlines()
    lines.insert(first.lineno - 1, " " * first.col_offset + f"_probe = {expression}")
    return module_code + "\n" + "\n".join(lines)


@pytest.mark.parametrize("exercise", UNIQUE, ids=[e[0] for e in UNIQUE])
def test_each_trick_is_refused(exercise) -> None:
    name, target, forbidden, setup, student = exercise
    for entry in forbidden:
        for module_code, expression in _tricks(entry):
            tried = [_inject(s, target, module_code, expression.replace("args_probe", "_probe_arg")) for s in student]
            if not any(tried):
                continue
            sources = [t if t is not None else s for t, s in zip(tried, student)]
            findings = find_forbidden(target, forbidden, sources, setup)
            assert findings, f"{name}: {entry!r} reached by {module_code!r} / {expression!r} was not refused"


# ---------------------------------------------------------------- the check itself

SETUP = """
import torch
import torch.nn.functional as F
from utils.attention import numpy_ref as ref
def library_attention(q, k, v):
    return F.scaled_dot_product_attention(q, k, v)
"""
FORBID = ["utils", ".softmax", ".cosine_similarity", ".scaled_dot_product_attention", "library_attention"]

HONEST = {
    "method calls on the student's own names": (
        "def f(x, pos, attn, pref):\n    '''Same as softmax(S) V in the lesson; ref.masked_softmax'''\n"
        "    # like F.softmax(x)\n    s = 'torch.softmax'\n    return pos.float() + attn.unsqueeze(1) + pref.shape[0]\n"),
    "the student's own helper named like the library's": (
        "def scaled_dot_product_attention(q, k, v):\n    return q @ k\n"
        "def f(q, k, v):\n    return scaled_dot_product_attention(q, k, v)\n"),
    "a local named like a set-up alias": "def f(x):\n    ref = x\n    return ref.sum()\n",
    "a loop instead of vectorised code": (
        "def f(s):\n    out = []\n    for row in s:\n        e = [torch.exp(v) for v in row]\n"
        "        out.append([v / sum(e) for v in e])\n    return out\n"),
    "aliases that cycle": "a = b\nb = a\ndef f(x):\n    return a(x)\n",
    "the student's own function named like a set-up helper": (
        "def library_attention(q, k, v):\n    return q @ k\ndef f(q, k, v):\n    return library_attention(q, k, v)\n"),
}
TRICKS = {
    "module-level alias": "sm = torch.softmax\ndef f(x):\n    return sm(x, -1)\n",
    "import under another name": "from torch.nn.functional import cosine_similarity as cs\ndef f(a, b):\n    return cs(a, b)\n",
    "module imported as another name": "import torch.nn.functional as G\ndef f(x):\n    return G.softmax(x, -1)\n",
    "getattr with a constant": "def f(x):\n    return getattr(torch, 'softmax')(x, -1)\n",
    "getattr with a computed name": "def f(x):\n    n = 'soft' + 'max'\n    return getattr(torch, n)(x, -1)\n",
    "a method": "def f(x):\n    return x.softmax(-1)\n",
    "functools.partial": "import functools\nsm = functools.partial(torch.softmax, dim=-1)\ndef f(x):\n    return sm(x)\n",
    "a helper of the student's": "def h(x):\n    return F.softmax(x, -1)\ndef f(x):\n    return h(x)\n",
    "the set-up's reference": "def f(x):\n    return ref.masked_softmax(x)\n",
    "a lambda": "f = lambda x: torch.softmax(x, -1)\n",
    "a set-up helper": "def f(q, k, v):\n    return library_attention(q, k, v)\n",
    "eval": "def f(x):\n    return eval('torch.soft' + 'max')(x, -1)\n",
    "an import inside the function": "def f(x):\n    from utils.attention.torch_impl import masked_softmax as m\n    return m(x)\n",
    "a chain of aliases": "a = torch\nb = a.nn\nc = b.functional\ndef f(x):\n    return c.softmax(x)\n",
    "a class": "class M:\n    def forward(self, x):\n        return F.cosine_similarity(x, x)\nf = M\n",
    "the function imported whole": "from utils.attention.torch_impl import masked_softmax as f\n",
    "globals()": "def f(x):\n    return globals()['library_attention'](x, x, x)\n",
}


@pytest.mark.parametrize("case", sorted(HONEST))
def test_honest_code_passes(case: str) -> None:
    assert find_forbidden("f", FORBID, [HONEST[case]], [SETUP]) == []


@pytest.mark.parametrize("case", sorted(TRICKS))
def test_tricks_are_refused(case: str) -> None:
    findings = find_forbidden("f", FORBID, [TRICKS[case]], [SETUP])
    assert findings, case
    assert "write" in describe("f", findings).lower()


def test_check_own_code_in_replay_reads_the_submitted_cells() -> None:
    """The grader's replay: the student's cells and the set-up's bindings, never a live object."""

    class FakeReplay:
        sources = [TRICKS["module-level alias"]]
        setup = [SETUP]

    class Stub:
        _replay_name = "f"
        __name__ = "f"

    grading._state["replay"] = FakeReplay()
    try:
        with pytest.raises(grading.GradingError, match="torch.softmax"):
            grading.check_own_code(Stub(), FORBID)
        FakeReplay.sources = [HONEST["method calls on the student's own names"]]
        grading.check_own_code(Stub(), FORBID)
        FakeReplay.sources = ["x = 1\n"]
        with pytest.raises(grading.GradingError, match="could not find your definition"):
            grading.check_own_code(Stub(), FORBID)
    finally:
        grading._state["replay"] = None
