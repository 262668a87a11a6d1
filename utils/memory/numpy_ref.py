"""NumPy reference of End-To-End Memory Networks, the NTM read head and the DNC memory.

Shapes: letters of ``utils/shapes.py``; here B batch, M memory slots (a MemN2N slot
holds a sentence, slot 0 the newest; an NTM/DNC slot is a row of the memory matrix),
J words per sentence, V vocabulary, D embedding width, K hops, W width of an NTM/DNC
memory row, R DNC read heads. Word id 0 is padding and contributes nothing.
"""
from __future__ import annotations

import numpy as np

from utils.attention.numpy_ref import masked_softmax

from . import _checks

__all__ = [
    "position_encoding",
    "embed_sentences",
    "memory_hop",
    "memn2n_forward",
    "content_addressing",
    "content_read",
    "ntm_addressing",
    "dnc_usage",
    "dnc_allocation",
    "dnc_write_weighting",
    "dnc_write",
    "dnc_precedence",
    "dnc_link",
    "dnc_directional_weights",
    "dnc_read_weighting",
    "dnc_initial_state",
    "dnc_step",
]


def position_encoding(sentence_len: int, embed_dim: int) -> np.ndarray:
    """The paper's position encoding l_kj = (1 - j/J) - (k/D)(1 - 2j/J), 1-based j, k.

    Multiplying word j's embedding by l_j before the sum makes "John saw Mary"
    and "Mary saw John" different memories (a plain bag of words cannot).
    Shapes: -> (J, D).
    """
    if int(sentence_len) < 1 or int(embed_dim) < 1:
        raise ValueError(f"sentence_len, embed_dim: expected positive ints, got {sentence_len}, {embed_dim}")
    J, D = int(sentence_len), int(embed_dim)
    j = np.arange(1, J + 1, dtype=np.float64)[:, None]  # (J, 1)
    k = np.arange(1, D + 1, dtype=np.float64)[None, :]  # (1, D)
    return ((1 - j / J) - (k / D) * (1 - 2 * j / J)).astype(np.float32)  # (J, D)


def pe_factors(sentence_len: int, embed_dim: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """PE_SCALE * l_kj split as a_j + c_k b_j: a_j = s(1 - j/J), b_j = s(2j/J - 1), c_k = k/D, s = PE_SCALE.

    The twins' MemN2N uses it to embed sentences with two matrix products (see
    ``_embed_with_tables``) instead of weighting every word vector.
    Shapes: -> a (J,), b (J,), c (D,), float32.
    """
    if int(sentence_len) < 1 or int(embed_dim) < 1:
        raise ValueError(f"sentence_len, embed_dim: expected positive ints, got {sentence_len}, {embed_dim}")
    J, D = int(sentence_len), int(embed_dim)
    j = np.arange(1, J + 1, dtype=np.float64)
    a, b, c = PE_SCALE * (1 - j / J), PE_SCALE * (2 * j / J - 1), np.arange(1, D + 1, dtype=np.float64) / D
    return a.astype(np.float32), b.astype(np.float32), c.astype(np.float32)


def word_bag_weights(sentence_len: int, embed_dim: int, position_encoding: bool) -> tuple[np.ndarray, np.ndarray | None]:
    """The per-position weights of the twins' word bags, and the factor of the second bag.

    With PE: rows a and b of ``pe_factors`` and its c (a sentence's vector is
    bag_a E + c * bag_b E); without: one row of ones and no factor (a plain bag of words).
    P = 2 with position encoding, else 1.
    Shapes: -> weights (P, J) float32, c (D,) float32 or None.
    """
    if not position_encoding:
        return np.ones((1, int(sentence_len)), np.float32), None
    a, b, c = pe_factors(sentence_len, embed_dim)
    return np.stack([a, b]), c


_pe_matrix = position_encoding  # memn2n_forward has an argument of the same name

# The model weighs words by PE_SCALE * l_j. The authors' code (MemN2N-babi-matlab) uses
# 1 + 4 (k - (D+1)/2) (j - (J+1)/2) / (D J), which is twice the paper's l_kj (centred on
# the middle word instead of half a word off). The factor is not cosmetic: with the
# paper's printed scale every memory and the question are half as long, the first
# scores four times smaller, and plain SGD stayed on the 50% plateau of bAbI task 16.
PE_SCALE = 2.0


def embed_sentences(words: np.ndarray, embedding: np.ndarray, encoding: np.ndarray | None = None) -> np.ndarray:
    """Sum of word embeddings per sentence, each weighted by ``encoding`` (or 1: bag of words).

    Shapes: words (..., J) int, embedding (V, D), encoding (J, D) or None -> (..., D).
    """
    shape = _checks.shape_of(words)
    _checks.check_encoding(shape, embedding, encoding)
    vectors = np.asarray(embedding)[words]  # (..., J, D)
    vectors = vectors * (np.asarray(words) != 0)[..., None]  # padding adds nothing
    if encoding is not None:
        vectors = vectors * encoding
    return vectors.sum(axis=-2)  # (..., D)


def memory_hop(
    u: np.ndarray, memory_in: np.ndarray, memory_out: np.ndarray, mask: np.ndarray | None = None, linear: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """One hop: p = softmax(m_i . u) over the memories, o = sum_i p_i c_i.

    ``linear=True`` drops the softmax (p = m_i . u): the linear-start phase.
    Shapes: u (B, D), memory_in (B, M, D), memory_out (B, M, D), mask (B, M)
    -> o (B, D), p (B, M).
    """
    _checks.check_hop(u, memory_in, memory_out, mask)
    scores = np.einsum("bmd,bd->bm", memory_in, u)  # (B, M)
    if linear:
        p = scores if mask is None else np.where(mask, scores, 0.0)
    else:
        p = masked_softmax(scores, mask)
    o = np.einsum("bm,bmd->bd", p, memory_out)  # (B, D)
    return o, p


def memn2n_forward(
    stories: np.ndarray,
    queries: np.ndarray,
    embeddings: np.ndarray,
    temporal: np.ndarray | None = None,
    position_encoding: bool = True,
    linear: bool = False,
    mask_empty: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """MemN2N with adjacent weight tying: K = len(embeddings) - 1 hops.

    u^1 = B q; for k = 1..K: m_i = A^k x_i + T_A^k(i), c_i = C^k x_i + T_C^k(i),
    (o^k, p^k) = hop(u^k, m, c), u^{k+1} = u^k + o^k; logits = u^{K+1} W^T.
    With ``position_encoding`` a sentence is sum_j PE_SCALE * l_j * (A x_j).
    An empty slot (no words) is the zero vector, without a temporal term, and it
    takes part in the softmax with score 0, as in the authors' code: attention can
    rest on "nothing" (this matters for yes/no questions). ``mask_empty=True``
    gives empty slots no weight instead.
    Shapes: stories (B, M, J) int, queries (B, J) int, embeddings (K+1, V, D),
    temporal (K+1, >=M, D) or None -> logits (B, V), attention (B, K, M).
    """
    s, q, e = _checks.check_model_weights(stories, queries, embeddings, temporal)
    M = s[1]
    pe_story = PE_SCALE * _pe_matrix(s[2], e[2]) if position_encoding else None
    pe_query = PE_SCALE * _pe_matrix(q[1], e[2]) if position_encoding else None
    used = (np.asarray(stories) != 0).any(axis=-1)  # (B, M) slots that hold a sentence
    mask = used if mask_empty else None
    u = embed_sentences(queries, embeddings[0], pe_query)  # (B, D)
    memories = [embed_sentences(stories, embeddings[k], pe_story) for k in range(e[0])]  # K+1 x (B, M, D)
    if temporal is not None:  # time only where there is a sentence
        memories = [m + temporal[k][:M] * used[..., None] for k, m in enumerate(memories)]
    attention = []
    for hop in range(e[0] - 1):
        o, p = memory_hop(u, memories[hop], memories[hop + 1], mask, linear)
        u = u + o  # the controller update u^{k+1} = u^k + o^k
        attention.append(p)
    logits = u @ embeddings[-1].T  # (B, V)
    return logits, np.stack(attention, axis=1)  # (B, K, M)


LAYERWISE_WEIGHTS = ("A", "B", "C", "W", "H")


def memn2n_layerwise(
    stories: np.ndarray, queries: np.ndarray, weights: dict, hops: int, linear: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """MemN2N with layer-wise (RNN-like) weight tying, Sukhbaatar et al. (2015) Sec. 2.2: one A and one C for every hop.

    u^1 = B q; for k = 1..K: m_i = A x_i + T_A(i), c_i = C x_i + T_C(i), (o^k, p^k) = hop(u^k, m, c),
    u^{k+1} = H u^k + o^k; logits = W u^{K+1}. Words weighted by PE_SCALE * l_j; an empty slot is the
    zero vector without a temporal term (score 0, as in ``memn2n_forward``). Assignment 3 asks for it
    (a find-and-fix) and its tests compare with it; the twins' MemN2N is adjacent-tied, so it has no
    twin and stays out of ``__all__``.
    Shapes: stories (B, M, J) int, queries (B, J) int; weights: "A", "B", "C", "W" (V, D), "H" (D, D),
    and "T_A", "T_C" (>=M, D) for temporal encoding -> logits (B, V), attention (B, K, M).
    """
    missing = [k for k in LAYERWISE_WEIGHTS if k not in weights]
    if missing or ("T_A" in weights) != ("T_C" in weights):
        raise ValueError(f"weights: expected the keys {LAYERWISE_WEIGHTS} and either both or neither of "
                         f"'T_A', 'T_C', got {sorted(weights)}")
    s = _checks.check_ids("stories", stories, 3, "(B, M, J)")
    q = _checks.check_ids("queries", queries, 2, "(B, J)")
    if q[0] != s[0]:
        raise ValueError(f"queries: expected (B, J) with B={s[0]} like stories {s}, got {q}")
    e = np.shape(weights["A"])
    expected = {k: e for k in "ABCW"} | {"H": (e[-1], e[-1])}
    expected |= {k: (max(s[1], np.shape(weights[k])[0]), e[-1]) for k in ("T_A", "T_C") if k in weights}
    for key, shape in expected.items():
        if len(e) != 2 or np.shape(weights[key]) != shape:
            raise ValueError(f"weights[{key!r}]: expected {shape} (V, D from weights['A'], M >= {s[1]} slots), "
                             f"got shape {np.shape(weights[key])}")
    if int(hops) < 1:
        raise ValueError(f"hops: expected a positive int, got {hops}")
    M = s[1]
    pe_story = PE_SCALE * _pe_matrix(s[2], e[1])
    pe_query = PE_SCALE * _pe_matrix(q[1], e[1])
    used = (np.asarray(stories) != 0).any(axis=-1)[..., None]  # (B, M, 1) slots that hold a sentence
    m = embed_sentences(stories, weights["A"], pe_story)  # (B, M, D), the same at every hop
    c = embed_sentences(stories, weights["C"], pe_story)  # (B, M, D)
    if "T_A" in weights:
        m = m + np.asarray(weights["T_A"])[:M] * used
        c = c + np.asarray(weights["T_C"])[:M] * used
    u = embed_sentences(queries, weights["B"], pe_query)  # (B, D)
    attention = []
    for _ in range(int(hops)):
        o, p = memory_hop(u, m, c, None, linear)
        u = u @ np.asarray(weights["H"]).T + o  # u^{k+1} = H u^k + o^k
        attention.append(p)
    return u @ np.asarray(weights["W"]).T, np.stack(attention, axis=1)  # (B, V), (B, K, M)


def content_addressing(memory: np.ndarray, key: np.ndarray, strength: float | np.ndarray = 1.0) -> np.ndarray:
    """NTM/DNC content weights: softmax over rows of strength * cosine(key, row).

    Shapes: memory (B, M, W), key (B, W), strength number or (B,) -> weights (B, M).
    """
    _checks.check_content(memory, key, strength)
    dots = np.einsum("bnw,bw->bn", memory, key)  # (B, M)
    norms = np.linalg.norm(memory, axis=-1) * np.linalg.norm(key, axis=-1)[:, None]  # (B, M)
    cosine = dots / np.maximum(norms, 1e-8)
    beta = np.reshape(np.asarray(strength, dtype=cosine.dtype), (-1, 1))  # (B or 1, 1)
    return masked_softmax(beta * cosine)


def content_read(
    memory: np.ndarray, key: np.ndarray, strength: float | np.ndarray = 1.0
) -> tuple[np.ndarray, np.ndarray]:
    """The read head of an NTM/DNC addressing by content: r = sum_i w_i M_i.

    Shapes: memory (B, M, W), key (B, W), strength number or (B,)
    -> read (B, W), weights (B, M).
    """
    weights = content_addressing(memory, key, strength)  # (B, M)
    return np.einsum("bn,bnw->bw", weights, memory), weights


def ntm_addressing(
    content_weights: np.ndarray,
    previous_weights: np.ndarray,
    gate: np.ndarray,
    shift: np.ndarray,
    sharpening: np.ndarray,
) -> np.ndarray:
    """The NTM head's location step after the content lookup: interpolate, shift, sharpen.

    Graves, Wayne and Danihelka (2014), Sec. 3.3: w^g = g w^c + (1 - g) w_{t-1};
    then a circular shift by -1, 0 or +1 rows with the probabilities ``shift``
    (the move +1 takes the weight on row i to row i + 1, and the last row's to
    row 0); then w_i = (w~_i)^gamma / sum_j (w~_j)^gamma with gamma >= 1.
    Shapes: content_weights, previous_weights (B, M); gate (B,); shift (B, 3), the
    probabilities of the moves -1, 0, +1; sharpening (B,) -> weights (B, M).
    """
    _checks.check_ntm(content_weights, previous_weights, gate, shift, sharpening)
    wc, wp = np.asarray(content_weights, dtype=float), np.asarray(previous_weights, dtype=float)
    g, s, gamma = (np.asarray(x, dtype=float) for x in (gate, shift, sharpening))
    w = g[:, None] * wc + (1 - g[:, None]) * wp  # (B, M): interpolate
    w = s[:, :1] * np.roll(w, -1, axis=-1) + s[:, 1:2] * w + s[:, 2:] * np.roll(w, 1, axis=-1)  # (B, M): shift
    w = w ** gamma[:, None]  # sharpen
    return w / w.sum(axis=-1, keepdims=True)


# ----------------------------------------------------------------------------- DNC memory
# The memory of the Differentiable Neural Computer (Graves et al. 2016, Nature 538:471-476,
# "Methods"), without a controller: every function takes the interface values a
# controller would emit. Shapes: B batch, M memory slots (rows), W row width, R read heads.
# Time runs t-1 -> t: "previous" arguments come from the last step.


def dnc_usage(
    usage: np.ndarray, write_weights: np.ndarray, free_gates: np.ndarray, read_weights: np.ndarray
) -> np.ndarray:
    """Usage u_t = (u_{t-1} + w^w_{t-1} - u_{t-1} * w^w_{t-1}) * psi_t, psi_t = prod_i (1 - f^i_t w^{r,i}_{t-1}).

    A write raises a slot's usage towards 1; a read head with free gate f = 1 releases the
    slots it read last step (the retention vector psi).
    Shapes: usage (B, M), write_weights (B, M) of the last step, free_gates (B, R),
    read_weights (B, R, M) of the last step -> (B, M).
    """
    _checks.check_dnc(usage=(usage, "B M"), write_weights=(write_weights, "B M"),
                      free_gates=(free_gates, "B R"), read_weights=(read_weights, "B R M"))
    retention = np.prod(1 - free_gates[:, :, None] * read_weights, axis=1)  # (B, M)
    return (usage + write_weights - usage * write_weights) * retention


def dnc_allocation(usage: np.ndarray) -> np.ndarray:
    """Allocation weighting: a[phi_j] = (1 - u[phi_j]) prod_{i<j} u[phi_i], phi = slots sorted by usage.

    The least-used slot gets 1 - its usage; each next slot only what the ones before it
    leave (a fully used slot, u = 1, gets nothing). Ties go to the lower slot index.
    Shapes: usage (B, M) -> (B, M).
    """
    _checks.check_dnc(usage=(usage, "B M"))
    order = np.argsort(usage, axis=-1, kind="stable")  # (B, M) free list: least used first
    sorted_usage = np.take_along_axis(usage, order, axis=-1)  # (B, M)
    before = np.cumprod(sorted_usage, axis=-1)  # (B, M) prod_{i<=j}
    before = np.concatenate([np.ones_like(before[:, :1]), before[:, :-1]], axis=-1)  # exclusive: prod_{i<j}
    sorted_allocation = (1 - sorted_usage) * before  # (B, M) in free-list order
    return np.take_along_axis(sorted_allocation, np.argsort(order, axis=-1), axis=-1)  # back to slot order


def dnc_write_weighting(
    content_weights: np.ndarray, allocation: np.ndarray, allocation_gate: np.ndarray, write_gate: np.ndarray
) -> np.ndarray:
    """Write weighting w^w = g^w (g^a a + (1 - g^a) c^w).

    The allocation gate g^a chooses between a fresh slot (a) and a slot found by content
    (c^w, to update it); the write gate g^w = 0 writes nothing.
    Shapes: content_weights (B, M), allocation (B, M), allocation_gate (B,), write_gate (B,) -> (B, M).
    """
    _checks.check_dnc(content_weights=(content_weights, "B M"), allocation=(allocation, "B M"),
                      allocation_gate=(allocation_gate, "B"), write_gate=(write_gate, "B"))
    g_a, g_w = allocation_gate[:, None], write_gate[:, None]  # (B, 1)
    return g_w * (g_a * allocation + (1 - g_a) * content_weights)


def dnc_write(memory: np.ndarray, write_weights: np.ndarray, erase: np.ndarray, add: np.ndarray) -> np.ndarray:
    """Erase, then add: M_t = M_{t-1} * (1 - w^w e^T) + w^w v^T.

    Row i keeps (1 - w_i e) of itself and gains w_i v: with w_i = 1 and e = 1 the old row
    is replaced by v; with e = 0 the write adds to it.
    Shapes: memory (B, M, W), write_weights (B, M), erase (B, W) in [0, 1], add (B, W) -> (B, M, W).
    """
    _checks.check_dnc(memory=(memory, "B M W"), write_weights=(write_weights, "B M"),
                      erase=(erase, "B W"), add=(add, "B W"))
    w = write_weights[:, :, None]  # (B, M, 1)
    return memory * (1 - w * erase[:, None, :]) + w * add[:, None, :]


def dnc_precedence(precedence: np.ndarray, write_weights: np.ndarray) -> np.ndarray:
    """Precedence p_t = (1 - sum_i w^w_t[i]) p_{t-1} + w^w_t: where the last write went.

    Shapes: precedence (B, M), write_weights (B, M) of this step -> (B, M).
    """
    _checks.check_dnc(precedence=(precedence, "B M"), write_weights=(write_weights, "B M"))
    return (1 - write_weights.sum(-1, keepdims=True)) * precedence + write_weights


def dnc_link(link: np.ndarray, precedence: np.ndarray, write_weights: np.ndarray) -> np.ndarray:
    """Temporal links L_t[i, j] = (1 - w_i - w_j) L_{t-1}[i, j] + w_i p_{t-1}[j], diagonal 0.

    L[i, j] near 1 says "row i was written right after row j". ``precedence`` is the
    previous step's p_{t-1} (the rows written before this write), ``write_weights`` this step's.
    Shapes: link (B, M, M), precedence (B, M), write_weights (B, M) -> (B, M, M).
    """
    _checks.check_dnc(link=(link, "B M M"), precedence=(precedence, "B M"), write_weights=(write_weights, "B M"))
    w_i = write_weights[:, :, None]  # (B, M, 1)
    w_j = write_weights[:, None, :]  # (B, 1, M)
    new = (1 - w_i - w_j) * link + w_i * precedence[:, None, :]  # (B, M, M)
    return new * (1 - np.eye(link.shape[-1], dtype=new.dtype))  # no self-links


def dnc_directional_weights(link: np.ndarray, read_weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Forward f^i = L w^{r,i} (the rows written after) and backward b^i = L^T w^{r,i} (before).

    Shapes: link (B, M, M), read_weights (B, R, M) of the last step -> forward (B, R, M), backward (B, R, M).
    """
    _checks.check_dnc(link=(link, "B M M"), read_weights=(read_weights, "B R M"))
    forward = np.einsum("bij,brj->bri", link, read_weights)  # (B, R, M)
    backward = np.einsum("bji,brj->bri", link, read_weights)  # (B, R, M)
    return forward, backward


def dnc_read_weighting(
    backward: np.ndarray, content: np.ndarray, forward: np.ndarray, read_modes: np.ndarray
) -> np.ndarray:
    """Read weighting w^{r,i} = pi^i_1 b^i + pi^i_2 c^{r,i} + pi^i_3 f^i (modes in the paper's order).

    Shapes: backward, content, forward (B, R, M), read_modes (B, R, 3) summing to 1 -> (B, R, M).
    """
    _checks.check_dnc(backward=(backward, "B R M"), content=(content, "B R M"), forward=(forward, "B R M"),
                      read_modes=(read_modes, "B R 3"))
    pi = read_modes[..., None]  # (B, R, 3, 1)
    return pi[:, :, 0] * backward + pi[:, :, 1] * content + pi[:, :, 2] * forward


def dnc_initial_state(batch_size: int, slots: int, width: int, read_heads: int = 1) -> dict[str, np.ndarray]:
    """An empty DNC memory: every array of the state at zero (float32).

    Shapes: -> memory (B, M, W), usage (B, M), link (B, M, M), precedence (B, M),
    write_weights (B, M), read_weights (B, R, M).
    """
    B, N, W, R = (int(v) for v in (batch_size, slots, width, read_heads))
    if min(B, N, W, R) < 1:
        raise ValueError(f"batch_size, slots, width, read_heads: expected positive ints, got {B}, {N}, {W}, {R}")
    zeros = lambda *shape: np.zeros(shape, dtype=np.float32)  # noqa: E731
    return {"memory": zeros(B, N, W), "usage": zeros(B, N), "link": zeros(B, N, N),
            "precedence": zeros(B, N), "write_weights": zeros(B, N), "read_weights": zeros(B, R, N)}


def dnc_step(
    state: dict[str, np.ndarray], interface: dict[str, np.ndarray]
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """One time step of the DNC memory, in the paper's order: free, allocate, write, link, read.

    ``interface`` holds what a controller would emit: write_key (B, W), write_strength (B,),
    erase (B, W), add (B, W), free_gates (B, R), allocation_gate (B,), write_gate (B,),
    read_keys (B, R, W), read_strengths (B, R), read_modes (B, R, 3) as (backward, content, forward).
    Shapes: state as from :func:`dnc_initial_state` -> (the new state, reads (B, R, W)).
    """
    _checks.check_dnc_dicts(state, interface)
    s, x = state, interface
    # 1. usage: last step's write raises it, free gates release what the heads read last step
    usage = dnc_usage(s["usage"], s["write_weights"], x["free_gates"], s["read_weights"])
    # 2-3. where to write: a fresh slot (allocation) or a slot found by content, gated
    write_content = content_addressing(s["memory"], x["write_key"], x["write_strength"])  # (B, M)
    write_weights = dnc_write_weighting(write_content, dnc_allocation(usage), x["allocation_gate"], x["write_gate"])
    memory = dnc_write(s["memory"], write_weights, x["erase"], x["add"])  # (B, M, W)
    # 4. the order of writes: links from the previous precedence, then the new precedence
    link = dnc_link(s["link"], s["precedence"], write_weights)  # (B, M, M)
    precedence = dnc_precedence(s["precedence"], write_weights)
    # 5. read: each head mixes backward, content and forward weightings
    forward, backward = dnc_directional_weights(link, s["read_weights"])  # (B, R, M) each
    R = _checks.shape_of(x["read_keys"])[1]
    content = np.stack([content_addressing(memory, x["read_keys"][:, r], x["read_strengths"][:, r])
                        for r in range(R)], axis=1)  # (B, R, M)
    read_weights = dnc_read_weighting(backward, content, forward, x["read_modes"])  # (B, R, M)
    reads = np.einsum("brn,bnw->brw", read_weights, memory)  # (B, R, W)
    new_state = {"memory": memory, "usage": usage, "link": link, "precedence": precedence,
                 "write_weights": write_weights, "read_weights": read_weights}
    return new_state, reads
