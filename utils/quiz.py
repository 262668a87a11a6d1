"""Quizzes: question banks in ``quizzes/<lesson>.yml`` rendered as ipywidgets.

A bank has a ``pre`` and a ``post`` part. Each question has an ``id`` unique in
the bank, a ``question``, and ``answers``, each with ``text``, ``explain`` and
optionally ``correct: true``. A question has exactly one correct answer unless it
declares ``multiple: true``; then the student must pick exactly the correct set.
Optional question keys:

* ``kind: predict`` marks a question that asks the student to predict a number,
  a shape or a plot: before the lesson one that the lesson then computes, after
  it a new case of the same computation (the default, ``recall``, is any other
  question: a fact or an idea to recall); the bank lint wants at least three
  predict questions per bank;
* ``notebook_recall: true`` marks a question that asks what a particular cell of
  the lesson printed or did (a number the notebook measured, a choice its code
  made), rather than about the idea; the bank lint allows at most one in ten;
* ``framework: pytorch`` (or ``tensorflow``) shows the question only in that
  framework's notebook, for facts that differ between the two libraries;
* ``section:`` the heading (without its ``#`` marks) of the lesson section the
  question tests, exactly as both twin notebooks write it; a student who misses
  the question is sent there (the bank lint wants one on every question).

A quiz ends with its score and, for each missed question, the section to reread:
the last line of the widget, and ``quiz.summary()`` for every quiz of the kernel.

Maths goes between ``$...$`` in TeX, in questions, answers and explanations
alike: ``'What can $a^\\top \\tanh(W_q q + W_k k)$ do?'``. The widget shows every
text through ``ipywidgets.HTMLMath``, which MathJax typesets in Jupyter and Colab;
the text is HTML-escaped first (``<``, ``>`` and ``&`` show as themselves, MathJax
reads the TeX from the displayed text), so a text holds no HTML. Outside ``$...$``
a text is plain: no ``^``, ``_{`` or ``\\``, and no ``$`` of its own (the bank
tests fail on raw TeX outside ``$...$`` or an odd number of ``$``). In YAML, write a
text with TeX in single quotes (``'$\\tau \\to 0$'``, an apostrophe doubled:
``''``), since in double quotes ``\\t`` is a tab. A ``multiple: true`` question
is shown with "(choose all that apply)"; its text must not say so again.

The options are shown in a shuffled order, the same every time for a given
lesson, part and question (the seed is a CRC-32 of those names, not Python's
salted ``hash``), so that the position of the right answer tells nothing.

    from utils import quiz
    quiz.show("01_soft_attention", "pre")   # in a notebook: the quiz widget
    print(quiz.results_json())               # every quiz answered in this kernel, as JSON
    print(quiz.summary())                    # scores, and the lesson sections to reread
"""
from __future__ import annotations

import html
import json
import os
import random
import zlib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Sequence

import yaml

PARTS = ("pre", "post")
QUIZ_DIR_ENV = "COURSE_QUIZ_DIR"
_BANK_KEYS = {"lesson", "title", "pre", "post"}
_QUESTION_KEYS = {"id", "question", "answers", "multiple", "kind", "framework", "notebook_recall", "section"}
KINDS = ("recall", "predict")
FRAMEWORKS = ("pytorch", "tensorflow")
_ANSWER_KEYS = {"text", "correct", "explain"}


class QuizError(ValueError):
    """A question bank that does not follow the format; the message names the place."""


@dataclass(frozen=True)
class Answer:
    text: str
    correct: bool
    explain: str


@dataclass(frozen=True)
class Question:
    id: str
    question: str
    answers: tuple[Answer, ...]
    multiple: bool = False
    kind: str = "recall"
    framework: str | None = None
    notebook_recall: bool = False
    section: str | None = None

    @property
    def correct_set(self) -> frozenset[int]:
        return frozenset(i for i, a in enumerate(self.answers) if a.correct)

    def check(self, selected: Sequence[int]) -> tuple[bool, str]:
        """Grade a selection of answer indices; return (correct, feedback text)."""
        chosen = frozenset(int(i) for i in selected)
        if not chosen:
            return False, "Pick an answer first."
        if not self.multiple and len(chosen) > 1:
            return False, "Pick exactly one answer."
        bad = [i for i in chosen if not 0 <= i < len(self.answers)]
        if bad:
            raise IndexError(f"{self.id}: answer index {bad[0]} out of range 0..{len(self.answers) - 1}")
        ok = chosen == self.correct_set
        lines = ["Correct!" if ok else "Not quite."]
        for i in sorted(chosen):
            mark = "right" if self.answers[i].correct else "wrong"
            lines.append(f"- You chose \"{self.answers[i].text}\" ({mark}): {self.answers[i].explain}")
        if not ok:
            missed = sorted(self.correct_set - chosen)
            if missed and self.multiple:
                lines.append("You missed: " + "; ".join(f"\"{self.answers[i].text}\"" for i in missed))
        return ok, "\n".join(lines)


@dataclass(frozen=True)
class Bank:
    lesson: str
    title: str
    parts: dict[str, tuple[Question, ...]]


def quiz_dir() -> Path:
    """``$COURSE_QUIZ_DIR``, else the ``quizzes/`` folder beside the ``utils`` package."""
    env = os.environ.get(QUIZ_DIR_ENV)
    return Path(env) if env else Path(__file__).resolve().parent.parent / "quizzes"


def _require(cond: bool, where: str, message: str) -> None:
    if not cond:
        raise QuizError(f"{where}: {message}")


def _parse_question(raw: Any, where: str) -> Question:
    _require(isinstance(raw, dict), where, f"expected a mapping with keys {sorted(_QUESTION_KEYS)}, got {type(raw).__name__}")
    unknown = set(raw) - _QUESTION_KEYS
    _require(not unknown, where, f"unknown keys {sorted(unknown)}; allowed: {sorted(_QUESTION_KEYS)}")
    qid = raw.get("id")
    _require(isinstance(qid, str) and qid.strip() != "", where, "needs a non-empty string 'id'")
    where = f"{where} (id {qid})"
    text = raw.get("question")
    _require(isinstance(text, str) and text.strip() != "", where, "needs a non-empty 'question'")
    multiple = raw.get("multiple", False)
    _require(isinstance(multiple, bool), where, f"'multiple' must be true or false, got {multiple!r}")
    kind = raw.get("kind", "recall")
    _require(kind in KINDS, where, f"'kind' must be one of {KINDS}, got {kind!r}")
    notebook_recall = raw.get("notebook_recall", False)
    _require(isinstance(notebook_recall, bool), where, f"'notebook_recall' must be true or false, got {notebook_recall!r}")
    section = raw.get("section")
    _require(section is None or (isinstance(section, str) and section.strip() != ""), where,
             f"'section' must be the heading of a lesson section, got {section!r}")
    framework = raw.get("framework")
    _require(framework is None or framework in FRAMEWORKS, where, f"'framework' must be one of {FRAMEWORKS}, got {framework!r}")
    answers_raw = raw.get("answers")
    _require(isinstance(answers_raw, list) and len(answers_raw) >= 2, where, "needs a list of at least 2 'answers'")
    answers = []
    for j, a in enumerate(answers_raw):
        aw = f"{where}, answer {j + 1}"
        _require(isinstance(a, dict), aw, "expected a mapping with 'text', 'explain' and optionally 'correct'")
        unknown = set(a) - _ANSWER_KEYS
        _require(not unknown, aw, f"unknown keys {sorted(unknown)}; allowed: {sorted(_ANSWER_KEYS)}")
        _require(isinstance(a.get("text"), str) and a["text"].strip() != "", aw, "needs a non-empty 'text'")
        _require(isinstance(a.get("explain"), str) and a["explain"].strip() != "", aw, "needs a non-empty 'explain' (why it is right or wrong)")
        correct = a.get("correct", False)
        _require(isinstance(correct, bool), aw, f"'correct' must be true or false, got {correct!r}")
        answers.append(Answer(a["text"].strip(), correct, a["explain"].strip()))
    texts = [a.text for a in answers]
    _require(len(set(texts)) == len(texts), where, "two answers have the same text")
    n_correct = sum(a.correct for a in answers)
    if multiple:
        _require(n_correct >= 1, where, "declares multiple: true but marks no answer correct")
    else:
        _require(n_correct == 1, where, f"expected exactly one correct answer (or declare multiple: true), found {n_correct}")
    return Question(qid.strip(), text.strip(), tuple(answers), multiple, kind, framework, notebook_recall,
                    section.strip() if section else None)


def parse_bank(raw: Any, source: str = "<bank>") -> Bank:
    """Validate a loaded YAML mapping and build a ``Bank``; raise ``QuizError`` naming the problem."""
    _require(isinstance(raw, dict), source, "expected a mapping with keys lesson, title, pre, post")
    unknown = set(raw) - _BANK_KEYS
    _require(not unknown, source, f"unknown keys {sorted(unknown)}; allowed: {sorted(_BANK_KEYS)}")
    for key in ("lesson", "title"):
        _require(isinstance(raw.get(key), str) and raw[key].strip() != "", source, f"needs a non-empty '{key}'")
    parts: dict[str, tuple[Question, ...]] = {}
    seen: set[str] = set()
    for part in PARTS:
        items = raw.get(part)
        _require(isinstance(items, list) and len(items) > 0, source, f"needs a non-empty list '{part}'")
        questions = []
        for i, item in enumerate(items):
            q = _parse_question(item, f"{source}, {part} question {i + 1}")
            _require(q.id not in seen, f"{source}, {part} question {i + 1}", f"id {q.id!r} is used twice")
            seen.add(q.id)
            questions.append(q)
        parts[part] = tuple(questions)
    return Bank(raw["lesson"].strip(), raw["title"].strip(), parts)


def load_bank(lesson: str | Path) -> Bank:
    """Load and validate ``quizzes/<lesson>.yml`` (or a path to a bank file)."""
    path = Path(lesson)
    if path.suffix not in (".yml", ".yaml"):
        path = quiz_dir() / f"{lesson}.yml"
    if not path.exists():
        available = sorted(p.stem for p in quiz_dir().glob("*.yml"))
        raise FileNotFoundError(f"quiz bank {path} not found; available lessons: {available}")
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise QuizError(f"{path}: not valid YAML: {exc}") from None
    bank = parse_bank(raw, str(path))
    _require(bank.lesson == path.stem, str(path), f"'lesson' is {bank.lesson!r} but the file is {path.stem!r}")
    return bank


def shuffle_seed(lesson: str, part: str, question_id: str) -> int:
    """A seed that is the same in every Python process (``hash`` of a str is salted)."""
    return zlib.crc32(f"{lesson}/{part}/{question_id}".encode("utf-8"))


def shuffled(q: Question, lesson: str, part: str) -> Question:
    """``q`` with its answers in the display order for this lesson and part."""
    order = list(range(len(q.answers)))
    random.Random(shuffle_seed(lesson, part, q.id)).shuffle(order)
    return replace(q, answers=tuple(q.answers[i] for i in order))


def select_questions(bank: Bank, part: str, framework: str | None) -> tuple[Question, ...]:
    """The questions of one part for a framework's notebook: the shared ones and that
    framework's own. With ``framework=None`` every question is kept."""
    if framework is not None and framework not in FRAMEWORKS:
        raise ValueError(f"framework: expected one of {FRAMEWORKS} or None, got {framework!r}")
    return tuple(q for q in bank.parts[part] if framework is None or q.framework in (None, framework))


# ---------------------------------------------------------------- answers of this kernel

_SHOWN: dict[tuple[str, str], dict] = {}  # (lesson, part) -> the record of the quiz shown last


def _record(lesson: str, part: str, framework: str | None, questions: Sequence[Question]) -> dict:
    rec = {
        "lesson": lesson,
        "part": part,
        "framework": framework,
        "questions": {q.id: {"id": q.id, "number": i + 1, "section": q.section, "kind": q.kind,
                             "selected": [], "correct": None, "attempts": 0}
                      for i, q in enumerate(questions)},
    }
    _SHOWN[(lesson, part)] = rec  # a re-run cell builds fresh widgets: its answers start again
    return rec


def _note_answer(rec: dict, q: Question, chosen: Sequence[int], ok: bool) -> None:
    entry = rec["questions"][q.id]
    entry["selected"] = [q.answers[i].text for i in sorted(chosen)]
    entry["correct"] = ok
    entry["attempts"] += 1


NO_SECTION = "(the lesson; this question names no section)"


def reread(entries: Sequence[dict]) -> list[dict]:
    """The sections to reread for the missed questions among ``entries`` (dicts with
    ``number``, ``section`` and ``correct``, as in ``results()``): one
    ``{"section", "questions"}`` per section, in the order of the quiz, ``questions``
    holding the numbers (as shown, Q1 = 1) of the questions missed on it. A question
    is missed when its latest check was wrong; one not answered yet is not."""
    out: dict[str, list[int]] = {}
    for e in entries:
        if e["correct"] is False:
            out.setdefault(e["section"] or NO_SECTION, []).append(e["number"])
    return [{"section": sec, "questions": nums} for sec, nums in out.items()]


def results() -> dict:
    """Every quiz shown in this kernel, with the student's latest answers.

    ``{"quizzes": [{"lesson", "part", "framework", "score", "answered", "total",
    "reread": [{"section", "questions"}],
    "questions": [{"id", "number", "section", "kind", "selected", "correct", "attempts"}]}]}``;
    ``number`` is the question's number as shown (Q1 = 1), ``selected`` holds the
    texts of the chosen options (the display order is shuffled, so indices would
    mean little), ``correct`` is None while unanswered, ``score`` counts questions
    whose latest check was correct, ``reread`` lists the lesson sections of the
    missed ones (see ``reread``).
    """
    quizzes = []
    for (lesson, part), rec in sorted(_SHOWN.items(), key=lambda kv: (kv[0][0], PARTS.index(kv[0][1]))):
        qs = [dict(e, selected=list(e["selected"])) for e in rec["questions"].values()]
        quizzes.append({
            "lesson": lesson,
            "part": part,
            "framework": rec["framework"],
            "score": sum(e["correct"] is True for e in qs),
            "answered": sum(e["correct"] is not None for e in qs),
            "total": len(qs),
            "reread": reread(qs),
            "questions": qs,
        })
    return {"quizzes": quizzes}


def results_json(student: str | None = None) -> str:
    """``results()`` as one JSON string, to paste into a form or save as a file."""
    data = results()
    if student is not None:
        data = {"student": student, **data}
    return json.dumps(data, ensure_ascii=False, indent=1)


def save_results(path: str | Path, student: str | None = None) -> Path:
    """Write ``results_json(student)`` to ``path`` (e.g. to hand in with an assignment)."""
    path = Path(path)
    path.write_text(results_json(student) + "\n", encoding="utf-8")
    return path


def _numbers(nums: Sequence[int]) -> str:
    return ", ".join(f"Q{n}" for n in nums)


def summary() -> str:
    """A short printable report: per quiz its score, one line per question, and the
    lesson sections to reread for the questions missed."""
    lines = []
    for qz in results()["quizzes"]:
        fw = f" ({qz['framework']})" if qz["framework"] else ""
        lines.append(f"{qz['lesson']} {qz['part']}{fw}: {qz['score']} / {qz['total']} ({qz['answered']} answered)")
        for e in qz["questions"]:
            mark = {True: "right", False: "wrong", None: "not answered"}[e["correct"]]
            chosen = "; ".join(e["selected"])
            lines.append(f"  Q{e['number']} {e['id']}: {mark}" + (f" - {chosen}" if chosen else ""))
        if qz["reread"]:
            lines.append("  To reread:")
            lines.extend(f"    {r['section']} ({_numbers(r['questions'])})" for r in qz["reread"])
        elif qz["answered"] == qz["total"]:
            lines.append("  Every question right: nothing to reread.")
    return "\n".join(lines) if lines else "No quiz has been shown in this kernel yet."


def clear_results() -> None:
    """Forget every quiz shown so far (the tests use it)."""
    _SHOWN.clear()


def collect(sources: Sequence[str | Path]) -> list[dict]:
    """Instructors: one row per student and quiz from exported JSON (file paths or strings).

    Rows: ``student`` (None if not given), ``lesson``, ``part``, ``score``, ``answered``,
    ``total``; ready for ``csv.DictWriter`` or ``pandas.DataFrame``.
    """
    rows = []
    for src in sources:
        text = str(src)
        if not text.lstrip().startswith("{"):
            text = Path(src).read_text(encoding="utf-8")
        data = json.loads(text)
        for qz in data.get("quizzes", []):
            rows.append({"student": data.get("student"), "lesson": qz["lesson"], "part": qz["part"],
                         "score": qz["score"], "answered": qz["answered"], "total": qz["total"]})
    return rows


# ---------------------------------------------------------------- widgets


def _html_text(text: str) -> str:
    """A bank text as ``HTMLMath`` content: HTML-escaped, so ``<``, ``>`` and ``&`` show as
    themselves and no markup gets in; the ``$...$`` spans pass through untouched and
    MathJax typesets them from the displayed text."""
    return html.escape(text)


def _one_at_a_time(ticks: Sequence[Any]) -> None:
    """Ticking one of ``ticks`` unticks the others (a single-choice question)."""

    def untick_others(change: dict) -> None:
        if change["new"]:
            for tick in ticks:
                if tick is not change["owner"]:
                    tick.value = False

    for tick in ticks:
        tick.observe(untick_others, names="value")


def _question_widget(number: int, q: Question, tally: dict, on_change: Any, rec: dict | None = None):
    """One question: a header, one row per option (a tick box without text and the
    option's text as ``HTMLMath``, so that maths renders), Check, and the feedback.

    Test hooks: ``box._course_select`` holds the tick boxes in display order (set
    ``.value = True`` to pick an option), ``box._course_check`` presses Check,
    ``box._course_question`` is the question with its answers in display order.
    """
    import ipywidgets as w

    ticks = [w.Checkbox(value=False, description="", indent=False,
                        layout=w.Layout(width="auto", flex="0 0 auto", margin="0 8px 0 0"))
             for _ in q.answers]
    rows = [w.HBox([tick, w.HTMLMath(_html_text(a.text))], layout=w.Layout(align_items="center"))
            for tick, a in zip(ticks, q.answers)]
    if q.multiple:
        prompt = " <i>(choose all that apply)</i>"
    else:
        _one_at_a_time(ticks)
        prompt = " <i>(choose one)</i>"
    selector = w.VBox(rows)
    if q.kind == "predict":
        prompt += " <i>(work it out first, then compare with what the lesson computes)</i>"
    button = w.Button(description="Check", button_style="primary")
    feedback = w.HTMLMath()

    def check(_: Any) -> None:
        chosen = [i for i, tick in enumerate(ticks) if tick.value]
        ok, text = q.check(chosen)
        colour = "#1a7f37" if ok else "#b42318"
        if chosen and not ok and q.section:
            text += f"\nTo reread: {q.section}"
        feedback.value = f"<div style='color:{colour}; white-space:pre-wrap'>{_html_text(text)}</div>"
        if chosen:  # "pick an answer first" is not an attempt
            tally[q.id] = ok
            if rec is not None:
                _note_answer(rec, q, chosen, ok)
        on_change()

    button.on_click(check)
    tag = {"pytorch": "[PyTorch] ", "tensorflow": "[TensorFlow] "}.get(q.framework or "", "")
    header = w.HTMLMath(f"<b>Q{number}.</b> {_html_text(tag + q.question)}{prompt}")
    box = w.VBox([header, selector, button, feedback], layout=w.Layout(margin="0 0 12px 0"))
    box._course_check = check  # lets tests press the button without a browser
    box._course_select = tuple(ticks)  # the tick boxes, in display order
    box._course_question = q  # the question as displayed (answers in display order)
    return box


def ending(questions: Sequence[Question], tally: dict[str, bool]) -> str:
    """The last line of a quiz widget (HTML): the score and, for each question missed
    so far (``tally``: question id -> latest check right), the section to reread."""
    done = len(tally) == len(questions)
    text = (f"<b>{'Quiz done. ' if done else ''}Score: {sum(tally.values())} / {len(questions)}</b>"
            f" ({len(tally)} answered)")
    entries = [{"number": i + 1, "section": q.section, "correct": tally.get(q.id)} for i, q in enumerate(questions)]
    missed = reread(entries)
    if missed:
        items = "".join(f"<li>{_html_text(r['section'])} ({_numbers(r['questions'])})</li>" for r in missed)
        text += f"<br>To reread in the lesson:<ul>{items}</ul>"
    elif done:
        text += "<br>Every question right: nothing to reread."
    return text


def show(lesson: str, part: str = "pre", framework: str | None = None):
    """Build (and return) the interactive quiz for one part of a lesson's bank.

    ``framework`` picks the framework-specific questions; by default it is the one
    given to ``utils.runtime.setup`` in this kernel (every lesson calls it first),
    and without either all questions are shown. Answers are kept for ``results()``.
    """
    if part not in PARTS:
        raise ValueError(f"part: expected one of {PARTS}, got {part!r}")
    import ipywidgets as w

    if framework is None:
        from utils import runtime

        framework = runtime.current_framework()
    bank = load_bank(lesson)
    questions = [shuffled(q, bank.lesson, part) for q in select_questions(bank, part, framework)]
    rec = _record(bank.lesson, part, framework, questions)
    tally: dict[str, bool] = {}
    score = w.HTMLMath()  # section headings may hold maths

    def update() -> None:
        score.value = ending(questions, tally)

    items = [_question_widget(i + 1, q, tally, update, rec) for i, q in enumerate(questions)]
    update()
    title = w.HTML(f"<h3>{html.escape(bank.title)}: {'pre-lesson' if part == 'pre' else 'post-lesson'} quiz</h3>")
    return w.VBox([title, *items, score])
