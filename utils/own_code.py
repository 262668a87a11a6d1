"""Does a student's function call a ready-made version of what it was asked to write?

``find_forbidden`` reads code, not text: it parses the sources a notebook ran (the
assignment's set-up cells and the student's cells), finds the student's definition,
and follows every name it uses to what that name is bound to, anywhere in those
sources, before it compares it with the forbidden list:

- imports under any name (``import torch.nn.functional as G``,
  ``from torch.nn.functional import cosine_similarity as cs``);
- aliases at module level or in the function (``sm = torch.softmax``,
  ``F = torch.nn.functional``), ``getattr(torch, "softmax")`` with a constant name;
- the student's own helpers: a function or class the checked code uses is read too.

Comments, docstrings, strings and the student's own names (a variable ``pos`` with
``pos.float()``, a helper the student wrote and named ``scaled_dot_product_attention``)
are never matched. Code that builds a name at run time (``eval``, ``exec``,
``getattr`` with a computed name, ``__import__``, ``globals()``) cannot be followed
and is refused with a note saying so.

A forbidden entry is one of:

- a dotted name, ``"utils"``, ``"torch.nn.functional.softmax"``, ``"library_attention"``:
  forbids that object and everything under it, reached by any name (a set-up cell's
  ``ref = numpy_ref`` is ``utils.attention.numpy_ref``; a function the set-up defines
  is its own name);
- an attribute, ``".softmax"``: forbids any attribute of that name, whatever it is read
  from (``scores.softmax(-1)``, ``F.softmax``, ``tf.nn.softmax``, ``getattr(x, "softmax")``)
  and any import of that name.

The module imports nothing beyond the standard library.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from .syntax import parse

__all__ = ["Finding", "find_forbidden", "describe"]

# Built-ins through which a name can be built at run time: the check cannot follow them.
DYNAMIC_CALLS = {"eval", "exec", "compile", "__import__", "globals", "vars", "locals", "breakpoint"}
DYNAMIC_ATTRS = {"__dict__", "__getattribute__", "__globals__", "__builtins__", "__subclasses__",
                 "modules", "import_module", "attrgetter", "methodcaller", "__code__", "__closure__"}
DYNAMIC_MODULES = {"importlib", "builtins", "operator", "inspect", "ctypes", "pickle", "marshal", "runpy"}
UNKNOWN = None  # a value the check cannot name (a tensor, a number): never forbidden by itself


@dataclass
class Finding:
    """One reason the code is refused: ``what`` it reaches, ``line`` where, ``dynamic`` for a
    construct the check cannot follow."""

    what: str
    line: str
    dynamic: bool = False


@dataclass(eq=False)  # hashed by identity: bindings name the scope they were made in
class _Scope:
    bindings: dict[str, set] = field(default_factory=dict)  # name -> qualified names or student defs (or UNKNOWN)
    parent: "_Scope | None" = None


def _dotted(qualified: str, attr: str) -> str:
    return f"{qualified}.{attr}"


class _Analyser:
    def __init__(self, trees: list[ast.Module], sources: list[str], forbidden: Sequence[str], setup: int = 0) -> None:
        self.sources = sources
        self.prefixes = [f for f in forbidden if not f.startswith(".")]
        self.attrs = {f[1:] for f in forbidden if f.startswith(".")}
        self.findings: list[Finding] = []
        self.module = _Scope()
        self.defs: dict[int, tuple[ast.AST, int]] = {}  # id(node) -> (def node, index of its source)
        self.seen: set[int] = set()
        for index, tree in enumerate(trees[:setup]):
            self._bind_block(tree.body, self.module, index)
        set_up = {name: set(values) for name, values in self.module.bindings.items()}
        for index, tree in enumerate(trees[setup:], start=setup):
            self._bind_block(tree.body, self.module, index)
        for name, values in set_up.items():  # a name the student binds again is theirs from then on
            if self.module.bindings[name] != values:
                self.module.bindings[name] -= values

    # ---- binding ------------------------------------------------------------------------------
    def _bind(self, scope: _Scope, name: str, value) -> None:
        scope.bindings.setdefault(name, set()).add(value)

    def _bind_block(self, body: Iterable[ast.stmt], scope: _Scope, index: int) -> None:
        """Every name a block binds (flow-insensitive: a name bound twice means either value)."""
        for node in body:
            for sub in self._statements(node):
                self._bind_statement(sub, scope, index)

    def _statements(self, node: ast.AST):
        """A statement and the statements nested in it, without entering new scopes."""
        yield node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            return
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.stmt) or isinstance(child, ast.excepthandler) or isinstance(child, ast.match_case):
                yield from self._statements(child)

    def _bind_statement(self, node: ast.AST, scope: _Scope, index: int) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            self.defs[id(node)] = (node, index)
            self._bind(scope, node.name, ("def", id(node)))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    self._bind(scope, alias.asname, alias.name)
                else:
                    top = alias.name.split(".")[0]
                    self._bind(scope, top, top)
        elif isinstance(node, ast.ImportFrom):
            base = ("." * node.level) + (node.module or "")
            for alias in node.names:
                if alias.name == "*":
                    self._bind(scope, "*", base)
                else:
                    self._bind(scope, alias.asname or alias.name, _dotted(base, alias.name) if base else alias.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.NamedExpr)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            value = node.value
            for target in targets:
                self._bind_target(target, value, scope, index)
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            self._bind_target(node.target, node.iter, scope, index, element=True)
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                if item.optional_vars is not None:
                    self._bind_target(item.optional_vars, item.context_expr, scope, index, element=True)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            self._bind(scope, node.name, ("value", None, scope, index, False))
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            for name in node.names:
                self._bind(scope, name, ("outer", None))
        # walrus and comprehension targets inside expressions
        for sub in ast.walk(node) if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                           ast.ClassDef)) else ():
            if isinstance(sub, ast.NamedExpr) and sub is not node:
                self._bind_target(sub.target, sub.value, scope, index)

    def _bind_target(self, target: ast.AST, value: ast.AST | None, scope: _Scope, index: int,
                     element: bool = False) -> None:
        """``element``: the name gets a part of ``value`` (unpacking, a loop, ``with``): what it is
        cannot be named, but ``value`` is still read when the name is used."""
        if isinstance(target, ast.Name):
            self._bind(scope, target.id, ("value", value, scope, index, element))
        elif isinstance(target, (ast.Tuple, ast.List)):
            for item in target.elts:
                self._bind_target(item.value if isinstance(item, ast.Starred) else item, value, scope, index, True)
        # attribute and subscript targets bind no name

    # ---- resolving ----------------------------------------------------------------------------
    def _lookup(self, name: str, scope: _Scope) -> set:
        while scope is not None:
            found = scope.bindings.get(name)
            if found and not all(v == ("outer", None) for v in found):
                return {v for v in found if v != ("outer", None)}
            scope = scope.parent  # not bound here, or ``global x`` / ``nonlocal x``: look further out
        star = self.module.bindings.get("*")
        return set(star and {_dotted(s, name) for s in star} or {name})  # a built-in or a name from elsewhere

    def resolve(self, node: ast.AST, scope: _Scope, depth: int = 0, seen: set | None = None) -> set:
        """What an expression may stand for: qualified names (str), student defs, or UNKNOWN."""
        seen = set() if seen is None else seen
        if depth > 40 or len(seen) > 2000:
            return {UNKNOWN}
        if isinstance(node, ast.Name):
            out = set()
            for v in self._lookup(node.id, scope):
                if isinstance(v, tuple) and v[0] == "value":
                    expr, bound_in = v[1], v[2]
                    if expr is None or v[4] or id(expr) in seen:
                        out.add(UNKNOWN)
                    else:
                        seen.add(id(expr))
                        out |= self.resolve(expr, bound_in, depth + 1, seen)
                else:
                    out.add(v)
            return out
        if isinstance(node, ast.Attribute):
            out = set()
            for base in self.resolve(node.value, scope, depth + 1, seen):
                out.add(_dotted(base, node.attr) if isinstance(base, str) else UNKNOWN)
            return out
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr" \
                and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str):
            out = set()
            for base in self.resolve(node.args[0], scope, depth + 1, seen):
                out.add(_dotted(base, node.args[1].value) if isinstance(base, str) else UNKNOWN)
            return out
        if isinstance(node, (ast.IfExp,)):
            return self.resolve(node.body, scope, depth + 1, seen) | self.resolve(node.orelse, scope, depth + 1, seen)
        if isinstance(node, ast.BoolOp):
            return set().union(*(self.resolve(v, scope, depth + 1, seen) for v in node.values))
        if isinstance(node, ast.NamedExpr):
            return self.resolve(node.value, scope, depth + 1, seen)
        if isinstance(node, ast.Lambda):
            return {("def", id(node))}
        return {UNKNOWN}

    # ---- checking -----------------------------------------------------------------------------
    def _forbidden(self, qualified: str) -> str | None:
        parts = qualified.split(".")
        for prefix in self.prefixes:
            if qualified == prefix or qualified.startswith(prefix + "."):
                return prefix
        for attr in self.attrs:
            if attr in parts[1:]:
                return "." + attr
        return None

    def _report(self, what: str, node: ast.AST, index: int, dynamic: bool = False) -> None:
        line = ""
        lineno = getattr(node, "lineno", None)
        if lineno is not None:
            lines = self.sources[index].splitlines()
            if 0 < lineno <= len(lines):
                line = lines[lineno - 1].strip()[:120]
        if not any(f.what == what and f.line == line for f in self.findings):
            self.findings.append(Finding(what, line, dynamic))

    def check_def(self, node: ast.AST, index: int, outer: _Scope) -> None:
        """Read a student definition (function, lambda or class) and everything it uses."""
        if id(node) in self.seen:
            return
        self.seen.add(id(node))
        scope = _Scope(parent=outer)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            args = node.args
            for a in args.posonlyargs + args.args + args.kwonlyargs + [args.vararg, args.kwarg]:
                if a is not None:
                    self._bind(scope, a.arg, ("value", None, scope, index, False))
            defaults = args.defaults + [d for d in args.kw_defaults if d is not None]
            decorators = getattr(node, "decorator_list", [])
            for expr in defaults + decorators:
                self._check_tree(expr, outer, index)
            body = node.body if isinstance(node.body, list) else [node.body]
            if isinstance(node.body, list):
                self._bind_block(body, scope, index)
                for stmt in body:
                    self._check_tree(stmt, scope, index)
            else:
                self._check_tree(node.body, scope, index)
        else:  # a class: its bases, its body, and every method
            for expr in node.bases + [k.value for k in node.keywords] + node.decorator_list:
                self._check_tree(expr, outer, index)
            self._bind_block(node.body, scope, index)
            for stmt in node.body:
                self._check_tree(stmt, scope, index)

    def _read_values(self, name: str, scope: _Scope) -> None:
        """Read the expressions a name used by checked code is bound to outside it (``sm =
        functools.partial(torch.softmax, dim=-1)`` at module level is read when ``sm`` is used)."""
        for v in self._lookup(name, scope):
            if isinstance(v, tuple) and v[0] == "value" and v[1] is not None and v[2] is self.module \
                    and id(v[1]) not in self.seen:
                self.seen.add(id(v[1]))
                self._check_tree(v[1], self.module, v[3])

    def _follow(self, values: set, node: ast.AST, index: int, scope: _Scope) -> None:
        for v in values:
            if isinstance(v, str):
                hit = self._forbidden(v)
                if hit:
                    self._report(v, node, index)
                if v.split(".")[0] in DYNAMIC_MODULES:
                    self._report(v, node, index, dynamic=True)
            elif isinstance(v, tuple) and v[0] == "def" and v[1] in self.defs:
                definition, where = self.defs[v[1]]
                self.check_def(definition, where, self.module)

    def _check_tree(self, root: ast.AST, scope: _Scope, index: int) -> None:
        stack = [root]
        while stack:
            node = stack.pop()
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.defs.setdefault(id(node), (node, index))
                self.check_def(node, index, scope)
                continue
            if isinstance(node, ast.Lambda):
                self.check_def(node, index, scope)
                continue
            if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
                inner = _Scope(parent=scope)
                for gen in node.generators:
                    self._bind_target(gen.target, gen.iter, inner, index, True)
                for child in ast.iter_child_nodes(node):
                    self._check_tree(child, inner, index)
                continue
            if isinstance(node, (ast.Name, ast.Attribute)) and isinstance(getattr(node, "ctx", None), ast.Load):
                if isinstance(node, ast.Attribute):
                    self._follow(self.resolve(node, scope), node, index, scope)  # named whole where it can be
                    if node.attr in self.attrs:
                        self._report("." + node.attr, node, index)
                    if node.attr in DYNAMIC_ATTRS:
                        self._report("." + node.attr, node, index, dynamic=True)
                else:
                    if (node.id in DYNAMIC_CALLS or node.id in DYNAMIC_MODULES) \
                            and not self._lookup(node.id, scope) - {node.id}:  # the built-in, not the student's name
                        self._report(node.id, node, index, dynamic=True)
                    self._read_values(node.id, scope)
                    self._follow(self.resolve(node, scope), node, index, scope)
                if isinstance(node, ast.Attribute):
                    stack.append(node.value)  # the chain's base: a name (its values read) or an expression
                continue
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr" \
                    and not self._lookup("getattr", scope) - {"getattr"}:
                name = node.args[1] if len(node.args) >= 2 else None
                if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
                    self._report("getattr with a computed name", node, index, dynamic=True)
                else:
                    if name.value in self.attrs:
                        self._report("." + name.value, node, index)
                    self._follow(self.resolve(node, scope), node, index, scope)
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                self._check_import(node, index)
            stack.extend(ast.iter_child_nodes(node))

    def _check_import(self, node: ast.Import | ast.ImportFrom, index: int) -> None:
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            base = ("." * node.level) + (node.module or "")
            names = [_dotted(base, a.name) if base else a.name for a in node.names]
            names += [base] if base else []
            for a in node.names:
                if a.name in self.attrs:
                    self._report("." + a.name, node, index)
        for name in names:
            if self._forbidden(name):
                self._report(name, node, index)
            if name.split(".")[0] in DYNAMIC_MODULES:
                self._report(name, node, index, dynamic=True)


def _parse(sources: Sequence[str]) -> tuple[list[ast.Module], list[str]]:
    trees, kept = [], []
    for source in sources:
        try:
            trees.append(parse(source))
            kept.append(source)
        except (SyntaxError, ValueError):
            continue  # a cell that does not parse defines nothing that runs
    return trees, kept


def find_forbidden(target: str, forbidden: Sequence[str], sources: Sequence[str],
                   setup: Sequence[str] = ()) -> list[Finding] | None:
    """What the student's ``target`` (``name`` or ``Class.method``) reaches of ``forbidden``.

    ``setup`` are the sources that ran before the student's (the assignment's own cells): their
    bindings count (``ref``, ``F``), their definitions are their own names. ``sources`` are the
    student's cells in the order they ran. Returns None when the student defined no ``target``.
    """
    setup_trees, setup_sources = _parse(setup)
    trees, kept = _parse(sources)
    analyser = _Analyser(setup_trees + trees, setup_sources + kept, forbidden, len(setup_trees))
    # A set-up definition is the course's: it stands for its own name (a forbidden entry can name
    # it), and it is not read as the student's code.
    for tree in setup_trees:
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                bound = analyser.module.bindings.get(node.name, set())
                if ("def", id(node)) in bound:  # still the set-up's (the student did not bind the name again)
                    bound.discard(("def", id(node)))
                    bound.add(node.name)
    parts = target.split(".")
    found = None
    for offset, tree in enumerate(trees):
        index = len(setup_trees) + offset
        nodes, match = tree.body, None
        for part in parts:
            match = None
            for n in nodes:
                if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.name == part:
                    match = n
                elif len(parts) == 1 and isinstance(n, (ast.Assign, ast.AnnAssign)) and any(
                        isinstance(t, ast.Name) and t.id == part for t in (n.targets if isinstance(n, ast.Assign) else [n.target])):
                    match = n  # ``name = <expression>``: the expression is what the name does
            if match is None or not isinstance(match, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                break
            nodes = match.body
        if match is not None:
            found = (match, index)  # the last definition wins, as when the cells run in order
    if found is None:
        bound = set()
        for tree in trees:  # ``from somewhere import target`` or a binding we cannot read as a definition
            for node in tree.body:
                if isinstance(node, (ast.Import, ast.ImportFrom)) and any(
                        (a.asname or a.name).split(".")[0] == parts[0] for a in node.names):
                    bound.add(id(node))
        if not bound:
            return None
        values = analyser.resolve(ast.Name(id=parts[0], ctx=ast.Load()), analyser.module)
        hits = [v for v in values if isinstance(v, str) and analyser._forbidden(v)]
        return [Finding(hits[0] if hits else f"an import of {parts[0]}", "", dynamic=not hits)]
    node, index = found
    if isinstance(node, (ast.Assign, ast.AnnAssign)):
        analyser._check_tree(node.value, analyser.module, index)
    else:
        analyser.check_def(node, index, analyser.module)
    return analyser.findings


def describe(label: str, findings: list[Finding]) -> str:
    """The student's message for the first finding."""
    first = next((f for f in findings if not f.dynamic), findings[0])
    where = f" (in `{first.line}`)" if first.line else ""
    if first.dynamic:
        return (f"{label}: uses {first.what}{where}, which this check cannot follow: it reads your code to make "
                "sure the exercise is not answered by a ready-made function. Write the call out plainly.")
    return (f"{label}: uses {first.what!r}{where}. This exercise asks you to write it yourself, "
            "with plain tensor operations.")
