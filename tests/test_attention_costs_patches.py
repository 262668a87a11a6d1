"""Lesson 5's framework-free extras: Table 1 of Vaswani et al. (2017) in numbers, and image patches.

* ``costs``: hand-checked counts (n = 8, k = 3), the crossover of n^2 d and n d^2
  at n = d, path lengths that agree with a brute-force receptive-field count, and
  ValueErrors that name the argument.
* ``patches``: the patch layout of the ViT code (row by row, channel last),
  ``unpatchify`` undoes ``patchify`` with and without batch axes.
* The explorer and the patch plots draw what they report.
"""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from utils.attention import costs
from utils.attention.patches import patchify, unpatchify

# ---------------------------------------------------------------- costs


def test_hand_checked_counts_for_n8_d64_k3() -> None:
    c = costs.layer_costs(8, 64, k=3)
    assert list(c) == list(costs.LAYER_TYPES)
    assert c["self-attention"] == {"operations": 8 * 8 * 64, "sequential": 1, "path_length": 1}
    assert c["recurrent"] == {"operations": 8 * 64 * 64, "sequential": 8, "path_length": 7}
    assert c["convolutional"] == {"operations": 3 * 8 * 64 * 64, "sequential": 1, "path_length": 2}
    assert costs.layer_costs(8, 64, k=3, dilated=False)["convolutional"]["path_length"] == 4


@pytest.mark.parametrize("d", [1, 7, 64, 512])
def test_attention_overtakes_recurrent_right_after_n_equals_d(d: int) -> None:
    def gap(n: int) -> int:
        c = costs.layer_costs(n, d)
        return c["self-attention"]["operations"] - c["recurrent"]["operations"]

    if d >= 2:
        assert gap(d) == 0 and gap(d - 1 if d > 2 else 2) <= 0
    assert gap(d + 1) > 0 and gap(10 * d + 2) > 0


def _receptive_field_layers(n: int, k: int, dilated: bool) -> int:
    """Brute force: stack layers until position 0 can see position n - 1."""
    seen, layers = {0}, 0
    while n - 1 not in seen:
        step = k**layers if dilated else 1  # dilation of this layer
        seen = {p + j * step for p in seen for j in range(k) if p + j * step < n}
        layers += 1
    return layers


@pytest.mark.parametrize("k", [2, 3, 5])
@pytest.mark.parametrize("dilated", [True, False])
def test_conv_path_length_equals_a_brute_force_count(k: int, dilated: bool) -> None:
    for n in range(2, 60):
        assert costs.conv_path_length(n, k, dilated) == _receptive_field_layers(n, k, dilated), (n, k, dilated)


def test_exact_powers_need_no_extra_layer() -> None:
    # a float log_k would give ceil(log(243) / log(3)) = 6 on some platforms; integers give 5
    assert costs.conv_path_length(3**5, 3) == 5 and costs.conv_path_length(3**5 + 1, 3) == 6
    assert costs.conv_path_length(2**20, 2) == 20


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"n": 1, "d": 8}, "n: expected a sequence of at least 2"),
        ({"n": 8, "d": 0}, "d: expected a positive int"),
        ({"n": 8, "d": 8, "k": 1}, "k: expected a kernel width of at least 2"),
        ({"n": 8.0, "d": 8}, "n: expected a positive int"),
        ({"n": True, "d": 8}, "n: expected a positive int"),
    ],
)
def test_bad_arguments_name_themselves(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        costs.layer_costs(**kwargs)


def test_table_shows_every_layer_type_with_its_numbers() -> None:
    table = costs.costs_table(50, 512, 3)
    lines = table.splitlines()
    assert len(lines) == 5 and lines[1].startswith("|---")
    assert "| self-attention | n²·d = 1,280,000 | 1 = 1 | 1 = 1 |" in lines
    assert "| recurrent | n·d² = 13,107,200 | n = 50 | n − 1 = 49 |" in lines
    assert "⌈log_k n⌉ = 4" in lines[4]  # 3^3 = 27 < 50 <= 81 = 3^4
    assert "⌈(n − 1)/(k − 1)⌉ = 25" in costs.costs_table(50, 512, 3, dilated=False)


# ---------------------------------------------------------------- patches


def test_patch_layout_is_row_by_row_channel_last() -> None:
    rng = np.random.default_rng(0)
    image = rng.random((12, 8, 3)).astype(np.float32)  # a 3 x 2 grid of 4 x 4 patches
    flat = patchify(image, 4)
    assert flat.shape == (6, 4 * 4 * 3)
    for i in range(6):
        r, c = divmod(i, 2)
        np.testing.assert_array_equal(flat[i], image[4 * r : 4 * r + 4, 4 * c : 4 * c + 4].reshape(-1))
    assert flat[0, :3].tolist() == image[0, 0].tolist(), "the first pixel's channels come first"


def test_unpatchify_undoes_patchify_with_batch_axes() -> None:
    rng = np.random.default_rng(1)
    images = rng.random((2, 3, 16, 24, 1))  # (B1, B2, H, W, C)
    flat = patchify(images, 8)
    assert flat.shape == (2, 3, 6, 64)
    np.testing.assert_array_equal(unpatchify(flat, 8, 16, 24), images)
    np.testing.assert_array_equal(patchify(images, 1)[0, 0, :, 0], images[0, 0].reshape(-1))


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: patchify(np.zeros((10, 8, 3)), 4), "image: expected height and width divisible by patch_size=4"),
        (lambda: patchify(np.zeros((8, 8)), 4), "image: expected"),
        (lambda: patchify(np.zeros((8, 8, 3)), 0), "patch_size: expected a positive int"),
        (lambda: unpatchify(np.zeros((3, 48)), 4, 8, 8), "patches: expected .* N=4"),
        (lambda: unpatchify(np.zeros((4, 50)), 4, 8, 8), "patches: expected"),
        (lambda: unpatchify(np.zeros((4, 48)), 4, 8, 10), "height, width: expected"),
    ],
)
def test_patch_errors_name_the_argument(call, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()


# ---------------------------------------------------------------- drawing and imports


def test_cost_figure_draws_the_numbers_it_reports() -> None:
    import matplotlib.pyplot as plt

    from utils.attention import explorer

    fig, info = explorer.draw_layer_costs(50, 64, k=3)
    assert info["crossover"] == 64 and info["costs"] == costs.layer_costs(50, 64, 3)
    left, right = fig.axes
    lines = {ln.get_label(): ln for ln in left.get_lines()}
    x, y = lines["recurrent"].get_data()
    i = int(np.flatnonzero(x == 64)[0])
    assert y[i] == lines["self-attention"].get_data()[1][i] == 64**3, "the curves meet at n = d"
    assert {ln.get_label() for ln in right.get_lines()} >= {"self-attention", "convolutional, contiguous"}
    plt.close(fig)
    with pytest.raises(ValueError, match="max_n"):
        explorer.draw_layer_costs(8, 8, max_n=1)


def test_cost_explorer_redraws_when_a_slider_moves() -> None:
    import ipywidgets as w
    import matplotlib.pyplot as plt

    from utils.attention import explorer

    box = explorer.layer_cost_explorer(n=16, d=32, k=3)
    sliders = [s for s in box.children[0].children if isinstance(s, w.IntSlider)]
    assert [s.description for s in sliders] == ["sequence length n", "width d", "kernel width k"]
    assert all(s.style.description_width == "initial" for s in sliders)
    sliders[0].value = 64  # must not raise
    plt.close("all")


def test_patch_plots_check_their_inputs_and_share_a_scale() -> None:
    import matplotlib.pyplot as plt

    from utils import plots

    image = np.random.default_rng(2).random((8, 12, 3))
    ax = plots.image_patches(image, 4, title="grid")
    assert len(ax.texts) == 6 and ax.get_title() == "grid"
    weights = np.array([0.1, 0.1, 0.5, 0.1, 0.1, 0.1])
    ax = plots.patch_attention(image, weights, 4, query=2, vmax=1.0)
    overlay = ax.images[-1].get_array()  # (2, 3, 4): one RGBA cell per patch
    assert overlay.shape == (2, 3, 4) and len(ax.patches) == 1, "one cell per patch, the query outlined"
    assert overlay[0, 2, 3] > overlay[0, 0, 3], "more weight, more opaque"
    assert ax.figure.axes[-1].get_ylim() == (0.0, 1.0), "the colour bar runs from 0 to vmax"
    plt.close("all")
    with pytest.raises(ValueError, match=r"weights: expected \(6,\)"):
        plots.patch_attention(image, np.ones(5), 4)
    with pytest.raises(ValueError, match="query: expected a patch index in 0..5"):
        plots.patch_attention(image, np.ones(6), 4, query=6)
    with pytest.raises(ValueError, match="image: expected height and width divisible"):
        plots.image_patches(image, 5)


def test_new_modules_import_no_framework() -> None:
    code = (
        "import sys, utils.attention.costs, utils.attention.patches, utils.attention.explorer\n"
        "print(','.join(m for m in ('torch', 'tensorflow', 'keras', 'jax') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"importing the lesson-5 extras pulled in: {out.stdout.strip()}"
