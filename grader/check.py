"""Check one learner's own notebook with the course's grader: no class, no instructor.

    python -m grader.check ASSIGNMENT [--notebook PATH]
    (or: make check ASSIGNMENT=01_soft_attention_pytorch [NOTEBOOK=path])

The notebook (by default the learner's copy, ``assignments/<id>/<id>.ipynb``) is graded
exactly as ``make grade`` grades a student (``grader.grade.grade_one``: the repair, the
sandboxed run, every test decided outside the kernel, hidden tests included), and this
prints the score per exercise and each failed test's message, and writes the same
feedback page a class run writes, to ``build/check/<id>/<id>.html`` (with
``result.json`` beside it). Nothing is written anywhere else: no class folder, no
gradebook, no grades; scratch files live in a temporary folder removed at the end.

* **The sandbox** (bubblewrap) is used where it runs. Where it does not (macOS,
  Colab, no bubblewrap), the check says so and runs the notebook without it: it is
  the learner's own code, on their own machine, with their own rights.
* **Honest about what ran.** The hidden tests are in ``solutions/``. Where that folder
  is not there (a class whose students cannot read it), only the visible tests run,
  and the check says "the public tests pass; hidden tests run at grading", never that
  all tests pass.
* **Model answers after one's own.** A written answer (graded by hand in a class) is
  not scored here; once it is not empty, its rubric and model answer are shown beside
  it, in the output and on the page, for self-assessment. A class run (``make grade``)
  never shows them.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

import nbformat

from grader import grade, pages, plan, reference, sandbox
from grader.feedback import write_atomic
from grader.workers import Workers

ROOT = Path(__file__).resolve().parent.parent
LEARNER = "you"
PLACEHOLDER = "YOUR ANSWER HERE"
BEGIN_SOLUTION, END_SOLUTION = "### BEGIN SOLUTION", "### END SOLUTION"


class CheckError(SystemExit):
    """A check that cannot start (no such assignment, no notebook); the message says why."""


@dataclass
class Test:
    grade_id: str
    points: float
    max_points: float
    message: str
    hidden: bool
    ran: bool = True  # False: a hidden test not run here (no solutions/)


@dataclass
class Written:
    grade_id: str
    points: float
    answered: bool
    model: str | None  # the rubric and model answer, once answered and where the source is here


@dataclass
class Exercise:
    title: str
    tests: list[Test] = field(default_factory=list)
    written: list[Written] = field(default_factory=list)

    @property
    def score(self) -> float:
        return sum(t.points for t in self.tests if t.ran)

    @property
    def max_score(self) -> float:
        return sum(t.max_points for t in self.tests if t.ran)


@dataclass
class Report:
    assignment: str
    notebook: str
    all_tests: bool  # hidden tests included (solutions/ was here)
    sandbox: str | None  # None: sandboxed; else why not
    status: str
    note: str
    exercises: list[Exercise]
    page: str

    @property
    def score(self) -> float:
        return sum(e.score for e in self.exercises)

    @property
    def max_score(self) -> float:
        return sum(e.max_score for e in self.exercises)

    @property
    def failed(self) -> list[Test]:
        return [t for e in self.exercises for t in e.tests if t.ran and t.points < t.max_points]

    @property
    def not_run(self) -> list[Test]:
        return [t for e in self.exercises for t in e.tests if not t.ran]

    def verdict(self) -> str:
        """One honest line: what passed, and of which tests."""
        if self.status == "failed":
            return f"The notebook could not be checked: {self.note}"
        if self.failed:
            return f"{len(self.failed)} test(s) fail: see the messages above."
        if self.all_tests:
            return "Every test passes, the hidden tests included."
        return (f"The public tests pass; hidden tests run at grading ({len(self.not_run)} hidden test(s) were not "
                "run here: the course's solutions/ folder is not here).")

    def to_json(self) -> dict:
        data = asdict(self)
        data.update(score=self.score, max_score=self.max_score, verdict=self.verdict())
        return data


def _meta(cell) -> dict:
    return cell.metadata.get("nbgrader", {}) or {}


def comments_only(source: str) -> bool:
    return all(not line.strip() or line.strip().startswith("#") for line in source.splitlines())


def visible_source(release):
    """The release as the check's source when solutions/ is not here: the visible tests as
    they are; the hidden ones (nothing but their first comment line in a release) left out."""
    nb = nbformat.from_dict(release)
    nb.cells = [c for c in nb.cells if not (plan.is_test(c) and comments_only(c.source))]
    return nb


def model_answer(source_cell) -> str:
    """The rubric and model answer of a hand-graded cell: its solution region."""
    text = str(source_cell.source)
    if BEGIN_SOLUTION in text:
        text = text.split(BEGIN_SOLUTION, 1)[1].split(END_SOLUTION, 1)[0]
    return text.strip()


def answered(answer: str, release_text: str) -> bool:
    """A written answer counts once it holds something beyond what the release gave."""
    given = {line.strip() for line in release_text.splitlines()}
    return any(line.strip() and line.strip() not in given and line.strip() != PLACEHOLDER
               for line in answer.splitlines())


def exercises_of(release, hidden: set[str]) -> list[tuple[str, list[str], list[str]]]:
    """(title, test ids, written-answer ids) per exercise, in the release's order; a title is
    the first line of the markdown heading (``## Exercise 2: ...``) that opens it."""
    groups: list[tuple[str, list[str], list[str]]] = [("Before the exercises", [], [])]
    for cell in release.cells:
        meta = _meta(cell)
        if cell.cell_type == "markdown" and re.match(r"#+\s", cell.source) and not meta.get("solution"):
            groups.append((cell.source.splitlines()[0].lstrip("# ").strip(), [], []))
        elif plan.is_test(cell):
            groups[-1][1].append(meta["grade_id"])
        elif meta.get("grade") and meta.get("solution"):
            groups[-1][2].append(meta["grade_id"])
    return [g for g in groups if g[1] or g[2]]


class _Grades:
    """Stands in for nbgrader's GetGrades preprocessor: the scores come from the check, not a gradebook."""

    def __init__(self, scores: dict[str, tuple[float, float]], comments: dict[str, str], total: tuple[float, float]):
        self.scores, self.comments, self.total = scores, comments, total

    def __call__(self, nb, resources):
        for cell in nb.cells:
            meta = _meta(cell)
            gid = meta.get("grade_id")
            if meta.get("solution"):
                meta["comment"] = self.comments.get(gid)
            if meta.get("grade") and gid in self.scores:
                meta["score"], meta["points"] = self.scores[gid]
        resources["nbgrader"].update(score=self.total[0], max_score=self.total[1], late_penalty=0)
        return nb, resources


def render_page(shown, report: Report, page: Path) -> None:
    """The feedback page, with nbgrader's feedback template as a class run renders it."""
    from grader.feedback import _exporter

    scores = {t.grade_id: (t.points, t.max_points) for e in report.exercises for t in e.tests if t.ran}
    comments = {}
    for e in report.exercises:
        for w in e.written:
            comments[w.grade_id] = ("Not scored by the check: in a class, your instructor grades this answer. "
                                    + ("Compare yours with the rubric and the model answer below it." if w.model
                                       else "Write your answer; the model answer appears once it is not empty."
                                       if report.all_tests and not w.answered
                                       else "The model answer is not here (no solutions/ folder)."))
    exporter = _exporter(_Grades(scores, comments, (report.score, report.max_score)))
    resources = {"nbgrader": {"student": LEARNER, "assignment": report.assignment, "notebook": report.assignment}}
    html, _ = exporter.from_notebook_node(shown, resources=resources)
    write_atomic(page, pages.sanitize_page(html, f"{report.assignment}: check"))


def _annotate(shown, report: Report) -> None:
    """The page's notebook: the check's own note first; hidden tests not run marked as such
    (not scored); a written answer followed by its rubric and model answer once answered."""
    not_run = {t.grade_id for t in report.not_run}
    models = {w.grade_id: w.model for e in report.exercises for w in e.written if w.model}
    cells = []
    for cell in shown.cells:
        meta = _meta(cell)
        gid = meta.get("grade_id")
        if gid in not_run:
            meta["grade"] = False  # not scored: it runs at grading
            cell.outputs = []
            cells.append(cell)
            cells.append(nbformat.v4.new_markdown_cell("*A hidden test: it runs at grading, not here.*"))
            continue
        if meta.get("grade") and meta.get("solution"):
            meta["grade"] = False  # a written answer: not scored here (the comment says why)
            cells.append(cell)
            if gid in models:
                cells.append(nbformat.v4.new_markdown_cell(
                    "**For your self-assessment, after your own answer: the model answer and the rubric.** "
                    "(A class's feedback never shows them before the instructor releases them.)\n\n" + models[gid]))
            continue
        cells.append(cell)
    where = ("in a bubblewrap sandbox" if report.sandbox is None
             else f"without a sandbox ({report.sandbox}): your own code, run as you")
    which = ("every test, the hidden tests included" if report.all_tests
             else "the visible tests only (the course's solutions/ folder is not here); hidden tests run at grading")
    cells.insert(0, nbformat.v4.new_markdown_cell(
        f"**make check**: your notebook `{Path(report.notebook).name}` was graded {where}, with {which}. "
        f"{report.verdict()}"))
    shown.cells = cells


def check(assignment: str, notebook: Path | None = None, course: Path = ROOT, out: Path | None = None,
          unsafe: bool = False, limits: sandbox.Limits | None = None) -> Report:
    """Grade one notebook as ``make grade`` would; write the page and result.json under ``out``
    (default ``<course>/build/check/<assignment>``); return the report."""
    course = Path(course).resolve()
    release_path = course / "assignments" / assignment / f"{assignment}.ipynb"
    if not release_path.is_file():
        ids = sorted(p.name for p in (course / "assignments").iterdir()) if (course / "assignments").is_dir() else []
        raise CheckError(f"no assignment {assignment!r} under {course / 'assignments'} (ids: {' '.join(ids)})")
    notebook = Path(notebook) if notebook else release_path
    if not notebook.is_file():
        raise CheckError(f"no notebook {notebook}: pass NOTEBOOK=<path> (make check) or --notebook")
    source_path = course / "solutions" / assignment / f"{assignment}.ipynb"
    all_tests = source_path.is_file()
    release = nbformat.read(release_path, as_version=4)
    source = nbformat.read(source_path, as_version=4) if all_tests else visible_source(release)
    try:
        plan.check_source(source)
        policy = reference.policy_of(source, assignment)
    except (plan.PlanError, reference.PolicyError) as exc:
        raise CheckError(f"{source_path if all_tests else release_path}: {exc}") from None
    out = Path(out) if out else course / "build" / "check" / assignment
    out.mkdir(parents=True, exist_ok=True)
    work = out / "work"  # a course of one: the notebook as "submitted", the source beside it
    shutil.rmtree(work, ignore_errors=True)
    (work / "submitted" / LEARNER / assignment).mkdir(parents=True)
    (work / "solutions" / assignment).mkdir(parents=True)
    shutil.copyfile(notebook, work / "submitted" / LEARNER / assignment / f"{assignment}.ipynb")
    nbformat.write(source, work / "solutions" / assignment / f"{assignment}.ipynb")
    scratch = Path(tempfile.mkdtemp(prefix="course-check-"))
    os.chmod(scratch, 0o700)
    replays = Workers("grader.replay", grade.REPLAY_TIMEOUT_S)
    try:
        lib = reference.view(scratch / "lib", policy)
        os.chmod(scratch, 0o711)  # the sandbox's uid reaches the library view, nothing else here
        why_not = "asked for (--unsafe)" if unsafe else sandbox.check(lib)
        settings = grade.Settings(work, assignment, limits or sandbox.Limits(), why_not is not None, scratch, lib)
        result, shown = grade.grade_one(LEARNER, settings, release, source, replays, 0)
    finally:
        replays.close()
        shutil.rmtree(scratch, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)

    hidden = ({_meta(c)["grade_id"] for c in source.cells if plan.is_test(c) and plan.is_hidden(c.source)}
              if all_tests else {_meta(c)["grade_id"] for c in release.cells if plan.is_test(c) and comments_only(c.source)})
    source_cells = {_meta(c).get("grade_id"): c for c in source.cells if _meta(c).get("grade_id")}
    release_cells = {_meta(c).get("grade_id"): c for c in release.cells if _meta(c).get("grade_id")}
    mine = {}
    try:
        for cell in nbformat.read(notebook, as_version=4).cells:
            mine.setdefault(_meta(cell).get("grade_id"), str(cell.source))
    except Exception:  # noqa: BLE001 - not a notebook: grade_one said so already
        pass
    exercises = []
    for title, test_ids, written_ids in exercises_of(release, hidden):
        ex = Exercise(title)
        for gid in test_ids:
            max_points = float(_meta(release_cells[gid]).get("points", 0))
            points, _, message = result.tests.get(gid, (0.0, max_points, "not checked: the notebook could not be graded"))
            ran = all_tests or gid not in hidden
            ex.tests.append(Test(gid, points if ran else 0.0, max_points, message if ran else "", gid in hidden, ran))
        for gid in written_ids:
            is_answered = answered(mine.get(gid, ""), str(release_cells[gid].source))
            model = model_answer(source_cells[gid]) if all_tests and is_answered and gid in source_cells else None
            ex.written.append(Written(gid, float(_meta(release_cells[gid]).get("points", 0)), is_answered, model))
        exercises.append(ex)
    page = out / f"{assignment}.html"
    report = Report(assignment, str(notebook), all_tests, why_not, result.status, result.note, exercises, str(page))
    if shown is not None:
        _annotate(shown, report)
        render_page(shown, report, page)
    else:
        write_atomic(page, grade.failure_page(assignment, result))
    write_atomic(out / "result.json", json.dumps(report.to_json(), indent=1, ensure_ascii=False))
    return report


def summary(report: Report) -> str:
    """What the check prints: where it ran, the score per exercise, each failed test's message,
    the written answers with their model answers, the verdict and the page."""
    lines = [f"make check: {report.assignment} ({report.notebook})"]
    if report.sandbox is None:
        lines.append("Sandbox: bubblewrap (your code ran in the grading sandbox).")
    else:
        lines.append(f"NO SANDBOX: {report.sandbox}. Your notebook's code ran as you, on this machine, "
                     "as it does when you run it yourself.")
    lines.append("Tests: every test, the hidden tests included." if report.all_tests else
                 "Tests: the visible tests only; the course's solutions/ folder is not here, so hidden tests run at grading.")
    if report.note:
        lines.append(f"From the grader: {report.note}")
    width = max([len(e.title) for e in report.exercises] + [20])
    for e in report.exercises:
        lines.append("")
        score = f"{e.score:g} / {e.max_score:g}" if e.tests else "written answer"
        lines.append(f"{e.title:<{width}}  {score}")
        for t in e.tests:
            kind = " (hidden)" if t.hidden else ""
            if not t.ran:
                lines.append(f"  hidden   {t.grade_id}: not run here; it runs at grading")
            elif t.points >= t.max_points:
                lines.append(f"  passed   {t.grade_id}{kind}")
            else:
                lines.append(f"  FAILED   {t.grade_id}{kind} ({t.points:g} / {t.max_points:g}): {t.message}")
        for w in e.written:
            if not w.answered:
                lines.append(f"  written  {w.grade_id} ({w.points:g} points, graded by hand in a class): not answered "
                             "yet; the model answer is shown once you have written yours")
            elif w.model is None:
                lines.append(f"  written  {w.grade_id} ({w.points:g} points, graded by hand in a class): answered; "
                             "no model answer here (no solutions/ folder)")
            else:
                lines.append(f"  written  {w.grade_id} ({w.points:g} points, graded by hand in a class): answered. "
                             "Compare with the rubric and model answer:")
                lines += ["    | " + line for line in w.model.splitlines()]
    lines.append("")
    lines.append(f"Score: {report.score:g} / {report.max_score:g} from the automatic tests"
                 + ("" if report.all_tests else " that ran here") + ". " + report.verdict())
    lines.append(f"Feedback page: {report.page}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("assignment")
    parser.add_argument("--notebook", type=Path, default=None,
                        help="the notebook to check (default: assignments/<id>/<id>.ipynb)")
    parser.add_argument("--course", type=Path, default=ROOT, help="the course folder (default: the one holding this grader)")
    parser.add_argument("--out", type=Path, default=None, help="where the page goes (default: <course>/build/check/<id>)")
    parser.add_argument("--unsafe", action="store_true", help="do not use the sandbox even where it runs")
    args = parser.parse_args(argv)
    try:
        report = check(args.assignment, args.notebook, args.course, args.out, args.unsafe)
    except CheckError as exc:
        print(f"make check: {exc.code}", file=sys.stderr)
        return 2
    print(summary(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
