"""Attention explorers: lesson 1's query and temperature sliders, lesson 5's layer costs.

* ``query_explorer``, ``temperature_explorer`` (lesson 1): they compute with a
  function the notebook passes in, so the PyTorch notebook explores its torch code
  and the TensorFlow notebook its Keras code; the default is the NumPy reference.
* ``layer_cost_explorer`` (lesson 5): pick n, d and k, see Table 1 of Vaswani et
  al. (2017) in numbers, from ``utils.attention.costs``.

NumPy and Matplotlib only (no framework).
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import matplotlib.pyplot as plt
import numpy as np

from ..checks import to_numpy
from ..widgets import FULL_LABEL, show_in
from . import numpy_ref
from .costs import LAYER_TYPES, conv_path_length, costs_table, layer_costs

__all__ = ["draw_query_weights", "query_explorer", "temperature_explorer", "draw_layer_costs", "layer_cost_explorer"]

WeightsFn = Callable[[np.ndarray, np.ndarray, float], Any]

def _default_weights(query: np.ndarray, keys: np.ndarray, temperature: float) -> np.ndarray:
    scores = numpy_ref.dot_scores(query[None, :], keys)  # (1, Tk)
    return numpy_ref.masked_softmax(scores, temperature=temperature)[0]


def draw_query_weights(
    query: np.ndarray,
    keys: np.ndarray,
    temperature: float,
    labels: Sequence[str] | None = None,
    weights_fn: WeightsFn | None = None,
) -> tuple[plt.Figure, np.ndarray]:
    """Draw 2-D keys sized by their attention weight for one query, and the weight bars.

    Shapes: query (2,), keys (Tk, 2) -> weights (Tk,).
    """
    query = np.asarray(query, dtype=np.float32)
    keys = np.asarray(keys, dtype=np.float32)
    if keys.ndim != 2 or keys.shape[1] != 2:
        raise ValueError(f"keys: expected (Tk, 2) points in the plane, got {keys.shape}")
    weights = np.asarray(to_numpy((weights_fn or _default_weights)(query, keys, temperature)), dtype=float).reshape(-1)
    labels = list(labels) if labels is not None else [f"k{i}" for i in range(len(keys))]
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.6))
    left.scatter(keys[:, 0], keys[:, 1], s=40 + 900 * weights, c=weights, cmap="viridis", vmin=0, vmax=1,
                 edgecolors="k")
    for (x, y), name in zip(keys, labels):
        left.annotate(name, (x, y), textcoords="offset points", xytext=(6, 6))
    left.scatter([query[0]], [query[1]], marker="*", s=300, c="crimson", label="query")
    left.axhline(0, color="grey", lw=0.5)
    left.axvline(0, color="grey", lw=0.5)
    left.set_aspect("equal", adjustable="datalim")
    left.legend(loc="lower left")
    left.set_title("keys, sized by their weight")
    right.bar(range(len(weights)), weights, color="tab:blue")
    right.set_xticks(range(len(weights)), labels)
    right.set_ylim(0, 1.05)
    right.set_title(f"weights (temperature {temperature:.2f}, max {weights.max():.2f})")
    fig.tight_layout()
    return fig, weights


def query_explorer(
    keys: Any,
    labels: Sequence[str] | None = None,
    weights_fn: WeightsFn | None = None,
    temperature: float = 1.0,
):
    """Sliders for a 2-D query and the softmax temperature; the plot follows.

    Shapes: keys (Tk, 2). ``weights_fn(query (2,), keys (Tk, 2), temperature) -> (Tk,)``.
    """
    import ipywidgets as w

    keys = np.asarray(to_numpy(keys), dtype=np.float32)
    span = float(np.abs(keys).max()) * 1.5 + 1e-6
    qx = w.FloatSlider(value=0.0, min=-span, max=span, step=span / 50, description="query x", style=FULL_LABEL)
    qy = w.FloatSlider(value=0.0, min=-span, max=span, step=span / 50, description="query y", style=FULL_LABEL)
    temp = w.FloatLogSlider(value=temperature, base=10, min=-1.5, max=1.5, step=0.05, description="temperature",
                            style=FULL_LABEL)
    out = w.Output()

    def redraw(*_: Any) -> None:
        show_in(out, lambda: draw_query_weights(np.array([qx.value, qy.value]), keys, temp.value, labels, weights_fn)[0])

    for s in (qx, qy, temp):
        s.observe(redraw, names="value")
    redraw()
    return w.VBox([w.HBox([qx, qy]), temp, out])


def temperature_explorer(scores: Any, labels: Sequence[str] | None = None, softmax_fn: Callable | None = None):
    """A temperature slider over a fixed score vector: from arg-max (cold) to uniform (hot).

    Shapes: scores (Tk,). ``softmax_fn(scores, temperature) -> (Tk,)``.
    """
    import ipywidgets as w

    scores = np.asarray(to_numpy(scores), dtype=np.float32).reshape(-1)
    fn = softmax_fn or (lambda s, t: numpy_ref.masked_softmax(s, temperature=t))
    labels = list(labels) if labels is not None else [str(i) for i in range(len(scores))]
    temp = w.FloatLogSlider(value=1.0, base=10, min=-2, max=2, step=0.05, description="temperature", style=FULL_LABEL)
    out = w.Output()

    def draw() -> plt.Figure:
        probs = np.asarray(to_numpy(fn(scores, temp.value)), dtype=float).reshape(-1)
        fig, ax = plt.subplots(figsize=(5, 2.6))
        ax.bar(range(len(probs)), probs)
        ax.set_xticks(range(len(probs)), labels)
        ax.set_ylim(0, 1.05)
        ax.set_title(f"softmax(scores / {temp.value:.2f})")
        return fig

    def redraw(*_: Any) -> None:
        show_in(out, draw)

    temp.observe(redraw, names="value")
    redraw()
    return w.VBox([temp, out])


# ------------------------------------------------------------------ layer costs (lesson 5)

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
