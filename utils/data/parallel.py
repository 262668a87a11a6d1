"""Sentence pairs from files, tokenisation, vocabularies and padded id arrays.

The same code serves the course's generated tasks (dates, toy translation) and
a real corpus a learner brings, in either layout:

* two text files, one sentence per line, line ``i`` of one translating line
  ``i`` of the other (``read_parallel("train.en", "train.de")``);
* one tab-separated file, e.g. a Tatoeba / Anki export
  (``read_parallel("fra.txt", columns=(0, 1))``).

Tokens are words and punctuation marks, or characters; :class:`Subwords` splits
the words further into pieces learned from the corpus (byte-pair encoding or
WordPiece, trained by the ``tokenizers`` library), so that a rare word becomes a
few known pieces instead of ``<unk>``.

Nothing here imports a framework: arrays are NumPy ``int64`` with the padding
id 0, ready for ``torch.as_tensor`` or ``keras.ops.convert_to_tensor``.
"""
from __future__ import annotations

import json
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

__all__ = [
    "PAD",
    "BOS",
    "EOS",
    "UNK",
    "SPECIALS",
    "PAD_ID",
    "BOS_ID",
    "EOS_ID",
    "UNK_ID",
    "tokenize",
    "Vocab",
    "Subwords",
    "read_parallel",
    "ParallelData",
    "load_parallel",
    "pad_batch",
]

PAD, BOS, EOS, UNK = "<pad>", "<bos>", "<eos>", "<unk>"
SPECIALS = (PAD, BOS, EOS, UNK)  # ids 0, 1, 2, 3 in every Vocab
# The one definition of the special token ids, used by every model and metric of lessons 2
# and 6 (BERT keeps its own tokenizer's ids).
PAD_ID, BOS_ID, EOS_ID, UNK_ID = (SPECIALS.index(t) for t in (PAD, BOS, EOS, UNK))

_WORD_RE = re.compile(r"\w+|[^\w\s]", re.UNICODE)
LEVELS = ("word", "char")


def tokenize(text: str, level: str = "word", lower: bool = False) -> list[str]:
    """Split a sentence into tokens: words and punctuation marks, or characters.

    Words: runs of letters/digits, each punctuation mark its own token
    (``"Don't go!"`` -> ``["Don", "'", "t", "go", "!"]``). Text is NFC-normalised.
    Shapes: one string -> list of tokens.
    """
    if level not in LEVELS:
        raise ValueError(f"level: expected one of {LEVELS}, got {level!r}")
    if not isinstance(text, str):
        raise ValueError(f"text: expected a str, got {type(text).__name__}")
    text = unicodedata.normalize("NFC", text)
    if lower:
        text = text.lower()
    if level == "char":
        return list(text)
    return _WORD_RE.findall(text)


class Vocab:
    """Token <-> id map with the four specials first: <pad>=0, <bos>=1, <eos>=2, <unk>=3.

    Unknown tokens encode to <unk>. Build one from token lists with
    :meth:`build`, save and load it as JSON.
    """

    def __init__(self, tokens: Iterable[str]) -> None:
        self.itos: list[str] = list(SPECIALS)
        self.stoi: dict[str, int] = {t: i for i, t in enumerate(self.itos)}
        for tok in tokens:
            if tok not in self.stoi:
                self.stoi[tok] = len(self.itos)
                self.itos.append(tok)

    @classmethod
    def build(cls, sentences: Iterable[Sequence[str]], min_freq: int = 1, max_size: int | None = None) -> "Vocab":
        """From tokenised sentences: tokens seen at least ``min_freq`` times, most frequent first.

        Ties are broken alphabetically, so the same data gives the same ids.
        ``max_size`` caps the size including the four specials.
        """
        if min_freq < 1:
            raise ValueError(f"min_freq: expected >= 1, got {min_freq}")
        if max_size is not None and max_size < len(SPECIALS):
            raise ValueError(f"max_size: expected >= {len(SPECIALS)} (the specials), got {max_size}")
        counts = Counter(tok for sent in sentences for tok in sent)
        ranked = sorted((t for t, c in counts.items() if c >= min_freq), key=lambda t: (-counts[t], t))
        if max_size is not None:
            ranked = ranked[: max_size - len(SPECIALS)]
        return cls(ranked)

    def __len__(self) -> int:
        return len(self.itos)

    def __contains__(self, token: str) -> bool:
        return token in self.stoi

    def __repr__(self) -> str:
        preview = ", ".join(repr(t) for t in self.itos[len(SPECIALS): len(SPECIALS) + 8])
        return f"Vocab(size={len(self)}, tokens=[{preview}{', ...' if len(self) > len(SPECIALS) + 8 else ''}])"

    @property
    def pad_id(self) -> int:
        return 0

    @property
    def bos_id(self) -> int:
        return 1

    @property
    def eos_id(self) -> int:
        return 2

    @property
    def unk_id(self) -> int:
        return 3

    def encode(self, tokens: Sequence[str], add_bos: bool = False, add_eos: bool = False) -> list[int]:
        """Token ids, unknown tokens as <unk>, optionally framed by <bos> ... <eos>."""
        ids = [self.stoi.get(t, self.unk_id) for t in tokens]
        return ([self.bos_id] if add_bos else []) + ids + ([self.eos_id] if add_eos else [])

    def decode(self, ids: Iterable[int], strip: bool = True) -> list[str]:
        """Tokens for ids; with ``strip``, drop <pad>/<bos> and stop at the first <eos>."""
        out = []
        for i in ids:
            i = int(i)
            if not 0 <= i < len(self.itos):
                raise ValueError(f"ids: expected ids in 0..{len(self.itos) - 1}, got {i}")
            if strip and i == self.eos_id:
                break
            if strip and i in (self.pad_id, self.bos_id):
                continue
            out.append(self.itos[i])
        return out

    def save(self, path: str | Path) -> None:
        """Write the tokens (in id order) as JSON."""
        Path(path).write_text(json.dumps({"itos": self.itos}, ensure_ascii=False), encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> "Vocab":
        """Read a vocabulary written by :meth:`save`."""
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        itos = data.get("itos") if isinstance(data, dict) else None
        if not isinstance(itos, list) or tuple(itos[: len(SPECIALS)]) != SPECIALS:
            raise ValueError(f"{path}: expected a saved Vocab (itos starting with {SPECIALS}), got something else")
        return cls(itos[len(SPECIALS):])


SUBWORD_KINDS = ("bpe", "wordpiece")
CONTINUE = "##"  # marks a piece that continues the previous piece's word


class Subwords:
    """Words split into subword pieces learned from a corpus (``tokenizers``' BPE or WordPiece).

    The pieces of a word after its first carry the prefix ``##``
    (``"unbelievable"`` -> ``["un", "##bel", "##iev", "##able"]``), so
    :meth:`join` puts the words back. Train one per language on the training
    split's words with :meth:`train`; pass it to :func:`load_parallel`. A
    character never seen in training becomes ``<unk>`` (BPE: that character;
    WordPiece: the whole word).
    """

    def __init__(self, tokenizer, kind: str) -> None:
        self.tokenizer, self.kind = tokenizer, kind

    @classmethod
    def train(cls, sentences: Iterable[Sequence[str]], vocab_size: int, kind: str = "bpe") -> "Subwords":
        """Learn at most ``vocab_size`` pieces (specials included) from word-tokenised sentences."""
        if kind not in SUBWORD_KINDS:
            raise ValueError(f"kind: expected one of {SUBWORD_KINDS}, got {kind!r}")
        if not isinstance(vocab_size, int) or vocab_size <= len(SPECIALS):
            raise ValueError(f"vocab_size: expected an int above {len(SPECIALS)} (the specials), got {vocab_size!r}")
        from tokenizers import Tokenizer, models, pre_tokenizers, trainers

        options = dict(vocab_size=vocab_size, special_tokens=list(SPECIALS), continuing_subword_prefix=CONTINUE,
                       show_progress=False)
        if kind == "bpe":
            tok = Tokenizer(models.BPE(unk_token=UNK, continuing_subword_prefix=CONTINUE))
            trainer = trainers.BpeTrainer(**options)
        else:
            tok = Tokenizer(models.WordPiece(unk_token=UNK, continuing_subword_prefix=CONTINUE))
            trainer = trainers.WordPieceTrainer(**options)
        tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
        lines = [" ".join(words) for words in sentences]
        if not any(lines):
            raise ValueError("sentences: expected some words to learn pieces from, got none")
        tok.train_from_iterator(lines, trainer)
        return cls(tok, kind)

    def __len__(self) -> int:
        return self.tokenizer.get_vocab_size()

    def __repr__(self) -> str:
        return f"Subwords(kind={self.kind!r}, size={len(self)})"

    def split(self, words: Sequence[str]) -> list[str]:
        """Words -> pieces (``["unbelievable"]`` -> ``["un", "##bel", ...]``)."""
        if not words:
            return []
        return self.tokenizer.encode(list(words), is_pretokenized=True, add_special_tokens=False).tokens

    @staticmethod
    def join(pieces: Sequence[str]) -> list[str]:
        """Pieces -> words: a ``##`` piece is glued to the word before it (a stray one starts a word)."""
        words: list[str] = []
        for piece in pieces:
            if piece.startswith(CONTINUE) and len(piece) > len(CONTINUE):
                if words:
                    words[-1] += piece[len(CONTINUE):]
                else:
                    words.append(piece[len(CONTINUE):])
            else:
                words.append(piece)
        return words


def _read_lines(path: Path) -> list[str]:
    if not path.is_file():
        raise ValueError(f"{path}: expected a text file, but there is no such file")
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: expected UTF-8 text, got undecodable bytes at byte {exc.start}") from None
    lines = text.splitlines()
    while lines and not lines[-1].strip():  # trailing blank lines are not sentences
        lines.pop()
    if not lines:
        raise ValueError(f"{path}: expected at least one sentence, but the file is empty")
    return lines


def read_parallel(
    src_path: str | Path,
    tgt_path: str | Path | None = None,
    columns: tuple[int, int] = (0, 1),
    max_pairs: int | None = None,
) -> list[tuple[str, str]]:
    """Sentence pairs from two line-aligned files, or from one tab-separated file.

    With ``tgt_path`` the files must have the same number of lines (after
    dropping trailing blank lines) and no blank line in between. Without it,
    ``src_path`` is a TSV file and ``columns`` picks the source and target
    columns (Anki/manythings files: ``(0, 1)``; Tatoeba pair exports with ids:
    ``(1, 3)``). Errors name the file and the 1-based line.

    Shapes: -> list of (source, target) strings.
    """
    src_path = Path(src_path)
    if tgt_path is None:
        pairs = []
        need = max(columns) + 1
        for n, line in enumerate(_read_lines(src_path), start=1):
            parts = line.split("\t")
            if len(parts) < need:
                raise ValueError(
                    f"{src_path}, line {n}: expected at least {need} tab-separated columns "
                    f"(columns={columns}), got {len(parts)}: {line[:60]!r}"
                )
            src, tgt = parts[columns[0]].strip(), parts[columns[1]].strip()
            if not src or not tgt:
                raise ValueError(f"{src_path}, line {n}: expected two non-empty sentences, got {line[:60]!r}")
            pairs.append((src, tgt))
    else:
        tgt_path = Path(tgt_path)
        src_lines, tgt_lines = _read_lines(src_path), _read_lines(tgt_path)
        if len(src_lines) != len(tgt_lines):
            short, long_ = (src_path, tgt_path) if len(src_lines) < len(tgt_lines) else (tgt_path, src_path)
            n = min(len(src_lines), len(tgt_lines))
            raise ValueError(
                f"{src_path} has {len(src_lines)} lines but {tgt_path} has {len(tgt_lines)}: expected one "
                f"sentence per line in both; {short} ends after line {n}, {long_} goes on at line {n + 1}"
            )
        pairs = []
        for n, (s, t) in enumerate(zip(src_lines, tgt_lines), start=1):
            for path, text in ((src_path, s), (tgt_path, t)):
                if not text.strip():
                    raise ValueError(f"{path}, line {n}: expected a sentence, got a blank line")
            pairs.append((s.strip(), t.strip()))
    return pairs[:max_pairs] if max_pairs is not None else pairs


def pad_batch(sequences: Sequence[Sequence[int]], max_len: int | None = None, pad_id: int = PAD_ID) -> np.ndarray:
    """Right-pad id lists into one array (longer ones are cut to ``max_len``).

    Shapes: B lists -> (B, T) int64 with T = max_len or the longest list.
    """
    if len(sequences) == 0:
        raise ValueError("sequences: expected at least one sequence, got none")
    longest = max(len(s) for s in sequences)
    width = longest if max_len is None else max_len
    if width < 1:
        raise ValueError(f"max_len: expected >= 1, got {width}")
    out = np.full((len(sequences), width), pad_id, dtype=np.int64)  # (B, T)
    for i, seq in enumerate(sequences):
        seq = list(seq)[:width]
        out[i, : len(seq)] = seq
    return out


@dataclass
class ParallelData:
    """Encoded sentence pairs ready for a seq2seq model.

    ``src`` (N, Ts) ids without specials; ``tgt_in`` (N, Tt) starts with <bos>;
    ``tgt_out`` (N, Tt) ends with <eos> (teacher forcing: predict ``tgt_out``
    from ``tgt_in``). Padding id 0 everywhere.
    """

    pairs: list[tuple[str, str]]
    src_vocab: Vocab
    tgt_vocab: Vocab
    src: np.ndarray
    tgt_in: np.ndarray
    tgt_out: np.ndarray
    src_level: str = "word"
    tgt_level: str = "word"
    lower: bool = False
    src_subwords: Subwords | None = None
    tgt_subwords: Subwords | None = None

    def __len__(self) -> int:
        return len(self.pairs)

    def encode_source(self, texts: Sequence[str], max_len: int | None = None) -> np.ndarray:
        """Encode new source sentences with this data's tokeniser and vocabulary. Shapes: -> (B, Ts)."""
        toks = [tokenize(t, self.src_level, self.lower) for t in texts]
        if self.src_subwords is not None:
            toks = [self.src_subwords.split(t) for t in toks]
        return pad_batch([self.src_vocab.encode(t) for t in toks], max_len or self.src.shape[1])

    def decode_target(self, ids: Iterable[int]) -> str:
        """Target ids back to text (characters joined, words joined by spaces, subword pieces into words)."""
        toks = self.tgt_vocab.decode(ids)
        if self.tgt_subwords is not None:
            toks = Subwords.join(toks)
        return "".join(toks) if self.tgt_level == "char" else " ".join(toks)


def load_parallel(
    pairs: Sequence[tuple[str, str]],
    src_level: str = "word",
    tgt_level: str = "word",
    lower: bool = False,
    src_vocab: Vocab | None = None,
    tgt_vocab: Vocab | None = None,
    min_freq: int = 1,
    max_vocab: int | None = None,
    max_len: int | None = None,
    src_subwords: Subwords | None = None,
    tgt_subwords: Subwords | None = None,
) -> ParallelData:
    """Tokenise pairs, build (or reuse) the vocabularies and pad into id arrays.

    Pass the training split's vocabularies when encoding a validation split.
    ``max_len`` drops pairs whose source or target (with <eos>) is longer, counted
    in words (or characters), so that subword pieces keep the same pairs.
    ``src_subwords`` / ``tgt_subwords`` (word level only): split each word into
    its :class:`Subwords` pieces, which the vocabulary and ids then hold.

    Shapes: N pairs -> src (N, Ts), tgt_in (N, Tt), tgt_out (N, Tt).
    """
    if len(pairs) == 0:
        raise ValueError("pairs: expected at least one (source, target) pair, got none")
    bad = [i for i, p in enumerate(pairs) if not (isinstance(p, (tuple, list)) and len(p) == 2)]
    if bad:
        raise ValueError(f"pairs: expected (source, target) pairs, got {pairs[bad[0]]!r} at index {bad[0]}")
    src_toks = [tokenize(s, src_level, lower) for s, _ in pairs]
    tgt_toks = [tokenize(t, tgt_level, lower) for _, t in pairs]
    if max_len is not None:
        keep = [i for i in range(len(pairs)) if len(src_toks[i]) <= max_len and len(tgt_toks[i]) + 1 <= max_len]
        if not keep:
            raise ValueError(f"max_len: every pair is longer than max_len={max_len}")
        pairs = [pairs[i] for i in keep]
        src_toks = [src_toks[i] for i in keep]
        tgt_toks = [tgt_toks[i] for i in keep]
    for name, level, sub in (("src_subwords", src_level, src_subwords), ("tgt_subwords", tgt_level, tgt_subwords)):
        if sub is not None and (level != "word" or not isinstance(sub, Subwords)):
            raise ValueError(f"{name}: expected a Subwords for word-level tokens, got {sub!r} with level {level!r}")
    if src_subwords is not None:
        src_toks = [src_subwords.split(t) for t in src_toks]
    if tgt_subwords is not None:
        tgt_toks = [tgt_subwords.split(t) for t in tgt_toks]
    src_vocab = src_vocab or Vocab.build(src_toks, min_freq, max_vocab)
    tgt_vocab = tgt_vocab or Vocab.build(tgt_toks, min_freq, max_vocab)
    src = pad_batch([src_vocab.encode(t) for t in src_toks])  # (N, Ts)
    tgt_in = pad_batch([tgt_vocab.encode(t, add_bos=True) for t in tgt_toks])  # (N, Tt)
    tgt_out = pad_batch([tgt_vocab.encode(t, add_eos=True) for t in tgt_toks])  # (N, Tt)
    return ParallelData(list(pairs), src_vocab, tgt_vocab, src, tgt_in, tgt_out, src_level, tgt_level, lower,
                        src_subwords, tgt_subwords)
