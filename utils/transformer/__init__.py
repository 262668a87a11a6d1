"""The Transformer (Vaswani et al., 2017): encoder and decoder blocks, the full model, training and decoding.

Twins with one public API (a test compares their names and signatures):

* ``utils.transformer.torch_impl``: PyTorch.
* ``utils.transformer.keras_impl``: Keras 3 (``keras.ops``), TensorFlow backend.
* ``utils.transformer.common``: the framework-free parts both re-export: the
  typed ``TransformerConfig``, the warm-up learning-rate schedule, the length
  penalty, and the decoding loops (greedy, beam search) that drive a model
  through a "next-token log-probabilities" function.

Shape letters: those of ``utils/shapes.py``; here B batch, T sequence length, Ts
source length, Tt target length, Tq, Tk query and key lengths, D d_model, H heads,
Dh = D / H, F d_ff, V vocabulary size, L layers, Kb beam size. Masks are the
course's boolean keep-masks (True = may attend), broadcastable to (B, H, Tq, Tk).
Token id 0 is padding, 1 <bos>, 2 <eos> (as in ``utils.data.parallel``).

Layer norm placement: ``norm_first=True`` (pre-LN, the modern default that the
lesson teaches: x + f(LN(x)), with one final LN after the stack) or
``norm_first=False`` (post-LN, the paper and BERT: LN(x + f(x))).
Weights carry the same names in both twins, so ``export_weights`` of one twin
loads into the other with ``load_weights``.
"""
