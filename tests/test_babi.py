"""The bAbI reader, the offline simulator, vectorising and the guarded download.

Offline and fast: the simulator writes the files, hand-written edge cases cover
the format's corners, and the download is exercised with a fake ``urlopen``.
"""
from __future__ import annotations

import hashlib
import io
import re
import tarfile
import urllib.error
from pathlib import Path

import numpy as np
import pytest

from utils.data import babi, babi_sim

EDGE_CASES = """\
1 Mary got the milk there.
2 John moved to the bedroom.
3 Mary picked up the football there.
4 What is Mary carrying? \tmilk,football\t1 3
5 Daniel went to the office.
6 Where is John?\tbedroom\t2
1 The kitchen is north of the hallway.
2 The garden is east of the kitchen.
3 How do you go from the hallway to the garden?\tn,e\t1 2
"""


def _write(tmp_path: Path, text: str, name: str = "qa1_single-supporting-fact_train.txt") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# ----------------------------------------------------------------------------- reader


def test_reader_handles_story_resets_multiword_answers_and_supporting_ids(tmp_path: Path) -> None:
    examples = babi.read_babi_file(_write(tmp_path, EDGE_CASES))
    assert [ex.answer for ex in examples] == ["milk,football", "bedroom", "n,e"]
    first, second, third = examples
    assert first.question == ("what", "is", "mary", "carrying")
    assert first.story_ids == (1, 2, 3) and first.supporting == (1, 3)
    # the question line is not a memory; later statements of the same story are
    assert second.story_ids == (1, 2, 3, 5) and second.story[-1] == ("daniel", "went", "to", "the", "office")
    assert second.supporting_positions() == (1,)
    # ids reset to 1: a new story with only its own statements
    assert third.story_ids == (1, 2) and third.story[0][:2] == ("the", "kitchen")
    assert third.supporting == (1, 2)


@pytest.mark.parametrize(
    "text, line, words",
    [
        ("1 Mary went to the garden.\n2 Where is Mary?\t\t1\n", 2, "answer is missing"),
        ("1 Mary went to the garden.\n2 Where is Mary?\tgarden\n", 2, "supporting-fact ids are missing"),
        ("1 Mary went to the garden.\n3 John went to the office.\n", 2, "expected id 2"),
        ("2 Mary went to the garden.\n", 1, "expected id 1"),
        ("1 Mary went to the garden.\n2 Where is Mary?\tgarden\t2\n", 2, "not statement lines"),
        ("1 Mary went to the garden.\n2 Where is Mary?\tgarden\tone\n", 2, "must be integers"),
        ("Mary went to the garden.\n", 1, "expected '<id> <text>'"),
    ],
)
def test_malformed_files_are_rejected_naming_file_and_line(tmp_path: Path, text: str, line: int, words: str) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(babi.BabiFormatError) as err:
        babi.read_babi_file(path)
    message = str(err.value)
    assert str(path) in message and f"line {line}" in message and words in message, message


def test_unknown_task_and_split_are_rejected(tmp_path: Path) -> None:
    for bad in (0, 21, "1", 2.0, True):
        with pytest.raises(ValueError, match="task: expected a bAbI task number 1..20"):
            babi.task_file(tmp_path, bad)
    with pytest.raises(ValueError, match="split"):
        babi.task_file(tmp_path, 1, "valid")
    with pytest.raises(FileNotFoundError, match="qa3_"):
        babi.task_file(tmp_path, 3)


def test_task_file_accepts_the_archive_root(tmp_path: Path) -> None:
    (tmp_path / "en").mkdir()
    target = _write(tmp_path / "en", "1 Mary went to the garden.\n", "qa1_single-supporting-fact_test.txt")
    assert babi.task_file(tmp_path, 1, "test") == target


def test_validation_split_takes_ten_percent_of_train_without_overlap(tmp_path: Path) -> None:
    folder = babi_sim.write_simulated(tmp_path, tasks=[1], n_train=200, n_test=50)
    data = babi.load_task(folder, 1)
    assert len(data["valid"]) == 20 and len(data["train"]) == 180 and len(data["test"]) == 50
    every = babi.read_babi_file(babi.task_file(folder, 1, "train"))
    key = lambda ex: (ex.story, ex.question, ex.answer)  # noqa: E731
    assert sorted(map(key, data["train"] + data["valid"])) == sorted(map(key, every)), "split lost or duplicated examples"
    again = babi.load_task(folder, 1, seed=1)
    assert list(map(key, again["valid"])) != list(map(key, data["valid"])), "the seed does not change the split"


# ----------------------------------------------------------------------------- simulator


def _solve_where_person(ex: babi.Example) -> tuple[str, int]:
    """An independent solver: the last line that moves the person."""
    person = ex.question[2] if ex.question[0] == "where" else ex.question[1]
    for sid, sentence in zip(reversed(ex.story_ids), reversed(ex.story)):
        if sentence[0] == person:
            return sentence[-1], sid
    raise AssertionError(f"{person} never moved")


def _solve_where_object(ex: babi.Example) -> tuple[str, set[int]]:
    """Replay the story: who holds what, where everyone is."""
    obj = ex.question[-1]
    where: dict[str, tuple[str, int]] = {}
    state: tuple | None = None  # ("held", person, line) or ("dropped", place, line, move line)
    objects = {"apple", "football", "milk"}
    for sid, s in zip(ex.story_ids, ex.story):
        if not objects & set(s):  # a move
            where[s[0]] = (s[-1], sid)
        elif obj in s and s[-1] == "there":  # picked up
            state = ("held", s[0], sid)
        elif obj in s:  # dropped where its holder stands
            place, move = where[s[0]]
            state = ("dropped", place, sid, move)
    assert state is not None, f"{obj} never touched"
    if state[0] == "held":
        place, move = where[state[1]]
        return place, {state[2], move}
    return state[1], {state[2], state[3]}


@pytest.mark.parametrize("task", babi_sim.SIMULATED_TASKS)
def test_simulated_files_parse_and_their_supporting_facts_are_right(tmp_path: Path, task: int) -> None:
    folder = babi_sim.write_simulated(tmp_path, tasks=[task], n_train=120, n_test=30, seed=3)
    examples = babi.read_babi_file(babi.task_file(folder, task, "train"), task=task)
    assert len(examples) >= 120
    answers = set()
    for ex in examples:
        answers.add(ex.answer)
        if task == 1:
            place, sid = _solve_where_person(ex)
            assert (ex.answer, ex.supporting) == (place, (sid,)), ex
        elif task == 6:
            place, sid = _solve_where_person(ex)
            assert ex.answer == ("yes" if ex.question[-1] == place else "no") and ex.supporting == (sid,), ex
        elif task == 2:
            place, support = _solve_where_object(ex)
            assert ex.answer == place and set(ex.supporting) == support, ex
        else:  # 16: target's kind, another of that kind, that one's colour
            target = ex.question[-1]
            kind_line, other_kind, other_colour = (ex.story[p] for p in ex.supporting_positions())
            assert kind_line[0] == target and kind_line[-1] == other_kind[-1] and other_kind[0] != target
            assert other_colour[0] == other_kind[0] and other_colour[-1] == ex.answer and len(other_colour) == 3
            # every other animal of the target's kind has the same colour: the answer is unambiguous
            colours = {s[-1] for s in ex.story if len(s) == 3 and any(
                k[0] == s[0] and k[-1] == kind_line[-1] for k in ex.story if len(k) == 4)}
            assert colours == {ex.answer}, ex
    assert len(answers) >= 2, f"task {task}: the simulator always gives the same answer {answers}"


def test_simulator_is_deterministic_and_rejects_other_tasks(tmp_path: Path) -> None:
    assert babi_sim.simulate_task(2, 30, seed=1) == babi_sim.simulate_task(2, 30, seed=1)
    assert babi_sim.simulate_task(2, 30, seed=1) != babi_sim.simulate_task(2, 30, seed=2)
    with pytest.raises(ValueError, match="simulator writes tasks"):
        babi_sim.simulate_task(3, 10)
    with pytest.raises(ValueError, match="n_questions"):
        babi_sim.simulate_task(1, 0)


def test_simulated_format_matches_the_real_layout(tmp_path: Path) -> None:
    text = babi_sim.simulate_task(16, 3)
    assert re.fullmatch(r"(\d+ [^\t\n]+(\t[a-z,]+\t\d+( \d+)*)?\n)+", text), text


# ----------------------------------------------------------------------------- vectorising


def test_vectorize_puts_the_newest_sentence_first_and_marks_supporting_slots(tmp_path: Path) -> None:
    examples = babi.read_babi_file(_write(tmp_path, EDGE_CASES))
    vocab = babi.build_vocab(examples)
    assert vocab.words[0] == "<pad>" and "milk,football" in vocab.index
    arrays = babi.vectorize(examples, vocab, memory_size=3)
    assert arrays["stories"].shape == (3, 3, 10) and arrays["queries"].shape == (3, 10)
    newest = [vocab.words[i] for i in arrays["stories"][1, 0] if i]
    assert newest == ["daniel", "went", "to", "the", "office"]
    # example 2 has 4 statements but only 3 slots: the oldest (id 1) fell out
    assert arrays["supporting"][1].tolist() == [False, False, True]
    assert arrays["supporting"][0].tolist() == [True, False, True]
    assert vocab.words[arrays["answers"][0]] == "milk,football"
    with pytest.raises(ValueError, match="sentence_len: expected at least 10"):
        babi.vectorize(examples, vocab, sentence_len=4)


def test_time_noise_keeps_sentence_order_and_only_inserts_empty_slots() -> None:
    rng = np.random.default_rng(0)
    stories = np.zeros((50, 20, 3), dtype=np.int64)
    for n in range(50):
        k = 1 + n % 12
        stories[n, :k, 0] = np.arange(1, k + 1)  # sentence i holds the word i
    noisy = babi.add_time_noise(stories, rng, 0.3)
    moved = 0
    for n in range(50):
        words = noisy[n, :, 0]
        kept = words[words != 0]
        assert list(kept) == list(range(1, len(kept) + 1)), words  # order kept, newest first
        assert len(kept) == (stories[n, :, 0] != 0).sum(), "a sentence was lost although there was room"
        moved += int((words[: len(kept)] == 0).any())
    assert moved > 10, "with 30% noise most stories should get an empty slot in between"
    with pytest.raises(ValueError, match="stories"):
        babi.add_time_noise(stories[0], rng)


def _time_noise_one_story_at_a_time(stories: np.ndarray, rng: np.random.Generator, fraction: float) -> np.ndarray:
    """RN as the definition reads: per story, Binomial(k, fraction) empty memories at random places."""
    out = np.zeros_like(stories)
    for n, story in enumerate(stories):
        k = int((story != 0).any(-1).sum())
        extra = int(rng.binomial(k, fraction))
        empty = rng.choice(k + extra, size=extra, replace=False)
        slots = np.setdiff1d(np.arange(k + extra), empty)  # where the sentences go, in order
        keep = slots < len(story)
        out[n, slots[keep]] = story[:k][keep]
    return out


def test_time_noise_has_the_distribution_of_the_one_story_at_a_time_definition() -> None:
    """How often each slot is empty and how many sentences fall out match the plain per-story loop."""
    k, n, M = 8, 6000, 10  # 8 sentences in 10 slots: some fall out past the last slot
    stories = np.zeros((n, M, 2), dtype=np.int64)
    stories[:, :k, 0] = np.arange(1, k + 1)
    fast = babi.add_time_noise(stories, np.random.default_rng(1), 0.2)[:, :, 0]
    slow = _time_noise_one_story_at_a_time(stories, np.random.default_rng(2), 0.2)[:, :, 0]
    for name, f in (("empty per slot", lambda w: (w == 0).mean(0)), ("sentence 1 per slot", lambda w: (w == 1).mean(0)),
                    ("sentences kept", lambda w: np.array([(w != 0).sum(1).mean() / k]))):
        got, want = f(fast), f(slow)
        assert np.abs(got - want).max() < 0.03, f"{name}: {np.round(got, 3)} against {np.round(want, 3)}"
    assert (slow == 0).mean() > 0.2 and (fast[:, 0] == 0).mean() > 0.05  # the noise is there at all


# ----------------------------------------------------------------------------- download


class _FakeResponse(io.BytesIO):
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _fake_archive() -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for task in range(1, 21):
            for split in ("train", "test"):
                data = b"1 Mary went to the garden.\n2 Where is Mary?\tgarden\t1\n"
                info = tarfile.TarInfo(f"tasks_1-20_v1-2/en/qa{task}_{babi.TASK_NAMES[task]}_{split}.txt")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_download_offline_gives_a_clear_message(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def offline(*args, **kwargs):
        raise urllib.error.URLError("no network")

    monkeypatch.setattr(babi.urllib.request, "urlopen", offline)
    with pytest.raises(ConnectionError, match="(?s)are you offline.*write_simulated"):
        babi.download_babi(tmp_path)


def test_download_checks_size_and_refuses_an_unverified_archive(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    payload = _fake_archive()
    monkeypatch.setattr(babi.urllib.request, "urlopen", lambda *a, **k: _FakeResponse(payload))
    with pytest.raises(ValueError, match=f"expected {babi.BABI_SIZE} bytes"):
        babi.download_babi(tmp_path / "a")
    monkeypatch.setattr(babi, "BABI_SIZE", len(payload))
    digest = hashlib.sha256(payload).hexdigest()
    with pytest.raises(ValueError, match=f"refusing to unpack an unverified archive.*{digest}"):
        babi.download_babi(tmp_path / "b", sha256=None)
    with pytest.raises(ValueError, match="checksum mismatch"):
        babi.download_babi(tmp_path / "c", sha256="0" * 64)
    en = babi.download_babi(tmp_path / "d", sha256=digest)
    assert len(list(en.glob("qa*_*.txt"))) == 40
    assert babi.load_task(en, 20, valid_fraction=0.0)["test"][0].answer == "garden"
