"""PyTorch twin of the GPT (same names and signatures as keras_impl).

What lesson 8 writes step by step, with what the lesson leaves out: input checks,
grouped key-value heads, the KV cache in every layer, the training loop (the lesson writes its step
and checks it against ``train_gpt``'s first losses), evaluation and
generation. The blocks reuse lesson 6's ``LayerNorm`` and ``FeedForward``
(``utils.transformer``), with GPT-2's GELU.

Fast path (same numbers to 1e-5): attention runs in PyTorch's fused
``scaled_dot_product_attention``, which never stores the (B, H, T, Tk) weights.

Shapes: letters of ``utils/shapes.py``; here B batch, T new positions, T' cached
positions, Tk = T' + T keys, D d_model, H heads, Hkv key-value heads, Dh = D / H,
F d_ff, V vocabulary size, L layers, N tokens of a text.
"""
from __future__ import annotations

import math
import time
from typing import Callable

import numpy as np
import torch
from torch import nn

from utils import checks
from utils.attention.torch_impl import causal_mask, project
from utils.training import train_loop
from utils.transformer.torch_impl import FeedForward, LayerNorm, export_weights, load_weights

from .common import (GPTConfig, apply_temperature, attention_widths, generate_loop, lr_schedule, sample_next,
                     top_k_filter, top_p_filter, typical_filter)

__all__ = [
    "apply_temperature",
    "top_k_filter",
    "top_p_filter",
    "typical_filter",
    "sample_next",
    "causal_self_attention",
    "CausalSelfAttention",
    "Block",
    "GPT",
    "lm_loss",
    "token_bits",
    "train_gpt",
    "generate",
    "export_weights",
    "load_weights",
]

LN2 = math.log(2.0)
Cache = tuple[torch.Tensor, torch.Tensor]


def causal_self_attention(
    x: torch.Tensor,
    w_qkv: torch.Tensor,
    b_qkv: torch.Tensor | None,
    w_o: torch.Tensor,
    b_o: torch.Tensor | None,
    num_heads: int,
    num_kv_heads: int | None = None,
    cache: Cache | None = None,
) -> tuple[torch.Tensor, Cache]:
    """Causal self-attention of new positions, given the keys and values of the earlier ones.

    ``w_qkv`` holds [W_q | W_k | W_v]: D columns for the queries, Hkv * Dh for the keys
    and as many for the values (with Hkv = H it is lesson 5's (D, 3D) layout). Query
    head h reads key-value head h // (H / Hkv). The new positions come after the
    ``cache``'s; each sees the cached keys and the new ones up to itself.
    Returns the output and the keys and values of all positions so far (the new cache).
    Shapes: x (B, T, D), cache (k, v) each (B, Hkv, T', Dh) or None
    -> y (B, T, D), (k, v) each (B, Hkv, Tk, Dh).
    """
    b, t, d = checks.check_rank("x", x, 3, "(B, T, D)")
    d_head, kv, width = attention_widths(d, num_heads, num_kv_heads)
    if tuple(w_qkv.shape) != (d, width):
        raise ValueError(f"w_qkv: expected (D, D + 2 Hkv Dh) = {(d, width)}, got {tuple(w_qkv.shape)}")
    q, k, v = project(x, w_qkv, b_qkv).split([d, kv * d_head, kv * d_head], dim=-1)
    q = q.reshape(b, t, num_heads, d_head).transpose(1, 2)  # (B, H, T, Dh)
    k = k.reshape(b, t, kv, d_head).transpose(1, 2)  # (B, Hkv, T, Dh)
    v = v.reshape(b, t, kv, d_head).transpose(1, 2)  # (B, Hkv, T, Dh)
    if cache is not None:
        if len(cache) != 2 or tuple(cache[0].shape[:2]) != (b, kv) or cache[0].shape[-1] != d_head:
            raise ValueError(f"cache: expected (k, v) each (B, Hkv, T', Dh) with B={b}, Hkv={kv}, Dh={d_head}, "
                             f"got {[tuple(c.shape) for c in cache]}")
        k = torch.cat([cache[0], k], dim=2)  # (B, Hkv, Tk, Dh): the earlier keys, then the new ones
        v = torch.cat([cache[1], v], dim=2)
    group = num_heads // kv
    k_h = k.repeat_interleave(group, dim=1) if group > 1 else k  # (B, H, Tk, Dh)
    v_h = v.repeat_interleave(group, dim=1) if group > 1 else v
    tk = k.shape[2]
    # Fast path: the fused kernel. One new query sees every key; as many queries as keys
    # is the plain causal case; otherwise the new queries are the last T of Tk positions.
    mask = None if t == 1 or t == tk else causal_mask(t, tk).to(x.device)
    heads = nn.functional.scaled_dot_product_attention(q, k_h, v_h, attn_mask=mask, is_causal=t == tk and t > 1)
    y = project(heads.transpose(1, 2).reshape(b, t, d), w_o, b_o)  # (B, H, T, Dh) -> (B, T, D)
    return y, (k, v)


class CausalSelfAttention(nn.Module):
    """Masked multi-head self-attention with ``num_kv_heads`` key-value heads and a KV cache.

    Weights (x @ W convention): ``w_qkv`` (D, D + 2 Hkv Dh), ``b_qkv``, ``w_o`` (D, D), ``b_o``.
    Shapes: forward(x (B, T, D), cache (k, v) each (B, Hkv, T', Dh) or None)
    -> y (B, T, D), (k, v) each (B, Hkv, Tk, Dh).
    """

    def __init__(self, d_model: int, num_heads: int, num_kv_heads: int | None = None) -> None:
        super().__init__()
        checks.check_positive_int("d_model", d_model)
        checks.check_positive_int("num_heads", num_heads)
        if d_model % num_heads:
            raise ValueError(f"num_heads: expected a divisor of d_model={d_model}, got {num_heads}")
        _, self.num_kv_heads, width = attention_widths(d_model, num_heads, num_kv_heads)
        self.num_heads = num_heads
        self.w_qkv = nn.Parameter(torch.randn(d_model, width) * 0.02)
        self.b_qkv = nn.Parameter(torch.zeros(width))
        self.w_o = nn.Parameter(torch.randn(d_model, d_model) * 0.02)
        self.b_o = nn.Parameter(torch.zeros(d_model))

    def forward(self, x: torch.Tensor, cache: Cache | None = None) -> tuple[torch.Tensor, Cache]:
        return causal_self_attention(x, self.w_qkv, self.b_qkv, self.w_o, self.b_o, self.num_heads, self.num_kv_heads, cache)


class Block(nn.Module):
    """A pre-LN decoder block without cross-attention: x + attn(LN(x)), then x + FFN(LN(x)).

    Shapes: forward(x (B, T, D), cache (k, v) or None) -> x (B, T, D), (k, v) each (B, Hkv, Tk, Dh).
    """

    def __init__(self, d_model: int, num_heads: int, d_ff: int, num_kv_heads: int | None = None,
                 layer_norm_eps: float = 1e-5) -> None:
        super().__init__()
        self.norm1 = LayerNorm(d_model, layer_norm_eps)
        self.attn = CausalSelfAttention(d_model, num_heads, num_kv_heads)
        self.norm2 = LayerNorm(d_model, layer_norm_eps)
        self.ff = FeedForward(d_model, d_ff, 0.0, "gelu")

    def forward(self, x: torch.Tensor, cache: Cache | None = None) -> tuple[torch.Tensor, Cache]:
        h, cache = self.attn(self.norm1(x), cache)
        x = x + h
        return x + self.ff(self.norm2(x)), cache


def _check_ids(ids: torch.Tensor, max_len: int, past: int) -> tuple[int, int]:
    shape = checks.shape_of(ids)
    if len(shape) != 2 or ids.dtype.is_floating_point:
        raise ValueError(f"ids: expected integer token ids (B, T), got {ids.dtype} {shape}")
    if past + shape[1] > max_len:
        raise ValueError(f"ids: expected at most max_len={max_len} positions in all, got {past} cached + {shape[1]} new")
    return shape


class GPT(nn.Module):
    """A decoder-only Transformer language model (GPT-2's layout).

    Token embedding + learned position embedding, L pre-LN blocks, a final LayerNorm,
    and the token embedding, transposed, as the output layer (tied). ``cache`` holds
    each layer's keys and values of the positions read so far; the new ids come after them.
    Shapes: forward(ids (B, T), cache L x (k, v) or None) -> logits (B, T, V), L x (k, v) each (B, Hkv, Tk, Dh).
    """

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        if not isinstance(config, GPTConfig):
            raise ValueError(f"config: expected a GPTConfig, got {type(config).__name__}")
        c = self.config = config
        self.token_embedding = nn.Parameter(torch.randn(c.vocab_size, c.d_model) * 0.02)  # (V, D)
        self.position_embedding = nn.Parameter(torch.randn(c.max_len, c.d_model) * 0.02)  # (max_len, D)
        self.blocks = nn.ModuleList(Block(c.d_model, c.num_heads, c.ff_width, c.num_kv_heads, c.layer_norm_eps)
                                    for _ in range(c.num_layers))
        self.final_norm = LayerNorm(c.d_model, c.layer_norm_eps)

    def forward(self, ids: torch.Tensor, cache: list[Cache] | None = None) -> tuple[torch.Tensor, list[Cache]]:
        if cache is not None and len(cache) != len(self.blocks):
            raise ValueError(f"cache: expected one (k, v) per layer, {len(self.blocks)}, got {len(cache)}")
        past = 0 if cache is None else cache[0][0].shape[2]
        _, t = _check_ids(ids, self.config.max_len, past)
        x = self.token_embedding[ids] + self.position_embedding[past : past + t]  # (B, T, D)
        new_cache = []
        for i, block in enumerate(self.blocks):
            x, kv = block(x, None if cache is None else cache[i])
            new_cache.append(kv)
        return project(self.final_norm(x), self.token_embedding.T), new_cache  # (B, T, V), tied


def lm_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of the next-token predictions, in nats (divide by ln 2 for bits).

    Shapes: logits (B, T, V), targets (B, T) -> scalar.
    """
    ls, ts = checks.shape_of(logits), checks.shape_of(targets)
    if len(ls) != 3 or ls[:2] != ts:
        raise ValueError(f"targets: expected (B, T) = {ls[:2]} from logits {ls} (B, T, V), got {ts}")
    return nn.functional.cross_entropy(logits.reshape(-1, ls[-1]).float(), targets.reshape(-1).long())


def _device(model: nn.Module) -> torch.device:
    return next(model.parameters()).device


def _windows(ids: np.ndarray, length: int) -> list[tuple[int, int]]:
    """(start, stop) of the windows that cover ids[1:] once: the model reads ids[start:stop - 1]
    and predicts ids[start + 1:stop]."""
    return [(s, min(s + length + 1, len(ids))) for s in range(0, len(ids) - 1, length)]


@torch.no_grad()
def token_bits(model: GPT, ids: np.ndarray, batch_size: int = 64, context: int | None = None) -> np.ndarray:
    """The model's surprise, -log2 p, at every token of a text after the first.

    The text is cut into windows of ``context`` tokens (default: max_len) that the model
    reads one after the other, each from scratch: the token at place j of a window is
    predicted from the j tokens before it in that window (the first of a window from one).
    Shapes: ids (N,) -> bits (N - 1,); entry i is for ids[i + 1].
    """
    ids = np.asarray(ids)
    if ids.ndim != 1 or len(ids) < 2 or ids.dtype.kind not in "iu":
        raise ValueError(f"ids: expected a text of at least 2 integer token ids (N,), got {ids.dtype} {ids.shape}")
    model.eval()
    device, length = _device(model), _context(model, context)
    windows = _windows(ids, length)
    out = np.empty(len(ids) - 1, dtype=np.float64)
    full = [w for w in windows if w[1] - w[0] == length + 1]
    for i in range(0, len(full), batch_size):
        part = full[i : i + batch_size]
        rows = torch.as_tensor(np.stack([ids[s:e] for s, e in part]), device=device)  # (B, T + 1)
        logits, _ = model(rows[:, :-1])
        bits = nn.functional.cross_entropy(logits.transpose(1, 2).float(), rows[:, 1:], reduction="none") / LN2
        for (s, _), row in zip(part, bits.cpu().numpy()):
            out[s : s + length] = row
    for s, e in windows[len(full):]:  # the last, shorter window
        row = torch.as_tensor(ids[s:e][None], device=device)  # (1, T + 1)
        logits, _ = model(row[:, :-1])
        out[s : e - 1] = (nn.functional.cross_entropy(logits.transpose(1, 2).float(), row[:, 1:], reduction="none") / LN2)[0].cpu().numpy()
    return out


def _context(model: GPT, context: int | None) -> int:
    if context is None:
        return model.config.max_len
    checks.check_positive_int("context", context)
    if context > model.config.max_len:
        raise ValueError(f"context: expected at most max_len={model.config.max_len} tokens, got {context}")
    return int(context)


def train_gpt(
    model: GPT,
    ids: np.ndarray,
    steps: int,
    batch_size: int = 32,
    lr: float = 3e-3,
    warmup_steps: int = 100,
    seed: int = 0,
    eval_every: int = 100,
    val_ids: np.ndarray | None = None,
    max_seconds: float | None = None,
    clock: Callable[[], float] = time.perf_counter,
    progress: bool = True,
) -> dict[str, list]:
    """Next-token training on windows of max_len + 1 tokens cut at random places of ``ids``.

    Adam (0.9, 0.99, eps 1e-8, added where each library adds it: PyTorch to sqrt(v_hat),
    Keras to sqrt(v) before the bias correction, so the twins drift apart by rounding and a
    little more), ``lr_schedule`` (warm-up, then cosine to lr / 10),
    gradients clipped at norm 1. The window starts come from a NumPy generator seeded
    with ``seed``, so both twins train on the same batches. Runs in the course's loop
    (``utils.training.train_loop``), ``eval_every`` steps to an "epoch"; after each,
    the mean ``token_bits`` of ``val_ids`` (if given) is recorded as ``val_bits``.
    ``history["loss"]`` and ``history["batch_loss"]`` are in bits per token.
    Shapes: ids (N,), val_ids (N',).
    """
    ids = np.asarray(ids)
    length = model.config.max_len
    checks.check_positive_int("steps", steps)
    checks.check_positive_int("eval_every", eval_every)
    if ids.ndim != 1 or len(ids) < length + 2:
        raise ValueError(f"ids: expected a text of more than max_len + 1 = {length + 1} token ids (N,), got shape {ids.shape}")
    device = _device(model)
    data = torch.as_tensor(ids, device=device)
    offsets = torch.arange(length + 1, device=device)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.99), eps=1e-8)

    def step(starts: np.ndarray, rate: float) -> float:
        for group in optimizer.param_groups:
            group["lr"] = rate
        rows = data[torch.as_tensor(starts, device=device)[:, None] + offsets]  # (B, T + 1)
        logits, _ = model(rows[:, :-1])
        loss = lm_loss(logits, rows[:, 1:])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        return float(loss.detach()) / LN2

    def batches(rng: np.random.Generator) -> list[np.ndarray]:
        return [rng.integers(0, len(ids) - length - 1, size=batch_size) for _ in range(eval_every)]

    def on_epoch_end(epoch: int) -> dict:
        return {} if val_ids is None else {"val_bits": float(token_bits(model, val_ids).mean())}

    return train_loop(step, len(ids), math.ceil(steps / eval_every), batch_size, seed,
                      lambda i: lr_schedule(i, steps, lr, warmup_steps), batches=batches, max_seconds=max_seconds,
                      clock=clock, progress=progress, desc="GPT", max_steps=steps, on_epoch_end=on_epoch_end,
                      set_training=model.train)


def generate(
    model: GPT,
    prompt: np.ndarray,
    num_tokens: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    seed: int = 0,
    use_cache: bool = True,
    step_seconds: list | None = None,
) -> np.ndarray:
    """Continue each prompt by ``num_tokens`` tokens (``sample_next``; temperature 0 is greedy).

    ``use_cache=True`` reads the prompt once, then feeds only the newest token with
    every layer's cached keys and values; ``use_cache=False`` runs the model over the
    whole prefix at every step. Same weights, same tokens. ``step_seconds``, a list,
    receives the wall time of each step (the first reads the prompt).
    Shapes: prompt (B, Tp) -> ids (B, Tp + num_tokens); Tp + num_tokens - 1 <= max_len.
    """
    prompt = np.asarray(prompt)
    if prompt.ndim != 2 or prompt.dtype.kind not in "iu":
        raise ValueError(f"prompt: expected integer token ids (B, Tp), got {prompt.dtype} {prompt.shape}")
    if prompt.shape[1] + num_tokens - 1 > model.config.max_len:
        raise ValueError(f"num_tokens: expected Tp + num_tokens - 1 <= max_len={model.config.max_len} "
                         f"(the positions the model reads), got Tp={prompt.shape[1]} and num_tokens={num_tokens}")
    model.eval()
    device = _device(model)
    state: dict = {"cache": None, "ids": None}

    @torch.inference_mode()
    def next_logits(new: np.ndarray) -> np.ndarray:
        start = time.perf_counter()
        new_ids = torch.as_tensor(new, device=device)
        if use_cache:
            logits, state["cache"] = model(new_ids, state["cache"])
        else:  # recompute: the whole prefix again
            state["ids"] = new_ids if state["ids"] is None else torch.cat([state["ids"], new_ids], dim=1)
            logits, _ = model(state["ids"])
        out = logits[:, -1].float().cpu().numpy()  # (B, V)
        if step_seconds is not None:
            step_seconds.append(time.perf_counter() - start)
        return out

    return generate_loop(next_logits, prompt, num_tokens, temperature, top_k, top_p, seed)
