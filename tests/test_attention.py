"""The attention core: NumPy reference, torch twin and Keras twin agree; bad input is named."""
from __future__ import annotations


import numpy as np
import pytest
import torch

from utils.attention import keras_impl as K
from utils.attention import numpy_ref as R
from utils.attention import torch_impl as T

RNG = np.random.default_rng(0)  # replaced before every test by _own_generator
ATOL = 1e-5


@pytest.fixture(autouse=True)
def _own_generator(rng: np.random.Generator) -> None:
    """Each test draws from its own generator (conftest's ``rng``, seeded by the test's name):
    its inputs never depend on which tests ran before it."""
    global RNG
    RNG = rng


def data(batch=(2,), tq=3, tk=5, d=4, dv=6):
    q = RNG.normal(size=(*batch, tq, d)).astype(np.float32)
    k = RNG.normal(size=(*batch, tk, d)).astype(np.float32)
    v = RNG.normal(size=(*batch, tk, dv)).astype(np.float32)
    return q, k, v


def close(a, b):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=ATOL, rtol=1e-5)


@pytest.mark.parametrize("batch", [(), (2,), (2, 3)])
def test_sdpa_twins_agree_with_reference(batch) -> None:
    q, k, v = data(batch)
    mask = RNG.random((*batch, 1, 5)) > 0.3
    out_r, w_r = R.scaled_dot_product_attention(q, k, v, mask)
    out_t, w_t = T.scaled_dot_product_attention(torch.tensor(q), torch.tensor(k), torch.tensor(v), torch.tensor(mask))
    out_k, w_k = K.scaled_dot_product_attention(q, k, v, mask)
    for a, b in ((out_t, out_r), (w_t, w_r), (out_k, out_r), (w_k, w_r)):
        close(a, b)


def test_masked_softmax_properties() -> None:
    scores = RNG.normal(size=(2, 3, 5)).astype(np.float32) * 30
    mask = RNG.random((2, 3, 5)) > 0.4
    mask[0, 0] = False  # a fully masked row
    for fn, conv in ((R.masked_softmax, np.asarray), (T.masked_softmax, torch.tensor), (K.masked_softmax, np.asarray)):
        w = np.asarray(fn(conv(scores), conv(mask)))
        assert np.isfinite(w).all()
        assert (w[~mask] == 0).all(), f"{fn.__module__}: masked positions must get exactly zero"
        sums = w.sum(-1)
        np.testing.assert_allclose(sums[mask.any(-1)], 1.0, atol=1e-5)
        assert (sums[~mask.any(-1)] == 0).all(), "a fully masked row must be all zeros"


def test_masked_log_softmax_is_the_log_of_the_weights_without_underflow() -> None:
    scores = RNG.normal(size=(2, 3, 5))
    scores[0, 1, 2] += 150.0  # a confident row: its other keys' weights underflow float32 (e^-150)
    mask = RNG.random((2, 3, 5)) > 0.4
    mask[..., 2] = True
    mask[1, 2] = False  # a fully masked row
    log_w = R.masked_log_softmax(scores, mask)
    w = R.masked_softmax(scores, mask)
    assert np.isneginf(log_w[~mask]).all() and not np.isnan(log_w).any()
    assert np.isfinite(log_w[mask]).all(), "a kept key far below the best keeps a finite log-weight"
    np.testing.assert_allclose(np.exp(log_w), w, atol=1e-12)
    kept = mask[0, 1] & (np.arange(5) != 2)
    np.testing.assert_allclose(log_w[0, 1, kept], scores[0, 1, kept] - scores[0, 1, 2], atol=1e-6)
    with np.errstate(divide="ignore"):  # what taking the log of float32 weights gives instead
        assert np.isneginf(np.log(R.masked_softmax(scores.astype(np.float32), mask))[0, 1, kept]).all()
    np.testing.assert_allclose(R.masked_log_softmax(scores), np.log(R.masked_softmax(scores)), atol=1e-12)
    s32 = scores.astype(np.float32)
    for twin in (T.masked_log_softmax(torch.tensor(s32), torch.tensor(mask)), K.masked_log_softmax(s32, mask)):
        np.testing.assert_allclose(np.asarray(twin), R.masked_log_softmax(s32.astype(np.float64), mask), rtol=1e-5, atol=1e-5)


def test_temperature_limits() -> None:
    s = np.array([2.0, 1.0, 0.0], dtype=np.float32)
    close(R.masked_softmax(s, temperature=0.01), [1, 0, 0])
    close(T.masked_softmax(torch.tensor(s), temperature=0.01), [1, 0, 0])
    close(K.masked_softmax(s, temperature=0.01), [1, 0, 0])
    assert np.allclose(R.masked_softmax(s, temperature=1e4), 1 / 3, atol=1e-3)


def test_additive_twins_agree_with_copied_weights() -> None:
    q = RNG.normal(size=(2, 3, 4)).astype(np.float32)
    k = RNG.normal(size=(2, 5, 6)).astype(np.float32)
    v = RNG.normal(size=(2, 5, 2)).astype(np.float32)
    mask = RNG.random((2, 1, 5)) > 0.3
    tl, kl = T.AdditiveAttention(4, 6, 8), K.AdditiveAttention(4, 6, 8)
    for name in ("W_q", "W_k", "w_v"):
        getattr(kl, name).assign(getattr(tl, name).detach().numpy())
    out_t, w_t = tl(torch.tensor(q), torch.tensor(k), torch.tensor(v), torch.tensor(mask))
    out_k, w_k = kl(q, k, v, mask)
    out_r, w_r = R.additive_attention(q, k, v, tl.W_q.detach().numpy(), tl.W_k.detach().numpy(), tl.w_v.detach().numpy(), mask)
    close(out_t.detach(), out_r)
    close(w_t.detach(), w_r)
    close(out_k, out_r)
    close(w_k, w_r)


def test_additive_layers_train() -> None:
    """Gradients reach every weight of the torch layer and the Keras layer."""
    layer = T.AdditiveAttention(4, 4, 8)
    q, k, v = data()
    out, _ = layer(torch.tensor(q), torch.tensor(k), torch.tensor(v))
    out.sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in layer.parameters())
    import tensorflow as tf

    klayer = K.AdditiveAttention(4, 4, 8)
    with tf.GradientTape() as tape:
        out, _ = klayer(q, k, v)
        loss = tf.reduce_sum(out)
    grads = tape.gradient(loss, klayer.trainable_weights)
    assert len(grads) == 3 and all(g is not None and float(tf.reduce_sum(tf.abs(g))) > 0 for g in grads)


def test_gaussian_kernel_scores_twins() -> None:
    xq, xk = RNG.uniform(0, 5, 7).astype(np.float32), RNG.uniform(0, 5, 9).astype(np.float32)
    ref = R.gaussian_kernel_scores(xq, xk, 2.0)
    assert ref.shape == (7, 9) and (ref <= 0).all()
    close(T.gaussian_kernel_scores(torch.tensor(xq), torch.tensor(xk), 2.0), ref)
    close(K.gaussian_kernel_scores(xq, xk, 2.0), ref)


def test_cosine_scores_twins_and_properties() -> None:
    q, k, _ = data((2,))
    q[0, 1], k[1, 2] = 0.0, 0.0  # a zero query and a zero key: no direction, score 0
    lengths = RNG.uniform(0.1, 10.0, size=(2, 5, 1)).astype(np.float32)
    ref = R.cosine_scores(q, k * lengths)
    assert ref.shape == (2, 3, 5) and np.isfinite(ref).all() and (np.abs(ref) <= 1 + 1e-6).all()
    close(ref, R.cosine_scores(q, k))  # the lengths of the keys do not matter, only their directions
    assert (ref[0, 1] == 0).all() and (ref[1, :, 2] == 0).all()
    close(R.cosine_scores(k[:, :1] * 3.0, k[:, :1]), np.ones((2, 1, 1)))  # a key against itself, longer: 1
    close(T.cosine_scores(torch.tensor(q), torch.tensor(k * lengths)), ref)
    close(K.cosine_scores(q, k * lengths), ref)


@pytest.mark.parametrize("batch", [(), (2,), (2, 3)])
def test_top_k_mask_twins_and_properties(batch) -> None:
    scores = RNG.normal(size=(*batch, 4, 6)).astype(np.float32)
    mask = RNG.random((*batch, 1, 6)) > 0.5
    mask[..., 0] = True
    for k in (1, 2, 3, 6):
        keep = R.top_k_mask(scores, k, mask)
        np.testing.assert_array_equal(keep.sum(-1), np.minimum(k, np.broadcast_to(mask, keep.shape).sum(-1)))
        assert not (keep & ~mask).any(), "a masked key is never among the k best"
        kept_min = np.where(keep, scores, np.inf).min(-1)
        dropped_max = np.where(np.broadcast_to(mask, keep.shape) & ~keep, scores, -np.inf).max(-1)
        assert (kept_min > dropped_max).all(), "every kept score beats every dropped allowed score"
        np.testing.assert_array_equal(T.top_k_mask(torch.tensor(scores), k, torch.tensor(mask)).numpy(), keep)
        np.testing.assert_array_equal(np.asarray(K.top_k_mask(scores, k, mask)), keep)
    np.testing.assert_array_equal(R.top_k_mask(scores, 2).sum(-1), 2)
    with pytest.raises(ValueError, match="k: expected at most Tk=6"):
        R.top_k_mask(scores, 7)


BAD_CALLS = [
    ("keys", lambda m, q, k, v: m.scaled_dot_product_attention(q, k[..., :2], v), "keys: expected (..., Tk, D) with D=4"),
    ("values", lambda m, q, k, v: m.scaled_dot_product_attention(q, k, v[:, :3]), "values: expected (..., Tk, Dv)"),
    ("queries", lambda m, q, k, v: m.dot_scores(q[0, 0], k), "queries: expected (..., Tq, D)"),
    ("mask dtype", lambda m, q, k, v: m.masked_softmax(m.dot_scores(q, k), q[..., :5] * 0 + 1), "mask: expected a boolean keep-mask"),
    ("temperature", lambda m, q, k, v: m.masked_softmax(q, temperature=0.0), "temperature: expected a positive number"),
    ("W_k", lambda m, q, k, v: m.additive_scores(q, k, np.ones((4, 8)), np.ones((3, 8)), np.ones(8)), "W_k: expected (Dk, A) with Dk=4"),
]


@pytest.mark.parametrize("impl", ["numpy", "torch", "keras"])
@pytest.mark.parametrize("what,call,message", BAD_CALLS, ids=[b[0] for b in BAD_CALLS])
def test_bad_shapes_raise_value_error_naming_the_argument(impl, what, call, message) -> None:
    q, k, v = data()
    module = {"numpy": R, "torch": T, "keras": K}[impl]
    if impl == "torch":
        q, k, v = torch.tensor(q), torch.tensor(k), torch.tensor(v)
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        call(module, q, k, v)


def test_mask_shape_must_broadcast() -> None:
    q, k, v = data()
    with pytest.raises(ValueError, match=r"mask: expected a shape broadcastable to the scores \(2, 3, 5\)"):
        R.scaled_dot_product_attention(q, k, v, np.ones((2, 3, 4), dtype=bool))
