"""The gradebook nbgrader is configured with, and the record of hand grades set aside.

**Which gradebook.** The grader reads and writes the gradebook nbgrader's own
commands use in the course folder (the formgrader, ``nbgrader export``,
``nbgrader db``): ``CourseDirectory.db_url`` and ``CourseDirectory.course_id``,
from nbgrader's configuration loaded as nbgrader loads it, the Jupyter
configuration folders (``jupyter --paths``) first, then the course's own
``nbgrader_config.py``. Without a ``db_url`` it is nbgrader's default,
``gradebook.db`` in the course folder's ``CourseDirectory.root``. SQLite at any
path, or PostgreSQL (``c.CourseDirectory.db_url =
"postgresql://user@host/dbname"``, through the ``psycopg2`` driver).

**Hand grades are never lost.** A hand grade belongs to the text it was given
to. Each time a result is recorded, the grader keeps, per student and
hand-graded cell, a hash of the answer the gradebook now holds
(``grades/hand-grades/<id>.json``). When a student's answer changes, its grade
and comment are copied into the same file (``set_aside``: the old answer's
hash, the points, extra credit and comment, when) before the gradebook's cell
is cleared to wait for the instructor again; an unchanged answer keeps its
grade and comment, whatever else changed in the notebook or however often it
is graded again.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import sys
import threading
import warnings
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

# nbgrader's Gradebook.add_submission builds a submission's notebooks, grades and comments before it adds
# them to its session; SQLAlchemy 2 says so, once per object kind, on every run ("Object of type
# <SubmittedAssignment> not in session, add operation along 'Student.submissions' will not proceed").
# The objects are added right after, by nbgrader (its cascade): nothing is lost. The cause is in
# nbgrader, not here, so only that warning, from nbgrader's gradebook module, is silenced.
NBGRADER_AUTOFLUSH_WARNING = r"Object of type <\w+> not in session, add operation along '[\w.]+' will not proceed"


def _quiet_nbgrader() -> None:
    warnings.filterwarnings("ignore", message=NBGRADER_AUTOFLUSH_WARNING, module=r"nbgrader\.api")  # no duplicates


_quiet_nbgrader()

_LOCK = threading.Lock()
_CACHE: dict[tuple, "Configured"] = {}


@dataclass(frozen=True)
class Configured:
    db_url: str
    course_id: str


def _config_key(course: Path) -> tuple:
    """What the configuration depends on: the course, its config file's state, the Jupyter config paths."""
    try:
        st = (course / "nbgrader_config.py").stat()
        state = (st.st_mtime_ns, st.st_size)
    except OSError:
        state = None
    return (str(course), state, os.environ.get("JUPYTER_CONFIG_DIR"), os.environ.get("JUPYTER_CONFIG_PATH"))


def configured(course: Path) -> Configured:
    """The course's ``CourseDirectory.db_url`` and ``course_id``, as ``nbgrader`` run in ``course`` sees them."""
    course = Path(course).resolve()
    key = _config_key(course)
    with _LOCK:
        if key in _CACHE:
            return _CACHE[key]
        from jupyter_core.application import JupyterApp
        from nbgrader.apps.baseapp import NbGrader
        from nbgrader.coursedir import CourseDirectory
        from traitlets.config import Application

        app = NbGrader()
        app.load_cwd_config = False
        # The user's and the system's Jupyter configuration folders (nbgrader's own search, less its
        # "no config found" warning), then the course folder's nbgrader_config.py, as `nbgrader` loads
        # them when it runs in the course folder.
        JupyterApp.load_config_file(app, suppress_errors=False)
        if (course / "nbgrader_config.py").is_file():
            Application.load_config_file(app, "nbgrader_config.py", path=str(course))
        config = app.config
        coursedir = CourseDirectory(config=config)
        if "root" not in config.get("CourseDirectory", {}):
            coursedir.root = str(course)  # nbgrader's default root is the folder it runs in
        found = Configured(str(coursedir.db_url), str(coursedir.course_id))
        app.clear_instance()
        _CACHE[key] = found
        return found


def shown_url(url: str) -> str:
    """A database URL without its password, for messages and logs."""
    try:
        from sqlalchemy.engine import make_url

        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - not a URL SQLAlchemy reads: say so as it is
        return url


def _alembic_reachable() -> None:
    """nbgrader runs the ``alembic`` command (from ``PATH``) when it creates a gradebook: make the one
    installed beside this Python reachable, whatever ``PATH`` the grader was started with."""
    here = str(Path(sys.executable).parent)
    if shutil.which("alembic") is None and (Path(here) / "alembic").is_file():
        os.environ["PATH"] = here + os.pathsep + os.environ.get("PATH", "")


@contextlib.contextmanager
def opened(course: Path):
    """nbgrader's ``Gradebook`` on the course's configured database."""
    from nbgrader.api import Gradebook

    where = configured(course)
    _alembic_reachable()
    _quiet_nbgrader()  # again: a caller (pytest, a notebook) may have reset the filters since the import
    with Gradebook(where.db_url, where.course_id) as gb:
        yield gb


# --- hand grades: what each one was given to, and those set aside -----------------------------------


def answer_hash(text: str) -> str:
    """The identity of one written answer: a hash of its text (trailing white space aside)."""
    return hashlib.sha256("\n".join(line.rstrip() for line in str(text).strip().splitlines()).encode()).hexdigest()


def ledger_path(course: Path, assignment: str) -> Path:
    return Path(course) / "grades" / "hand-grades" / f"{assignment}.json"


def load_ledger(course: Path, assignment: str) -> dict:
    """``{"graded": {student: {cell: answer hash}}, "set_aside": [...]}`` (empty if none yet)."""
    try:
        data = json.loads(ledger_path(course, assignment).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        data = {}
    if not isinstance(data, dict):
        data = {}
    data.setdefault("graded", {})
    data.setdefault("set_aside", [])
    return data


def save_ledger(course: Path, assignment: str, data: dict) -> None:
    from grader.feedback import write_atomic

    write_atomic(ledger_path(course, assignment), json.dumps(data, indent=1, ensure_ascii=False, sort_keys=True))


def set_aside(data: dict, student: str, cell: str, old_hash: str | None, new_hash: str, score, extra, comment) -> None:
    """Keep a hand grade (and its comment) that is about to be cleared, with what it was given to."""
    data["set_aside"].append({
        "student": student, "cell": cell, "answer": old_hash, "replaced_by": new_hash,
        "manual_score": None if score is None else float(score),
        "extra_credit": None if extra is None else float(extra), "comment": comment,
        "set_aside_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    })
