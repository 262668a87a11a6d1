"""Memory networks: End-To-End Memory Networks (MemN2N), content-based addressing and the DNC memory.

Three twins share one public API (a test compares their names and signatures):

* ``utils.memory.numpy_ref``: the NumPy reference of the forward pass.
* ``utils.memory.torch_impl``: PyTorch, with the trainable ``MemN2N`` module.
* ``utils.memory.keras_impl``: Keras 3 (``keras.ops``), with the ``MemN2N`` layer.

Shape letters: those of ``utils/shapes.py``; here B batch, M memory slots (a MemN2N
slot holds one sentence, slot 0 the newest; the slots of a Neural Turing Machine or
DNC memory are the rows of its matrix), J words per sentence, V vocabulary, D
embedding width, K hops, W width of an NTM/DNC memory row, R DNC read heads, N
examples.

Weights of a MemN2N with adjacent tying: ``embeddings`` (K+1, V, D) and
``temporal`` (K+1, M, D). Hop k (1-based) uses A^k = embeddings[k-1] for the
input memory and C^k = embeddings[k] for the output memory; the question
embedding is B = embeddings[0] (= A^1) and the answer matrix is W^T =
embeddings[K] (= C^K). The temporal matrices are tied the same way.

The DNC memory (Graves et al. 2016) is a set of ``dnc_*`` functions without a
controller: usage and allocation, the erase-then-add write, precedence and the
temporal link matrix, the backward/content/forward read weightings, and
``dnc_step``, which chains them in the paper's order on a dict state.
"""
