"""The GPT (Radford et al., 2018, 2019): a decoder-only Transformer language model,
its sampling, its KV cache and grouped key-value heads; lesson 8.

Twins with one public API (a test compares their names and signatures):

* ``utils.gpt.torch_impl``: PyTorch.
* ``utils.gpt.keras_impl``: Keras 3 (``keras.ops``), TensorFlow backend.
* ``utils.gpt.numpy_ref``: the NumPy reference both are tested against.
* ``utils.gpt.common``: the framework-free parts all three share: the typed
  ``GPTConfig``, GPT-2's initialisation as NumPy arrays (so both twins can start
  from the same numbers), the learning-rate schedule, sampling (temperature, top-k,
  top-p) on NumPy logits, the decoding loop, and costs computed from the sizes.
* ``utils.gpt.ngram``: count-based n-gram language models, the lesson's baselines.

Shape letters: those of ``utils/shapes.py``; here B batch, T sequence length, D
d_model, H heads, Hkv key-value heads, Dh = D / H, V vocabulary size, L layers.
"""
