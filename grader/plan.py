"""What of each test runs beside the student's code, and what decides, kept apart.

A graded test cell of a source notebook has two parts, split by a marker line::

    run = grading.run(encoder_runs, seed=1)      # the RUN part: builds inputs, calls the student's code
    # ---- checks: when your notebook is graded, this part runs outside it ----
    grading.check_close(run.y, run.expected(), ...)   # the DECIDE part: expected values, comparisons

Only the run part ever enters the student's sandbox; the grader runs the whole
cell again in its own process (``grader.replay``), where ``run_student`` hands
back what the student's code returned. So no expected value is ever computed in
the student's kernel.

A hidden test cell (``### BEGIN HIDDEN TESTS``) may not send any of its text to
the sandbox: its run part must be only calls of runners the release shows,
``name = grading.run(runner, <literal arguments>)``. The sandbox gets the call,
rebuilt from the parsed runner name and arguments, never the cell.
"""
from __future__ import annotations

import ast
from pathlib import Path

from utils.syntax import parse

MARKER = "# ---- checks"
MARKER_LINE = "# ---- checks: when your notebook is graded, this part runs outside it ----"
BEGIN_HIDDEN, END_HIDDEN = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"


class PlanError(ValueError):
    """A test cell of the source notebook breaks the rules above (the assignment author's mistake)."""


def _meta(cell) -> dict:
    return cell.metadata.get("nbgrader", {}) or {}


def is_test(cell) -> bool:
    return cell.cell_type == "code" and bool(_meta(cell).get("grade")) and not _meta(cell).get("solution")


def is_hidden(source: str) -> bool:
    return any(line.strip().startswith(BEGIN_HIDDEN) for line in source.splitlines())


def split(source: str) -> tuple[str, str] | None:
    """(run part, decide part) of a test cell's source, marker lines dropped; None without a marker."""
    lines = [line for line in source.splitlines() if line.strip() not in (BEGIN_HIDDEN, END_HIDDEN)]
    for i, line in enumerate(lines):
        if line.strip().startswith(MARKER):
            return "\n".join(lines[:i]), "\n".join(lines[i + 1:])
    return None


def _literal(node: ast.AST, where: str) -> object:
    try:
        return ast.literal_eval(node)
    except ValueError:
        raise PlanError(f"{where}: a hidden test's runner arguments must be literals, got {ast.unparse(node)!r}") from None


def hidden_calls(run_part: str, where: str) -> str:
    """The sandbox's code for a hidden test: its ``grading.run(...)`` calls rebuilt from their
    parsed runner names and literal arguments (nothing else of the cell is sent)."""
    try:
        tree = parse(run_part)
    except SyntaxError as exc:
        raise PlanError(f"{where}: {exc}") from None
    calls = []
    for node in tree.body:
        value = node.value if isinstance(node, (ast.Assign, ast.Expr)) else None
        if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == "run"
                and isinstance(value.func.value, ast.Name) and value.func.value.id == "grading"
                and value.args and isinstance(value.args[0], ast.Name)):
            raise PlanError(f"{where}: the run part of a hidden test may only call grading.run(<runner>, ...); "
                            f"found {ast.unparse(node)[:80]!r}")
        args = [repr(_literal(a, where)) for a in value.args[1:]]
        kwargs = [f"{k.arg}={_literal(k.value, where)!r}" for k in value.keywords if k.arg]
        if any(k.arg is None for k in value.keywords):
            raise PlanError(f"{where}: **kwargs are not allowed in a hidden test's grading.run call")
        calls.append(f"grading.run({', '.join([value.args[0].id] + args + kwargs)})")
    return "import utils.grading as grading\n" + "\n".join(calls)


def sandbox_code(cell, gid: str, strict: bool = False) -> str:
    """What of a source test cell runs in the sandbox.

    A cell without the marker is an assignment not yet split (a legacy cell): the whole
    cell runs in the sandbox, as before the split existed; ``strict`` refuses it.
    """
    parts = split(cell.source)
    if parts is None:
        if strict:
            raise PlanError(f"test cell {gid!r} has no {MARKER_LINE!r} line between what runs the student's code "
                            "and the checks")
        return str(cell.source)
    run_part, _ = parts
    return hidden_calls(run_part, f"hidden test {gid!r}") if is_hidden(cell.source) else run_part


def legacy_tests(source_nb) -> list[str]:
    """The test cells of a source notebook that are not split yet."""
    return [_meta(c).get("grade_id", "?") for c in source_nb.cells if is_test(c) and split(c.source) is None]


def check_source(source_nb, strict: bool = False) -> None:
    """Raise PlanError unless every test cell of the source notebook follows the rules."""
    for cell in source_nb.cells:
        if is_test(cell):
            sandbox_code(cell, _meta(cell).get("grade_id", "?"), strict)


def is_setup(cell) -> bool:
    """A locked code cell of the assignment's own that is neither a test nor an answer (the set-up)."""
    meta = _meta(cell)
    return cell.cell_type == "code" and bool(meta.get("locked")) and not meta.get("grade") and not meta.get("solution")


def _loaded_names(tree: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | \
           {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}


def check_only_helpers(source_nb) -> set[str]:
    """Functions and classes the set-up cells define that only the checks use.

    Kept are the definitions that what runs beside the student's code needs: the run parts of the
    tests, the set-up cells' own statements, every other code cell (the answer cells' starting code
    and model solutions, the plain cells the release gives); and whatever those definitions use.
    The rest (the library's attention the tests compare with, the variants a mistake produces)
    computes what an exercise asks for, so the sandbox gets a stub in its place. A set-up definition
    the notebook's ``metadata.course.given`` names is the student's to use and always kept.
    """
    defs: dict[str, ast.AST] = {}
    # What the set-up gives the student to use (``metadata.course.given``): kept even where the release's
    # answer cells, still blank, do not call it yet (the self-check of a course folder without solutions/).
    roots: set[str] = {str(n) for n in ((source_nb.metadata.get("course") or {}).get("given") or [])}
    for cell in source_nb.cells:
        if cell.cell_type != "code":
            continue
        try:
            tree = parse(cell.source)
        except SyntaxError:
            continue
        if is_setup(cell):
            for node in tree.body:
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    defs[node.name] = node
                else:
                    roots |= _loaded_names(node)
        elif is_test(cell):
            parts = split(cell.source)
            if parts is not None:
                try:
                    roots |= _loaded_names(parse(parts[0]))
                except SyntaxError:
                    continue
        else:  # an answer cell (its starting code, the model solution) or a plain cell the release gives
            roots |= _loaded_names(tree)
    keep, todo = set(), [n for n in roots if n in defs]
    while todo:
        name = todo.pop()
        if name in keep:
            continue
        keep.add(name)
        todo.extend(n for n in _loaded_names(defs[name]) if n in defs and n not in keep)
    return set(defs) - keep


def _stub_helpers(source: str, names: set[str]) -> str:
    """A set-up cell's source with the named top-level definitions replaced by stubs that say why."""
    try:
        tree = parse(source)
    except SyntaxError:
        return source
    body = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name in names:
            message = (f"{node.name} is one of the checks' own helpers and is not available while your notebook is "
                       "graded. Write your answer yourself.")
            body.append(parse(f"def {node.name}(*args, **kwargs):\n    raise NotImplementedError({message!r})").body[0])
        else:
            body.append(node)
    tree.body = body
    return ast.unparse(ast.fix_missing_locations(tree))


def cells_for_sandbox(runnable_nb, source_nb) -> list[dict]:
    """The code the sandbox runs, in notebook order: ``{"code": ...}`` for the student's and the
    release's own cells (the set-up cells without the helpers only the checks use, see
    ``check_only_helpers``), ``{"code": ..., "test": grade_id}`` for each test's run part."""
    source_tests = {_meta(c).get("grade_id"): c for c in source_nb.cells if is_test(c)}
    setup_ids = {_meta(c).get("grade_id") for c in source_nb.cells if is_setup(c) and _meta(c).get("grade_id")}
    helpers = check_only_helpers(source_nb)
    out = []
    for cell in runnable_nb.cells:
        if cell.cell_type != "code":
            continue
        gid = _meta(cell).get("grade_id")
        if _meta(cell).get("grade") and not _meta(cell).get("solution") and gid in source_tests:
            out.append({"code": sandbox_code(source_tests[gid], gid), "test": gid})
        elif gid in setup_ids and is_setup(cell) and helpers:
            out.append({"code": _stub_helpers(str(cell.source), helpers)})
        else:
            out.append({"code": str(cell.source)})
    return out


def unsplit_assignments(root: Path) -> dict[str, list[str]]:
    """Each source notebook under ``root/solutions`` with test cells not split yet, and those cells."""
    import nbformat

    out = {}
    for path in sorted((root / "solutions").glob("*/*.ipynb")):
        cells = legacy_tests(nbformat.read(path, as_version=4))
        if cells:
            out[path.stem] = cells
    return out


if __name__ == "__main__":  # python -m grader.plan: the test cells left to split
    for assignment, cells in unsplit_assignments(Path(__file__).resolve().parent.parent).items():
        print(f"{assignment}: {len(cells)} test cells not split ({', '.join(cells)})")
