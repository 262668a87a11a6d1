"""Shared code of the attention course.

Importing ``utils`` imports no deep-learning framework: a TensorFlow notebook
never pays for torch, nor the reverse. Framework code lives in the
``*/torch_impl.py`` and ``*/keras_impl.py`` modules, imported explicitly.

Shape letters (the ``Shapes:`` line of every docstring): one table for the whole
package, in ``utils/shapes.py``.
"""

__version__ = "0.1.0"

COURSE_NAME = "attention-course"
