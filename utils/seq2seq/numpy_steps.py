"""NumPy reference of one GRU decoder step, in both orders: Bahdanau's and Luong's.

The twins' ``Decoder.step`` is Bahdanau's order (attend with the previous state
``s_{i-1}``, then update the GRU); ``decoder_step`` here computes the same from
the weights that ``export_weights`` gives. ``luong_step`` is the decoder of Luong,
Pham and Manning (2015, sections 3.1 and 3.3) with a GRU in place of their LSTM:
the GRU runs first, fed the previous step's attentional vector (input feeding);
then the *current* state scores every encoder output, with a plain dot product or, when
the weights hold ``W_a``, Luong's *general* score ``h_t W_a h_j`` (the encoder outputs may
then have another width); the attentional vector is ``tanh([c_t; h_t] W_c)`` and the
logits are read from it.
No twin offers Luong's order (the package's ``"dot"`` and ``"general"`` keep
Bahdanau's); it is here as the reference assignment 2's tests compare with.

Not a ``numpy_ref`` module: those mirror their twins' public names and signatures
(``tests/test_twins.py``), and these steps take weight dictionaries the twins do
not, so that a test can check a step written from scratch against them.

Weights use the one layout of ``utils/seq2seq/__init__.py``: matrices act on the
right (``x @ W``), a GRU's gate blocks sit side by side in the order (r, z, n).
Shapes: letters of ``utils/shapes.py``; here B batch, Ts source length, E embedding
width, De encoder output width, Gd decoder state width, V vocabulary. Masks are
boolean keep-masks (B, Ts), True = a real source token.
"""
from __future__ import annotations

from typing import Mapping

import numpy as np

from ..attention import numpy_ref as attn

__all__ = ["gru_cell", "decoder_step", "luong_step"]


def gru_cell(x: np.ndarray, h: np.ndarray, W_x: np.ndarray, W_h: np.ndarray, b_x: np.ndarray,
             b_h: np.ndarray) -> np.ndarray:
    """One GRU step (Cho et al., 2014), gates side by side in the order (r, z, n).

    Shapes: x (B, D_in), h (B, Gd), W_x (D_in, 3Gd), W_h (Gd, 3Gd), b_x and b_h (3Gd,) -> (B, Gd).
    """
    x_r, x_z, x_n = np.split(x @ W_x + b_x, 3, axis=-1)  # (B, Gd) each
    h_r, h_z, h_n = np.split(h @ W_h + b_h, 3, axis=-1)  # (B, Gd) each
    r = 1 / (1 + np.exp(-(x_r + h_r)))  # reset gate
    z = 1 / (1 + np.exp(-(x_z + h_z)))  # update gate
    n = np.tanh(x_n + r * h_n)  # candidate state
    return (1 - z) * n + z * h


def _cell(weights: Mapping[str, np.ndarray], x: np.ndarray, h: np.ndarray) -> np.ndarray:
    return gru_cell(x, h, *(np.asarray(weights[f"cell.{n}"], dtype=np.float64) for n in ("W_x", "W_h", "b_x", "b_h")))


def _read(scores: np.ndarray, memory: np.ndarray, mask: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """Softmax over the source positions and the weighted sum. Shapes: (B, Ts), (B, Ts, De) -> (B, De), (B, Ts)."""
    alpha = attn.masked_softmax(scores, None if mask is None else np.asarray(mask, dtype=bool))  # (B, Ts)
    return np.einsum("bt,btd->bd", alpha, memory), alpha


def decoder_step(y_prev: np.ndarray, state: np.ndarray, memory: np.ndarray, summary: np.ndarray,
                 mask: np.ndarray | None, weights: Mapping[str, np.ndarray],
                 attention: str = "additive") -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """One step of the twins' ``Decoder``: attend with the previous state, update the GRU, predict.

    ``weights``: the decoder's ``export_weights`` (``embedding``, ``attention.W_q``,
    ``attention.W_k``, ``attention.w_v``, ``cell.*``, ``W_out``, ``b_out``); ``attention``
    is ``"additive"`` or ``"none"`` (the fixed summary).
    Shapes: y_prev (B,) ids, state (B, Gd), memory (B, Ts, De), summary (B, De), mask (B, Ts) or None
    -> logits (B, V), new state (B, Gd), weights (B, Ts) or None.
    """
    if attention not in ("additive", "none"):
        raise ValueError(f"attention: expected 'additive' or 'none', got {attention!r}")
    w = {k: np.asarray(v, dtype=np.float64) for k, v in weights.items()}
    memory, state = np.asarray(memory, dtype=np.float64), np.asarray(state, dtype=np.float64)
    emb = w["embedding"][np.asarray(y_prev)]  # (B, E)
    if attention == "none":
        context, alpha = np.asarray(summary, dtype=np.float64), None
    else:
        hidden = np.tanh((state @ w["attention.W_q"])[:, None, :] + memory @ w["attention.W_k"])  # (B, Ts, A)
        context, alpha = _read(hidden @ w["attention.w_v"], memory, mask)
    new_state = _cell(w, np.concatenate([emb, context], axis=-1), state)  # (B, Gd)
    logits = np.concatenate([new_state, context, emb], axis=-1) @ w["W_out"] + w["b_out"]  # (B, V)
    return logits, new_state, alpha


def luong_step(y_prev: np.ndarray, state: np.ndarray, feed: np.ndarray, memory: np.ndarray,
               mask: np.ndarray | None, weights: Mapping[str, np.ndarray]
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One step of Luong et al.'s decoder: GRU first (input feeding), then attention with the new state.

    ``feed`` is the previous step's attentional vector (zeros before the first step).
    ``weights``: ``embedding`` (V, E), ``cell.W_x`` (E+Gd, 3Gd), ``cell.W_h`` (Gd, 3Gd),
    ``cell.b_x`` and ``cell.b_h`` (3Gd,), ``W_c`` (De+Gd, Gd), ``W_out`` (Gd, V), ``b_out`` (V,);
    optionally ``W_a`` (Gd, De), which selects the *general* score ``h W_a h_j`` (any De).
    Without ``W_a`` the score is the dot product, which needs De = Gd. Neither is scaled, as in the paper.
    Shapes: y_prev (B,) ids, state (B, Gd), feed (B, Gd), memory (B, Ts, De), mask (B, Ts) or None
    -> logits (B, V), new state (B, Gd), attentional vector (B, Gd), weights (B, Ts).
    """
    w = {k: np.asarray(v, dtype=np.float64) for k, v in weights.items()}
    memory, state = np.asarray(memory, dtype=np.float64), np.asarray(state, dtype=np.float64)
    general = "W_a" in w
    if general and w["W_a"].shape != (state.shape[-1], memory.shape[-1]):
        raise ValueError(f"W_a: expected (Gd, De) = ({state.shape[-1]}, {memory.shape[-1]}), got {w['W_a'].shape}")
    if not general and memory.shape[-1] != state.shape[-1]:
        raise ValueError(f"memory: expected (B, Ts, De) with De = Gd = {state.shape[-1]} for dot scores, "
                         f"got {memory.shape}")
    emb = w["embedding"][np.asarray(y_prev)]  # (B, E)
    h = _cell(w, np.concatenate([emb, np.asarray(feed, dtype=np.float64)], axis=-1), state)  # (B, Gd): h_t
    query = h @ w["W_a"] if general else h  # (B, De)
    context, alpha = _read(np.einsum("btd,bd->bt", memory, query), memory, mask)  # scored with h_t
    attentional = np.tanh(np.concatenate([context, h], axis=-1) @ w["W_c"])  # (B, Gd)
    logits = attentional @ w["W_out"] + w["b_out"]  # (B, V)
    return logits, h, attentional, alpha
