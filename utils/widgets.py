"""What every interactive explorer shares (ipywidgets + Matplotlib): the slider label
style and ``show_in``, which redraws an Output widget one drawing at a time.

The explorers live with their topic (``utils.attention.explorer``,
``utils.positional.explorer``, ``utils.seq2seq.explorer``, ``utils.transformer.explorer``).
They compute with a function the notebook passes in, so the PyTorch notebook
explores its torch code and the TensorFlow notebook its Keras code; the default
is the NumPy reference.
"""
from __future__ import annotations

import threading
from typing import Any, Callable

import matplotlib.pyplot as plt
import numpy as np

from .checks import to_numpy

# Slider style: the label gets the width it needs ("temperature", not "temperat...").
FULL_LABEL = {"description_width": "initial"}

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
