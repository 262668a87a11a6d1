"""The DNC memory (Graves et al. 2016): NumPy reference, PyTorch and Keras twins.

Hand-checkable cases first (allocation, usage and freeing, erase then add, the
gates, temporal links), then the three twins against one another on random
inputs, one function at a time and over a rollout of ``dnc_step``.
"""
from __future__ import annotations

import numpy as np
import pytest

from utils.memory import numpy_ref as ref

torch = pytest.importorskip("torch")
from utils.memory import torch_impl as pt  # noqa: E402

keras_impl = pytest.importorskip("utils.memory.keras_impl")
from keras import ops  # noqa: E402

F32 = np.float32
IMPLS = ["numpy", "torch", "keras"]


def _module(impl: str):
    return {"numpy": ref, "torch": pt, "keras": keras_impl}[impl]


def _to(impl: str, x):
    if isinstance(x, dict):
        return {k: _to(impl, v) for k, v in x.items()}
    x = np.asarray(x, dtype=F32)
    return {"numpy": lambda a: a, "torch": torch.as_tensor, "keras": ops.convert_to_tensor}[impl](x)


def _np(x):
    if isinstance(x, dict):
        return {k: _np(v) for k, v in x.items()}
    if hasattr(x, "detach"):
        return x.detach().cpu().numpy()
    return np.asarray(ops.convert_to_numpy(x)) if not isinstance(x, np.ndarray) else x


def _interface(W: int, R: int = 1, add=None, erase: float = 1.0, write_key=None, write_strength: float = 1.0,
               allocation_gate: float = 1.0, write_gate: float | None = None, free: float = 0.0,
               read_key=None, read_strength: float = 100.0, mode: str = "content") -> dict:
    """Hand-set interface values for a batch of one (what a controller would emit)."""
    zeros = np.zeros((1, W), F32)
    modes = {"backward": (1, 0, 0), "content": (0, 1, 0), "forward": (0, 0, 1)}[mode]
    return {
        "write_key": zeros if write_key is None else np.asarray(write_key, F32)[None],
        "write_strength": np.full((1,), write_strength, F32),
        "erase": np.full((1, W), erase if add is not None else 0.0, F32),
        "add": zeros if add is None else np.asarray(add, F32)[None],
        "free_gates": np.full((1, R), free, F32),
        "allocation_gate": np.full((1,), allocation_gate, F32),
        "write_gate": np.full((1,), (1.0 if add is not None else 0.0) if write_gate is None else write_gate, F32),
        "read_keys": np.zeros((1, R, W), F32) if read_key is None else np.tile(np.asarray(read_key, F32), (1, R, 1)),
        "read_strengths": np.full((1, R), read_strength, F32),
        "read_modes": np.tile(np.array(modes, F32), (1, R, 1)),
    }


def _run(impl: str, state: dict, interfaces: list[dict]) -> tuple[dict, list]:
    mod, state, reads = _module(impl), _to(impl, state), []
    for x in interfaces:
        state, r = mod.dnc_step(state, _to(impl, x))
        reads.append(_np(r))
    return _np(state), reads


# ----------------------------------------------------------------------------- hand-checkable cases


@pytest.mark.parametrize("impl", IMPLS)
def test_allocation_picks_the_least_used_slot(impl: str) -> None:
    mod = _module(impl)
    # sorted by usage: slot 1 (0.1), slot 3 (0.3), slot 0 (0.5), slot 2 (1.0)
    a = _np(mod.dnc_allocation(_to(impl, [[0.5, 0.1, 1.0, 0.3]])))[0]
    assert np.allclose(a, [0.5 * 0.1 * 0.3, 0.9, 0.0, 0.7 * 0.1], atol=1e-6), f"{impl}: allocation {a}"
    assert a.argmax() == 1, f"{impl}: the least-used slot (1) should get the most weight, got {a}"
    # a memory with free slots 2 and 4 (usage 0) and the rest full: the lower free slot gets all of it
    a = _np(mod.dnc_allocation(_to(impl, [[1.0, 1.0, 0.0, 1.0, 0.0]])))[0]
    assert np.allclose(a, [0, 0, 1, 0, 0]), f"{impl}: ties go to the lower slot, got {a}"
    a = _np(mod.dnc_allocation(_to(impl, np.ones((2, 3)))))
    assert np.allclose(a, 0), f"{impl}: a full memory allocates nothing, got {a}"


def test_usage_grows_with_writes_and_free_gates_release_read_slots() -> None:
    usage = np.array([[0.0, 0.5, 1.0]])
    write = np.array([[0.0, 0.5, 0.0]])
    reads = np.array([[[0.0, 0.0, 1.0]]])  # one head read slot 2 last step
    u = ref.dnc_usage(usage, write, np.array([[0.0]]), reads)
    assert np.allclose(u, [[0.0, 0.75, 1.0]]), "u + w - u w: half-used slot written at 0.5 -> 0.75"
    u = ref.dnc_usage(usage, write, np.array([[1.0]]), reads)
    assert np.allclose(u, [[0.0, 0.75, 0.0]]), "free gate 1 releases the slot the head read"
    two = np.array([[[0.0, 0.5, 0.0], [0.0, 0.5, 0.0]]])  # two heads, each half on slot 1
    u = ref.dnc_usage(usage, np.zeros_like(write), np.array([[1.0, 1.0]]), two)
    assert np.allclose(u, [[0.0, 0.5 * 0.25, 1.0]]), "retention is a product over heads"


@pytest.mark.parametrize("impl", IMPLS)
def test_write_erases_then_adds(impl: str) -> None:
    mod = _module(impl)
    memory = np.array([[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]])
    # full weight on row 0: erase the first component fully, the third by half; then add (5, 0, 0)
    out = _np(mod.dnc_write(*(_to(impl, x) for x in (memory, [[1.0, 0.0]], [[1.0, 0.0, 0.5]], [[5.0, 0.0, 0.0]]))))
    assert np.allclose(out, [[[5.0, 2.0, 1.5], [4.0, 5.0, 6.0]]]), f"{impl}: erase then add gave {out}"
    # half weight: row * (1 - 0.5 e) + 0.5 v
    out = _np(mod.dnc_write(*(_to(impl, x) for x in (memory, [[0.0, 0.5]], [[1.0, 1.0, 1.0]], [[2.0, 2.0, 2.0]]))))
    assert np.allclose(out[0, 1], [3.0, 3.5, 4.0]), f"{impl}: half-weighted write gave {out[0, 1]}"


def test_write_weighting_mixes_allocation_and_content_through_the_gates() -> None:
    content, allocation = np.array([[0.8, 0.2, 0.0]]), np.array([[0.0, 0.0, 1.0]])
    w = lambda g_a, g_w: ref.dnc_write_weighting(content, allocation, np.array([g_a]), np.array([g_w]))  # noqa: E731
    assert np.allclose(w(1.0, 1.0), allocation), "allocation gate 1: write to the fresh slot"
    assert np.allclose(w(0.0, 1.0), content), "allocation gate 0: write where the key points"
    assert np.allclose(w(0.5, 1.0), [[0.4, 0.1, 0.5]])
    assert np.allclose(w(0.5, 0.0), 0.0), "write gate 0: no write at all"


def test_link_and_precedence_by_hand() -> None:
    N = 3
    link, p = np.zeros((1, N, N)), np.zeros((1, N))
    for slot in (2, 0, 1):  # write to slot 2, then 0, then 1
        w = np.eye(N)[None, slot]
        link = ref.dnc_link(link, p, w)  # uses the previous precedence
        p = ref.dnc_precedence(p, w)
    assert np.allclose(p, [[0, 1, 0]]), "precedence points at the last write"
    assert np.allclose(link[0], [[0, 0, 1], [1, 0, 0], [0, 0, 0]]), f"L[i, j] = i written right after j, got {link[0]}"
    half = np.array([[0.5, 0.0, 0.0]])
    assert np.allclose(ref.dnc_precedence(np.array([[0, 0, 1.0]]), half), [[0.5, 0, 0.5]])
    forward, backward = ref.dnc_directional_weights(link, np.eye(N)[None, None, 0])  # read at slot 0
    assert np.allclose(forward, [[[0, 1, 0]]]) and np.allclose(backward, [[[0, 0, 1]]])
    modes = np.array([[[0.2, 0.5, 0.3]]])
    content = np.array([[[0.0, 0.0, 1.0]]])
    assert np.allclose(ref.dnc_read_weighting(backward, content, forward, modes), [[[0.0, 0.3, 0.7]]])


@pytest.mark.parametrize("impl", IMPLS)
def test_written_sequence_is_recalled_forward_and_backward(impl: str) -> None:
    W = 6
    items = np.random.default_rng(0).normal(size=(3, W)).astype(F32)  # A, B, C
    state, _ = _run(impl, ref.dnc_initial_state(1, 5, W, 1), [_interface(W, add=v) for v in items])
    slots = [int(np.argmax(np.abs(state["memory"][0] - v).sum(-1) < 1e-5)) for v in items]
    assert slots == [0, 1, 2], f"{impl}: a fresh memory fills slots 0, 1, 2 in turn, got {slots}"
    assert np.allclose(state["memory"][0, :3], items, atol=1e-6), f"{impl}: erase 1 then add stores each item"
    assert np.allclose(state["usage"][0], [1, 1, 0, 0, 0]), f"{impl}: usage lags one step: C's slot not yet used"
    assert np.allclose(np.diagonal(state["link"][0]), 0), f"{impl}: no self-links"

    # a forward read from A's location lands on B; then on C
    forward, fr = _run(impl, state, [_interface(W, read_key=items[0]), _interface(W, mode="forward"),
                                     _interface(W, mode="forward")])
    assert np.allclose(fr[0][0, 0], items[0], atol=1e-4), f"{impl}: content read of A should return A"
    assert np.allclose(fr[1][0, 0], items[1], atol=1e-4), f"{impl}: forward from A should read B, got {fr[1][0, 0]}"
    assert np.allclose(fr[2][0, 0], items[2], atol=1e-4), f"{impl}: forward from B should read C"
    # a backward read from C's location lands on B; then on A
    _, br = _run(impl, state, [_interface(W, read_key=items[2]), _interface(W, mode="backward"),
                               _interface(W, mode="backward")])
    assert np.allclose(br[1][0, 0], items[1], atol=1e-4), f"{impl}: backward from C should read B, got {br[1][0, 0]}"
    assert np.allclose(br[2][0, 0], items[0], atol=1e-4), f"{impl}: backward from B should read A"
    assert np.allclose(forward["link"], state["link"]), f"{impl}: reads (write gate 0) must not change the links"


def test_freed_slot_is_reused_and_links_follow_the_writes_not_the_slots() -> None:
    W = 5
    items = np.random.default_rng(1).normal(size=(3, W)).astype(F32)
    steps = [_interface(W, add=items[0]), _interface(W, add=items[1], read_key=items[0]),  # head reads A's slot
             _interface(W, read_key=items[0]),  # still on A, no write
             _interface(W, add=items[2], free=1.0)]  # free A's slot: C goes there
    state, _ = _run("numpy", ref.dnc_initial_state(1, 4, W, 1), steps)
    assert np.allclose(state["memory"][0, 0], items[2], atol=1e-5), "C should overwrite A's freed slot 0"
    assert state["link"][0, 0, 1] > 0.99, "C (slot 0) was written right after B (slot 1)"
    assert state["link"][0, 1, 0] < 1e-6, "the link from A's old write to B is erased with A's slot"


# ----------------------------------------------------------------------------- twins agree


def _random_case(B: int = 3, N: int = 6, W: int = 4, R: int = 2, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    soft = lambda *shape: (lambda e: e / e.sum(-1, keepdims=True))(np.exp(rng.normal(size=shape)))  # noqa: E731
    link = rng.uniform(size=(B, N, N)) / N
    link *= 1 - np.eye(N)
    return {k: v.astype(F32) for k, v in {
        "memory": rng.normal(size=(B, N, W)), "usage": rng.uniform(size=(B, N)), "link": link,
        "precedence": soft(B, N) * 0.9, "write_weights": soft(B, N) * rng.uniform(size=(B, 1)),
        "read_weights": soft(B, R, N), "free_gates": rng.uniform(size=(B, R)),
        "content_weights": soft(B, N), "allocation": soft(B, N) * 0.8, "allocation_gate": rng.uniform(size=(B,)),
        "write_gate": rng.uniform(size=(B,)), "erase": rng.uniform(size=(B, W)), "add": rng.normal(size=(B, W)),
        "backward": soft(B, R, N), "content": soft(B, R, N), "forward": soft(B, R, N), "read_modes": soft(B, R, 3),
    }.items()}


CALLS = {
    "dnc_usage": ("usage", "write_weights", "free_gates", "read_weights"),
    "dnc_allocation": ("usage",),
    "dnc_write_weighting": ("content_weights", "allocation", "allocation_gate", "write_gate"),
    "dnc_write": ("memory", "write_weights", "erase", "add"),
    "dnc_precedence": ("precedence", "write_weights"),
    "dnc_link": ("link", "precedence", "write_weights"),
    "dnc_directional_weights": ("link", "read_weights"),
    "dnc_read_weighting": ("backward", "content", "forward", "read_modes"),
}


@pytest.mark.parametrize("name", sorted(CALLS))
@pytest.mark.parametrize("impl", ["torch", "keras"])
def test_each_dnc_function_matches_the_reference(name: str, impl: str) -> None:
    case = _random_case(seed=len(name))
    args = [case[a] for a in CALLS[name]]
    want = getattr(ref, name)(*args)
    got = getattr(_module(impl), name)(*(_to(impl, a) for a in args))
    want, got = (want, got) if isinstance(want, tuple) else ((want,), (got,))
    for i, (g, w) in enumerate(zip(got, want)):
        g = _np(g)
        assert g.shape == w.shape, f"{impl}.{name} output {i}: shape {g.shape}, expected {w.shape}"
        assert np.allclose(g, w, atol=1e-5, rtol=1e-5), f"{impl}.{name} output {i}: max diff {np.abs(g - w).max():.2e}"


@pytest.mark.parametrize("impl", ["torch", "keras"])
def test_dnc_step_rollout_matches_the_reference(impl: str) -> None:
    B, N, W, R, T = 2, 7, 5, 2, 6
    rng = np.random.default_rng(3)
    sigmoid = lambda x: 1 / (1 + np.exp(-x))  # noqa: E731
    modes = np.exp(rng.normal(size=(T, B, R, 3)))
    interfaces = [{k: v.astype(F32) for k, v in {
        "write_key": rng.normal(size=(B, W)), "write_strength": 1 + np.abs(rng.normal(size=(B,))) * 3,
        "erase": sigmoid(rng.normal(size=(B, W))), "add": rng.normal(size=(B, W)),
        "free_gates": sigmoid(rng.normal(size=(B, R))), "allocation_gate": sigmoid(rng.normal(size=(B,))),
        "write_gate": sigmoid(rng.normal(size=(B,))), "read_keys": rng.normal(size=(B, R, W)),
        "read_strengths": 1 + np.abs(rng.normal(size=(B, R))) * 3, "read_modes": modes[t] / modes[t].sum(-1, keepdims=True),
    }.items()} for t in range(T)]
    start = ref.dnc_initial_state(B, N, W, R)
    want_state, want_reads = _run("numpy", start, interfaces)
    got_state, got_reads = _run(impl, start, interfaces)
    for t, (g, w) in enumerate(zip(got_reads, want_reads)):
        assert np.allclose(g, w, atol=1e-5), f"{impl}: reads at step {t} differ by {np.abs(g - w).max():.2e}"
    for key in want_state:
        g, w = got_state[key], want_state[key]
        assert np.allclose(g, w, atol=1e-5), f"{impl}: state[{key!r}] differs by {np.abs(g - w).max():.2e}"
    assert want_state["usage"].max() > 0.1 and np.abs(want_state["link"]).sum() > 0.1, "the rollout should write"


@pytest.mark.parametrize("impl", IMPLS)
def test_initial_state_is_empty_with_the_documented_shapes(impl: str) -> None:
    state = _np(_module(impl).dnc_initial_state(2, 5, 3, 4))
    shapes = {"memory": (2, 5, 3), "usage": (2, 5), "link": (2, 5, 5), "precedence": (2, 5),
              "write_weights": (2, 5), "read_weights": (2, 4, 5)}
    assert {k: v.shape for k, v in state.items()} == shapes
    assert all(np.all(v == 0) for v in state.values())
    with pytest.raises(ValueError, match="slots"):
        _module(impl).dnc_initial_state(2, 0, 3)


@pytest.mark.parametrize("impl", IMPLS)
def test_bad_dnc_inputs_raise_value_errors_naming_the_argument(impl: str) -> None:
    mod, c = _module(impl), _random_case()
    t = lambda *names: [_to(impl, c[n]) for n in names]  # noqa: E731
    with pytest.raises(ValueError, match=r"usage: expected \(B, M\)"):
        mod.dnc_allocation(_to(impl, c["memory"]))
    with pytest.raises(ValueError, match=r"read_weights: expected \(B, R, M\) with B=3, M=6"):
        mod.dnc_usage(*t("usage", "write_weights", "free_gates"), _to(impl, c["read_weights"][..., :4]))
    with pytest.raises(ValueError, match=r"erase: expected \(B, W\)"):
        mod.dnc_write(*t("memory", "write_weights"), _to(impl, c["erase"][:, :2]), _to(impl, c["add"]))
    with pytest.raises(ValueError, match=r"read_modes: expected \(B, R, 3\)"):
        mod.dnc_read_weighting(*t("backward", "content", "forward"), _to(impl, c["read_modes"][..., :2]))
    with pytest.raises(ValueError, match=r"link: expected \(B, M, M\)"):
        mod.dnc_link(_to(impl, c["link"][:, :, :3]), *t("precedence", "write_weights"))
    with pytest.raises(ValueError, match=r"interface: missing keys \['write_gate'\]"):
        x = {k: v for k, v in _interface(4, R=2).items() if k != "write_gate"}
        mod.dnc_step(_to(impl, ref.dnc_initial_state(1, 6, 4, 2)), _to(impl, x))
