"""bAbI question answering (Weston et al. 2015): reader and download (the simulator is ``babi_sim``).

The bAbI v1.2 text format, one line per statement or question::

    1 Mary moved to the bathroom.
    2 John went to the hallway.
    3 Where is Mary? <TAB> bathroom <TAB> 1
    1 Sandra got the milk there.          <- the ids reset: a new story starts

* A statement line is ``<id> <sentence>``.
* A question line is ``<id> <question><TAB><answer><TAB><supporting ids>``; the
  supporting ids point at earlier statement lines of the same story. An answer
  may hold several words separated by commas (``milk,football`` in task 8,
  ``n,e`` in task 19); the model treats the whole string as one answer token.
* Ids count up by one inside a story and go back to 1 where a new one starts.

Three ways to get data, offline first:

* :func:`load_task` reads the real files from a folder (``qa1_*_train.txt`` ...).
* :func:`download_babi` fetches the official archive into the course cache, only
  when asked, and refuses to use a file whose checksum it cannot verify.
* ``utils.data.babi_sim.write_simulated`` writes stories in the same format for
  tasks 1, 2, 6 and 16 with a small simulator, so tests and the default lesson
  need nothing else.

:func:`vectorize` turns examples into the integer arrays the MemN2N models take.
Shape letters: those of ``utils/shapes.py``; here N examples, M memory slots
(sentences), J words per sentence. Memory slot 0 holds the MOST RECENT sentence (the
temporal encoding indexes by recency, as in the paper).

This module imports no deep-learning framework.
"""
from __future__ import annotations

import hashlib
import re
import tarfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

__all__ = [
    "TASK_NAMES",
    "BabiFormatError",
    "Example",
    "parse_babi",
    "read_babi_file",
    "task_file",
    "load_task",
    "train_valid_split",
    "Vocab",
    "build_vocab",
    "vectorize",
    "add_time_noise",
    "download_babi",
]

TASK_NAMES = {
    1: "single-supporting-fact", 2: "two-supporting-facts", 3: "three-supporting-facts",
    4: "two-arg-relations", 5: "three-arg-relations", 6: "yes-no-questions", 7: "counting",
    8: "lists-sets", 9: "simple-negation", 10: "indefinite-knowledge", 11: "basic-coreference",
    12: "conjunction", 13: "compound-coreference", 14: "time-reasoning", 15: "basic-deduction",
    16: "basic-induction", 17: "positional-reasoning", 18: "size-reasoning", 19: "path-finding",
    20: "agents-motivations",
}

# The official archive. The URL is the one the bAbI authors published and that the
# Keras, neon and QRN code bases point at. Its size, 11,745,123 bytes, is recorded in
# Nervana neon's dataset table (``'babi': {'size': 11745123, 'file':
# 'tasks_1-20_v1-2.tar.gz', 'url': 'http://www.thespermwhale.com/jaseweston/babi'}``)
# and matches a Keras download log of the S3 mirror. We could not confirm a published
# cryptographic hash, so none is written here: download_babi checks the size, and
# then refuses to trust the file until the learner passes the SHA-256 they verified
# (the error message prints the one it computed).
BABI_URLS = (
    "http://www.thespermwhale.com/jaseweston/babi/tasks_1-20_v1-2.tar.gz",
    "https://s3.amazonaws.com/text-datasets/babi_tasks_1-20_v1-2.tar.gz",
)
# Where the archive puts the English 1k tasks, relative to the folder it is unpacked in.
BABI_EN = Path("tasks_1-20_v1-2") / "en"
BABI_SIZE = 11_745_123
BABI_SHA256: str | None = None  # not confirmed from a trustworthy source; see above


class BabiFormatError(ValueError):
    """A bAbI file that breaks the format; the message names the file and the line."""


@dataclass(frozen=True)
class Example:
    """One question with the story that precedes it.

    ``story`` holds the statements of the story up to the question (tokens,
    oldest first) and ``story_ids`` their line ids; ``supporting`` are the ids
    of the statements that justify the answer.
    """

    story: tuple[tuple[str, ...], ...]
    story_ids: tuple[int, ...]
    question: tuple[str, ...]
    answer: str
    supporting: tuple[int, ...]
    task: int | None = None

    def supporting_positions(self) -> tuple[int, ...]:
        """Indices into ``story`` (oldest first) of the supporting statements."""
        where = {i: n for n, i in enumerate(self.story_ids)}
        return tuple(where[i] for i in self.supporting)


_TOKEN = re.compile(r"[a-z0-9]+|[^a-z0-9\s.?]")


def tokenize(sentence: str) -> tuple[str, ...]:
    """Lower-case words; full stops and question marks dropped (as in the paper)."""
    return tuple(_TOKEN.findall(sentence.lower()))


def parse_babi(lines: Iterable[str], source: str = "<string>", task: int | None = None) -> list[Example]:
    """Parse bAbI v1.2 lines into examples; errors name ``source`` and the line number.

    Shapes: lines -> a list of Example (one per question line).
    """
    examples: list[Example] = []
    story: list[tuple[str, ...]] = []
    story_ids: list[int] = []
    last_id = 0
    seen_any = False
    for lineno, raw in enumerate(lines, start=1):
        line = raw.rstrip("\n").rstrip("\r")
        if not line.strip():
            continue
        where = f"{source}, line {lineno}"
        head, _, rest = line.partition(" ")
        if not head.isdigit() or not rest.strip():
            raise BabiFormatError(f"{where}: expected '<id> <text>', got {line!r}")
        line_id = int(head)
        if line_id == 1:
            story, story_ids = [], []
        elif not seen_any or line_id != last_id + 1:
            expected = "1" if not seen_any else f"{last_id + 1} (or 1 to start a new story)"
            raise BabiFormatError(f"{where}: ids must count up by one; expected id {expected}, got {line_id}")
        seen_any = True
        last_id = line_id
        if "\t" in rest:
            fields = rest.split("\t")
            if len(fields) < 2 or not fields[1].strip():
                raise BabiFormatError(
                    f"{where}: a question line needs '<question><TAB><answer><TAB><supporting ids>', "
                    f"but the answer is missing in {line!r}"
                )
            question, answer = fields[0].strip(), fields[1].strip()
            ids_text = fields[2].strip() if len(fields) > 2 else ""
            if not ids_text:
                raise BabiFormatError(f"{where}: the supporting-fact ids are missing in {line!r}")
            try:
                supporting = tuple(int(t) for t in ids_text.split())
            except ValueError:
                raise BabiFormatError(f"{where}: supporting ids must be integers, got {ids_text!r}") from None
            unknown = [i for i in supporting if i not in story_ids]
            if unknown:
                raise BabiFormatError(
                    f"{where}: supporting id(s) {unknown} are not statement lines of this story "
                    f"(statements so far: {story_ids})"
                )
            examples.append(
                Example(tuple(story), tuple(story_ids), tokenize(question), answer.lower(), supporting, task)
            )
        else:
            story.append(tokenize(rest))
            story_ids.append(line_id)
    return examples


def read_babi_file(path: str | Path, task: int | None = None) -> list[Example]:
    """Read one bAbI file; a malformed line raises BabiFormatError naming the file and line.

    Shapes: path -> a list of Example.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"path: no bAbI file at {path}")
    with path.open(encoding="utf-8") as fh:
        return parse_babi(fh, source=str(path), task=task)


def _check_task(task: int) -> int:
    if isinstance(task, bool) or not isinstance(task, (int, np.integer)) or int(task) not in TASK_NAMES:
        raise ValueError(f"task: expected a bAbI task number 1..20, got {task!r}")
    return int(task)


def task_file(babi_dir: str | Path, task: int, split: str = "train") -> Path:
    """The file of one task and split in a folder of bAbI files (``qa{task}_*_{split}.txt``).

    Accepts the folder holding the files (``.../en``) or the archive's root
    (``.../tasks_1-20_v1-2``, then ``en/`` is used).
    """
    task = _check_task(task)
    if split not in ("train", "test"):
        raise ValueError(f"split: expected 'train' or 'test', got {split!r}")
    folder = Path(babi_dir)
    if not folder.is_dir():
        raise FileNotFoundError(f"babi_dir: no folder at {folder}")
    if not list(folder.glob("qa*_*.txt")) and (folder / "en").is_dir():
        folder = folder / "en"
    found = sorted(folder.glob(f"qa{task}_*_{split}.txt"))
    if len(found) != 1:
        raise FileNotFoundError(
            f"babi_dir: expected one file qa{task}_*_{split}.txt in {folder}, found {[p.name for p in found]}"
        )
    return found[0]


def train_valid_split(
    examples: Sequence[Example], valid_fraction: float = 0.1, seed: int = 0
) -> tuple[list[Example], list[Example]]:
    """Hold out ``valid_fraction`` of the training questions for validation (paper: 10%)."""
    if not 0 <= valid_fraction < 1:
        raise ValueError(f"valid_fraction: expected a number in [0, 1), got {valid_fraction!r}")
    order = np.random.default_rng(seed).permutation(len(examples))
    n_valid = int(round(len(examples) * valid_fraction))
    valid = [examples[i] for i in sorted(order[:n_valid])]
    train = [examples[i] for i in sorted(order[n_valid:])]
    return train, valid


def load_task(
    babi_dir: str | Path, task: int, valid_fraction: float = 0.1, seed: int = 0
) -> dict[str, list[Example]]:
    """Train, validation (taken from train) and test examples of one task.

    Shapes: -> {"train": [...], "valid": [...], "test": [...]}.
    """
    train_all = read_babi_file(task_file(babi_dir, task, "train"), task=task)
    test = read_babi_file(task_file(babi_dir, task, "test"), task=task)
    train, valid = train_valid_split(train_all, valid_fraction, seed)
    return {"train": train, "valid": valid, "test": test}


# ----------------------------------------------------------------------------- vectorising


@dataclass
class Vocab:
    """Word <-> id; id 0 is padding. Answers (even ``milk,football``) are single tokens."""

    words: list[str]

    def __post_init__(self) -> None:
        self.index = {w: i for i, w in enumerate(self.words)}

    def __len__(self) -> int:
        return len(self.words)

    def encode(self, tokens: Sequence[str]) -> list[int]:
        missing = [t for t in tokens if t not in self.index]
        if missing:
            raise ValueError(f"tokens: words {missing} are not in the vocabulary of {len(self)} words")
        return [self.index[t] for t in tokens]


def build_vocab(*example_sets: Sequence[Example]) -> Vocab:
    """A vocabulary over all words and answers of the given example sets (sorted, id 0 = '<pad>')."""
    words: set[str] = set()
    for examples in example_sets:
        for ex in examples:
            for sentence in ex.story:
                words.update(sentence)
            words.update(ex.question)
            words.add(ex.answer)
    return Vocab(["<pad>"] + sorted(words))


def vectorize(
    examples: Sequence[Example], vocab: Vocab, memory_size: int = 50, sentence_len: int | None = None
) -> dict[str, np.ndarray]:
    """Integer arrays for a MemN2N: the ``memory_size`` most recent sentences, newest in slot 0.

    Shapes: -> stories (N, M, J) int64 (0 = padding), queries (N, J) int64,
    answers (N,) int64, supporting (N, M) bool (True where a slot holds a
    supporting fact; False for facts older than the memory).
    """
    if memory_size < 1:
        raise ValueError(f"memory_size: expected a positive int, got {memory_size!r}")
    longest = max([len(s) for ex in examples for s in ex.story] + [len(ex.question) for ex in examples] + [1])
    J = sentence_len or longest
    if J < longest:
        raise ValueError(f"sentence_len: expected at least {longest} (the longest sentence), got {J}")
    N, M = len(examples), memory_size
    stories = np.zeros((N, M, J), dtype=np.int64)
    queries = np.zeros((N, J), dtype=np.int64)
    answers = np.zeros((N,), dtype=np.int64)
    supporting = np.zeros((N, M), dtype=bool)
    for n, ex in enumerate(examples):
        recent = list(reversed(ex.story))[:M]  # newest first
        ids = list(reversed(ex.story_ids))[:M]
        for m, sentence in enumerate(recent):
            stories[n, m, : len(sentence)] = vocab.encode(sentence)
            supporting[n, m] = ids[m] in ex.supporting
        queries[n, : len(ex.question)] = vocab.encode(ex.question)
        answers[n] = vocab.index[ex.answer] if ex.answer in vocab.index else 0
    return {"stories": stories, "queries": queries, "answers": answers, "supporting": supporting}


def add_time_noise(stories: np.ndarray, rng: np.random.Generator, fraction: float = 0.1) -> np.ndarray:
    """Random noise (RN): insert about ``fraction`` empty memories among the sentences.

    Makes the temporal encoding learn coarse order instead of exact slots. The
    sentences keep their order; those pushed past the last slot fall out.
    Shapes: stories (N, M, J) -> (N, M, J).
    """
    if stories.ndim != 3:
        raise ValueError(f"stories: expected (N, M, J), got shape {stories.shape}")
    N, M, J = stories.shape
    used = (stories != 0).any(-1).sum(-1)  # (N,) sentences in each story, in slots 0..k-1
    n_noise = rng.binomial(used, fraction)  # (N,) empty memories to insert
    total = used + n_noise  # (N,) sentences and empty memories together
    L = max(int(total.max(initial=0)), 1)
    # a uniformly random set of n_noise of the total positions is empty: the positions
    # with the n_noise smallest random keys (positions past a row's total never are)
    keys = np.where(np.arange(L) < total[:, None], rng.random((N, L)), np.inf)  # (N, L)
    rank = np.argsort(np.argsort(keys, axis=1), axis=1)  # (N, L) rank of each key in its row
    empty = rank < n_noise[:, None]  # (N, L)
    full = (~empty) & (np.arange(L) < total[:, None])  # (N, L) positions that get a sentence, in order
    rows, slots = np.nonzero(full)  # row-major: each row's sentences newest first
    sentence = np.cumsum(full, axis=1)[rows, slots] - 1  # which sentence goes to that position
    keep = slots < M  # sentences pushed past the last slot fall out
    out = np.zeros_like(stories)
    out[rows[keep], slots[keep]] = stories[rows[keep], sentence[keep]]
    return out


# ----------------------------------------------------------------------------- download


def download_babi(
    dest: str | Path | None = None, sha256: str | None = BABI_SHA256, timeout: float = 60.0
) -> Path:
    """Download and unpack the official bAbI v1.2 archive; return the ``en`` folder (1k).

    Only on request, into ``utils.runtime.cache_dir()/babi`` by default. The file
    must have the recorded size and, since no published hash could be confirmed,
    the SHA-256 you pass after checking it yourself; otherwise it is not unpacked
    and the error tells you the hash it computed. Offline, the error says so and
    points to ``utils.data.babi_sim.write_simulated``.
    """
    from utils.runtime import cache_dir

    root = Path(dest) if dest is not None else cache_dir() / "babi"
    root.mkdir(parents=True, exist_ok=True)
    en = root / BABI_EN
    if en.is_dir() and len(list(en.glob("qa*_*.txt"))) == 40:
        return en
    archive = root / "tasks_1-20_v1-2.tar.gz"
    if not archive.exists():
        errors = []
        for url in BABI_URLS:
            try:
                with urllib.request.urlopen(url, timeout=timeout) as resp:
                    data = resp.read()
                archive.with_suffix(".part").write_bytes(data)
                archive.with_suffix(".part").rename(archive)
                break
            except (urllib.error.URLError, OSError) as exc:
                errors.append(f"{url}: {exc}")
        else:
            raise ConnectionError(
                "download_babi: could not download the bAbI archive (are you offline?).\n  "
                + "\n  ".join(errors)
                + "\nUse utils.data.babi_sim.write_simulated(...) for offline stories in the same format, "
                f"or put the unpacked files in {en}."
            )
    size = archive.stat().st_size
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    if size != BABI_SIZE:
        archive.unlink()
        raise ValueError(f"download_babi: expected {BABI_SIZE} bytes, got {size}; the file was deleted")
    if sha256 is None or digest != sha256.lower():
        raise ValueError(
            f"download_babi: refusing to unpack an unverified archive {archive} (sha256 {digest}). "
            "No published checksum could be confirmed for this course; verify the hash against a source "
            "you trust and call download_babi(sha256='...')."
            if sha256 is None
            else f"download_babi: checksum mismatch for {archive}: expected sha256 {sha256}, got {digest}"
        )
    with tarfile.open(archive) as tar:
        tar.extractall(root, filter="data")
    return en
