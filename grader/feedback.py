"""Feedback pages: nbgrader's feedback template, one student at a time, bounded and sanitized.

    python -m grader.feedback --serve    (one JSON job per line on stdin, one answer per line)

A job is ``{"course": <folder>, "assignment": <id>, "student": <id>, "notebook": <autograded
notebook>, "out": <page to write>}``. The page is rendered as ``nbgrader
generate_feedback`` renders it (its template, its ``GetGrades`` preprocessor reading
the scores and the instructor's comments from the gradebook), with explicit paths
(any student id works, none is a glob pattern), then rebuilt by
``grader.pages.sanitize_page`` and written atomically. The grader runs these
workers with a time limit per page: a notebook crafted to make rendering slow
costs its own page (the grader writes a plain one instead), never the run.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
import traceback
from pathlib import Path

sys.modules.setdefault("rfc3987_syntax", None)  # see grader/runner.py


def _exporter(grades=None):
    """nbgrader's feedback exporter; ``grades`` replaces its GetGrades preprocessor (which reads
    the gradebook) by one that sets the same fields (grader/check.py: no gradebook)."""
    import nbgrader
    from nbconvert.exporters import HTMLExporter
    from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor
    from nbgrader.preprocessors import GetGrades
    from traitlets.config import Config

    base = Path(nbgrader.__file__).parent / "server_extensions" / "formgrader"
    c = Config()
    c.HTMLExporter.template_name = "feedback"
    c.HTMLExporter.extra_template_basedirs = [str(base / "templates")]
    c.HTMLExporter.extra_template_paths = [str(base / "static" / "node_modules" / "bootstrap" / "dist" / "css")]
    c.HTMLExporter.sanitize_html = True
    exporter = HTMLExporter(config=c)
    exporter.register_preprocessor(grades if grades is not None else GetGrades(config=c), enabled=True)
    exporter.register_preprocessor(CSSHTMLHeaderPreprocessor(config=c), enabled=True)
    return exporter


def render(job: dict, exporter) -> None:
    import nbformat

    from grader.pages import sanitize_page

    nb = nbformat.read(job["notebook"], as_version=4)
    resources = {"nbgrader": {"student": job["student"], "assignment": job["assignment"], "notebook": job["assignment"],
                              "db_url": f"sqlite:///{Path(job['course']) / 'gradebook.db'}"}}
    page, _ = exporter.from_notebook_node(nb, resources=resources)
    write_atomic(Path(job["out"]), sanitize_page(page, f"{job['assignment']}: feedback"))


def write_atomic(path: Path, data: str) -> None:
    """Readers see the old or the new file, never half of one; a link or folder in the way is replaced."""
    if path.is_symlink() or (path.exists() and not path.is_file()):
        if path.is_dir() and not path.is_symlink():
            import shutil

            shutil.rmtree(path)
        else:
            path.unlink()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace", newline="") as fh:  # lone surrogates: escaped
        fh.write(data)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def serve() -> int:
    out = sys.stdout
    sys.stdout = sys.stderr
    exporter = _exporter()
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            render(json.loads(line), exporter)
            answer = {"ok": True}
        except Exception:  # noqa: BLE001 - reported; the grader writes a plain page instead
            answer = {"ok": False, "error": traceback.format_exc(limit=3)[-1500:]}
        out.write(json.dumps(answer) + "\n")
        out.flush()
    return 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--serve"]:
        sys.exit(serve())
    print(__doc__)
    sys.exit(2)
