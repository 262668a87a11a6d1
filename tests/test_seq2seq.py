"""utils.seq2seq: the two twins agree number for number, attention behaves, errors are clear."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from utils.attention import numpy_ref
from utils.seq2seq import keras_impl as K
from utils.seq2seq import metrics
from utils.seq2seq import torch_impl as T

torch.set_num_threads(1)


def _gru_to_keras(cell, w_ih, w_hh, b_ih, b_hh) -> None:
    """torch GRU weights (gates r, z, n as rows) into a Keras GRUCell (gates z, r, h as columns)."""
    def reorder(a: np.ndarray) -> np.ndarray:
        r, z, n = np.split(a, 3, axis=0)
        return np.concatenate([z, r, n], axis=0)

    cell.kernel.assign(reorder(w_ih).T)
    cell.recurrent_kernel.assign(reorder(w_hh).T)
    cell.bias.assign(np.stack([reorder(b_ih), reorder(b_hh)]))


def copy_torch_to_keras(tm: T.Seq2Seq, km: K.Seq2Seq) -> None:
    p = {k: v.detach().numpy() for k, v in tm.state_dict().items()}
    gru = ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
    km.encoder.embedding.embeddings.assign(p["encoder.embedding.weight"])
    _gru_to_keras(km.encoder.rnn.forward_layer.cell, *(p[f"encoder.rnn.{n}_l0"] for n in gru))
    _gru_to_keras(km.encoder.rnn.backward_layer.cell, *(p[f"encoder.rnn.{n}_l0_reverse"] for n in gru))
    d = km.decoder
    d.embedding.embeddings.assign(p["decoder.embedding.weight"])
    d.init.kernel.assign(p["decoder.init.weight"].T)
    d.init.bias.assign(p["decoder.init.bias"])
    _gru_to_keras(d.cell, *(p[f"decoder.cell.{n}"] for n in gru))
    d.out.kernel.assign(p["decoder.out.weight"].T)
    d.out.bias.assign(p["decoder.out.bias"])
    if tm.attention_kind == "additive":
        for n in ("W_q", "W_k", "w_v"):
            getattr(d.attention.additive, n).assign(p[f"decoder.attention.additive.{n}"])
    elif tm.attention_kind == "general":
        d.attention.W.assign(p["decoder.attention.W"])


def _batch(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    src = rng.integers(4, 13, size=(4, 7))
    src[0, 5:] = 0  # padded sources of different lengths
    src[2, 2:] = 0
    tgt_in = rng.integers(1, 9, size=(4, 5))
    return src, tgt_in


def _pair(kind: str) -> tuple[T.Seq2Seq, K.Seq2Seq]:
    torch.manual_seed(0)
    tm = T.Seq2Seq(13, 9, 8, 6, kind, 5).eval()
    km = K.Seq2Seq(13, 9, 8, 6, kind, 5)
    src, tgt_in = _batch()
    km(src, tgt_in)  # build
    copy_torch_to_keras(tm, km)
    return tm, km


@pytest.mark.parametrize("kind", T.SCORES)
def test_twins_give_the_same_logits_weights_and_decodes(kind: str) -> None:
    tm, km = _pair(kind)
    src, tgt_in = _batch()
    t_logits, t_w = tm(torch.as_tensor(src), torch.as_tensor(tgt_in))
    k_logits, k_w = km(src, tgt_in)
    diff = np.abs(t_logits.detach().numpy() - np.asarray(k_logits)).max()
    assert diff < 1e-5, f"{kind}: logits differ by {diff:.2g}"
    assert (t_w is None) == (k_w is None) == (kind == "none")
    if t_w is not None:
        assert np.abs(t_w.detach().numpy() - np.asarray(k_w)).max() < 1e-5
    t_tok, t_dw = T.greedy_decode(tm, src, 6)
    k_tok, k_dw = K.greedy_decode(km, src, 6)
    assert t_tok.shape == k_tok.shape == (4, 6) and (t_tok == k_tok).all()
    if t_dw is not None:
        assert t_dw.shape == (4, 6, 7) and np.abs(t_dw - k_dw).max() < 1e-5
    assert float(T.sequence_loss(t_logits.detach(), torch.as_tensor(tgt_in))) == pytest.approx(
        float(K.sequence_loss(k_logits, tgt_in)), abs=1e-5
    )


@pytest.mark.parametrize("kind", T.SCORES)
def test_weights_move_between_the_twins_in_one_layout(kind: str) -> None:
    """export_weights of one twin, load_weights of the other: the hand copy's variables, the same logits; and back."""
    tm, km_by_hand = _pair(kind)
    km = K.Seq2Seq(13, 9, 8, 6, kind, 5)  # not built yet: load_weights builds it
    K.load_weights(km, T.export_weights(tm))
    for a, b in zip(km.weights, km_by_hand.weights):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=f"{kind}: {a.path}")
    src, tgt_in = _batch()
    logits = tm(torch.as_tensor(src), torch.as_tensor(tgt_in))[0].detach().numpy()
    assert np.abs(logits - np.asarray(km(src, tgt_in)[0])).max() < 1e-5
    back = T.Seq2Seq(13, 9, 8, 6, kind, 5)
    T.load_weights(back, K.export_weights(km))
    for name, p in tm.state_dict().items():
        assert torch.equal(p, back.state_dict()[name]), f"{kind}: {name} changed on the round trip"
    # the layout: x @ W, GRU gates (r, z, n); the same names and shapes in both twins, for every layer
    exported = {impl: impl.export_weights(m) for impl, m in ((T, tm), (K, km))}
    assert {n: a.shape for n, a in exported[T].items()} == {n: a.shape for n, a in exported[K].items()}
    assert exported[T]["encoder.fwd.W_x"].shape == (8, 18) and exported[T]["decoder.W_out"].shape == (12 + 12 + 8, 9)
    np.testing.assert_array_equal(exported[T]["encoder.fwd.W_x"][:, :6], tm.encoder.rnn.weight_ih_l0.detach().numpy()[:6].T)
    for impl, m in ((T, tm), (K, km)):
        for part in ("encoder", "decoder"):
            alone = impl.export_weights(getattr(m, part))
            assert alone.keys() == {n[len(part) + 1:] for n in exported[impl] if n.startswith(part + ".")}


class _ScratchAttention(torch.nn.Module):
    """Additive attention written from scratch, its weights named as the layout names them."""

    def __init__(self) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(3)
        self.W_q, self.W_k, self.w_v = (torch.nn.Parameter(torch.randn(*s, generator=g)) for s in ((12, 5), (12, 5), (5,)))

    def forward(self, query, memory, mask):
        scores = torch.tanh((query @ self.W_q)[:, None] + memory @ self.W_k) @ self.w_v  # (B, Ts)
        weights = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)  # (B, Ts)
        return (weights[..., None] * memory).sum(1), weights


def test_named_weights_carry_a_scratch_layer_into_the_package() -> None:
    """named_weights lists a module's weights by attribute path, and load_weights takes them."""
    mine = _ScratchAttention()
    assert list(T.named_weights(mine)) == ["W_q", "W_k", "w_v"]
    rng = np.random.default_rng(4)
    query, memory = (torch.as_tensor(rng.normal(size=s).astype(np.float32)) for s in ((3, 12), (3, 4, 12)))
    mask = torch.as_tensor(np.array([[1, 1, 1, 0], [1, 1, 1, 1], [1, 0, 0, 0]], dtype=bool))
    package = T.DecoderAttention("additive", 12, 12, 5)
    T.load_weights(package, T.named_weights(mine))
    for a, b in zip(mine(query, memory, mask), package(query, memory, None, mask)):
        assert (a - b).abs().max() < 1e-6
    nested = torch.nn.Module()
    nested.attention, nested.cell = mine, torch.nn.Module()
    nested.cell.W_x = torch.nn.Parameter(torch.zeros(2, 6))
    assert list(T.named_weights(nested)) == ["attention.W_q", "attention.W_k", "attention.w_v", "cell.W_x"]


def test_keras_named_weights_walk_public_attributes() -> None:
    import keras

    class Cell(keras.layers.Layer):
        def __init__(self) -> None:
            super().__init__()
            self.W_x = self.add_weight(shape=(2, 6), initializer="ones")
            self._hidden = self.add_weight(shape=(1,), initializer="zeros")  # private: not listed

    class Outer(keras.layers.Layer):
        def __init__(self) -> None:
            super().__init__()
            self.embedding = self.add_weight(shape=(5, 2), initializer="zeros")
            self.cell, self.attention = Cell(), None

    found = K.named_weights(Outer())
    assert list(found) == ["embedding", "cell.W_x"] and found["cell.W_x"].shape == (2, 6)


@pytest.mark.parametrize("impl", [T, K], ids=["torch", "keras"])
def test_load_weights_names_what_is_wrong(impl) -> None:
    model = impl.Seq2Seq(13, 9, 8, 6, "additive", 5)
    good = impl.export_weights(model)
    with pytest.raises(ValueError, match=r"missing \['encoder.embedding'\], unexpected \['encoder.embeddings'\]"):
        impl.load_weights(model, {**{k: v for k, v in good.items() if k != "encoder.embedding"},
                                  "encoder.embeddings": good["encoder.embedding"]})
    with pytest.raises(ValueError, match=r"weights\['decoder.W_out'\]: expected shape \(32, 9\), got \(9, 32\)"):
        impl.load_weights(model, {**good, "decoder.W_out": good["decoder.W_out"].T})
    with pytest.raises(ValueError, match="weights: expected a mapping"):
        impl.load_weights(model, list(good.values()))
    with pytest.raises(ValueError, match="layer: expected an Encoder, DecoderAttention, Decoder or Seq2Seq"):
        impl.export_weights(model.decoder.cell)
    untouched = impl.export_weights(model)
    assert all(np.array_equal(untouched[k], good[k]) for k in good), "a rejected load must change nothing"


def _monotonic_window(src: np.ndarray, steps: int, half_width: int) -> np.ndarray:
    """Luong's local-m window, its centre moving from the first to the last real token of each source."""
    lengths = (src != 0).sum(1)  # (B,)
    centers = np.rint(np.arange(steps)[None] * (lengths[:, None] - 1) / (steps - 1)).astype(np.int64)  # (B, steps)
    return numpy_ref.local_window_mask(centers, src.shape[1], half_width)  # (B, 1, steps, Ts)


@pytest.mark.parametrize("kind", ["additive", "general"])
def test_decode_with_a_local_window(kind: str) -> None:
    """The twins agree under a window; nothing outside it gets weight; a window over everything is global."""
    tm, km = _pair(kind)
    src, _ = _batch()
    window = _monotonic_window(src, 6, 1)
    t_tok, t_w = T.greedy_decode(tm, src, 6, attention_mask=window)
    k_tok, k_w = K.greedy_decode(km, src, 6, attention_mask=window)
    assert (t_tok == k_tok).all() and np.abs(t_w - k_w).max() < 1e-5, "the twins disagree under a local window"
    assert np.abs(t_w[~window[:, 0]]).max() == 0.0, "weight fell outside the window"
    np.testing.assert_allclose(t_w.sum(-1), 1.0, atol=1e-6)
    g_tok, g_w = T.greedy_decode(tm, src, 6)
    assert np.abs(t_w - g_w).max() > 1e-3, "a 3-key window should change the weights of a 7-key source"
    wide = _monotonic_window(src, 6, 6)  # every window covers the whole source
    for impl, model in ((T, tm), (K, km)):
        w_tok, w_w = impl.greedy_decode(model, src, 6, attention_mask=wide)
        assert (w_tok == g_tok).all() and np.abs(w_w - g_w).max() < 1e-5, f"{impl.__name__}: a full window is global"
    # one mask for the whole batch, (max_len, Ts), broadcasts too
    b_tok, _ = T.greedy_decode(tm, src, 6, attention_mask=np.ones((6, 7), dtype=bool))
    assert (b_tok == g_tok).all()


@pytest.mark.parametrize("impl", [T, K], ids=["torch", "keras"])
def test_decode_attention_mask_rejects_bad_input(impl) -> None:
    src, _ = _batch()
    if impl is T:
        torch.manual_seed(0)
    model = impl.Seq2Seq(13, 9, 8, 6, "additive", 5)
    with pytest.raises(ValueError, match="attention_mask: expected a boolean"):
        impl.greedy_decode(model, src, 6, attention_mask=np.ones((4, 1, 6, 7)))
    with pytest.raises(ValueError, match=r"attention_mask: expected a shape broadcastable to \(B, 1, max_len, Ts\)"):
        impl.greedy_decode(model, src, 6, attention_mask=np.ones((4, 1, 5, 7), dtype=bool))
    with pytest.raises(ValueError, match="attention_mask: this model has no attention"):
        impl.greedy_decode(impl.Seq2Seq(13, 9, 8, 6, "none"), src, 6, attention_mask=np.ones((6, 7), dtype=bool))
    if impl is K:  # a Keras encoder has no weights to swap before its first call
        with pytest.raises(ValueError, match="encoder: expected a built encoder"):
            K.swap_directions(K.Seq2Seq(13, 9, 8, 6).encoder)


@pytest.mark.parametrize("impl", [T, K], ids=["torch", "keras"])
def test_swapped_directions_read_the_reversed_source_into_the_same_summary(impl) -> None:
    """Bidirectional encoder: swap the two GRUs and reverse the source, and the summary is the old one, halves swapped."""
    tm, km = _pair("none")
    model = tm if impl is T else km
    src, _ = _batch()
    lengths = (src != 0).sum(1)
    rev = np.zeros_like(src)
    for b, n in enumerate(lengths):
        rev[b, :n] = src[b, :n][::-1]  # the real tokens reversed, padding still at the end
    as_in = torch.as_tensor if impl is T else np.asarray

    def encode(x):
        memory, summary, _ = model.encode(as_in(x))
        return np.asarray(memory.detach() if impl is T else memory), np.asarray(summary.detach() if impl is T else summary)

    memory, summary = encode(src)
    h = summary.shape[1] // 2
    impl.swap_directions(model.encoder)
    r_memory, r_summary = encode(rev)
    np.testing.assert_allclose(r_summary, np.concatenate([summary[:, h:], summary[:, :h]], 1), atol=1e-5)
    for b, n in enumerate(lengths):  # position j of the reversed source is position n-1-j of the source
        flipped = memory[b, :n][::-1]
        np.testing.assert_allclose(r_memory[b, :n], np.concatenate([flipped[:, h:], flipped[:, :h]], 1), atol=1e-5)
    assert np.abs(encode(src)[1] - summary).max() > 1e-3, "after the swap the forward source should read differently"
    impl.swap_directions(model.encoder)
    np.testing.assert_array_equal(encode(src)[1], summary)  # swapping twice restores the encoder


def test_padding_changes_nothing_and_gets_no_attention() -> None:
    """A source padded with extra zeros encodes and decodes exactly as without them."""
    tm, _ = _pair("additive")
    src, tgt_in = _batch()
    wider = np.concatenate([src, np.zeros((4, 3), dtype=src.dtype)], axis=1)
    with torch.no_grad():
        a, wa = tm(torch.as_tensor(src), torch.as_tensor(tgt_in))
        b, wb = tm(torch.as_tensor(wider), torch.as_tensor(tgt_in))
    assert torch.allclose(a, b, atol=1e-6)
    assert float(wb[..., 7:].abs().max()) == 0.0
    assert float(wb[2, :, 2:].abs().max()) == 0.0, "padding of a short source got attention"
    assert torch.allclose(wa.sum(-1), torch.ones(4, 5), atol=1e-6)


def test_additive_step_equals_the_attention_library_function() -> None:
    """DecoderAttention's hoisted keys give exactly utils.attention's additive attention."""
    tm, _ = _pair("additive")
    att = tm.decoder.attention
    rng = np.random.default_rng(1)
    query = rng.normal(size=(3, 12)).astype(np.float32)
    memory = rng.normal(size=(3, 4, 12)).astype(np.float32)
    mask = np.array([[1, 1, 1, 0], [1, 1, 1, 1], [1, 0, 0, 0]], dtype=bool)
    ctx, w = att(torch.as_tensor(query), torch.as_tensor(memory), None, torch.as_tensor(mask))
    p = {k: v.detach().numpy() for k, v in att.additive.named_parameters()}
    ref_ctx, ref_w = numpy_ref.additive_attention(
        query[:, None, :], memory, memory, p["W_q"], p["W_k"], p["w_v"], mask[:, None, :]
    )
    assert np.abs(w.detach().numpy() - ref_w[:, 0]).max() < 1e-5
    assert np.abs(ctx.detach().numpy() - ref_ctx[:, 0]).max() < 1e-5


def test_no_attention_decoder_ignores_everything_but_the_summary() -> None:
    """Without attention, changing the encoder outputs (memory) but not the summary changes nothing."""
    tm, _ = _pair("none")
    src, tgt_in = _batch()
    memory, summary, mask = tm.encode(torch.as_tensor(src))
    a, _ = tm.decoder(torch.as_tensor(tgt_in), memory, summary, mask)
    b, _ = tm.decoder(torch.as_tensor(tgt_in), torch.randn_like(memory), summary, mask)
    assert torch.equal(a, b)
    tm2, _ = _pair("additive")
    memory, summary, mask = tm2.encode(torch.as_tensor(src))
    c, _ = tm2.decoder(torch.as_tensor(tgt_in), memory, summary, mask)
    d, _ = tm2.decoder(torch.as_tensor(tgt_in), torch.randn_like(memory), summary, mask)
    assert not torch.allclose(c, d), "with attention the decoder must read the memory"


@pytest.mark.parametrize("impl", [T, K], ids=["torch", "keras"])
def test_bad_input_names_the_argument(impl) -> None:
    with pytest.raises(ValueError, match="attention"):
        impl.Seq2Seq(5, 5, attention="bahdanau")
    with pytest.raises(ValueError, match="d_query"):
        impl.DecoderAttention("dot", 8, 6, 4)
    model = impl.Seq2Seq(13, 9, 8, 6)
    with pytest.raises(ValueError, match=r"src: expected token ids \(B, Ts\)"):
        model.encode(np.zeros((2, 3, 4), dtype=np.int64))
    with pytest.raises(ValueError, match="tgt_out"):
        impl.sequence_loss(np.zeros((2, 3, 9), dtype=np.float32) if impl is K else torch.zeros(2, 3, 9),
                           np.zeros((2, 4), dtype=np.int64) if impl is K else torch.zeros(2, 4, dtype=torch.long))


def test_torch_encoder_rejects_an_empty_source() -> None:
    model = T.Seq2Seq(13, 9, 8, 6)
    with pytest.raises(ValueError, match="mask"):
        model.encode(torch.tensor([[4, 5], [0, 0]]))


@pytest.mark.parametrize("impl", [T, K], ids=["torch", "keras"])
def test_training_learns_to_copy_reversed_sequences(impl) -> None:
    """A few hundred steps on a tiny reversal task: the loss must fall and most outputs come right."""
    rng = np.random.default_rng(0)
    n, length = 400, 5
    body = rng.integers(4, 10, size=(n, length))
    src = body
    tgt_out = np.concatenate([body[:, ::-1], np.full((n, 1), 2)], axis=1)
    tgt_in = np.concatenate([np.ones((n, 1), dtype=np.int64), body[:, ::-1]], axis=1)
    if impl is T:
        torch.manual_seed(0)
    else:
        import keras

        keras.utils.set_random_seed(0)
    model = impl.Seq2Seq(10, 10, 16, 24, "additive", 16)
    hist = impl.train_seq2seq(model, src, tgt_in, tgt_out, epochs=10, batch_size=32, lr=1e-2, progress=False)
    assert hist["loss"][-1] < 0.5 * hist["loss"][0], hist["loss"]
    tokens, weights = impl.greedy_decode(model, src[:200], length + 1)
    acc = metrics.exact_match(tokens, tgt_out[:200])
    assert acc > 0.6, f"exact match {acc:.2f} after training on reversal"
    # reversal: the first output should look mostly at the last input
    assert weights[:, 0].argmax(-1).mean() > length - 2


def test_metrics() -> None:
    pred = np.array([[5, 6, 2, 7], [5, 6, 6, 2], [5, 0, 0, 0]])
    gold = np.array([[5, 6, 2, 0], [5, 6, 2, 0], [5, 2, 0, 0]])
    assert metrics.exact_match_per_example(pred, gold).tolist() == [True, False, True]
    assert metrics.exact_match(pred, gold) == pytest.approx(2 / 3)
    labels, acc, count = metrics.accuracy_by_length([1, 0, 1, 1], [3, 4, 10, 11], [0, 5, 10, 20])
    assert labels == ["0-4", "5-9", "10-19"] and count.tolist() == [2, 0, 2]
    assert acc[0] == 0.5 and np.isnan(acc[1]) and acc[2] == 1.0
    with pytest.raises(ValueError, match="bins"):
        metrics.accuracy_by_length([1], [1], [5, 2])


def test_decode_step_explorer_draws_and_checks_shapes() -> None:
    import matplotlib

    matplotlib.use("Agg")
    from utils.seq2seq import explorer

    w = np.full((3, 4), 0.25)
    w[1] = [0, 0, 1, 0]
    fig = explorer.draw_decode_step(list("abcd"), list("xy") + ["<eos>"], w, step=1)
    bars = fig.axes[1].patches
    assert [b.get_height() for b in bars] == [0, 0, 1, 0], "the bars should show the weights of the chosen step"
    with pytest.raises(ValueError, match="weights"):
        explorer.draw_decode_step(list("abc"), list("xy"), w, step=0)
    with pytest.raises(ValueError, match="step"):
        explorer.draw_decode_step(list("abcd"), list("xyz"), w, step=3)


# --- utils.seq2seq.numpy_steps: the decoder step in Bahdanau's order and in Luong's ----------------


@pytest.mark.parametrize("kind", ["additive", "none"])
@pytest.mark.parametrize("impl", [T, K], ids=["torch", "keras"])
def test_numpy_decoder_step_equals_both_twins(impl, kind: str) -> None:
    """The reference step, fed the twin's exported weights, gives the twin's logits, state and weights."""
    from utils.seq2seq import numpy_steps as nref

    tm, km = _pair(kind)
    model = tm if impl is T else km
    src, _ = _batch()
    memory, summary, mask = model.encode(torch.as_tensor(src) if impl is T else src)
    dec = model.decoder
    state = dec.initial_state(summary)
    y = np.array([1, 4, 5, 6])
    as_ids = torch.as_tensor(y) if impl is T else y.astype(np.int32)
    logits, new_state, w = dec.step(as_ids, state, memory, dec.project_keys(memory), summary, mask)
    exported = impl.export_weights(dec)
    from utils.grading import to_numpy
    r_logits, r_state, r_w = nref.decoder_step(y, to_numpy(state), to_numpy(memory), to_numpy(summary),
                                               to_numpy(mask), exported, kind)
    assert np.abs(to_numpy(logits) - r_logits).max() < 1e-5
    assert np.abs(to_numpy(new_state) - r_state).max() < 1e-5
    assert (w is None) == (r_w is None) == (kind == "none")
    if w is not None:
        assert np.abs(to_numpy(w) - r_w).max() < 1e-5


def _luong_weights(rng, vocab=9, d_embed=5, d=6) -> dict:
    return {"embedding": rng.normal(size=(vocab, d_embed)),
            "cell.W_x": rng.normal(size=(d_embed + d, 3 * d)) * 0.4, "cell.W_h": rng.normal(size=(d, 3 * d)) * 0.4,
            "cell.b_x": rng.normal(size=3 * d) * 0.2, "cell.b_h": rng.normal(size=3 * d) * 0.2,
            "W_c": rng.normal(size=(2 * d, d)) * 0.4, "W_out": rng.normal(size=(d, vocab)), "b_out": rng.normal(size=vocab)}


def test_luong_step_attends_with_the_new_state_and_feeds_its_attentional_vector() -> None:
    """Luong's order, checked against torch's own GRUCell and softmax: the GRU reads [emb; feed], the new state
    scores the memory (plain dot), tanh([c; h] W_c) is the attentional vector, the logits are read from it."""
    from utils.seq2seq import numpy_steps as nref

    rng = np.random.default_rng(0)
    w = _luong_weights(rng)
    y, state, feed = np.array([4, 2, 7]), rng.normal(size=(3, 6)), np.tanh(rng.normal(size=(3, 6)))
    memory = rng.normal(size=(3, 5, 6))
    mask = np.array([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0], [1, 0, 0, 0, 0]], dtype=bool)
    logits, h, attentional, alpha = nref.luong_step(y, state, feed, memory, mask, w)

    cell = torch.nn.GRUCell(11, 6).double()
    with torch.no_grad():  # torch keeps W^T with the gates (r, z, n) as rows: the layout transposed
        cell.weight_ih.copy_(torch.as_tensor(w["cell.W_x"].T))
        cell.weight_hh.copy_(torch.as_tensor(w["cell.W_h"].T))
        cell.bias_ih.copy_(torch.as_tensor(w["cell.b_x"]))
        cell.bias_hh.copy_(torch.as_tensor(w["cell.b_h"]))
        x = torch.as_tensor(np.concatenate([w["embedding"][y], feed], axis=1))
        h_t = cell(x, torch.as_tensor(state))
        scores = (torch.as_tensor(memory) @ h_t[:, :, None])[..., 0].masked_fill(~torch.as_tensor(mask), float("-inf"))
        a = torch.softmax(scores, dim=-1)
        c = (a[:, :, None] * torch.as_tensor(memory)).sum(1)
        h_tilde = torch.tanh(torch.cat([c, h_t], dim=1) @ torch.as_tensor(w["W_c"]))
        out = h_tilde @ torch.as_tensor(w["W_out"]) + torch.as_tensor(w["b_out"])
    for ours, theirs in ((h, h_t), (alpha, a), (attentional, h_tilde), (logits, out)):
        np.testing.assert_allclose(ours, theirs.numpy(), atol=1e-10)
    assert (alpha[~mask] == 0).all() and np.allclose(alpha.sum(-1), 1)
    # input feeding: another attentional vector of the last step changes the state; Bahdanau's step would not have it
    assert not np.allclose(nref.luong_step(y, state, np.zeros_like(feed), memory, mask, w)[1], h)
    with pytest.raises(ValueError, match="De = Gd"):
        nref.luong_step(y, state, feed, memory[..., :4], mask, w)


def test_luong_step_general_score_reads_encoder_outputs_of_another_width() -> None:
    """With W_a (Gd, De) in the weights the score is Luong's general h W_a h_j: encoder outputs of width De != Gd
    are read (W_c is then (De + Gd, Gd)), checked against torch; W_a = I with De = Gd gives the dot step."""
    from utils.seq2seq import numpy_steps as nref

    rng = np.random.default_rng(1)
    d, de = 6, 8
    w = _luong_weights(rng, d=d)
    w_general = {**w, "W_a": rng.normal(size=(d, de)) * 0.5, "W_c": rng.normal(size=(de + d, d)) * 0.4}
    y, state, feed = np.array([4, 2, 7]), rng.normal(size=(3, d)), np.tanh(rng.normal(size=(3, d)))
    memory = rng.normal(size=(3, 5, de))
    mask = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 0, 0, 0, 0]], dtype=bool)
    logits, h, attentional, alpha = nref.luong_step(y, state, feed, memory, mask, w_general)
    h_dot = nref.luong_step(y, state, feed, memory[..., :d], mask, w)[1]
    np.testing.assert_allclose(h, h_dot, atol=1e-12)  # the GRU runs before attention: the score does not touch it
    with torch.no_grad():
        t = {k: torch.as_tensor(v) for k, v in w_general.items()}
        h_t, m = torch.as_tensor(h), torch.as_tensor(memory)
        scores = torch.einsum("bd,de,bte->bt", h_t, t["W_a"], m).masked_fill(~torch.as_tensor(mask), float("-inf"))
        a = torch.softmax(scores, dim=-1)
        h_tilde = torch.tanh(torch.cat([torch.einsum("bt,bte->be", a, m), h_t], dim=1) @ t["W_c"])
        out = h_tilde @ t["W_out"] + t["b_out"]
    for ours, theirs in ((alpha, a), (attentional, h_tilde), (logits, out)):
        np.testing.assert_allclose(ours, theirs.numpy(), atol=1e-10)
    same_width = {**w, "W_a": np.eye(d)}
    for ours, dot in zip(nref.luong_step(y, state, feed, memory[..., :d], mask, same_width),
                         nref.luong_step(y, state, feed, memory[..., :d], mask, w)):
        np.testing.assert_allclose(ours, dot, atol=1e-12)
    with pytest.raises(ValueError, match="W_a: expected"):
        nref.luong_step(y, state, feed, memory, mask, {**w_general, "W_a": w_general["W_a"].T})
