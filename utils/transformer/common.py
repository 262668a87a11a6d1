"""Framework-free parts of the Transformer shared by both twins.

* ``TransformerConfig``: every size and switch of the model in one typed place.
* ``warmup_schedule``: the learning rate of "Attention Is All You Need", eq. 3.
* ``length_penalty``: the GNMT length normalisation used by beam search.
* ``greedy_search`` / ``beam_search_loop``: decoding loops written once in NumPy;
  a twin passes a function that maps the prefixes decoded so far to the
  log-probabilities of the next token.
* ``cache_parents``: for such a function that keeps a KV cache, which prefix of its
  previous call each new prefix extends (beam search reorders and drops prefixes).

Shapes: letters of ``utils/shapes.py``; here B batch, T prefix length, V vocabulary,
Kb beam size.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Callable

import numpy as np

from utils.checks import check_attention_sizes, check_positive_int
from utils.data.parallel import BOS_ID, EOS_ID, PAD_ID

__all__ = ["TransformerConfig", "warmup_schedule", "length_penalty", "greedy_search", "beam_search_loop", "trim_batch",
           "cache_parents"]

# The constructor arguments of an encoder or decoder block, read from a config by name
# (``EncoderBlock.from_config``): the one place a config is unpacked into a block.
BLOCK_FIELDS = ("d_model", "num_heads", "d_ff", "dropout", "norm_first", "residual", "layer_norm_eps", "activation")


class BlockFromConfig:
    """Mixin of both twins' ``EncoderBlock`` and ``DecoderBlock``: ``from_config``, written once."""

    @classmethod
    def from_config(cls, config: Any, **overrides: Any):
        """A block sized by ``config`` (a ``TransformerConfig``, or any object with some of
        ``BLOCK_FIELDS``, such as a ``BertConfig``); ``overrides`` set or replace fields
        (and, in Keras, layer arguments such as ``name``).

        Shapes: none.
        """
        fields = {k: getattr(config, k) for k in BLOCK_FIELDS if hasattr(config, k)}
        return cls(**{**fields, **overrides})


@dataclass(frozen=True)
class TransformerConfig:
    """Sizes and switches of an encoder-decoder Transformer (names as in the paper's Table 3).

    ``norm_first``: pre-LN (True, the default here) or post-LN (False, the paper
    and BERT). ``residual=False`` removes the skip connections (for the lesson's
    experiment only). ``tie_embeddings`` shares the target embedding with the
    output projection (the paper also scales embeddings by sqrt(d_model), always done here).
    """

    src_vocab_size: int
    tgt_vocab_size: int
    d_model: int = 64
    num_heads: int = 4
    d_ff: int = 256
    num_encoder_layers: int = 2
    num_decoder_layers: int = 2
    max_len: int = 128
    dropout: float = 0.1
    norm_first: bool = True
    residual: bool = True
    tie_embeddings: bool = False
    layer_norm_eps: float = 1e-5
    activation: str = "relu"

    def __post_init__(self) -> None:
        for name in ("src_vocab_size", "tgt_vocab_size", "d_model", "num_heads", "d_ff", "max_len"):
            check_positive_int(name, getattr(self, name))
        for name in ("num_encoder_layers", "num_decoder_layers"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
                raise ValueError(f"{name}: expected a non-negative int, got {value!r}")
        check_attention_sizes(self.d_model, self.num_heads, self.dropout, self.layer_norm_eps)
        check_activation(self.activation)

    def to_dict(self) -> dict:
        return asdict(self)


ACTIVATIONS = ("relu", "gelu")


def check_activation(activation: str) -> str:
    """The feed-forward activation's name, checked: "relu" (the paper) or "gelu" (BERT)."""
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation: expected one of {ACTIVATIONS}, got {activation!r}")
    return activation


def trim_batch(src: np.ndarray, tgt_in: np.ndarray, tgt_out: np.ndarray, idx: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows ``idx`` of the three arrays, with the trailing columns that are padding in every row cut.

    Padding is masked everywhere (attention keys, the loss), so the cut changes no
    result, only the work: a batch of short sentences no longer pays for the
    longest sentence of the corpus (with subword pieces, twice the average length).
    Both twins batch this way, so they see the same arrays.
    Shapes: (N, Ts), (N, Tt), (N, Tt), idx (B,) -> (B, Ts'), (B, Tt'), (B, Tt'), Ts' <= Ts, Tt' <= Tt.
    """
    s, ti, to = (np.asarray(a)[idx] for a in (src, tgt_in, tgt_out))

    def used(a: np.ndarray) -> int:  # columns up to the last one with a real token (at least one)
        cols = (a != PAD_ID).any(axis=0).nonzero()[0]
        return int(cols[-1]) + 1 if len(cols) else 1

    width = max(used(ti), used(to))
    return s[:, : used(s)], ti[:, :width], to[:, :width]


def warmup_schedule(step: int | np.ndarray, d_model: int, warmup_steps: int = 4000, scale: float = 1.0) -> np.ndarray | float:
    """The paper's learning rate: scale * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5).

    It rises linearly for ``warmup_steps`` steps, peaks at
    scale * (d_model * warmup_steps)^-0.5, then decays as 1 / sqrt(step).
    Steps count from 1 (step 0 is treated as step 1).
    Shapes: step a scalar or an array of any shape -> the same shape.
    """
    check_positive_int("d_model", d_model)
    check_positive_int("warmup_steps", warmup_steps)
    if not scale > 0:
        raise ValueError(f"scale: expected a positive number, got {scale!r}")
    s = np.maximum(np.asarray(step, dtype=np.float64), 1.0)
    if np.any(np.asarray(step) < 0):
        raise ValueError(f"step: expected step >= 0, got {step!r}")
    lr = scale * d_model ** -0.5 * np.minimum(s ** -0.5, s * warmup_steps ** -1.5)
    return float(lr) if lr.ndim == 0 else lr


def length_penalty(length: int | np.ndarray, alpha: float = 0.6) -> np.ndarray | float:
    """GNMT's length normalisation lp(Y) = ((5 + |Y|) / 6) ** alpha (Wu et al., 2016).

    Beam search ranks finished hypotheses by log P(Y) / lp(Y): with alpha = 0
    it is the raw log-probability (which favours short outputs); larger alpha
    favours longer ones.
    Shapes: length a scalar or an array of any shape -> the same shape.
    """
    if alpha < 0:
        raise ValueError(f"alpha: expected alpha >= 0, got {alpha!r}")
    lp = ((5.0 + np.asarray(length, dtype=np.float64)) / 6.0) ** alpha
    return float(lp) if lp.ndim == 0 else lp


NextLogProbs = Callable[[np.ndarray, np.ndarray], np.ndarray]


def greedy_search(next_log_probs: NextLogProbs, batch: int, max_len: int, bos_id: int = BOS_ID, eos_id: int = EOS_ID) -> np.ndarray:
    """Greedy decoding: append the most likely next token, max_len times (or until every row said <eos>).

    ``next_log_probs(rows, prefixes)`` gets the indices of the source rows and
    their prefixes (starting with <bos>) and returns the next-token scores.
    After <eos> a row emits padding (0).
    Shapes: rows (B,), prefixes (B, T) -> (B, V); returns tokens (B, max_len) without <bos>.
    """
    check_positive_int("max_len", max_len)
    rows = np.arange(batch)
    prefixes = np.full((batch, 1), bos_id, dtype=np.int64)  # (B, 1)
    out = np.zeros((batch, max_len), dtype=np.int64)  # (B, max_len)
    done = np.zeros(batch, dtype=bool)
    for t in range(max_len):
        scores = np.asarray(next_log_probs(rows, prefixes))  # (B, V)
        y = scores.argmax(axis=-1)
        out[:, t] = np.where(done, PAD_ID, y)
        done |= y == eos_id
        if done.all():
            break
        prefixes = np.concatenate([prefixes, y[:, None]], axis=1)  # (B, t + 2)
    return out


def beam_search_loop(
    next_log_probs: NextLogProbs,
    batch: int,
    max_len: int,
    beam_size: int = 4,
    alpha: float = 0.6,
    bos_id: int = BOS_ID,
    eos_id: int = EOS_ID,
) -> tuple[np.ndarray, np.ndarray]:
    """Beam search with GNMT length penalty over a batch of sources.

    Each source keeps ``beam_size`` live prefixes. At every step all live
    prefixes are extended by every token; the best 2Kb extensions are read in
    order: one ending in <eos> among the best Kb becomes a finished hypothesis
    scored log P / lp(length) (as in fairseq), the others fill the Kb live slots.
    A source stops when no live prefix can still beat its best finished
    hypothesis, even at the most favourable length penalty lp(max_len); at
    max_len the live prefixes count as finished.
    Shapes: returns tokens (B, max_len) (the best hypothesis, <eos> included, then padding) and scores (B,).
    """
    check_positive_int("max_len", max_len)
    k = check_positive_int("beam_size", beam_size)
    if alpha < 0:
        raise ValueError(f"alpha: expected alpha >= 0, got {alpha!r}")
    prefixes = np.full((batch, k, 1), bos_id, dtype=np.int64)  # (B, Kb, 1)
    scores = np.full((batch, k), -np.inf)  # (B, Kb) summed log-probabilities
    scores[:, 0] = 0.0  # at the start the Kb beams are copies: keep only one
    finished: list[list[tuple[float, list[int]]]] = [[] for _ in range(batch)]
    active = np.ones(batch, dtype=bool)
    for t in range(max_len):
        idx = np.flatnonzero(active)
        flat = prefixes[idx].reshape(len(idx) * k, -1)  # (b*Kb, t + 1)
        logp = np.asarray(next_log_probs(np.repeat(idx, k), flat), dtype=np.float64)  # (b*Kb, V)
        v = logp.shape[-1]
        cand = (scores[idx][:, :, None] + logp.reshape(len(idx), k, v)).reshape(len(idx), k * v)  # (b, Kb*V)
        top = np.argsort(-cand, axis=1, kind="stable")[:, : 2 * k]  # (b, 2Kb)
        new_prefixes = np.zeros((batch, k, t + 2), dtype=np.int64)
        new_scores = np.full((batch, k), -np.inf)
        for j, i in enumerate(idx):
            slot = 0
            for rank, c in enumerate(top[j]):
                s = cand[j, c]
                if not np.isfinite(s):
                    break
                beam, token = divmod(int(c), v)
                seq = prefixes[i, beam, 1:].tolist() + [token]
                if token == eos_id:
                    if rank < k:
                        finished[i].append((s / length_penalty(len(seq), alpha), seq))
                elif slot < k:
                    new_prefixes[i, slot, :-1] = prefixes[i, beam]
                    new_prefixes[i, slot, -1] = token
                    new_scores[i, slot] = s
                    slot += 1
            # Stop when no live prefix can still win: log-probabilities only fall as a
            # prefix grows, and the most a longer output can gain is the largest length
            # penalty, lp(max_len). (Stopping at Kb finished hypotheses instead lets
            # unlikely early <eos> endings end the search before the right answer is done.)
            best_live = new_scores[i].max()
            if finished[i]:
                best_done = max(f[0] for f in finished[i])
                if not np.isfinite(best_live) or best_done >= best_live / length_penalty(max_len, alpha):
                    active[i] = False
        prefixes, scores = new_prefixes, new_scores
        if not active.any():
            break
    out = np.zeros((batch, max_len), dtype=np.int64)
    best_scores = np.zeros(batch)
    for i in range(batch):
        if active[i] or not finished[i]:  # ran out of length: live prefixes count too
            for b in range(k):
                if np.isfinite(scores[i, b]):
                    seq = prefixes[i, b, 1:].tolist()
                    finished[i].append((scores[i, b] / length_penalty(len(seq), alpha), seq))
        s, seq = max(finished[i], key=lambda f: f[0])
        out[i, : len(seq[:max_len])] = seq[:max_len]
        best_scores[i] = s
    return out, best_scores


def cache_parents(prev_rows: np.ndarray, prev_prefixes: np.ndarray, rows: np.ndarray, prefixes: np.ndarray) -> np.ndarray | None:
    """For each new prefix, the index of the previous call's prefix that it extends by one token.

    A decoding function that keeps a KV cache gets, at every step, the source row of
    each prefix and the prefixes themselves (``greedy_search`` keeps its rows in place,
    ``beam_search_loop`` reorders, repeats and drops them). Row i of the new call
    extends row ``parents[i]`` of the previous one when it has the same source row and
    its prefix without the last token is that row's prefix: its cached keys and values
    are that row's. None when some new prefix extends none of them (then the caller
    reads the prefixes from scratch).
    Shapes: prev_rows (B,), prev_prefixes (B, T), rows (B',), prefixes (B', T + 1) -> parents (B',) or None.
    """
    prev_prefixes, prefixes = np.ascontiguousarray(prev_prefixes), np.ascontiguousarray(prefixes)
    if prefixes.shape[1] != prev_prefixes.shape[1] + 1:
        return None
    index: dict[tuple[int, bytes], int] = {}
    for i, (row, prefix) in enumerate(zip(np.asarray(prev_rows).tolist(), prev_prefixes)):
        index.setdefault((row, prefix.tobytes()), i)
    parents = []
    for row, prefix in zip(np.asarray(rows).tolist(), prefixes[:, :-1]):
        i = index.get((row, np.ascontiguousarray(prefix).tobytes()))
        if i is None:
            return None
        parents.append(i)
    return np.asarray(parents, dtype=np.int64)
