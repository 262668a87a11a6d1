"""Plots shared by the lessons: attention heatmaps and training curves.

Every function takes NumPy arrays or framework tensors, draws on a given
Matplotlib ``ax`` (or a new figure) and returns the ``ax``.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import matplotlib.cm as mcm
import matplotlib.colors as mcolors
import matplotlib.pyplot as plt
import numpy as np

from .checks import check_positive_int, to_numpy


def attention_heatmap(
    weights: Any,
    x_labels: Sequence[str] | None = None,
    y_labels: Sequence[str] | None = None,
    ax: plt.Axes | None = None,
    title: str | None = None,
    xlabel: str = "keys",
    ylabel: str = "queries",
    cmap: str = "viridis",
    annotate: bool = False,
    colorbar: bool = True,
    vmax: float | None = None,
) -> plt.Axes:
    """Heatmap of one attention matrix with token labels and a colour bar.

    The colour scale runs from 0 to ``vmax`` (default: this matrix's largest
    weight). Matrices drawn side by side must share one ``vmax``, or a uniform
    row of weights 0.09 looks as bright as a row of weights near 1: use
    ``attention_panels``, which does that for you.
    Shapes: weights (Tq, Tk); x_labels Tk strings, y_labels Tq strings.
    """
    w = np.asarray(to_numpy(weights), dtype=float)
    if w.ndim != 2:
        raise ValueError(f"weights: expected (Tq, Tk), got shape {w.shape}; pick one example and head first")
    if x_labels is not None and len(x_labels) != w.shape[1]:
        raise ValueError(f"x_labels: expected {w.shape[1]} labels (Tk), got {len(x_labels)}")
    if y_labels is not None and len(y_labels) != w.shape[0]:
        raise ValueError(f"y_labels: expected {w.shape[0]} labels (Tq), got {len(y_labels)}")
    if ax is None:
        _, ax = plt.subplots(figsize=(max(3.0, 0.45 * w.shape[1] + 1.5), max(2.5, 0.4 * w.shape[0] + 1.0)))
    if vmax is not None and not vmax > 0:
        raise ValueError(f"vmax: expected a positive number (the top of the colour scale), got {vmax!r}")
    top = float(vmax) if vmax is not None else max(1e-9, float(w.max()))
    image = ax.imshow(w, cmap=cmap, vmin=0.0, vmax=top, aspect="auto")
    if x_labels is not None:
        ax.set_xticks(range(w.shape[1]), [str(t) for t in x_labels], rotation=60, ha="right")
    if y_labels is not None:
        ax.set_yticks(range(w.shape[0]), [str(t) for t in y_labels])
    if annotate:
        for i in range(w.shape[0]):
            for j in range(w.shape[1]):
                ax.text(j, i, f"{w[i, j]:.2f}", ha="center", va="center",
                        color="white" if w[i, j] < 0.6 * top else "black", fontsize=8)
    return _label_image(ax, image, xlabel, ylabel, title, colorbar)


def _per_panel(labels: Any, n: int, name: str) -> list:
    """One label list per panel: ``labels`` is shared (strings) or given per panel."""
    if labels is None:
        return [None] * n
    labels = list(labels)
    if labels and not isinstance(labels[0], str) and hasattr(labels[0], "__len__"):
        if len(labels) != n:
            raise ValueError(f"{name}: expected one label list per panel ({n}), got {len(labels)}")
        return labels
    return [labels] * n


def attention_panels(
    maps: Sequence[Any],
    titles: Sequence[str] | None = None,
    x_labels: Sequence[Any] | None = None,
    y_labels: Sequence[Any] | None = None,
    ncols: int | None = None,
    xlabel: str = "keys",
    ylabel: str = "queries",
    annotate: bool = False,
    panel_size: tuple[float, float] = (3.8, 3.2),
    vmax: float | None = None,
    cmap: str = "viridis",
) -> np.ndarray:
    """Several attention matrices side by side on ONE colour scale, with one colour bar.

    The scale runs from 0 to ``vmax`` (default: the largest weight of all panels),
    so equal colours mean equal weights in every panel. ``x_labels``/``y_labels``
    are one list of strings for all panels or one list per panel. Panels wrap after
    ``ncols`` (default: up to 3 in a row, so the figure fits a notebook column).
    Returns the axes, shape (rows, ncols). Shapes: maps[i] (Tq, Tk), the sizes may differ from map to map.
    """
    arrays = [np.asarray(to_numpy(m), dtype=float) for m in maps]
    n = len(arrays)
    if n == 0:
        raise ValueError("maps: expected at least one attention matrix, got none")
    titles = list(titles) if titles is not None else [None] * n
    if len(titles) != n:
        raise ValueError(f"titles: expected one title per panel ({n}), got {len(titles)}")
    xs, ys = _per_panel(x_labels, n, "x_labels"), _per_panel(y_labels, n, "y_labels")
    ncols = min(n, ncols or 3)
    nrows = -(-n // ncols)
    top = vmax if vmax is not None else max(1e-9, max(float(a.max()) for a in arrays))
    fig, axes = plt.subplots(nrows, ncols, squeeze=False, layout="constrained",
                             figsize=(panel_size[0] * ncols + 0.9, panel_size[1] * nrows))
    for i, ax in enumerate(axes.flat):
        if i >= n:
            ax.set_axis_off()
            continue
        attention_heatmap(arrays[i], xs[i], ys[i], ax=ax, title=titles[i], xlabel=xlabel, ylabel=ylabel,
                          cmap=cmap, annotate=annotate, colorbar=False, vmax=top)
    fig.colorbar(axes.flat[0].images[0], ax=axes, shrink=0.9, label="attention weight")
    return axes


def mask_outline(mask: Any, ax: plt.Axes, color: str = "white", linewidth: float = 1.5) -> plt.Axes:
    """Draw the border of a keep-mask's True cells over a heatmap of the same shape.

    Use it on an ``attention_heatmap`` / ``attention_panels`` axis to show where
    attention was allowed (a local window, a causal triangle): weights inside the
    line may be non-zero, weights outside must be zero.
    Shapes: mask (Tq, Tk) bool, the shape of the heatmap on ``ax``.
    """
    from matplotlib.collections import LineCollection

    m = np.asarray(to_numpy(mask))
    if m.ndim != 2 or m.dtype != bool:
        raise ValueError(f"mask: expected a (Tq, Tk) boolean keep-mask, got shape {m.shape} dtype {m.dtype}")
    keep = np.pad(m, 1)  # keep[i + 1, j + 1] is m[i, j]; False all around
    segments = []
    for i, j in zip(*np.nonzero(m)):  # an edge of a kept cell is drawn where its neighbour is not kept
        y0, y1, x0, x1 = i - 0.5, i + 0.5, j - 0.5, j + 0.5  # the cell's corners in imshow coordinates
        if not keep[i, j + 1]:
            segments.append([(x0, y0), (x1, y0)])  # above
        if not keep[i + 2, j + 1]:
            segments.append([(x0, y1), (x1, y1)])  # below
        if not keep[i + 1, j]:
            segments.append([(x0, y0), (x0, y1)])  # left
        if not keep[i + 1, j + 2]:
            segments.append([(x1, y0), (x1, y1)])  # right
    ax.add_collection(LineCollection(segments, colors=color, linewidths=linewidth))
    return ax


def training_curves(
    history: Mapping[str, Sequence[float]],
    ax: plt.Axes | None = None,
    title: str | None = None,
    xlabel: str = "epoch",
    logy: bool = False,
    ylabel: str | None = None,
) -> plt.Axes:
    """One line per named series (e.g. ``{"train loss": [...], "val loss": [...]}``).

    The y axis is labelled ``ylabel``; by default "loss" when every series is a loss,
    the series' name when there is one, and the names joined by " / " otherwise.
    """
    if not history:
        raise ValueError("history: expected at least one named series, got an empty mapping")
    if ax is None:
        _, ax = plt.subplots(figsize=(5, 3))
    for name, values in history.items():
        values = np.asarray(values, dtype=float)
        ax.plot(np.arange(1, len(values) + 1), values, label=name, marker="o" if len(values) < 30 else None)
    ax.set_xlabel(xlabel)
    if ylabel is None:
        names = [str(n) for n in history]
        ylabel = "loss" if all("loss" in n for n in names) and len(names) > 1 else " / ".join(names)
    ax.set_ylabel(ylabel)
    if logy:
        ax.set_yscale("log")
    ax.legend()
    ax.grid(alpha=0.3)
    if title:
        ax.set_title(title)
    return ax


def weights_bar(
    weights: Any,
    labels: Sequence[str] | None = None,
    ax: plt.Axes | None = None,
    title: str | None = None,
) -> plt.Axes:
    """Bar chart of one row of attention weights (a distribution over keys).

    Shapes: weights (Tk,).
    """
    w = np.asarray(to_numpy(weights), dtype=float).reshape(-1)
    if ax is None:
        _, ax = plt.subplots(figsize=(5, 2.5))
    ax.bar(range(len(w)), w, color="tab:blue")
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("weight")
    if labels is not None:
        ax.set_xticks(range(len(w)), [str(t) for t in labels])
    if title:
        ax.set_title(title)
    return ax


# ---------------------------------------------------------------------------
# Positional encodings (lesson 4) and attention cost (lesson 5)
# ---------------------------------------------------------------------------


def matrix_heatmap(
    matrix: Any,
    ax: plt.Axes | None = None,
    title: str | None = None,
    xlabel: str = "",
    ylabel: str = "",
    cmap: str = "RdBu_r",
    symmetric: bool = True,
    colorbar: bool = True,
) -> plt.Axes:
    """Heatmap of any real matrix (an encoding table, a similarity matrix, a mask).

    With ``symmetric`` the colour scale is centred on zero. Shapes: matrix (rows, cols).
    """
    m = np.asarray(to_numpy(matrix), dtype=float)
    if m.ndim != 2:
        raise ValueError(f"matrix: expected (rows, cols), got shape {m.shape}")
    if ax is None:
        _, ax = plt.subplots(figsize=(5, 3.6))
    limit = float(np.abs(m).max()) or 1.0
    vmin, vmax = (-limit, limit) if symmetric else (float(m.min()), float(m.max()))
    image = ax.imshow(m, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto", interpolation="nearest")
    return _label_image(ax, image, xlabel, ylabel, title, colorbar)


def encoding_waves(
    encoding: Any,
    dims: Sequence[int],
    ax: plt.Axes | None = None,
    title: str | None = None,
    mark: Sequence[int] = (),
) -> plt.Axes:
    """Selected dimensions of a positional encoding as curves over position.

    ``mark`` draws vertical lines at those positions. Shapes: encoding (T, D).
    """
    pe = np.asarray(to_numpy(encoding), dtype=float)
    if pe.ndim != 2:
        raise ValueError(f"encoding: expected (T, D), got shape {pe.shape}")
    bad = [d for d in dims if not 0 <= d < pe.shape[1]]
    if bad:
        raise ValueError(f"dims: expected indices in 0..{pe.shape[1] - 1}, got {bad}")
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 2.8))
    for d in dims:
        ax.plot(pe[:, d], label=f"dim {d} ({'sin' if d % 2 == 0 else 'cos'})")
    for p in mark:
        ax.axvline(p, color="grey", ls=":", lw=1)
    ax.set_xlabel("position")
    ax.set_ylim(-1.15, 1.15)
    ax.legend(loc="upper right", fontsize=8)
    if title:
        ax.set_title(title)
    return ax


def cost_curves(
    lengths: Sequence[int],
    series: Mapping[str, Sequence[float]],
    ax: plt.Axes | None = None,
    ylabel: str = "seconds",
    title: str | None = None,
) -> plt.Axes:
    """Log-log curves of a cost (time, bytes) against sequence length, one per name.

    A dotted grey line of slope 2 shows what quadratic growth looks like.
    """
    n = np.asarray(lengths, dtype=float)
    if ax is None:
        _, ax = plt.subplots(figsize=(5, 3.4))
    first = None
    for name, values in series.items():
        v = np.asarray(values, dtype=float)
        if v.shape != n.shape:
            raise ValueError(f"series[{name!r}]: expected {len(n)} values (one per length), got {len(v)}")
        ax.plot(n, v, marker="o", label=name)
        first = v if first is None else first
    if first is not None:
        ax.plot(n, first[-1] * (n / n[-1]) ** 2, ":", color="grey", label="~ T² (for reference)")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("sequence length T")
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    if title:
        ax.set_title(title)
    return ax


# ---------------------------------------------------------------------------
# Images as patches (lesson 5's look ahead to the Vision Transformer)
# ---------------------------------------------------------------------------


def _image_grid(image: Any, patch_size: int, name: str = "image") -> tuple[np.ndarray, int, int]:
    """The image as floats (Ih, Iw, Ic) and its patch grid (rows, columns)."""
    img = np.asarray(to_numpy(image), dtype=float)
    if img.ndim != 3:
        raise ValueError(f"{name}: expected (Ih, Iw, Ic), got shape {img.shape}")
    check_positive_int("patch_size", patch_size)
    if img.shape[0] % patch_size or img.shape[1] % patch_size:
        raise ValueError(f"{name}: expected height and width divisible by patch_size={patch_size}, got {img.shape[:2]}")
    return img, img.shape[0] // patch_size, img.shape[1] // patch_size


def image_patches(
    image: Any,
    patch_size: int,
    ax: plt.Axes | None = None,
    title: str | None = None,
    numbers: bool = True,
) -> plt.Axes:
    """An image with its patch grid drawn over it and, with ``numbers``, each patch's index (row by row).

    Shapes: image (Ih, Iw, Ic) with values in [0, 1], Ih and Iw multiples of ``patch_size``.
    """
    img, rows, cols = _image_grid(image, patch_size)
    if ax is None:
        _, ax = plt.subplots(figsize=(3.6, 3.6))
    ax.imshow(np.clip(img, 0, 1), interpolation="nearest")
    for r in range(1, rows):
        ax.axhline(r * patch_size - 0.5, color="white", lw=1)
    for c in range(1, cols):
        ax.axvline(c * patch_size - 0.5, color="white", lw=1)
    if numbers:
        for i in range(rows * cols):
            r, c = divmod(i, cols)
            ax.text(c * patch_size + 1, r * patch_size + 1, str(i), color="white", fontsize=6, va="top", ha="left")
    ax.set_xticks([])
    ax.set_yticks([])
    if title:
        ax.set_title(title)
    return ax


def patch_attention(
    image: Any,
    weights: Any,
    patch_size: int,
    query: int | None = None,
    ax: plt.Axes | None = None,
    title: str | None = None,
    vmax: float | None = None,
    colorbar: bool = True,
) -> plt.Axes:
    """Where one patch attends: its attention row, reshaped to the patch grid, over the image in grey.

    The colour scale runs from 0 to ``vmax`` (default: the largest weight); panels
    drawn side by side should share one ``vmax``. ``query`` outlines that patch.
    Shapes: image (Ih, Iw, Ic); weights (Np,) with Np = (Ih / patch_size) (Iw / patch_size).
    """
    img, rows, cols = _image_grid(image, patch_size)
    w = np.asarray(to_numpy(weights), dtype=float)
    if w.shape != (rows * cols,):
        raise ValueError(f"weights: expected ({rows * cols},), one weight per patch of the {rows}x{cols} grid, got {w.shape}")
    if query is not None and not 0 <= query < rows * cols:
        raise ValueError(f"query: expected a patch index in 0..{rows * cols - 1}, got {query}")
    if vmax is not None and not vmax > 0:
        raise ValueError(f"vmax: expected a positive number (the top of the colour scale), got {vmax!r}")
    if ax is None:
        _, ax = plt.subplots(figsize=(4.2, 3.6))
    h, wd = img.shape[:2]
    ax.imshow(np.clip(img, 0, 1).mean(-1), cmap="gray", vmin=0, vmax=1, interpolation="nearest")
    top = float(vmax) if vmax is not None else max(1e-9, float(w.max()))
    norm, cmap = mcolors.Normalize(0.0, top), plt.get_cmap("magma")
    level = np.clip(norm(w.reshape(rows, cols)), 0, 1)  # (rows, cols) weights on the grid, 0..1
    overlay = cmap(level)  # (rows, cols, 4)
    overlay[..., 3] = 0.2 + 0.75 * level  # the more weight, the more opaque: the image shows through the rest
    ax.imshow(overlay, extent=(-0.5, wd - 0.5, h - 0.5, -0.5), interpolation="nearest")
    image = mcm.ScalarMappable(norm=norm, cmap=cmap)  # for the colour bar
    if query is not None:
        r, c = divmod(query, cols)
        ax.add_patch(plt.Rectangle((c * patch_size - 0.5, r * patch_size - 0.5), patch_size, patch_size,
                                   fill=False, edgecolor="cyan", lw=2))
    ax.set_xticks([])
    ax.set_yticks([])
    return _label_image(ax, image, "", "", title, colorbar)


def _label_image(ax: plt.Axes, image: Any, xlabel: str, ylabel: str, title: str | None, colorbar: bool) -> plt.Axes:
    """Axis labels, optional title and colour bar of an ``imshow`` picture."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    if colorbar:
        ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    return ax
