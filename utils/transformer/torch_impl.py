"""PyTorch twin of the Transformer (same names and signatures as keras_impl).

Shapes: letters of ``utils/shapes.py``; here B batch, T, Ts, Tt sequence, source and
target lengths, Tq, Tk query and key lengths, D d_model, H heads, Dh = D / H,
F d_ff, V vocabulary size, L layers. Masks are boolean keep-masks (True = may
attend) broadcastable to (B, H, Tq, Tk). Weights use the ``x @ W`` convention of
``utils.attention`` so they copy 1:1 to the Keras twin.
"""
from __future__ import annotations

import math
import time
from typing import Any, Callable

import numpy as np
import torch
from torch import nn

from utils import checks
from utils.data.parallel import PAD_ID
from utils.training import train_loop
from utils.attention.torch_impl import MultiHeadAttention, causal_mask, masked_softmax, merge_heads, project, split_heads
from utils.positional.torch_impl import SinusoidalEncoding

from .common import (BlockFromConfig, TransformerConfig, beam_search_loop, cache_parents, check_activation, greedy_search,
                     length_penalty, trim_batch, warmup_schedule)

__all__ = [
    "warmup_schedule",
    "length_penalty",
    "Linear",
    "LayerNorm",
    "Embedding",
    "FeedForward",
    "EncoderBlock",
    "DecoderBlock",
    "source_mask",
    "target_mask",
    "Encoder",
    "Decoder",
    "Transformer",
    "label_smoothing_loss",
    "train_transformer",
    "greedy_decode",
    "beam_search",
    "export_weights",
    "load_weights",
]


def _check_ids(name: str, ids: torch.Tensor, layout: str) -> tuple:
    shape = checks.shape_of(ids)
    if len(shape) != 2:
        raise ValueError(f"{name}: expected token ids {layout}, got shape {shape}")
    if ids.dtype.is_floating_point:
        raise ValueError(f"{name}: expected integer token ids {layout}, got dtype {ids.dtype}")
    return shape


class Linear(nn.Module):
    """y = x @ w + b, with w (D_in, D_out) as in the Keras twin (Glorot-uniform init).

    Shapes: forward(x (..., D_in)) -> (..., D_out).
    """

    def __init__(self, d_in: int, d_out: int, bias: bool = True) -> None:
        super().__init__()
        self.w = nn.Parameter(nn.init.xavier_uniform_(torch.empty(d_in, d_out)))
        self.b = nn.Parameter(torch.zeros(d_out)) if bias else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return project(x, self.w, self.b)  # the bias added inside the product (addmm)


class LayerNorm(nn.Module):
    """Normalise each position's features to mean 0, variance 1, then scale by gamma and shift by beta.

    Shapes: forward(x (..., D)) -> (..., D).
    """

    def __init__(self, d_model: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = float(eps)
        self.gamma = nn.Parameter(torch.ones(d_model))
        self.beta = nn.Parameter(torch.zeros(d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mean = x.mean(dim=-1, keepdim=True)
        var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)  # biased variance, as in the paper's LN
        return (x - mean) / torch.sqrt(var + self.eps) * self.gamma + self.beta


class Embedding(nn.Module):
    """A table of V learned vectors of width D, looked up by token id and scaled by sqrt(D).

    The sqrt(D) scale (section 3.4 of the paper) puts embeddings (initialised
    with std D^-0.5) on the scale of the positional encoding.
    Shapes: forward(ids (B, T)) -> (B, T, D).
    """

    def __init__(self, vocab_size: int, d_model: int) -> None:
        super().__init__()
        self.d_model = d_model
        self.table = nn.Parameter(torch.randn(vocab_size, d_model) * d_model**-0.5)  # (V, D)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.table[ids] * math.sqrt(self.d_model)  # (B, T, D)


def _dropout(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    return nn.functional.dropout(x, p, training=True) if training and p > 0 else x


class FeedForward(nn.Module):
    """Position-wise feed-forward: the same two-layer network applied at every position.

    ``activation``: "relu" (the paper) or "gelu" (BERT; the exact erf form).
    Shapes: forward(x (B, T, D)) -> (B, T, D), via (B, T, F).
    """

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0, activation: str = "relu") -> None:
        super().__init__()
        self.linear1 = Linear(d_model, d_ff)
        self.linear2 = Linear(d_ff, d_model)
        self.dropout = float(dropout)
        self.activation = check_activation(activation)

    def forward(self, x: torch.Tensor, training: bool | None = None) -> torch.Tensor:
        training = self.training if training is None else training
        h = self.linear1(x)  # (B, T, F)
        h = torch.relu(h) if self.activation == "relu" else nn.functional.gelu(h)
        return self.linear2(_dropout(h, self.dropout, training))  # (B, T, D)


class _Sublayer(nn.Module):
    """Residual + LayerNorm around one sublayer, pre-LN or post-LN."""

    def __init__(self, d_model: int, dropout: float, norm_first: bool, residual: bool, eps: float) -> None:
        super().__init__()
        self.norm = LayerNorm(d_model, eps)
        self.dropout, self.norm_first, self.residual = float(dropout), bool(norm_first), bool(residual)

    def forward(self, x: torch.Tensor, f: Callable, training: bool):
        # pre-LN:  x + drop(f(LN(x)))     post-LN:  LN(x + drop(f(x)))
        y, extra = f(self.norm(x) if self.norm_first else x)
        y = _dropout(y, self.dropout, training)
        y = x + y if self.residual else y
        return (y if self.norm_first else self.norm(y)), extra


class EncoderBlock(BlockFromConfig, nn.Module):
    """Self-attention then feed-forward, each wrapped in a residual connection and LayerNorm.

    Shapes: forward(x (B, Ts, D), mask broadcastable to (B, H, Ts, Ts)) -> x (B, Ts, D), weights (B, H, Ts, Ts).
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        d_ff: int,
        dropout: float = 0.0,
        norm_first: bool = True,
        residual: bool = True,
        layer_norm_eps: float = 1e-5,
        activation: str = "relu",
    ) -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout)
        self.ff = FeedForward(d_model, d_ff, dropout, activation)
        self.sub_attn = _Sublayer(d_model, dropout, norm_first, residual, layer_norm_eps)
        self.sub_ff = _Sublayer(d_model, dropout, norm_first, residual, layer_norm_eps)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None, training: bool | None = None):
        training = self.training if training is None else training
        x, weights = self.sub_attn(x, lambda h: self.self_attn(h, h, h, mask, training), training)
        x, _ = self.sub_ff(x, lambda h: (self.ff(h, training), None), training)
        return x, weights


class DecoderBlock(BlockFromConfig, nn.Module):
    """Causal self-attention, attention over the encoder's output (cross-attention), feed-forward.

    Shapes: forward(x (B, Tt, D), memory (B, Ts, D), self_mask to (B, H, Tt, Tt),
    memory_mask to (B, H, Tt, Ts)) -> x (B, Tt, D), self weights (B, H, Tt, Tt), cross weights (B, H, Tt, Ts).
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        d_ff: int,
        dropout: float = 0.0,
        norm_first: bool = True,
        residual: bool = True,
        layer_norm_eps: float = 1e-5,
        activation: str = "relu",
    ) -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout)
        self.cross_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout)
        self.ff = FeedForward(d_model, d_ff, dropout, activation)
        self.sub_self = _Sublayer(d_model, dropout, norm_first, residual, layer_norm_eps)
        self.sub_cross = _Sublayer(d_model, dropout, norm_first, residual, layer_norm_eps)
        self.sub_ff = _Sublayer(d_model, dropout, norm_first, residual, layer_norm_eps)

    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor,
        self_mask: torch.Tensor | None = None,
        memory_mask: torch.Tensor | None = None,
        training: bool | None = None,
    ):
        training = self.training if training is None else training
        x, self_w = self.sub_self(x, lambda h: self.self_attn(h, h, h, self_mask, training), training)
        # queries from the decoder, keys and values from the encoder's output
        x, cross_w = self.sub_cross(x, lambda h: self.cross_attn(h, memory, memory, memory_mask, training), training)
        x, _ = self.sub_ff(x, lambda h: (self.ff(h, training), None), training)
        return x, self_w, cross_w


def source_mask(src: torch.Tensor, pad_id: int = PAD_ID) -> torch.Tensor:
    """Keep-mask of the real (non-padding) source tokens, for every query.

    Shapes: src (B, Ts) -> (B, 1, 1, Ts).
    """
    _check_ids("src", src, "(B, Ts)")
    return (src != pad_id)[:, None, None, :]  # (B, 1, 1, Ts)


def target_mask(tgt: torch.Tensor, pad_id: int = PAD_ID) -> torch.Tensor:
    """Causal keep-mask (position i sees 0..i) combined with the target's padding.

    Shapes: tgt (B, Tt) -> (B, 1, Tt, Tt).
    """
    _, t = _check_ids("tgt", tgt, "(B, Tt)")
    keep = (tgt != pad_id)[:, None, None, :]  # (B, 1, 1, Tt)
    return causal_mask(t).to(tgt.device)[None, None] & keep  # (B, 1, Tt, Tt)


class Encoder(nn.Module):
    """Token embedding * sqrt(D) + sinusoidal positions, dropout, L encoder blocks (+ final LN if pre-LN).

    Shapes: forward(src (B, Ts), src_mask to (B, H, Ts, Ts)) -> memory (B, Ts, D), L weights (B, H, Ts, Ts).
    """

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        c = config
        self.config = c
        self.embedding = Embedding(c.src_vocab_size, c.d_model)
        self.positions = SinusoidalEncoding(c.max_len, c.d_model)
        self.blocks = nn.ModuleList(
            EncoderBlock.from_config(c) for _ in range(c.num_encoder_layers)
        )
        self.final_norm = LayerNorm(c.d_model, c.layer_norm_eps) if c.norm_first else None

    def forward(self, src: torch.Tensor, src_mask: torch.Tensor | None = None, training: bool | None = None):
        training = self.training if training is None else training
        _check_ids("src", src, "(B, Ts)")
        x = _dropout(self.positions(self.embedding(src)), self.config.dropout, training)  # (B, Ts, D)
        weights = []
        for block in self.blocks:
            x, w = block(x, src_mask, training)
            weights.append(w)
        return (self.final_norm(x) if self.final_norm is not None else x), weights


class Decoder(nn.Module):
    """Target embedding + positions, L decoder blocks, then the projection to vocabulary logits.

    With ``tie_embeddings`` the projection is the target embedding table, transposed.
    Shapes: forward(tgt (B, Tt), memory (B, Ts, D), tgt_mask, memory_mask)
    -> logits (B, Tt, V), L self weights (B, H, Tt, Tt), L cross weights (B, H, Tt, Ts).
    """

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        c = config
        self.config = c
        self.embedding = Embedding(c.tgt_vocab_size, c.d_model)
        self.positions = SinusoidalEncoding(c.max_len, c.d_model)
        self.blocks = nn.ModuleList(
            DecoderBlock.from_config(c) for _ in range(c.num_decoder_layers)
        )
        self.final_norm = LayerNorm(c.d_model, c.layer_norm_eps) if c.norm_first else None
        self.out = None if c.tie_embeddings else Linear(c.d_model, c.tgt_vocab_size)
        self.out_bias = nn.Parameter(torch.zeros(c.tgt_vocab_size)) if c.tie_embeddings else None

    def forward(
        self,
        tgt: torch.Tensor,
        memory: torch.Tensor,
        tgt_mask: torch.Tensor | None = None,
        memory_mask: torch.Tensor | None = None,
        training: bool | None = None,
    ):
        training = self.training if training is None else training
        _check_ids("tgt", tgt, "(B, Tt)")
        x = _dropout(self.positions(self.embedding(tgt)), self.config.dropout, training)  # (B, Tt, D)
        self_ws, cross_ws = [], []
        for block in self.blocks:
            x, sw, cw = block(x, memory, tgt_mask, memory_mask, training)
            self_ws.append(sw)
            cross_ws.append(cw)
        if self.final_norm is not None:
            x = self.final_norm(x)
        # tied: the embedding table, transposed, is the output layer's weight
        logits = self.out(x) if self.out is not None else project(x, self.embedding.table.T, self.out_bias)  # (B, Tt, V)
        return logits, self_ws, cross_ws


class Transformer(nn.Module):
    """The encoder-decoder Transformer: encode the source once, decode the target with teacher forcing.

    Shapes: forward(src (B, Ts), tgt_in (B, Tt)) -> logits (B, Tt, V), attention
    {"encoder": L x (B, H, Ts, Ts), "decoder_self": L x (B, H, Tt, Tt), "cross": L x (B, H, Tt, Ts)}.
    """

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        if not isinstance(config, TransformerConfig):
            raise ValueError(f"config: expected a TransformerConfig, got {type(config).__name__}")
        self.config = config
        self.encoder = Encoder(config)
        self.decoder = Decoder(config)

    def encode(self, src: torch.Tensor, training: bool | None = None):
        """Shapes: src (B, Ts) -> memory (B, Ts, D), src keep-mask (B, 1, 1, Ts), L encoder weights."""
        keep = source_mask(src)
        memory, weights = self.encoder(src, keep, training)
        return memory, keep, weights

    def decode(self, tgt_in: torch.Tensor, memory: torch.Tensor, src_keep: torch.Tensor, training: bool | None = None):
        """Shapes: tgt_in (B, Tt), memory (B, Ts, D), src_keep (B, 1, 1, Ts) -> logits (B, Tt, V), self and cross weights."""
        return self.decoder(tgt_in, memory, target_mask(tgt_in), src_keep, training)

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor, training: bool | None = None):
        s, t = _check_ids("src", src, "(B, Ts)"), _check_ids("tgt_in", tgt_in, "(B, Tt)")
        if s[0] != t[0]:
            raise ValueError(f"tgt_in: expected (B, Tt) with B={s[0]} like src {s}, got {t}")
        memory, keep, enc_w = self.encode(src, training)
        logits, self_w, cross_w = self.decode(tgt_in, memory, keep, training)
        return logits, {"encoder": enc_w, "decoder_self": self_w, "cross": cross_w}


def label_smoothing_loss(logits: torch.Tensor, targets: torch.Tensor, smoothing: float = 0.1, pad_id: int = PAD_ID) -> torch.Tensor:
    """Cross-entropy against a smoothed target: 1 - smoothing on the right token, the rest spread evenly.

    The smoothed distribution puts ``smoothing / (V - 1)`` on every other token
    (padding included, as in common implementations; padding positions are
    left out of the mean). ``smoothing=0`` gives the plain cross-entropy.
    Shapes: logits (B, T, V), targets (B, T) -> scalar (mean over non-padding tokens).
    """
    if not 0.0 <= smoothing < 1.0:
        raise ValueError(f"smoothing: expected a number in [0, 1), got {smoothing!r}")
    ls, ts = checks.shape_of(logits), checks.shape_of(targets)
    if len(ls) != 3 or ls[:2] != ts:
        raise ValueError(f"targets: expected (B, T) = {ls[:2]} from logits {ls} (B, T, V), got {ts}")
    v = ls[-1]
    flat = targets.long().reshape(-1)  # (B*T,)
    return _SmoothedCrossEntropy.apply(logits.float().reshape(-1, v), flat, float(smoothing), (flat != pad_id).float())


class _SmoothedCrossEntropy(torch.autograd.Function):
    """``label_smoothing_loss``'s maths with its gradient written out: a faster training step.

    Per token, with lse = logsumexp(z) (so log p_j = z_j - lse) and t the right token:
    nll = lse - z_t; the wrong tokens' summed -log p = V lse - sum(z) - nll; the loss is
    (1 - s) nll + s / (V - 1) (that sum). Its gradient is p - q, q the smoothed target
    (1 - s on t, s / (V - 1) elsewhere): one pass over the (N, V) logits, where autograd's
    log_softmax, gather, sum and their backward make several.
    Shapes: logits (N, V), targets (N,), keep (N,) 1.0 on real tokens -> scalar.
    """

    @staticmethod
    def forward(ctx: Any, logits: torch.Tensor, targets: torch.Tensor, smoothing: float, keep: torch.Tensor) -> torch.Tensor:
        v = logits.shape[1]
        lse = torch.logsumexp(logits, dim=1)  # (N,)
        nll = lse - logits.gather(1, targets[:, None])[:, 0]  # (N,)
        wrong = v * lse - logits.sum(dim=1) - nll  # (N,) -log p summed over the wrong tokens
        count = keep.sum().clamp(min=1.0)
        ctx.save_for_backward(logits, lse, targets, keep / count)
        ctx.smoothing = smoothing
        return (((1.0 - smoothing) * nll + smoothing / (v - 1) * wrong) * keep).sum() / count

    @staticmethod
    def backward(ctx: Any, grad_out: torch.Tensor):
        logits, lse, targets, weight = ctx.saved_tensors
        s, v = ctx.smoothing, logits.shape[1]
        grad = torch.exp(logits - lse[:, None])  # (N, V) softmax
        grad.sub_(s / (v - 1))
        grad.scatter_add_(1, targets[:, None], grad.new_full((len(targets), 1), -(1.0 - s - s / (v - 1))))
        grad.mul_((weight * grad_out)[:, None])
        return grad, None, None, None


def _device(model: nn.Module) -> torch.device:
    return next(model.parameters()).device


def train_transformer(
    model: Transformer,
    src: np.ndarray,
    tgt_in: np.ndarray,
    tgt_out: np.ndarray,
    epochs: int = 10,
    batch_size: int = 64,
    warmup_steps: int = 400,
    lr_scale: float = 1.0,
    smoothing: float = 0.1,
    seed: int = 0,
    max_seconds: float | None = None,
    clock: Callable[[], float] = time.perf_counter,
    progress: bool = True,
    on_epoch_end: Callable[[int], dict] | None = None,
) -> dict[str, list[float]]:
    """Teacher-forced training: Adam (0.9, 0.98, 1e-9), the warm-up schedule, label smoothing, clipping at 1.

    Runs in the course's loop (``utils.training.train_loop``): rows shuffled by a
    NumPy generator seeded with ``seed``, so both twins see the same batches; stops
    after ``max_seconds`` as measured by ``clock`` (wall time by default;
    ``time.process_time`` gives a CPU-time budget), checked after every step, or when
    ``on_epoch_end(epoch)`` returns a dict with a true ``"stop"``. Returns
    ``{"loss": per epoch, "batch_loss": per step, "lr": per step, "seconds": at each epoch end, ...}``.
    Shapes: src (N, Ts), tgt_in (N, Tt), tgt_out (N, Tt).
    """
    if not (len(src) == len(tgt_in) == len(tgt_out)):
        raise ValueError(f"src, tgt_in, tgt_out: expected the same N, got {len(src)}, {len(tgt_in)}, {len(tgt_out)}")
    device = _device(model)
    d_model = model.config.d_model
    optimizer = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)

    def step(idx: np.ndarray, lr: float) -> float:
        for group in optimizer.param_groups:
            group["lr"] = lr
        s, ti, to = (torch.as_tensor(a, device=device) for a in trim_batch(src, tgt_in, tgt_out, idx))
        logits, _ = model(s, ti)
        loss = label_smoothing_loss(logits, to, smoothing)
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        return float(loss.detach())

    return train_loop(step, len(src), epochs, batch_size, seed, lambda i: warmup_schedule(i + 1, d_model, warmup_steps, lr_scale),
                      max_seconds=max_seconds, clock=clock, progress=progress, desc="Transformer", on_epoch_end=on_epoch_end,
                      set_training=model.train)


def _next_log_probs(model: Transformer, src: np.ndarray, batch_size: int):
    """Encode ``src`` once (in chunks); return f(rows, prefixes) -> next-token log-probs."""
    device = _device(model)
    with torch.no_grad():
        parts = [model.encode(torch.as_tensor(np.asarray(src[i : i + batch_size]), device=device), False)[:2]
                 for i in range(0, len(src), batch_size)]
    memory = torch.cat([p[0] for p in parts])  # (N, Ts, D)
    keep = torch.cat([p[1] for p in parts])  # (N, 1, 1, Ts)

    @torch.no_grad()
    def fn(rows: np.ndarray, prefixes: np.ndarray) -> np.ndarray:
        out = []
        for i in range(0, len(rows), batch_size):
            r = torch.as_tensor(rows[i : i + batch_size], device=device)
            p = torch.as_tensor(prefixes[i : i + batch_size], device=device)
            logits, _, _ = model.decode(p, memory[r], keep[r], False)
            out.append(torch.log_softmax(logits[:, -1].float(), dim=-1).cpu().numpy())  # (b, V)
        return np.concatenate(out)

    return fn


# ----------------------------------------------------------------------------- decoding with a KV cache
# The decoder's causal self-attention never lets a position see a later one, so the keys
# and values of the target positions already decoded do not change when a token is added:
# each step can compute the newest position only and read the others' from a cache (the
# KV cache, lesson 8). The encoder's keys and values, read by every cross-attention, are
# computed once per source. Same weights, same numbers as re-running the decoder.


def _split_weights(mha: MultiHeadAttention) -> tuple:
    """(W_q, b_q, W_kv, b_kv): the queries' third of ``w_qkv`` and the keys' and values' two thirds, sliced once."""
    d = mha.d_model
    b = (None, None) if mha.b_qkv is None else (mha.b_qkv[:d], mha.b_qkv[d:])
    return mha.w_qkv[:, :d], b[0], mha.w_qkv[:, d:], b[1]


def _heads(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None, num_heads: int, parts: int) -> list:
    """x W + b cut into ``parts`` blocks of D columns, each split into heads. Shapes: x (B, T, D) -> parts x (B, H, T, Dh)."""
    return [split_heads(y, num_heads) for y in project(x, w, b).chunk(parts, dim=-1)]


def _attend(mha: MultiHeadAttention, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Lesson 5's attention and output projection on given heads. Shapes: q (B, H, Tq, Dh), k, v (B, H, Tk, Dh) -> (B, Tq, D)."""
    scores = (q * (1.0 / math.sqrt(q.shape[-1]))) @ k.transpose(-1, -2)  # (B, H, Tq, Tk)
    return project(merge_heads(masked_softmax(scores, mask) @ v), mha.w_o, mha.b_o)  # (B, Tq, D)


def _decode_cached(model: Transformer, tokens: torch.Tensor, start: int, weights: list, memory_kv: list,
                   src_keep: torch.Tensor, cache: list | None, tgt_keep: torch.Tensor) -> tuple[torch.Tensor, list]:
    """The decoder on target positions start .. start + T - 1, the earlier ones read from ``cache``.

    ``weights``: per layer, ``_split_weights`` of its self-attention and of its cross-attention.
    Shapes: tokens (B, T), memory_kv L x (k, v) each (B, H, Ts, Dh), src_keep (B, 1, 1, Ts),
    cache L x (k, v) each (B, H, start, Dh) or None, tgt_keep (B, 1, 1, start + T) the non-padding
    target keys -> logits (B, T, V), L x (k, v) each (B, H, start + T, Dh).
    """
    dec = model.decoder
    t = tokens.shape[1]
    x = dec.embedding(tokens) + dec.positions.pe[start : start + t]  # (B, T, D)
    mask = causal_mask(t, start + t).to(tokens.device)[None, None] & tgt_keep  # (B, 1, T, start + T)
    new_cache = []
    for i, block in enumerate(dec.blocks):

        def self_attention(h: torch.Tensor, i: int = i, block: DecoderBlock = block):
            (w_q, b_q, w_kv, b_kv), _ = weights[i]
            k, v = _heads(h, w_kv, b_kv, block.self_attn.num_heads, 2)  # (B, H, T, Dh): the new positions' only
            if cache is not None:
                k, v = torch.cat([cache[i][0], k], dim=2), torch.cat([cache[i][1], v], dim=2)
            new_cache.append((k, v))
            (q,) = _heads(h, w_q, b_q, block.self_attn.num_heads, 1)
            return _attend(block.self_attn, q, k, v, mask), None

        x, _ = block.sub_self(x, self_attention, False)
        def cross_attention(h: torch.Tensor, i: int = i, block: DecoderBlock = block):
            w_q, b_q, _, _ = weights[i][1]
            (q,) = _heads(h, w_q, b_q, block.cross_attn.num_heads, 1)
            return _attend(block.cross_attn, q, *memory_kv[i], src_keep), None

        x, _ = block.sub_cross(x, cross_attention, False)
        x, _ = block.sub_ff(x, lambda h, b=block: (b.ff(h, False), None), False)
    if dec.final_norm is not None:
        x = dec.final_norm(x)
    logits = dec.out(x) if dec.out is not None else project(x, dec.embedding.table.T, dec.out_bias)  # (B, T, V)
    return logits, new_cache


def _cached_next_log_probs(model: Transformer, src: np.ndarray, batch_size: int):
    """Like ``_next_log_probs``, with a KV cache: each call computes only the newest target position.

    The prefixes of a call must extend those of the previous one by one token (found with
    ``cache_parents``; beam search reorders them); otherwise they are read from scratch.
    """
    device = _device(model)
    with torch.no_grad():
        parts = [model.encode(torch.as_tensor(np.asarray(src[i : i + batch_size]), device=device), False)[:2]
                 for i in range(0, len(src), batch_size)]
        memory = torch.cat([p[0] for p in parts])  # (N, Ts, D)
        keep = torch.cat([p[1] for p in parts])  # (N, 1, 1, Ts)
        weights = [(_split_weights(block.self_attn), _split_weights(block.cross_attn)) for block in model.decoder.blocks]
        memory_kv = [_heads(memory, w[1][2], w[1][3], block.cross_attn.num_heads, 2)  # L x (N, H, Ts, Dh) twice
                     for w, block in zip(weights, model.decoder.blocks)]
    state: dict = {"rows": None, "prefixes": None, "cache": None}

    @torch.no_grad()
    def fn(rows: np.ndarray, prefixes: np.ndarray) -> np.ndarray:
        parents = None if state["prefixes"] is None else cache_parents(state["rows"], state["prefixes"], rows, prefixes)
        start = 0 if parents is None else prefixes.shape[1] - 1
        if parents is not None:
            index = torch.as_tensor(parents, device=device)
            old = [(k[index], v[index]) for k, v in state["cache"]]
        out, caches = [], []
        for i in range(0, len(rows), batch_size):
            r = torch.as_tensor(rows[i : i + batch_size], device=device)
            p = torch.as_tensor(prefixes[i : i + batch_size], device=device)
            past = None if parents is None else [(k[i : i + batch_size], v[i : i + batch_size]) for k, v in old]
            logits, cache = _decode_cached(model, p[:, start:], start, weights, [(k[r], v[r]) for k, v in memory_kv], keep[r], past,
                                           (p != PAD_ID)[:, None, None, :])
            out.append(torch.log_softmax(logits[:, -1].float(), dim=-1).cpu().numpy())  # (b, V)
            caches.append(cache)
        state.update(rows=np.asarray(rows), prefixes=np.asarray(prefixes),
                     cache=[(torch.cat([c[j][0] for c in caches]), torch.cat([c[j][1] for c in caches])) for j in range(len(caches[0]))])
        return np.concatenate(out)

    return fn


def greedy_decode(
    model: Transformer, src: np.ndarray, max_len: int, bos_id: int = 1, eos_id: int = 2, batch_size: int = 256,
    use_cache: bool = True,
) -> np.ndarray:
    """Decode by feeding back the most likely token at every step (no teacher forcing).

    The source is encoded once. With ``use_cache`` (the default) each step computes only
    the newest target position and reads the earlier positions' keys and values from a
    cache; ``use_cache=False`` re-runs the decoder on the whole prefix. Same tokens.
    After <eos> a row emits padding (0).
    Shapes: src (B, Ts) -> tokens (B, max_len).
    """
    _check_ids("src", torch.as_tensor(np.asarray(src)), "(B, Ts)")
    model.eval()
    make = _cached_next_log_probs if use_cache else _next_log_probs
    return greedy_search(make(model, np.asarray(src), batch_size), len(src), max_len, bos_id, eos_id)


def beam_search(
    model: Transformer,
    src: np.ndarray,
    max_len: int,
    beam_size: int = 4,
    alpha: float = 0.6,
    bos_id: int = 1,
    eos_id: int = 2,
    batch_size: int = 256,
    use_cache: bool = True,
) -> np.ndarray:
    """Beam search with the GNMT length penalty ((5 + |Y|) / 6) ** alpha.

    ``use_cache`` as in ``greedy_decode``: the cache follows each hypothesis as the
    beams are reordered. Same tokens either way.
    Shapes: src (B, Ts) -> tokens (B, max_len) (the best hypothesis of each source, padding after <eos>).
    """
    _check_ids("src", torch.as_tensor(np.asarray(src)), "(B, Ts)")
    model.eval()
    fn = (_cached_next_log_probs if use_cache else _next_log_probs)(model, np.asarray(src), batch_size)
    return beam_search_loop(fn, len(src), max_len, beam_size, alpha, bos_id, eos_id)[0]


def export_weights(model: nn.Module) -> dict[str, np.ndarray]:
    """All weights as NumPy arrays under names both twins share (e.g. ``encoder.blocks.0.ff.linear1.w``).

    Shapes: every array keeps its parameter's shape (the ``x @ W`` convention).
    """
    return {name: p.detach().cpu().numpy().copy() for name, p in model.named_parameters()}


def load_weights(model: nn.Module, weights: dict[str, np.ndarray]) -> None:
    """Copy arrays from ``export_weights`` (of either twin) into ``model``, checking names and shapes.

    Shapes: each array must have the shape of the parameter of the same name.
    """
    params = dict(model.named_parameters())
    missing, unexpected = sorted(set(params) - set(weights)), sorted(set(weights) - set(params))
    if missing or unexpected:
        raise ValueError(f"weights: expected the names of the model's parameters; missing {missing[:5]}, unexpected {unexpected[:5]}")
    with torch.no_grad():
        for name, p in params.items():
            w = np.asarray(weights[name])
            if tuple(w.shape) != tuple(p.shape):
                raise ValueError(f"weights[{name!r}]: expected shape {tuple(p.shape)}, got {tuple(w.shape)}")
            p.copy_(torch.as_tensor(w, dtype=p.dtype))
