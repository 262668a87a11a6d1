"""Datasets of the course, each with an offline path (generated or packaged data).

Import the module you need (``utils.data.babi``, ``utils.data.dates``, ...);
this package imports nothing itself. Shape letters in the docstrings are those
of ``utils/shapes.py`` (N examples, B batch, Ts/Tt source/target length, ...).
"""
