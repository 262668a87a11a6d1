"""Grades in the formats Canvas and Moodle import, through nbgrader's export plug-in mechanism.

    nbgrader export --exporter=grader.export.CanvasExport --CanvasExport.roster=roster.csv --to=canvas.csv
    nbgrader export --exporter=grader.export.MoodleExport --MoodleExport.roster=roster.csv --to=moodle.csv
    (make export LMS=canvas ROSTER=roster.csv [TO=canvas.csv])

The roster is a CSV the instructor provides, one row per student of the class:
``student_id`` (the id the course's grading uses: the folder under submitted/),
``name``, and the LMS's own ids: for Canvas ``canvas_id`` (the "ID" column of a
Canvas gradebook export), ``sis_user_id``, ``sis_login_id``, ``section``; for
Moodle ``email`` or ``id_number``. Each assignment's score is the gradebook's
(automatic and hand grades) minus its late penalty.

A student on the roster without a submission gets a row with an empty grade
(no grade, never a silent zero) and is named in the log; a student in the
gradebook but not on the roster stops the export with their ids (their grade
would go nowhere).
"""
from __future__ import annotations

import csv
from pathlib import Path

from nbgrader.api import Gradebook, MissingEntry
from nbgrader.plugins import ExportPlugin
from traitlets import Unicode


class RosterExport(ExportPlugin):
    """Shared: the roster, each student's score per assignment, and the rows the LMS reads."""

    roster = Unicode("", help="CSV of the class: student_id, name and the LMS's ids").tag(config=True)
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

    def export(self, gradebook: Gradebook) -> None:
        roster = self.read_roster()
        known = {r["student_id"] for r in roster}
        assignments = [a.name for a in gradebook.assignments if not self.assignment or a.name in self.assignment]
        graded = {s.id for s in gradebook.students}
        unknown = sorted(graded - known)
        if unknown:
            raise ValueError(f"students in the gradebook but not on the roster {self.roster}: {unknown}; "
                             "add them (with their LMS ids) and export again")
        missing = []
        dest = Path(self.to or self.default_to)
        with dest.open("w", newline="", encoding="utf-8") as fh:
            writer = csv.writer(fh)
            writer.writerow(self.columns + assignments)
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
                    penalty = sum(nb.late_submission_penalty or 0.0 for nb in sub.notebooks)
                    scores.append(f"{max(0.0, float(sub.score) - penalty):g}")
                writer.writerow(self.lead(row) + scores)
        for student, name in missing:
            self.log.warning("%s has no submission of %s: left without a grade", student, name)
        self.log.info("Wrote %s (%d students, %d assignments)", dest, len(roster), len(assignments))


class CanvasExport(RosterExport):
    """Canvas's gradebook import: Student, ID, SIS User ID, SIS Login ID, Section, then one column per
    assignment (an assignment Canvas does not know yet is created on import)."""

    columns = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
    default_to = "canvas.csv"

    def lead(self, row: dict) -> list[str]:
        return [row.get("name", ""), row.get("canvas_id", ""), row.get("sis_user_id", ""),
                row.get("sis_login_id", ""), row.get("section", "")]


class MoodleExport(RosterExport):
    """Moodle's grade import (CSV): an identity column to map (email address or ID number), then one
    column per assignment to map to a grade item."""

    columns = ["Email address", "ID number", "Full name"]
    default_to = "moodle.csv"

    def lead(self, row: dict) -> list[str]:
        return [row.get("email", ""), row.get("id_number", ""), row.get("name", "")]
