"""Shape letters: one table (``utils/shapes.py``), one meaning per token, used everywhere.

What is checked, in every ``.py`` file under ``utils/``:

* the *Shapes sections*: in each module, class and function docstring (read with
  ``ast``) and in each comment, the text from ``Shapes:`` or ``Shape letters:`` up
  to the next blank line;
* the *shape comments*: every comment (``# (B, H, Tq, Tk)``).

Rules, in that text (``code in double backticks`` and "quoted titles" are left out):

* A *shape tuple* is a parenthesised group each of whose comma-separated entries
  is a dimension expression: names, integers, ``...``, primes and the operators
  ``+ - * / = < >`` between them, e.g. ``(B, H, Tq, Tk)``, ``(K+1, >=M, D)``,
  ``(..., Np, P * P * Ic)``, ``(B, 2G)``, ``(N', D)``, ``(B,)``. Prose in
  parentheses (two words in a row, as in ``(True = may attend)``, or a hyphenated
  word: a minus needs spaces, ``t - 1``) is not a shape, nor are the arguments of
  a call (``len(idx)``, ``N(0, 1)``). Nested groups are read innermost first.
* In a shape tuple every name that starts with a capital letter must be a token
  of ``LETTERS`` (a trailing prime, ``N'``, is another size of the same kind and
  is dropped first). Lowercase names (``max_len``, ``n``, ``batch_size``,
  ``d_model``) are plain ints by the course's convention and are not checked.
* Outside the tuples of a Shapes section (the legends ``B batch, Ts source
  length``, ``Dh = D / H``, ``L x (...)``), every standalone one-capital or
  capital-plus-one-lowercase word (``B``, ``Ts``) must be a token too, but for
  a few two-letter English words (``In``, ``If``, ...).
"""
from __future__ import annotations

import ast
import io
import re
import tokenize
from collections import Counter

import pytest

from tools.notebook_runner import ROOT
from utils import shapes
from utils.shapes import GROUPS, LETTERS

SECTION = re.compile(r"\b(?:Shapes|Shape letters):")
CODE_OR_QUOTE = re.compile(r'``.*?``|"[^"\n]*"', re.S)
# an innermost group, and the name of the call it belongs to if any: ``f(x)`` is a call, not a shape
INNER_GROUP = re.compile(r"([A-Za-z0-9_]*)\(([^()]*)\)")
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*'?")
# one term: an optional integer factor then a name (2G, 3D, N'), an integer, or ...
TERM = r"(?:\d*[A-Za-z_][A-Za-z0-9_]*'?|\d+|\.\.\.)"
# operators between terms; a minus needs spaces (``t - 1``) so that hyphenated words are prose
OPERATOR = r"(?:\s*[+*/=]\s*|\s*[<>]=?\s*|\s+-\s+)"
DIMENSION = re.compile(rf"^\s*(?:[<>]=?|=)?\s*{TERM}(?:{OPERATOR}{TERM})*\s*$")
LEGEND_WORD = re.compile(r"(?<![A-Za-z0-9_'])([A-Z][a-z]?)(?![A-Za-z0-9_])")
ENGLISH = {"An", "As", "At", "By", "If", "In", "Is", "It", "No", "Of", "On", "Or", "So", "To", "Up", "We"}
PLACEHOLDER = "0"  # what a group already read turns into, so that its enclosing group can be read


def shape_tuples(text: str) -> list[str]:
    """The entries' text of every shape tuple in ``text``, innermost groups first."""
    found = []
    while True:
        groups = list(INNER_GROUP.finditer(text))
        if not groups:
            return found
        for g in groups:
            if g.group(1):  # a call's arguments
                continue
            entries = g.group(2).split(",")
            if entries[-1].strip() == "":  # (B,) and (D / 2,)
                entries = entries[:-1]
            if entries and all(DIMENSION.match(e) for e in entries):
                found.append(g.group(2))
        text = INNER_GROUP.sub(PLACEHOLDER, text)


def unknown_tokens(text: str, legend: bool) -> list[str]:
    """Capitalised tokens of ``text`` that the table does not declare (``legend``: also outside tuples)."""
    text = CODE_OR_QUOTE.sub(" ", text)
    bad = []
    for entries in shape_tuples(text):
        for name in NAME.findall(entries):
            name = name.rstrip("'")
            if name[0].isupper() and name not in LETTERS:
                bad.append(name)
    if legend:
        outside = text
        while INNER_GROUP.search(outside):
            outside = INNER_GROUP.sub(" ", outside)
        bad += [w for w in LEGEND_WORD.findall(outside) if w not in LETTERS and w not in ENGLISH]
    return bad


def sections(text: str) -> list[tuple[int, str]]:
    """(line offset in ``text``, section text) of every Shapes section: from the marker to a blank line."""
    out = []
    for m in SECTION.finditer(text):
        body = re.split(r"\n\s*\n", text[m.end():], maxsplit=1)[0]
        out.append((text.count("\n", 0, m.start()), body))
    return out


def problems_in_source(source: str, name: str) -> list[str]:
    """``name:line: unknown shape token 'X' in ...`` for every undeclared token in one file's source."""
    found = []
    texts = []  # (first line, text, is a comment)
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=False)
            if doc is not None:
                texts.append((node.body[0].lineno, doc, False))
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            texts.append((tok.start[0], tok.string, True))
    for line, text, is_comment in texts:
        for offset, body in sections(text):
            for token in unknown_tokens(body, legend=True):
                found.append(f"{name}:{line + offset}: unknown shape token {token!r} in {' '.join(body.split())[:90]!r}")
        if is_comment and not SECTION.search(text):
            for token in unknown_tokens(text, legend=False):
                found.append(f"{name}:{line}: unknown shape token {token!r} in the comment {text!r}")
    return found


FILES = sorted((ROOT / "utils").rglob("*.py"))


def test_the_table_gives_each_token_one_meaning() -> None:
    # a dict literal keeps the last of two equal keys silently: read the source's keys
    tree = ast.parse((ROOT / "utils" / "shapes.py").read_text(encoding="utf-8"))
    written = [k.value for d in ast.walk(tree) if isinstance(d, ast.Dict) for k in d.keys if isinstance(k, ast.Constant)]
    assert [k for k, n in Counter(written).items() if n > 1] == [], "a token is written twice in utils/shapes.py"
    tokens = [t for group in GROUPS.values() for t in group]
    assert [t for t, n in Counter(tokens).items() if n > 1] == [], "a token is declared in two groups"
    assert len(LETTERS) == len(tokens)
    meanings = Counter(LETTERS.values())
    assert [m for m, n in meanings.items() if n > 1] == [], "two tokens share one meaning"
    assert all(re.fullmatch(r"[A-Z][A-Za-z]*(_[a-z]+)?", t) for t in LETTERS), "a token is not Capitalised"
    assert all(text.strip() for text in LETTERS.values())


def test_the_renamed_letters_have_their_table_meaning() -> None:
    # the clashes the table was made to end: each of these letters now has one use
    assert LETTERS["H"] == "attention heads" and "GRU" in LETTERS["G"] and "beam" in LETTERS["Kb"]
    assert "hops" in LETTERS["K"] and "examples" in LETTERS["N"] and "classes" in LETTERS["C"]
    assert "slots" in LETTERS["M"] and "NTM/DNC" in LETTERS["W"] and "image" in LETTERS["Ic"]


def test_the_module_docstring_shows_the_table() -> None:
    assert shapes.table() in shapes.__doc__


def test_every_shape_token_in_utils_is_in_the_table() -> None:
    problems = []
    for path in FILES:
        problems += problems_in_source(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
    assert problems == [], "declare the token in utils/shapes.py or use the table's:\n" + "\n".join(problems)


def test_the_sections_are_found() -> None:
    # the checker reads the course's sections, not nothing
    count = sum(len(sections(path.read_text(encoding="utf-8"))) for path in FILES)
    assert count > 300
    seen = Counter()
    for path in FILES:
        for _, body in sections(path.read_text(encoding="utf-8")):
            for entries in shape_tuples(CODE_OR_QUOTE.sub(" ", body)):
                seen.update(n.rstrip("'") for n in NAME.findall(entries) if n[0].isupper())
    assert {"B", "H", "Tq", "Tk", "G", "Kb", "M", "Ih", "Np"} <= set(seen)


def test_every_package_points_to_the_table() -> None:
    for init in sorted((ROOT / "utils").glob("*/__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
        assert "utils/shapes.py" in doc, f"{init.relative_to(ROOT)}: say that its shape letters are those of utils/shapes.py"


@pytest.mark.parametrize(
    "source, token",
    [
        ('def f(x):\n    """Shapes: x (B, Q, D) -> (B, D)."""\n', "Q"),
        ('def f(x):\n    """Sum.\n\n    Shapes: x (B, T,\n    Zz) -> (B,).\n    """\n', "Zz"),
        ('def f(x):\n    """Shapes: x (..., Hx * 2) -> (Hx,)."""\n', "Hx"),
        ('"""Mod.\n\nShapes: B batch, S segments.\n"""\n', "S"),
        ('"""Mod.\n\nShape letters: B batch; see ``f(x (B, S))``, Dh = D / Q.\n"""\n', "Q"),
        ("x = 1  # (B, S, D)\n", "S"),
        ('def f(x):\n    """Shapes: x (B, Tk=Y) -> (B,)."""\n', "Y"),
    ],
)
def test_the_checker_fails_on_an_undeclared_letter(source: str, token: str) -> None:
    problems = problems_in_source(source, "example.py")
    assert problems and all(f"unknown shape token {token!r}" in p for p in problems), problems
    assert problems[0].startswith("example.py:")


def test_the_checker_passes_declared_letters_and_leaves_prose_alone() -> None:
    ok = (
        '"""Mod.\n\nShapes: letters of ``utils/shapes.py``; here B batch, Tq queries. Masks are\n'
        'keep-masks (True = may attend), as in "Attention Is All You Need".\n"""\n'
        'def f(x):\n    """Shapes: x (B, H, Tq, Tk), y (K+1, >=M, D), z (B, 2G) -> (N\', D), (D / 2,),\n'
        '    (B, 1, 1, Tk=max_len), (b*Kb, t + 1), (..., Np, P * P * Ic), {name: (len(idx), T\')}.\n    """\n'
        "y = 2  # (B or 1, 1) and N(0, 1), the paper's l_kj (MemN2N-babi-matlab)\n"
    )
    assert problems_in_source(ok, "ok.py") == []
    assert problems_in_source('def f():\n    """Shapes: none."""\n', "none.py") == []


def test_the_line_number_points_at_the_section() -> None:
    source = '"""Mod."""\n\n\ndef f(x):\n    """One line.\n\n    More.\n    Shapes: x (B, Q).\n    """\n'
    assert problems_in_source(source, "m.py") == [
        "m.py:8: unknown shape token 'Q' in 'x (B, Q).'"
    ]
