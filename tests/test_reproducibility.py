"""Same seed, same numbers: every model class the lessons build, in both frameworks.

For each model, ``runtime.seed_everything(seed)`` then build it and run it on a
fixed input: twice with one seed the outputs are identical (bit for bit), and
with another seed they differ (so the seed really reaches every weight, such as
a classifier head initialised outside the framework's own seeding).
"""
from __future__ import annotations

import numpy as np
import pytest

from utils import runtime
from utils.checks import to_numpy

RNG_SEED = 7  # the inputs; the models' seeds are the parameters below


def _inputs() -> dict:
    rng = np.random.default_rng(RNG_SEED)
    return {
        "x": rng.normal(size=(2, 5, 16)).astype(np.float32),
        "ids": rng.integers(4, 20, size=(2, 6)),
        "stories": rng.integers(1, 20, size=(2, 4, 5)),
        "queries": rng.integers(1, 20, size=(2, 5)),
    }


def _torch_models():
    import torch

    from utils.attention import torch_impl as att
    from utils.bert import common as bert_common
    from utils.bert import torch_impl as bert
    from utils.memory import torch_impl as mem
    from utils.seq2seq import torch_impl as s2s
    from utils.transformer import common as tr_common
    from utils.transformer import torch_impl as tr

    t = lambda a: torch.as_tensor(a)  # noqa: E731
    small_bert = bert_common.BertConfig(vocab_size=30, d_model=16, num_heads=2, d_ff=32, num_layers=2, max_len=16)
    config = tr_common.TransformerConfig(src_vocab_size=20, tgt_vocab_size=20, d_model=16, num_heads=2, d_ff=32)
    return {
        "multi-head attention": (lambda: att.MultiHeadAttention(16, 4).eval(),
                                 lambda m, i: m(t(i["x"]), t(i["x"]), t(i["x"]))[0]),
        "additive attention": (lambda: att.AdditiveAttention(16, 16, 8).eval(),
                               lambda m, i: m(t(i["x"][:, :1]), t(i["x"]), t(i["x"]))[0]),
        "seq2seq": (lambda: s2s.Seq2Seq(20, 20, d_embed=8, d_hidden=8, d_attn=8).eval(),
                    lambda m, i: m(t(i["ids"]), t(i["ids"]))[0]),
        "MemN2N": (lambda: mem.MemN2N(20, 8, 4).eval(), lambda m, i: m(t(i["stories"]), t(i["queries"]))[0]),
        "Transformer": (lambda: tr.Transformer(config).eval(), lambda m, i: m(t(i["ids"]), t(i["ids"]))[0]),
        "BERT + new head": (lambda: bert.BertClassifier(small_bert, num_classes=3).eval(),
                            lambda m, i: m(t(i["ids"]))),
    }


def _keras_models():
    from utils.attention import keras_impl as att
    from utils.bert import common as bert_common
    from utils.bert import keras_impl as bert
    from utils.memory import keras_impl as mem
    from utils.seq2seq import keras_impl as s2s
    from utils.transformer import common as tr_common
    from utils.transformer import keras_impl as tr

    small_bert = bert_common.BertConfig(vocab_size=30, d_model=16, num_heads=2, d_ff=32, num_layers=2, max_len=16)
    config = tr_common.TransformerConfig(src_vocab_size=20, tgt_vocab_size=20, d_model=16, num_heads=2, d_ff=32)
    return {
        "multi-head attention": (lambda: att.MultiHeadAttention(16, 4),
                                 lambda m, i: m(i["x"], i["x"], i["x"], training=False)[0]),
        "additive attention": (lambda: att.AdditiveAttention(16, 16, 8),
                               lambda m, i: m(i["x"][:, :1], i["x"], i["x"])[0]),
        "seq2seq": (lambda: s2s.Seq2Seq(20, 20, d_embed=8, d_hidden=8, d_attn=8),
                    lambda m, i: m(i["ids"], i["ids"])[0]),
        "MemN2N": (lambda: mem.MemN2N(20, 8, 4), lambda m, i: m(i["stories"], i["queries"])[0]),
        "Transformer": (lambda: tr.Transformer(config), lambda m, i: m(i["ids"], i["ids"], training=False)[0]),
        "BERT + new head": (lambda: bert.BertClassifier(small_bert, num_classes=3),
                            lambda m, i: m(i["ids"], training=False)),
    }


MODELS = ["multi-head attention", "additive attention", "seq2seq", "MemN2N", "Transformer", "BERT + new head"]


@pytest.fixture(scope="module", params=["torch", "keras"])
def models(request):
    if request.param == "torch":
        pytest.importorskip("torch")
        return _torch_models()
    pytest.importorskip("tensorflow")
    return _keras_models()


def _run(models: dict, name: str, seed: int) -> np.ndarray:
    build, call = models[name]
    runtime.seed_everything(seed)
    return to_numpy(call(build(), _inputs()))


@pytest.mark.parametrize("name", MODELS)
def test_same_seed_same_outputs_other_seed_other_outputs(models: dict, name: str) -> None:
    first, again, other = _run(models, name, 0), _run(models, name, 0), _run(models, name, 1)
    assert np.array_equal(first, again), f"{name}: two builds with seed 0 give different outputs"
    assert not np.allclose(first, other), f"{name}: seeds 0 and 1 give the same outputs: the seed does not reach it"
