"""Layer-cost explorer (lesson 5): pick n, d and k, see Table 1 of Vaswani et al. (2017) in numbers.

NumPy and Matplotlib only (no framework), so both twin notebooks draw the same
figure from ``utils.attention.costs``.
"""
from __future__ import annotations

from typing import Any

import matplotlib.pyplot as plt
import numpy as np

from ..widgets import FULL_LABEL, show_in
from .costs import LAYER_TYPES, conv_path_length, costs_table, layer_costs

__all__ = ["draw_layer_costs", "layer_cost_explorer"]

_COLOURS = {"self-attention": "tab:orange", "recurrent": "tab:blue", "convolutional": "tab:green"}


def draw_layer_costs(n: int, d: int, k: int = 3, dilated: bool = True, max_n: int | None = None) -> tuple[plt.Figure, dict]:
    """Two panels against the sequence length (log axes): operations per layer, and maximum path length.

    The left panel marks n = d, where self-attention's n^2 d meets the recurrent
    layer's n d^2; both panels mark the chosen ``n``. The x axis runs from 2 to
    ``max_n`` (default: 16 times the larger of n and d).
    Shapes: n, d, k ints. Returns the figure and {"costs": layer_costs(n, d, k, dilated), "crossover": d}.
    """
    costs = layer_costs(n, d, k, dilated)  # also checks n, d and k
    top = max_n if max_n is not None else 16 * max(n, d)
    if top < 2:
        raise ValueError(f"max_n: expected at least 2, got {top}")
    ns = np.unique(np.concatenate([np.geomspace(2, top, 200).round(), [n, d]]).astype(int))  # (M,) lengths to draw,
    ns = ns[(ns >= 2) & (ns <= top)]  # n and d among them, so the curves pass through both exactly
    table = [layer_costs(int(m), d, k, dilated) for m in ns]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.6))
    for name in LAYER_TYPES:
        left.plot(ns, [t[name]["operations"] for t in table], color=_COLOURS[name], label=name)
        right.plot(ns, [t[name]["path_length"] for t in table], color=_COLOURS[name], label=name)
    if dilated:  # the contiguous kernel's path too, for comparison
        right.plot(ns, [conv_path_length(int(m), k, dilated=False) for m in ns], color=_COLOURS["convolutional"],
                   ls=":", label="convolutional, contiguous")
    left.axvline(d, color="grey", ls="--", lw=1, label=f"n = d = {d}: n²d = nd²")
    for ax in (left, right):
        ax.axvline(n, color="crimson", lw=1, alpha=0.6, label=f"n = {n}")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("sequence length n")
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=8)
    left.set(ylabel="operations per layer", title=f"cost per layer (d = {d}, k = {k})")
    right.set(ylabel="steps between the farthest positions", title="maximum path length")
    fig.tight_layout()
    return fig, {"costs": costs, "crossover": d}


def layer_cost_explorer(n: int = 64, d: int = 512, k: int = 3):
    """Sliders for n, d and k; the table and the two panels of ``draw_layer_costs`` follow.

    Shapes: n, d, k ints (the starting values).
    """
    import ipywidgets as w
    from IPython.display import Markdown

    layer_costs(n, d, k)  # check the starting values before building anything
    n_slider = w.IntSlider(value=n, min=2, max=8192, description="sequence length n", style=FULL_LABEL)
    d_slider = w.IntSlider(value=d, min=8, max=2048, step=8, description="width d", style=FULL_LABEL)
    k_slider = w.IntSlider(value=k, min=2, max=9, description="kernel width k", style=FULL_LABEL)
    out = w.Output()

    def redraw(*_: Any) -> None:
        n, d, k = n_slider.value, d_slider.value, k_slider.value
        show_in(out, lambda: (Markdown(costs_table(n, d, k)), draw_layer_costs(n, d, k)[0]))

    for s in (n_slider, d_slider, k_slider):
        s.observe(redraw, names="value")
    redraw()
    return w.VBox([w.HBox([n_slider, d_slider, k_slider]), out])
