"""Pictures of a Transformer's attention: a grid of layers x heads, and a widget to browse them.

Framework-free: it takes the attention dictionary a model returns, as NumPy
arrays (``{"encoder": L x (B, H, Ts, Ts), "decoder_self": L x (B, H, Tt, Tt),
"cross": L x (B, H, Tt, Ts)}``).
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np

from utils.checks import to_numpy
from utils.plots import attention_heatmap
from utils.widgets import FULL_LABEL, show_in

__all__ = ["KINDS", "attention_to_numpy", "plot_attention_grid", "attention_explorer"]

KINDS = {
    "encoder": ("source (keys)", "source (queries)"),
    "decoder_self": ("target so far (keys)", "target (queries)"),
    "cross": ("source (keys)", "target (queries)"),
}


def attention_to_numpy(attention: Mapping[str, Sequence[Any]]) -> dict[str, list[np.ndarray]]:
    """Convert every weight tensor of a model's attention dictionary to NumPy.

    Shapes: each entry a list of L arrays (B, H, Tq, Tk).
    """
    missing = [k for k in KINDS if k not in attention]
    if missing:
        raise ValueError(f"attention: expected the keys {list(KINDS)}, missing {missing}")
    return {k: [np.asarray(to_numpy(w), dtype=float) for w in attention[k]] for k in KINDS}


def _labels(kind: str, src: Sequence[str], tgt: Sequence[str]) -> tuple[Sequence[str], Sequence[str]]:
    return {"encoder": (src, src), "decoder_self": (tgt, tgt), "cross": (src, tgt)}[kind]


def plot_attention_grid(
    attention: Mapping[str, Sequence[Any]],
    kind: str,
    src_tokens: Sequence[str],
    tgt_tokens: Sequence[str],
    example: int = 0,
    max_heads: int | None = None,
) -> plt.Figure:
    """One heatmap per layer (rows) and head (columns) for one kind of attention and one example.

    Shapes: attention[kind] L x (B, H, Tq, Tk); src_tokens Ts labels, tgt_tokens Tt labels.
    """
    if kind not in KINDS:
        raise ValueError(f"kind: expected one of {list(KINDS)}, got {kind!r}")
    layers = attention_to_numpy(attention)[kind]
    if not layers:
        raise ValueError(f"attention[{kind!r}]: expected at least one layer, got none")
    x_labels, y_labels = _labels(kind, src_tokens, tgt_tokens)
    n_heads = layers[0].shape[1] if max_heads is None else min(max_heads, layers[0].shape[1])
    tq, tk = layers[0].shape[2:]
    fig, axes = plt.subplots(len(layers), n_heads, figsize=(2.2 + 0.28 * tk * n_heads, 0.9 + 0.28 * tq * len(layers)),
                             squeeze=False)
    for layer, w in enumerate(layers):
        if not 0 <= example < w.shape[0]:
            raise ValueError(f"example: expected 0..{w.shape[0] - 1}, got {example}")
        for h in range(n_heads):
            ax = axes[layer, h]
            attention_heatmap(w[example, h], list(x_labels)[:tk], list(y_labels)[:tq], ax=ax, colorbar=False,
                              title=f"layer {layer}, head {h}", xlabel="", ylabel="")
    fig.suptitle(f"{kind} attention; x: {KINDS[kind][0]}, y: {KINDS[kind][1]}")
    fig.tight_layout()
    return fig


def attention_explorer(attention: Mapping[str, Sequence[Any]], src_tokens: Sequence[Sequence[str]],
                       tgt_tokens: Sequence[Sequence[str]]):
    """A widget: pick the kind of attention, the layer, the head and the example; see its heatmap.

    Shapes: attention[kind] L x (B, H, Tq, Tk); src_tokens / tgt_tokens one label list per example.
    """
    import ipywidgets as widgets

    att = attention_to_numpy(attention)
    b, h = att["cross"][0].shape[:2]
    if len(src_tokens) != b or len(tgt_tokens) != b:
        raise ValueError(f"src_tokens, tgt_tokens: expected {b} label lists (one per example), "
                         f"got {len(src_tokens)}, {len(tgt_tokens)}")
    kind = widgets.Dropdown(options=list(KINDS), value="cross", description="attention")
    layer = widgets.IntSlider(0, 0, len(att["cross"]) - 1, description="layer", style=FULL_LABEL)
    head = widgets.IntSlider(0, 0, h - 1, description="head", style=FULL_LABEL)
    example = widgets.IntSlider(0, 0, b - 1, description="example", style=FULL_LABEL)
    out = widgets.Output()

    def draw(*_: Any) -> None:
        layers = att[kind.value]
        layer.max = max(len(layers) - 1, 0)
        w = layers[min(layer.value, len(layers) - 1)][example.value, head.value]  # (Tq, Tk)
        x_labels, y_labels = _labels(kind.value, src_tokens[example.value], tgt_tokens[example.value])
        show_in(out, lambda: attention_heatmap(w, list(x_labels)[: w.shape[1]], list(y_labels)[: w.shape[0]],
                                               title=f"{kind.value}, layer {layer.value}, head {head.value}",
                                               xlabel=KINDS[kind.value][0], ylabel=KINDS[kind.value][1]).figure)

    for control in (kind, layer, head, example):
        control.observe(draw, names="value")
    draw()
    return widgets.VBox([widgets.HBox([kind, example]), widgets.HBox([layer, head]), out])
