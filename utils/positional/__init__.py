"""Positional information for attention: sinusoidal encoding, learned embeddings, rotary.

Three twins share one public API (a test compares names and signatures):
``numpy_ref`` (the readable reference), ``torch_impl`` and ``keras_impl``.

Shape letters: those of ``utils/shapes.py``; here B batch, T positions, D model
width (even). The sinusoidal encoding is **interleaved**, as in "Attention Is All
You Need" (Vaswani et al. 2017): dimension 2i holds sin(p * w_i) and dimension
2i + 1 holds cos(p * w_i), with w_i = base ** (-2i / D). Rotary embedding (Su et
al. 2021) rotates the same interleaved pairs.
"""
