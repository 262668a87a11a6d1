"""Step through a greedy decode one output token at a time and see where attention looks.

Framework-free: it draws the tokens and attention weights a notebook already
computed (``greedy_decode`` of either twin), so the PyTorch and the TensorFlow
lesson share it.
"""
from __future__ import annotations

from typing import Any, Sequence

import matplotlib.pyplot as plt
import numpy as np

from ..checks import to_numpy
from ..widgets import FULL_LABEL, show_in

__all__ = ["draw_decode_step", "decode_stepper"]


def draw_decode_step(
    source: Sequence[str], output: Sequence[str], weights: Any, step: int
) -> plt.Figure:
    """Top: the output so far with the current token highlighted. Bottom: its weights over the source.

    Shapes: source Ts tokens, output Tp tokens, weights (Tp, Ts); 0 <= step < Tp.
    """
    w = np.asarray(to_numpy(weights), dtype=float)
    if w.ndim != 2 or w.shape != (len(output), len(source)):
        raise ValueError(f"weights: expected (Tp, Ts) = ({len(output)}, {len(source)}), got {w.shape}")
    if not 0 <= step < len(output):
        raise ValueError(f"step: expected 0..{len(output) - 1}, got {step}")
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(max(6.0, 0.32 * len(source) + 1.5), 3.6),
                                      gridspec_kw={"height_ratios": [1, 2.4]})
    top.axis("off")
    for i, tok in enumerate(output[: step + 1]):
        top.text(i / max(len(output), 1), 0.5, tok if tok.strip() else "␣", fontsize=14, family="monospace",
                 color="crimson" if i == step else "black", transform=top.transAxes)
    top.set_title(f"output step {step + 1} of {len(output)}: emits {output[step]!r}")
    bottom.bar(range(len(source)), w[step], color="tab:blue")
    bottom.set_xticks(range(len(source)), [t if t.strip() else "␣" for t in source], fontsize=9)
    bottom.set_ylim(0, 1.05)
    bottom.set_ylabel("attention")
    best = int(w[step].argmax())
    bottom.get_xticklabels()[best].set_color("crimson")
    fig.tight_layout()
    return fig


def decode_stepper(source: Sequence[str], output: Sequence[str], weights: Any):
    """A slider over the output steps of one decoded example (ipywidgets).

    Shapes: source Ts tokens, output Tp tokens, weights (Tp, Ts).
    """
    import ipywidgets as widgets

    slider = widgets.IntSlider(value=0, min=0, max=len(output) - 1, description="output step", style=FULL_LABEL)
    play = widgets.Play(value=0, min=0, max=len(output) - 1, interval=900)
    widgets.jslink((play, "value"), (slider, "value"))
    out = widgets.Output()

    def redraw(*_: Any) -> None:
        show_in(out, lambda: draw_decode_step(source, output, weights, slider.value))

    slider.observe(redraw, names="value")
    redraw()
    return widgets.VBox([widgets.HBox([play, slider]), out])
