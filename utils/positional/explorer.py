"""Positional-encoding explorer (lesson 4): pick a dimension and an offset.

NumPy and Matplotlib only (no framework), so both twin notebooks use it on the
table they computed with their own framework.
"""
from __future__ import annotations

from typing import Any

import matplotlib.pyplot as plt
import numpy as np

from ..checks import to_numpy
from ..plots import encoding_waves
from ..widgets import FULL_LABEL, show_in


def draw_encoding(encoding: Any, dim: int, offset: int, position: int = 10) -> tuple[plt.Figure, dict]:
    """Two panels: the sin/cos pair holding ``dim`` over positions, and the
    similarity PE(p) . PE(p + k) against the offset k, with ``offset`` marked.

    Shapes: encoding (T, D). Returns the figure and the numbers it shows.
    """
    pe = np.asarray(to_numpy(encoding), dtype=float)
    if pe.ndim != 2:
        raise ValueError(f"encoding: expected (T, D), got shape {pe.shape}")
    t, d = pe.shape
    if not 0 <= dim < d:
        raise ValueError(f"dim: expected 0..{d - 1}, got {dim}")
    if not 0 <= position < t or not 0 <= position + offset < t:
        raise ValueError(f"offset: expected position + offset in 0..{t - 1} (position {position}), got {offset}")
    pair = dim - dim % 2  # the sin dim of this pair
    # the wavelength of this pair: its (sin) angle grows by w_i per position
    freq = float(np.arctan2(pe[1, pair], pe[1, pair + 1]))
    sims = pe @ pe[position]  # (T,) similarity of every position with p
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.2))
    encoding_waves(pe, [pair, pair + 1], ax=left, mark=[position, position + offset],
                   title=f"pair ({pair}, {pair + 1}): wavelength {2 * np.pi / max(freq, 1e-12):.1f} positions")
    ks = np.arange(-position, t - position)
    right.plot(ks, sims, color="tab:purple")
    right.axvline(offset, color="crimson", ls="--", label=f"k = {offset}: {sims[position + offset]:.2f}")
    right.set_xlabel("offset k")
    right.set_ylabel(f"PE({position}) . PE({position} + k)")
    right.legend(loc="upper right", fontsize=8)
    right.set_title("similarity falls (not monotonically) with distance")
    fig.tight_layout()
    return fig, {"similarity": float(sims[position + offset]), "wavelength": float(2 * np.pi / max(freq, 1e-12))}


def encoding_explorer(encoding: Any, position: int = 10):
    """Sliders for the dimension and the offset; the waves and the similarity follow.

    Shapes: encoding (T, D).
    """
    import ipywidgets as w

    pe = np.asarray(to_numpy(encoding), dtype=float)
    t, d = pe.shape
    # Dimensions 2i and 2i + 1 are one sin/cos pair and draw the same waves: step by pairs,
    # so that every move of the slider shows a new wavelength.
    dim = w.IntSlider(value=0, min=0, max=d - 2, step=2, description="dimension pair", style=FULL_LABEL)
    offset = w.IntSlider(value=1, min=-position, max=t - 1 - position, description="offset k", style=FULL_LABEL)
    out = w.Output()

    def redraw(*_: Any) -> None:
        show_in(out, lambda: draw_encoding(pe, dim.value, offset.value, position)[0])

    for s in (dim, offset):
        s.observe(redraw, names="value")
    redraw()
    return w.VBox([w.HBox([dim, offset]), out])
