"""Images as sequences of patches, the first step of the Vision Transformer (lesson 5).

Dosovitskiy et al. (2020) cut an image into P x P patches, flatten each into a
vector, project it linearly and add a position embedding; from there on it is
the same self-attention as for words. The patches are numbered row by row over
the patch grid, and each patch is flattened row by row, channel last: the
layout ``(h p1) (w p2) c -> (h w) (p1 p2 c)`` common in ViT code. (The original
code cuts and projects in one step, a P x P convolution with stride P, which is
the same linear map.)

NumPy only, so both twin notebooks cut the same image the same way; the
flattened patches then go into each framework's attention.
Shapes: letters of ``utils/shapes.py``; here Ih, Iw image height and width, Ic
channels, P patch size, Np = (Ih / P) (Iw / P) patches, ``...`` leading batch
dimensions.
"""
from __future__ import annotations

import numpy as np

from ..checks import check_positive_int

__all__ = ["patchify", "unpatchify"]


def _grid(name: str, height: int, width: int, patch_size: int) -> tuple[int, int]:
    if height % patch_size or width % patch_size:
        raise ValueError(
            f"{name}: expected height and width divisible by patch_size={patch_size}, got {height} x {width}"
        )
    return height // patch_size, width // patch_size


def patchify(image: np.ndarray, patch_size: int) -> np.ndarray:
    """Cut an image into non-overlapping ``patch_size`` squares and flatten each one.

    Patch i = r * (Iw / P) + c is the square in patch row r and column c.
    Shapes: image (..., Ih, Iw, Ic) -> (..., Np, P * P * Ic).
    """
    p = check_positive_int("patch_size", patch_size)
    image = np.asarray(image)
    if image.ndim < 3:
        raise ValueError(f"image: expected (..., Ih, Iw, Ic) with a channel axis, got shape {image.shape}")
    *lead, h, w, c = image.shape
    gh, gw = _grid("image", h, w, p)
    x = image.reshape(*lead, gh, p, gw, p, c)  # (..., Ih/P, P, Iw/P, P, Ic)
    x = np.moveaxis(x, -4, -3)  # (..., Ih/P, Iw/P, P, P, Ic): the two grid axes first
    return x.reshape(*lead, gh * gw, p * p * c)  # (..., Np, P*P*Ic)


def unpatchify(patches: np.ndarray, patch_size: int, height: int, width: int) -> np.ndarray:
    """Put flattened patches back into an image: the inverse of ``patchify``.

    Shapes: patches (..., Np, P * P * Ic) with Np = (height / P) (width / P) -> (..., height, width, Ic).
    """
    p = check_positive_int("patch_size", patch_size)
    check_positive_int("height", height)
    check_positive_int("width", width)
    patches = np.asarray(patches)
    gh, gw = _grid("height, width", height, width, p)
    if patches.ndim < 2 or patches.shape[-2] != gh * gw or patches.shape[-1] % (p * p):
        raise ValueError(
            f"patches: expected (..., N, P*P*C) with N={gh * gw} patches of {p}x{p} pixels times C channels, "
            f"got shape {patches.shape}"
        )
    *lead, _, flat = patches.shape
    c = flat // (p * p)
    x = patches.reshape(*lead, gh, gw, p, p, c)  # (..., Ih/P, Iw/P, P, P, Ic)
    x = np.moveaxis(x, -3, -4)  # (..., Ih/P, P, Iw/P, P, Ic)
    return x.reshape(*lead, height, width, c)  # (..., Ih, Iw, Ic)
