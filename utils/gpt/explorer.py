"""A widget to sample from a language model: move the temperature, top-k and top-p, and resample.

Framework-free: the notebook passes two functions that run its own model,
``next_logits(ids) -> logits`` for the piece after a prompt and
``generate(ids, num_tokens, temperature, top_k, top_p, seed) -> ids``, and the
``TextPieces`` that turn text into ids and back. The filters are those of
``utils.gpt.common``, the ones both twins sample with.

Shapes: letters of ``utils/shapes.py``; here T prompt length, V vocabulary size.
"""
from __future__ import annotations

from typing import Any, Callable

import matplotlib.pyplot as plt
import numpy as np

from utils.widgets import FULL_LABEL, show_in

from .common import apply_temperature, top_k_filter, top_p_filter

__all__ = ["filtered_probs", "plot_next_piece", "sampling_explorer"]


def filtered_probs(logits: np.ndarray, temperature: float, top_k: int | None, top_p: float | None) -> np.ndarray:
    """The distribution ``sample_next`` draws from: temperature, then top-k, then top-p, renormalised.

    Shapes: logits (V,) -> probabilities (V,), 0 where filtered out.
    """
    x = apply_temperature(np.asarray(logits, dtype=np.float64)[None], temperature)
    if top_k is not None:
        x = top_k_filter(x, top_k)
    if top_p is not None:
        x = top_p_filter(x, top_p)
    p = np.exp(x - x.max())
    return (p / p.sum())[0]


def _show(piece: str) -> str:
    return repr(piece)[1:-1].replace("$", r"\$")  # "\n" as two visible characters; no maths mode in labels


def plot_next_piece(logits: np.ndarray, pieces: Any, temperature: float, top_k: int | None, top_p: float | None,
                    sample: str = "", top: int = 15, title: str = "") -> plt.Figure:
    """Bars of the ``top`` most likely next pieces: the model's probabilities (temperature 1) and
    those the sampler draws from after the filters; the sampled continuation below.

    Shapes: logits (V,).
    """
    logits = np.asarray(logits, dtype=np.float64)
    plain = filtered_probs(logits, 1.0, None, None)
    shown = filtered_probs(logits, temperature, top_k, top_p)
    order = np.argsort(-plain, kind="stable")[:top]
    kept = int((shown > 0).sum())
    fig, ax = plt.subplots(figsize=(9, 4.2))
    x = np.arange(len(order))
    ax.bar(x - 0.2, plain[order], width=0.4, color="#cbd5e1", label="model (temperature 1)")
    ax.bar(x + 0.2, shown[order], width=0.4, color="#ea580c", label="what the sampler draws from")
    ax.set_xticks(x, [_show(pieces.pieces[i]) for i in order], rotation=45, ha="right", fontsize=9)
    ax.set_ylabel("probability of the next piece")
    filters = [f"T = {temperature:g}"] + ([f"top-k = {top_k}"] if top_k else []) + ([f"top-p = {top_p:g}"] if top_p else [])
    ax.set_title(title or f"{', '.join(filters)}: {kept} of {len(logits)} pieces can be drawn")
    ax.legend(loc="upper right")
    ax.grid(axis="y", alpha=0.3)
    if sample:
        fig.text(0.01, -0.02, "sample: " + _show(sample)[:150], fontsize=9, family="monospace", va="top")
    fig.tight_layout()
    return fig


def sampling_explorer(
    next_logits: Callable[[np.ndarray], np.ndarray],
    generate: Callable[..., np.ndarray],
    pieces: Any,
    prompt: str = "\nThis film",
    num_tokens: int = 30,
) -> Any:
    """Sliders for the temperature, top-k (0 = off), top-p (1 = off) and the seed, and a prompt box;
    every change redraws the next-piece distribution and draws a new continuation.

    Shapes: next_logits: ids (1, T) -> logits (V,); generate: ids (1, T) -> ids (1, T + num_tokens).
    """
    import ipywidgets as widgets

    temperature = widgets.FloatSlider(value=1.0, min=0.1, max=2.0, step=0.1, description="temperature", style=FULL_LABEL)
    top_k = widgets.IntSlider(value=0, min=0, max=50, step=1, description="top-k (0: off)", style=FULL_LABEL)
    top_p = widgets.FloatSlider(value=1.0, min=0.05, max=1.0, step=0.05, description="top-p (1: off)", style=FULL_LABEL)
    seed = widgets.IntSlider(value=0, min=0, max=20, step=1, description="seed", style=FULL_LABEL)
    text = widgets.Text(value=prompt.replace("\n", "\\n"), description="prompt", style=FULL_LABEL)
    out = widgets.Output()

    def draw() -> plt.Figure:
        ids = pieces.encode(text.value.replace("\\n", "\n") or "\n")[None]  # (1, T)
        k = top_k.value or None
        p = top_p.value if top_p.value < 1.0 else None
        new = generate(ids, num_tokens, temperature=temperature.value, top_k=k, top_p=p, seed=seed.value)
        continuation = pieces.decode(np.asarray(new)[0, ids.shape[1]:])
        return plot_next_piece(next_logits(ids), pieces, temperature.value, k, p, sample=continuation)

    for w in (temperature, top_k, top_p, seed, text):
        w.observe(lambda _: show_in(out, draw), names="value")
    show_in(out, draw)
    return widgets.VBox([widgets.HBox([temperature, top_k]), widgets.HBox([top_p, seed]), text, out])
