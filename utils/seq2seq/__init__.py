"""Sequence-to-sequence models: a GRU encoder-decoder with and without attention.

Twins with one public API (a test compares their names and signatures):

* ``utils.seq2seq.torch_impl``: PyTorch.
* ``utils.seq2seq.keras_impl``: Keras 3 (``keras.ops``), TensorFlow backend.
* ``utils.seq2seq.metrics``: framework-free scoring of decoded ids
  (exact match, accuracy by input length).
* ``utils.seq2seq.numpy_steps``: NumPy references of one decoder step, in
  Bahdanau's order (the twins' ``Decoder.step``) and in Luong's (no twin has it;
  assignment 2's tests compare with it).

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
(the scores of Luong, Pham and Manning, 2015, scaled as in the Transformer).
Every score is queried, as in Bahdanau's decoder, with the *previous* state
``s_{i-1}``: ``"dot"`` and ``"general"`` are Bahdanau's decoder with Luong's scores,
not Luong's model, which scores the *current* state ``h_t`` after the GRU step,
predicts from ``tanh(W_c [c_t; h_t])`` and feeds that vector into the next step
(input feeding).

Weights in one layout (``export_weights`` / ``load_weights``, the same in both
twins, so a model trained in one framework loads into the other; ``named_weights``
lists a from-scratch layer's weights by attribute path for ``load_weights``).
Matrices act on the right (``x @ W``); a GRU's gate blocks sit side by side in the
order (r, z, n), as in ``r = sigmoid(x W_x[:, r] + b_x[r] + h W_h[:, r] + b_h[r])``,
``n = tanh(x W_x[:, n] + b_x[n] + r * (h W_h[:, n] + b_h[n]))``,
``h' = (1 - z) n + z h``. Names, relative to the layer exported:

* ``Encoder``: ``embedding`` (V, E); ``fwd.W_x`` (E, 3G), ``fwd.W_h`` (G, 3G),
  ``fwd.b_x`` (3G,), ``fwd.b_h`` (3G,); the same four under ``bwd.``.
* ``DecoderAttention``: ``W_q`` (Gd, A), ``W_k`` (De, A), ``w_v`` (A,) for
  ``"additive"``; ``W`` (De, Gd) for ``"general"``; none for ``"dot"``.
* ``Decoder``: ``embedding`` (V, E), ``W_init`` (De, Gd), ``b_init`` (Gd,),
  ``attention.*`` (unless ``"none"``), ``cell.W_x`` (E+De, 3Gd), ``cell.W_h``
  (Gd, 3Gd), ``cell.b_x`` (3Gd,), ``cell.b_h`` (3Gd,), ``W_out`` (Gd+De+E, V),
  ``b_out`` (V,).
* ``Seq2Seq``: the encoder's names under ``encoder.``, the decoder's under ``decoder.``.

``greedy_decode(..., attention_mask=)`` narrows where each output step may look,
e.g. to Luong et al.'s local window (``local_window_mask`` in ``utils.attention``'s
twins). ``swap_directions`` exchanges the encoder's two GRUs: with it, reversing
the source (Sutskever et al., 2014) is shown to be a relabelling for a
bidirectional encoder.
"""
