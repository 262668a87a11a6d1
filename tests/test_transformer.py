"""The Transformer twins (utils.transformer): numbers, masks, losses, schedules, decoding, training.

Both twins run every code path here; the Keras twin is checked against the
PyTorch one with copied weights (1e-5), and both against closed forms.
"""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from utils.transformer import common
from utils.transformer import keras_impl as K
from utils.transformer import torch_impl as T
from utils.transformer.tasks import reverse_task, sequence_accuracy

ATOL = 1e-5


def _config(**kw) -> common.TransformerConfig:
    base = dict(src_vocab_size=11, tgt_vocab_size=13, d_model=16, num_heads=4, d_ff=32,
                num_encoder_layers=2, num_decoder_layers=2, max_len=20, dropout=0.1)
    base.update(kw)
    return common.TransformerConfig(**base)


def _pair(config):
    torch.manual_seed(0)
    tm = T.Transformer(config).eval()
    km = K.Transformer(config)
    K.load_weights(km, T.export_weights(tm))
    return tm, km


def _batch(seed=0, b=3, ts=7, tt=6):
    rng = np.random.default_rng(seed)
    src = rng.integers(4, 11, size=(b, ts))
    src[0, 4:] = 0  # a padded source
    tgt = rng.integers(4, 13, size=(b, tt))
    tgt[:, 0] = 1
    return src, tgt


def _np(x):
    return x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)


# ---------------------------------------------------------------- twins


@pytest.mark.parametrize("kw", [{}, {"norm_first": False}, {"tie_embeddings": True}, {"residual": False},
                                {"num_encoder_layers": 1, "num_decoder_layers": 3}])
def test_twins_give_the_same_logits_and_attention_with_copied_weights(kw):
    tm, km = _pair(_config(**kw))
    src, tgt = _batch()
    lt, at = tm(torch.as_tensor(src), torch.as_tensor(tgt))
    lk, ak = km(src, tgt)
    diff = np.abs(_np(lt) - _np(lk)).max()
    assert diff < ATOL, f"logits differ by {diff} ({kw})"
    for kind in ("encoder", "decoder_self", "cross"):
        assert len(at[kind]) == len(ak[kind])
        for layer, (wt, wk) in enumerate(zip(at[kind], ak[kind])):
            d = np.abs(_np(wt) - _np(wk)).max()
            assert d < ATOL, f"{kind} attention of layer {layer} differs by {d} ({kw})"


def test_weight_names_match_and_cover_every_parameter():
    tm, km = _pair(_config(tie_embeddings=True))
    wt, wk = T.export_weights(tm), K.export_weights(km)
    assert sorted(wt) == sorted(wk)
    assert sum(v.size for v in wt.values()) == sum(p.numel() for p in tm.parameters())
    assert sum(v.size for v in wk.values()) == sum(int(np.prod(v.shape)) for v in km.trainable_variables)
    for name in wt:
        np.testing.assert_array_equal(wt[name], wk[name], err_msg=name)


def test_blocks_alone_agree_across_twins():
    torch.manual_seed(1)
    for norm_first in (True, False):
        te = T.EncoderBlock(16, 4, 32, 0.0, norm_first).eval()
        ke = K.EncoderBlock(16, 4, 32, 0.0, norm_first)
        K.load_weights(ke, T.export_weights(te))
        td = T.DecoderBlock(16, 4, 32, 0.0, norm_first).eval()
        kd = K.DecoderBlock(16, 4, 32, 0.0, norm_first)
        K.load_weights(kd, T.export_weights(td))
        x = np.random.default_rng(2).normal(size=(2, 5, 16)).astype(np.float32)
        mem = np.random.default_rng(3).normal(size=(2, 7, 16)).astype(np.float32)
        mask = np.tril(np.ones((5, 5), bool))[None, None]
        yt, _ = te(torch.as_tensor(x), torch.as_tensor(mask))
        yk, _ = ke(x, mask)
        assert np.abs(_np(yt) - _np(yk)).max() < ATOL
        outs_t = td(torch.as_tensor(x), torch.as_tensor(mem), torch.as_tensor(mask))
        outs_k = kd(x, mem, mask)
        for a, b in zip(outs_t, outs_k):
            assert np.abs(_np(a) - _np(b)).max() < ATOL


def test_layer_norm_matches_the_library_layers():
    x = np.random.default_rng(0).normal(size=(2, 3, 8)).astype(np.float32) * 3 + 1
    ours = T.LayerNorm(8)(torch.as_tensor(x))
    lib = torch.nn.LayerNorm(8, eps=1e-5)(torch.as_tensor(x))
    assert np.abs(_np(ours) - _np(lib)).max() < ATOL
    assert np.abs(_np(K.LayerNorm(8)(x)) - _np(lib)).max() < ATOL


# ---------------------------------------------------------------- masks


@pytest.mark.parametrize("impl", [T, K], ids=["torch", "keras"])
@pytest.mark.parametrize("norm_first", [True, False])
def test_no_information_flows_from_future_target_tokens(impl, norm_first):
    tm, km = _pair(_config(norm_first=norm_first))
    model = tm if impl is T else km
    src, tgt = _batch(seed=4)
    changed = tgt.copy()
    changed[:, 4] = 12  # change position 4 only
    changed[:, 5] = 5
    run = (lambda s, t: model(torch.as_tensor(s), torch.as_tensor(t))[0]) if impl is T else (lambda s, t: model(s, t)[0])
    a, b = _np(run(src, tgt)), _np(run(src, changed))
    assert np.abs(a[:, :4] - b[:, :4]).max() < 1e-6, "positions before the change moved: the decoder sees the future"
    assert np.abs(a[:, 4:] - b[:, 4:]).max() > 1e-4, "the changed positions did not move at all (test is vacuous)"


@pytest.mark.parametrize("impl", [T, K], ids=["torch", "keras"])
def test_padding_in_the_source_is_invisible(impl):
    tm, km = _pair(_config())
    src, tgt = _batch(seed=5)
    other = src.copy()
    other[0, 4:] = 0
    run = (lambda s: tm(torch.as_tensor(s), torch.as_tensor(tgt))[0]) if impl is T else (lambda s: km(s, tgt)[0])
    base = _np(run(other))
    longer = np.concatenate([other, np.zeros((3, 3), np.int64)], axis=1)  # more padding
    assert np.abs(base[0] - _np(run(longer))[0]).max() < 1e-5, "extra padding changed the output"
    weights = (tm(torch.as_tensor(other), torch.as_tensor(tgt))[1] if impl is T else km(other, tgt)[1])["cross"]
    for w in weights:
        assert np.abs(_np(w)[0, :, :, 4:]).max() == 0.0, "cross-attention gives weight to padding"


def test_masks_have_the_documented_shapes_and_polarity():
    src = np.array([[5, 6, 0], [7, 0, 0]])
    for impl, conv in ((T, torch.as_tensor), (K, np.asarray)):
        sm = _np(impl.source_mask(conv(src)))
        assert sm.shape == (2, 1, 1, 3) and sm[0, 0, 0].tolist() == [True, True, False]
        tmask = _np(impl.target_mask(conv(src)))
        assert tmask.shape == (2, 1, 3, 3)
        assert tmask[0, 0].tolist() == [[True, False, False], [True, True, False], [True, True, False]]


# ---------------------------------------------------------------- losses, schedule, penalty


@pytest.mark.parametrize("smoothing", [0.0, 0.1, 0.3, 0.95])  # 0.95: eps = s V / (V - 1) > 1, torch's own formula
def test_label_smoothing_matches_torch_cross_entropy(smoothing):
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(3, 5, 9)).astype(np.float32)
    targets = rng.integers(1, 9, size=(3, 5))
    targets[0, 3:] = 0
    v = 9
    # torch spreads eps / V over all classes; ours spreads s / (V - 1) over the others: s = eps (V - 1) / V
    eps = smoothing * v / (v - 1)
    ref = torch.nn.functional.cross_entropy(torch.as_tensor(logits).reshape(-1, v), torch.as_tensor(targets).reshape(-1),
                                            ignore_index=0, label_smoothing=min(eps, 1.0))
    ours_t = T.label_smoothing_loss(torch.as_tensor(logits), torch.as_tensor(targets), smoothing)
    ours_k = K.label_smoothing_loss(logits, targets, smoothing)
    # and from the definition, in NumPy: 1 - s on the right token, s / (V - 1) on each other one
    logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))  # (B, T, V)
    q = np.full(logits.shape, smoothing / (v - 1))
    np.put_along_axis(q, targets[..., None], 1.0 - smoothing, axis=-1)
    per_token = -(q * logp).sum(-1)  # (B, T)
    by_definition = per_token[targets != 0].mean()
    if eps <= 1.0:  # torch takes no eps above 1
        assert abs(float(ref) - by_definition) < 1e-5
    assert abs(float(ours_t) - by_definition) < 1e-5
    assert abs(float(_np(ours_k)) - by_definition) < 1e-5


def test_label_smoothing_is_minimised_by_the_smoothed_distribution():
    v, s = 6, 0.2
    target = np.array([[2]])
    smoothed = np.full(v, s / (v - 1))
    smoothed[2] = 1 - s
    best = T.label_smoothing_loss(torch.as_tensor(np.log(smoothed))[None, None], torch.as_tensor(target), s)
    onehot_like = np.full(v, 1e-4)
    onehot_like[2] = 1 - 5e-4
    worse = T.label_smoothing_loss(torch.as_tensor(np.log(onehot_like))[None, None], torch.as_tensor(target), s)
    assert float(best) < float(worse), "a confident one-hot prediction should cost more than the smoothed target"


def test_warmup_schedule_rises_peaks_and_decays():
    d, w = 64, 100
    lr = common.warmup_schedule(np.arange(1, 1001), d, w)
    assert np.argmax(lr) == w - 1, "the peak must be at step warmup_steps"
    assert abs(lr[w - 1] - (d * w) ** -0.5) < 1e-12
    assert np.all(np.diff(lr[:w]) > 0) and np.all(np.diff(lr[w:]) < 0)
    assert abs(lr[399] / lr[99] - 0.5) < 1e-12, "after the peak the rate falls as 1 / sqrt(step)"
    assert T.warmup_schedule is K.warmup_schedule is common.warmup_schedule


def test_length_penalty_values():
    assert common.length_penalty(7, 0.0) == 1.0
    assert abs(common.length_penalty(7, 1.0) - 2.0) < 1e-12
    assert common.length_penalty(10, 0.6) > common.length_penalty(5, 0.6)


# ---------------------------------------------------------------- decoding loops


def _table_model(table: dict[tuple, dict[int, float]], v: int = 6):
    """A fake next-token model from a table: prefix (without <bos>) -> {token: prob}."""

    def fn(rows, prefixes):
        out = np.full((len(prefixes), v), np.log(1e-9))
        for i, p in enumerate(prefixes):
            for tok, prob in table.get(tuple(p[1:].tolist()), {2: 1.0}).items():
                out[i, tok] = np.log(prob)
        return out

    return fn


def test_beam_search_finds_what_greedy_misses():
    # greedy takes 4 (0.6) then is stuck with 0.3 choices; 5 (0.4) leads to a sure 5 -> 0.4 > 0.6 * 0.5
    table = {(): {4: 0.6, 5: 0.4}, (4,): {3: 0.5, 4: 0.5}, (5,): {5: 1.0}, (4, 3): {2: 1.0}, (4, 4): {2: 1.0},
             (5, 5): {2: 1.0}}
    fn = _table_model(table)
    greedy = common.greedy_search(fn, 1, 5)
    beam, score = common.beam_search_loop(fn, 1, 5, beam_size=2, alpha=0.0)
    assert greedy[0, :3].tolist()[0] == 4
    assert beam[0, :3].tolist() == [5, 5, 2], beam
    assert abs(score[0] - np.log(0.4)) < 1e-6


def test_length_penalty_changes_the_winner():
    # a short answer (<eos> at once, p = 0.5) against a longer one (4 4 <eos>, p = 0.45):
    # alpha = 0: log 0.5 > log 0.45; alpha = 1: log 0.5 / 1 < log 0.45 / (8 / 6)
    table = {(): {2: 0.5, 4: 0.45, 5: 0.05}, (4,): {4: 1.0}, (5,): {5: 1.0}, (4, 4): {2: 1.0}, (5, 5): {5: 1.0}}
    fn = _table_model(table)
    short, _ = common.beam_search_loop(fn, 1, 6, beam_size=2, alpha=0.0)
    long_, score = common.beam_search_loop(fn, 1, 6, beam_size=2, alpha=1.0)
    assert short[0, 0] == 2, "without a penalty the shorter, likelier answer wins"
    assert long_[0, :3].tolist() == [4, 4, 2], "with alpha=1 the longer answer wins"
    assert abs(score[0] - np.log(0.45) / (8 / 6)) < 1e-6


@pytest.mark.parametrize("impl", [T, K], ids=["torch", "keras"])
def test_beam_of_one_is_greedy_and_twins_decode_alike(impl):
    tm, km = _pair(_config(dropout=0.0))
    src, _ = _batch(seed=6, b=5)
    model = tm if impl is T else km
    g = impl.greedy_decode(model, src, 8)
    b1 = impl.beam_search(model, src, 8, beam_size=1, alpha=0.0)
    np.testing.assert_array_equal(g, b1)
    np.testing.assert_array_equal(T.greedy_decode(tm, src, 8), K.greedy_decode(km, src, 8))
    np.testing.assert_array_equal(T.beam_search(tm, src, 8, 3), K.beam_search(km, src, 8, 3))


# ---------------------------------------------------------------- training


def test_training_steps_agree_across_twins():
    config = _config(dropout=0.0)
    assert common.TransformerConfig(**config.to_dict()) == config
    src, ti, to = reverse_task(48, 2, 5, 6, seed=0)
    # one step on one batch: the same update in both twins
    tm, km = _pair(config)
    T.train_transformer(tm, src, ti, to, epochs=1, batch_size=48, warmup_steps=10, progress=False)
    K.train_transformer(km, src, ti, to, epochs=1, batch_size=48, warmup_steps=10, progress=False)
    wt, wk = T.export_weights(tm), K.export_weights(km)
    d = config.d_model
    for name in wt:
        a, b = wt[name], wk[name]
        if name.endswith("attn.b_qkv"):
            # The key bias adds the same number to every score of a query, which softmax
            # ignores: its true gradient is 0, the computed one is rounding noise, and Adam
            # turns noise into full-size steps of random sign. Compare the rest.
            a, b = np.delete(a, np.s_[d : 2 * d]), np.delete(b, np.s_[d : 2 * d])
        worst = np.abs(a - b).max()
        # the step is ~0.008 per weight; the libraries place Adam's epsilon differently,
        # which shows only on near-zero gradients
        assert worst < 1e-3, f"{name}: after one Adam step the twins differ by {worst}"
    # six steps: same batches, schedule, smoothing and clipping give the same losses
    tm, km = _pair(config)
    ht = T.train_transformer(tm, src, ti, to, epochs=2, batch_size=16, warmup_steps=10, progress=False)
    hk = K.train_transformer(km, src, ti, to, epochs=2, batch_size=16, warmup_steps=10, progress=False)
    np.testing.assert_allclose(ht["lr"], hk["lr"])
    assert abs(ht["loss"][0] - hk["loss"][0]) < 2e-4, (ht["loss"], hk["loss"])
    assert abs(ht["loss"][1] - hk["loss"][1]) < 3e-3, (ht["loss"], hk["loss"])


@pytest.mark.parametrize("impl", [T, K], ids=["torch", "keras"])
def test_a_batch_trimmed_of_padding_gives_the_same_loss(impl):
    """Training batches drop trailing all-padding columns (trim_batch): same logits and loss, less work."""
    rng = np.random.default_rng(3)
    src = np.zeros((6, 12), dtype=np.int64)
    tgt = np.zeros((6, 14), dtype=np.int64)
    for i, (ls, lt) in enumerate([(3, 2), (5, 4), (2, 6), (4, 3), (1, 1), (9, 11)]):
        src[i, :ls] = rng.integers(4, 10, ls)
        tgt[i, :lt] = rng.integers(4, 10, lt)
    ti = np.concatenate([np.ones((6, 1), dtype=np.int64), tgt[:, :-1]], axis=1)
    to = tgt.copy()
    to[np.arange(6), (tgt != 0).sum(1)] = 2  # <eos>
    idx = np.array([2, 0, 1, 3])  # the longest pair (row 5) is not in the batch
    s, i_, o = common.trim_batch(src, ti, to, idx)
    assert s.shape == (4, 5) and i_.shape == o.shape == (4, 7), (s.shape, i_.shape)
    np.testing.assert_array_equal(s, src[idx][:, :5])
    assert common.trim_batch(src, ti, to, np.array([4]))[0].shape == (1, 1)
    config = _config(dropout=0.0)
    tm, km = _pair(config)
    if impl is T:
        with torch.no_grad():
            full = T.label_smoothing_loss(tm(torch.as_tensor(src[idx]), torch.as_tensor(ti[idx]))[0], torch.as_tensor(to[idx]), 0.1)
            cut = T.label_smoothing_loss(tm(torch.as_tensor(s), torch.as_tensor(i_))[0], torch.as_tensor(o), 0.1)
        full, cut = float(full), float(cut)
    else:
        full = float(K.label_smoothing_loss(km(src[idx], ti[idx], training=False)[0], to[idx], 0.1))
        cut = float(K.label_smoothing_loss(km(s, i_, training=False)[0], o, 0.1))
    assert abs(full - cut) < 1e-5, f"padding columns changed the loss: {full} vs {cut}"
    # training on batches of different widths: the compiled Keras step takes any length, the twins agree
    hist = impl.train_transformer(tm if impl is T else km, src, ti, to, epochs=1, batch_size=2, warmup_steps=10,
                                  progress=False)
    other = (K if impl is T else T).train_transformer(km if impl is T else tm, src, ti, to, epochs=1, batch_size=2,
                                                      warmup_steps=10, progress=False)
    assert len(hist["batch_loss"]) == 3
    np.testing.assert_allclose(hist["batch_loss"], other["batch_loss"], rtol=1e-4)


@pytest.mark.parametrize("impl", [T, K], ids=["torch", "keras"])
def test_a_tiny_model_overfits_a_few_examples(impl):
    import keras

    torch.manual_seed(0)
    keras.utils.set_random_seed(0)
    src, ti, to = reverse_task(32, 2, 4, 4, seed=0)
    c = common.TransformerConfig(8, 8, d_model=32, num_heads=2, d_ff=64, num_encoder_layers=1,
                                 num_decoder_layers=1, max_len=8, dropout=0.0)
    model = impl.Transformer(c)
    before = sequence_accuracy(impl.greedy_decode(model, src, 6), to)
    h = impl.train_transformer(model, src, ti, to, epochs=120, batch_size=16, warmup_steps=20, lr_scale=0.3,
                               smoothing=0.0, progress=False)
    after = sequence_accuracy(impl.greedy_decode(model, src, 6), to)
    assert before < 0.2 and after == 1.0 and h["loss"][-1] < 0.1, (before, after, h["loss"][-1])


def test_training_stops_after_max_seconds():
    tm, _ = _pair(_config())
    src, ti, to = reverse_task(32, 2, 5, 6, seed=0)
    h = T.train_transformer(tm, src, ti, to, epochs=50, batch_size=16, max_seconds=0.0, progress=False)
    assert len(h["loss"]) == 1 and len(h["lr"]) == 1, "max_seconds is checked after every step"


@pytest.mark.parametrize("name", ["pytorch", "tensorflow"])
def test_training_budget_counts_the_given_clock(name):
    """A CPU-time budget (clock=time.process_time) must be honoured the same way: a fake clock that ticks
    one second per reading stops the run after the step where the budget is passed."""
    impl = T if name == "pytorch" else K
    model = _pair(_config())[0 if name == "pytorch" else 1]
    src, ti, to = reverse_task(64, 2, 5, 6, seed=0)
    ticks = iter(range(10_000))
    h = impl.train_transformer(model, src, ti, to, epochs=50, batch_size=16, max_seconds=2.5,
                               clock=lambda: float(next(ticks)), progress=False)
    # readings: 0 at the start, 1 after step 1, 2 after step 2, 3 after step 3 (> 2.5: stop)
    assert len(h["lr"]) == 3 and len(h["loss"]) == 1, (len(h["lr"]), len(h["loss"]))


# ---------------------------------------------------------------- bad input


def test_bad_input_names_the_argument():
    with pytest.raises(ValueError, match="num_heads"):
        common.TransformerConfig(10, 10, d_model=30, num_heads=4)
    with pytest.raises(ValueError, match="dropout"):
        common.TransformerConfig(10, 10, dropout=1.5)
    with pytest.raises(ValueError, match="config"):
        T.Transformer({"d_model": 4})
    tm, km = _pair(_config())
    with pytest.raises(ValueError, match=r"src: expected integer token ids"):
        tm(torch.zeros(2, 3), torch.ones(2, 3, dtype=torch.long))
    with pytest.raises(ValueError, match=r"tgt_in: expected \(B, Tt\) with B=2"):
        tm(torch.ones(2, 3, dtype=torch.long), torch.ones(3, 3, dtype=torch.long))
    with pytest.raises(ValueError, match=r"src: expected token ids"):
        km(np.ones((2, 3, 1), np.int64), np.ones((2, 3), np.int64))
    with pytest.raises(ValueError, match="targets: expected"):
        K.label_smoothing_loss(np.zeros((2, 3, 5), np.float32), np.zeros((2, 4), np.int64))
    with pytest.raises(ValueError, match="smoothing"):
        T.label_smoothing_loss(torch.zeros(2, 3, 5), torch.zeros(2, 3, dtype=torch.long), 1.0)
    weights = T.export_weights(tm)
    weights["decoder.out.w"] = weights["decoder.out.w"][:, :-1]
    with pytest.raises(ValueError, match=r"weights\['decoder.out.w'\]: expected shape"):
        K.load_weights(km, weights)
    del weights["decoder.out.w"]
    with pytest.raises(ValueError, match="missing"):
        T.load_weights(tm, weights)
    with pytest.raises(ValueError, match="warmup_steps"):
        common.warmup_schedule(10, 64, 0)
    with pytest.raises(ValueError, match="alpha"):
        common.length_penalty(3, -1.0)
    with pytest.raises(ValueError, match="src: expected"):
        K.Transformer(_config(max_len=4))(np.ones((1, 6), np.int64), np.ones((1, 2), np.int64))


def test_sequence_accuracy():
    to = np.array([[5, 6, 2, 0], [7, 2, 0, 0]])
    assert sequence_accuracy(np.array([[5, 6, 2, 9], [7, 3, 2, 0]]), to) == 0.5


def test_unlikely_early_endings_do_not_stop_the_search():
    # A confident model: the right answer is 4 4 4 4 <eos>; at every step <eos> is the runner-up.
    # Stopping at K finished hypotheses would return one of those unlikely early endings.
    step = {4: 0.9, 2: 0.05, 5: 0.03, 3: 0.02}
    table = {(): step, (4,): step, (4, 4): step, (4, 4, 4): step, (4, 4, 4, 4): {2: 0.99, 4: 0.01}}
    fn = _table_model(table)
    best, _ = common.beam_search_loop(fn, 1, 8, beam_size=4, alpha=0.6)
    assert best[0, :5].tolist() == [4, 4, 4, 4, 2], best


@pytest.mark.parametrize("framework", ["torch", "keras"])
def test_blocks_are_built_from_the_config_whole(framework: str) -> None:
    """One place unpacks a config into a block (``from_config``); the decoder block takes the
    feed-forward activation as the encoder block does, and the config carries it."""
    mod = T if framework == "torch" else K
    c = common.TransformerConfig(src_vocab_size=7, tgt_vocab_size=9, d_model=8, num_heads=2, d_ff=16,
                          dropout=0.0, norm_first=False, layer_norm_eps=1e-6, activation="gelu")
    for cls in (mod.EncoderBlock, mod.DecoderBlock):
        block = cls.from_config(c)
        assert block.ff.activation == "gelu", f"{cls.__name__} ignored the config's activation"
        assert block.sub_ff.norm_first is False and block.sub_ff.norm.eps == pytest.approx(1e-6)
        assert cls.from_config(c, activation="relu").ff.activation == "relu"  # an override wins
    model = mod.Transformer(c)
    blocks = list(model.encoder.blocks) + list(model.decoder.blocks)
    assert blocks and all(b.ff.activation == "gelu" for b in blocks)
    with pytest.raises(ValueError, match="activation"):
        common.TransformerConfig(src_vocab_size=7, tgt_vocab_size=9, activation="tanh")


@pytest.mark.parametrize("smoothing", [0.0, 0.1, 0.95])
def test_label_smoothing_gradient_matches_autograd_of_the_definition(smoothing):
    """The PyTorch loss writes its gradient out (a faster step): it must be autograd's gradient of the formula."""
    rng = np.random.default_rng(1)
    logits = rng.normal(size=(2, 4, 7))
    targets = rng.integers(1, 7, size=(2, 4))
    targets[1, 2:] = 0  # padding: no gradient there
    ours = torch.tensor(logits, dtype=torch.float32, requires_grad=True)
    T.label_smoothing_loss(ours, torch.as_tensor(targets), smoothing).backward()
    ref = torch.tensor(logits, requires_grad=True)  # float64, plain autograd
    logp = torch.log_softmax(ref, -1)
    q = torch.full(logits.shape, smoothing / 6, dtype=torch.float64).scatter(-1, torch.as_tensor(targets)[..., None], 1 - smoothing)
    keep = torch.as_tensor(targets != 0, dtype=torch.float64)
    ((-(q * logp).sum(-1) * keep).sum() / keep.sum()).backward()
    np.testing.assert_allclose(ours.grad.numpy(), ref.grad.numpy(), atol=1e-6)
    assert np.abs(ours.grad.numpy()[1, 2:]).max() == 0, "padding positions must get no gradient"


def test_the_step_benchmark_runs_both_frameworks(tmp_path):
    """`python -m benchmarks.transformer_step`, tiny: one row per framework, CPU times, the ratio."""
    from benchmarks import transformer_step

    out = transformer_step.main(["--steps", "4", "--skip", "1", "--vocab", "40", "--d-model", "16",
                                 "--json", str(tmp_path / "step.json")])
    saved = json.loads((tmp_path / "step.json").read_text())
    assert saved == out and [r["framework"] for r in out["results"]] == ["pytorch", "tensorflow"]
    assert all(r["median_ms"] > 0 and r["steps_timed"] == 3 and np.isfinite(r["final_loss"]) for r in out["results"])
    assert out["pytorch_over_tensorflow"] == pytest.approx(out["results"][0]["median_ms"] / out["results"][1]["median_ms"], rel=1e-2)
    with pytest.raises(SystemExit):
        transformer_step.main(["--steps", "2", "--skip", "2"])


def test_checkpoint_clock_leaves_the_evaluations_out_of_the_budget():
    """The translation benchmark's clock: each checkpoint is evaluated once, and its time is not training time."""
    from benchmarks.transformer_translation import CheckpointClock

    now, calls = [100.0], []

    def evaluate(minutes):
        calls.append((minutes, now[0]))
        now[0] += 500.0  # an evaluation that takes 500 s
        return {"minutes": minutes}

    clock = CheckpointClock(lambda: now[0], [1.0, 0.5], evaluate)
    readings = []
    for t in (100.0, 120.0, 131.0, 700.0, 1300.0):  # the base clock when the loop reads it
        now[0] = t
        readings.append(clock())
    assert calls == [(0.5, 131.0), (1.0, 700.0)], "each checkpoint once, in order, when first passed"
    assert clock.results == [{"minutes": 0.5}, {"minutes": 1.0}]
    # 700 s on the base clock is 100 s of training (500 s were evaluation); 1300 s is 200 s
    assert readings == [0.0, 20.0, 31.0, 100.0, 200.0]


def test_translation_benchmark_runs_with_subwords_and_a_checkpoint(tmp_path):
    """`python -m benchmarks.transformer_translation`, tiny: BPE pieces, BLEU at a checkpoint and at the end."""
    from benchmarks import transformer_translation as tt

    rng = np.random.default_rng(0)
    nouns = [("cat", "gato"), ("dog", "perro"), ("bird", "pajaro"), ("horse", "caballo"), ("fish", "pez")]
    lines = []
    for _ in range(120):
        (a, x), (b, y) = nouns[rng.integers(5)], nouns[rng.integers(5)]
        lines.append(f"the {a} sees the {b}.\tel {x} ve el {y}.")
    (tmp_path / "pairs.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tt.main(["--framework", "pytorch", "--train-tsv", str(tmp_path / "pairs.tsv"), "--holdout", "20",
                   "--minutes", "0.1", "--bleu-at", "0.02", "--subwords", "bpe", "--max-vocab", "40",
                   "--d-model", "16", "--layers", "1", "--heads", "2", "--batch-size", "16", "--warmup", "20",
                   "--json", str(tmp_path / "tt.json")])
    saved = json.loads((tmp_path / "tt.json").read_text())
    assert saved["bleu"] == out["bleu"] and saved["subwords"] == "bpe" and out["test_pairs"] == 20
    assert [c["minutes"] for c in out["bleu_at"]] == [0.02, 0.1] and out["bleu_at"][-1]["bleu"] == out["bleu"]
    assert all(0 <= c["bleu"] <= 100 for c in out["bleu_at"])
    assert out["config"]["src_vocab_size"] <= 40 and out["steps"] > 0
    with pytest.raises(SystemExit):
        tt.main(["--framework", "pytorch", "--train-tsv", str(tmp_path / "pairs.tsv"), "--holdout", "20",
                 "--minutes", "1", "--bleu-at", "2"])


# ---------------------------------------------------------------- decoding with a KV cache


def _decoding_model(impl, **kw):
    """A decoding model with every weight moved away from its initial value."""
    config = _config(dropout=0.0, max_len=32, **kw)
    tm, km = _pair(config)
    rng = np.random.default_rng(5)
    weights = {k: v + rng.normal(scale=0.3, size=v.shape).astype(np.float32) for k, v in T.export_weights(tm).items()}
    weights["decoder.embedding.table"][0] = 0.0  # padding, which a trained model never writes (tied: its logit is 0)
    model = tm if impl is T else km
    impl.load_weights(model, weights)
    return model


@pytest.mark.parametrize("kw", [{}, {"norm_first": False, "tie_embeddings": True}, {"residual": False}],
                         ids=["pre-LN", "post-LN-tied", "no-residual"])
@pytest.mark.parametrize("impl", [T, K], ids=["torch", "keras"])
def test_the_kv_cache_decodes_the_same_tokens(impl, kw):
    """Greedy decoding and beam search, with and without the cache: the same tokens, on sources with
    padding and on rows that end at different steps (beam search reorders and drops hypotheses)."""
    model = _decoding_model(impl, **kw)
    src, _ = _batch(seed=8, b=6, ts=7)
    endless = impl.greedy_decode(model, src, 12, eos_id=-1, use_cache=False)
    # the end token: one that some rows write and others do not, so that rows end at different steps
    rows_with = {tok: (endless == tok).any(axis=1).sum() for tok in np.unique(endless)}
    eos = max((tok for tok, n in rows_with.items() if n < len(src)), key=lambda tok: rows_with[tok])
    greedy = impl.greedy_decode(model, src, 12, eos_id=eos, use_cache=False)
    np.testing.assert_array_equal(impl.greedy_decode(model, src, 12, eos_id=eos), greedy)
    np.testing.assert_array_equal(impl.greedy_decode(model, src, 12, eos_id=eos, batch_size=4), greedy)  # in chunks
    for k, alpha in ((3, 0.6), (4, 0.0)):
        beam = impl.beam_search(model, src, 12, beam_size=k, alpha=alpha, eos_id=eos, use_cache=False)
        np.testing.assert_array_equal(impl.beam_search(model, src, 12, beam_size=k, alpha=alpha, eos_id=eos), beam)
    ended = (greedy == eos).any(axis=1)
    assert ended.any() and not ended.all(), "the test needs rows that end early and rows that do not"
    assert (src == 0).any(), "and a padded source"


def test_cache_parents_follows_reordered_prefixes():
    prev_rows, prev = np.array([0, 0, 1]), np.array([[1, 5], [1, 6], [1, 5]])
    rows, new = np.array([1, 0, 0]), np.array([[1, 5, 9], [1, 6, 3], [1, 6, 4]])
    np.testing.assert_array_equal(common.cache_parents(prev_rows, prev, rows, new), [2, 1, 1])
    assert common.cache_parents(prev_rows, prev, np.array([1]), np.array([[1, 6, 3]])) is None, "no such parent"
    assert common.cache_parents(prev_rows, prev, rows, new[:, :2]) is None, "not one token longer"
