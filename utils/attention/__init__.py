"""Attention core: soft lookup, scoring functions, masked softmax.

Three twins share one public API (a test compares their names and signatures):

* ``utils.attention.numpy_ref``: the NumPy reference, readable and exact.
* ``utils.attention.torch_impl``: PyTorch.
* ``utils.attention.keras_impl``: Keras 3 (``keras.ops``), TensorFlow backend.

Shape letters: those of ``utils/shapes.py``; here B batch, Tq queries, Tk keys, D
query/key width, Dv value width, A additive-attention hidden width. Leading batch
dimensions are written ``...``. Masks follow the course's one convention: a boolean
keep-mask, True = may attend, broadcastable to the scores ``(..., Tq, Tk)``.
"""
