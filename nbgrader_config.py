"""nbgrader configuration of the course (instructor side).

Source notebooks (with solutions and hidden tests) live in ``solutions/``; the
student versions that ``nbgrader generate_assignment`` produces go to
``assignments/`` and are committed. Everything nbgrader writes while grading
(gradebook, exchange, submitted/, autograded/, feedback/) stays inside the
course folder and out of git (see .gitignore).
"""
import os
import sys

c = get_config()  # noqa: F821  (provided by nbgrader)

here = os.path.dirname(os.path.abspath(__file__))

c.CourseDirectory.root = here
c.CourseDirectory.course_id = "attention-course"
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "assignments"
c.CourseDirectory.db_url = "sqlite:///" + os.path.join(here, "gradebook.db")
# Never copy editor droppings or stray scripts into a release: a .py copy of a
# solution notebook would leak the solution.
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback", "*.py", "*.bak"]

# Inside the course folder, or `nbgrader submit` writes into the user's home.
c.Exchange.root = os.path.join(here, "exchange")
c.Exchange.cache = os.path.join(here, "exchange", ".cache")
# On the hub (deploy/, docs/jupyterhub.md), collect only what the course's submission desk sealed,
# each checked against the desk's record (an exchange without a sealed/ folder is collected as
# nbgrader does), and release feedback pages readable by their student (the course folder is closed).
if os.path.exists(os.path.join(here, "deploy", "private_exchange.py")):
    sys.path.append(os.path.join(here, "deploy"))
    c.ExchangeFactory.collect = "private_exchange.SealedCollect"
    c.ExchangeFactory.release_feedback = "private_exchange.ReadableReleaseFeedback"

# Stubs raise NotImplementedError; released notebooks carry no solutions.
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}

# Grading survives bad submissions: a cell that hangs is stopped, huge output is cut.
c.Execute.timeout = 90
c.Execute.interrupt_on_timeout = True
c.Execute.execute_retries = 0
# Short tracebacks: the student reads the check's message, and the source of
# hidden tests is not echoed into the feedback through the traceback.
c.Execute.extra_arguments = ["--InteractiveShell.xmode=Minimal"]
c.LimitOutput.max_lines = 200
c.LimitOutput.max_traceback = 40

# Feedback shows visible tests and all messages, but never hidden test code.
c.GenerateFeedback.preprocessors = [
    "nbgrader.preprocessors.GetGrades",
    "nbgrader.preprocessors.ClearHiddenTests",
    "nbconvert.preprocessors.CSSHTMLHeaderPreprocessor",
]

# Late penalties (grader/late.py, nbgrader's late-submission plug-in mechanism): one point off
# per started day after the due date, at most three, never below zero. The due date is the
# assignment's in the gradebook: `nbgrader db assignment add <id> --duedate="2026-12-01 17:00:00 UTC"`.
c.AssignLatePenalties.plugin_class = "grader.late.PerDayCapped"
c.PerDayCapped.points_per_day = 1.0
c.PerDayCapped.max_points = 3.0
c.PerDayCapped.grace_minutes = 0.0
