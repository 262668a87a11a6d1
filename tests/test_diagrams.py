"""The lesson-opening architecture figures (utils.diagrams): labels, layout, no framework."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from matplotlib.patches import FancyBboxPatch  # noqa: E402
from matplotlib.text import Text  # noqa: E402

from tools.sync_notebooks import lessons  # noqa: E402
from utils import diagrams  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
LESSONS = lessons()

# A few labels each lesson's figure must show, in the lesson's own notation.
KEY_LABELS = {
    "01_soft_attention": ["query", "keys", "values", "score function", "softmax", "weights", "weighted sum",
                          "output"],
    "02_seq2seq_attention": ["bi-GRU", "decoder GRU", "$s_{i-1}$", "e_{ij}", "alpha_{ij}", "c_i =", "$y_i$"],
    "03_memory_networks": ["hop", "$A^k$", "$B$", "$C^k$", "memory $m_i$", "u^{k+1} = u^k + o^k", "answer",
                           "controller", "interface", "usage", "temporal link", "backward", "forward",
                           "content", "erase, then add", "N \\times W"],
    "04_positional_encoding": ["embedding", "$PE(0)$", "$PE(2)$", "\\sin(p\\,\\omega_i)", "+"],
    "05_self_attention": ["$Q = X W_q$", "$K = X W_k$", "$V = X W_v$", "head", "\\sqrt{D_h}", "concat", "$W_o$",
                          "keep-mask"],
    "06_transformer": ["encoder", "decoder", "masked self-attention", "cross-attention", "feed-forward",
                       "LayerNorm", "pre-LN", "linear + softmax", "positional", "N\\times", "optionally tied"],
    "07_bert": ["[CLS]", "[MASK]", "[SEP]", "segment", "position", "Transformer encoder", "MLM head", "pooler",
                "classifier", "label", "pre-training", "fine-tuning"],
    "09_efficient_attention": ["tiled (FlashAttention)", "online softmax", "tile", "sliding window", "global tokens",
                               "random blocks", "state $S_t$", "S_t = S_{t-1} + \\phi(k_t) v_t^\\top"],
}

TOL = 1.0  # pixels: touching is not overlapping


@pytest.fixture(scope="module")
def figures():
    drawn = {name: diagrams.lesson_figure(name) for name in LESSONS}
    for fig in drawn.values():
        fig.canvas.draw()  # Agg: lays out every text so window extents are final
    yield drawn
    for fig in drawn.values():
        plt.close(fig)


def _texts(fig):
    return [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]


def _boxes(fig):
    return [p for p in fig.findobj(FancyBboxPatch) if p.get_visible()]


def _overlap(a, b) -> bool:
    return (min(a.x1, b.x1) - max(a.x0, b.x0) > TOL) and (min(a.y1, b.y1) - max(a.y0, b.y0) > TOL)


def _inside(a, b) -> bool:
    """Bbox a lies inside bbox b."""
    return a.x0 >= b.x0 - TOL and a.x1 <= b.x1 + TOL and a.y0 >= b.y0 - TOL and a.y1 <= b.y1 + TOL


def _px(b) -> tuple[int, ...]:
    return tuple(round(float(v)) for v in b.bounds)


def layout_problems(fig) -> list[str]:
    """Texts that overlap each other, cross a box edge or leave the figure; boxes that cut each other."""
    renderer = fig.canvas.get_renderer()
    problems = []
    fig_box = fig.bbox
    for ax in fig.axes:
        texts = [t for t in _texts(fig) if t.axes is ax]
        extents = [(t, t.get_window_extent(renderer)) for t in texts]
        for i, (t1, b1) in enumerate(extents):
            for t2, b2 in extents[i + 1:]:
                if _overlap(b1, b2):
                    problems.append(f"texts overlap: {t1.get_text()!r} / {t2.get_text()!r}")
        boxes = [(p, p.get_window_extent(renderer)) for p in _boxes(fig) if p.axes is ax]
        for t, tb in extents:
            for _, bb in boxes:
                if _overlap(tb, bb) and not _inside(tb, bb):
                    problems.append(f"text crosses a box edge: {t.get_text()!r}")
        for i, (_, b1) in enumerate(boxes):
            for _, b2 in boxes[i + 1:]:
                if _overlap(b1, b2) and not (_inside(b1, b2) or _inside(b2, b1)):
                    problems.append(f"boxes cut each other at {_px(b1)} / {_px(b2)}")
    for t in _texts(fig):
        if not _inside(t.get_window_extent(renderer), fig_box):
            problems.append(f"text leaves the figure: {t.get_text()!r}")
    return problems


def test_every_lesson_has_a_figure_and_key_labels_are_known():
    assert LESSONS, "no lesson folders found"
    assert set(LESSONS) == set(KEY_LABELS), "a lesson folder without key labels here, or the reverse"
    assert set(LESSONS) == set(diagrams.LESSON_FIGURES)


@pytest.mark.parametrize("lesson", LESSONS)
def test_figure_shows_the_lessons_labels(figures, lesson):
    fig = figures[lesson]
    assert isinstance(fig, matplotlib.figure.Figure)
    shown = " | ".join(t.get_text() for t in _texts(fig))
    missing = [label for label in KEY_LABELS[lesson] if label not in shown]
    assert not missing, f"{lesson}: labels missing from the figure: {missing}"


@pytest.mark.parametrize("lesson", LESSONS)
def test_figure_layout_is_clean(figures, lesson):
    fig = figures[lesson]
    width, _ = fig.get_size_inches()
    assert width <= 10.0, f"{lesson}: {width} inches is wider than a notebook column"
    assert min(t.get_fontsize() for t in _texts(fig)) >= 9, f"{lesson}: text smaller than 9 pt"
    problems = layout_problems(fig)
    assert not problems, f"{lesson}:\n" + "\n".join(problems)


def test_layout_check_catches_an_overlap():
    """The layout check is not vacuous: a label dropped onto another is reported."""
    fig = diagrams.soft_attention()
    try:
        ax = fig.axes[0]
        target = next(t for t in ax.texts if t.get_text() == "softmax")
        ax.text(*target.get_position(), "softmax again", fontsize=10, ha="center", va="center")
        fig.canvas.draw()
        assert any("texts overlap" in p for p in layout_problems(fig))
    finally:
        plt.close(fig)


def test_layout_check_catches_text_leaving_the_figure():
    fig = diagrams.soft_attention()
    try:
        fig.axes[0].text(9.3, 2.0, "far too long a label for the right edge", fontsize=10, ha="left")
        fig.canvas.draw()
        assert any("leaves the figure" in p for p in layout_problems(fig))
    finally:
        plt.close(fig)


def test_figures_are_deterministic():
    a, b = diagrams.positional_encoding(), diagrams.positional_encoding()
    try:
        for fig in (a, b):
            fig.canvas.draw()
        assert (bytes(a.canvas.buffer_rgba()) == bytes(b.canvas.buffer_rgba()))
    finally:
        plt.close(a)
        plt.close(b)


def test_separate_memory_figures():
    for draw in (diagrams.memn2n, diagrams.dnc_memory):
        fig = draw()
        try:
            fig.canvas.draw()
            assert not layout_problems(fig)
        finally:
            plt.close(fig)


def test_unknown_lesson_names_the_valid_ones():
    with pytest.raises(ValueError) as err:
        diagrams.lesson_figure("08_mamba")
    for name in LESSONS:
        assert name in str(err.value)


def test_no_deep_learning_framework_is_imported():
    code = ("import utils.diagrams, utils, sys; "
            "print(any(m in sys.modules for m in ('torch', 'tensorflow', 'keras', 'jax')))")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg"}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False", out.stdout + out.stderr
