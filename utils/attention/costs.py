"""Why attention: cost per layer, sequential steps and path length (lesson 5).

Table 1 of Vaswani et al. (2017) compares three ways for a layer to mix the n
positions of a sequence of width d:

===============  =================  ===========  ======================
layer            operations         sequential   maximum path length
===============  =================  ===========  ======================
self-attention   n^2 d              1            1
recurrent        n d^2              n            n
convolutional    k n d^2            1            log_k n (dilated) or n / k
===============  =================  ===========  ======================

The paper gives orders of growth; ``layer_costs`` turns them into numbers
for a given n, d and kernel width k. Operation counts are the table's leading
terms (multiply-adds with the constants dropped: a self-attention layer's Q,
K, V and output projections, 4 n d^2 more, are not in them). Path lengths are
exact counts of the steps a signal takes from one position to the farthest
other one:

* self-attention: 1, every query meets every key in one layer;
* recurrent: n - 1 hidden-state steps from the first position to the last;
* convolutional: the number of stacked layers whose receptive field covers all
  n positions. With dilated kernels (the taps of layer l are k^l positions
  apart; WaveNet's width-2 kernels with dilations 1, 2, 4, ... are k = 2) L layers
  see k^L positions, so L = ceil(log_k n). With contiguous kernels each layer
  widens the field by k - 1, so L = ceil((n - 1) / (k - 1)), the paper's O(n / k).

Framework-free (plain Python), so both twin notebooks use it as it is.
Shapes: n sequence length, d model width, k kernel width (all plain ints).
"""
from __future__ import annotations

from ..checks import check_positive_int

__all__ = ["LAYER_TYPES", "conv_path_length", "layer_costs", "costs_table"]

LAYER_TYPES = ("self-attention", "recurrent", "convolutional")


def _check(n: int, d: int, k: int) -> tuple[int, int, int]:
    n, d, k = check_positive_int("n", n), check_positive_int("d", d), check_positive_int("k", k)
    if n < 2:
        raise ValueError(f"n: expected a sequence of at least 2 positions (a path needs two ends), got {n}")
    if k < 2:
        raise ValueError(f"k: expected a kernel width of at least 2 (width 1 never mixes positions), got {k}")
    return n, d, k


def conv_path_length(n: int, k: int = 3, dilated: bool = True) -> int:
    """Stacked width-``k`` convolutions needed before the first and last of ``n`` positions meet.

    ``dilated``: the smallest L with k^L >= n, i.e. ceil(log_k n), counted with
    integers so that n = k^L gives exactly L. Otherwise (contiguous kernels, stride 1):
    ceil((n - 1) / (k - 1)).
    Shapes: n, k ints -> int.
    """
    n, _, k = _check(n, 1, k)
    if not dilated:
        return -(-(n - 1) // (k - 1))  # ceil((n - 1) / (k - 1))
    layers, field = 0, 1
    while field < n:  # each dilated layer multiplies the receptive field by k
        layers, field = layers + 1, field * k
    return layers


def layer_costs(n: int, d: int, k: int = 3, dilated: bool = True) -> dict[str, dict[str, int]]:
    """Table 1 of Vaswani et al. (2017) with numbers: one entry per layer type.

    Each entry holds ``operations`` (n^2 d, n d^2 or k n d^2), ``sequential``
    (steps that must run one after another: 1, n, 1) and ``path_length`` (1, n - 1,
    ``conv_path_length(n, k, dilated)``).
    Shapes: n, d, k ints -> {layer type: {"operations", "sequential", "path_length"}}.
    """
    n, d, k = _check(n, d, k)
    return {
        "self-attention": {"operations": n * n * d, "sequential": 1, "path_length": 1},
        "recurrent": {"operations": n * d * d, "sequential": n, "path_length": n - 1},
        "convolutional": {"operations": k * n * d * d, "sequential": 1, "path_length": conv_path_length(n, k, dilated)},
    }


def costs_table(n: int, d: int, k: int = 3, dilated: bool = True) -> str:
    """``layer_costs`` as a Markdown table (show it with ``IPython.display.Markdown``).

    Shapes: n, d, k ints -> str.
    """
    costs = layer_costs(n, d, k, dilated)
    formulas = {
        "self-attention": ("n²·d", "1", "1"),
        "recurrent": ("n·d²", "n", "n − 1"),
        "convolutional": ("k·n·d²", "1", "⌈log_k n⌉" if dilated else "⌈(n − 1)/(k − 1)⌉"),
    }
    lines = [
        f"| layer (n = {n:,}, d = {d:,}, k = {k}) | operations per layer | sequential steps | maximum path length |",
        "|---|---:|---:|---:|",
    ]
    for name in LAYER_TYPES:
        c, (f_ops, f_seq, f_path) = costs[name], formulas[name]
        lines.append(f"| {name} | {f_ops} = {c['operations']:,} | {f_seq} = {c['sequential']:,} | {f_path} = {c['path_length']:,} |")
    return "\n".join(lines)
