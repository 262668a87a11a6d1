"""Interactive explorers (ipywidgets + Matplotlib).

They compute with a function the notebook passes in, so the PyTorch notebook
explores its torch code and the TensorFlow notebook its Keras code; the default
is the NumPy reference.
"""
from __future__ import annotations

import threading
from typing import Any, Callable, Sequence

import matplotlib.pyplot as plt
import numpy as np

from .checks import to_numpy

# Slider style: the label gets the width it needs ("temperature", not "temperat...").
FULL_LABEL = {"description_width": "initial"}

WeightsFn = Callable[[np.ndarray, np.ndarray, float], Any]

# One drawing at a time in this process. JupyterLab (4.4 and later, with ipykernel 7)
# hands widget events to kernel subshells, so two slider moves can run their callbacks
# at the same moment in two threads; Matplotlib is not thread-safe (two figures drawn at
# once break its shared maths-text parser: log-axis tick labels then fail to draw).
_DRAWING = threading.RLock()


def show_in(out: Any, draw: Callable[[], Any]) -> None:
    """Replace what the Output widget ``out`` shows with what ``draw()`` returns (a
    figure, anything ``display`` takes, or a tuple/list of them), one drawing at a time.

    Every explorer redraws through this. Figures are closed once shown; an error
    inside ``draw`` appears in ``out``, where the student sees it.
    """
    from IPython.display import display

    with _DRAWING, out:
        out.clear_output(wait=True)
        shown = draw()
        for item in shown if isinstance(shown, (list, tuple)) else (shown,):
            display(item)
            if isinstance(item, plt.Figure):
                plt.close(item)


def _default_weights(query: np.ndarray, keys: np.ndarray, temperature: float) -> np.ndarray:
    from .attention import numpy_ref

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

    from .attention import numpy_ref

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
