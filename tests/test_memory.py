"""MemN2N and the content-based read: NumPy reference, PyTorch and Keras twins.

Properties first (position encoding, masking, linear start, cosine addressing),
then number-for-number agreement of the three twins with copied weights, then a
short training run in each framework on simulated bAbI task 1.
"""
from __future__ import annotations

import numpy as np
import pytest

from utils.data import babi
from utils.memory import numpy_ref as ref
from utils.memory._training import TrainConfig, switch_off_linear

torch = pytest.importorskip("torch")
from utils.memory import torch_impl as pt  # noqa: E402

keras_impl = pytest.importorskip("utils.memory.keras_impl")
from keras import ops  # noqa: E402

RNG = np.random.default_rng(0)


def _batch(B: int = 3, M: int = 6, J: int = 5, V: int = 13, K: int = 3, D: int = 8, seed: int = 0):
    rng = np.random.default_rng(seed)
    stories = rng.integers(1, V, size=(B, M, J))
    stories[:, :, J - 1] = 0  # padding at the end of every sentence
    stories[0, 4:] = 0  # a short story: empty slots
    queries = rng.integers(1, V, size=(B, J))
    queries[:, -2:] = 0
    embeddings = rng.normal(0, 0.3, size=(K + 1, V, D)).astype(np.float32)
    temporal = rng.normal(0, 0.3, size=(K + 1, M, D)).astype(np.float32)
    return stories.astype(np.int64), queries.astype(np.int64), embeddings, temporal


# ----------------------------------------------------------------------------- reference properties


def test_position_encoding_formula_and_word_order() -> None:
    pe = ref.position_encoding(4, 5)
    assert pe.shape == (4, 5)
    for j, k in [(1, 1), (2, 5), (4, 3)]:
        expected = (1 - j / 4) - (k / 5) * (1 - 2 * j / 4)
        assert np.isclose(pe[j - 1, k - 1], expected), (j, k)
    emb = RNG.normal(size=(6, 5)).astype(np.float32)
    a, b = np.array([[1, 2, 3, 0]]), np.array([[3, 2, 1, 0]])
    assert np.allclose(ref.embed_sentences(a, emb), ref.embed_sentences(b, emb)), "bag of words ignores order"
    assert not np.allclose(ref.embed_sentences(a, emb, pe), ref.embed_sentences(b, emb, pe)), "PE must see order"


def test_padding_contributes_nothing_even_with_a_nonzero_pad_embedding() -> None:
    emb = RNG.normal(size=(6, 4)).astype(np.float32)
    words = np.array([[2, 5, 0, 0]])
    assert np.allclose(ref.embed_sentences(words, emb), emb[2] + emb[5])


def test_memory_hop_is_attention_over_memories() -> None:
    u = RNG.normal(size=(2, 4))
    m, c = RNG.normal(size=(2, 5, 4)), RNG.normal(size=(2, 5, 4))
    mask = np.array([[True] * 5, [True, True, False, True, False]])
    o, p = ref.memory_hop(u, m, c, mask)
    assert np.allclose(p.sum(-1), 1) and np.all(p[1, [2, 4]] == 0)
    assert np.allclose(o, np.einsum("bm,bmd->bd", p, c))
    scores = np.einsum("bmd,bd->bm", m, u)
    assert np.allclose(p[0], np.exp(scores[0]) / np.exp(scores[0]).sum())
    o_lin, p_lin = ref.memory_hop(u, m, c, mask, linear=True)  # linear start: no softmax
    assert np.allclose(p_lin, np.where(mask, scores, 0)) and np.allclose(o_lin, np.einsum("bm,bmd->bd", p_lin, c))


def test_memn2n_forward_follows_the_hop_equations() -> None:
    stories, queries, E, T = _batch()
    logits, attn = ref.memn2n_forward(stories, queries, E, T)
    assert logits.shape == (3, 13) and attn.shape == (3, 3, 6)
    assert np.allclose(attn.sum(-1), 1, atol=1e-5) and np.all(attn[0, :, 4:] == 0), "empty slots get no weight"
    # by hand: u^{k+1} = u^k + o^k with adjacent tying
    pe = ref.position_encoding(5, 8)
    u = ref.embed_sentences(queries, E[0], pe)
    mask = (stories != 0).any(-1)
    for k in range(3):
        m = ref.embed_sentences(stories, E[k], pe) + T[k]
        c = ref.embed_sentences(stories, E[k + 1], pe) + T[k + 1]
        o, p = ref.memory_hop(u, m, c, mask)
        assert np.allclose(p, attn[:, k], atol=1e-6)
        u = u + o
    assert np.allclose(logits, u @ E[3].T, atol=1e-5)
    bow, _ = ref.memn2n_forward(stories, queries, E, None, position_encoding=False)
    assert not np.allclose(bow, logits)


def test_content_addressing_is_cosine_attention_with_a_key_strength() -> None:
    memory = RNG.normal(size=(2, 6, 4))
    key = memory[:, 2] * 3.0 + 0.01  # points (almost) at row 2, at another scale
    w0 = ref.content_addressing(memory, key, 0.0)
    assert np.allclose(w0, 1 / 6), "strength 0 reads uniformly"
    w = ref.content_addressing(memory, key, 50.0)
    assert np.all(w.argmax(-1) == 2) and np.all(w[:, 2] > 0.9), "a strong key picks the most similar row"
    assert np.allclose(ref.content_addressing(memory, key * 10, 5.0), ref.content_addressing(memory, key, 5.0)), \
        "cosine similarity ignores the key's length"
    cos = np.einsum("bnw,bw->bn", memory, key) / (
        np.linalg.norm(memory, axis=-1) * np.linalg.norm(key, axis=-1)[:, None])
    beta = np.array([1.0, 4.0])
    expected = np.exp(beta[:, None] * cos) / np.exp(beta[:, None] * cos).sum(-1, keepdims=True)
    assert np.allclose(ref.content_addressing(memory, key, beta), expected)
    read, weights = ref.content_read(memory, key, beta)
    assert np.allclose(read, np.einsum("bn,bnw->bw", weights, memory))


@pytest.mark.parametrize("impl", ["numpy", "torch", "keras"])
def test_bad_shapes_raise_value_errors_naming_the_argument(impl: str) -> None:
    mod = {"numpy": ref, "torch": pt, "keras": keras_impl}[impl]
    conv = (lambda x: x) if impl == "numpy" else (torch.as_tensor if impl == "torch" else ops.convert_to_tensor)
    stories, queries, E, T = _batch()
    with pytest.raises(ValueError, match=r"queries: expected \(B, J\) with B=3"):
        mod.memn2n_forward(conv(stories), conv(queries[:2]), conv(E), conv(T))
    with pytest.raises(ValueError, match=r"embeddings: expected \(K\+1, V, D\)"):
        mod.memn2n_forward(conv(stories), conv(queries), conv(E[0]), conv(T))
    with pytest.raises(ValueError, match=r"temporal: expected \(K\+1, M, D\)"):
        mod.memn2n_forward(conv(stories), conv(queries), conv(E), conv(T[:, :2]))
    with pytest.raises(ValueError, match="stories: expected integer word ids"):
        mod.memn2n_forward(conv(stories.astype(np.float32)), conv(queries), conv(E), conv(T))
    u, m = RNG.normal(size=(2, 4)).astype(np.float32), RNG.normal(size=(2, 5, 4)).astype(np.float32)
    with pytest.raises(ValueError, match=r"memory_in: expected \(B, M, D\) = \(2, M, 4\), got shape \(2, 5, 3\)"):
        mod.memory_hop(conv(u), conv(m[..., :3]), conv(m[..., :3]))
    with pytest.raises(ValueError, match="mask: expected a boolean keep-mask"):
        mod.memory_hop(conv(u), conv(m), conv(m), conv(np.ones((2, 5), dtype=np.float32)))
    with pytest.raises(ValueError, match=r"key: expected \(B, W\) = \(2, 4\)"):
        mod.content_read(conv(m), conv(u[:, :3]), 1.0)
    with pytest.raises(ValueError, match="encoding: expected"):
        mod.embed_sentences(conv(stories), conv(E[0]), conv(np.ones((2, 8), dtype=np.float32)))


# ----------------------------------------------------------------------------- twins agree


@pytest.mark.parametrize("pe, use_t, linear", [(True, True, False), (False, True, False), (True, False, True)])
def test_three_twins_give_the_same_forward_pass(pe: bool, use_t: bool, linear: bool) -> None:
    stories, queries, E, T = _batch(seed=1)
    T = T if use_t else None
    want_logits, want_attn = ref.memn2n_forward(stories, queries, E, T, pe, linear)
    t_logits, t_attn = pt.memn2n_forward(
        torch.as_tensor(stories), torch.as_tensor(queries), torch.as_tensor(E),
        None if T is None else torch.as_tensor(T), pe, linear)
    k_logits, k_attn = keras_impl.memn2n_forward(stories, queries, ops.convert_to_tensor(E),
                                                 None if T is None else ops.convert_to_tensor(T), pe, linear)
    for name, got, want in [("torch logits", t_logits, want_logits), ("torch attention", t_attn, want_attn),
                            ("keras logits", k_logits, want_logits), ("keras attention", k_attn, want_attn)]:
        got = got.detach().numpy() if hasattr(got, "detach") else ops.convert_to_numpy(got)
        assert np.allclose(got, want, atol=1e-5, rtol=1e-5), f"{name}: max diff {np.abs(got - want).max():.2e}"


def test_content_read_twins_agree() -> None:
    memory = RNG.normal(size=(3, 7, 5)).astype(np.float32)
    key = RNG.normal(size=(3, 5)).astype(np.float32)
    beta = np.array([0.5, 2.0, 10.0], dtype=np.float32)
    want_r, want_w = ref.content_read(memory, key, beta)
    tr, tw = pt.content_read(torch.as_tensor(memory), torch.as_tensor(key), torch.as_tensor(beta))
    kr, kw = keras_impl.content_read(memory, key, beta)
    assert np.allclose(tr.numpy(), want_r, atol=1e-5) and np.allclose(tw.numpy(), want_w, atol=1e-5)
    assert np.allclose(ops.convert_to_numpy(kr), want_r, atol=1e-5)
    assert np.allclose(ops.convert_to_numpy(kw), want_w, atol=1e-5)


def test_memn2n_modules_match_with_copied_weights() -> None:
    stories, queries, _, _ = _batch(B=4, M=6, V=13, K=2, D=8, seed=2)
    torch.manual_seed(0)
    t_model = pt.MemN2N(13, 8, 6, hops=2)
    k_model = keras_impl.MemN2N(13, 8, 6, hops=2)
    assert tuple(t_model.embeddings.shape) == tuple(k_model.embeddings.shape) == (3, 13, 8)
    k_model.embeddings.assign(t_model.embeddings.detach().numpy())
    k_model.temporal.assign(t_model.temporal.detach().numpy())
    t_logits, t_attn = t_model(torch.as_tensor(stories), torch.as_tensor(queries))
    k_logits, k_attn = k_model(stories, queries)
    diff = np.abs(t_logits.detach().numpy() - ops.convert_to_numpy(k_logits)).max()
    assert diff < 1e-5, f"logits differ by {diff:.2e}"
    assert np.allclose(t_attn.detach().numpy(), ops.convert_to_numpy(k_attn), atol=1e-5)
    with pytest.raises(ValueError, match="hops: expected a positive int"):
        pt.MemN2N(13, 8, 6, hops=0)
    with pytest.raises(ValueError, match="hops: expected a positive int"):
        keras_impl.MemN2N(13, 8, 6, hops=0)
    with pytest.raises(ValueError, match="stories: expected"):
        t_model(torch.zeros((1, 9, 5), dtype=torch.int64), torch.ones((1, 5), dtype=torch.int64))


# ----------------------------------------------------------------------------- training


def test_linear_start_ends_when_validation_loss_stops_falling() -> None:
    cfg = TrainConfig(linear_patience=2, max_linear_epochs=10)
    h = {"linear": [True] * 3, "valid loss": [2.0, 1.5, 1.4]}
    assert not switch_off_linear(h, cfg)
    h = {"linear": [True] * 4, "valid loss": [2.0, 1.5, 1.6, 1.7]}
    assert switch_off_linear(h, cfg)
    h = {"linear": [True] * 10, "valid loss": list(np.linspace(2, 1, 10))}
    assert switch_off_linear(h, cfg), "the linear phase is capped at max_linear_epochs"


@pytest.fixture(scope="module")
def task1(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, int]:
    folder = babi.write_simulated(tmp_path_factory.mktemp("babi"), tasks=[1], n_train=1000, n_test=200)
    data = babi.load_task(folder, 1)
    vocab = babi.build_vocab(*data.values())
    J = max(len(s) for split in data.values() for ex in split for s in (*ex.story, ex.question))
    return {k: babi.vectorize(v, vocab, 20, J) for k, v in data.items()}, len(vocab)


@pytest.mark.parametrize("framework", ["torch", "keras"])
def test_training_learns_simulated_task_1(task1: tuple[dict, int], framework: str) -> None:
    arrays, V = task1
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny batches: extra threads only add overhead (70 s instead of 3 s when shared)
    try:
        _train_and_check(arrays, V, framework)
    finally:
        torch.set_num_threads(threads)


def _train_and_check(arrays: dict, V: int, framework: str) -> None:
    # a fast schedule: one linear-start epoch, little time noise, a higher rate
    cfg = TrainConfig(epochs=10, lr=0.02, linear_lr=0.02, max_linear_epochs=1, time_noise=0.05, seed=0)
    if framework == "torch":
        torch.manual_seed(0)
        model, impl = pt.MemN2N(V, 20, 20, hops=2), pt
    else:
        import keras

        keras.utils.set_random_seed(0)
        model, impl = keras_impl.MemN2N(V, 20, 20, hops=2), keras_impl
    history = impl.train_memn2n(model, arrays["train"], arrays["valid"], cfg)
    assert len(history["valid error"]) == 10 and history["linear"][0] and not history["linear"][-1]
    assert history["train loss"][-1] < history["train loss"][0] * 0.5, history["train loss"]
    pred, attn = impl.predict_memn2n(model, arrays["test"])
    error = float(np.mean(pred != arrays["test"]["answers"]))
    assert error < 0.15, f"{framework}: test error {error:.2f} on simulated task 1 after 10 epochs"
    sup = arrays["test"]["supporting"][:, : attn.shape[2]]
    mass = (attn[:, 0] * sup).sum(-1).mean()
    assert mass > 0.5, f"{framework}: the first hop should attend to the supporting fact, got mass {mass:.2f}"
