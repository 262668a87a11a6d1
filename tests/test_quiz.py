"""Quiz banks measure learning: enough questions, predictions, no answer-length or
position cue; options shuffled reproducibly; answers exportable for instructors;
every lesson ends by pointing to its assignment."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from utils import quiz, runtime

ROOT = Path(__file__).resolve().parent.parent
BANKS = sorted(p.stem for p in quiz.quiz_dir().glob("*.yml"))
LESSONS = sorted(p.name for p in (ROOT / "lessons").iterdir() if p.is_dir() and p.name[:2].isdigit())
MIN_PRE, MIN_POST, MIN_PREDICT = 4, 6, 2


def _all_questions(bank: quiz.Bank) -> list[quiz.Question]:
    return [q for part in quiz.PARTS for q in bank.parts[part]]


def _longest_is_correct(q: quiz.Question) -> bool:
    """The longest option (by characters) is a right one; a tie for longest counts too."""
    longest = max(len(a.text) for a in q.answers)
    return any(a.correct and len(a.text) == longest for a in q.answers)


# ---------------------------------------------------------------- bank lints


def test_banks_found() -> None:
    assert BANKS and set(LESSONS) <= set(BANKS)


def check_counts(bank: quiz.Bank) -> None:
    for fw in quiz.FRAMEWORKS:
        pre = quiz.select_questions(bank, "pre", fw)
        post = quiz.select_questions(bank, "post", fw)
        predict = [q.id for q in post if q.kind == "predict"]
        assert len(pre) >= MIN_PRE, f"{bank.lesson} ({fw}): {len(pre)} pre-lesson questions, need {MIN_PRE}"
        assert len(post) >= MIN_POST, f"{bank.lesson} ({fw}): {len(post)} post-lesson questions, need {MIN_POST}"
        assert len(predict) >= MIN_PREDICT, (
            f"{bank.lesson} ({fw}): {len(predict)} post-lesson 'kind: predict' questions {predict}, need {MIN_PREDICT}"
        )


def check_length_cue(bank: quiz.Bank) -> None:
    qs = _all_questions(bank)
    longest = [q.id for q in qs if _longest_is_correct(q)]
    assert 3 * len(longest) <= len(qs), (
        f"{bank.lesson}: the right answer is the longest option in {len(longest)} of {len(qs)} questions "
        f"(at most a third allowed): {longest}"
    )
    assert longest, f"{bank.lesson}: the right answer is never the longest option, which is a cue too"


def check_position_cue(bank: quiz.Bank) -> None:
    qs = _all_questions(bank)
    first_right = Counter(min(q.correct_set) for q in qs)
    position, count = first_right.most_common(1)[0]
    assert 2 * count <= len(qs), (
        f"{bank.lesson}: the right answer is option {position + 1} in the file in {count} of {len(qs)} questions"
    )


@pytest.mark.parametrize("lesson", BANKS)
def test_bank_has_enough_questions_and_predictions(lesson: str) -> None:
    check_counts(quiz.load_bank(lesson))


@pytest.mark.parametrize("lesson", BANKS)
def test_answer_length_gives_nothing_away(lesson: str) -> None:
    check_length_cue(quiz.load_bank(lesson))


@pytest.mark.parametrize("lesson", BANKS)
def test_answer_position_in_the_file_varies(lesson: str) -> None:
    check_position_cue(quiz.load_bank(lesson))


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
    with pytest.raises(AssertionError, match="0 post-lesson 'kind: predict'"):
        check_counts(recall)
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


@pytest.mark.parametrize("change,message", [
    (lambda q: q.update(kind="guess"), "'kind' must be one of"),
    (lambda q: q.update(framework="jax"), "'framework' must be one of"),
])
def test_kind_and_framework_are_validated(change, message) -> None:
    q = _q("p1", "right", "wrong")
    change(q)
    with pytest.raises(quiz.QuizError, match=message):
        quiz.parse_bank({"lesson": "x", "title": "X", "pre": [q], "post": [_q("q1", "right", "wrong")]})


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
    """Select an option and press the widget's Check button (its real click handler)."""
    q = item._course_question
    index = min(q.correct_set) if right else next(i for i, a in enumerate(q.answers) if not a.correct)
    selector = item._course_select
    if q.multiple:
        for i, box in enumerate(selector.children):
            box.value = (i in q.correct_set) if right else (i == index)
    else:
        selector.value = index
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
