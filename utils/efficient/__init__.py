"""Efficient attention (lesson 9): the online softmax, tiled (FlashAttention-style) attention,
sparse attention masks and banded attention, linear attention.

Three twins share one public API (a test compares their names and signatures):

* ``utils.efficient.numpy_ref``: the NumPy reference, readable and exact.
* ``utils.efficient.torch_impl``: PyTorch.
* ``utils.efficient.keras_impl``: Keras 3 (``keras.ops``), TensorFlow backend.

``utils.efficient.measure`` (no framework) measures what the lesson claims: the peak
memory a NumPy call allocates (``tracemalloc``) and the growth exponent of a cost
against the sequence length.

Shape letters: those of ``utils/shapes.py``; here Tq queries, Tk keys, T the length of
one sequence attending to itself, D query/key width, Dv value width; ``...`` are leading
batch axes, e.g. (B, H). Block sizes (``block_q``, ``block_k``, ``block_size``) and the
window's half width ``half_width`` are plain ints. Masks follow the course's one
convention: a boolean keep-mask, True = may attend, broadcastable to (..., Tq, Tk).
"""
