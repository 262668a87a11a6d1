"""A toy translation task whose word order differs between the two languages.

The source is a small English: ``the big red dog sees a small cat quickly``.
The target is an invented language with its own words and three rules:

1. the verb goes to the end of the sentence (subject-object-verb),
2. adjectives follow their noun, in reverse order (``dog red big``),
3. an adverb sits just before the verb.

So ``the big red dog sees a small cat quickly`` becomes
``ka dor rilo mab ku fen sibi vesh kiru``. Every target word translates exactly
one source word, and the generator returns that alignment, so a lesson can
check that an attention map looks at the right source word (and see that the
map is not a diagonal).

Generated from a seed with NumPy: no download, no framework.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = ["LEXICON", "ToyPair", "translate", "random_sentence", "make_toy_translation"]

# source word -> target word, by part of speech
_DETERMINERS = {"the": "ka", "a": "ku", "every": "ko", "some": "ke"}
_ADJECTIVES = {
    "big": "mab", "small": "sibi", "red": "rilo", "blue": "bazu", "old": "olun",
    "young": "yaro", "happy": "hapi", "quiet": "kwet", "green": "grelo", "tall": "tolo",
}
_NOUNS = {
    "dog": "dor", "cat": "fen", "bird": "pip", "man": "manu", "woman": "wena",
    "child": "chil", "horse": "hors", "teacher": "tika", "farmer": "fami", "fish": "fis",
}
_VERBS = {
    "sees": "kiru", "follows": "folo", "likes": "lika", "helps": "hel", "finds": "findu",
    "calls": "kal", "watches": "wacho", "feeds": "fidu",
}
_ADVERBS = {"quickly": "vesh", "slowly": "lomo", "often": "ofa", "today": "tidi"}

LEXICON: dict[str, str] = {**_DETERMINERS, **_ADJECTIVES, **_NOUNS, **_VERBS, **_ADVERBS}


class ToyPair(NamedTuple):
    """One sentence pair; ``alignment[i]`` is the source position that target word ``i`` translates."""

    source: list[str]
    target: list[str]
    alignment: list[int]


def _noun_phrase(rng: np.random.Generator, max_adjectives: int) -> list[str]:
    det = rng.choice(list(_DETERMINERS))
    n_adj = int(rng.integers(0, max_adjectives + 1))
    adjectives = list(rng.choice(list(_ADJECTIVES), size=n_adj, replace=False)) if n_adj else []
    return [str(det), *map(str, adjectives), str(rng.choice(list(_NOUNS)))]


def random_sentence(rng: np.random.Generator, max_adjectives: int = 2, p_adverb: float = 0.5) -> list[str]:
    """One source sentence: NP verb NP [adverb], NP = determiner adjective* noun."""
    words = _noun_phrase(rng, max_adjectives) + [str(rng.choice(list(_VERBS)))]
    words += _noun_phrase(rng, max_adjectives)
    if rng.random() < p_adverb:
        words.append(str(rng.choice(list(_ADVERBS))))
    return words


def translate(source: list[str]) -> ToyPair:
    """Translate a source sentence with the grammar's rules and record the alignment.

    Shapes: Ts source words -> Ts target words and Ts alignment indices.
    """
    unknown = [w for w in source if w not in LEXICON]
    if unknown:
        raise ValueError(f"source: expected words of the toy lexicon, got unknown {unknown[:5]}")
    verbs = [i for i, w in enumerate(source) if w in _VERBS]
    if len(verbs) != 1:
        raise ValueError(f"source: expected exactly one verb, got {len(verbs)} in {source}")
    v = verbs[0]
    adverbs = [i for i, w in enumerate(source) if w in _ADVERBS]

    def reorder_np(positions: list[int]) -> list[int]:
        # determiner, noun, then the adjectives from last to first
        det, *adjs, noun = positions
        return [det, noun, *reversed(adjs)]

    subject = reorder_np(list(range(0, v)))
    obj_end = adverbs[0] if adverbs else len(source)
    obj = reorder_np(list(range(v + 1, obj_end)))
    order = subject + obj + adverbs + [v]
    return ToyPair(list(source), [LEXICON[source[i]] for i in order], order)


def make_toy_translation(n: int, seed: int = 0, max_adjectives: int = 2, p_adverb: float = 0.5) -> list[ToyPair]:
    """``n`` random sentence pairs with their word alignments (deterministic for a seed).

    Shapes: -> list of n ToyPair.
    """
    if n < 0:
        raise ValueError(f"n: expected a non-negative int, got {n}")
    if max_adjectives < 0 or max_adjectives > len(_ADJECTIVES):
        raise ValueError(f"max_adjectives: expected 0..{len(_ADJECTIVES)}, got {max_adjectives}")
    rng = np.random.default_rng(seed)
    return [translate(random_sentence(rng, max_adjectives, p_adverb)) for _ in range(n)]
