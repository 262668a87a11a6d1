"""PyTorch twin of the seq2seq models (same names and signatures as keras_impl).

Shapes: letters of ``utils/shapes.py``; here B batch, Ts source length, Tt target
length, E embedding width, G encoder GRU width per direction, De = 2G, Gd decoder
GRU width, A additive-attention width, Dq query width (= Gd), Dk projected-key
width, V vocabulary. Masks: boolean keep-masks (B, Ts), True = real token. See
``utils/seq2seq/__init__.py`` for the equations.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np
import torch
from torch import nn

from .. import checks
from ..data.parallel import BOS_ID, EOS_ID, PAD_ID
from ..training import train_loop
from ..attention import torch_impl as attn
from . import _checks as _s2s_checks

__all__ = [
    "Encoder",
    "swap_directions",
    "DecoderAttention",
    "Decoder",
    "Seq2Seq",
    "sequence_loss",
    "train_seq2seq",
    "greedy_decode",
    "export_weights",
    "load_weights",
    "named_weights",
]

SCORES = ("additive", "dot", "general", "none")  # the values of ``attention`` (a constant, not in __all__)


def _check_ids(name: str, ids: torch.Tensor, layout: str = "(B, T)") -> None:
    shape = checks.shape_of(ids)
    if len(shape) != 2:
        raise ValueError(f"{name}: expected token ids {layout}, got shape {shape}")


def _check_kind(attention: str) -> None:
    if attention not in SCORES:
        raise ValueError(f"attention: expected one of {SCORES}, got {attention!r}")


class Encoder(nn.Module):
    """Embedding and a bidirectional GRU; padding (mask False) is skipped, not read.

    Shapes: forward(src (B, Ts) ids, mask (B, Ts) bool) -> outputs (B, Ts, 2G),
    summary (B, 2G) = [last forward state; last backward state].
    """

    def __init__(self, vocab_size: int, d_embed: int, d_hidden: int) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, d_embed)
        self.rnn = nn.GRU(d_embed, d_hidden, batch_first=True, bidirectional=True)

    def forward(self, src: torch.Tensor, mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        _check_ids("src", src, "(B, Ts)")
        if mask is None:
            mask = torch.ones_like(src, dtype=torch.bool)
        lengths = mask.sum(dim=1)
        if bool((lengths == 0).any()):
            raise ValueError(f"mask: expected every source to have at least one real token, got lengths {lengths.tolist()}")
        x = self.embedding(src)  # (B, Ts, E)
        packed = nn.utils.rnn.pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
        out, h_n = self.rnn(packed)  # h_n (2, B, G)
        out, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=src.shape[1])  # (B, Ts, 2G)
        summary = torch.cat([h_n[0], h_n[1]], dim=-1)  # (B, 2G)
        return out, summary


def swap_directions(encoder: Encoder) -> None:
    """Exchange the weights of the encoder GRU's two directions, in place (call again to undo).

    The forward GRU then does what the backward one did and vice versa, so the
    encoder reads a reversed source into the summary it gave the source, halves
    exchanged: for a bidirectional encoder, reversing the source (Sutskever et
    al., 2014) is a relabelling of its two directions, not new information.
    Shapes: encoder(src (B, Ts)) summary (B, 2G) = [fwd; bwd]; after the swap
    encoder(reversed src) summary = [bwd; fwd] of the original.
    """
    with torch.no_grad():
        for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
            fwd, bwd = getattr(encoder.rnn, f"{name}_l0"), getattr(encoder.rnn, f"{name}_l0_reverse")
            old_fwd = fwd.clone()
            fwd.copy_(bwd)
            bwd.copy_(old_fwd)


class DecoderAttention(nn.Module):
    """Scores one decoder state against every encoder output and reads a context.

    ``kind``: ``"additive"`` (Bahdanau; its weights are a ``utils.attention``
    ``AdditiveAttention``), ``"dot"`` (needs d_query == d_key) or ``"general"``.
    ``project_keys`` does the part that does not depend on the decoder state,
    once per sentence instead of once per output step.

    Shapes: forward(query (B, Dq), memory (B, Ts, De), keys (B, Ts, Dk) or None,
    mask (B, Ts) or None) -> context (B, De), weights (B, Ts); Dk = A, Dq or De by ``kind``.
    """

    def __init__(self, kind: str, d_query: int, d_key: int, d_attn: int) -> None:
        super().__init__()
        if kind not in ("additive", "dot", "general"):
            raise ValueError(f"kind: expected 'additive', 'dot' or 'general', got {kind!r}")
        if kind == "dot" and d_query != d_key:
            raise ValueError(f"d_query: expected d_query == d_key={d_key} for dot scores, got {d_query}")
        self.kind, self.d_query, self.d_key = kind, d_query, d_key
        if kind == "additive":
            self.additive = attn.AdditiveAttention(d_query, d_key, d_attn)
        elif kind == "general":
            self.W = nn.Parameter(torch.empty(d_key, d_query))
            nn.init.xavier_uniform_(self.W)

    def project_keys(self, memory: torch.Tensor) -> torch.Tensor:
        """The query-independent part of the scores. Shapes: (B, Ts, De) -> (B, Ts, Dk)."""
        if self.kind == "additive":
            return memory @ self.additive.W_k  # (B, Ts, A)
        if self.kind == "general":
            return memory @ self.W  # (B, Ts, Dq)
        return memory

    def scores(self, query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        """Scores of one query per sentence against projected keys. Shapes: (B, Dq), (B, Ts, Dk) -> (B, Ts)."""
        if self.kind == "additive":
            # additive_scores(query, memory, W_q, W_k, w_v) with memory @ W_k done in project_keys
            q = (query @ self.additive.W_q).unsqueeze(1)  # (B, 1, A)
            return torch.tanh(q + keys) @ self.additive.w_v  # (B, Ts)
        return attn.dot_scores(query.unsqueeze(1), keys).squeeze(1)  # (B, Ts)

    def forward(
        self,
        query: torch.Tensor,
        memory: torch.Tensor,
        keys: torch.Tensor | None = None,
        mask: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        q = checks.check_rank("query", query, 2, "(B, Dq)")
        m = checks.check_rank("memory", memory, 3, "(B, Ts, De)")
        if q[-1] != self.d_query or m[-1] != self.d_key or q[0] != m[0]:
            raise ValueError(
                f"query, memory: expected (B, {self.d_query}) and (B, Ts, {self.d_key}), got {q} and {m}"
            )
        if keys is None:
            keys = self.project_keys(memory)
        scores = self.scores(query, keys).unsqueeze(1)  # (B, 1, Ts)
        mask3 = None if mask is None else mask.unsqueeze(1)  # (B, 1, Ts)
        weights = attn.masked_softmax(scores, mask3)  # (B, 1, Ts)
        context = attn.attend(weights, memory).squeeze(1)  # (B, De)
        return context, weights.squeeze(1)


class Decoder(nn.Module):
    """A GRU decoder that reads a context at every step: attended, or one fixed summary.

    Shapes: forward(tgt_in (B, Tt), memory (B, Ts, De), summary (B, De), mask (B, Ts))
    -> logits (B, Tt, V), weights (B, Tt, Ts) or None when ``attention="none"``.
    """

    def __init__(self, vocab_size: int, d_embed: int, d_hidden: int, d_enc: int,
                 attention: str = "additive", d_attn: int = 64) -> None:
        super().__init__()
        _check_kind(attention)
        self.attention_kind = attention
        self.embedding = nn.Embedding(vocab_size, d_embed)
        self.init = nn.Linear(d_enc, d_hidden)
        self.attention = None if attention == "none" else DecoderAttention(attention, d_hidden, d_enc, d_attn)
        self.cell = nn.GRUCell(d_embed + d_enc, d_hidden)
        self.out = nn.Linear(d_hidden + d_enc + d_embed, vocab_size)

    def initial_state(self, summary: torch.Tensor) -> torch.Tensor:
        """s_0 = tanh(W_init summary). Shapes: (B, De) -> (B, Gd)."""
        return torch.tanh(self.init(summary))

    def project_keys(self, memory: torch.Tensor) -> torch.Tensor | None:
        """Keys for every step of one sentence (None without attention). Shapes: (B, Ts, De) -> (B, Ts, Dk)."""
        return None if self.attention is None else self.attention.project_keys(memory)

    def step(
        self,
        y_prev: torch.Tensor,
        state: torch.Tensor,
        memory: torch.Tensor,
        keys: torch.Tensor | None,
        summary: torch.Tensor,
        mask: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """One output token: attend with s_{i-1}, update the GRU, predict.

        Shapes: y_prev (B,) ids, state (B, Gd), memory (B, Ts, De), keys (B, Ts, Dk),
        summary (B, De), mask (B, Ts) -> logits (B, V), state (B, Gd), weights (B, Ts) or None.
        """
        emb = self.embedding(y_prev)  # (B, E)
        if self.attention is None:
            context, weights = summary, None  # the one fixed vector
        else:
            context, weights = self.attention(state, memory, keys, mask)  # (B, De), (B, Ts)
        state = self.cell(torch.cat([emb, context], dim=-1), state)  # (B, Gd)
        logits = self.out(torch.cat([state, context, emb], dim=-1))  # (B, V)
        return logits, state, weights

    def forward(
        self,
        tgt_in: torch.Tensor,
        memory: torch.Tensor,
        summary: torch.Tensor,
        mask: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        _check_ids("tgt_in", tgt_in, "(B, Tt)")
        state = self.initial_state(summary)
        keys = self.project_keys(memory)
        logits, weights = [], []
        for i in range(tgt_in.shape[1]):  # teacher forcing: feed the true previous token
            step_logits, state, w = self.step(tgt_in[:, i], state, memory, keys, summary, mask)
            logits.append(step_logits)
            weights.append(w)
        all_weights = None if self.attention is None else torch.stack(weights, dim=1)  # (B, Tt, Ts)
        return torch.stack(logits, dim=1), all_weights  # (B, Tt, V)


class Seq2Seq(nn.Module):
    """Encoder + decoder; ``attention`` picks the score (or ``"none"``: the fixed-vector baseline).

    Token id 0 is padding in the source (it is masked out of the encoder and of attention).
    Shapes: forward(src (B, Ts), tgt_in (B, Tt)) -> logits (B, Tt, V), weights (B, Tt, Ts) or None.
    """

    def __init__(self, src_vocab_size: int, tgt_vocab_size: int, d_embed: int = 32, d_hidden: int = 64,
                 attention: str = "additive", d_attn: int = 64) -> None:
        super().__init__()
        _check_kind(attention)
        self.attention_kind = attention
        self.encoder = Encoder(src_vocab_size, d_embed, d_hidden)
        self.decoder = Decoder(tgt_vocab_size, d_embed, 2 * d_hidden, 2 * d_hidden, attention, d_attn)

    def encode(self, src: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Shapes: src (B, Ts) -> memory (B, Ts, De), summary (B, De), mask (B, Ts)."""
        _check_ids("src", src, "(B, Ts)")
        mask = src != PAD_ID  # (B, Ts) keep-mask
        memory, summary = self.encoder(src, mask)
        return memory, summary, mask

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        memory, summary, mask = self.encode(src)
        return self.decoder(tgt_in, memory, summary, mask)


def sequence_loss(logits: torch.Tensor, tgt_out: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over the real (non-padding) target tokens.

    Shapes: logits (B, Tt, V), tgt_out (B, Tt) ids with 0 = padding -> scalar.
    """
    if tuple(logits.shape[:2]) != tuple(tgt_out.shape):
        raise ValueError(f"tgt_out: expected (B, Tt) = {tuple(logits.shape[:2])} from logits {tuple(logits.shape)}, "
                         f"got {tuple(tgt_out.shape)}")
    return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1), ignore_index=PAD_ID)


def train_seq2seq(
    model: Seq2Seq,
    src: np.ndarray,
    tgt_in: np.ndarray,
    tgt_out: np.ndarray,
    epochs: int = 10,
    batch_size: int = 128,
    lr: float = 3e-3,
    seed: int = 0,
    progress: bool = True,
    on_epoch_end: Callable[[int], dict] | None = None,
) -> dict[str, list[float]]:
    """Teacher-forced training with Adam and gradient clipping at norm 1, in the course's loop.

    ``utils.training.train_loop`` shuffles the rows with a NumPy generator seeded
    with ``seed`` (both twins see the same batches), shows the progress bar and
    keeps the history: ``{"loss": per epoch, "batch_loss": per step, "lr", "seconds",
    "step_seconds", ...}`` plus what ``on_epoch_end(epoch)`` returns.
    Shapes: src (N, Ts), tgt_in (N, Tt), tgt_out (N, Tt).
    """
    if not (len(src) == len(tgt_in) == len(tgt_out)):
        raise ValueError(f"src, tgt_in, tgt_out: expected the same N, got {len(src)}, {len(tgt_in)}, {len(tgt_out)}")
    device = next(model.parameters()).device
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)

    def step(idx: np.ndarray, _lr: float) -> float:
        logits, _ = model(*(torch.as_tensor(a[idx], device=device) for a in (src, tgt_in)))
        loss = sequence_loss(logits, torch.as_tensor(tgt_out[idx], device=device))
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        return float(loss.detach())

    return train_loop(step, len(src), epochs, batch_size, seed, schedule=lambda i: lr, progress=progress,
                      desc="seq2seq", on_epoch_end=on_epoch_end, set_training=model.train)


@torch.no_grad()
def greedy_decode(
    model: Seq2Seq, src: np.ndarray, max_len: int, bos_id: int = BOS_ID, eos_id: int = EOS_ID, batch_size: int = 512,
    attention_mask: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray | None]:
    """Feed back the model's own most likely token, step by step (no teacher forcing).

    After <eos> a sequence emits padding (0). Returns NumPy ids and the
    attention weights of every step (None without attention).
    ``attention_mask`` (optional) narrows where each output step may look, on top
    of the padding mask: a boolean keep-mask (True = may attend), e.g. the local
    window of ``utils.attention``'s ``local_window_mask``. A step whose row keeps
    no real token gets all-zero weights and a zero context.
    Shapes: src (B, Ts), attention_mask broadcastable to (B, 1, max_len, Ts)
    -> tokens (B, max_len), weights (B, max_len, Ts) or None.
    """
    _check_ids("src", src, "(B, Ts)")
    if attention_mask is not None:
        if model.attention_kind == "none":
            raise ValueError("attention_mask: this model has no attention (attention='none') to mask")
        attention_mask = _s2s_checks.decode_mask(attention_mask, len(src), max_len, checks.shape_of(src)[1])
    model.eval()
    device = next(model.parameters()).device
    all_tokens, all_weights = [], []
    for start in range(0, len(src), batch_size):
        s = torch.as_tensor(np.asarray(src[start: start + batch_size]), device=device)
        memory, summary, mask = model.encode(s)
        dec = model.decoder
        state, keys = dec.initial_state(summary), dec.project_keys(memory)
        y = torch.full((s.shape[0],), bos_id, dtype=torch.long, device=device)
        done = torch.zeros(s.shape[0], dtype=torch.bool, device=device)
        tokens, weights = [], []
        for i in range(max_len):
            step_mask = mask
            if attention_mask is not None:  # (b, Ts): padding and the caller's mask for this step
                step_mask = mask & torch.as_tensor(attention_mask[start: start + batch_size, i], device=device)
            logits, state, w = dec.step(y, state, memory, keys, summary, step_mask)
            y = logits.argmax(dim=-1)  # (B,)
            tokens.append(torch.where(done, torch.zeros_like(y), y))
            done = done | (y == eos_id)
            if w is not None:
                weights.append(w)
        all_tokens.append(torch.stack(tokens, dim=1).cpu().numpy())  # (b, max_len)
        if weights:
            all_weights.append(torch.stack(weights, dim=1).cpu().numpy())  # (b, max_len, Ts)
    return np.concatenate(all_tokens), (np.concatenate(all_weights) if all_weights else None)


# ----------------------------------------------------------------------------
# Weights under one layout, the same in both twins (see utils/seq2seq/__init__.py)
# ----------------------------------------------------------------------------

_GRU = ("weight_ih", "weight_hh", "bias_ih", "bias_hh")


def _gru_table(prefix: str, w_ih: nn.Parameter, w_hh: nn.Parameter, b_ih: nn.Parameter,
               b_hh: nn.Parameter) -> dict[str, tuple[nn.Parameter, bool]]:
    # torch keeps the gates (r, z, n) as rows of W^T: the layout's order, transposed
    return {f"{prefix}W_x": (w_ih, True), f"{prefix}W_h": (w_hh, True),
            f"{prefix}b_x": (b_ih, False), f"{prefix}b_h": (b_hh, False)}


def _weight_table(layer: nn.Module) -> dict[str, tuple[nn.Parameter, bool]]:
    """Each name of the layout -> (the torch parameter that holds it, stored transposed)."""
    if isinstance(layer, Seq2Seq):
        return {**{f"encoder.{k}": v for k, v in _weight_table(layer.encoder).items()},
                **{f"decoder.{k}": v for k, v in _weight_table(layer.decoder).items()}}
    if isinstance(layer, Encoder):
        table = {"embedding": (layer.embedding.weight, False)}
        for direction, suffix in (("fwd", "l0"), ("bwd", "l0_reverse")):
            table.update(_gru_table(f"{direction}.", *(getattr(layer.rnn, f"{n}_{suffix}") for n in _GRU)))
        return table
    if isinstance(layer, DecoderAttention):
        if layer.kind == "additive":
            return {n: (getattr(layer.additive, n), False) for n in ("W_q", "W_k", "w_v")}
        return {"W": (layer.W, False)} if layer.kind == "general" else {}
    if isinstance(layer, Decoder):
        table = {"embedding": (layer.embedding.weight, False), "W_init": (layer.init.weight, True),
                 "b_init": (layer.init.bias, False)}
        if layer.attention is not None:
            table.update({f"attention.{k}": v for k, v in _weight_table(layer.attention).items()})
        table.update(_gru_table("cell.", *(getattr(layer.cell, n) for n in _GRU)))
        table.update({"W_out": (layer.out.weight, True), "b_out": (layer.out.bias, False)})
        return table
    raise ValueError(f"layer: expected an Encoder, DecoderAttention, Decoder or Seq2Seq, got {type(layer).__name__}")


def export_weights(layer: nn.Module) -> dict[str, np.ndarray]:
    """The weights of a seq2seq layer as NumPy arrays, named and laid out as in both twins.

    ``layer``: an ``Encoder``, ``DecoderAttention``, ``Decoder`` or ``Seq2Seq``.
    Matrices act on the right (``x @ W``); a GRU's three gate blocks are side by side
    in the order (r, z, n); the table of names is in ``utils/seq2seq/__init__.py``.
    ``load_weights`` of either twin takes the result back.
    Shapes: e.g. "encoder.fwd.W_x" (E, 3G), "decoder.W_out" (Gd+De+E, V).
    """
    return {name: (p.detach().cpu().numpy().T if transposed else p.detach().cpu().numpy()).copy()
            for name, (p, transposed) in _weight_table(layer).items()}


def load_weights(layer: nn.Module, weights: Mapping[str, Any]) -> None:
    """Overwrite a seq2seq layer's weights, in place, from the names and layout of ``export_weights``.

    ``weights`` maps every name of the layer's layout (no more, no fewer) to a NumPy
    array or a tensor of either framework, e.g. ``export_weights`` of the other twin,
    or ``named_weights`` of a layer written from scratch with the same attribute names.
    Shapes: as ``export_weights(layer)``.
    """
    table = _weight_table(layer)
    arrays = _s2s_checks.checked_weights(
        {n: tuple(p.shape[::-1] if t else p.shape) for n, (p, t) in table.items()}, weights)
    with torch.no_grad():
        for name, (p, transposed) in table.items():
            a = arrays[name].T if transposed else arrays[name]
            p.copy_(torch.as_tensor(np.ascontiguousarray(a), dtype=p.dtype, device=p.device))


def named_weights(layer: nn.Module) -> dict[str, np.ndarray]:
    """Every weight of any module under its attribute path ("cell.W_x"), as NumPy arrays.

    For a layer written from scratch whose attributes carry the names of
    ``export_weights`` (e.g. ``embedding``, ``fwd.W_x``), ``load_weights(package_layer,
    named_weights(layer))`` gives the package's layer the same weights.
    Shapes: as the weights.
    """
    return {name: p.detach().cpu().numpy().copy() for name, p in layer.named_parameters()}
