"""The shape letters of the whole ``utils`` package: one token, one meaning.

Every ``Shapes:`` line of a docstring, every "Shape letters" paragraph of a
package and every shape comment (``# (B, H, Tq, Tk)``) uses the tokens of this
table, with these meanings. A package's docstring may repeat the few letters it
uses, always with the same meaning; ``tests/test_shapes.py`` checks that every
capitalised token of a shape tuple is one of the table's.

How to read a shape:

* ``(B, H, Tq, Tk)``: one size per axis; ``(B,)`` is one axis of B.
* ``...``: any number of leading (batch) axes.
* an integer is that size (``(B, 1, 1, Tk)``, ``(B, R, 3)``); a lowercase name
  is a plain int, usually an argument (``max_len``, ``n``, ``batch_size``).
* arithmetic means the size it computes: ``2G``, ``3D``, ``K+1``, ``P * P * Ic``,
  ``Dh = D / H``; ``<=M`` is at most M.
* a prime is another size of the same kind: ``test_x (N', D)`` has its own
  number of examples, ``T' <= T`` is a shorter length.

The table (token, meaning):

Batches and data sets
    B       batch: the rows of one batch
    N       examples: the rows of a whole data set (all of them, not one batch)

Sequence lengths
    T       sequence length: the tokens or positions of one sequence
    Tq      query length: the positions that attend (one row of weights each)
    Tk      key length: the positions attended to (keys and values)
    Ts      source length: the encoder's input sequence
    Tt      target length: the decoder's input or output sequence
    Tp      predicted length: the tokens of a decoded output
    Tw      window length: the keys one query sees in banded (sliding-window) attention

Widths
    D       model width (d_model): token vectors, embeddings, queries and keys
    Dq      query width, where queries are not D wide (seq2seq: the decoder state)
    Dk      key width, where keys are not D wide (seq2seq: the projected keys)
    Dv      value width
    Dh      width of one attention head, D / H
    D_in    input width of a dense layer
    D_out   output width of a dense layer
    A       hidden width of additive (Bahdanau) attention
    F       inner width of the position-wise feed-forward layer (d_ff)
    E       word-embedding width of the seq2seq GRU model
    G       seq2seq encoder GRU width, per direction
    De      seq2seq encoder output width, 2G (both directions)
    Gd      seq2seq decoder GRU state width

Counts of a model
    H       attention heads
    L       layers (blocks) of a stack
    V       vocabulary size
    C       classes of a classifier
    K       hops of a MemN2N
    Kb      beam size: the live hypotheses kept per source in beam search

Memories
    M       memory slots: the sentences a MemN2N holds (slot 0 the newest), the rows of an NTM/DNC memory
    J       words per sentence of a MemN2N story or question
    Ns      sentences of a MemN2N batch in one flat list (B x M story sentences, or B questions)
    W       width of one NTM/DNC memory row (the DNC's word size)
    R       read heads of a DNC

Images
    Ih      image height in pixels
    Iw      image width in pixels
    Ic      image channels
    P       patch side in pixels (P x P patches)
    Np      patches per image, (Ih / P) (Iw / P)

Renamed when the table was made (each had a second meaning): the seq2seq GRU
width H -> G (so De = 2G, decoder width Hd -> Gd), the beam size K -> Kb, the
rows of the NTM/DNC memory N -> M, image height, width and channels H, W, C ->
Ih, Iw, Ic, the patch count N -> Np. ``unpatchify``'s error message still counts
the patches as N (a test quotes it; it reads "N=4 patches").
"""
from __future__ import annotations

__all__ = ["LETTERS", "GROUPS", "meaning", "table"]

# group -> {token: meaning}; the docstring above shows the same table
GROUPS: dict[str, dict[str, str]] = {
    "Batches and data sets": {
        "B": "batch: the rows of one batch",
        "N": "examples: the rows of a whole data set (all of them, not one batch)",
    },
    "Sequence lengths": {
        "T": "sequence length: the tokens or positions of one sequence",
        "Tq": "query length: the positions that attend (one row of weights each)",
        "Tk": "key length: the positions attended to (keys and values)",
        "Ts": "source length: the encoder's input sequence",
        "Tt": "target length: the decoder's input or output sequence",
        "Tp": "predicted length: the tokens of a decoded output",
        "Tw": "window length: the keys one query sees in banded (sliding-window) attention",
    },
    "Widths": {
        "D": "model width (d_model): token vectors, embeddings, queries and keys",
        "Dq": "query width, where queries are not D wide (seq2seq: the decoder state)",
        "Dk": "key width, where keys are not D wide (seq2seq: the projected keys)",
        "Dv": "value width",
        "Dh": "width of one attention head, D / H",
        "D_in": "input width of a dense layer",
        "D_out": "output width of a dense layer",
        "A": "hidden width of additive (Bahdanau) attention",
        "F": "inner width of the position-wise feed-forward layer (d_ff)",
        "E": "word-embedding width of the seq2seq GRU model",
        "G": "seq2seq encoder GRU width, per direction",
        "De": "seq2seq encoder output width, 2G (both directions)",
        "Gd": "seq2seq decoder GRU state width",
    },
    "Counts of a model": {
        "H": "attention heads",
        "L": "layers (blocks) of a stack",
        "V": "vocabulary size",
        "C": "classes of a classifier",
        "K": "hops of a MemN2N",
        "Kb": "beam size: the live hypotheses kept per source in beam search",
    },
    "Memories": {
        "M": "memory slots: the sentences a MemN2N holds (slot 0 the newest), the rows of an NTM/DNC memory",
        "J": "words per sentence of a MemN2N story or question",
        "Ns": "sentences of a MemN2N batch in one flat list (B x M story sentences, or B questions)",
        "W": "width of one NTM/DNC memory row (the DNC's word size)",
        "R": "read heads of a DNC",
    },
    "Images": {
        "Ih": "image height in pixels",
        "Iw": "image width in pixels",
        "Ic": "image channels",
        "P": "patch side in pixels (P x P patches)",
        "Np": "patches per image, (Ih / P) (Iw / P)",
    },
}

# token -> meaning, every group in one dict
LETTERS: dict[str, str] = {token: text for group in GROUPS.values() for token, text in group.items()}


def meaning(token: str) -> str:
    """The one meaning of a shape token, e.g. ``meaning("Tq")``; a KeyError names the unknown token.

    Shapes: none.
    """
    try:
        return LETTERS[token]
    except KeyError:
        raise KeyError(f"{token!r} is not a shape letter of utils/shapes.py (known: {', '.join(LETTERS)})") from None


def table() -> str:
    """The table as the module docstring shows it: a heading per group, then ``token  meaning`` lines.

    Shapes: none.
    """
    blocks = []
    for group, letters in GROUPS.items():
        blocks.append("\n".join([group] + [f"    {token:<8}{text}" for token, text in letters.items()]))
    return "\n\n".join(blocks)
