"""Multi-head attention and masks: reference, twins, and the libraries' own layers.

* The NumPy reference equals a per-head loop written independently here.
* torch and Keras equal the reference and each other (same weights, 1e-5).
* Weights copied into ``torch.nn.MultiheadAttention`` and
  ``keras.layers.MultiHeadAttention`` give the same outputs and per-head weights
  (1e-5), without a mask, with padding, causal and both; and back again.
* The mask converters agree with the libraries' own causal masks, and a causal
  mask really hides the future (changing future tokens leaves the past alone).
"""
from __future__ import annotations

import numpy as np
import pytest

from utils.attention import masks
from utils.attention import numpy_ref as ref

B, T, S, D, H = 3, 6, 8, 16, 4
LENGTHS = np.array([S, 5, 2])  # keys per example (for padding)
ATOL = 1e-5


def _weights(seed: int = 0, bias: bool = True) -> dict:
    rng = np.random.default_rng(seed)
    w = {
        "w_qkv": rng.normal(scale=D**-0.5, size=(D, 3 * D)).astype(np.float32),
        "w_o": rng.normal(scale=D**-0.5, size=(D, D)).astype(np.float32),
        "b_qkv": rng.normal(scale=0.1, size=(3 * D,)).astype(np.float32) if bias else None,
        "b_o": rng.normal(scale=0.1, size=(D,)).astype(np.float32) if bias else None,
    }
    return w


def _inputs(seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.normal(size=(B, T, D)).astype(np.float32), rng.normal(size=(B, S, D)).astype(np.float32)


def _loop_reference(q_in, k_in, v_in, w, mask=None):
    """Multi-head attention one head at a time, without split_heads/merge_heads."""
    dh = D // H
    b_qkv = w["b_qkv"] if w["b_qkv"] is not None else np.zeros(3 * D, np.float32)
    heads, maps = [], []
    for h in range(H):
        cols = slice(h * dh, (h + 1) * dh)
        q = q_in @ w["w_qkv"][:, :D][:, cols] + b_qkv[:D][cols]
        k = k_in @ w["w_qkv"][:, D : 2 * D][:, cols] + b_qkv[D : 2 * D][cols]
        v = v_in @ w["w_qkv"][:, 2 * D :][:, cols] + b_qkv[2 * D :][cols]
        s = q @ k.swapaxes(-1, -2) / np.sqrt(dh)
        if mask is not None:
            m = np.broadcast_to(mask, (B, H, q.shape[1], k.shape[1]))[:, h]
            s = np.where(m, s, -np.inf)
        p = np.exp(s - s.max(-1, keepdims=True))
        p /= p.sum(-1, keepdims=True)
        heads.append(p @ v)
        maps.append(p)
    out = np.concatenate(heads, -1) @ w["w_o"] + (w["b_o"] if w["b_o"] is not None else 0)
    return out, np.stack(maps, 1)


def _masks() -> dict:
    return {
        "none": None,
        "padding": ref.padding_mask(np.minimum(LENGTHS, T), T),
        "causal": ref.causal_mask(T),
        "padding+causal": ref.padding_mask(np.array([T, 4, 1]), T) & ref.causal_mask(T),
    }


# ---------------------------------------------------------------- reference


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("name", ["none", "padding", "causal", "padding+causal"])
def test_reference_equals_per_head_loop(name: str, bias: bool) -> None:
    x, _ = _inputs()
    w = _weights(bias=bias)
    mask = _masks()[name]
    out, weights = ref.multi_head_attention(x, x, x, w["w_qkv"], w["b_qkv"], w["w_o"], w["b_o"], H, mask)
    out2, weights2 = _loop_reference(x, x, x, w, mask)
    np.testing.assert_allclose(out, out2, atol=ATOL)
    np.testing.assert_allclose(weights, weights2, atol=ATOL)
    assert weights.shape == (B, H, T, T)
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-6)
    if mask is not None:
        assert np.all(weights[~np.broadcast_to(mask, weights.shape)] == 0)


def test_reference_cross_attention_with_padding() -> None:
    x, y = _inputs()
    w = _weights()
    mask = ref.padding_mask(LENGTHS, S)
    out, weights = ref.multi_head_attention(x, y, y, w["w_qkv"], w["b_qkv"], w["w_o"], w["b_o"], H, mask)
    out2, weights2 = _loop_reference(x, y, y, w, mask)
    np.testing.assert_allclose(out, out2, atol=ATOL)
    np.testing.assert_allclose(weights, weights2, atol=ATOL)
    assert np.all(weights[2, :, :, 2:] == 0) and np.all(weights[1, :, :, 5:] == 0)


def test_split_and_merge_heads_are_inverse_and_contiguous() -> None:
    x, _ = _inputs()
    heads = ref.split_heads(x, H)
    assert heads.shape == (B, H, T, D // H)
    np.testing.assert_array_equal(heads[:, 1], x[..., D // H : 2 * D // H])  # head 1 = columns 4..7
    np.testing.assert_array_equal(ref.merge_heads(heads), x)


def test_causal_and_padding_masks() -> None:
    c = ref.causal_mask(4)
    np.testing.assert_array_equal(c, np.tril(np.ones((4, 4), bool)))
    # more keys than queries: the queries are the last positions
    np.testing.assert_array_equal(ref.causal_mask(2, 4), np.array([[1, 1, 1, 0], [1, 1, 1, 1]], bool))
    p = ref.padding_mask(np.array([3, 1]), 4)
    assert p.shape == (2, 1, 1, 4)
    np.testing.assert_array_equal(p[:, 0, 0], np.array([[1, 1, 1, 0], [1, 0, 0, 0]], bool))


def test_local_window_mask_by_hand() -> None:
    """Luong's local window: query t keeps the keys j with |j - p_t| <= D, nothing else."""
    # local-m, p_t = t, D = 1 on 4 keys: a band of width 3, cut at the edges
    band = ref.local_window_mask(np.arange(3), 4, 1)
    np.testing.assert_array_equal(band, np.array([[1, 1, 0, 0], [1, 1, 1, 0], [0, 1, 1, 1]], bool))
    # a fractional centre (local-p) keeps the integers within D of it: 2.5 +- 1 -> keys 2, 3
    per_example = ref.local_window_mask(np.array([[0.0, 2.5], [4.0, 4.0]]), 5, 1)
    assert per_example.shape == (2, 1, 2, 5), "a (B, Tq) centre array gives a mask broadcastable to (B, H, Tq, Tk)"
    np.testing.assert_array_equal(per_example[0, 0], np.array([[1, 1, 0, 0, 0], [0, 0, 1, 1, 0]], bool))
    np.testing.assert_array_equal(per_example[1, 0], np.array([[0, 0, 0, 1, 1]] * 2, bool))
    # D = 0 keeps exactly the centre; a window as wide as the keys keeps everything (global attention)
    np.testing.assert_array_equal(ref.local_window_mask(np.array([2, 0]), 3, 0), np.array([[0, 0, 1], [1, 0, 0]], bool))
    assert ref.local_window_mask(np.array([0, 6]), 7, 6).all()
    # it is a course keep-mask: softmax puts zero weight outside the window
    scores = np.random.default_rng(3).normal(size=(3, 4))
    w = ref.masked_softmax(scores, band)
    assert np.abs(w[~band]).max() == 0.0 and np.allclose(w.sum(-1), 1.0)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: ref.local_window_mask(np.array([0, 4]), 4, 1), "centers"),  # centre 4 is off keys 0..3
        (lambda: ref.local_window_mask(np.array([-1.0]), 4, 1), "centers"),
        (lambda: ref.local_window_mask(np.array([np.nan]), 4, 1), "centers"),
        (lambda: ref.local_window_mask(np.zeros((1, 1, 2)), 4, 1), "centers"),
        (lambda: ref.local_window_mask(np.array([0, 1]), 4, -1), "half_width"),
        (lambda: ref.local_window_mask(np.array([0, 1]), 4, 1.5), "half_width"),
        (lambda: ref.local_window_mask(np.array([0]), 0, 1), "num_keys"),
    ],
)
def test_local_window_mask_rejects_bad_input(call, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda w, x: ref.multi_head_attention(x, x, x, w["w_qkv"], w["b_qkv"], w["w_o"], w["b_o"], 3), "num_heads=3"),
        (lambda w, x: ref.multi_head_attention(x, x[:, :, :8], x, w["w_qkv"], w["b_qkv"], w["w_o"], w["b_o"], H), "keys"),
        (lambda w, x: ref.multi_head_attention(x, x, x, w["w_qkv"][:, :D], w["b_qkv"], w["w_o"], w["b_o"], H), "w_qkv"),
        (lambda w, x: ref.multi_head_attention(x, x, x, w["w_qkv"], w["b_qkv"], w["w_o"], w["b_o"], H, np.ones((T, T))), "mask"),
        (lambda w, x: ref.multi_head_attention(x, x, x, w["w_qkv"], w["b_qkv"], w["w_o"], w["b_o"], H, np.ones((5, T), bool)), "mask"),
        (lambda w, x: ref.padding_mask(np.array([9]), 4), "lengths"),
        (lambda w, x: ref.causal_mask(0), "num_queries"),
        (lambda w, x: ref.split_heads(x[0], H), "x"),
    ],
)
def test_bad_input_names_the_argument(call, message: str) -> None:
    x, _ = _inputs()
    with pytest.raises(ValueError, match=message):
        call(_weights(), x)


# ---------------------------------------------------------------- torch


@pytest.fixture(scope="module")
def torch_side():
    torch = pytest.importorskip("torch")
    from utils.attention import torch_impl

    return torch, torch_impl


def _torch_module(torch, TI, w, bias=True):
    m = TI.MultiHeadAttention(D, H, bias=bias).eval()
    with torch.no_grad():
        for name in ("w_qkv", "b_qkv", "w_o", "b_o"):
            if w[name] is not None:
                getattr(m, name).copy_(torch.tensor(w[name]))
    return m


@pytest.mark.parametrize("name", ["none", "padding", "causal", "padding+causal"])
def test_torch_equals_reference(torch_side, name: str) -> None:
    torch, TI = torch_side
    x, _ = _inputs()
    w = _weights()
    mask = _masks()[name]
    m = _torch_module(torch, TI, w)
    xt = torch.tensor(x)
    with torch.no_grad():
        out, weights = m(xt, xt, xt, None if mask is None else torch.tensor(mask))
        fout, _ = TI.multi_head_attention(xt, xt, xt, *(torch.tensor(w[n]) for n in ("w_qkv", "b_qkv", "w_o", "b_o")), H,
                                         None if mask is None else torch.tensor(mask))
    rout, rweights = ref.multi_head_attention(x, x, x, w["w_qkv"], w["b_qkv"], w["w_o"], w["b_o"], H, mask)
    np.testing.assert_allclose(out.numpy(), rout, atol=ATOL)
    np.testing.assert_allclose(weights.numpy(), rweights, atol=ATOL)
    np.testing.assert_allclose(fout.numpy(), rout, atol=ATOL)


@pytest.mark.parametrize("mode", ["q,k,v distinct", "k is v"])
def test_torch_cross_attention_paths(torch_side, mode: str) -> None:
    torch, TI = torch_side
    x, y = _inputs()
    w = _weights(bias=False)
    m = _torch_module(torch, TI, w, bias=False)
    v = y if mode == "k is v" else y * 0.5 + 1
    mask = ref.padding_mask(LENGTHS, S)
    with torch.no_grad():
        out, weights = m(torch.tensor(x), torch.tensor(y), torch.tensor(v), torch.tensor(mask))
    rout, rweights = _loop_reference(x, y, v, w, mask)
    np.testing.assert_allclose(out.numpy(), rout, atol=ATOL)
    np.testing.assert_allclose(weights.numpy(), rweights, atol=ATOL)


@pytest.mark.parametrize("name", ["none", "padding", "causal", "padding+causal"])
def test_torch_equals_nn_multiheadattention(torch_side, name: str) -> None:
    torch, TI = torch_side
    x, _ = _inputs()
    mask = _masks()[name]
    torch.manual_seed(0)
    ours = TI.MultiHeadAttention(D, H).eval()
    with torch.no_grad():
        ours.b_qkv.normal_()
        ours.b_o.normal_()
    lib = TI.to_library(ours).eval()
    xt = torch.tensor(x)
    kwargs = {} if mask is None else {"attn_mask": masks.to_torch_attn_mask(torch.tensor(mask), B, H, T, T)}
    with torch.no_grad():
        out, weights = ours(xt, xt, xt, None if mask is None else torch.tensor(mask))
        lout, lweights = lib(xt, xt, xt, average_attn_weights=False, **kwargs)
    np.testing.assert_allclose(out.numpy(), lout.numpy(), atol=ATOL)
    np.testing.assert_allclose(weights.numpy(), lweights.numpy(), atol=ATOL)
    assert np.abs(out.numpy()).max() > 0.1  # not a trivially zero output


def test_torch_key_padding_mask_cross_attention_and_round_trip(torch_side) -> None:
    torch, TI = torch_side
    x, y = _inputs()
    torch.manual_seed(1)
    lib = torch.nn.MultiheadAttention(D, H, batch_first=True).eval()
    with torch.no_grad():
        lib.in_proj_bias.normal_()
        lib.out_proj.bias.normal_()
    ours = TI.from_library(lib)
    keep = torch.tensor(ref.padding_mask(LENGTHS, S))
    xt, yt = torch.tensor(x), torch.tensor(y)
    with torch.no_grad():
        out, weights = ours(xt, yt, yt, keep)
        lout, lweights = lib(xt, yt, yt, key_padding_mask=masks.to_torch_key_padding_mask(keep), average_attn_weights=False)
    np.testing.assert_allclose(out.numpy(), lout.numpy(), atol=ATOL)
    np.testing.assert_allclose(weights.numpy(), lweights.numpy(), atol=ATOL)
    back = TI.to_library(ours)
    for a, b in zip(back.state_dict().values(), lib.state_dict().values()):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_torch_masks_match_the_library_conventions(torch_side) -> None:
    torch, TI = torch_side
    ours = TI.causal_mask(5)
    lib_float = torch.nn.Transformer.generate_square_subsequent_mask(5)  # 0 where allowed, -inf above the diagonal
    np.testing.assert_array_equal(masks.from_torch_attn_mask(lib_float, H).numpy(), ours.numpy())
    np.testing.assert_array_equal(masks.to_torch_attn_mask(ours, 1, H, 5, 5).numpy(), np.isinf(lib_float.numpy()))
    kpm = torch.tensor([[False, False, True], [False, True, True]])
    np.testing.assert_array_equal(masks.from_torch_key_padding_mask(kpm)[:, 0, 0].numpy(), ~kpm.numpy())
    np.testing.assert_array_equal(TI.padding_mask(torch.tensor([2, 1]), 3).numpy(), ref.padding_mask(np.array([2, 1]), 3))
    per_head = torch.rand(2, H, 3, 3) > 0.3
    np.testing.assert_array_equal(masks.from_torch_attn_mask(masks.to_torch_attn_mask(per_head, 2, H, 3, 3), H).numpy(),
                                  per_head.numpy())
    # the fused kernel uses the course's polarity: a causal keep-mask equals is_causal=True
    q = torch.randn(2, H, 5, 8)
    a = torch.nn.functional.scaled_dot_product_attention(q, q, q, attn_mask=masks.to_torch_sdpa_mask(ours))
    b = torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True)
    np.testing.assert_allclose(a.numpy(), b.numpy(), atol=ATOL)
    with pytest.raises(ValueError, match="mask"):
        masks.to_torch_attn_mask(ours.float(), 1, H, 5, 5)


def test_torch_causal_mask_hides_the_future(torch_side) -> None:
    torch, TI = torch_side
    torch.manual_seed(2)
    m = TI.MultiHeadAttention(D, H).eval()
    x = torch.randn(1, T, D)
    x2 = x.clone()
    x2[:, 4:] = torch.randn(1, T - 4, D)  # change only positions 4 and 5
    with torch.no_grad():
        a, _ = m(x, x, x, TI.causal_mask(T))
        b, _ = m(x2, x2, x2, TI.causal_mask(T))
        c, _ = m(x, x, x)
        d, _ = m(x2, x2, x2)
    np.testing.assert_allclose(a[:, :4].numpy(), b[:, :4].numpy(), atol=1e-6)
    assert (a[:, 4:] - b[:, 4:]).abs().max() > 1e-3
    assert (c[:, :4] - d[:, :4]).abs().max() > 1e-3  # without the mask the past does see the future


def test_torch_dropout_only_in_training(torch_side) -> None:
    torch, TI = torch_side
    m = TI.MultiHeadAttention(D, H, dropout=0.5)
    x = torch.randn(2, T, D)
    m.train()
    torch.manual_seed(0)
    a, wa = m(x, x, x)
    torch.manual_seed(1)
    b, _ = m(x, x, x)
    assert (a - b).abs().max() > 1e-4
    np.testing.assert_allclose(wa.sum(-1).detach().numpy(), 1.0, atol=1e-6)  # returned weights: before dropout
    m.eval()
    np.testing.assert_allclose(m(x, x, x)[0].detach().numpy(), m(x, x, x)[0].detach().numpy())
    with pytest.raises(ValueError, match="dropout"):
        TI.MultiHeadAttention(D, H, dropout=1.0)
    with pytest.raises(ValueError, match="num_heads"):
        TI.MultiHeadAttention(D, 5)


def test_torch_gradients_reach_every_weight(torch_side) -> None:
    torch, TI = torch_side
    m = TI.MultiHeadAttention(D, H)
    x = torch.randn(2, T, D)
    out, _ = m(x, x, x, TI.causal_mask(T))
    out.square().sum().backward()
    for name, p in m.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name


# ---------------------------------------------------------------- keras


@pytest.fixture(scope="module")
def keras_side():
    pytest.importorskip("tensorflow")
    import keras
    from keras import ops

    from utils.attention import keras_impl

    return keras, ops, keras_impl


def _keras_layer(K, w, bias=True):
    m = K.MultiHeadAttention(D, H, bias=bias)
    for name in ("w_qkv", "b_qkv", "w_o", "b_o"):
        if w[name] is not None:
            getattr(m, name).assign(w[name])
    return m


def test_keras_layers_built_at_construction_warn_nothing_in_a_model(keras_side) -> None:
    """Every course Keras layer whose weights exist after construction says it is built,
    so a model that holds one and reads its weights directly (lesson 4's rotary model)
    trains without Keras's "unbuilt state" warning on the student's screen."""
    import warnings

    keras, ops, K = keras_side
    from utils.memory import keras_impl as memory
    from utils.positional import keras_impl as positional
    from utils.transformer import keras_impl as transformer

    layers = [K.MultiHeadAttention(D, H), K.AdditiveAttention(D, D, 8), memory.MemN2N(10, 8, 4),
              positional.LearnedPositionalEmbedding(T, D), transformer.Linear(D, D),
              transformer.LayerNorm(D), transformer.Embedding(10, D)]
    assert [type(m).__name__ for m in layers if not m.built] == []

    class ReadsWeights(keras.Model):
        def __init__(self) -> None:
            super().__init__()
            self.attn = K.MultiHeadAttention(D, H)

        def call(self, x):
            return x @ self.attn.w_qkv  # uses the weights without calling the layer

    model = ReadsWeights()
    model.compile(optimizer="sgd", loss="mse")
    x = np.random.default_rng(0).normal(size=(2, D)).astype(np.float32)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.train_on_batch(x, np.zeros((2, 3 * D), np.float32))
    assert [str(w.message)[:120] for w in caught if "unbuilt state" in str(w.message)] == []


@pytest.mark.parametrize("name", ["none", "padding", "causal", "padding+causal"])
def test_keras_equals_reference(keras_side, name: str) -> None:
    keras, ops, K = keras_side
    x, _ = _inputs()
    w = _weights()
    mask = _masks()[name]
    m = _keras_layer(K, w)
    xt = ops.convert_to_tensor(x)
    out, weights = m(xt, xt, xt, mask=mask)
    fout, _ = K.multi_head_attention(xt, xt, xt, w["w_qkv"], w["b_qkv"], w["w_o"], w["b_o"], H, mask)
    rout, rweights = ref.multi_head_attention(x, x, x, w["w_qkv"], w["b_qkv"], w["w_o"], w["b_o"], H, mask)
    np.testing.assert_allclose(ops.convert_to_numpy(out), rout, atol=ATOL)
    np.testing.assert_allclose(ops.convert_to_numpy(weights), rweights, atol=ATOL)
    np.testing.assert_allclose(ops.convert_to_numpy(fout), rout, atol=ATOL)


@pytest.mark.parametrize("mode", ["q,k,v distinct", "k is v"])
def test_keras_cross_attention_paths(keras_side, mode: str) -> None:
    keras, ops, K = keras_side
    x, y = _inputs()
    w = _weights(bias=False)
    m = _keras_layer(K, w, bias=False)
    v = y if mode == "k is v" else y * 0.5 + 1
    mask = ref.padding_mask(LENGTHS, S)
    out, weights = m(x, y, v, mask=mask)
    rout, rweights = _loop_reference(x, y, v, w, mask)
    np.testing.assert_allclose(ops.convert_to_numpy(out), rout, atol=ATOL)
    np.testing.assert_allclose(ops.convert_to_numpy(weights), rweights, atol=ATOL)


@pytest.mark.parametrize("name", ["none", "padding", "causal", "padding+causal"])
def test_keras_equals_keras_multiheadattention(keras_side, name: str) -> None:
    keras, ops, K = keras_side
    x, _ = _inputs()
    mask = _masks()[name]
    keras.utils.set_random_seed(0)
    ours = K.MultiHeadAttention(D, H)
    ours.b_qkv.assign(np.random.default_rng(5).normal(size=3 * D))
    ours.b_o.assign(np.random.default_rng(6).normal(size=D))
    lib = K.to_library(ours)
    xt = ops.convert_to_tensor(x)
    kwargs = {} if mask is None else {"attention_mask": masks.to_keras_attention_mask(mask, B, T, T)}
    out, weights = ours(xt, xt, xt, mask=mask)
    lout, lweights = lib(xt, xt, xt, return_attention_scores=True, **kwargs)
    np.testing.assert_allclose(ops.convert_to_numpy(out), ops.convert_to_numpy(lout), atol=ATOL)
    np.testing.assert_allclose(ops.convert_to_numpy(weights), ops.convert_to_numpy(lweights), atol=ATOL)
    if name == "causal":  # Keras's own causal switch agrees with the course's causal mask
        lout2 = lib(xt, xt, xt, use_causal_mask=True)
        np.testing.assert_allclose(ops.convert_to_numpy(out), ops.convert_to_numpy(lout2), atol=ATOL)


def test_keras_cross_attention_library_and_round_trip(keras_side) -> None:
    keras, ops, K = keras_side
    x, y = _inputs()
    keras.utils.set_random_seed(1)
    lib = keras.layers.MultiHeadAttention(num_heads=H, key_dim=D // H)
    lib(x, y, y)  # builds the layer
    for dense in (lib.query_dense, lib.key_dense, lib.value_dense):
        dense.bias.assign(np.random.default_rng(7).normal(size=dense.bias.shape))
    ours = K.from_library(lib)
    keep = ref.padding_mask(LENGTHS, S)
    out, weights = ours(x, y, y, mask=keep)
    lout, lweights = lib(x, y, y, attention_mask=masks.to_keras_attention_mask(keep, B, T, S), return_attention_scores=True)
    np.testing.assert_allclose(ops.convert_to_numpy(out), ops.convert_to_numpy(lout), atol=ATOL)
    np.testing.assert_allclose(ops.convert_to_numpy(weights), ops.convert_to_numpy(lweights), atol=ATOL)
    back = K.to_library(ours)
    for a, b in zip(back.get_weights(), lib.get_weights()):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(ops.convert_to_numpy(masks.from_keras_attention_mask(masks.to_keras_attention_mask(keep, B, T, S)))[:, 0],
                                  np.broadcast_to(keep[:, 0], (B, T, S)))
    with pytest.raises(ValueError, match="mask"):
        masks.to_keras_attention_mask(np.ones((B, H, T, S), bool), B, T, S)  # per-head masks do not fit Keras


def test_keras_masks_and_checks(keras_side) -> None:
    keras, ops, K = keras_side
    np.testing.assert_array_equal(ops.convert_to_numpy(K.causal_mask(3, 5)), ref.causal_mask(3, 5))
    np.testing.assert_array_equal(ops.convert_to_numpy(K.padding_mask(np.array([2, 0]), 3)), ref.padding_mask(np.array([2, 0]), 3))
    x, _ = _inputs()
    np.testing.assert_array_equal(ops.convert_to_numpy(K.merge_heads(K.split_heads(x, H))), x)
    m = K.MultiHeadAttention(D, H)
    with pytest.raises(ValueError, match="keys"):
        m(x, x[:, :, :8], x)
    with pytest.raises(ValueError, match="num_heads"):
        K.MultiHeadAttention(D, 5)


def test_keras_dropout_only_in_training(keras_side) -> None:
    keras, ops, K = keras_side
    m = K.MultiHeadAttention(D, H, dropout=0.5)
    x, _ = _inputs()
    a, wa = m(x, x, x, training=True)
    b, _ = m(x, x, x, training=True)
    assert np.abs(ops.convert_to_numpy(a - b)).max() > 1e-4
    np.testing.assert_allclose(ops.convert_to_numpy(ops.sum(wa, -1)), 1.0, atol=1e-6)
    np.testing.assert_allclose(ops.convert_to_numpy(m(x, x, x)[0]), ops.convert_to_numpy(m(x, x, x)[0]))


# ---------------------------------------------------------------- torch == keras


def test_torch_and_keras_agree_with_copied_weights(torch_side, keras_side) -> None:
    torch, TI = torch_side
    keras, ops, K = keras_side
    x, y = _inputs()
    tm = TI.MultiHeadAttention(D, H).eval()
    km = K.MultiHeadAttention(D, H)
    with torch.no_grad():
        tm.b_qkv.normal_()
        tm.b_o.normal_()
    for name in ("w_qkv", "b_qkv", "w_o", "b_o"):
        getattr(km, name).assign(getattr(tm, name).detach().numpy())
    keep = ref.padding_mask(LENGTHS, S) & ref.causal_mask(T, S)
    with torch.no_grad():
        tout, tw = tm(torch.tensor(x), torch.tensor(y), torch.tensor(y), torch.tensor(keep))
    kout, kw = km(x, y, y, mask=keep)
    np.testing.assert_allclose(tout.numpy(), ops.convert_to_numpy(kout), atol=ATOL)
    np.testing.assert_allclose(tw.numpy(), ops.convert_to_numpy(kw), atol=ATOL)


@pytest.mark.parametrize("centers", [np.arange(4), np.array([[0.0, 1.5, 3.0, 6.0], [2.0, 2.0, 2.0, 2.0]])],
                         ids=["local-m (Tq,)", "local-p (B, Tq)"])
def test_local_window_mask_twins_equal_reference(torch_side, keras_side, centers) -> None:
    torch, TI = torch_side
    _, ops, K = keras_side
    expected = ref.local_window_mask(centers, 7, 2)
    np.testing.assert_array_equal(TI.local_window_mask(torch.tensor(centers), 7, 2).numpy(), expected)
    np.testing.assert_array_equal(ops.convert_to_numpy(K.local_window_mask(ops.convert_to_tensor(centers), 7, 2)),
                                  expected)
    for impl, c in ((TI, torch.tensor([0, 7])), (K, ops.convert_to_tensor([0, 7]))):
        with pytest.raises(ValueError, match="centers"):
            impl.local_window_mask(c, 7, 2)


# ---------------------------------------------------------------- benchmark


def test_attention_speed_benchmark_writes_its_json(tmp_path, torch_side, keras_side) -> None:
    """A tiny run of ``python -m benchmarks.attention_speed``: the JSON has the documented fields."""
    import json

    from benchmarks import attention_speed

    out = tmp_path / "speed.json"
    args = ["--seq-lens", "8", "16", "--batch", "2", "--width", "16", "--heads", "2", "--repeats", "1", "--json", str(out)]
    assert attention_speed.main(args) == 0
    rows = json.loads(out.read_text())["results"]
    assert [(r["framework"], r["seq_len"]) for r in rows] == [
        ("pytorch", 8), ("pytorch", 16), ("tensorflow", 8), ("tensorflow", 16)]
    for r in rows:
        assert r["course_seconds"] > 0 and r["library_seconds"] > 0
        assert r["ratio"] == pytest.approx(r["course_seconds"] / r["library_seconds"])
        assert r["max_abs_diff"] < 1e-4
    with pytest.raises(SystemExit):
        attention_speed.main(["--width", "10", "--heads", "3"])
