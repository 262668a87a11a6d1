"""Helpers for the nbgrader round-trip tests: a throw-away course, submissions, scores."""
from __future__ import annotations

import html
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
BEGIN_SOLUTION, END_SOLUTION = "### BEGIN SOLUTION", "### END SOLUTION"
BEGIN_HIDDEN, END_HIDDEN = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"


def assignment_ids() -> list[str]:
    return sorted(p.parent.name for p in (ROOT / "solutions").glob("*/*.ipynb") if p.stem == p.parent.name)


def nbgrader_env() -> dict:
    env = dict(os.environ)
    # nbgrader runs `alembic` from the environment's bin folder when it creates a gradebook
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env.update(COURSE_PROFILE="smoke", COURSE_THREADS="1", OMP_NUM_THREADS="1", MPLBACKEND="Agg")
    # nbgrader runs in a throw-away course folder; the course's plug-ins (grader.late, grader.export)
    # are importable as they are from the real course folder
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def nbgrader(args: list[str], course: Path, check: bool = True, timeout: int = 900) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [sys.executable, "-m", "nbgrader", *args], cwd=course, env=nbgrader_env(),
        capture_output=True, text=True, timeout=timeout,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"nbgrader {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}")
    return proc


def make_course(tmp: Path, assignment: str) -> Path:
    """A private copy of the course's grading set-up with one assignment's source."""
    course = tmp / "course"
    (course / "solutions").mkdir(parents=True)
    shutil.copy(ROOT / "nbgrader_config.py", course / "nbgrader_config.py")
    shutil.copytree(ROOT / "solutions" / assignment, course / "solutions" / assignment)
    return course


def regions(source: str, begin: str, end: str) -> list[str]:
    """Text between begin/end marker lines (exclusive), one string per region."""
    out, current = [], None
    for line in source.splitlines():
        if line.strip().startswith(begin):
            current = []
        elif line.strip().startswith(end) and current is not None:
            out.append("\n".join(current))
            current = None
        elif current is not None:
            current.append(line)
    return out


def significant_lines(text: str) -> set[str]:
    """Lines worth searching for in a release or a feedback page (not blank, not tiny, not comments)."""
    lines = {line.strip() for line in text.splitlines()}
    return {line for line in lines if len(line) >= 12 and not line.startswith("#")}


def student_fill(source_nb, written: bool = False) -> dict[str, str]:
    """What a student who solved everything writes into each solution cell (marker lines dropped);
    with ``written``, also their answers in the hand-graded markdown cells."""
    fills = {}
    for cell in source_nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution") and (cell.cell_type == "code" or written):
            fills[meta["grade_id"]] = "\n".join(
                line for line in cell.source.splitlines()
                if line.strip() not in (BEGIN_SOLUTION, END_SOLUTION)
            )
    return fills


def write_submission(course: Path, assignment: str, student: str, nb) -> Path:
    folder = course / "submitted" / student / assignment
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{assignment}.ipynb"
    nbformat.write(nb, path)
    (folder / "timestamp.txt").write_text("2026-01-01 00:00:00.000000 UTC")
    return path


def fill_release(release_nb, fills: dict[str, str]):
    nb = nbformat.from_dict(release_nb)
    for cell in nb.cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        if gid in fills:
            cell.source = fills[gid]
    return nb


def scores(course: Path, assignment: str) -> dict[str, tuple[float, float]]:
    """student -> (score, max score) from the gradebook."""
    from grader import gradebook

    with gradebook.opened(course) as gb:
        out = {}
        for sub in gb.assignment_submissions(assignment):
            out[sub.student_id] = (float(sub.score), float(sub.max_score))
        return out


def written_answers(source_nb) -> dict[str, float]:
    """grade_id -> points of each answer graded by hand (a cell both a solution and a grade cell), in order."""
    return {c.metadata["nbgrader"]["grade_id"]: float(c.metadata["nbgrader"].get("points", 0)) for c in source_nb.cells
            if c.metadata.get("nbgrader", {}).get("grade") and c.metadata["nbgrader"].get("solution")}


def hand_graded_points(source_nb) -> float:
    """Points of the answers graded by hand."""
    return sum(written_answers(source_nb).values())


def graded_status(by_hand: float) -> str:
    """The status of a notebook graded to its end: provisional while written answers wait for the instructor."""
    return "provisional" if by_hand else "graded"


def full_marks(result, by_hand: float) -> bool:
    """Every automatic point; the ``by_hand`` points of the written answers wait for the instructor."""
    return result.status == graded_status(by_hand) and result.score == result.max_score - by_hand > 0

def without_hand_grading_note(note: str) -> str:
    """A result's note less the part that says written answers wait for the instructor."""
    return re.sub(r"(; )?hand grading pending \([^)]*\): the score is provisional", "", note).strip("; ")

def visible_text(page: str) -> str:
    """An HTML page as the reader sees it: tags dropped, entities decoded."""
    page = re.sub(r"<style.*?</style>|<script.*?</script>", "", page, flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", "", page))


def error_text(nb) -> str:
    """All error names and messages a graded notebook shows."""
    parts = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                parts.append(f"{out.get('ename')}: {out.get('evalue')}")
    return "\n".join(parts)


def secret_lines(source_nb, begin: str, end: str) -> set[str]:
    """Significant lines that occur only inside begin/end regions of the source notebook."""
    inside, outside = set(), set()
    for cell in source_nb.cells:
        for region in regions(cell.source, begin, end):
            inside |= significant_lines(region)
        kept, skipping = [], False
        for line in cell.source.splitlines():
            if line.strip().startswith(begin):
                skipping = True
            elif line.strip().startswith(end):
                skipping = False
            elif not skipping:
                kept.append(line)
        outside |= significant_lines("\n".join(kept))
    return inside - outside


# --- Trivial answers ------------------------------------------------------------------------------
# A test that gives points to a trivial answer measures nothing. A trivial submission
# keeps each exercise's signature but returns, for the same inputs, zeros of the right
# shape and type, a constant (uniform rows), random values of the right shape, or the
# input unchanged. It is made by wrapping the solution: the wrapper runs the solution on
# a deep copy of the arguments (Keras objects: on the originals, whose variables it puts
# back afterwards), so a training step updates nothing the test can see, only to learn
# the shape and type of the answer, then throws the answer away. The release
# itself is the fifth trivial answer (every exercise raises NotImplementedError).
TRIVIAL_KINDS = ("zeros", "constant", "random", "identity")

TRIVIAL_PRELUDE = '''
def _trivial_like(out, args, kind, _seed=[0]):
    """A trivial answer shaped like ``out`` (the true answer), for ``kind``."""
    import numpy as _np
    if kind == "identity":
        return args[0] if args else out
    if isinstance(out, (tuple, list)):
        return type(out)(_trivial_like(o, args, kind) for o in out)
    if isinstance(out, dict):
        return {k: _trivial_like(v, args, kind) for k, v in out.items()}
    if isinstance(out, bool):
        return kind != "zeros"
    if isinstance(out, (int, float)):
        return type(out)(0 if kind == "zeros" else 1)
    module = type(out).__module__
    if not (isinstance(out, _np.ndarray) or hasattr(out, "detach") or hasattr(out, "numpy")):
        return out if kind != "zeros" else None
    from utils.grading import to_numpy as _to_numpy
    value = _to_numpy(out)
    _seed[0] += 1
    rng = _np.random.default_rng(_seed[0])
    if value.dtype == bool:
        new = {"zeros": _np.zeros(value.shape, bool), "constant": _np.ones(value.shape, bool),
               "random": rng.random(value.shape) < 0.5}[kind]
    elif _np.issubdtype(value.dtype, _np.integer):
        top = int(value.max()) + 1 if value.size else 2
        new = {"zeros": _np.zeros(value.shape, value.dtype), "constant": _np.ones(value.shape, value.dtype),
               "random": rng.integers(0, max(top, 2), value.shape).astype(value.dtype)}[kind]
    else:
        width = value.shape[-1] if value.ndim else 2
        new = {"zeros": _np.zeros(value.shape), "constant": _np.full(value.shape, 1.0 / max(width, 1)),
               "random": rng.standard_normal(value.shape)}[kind].astype(value.dtype)
    if module.startswith("torch"):
        import torch as _torch
        return _torch.as_tensor(new, dtype=out.dtype)
    if hasattr(out, "numpy") and not isinstance(out, _np.ndarray):
        import tensorflow as _tf
        return _tf.convert_to_tensor(new, dtype=out.dtype)
    return new


def _trivial_function(fn, kind):
    import copy as _copy

    def trivial(*args, **kwargs):
        held = []  # Keras models and optimizers: their variables are put back after the call
        for x in list(args) + list(kwargs.values()):
            found = getattr(x, "variables", None)
            if isinstance(found, (list, tuple)):
                held += list(found)
        saved = [v.numpy() for v in held]
        if held:
            out = fn(*args, **kwargs)
        else:  # torch modules, optimizers and tensors: work on a deep copy
            try:
                a, k = _copy.deepcopy((args, kwargs))
            except Exception:
                a, k = args, kwargs
            out = fn(*a, **k)
        for v, value in zip(held, saved):
            v.assign(value)
        return _trivial_like(out, args, kind)
    trivial.__name__ = fn.__name__
    return trivial
'''


def trivial_fill(source_nb, kind: str) -> dict[str, str]:
    """Solution cells turned into the trivial answer ``kind`` (see TRIVIAL_KINDS) for every exercise."""
    assert kind in TRIVIAL_KINDS, kind
    fills = {}
    for gid, code in student_fill(source_nb).items():
        wraps = []
        for name in re.findall(r"^def (\w+)", code, re.M):
            wraps.append(f"{name} = _trivial_function({name}, {kind!r})")
        for name in re.findall(r"^class (\w+)", code, re.M):
            wraps.append(f"class {name}({name}):\n    def __call__(self, *args, **kwargs):\n"
                         f"        return _trivial_like(super().__call__(*args, **kwargs), args, {kind!r})")
        fills[gid] = code + "\n\n" + TRIVIAL_PRELUDE + "\n" + "\n".join(wraps) + "\n"
    return fills


def mistake_messages(source_nb) -> list[str]:
    """Every likely-mistake message of the graded test cells: the keys of each ``mistakes={...}``."""
    import ast

    found = []
    for cell in source_nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if not meta.get("grade") or cell.cell_type != "code":
            continue
        code = "\n".join(line for line in cell.source.splitlines() if not line.strip().startswith("###"))
        for node in ast.walk(ast.parse(code)):
            if not isinstance(node, ast.Call):
                continue
            for kw in node.keywords:
                if kw.arg == "mistakes" and isinstance(kw.value, ast.Dict):
                    for key in kw.value.keys:
                        if isinstance(key, ast.Constant) and isinstance(key.value, str):
                            found.append(key.value)
                        elif isinstance(key, ast.JoinedStr):  # an f-string: its longest literal part
                            parts = [v.value for v in key.values if isinstance(v, ast.Constant)]
                            if parts:
                                found.append(max(parts, key=len))
    return found


# --- a throw-away PostgreSQL server ---------------------------------------------------------------


def postgres_bin() -> Path | None:
    """The folder of PostgreSQL's server programs (Debian/Ubuntu: /usr/lib/postgresql/<version>/bin), newest first."""
    import glob

    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3])
                   if Path(p).parts[-3].isdigit() else 0)
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


class PostgresServer:
    """A PostgreSQL cluster of its own in a temporary folder, on a free local port, one database.

    PostgreSQL refuses to run as root: as root the cluster belongs to, and runs as, the unprivileged
    user ``nobody``. ``url`` is the database's SQLAlchemy URL, through psycopg 3 (the ``dev`` extra's driver).
    """

    def __init__(self) -> None:
        import pwd
        import socket
        import tempfile

        self.bin = postgres_bin()
        if self.bin is None:
            raise RuntimeError("PostgreSQL's server programs (initdb, pg_ctl) are not installed "
                               "(Debian/Ubuntu: apt-get install postgresql)")
        self.folder = Path(tempfile.mkdtemp(prefix="course-postgres-"))
        self.user: dict = {}
        if os.geteuid() == 0:
            nobody = pwd.getpwnam("nobody")
            os.chown(self.folder, nobody.pw_uid, nobody.pw_gid)
            self.user = {"user": nobody.pw_uid, "group": nobody.pw_gid, "extra_groups": []}
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.data = self.folder / "data"
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.folder / "server.log"), "-w", "-t", "60", "-o",
                  f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.folder} -F", "start")
        self.running = True
        import psycopg

        with psycopg.connect(host="127.0.0.1", port=self.port, user="postgres", dbname="postgres",
                             autocommit=True) as db:
            db.execute("CREATE DATABASE gradebook")
        self.url = f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/gradebook"

    def _run(self, program: str, *args: str) -> None:
        env = {"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8"}
        proc = subprocess.run([str(self.bin / program), *args], cwd=self.folder, env=env, capture_output=True,
                              text=True, timeout=120, **self.user)
        if proc.returncode != 0:
            log = self.folder / "server.log"
            raise RuntimeError(f"{program} failed ({proc.returncode}): {proc.stdout[-1500:]}{proc.stderr[-1500:]}"
                               + (log.read_text()[-1500:] if log.is_file() else ""))

    def query(self, sql: str) -> list[tuple]:
        import psycopg

        with psycopg.connect(host="127.0.0.1", port=self.port, user="postgres", dbname="gradebook") as db:
            return db.execute(sql).fetchall()

    def stop(self) -> None:
        if getattr(self, "running", False):
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
            self.running = False

    def close(self) -> None:
        try:
            self.stop()
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)
