"""Positional encodings: the NumPy reference's properties, and both twins against it.

Properties checked on the reference: interleaved layout (even dims sin, odd
dims cos), sin^2 + cos^2 = 1 per pair, the relative-offset map, dot products
that depend only on the distance, rotary scores that depend only on the offset.
Then torch and Keras must give the same numbers (1e-5), and the layers must
refuse sequences longer than their table with a clear ValueError.
"""
from __future__ import annotations

import numpy as np
import pytest

from utils.positional import numpy_ref as ref

T_MAX, D = 64, 32


def test_interleaved_layout_matches_the_paper_formula() -> None:
    pe = ref.sinusoidal_encoding(T_MAX, D)
    p, i = 37, 5
    angle = p / 10000 ** (2 * i / D)
    assert pe.shape == (T_MAX, D) and pe.dtype == np.float32
    assert pe[p, 2 * i] == pytest.approx(np.sin(angle), abs=1e-6)
    assert pe[p, 2 * i + 1] == pytest.approx(np.cos(angle), abs=1e-6)
    # position 0: every sin is 0 and every cos is 1
    np.testing.assert_allclose(pe[0, 0::2], 0.0, atol=1e-7)
    np.testing.assert_allclose(pe[0, 1::2], 1.0, atol=1e-7)


def test_each_pair_lies_on_the_unit_circle() -> None:
    pe = ref.sinusoidal_encoding(T_MAX, D).astype(np.float64)
    np.testing.assert_allclose(pe[:, 0::2] ** 2 + pe[:, 1::2] ** 2, 1.0, atol=1e-6)


@pytest.mark.parametrize("offset", [1, 3, 17, -5])
def test_offset_is_one_linear_map_for_every_position(offset: int) -> None:
    pe = ref.sinusoidal_encoding(T_MAX, D)
    m = ref.offset_matrix(offset, D)
    ps = np.arange(max(0, -offset), T_MAX - max(0, offset))
    np.testing.assert_allclose(pe[ps] @ m, pe[ps + offset], atol=1e-5)
    # a rotation: orthogonal, and M_k M_-k = I
    np.testing.assert_allclose(m @ m.T, np.eye(D), atol=1e-6)
    np.testing.assert_allclose(m @ ref.offset_matrix(-offset, D), np.eye(D), atol=1e-6)


def test_offset_matrix_is_not_the_identity() -> None:
    # guards the test above from passing with a trivial map
    assert np.abs(ref.offset_matrix(3, D) - np.eye(D)).max() > 0.1


def test_similarity_depends_only_on_distance() -> None:
    pe = ref.sinusoidal_encoding(T_MAX, D).astype(np.float64)
    sim = pe @ pe.T  # (T, T)
    for k in range(-5, 6):
        diag = np.diagonal(sim, offset=k)
        np.testing.assert_allclose(diag, diag[0], atol=1e-6)
    # and nearby positions are more similar than far ones (on average)
    assert sim[10, 11] > sim[10, 40]


def test_rotary_scores_depend_only_on_the_offset() -> None:
    rng = np.random.default_rng(0)
    q, k = rng.normal(size=(2, D))
    qs = ref.apply_rotary(np.tile(q, (T_MAX, 1)))  # the same content at every position
    ks = ref.apply_rotary(np.tile(k, (T_MAX, 1)))
    s = qs @ ks.T
    for off in (-4, 0, 7):
        diag = np.diagonal(s, offset=off)
        np.testing.assert_allclose(diag, diag[0], atol=1e-9)
    # shifting both by the same offset changes nothing; rotation keeps the norm
    np.testing.assert_allclose(ref.apply_rotary(qs[None, :5], offset=9) @ ref.apply_rotary(ks[None, :5], offset=9).swapaxes(-1, -2),
                               ref.apply_rotary(qs[None, :5]) @ ref.apply_rotary(ks[None, :5]).swapaxes(-1, -2), atol=1e-9)
    np.testing.assert_allclose(np.linalg.norm(qs, axis=-1), np.linalg.norm(q), rtol=1e-9)
    assert abs(s[3, 3] - s[3, 10]) > 1e-3  # and it does depend on the offset


def test_partial_rotary_is_the_lesson_rotary_on_the_first_dims_in_halves() -> None:
    """apply_rotary_partial: the first d_rot dims, read as interleaved pairs (x_i, x_{i + d_rot/2}),
    are apply_rotary of a d_rot-wide vector; the other dims pass through; d_rot = D is full rotary."""
    x = np.random.default_rng(3).normal(size=(2, 6, 12))
    for d_rot in (2, 4, 12):
        half = d_rot // 2
        out = ref.apply_rotary_partial(x, d_rot, offset=5)
        as_pairs = np.stack([out[..., :half], out[..., half:d_rot]], axis=-1).reshape(out.shape[:-1] + (d_rot,))
        x_pairs = np.stack([x[..., :half], x[..., half:d_rot]], axis=-1).reshape(x.shape[:-1] + (d_rot,))
        np.testing.assert_allclose(as_pairs, ref.apply_rotary(x_pairs, offset=5), atol=1e-12)
        np.testing.assert_array_equal(out[..., d_rot:], x[..., d_rot:])
    # the frequencies are those of width d_rot, not D: the last rotated pair of d_rot = 4 turns by 1/100 rad
    one = ref.apply_rotary_partial(np.array([[0.0, 1.0, 0.0, 0.0, 5.0, 5.0]] * 2), 4)  # (T=2, D=6)
    np.testing.assert_allclose(one[1, [1, 3]], [np.cos(0.01), np.sin(0.01)], atol=1e-12)
    with pytest.raises(ValueError, match="d_rot"):
        ref.apply_rotary_partial(x, 14)
    with pytest.raises(ValueError, match="d_rot"):
        ref.apply_rotary_partial(x, 3)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: ref.sinusoidal_encoding(10, 7), "d_model"),
        (lambda: ref.sinusoidal_encoding(0, 8), "max_len"),
        (lambda: ref.offset_matrix(1.5, 8), "offset"),
        (lambda: ref.sinusoidal_encoding(10, 8, base=1.0), "base"),
        (lambda: ref.apply_rotary(np.zeros((2, 5, 7)), 0), "x"),
    ],
)
def test_bad_arguments_name_themselves(call, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()


# ---------------------------------------------------------------- twins


def _torch():
    torch = pytest.importorskip("torch")
    from utils.positional import torch_impl

    return torch, torch_impl


def _keras():
    pytest.importorskip("tensorflow")
    from keras import ops

    from utils.positional import keras_impl

    return ops, keras_impl


def test_torch_matches_reference() -> None:
    torch, T = _torch()
    np.testing.assert_allclose(T.sinusoidal_encoding(T_MAX, D).numpy(), ref.sinusoidal_encoding(T_MAX, D), atol=1e-5)
    np.testing.assert_allclose(T.offset_matrix(-4, D).numpy(), ref.offset_matrix(-4, D), atol=1e-6)
    np.testing.assert_allclose(T.frequencies(D).numpy(), ref.frequencies(D), atol=1e-12)
    x = np.random.default_rng(1).normal(size=(2, 3, 9, D)).astype(np.float32)
    np.testing.assert_allclose(T.apply_rotary(torch.tensor(x), 4).numpy(), ref.apply_rotary(x, 4), atol=1e-5)


def test_keras_matches_reference() -> None:
    ops, K = _keras()
    np.testing.assert_allclose(ops.convert_to_numpy(K.sinusoidal_encoding(T_MAX, D)), ref.sinusoidal_encoding(T_MAX, D), atol=1e-5)
    np.testing.assert_allclose(ops.convert_to_numpy(K.offset_matrix(-4, D)), ref.offset_matrix(-4, D), atol=1e-6)
    np.testing.assert_allclose(ops.convert_to_numpy(K.frequencies(D)), ref.frequencies(D), rtol=1e-6)
    x = np.random.default_rng(1).normal(size=(2, 3, 9, D)).astype(np.float32)
    np.testing.assert_allclose(ops.convert_to_numpy(K.apply_rotary(x, 4)), ref.apply_rotary(x, 4), atol=1e-5)


def test_layers_agree_across_frameworks_and_refuse_long_inputs() -> None:
    torch, T = _torch()
    ops, K = _keras()
    x = np.random.default_rng(2).normal(size=(2, 12, D)).astype(np.float32)
    pe = ref.sinusoidal_encoding(12, D)
    t_sin, k_sin = T.SinusoidalEncoding(16, D), K.SinusoidalEncoding(16, D)
    np.testing.assert_allclose(t_sin(torch.tensor(x)).numpy(), x + pe, atol=1e-5)
    np.testing.assert_allclose(ops.convert_to_numpy(k_sin(x)), x + pe, atol=1e-5)
    t_emb, k_emb = T.LearnedPositionalEmbedding(16, D), K.LearnedPositionalEmbedding(16, D)
    table = np.random.default_rng(3).normal(size=(16, D)).astype(np.float32)
    with torch.no_grad():
        t_emb.embedding.copy_(torch.tensor(table))
    k_emb.embedding.assign(table)
    np.testing.assert_allclose(t_emb(torch.tensor(x)).detach().numpy(), x + table[:12], atol=1e-6)
    np.testing.assert_allclose(ops.convert_to_numpy(k_emb(x)), x + table[:12], atol=1e-6)
    assert sum(p.numel() for p in t_sin.parameters()) == 0 and len(k_sin.trainable_weights) == 0
    long = np.zeros((1, 17, D), dtype=np.float32)
    for layer, arr in ((t_sin, torch.tensor(long)), (t_emb, torch.tensor(long)), (k_sin, long), (k_emb, long)):
        with pytest.raises(ValueError, match="max_len=16"):
            layer(arr)
    with pytest.raises(ValueError, match="D=32"):
        t_emb(torch.zeros(1, 4, 8))


def test_non_twin_modules_import_no_framework() -> None:
    import subprocess
    import sys

    code = (
        "import sys, utils.positional, utils.positional.numpy_ref, utils.positional.explorer, utils.attention.masks\n"
        "print(','.join(m for m in ('torch', 'tensorflow', 'keras', 'jax') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"these modules pulled in frameworks: {out.stdout.strip()}"


def test_explorer_draws_the_numbers_it_reports() -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from utils.positional import explorer

    pe = ref.sinusoidal_encoding(T_MAX, D)
    fig, info = explorer.draw_encoding(pe, dim=5, offset=3, position=10)
    plt.close(fig)
    assert info["similarity"] == pytest.approx(float(pe[10] @ pe[13]))
    assert info["wavelength"] == pytest.approx(2 * np.pi / ref.frequencies(D)[2], rel=1e-4)  # dim 5 is in pair 2
    with pytest.raises(ValueError, match="offset"):
        explorer.draw_encoding(pe, dim=0, offset=T_MAX, position=10)
    with pytest.raises(ValueError, match="dim"):
        explorer.draw_encoding(pe, dim=D, offset=1)
