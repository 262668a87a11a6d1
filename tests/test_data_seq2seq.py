"""The lesson 2 data: dates, the toy translation grammar, the sentence-pair loader."""
from __future__ import annotations

import datetime as dt

import numpy as np
import pytest

from utils.data import dates, parallel, toy_translation


# ---------------------------------------------------------------- dates
def test_every_format_writes_the_same_date_recoverably() -> None:
    day = dt.date(1998, 3, 3)
    written = {name: dates.format_date(day, name) for name in dates.FORMATS}
    assert written["Dth of Month YYYY"] == "3rd of March 1998"
    assert written["Wkd, DD/MM/YY"] == "Tue, 03/03/98"
    assert written["Month D YYYY"] == "March 3 1998"
    assert written["YYYY Mon D"] == "1998 Mar 3"
    assert len(set(written.values())) == len(written), "two formats write the same string"


@pytest.mark.parametrize("day", [dt.date(1950, 1, 1), dt.date(2049, 12, 31), dt.date(2000, 2, 29), dt.date(1987, 11, 22)])
def test_numeric_formats_are_day_month_year_and_two_digit_years_wrap(day: dt.date) -> None:
    text = dates.format_date(day, "DD/MM/YYYY")
    d, m, y = map(int, text.split("/"))
    assert dt.date(y, m, d) == day
    yy = int(dates.format_date(day, "D/M/YY").split("/")[2])
    assert (1900 + yy if yy >= 50 else 2000 + yy) == day.year


def test_ordinals() -> None:
    got = [dates.format_date(dt.date(2001, 1, d), "Dth of Month YYYY").split()[0] for d in (1, 2, 3, 4, 11, 12, 13, 21, 22, 23, 31)]
    assert got == ["1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "23rd", "31st"]


def test_make_dates_is_deterministic_and_targets_are_iso() -> None:
    a, b, c = dates.make_dates(300, seed=4), dates.make_dates(300, seed=4), dates.make_dates(300, seed=5)
    assert a == b and a != c
    for src, tgt in a:
        assert dt.date.fromisoformat(tgt).isoformat() == tgt
        assert set(src) <= set(dates.SOURCE_CHARS), src
    assert len({src for src, _ in a}) > 250, "too many repeated strings"


def test_weekday_in_the_text_is_the_true_weekday() -> None:
    for src, tgt in dates.make_dates(200, seed=1, formats=["Weekday D Month YYYY"]):
        assert src.split()[0].lower() == dates.WEEKDAYS[dt.date.fromisoformat(tgt).weekday()].lower()


def test_date_splits_do_not_overlap() -> None:
    train, test = dates.date_splits(3000, 500, seed=2)
    assert len(train) == 3000 and len(test) == 500
    assert not {s for s, _ in train} & {s for s, _ in test}
    assert dates.date_splits(3000, 500, seed=2) == (train, test)


def test_date_errors_name_the_argument() -> None:
    with pytest.raises(ValueError, match="fmt"):
        dates.format_date(dt.date(2000, 1, 1), "nonsense")
    with pytest.raises(ValueError, match="formats"):
        dates.make_dates(3, formats=["nope"])


# ---------------------------------------------------------------- toy translation
def test_toy_translation_reorders_as_the_grammar_says() -> None:
    pair = toy_translation.translate("the big red dog sees a small cat quickly".split())
    assert " ".join(pair.target) == "ka dor rilo mab ku fen sibi vesh kiru"
    assert pair.alignment == [0, 3, 2, 1, 5, 7, 6, 8, 4]


def test_toy_alignment_is_a_permutation_and_not_the_diagonal() -> None:
    pairs = toy_translation.make_toy_translation(200, seed=3)
    assert pairs == toy_translation.make_toy_translation(200, seed=3)
    off_diagonal = 0
    for p in pairs:
        assert sorted(p.alignment) == list(range(len(p.source)))
        assert all(toy_translation.LEXICON[p.source[j]] == w for w, j in zip(p.target, p.alignment))
        assert p.target[-1] == toy_translation.LEXICON[next(w for w in p.source if w in toy_translation._VERBS)]
        off_diagonal += p.alignment != list(range(len(p.source)))
    assert off_diagonal == len(pairs), "every sentence should need reordering (the verb moves)"


def test_toy_translation_rejects_bad_sentences() -> None:
    with pytest.raises(ValueError, match="unknown"):
        toy_translation.translate(["the", "unicorn", "sees", "a", "cat"])
    with pytest.raises(ValueError, match="one verb"):
        toy_translation.translate(["the", "dog", "a", "cat"])


# ---------------------------------------------------------------- vocab and loader
def test_vocab_specials_order_roundtrip_and_unknowns(tmp_path) -> None:
    v = parallel.Vocab.build([["b", "a", "b"], ["c", "b", "a"]])
    assert v.itos[:4] == list(parallel.SPECIALS) and v.itos[4:] == ["b", "a", "c"]
    assert v.encode(["a", "zzz"], add_bos=True, add_eos=True) == [1, 5, 3, 2]
    assert v.decode([1, 5, 4, 2, 6]) == ["a", "b"]
    assert parallel.Vocab.build([["x", "y", "y"]], min_freq=2).itos[4:] == ["y"]
    assert len(parallel.Vocab.build([list("abcdef")], max_size=6)) == 6
    v.save(tmp_path / "v.json")
    assert parallel.Vocab.load(tmp_path / "v.json").itos == v.itos
    (tmp_path / "bad.json").write_text('{"itos": ["a"]}')
    with pytest.raises(ValueError, match="bad.json"):
        parallel.Vocab.load(tmp_path / "bad.json")


def test_tokenize_words_and_chars() -> None:
    assert parallel.tokenize("Don't go, Tom!") == ["Don", "'", "t", "go", ",", "Tom", "!"]
    assert parallel.tokenize("Ab c", "char", lower=True) == ["a", "b", " ", "c"]
    with pytest.raises(ValueError, match="level"):
        parallel.tokenize("x", "bytes")


def test_read_two_files_and_a_tsv(tmp_path) -> None:
    (tmp_path / "a.en").write_text("Hello there.\nI am here.\n\n", encoding="utf-8")
    (tmp_path / "a.fr").write_text("Bonjour.\nJe suis là.\n", encoding="utf-8")
    pairs = parallel.read_parallel(tmp_path / "a.en", tmp_path / "a.fr")
    assert pairs == [("Hello there.", "Bonjour."), ("I am here.", "Je suis là.")]
    (tmp_path / "t.tsv").write_text("1\tGo.\t7\tVa !\n2\tRun!\t8\tCours !\n", encoding="utf-8")
    assert parallel.read_parallel(tmp_path / "t.tsv", columns=(1, 3)) == [("Go.", "Va !"), ("Run!", "Cours !")]


def test_loader_rejects_line_count_mismatch_naming_files_and_line(tmp_path) -> None:
    (tmp_path / "s.txt").write_text("one\ntwo\nthree\n")
    (tmp_path / "t.txt").write_text("un\ndeux\n")
    with pytest.raises(ValueError) as err:
        parallel.read_parallel(tmp_path / "s.txt", tmp_path / "t.txt")
    msg = str(err.value)
    assert "s.txt has 3 lines" in msg and "t.txt has 2" in msg and "line 3" in msg


def test_loader_rejects_empty_file_and_blank_line(tmp_path) -> None:
    (tmp_path / "s.txt").write_text("one\ntwo\n")
    (tmp_path / "empty.txt").write_text("\n\n")
    with pytest.raises(ValueError, match=r"empty\.txt.*empty"):
        parallel.read_parallel(tmp_path / "s.txt", tmp_path / "empty.txt")
    (tmp_path / "s3.txt").write_text("one\ntwo\nthree\n")
    (tmp_path / "gap.txt").write_text("un\n \ntrois\n")
    with pytest.raises(ValueError, match=r"gap\.txt, line 2: .*blank"):
        parallel.read_parallel(tmp_path / "s3.txt", tmp_path / "gap.txt")
    (tmp_path / "few.tsv").write_text("a\tb\nc\n")
    with pytest.raises(ValueError, match=r"few\.tsv, line 2: expected at least 2"):
        parallel.read_parallel(tmp_path / "few.tsv")
    with pytest.raises(ValueError, match="no such file"):
        parallel.read_parallel(tmp_path / "missing.txt", tmp_path / "s.txt")


def test_load_parallel_arrays_for_teacher_forcing(tmp_path) -> None:
    (tmp_path / "p.tsv").write_text("the dog\tka dor\na cat sees\tku fen kiru\n")
    data = parallel.load_parallel(parallel.read_parallel(tmp_path / "p.tsv"))
    assert data.src.shape == (2, 3) and data.tgt_in.shape == data.tgt_out.shape == (2, 4)
    assert (data.tgt_in[:, 0] == 1).all(), "tgt_in starts with <bos>"
    # tgt_out is tgt_in shifted left by one, ending with <eos>
    assert (data.tgt_out[1, :-1] == data.tgt_in[1, 1:]).all() and data.tgt_out[1, -1] == 2
    assert data.src[0, 2] == 0, "short sources are right-padded with 0"
    assert data.decode_target(data.tgt_out[1]) == "ku fen kiru"
    valid = parallel.load_parallel([("the cat", "ka fen")], src_vocab=data.src_vocab, tgt_vocab=data.tgt_vocab)
    assert valid.src_vocab is data.src_vocab
    assert (data.encode_source(["the unicorn"]) == [[data.src_vocab.stoi["the"], 3, 0]]).all()
    with pytest.raises(ValueError, match="pairs"):
        parallel.load_parallel([])
    kept = parallel.load_parallel([("a b c d", "x"), ("a", "y")], max_len=2)
    assert len(kept) == 1


def test_pad_batch_cuts_and_pads() -> None:
    out = parallel.pad_batch([[5, 6, 7], [8]], max_len=2)
    assert out.dtype == np.int64 and out.tolist() == [[5, 6], [8, 0]]


# ---------------------------------------------------------------- subword pieces
SUBWORD_CORPUS = ["the unbelievable cat sat", "believable things are nice", "the cats sat on the mats",
                  "unbelievably nice cats", "a nice hat on a cat"] * 10


@pytest.mark.parametrize("kind", parallel.SUBWORD_KINDS)
def test_subwords_split_an_unseen_word_into_known_pieces_and_join_back(kind) -> None:
    words = [parallel.tokenize(s, lower=True) for s in SUBWORD_CORPUS]
    sub = parallel.Subwords.train(words, 60, kind)
    assert len(sub) <= 60 and sub.kind == kind
    unseen = ["unbelievablecats", "hats"]  # made of seen letters, never seen as words
    pieces = sub.split(unseen)
    assert parallel.UNK not in pieces and len(pieces) > 2
    assert sum(not p.startswith(parallel.CONTINUE) for p in pieces) == len(unseen), "one piece starts each word"
    assert parallel.Subwords.join(pieces) == unseen
    assert parallel.Subwords.join(sub.split(words[0])) == words[0]
    assert parallel.UNK in sub.split(["zebra"]), "a letter never seen in training has no piece"
    assert sub.split([]) == []


def test_subwords_in_load_parallel_shrink_unknowns_and_decode_to_words() -> None:
    pairs = [(s, s.upper()) for s in SUBWORD_CORPUS]
    src_words = [parallel.tokenize(s, lower=True) for s, _ in pairs]
    tgt_words = [parallel.tokenize(t, lower=True) for _, t in pairs]
    src_sub = parallel.Subwords.train(src_words, 60)
    tgt_sub = parallel.Subwords.train(tgt_words, 60)
    train = parallel.load_parallel(pairs, lower=True, max_len=5, src_subwords=src_sub, tgt_subwords=tgt_sub)
    by_words = parallel.load_parallel(pairs, lower=True, max_len=5)
    assert len(train) == len(by_words), "max_len counts words, so pieces keep the same pairs"
    assert train.src.shape[1] > by_words.src.shape[1], "pieces make longer sequences than words"
    assert set(train.tgt_vocab.itos[4:]) <= set(tgt_sub.tokenizer.get_vocab())
    test = parallel.load_parallel([("the believably nice cat", "THE BELIEVABLY NICE CAT")], lower=True,
                                  src_vocab=train.src_vocab, tgt_vocab=train.tgt_vocab,
                                  src_subwords=src_sub, tgt_subwords=tgt_sub)
    assert parallel.UNK_ID not in test.src[0], "an unseen word made of seen pieces is not <unk>"
    assert train.decode_target(test.tgt_out[0]) == "the believably nice cat"
    np.testing.assert_array_equal(train.encode_source(["the believably nice cat"], test.src.shape[1]), test.src)
    words_only = parallel.load_parallel([("the believably nice cat", "x")], lower=True, src_vocab=by_words.src_vocab,
                                        tgt_vocab=by_words.tgt_vocab)
    assert parallel.UNK_ID in words_only.src[0], "the same unseen word is <unk> without pieces"
    with pytest.raises(ValueError, match="src_subwords"):
        parallel.load_parallel(pairs, src_level="char", src_subwords=src_sub)
    with pytest.raises(ValueError, match="kind"):
        parallel.Subwords.train(src_words, 60, "unigram")
    with pytest.raises(ValueError, match="vocab_size"):
        parallel.Subwords.train(src_words, 3)
