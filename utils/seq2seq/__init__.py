"""Sequence-to-sequence models: a GRU encoder-decoder with and without attention.

Twins with one public API (a test compares their names and signatures):

* ``utils.seq2seq.torch_impl``: PyTorch.
* ``utils.seq2seq.keras_impl``: Keras 3 (``keras.ops``), TensorFlow backend.
* ``utils.seq2seq.metrics``: framework-free scoring of decoded ids
  (exact match, accuracy by input length).

Shape letters: those of ``utils/shapes.py``; here B batch, Ts source length, Tt
target length, E embedding width, G encoder GRU width per direction, De = 2G encoder
output width, Gd decoder state width, A additive-attention width, Dq query width
(the decoder state, Gd), Dk projected-key width, V vocabulary size. Masks are
boolean keep-masks (True = a real token, may be attended), shape (B, Ts).

The model (Bahdanau, Cho and Bengio, 2014, with a GRU):

* encoder: a bidirectional GRU reads the source; ``h_j`` (B, Ts, De) are its
  outputs and the ``summary`` (B, De) its two final states;
* decoder state ``s_0 = tanh(W_init summary)``;
* at step i: score every source position against the previous state,
  ``e_ij = score(s_{i-1}, h_j)``, ``alpha_i = softmax_j(e_ij)``,
  ``c_i = sum_j alpha_ij h_j``; then ``s_i = GRU([emb(y_{i-1}); c_i], s_{i-1})``
  and ``logits_i = W_out [s_i; c_i; emb(y_{i-1})]``.
* ``attention="none"`` is the plain encoder-decoder of Cho et al. (2014): the
  same network with ``c_i = summary`` at every step, one fixed vector.

Scores: ``"additive"`` ``v^T tanh(W_q s + W_k h)`` (Bahdanau), ``"dot"``
``s.h / sqrt(De)`` (needs Gd = De) and ``"general"`` ``s.(W h) / sqrt(Gd)``
(Luong, Pham and Manning, 2015, scaled as in the Transformer).

``greedy_decode(..., attention_mask=)`` narrows where each output step may look,
e.g. to Luong et al.'s local window (``local_window_mask`` in ``utils.attention``'s
twins). ``swap_directions`` exchanges the encoder's two GRUs: with it, reversing
the source (Sutskever et al., 2014) is shown to be a relabelling for a
bidirectional encoder.
"""
