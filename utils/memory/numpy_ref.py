"""NumPy reference of End-To-End Memory Networks and the NTM content read.

Shapes: B batch, M memory slots (slot 0 = newest sentence), J words per
sentence, V vocabulary, D embedding width, K hops; N memory rows and W their
width for the content read. Word id 0 is padding and contributes nothing.
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


def content_addressing(memory: np.ndarray, key: np.ndarray, strength: float | np.ndarray = 1.0) -> np.ndarray:
    """NTM/DNC content weights: softmax over rows of strength * cosine(key, row).

    Shapes: memory (B, N, W), key (B, W), strength number or (B,) -> weights (B, N).
    """
    _checks.check_content(memory, key, strength)
    dots = np.einsum("bnw,bw->bn", memory, key)  # (B, N)
    norms = np.linalg.norm(memory, axis=-1) * np.linalg.norm(key, axis=-1)[:, None]  # (B, N)
    cosine = dots / np.maximum(norms, 1e-8)
    beta = np.reshape(np.asarray(strength, dtype=cosine.dtype), (-1, 1))  # (B or 1, 1)
    return masked_softmax(beta * cosine)


def content_read(
    memory: np.ndarray, key: np.ndarray, strength: float | np.ndarray = 1.0
) -> tuple[np.ndarray, np.ndarray]:
    """The read head of an NTM/DNC addressing by content: r = sum_i w_i M_i.

    Shapes: memory (B, N, W), key (B, W), strength number or (B,)
    -> read (B, W), weights (B, N).
    """
    weights = content_addressing(memory, key, strength)  # (B, N)
    return np.einsum("bn,bnw->bw", weights, memory), weights
