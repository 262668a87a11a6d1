"""Grades in the formats Canvas and Moodle import, through nbgrader's export plug-in mechanism.

    python -m grader.export canvas --roster roster.csv [--to canvas.csv] [--allow-provisional]
    python -m grader.export moodle --roster roster.csv [--to moodle.csv] [--allow-provisional]
    (make export LMS=canvas ROSTER=roster.csv [TO=canvas.csv] [ALLOW_PROVISIONAL=1])

which runs nbgrader's own ``nbgrader export --exporter=grader.export.CanvasExport
--CanvasExport.roster=roster.csv`` (the same for Moodle).

The roster is a CSV the instructor provides, one row per student of the class:
``student_id`` (the id the course's grading uses: the folder under submitted/),
``name``, and the LMS's own ids: for Canvas ``canvas_id`` (the "ID" column of a
Canvas gradebook export), ``sis_user_id``, ``sis_login_id``, ``section``; for
Moodle ``email`` or ``id_number`` (and ``first_name``/``last_name``, else
``name`` is split at its last space). Each assignment's score is the gradebook's
(automatic and hand grades) minus its late penalty.

**The layouts are the LMS's own.** Canvas: the columns of a Canvas gradebook
export (Student, ID, SIS User ID, SIS Login ID, Section), then one column per
assignment named "Name (Canvas id)" when its Canvas id is known
(``c.CanvasExport.canvas_ids = {"01_soft_attention_pytorch": 4567}``; without
one, Canvas creates the assignment on import), and under the header the
"Points Possible" row that Canvas's own export has. Moodle: the identity
columns of Moodle's own grade export (First name, Last name, ID number,
Institution, Department, Email address), then one column per assignment, to map
to a grade item on import.

**Nothing provisional leaves unless asked for.** A score whose written answers
are not graded by hand yet is provisional: the export stops and names each such
student and assignment, unless given ``--allow-provisional``
(``--CanvasExport.allow_provisional=True``). A student on the roster without a
submission gets a row with an empty grade (no grade, never a silent zero) and is
named in the log; a student in the gradebook but not on the roster stops the
export with their ids (their grade would go nowhere). Every cell is safe to
open in a spreadsheet (grader/csvsafe.py).
"""
from __future__ import annotations

import argparse
import csv
import subprocess
import sys
from pathlib import Path

from nbgrader.api import Gradebook, MissingEntry
from nbgrader.plugins import ExportPlugin
from traitlets import Bool, Dict, Unicode

from grader import csvsafe


class ProvisionalScores(SystemExit):
    """Scores whose written answers wait for hand grading, refused by the export (exit status 2, the
    reason in the log, no traceback)."""

    def __init__(self, message: str) -> None:
        super().__init__(2)
        self.message = message

    def __str__(self) -> str:
        return self.message


def waits_for_hand_grading(submission) -> bool:
    """Whether a written answer (a cell that is both a solution and a grade cell) of this submission has
    no hand grade yet: its score is provisional."""
    for notebook in submission.notebooks:
        written = {cell.name for cell in notebook.notebook.solution_cells}
        if any(grade.needs_manual_grade and grade.name in written for grade in notebook.grades):
            return True
    return False


class RosterExport(ExportPlugin):
    """Shared: the roster, each student's score per assignment, and the rows the LMS reads."""

    roster = Unicode("", help="CSV of the class: student_id, name and the LMS's ids").tag(config=True)
    allow_provisional = Bool(False, help="export scores whose written answers are not graded by hand yet "
                                         "(provisional); without it the export stops and names them").tag(config=True)
    columns: list[str] = []  # the LMS's leading columns
    default_to = "grades-lms.csv"

    def read_roster(self) -> list[dict]:
        if not self.roster:
            raise ValueError(f"{type(self).__name__}: give the class roster (--{type(self).__name__}.roster=roster.csv)")
        path = Path(self.roster)
        if not path.is_file():
            raise ValueError(f"{type(self).__name__}.roster: no file {path}")
        rows = list(csv.DictReader(path.open(encoding="utf-8-sig")))
        if not rows or "student_id" not in rows[0]:
            raise ValueError(f"{path}: expected a CSV with a header that includes student_id, got {list(rows[0]) if rows else 'nothing'}")
        return rows

    def lead(self, row: dict) -> list[str]:
        raise NotImplementedError

    def header(self, name: str) -> str:
        """An assignment's column name."""
        return name

    def second_rows(self, max_scores: list[float]) -> list[list[str]]:
        """Rows between the header and the students (the LMS's own)."""
        return []

    def export(self, gradebook: Gradebook) -> None:
        roster = self.read_roster()
        known = {r["student_id"] for r in roster}
        chosen = [a for a in gradebook.assignments if not self.assignment or a.name in self.assignment]
        assignments = [a.name for a in chosen]
        graded = {s.id for s in gradebook.students}
        unknown = sorted(graded - known)
        if unknown:
            raise ValueError(f"students in the gradebook but not on the roster {self.roster}: {unknown}; "
                             "add them (with their LMS ids) and export again")
        rows, missing, provisional = [], [], []
        for row in roster:
            if self.student and row["student_id"] not in self.student:
                continue
            scores = []
            for name in assignments:
                try:
                    sub = gradebook.find_submission(name, row["student_id"])
                except MissingEntry:
                    scores.append("")
                    missing.append((row["student_id"], name))
                    continue
                if waits_for_hand_grading(sub):
                    provisional.append((row["student_id"], name))
                penalty = sum(nb.late_submission_penalty or 0.0 for nb in sub.notebooks)
                scores.append(f"{max(0.0, float(sub.score) - penalty):g}")
            rows.append(self.lead(row) + scores)
        if provisional and not self.allow_provisional:
            listed = "; ".join(f"{student}: {name}" for student, name in provisional)
            message = (f"{len(provisional)} provisional score(s), whose written answers are not graded by hand yet: "
                       f"{listed}. Grade them in the formgrader (then make feedback ASSIGNMENT=<id>), or export the "
                       "provisional scores anyway with --allow-provisional (make export ... ALLOW_PROVISIONAL=1).")
            self.log.error("Nothing exported: %s", message)
            raise ProvisionalScores(message)
        dest = Path(self.to or self.default_to)
        with dest.open("w", newline="", encoding="utf-8") as fh:
            writer = csvsafe.writer(fh)
            writer.writerow(self.columns + [self.header(name) for name in assignments])
            writer.writerows(self.second_rows([float(a.max_score) for a in chosen]))
            writer.writerows(rows)
        for student, name in missing:
            self.log.warning("%s has no submission of %s: left without a grade", student, name)
        for student, name in provisional:
            self.log.warning("%s's score of %s is provisional (written answers not graded by hand yet): "
                             "exported as it is (--allow-provisional)", student, name)
        self.log.info("Wrote %s (%d students, %d assignments)", dest, len(rows), len(assignments))


class CanvasExport(RosterExport):
    """Canvas's gradebook import, in the layout of Canvas's own gradebook export: Student, ID, SIS User ID,
    SIS Login ID, Section, then one column per assignment ("Name (Canvas id)"), and the Points Possible row."""

    columns = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
    default_to = "canvas.csv"
    canvas_ids = Dict({}, help="each assignment's Canvas id ({'01_soft_attention_pytorch': 4567}): its column is "
                               "then 'name (4567)', as in Canvas's own export, and the import fills that "
                               "assignment; without one Canvas creates a new assignment").tag(config=True)

    def lead(self, row: dict) -> list[str]:
        return [row.get("name", ""), row.get("canvas_id", ""), row.get("sis_user_id", ""),
                row.get("sis_login_id", ""), row.get("section", "")]

    def header(self, name: str) -> str:
        canvas_id = self.canvas_ids.get(name)
        return f"{name} ({canvas_id})" if canvas_id not in (None, "") else name

    def second_rows(self, max_scores: list[float]) -> list[list[str]]:
        # Canvas writes the label with four leading spaces, the other identity columns empty
        return [["    Points Possible", "", "", "", ""] + [f"{m:.2f}" for m in max_scores]]


class MoodleExport(RosterExport):
    """Moodle's grade import (CSV), in the layout of Moodle's own grade export: First name, Last name,
    ID number, Institution, Department, Email address, then one column per assignment (map "Email address"
    or "ID number" to the user, and each assignment's column to its grade item)."""

    columns = ["First name", "Last name", "ID number", "Institution", "Department", "Email address"]
    default_to = "moodle.csv"

    def lead(self, row: dict) -> list[str]:
        first, last = row.get("first_name"), row.get("last_name")
        if first is None and last is None:
            name = row.get("name", "").strip()
            first, _, last = name.rpartition(" ") if " " in name else (name, "", "")
        return [first or "", last or "", row.get("id_number", ""), row.get("institution", ""),
                row.get("department", ""), row.get("email", "")]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("lms", choices=["canvas", "moodle"])
    parser.add_argument("--roster", required=True, help="the class list (CSV): student_id, name and the LMS's ids")
    parser.add_argument("--to", default=None, help="the file to write (default: canvas.csv or moodle.csv)")
    parser.add_argument("--allow-provisional", action="store_true",
                        help="export scores whose written answers are not graded by hand yet")
    args = parser.parse_args(argv)
    exporter = {"canvas": "CanvasExport", "moodle": "MoodleExport"}[args.lms]
    command = [sys.executable, "-m", "nbgrader", "export", f"--exporter=grader.export.{exporter}",
               f"--{exporter}.roster={args.roster}"]
    if args.to:
        command.append(f"--to={args.to}")
    if args.allow_provisional:
        command.append(f"--{exporter}.allow_provisional=True")
    return subprocess.run(command).returncode


if __name__ == "__main__":
    sys.exit(main())
