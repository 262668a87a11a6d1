"""Keras 3 twin of the positional encodings (same names and signatures as torch_impl).

Written with ``keras.ops`` and run on the TensorFlow backend in the course.
Shapes: letters of ``utils/shapes.py``; here B batch, T positions, D model width
(even); ``...`` are leading batch dims. Interleaved layout: dim 2i = sin(p * w_i),
dim 2i + 1 = cos(p * w_i), w_i = base ** (-2i / D).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from utils.runtime import prepare_tensorflow_env

prepare_tensorflow_env()

import keras  # noqa: E402
from keras import ops  # noqa: E402

from . import _checks  # noqa: E402
from . import numpy_ref as _ref  # noqa: E402

__all__ = [
    "frequencies",
    "sinusoidal_encoding",
    "offset_matrix",
    "apply_rotary",
    "SinusoidalEncoding",
    "LearnedPositionalEmbedding",
]

Tensor = Any  # a Keras / TensorFlow tensor


def frequencies(d_model: int, base: float = 10000.0) -> Tensor:
    """Angular frequency w_i = base ** (-2i / D) of each sin/cos pair.

    Shapes: -> (D / 2,), float32.
    """
    _checks.check_width("d_model", d_model)
    _checks.check_base(base)
    exponents = -ops.cast(ops.arange(0, d_model, 2), "float32") / d_model
    return ops.power(float(base), exponents)


def sinusoidal_encoding(max_len: int, d_model: int, base: float = 10000.0) -> Tensor:
    """The fixed sinusoidal encoding of positions 0..max_len-1, interleaved sin/cos.

    The angles are computed in float64 with NumPy (float32 angles at position
    10^4 lose about 1e-3 of phase), then the table becomes a float32 tensor.
    Shapes: -> (T=max_len, D), float32.
    """
    _checks.check_length("max_len", max_len)
    _checks.check_width("d_model", d_model)
    angles = np.arange(max_len, dtype=np.float64)[:, None] * _ref.frequencies(d_model, base)[None, :]  # (T, D/2)
    pe = ops.stack([ops.convert_to_tensor(np.sin(angles)), ops.convert_to_tensor(np.cos(angles))], axis=-1)  # (T, D/2, 2)
    return ops.cast(ops.reshape(pe, (max_len, d_model)), "float32")  # (T, D) interleaved


def offset_matrix(offset: int, d_model: int, base: float = 10000.0) -> Tensor:
    """The matrix M_k with PE(p + k) = PE(p) @ M_k for every position p.

    It is block-diagonal: each (sin, cos) pair is rotated by the angle k * w_i,
    whatever p is.
    Shapes: -> (D, D), float32.
    """
    _checks.check_offset(offset)
    # A constant table: built once in float64 by the NumPy reference (the same
    # block-diagonal rotations), then handed to Keras as a float32 tensor.
    return ops.convert_to_tensor(_ref.offset_matrix(offset, d_model, base))  # (D, D)


def apply_rotary(x: Tensor, offset: int = 0, base: float = 10000.0) -> Tensor:
    """Rotary position embedding: rotate each pair (x_2i, x_2i+1) at position p by p * w_i.

    Positions are offset, offset+1, ... along the T axis. After rotating queries
    and keys, q_m . k_n depends on m - n only (and on the contents).
    Shapes: x (..., T, D) -> (..., T, D).
    """
    _checks.check_offset(offset)
    shape = _checks.check_sequence("x", x, None, None, "(..., T, D)")
    t, d = shape[-2], shape[-1]
    angles = (offset + np.arange(t, dtype=np.float64))[:, None] * _ref.frequencies(d, base)[None, :]  # (T, D/2)
    x = ops.convert_to_tensor(x)
    c = ops.cast(np.cos(angles), x.dtype)
    s = ops.cast(np.sin(angles), x.dtype)
    pairs = ops.reshape(x, (*ops.shape(x)[:-1], d // 2, 2))  # (..., T, D/2, 2)
    even, odd = pairs[..., 0], pairs[..., 1]  # (..., T, D/2)
    out = ops.stack([even * c - odd * s, even * s + odd * c], axis=-1)  # (..., T, D/2, 2)
    return ops.reshape(out, ops.shape(x))  # (..., T, D)


class SinusoidalEncoding(keras.layers.Layer):
    """Adds the fixed sinusoidal encoding to a sequence (no trainable weights).

    Shapes: call(x (B, T, D)) -> (B, T, D), T <= max_len.
    """

    def __init__(self, max_len: int, d_model: int, base: float = 10000.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.max_len, self.d_model = _checks.check_length("max_len", max_len), _checks.check_width("d_model", d_model)
        self.base = float(base)
        self.pe = sinusoidal_encoding(max_len, d_model, base)  # (max_len, D), a constant

    def call(self, x: Tensor) -> Tensor:
        shape = _checks.check_sequence("x", x, self.max_len, self.d_model)
        return x + ops.cast(self.pe[: shape[-2]], x.dtype)

    def get_config(self) -> dict:
        return {**super().get_config(), "max_len": self.max_len, "d_model": self.d_model, "base": self.base}


class LearnedPositionalEmbedding(keras.layers.Layer):
    """Adds a trainable vector per position (BERT, GPT-2). Positions >= max_len have no row.

    Shapes: call(x (B, T, D)) -> (B, T, D), T <= max_len.
    """

    def __init__(self, max_len: int, d_model: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.max_len, self.d_model = _checks.check_length("max_len", max_len), _checks.check_width("d_model", d_model)
        self.embedding = self.add_weight(
            shape=(max_len, d_model), initializer=keras.initializers.RandomNormal(stddev=0.02), name="embedding"
        )
        self.built = True  # every weight exists after construction

    def call(self, x: Tensor) -> Tensor:
        shape = _checks.check_sequence("x", x, self.max_len, self.d_model)
        return x + self.embedding[: shape[-2]]

    def get_config(self) -> dict:
        return {**super().get_config(), "max_len": self.max_len, "d_model": self.d_model}
