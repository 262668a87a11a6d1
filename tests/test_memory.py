"""MemN2N and the content-based read: NumPy reference, PyTorch and Keras twins.

Properties first (position encoding, masking, linear start, cosine addressing),
then number-for-number agreement of the three twins with copied weights, then a
short training run in each framework on simulated bAbI task 1.
"""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from utils.data import babi, babi_sim
from utils.memory import numpy_ref as ref
from utils.memory.training import TrainConfig, schedule

torch = pytest.importorskip("torch")
from utils.memory import torch_impl as pt  # noqa: E402

keras_impl = pytest.importorskip("utils.memory.keras_impl")
from keras import ops  # noqa: E402

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


def test_position_encoding_formula_and_word_order(rng: np.random.Generator) -> None:
    pe = ref.position_encoding(4, 5)
    assert pe.shape == (4, 5)
    for j, k in [(1, 1), (2, 5), (4, 3)]:
        expected = (1 - j / 4) - (k / 5) * (1 - 2 * j / 4)
        assert np.isclose(pe[j - 1, k - 1], expected), (j, k)
    emb = rng.normal(size=(6, 5)).astype(np.float32)
    a, b = np.array([[1, 2, 3, 0]]), np.array([[3, 2, 1, 0]])
    assert np.allclose(ref.embed_sentences(a, emb), ref.embed_sentences(b, emb)), "bag of words ignores order"
    assert not np.allclose(ref.embed_sentences(a, emb, pe), ref.embed_sentences(b, emb, pe)), "PE must see order"


def test_padding_contributes_nothing_even_with_a_nonzero_pad_embedding(rng: np.random.Generator) -> None:
    emb = rng.normal(size=(6, 4)).astype(np.float32)
    words = np.array([[2, 5, 0, 0]])
    assert np.allclose(ref.embed_sentences(words, emb), emb[2] + emb[5])


def test_memory_hop_is_attention_over_memories(rng: np.random.Generator) -> None:
    u = rng.normal(size=(2, 4))
    m, c = rng.normal(size=(2, 5, 4)), rng.normal(size=(2, 5, 4))
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
    assert np.allclose(attn.sum(-1), 1, atol=1e-5)
    # by hand: u^{k+1} = u^k + o^k with adjacent tying; an empty slot is the zero vector
    # (no temporal term) and keeps its place in the softmax with score 0
    pe = 2 * ref.position_encoding(5, 8)  # the authors' code weighs words by twice the paper's l_kj
    u = ref.embed_sentences(queries, E[0], pe)
    used = (stories != 0).any(-1)[..., None]  # (B, M, 1)
    for k in range(3):
        m = ref.embed_sentences(stories, E[k], pe) + T[k] * used
        c = ref.embed_sentences(stories, E[k + 1], pe) + T[k + 1] * used
        assert np.all(m[0, 4:] == 0) and np.all(c[0, 4:] == 0)
        o, p = ref.memory_hop(u, m, c)
        assert np.allclose(p, attn[:, k], atol=1e-6)
        assert np.allclose(p[0, 4:], 1 / np.exp(m[0] @ u[0]).sum(), atol=1e-6), "an empty slot scores exactly 0"
        u = u + o
    assert np.allclose(logits, u @ E[3].T, atol=1e-5)
    bow, _ = ref.memn2n_forward(stories, queries, E, None, position_encoding=False)
    assert not np.allclose(bow, logits)
    masked, m_attn = ref.memn2n_forward(stories, queries, E, T, mask_empty=True)
    assert np.allclose(m_attn.sum(-1), 1, atol=1e-5) and np.all(m_attn[0, :, 4:] == 0), "masked: no weight"
    assert not np.allclose(masked[0], logits[0]) and np.allclose(masked[1:], logits[1:], atol=1e-5), \
        "masking changes only the story with empty slots"



def test_memn2n_layerwise_is_adjacent_tying_for_one_hop_and_applies_h_between_hops() -> None:
    """Assignment 3's reference: with one hop, A = B and C = W it is adjacent tying's forward; with more,
    the same A and C at every hop and u^{k+1} = H u^k + o^k (H not symmetric, so H and H^T differ)."""
    stories, queries, E, T = _batch(K=1)
    one = {"A": E[0], "B": E[0], "C": E[1], "W": E[1], "H": np.eye(8, dtype=np.float32), "T_A": T[0], "T_C": T[1]}
    for linear in (False, True):
        want_logits, want_attn = ref.memn2n_forward(stories, queries, E, T, linear=linear)
        logits, attn = ref.memn2n_layerwise(stories, queries, one, 1, linear=linear)
        assert np.allclose(logits, want_logits, atol=1e-5) and np.allclose(attn, want_attn, atol=1e-6)
    rng = np.random.default_rng(3)
    w = {k: rng.normal(0, 0.3, (13, 8)) for k in "ABCW"} | {"H": rng.normal(0, 0.4, (8, 8)),
                                                          "T_A": rng.normal(0, 0.3, (6, 8)), "T_C": rng.normal(0, 0.3, (6, 8))}
    logits, attn = ref.memn2n_layerwise(stories, queries, w, 3)
    pe = ref.PE_SCALE * ref.position_encoding(5, 8)
    used = (stories != 0).any(-1)[..., None]
    m = ref.embed_sentences(stories, w["A"], pe) + w["T_A"] * used
    c = ref.embed_sentences(stories, w["C"], pe) + w["T_C"] * used
    u = ref.embed_sentences(queries, w["B"], pe)
    for k in range(3):
        o, p = ref.memory_hop(u, m, c)
        assert np.allclose(p, attn[:, k], atol=1e-6)
        u = np.einsum("ij,bj->bi", w["H"], u) + o  # H u^k + o^k
    assert np.allclose(logits, np.einsum("vd,bd->bv", w["W"], u), atol=1e-6)
    transposed, _ = ref.memn2n_layerwise(stories, queries, w | {"H": w["H"].T}, 3)
    assert not np.allclose(transposed, logits, atol=1e-3), "H and its transpose must give other answers"
    with pytest.raises(ValueError, match="weights"):
        ref.memn2n_layerwise(stories, queries, {k: v for k, v in w.items() if k != "H"}, 3)
    with pytest.raises(ValueError, match=r"weights\['T_C'\]"):
        ref.memn2n_layerwise(stories, queries, w | {"T_C": w["T_C"][:4]}, 3)
    with pytest.raises(ValueError, match="hops"):
        ref.memn2n_layerwise(stories, queries, w, 0)

def test_content_addressing_is_cosine_attention_with_a_key_strength(rng: np.random.Generator) -> None:
    memory = rng.normal(size=(2, 6, 4))
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


def test_ntm_addressing_interpolates_shifts_around_the_ring_and_sharpens() -> None:
    content, previous = np.array([[0.7, 0.2, 0.1, 0.0]]), np.array([[0.0, 0.0, 0.0, 1.0]])
    keep, one = np.array([[0.0, 1.0, 0.0]]), np.ones(1)
    assert np.allclose(ref.ntm_addressing(content, previous, np.array([0.25]), keep, one),
                       0.25 * content + 0.75 * previous), "the gate weighs the content weights"
    up, down = np.array([[0.0, 0.0, 1.0]]), np.array([[1.0, 0.0, 0.0]])
    assert np.allclose(ref.ntm_addressing(content, previous, one, up, one), [[0.0, 0.7, 0.2, 0.1]]), "+1: row i to i + 1"
    assert np.allclose(ref.ntm_addressing(content, previous, one, down, one), [[0.2, 0.1, 0.0, 0.7]]), "-1 wraps to the last row"
    sharp = ref.ntm_addressing(np.array([[0.6, 0.4]]), np.array([[0.5, 0.5]]), one, keep, np.array([2.0]))
    assert np.allclose(sharp, [[0.36 / 0.52, 0.16 / 0.52]]), "gamma = 2 squares, then renormalises"
    rng = np.random.default_rng(0)
    w = rng.dirichlet(np.ones(5), size=3)
    s = rng.dirichlet(np.ones(3), size=3)
    out = ref.ntm_addressing(w, w[::-1], rng.random(3), s, 1 + rng.random(3) * 3)
    assert out.shape == (3, 5) and np.allclose(out.sum(-1), 1.0)
    with pytest.raises(ValueError, match="shift"):
        ref.ntm_addressing(w, w, np.ones(3), np.ones((3, 2)), np.ones(3))


@pytest.mark.parametrize("impl", ["numpy", "torch", "keras"])
def test_bad_shapes_raise_value_errors_naming_the_argument(impl: str, rng: np.random.Generator) -> None:
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
    u, m = rng.normal(size=(2, 4)).astype(np.float32), rng.normal(size=(2, 5, 4)).astype(np.float32)
    with pytest.raises(ValueError, match=r"memory_in: expected \(B, M, D\) = \(2, M, 4\), got shape \(2, 5, 3\)"):
        mod.memory_hop(conv(u), conv(m[..., :3]), conv(m[..., :3]))
    with pytest.raises(ValueError, match="mask: expected a boolean keep-mask"):
        mod.memory_hop(conv(u), conv(m), conv(m), conv(np.ones((2, 5), dtype=np.float32)))
    with pytest.raises(ValueError, match=r"key: expected \(B, W\) = \(2, 4\)"):
        mod.content_read(conv(m), conv(u[:, :3]), 1.0)
    with pytest.raises(ValueError, match="encoding: expected"):
        mod.embed_sentences(conv(stories), conv(E[0]), conv(np.ones((2, 8), dtype=np.float32)))


@pytest.mark.parametrize("J, D", [(1, 1), (4, 5), (11, 20)])
def test_pe_factors_rebuild_the_scaled_position_encoding(J: int, D: int) -> None:
    a, b, c = ref.pe_factors(J, D)
    assert a.shape == b.shape == (J,) and c.shape == (D,)
    assert np.allclose(a[:, None] + c[None, :] * b[:, None], ref.PE_SCALE * ref.position_encoding(J, D), atol=1e-6)


@pytest.mark.parametrize("pe", [True, False])
def test_twins_embed_sentences_as_word_bags_like_the_weighted_sum(pe: bool, rng: np.random.Generator) -> None:
    """The twins' fast path (word bags times the tables) gives embed_sentences' vectors and gradients."""
    V, D, J = 9, 6, 5
    tables = rng.normal(size=(3, V, D)).astype(np.float32)  # (T, V, D)
    words = np.array([[[4, 4, 2, 0, 0], [7, 1, 4, 7, 3]], [[0, 0, 0, 0, 0], [8, 8, 8, 8, 8]]])  # repeats, padding, empty
    enc = ref.PE_SCALE * ref.position_encoding(J, D) if pe else None
    want = np.stack([ref.embed_sentences(words, t, enc) for t in tables])  # (T, 2, 2, D)
    got_k = ops.convert_to_numpy(keras_impl._embed_with_tables(ops.convert_to_tensor(words), ops.convert_to_tensor(tables), pe))
    t_tables = torch.tensor(tables, requires_grad=True)
    got_t = pt._embed_with_tables(torch.as_tensor(words), t_tables, pe)
    for name, got in (("torch", got_t.detach().numpy()), ("keras", got_k)):
        assert got.shape == want.shape and np.allclose(got, want, atol=1e-5), f"{name}: max diff {np.abs(got - want).max():.2e}"
    weights = torch.as_tensor(rng.normal(size=want.shape).astype(np.float32))
    (got_t * weights).sum().backward()
    slow = torch.tensor(tables, requires_grad=True)
    t_enc = None if enc is None else torch.as_tensor(enc)
    (torch.stack([pt.embed_sentences(torch.as_tensor(words), slow[i], t_enc) for i in range(3)]) * weights).sum().backward()
    assert np.allclose(t_tables.grad.numpy(), slow.grad.numpy(), atol=1e-5), "gradients of the word-bag path differ"
    assert np.all(t_tables.grad.numpy()[:, [5, 6]] == 0), "words in no sentence get no gradient"


# ----------------------------------------------------------------------------- twins agree


@pytest.mark.parametrize("pe, use_t, linear, mask_empty", [
    (True, True, False, False), (False, True, False, False), (True, False, True, False),
    (True, True, False, True), (True, True, True, True)])
def test_three_twins_give_the_same_forward_pass(pe: bool, use_t: bool, linear: bool, mask_empty: bool) -> None:
    stories, queries, E, T = _batch(seed=1)
    T = T if use_t else None
    want_logits, want_attn = ref.memn2n_forward(stories, queries, E, T, pe, linear, mask_empty)
    t_logits, t_attn = pt.memn2n_forward(
        torch.as_tensor(stories), torch.as_tensor(queries), torch.as_tensor(E),
        None if T is None else torch.as_tensor(T), pe, linear, mask_empty)
    k_logits, k_attn = keras_impl.memn2n_forward(stories, queries, ops.convert_to_tensor(E),
                                                 None if T is None else ops.convert_to_tensor(T), pe, linear,
                                                 mask_empty)
    for name, got, want in [("torch logits", t_logits, want_logits), ("torch attention", t_attn, want_attn),
                            ("keras logits", k_logits, want_logits), ("keras attention", k_attn, want_attn)]:
        got = got.detach().numpy() if hasattr(got, "detach") else ops.convert_to_numpy(got)
        assert np.allclose(got, want, atol=1e-5, rtol=1e-5), f"{name}: max diff {np.abs(got - want).max():.2e}"


def test_content_read_twins_agree(rng: np.random.Generator) -> None:
    memory = rng.normal(size=(3, 7, 5)).astype(np.float32)
    key = rng.normal(size=(3, 5)).astype(np.float32)
    beta = np.array([0.5, 2.0, 10.0], dtype=np.float32)
    want_r, want_w = ref.content_read(memory, key, beta)
    tr, tw = pt.content_read(torch.as_tensor(memory), torch.as_tensor(key), torch.as_tensor(beta))
    kr, kw = keras_impl.content_read(memory, key, beta)
    assert np.allclose(tr.numpy(), want_r, atol=1e-5) and np.allclose(tw.numpy(), want_w, atol=1e-5)
    assert np.allclose(ops.convert_to_numpy(kr), want_r, atol=1e-5)
    assert np.allclose(ops.convert_to_numpy(kw), want_w, atol=1e-5)


def test_ntm_addressing_twins_agree(rng: np.random.Generator) -> None:
    content, previous = rng.dirichlet(np.ones(6), size=3), rng.dirichlet(np.ones(6), size=3)
    gate, shift, gamma = rng.random(3), rng.dirichlet(np.ones(3), size=3), 1 + 3 * rng.random(3)
    expected = ref.ntm_addressing(content, previous, gate, shift, gamma)
    for impl, to in ((pt, lambda a: torch.tensor(a, dtype=torch.float32)),
                     (keras_impl, lambda a: ops.convert_to_tensor(a.astype("float32")))):
        got = impl.ntm_addressing(*(to(a) for a in (content, previous, gate, shift, gamma)))
        assert np.allclose(np.asarray(got), expected, atol=1e-5), impl.__name__


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
    # a shorter story array is padded to the memory: the extra slots are empty and take weight
    for model, conv in ((t_model, torch.as_tensor), (k_model, lambda x: x)):
        short_logits, short_attn = model(conv(stories[:, :4]), conv(queries))
        short_attn = short_attn.detach().numpy() if hasattr(short_attn, "detach") else ops.convert_to_numpy(short_attn)
        short_logits = (short_logits.detach().numpy() if hasattr(short_logits, "detach")
                        else ops.convert_to_numpy(short_logits))
        padded = stories.copy()
        padded[:, 4:] = 0
        want_logits, want_attn = ref.memn2n_forward(padded, queries, t_model.embeddings.detach().numpy(),
                                                    t_model.temporal.detach().numpy())
        assert short_attn.shape == (4, 2, 6) and np.all(short_attn[:, :, 4:] > 0)
        assert np.allclose(short_logits, want_logits, atol=1e-5) and np.allclose(short_attn, want_attn, atol=1e-5)
    with pytest.raises(ValueError, match="hops: expected a positive int"):
        pt.MemN2N(13, 8, 6, hops=0)
    with pytest.raises(ValueError, match="hops: expected a positive int"):
        keras_impl.MemN2N(13, 8, 6, hops=0)
    with pytest.raises(ValueError, match="stories: expected"):
        t_model(torch.zeros((1, 9, 5), dtype=torch.int64), torch.ones((1, 5), dtype=torch.int64))


# ----------------------------------------------------------------------------- training


def test_schedule_runs_the_linear_start_then_halves_the_rate() -> None:
    plan = schedule(TrainConfig(epochs=7, linear_epochs=3, lr=0.04, linear_lr=0.01, anneal_every=3))
    assert [linear for linear, _ in plan] == [True] * 3 + [False] * 7
    assert [lr for _, lr in plan] == [0.01] * 3 + [0.04] * 3 + [0.02] * 3 + [0.01], "halved every 3 softmax epochs"
    assert all(not linear for linear, _ in schedule(TrainConfig(epochs=4, linear_start=False)))
    assert len(schedule(TrainConfig(epochs=4, linear_start=False))) == 4
    with pytest.raises(ValueError, match="config.optimizer"):
        schedule(TrainConfig(optimizer="rmsprop"))
    with pytest.raises(ValueError, match="config.epochs"):
        schedule(TrainConfig(epochs=0))


@pytest.fixture(scope="module")
def task1(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, int]:
    folder = babi_sim.write_simulated(tmp_path_factory.mktemp("babi"), tasks=[1], n_train=1000, n_test=200)
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
    cfg = TrainConfig(epochs=9, linear_epochs=1, lr=0.02, linear_lr=0.02, time_noise=0.05, seed=0)
    if framework == "torch":
        torch.manual_seed(0)
        model, impl = pt.MemN2N(V, 20, 20, hops=2), pt
    else:
        import keras

        keras.utils.set_random_seed(0)
        model, impl = keras_impl.MemN2N(V, 20, 20, hops=2), keras_impl
    history = impl.train_memn2n(model, arrays["train"], arrays["valid"], cfg)
    assert len(history["valid error"]) == 10 and history["linear"][0] and not history["linear"][-1]
    assert history["loss"][-1] < history["loss"][0] * 0.5, history["loss"]
    pred, attn = impl.predict_memn2n(model, arrays["test"])
    error = float(np.mean(pred != arrays["test"]["answers"]))
    # Behaviour, not a quality bar: far better than guessing one of the six places (error 5/6).
    # How well MemN2N does is measured on the real bAbI tasks by benchmarks/memn2n.py.
    assert error < 0.5, f"{framework}: test error {error:.2f} on simulated task 1 after 10 epochs (chance: 0.83)"
    sup = arrays["test"]["supporting"][:, : attn.shape[2]]
    mass = (attn[:, 0] * sup).sum(-1).mean()
    assert mass > 0.5, f"{framework}: the first hop should attend to the supporting fact, got mass {mass:.2f}"


def test_training_twins_take_the_same_steps() -> None:
    """Same weights, same batches: one linear and one softmax epoch of SGD give the same weights.

    Checks what the forward-pass test cannot: the summed loss, the linear start, the
    learning rates and the gradient clipping (each weight tensor on its own) agree.
    """
    stories = np.random.default_rng(3).integers(1, 13, size=(64, 6, 5))
    stories[:, 4:] = 0  # every story has empty slots
    data = {"stories": stories, "queries": np.random.default_rng(4).integers(1, 13, size=(64, 5)),
            "answers": np.random.default_rng(5).integers(1, 13, size=(64,))}
    cfg = TrainConfig(epochs=1, linear_epochs=1, lr=0.05, linear_lr=0.05, clip_norm=1.0, time_noise=0.0, seed=0)
    torch.manual_seed(0)
    t_model, k_model = pt.MemN2N(13, 8, 6, hops=2), keras_impl.MemN2N(13, 8, 6, hops=2)
    start = [t_model.embeddings.detach().numpy().copy(), t_model.temporal.detach().numpy().copy()]
    k_model.embeddings.assign(start[0])
    k_model.temporal.assign(start[1])
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        pt.train_memn2n(t_model, data, data, cfg)
    finally:
        torch.set_num_threads(threads)
    keras_impl.train_memn2n(k_model, data, data, cfg)
    for name, t_w, k_w, w0 in (("embeddings", t_model.embeddings, k_model.embeddings, start[0]),
                               ("temporal", t_model.temporal, k_model.temporal, start[1])):
        t_w, k_w = t_w.detach().numpy(), ops.convert_to_numpy(k_w)
        assert np.abs(t_w - w0).max() > 1e-3, f"{name}: training did not move the weights"
        diff = np.abs(t_w - k_w).max()
        assert diff < 1e-5, f"{name}: torch and keras differ by {diff:.2e} after the same steps"


def test_memn2n_seed_gives_both_twins_the_same_start_and_the_same_losses_step_by_step() -> None:
    """A seed draws the start weights from NumPy: the twins then train the same run, time noise included."""
    t_model, k_model = pt.MemN2N(13, 8, 6, hops=2, seed=7), keras_impl.MemN2N(13, 8, 6, hops=2, seed=7)
    np.testing.assert_array_equal(t_model.embeddings.detach().numpy(), ops.convert_to_numpy(k_model.embeddings))
    np.testing.assert_array_equal(t_model.temporal.detach().numpy(), ops.convert_to_numpy(k_model.temporal))
    other = pt.MemN2N(13, 8, 6, hops=2, seed=8)
    assert not np.allclose(other.embeddings.detach().numpy(), t_model.embeddings.detach().numpy())
    assert 0.08 < float(t_model.embeddings.detach().std()) < 0.12, "drawn from N(0, 0.1^2)"
    assert pt.MemN2N(13, 8, 6, hops=2, temporal_encoding=False, seed=7).temporal is None
    with pytest.raises(ValueError, match="seed"):
        pt.MemN2N(13, 8, 6, seed=-1)
    stories = np.random.default_rng(3).integers(1, 13, size=(64, 6, 5))
    stories[:, 4:] = 0
    data = {"stories": stories, "queries": np.random.default_rng(4).integers(1, 13, size=(64, 5)),
            "answers": np.random.default_rng(5).integers(1, 13, size=(64,))}
    cfg = TrainConfig(epochs=2, linear_epochs=1, lr=0.01, linear_lr=0.01, time_noise=0.1, seed=0)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        t_hist = pt.train_memn2n(t_model, data, data, cfg)
    finally:
        torch.set_num_threads(threads)
    k_hist = keras_impl.train_memn2n(k_model, data, data, cfg)
    assert len(t_hist["batch_loss"]) == len(k_hist["batch_loss"]) == 3 * 2
    np.testing.assert_allclose(t_hist["batch_loss"], k_hist["batch_loss"], rtol=1e-4)
    assert len(set(np.round(t_hist["batch_loss"], 4))) > 1, "the losses move from step to step"


def test_memn2n_benchmark_runs_keeps_the_lowest_validation_error_and_resumes(tmp_path, monkeypatch) -> None:
    """benchmarks/memn2n.py end to end on simulated task 1 (a smoke test, not a quality bar)."""
    from benchmarks import memn2n as bench

    folder = babi_sim.write_simulated(tmp_path / "babi", tasks=(1,), n_train=200, n_test=100, seed=0)
    # The benchmark's own clocks, faked: each reading is half a second after the last, so the
    # recorded seconds are exact on any machine (a real smoke run can round to 0.0).
    clock = {"perf": 0.0, "cpu": 0.0}

    def tick(name: str) -> float:
        clock[name] += 0.5
        return clock[name]

    monkeypatch.setattr(bench, "time", SimpleNamespace(perf_counter=lambda: tick("perf"),
                                                       process_time=lambda: tick("cpu")))
    out = tmp_path / "memn2n_pytorch.json"
    common = ["--framework", "pytorch", "--babi-dir", str(folder), "--tasks", "1", "--json", str(out),
              "--linear-epochs", "1", "--embed-dim", "8", "--memory-size", "10"]
    first = bench.main(common + ["--runs", "2", "--epochs", "1"])
    runs = first["tasks"]["1"]["runs"]
    assert [r["seed"] for r in runs] == [0, 1] or runs[0]["valid_error"] == 0, runs
    kept = min(runs, key=lambda r: (r["valid_error"], r["seed"]))
    assert first["tasks"]["1"]["test_error"] == kept["test_error"] and first["mean_error"] == kept["test_error"]
    assert first["tasks"]["1"]["cpu_seconds"] == 0.5 and first["cpu_seconds"] == 0.5 and out.exists()
    # a task ends at a run with 0% validation error: no later run could be kept
    assert bench.solved([{"valid_error": 3.0}, {"valid_error": 0.0}]) and not bench.solved([{"valid_error": 0.5}])
    with pytest.raises(SystemExit, match="other settings"):
        bench.main(common + ["--runs", "3", "--epochs", "2", "--resume"])  # not the recorded settings
    again = bench.main(common + ["--runs", "3", "--epochs", "1", "--resume"])
    n_runs = len(again["tasks"]["1"]["runs"])
    assert n_runs == (len(runs) if bench.solved(runs) else 3), again["tasks"]["1"]["runs"]
    # the seconds add up over the resumed runs (a solved task is not run again)
    assert again["tasks"]["1"]["cpu_seconds"] == (0.5 if bench.solved(runs) else 1.0), again["tasks"]["1"]
    assert [r["seed"] for r in again["tasks"]["1"]["runs"]][: len(runs)] == [r["seed"] for r in runs]  # kept
    by_train = bench.keep(again["tasks"]["1"]["runs"], "train_error")["test_error"]
    assert again["kept_by_train_error"] == {"mean_error": by_train, "failed_tasks": int(by_train > 5.0)}
    monkeypatch.setattr(bench, "RESULTS", tmp_path)
    table = bench.write_table(tmp_path / "table.md")
    assert "| 1 | 0.0 | " in table and "| **runs per task** | 10 |" in table
    assert f"| mean error, run kept by training error | 13.9 | {by_train:.1f} |" in table


def test_memn2n_benchmark_keeps_by_validation_or_by_training_error() -> None:
    from benchmarks import memn2n as bench

    runs = [{"seed": 0, "valid_error": 4.0, "train_error": 0.5, "test_error": 9.0},
            {"seed": 1, "valid_error": 2.0, "train_error": 3.0, "test_error": 6.0},
            {"seed": 2, "valid_error": 2.0, "train_error": 0.5, "test_error": 1.0}]
    assert bench.keep(runs)["seed"] == 1  # the lowest validation error, the earlier seed of a tie
    assert bench.keep(runs, "train_error")["seed"] == 0  # the paper's rule
    with pytest.raises(ValueError, match="train_error"):
        bench.keep(runs, "test_error")
