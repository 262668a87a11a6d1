"""PyTorch twin of the positional encodings (same names and signatures as keras_impl).

Shapes: letters of ``utils/shapes.py``; here B batch, T positions, D model width
(even); ``...`` are leading batch dims. Interleaved layout: dim 2i = sin(p * w_i),
dim 2i + 1 = cos(p * w_i), w_i = base ** (-2i / D).
"""
from __future__ import annotations

import torch
from torch import nn

from . import _checks

__all__ = [
    "frequencies",
    "sinusoidal_encoding",
    "offset_matrix",
    "apply_rotary",
    "SinusoidalEncoding",
    "LearnedPositionalEmbedding",
]


def frequencies(d_model: int, base: float = 10000.0) -> torch.Tensor:
    """Angular frequency w_i = base ** (-2i / D) of each sin/cos pair.

    Shapes: -> (D / 2,), float64 (cast after the trigonometry, not before).
    """
    _checks.check_width("d_model", d_model)
    _checks.check_base(base)
    return base ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)


def sinusoidal_encoding(max_len: int, d_model: int, base: float = 10000.0) -> torch.Tensor:
    """The fixed sinusoidal encoding of positions 0..max_len-1, interleaved sin/cos.

    Shapes: -> (T=max_len, D), float32.
    """
    _checks.check_length("max_len", max_len)
    angles = torch.arange(max_len, dtype=torch.float64)[:, None] * frequencies(d_model, base)[None, :]  # (T, D/2)
    pe = torch.stack([angles.sin(), angles.cos()], dim=-1)  # (T, D/2, 2): (sin, cos) side by side
    return pe.reshape(max_len, d_model).float()  # (T, D) interleaved


def offset_matrix(offset: int, d_model: int, base: float = 10000.0) -> torch.Tensor:
    """The matrix M_k with PE(p + k) = PE(p) @ M_k for every position p.

    It is block-diagonal: each (sin, cos) pair is rotated by the angle k * w_i,
    whatever p is.
    Shapes: -> (D, D), float32.
    """
    _checks.check_offset(offset)
    angle = offset * frequencies(d_model, base)  # (D/2,)
    c, s = angle.cos(), angle.sin()
    blocks = torch.stack([torch.stack([c, -s], -1), torch.stack([s, c], -1)], -2)  # (D/2, 2, 2) rows: sin-in, cos-in
    return torch.block_diag(*blocks).float()  # (D, D)


def apply_rotary(x: torch.Tensor, offset: int = 0, base: float = 10000.0) -> torch.Tensor:
    """Rotary position embedding: rotate each pair (x_2i, x_2i+1) at position p by p * w_i.

    Positions are offset, offset+1, ... along the T axis. After rotating queries
    and keys, q_m . k_n depends on m - n only (and on the contents).
    Shapes: x (..., T, D) -> (..., T, D).
    """
    _checks.check_offset(offset)
    shape = _checks.check_sequence("x", x, None, None, "(..., T, D)")
    t, d = shape[-2], shape[-1]
    angles = (offset + torch.arange(t, dtype=torch.float64, device=x.device))[:, None] * frequencies(d, base).to(x.device)
    c, s = angles.cos().to(x.dtype), angles.sin().to(x.dtype)  # (T, D/2)
    even, odd = x[..., 0::2], x[..., 1::2]  # (..., T, D/2)
    return torch.stack([even * c - odd * s, even * s + odd * c], dim=-1).flatten(-2)  # (..., T, D)


class SinusoidalEncoding(nn.Module):
    """Adds the fixed sinusoidal encoding to a sequence (no trainable weights).

    Shapes: forward(x (B, T, D)) -> (B, T, D), T <= max_len.
    """

    def __init__(self, max_len: int, d_model: int, base: float = 10000.0) -> None:
        super().__init__()
        self.max_len, self.d_model = _checks.check_length("max_len", max_len), _checks.check_width("d_model", d_model)
        self.register_buffer("pe", sinusoidal_encoding(max_len, d_model, base), persistent=False)  # (max_len, D)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _checks.check_sequence("x", x, self.max_len, self.d_model)
        return x + self.pe[: x.shape[-2]].to(x.dtype)


class LearnedPositionalEmbedding(nn.Module):
    """Adds a trainable vector per position (BERT, GPT-2). Positions >= max_len have no row.

    Shapes: forward(x (B, T, D)) -> (B, T, D), T <= max_len.
    """

    def __init__(self, max_len: int, d_model: int) -> None:
        super().__init__()
        self.max_len, self.d_model = _checks.check_length("max_len", max_len), _checks.check_width("d_model", d_model)
        self.embedding = nn.Parameter(torch.randn(max_len, d_model) * 0.02)  # (max_len, D)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _checks.check_sequence("x", x, self.max_len, self.d_model)
        return x + self.embedding[: x.shape[-2]]
