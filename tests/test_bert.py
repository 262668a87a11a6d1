"""BERT (utils.bert): twins, the Hugging Face weight map, masking, truncation, data files, offline loading.

The course's PyTorch BERT is checked against ``transformers.BertModel``: on a
tiny random checkpoint written here (always), and on the packaged
all-MiniLM-L6-v2 (when its package is installed). The Keras twin is checked
against the same reference outputs.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from utils.bert import common, weights
from utils.bert import keras_impl as K
from utils.bert import torch_impl as T
from utils.data import sentiment

ROOT = Path(__file__).resolve().parent.parent
ATOL_TWIN = 1e-5
ATOL_REF = 1e-4


def _config(**kw) -> common.BertConfig:
    base = dict(vocab_size=60, d_model=32, num_heads=4, d_ff=64, num_layers=2, max_len=24, type_vocab_size=2, dropout=0.0)
    base.update(kw)
    return common.BertConfig(**base)


def _batch(seed: int = 0, b: int = 3, t: int = 12, vocab: int = 60):
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, vocab, size=(b, t))
    ids[:, 0] = 2  # [CLS]
    ids[0, 8:] = 0  # a padded row
    seg = np.zeros_like(ids)
    seg[:, 6:] = 1
    return {"token_ids": ids, "segment_ids": seg, "padding_mask": ids != 0}


def _max_diff(a, b, keep=None) -> float:
    d = np.abs(np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64))
    return float(d[keep].max() if keep is not None else d.max())


# ---------------------------------------------------------------- twins

@pytest.mark.parametrize("cls, kwargs", [("Bert", {}), ("BertClassifier", {}), ("BertClassifier", {"pooling": "mean"}),
                                         ("BertForMaskedLM", {})], ids=["Bert", "BertClassifier", "BertClassifier-mean", "BertForMaskedLM"])
def test_twins_agree_on_random_weights(cls: str, kwargs: dict) -> None:
    torch.manual_seed(0)
    c = _config()
    tm = getattr(T, cls)(c, **kwargs).eval()
    km = getattr(K, cls)(c, **kwargs)
    K.load_weights(km, T.export_weights(tm))
    batch = _batch()
    with torch.no_grad():
        t_out = tm(batch)
    k_out = km(batch)
    if cls == "Bert":
        pairs = {"sequence": (t_out[0], k_out[0]), "pooled": (t_out[1], k_out[1]), "attention[1]": (t_out[2][1], k_out[2][1])}
    elif cls == "BertClassifier":
        pairs = {"logits": (t_out, k_out)}
    else:
        pairs = {"mlm logits": (t_out[0], k_out[0])}
    for name, (a, b) in pairs.items():
        err = _max_diff(a.detach().numpy(), b)
        assert err < ATOL_TWIN, f"{cls} {name}: torch and keras differ by {err:.2e} (tolerance {ATOL_TWIN})"


@pytest.mark.parametrize("pooling", ["cls", "mean"])
def test_twins_agree_after_fine_tuning_steps(pooling: str) -> None:
    torch.manual_seed(1)
    c = _config()
    tm = T.BertClassifier(c, pooling=pooling).eval()
    km = K.BertClassifier(c, pooling=pooling)
    K.load_weights(km, T.export_weights(tm))
    b = _batch(3, b=16)
    b["token_ids"][::3, 9:] = 0  # rows of different lengths: the twins batch padding differently
    b["padding_mask"] = b["token_ids"] != 0
    y = np.random.default_rng(0).integers(0, 2, 16)
    pooler_before = {k: v for k, v in T.export_weights(tm).items() if k.startswith("bert.pooler.")}
    with torch.no_grad():
        before = tm(b).numpy()
    ht = T.fine_tune(tm, b, y, epochs=2, batch_size=8, peak_lr=1e-3, progress=False)
    hk = K.fine_tune(km, b, y, epochs=2, batch_size=8, peak_lr=1e-3, progress=False)
    assert len(ht["batch_loss"]) == len(hk["batch_loss"]) == 4, f"expected 4 steps, got {len(ht['batch_loss'])}, {len(hk['batch_loss'])}"
    np.testing.assert_allclose(ht["lr"], hk["lr"], rtol=1e-5, err_msg="the twins' learning-rate schedules differ")
    np.testing.assert_allclose(ht["batch_loss"][0], hk["batch_loss"][0], atol=1e-6, err_msg="the twins' first losses (same weights) differ")
    # Later losses: Adam moves a weight whose gradient is ~1e-9 (sign decided by rounding) by a whole
    # step, so the twins drift apart a little. Mean pooling sends gradient through every position and
    # has more such weights (36 sign flips against 28 on this batch), so it gets a little more room.
    atol = {"cls": 1e-4, "mean": 3e-4}[pooling]
    np.testing.assert_allclose(ht["batch_loss"], hk["batch_loss"], atol=atol, err_msg="the twins' per-step losses differ")
    # Adam's epsilon sits inside the bias correction in Keras and outside in torch,
    # so weights with near-zero gradients move differently; compare what the models say.
    with torch.no_grad():
        after_t = tm(b).numpy()
    after_k = np.asarray(km(b))
    moved = _max_diff(after_t, before)
    gap = _max_diff(after_t, after_k)
    assert moved > 1e-2, f"4 fine-tuning steps barely changed the logits ({moved:.2e})"
    assert gap < 0.02 * moved, f"after 4 steps the twins' logits differ by {gap:.2e} (the steps moved them by {moved:.2e})"
    if pooling == "mean":  # the pooler takes no part: no gradient, so neither twin moves it
        for name in ("bert.pooler.w", "bert.pooler.b"):
            assert np.array_equal(T.export_weights(tm)[name], pooler_before[name]), f"torch: {name} moved with pooling='mean'"
            assert np.array_equal(K.export_weights(km)[name], pooler_before[name]), f"keras: {name} moved with pooling='mean'"


def test_fine_tune_step_lowers_the_loss() -> None:
    torch.manual_seed(2)
    c = _config()
    for impl in (T, K):
        model = impl.BertClassifier(c)
        b = _batch(4, b=8)
        y = np.array([0, 1] * 4)
        optimizer, _ = impl.make_optimizer(model, 1e-3, 40, 0.0)
        losses = [impl.fine_tune_step(model, optimizer, b, y) for _ in range(30)]
        assert losses[-1] < 0.5 * losses[0], f"{impl.__name__}: 30 steps on one batch went {losses[0]:.3f} -> {losses[-1]:.3f}"


def test_schedule_rises_then_falls_and_twins_agree() -> None:
    lr = common.warmup_linear_decay(np.arange(0, 101), 100, 10, 1e-3)
    assert lr[10] == pytest.approx(1e-3) and lr[0] == 0 and lr[100] == 0
    assert np.all(np.diff(lr[:11]) > 0) and np.all(np.diff(lr[10:]) < 0)
    _, sched = K.make_optimizer(K.BertClassifier(_config()), 1e-3, 100, 0.1)
    keras_lr = [float(sched(s)) for s in range(100)]
    np.testing.assert_allclose(keras_lr, lr[1:], rtol=1e-5, err_msg="Keras schedule != warmup_linear_decay(step + 1)")
    with pytest.raises(ValueError, match="warmup_steps"):
        common.warmup_linear_decay(1, 10, 20, 1e-3)


# ---------------------------------------------------------------- pooling, sentence vectors, sizes

def _np(x) -> np.ndarray:
    return x.detach().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)


@pytest.mark.parametrize("impl", [T, K], ids=["torch", "keras"])
def test_mean_pool_averages_real_tokens_only(impl) -> None:
    rng = np.random.default_rng(11)
    hidden = rng.normal(size=(3, 6, 4)).astype(np.float32)
    keep = np.array([[1, 1, 1, 1, 1, 1], [1, 1, 1, 0, 0, 0], [0, 0, 0, 0, 0, 0]], dtype=bool)
    h = torch.as_tensor(hidden) if impl is T else hidden
    got = _np(impl.mean_pool(h, keep))
    expected = np.stack([hidden[0].mean(0), hidden[1, :3].mean(0), np.zeros(4)])
    np.testing.assert_allclose(got, expected, atol=1e-6, err_msg=f"{impl.__name__}.mean_pool")
    with pytest.raises(ValueError, match="padding_mask"):
        impl.mean_pool(h, keep[:, :5])


@pytest.mark.parametrize("impl", [T, K], ids=["torch", "keras"])
def test_mean_pooling_ignores_padding(impl) -> None:
    """Extra [PAD] columns change neither the mean-pooled logits nor the [CLS] ones."""
    torch.manual_seed(4)
    batch = _batch(5)
    padded = {k: np.concatenate([v, np.zeros((v.shape[0], 5), dtype=v.dtype)], axis=1) for k, v in batch.items()}
    logits = {}
    for pooling in ("cls", "mean"):
        model = impl.BertClassifier(_config(), pooling=pooling)
        a = _np(model(batch, training=False))
        b = _np(model(padded, training=False))
        err = _max_diff(a, b)
        assert err < 1e-5, f"{impl.__name__} pooling={pooling}: 5 pad tokens changed the logits by {err:.2e}"
        logits[pooling] = model
    # the same weights read through the two poolings give different logits: the option does something
    weights = (T if impl is T else K).export_weights(logits["cls"])
    (T if impl is T else K).load_weights(logits["mean"], weights)
    gap = _max_diff(_np(logits["cls"](batch, training=False)), _np(logits["mean"](batch, training=False)))
    assert gap > 1e-3, f"{impl.__name__}: pooling='mean' gave the [CLS] logits (difference {gap:.2e})"


@pytest.mark.parametrize("impl", [T, K], ids=["torch", "keras"])
def test_bad_pooling_is_rejected(impl) -> None:
    with pytest.raises(ValueError, match="pooling: expected one of"):
        impl.BertClassifier(_config(), pooling="max")
    with pytest.raises(ValueError, match="pooling"):
        impl.load_pretrained(None, num_classes=2, pooling="CLS")  # checked before any weights are read
    with pytest.raises(ValueError, match="pooling"):
        common.check_pooling(None)


def test_sentence_vectors_twins_agree_and_match_the_model() -> None:
    torch.manual_seed(5)
    c = _config()
    tm = T.Bert(c).eval()
    km = K.Bert(c)
    K.load_weights(km, T.export_weights(tm))
    b = _batch(6, b=5)
    t_cls, t_mean = T.sentence_vectors(tm, b, batch_size=2)  # batches of 2: trimmed to different widths
    k_cls, k_mean = K.sentence_vectors(km, b, batch_size=2)
    assert t_cls.shape == t_mean.shape == (5, c.d_model)
    with torch.no_grad():
        sequence, pooled, _ = tm(b)
    np.testing.assert_allclose(t_cls, pooled.numpy(), atol=1e-5, err_msg="sentence_vectors: [CLS] pooler vector")
    np.testing.assert_allclose(t_mean, T.mean_pool(sequence, b["padding_mask"]).numpy(), atol=1e-5, err_msg="sentence_vectors: mean")
    assert _max_diff(t_cls, k_cls) < ATOL_TWIN and _max_diff(t_mean, k_mean) < ATOL_TWIN, "the twins' sentence vectors differ"
    classifier = T.BertClassifier(c)
    assert T.sentence_vectors(classifier, b)[0].shape == (5, c.d_model), "a BertClassifier's body is used"
    with pytest.raises(ValueError, match="model"):
        T.sentence_vectors(T.BertForMaskedLM(c), b)


def test_the_weight_names_live_once_and_agree() -> None:
    """The names the Hugging Face map fills, the names ``hf_to_course`` expects, and the names and
    shapes of both twins' models are one list: a renamed parameter breaks this test, not a load."""
    for c in (_config(), _config(d_model=48, num_heads=6, d_ff=40, num_layers=3, type_vocab_size=3)):
        expected = weights._expected_course_names(c)
        mapped = {course.format(i=i) for course, _ in weights.HF_TO_COURSE.values() for i in range(c.num_layers)}
        assert mapped == set(expected), sorted(mapped ^ set(expected))
        for name, impl in (("torch", T), ("keras", K)):
            model_weights = impl.export_weights(impl.Bert(c))
            shapes = {k: tuple(v.shape) for k, v in model_weights.items()}
            assert shapes == expected, f"{name}: {sorted(set(shapes) ^ set(expected)) or 'shapes differ'}"


def test_parameter_count_matches_the_models() -> None:
    for c in (_config(), _config(d_model=48, num_heads=6, d_ff=40, num_layers=3, type_vocab_size=3)):
        counts = common.parameter_count(c)
        assert counts["total"] == counts["embeddings"] + c.num_layers * counts["per_block"] + counts["pooler"]
        assert counts["total"] == sum(p.numel() for p in T.Bert(c).parameters()), f"torch Bert with {c}"
        assert counts["total"] == K.Bert(c).count_params(), f"keras Bert with {c}"
        assert counts["total"] == sum(int(np.prod(s)) for s in weights._expected_course_names(c).values())
    minilm = common.BertConfig()  # the defaults are all-MiniLM-L6-v2's sizes
    assert common.parameter_count(minilm)["total"] == sum(p.numel() for p in T.Bert(minilm).parameters()) == 22_713_216
    # The BERT paper's two sizes (vocabulary 30,522, 512 positions, 2 segments): "110M" and "340M"
    base = common.BertConfig(d_model=768, num_heads=12, d_ff=3072, num_layers=12)
    large = common.BertConfig(d_model=1024, num_heads=16, d_ff=4096, num_layers=24)
    assert common.parameter_count(base)["total"] == 109_482_240
    assert common.parameter_count(large)["total"] == 335_141_888
    with pytest.raises(ValueError, match="config"):
        common.parameter_count({"d_model": 768})


def test_linear_probe_reads_a_linear_rule() -> None:
    rng = np.random.default_rng(7)
    x = rng.normal(size=(400, 10)) * rng.uniform(0.1, 30, size=10) + rng.normal(size=10) * 5  # scales and offsets differ
    w = rng.normal(size=10) / x.std(0)
    y = ((x - x.mean(0)) @ w > 0).astype(int)
    p = common.linear_probe(x[:300], y[:300], x[300:])
    assert p.shape == (100,) and np.all((p > 0) & (p < 1))
    acc = ((p > 0.5) == y[300:]).mean()
    assert acc > 0.9, f"a linearly separable rule read with accuracy {acc:.2f}"
    np.testing.assert_array_equal(p, common.linear_probe(x[:300], y[:300], x[300:]), err_msg="the probe must be deterministic")
    shuffled = common.linear_probe(x[:300], rng.permutation(y[:300]), x[300:])
    assert ((shuffled > 0.5) == y[300:]).mean() < acc - 0.2, "shuffled labels must not be read as well"
    with pytest.raises(ValueError, match="test_x"):
        common.linear_probe(x[:300], y[:300], x[300:, :5])
    with pytest.raises(ValueError, match="train_y"):
        common.linear_probe(x[:300], y[:300] + 1, x[300:])


# ---------------------------------------------------------------- weight map vs transformers

def _tiny_hf_folder(tmp_path: Path, safe: bool = True) -> Path:
    import transformers

    cfg = transformers.BertConfig(vocab_size=70, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                  intermediate_size=48, max_position_embeddings=40, hidden_act="gelu")
    torch.manual_seed(3)
    model = transformers.BertModel(cfg).eval()
    with torch.no_grad():  # LayerNorm and biases start at 1 / 0: randomise them so a swap would show
        for name, p in model.named_parameters():
            if "LayerNorm" in name or name.endswith("bias"):
                p.add_(0.1 * torch.randn_like(p))
    folder = tmp_path / "tiny_bert"
    model.save_pretrained(folder, safe_serialization=safe)
    return folder


def _reference(folder: Path, batch: dict):
    import transformers

    ref = transformers.BertModel.from_pretrained(str(folder)).eval()
    with torch.no_grad():
        out = ref(input_ids=torch.as_tensor(batch["token_ids"]), token_type_ids=torch.as_tensor(batch["segment_ids"]),
                  attention_mask=torch.as_tensor(batch["padding_mask"].astype(np.int64)))
    return out.last_hidden_state.numpy(), out.pooler_output.numpy()


def _check_against(folder: Path, batch: dict, atol: float) -> dict:
    ref_seq, ref_pool = _reference(folder, batch)
    keep = batch["padding_mask"]
    errors = {}
    tm, _ = T.load_pretrained(folder)
    assert not tm.training, "load_pretrained: both twins return a model that runs without dropout"
    with torch.no_grad():
        seq, pool, _ = tm(batch)
    errors["torch sequence"] = _max_diff(seq.numpy(), ref_seq, keep)
    errors["torch pooled"] = _max_diff(pool.numpy(), ref_pool)
    km, _ = K.load_pretrained(folder)
    seq, pool, _ = km(batch)
    assert np.array_equal(np.asarray(seq), np.asarray(km(batch)[0])), "load_pretrained (keras): two calls differ (dropout on?)"
    errors["keras sequence"] = _max_diff(seq, ref_seq, keep)
    errors["keras pooled"] = _max_diff(pool, ref_pool)
    worst = max(errors, key=errors.get)
    assert errors[worst] < atol, f"largest difference from transformers.BertModel: {errors[worst]:.2e} in {worst} (all: {errors})"
    return errors


def test_weight_map_matches_transformers_on_a_tiny_checkpoint(tmp_path: Path) -> None:
    _check_against(_tiny_hf_folder(tmp_path), _batch(5, vocab=70), ATOL_REF)


def test_weight_map_reads_pytorch_model_bin(tmp_path: Path) -> None:
    import shutil

    from safetensors.torch import load_file

    folder = _tiny_hf_folder(tmp_path)
    bin_folder = tmp_path / "as_bin"
    bin_folder.mkdir()
    shutil.copy(folder / "config.json", bin_folder / "config.json")
    state = {f"bert.{k}": v for k, v in load_file(str(folder / "model.safetensors")).items()}  # as a task model saves it
    torch.save(state, bin_folder / "pytorch_model.bin")
    batch = _batch(6, vocab=70)
    ref_seq, ref_pool = _reference(folder, batch)
    model, _ = T.load_pretrained(bin_folder)
    with torch.no_grad():
        seq, pool, _ = model(batch)
    err = max(_max_diff(seq.numpy(), ref_seq, batch["padding_mask"]), _max_diff(pool.numpy(), ref_pool))
    assert err < ATOL_REF, f"weights read from pytorch_model.bin differ from the reference by {err:.2e}"


def test_weight_map_names_a_missing_weight(tmp_path: Path) -> None:
    folder = _tiny_hf_folder(tmp_path)
    hf_config, state = weights.read_hf_folder(folder)
    del state["encoder.layer.1.attention.self.key.weight"]
    with pytest.raises(ValueError, match="query/key/value"):
        weights.hf_to_course(state, common.BertConfig.from_hf(hf_config))
    del state["pooler.dense.bias"]
    with pytest.raises(ValueError, match="pooler.b"):
        weights.hf_to_course(state, common.BertConfig.from_hf(hf_config))


def _skip_unless_ci(reason: str) -> None:
    """Skip on a machine that lacks a packaged file; under CI (CI=true) the file must be there: fail."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason}: under CI this test must run, not skip")
    pytest.skip(reason)


def _packaged_or_skip() -> Path:
    try:
        return weights.packaged_model_dir()
    except FileNotFoundError as err:
        _skip_unless_ci(f"packaged all-MiniLM-L6-v2 not installed ({err})")


def test_packaged_minilm_matches_transformers_in_both_frameworks() -> None:
    folder = _packaged_or_skip()
    tok = weights.load_tokenizer(folder)
    batch = common.encode_texts(tok, ["The film is a quiet triumph.", "A dull, overlong mess that never finds its feet, sadly."],
                                pairs=["Critics agreed.", "Nobody laughed."], max_len=64)
    assert batch["segment_ids"].max() == 1, "a text pair should give segment ids 1 on the second text"
    errors = _check_against(folder, batch, ATOL_REF)
    assert all(np.isfinite(list(errors.values())))


# ---------------------------------------------------------------- masking

SPECIAL = [0, 1, 2, 3, 4]  # [PAD], [UNK], [CLS], [SEP], [MASK]
MASK_ID, VOCAB = 4, 500


def _masking_batch(seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, VOCAB, size=(64, 40))
    ids[:, 0], ids[:, 30] = 2, 3
    ids[:, 31:] = 0  # padding
    ids[::7, 10] = 1  # some [UNK]
    return ids


@pytest.mark.parametrize("impl", [T, K], ids=["torch", "keras"])
def test_masking_proportions_over_many_draws(impl) -> None:
    ids = _masking_batch()
    eligible = ~np.isin(ids, SPECIAL)
    n_elig = chosen = masked = randomised = kept = 0
    for draw in range(30):
        inputs, labels = impl.mask_tokens(ids, MASK_ID, VOCAB, SPECIAL, 0.15, seed=draw)
        inputs, labels = np.asarray(inputs), np.asarray(labels)
        c = labels != common.IGNORE_INDEX
        assert np.all(labels[c] == ids[c]), "labels must hold the original id at chosen positions"
        assert not np.any(c & ~eligible), "a special token or padding was chosen"
        assert np.all(inputs[~c] == ids[~c]), "a position that was not chosen was changed"
        n_elig += eligible.sum()
        chosen += c.sum()
        masked += (c & (inputs == MASK_ID)).sum()
        kept += (c & (inputs == ids)).sum()
        randomised += (c & (inputs != MASK_ID) & (inputs != ids)).sum()
        assert not np.isin(inputs[c & (inputs != MASK_ID)], SPECIAL).any(), "a random replacement was a special token"

    def check(name, k, n, p):
        sd = np.sqrt(p * (1 - p) / n)
        assert abs(k / n - p) < 5 * sd, f"{name}: expected {p:.2f}, got {k / n:.4f} over {n} draws (5 sd = {5 * sd:.4f})"

    check("chosen / eligible", chosen, n_elig, 0.15)
    # a random replacement equal to the original counts as kept: 1/(V - 5) of the 10%
    p_same = 0.1 / (VOCAB - len(SPECIAL))
    check("[MASK] / chosen", masked, chosen, 0.8)
    check("random / chosen", randomised, chosen, 0.1 - p_same)
    check("kept / chosen", kept, chosen, 0.1 + p_same)


@pytest.mark.parametrize("impl", [T, K], ids=["torch", "keras"])
def test_masking_is_repeatable_by_seed_and_checks_arguments(impl) -> None:
    ids = _masking_batch(1)
    a = [np.asarray(x) for x in impl.mask_tokens(ids, MASK_ID, VOCAB, SPECIAL, seed=7)]
    b = [np.asarray(x) for x in impl.mask_tokens(ids, MASK_ID, VOCAB, SPECIAL, seed=7)]
    c = [np.asarray(x) for x in impl.mask_tokens(ids, MASK_ID, VOCAB, SPECIAL, seed=8)]
    assert all(np.array_equal(x, y) for x, y in zip(a, b)), "the same seed must give the same masking"
    assert not np.array_equal(a[1], c[1]), "different seeds gave the same masking"
    with pytest.raises(ValueError, match="mlm_probability"):
        impl.mask_tokens(ids, MASK_ID, VOCAB, SPECIAL, 1.5)
    with pytest.raises(ValueError, match="token_ids"):
        impl.mask_tokens(ids[0], MASK_ID, VOCAB, SPECIAL)


@pytest.mark.parametrize("impl", [T, K], ids=["torch", "keras"])
def test_masking_split_sets_what_the_chosen_tokens_become(impl) -> None:
    ids = _masking_batch(2)
    default = [np.asarray(x) for x in impl.mask_tokens(ids, MASK_ID, VOCAB, SPECIAL, seed=5)]
    explicit = [np.asarray(x) for x in impl.mask_tokens(ids, MASK_ID, VOCAB, SPECIAL, seed=5, split=(0.8, 0.1, 0.1))]
    assert all(np.array_equal(a, b) for a, b in zip(default, explicit)), "split=(0.8, 0.1, 0.1) is the default"
    for split, what in [((1.0, 0.0, 0.0), "mask"), ((0.0, 0.0, 1.0), "keep"), ((0.0, 1.0, 0.0), "random")]:
        inputs, labels = (np.asarray(x) for x in impl.mask_tokens(ids, MASK_ID, VOCAB, SPECIAL, seed=5, split=split))
        c = labels != common.IGNORE_INDEX
        assert np.array_equal(c, default[1] != common.IGNORE_INDEX), "the split must not change which tokens are chosen"
        if what == "mask":
            assert np.all(inputs[c] == MASK_ID), "split (1, 0, 0): every chosen token must become [MASK]"
        elif what == "keep":
            assert np.array_equal(inputs, ids), "split (0, 0, 1): the inputs must stay as they were"
        else:
            assert not np.isin(inputs[c], SPECIAL).any() and (inputs[c] != ids[c]).mean() > 0.9, (
                "split (0, 1, 0): every chosen token must become a random ordinary token")
    for bad in [(0.8, 0.1), (0.5, 0.1, 0.1), (1.2, -0.1, -0.1), "mask"]:
        with pytest.raises(ValueError, match="split"):
            impl.mask_tokens(ids, MASK_ID, VOCAB, SPECIAL, seed=5, split=bad)


def test_whole_word_masking_chooses_words_and_keeps_the_batch() -> None:
    """common.mask_whole_words (assignment 7's reference): a word's pieces are chosen, and become [MASK],
    a random piece or stay, together; about 15% of the words, 80/10/10 of them; the caller's batch is unchanged."""
    ids = _masking_batch()
    rng = np.random.default_rng(1)
    continues = (rng.random(ids.shape) < 0.4) & ~np.isin(ids, SPECIAL)  # about 40% of the pieces continue a word
    continues[:, 1] = False  # the first word after [CLS] starts there
    word = np.cumsum(~continues, axis=1)
    before = ids.copy()
    words = chosen_words = masked = kept = 0
    for draw in range(20):
        inputs, labels = common.mask_whole_words(ids, continues, MASK_ID, VOCAB, SPECIAL, seed=draw)
        assert np.array_equal(ids, before), "the batch given to mask_whole_words was changed"
        c = labels != common.IGNORE_INDEX
        assert np.all(labels[c] == ids[c]) and np.all(inputs[~c] == ids[~c]) and not np.isin(ids[c], SPECIAL).any()
        for r in range(ids.shape[0]):
            for w in np.unique(word[r][~np.isin(ids[r], SPECIAL)]):
                at = (word[r] == w) & ~np.isin(ids[r], SPECIAL)
                assert c[r, at].all() or not c[r, at].any(), f"word {w} of row {r}: only some of its pieces were chosen"
                words += 1
                if c[r, at].any():
                    chosen_words += 1
                    masked += (inputs[r, at] == MASK_ID).all()
                    kept += (inputs[r, at] == ids[r, at]).all()
                    assert (inputs[r, at] == MASK_ID).all() or not (inputs[r, at] == MASK_ID).any(), "a word half masked"
    assert abs(chosen_words / words - 0.15) < 5 * np.sqrt(0.15 * 0.85 / words)
    assert abs(masked / chosen_words - 0.8) < 5 * np.sqrt(0.16 / chosen_words)
    assert abs(kept / chosen_words - 0.1) < 5 * np.sqrt(0.09 / chosen_words) + 0.01
    again = common.mask_whole_words(ids, continues, MASK_ID, VOCAB, SPECIAL, seed=3)
    assert all(np.array_equal(a, b) for a, b in zip(again, common.mask_whole_words(ids, continues, MASK_ID, VOCAB, SPECIAL, seed=3)))
    with pytest.raises(ValueError, match="continues"):
        common.mask_whole_words(ids, continues[:, :-1], MASK_ID, VOCAB, SPECIAL)


@pytest.mark.parametrize("impl", [T, K], ids=["torch", "keras"])
def test_mlm_loss_counts_only_chosen_positions(impl) -> None:
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(2, 5, 7)).astype("float32")
    labels = np.full((2, 5), common.IGNORE_INDEX)
    labels[0, 1], labels[1, 3] = 4, 2
    logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    expected = -(logp[0, 1, 4] + logp[1, 3, 2]) / 2
    lt = logits if impl is K else torch.as_tensor(logits)
    got = float(impl.mlm_loss(lt, labels))
    assert got == pytest.approx(expected, abs=1e-5), f"{impl.__name__}.mlm_loss: expected {expected:.5f}, got {got:.5f}"


@pytest.mark.parametrize("impl", [T, K], ids=["torch", "keras"])
def test_pretraining_loss_at_the_chosen_positions_equals_mlm_loss(impl) -> None:
    """pretrain_mlm's fast path runs the head at the chosen positions only; the loss must not change."""
    ids = _masking_batch(3)[:8, :32]
    inputs, labels = impl.mask_tokens(ids, MASK_ID, VOCAB, SPECIAL, seed=4)
    keep = torch.as_tensor(ids != 0) if impl is T else ids != 0
    torch.manual_seed(0)
    model = impl.BertForMaskedLM(_config(vocab_size=VOCAB, max_len=40, dropout=0.0))
    with torch.no_grad():  # (no effect on Keras)
        full = float(impl.mlm_loss(model(inputs, None, keep, training=False)[0], labels))
        fast = float(impl._chosen_loss(model, inputs, labels, keep, False))
    assert fast == pytest.approx(full, abs=1e-5), f"{impl.__name__}: the fast path's loss {fast:.6f} != mlm_loss {full:.6f}"


def test_tiny_mlm_pretraining_lowers_the_loss() -> None:
    ids = np.tile(np.array([[2, 5, 6, 7, 8, 9, 10, 11, 3, 0]]), (16, 1))  # one sentence: easy to memorise
    for impl in (T, K):
        torch.manual_seed(0)
        model = impl.BertForMaskedLM(_config(vocab_size=20, max_len=16))
        hist = impl.pretrain_mlm(model, ids, 4, [0, 1, 2, 3, 4], steps=60, batch_size=16, peak_lr=3e-3, progress=False)
        first, last = np.mean(hist["batch_loss"][:5]), np.mean(hist["batch_loss"][-5:])
        assert last < 0.5 * first, f"{impl.__name__}: MLM loss went {first:.3f} -> {last:.3f} in 60 steps"


# ---------------------------------------------------------------- long texts, files, offline

def test_long_text_is_truncated_with_a_warning_not_an_index_error() -> None:
    folder = _packaged_or_skip()
    tok = weights.load_tokenizer(folder)
    long_text = "wonderful " * 900
    with pytest.warns(UserWarning, match="truncated"):
        batch = common.encode_texts(tok, ["short one", long_text], max_len=512)
    assert batch["token_ids"].shape == (2, 512)
    assert batch["token_ids"][1, -1] == tok.token_to_id("[SEP]"), "truncation must keep the final [SEP]"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        common.encode_texts(tok, ["short one"], max_len=512)  # no warning when nothing is cut
    model = T.Bert(_config(vocab_size=tok.get_vocab_size(), max_len=16))
    with pytest.raises(ValueError, match="max_len=16"):
        model(np.ones((1, 20), dtype=np.int64))


def test_eval_file_with_a_bad_label_is_rejected(tmp_path: Path) -> None:
    good = tmp_path / "good.tsv"
    good.write_text("sentence\tlabel\na fine film\t1\na bore\t0\n", encoding="utf-8")
    texts, labels = sentiment.read_labelled_file(good)
    assert texts == ["a fine film", "a bore"] and labels.tolist() == [1, 0]
    bad = tmp_path / "bad.csv"
    bad.write_text("text,label\nok,1\nmeh,2\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad\.csv, line 3: expected label 0 or 1, got '2'"):
        sentiment.read_labelled_file(bad)
    no_header = tmp_path / "nohead.csv"
    no_header.write_text("review,score\nok,1\n", encoding="utf-8")
    with pytest.raises(ValueError, match="'sentence' or 'text'"):
        sentiment.read_labelled_file(no_header)


def test_rotten_tomatoes_split_is_fixed_and_disjoint() -> None:
    try:
        train, y_train = sentiment.rotten_tomatoes("train")
    except FileNotFoundError as err:
        _skip_unless_ci(str(err))
    test, y_test = sentiment.rotten_tomatoes("test")
    assert not set(train) & set(test), "train and test share snippets"
    assert 0.3 < y_train.mean() < 0.7 and set(np.unique(y_test)) == {0, 1}
    assert sentiment.rotten_tomatoes("test")[0] == test, "the split must be the same every time"


def test_hub_name_offline_falls_back_to_the_packaged_weights() -> None:
    folder = _packaged_or_skip()
    code = (
        "import warnings, utils.bert.weights as w\n"
        "with warnings.catch_warnings(record=True) as rec:\n"
        "    warnings.simplefilter('always')\n"
        "    d = w.resolve_model_dir('google-bert/bert-base-uncased')\n"
        "print(d)\nprint('|'.join(str(r.message) for r in rec))\n"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.strip().splitlines()
    assert Path(lines[0]) == folder, f"expected the packaged folder {folder}, got {lines[0]}"
    assert "google-bert/bert-base-uncased" in lines[1] and "falling back" in lines[1], f"unclear message: {lines[1]}"


def test_weights_module_imports_no_framework() -> None:
    code = "import sys, utils.bert.weights, utils.bert.common, utils.data.sentiment; print(sorted(m for m in ('torch', 'tensorflow', 'keras') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]", f"utils.bert.weights/common imported a framework: {out.stdout}"


def test_config_from_hf_and_name_table() -> None:
    c = common.BertConfig.from_hf({"vocab_size": 100, "hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 128,
                                   "num_hidden_layers": 3, "max_position_embeddings": 50, "layer_norm_eps": 1e-12})
    assert (c.vocab_size, c.d_model, c.num_heads, c.d_ff, c.num_layers, c.max_len) == (100, 64, 4, 128, 3, 50)
    with pytest.raises(ValueError, match="hidden_act"):
        common.BertConfig.from_hf({"hidden_act": "relu"})
    assert {row[0] for row in common.NAME_TABLE} <= set(common.BertConfig.__dataclass_fields__)


def test_feed_forward_activation_is_checked() -> None:
    from utils.transformer import keras_impl as TK
    from utils.transformer import torch_impl as TT

    for impl in (TT, TK):
        with pytest.raises(ValueError, match="activation"):
            impl.FeedForward(8, 16, activation="swish")


def test_stored_reference_outputs_are_current() -> None:
    """The TensorFlow lesson compares with utils/bert/minilm_reference.npz; it must equal transformers' outputs."""
    folder = _packaged_or_skip()
    from tools.make_bert_reference import OUT, reference

    stored = np.load(OUT)
    fresh = reference(folder)
    for key in ("token_ids", "segment_ids", "padding_mask"):
        assert np.array_equal(stored[key], fresh[key]), f"{OUT.name}: {key} changed; run python -m tools.make_bert_reference"
    for key in ("last_hidden_state", "pooler_output"):
        err = _max_diff(stored[key], fresh[key])
        assert err < 1e-5, f"{OUT.name}: {key} differs from transformers by {err:.2e}; run python -m tools.make_bert_reference"


def test_benchmark_rejects_a_bad_eval_file(tmp_path: Path, capsys) -> None:
    from benchmarks import bert_finetune

    train = tmp_path / "train.tsv"
    train.write_text("sentence\tlabel\ngood\t1\nbad\t0\n", encoding="utf-8")
    bad = tmp_path / "eval.tsv"
    bad.write_text("sentence\tlabel\ngood\t1\nhmm\tpositive\n", encoding="utf-8")
    code = bert_finetune.main(["--framework", "pytorch", "--train", str(train), "--eval", str(bad)])
    err = capsys.readouterr().err
    assert code == 2 and "eval.tsv, line 3: expected label 0 or 1, got 'positive'" in err, err


def test_fine_tuning_takes_batches_of_different_widths() -> None:
    """Both twins trim each batch's padding (``trim_rows``), so one run sees batches of several
    widths: the Keras twin's compiled step must take them all (it is traced once per width)."""
    ids = np.full((16, 40), 0)
    ids[:, :5] = np.random.default_rng(0).integers(5, 60, size=(16, 5))
    ids[15, :] = 7  # one long row: in the PyTorch twin one batch is 40 wide, the others 16
    batch = {"token_ids": ids, "segment_ids": np.zeros_like(ids), "padding_mask": ids != 0}
    y = np.arange(16) % 2
    hist = K.fine_tune(K.BertClassifier(_config(max_len=48)), batch, y, batch_size=4, progress=False)
    assert len(hist["batch_loss"]) == 4 and np.isfinite(hist["batch_loss"]).all()
    hist = T.fine_tune(T.BertClassifier(_config(max_len=48)), batch, y, batch_size=4, progress=False)
    assert len(hist["batch_loss"]) == 4 and np.isfinite(hist["batch_loss"]).all()


@pytest.mark.parametrize("impl", [T, K], ids=["torch", "keras"])
def test_segment_ids_out_of_range_are_named(impl) -> None:
    """Both twins check both ends of the segment ids, with the same message."""
    c = _config()
    model = impl.Bert(c)
    b = _batch(3, b=2)
    for bad, said in ((-1, "min -1"), (c.type_vocab_size, f"max {c.type_vocab_size}")):
        seg = np.zeros_like(b["token_ids"])
        seg[0, 1] = bad
        with pytest.raises(ValueError, match=f"segment_ids: expected ids in \\[0, {c.type_vocab_size}\\), got .*{said}"):
            model({**b, "segment_ids": seg})


def test_bucketed_fine_tuning_twins_agree_and_the_clock_stops_it() -> None:
    torch.manual_seed(2)
    c = _config()
    tm = T.BertClassifier(c, pooling="mean").eval()
    km = K.BertClassifier(c, pooling="mean")
    K.load_weights(km, T.export_weights(tm))
    b = _batch(3, b=24)
    b["token_ids"][::2, 6:] = 0  # short and long rows
    b["padding_mask"] = b["token_ids"] != 0
    y = np.random.default_rng(0).integers(0, 2, 24)
    ht = T.fine_tune(tm, b, y, batch_size=6, peak_lr=1e-3, bucket=True, progress=False)
    hk = K.fine_tune(km, b, y, batch_size=6, peak_lr=1e-3, bucket=True, progress=False)
    np.testing.assert_allclose(ht["batch_loss"], hk["batch_loss"], atol=3e-4, err_msg="bucketed batches: the twins' losses differ")
    for impl in (T, K):
        ticks = iter(range(1000))  # a clock that advances one second per reading
        h = impl.fine_tune(impl.BertClassifier(c), b, y, batch_size=6, max_seconds=1.5, clock=lambda: float(next(ticks)),
                           progress=False)
        assert len(h["batch_loss"]) == 2 and h["step_seconds"] == [1.0, 2.0], h["step_seconds"]
        # max_steps: a second pass (4 steps each) cut after step 6, the schedule planned for 6 steps
        h = impl.fine_tune(impl.BertClassifier(c), b, y, epochs=3, batch_size=6, peak_lr=1e-3, max_steps=6, progress=False)
        want = common.warmup_linear_schedule(1e-3, 6, 0.1)
        assert h["lr"] == [want(i) for i in range(6)] and len(h["loss"]) == 2, (h["lr"], h["loss"])
        with pytest.raises(ValueError, match="max_steps"):
            impl.fine_tune(impl.BertClassifier(c), b, y, max_steps=0, progress=False)
        with pytest.raises(ValueError, match="padding_mask"):
            impl.fine_tune(impl.BertClassifier(c), {"token_ids": b["token_ids"]}, y, bucket=True, progress=False)


def test_benchmark_plans_from_the_training_speed() -> None:
    from benchmarks.bert_finetune import plan_steps

    # warm steps of 0.5 s; the cold pass paid a 6 s trace for a new batch width: 5.5 s one-off
    steps, step, overhead = plan_steps([0.5, 6.0, 0.5, 0.5], [0.5, 0.5, 0.5, 0.5], budget_seconds=60.0)
    assert step == pytest.approx(0.5) and overhead == pytest.approx(5.5) and steps == 109
    # traces only a little slower than a step (1.2 s): one-off costs still, not a slower step
    # (the cold pass alone would give a 0.85 s step and plan 70 steps instead of 117)
    steps, step, overhead = plan_steps([1.2, 0.5, 1.2, 0.5], [0.5, 0.5, 0.5, 0.5], budget_seconds=60.0)
    assert step == pytest.approx(0.5) and overhead == pytest.approx(1.4) and steps == 117
    # a stray pause in the warm pass is left out of the typical step
    assert plan_steps([0.5] * 4, [0.5, 0.5, 0.5, 9.0], budget_seconds=60.0)[1] == pytest.approx(0.5)
    with pytest.raises(ValueError, match="warm"):
        plan_steps([0.5], [], 60.0)
    with pytest.raises(ValueError, match="cold"):
        plan_steps([-1.0], [0.5], 60.0)


def test_benchmark_plans_passes_with_a_last_one_cut_short() -> None:
    from benchmarks.bert_finetune import PLAN_MARGIN, plan_passes

    assert PLAN_MARGIN == 0.95
    # 100 rows in batches of 10: 10 steps a pass. 200 steps fit, 190 planned: 3 passes at most
    assert plan_passes(200, 100, 10, max_epochs=3) == (100, 3, 30)
    # 27 steps fit, 25 planned: two passes and a half, the third pass cut at step 25
    assert plan_passes(27, 100, 10, max_epochs=3) == (100, 3, 25)
    # 20 fit, 19 planned: a second pass cut at step 19
    assert plan_passes(20, 100, 10, max_epochs=5) == (100, 2, 19)
    # less than one pass: one pass over the first examples
    assert plan_passes(6, 100, 10, max_epochs=3) == (50, 1, None)
    assert plan_passes(6, 100, 10, max_epochs=3, train_examples=30) == (30, 1, None)


def test_benchmark_runs_on_a_labelled_file_pair(tmp_path: Path) -> None:
    """`--train F --eval F` with the usual header (sentence<TAB>label): the whole run, on a tiny budget."""
    _packaged_or_skip()
    from benchmarks import bert_finetune

    rng = np.random.default_rng(0)
    good, bad = ["fine", "lovely", "great fun", "a joy"], ["dull", "awful", "a bore", "tedious"]

    def write(path: Path, n: int) -> None:
        rows = ["sentence\tlabel"]
        for i in range(n):
            label = int(rng.integers(0, 2))
            rows.append(f"the film is {rng.choice(good if label else bad)}\t{label}")
        path.write_text("\n".join(rows) + "\n", encoding="utf-8")

    write(tmp_path / "train.tsv", 20)
    write(tmp_path / "eval.tsv", 10)
    out = tmp_path / "result.json"
    code = bert_finetune.main(["--framework", "pytorch", "--train", str(tmp_path / "train.tsv"), "--eval",
                               str(tmp_path / "eval.tsv"), "--minutes", "0.5", "--batch-size", "4", "--max-len", "16",
                               "--json", str(out)])
    assert code == 0
    result = json.loads(out.read_text())
    # 30 CPU seconds hold more than one pass over 20 snippets: at most --max-epochs (3)
    assert result["eval_examples"] == 10 and result["train_set_size"] == 20 and 1 <= result["epochs_planned"] <= 3, result
    assert result["train_steps"] == result["planned_steps"] == round(result["passes_planned"] * 5), result
    # the probe: the 5 batches twice, cold then warm
    assert result["probe"]["steps"] == 10 and result["probe"]["passes"] == 2 and result["budget_clock"] == "cpu" and result["settings"]["bucket"] is True
    assert 0.0 <= result["accuracy"] <= 1.0 and result["train_examples_per_second"] > 0
