"""Datasets of the course, each with an offline path (generated or packaged data).

Import the module you need (``utils.data.babi``, ``utils.data.dates``, ...);
this package imports nothing itself.
"""
