"""Keras 3 twin of the memory-network and DNC-memory code (same names and signatures as torch_impl).

Written with ``keras.ops`` and run on the TensorFlow backend in the course.
Shapes: letters of ``utils/shapes.py``; here B batch, M memory slots (a MemN2N slot
holds a sentence, slot 0 the newest; an NTM/DNC slot is a row of the memory matrix),
J words per sentence, V vocabulary, D embedding width, K hops, W width of an NTM/DNC
memory row, R DNC read heads, N examples. Word id 0 is padding and contributes
nothing.
"""
from __future__ import annotations

from typing import Any

from utils.runtime import prepare_tensorflow_env

prepare_tensorflow_env()

import keras  # noqa: E402
from keras import ops  # noqa: E402

from utils.attention.keras_impl import masked_softmax  # noqa: E402

import numpy as np  # noqa: E402

from . import _checks  # noqa: E402
from .numpy_ref import PE_SCALE, word_bag_weights  # noqa: E402  (the authors' code weighs words by twice the paper's l_kj)
from .training import TrainConfig, initial_weights, noisy_batch, schedule, trim  # noqa: E402
from ..training import train_loop  # noqa: E402

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
    "MemN2N",
    "train_memn2n",
    "predict_memn2n",
]

Tensor = Any  # a Keras / TensorFlow tensor, or anything ops.convert_to_tensor takes


def position_encoding(sentence_len: int, embed_dim: int) -> Tensor:
    """The paper's position encoding l_kj = (1 - j/J) - (k/D)(1 - 2j/J), 1-based j, k.

    Shapes: -> (J, D).
    """
    if int(sentence_len) < 1 or int(embed_dim) < 1:
        raise ValueError(f"sentence_len, embed_dim: expected positive ints, got {sentence_len}, {embed_dim}")
    J, D = int(sentence_len), int(embed_dim)
    j = ops.expand_dims(ops.arange(1, J + 1, dtype="float64"), 1)  # (J, 1)
    k = ops.expand_dims(ops.arange(1, D + 1, dtype="float64"), 0)  # (1, D)
    return ops.cast((1 - j / J) - (k / D) * (1 - 2 * j / J), "float32")  # (J, D)


_pe_matrix = position_encoding  # memn2n_forward has an argument of the same name


def _word_bags(words: Tensor, vocab_size: int, weights: np.ndarray) -> Tensor:
    """bags[p, ..., v] = sum_j weights[p, j] [words_j = v], padding (id 0) left out.

    Shapes: words (..., J) int, weights (P, J) -> (P, ..., V).
    """
    J, V, P = _checks.shape_of(words)[-1], vocab_size, len(weights)
    flat = ops.reshape(words, (-1, J))  # (Ns, J)
    S = ops.shape(flat)[0]
    w = ops.convert_to_tensor(np.asarray(weights, "float32"))[:, None, :] * ops.cast(ops.not_equal(flat, 0), "float32")  # (P, Ns, J)
    slot = flat + V * ops.reshape(ops.arange(P * S, dtype=flat.dtype), (P, -1, 1))  # (P, Ns, J): where each word counts
    bags = ops.segment_sum(ops.reshape(w, (-1,)), ops.reshape(slot, (-1,)), num_segments=P * S * V)
    return ops.reshape(bags, (P, *ops.shape(words)[:-1], V))


def _embed_with_tables(words: Tensor, tables: Tensor, position_encoding: bool) -> Tensor:
    """``embed_sentences`` for several embedding tables at once, as matrix products.

    With PE, PE_SCALE * l_kj = a_j + c_k b_j (``pe_factors``), so a sentence's vector is
    bag_a E + c * (bag_b E), where bag_a, bag_b weigh each word of the vocabulary by the
    a_j, b_j of its positions: no (..., J, D) tensor of word vectors is built, which
    makes MemN2N's training step about twice as fast on a CPU. Equal to
    ``embed_sentences`` with ``PE_SCALE * position_encoding`` (up to float rounding).
    Shapes: words (..., J) int, tables (T, V, D) -> (T, ..., D).
    """
    T, V, D = _checks.shape_of(tables)
    J = _checks.shape_of(words)[-1]
    flat = ops.reshape(ops.transpose(tables, (1, 0, 2)), (V, T * D))  # (V, T*D): every table side by side
    weights, c = word_bag_weights(J, D, position_encoding)  # (P, J), (D,) or None
    bags = _word_bags(words, V, weights)  # (P, ..., V)
    # 2-D products, one per bag: a broadcast batched matmul would sum a (V, T*D) gradient per
    # sentence, and slicing one product's output costs TensorFlow a slow gradient
    parts = [ops.matmul(ops.reshape(bags[i], (-1, V)), flat) for i in range(len(weights))]  # P x (Ns, T*D)
    out = parts[0] if c is None else parts[0] + parts[1] * np.tile(c, T)  # (Ns, T*D)
    out = ops.reshape(out, (*ops.shape(words)[:-1], T, D))  # a traced step's open sizes stay open
    return ops.moveaxis(out, -2, 0)  # (T, ..., D)


def embed_sentences(words: Tensor, embedding: Tensor, encoding: Tensor | None = None) -> Tensor:
    """Sum of word embeddings per sentence, each weighted by ``encoding`` (or 1: bag of words).

    Shapes: words (..., J) int, embedding (V, D), encoding (J, D) or None -> (..., D).
    """
    _checks.check_encoding(_checks.shape_of(words), embedding, encoding)
    vectors = ops.take(embedding, words, axis=0)  # (..., J, D)
    vectors = vectors * ops.expand_dims(ops.cast(ops.not_equal(words, 0), vectors.dtype), -1)  # padding adds nothing
    if encoding is not None:
        vectors = vectors * encoding
    return ops.sum(vectors, axis=-2)  # (..., D)


def memory_hop(
    u: Tensor, memory_in: Tensor, memory_out: Tensor, mask: Tensor | None = None, linear: bool = False
) -> tuple[Tensor, Tensor]:
    """One hop: p = softmax(m_i . u) over the memories, o = sum_i p_i c_i.

    ``linear=True`` drops the softmax (p = m_i . u): the linear-start phase.
    Shapes: u (B, D), memory_in (B, M, D), memory_out (B, M, D), mask (B, M)
    -> o (B, D), p (B, M).
    """
    _checks.check_hop(u, memory_in, memory_out, mask)
    scores = ops.einsum("bmd,bd->bm", memory_in, u)  # (B, M)
    if linear:
        p = scores if mask is None else scores * ops.cast(mask, scores.dtype)
    else:
        p = masked_softmax(scores, mask)
    o = ops.einsum("bm,bmd->bd", p, memory_out)  # (B, D)
    return o, p


def memn2n_forward(
    stories: Tensor,
    queries: Tensor,
    embeddings: Tensor,
    temporal: Tensor | None = None,
    position_encoding: bool = True,
    linear: bool = False,
    mask_empty: bool = False,
) -> tuple[Tensor, Tensor]:
    """MemN2N with adjacent weight tying: K = len(embeddings) - 1 hops.

    u^1 = B q; for k = 1..K: m_i = A^k x_i + T_A^k(i), c_i = C^k x_i + T_C^k(i),
    (o^k, p^k) = hop(u^k, m, c), u^{k+1} = u^k + o^k; logits = u^{K+1} W^T.
    With ``position_encoding`` a sentence is sum_j PE_SCALE * l_j * (A x_j).
    An empty slot is the zero vector (no temporal term) and takes part in the
    softmax with score 0, as in the authors' code; ``mask_empty=True`` gives it
    no weight instead.
    Shapes: stories (B, M, J) int, queries (B, J) int, embeddings (K+1, V, D),
    temporal (K+1, >=M, D) or None -> logits (B, V), attention (B, K, M).
    """
    s, q, e = _checks.check_model_weights(stories, queries, embeddings, temporal)
    M = s[1] if s[1] is not None else ops.shape(stories)[1]  # dynamic inside a traced training step
    used = ops.any(ops.not_equal(stories, 0), axis=-1)  # (B, M) slots that hold a sentence
    mask = used if mask_empty else None
    # embed_sentences with PE_SCALE * position_encoding, computed as matrix products
    u = _embed_with_tables(queries, embeddings[:1], position_encoding)[0]  # (B, D)
    memories = _embed_with_tables(stories, embeddings, position_encoding)  # (K+1, B, M, D)
    if temporal is not None:  # time only where there is a sentence
        slot = ops.expand_dims(ops.cast(used, memories.dtype), -1)  # (B, M, 1)
        memories = memories + ops.expand_dims(temporal[:, :M], 1) * slot  # (K+1, B, M, D)
    memories = ops.unstack(memories, e[0], axis=0)  # K+1 x (B, M, D); slicing each would cost a slow gradient
    attention = []
    for hop in range(e[0] - 1):
        o, p = memory_hop(u, memories[hop], memories[hop + 1], mask, linear)
        u = u + o  # the controller update u^{k+1} = u^k + o^k
        attention.append(p)
    logits = ops.matmul(u, ops.transpose(embeddings[-1]))  # (B, V)
    return logits, ops.stack(attention, axis=1)  # (B, K, M)


def content_addressing(memory: Tensor, key: Tensor, strength: float | Tensor = 1.0) -> Tensor:
    """NTM/DNC content weights: softmax over rows of strength * cosine(key, row).

    Shapes: memory (B, M, W), key (B, W), strength number or (B,) -> weights (B, M).
    """
    _checks.check_content(memory, key, strength)
    memory, key = ops.convert_to_tensor(memory), ops.convert_to_tensor(key)
    dots = ops.einsum("bnw,bw->bn", memory, key)  # (B, M)
    norms = ops.norm(memory, axis=-1) * ops.expand_dims(ops.norm(key, axis=-1), -1)  # (B, M)
    cosine = dots / ops.maximum(norms, 1e-8)
    beta = ops.reshape(ops.cast(strength, cosine.dtype), (-1, 1))  # (B or 1, 1)
    return masked_softmax(beta * cosine)


def content_read(memory: Tensor, key: Tensor, strength: float | Tensor = 1.0) -> tuple[Tensor, Tensor]:
    """The read head of an NTM/DNC addressing by content: r = sum_i w_i M_i.

    Shapes: memory (B, M, W), key (B, W), strength number or (B,)
    -> read (B, W), weights (B, M).
    """
    weights = content_addressing(memory, key, strength)  # (B, M)
    return ops.einsum("bn,bnw->bw", weights, ops.convert_to_tensor(memory)), weights


def ntm_addressing(
    content_weights: Tensor, previous_weights: Tensor, gate: Tensor, shift: Tensor, sharpening: Tensor
) -> Tensor:
    """The NTM head's location step after the content lookup: interpolate, shift, sharpen.

    Graves, Wayne and Danihelka (2014), Sec. 3.3: w^g = g w^c + (1 - g) w_{t-1};
    then a circular shift by -1, 0 or +1 rows with the probabilities ``shift``
    (the move +1 takes the weight on row i to row i + 1, and the last row's to
    row 0); then w_i = (w~_i)^gamma / sum_j (w~_j)^gamma with gamma >= 1.
    Shapes: content_weights, previous_weights (B, M); gate (B,); shift (B, 3), the
    probabilities of the moves -1, 0, +1; sharpening (B,) -> weights (B, M).
    """
    _checks.check_ntm(content_weights, previous_weights, gate, shift, sharpening)
    g = gate[:, None]  # (B, 1)
    w = g * content_weights + (1 - g) * previous_weights  # (B, M): interpolate
    w = shift[:, :1] * ops.roll(w, -1, axis=-1) + shift[:, 1:2] * w + shift[:, 2:] * ops.roll(w, 1, axis=-1)  # shift
    w = w ** sharpening[:, None]  # sharpen
    return w / ops.sum(w, axis=-1, keepdims=True)


# ----------------------------------------------------------------------------- DNC memory
# The memory of the Differentiable Neural Computer (Graves et al. 2016, Nature 538:471-476,
# "Methods"), without a controller: every function takes the interface values a
# controller would emit. Shapes: B batch, M memory slots (rows), W row width, R read heads.
# Time runs t-1 -> t: "previous" arguments come from the last step.


def dnc_usage(
    usage: Tensor, write_weights: Tensor, free_gates: Tensor, read_weights: Tensor
) -> Tensor:
    """Usage u_t = (u_{t-1} + w^w_{t-1} - u_{t-1} * w^w_{t-1}) * psi_t, psi_t = prod_i (1 - f^i_t w^{r,i}_{t-1}).

    A write raises a slot's usage towards 1; a read head with free gate f = 1 releases the
    slots it read last step (the retention vector psi).
    Shapes: usage (B, M), write_weights (B, M) of the last step, free_gates (B, R),
    read_weights (B, R, M) of the last step -> (B, M).
    """
    _checks.check_dnc(usage=(usage, "B M"), write_weights=(write_weights, "B M"),
                      free_gates=(free_gates, "B R"), read_weights=(read_weights, "B R M"))
    retention = ops.prod(1 - ops.expand_dims(free_gates, -1) * read_weights, axis=1)  # (B, M)
    return (usage + write_weights - usage * write_weights) * retention


def dnc_allocation(usage: Tensor) -> Tensor:
    """Allocation weighting: a[phi_j] = (1 - u[phi_j]) prod_{i<j} u[phi_i], phi = slots sorted by usage.

    The least-used slot gets 1 - its usage; each next slot only what the ones before it
    leave (a fully used slot, u = 1, gets nothing). Ties go to the lower slot index.
    Shapes: usage (B, M) -> (B, M).
    """
    _checks.check_dnc(usage=(usage, "B M"))
    # tf.argsort is stable (equal usages keep slot order), like the twins' stable sorts
    order = ops.argsort(usage, axis=-1)  # (B, M) free list: least used first
    sorted_usage = ops.take_along_axis(usage, order, axis=-1)  # (B, M)
    before = ops.cumprod(sorted_usage, axis=-1)  # (B, M) prod_{i<=j}
    before = ops.concatenate([ops.ones_like(before[:, :1]), before[:, :-1]], axis=-1)  # exclusive: prod_{i<j}
    sorted_allocation = (1 - sorted_usage) * before  # (B, M) in free-list order
    return ops.take_along_axis(sorted_allocation, ops.argsort(order, axis=-1), axis=-1)  # back to slot order


def dnc_write_weighting(
    content_weights: Tensor, allocation: Tensor, allocation_gate: Tensor, write_gate: Tensor
) -> Tensor:
    """Write weighting w^w = g^w (g^a a + (1 - g^a) c^w).

    The allocation gate g^a chooses between a fresh slot (a) and a slot found by content
    (c^w, to update it); the write gate g^w = 0 writes nothing.
    Shapes: content_weights (B, M), allocation (B, M), allocation_gate (B,), write_gate (B,) -> (B, M).
    """
    _checks.check_dnc(content_weights=(content_weights, "B M"), allocation=(allocation, "B M"),
                      allocation_gate=(allocation_gate, "B"), write_gate=(write_gate, "B"))
    g_a, g_w = ops.expand_dims(allocation_gate, -1), ops.expand_dims(write_gate, -1)  # (B, 1)
    return g_w * (g_a * allocation + (1 - g_a) * content_weights)


def dnc_write(memory: Tensor, write_weights: Tensor, erase: Tensor, add: Tensor) -> Tensor:
    """Erase, then add: M_t = M_{t-1} * (1 - w^w e^T) + w^w v^T.

    Row i keeps (1 - w_i e) of itself and gains w_i v: with w_i = 1 and e = 1 the old row
    is replaced by v; with e = 0 the write adds to it.
    Shapes: memory (B, M, W), write_weights (B, M), erase (B, W) in [0, 1], add (B, W) -> (B, M, W).
    """
    _checks.check_dnc(memory=(memory, "B M W"), write_weights=(write_weights, "B M"),
                      erase=(erase, "B W"), add=(add, "B W"))
    w = ops.expand_dims(write_weights, -1)  # (B, M, 1)
    return memory * (1 - w * ops.expand_dims(erase, 1)) + w * ops.expand_dims(add, 1)


def dnc_precedence(precedence: Tensor, write_weights: Tensor) -> Tensor:
    """Precedence p_t = (1 - sum_i w^w_t[i]) p_{t-1} + w^w_t: where the last write went.

    Shapes: precedence (B, M), write_weights (B, M) of this step -> (B, M).
    """
    _checks.check_dnc(precedence=(precedence, "B M"), write_weights=(write_weights, "B M"))
    return (1 - ops.sum(write_weights, axis=-1, keepdims=True)) * precedence + write_weights


def dnc_link(link: Tensor, precedence: Tensor, write_weights: Tensor) -> Tensor:
    """Temporal links L_t[i, j] = (1 - w_i - w_j) L_{t-1}[i, j] + w_i p_{t-1}[j], diagonal 0.

    L[i, j] near 1 says "row i was written right after row j". ``precedence`` is the
    previous step's p_{t-1} (the rows written before this write), ``write_weights`` this step's.
    Shapes: link (B, M, M), precedence (B, M), write_weights (B, M) -> (B, M, M).
    """
    _checks.check_dnc(link=(link, "B M M"), precedence=(precedence, "B M"), write_weights=(write_weights, "B M"))
    w_i = ops.expand_dims(write_weights, -1)  # (B, M, 1)
    w_j = ops.expand_dims(write_weights, 1)  # (B, 1, M)
    new = (1 - w_i - w_j) * link + w_i * ops.expand_dims(precedence, 1)  # (B, M, M)
    return new * (1 - ops.eye(ops.shape(link)[-1], dtype=new.dtype))  # no self-links


def dnc_directional_weights(link: Tensor, read_weights: Tensor) -> tuple[Tensor, Tensor]:
    """Forward f^i = L w^{r,i} (the rows written after) and backward b^i = L^T w^{r,i} (before).

    Shapes: link (B, M, M), read_weights (B, R, M) of the last step -> forward (B, R, M), backward (B, R, M).
    """
    _checks.check_dnc(link=(link, "B M M"), read_weights=(read_weights, "B R M"))
    forward = ops.einsum("bij,brj->bri", link, read_weights)  # (B, R, M)
    backward = ops.einsum("bji,brj->bri", link, read_weights)  # (B, R, M)
    return forward, backward


def dnc_read_weighting(
    backward: Tensor, content: Tensor, forward: Tensor, read_modes: Tensor
) -> Tensor:
    """Read weighting w^{r,i} = pi^i_1 b^i + pi^i_2 c^{r,i} + pi^i_3 f^i (modes in the paper's order).

    Shapes: backward, content, forward (B, R, M), read_modes (B, R, 3) summing to 1 -> (B, R, M).
    """
    _checks.check_dnc(backward=(backward, "B R M"), content=(content, "B R M"), forward=(forward, "B R M"),
                      read_modes=(read_modes, "B R 3"))
    pi = ops.expand_dims(read_modes, -1)  # (B, R, 3, 1)
    return pi[:, :, 0] * backward + pi[:, :, 1] * content + pi[:, :, 2] * forward


def dnc_initial_state(batch_size: int, slots: int, width: int, read_heads: int = 1) -> dict[str, Tensor]:
    """An empty DNC memory: every array of the state at zero (float32).

    Shapes: -> memory (B, M, W), usage (B, M), link (B, M, M), precedence (B, M),
    write_weights (B, M), read_weights (B, R, M).
    """
    B, N, W, R = (int(v) for v in (batch_size, slots, width, read_heads))
    if min(B, N, W, R) < 1:
        raise ValueError(f"batch_size, slots, width, read_heads: expected positive ints, got {B}, {N}, {W}, {R}")
    zeros = lambda *shape: ops.zeros(shape, dtype="float32")  # noqa: E731
    return {"memory": zeros(B, N, W), "usage": zeros(B, N), "link": zeros(B, N, N),
            "precedence": zeros(B, N), "write_weights": zeros(B, N), "read_weights": zeros(B, R, N)}


def dnc_step(
    state: dict[str, Tensor], interface: dict[str, Tensor]
) -> tuple[dict[str, Tensor], Tensor]:
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
    content = ops.stack([content_addressing(memory, x["read_keys"][:, r], x["read_strengths"][:, r])
                        for r in range(R)], axis=1)  # (B, R, M)
    read_weights = dnc_read_weighting(backward, content, forward, x["read_modes"])  # (B, R, M)
    reads = ops.einsum("brn,bnw->brw", read_weights, memory)  # (B, R, W)
    new_state = {"memory": memory, "usage": usage, "link": link, "precedence": precedence,
                 "write_weights": write_weights, "read_weights": read_weights}
    return new_state, reads


class MemN2N(keras.layers.Layer):
    """End-To-End Memory Network with adjacent weight tying, PE and TE.

    Weights: ``embeddings`` (K+1, V, D) and, with temporal encoding,
    ``temporal`` (K+1, M, D), both drawn from N(0, init_std^2) as in the paper: by
    the framework's generator, or with ``seed`` by NumPy's (``initial_weights``),
    which gives the same start in both twins.
    The memory always has ``memory_size`` slots: shorter stories are padded with
    empty slots, which take part in the attention as zero vectors (see
    :func:`memn2n_forward`), unless ``mask_empty``.
    Shapes: call(stories (B, <=M, J) int, queries (B, J) int, linear)
    -> logits (B, V), attention (B, K, M).
    """

    def __init__(
        self,
        vocab_size: int,
        embed_dim: int,
        memory_size: int,
        hops: int = 3,
        position_encoding: bool = True,
        temporal_encoding: bool = True,
        init_std: float = 0.1,
        mask_empty: bool = False,
        seed: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        for name, value in (("vocab_size", vocab_size), ("embed_dim", embed_dim),
                            ("memory_size", memory_size), ("hops", hops)):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}: expected a positive int, got {value!r}")
        self.config = dict(vocab_size=vocab_size, embed_dim=embed_dim, memory_size=memory_size, hops=hops,
                           position_encoding=position_encoding, temporal_encoding=temporal_encoding,
                           init_std=init_std, mask_empty=mask_empty, seed=seed)
        self.hops, self.memory_size, self.use_pe = hops, memory_size, position_encoding
        self.mask_empty = mask_empty
        init = keras.initializers.RandomNormal(stddev=init_std)
        self.embeddings = self.add_weight(shape=(hops + 1, vocab_size, embed_dim), initializer=init, name="embeddings")
        self.temporal = (
            self.add_weight(shape=(hops + 1, memory_size, embed_dim), initializer=init, name="temporal")
            if temporal_encoding else None
        )
        if seed is not None:
            start = initial_weights(vocab_size, embed_dim, memory_size, hops, temporal_encoding, init_std, seed)
            self.embeddings.assign(start["embeddings"])
            if temporal_encoding:
                self.temporal.assign(start["temporal"])
        self.built = True  # every weight exists after construction

    def call(self, stories: Tensor, queries: Tensor, linear: bool = False) -> tuple[Tensor, Tensor]:
        M = _checks.shape_of(stories)[1]
        if M is not None and M > self.memory_size:
            raise ValueError(f"stories: expected (B, M, J) with M <= {self.memory_size}, got {_checks.shape_of(stories)}")
        if not self.mask_empty:  # every slot counts in the softmax: pad to the full memory
            pad = self.memory_size - ops.shape(stories)[1]
            stories = ops.pad(stories, [[0, 0], [0, pad], [0, 0]])  # (B, M, J)
        return memn2n_forward(stories, queries, self.embeddings, self.temporal, self.use_pe, linear, self.mask_empty)

    def get_config(self) -> dict:
        return {**super().get_config(), **self.config}


def train_memn2n(
    model: MemN2N,
    train: dict[str, np.ndarray],
    valid: dict[str, np.ndarray],
    config: TrainConfig | None = None,
    progress: bool = False,
) -> dict[str, list]:
    """Train on the paper's schedule: linear start, random time noise, lr halving.

    ``train`` and ``valid`` are :func:`utils.data.babi.vectorize` outputs. Runs in the
    course's loop (``utils.training.train_loop``); returns its history ("loss" per
    epoch, the training loss per example; "batch_loss", "lr" per step) with "valid
    loss", "valid error" and "linear" (the phase) per epoch, and leaves the model at
    the weights of the epoch with the lowest validation error.
    Shapes: stories (N, M, J), queries (N, J), answers (N,).
    """
    import tensorflow as tf

    cfg = config or TrainConfig()
    plan = schedule(cfg)  # (linear, learning rate) per epoch; checks the config
    n = len(train["queries"])
    rng = np.random.default_rng(cfg.seed)  # shuffles the batches and draws the time noise
    variables = model.trainable_variables
    # clipnorm clips each weight's gradient on its own, as the authors' code does (not one global norm)
    opt = (
        keras.optimizers.Adam(learning_rate=cfg.lr, epsilon=1e-8, clipnorm=cfg.clip_norm)
        if cfg.optimizer == "adam"
        else keras.optimizers.SGD(learning_rate=cfg.lr, clipnorm=cfg.clip_norm)
    )
    opt.build(variables)
    J = train["queries"].shape[1]
    spec = (tf.TensorSpec([None, None, J], tf.int64), tf.TensorSpec([None, J], tf.int64), tf.TensorSpec([None], tf.int64))

    def make_step(linear: bool):
        @tf.function(input_signature=spec)
        def update(s, q, a):
            with tf.GradientTape() as tape:
                logits, _ = model(s, q, linear=linear)
                # summed over the batch, as in the paper (the norm-40 clipping is tuned to it)
                loss = ops.sum(keras.losses.sparse_categorical_crossentropy(a, logits, from_logits=True))
            opt.apply_gradients(zip(tape.gradient(loss, variables), variables))
            return loss

        @tf.function(input_signature=spec)
        def evaluate(s, q, a):
            logits, _ = model(s, q, linear=linear)
            loss = ops.mean(keras.losses.sparse_categorical_crossentropy(a, logits, from_logits=True))
            return loss, ops.mean(ops.cast(ops.not_equal(ops.argmax(logits, -1), a), "float32"))

        return update, evaluate

    compiled = {True: make_step(True), False: make_step(False)}
    best = [float("inf"), None]
    valid = trim(valid)
    vs, vq, va = (ops.convert_to_tensor(valid[k]) for k in ("stories", "queries", "answers"))
    now = dict(zip(("linear", "lr"), plan[0]))  # the running epoch's phase (linear: no softmax in the hops) and rate

    def step(idx: np.ndarray, lr: float) -> float:
        opt.learning_rate.assign(lr)
        s, q, a = noisy_batch(train, idx, cfg, rng)
        return float(compiled[now["linear"]][0](s, q, a)) / len(a)

    def end(epoch: int) -> dict:
        v_loss, v_err = (float(x) for x in compiled[now["linear"]][1](vs, vq, va))
        if not now["linear"] and v_err < best[0]:
            best[:] = [v_err, [v.numpy() for v in model.weights]]
        return {"valid loss": v_loss, "valid error": v_err, "linear": now["linear"]}

    history = train_loop(step, n, len(plan), cfg.batch_size, rng, lambda i: now["lr"], progress=progress,
                         desc="MemN2N", on_epoch_start=lambda e: now.update(zip(("linear", "lr"), plan[e])), on_epoch_end=end)
    if best[1] is not None:
        for var, value in zip(model.weights, best[1]):
            var.assign(value)
    return history


def predict_memn2n(model: MemN2N, data: dict[str, np.ndarray], batch_size: int = 256) -> tuple[np.ndarray, np.ndarray]:
    """Predicted answer ids and the hop attention, as NumPy arrays.

    Shapes: data stories (N, M, J), queries (N, J) -> answers (N,), attention (N, K, M).
    """
    data = trim(data)
    preds, attn = [], []
    for i in range(0, len(data["queries"]), batch_size):
        logits, p = model(data["stories"][i : i + batch_size], data["queries"][i : i + batch_size])
        preds.append(np.asarray(ops.convert_to_numpy(ops.argmax(logits, -1))))
        attn.append(np.asarray(ops.convert_to_numpy(p)))
    return np.concatenate(preds), np.concatenate(attn)
