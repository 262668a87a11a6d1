"""Architecture figures that open the lessons, drawn by the course's own code.

Every figure here is drawn by this module with Matplotlib (rounded boxes,
arrows, short labels): none is copied from a paper or a web page. They need
nothing but NumPy and Matplotlib, so they render offline and on Colab, and the
PyTorch and TensorFlow twin of a lesson show the very same picture. Importing
this module imports no deep-learning framework.

One public function per lesson, each returning a ``matplotlib.figure.Figure``:

=========================  ===========================================
lesson folder              function
=========================  ===========================================
``01_soft_attention``      ``soft_attention()``
``02_seq2seq_attention``   ``seq2seq_attention()``
``03_memory_networks``     ``memory_networks()`` (``memn2n()`` above
                           ``dnc_memory()``, also available alone)
``04_positional_encoding`` ``positional_encoding()``
``05_self_attention``      ``multi_head_attention()``
``06_transformer``         ``transformer()``
``07_bert``                ``bert()``
``09_efficient_attention`` ``efficient_attention()``
=========================  ===========================================

``lesson_figure("05_self_attention")`` picks the figure by lesson folder name.
One colour per role, the same in every lesson: inputs blue, learned layers
green, attention orange, memory and states yellow, outputs purple, fixed
operations (sum, concatenation) grey. The figures are created through
``pyplot``, so a notebook cell shows them with ``plt.show()`` (end the cell
with ``;`` or ``plt.show()`` to avoid showing one twice).
"""
from __future__ import annotations

from typing import Callable, Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Circle, FancyArrowPatch, FancyBboxPatch, Rectangle

from .attention.numpy_ref import masked_softmax

__all__ = [
    "COLOURS",
    "LESSON_FIGURES",
    "bert",
    "dnc_memory",
    "efficient_attention",
    "lesson_figure",
    "memn2n",
    "memory_networks",
    "multi_head_attention",
    "positional_encoding",
    "seq2seq_attention",
    "soft_attention",
    "transformer",
]

#: (face colour, edge colour) per role; the same in every lesson.
COLOURS: dict[str, tuple[str, str]] = {
    "input": ("#dbeafe", "#1d4ed8"),
    "layer": ("#dcfce7", "#15803d"),
    "attention": ("#ffedd5", "#c2410c"),
    "memory": ("#fef9c3", "#a16207"),
    "output": ("#f3e8ff", "#7e22ce"),
    "op": ("#f3f4f6", "#4b5563"),
    "frame": ("none", "#9ca3af"),
}
_ROLE_NAMES = {
    "input": "input",
    "layer": "learned layer",
    "attention": "attention",
    "memory": "memory / state",
    "output": "output",
    "op": "fixed operation",
}
_FS = 10  # font size of labels, in points
_ARROW = "#374151"


class _Canvas:
    """One axes in inch coordinates: (0, 0) bottom left, (w, h) top right."""

    def __init__(self, w: float, h: float):
        self.fig = plt.figure(figsize=(w, h))
        self.ax = self.fig.add_axes([0, 0, 1, 1])
        self.ax.set_xlim(0, w)
        self.ax.set_ylim(0, h)
        self.ax.set_aspect("equal")
        self.ax.axis("off")
        self.w, self.h = w, h

    def box(self, x: float, y: float, w: float, h: float, text: str = "", role: str = "layer",
            fs: float = _FS, dashed: bool = False, **text_kw) -> FancyBboxPatch:
        """A rounded box centred on (x, y), w by h inches, with a centred label."""
        fc, ec = COLOURS[role]
        patch = FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0,rounding_size=0.07",
                               fc=fc, ec=ec, lw=1.6 if role != "frame" else 1.2,
                               ls="--" if dashed else "-", zorder=1 if role == "frame" else 2)
        self.ax.add_patch(patch)
        if text:
            self.text(x, y, text, fs=fs, **text_kw)
        return patch

    def text(self, x: float, y: float, s: str, fs: float = _FS, ha: str = "center", va: str = "center",
             **kw):
        kw.setdefault("color", "#111827")
        return self.ax.text(x, y, s, fontsize=fs, ha=ha, va=va, zorder=5, linespacing=1.35, **kw)

    def circle(self, x: float, y: float, s: str = "+", r: float = 0.13, role: str = "op"):
        fc, ec = COLOURS[role]
        self.ax.add_patch(Circle((x, y), r, fc=fc, ec=ec, lw=1.4, zorder=2))
        self.text(x, y, s, fs=_FS + 1)

    def arrow(self, p: Sequence[float], q: Sequence[float], rad: float = 0.0, dashed: bool = False,
              style: str = "-|>", colour: str = _ARROW):
        self.ax.add_patch(FancyArrowPatch(
            tuple(p), tuple(q), arrowstyle=style, mutation_scale=11, lw=1.2, color=colour,
            ls="--" if dashed else "-", shrinkA=0, shrinkB=0, zorder=3,
            connectionstyle=f"arc3,rad={rad}"))

    def path(self, points: Sequence[Sequence[float]], dashed: bool = False, arrow: bool = True):
        """A polyline through ``points`` with an arrow head on its last segment."""
        pts = np.asarray(points, dtype=float)
        self.ax.plot(pts[:-1, 0], pts[:-1, 1], color=_ARROW, lw=1.2, ls="--" if dashed else "-",
                     zorder=3, solid_capstyle="butt")
        if arrow:
            self.arrow(pts[-2], pts[-1], dashed=dashed)
        else:
            self.ax.plot(pts[-2:, 0], pts[-2:, 1], color=_ARROW, lw=1.2, ls="--" if dashed else "-", zorder=3)

    def title(self, s: str, y: float | None = None, x: float | None = None):
        return self.text(self.w / 2 if x is None else x, self.h - 0.25 if y is None else y, s,
                         fs=_FS + 2, fontweight="bold")

    def legend(self, roles: Sequence[str], y: float = 0.2, x0: float | None = None, step: float = 1.45):
        """A row of colour swatches naming the roles used in the figure."""
        widths = [0.3 + 0.075 * len(_ROLE_NAMES[r]) for r in roles]
        total = sum(widths) + 0.25 * (len(roles) - 1)
        x = (self.w - total) / 2 if x0 is None else x0
        for role, width in zip(roles, widths):
            fc, ec = COLOURS[role]
            self.ax.add_patch(Rectangle((x, y - 0.08), 0.2, 0.16, fc=fc, ec=ec, lw=1.2, zorder=2))
            self.text(x + 0.28, y, _ROLE_NAMES[role], fs=_FS - 1, ha="left", color="#374151")
            x += width + 0.25


# --------------------------------------------------------------------------- lesson 1
def soft_attention() -> Figure:
    """Lesson 1: attention as a soft key-value lookup (score, softmax, weighted sum)."""
    c = _Canvas(9.4, 4.0)
    c.title("Soft attention: a differentiable key-value lookup")
    # inputs
    c.box(1.0, 2.95, 1.4, 0.5, "query $q$", "input")
    c.box(1.0, 1.95, 1.4, 0.5, "keys $k_1 \\dots k_n$", "input")
    c.box(1.0, 0.85, 1.4, 0.5, "values $v_1 \\dots v_n$", "input")
    # score -> softmax -> weights
    c.box(3.35, 2.45, 1.7, 0.75, "score function\n$a(q, k_i)$", "attention")
    c.arrow((1.7, 2.95), (2.5, 2.62))
    c.arrow((1.7, 1.95), (2.5, 2.28))
    c.box(5.3, 2.45, 1.2, 0.5, "softmax", "attention")
    c.arrow((4.2, 2.45), (4.7, 2.45))
    c.text(4.45, 2.72, "$s_i$", fs=_FS)
    # weights drawn as bars: softmax of the lesson's scores (2, 1, 0)
    c.box(7.25, 2.45, 1.7, 1.05, "", "attention")
    c.text(7.25, 2.75, "weights $\\alpha_i$", fs=_FS)
    alpha = masked_softmax(np.array([2.0, 1.0, 0.0]))
    for i, a in enumerate(alpha):
        c.ax.add_patch(Rectangle((6.78 + 0.35 * i, 2.05), 0.22, 0.5 * a, fc=COLOURS["attention"][1],
                                 ec="none", zorder=4))
    c.arrow((5.9, 2.45), (6.4, 2.45))
    # weighted sum and output
    c.box(7.25, 0.85, 1.7, 0.75, "weighted sum\n${\\sum}_i \\alpha_i v_i$", "attention")
    c.arrow((7.25, 1.92), (7.25, 1.23))
    c.arrow((1.7, 0.85), (6.4, 0.85))
    c.box(8.85, 0.85, 0.9, 0.5, "output", "output")
    c.arrow((8.1, 0.85), (8.4, 0.85))
    c.text(4.05, 1.05, "every value, weighted: no arg-max", fs=_FS - 1, color="#4b5563")
    c.legend(["input", "attention", "output"], y=0.2)
    return c.fig


# --------------------------------------------------------------------------- lesson 2
def seq2seq_attention() -> Figure:
    """Lesson 2: GRU encoder-decoder with additive (Bahdanau) attention, one decoder step."""
    c = _Canvas(9.6, 6.3)
    c.title("Encoder-decoder with additive attention: decoder step $i$")
    xs = [2.2, 3.1, 4.0, 4.9]
    # left labels
    c.text(0.15, 0.75, "source\ncharacters", ha="left")
    c.text(0.15, 1.7, "encoder\nbi-GRU", ha="left")
    c.text(0.15, 2.75, "scores", ha="left")
    c.text(0.15, 3.75, "weights", ha="left")
    c.text(0.15, 4.7, "context", ha="left")
    for j, x in enumerate(xs, start=1):
        c.box(x, 0.75, 0.6, 0.42, f"$x_{j}$", "input")
        c.box(x, 1.7, 0.6, 0.5, f"$h_{j}$", "layer")
        c.arrow((x, 0.96), (x, 1.45))
        c.arrow((x, 1.95), (x, 2.4))
    for a, b in zip(xs[:-1], xs[1:]):
        c.arrow((a + 0.3, 1.8), (b - 0.3, 1.8))
        c.arrow((b - 0.3, 1.6), (a + 0.3, 1.6))
    c.text(5.95, 1.7, "$h_j = [\\overrightarrow{h}_j; \\overleftarrow{h}_j]$", ha="left")
    # attention column
    c.box(3.55, 2.75, 3.6, 0.7, "$e_{ij} = v^\\top \\tanh(W_q\\, s_{i-1} + W_k\\, h_j)$", "attention")
    c.box(3.55, 3.75, 2.6, 0.5, "$\\alpha_{ij} = \\mathrm{softmax}_j(e_{ij})$", "attention")
    c.arrow((3.55, 3.1), (3.55, 3.5))
    c.box(3.55, 4.7, 2.6, 0.5, "$c_i = {\\sum}_j \\alpha_{ij}\\, h_j$", "attention")
    c.arrow((3.55, 4.0), (3.55, 4.45))
    # the encoder outputs are also the values of the weighted sum
    c.path([(5.2, 1.7), (5.75, 1.7), (5.75, 4.2), (4.5, 4.2), (4.5, 4.45)], dashed=True)
    c.text(5.85, 3.3, "values $h_j$", ha="left", fs=_FS - 1, color="#4b5563")
    # decoder
    c.box(7.6, 2.75, 1.4, 0.5, "$s_{i-1}$", "memory")
    c.text(7.6, 2.25, "previous state", fs=_FS - 1, color="#4b5563")
    c.arrow((6.9, 2.75), (5.35, 2.75))
    c.box(7.6, 4.7, 1.6, 0.55, "decoder GRU", "layer")
    c.arrow((4.85, 4.7), (6.8, 4.7))
    c.arrow((7.6, 3.0), (7.6, 4.42))
    c.box(8.95, 3.65, 1.2, 0.45, "emb$(y_{i-1})$", "input")
    c.arrow((8.75, 3.88), (8.2, 4.42))
    c.box(5.6, 5.45, 4.4, 0.5, "$p(y_i) = \\mathrm{softmax}(W_\\mathrm{out}[s_i; c_i; \\mathrm{emb}(y_{i-1})])$",
          "layer")
    c.arrow((7.6, 4.98), (7.6, 5.2))
    c.text(7.75, 5.09, "$s_i$", ha="left", fs=_FS - 1)
    c.box(8.85, 5.45, 0.75, 0.45, "$y_i$", "output")
    c.arrow((7.8, 5.45), (8.47, 5.45))
    c.legend(["input", "layer", "attention", "memory", "output"], y=0.2)
    return c.fig


# --------------------------------------------------------------------------- lesson 3
def _draw_memn2n(c: _Canvas, oy: float) -> None:
    """The End-To-End Memory Network, one hop in detail; drawn from height ``oy`` up."""
    c.title("End-To-End Memory Network (MemN2N): $K$ hops over the story", y=oy + 4.15)
    c.box(0.75, oy + 2.75, 1.2, 1.4, "story\nsentences\n$x_i$", "input")
    c.box(0.75, oy + 0.85, 1.2, 0.55, "question $q$", "input")
    c.box(2.15, oy + 3.25, 0.75, 0.45, "$A^k$", "layer")
    c.box(2.15, oy + 2.25, 0.75, 0.45, "$C^k$", "layer")
    c.box(2.15, oy + 0.85, 0.75, 0.45, "$B$", "layer")
    c.arrow((1.35, oy + 3.25), (1.77, oy + 3.25))
    c.arrow((1.35, oy + 2.25), (1.77, oy + 2.25))
    c.arrow((1.35, oy + 0.85), (1.77, oy + 0.85))
    # one hop
    c.box(5.2, oy + 2.0, 5.1, 3.55, "", "frame", dashed=True)
    c.text(2.8, oy + 3.55, "hop $k = 1 \\dots K$", ha="left", fontweight="bold", color="#4b5563")
    c.box(3.6, oy + 3.0, 1.3, 0.5, "memory $m_i$", "memory")
    c.box(3.6, oy + 2.0, 1.3, 0.5, "output $c_i$", "memory")
    c.arrow((2.53, oy + 3.25), (2.95, oy + 3.05))
    c.arrow((2.53, oy + 2.25), (2.95, oy + 2.05))
    c.box(3.6, oy + 0.85, 1.3, 0.5, "state $u^k$", "memory")
    c.arrow((2.53, oy + 0.85), (2.95, oy + 0.85))
    c.box(5.65, oy + 3.0, 1.9, 0.5, "$p_i = \\mathrm{softmax}(u^\\top m_i)$", "attention")
    c.arrow((4.25, oy + 3.0), (4.7, oy + 3.0))
    c.box(5.65, oy + 2.0, 1.9, 0.5, "$o = {\\sum}_i p_i\\, c_i$", "attention")
    c.arrow((4.25, oy + 2.0), (4.7, oy + 2.0))
    c.arrow((5.65, oy + 2.75), (5.65, oy + 2.25))
    c.path([(4.25, oy + 0.85), (4.6, oy + 0.85), (4.6, oy + 2.5), (4.95, oy + 2.5), (4.95, oy + 2.75)])
    c.circle(5.65, oy + 0.85, "+")
    c.arrow((4.6, oy + 0.85), (5.52, oy + 0.85))
    c.arrow((5.65, oy + 1.75), (5.65, oy + 0.98))
    c.box(6.85, oy + 0.85, 1.45, 0.5, "$u^{k+1} = u^k + o^k$", "memory")
    c.arrow((5.78, oy + 0.85), (6.12, oy + 0.85))
    c.text(5.65, oy + 0.45, "next hop: $A^{k+1} = C^k$", fs=_FS - 1, color="#4b5563")
    # answer
    c.box(8.75, oy + 2.5, 1.5, 0.8, "answer\n$\\hat a = \\mathrm{softmax}(W u^{K+1})$", "output", fs=_FS - 0.5)
    c.path([(7.58, oy + 0.85), (8.75, oy + 0.85), (8.75, oy + 2.1)])
    c.text(8.82, oy + 1.45, "after\n$K$ hops", ha="left", fs=_FS - 1, color="#4b5563")


def _draw_dnc(c: _Canvas, oy: float) -> None:
    """The memory of the Differentiable Neural Computer; drawn from height ``oy`` up."""
    c.title("Differentiable Neural Computer: where to write, in what order to read", y=oy + 4.35)
    c.box(0.8, oy + 3.55, 1.2, 0.45, "input $x_t$", "input")
    c.box(0.8, oy + 2.3, 1.2, 0.75, "controller\n(LSTM)", "layer")
    c.arrow((0.8, oy + 3.32), (0.8, oy + 2.68))
    c.box(0.8, oy + 1.1, 1.2, 0.45, "output $y_t$", "output")
    c.arrow((0.8, oy + 1.92), (0.8, oy + 1.33))
    c.box(2.6, oy + 2.5, 1.5, 2.2,
          "interface $\\xi_t$\nkeys $k$, $\\beta$\ngates $g^a$, $g^w$\nfree gates $f$\n"
          "erase $e$, write $v$\nread modes $\\pi$", "memory", fs=_FS - 0.5)
    c.arrow((1.4, oy + 2.45), (1.85, oy + 2.45))
    # write path (top)
    c.box(4.45, oy + 3.3, 1.55, 0.8, "usage $u_t$\n$\\to$ allocation $a_t$", "attention")
    c.arrow((3.35, oy + 3.3), (3.67, oy + 3.3))
    c.box(6.35, oy + 3.3, 1.65, 0.8, "write weights $w^w_t$\nerase, then add", "attention")
    c.arrow((5.23, oy + 3.3), (5.52, oy + 3.3))
    # memory matrix as a grid
    gx, gy, cw, ch, rows, cols = 7.95, oy + 1.75, 0.3, 0.22, 6, 5
    for r in range(rows):
        for k in range(cols):
            shade = 0.35 + 0.55 * ((r * 3 + k * 2) % 5) / 4
            c.ax.add_patch(Rectangle((gx + k * cw, gy + r * ch), cw, ch, fc=COLOURS["memory"][0],
                                     ec=COLOURS["memory"][1], lw=0.8, alpha=shade, zorder=2))
    c.text(gx + cols * cw / 2, gy + rows * ch + 0.2, "memory $M$, $N \\times W$", fs=_FS)
    c.arrow((7.18, oy + 3.2), (gx - 0.02, gy + rows * ch - 0.25))
    # temporal links, written with the write weights
    c.box(5.45, oy + 2.05, 1.65, 0.7, "temporal link\nmatrix $L_t$", "memory")
    c.arrow((6.0, oy + 2.9), (5.9, oy + 2.4))
    # read heads
    heads = [(4.3, "backward\n$b = L^\\top w^r_{t-1}$"), (6.6, "forward\n$f = L\\, w^r_{t-1}$"),
             (8.7, "content $c^r$\nkey $k$, $\\beta$")]
    for x, name in heads:
        c.box(x, oy + 1.05, 1.6, 0.7, name, "attention", fs=_FS - 0.5)
        c.arrow((x, oy + 0.7), (x, oy + 0.52))
    c.arrow((4.9, oy + 1.7), (4.5, oy + 1.4))
    c.arrow((6.0, oy + 1.7), (6.4, oy + 1.4))
    c.arrow((8.7, gy - 0.02), (8.7, oy + 1.4))
    c.box(6.45, oy + 0.3, 5.9, 0.42,
          "read modes: $w^r_t = \\pi_1 b + \\pi_2 c^r + \\pi_3 f$,  reads $r_t = M_t^\\top w^r_t$", "attention",
          fs=_FS - 0.5)
    c.path([(3.5, oy + 0.3), (1.6, oy + 0.3), (1.6, oy + 2.1), (1.42, oy + 2.1)])


def memn2n() -> Figure:
    """Lesson 3: the End-To-End Memory Network (embeddings A, B, C; K hops)."""
    c = _Canvas(9.6, 4.95)
    _draw_memn2n(c, oy=0.5)
    c.legend(["input", "layer", "attention", "memory", "output"], y=0.2)
    return c.fig


def dnc_memory() -> Figure:
    """Lesson 3: the Differentiable Neural Computer's memory (usage, links, read modes)."""
    c = _Canvas(9.6, 5.2)
    _draw_dnc(c, oy=0.55)
    c.legend(["input", "layer", "attention", "memory", "output"], y=0.2)
    return c.fig


def memory_networks() -> Figure:
    """Lesson 3: MemN2N (top panel) and the DNC memory (bottom panel) in one figure."""
    c = _Canvas(9.6, 9.7)
    _draw_memn2n(c, oy=5.05)
    _draw_dnc(c, oy=0.45)
    c.ax.plot([0.3, 9.3], [4.98, 4.98], color=COLOURS["frame"][1], lw=0.8, zorder=1)
    c.legend(["input", "layer", "attention", "memory", "output"], y=0.2)
    return c.fig


# --------------------------------------------------------------------------- lesson 4
def positional_encoding() -> Figure:
    """Lesson 4: token embedding + sinusoidal positional encoding = input to self-attention."""
    c = _Canvas(9.6, 4.6)
    c.title("Positional encoding: add where each token is")
    words = ["dog", "bites", "man"]
    xs = [0.85, 2.55, 4.25]
    for p, (x, word) in enumerate(zip(xs, words)):
        c.box(x, 0.95, 1.0, 0.42, f"{word}", "input")
        c.text(x, 0.55, f"$p = {p}$", fs=_FS - 1, color="#4b5563")
        c.box(x, 1.85, 1.25, 0.45, "embedding", "layer")
        c.arrow((x, 1.16), (x, 1.62))
        c.circle(x, 2.65, "+")
        c.arrow((x, 2.08), (x, 2.52))
        c.box(x + 0.72, 2.65, 0.72, 0.38, f"$PE({p})$", "input", fs=_FS - 0.5)
        c.arrow((x + 0.36, 2.65), (x + 0.13, 2.65))
        c.box(x, 3.45, 1.25, 0.45, f"$x_{p} + PE({p})$", "output")
        c.arrow((x, 2.78), (x, 3.22))
    c.text(2.75, 4.0, "to self-attention: the same word at another place is another vector", fs=_FS - 1,
           color="#4b5563")
    # the waves: PE(p)_{2i} = sin(p w_i), interleaved with cosines
    x0, x1, P = 6.75, 9.4, 16.0
    c.text((6.0 + x1) / 2, 3.85, "$PE(p)_{2i} = \\sin(p\\,\\omega_i)$, $PE(p)_{2i+1} = \\cos(p\\,\\omega_i)$",
           fs=_FS - 0.5)
    c.text((6.0 + x1) / 2, 3.45, "$\\omega_i = 10000^{-2i/D}$ (here $D = 16$)", fs=_FS - 0.5)
    p = np.linspace(0, P, 300)
    for row, i in enumerate([0, 1, 2]):
        base = 2.7 - 0.82 * row
        w = 10000.0 ** (-2 * i / 16)
        c.text(6.0, base, f"dim {2 * i}", fs=_FS - 1, ha="left", color="#4b5563")
        c.ax.plot([x0, x1], [base, base], color="#d1d5db", lw=0.8, zorder=2)
        c.ax.plot(x0 + (x1 - x0) * p / P, base + 0.28 * np.sin(p * w), color=COLOURS["input"][1], lw=1.5, zorder=3)
        for q in range(3):
            c.ax.plot(x0 + (x1 - x0) * q / P, base + 0.28 * np.sin(q * w), "o", ms=4,
                      color=COLOURS["output"][1], zorder=4)
    c.text((x0 + x1) / 2, 0.55, "position $p$ (dots: $p = 0, 1, 2$)", fs=_FS - 1, color="#4b5563")
    c.legend(["input", "layer", "op", "output"], y=0.2)
    return c.fig


# --------------------------------------------------------------------------- lesson 5
def multi_head_attention() -> Figure:
    """Lesson 5: multi-head attention: project, split into heads, attend, concatenate, project."""
    c = _Canvas(9.6, 4.85)
    c.title("Multi-head attention: $H$ heads of width $D_h = D / H$")
    mid, top, bottom = 2.72, 4.25, 1.2
    c.box(0.6, 2.8, 0.95, 0.85, "$X$\n(B, T, D)", "input")
    for y, s in [(3.85, "$Q = X W_q$"), (2.8, "$K = X W_k$"), (1.75, "$V = X W_v$")]:
        c.box(2.05, y, 1.25, 0.48, s, "layer")
        c.arrow((1.08, 2.8), (1.42, y))
        c.arrow((2.68, y), (3.02, y))
    c.box(3.3, mid, 0.55, top - bottom, "split", "op")
    for y, h in [(3.85, "1"), (2.8, "2"), (1.6, "H")]:
        c.box(5.25, y, 2.75, 0.78,
              f"head {h if h != 'H' else '$H$'}\n$\\mathrm{{softmax}}(Q_{h} K_{h}^\\top / \\sqrt{{D_h}})\\, V_{h}$",
              "attention", fs=_FS - 0.5)
        c.arrow((3.58, y), (3.87, y))
        c.arrow((6.63, y), (6.97, y))
    c.text(5.25, 2.2, "$\\vdots$", fs=_FS)
    c.box(7.25, mid, 0.55, top - bottom, "concat", "op", rotation=90)
    c.box(8.1, mid, 0.65, 0.6, "$W_o$", "layer")
    c.arrow((7.53, mid), (7.77, mid))
    c.box(9.05, mid, 0.85, 0.85, "output\n(B,T,D)", "output", fs=_FS - 1)
    c.arrow((8.43, mid), (8.62, mid))
    c.box(5.25, 0.7, 2.75, 0.4, "keep-mask: True = may attend", "input", fs=_FS - 1)
    c.arrow((5.25, 0.9), (5.25, 1.21))
    c.text(1.9, 0.7, "one (D, 3D) matmul: $[W_q | W_k | W_v]$", fs=_FS - 1, color="#4b5563")
    c.legend(["input", "layer", "attention", "op", "output"], y=0.2)
    return c.fig


# --------------------------------------------------------------------------- lesson 6
def _sublayer(c: _Canvas, cx: float, y: float, name: str, role: str, side: int = -1, w: float = 2.1) -> float:
    """Pre-LN sublayer x + f(LN(x)) drawn from height y up; the residual runs on ``side`` (-1 left).

    Returns the height of the top of its sum.
    """
    c.box(cx, y + 0.17, w, 0.32, "LayerNorm", "layer", fs=_FS - 1)
    c.arrow((cx, y + 0.33), (cx, y + 0.5))
    c.box(cx, y + 0.72, w, 0.44, name, role)
    c.arrow((cx, y + 0.94), (cx, y + 1.1))
    c.circle(cx, y + 1.23, "+", r=0.12)
    # the residual: from below the LayerNorm, around the sublayer, into the sum
    edge = cx + side * (w / 2 + 0.2)
    c.path([(cx, y - 0.08), (edge, y - 0.08), (edge, y + 1.23), (cx + side * 0.12, y + 1.23)])
    return y + 1.35


def transformer() -> Figure:
    """Lesson 6: the Transformer encoder-decoder, pre-LN as in the lesson."""
    c = _Canvas(9.4, 9.0)
    c.title("The Transformer (pre-LN: $x + f(\\mathrm{LN}(x))$, final LayerNorm)")
    ex, dx, gap = 2.55, 6.55, 0.22
    for cx, tokens, label in [(ex, "source tokens", "source embedding"),
                              (dx, "target shifted right", "target embedding")]:
        c.box(cx, 0.85, 2.1, 0.4, tokens, "input")
        c.box(cx, 1.55, 2.1, 0.42, f"{label} $\\times\\sqrt{{D}}$", "layer", fs=_FS - 0.5)
        c.arrow((cx, 1.05), (cx, 1.34))
        c.circle(cx, 2.2, "+", r=0.12)
        c.arrow((cx, 1.76), (cx, 2.08))
        c.arrow((cx, 2.32), (cx, 2.75))
    c.text(dx, 0.42, "$\\langle$bos$\\rangle$ $y_1$ $y_2 \\dots$", fs=_FS - 1, color="#4b5563")
    c.box(4.55, 2.2, 1.45, 0.42, "positional enc.", "input", fs=_FS - 1)
    c.arrow((3.83, 2.2), (ex + 0.12, 2.2))
    c.arrow((5.27, 2.2), (dx - 0.12, 2.2))
    y0 = 2.75
    # encoder stack: self-attention, feed-forward; residuals on the left
    y = _sublayer(c, ex, y0, "self-attention", "attention")
    c.arrow((ex, y), (ex, y + gap))
    y = _sublayer(c, ex, y + gap, "feed-forward", "layer")
    c.box(ex, (y0 - 0.2 + y + 0.1) / 2, 2.95, y + 0.1 - (y0 - 0.2), "", "frame", dashed=True)
    mid = (y0 + y) / 2
    c.text(ex - 1.6, mid + 0.2, "encoder", ha="right", fontweight="bold", color="#4b5563")
    c.text(ex - 1.6, mid - 0.15, "$N\\times$", fs=_FS + 1, ha="right", fontweight="bold")
    c.arrow((ex, y), (ex, y + gap))
    c.box(ex, y + gap + 0.17, 2.1, 0.34, "LayerNorm", "layer", fs=_FS - 1)
    enc_top = y + gap + 0.34
    # decoder stack: masked self-attention, cross-attention, feed-forward; residuals on the right
    y = _sublayer(c, dx, y0, "masked self-attention", "attention", side=1)
    c.arrow((dx, y), (dx, y + gap))
    cross = y + gap + 0.72
    y = _sublayer(c, dx, y + gap, "cross-attention", "attention", side=1)
    c.arrow((dx, y), (dx, y + gap))
    y = _sublayer(c, dx, y + gap, "feed-forward", "layer", side=1)
    c.box(dx, (y0 - 0.2 + y + 0.1) / 2, 2.95, y + 0.1 - (y0 - 0.2), "", "frame", dashed=True)
    mid = (y0 + y) / 2
    c.text(dx + 1.6, mid + 0.2, "decoder", ha="left", fontweight="bold", color="#4b5563")
    c.text(dx + 1.6, mid - 0.15, "$\\times N$", fs=_FS + 1, ha="left", fontweight="bold")
    c.arrow((dx, y), (dx, y + gap))
    c.box(dx, y + gap + 0.17, 2.1, 0.34, "LayerNorm", "layer", fs=_FS - 1)
    y = y + gap + 0.34
    c.arrow((dx, y), (dx, y + gap))
    c.box(dx, y + gap + 0.2, 2.1, 0.4, "linear + softmax", "layer")
    c.box(8.75, y + gap + 0.2, 1.1, 0.55, "next-token\nprobabilities", "output", fs=_FS - 1)
    c.arrow((dx + 1.05, y + gap + 0.2), (8.2, y + gap + 0.2))
    c.text(dx - 1.2, y + gap + 0.2, "output layer, optionally tied\nto the target embedding", ha="right",
           fs=_FS - 1, color="#4b5563")
    # the encoder's output is the key and value of every cross-attention
    c.path([(ex, enc_top), (ex, enc_top + 0.3), (4.55, enc_top + 0.3), (4.55, cross), (dx - 1.05, cross)])
    c.text(ex, enc_top + 0.5, "encoder output: keys and values", fs=_FS - 1, color="#4b5563")
    c.legend(["input", "layer", "attention", "output"], y=0.2, x0=0.2)
    return c.fig


# --------------------------------------------------------------------------- lesson 7
def bert() -> Figure:
    """Lesson 7: BERT pre-training (masked LM) and fine-tuning ([CLS] -> pooler -> classifier)."""
    c = _Canvas(9.6, 6.0)
    c.title("BERT: pre-train with a masked LM, then fine-tune", y=5.75)
    for ox, sub, tokens in [(0.15, "pre-training: masked language model", ["[CLS]", "a", "[MASK]", "film", "[SEP]"]),
                            (4.95, "fine-tuning: sentence classification", ["[CLS]", "a", "great", "film", "[SEP]"])]:
        c.text(ox + 2.25, 5.3, sub, fontweight="bold", color="#4b5563")
        xs = [ox + 0.45 + 0.9 * k for k in range(5)]
        for x, t in zip(xs, tokens):
            c.box(x, 0.95, 0.8, 0.4, t, "input", fs=_FS - 0.5)
            c.arrow((x, 1.15), (x, 1.45))
        c.text(ox + 2.25, 0.5, "segment 0 0 0 0 0, position 0 1 2 3 4", fs=_FS - 1, color="#4b5563")
        c.box(ox + 2.25, 1.8, 4.3, 0.7, "token + segment + position embeddings,\nLayerNorm", "layer")
        c.arrow((ox + 2.25, 2.15), (ox + 2.25, 2.43))
        c.box(ox + 2.25, 2.85, 4.3, 0.8, "Transformer encoder\n$N \\times$ post-LN blocks (self-attention, GELU FFN)",
              "attention", fs=_FS - 0.5)
        for k, x in enumerate(xs):
            c.arrow((x, 3.25), (x, 3.5))
            c.box(x, 3.72, 0.6, 0.42, f"$h_{k}$" if k else "$h_{\\mathrm{CLS}}$", "memory", fs=_FS - 0.5)
    # pre-training head on the masked position
    xm = 0.15 + 0.45 + 0.9 * 2
    c.box(xm, 4.45, 2.2, 0.55, "MLM head: dense, GELU, LN\n(tied token embeddings)", "layer", fs=_FS - 1)
    c.arrow((xm, 3.93), (xm, 4.2))
    c.box(xm + 1.95, 4.45, 1.2, 0.5, "'great'", "output")
    c.arrow((xm + 1.1, 4.45), (xm + 1.35, 4.45))
    c.text(xm, 5.0, "softmax over the vocabulary", fs=_FS - 1, color="#4b5563")
    # fine-tuning head on [CLS]
    xc = 4.95 + 0.45
    c.box(xc + 0.95, 4.45, 1.35, 0.55, "pooler\n$\\tanh(W h + b)$", "layer", fs=_FS - 1)
    c.path([(xc, 3.93), (xc, 4.45), (xc + 0.27, 4.45)])
    c.box(xc + 2.3, 4.45, 1.05, 0.55, "classifier", "layer", fs=_FS - 0.5)
    c.arrow((xc + 1.63, 4.45), (xc + 1.77, 4.45))
    c.box(xc + 3.55, 4.45, 1.05, 0.55, "label:\nfresh/rotten", "output", fs=_FS - 1)
    c.arrow((xc + 2.83, 4.45), (xc + 3.02, 4.45))
    c.ax.plot([4.8, 4.8], [0.3, 5.45], color=COLOURS["frame"][1], lw=0.8, zorder=1)
    c.legend(["input", "layer", "attention", "memory", "output"], y=0.15)
    return c.fig


# --------------------------------------------------------------------------- lesson 9
def _cells(c: _Canvas, x0: float, y0: float, keep: np.ndarray, size: float, colour: np.ndarray) -> None:
    """A keep-mask or a score matrix as a grid of small squares; row 0 at the top."""
    n = keep.shape[0]
    for i in range(n):
        for j in range(n):
            fc = COLOURS["attention"][1] if keep[i, j] else "#f9fafb"
            c.ax.add_patch(Rectangle((x0 + j * size, y0 + (n - 1 - i) * size), size, size, fc=fc,
                                     ec="#d1d5db", lw=0.5, alpha=float(colour[i, j]), zorder=2))


def efficient_attention() -> Figure:
    """Lesson 9: exact attention in tiles (online softmax), sparse masks, linear attention as a recurrence."""
    c = _Canvas(9.6, 5.3)
    c.title("Attention without the $T \\times T$ wall: tiles, sparsity, a recurrence", y=5.05)
    # 1-2. tiled attention: a query block streams over key tiles with the online softmax
    c.text(1.65, 4.55, "exact: tiled (FlashAttention)", fontweight="bold", color="#4b5563")
    n, size, x0, y0 = 8, 0.27, 0.45, 1.95
    band = np.zeros((n, n), dtype=bool)
    band[2:4, :] = True  # one query block (rows 2-3) ...
    shade = np.full((n, n), 0.25)
    shade[2:4, 4:6] = 1.0  # ... and the one tile in fast memory now
    _cells(c, x0, y0, band, size, shade)
    c.text(x0 + n * size / 2, y0 + n * size + 0.15, "keys, one tile at a time", fs=_FS - 1, color="#4b5563")
    c.text(x0 - 0.12, y0 + n * size / 2, "queries", fs=_FS - 1, color="#4b5563", rotation=90, ha="right")
    c.arrow((x0 + n * size + 0.3, y0 + 5 * size), (x0 + 6 * size, y0 + 5 * size))
    c.text(x0 + n * size + 0.35, y0 + 5 * size, "tile", fs=_FS - 1, ha="left")
    c.arrow((x0, y0 - 0.12), (x0 + n * size, y0 - 0.12), colour="#9ca3af")
    c.box(1.65, 1.3, 2.6, 0.55, "online softmax: running\nmax $m$, sum $\\ell$, output $O$", "memory", fs=_FS - 1)
    c.arrow((1.65, y0 - 0.2), (1.65, 1.58))
    c.text(1.65, 0.72, "memory $O(T)$, no $T \\times T$ matrix", fs=_FS - 1, color="#4b5563")
    # 3. sparse attention: window + global + random blocks
    c.text(4.85, 4.55, "sparse: Longformer, BigBird", fontweight="bold", color="#4b5563")
    n, size, x0 = 12, 0.2, 3.65
    i, j = np.indices((n, n))
    window = np.abs(i - j) <= 1
    globl = (i == 0) | (j == 0)
    rand = np.zeros((n, n), dtype=bool)
    for qb, kb in [(1, 4), (2, 0), (3, 1), (4, 2), (5, 3)]:  # a few random 2 x 2 blocks
        rand[2 * qb : 2 * qb + 2, 2 * kb : 2 * kb + 2] = True
    shade = np.where(window, 1.0, np.where(globl, 0.6, 0.35))
    _cells(c, x0, 2.0, window | globl | rand, size, shade)
    for k, (label, alpha) in enumerate([("sliding window", 1.0), ("global tokens", 0.6), ("random blocks", 0.35)]):
        y = 1.55 - 0.3 * k
        c.ax.add_patch(Rectangle((3.7, y - 0.08), 0.18, 0.16, fc=COLOURS["attention"][1], alpha=alpha,
                                 ec="none", zorder=2))
        c.text(3.98, y, label, fs=_FS - 1, ha="left")
    c.text(4.85, 0.62, "$O(T\\,w)$ scores, not $T^2$", fs=_FS - 1, color="#4b5563")
    # 4. linear attention: a recurrence with a matrix state
    c.text(7.9, 4.55, "linear: a recurrence", fontweight="bold", color="#4b5563")
    c.box(7.0, 3.85, 1.3, 0.5, "$\\phi(k_t)\\, v_t^\\top$", "attention")
    c.circle(7.9, 3.0, "+")
    c.path([(7.0, 3.6), (7.0, 3.0), (7.77, 3.0)])
    c.box(8.9, 3.0, 1.15, 0.62, "state $S_t$\n$D \\times D_v$", "memory", fs=_FS - 1)
    c.arrow((8.03, 3.0), (8.32, 3.0))
    c.path([(8.9, 3.31), (8.9, 3.75), (7.9, 3.75), (7.9, 3.13)], dashed=True)
    c.text(8.4, 3.95, "$S_{t-1}$", fs=_FS - 1)
    c.box(7.9, 1.95, 2.6, 0.55, "$y_t = \\phi(q_t)^\\top S_t \\,/\\, \\phi(q_t)^\\top z_t$", "attention", fs=_FS - 1)
    c.arrow((8.9, 2.69), (8.9, 2.23))
    c.box(7.9, 1.15, 1.0, 0.42, "$y_t$", "output")
    c.arrow((7.9, 1.67), (7.9, 1.36))
    c.text(7.9, 0.62, "$S_t = S_{t-1} + \\phi(k_t) v_t^\\top$: $O(T)$", fs=_FS - 1, color="#4b5563")
    c.legend(["attention", "memory", "output"], y=0.2)
    return c.fig


# --------------------------------------------------------------------------- dispatcher
LESSON_FIGURES: dict[str, Callable[[], Figure]] = {
    "01_soft_attention": soft_attention,
    "02_seq2seq_attention": seq2seq_attention,
    "03_memory_networks": memory_networks,
    "04_positional_encoding": positional_encoding,
    "05_self_attention": multi_head_attention,
    "06_transformer": transformer,
    "07_bert": bert,
    "09_efficient_attention": efficient_attention,
}


def lesson_figure(lesson: str) -> Figure:
    """The architecture figure of a lesson, by its folder name (e.g. ``"05_self_attention"``)."""
    try:
        draw = LESSON_FIGURES[lesson]
    except (KeyError, TypeError):
        raise ValueError(f"unknown lesson {lesson!r}; valid lessons: {', '.join(LESSON_FIGURES)}") from None
    return draw()
