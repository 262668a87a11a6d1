"""Late penalties through nbgrader's late-submission plug-in mechanism.

The course's ``nbgrader_config.py`` names the plug-in and its settings, as for
``nbgrader autograde``::

    c.AssignLatePenalties.plugin_class = "grader.late.PerDayCapped"
    c.PerDayCapped.points_per_day = 1.0
    c.PerDayCapped.max_points = 3.0

The due date is the assignment's in the gradebook (``nbgrader db assignment add
<id> --duedate="2026-12-01 17:00:00 UTC"``, or the formgrader). The grader asks
the plug-in for each notebook's penalty, records it in the gradebook (where
nbgrader's feedback page shows it) and in the CSV.
"""
from __future__ import annotations

import importlib
import math
from datetime import datetime
from pathlib import Path

from nbgrader.plugins import LateSubmissionPlugin
from traitlets import Float
from traitlets.config import Config
from traitlets.config.loader import PyFileConfigLoader


class PerDayCapped(LateSubmissionPlugin):
    """``points_per_day`` off for each started day late (after ``grace_minutes``), at most
    ``max_points``, never more than the score."""

    points_per_day = Float(1.0, help="points taken off per started day late").tag(config=True)
    max_points = Float(3.0, help="the most a late submission can lose").tag(config=True)
    grace_minutes = Float(0.0, help="minutes after the due date that still count as on time").tag(config=True)

    def late_submission_penalty(self, student_id: str, score: float, total_seconds_late: float) -> float | None:
        late = total_seconds_late - 60 * self.grace_minutes
        if late <= 0:
            return None
        days = math.ceil(late / 86_400)
        return min(score, self.max_points, days * self.points_per_day)


def course_config(course: Path) -> Config:
    """The course's nbgrader configuration (an empty one if there is none)."""
    path = Path(course) / "nbgrader_config.py"
    if not path.is_file():
        return Config()
    return PyFileConfigLoader(path.name, path=str(path.parent)).load_config()


def plugin(course: Path) -> LateSubmissionPlugin:
    """The late-submission plug-in the course configures (nbgrader's default when none)."""
    config = course_config(course)
    name = config.AssignLatePenalties.get("plugin_class", "nbgrader.plugins.LateSubmissionPlugin")
    if isinstance(name, str):
        module, _, cls = name.rpartition(".")
        name = getattr(importlib.import_module(module), cls)
    return name(config=config)


def penalty(late_plugin: LateSubmissionPlugin, student: str, score: float, submitted: datetime,
            due: datetime | None) -> tuple[float, float]:
    """(points taken off, seconds late) for one submission; (0, 0) when on time or without a due date."""
    if due is None:
        return 0.0, 0.0
    seconds = (submitted - due).total_seconds()
    if seconds <= 0:
        return 0.0, 0.0
    points = late_plugin.late_submission_penalty(student, score, seconds)
    return float(points or 0.0), seconds
