"""The course's ``utils`` as an assignment's sandbox sees it: what the students write is not there.

Each source notebook names, in its metadata, the course functions and classes
that the assignment asks students to write (``metadata.course.reference``)::

    {"modules": ["utils.attention.numpy_ref", "utils.attention.{fw}_impl"],
     "names": ["masked_softmax", "AdditiveAttention", "Decoder.step"]}

``{fw}`` stands for both ``torch`` and ``keras`` (a student must not reach the answer
through the other framework's twin either), and a named function defined under the same
name in any other module of the package (another lesson's twin) is stubbed as well. ``view()`` copies the package's source files
(never bytecode) and rewrites those modules so that each named function, class
or method raises a clear error instead of running: the source is gone, so no
import, alias, ``__wrapped__``, thread, ``exec`` of the module's text or
``compile`` under its file name can reach it. Everything else, including the
layers and models the tests hand to students, still works. A name that is in
none of the modules is an error of the assignment's author.
"""
from __future__ import annotations

import ast
import copy
import shutil
from pathlib import Path

from utils.syntax import parse

UTILS = Path(__file__).resolve().parent.parent / "utils"
FRAMEWORK_SUFFIX = {"pytorch": "torch", "tensorflow": "keras"}


class PolicyError(ValueError):
    """The assignment's reference policy names something the package does not have."""


def policy_of(source_nb, assignment: str) -> dict | None:
    """The assignment's policy with ``{fw}`` filled in, or None when it names nothing."""
    raw = (source_nb.metadata.get("course") or {}).get("reference")
    if not raw:
        return None
    # Both twins: a PyTorch student must not reach the answer through the Keras twin, nor the reverse.
    modules = list(dict.fromkeys(str(m).format(fw=fw) for m in raw.get("modules", [])
                                 for fw in FRAMEWORK_SUFFIX.values()))
    names = [str(n) for n in raw.get("names", [])]
    if not modules or not names:
        raise PolicyError(f"{assignment}: metadata.course.reference needs both 'modules' and 'names', got {raw!r}")
    return {"modules": modules, "names": names}


def _message(module: str, qualname: str) -> str:
    return (f"{module}.{qualname} is not available while your notebook is graded: it is the course's own "
            "version of what this assignment asks you to write. Write it yourself.")


def _raise(message: str) -> ast.Raise:
    return parse(f"raise NotImplementedError({message!r})").body[0]


def _stub_function(node: ast.FunctionDef | ast.AsyncFunctionDef, message: str) -> ast.AST:
    stub = copy.copy(node)  # same name and signature; no decorators, no return annotation, no body
    stub.body, stub.decorator_list, stub.returns = [_raise(message)], [], None
    return stub


def _stub_class(name: str, message: str) -> ast.ClassDef:
    return parse(f"class {name}:\n    def __init__(self, *args, **kwargs):\n"
                     f"        raise NotImplementedError({message!r})").body[0]


def _stub_alias(name: str, message: str) -> ast.FunctionDef:
    return parse(f"def {name}(*args, **kwargs):\n    raise NotImplementedError({message!r})").body[0]


def strip_source(text: str, module: str, names: list[str]) -> tuple[str, set[str]]:
    """A module's source with ``names`` (functions, classes, ``Class.method``, aliases) stubbed out.

    Returns the new source and the names that were found in it.
    """
    tree = parse(text)
    whole = {n for n in names if "." not in n}
    methods: dict[str, set[str]] = {}
    for n in names:
        if "." in n:
            owner, _, method = n.partition(".")
            methods.setdefault(owner, set()).add(method)
    found: set[str] = set()
    body = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in whole:
            body.append(_stub_function(node, _message(module, node.name)))
            found.add(node.name)
        elif isinstance(node, ast.ClassDef) and node.name in whole:
            body.append(_stub_class(node.name, _message(module, node.name)))
            found.add(node.name)
        elif isinstance(node, ast.ClassDef) and node.name in methods:
            inner = []
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name in methods[node.name]:
                    inner.append(_stub_function(item, _message(module, f"{node.name}.{item.name}")))
                    found.add(f"{node.name}.{item.name}")
                else:
                    inner.append(item)
            node.body = inner
            body.append(node)
        elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id in whole for t in node.targets):
            for target in node.targets:
                if isinstance(target, ast.Name) and target.id in whole:
                    body.append(_stub_alias(target.id, _message(module, target.id)))
                    found.add(target.id)
        else:
            body.append(node)
    tree.body = body
    ast.fix_missing_locations(tree)
    new = ast.unparse(tree) + "\n"
    compile(new, f"<{module}>", "exec")  # the stubbed module must still load
    return new, found


def view(dest: Path, policy: dict | None, source: Path = UTILS) -> Path:
    """Write the assignment's view of the package to ``dest/utils``; return ``dest``.

    Only source and data files are copied (no ``__pycache__``: stale bytecode of the
    original would bring the reference back). Raises PolicyError for a name found nowhere.
    """
    dest = Path(dest)
    target = dest / "utils"
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.pyo"))
    if policy:
        found: set[str] = set()
        for module in policy["modules"]:
            parts = module.split(".")
            if parts[0] != "utils":
                raise PolicyError(f"reference policy: {module!r} is not a module of the course's utils package")
            path = target.joinpath(*parts[1:]).with_suffix(".py")
            if not path.is_file():
                raise PolicyError(f"reference policy: no module {module} ({path.relative_to(dest)})")
            text, hits = strip_source(path.read_text(encoding="utf-8"), module, policy["names"])
            path.write_text(text, encoding="utf-8")
            found |= hits
        missing = [n for n in policy["names"] if n not in found]
        if missing:
            raise PolicyError(f"reference policy: {missing} found in none of {policy['modules']}")
        # The same computation under the same name elsewhere in the package (another lesson's twin,
        # e.g. lesson 8's causal_self_attention for lesson 5) is stubbed too.
        listed = {target.joinpath(*m.split(".")[1:]).with_suffix(".py") for m in policy["modules"]}
        for path in sorted(target.rglob("*.py")):
            if path in listed:
                continue
            text = path.read_text(encoding="utf-8")
            module = ".".join(("utils",) + path.relative_to(target).with_suffix("").parts)
            try:
                new, hits = strip_source(text, module, policy["names"])
            except SyntaxError:
                continue
            if hits:
                path.write_text(new, encoding="utf-8")
    for path in [dest, *dest.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return dest
