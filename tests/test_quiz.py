"""Quiz banks measure learning: enough questions, predictions, no answer-length or
position cue; maths written as TeX between $...$ and rendered by the widget; options
shuffled reproducibly; answers exportable for instructors; every lesson ends by
pointing to its assignment."""
from __future__ import annotations

import html
import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tools.sync_notebooks import lessons
from utils import quiz, runtime

ROOT = Path(__file__).resolve().parent.parent
BANKS = sorted(p.stem for p in quiz.quiz_dir().glob("*.yml"))
LESSONS = lessons()
MIN_PRE, MIN_POST, MIN_PREDICT = 4, 6, 3
MAX_NOTEBOOK_RECALL_SHARE = 0.1  # at most one question in ten asks what a cell printed or did


def _all_questions(bank: quiz.Bank) -> list[quiz.Question]:
    return [q for part in quiz.PARTS for q in bank.parts[part]]


def split_math(text: str) -> list[tuple[bool, str]]:
    """``text`` as (is_maths, chunk) pieces: the chunks between ``$`` signs alternate
    between plain text and TeX. An odd number of ``$`` leaves the last span open."""
    return [(i % 2 == 1, chunk) for i, chunk in enumerate(text.split("$"))]


_TEX_WORD = re.compile(r"\\(?:operatorname|mathrm|text|mathit|mathbf)\{([^{}]*)\}")  # \text{step} reads "step"
_TEX_NAMED = re.compile(r"\\(sin|cos|tan|tanh|exp|log|ln|max|min|det)\b")  # \tanh reads "tanh"
_TEX_SPACE = re.compile(r"\\[,;:! ]")  # \, and friends: spacing, nothing to read
_TEX_SYMBOL = re.compile(r"\\[A-Za-z]+")  # \top, \tau, \cdot, \sqrt, \to: one symbol each


def text_as_read(text: str) -> str:
    """What a student reads once MathJax has typeset ``text``: no ``$``, a function
    name such as ``\\tanh`` as its name, any other command (``\\top``, ``\\sqrt``) as one
    symbol, no braces and no ``^``/``_`` markers. ``$q \\cdot k / \\sqrt{D}$`` reads as
    ``q • k / •D``, as long as ``q·k / √D``."""
    out = []
    for is_math, chunk in split_math(text):
        if is_math:
            chunk = _TEX_WORD.sub(r"\1", chunk)
            chunk = _TEX_NAMED.sub(r"\1", chunk)
            chunk = _TEX_SPACE.sub("", chunk)
            chunk = _TEX_SYMBOL.sub("•", chunk)
            chunk = re.sub(r"[{}^_]", "", chunk)
        out.append(chunk)
    return "".join(out)


def _longest_is_correct(q: quiz.Question) -> bool:
    """The longest option (by characters as read, TeX markup aside) is a right one; a
    tie for longest counts too."""
    longest = max(len(text_as_read(a.text)) for a in q.answers)
    return any(a.correct and len(text_as_read(a.text)) == longest for a in q.answers)


def _bank_texts(bank: quiz.Bank):
    """(place, text) for every question, answer and explanation of a bank."""
    for q in _all_questions(bank):
        yield f"{bank.lesson} {q.id} question", q.question
        for j, a in enumerate(q.answers):
            yield f"{bank.lesson} {q.id} answer {j + 1}", a.text
            yield f"{bank.lesson} {q.id} answer {j + 1} explain", a.explain


# ---------------------------------------------------------------- bank lints


def test_banks_found() -> None:
    assert BANKS and set(LESSONS) <= set(BANKS)


def check_counts(bank: quiz.Bank) -> None:
    for fw in quiz.FRAMEWORKS:
        pre = quiz.select_questions(bank, "pre", fw)
        post = quiz.select_questions(bank, "post", fw)
        predict = [q.id for q in pre + post if q.kind == "predict"]
        assert len(pre) >= MIN_PRE, f"{bank.lesson} ({fw}): {len(pre)} pre-lesson questions, need {MIN_PRE}"
        assert len(post) >= MIN_POST, f"{bank.lesson} ({fw}): {len(post)} post-lesson questions, need {MIN_POST}"
        assert len(predict) >= MIN_PREDICT, (
            f"{bank.lesson} ({fw}): {len(predict)} 'kind: predict' questions {predict}, need {MIN_PREDICT}"
        )


def check_notebook_recall(bank: quiz.Bank) -> None:
    """Questions ask about the idea: at most one in ten (per framework's notebook) is
    marked ``notebook_recall: true``, a question about what a particular cell printed or did."""
    for fw in quiz.FRAMEWORKS:
        qs = [q for part in quiz.PARTS for q in quiz.select_questions(bank, part, fw)]
        recall = [q.id for q in qs if q.notebook_recall]
        assert len(recall) <= MAX_NOTEBOOK_RECALL_SHARE * len(qs), (
            f"{bank.lesson} ({fw}): {len(recall)} of {len(qs)} questions are notebook recall {recall}; "
            f"at most {int(MAX_NOTEBOOK_RECALL_SHARE * len(qs))} may ask what a cell printed or did, "
            "the rest ask about the idea"
        )


def check_length_cue(bank: quiz.Bank) -> None:
    qs = _all_questions(bank)
    longest = [q.id for q in qs if _longest_is_correct(q)]
    assert 3 * len(longest) <= len(qs), (
        f"{bank.lesson}: the right answer is the longest option in {len(longest)} of {len(qs)} questions "
        f"(at most a third allowed): {longest}"
    )
    assert longest, f"{bank.lesson}: the right answer is never the longest option, which is a cue too"


RAW_TEX = re.compile(r"\^|_\{|\\")  # ^, _{ or a backslash: TeX that belongs between $...$


def check_maths_in_dollars(bank: quiz.Bank) -> None:
    """Every maths expression is TeX between $...$: the $ signs pair up, and outside
    them no text holds raw TeX (``a^T``, ``s_{i-1}``, ``\\tau``) that would show as typed."""
    for where, text in _bank_texts(bank):
        assert text.count("$") % 2 == 0, f"{where}: an odd number of $ (a maths span is not closed): {text!r}"
        for is_math, chunk in split_math(text):
            if is_math:
                assert chunk.strip(), f"{where}: an empty $$ span: {text!r}"
            else:
                raw = RAW_TEX.search(chunk)
                assert raw is None, (
                    f"{where}: {raw.group()!r} outside $...$; write maths as TeX between $ signs: {text!r}"
                )


def check_choose_all_said_once(bank: quiz.Bank) -> None:
    """The widget adds "(choose all that apply)" to a multiple-answer question itself."""
    for q in _all_questions(bank):
        assert "choose all that apply" not in q.question.lower(), (
            f"{bank.lesson} {q.id}: the question says \"choose all that apply\"; the widget adds it already"
        )


def check_position_cue(bank: quiz.Bank) -> None:
    qs = _all_questions(bank)
    first_right = Counter(min(q.correct_set) for q in qs)
    position, count = first_right.most_common(1)[0]
    assert 2 * count <= len(qs), (
        f"{bank.lesson}: the right answer is option {position + 1} in the file in {count} of {len(qs)} questions"
    )


HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$")


def lesson_headings(lesson: str, framework: str) -> set[str]:
    """The headings of a lesson notebook, without their # marks."""
    nb = json.loads((ROOT / "lessons" / lesson / f"{lesson}_{framework}.ipynb").read_text(encoding="utf-8"))
    return {m.group(1) for c in nb["cells"] if c["cell_type"] == "markdown"
            for line in "".join(c["source"]).splitlines() if (m := HEADING.match(line))}


def check_sections(bank: quiz.Bank, headings: dict[str, set[str]] | None = None) -> None:
    """Every question names the lesson section it tests (the quiz sends a student who
    misses it there), and that section is a heading of both twin notebooks."""
    if headings is None:
        headings = {fw: lesson_headings(bank.lesson, fw) for fw in quiz.FRAMEWORKS}
    for q in _all_questions(bank):
        assert q.section, f"{bank.lesson} {q.id}: no 'section:' (the lesson heading to reread when it is missed)"
        for fw, heads in headings.items():
            assert q.section in heads, (
                f"{bank.lesson} {q.id}: section {q.section!r} is not a heading of the {fw} notebook"
            )


# Every committed bank passes every lint: enough questions and predictions, few
# questions about what a notebook cell printed, no length or position cue, maths as TeX between dollars, "choose all that apply" left to the widget.
BANK_LINTS = [check_counts, check_notebook_recall, check_sections, check_length_cue, check_position_cue, check_maths_in_dollars,
              check_choose_all_said_once]


@pytest.mark.parametrize("lint", BANK_LINTS, ids=[f.__name__ for f in BANK_LINTS])
@pytest.mark.parametrize("lesson", BANKS)
def test_bank_passes_the_lint(lesson: str, lint) -> None:
    lint(quiz.load_bank(lesson))


def _q(qid: str, right: str, wrong: str, right_first: bool = True, **extra) -> dict:
    answers = [{"text": right, "correct": True, "explain": "yes"}, {"text": wrong, "explain": "no"}]
    return {"id": qid, "question": "?", "answers": answers if right_first else answers[::-1], **extra}


def test_the_lints_catch_a_patterned_bank() -> None:
    """Each lint fails on a bank built to break it."""
    pre = [_q(f"p{i}", "right answer, long", "wrong", i % 2 == 0) for i in range(4)]
    post = [_q(f"q{i}", "right answer, long", "wrong", i % 2 == 0, kind="predict") for i in range(6)]
    bank = quiz.parse_bank({"lesson": "x", "title": "X", "pre": pre, "post": post})
    check_counts(bank)
    check_position_cue(bank)
    with pytest.raises(AssertionError, match="longest option in 10 of 10"):
        check_length_cue(bank)

    short = quiz.parse_bank({"lesson": "x", "title": "X", "pre": pre[:3], "post": post})
    with pytest.raises(AssertionError, match="3 pre-lesson questions"):
        check_counts(short)
    recall = quiz.parse_bank({"lesson": "x", "title": "X", "pre": pre, "post": [dict(q, kind="recall") for q in post]})
    with pytest.raises(AssertionError, match="0 'kind: predict'"):
        check_counts(recall)
    two = quiz.parse_bank({"lesson": "x", "title": "X", "pre": pre,
                           "post": post[:2] + [dict(q, kind="recall") for q in post[2:]]})
    with pytest.raises(AssertionError, match=r"2 'kind: predict' questions \['q0', 'q1'\], need 3"):
        check_counts(two)
    # a predict question before the lesson counts too: 1 + 2 = 3 is enough
    check_counts(quiz.parse_bank({"lesson": "x", "title": "X", "pre": [dict(pre[0], kind="predict")] + pre[1:],
                                  "post": post[:2] + [dict(q, kind="recall") for q in post[2:]]}))
    # a framework-only question counts for that framework alone
    one_fw = quiz.parse_bank({"lesson": "x", "title": "X", "pre": pre,
                              "post": post[:5] + [dict(post[5], framework="pytorch")]})
    with pytest.raises(AssertionError, match=r"\(tensorflow\): 5 post-lesson"):
        check_counts(one_fw)

    first = [_q(f"p{i}", "right", "a wrong answer") for i in range(4)]
    always_first = quiz.parse_bank({"lesson": "x", "title": "X", "pre": first, "post": [_q("q0", "right", "a wrong answer")]})
    with pytest.raises(AssertionError, match="option 1 in the file"):
        check_position_cue(always_first)
    with pytest.raises(AssertionError, match="never the longest"):
        check_length_cue(always_first)


def test_the_notebook_recall_lint_fails_on_more_than_one_in_ten() -> None:
    """A made-up bank of 10 questions may mark one as notebook recall, not two; a
    framework-only question counts in its own notebook."""
    pre = [_q(f"p{i}", "right", "a wrong answer") for i in range(4)]
    post = [_q(f"q{i}", "right", "a wrong answer", kind="predict") for i in range(6)]

    def bank(recall_ids, extra=()):
        mark = lambda q: dict(q, notebook_recall=True) if q["id"] in recall_ids else q
        return quiz.parse_bank({"lesson": "x", "title": "X", "pre": [mark(q) for q in pre],
                                "post": [mark(q) for q in post] + list(extra)})

    check_notebook_recall(bank(set()))
    check_notebook_recall(bank({"q0"}))  # 1 of 10
    with pytest.raises(AssertionError, match=r"\(pytorch\): 2 of 10 questions are notebook recall \['p1', 'q3'\]"):
        check_notebook_recall(bank({"p1", "q3"}))
    # 2 of 11 in the PyTorch notebook (a torch-only recall question), 1 of 10 in TensorFlow's
    torch_only = dict(_q("q-torch", "right", "a wrong answer"), framework="pytorch", notebook_recall=True)
    with pytest.raises(AssertionError, match=r"\(pytorch\): 2 of 11"):
        check_notebook_recall(bank({"q0"}, [torch_only]))
    with pytest.raises(quiz.QuizError, match="'notebook_recall' must be true or false"):
        quiz.parse_bank({"lesson": "x", "title": "X", "pre": [dict(pre[0], notebook_recall="yes")], "post": post})


def test_the_section_lint_fails_on_a_missing_or_unknown_section() -> None:
    heads = {"pytorch": {"1. Softmax", "2. Lookup"}, "tensorflow": {"1. Softmax", "2. Look-up"}}
    pre = [_q("p0", "right", "wrong", section="1. Softmax")]
    bank = lambda post: quiz.parse_bank({"lesson": "x", "title": "X", "pre": pre, "post": post})  # noqa: E731
    check_sections(bank([_q("q0", "right", "wrong", section="1. Softmax")]), heads)
    with pytest.raises(AssertionError, match="x q0: no 'section:'"):
        check_sections(bank([_q("q0", "right", "wrong")]), heads)
    with pytest.raises(AssertionError, match="x q0: section '3. Masks' is not a heading of the pytorch notebook"):
        check_sections(bank([_q("q0", "right", "wrong", section="3. Masks")]), heads)
    with pytest.raises(AssertionError, match="'2. Lookup' is not a heading of the tensorflow notebook"):
        check_sections(bank([_q("q0", "right", "wrong", section="2. Lookup")]), heads)
    with pytest.raises(quiz.QuizError, match="'section' must be the heading"):
        bank([_q("q0", "right", "wrong", section="  ")])
    assert "Masked softmax: sequences of different lengths" in " ".join(lesson_headings("01_soft_attention", "tensorflow"))


def _one_question_bank(question: str, right: str, wrong: str, explain: str = "yes", **extra) -> quiz.Bank:
    q = _q("p1", right, wrong, **extra)
    q["question"] = question
    q["answers"][0]["explain"] = explain
    return quiz.parse_bank({"lesson": "x", "title": "X", "pre": [q], "post": [_q("q1", "right", "wrong")]})


@pytest.mark.parametrize("question,right,explain,message", [
    ("What can a^T tanh(W_q q + W_k k) do?", "right", "yes", r"x p1 question: '\^' outside \$"),
    ("Which index?", "e_ij = v^T tanh(W_q s + W_k h_j)", "yes", r"x p1 answer 1: '\^' outside \$"),
    ("Which index?", "right", r"softmax over $j$, i.e. s_{i-1}", r"x p1 answer 1 explain: '_\{' outside \$"),
    ("What happens as \\tau goes to 0?", "right", "yes", r"'\\\\' outside \$"),
    ("What happens as $\\tau goes to 0?", "right", "yes", r"x p1 question: an odd number of \$"),
    ("Which is right?", "right", "it costs $5", r"x p1 answer 1 explain: an odd number of \$"),
    ("Which is right, $$ or not?", "right", "yes", r"an empty \$\$ span"),
])
def test_the_maths_lint_catches_raw_tex(question, right, explain, message) -> None:
    """Raw TeX outside $...$, in a question, an answer or an explanation, fails the lint."""
    check_maths_in_dollars(_one_question_bank(r"What can $a^\top \tanh(W_q q + W_k k)$ do?", "$u^{k+1} = u^k + o^k$",
                                              r"$e_{ij}$ and $\omega_0$", r"$(512 \cdot 4000)^{-0.5} \approx 7 \cdot 10^{-4}$"))
    with pytest.raises(AssertionError, match=message):
        check_maths_in_dollars(_one_question_bank(question, right, "wrong", explain))


def test_the_lint_catches_choose_all_said_twice() -> None:
    said = _one_question_bank("Which hold? (Choose all that apply.)", "right", "wrong", multiple=True)
    with pytest.raises(AssertionError, match="x p1: the question says \"choose all that apply\""):
        check_choose_all_said_once(said)
    check_choose_all_said_once(_one_question_bank("Which hold?", "right", "wrong", multiple=True))


def test_length_cue_measures_the_text_as_read() -> None:
    """TeX markup does not count: the right answer below is longer as typed, shorter as read."""
    q = _one_question_bank("?", r"$a^\top \tanh(W_q q + W_k k)$", "a wrong one, longer as read").parts["pre"][0]
    assert len(q.answers[0].text) > len(q.answers[1].text)
    assert not _longest_is_correct(q)
    assert text_as_read(r"$a^\top \tanh(W_q q + W_k k)$") == "a• tanh(Wq q + Wk k)"
    assert text_as_read(r"$q \cdot k / \sqrt{D}$ and $\mathrm{lp}(Y)$") == "q • k / •D and lp(Y)"
    plain = _one_question_bank("?", "a right answer, the longest one", "a wrong answer").parts["pre"][0]
    assert _longest_is_correct(plain)


@pytest.mark.parametrize("change,message", [
    (lambda q: q.update(kind="guess"), "'kind' must be one of"),
    (lambda q: q.update(framework="jax"), "'framework' must be one of"),
])
def test_kind_and_framework_are_validated(change, message) -> None:
    q = _q("p1", "right", "wrong")
    change(q)
    with pytest.raises(quiz.QuizError, match=message):
        quiz.parse_bank({"lesson": "x", "title": "X", "pre": [q], "post": [_q("q1", "right", "wrong")]})


# ---------------------------------------------------------------- post-lesson items ask about new cases
#
# A post-lesson question that reuses the example the lesson worked through (its numbers,
# its sentence) tests memory of the notebook, not the idea. For each bank, the lesson's
# distinctive printed examples: a post item's question and options (not its explanations,
# which may point back to the lesson for contrast) must not contain them, unless the item
# is honestly marked ``notebook_recall``. Each example must also be found in both twin
# notebooks (in the notebook's own wording where it differs), so the list stays the lesson's.

_NUMBER = re.compile(r"-?\d{1,3}(?:,\d{3})+(?![\d.])|-?\d+(?:\.\d+)?")  # 1,024 is one number
_SUBSCRIPT = re.compile(r"_(?:\{[^{}]*\}|\w)")  # h_0, T_{k}: an index, not a number of the example


def numbers_in(text: str) -> list[float]:
    """The numbers of ``text`` in order, TeX subscripts left out: ``$h_2 = (-1, 0)$`` gives [-1, 0]."""
    return [float(n.replace(",", "")) for n in _NUMBER.findall(_SUBSCRIPT.sub("", text))]


def has_run(text: str, run: tuple[float, ...], tol: float = 6e-4) -> bool:
    """``run`` stands in ``text`` as consecutive numbers (rounded to 3 places counts: 0.841 is 0.84147)."""
    nums, n = numbers_in(text), len(run)
    return any(all(abs(a - b) <= tol * max(1.0, abs(b)) for a, b in zip(nums[i:i + n], run))
               for i in range(len(nums) - n + 1))


def contains(text: str, pattern) -> bool:
    """A pattern is a tuple of numbers (a run, see ``has_run``) or a phrase (case-insensitive)."""
    return has_run(text, pattern) if isinstance(pattern, tuple) else pattern.lower() in text.lower()


# bank -> [(what the lesson printed, patterns that must all be in one text, notebook wording or None)]
LESSON_EXAMPLES: dict[str, list[tuple[str, tuple, str | None]]] = {
    "01_soft_attention": [
        ("the scores (2, 1, 0)", ((2, 1, 0),), None),
        ("the fruit shop's keys, mango (1, 1) and grape (0.3, -1)", ((1, 1, 0.3, -1),), None),
        ("the fruit shop", ("mango",), None),
        ("the masked batch (2, 3, 5)", ((2, 3, 5),), None),
        ("the measured width D = 256", ((256,),), None),
    ],
    "02_seq2seq_attention": [
        ("the additive score by hand: h = (1, 0), (0, 1), (-1, 0)", ((1, 0, 0, 1, -1, 0),), None),
    ],
    "03_memory_networks": [
        ("the hop by hand: m = (2, 0), (0, 1)", ((2, 0, 0, 1),), None),
        ("the hop by hand: c = (1, 1), (0, -1)", ((1, 1, 0, -1),), None),
        ("the read head's key (2, 0.1, 0)", ((2, 0.1, 0),), None),
        ("the read head's row (0.7, 0.7, 0)", ((0.7, 0.7, 0),), None),
        ("the DNC usage (0.5, 0.1, 1.0, 0.3)", ((0.5, 0.1, 1.0, 0.3),), None),
    ],
    "04_positional_encoding": [
        ("PE(1) for D = 4: (0.841, 0.540, ...)", ((0.841, 0.540),), None),
        ("the table of 128 positions, D = 64", ((128, 64),), None),
        ("the learned table of 48 rows trained on length 16", ((48, 16),), None),
    ],
    "05_self_attention": [
        ("B, T, D, H = 2, 5, 8, 2", ((2, 5, 8, 2),), None),
        ("the timed weights, B = 4, H = 8, up to T = 1024", ((4, 8), (1024,)), None),
        ("the 11-word sentence", ((11,),), None),
        ("the path length for n = 8, k = 3", ("$n = 8$", "$k = 3$"), None),
    ],
    "06_transformer": [
        ("B, T, D, H, F = 2, 6, 32, 4, 64", ((2, 6, 32, 4, 64),), None),
        ("the schedule's D = 512, warmup = 4000", ((512, 4000),), None),
        ("the causal check, positions 3 and 4", ("positions 3 and 4",), None),
        ("the vocabularies 40 and 30, d_model = 32", ((40, 30, 32),), None),
    ],
    "07_bert": [
        ("river bank and bank account", ("river bank",), None),
        ("the tiny BERT: width 32, 4 heads, 2 layers", ((32,), "4 heads", "2 layers"),
         "d_model=32, num_heads=4, d_ff=64, num_layers=2"),
        ("BERT-base: 12 layers of width 768", ((12, 768),), None),
    ],
    "08_gpt": [
        ("top-p over 0.5, 0.3, 0.15, 0.05", ((0.5, 0.3, 0.15, 0.05),), None),
        ("the GPT-2-small cache: 12 layers, 12 heads of 64, 1,024 tokens", ((12, 12, 64, 1024),), None),
    ],
    "09_efficient_attention": [
        ("the online softmax by hand over (1, 3, 2)", ((1, 3, 2),), None),
        ("associative recall: width 16, 16 pairs, tested up to 32", ((16,), (32,), "pairs"), "NUM_PAIRS = 64, 16, 16"),
    ],
}


def lesson_text(lesson: str, framework: str) -> str:
    """Every cell's source of a lesson notebook, markdown and code, as one text."""
    nb = json.loads((ROOT / "lessons" / lesson / f"{lesson}_{framework}.ipynb").read_text(encoding="utf-8"))
    return "\n".join("".join(c["source"]) for c in nb["cells"])


def check_post_items_use_new_cases(bank: quiz.Bank, examples) -> None:
    """No post item that asks about the idea (not marked notebook_recall) contains one of
    the lesson's printed examples in its question or options."""
    for q in bank.parts["post"]:
        if q.notebook_recall:
            continue
        for place, text in [("question", q.question)] + [(f"option {j + 1}", a.text) for j, a in enumerate(q.answers)]:
            for what, patterns, _ in examples:
                assert not all(contains(text, p) for p in patterns), (
                    f"{bank.lesson} {q.id} {place} reuses the lesson's own example ({what}): {text!r}; "
                    "ask about a new case (new numbers, another example) or mark it notebook_recall"
                )


def test_every_bank_has_its_lessons_examples_listed() -> None:
    assert set(LESSON_EXAMPLES) == set(BANKS)


@pytest.mark.parametrize("lesson", sorted(LESSON_EXAMPLES))
def test_listed_examples_are_the_lessons_own(lesson: str) -> None:
    """Each listed example stands in both twin notebooks: the list names what the lesson printed."""
    for fw in quiz.FRAMEWORKS:
        text = lesson_text(lesson, fw)
        for what, patterns, wording in LESSON_EXAMPLES[lesson]:
            found = wording in text if wording else all(contains(text, p) for p in patterns)
            assert found, f"{lesson} ({fw}): the lesson no longer shows {what}; update LESSON_EXAMPLES"


@pytest.mark.parametrize("lesson", sorted(LESSON_EXAMPLES))
def test_post_items_ask_about_new_cases(lesson: str) -> None:
    check_post_items_use_new_cases(quiz.load_bank(lesson), LESSON_EXAMPLES[lesson])


def test_the_new_case_check_catches_a_reused_example() -> None:
    """A post item with the lesson's numbers fails, whatever the spacing, rounding or TeX
    subscripts; the same item marked notebook_recall, or in the pre-lesson part, passes."""
    assert numbers_in(r"$h_0 = (1, 0)$, $h_1 = (0, 1)$, $h_2 = (-1, 0)$ over 1,024 tokens") == [1, 0, 0, 1, -1, 0, 1024]
    assert has_run("PE(1) = (0.8415, 0.5403, 0.0100)", (0.841, 0.540)) and not has_run("(0.841, 0.54)", (0.841, 0.530))
    examples = [("a lesson example", ((2, 6, 32, 4, 64),), None), ("a sentence", ("river bank", "tired"), None)]

    def bank(question, option="right", **extra):
        q = dict(_q("q1", option, "wrong"), question=question, **extra)
        return quiz.parse_bank({"lesson": "x", "title": "X", "pre": [dict(q, id="p1")], "post": [q]})

    with pytest.raises(AssertionError, match=r"x q1 question reuses the lesson's own example \(a lesson example\)"):
        check_post_items_use_new_cases(bank("An encoder with $B, T, D, H, F = 2, 6, 32, 4, 64$?"), examples)
    with pytest.raises(AssertionError, match=r"x q1 option 1 reuses .*\(a sentence\)"):
        check_post_items_use_new_cases(bank("Which?", option="The river bank, since it was tired"), examples)
    check_post_items_use_new_cases(bank("$B, T, D, H, F = 3, 10, 48, 6, 192$ and the river bank?"), examples)
    check_post_items_use_new_cases(bank("$B, T, D, H, F = 2, 6, 32, 4, 64$?", notebook_recall=True), examples)


# ---------------------------------------------------------------- display order


def test_shuffle_is_a_reproducible_permutation() -> None:
    moved = 0
    for lesson in BANKS:
        bank = quiz.load_bank(lesson)
        for part in quiz.PARTS:
            for q in bank.parts[part]:
                shown = quiz.shuffled(q, lesson, part)
                assert sorted(shown.answers, key=lambda a: a.text) == sorted(q.answers, key=lambda a: a.text)
                assert shown == quiz.shuffled(q, lesson, part), f"{lesson} {q.id}: the order must not change between runs"
                assert shown.correct_set == frozenset(i for i, a in enumerate(shown.answers) if a.correct)
                moved += shown.answers != q.answers
    assert moved > 0, "no question's options were reordered"


def test_shuffle_seed_does_not_depend_on_the_process() -> None:
    """Python's str hash is salted per process; the display order must not be."""
    code = "from utils import quiz; print(quiz.shuffle_seed('05_self_attention', 'post', 'post-split'))"
    env = {**os.environ, "PYTHONHASHSEED": "123", "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env, cwd=ROOT)
    assert int(out.stdout) == quiz.shuffle_seed("05_self_attention", "post", "post-split")


def test_displayed_order_hides_the_right_answer() -> None:
    """Across a bank as shown, the right answer is not always in one place."""
    for lesson in BANKS:
        box = quiz.show(lesson, "post", framework="pytorch")
        positions = [min(item._course_question.correct_set) for item in box.children[1:-1]]
        assert len(set(positions)) > 1, f"{lesson}: the right answer is shown at position {positions[0]} every time"


# ---------------------------------------------------------------- the widget renders maths


def _descendants(widget):
    yield widget
    for child in getattr(widget, "children", ()):
        yield from _descendants(child)


def test_maths_renders_through_htmlmath() -> None:
    """Question, options and feedback are HTMLMath with the $...$ kept for MathJax,
    and the rest of the text escaped."""
    import ipywidgets as w

    bank = _one_question_bank(r"What can $a^\top \tanh(W_q q + W_k k)$ do if $x < y$ & z?",
                              r"$u^{k+1} = u^k + o^k$", "<b>no</b> maths", explain=r"the read $o^k$ is added")
    q = bank.parts["pre"][0]
    item = quiz._question_widget(1, q, {}, lambda: None)
    header, selector, button, feedback = item.children
    assert isinstance(header, w.HTMLMath) and isinstance(feedback, w.HTMLMath)
    assert r"$a^\top \tanh(W_q q + W_k k)$" in header.value
    assert "$x &lt; y$ &amp; z?" in header.value  # escaped; MathJax reads "x < y" from the displayed text
    labels = [row.children[1] for row in selector.children]
    assert all(type(label) is w.HTMLMath for label in labels)
    assert [label.value for label in labels] == [r"$u^{k+1} = u^k + o^k$", "&lt;b&gt;no&lt;/b&gt; maths"]
    assert [tick.description for tick in item._course_select] == ["", ""]  # the text is in the label
    item._course_select[0].value = True
    button.click()
    assert "Correct!" in feedback.value
    assert r"$u^{k+1} = u^k + o^k$" in feedback.value and "the read $o^k$ is added" in feedback.value


def test_every_bank_text_is_shown_as_htmlmath() -> None:
    """In the real quizzes no option text sits in a description that cannot render maths,
    and "(choose all that apply)" appears once, on multiple-answer questions only."""
    import ipywidgets as w

    for lesson in BANKS:
        for part in quiz.PARTS:
            box = quiz.show(lesson, part, framework=None)
            for item in box.children[1:-1]:
                q = item._course_question
                header = item.children[0]
                assert isinstance(header, w.HTMLMath) and html.escape(q.question) in header.value
                assert header.value.lower().count("choose all that apply") == (1 if q.multiple else 0), q.id
                shown = [x.value for x in _descendants(item.children[1]) if isinstance(x, w.HTMLMath)]
                assert shown == [html.escape(a.text) for a in q.answers], q.id
                assert not [x for x in _descendants(item) if isinstance(x, (w.RadioButtons, w.ToggleButtons))]
                assert all(tick.description == "" for tick in item._course_select)
    box = quiz.show("01_soft_attention", "post", framework="pytorch")
    (additive,) = [item for item in box.children[1:-1] if item._course_question.id == "post-additive"]
    assert r"$a^\top \tanh(W_q q + W_k k)$" in additive.children[0].value


def test_single_choice_keeps_one_option_ticked() -> None:
    """Ticking an option of a single-choice question unticks the one ticked before;
    a multiple-answer question keeps every tick."""
    single = _q("p1", "right", "wrong")
    single["answers"].append({"text": "also wrong", "explain": "no"})
    multi = _q("q1", "right", "right too", multiple=True)
    multi["answers"][1]["correct"] = True
    bank = quiz.parse_bank({"lesson": "x", "title": "X", "pre": [single], "post": [multi]})
    tally: dict = {}
    item = quiz._question_widget(1, bank.parts["pre"][0], tally, lambda: None)
    first, second, third = item._course_select
    first.value = True
    second.value = True
    assert [t.value for t in item._course_select] == [False, True, False]
    third.value = True
    assert [t.value for t in item._course_select] == [False, False, True]
    third.value = False  # unticking leaves nothing ticked
    assert [t.value for t in item._course_select] == [False, False, False]
    first.value = True
    item.children[2].click()
    assert tally == {"p1": True} and "Correct!" in item.children[3].value
    assert "(choose one)" in item.children[0].value

    item = quiz._question_widget(2, bank.parts["post"][0], tally, lambda: None)
    for tick in item._course_select:
        tick.value = True
    assert [t.value for t in item._course_select] == [True, True]
    item.children[2].click()
    assert tally["q1"] is True and "(choose all that apply)" in item.children[0].value


# ---------------------------------------------------------------- framework twins


def _shown_ids(box) -> list[str]:
    return [item._course_question.id for item in box.children[1:-1]]


def test_framework_questions_appear_in_their_own_notebook_only(monkeypatch) -> None:
    ids = _shown_ids(quiz.show("05_self_attention", "post", framework="pytorch"))
    assert "post-polarity-torch" in ids and "post-polarity-keras" not in ids
    ids = _shown_ids(quiz.show("05_self_attention", "post", framework="tensorflow"))
    assert "post-polarity-keras" in ids and "post-polarity-torch" not in ids
    # by default the framework given to runtime.setup (every lesson calls it first) decides
    monkeypatch.setattr(runtime, "_current_framework", "tensorflow")
    ids = _shown_ids(quiz.show("05_self_attention", "post"))
    assert "post-polarity-keras" in ids and "post-polarity-torch" not in ids
    monkeypatch.setattr(runtime, "_current_framework", None)
    ids = _shown_ids(quiz.show("05_self_attention", "post"))
    assert {"post-polarity-keras", "post-polarity-torch"} <= set(ids)
    with pytest.raises(ValueError, match="framework"):
        quiz.show("05_self_attention", "post", framework="jax")


def test_framework_questions_come_in_pairs() -> None:
    """A framework-specific question has a twin, so both notebooks ask as many questions."""
    for lesson in BANKS:
        bank = quiz.load_bank(lesson)
        for part in quiz.PARTS:
            sizes = {fw: len(quiz.select_questions(bank, part, fw)) for fw in quiz.FRAMEWORKS}
            assert len(set(sizes.values())) == 1, f"{lesson} {part}: questions per framework {sizes}"


# ---------------------------------------------------------------- exporting answers


def _answer(item, right: bool) -> None:
    """Tick the right option(s) or one wrong one and press the widget's Check button
    (its real click handler)."""
    q = item._course_question
    index = next(i for i, a in enumerate(q.answers) if not a.correct)
    for i, tick in enumerate(item._course_select):
        tick.value = (i in q.correct_set) if right else (i == index)
    item.children[2].click()


def test_results_export_what_was_answered() -> None:
    quiz.clear_results()
    assert "No quiz" in quiz.summary() and quiz.results() == {"quizzes": []}
    box = quiz.show("03_memory_networks", "post", framework="pytorch")
    items = box.children[1:-1]
    _answer(items[0], right=True)
    _answer(items[1], right=False)
    _answer(items[2], right=True)
    _answer(items[2], right=False)  # a second try replaces the first
    items[3].children[2].click()  # Check with nothing selected is not an answer
    assert "Score: 1 /" in box.children[-1].value

    data = quiz.results()
    (qz,) = data["quizzes"]
    assert (qz["lesson"], qz["part"], qz["framework"]) == ("03_memory_networks", "post", "pytorch")
    assert (qz["score"], qz["answered"], qz["total"]) == (1, 3, len(items))
    by_id = {e["id"]: e for e in qz["questions"]}
    first, second, third, fourth = (by_id[item._course_question.id] for item in items[:4])
    assert first["correct"] is True and second["correct"] is False and third["correct"] is False
    assert third["attempts"] == 2 and fourth == {**fourth, "correct": None, "selected": [], "attempts": 0}
    q0 = items[0]._course_question
    assert first["selected"] == [a.text for a in q0.answers if a.correct]
    assert by_id["post-hop-numbers"]["kind"] == "predict"

    text = quiz.results_json(student="ada")
    assert json.loads(text)["student"] == "ada" and json.loads(text)["quizzes"] == data["quizzes"]
    assert "03_memory_networks post (pytorch): 1 /" in quiz.summary()

    quiz.show("01_soft_attention", "pre", framework="pytorch")
    quiz.show("03_memory_networks", "pre", framework="pytorch")
    assert [(q["lesson"], q["part"]) for q in quiz.results()["quizzes"]] == [
        ("01_soft_attention", "pre"), ("03_memory_networks", "pre"), ("03_memory_networks", "post")]
    quiz.show("03_memory_networks", "post", framework="pytorch")  # a re-run cell starts that quiz afresh
    again = next(q for q in quiz.results()["quizzes"] if q["lesson"] == "03_memory_networks" and q["part"] == "post")
    assert again["answered"] == 0


def test_a_quiz_ends_with_its_score_and_the_sections_to_reread() -> None:
    """Missed questions send the student to their lesson sections: in the feedback,
    at the end of the widget, in results() and in summary(); a right second try
    takes the section off the list."""
    quiz.clear_results()
    lesson = "04_positional_encoding"
    box = quiz.show(lesson, "post", framework="tensorflow")
    items, end = box.children[1:-1], box.children[-1]
    qs = [item._course_question for item in items]
    assert all(q.section for q in qs)
    assert end.value.startswith("<b>Score: 0 /") and "reread" not in end.value

    _answer(items[0], right=False)
    assert f"To reread: {qs[0].section}" in items[0].children[3].value
    _answer(items[1], right=True)
    assert "To reread" not in items[1].children[3].value
    wrong = [i for i, q in enumerate(qs) if i > 1 and q.section == qs[0].section]
    other = next(i for i, q in enumerate(qs) if q.section != qs[0].section and i > 1)
    for i in wrong[:1] + [other]:
        _answer(items[i], right=False)
    first_numbers = ", ".join(f"Q{n + 1}" for n in [0] + wrong[:1])
    assert "To reread in the lesson:" in end.value
    assert f"<li>{html.escape(qs[0].section)} ({first_numbers})</li>" in end.value
    assert f"<li>{html.escape(qs[other].section)} (Q{other + 1})</li>" in end.value
    assert "Quiz done" not in end.value

    (qz,) = quiz.results()["quizzes"]
    assert qz["reread"] == [{"section": qs[0].section, "questions": [1] + [n + 1 for n in wrong[:1]]},
                            {"section": qs[other].section, "questions": [other + 1]}]
    text = quiz.summary()
    assert "  To reread:\n" in text and f"    {qs[other].section} (Q{other + 1})" in text
    assert f"  Q1 {qs[0].id}: wrong" in text and f"  Q2 {qs[1].id}: right" in text

    # answering everything right at last: the score is full and nothing is left to reread
    for item in items:
        _answer(item, right=True)
    assert end.value.startswith(f"<b>Quiz done. Score: {len(items)} / {len(items)}</b>")
    assert "nothing to reread" in end.value and "<li>" not in end.value
    assert quiz.results()["quizzes"][0]["reread"] == []
    assert "Every question right: nothing to reread." in quiz.summary()
    quiz.clear_results()


def test_a_section_with_maths_renders_at_the_end() -> None:
    """Lesson 1's section 4a has TeX in its heading: the end of the quiz is HTMLMath."""
    import ipywidgets as w

    quiz.clear_results()
    box = quiz.show("01_soft_attention", "post", framework="pytorch")
    (scale,) = [item for item in box.children[1:-1] if item._course_question.id == "post-scale"]
    _answer(scale, right=False)
    assert isinstance(box.children[-1], w.HTMLMath)
    assert r"4a. Why scale the dot product by $1/\sqrt{D}$?" in box.children[-1].value
    quiz.clear_results()


def test_instructor_collects_exported_files(tmp_path) -> None:
    quiz.clear_results()
    box = quiz.show("06_transformer", "pre", framework="tensorflow")
    for item in box.children[1:-1]:
        _answer(item, right=True)
    path = quiz.save_results(tmp_path / "ada.json", student="ada")
    quiz.clear_results()
    pasted = quiz.results_json(student="bo")  # nothing answered: still a valid export
    rows = quiz.collect([path, pasted])
    assert rows == [{"student": "ada", "lesson": "06_transformer", "part": "pre", "score": len(box.children) - 2,
                     "answered": len(box.children) - 2, "total": len(box.children) - 2}]
    quiz.clear_results()


# ---------------------------------------------------------------- lessons point to their assignments


@pytest.mark.parametrize("lesson", LESSONS)
@pytest.mark.parametrize("framework", ["pytorch", "tensorflow"])
def test_lesson_ends_with_its_assignment(lesson: str, framework: str) -> None:
    nb = json.loads((ROOT / "lessons" / lesson / f"{lesson}_{framework}.ipynb").read_text(encoding="utf-8"))
    tail = "".join("".join(c["source"]) for c in nb["cells"][-3:] if c["cell_type"] == "markdown")
    target = f"assignments/{lesson}_{framework}/{lesson}_{framework}.ipynb"
    assert (ROOT / target).exists()
    assert target in tail, f"{lesson}_{framework}: the last cells should link {target}"
    assert "learning goals" in tail.lower() or "you will" in tail.lower(), (
        f"{lesson}_{framework}: the pointer to the assignment should say what it practises"
    )
