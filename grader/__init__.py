"""The course's grader: sandboxed autograding with verdicts decided outside the student's kernel.

    python -m grader ASSIGNMENT [--jobs N]     (make grade ASSIGNMENT=...)

Modules: grade (the whole run), plan (what of a test runs beside the student's
code), reference (the assignment's view of ``utils``), sandbox (bubblewrap),
runner (the notebook runner, outside the sandbox), replay (the decisions),
feedback and pages (sanitized pages), workers (bounded helper processes).
"""
