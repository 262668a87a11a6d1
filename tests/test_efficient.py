"""utils.efficient (lesson 9): the NumPy reference against plain attention, both twins against
the reference (same inputs, same numbers to 1e-5), bad input named, and the memory claims
measured with tracemalloc (deterministic: a property of the algorithm, not of the machine)."""
from __future__ import annotations

import numpy as np
import pytest

from utils.attention import numpy_ref as att
from utils.efficient import measure
from utils.efficient import numpy_ref as ref

FRAMEWORKS = ("torch", "keras")


@pytest.fixture(scope="module", params=FRAMEWORKS)
def twin(request):
    if request.param == "torch":
        from utils.efficient import torch_impl as impl
    else:
        from utils.efficient import keras_impl as impl
    return impl


def _np(x) -> np.ndarray:
    from utils.checks import to_numpy

    return to_numpy(x)


def _qkv(seed: int, lead=(2, 3), tq=37, tk=37, d=8, dv=5):
    rng = np.random.default_rng(seed)
    return (rng.normal(size=(*lead, tq, d)), rng.normal(size=(*lead, tk, d)), rng.normal(size=(*lead, tk, dv)))


def _f32(*arrays):
    return tuple(a.astype(np.float32) for a in arrays)


# --- the NumPy reference against the definitions -----------------------------------------------


def test_online_softmax_equals_softmax_and_does_not_overflow() -> None:
    s = np.random.default_rng(0).normal(size=(4, 6, 50)) * 30
    for block in (1, 7, 50, 64):
        assert np.allclose(ref.online_softmax(s, block), att.masked_softmax(s), atol=1e-12)
    big = np.array([[1000.0, 1001.0, 999.0]], dtype=np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        naive = np.exp(big) / np.exp(big).sum(-1, keepdims=True)
    assert np.isnan(naive).all(), "the naive softmax should overflow here, or the test shows nothing"
    out = ref.online_softmax(big, block_size=1)
    assert np.allclose(out, att.masked_softmax(big.astype(np.float64)), atol=1e-6) and out.dtype == np.float32
    assert np.array_equal(ref.online_softmax(np.full((2, 3), -np.inf)), np.zeros((2, 3))), "a row of only -inf: zeros"


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("tq, tk", [(37, 37), (20, 37), (37, 20), (1, 5)])
@pytest.mark.parametrize("block_q, block_k", [(8, 5), (64, 64), (1, 1)])
def test_tiled_attention_equals_full_attention(causal, tq, tk, block_q, block_k) -> None:
    q, k, v = _qkv(1, tq=tq, tk=tk)
    mask = att.causal_mask(tq, tk) if causal else None
    expected, _ = att.scaled_dot_product_attention(q, k, v, mask)
    got = ref.tiled_attention(q, k, v, block_q, block_k, causal)
    assert got.shape == expected.shape
    assert np.abs(got - expected).max() < 1e-12


def test_tiled_attention_keeps_float32() -> None:
    q, k, v = _f32(*_qkv(2))
    assert ref.tiled_attention(q, k, v, 16, 16).dtype == np.float32


def test_masks() -> None:
    win = ref.sliding_window_mask(7, 2)
    i, j = np.indices((7, 7))
    assert np.array_equal(win, np.abs(i - j) <= 2)
    assert np.array_equal(ref.sliding_window_mask(7, 2, causal=True), (i - j <= 2) & (j <= i))
    assert np.array_equal(win, att.local_window_mask(np.arange(7), 7, 2)), "lesson 2's local-m window"
    glob = ref.global_token_mask(6, [0, 4])
    assert glob[0].all() and glob[:, 4].all() and glob[4].all() and not glob[1, 2] and glob.sum() == 2 * 6 * 2 - 4
    rnd = ref.random_block_mask(20, 4, 2, seed=3)
    blocks = rnd.reshape(5, 4, 5, 4).any(axis=(1, 3))  # (query block, key block)
    assert (blocks.sum(1) == 2).all() and not np.diag(blocks).any(), "two random blocks, never its own"
    assert np.array_equal(rnd, ref.random_block_mask(20, 4, 2, seed=3)), "same seed, same blocks"
    assert not np.array_equal(rnd, ref.random_block_mask(20, 4, 2, seed=4))
    assert ref.random_block_mask(10, 4, 0).sum() == 0
    ragged = ref.random_block_mask(10, 4, 5)  # three blocks, the last of 2 positions: every other block
    assert ragged.sum() == 100 - (16 + 16 + 4)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("half_width", [0, 1, 3, 40])
def test_banded_attention_equals_masked_full_attention(causal, half_width) -> None:
    q, k, v = _qkv(4, tq=30, tk=30)
    expected, _ = att.scaled_dot_product_attention(q, k, v, ref.sliding_window_mask(30, half_width, causal))
    assert np.abs(ref.banded_attention(q, k, v, half_width, causal) - expected).max() < 1e-12
    scores = ref.band_scores(q, k, half_width, causal)
    width = half_width + 1 if causal else 2 * half_width + 1
    assert scores.shape == (2, 3, 30, width), "only the window's scores are computed"
    full = att.dot_scores(q, k)
    assert np.allclose(scores[..., 5, half_width], full[..., 5, 5]), "the middle of row i is query i with key i"
    assert np.isneginf(scores[..., 0, :half_width]).all(), "before the first key: padding, -inf"


def test_band_scores_count_grows_linearly() -> None:
    """The deterministic side of "banded attention costs O(T)": the number of scores it computes."""
    counts = [ref.band_scores(np.zeros((t, 4)), np.zeros((t, 4)), 8).size for t in (64, 128, 256, 512)]
    assert counts == [t * 17 for t in (64, 128, 256, 512)]


@pytest.mark.parametrize("causal", [False, True])
def test_linear_attention_equals_its_quadratic_form(causal) -> None:
    q, k, v = _qkv(5, tq=25, tk=25)
    out, weights = ref.kernel_attention(q, k, v, causal)
    assert np.abs(ref.linear_attention(q, k, v, causal) - out).max() < 1e-12
    assert np.allclose(weights.sum(-1), 1.0) and (weights >= 0).all()
    if causal:
        assert np.array_equal(weights[..., np.triu_indices(25, 1)[0], np.triu_indices(25, 1)[1]], np.zeros((2, 3, 300)))
    # the causal form is a recurrence: a running sum of outer products phi(k) v^T
    phi_q, phi_k = ref.elu_feature_map(q[0, 0]), ref.elu_feature_map(k[0, 0])
    state, z, rows = np.zeros((8, 5)), np.zeros(8), []
    for t in range(25):
        state, z = state + np.outer(phi_k[t], v[0, 0, t]), z + phi_k[t]
        rows.append(phi_q[t] @ state / (phi_q[t] @ z))
    if causal:
        assert np.allclose(np.stack(rows), out[0, 0], atol=1e-12)


def test_linear_attention_cross_attention() -> None:
    q, k, v = _qkv(6, tq=4, tk=9)
    out, _ = ref.kernel_attention(q, k, v)
    assert np.allclose(ref.linear_attention(q, k, v), out, atol=1e-12)


def test_elu_feature_map() -> None:
    x = np.array([-30.0, -1.0, 0.0, 0.5, 3.0])
    assert np.allclose(ref.elu_feature_map(x), [np.exp(-30.0), np.exp(-1.0), 1.0, 1.5, 4.0])
    assert (ref.elu_feature_map(x) > 0).all()


# --- the twins against the reference -------------------------------------------------------------


@pytest.mark.parametrize("causal", [False, True])
def test_twin_tiled_attention(twin, causal) -> None:
    for tq, tk in ((37, 37), (20, 37), (37, 20)):
        q, k, v = _f32(*_qkv(7, tq=tq, tk=tk))
        expected = ref.tiled_attention(q.astype(np.float64), k, v, 8, 5, causal)
        got = _np(twin.tiled_attention(q, k, v, 8, 5, causal))
        assert got.dtype == np.float32 and np.abs(got - expected).max() < 1e-5, (tq, tk, causal)


def test_twin_online_softmax(twin) -> None:
    s = np.random.default_rng(8).normal(size=(3, 4, 40)).astype(np.float32) * 20
    s[0, 0, :] = -np.inf
    s[1, 1, 3] = 1e4  # exp would overflow without the running maximum
    for block in (1, 16):
        got = _np(twin.online_softmax(s, block))
        assert np.abs(got - ref.online_softmax(s.astype(np.float64), block)).max() < 1e-6


def test_twin_masks(twin) -> None:
    assert np.array_equal(_np(twin.sliding_window_mask(9, 2)), ref.sliding_window_mask(9, 2))
    assert np.array_equal(_np(twin.sliding_window_mask(9, 3, True)), ref.sliding_window_mask(9, 3, True))
    assert np.array_equal(_np(twin.global_token_mask(9, np.array([0, 8]))), ref.global_token_mask(9, [0, 8]))
    assert np.array_equal(_np(twin.global_token_mask(5, np.array([], dtype=np.int64))), np.zeros((5, 5), bool))
    assert np.array_equal(_np(twin.random_block_mask(16, 4, 1, 2)), ref.random_block_mask(16, 4, 1, 2))
    for fn in (twin.sliding_window_mask, twin.global_token_mask):
        assert _np(fn(4, 1 if fn is twin.sliding_window_mask else np.array([1]))).dtype == bool


@pytest.mark.parametrize("causal", [False, True])
def test_twin_banded_attention(twin, causal) -> None:
    q, k, v = _f32(*_qkv(9, tq=21, tk=21))
    for w in (0, 2, 30):
        got = _np(twin.banded_attention(q, k, v, w, causal))
        assert np.abs(got - ref.banded_attention(q.astype(np.float64), k, v, w, causal)).max() < 1e-5
        scores = _np(twin.band_scores(q, k, w, causal))
        expected = ref.band_scores(q.astype(np.float64), k, w, causal)
        assert np.array_equal(np.isinf(scores), np.isinf(expected))
        assert np.allclose(scores[np.isfinite(scores)], expected[np.isfinite(expected)], atol=1e-5)


@pytest.mark.parametrize("causal", [False, True])
def test_twin_linear_and_kernel_attention(twin, causal) -> None:
    q, k, v = _f32(*_qkv(10, tq=19, tk=19))
    expected, weights = ref.kernel_attention(q.astype(np.float64), k, v, causal)
    assert np.abs(_np(twin.linear_attention(q, k, v, causal)) - expected).max() < 1e-5
    out, w = twin.kernel_attention(q, k, v, causal)
    assert np.abs(_np(out) - expected).max() < 1e-5 and np.abs(_np(w) - weights).max() < 1e-6
    x = np.linspace(-20, 5, 11).astype(np.float32)
    assert np.allclose(_np(twin.elu_feature_map(x)), ref.elu_feature_map(x), atol=1e-6)


def test_twins_take_integer_inputs(twin) -> None:
    q = np.arange(12).reshape(1, 4, 3) % 3
    assert np.allclose(_np(twin.tiled_attention(q, q, q, 2, 2)), ref.tiled_attention(q, q, q, 2, 2), atol=1e-5)


# --- bad input: a ValueError that names the argument ---------------------------------------------


@pytest.mark.parametrize("impl_name", ["numpy", "torch", "keras"])
def test_bad_input_is_named(impl_name) -> None:
    if impl_name == "numpy":
        impl = ref
    elif impl_name == "torch":
        from utils.efficient import torch_impl as impl
    else:
        from utils.efficient import keras_impl as impl
    q, k, v = _f32(*_qkv(11, lead=(2,), tq=6, tk=6))
    cases = [
        (lambda: impl.tiled_attention(q, k[..., :4], v), "keys"),
        (lambda: impl.tiled_attention(q, k, v[:, :5]), "values"),
        (lambda: impl.tiled_attention(q, k, v, block_q=0), "block_q"),
        (lambda: impl.tiled_attention(q, k, v, block_k=2.5), "block_k"),
        (lambda: impl.online_softmax(q, block_size=0), "block_size"),
        (lambda: impl.banded_attention(q, k[:, :5], v[:, :5], 1), "keys"),
        (lambda: impl.banded_attention(q, k, v, -1), "half_width"),
        (lambda: impl.band_scores(q, k, 1.5), "half_width"),
        (lambda: impl.sliding_window_mask(0, 1), "seq_len"),
        (lambda: impl.global_token_mask(5, np.array([5])), "positions"),
        (lambda: impl.random_block_mask(8, 2, -1), "num_random"),
        (lambda: impl.random_block_mask(8, 0, 1), "block_size"),
        (lambda: impl.linear_attention(q, k[:, :4], v[:, :4], causal=True), "keys"),
        (lambda: impl.kernel_attention(q, k, v[:, :3]), "values"),
    ]
    for call, name in cases:
        with pytest.raises(ValueError) as err:
            call()
        assert str(err.value).startswith(f"{name}:"), (name, str(err.value))


# --- the memory claims, measured ----------------------------------------------------------------


def test_peak_bytes_sees_numpy_buffers() -> None:
    n = 1_000_000
    peak = measure.peak_bytes(np.ones, n)
    assert 8 * n <= peak < 8 * n + 100_000


def test_memory_full_is_quadratic_and_tiled_linear() -> None:
    """Doubling T adds 4x the previous increment of full attention's peak, 2x that of tiled attention's."""
    lengths = [128, 256, 512, 1024]
    rng = np.random.default_rng(12)
    full, tiled, banded = [], [], []
    for t in lengths:
        q, k, v = (rng.normal(size=(t, 16)) for _ in range(3))
        full.append(measure.peak_bytes(att.scaled_dot_product_attention, q, k, v))
        tiled.append(measure.peak_bytes(ref.tiled_attention, q, k, v, 32, 32))
        banded.append(measure.peak_bytes(ref.banded_attention, q, k, v, 8))
    for name, peaks, factor in (("full", full, 4), ("tiled", tiled, 2), ("banded", banded, 2)):
        steps = np.diff(peaks)
        ratios = steps[1:] / steps[:-1]
        assert np.all(np.abs(ratios - factor) < 0.3), f"{name}: increments {steps}, ratios {ratios}"
    assert measure.growth_exponent(lengths, full) > 1.8
    assert measure.growth_exponent(lengths, banded) < 1.1


def test_growth_exponent() -> None:
    t = np.array([10, 20, 40, 80])
    assert abs(measure.growth_exponent(t, 3 * t**2) - 2) < 1e-9
    assert abs(measure.growth_exponent(t, 5 * t) - 1) < 1e-9
    with pytest.raises(ValueError, match="costs"):
        measure.growth_exponent(t, t[:3])
    with pytest.raises(ValueError, match="costs"):
        measure.growth_exponent(t, -t)


def test_recall_task() -> None:
    from utils.data.recall import make_recall

    data = make_recall(500, 8, num_keys=20, num_values=5, seed=1)
    assert data["keys"].shape == (500, 8) and data["query"].shape == (500,)
    assert all(len(set(row)) == 8 for row in data["keys"]), "keys are distinct within an example"
    hit = data["keys"] == data["query"][:, None]
    assert (hit.sum(1) == 1).all(), "the query is exactly one of the example's keys"
    assert np.array_equal(data["values"][hit], data["answer"])
    assert data["keys"].max() < 20 and data["values"].max() < 5
    assert np.array_equal(make_recall(50, 4, seed=2)["answer"], make_recall(50, 4, seed=2)["answer"])
    with pytest.raises(ValueError, match="num_pairs"):
        make_recall(5, 30, num_keys=20)


def test_the_recorded_benchmark_shows_the_growth_lesson_9_teaches() -> None:
    """Timing lives in the benchmark, not in the notebook: its recorded run (both frameworks) must show
    what the lesson says, time and memory ~ T^2 for full attention, ~ T for banded and linear attention."""
    import json
    from pathlib import Path

    result = json.loads((Path(__file__).resolve().parent.parent / "benchmarks" / "results" / "efficient_attention.json").read_text())
    memory = result["memory"]["increment_exponent"]
    assert abs(memory["full"] - 2) < 0.2 and abs(memory["tiled"] - 1) < 0.2 and abs(memory["banded"] - 1) < 0.2, memory
    for framework in ("pytorch", "tensorflow"):
        cpu = {name: e["cpu"] for name, e in result["time"][framework]["exponent"].items()}
        assert cpu["full"] > 1.7 and cpu["masked_window"] > 1.7, (framework, cpu)
        assert cpu["banded"] < 1.3 and cpu["linear"] < 1.3, (framework, cpu)
