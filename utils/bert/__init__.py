"""BERT (Devlin et al., 2019): the Transformer's encoder pre-trained as a masked language model.

Twins with one public API (a test compares their names and signatures):

* ``utils.bert.torch_impl``: PyTorch.
* ``utils.bert.keras_impl``: Keras 3 (``keras.ops``), TensorFlow backend.
* ``utils.bert.common``: framework-free parts: ``BertConfig`` and the table of
  names (course / Hugging Face / KerasHub), ``encode_texts`` (truncates with a
  warning), the warm-up + linear-decay learning rate, ``parameter_count`` (the
  size of a BERT from its config), ``linear_probe`` (logistic regression on
  frozen sentence vectors), the ``POOLINGS`` a classifier may use, and
  ``mask_whole_words`` (whole-word masking in NumPy, the reference of assignment 7).
* ``utils.bert.weights``: the one map from Hugging Face BertModel weight names
  to the course's, reading a Hugging Face folder, and finding the packaged
  all-MiniLM-L6-v2 weights (offline fallback).

Shape letters: those of ``utils/shapes.py``; here B batch, T tokens, D d_model, H
heads, Dh = D / H, F d_ff, V vocabulary size, C classes, L layers, N examples.
``padding_mask`` (B, T) is True on real tokens; inside, the blocks use the course's
keep-mask (B, 1, 1, T). ``BertClassifier(..., pooling="cls" | "mean")`` reads BERT's
[CLS] pooler or the mean of the token vectors over the real tokens (``mean_pool``).
Both twins share weight names, so ``export_weights`` of one loads into the other.
"""
