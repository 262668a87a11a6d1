"""Every torch_impl / keras_impl pair in utils shares public names and signatures.

Discovered, not listed: a new ``utils/<concept>/`` with both twins is checked
without touching this file. The NumPy reference must offer the same signature
for every function it shares with the twins.
"""
from __future__ import annotations

import importlib
import inspect
from pathlib import Path

import pytest

UTILS = Path(__file__).resolve().parent.parent / "utils"
CONCEPTS = sorted(
    p.parent.name for p in UTILS.glob("*/torch_impl.py") if (p.parent / "keras_impl.py").exists()
)


def _public(module) -> dict:
    names = getattr(module, "__all__", None)
    assert names, f"{module.__name__} must declare __all__ (its public API)"
    return {n: getattr(module, n) for n in names}


def _signature(obj) -> list[tuple[str, str, object]]:
    """Parameter names, kinds and defaults; for classes the constructor's, minus **kwargs."""
    if inspect.isclass(obj):
        obj = obj.__init__
    params = [p for p in inspect.signature(obj).parameters.values() if p.kind is not p.VAR_KEYWORD]
    return [(p.name, p.kind.name, p.default) for p in params]


def _call_signature(cls) -> list:
    method = cls.forward if hasattr(cls, "forward") else cls.call
    params = [p for p in inspect.signature(method).parameters.values() if p.kind is not p.VAR_KEYWORD]
    return [(p.name, p.kind.name, p.default) for p in params]


def test_concepts_found() -> None:
    assert "attention" in CONCEPTS, f"expected utils/attention twins, found {CONCEPTS}"


@pytest.mark.parametrize("concept", CONCEPTS)
def test_twins_share_names_and_signatures(concept: str) -> None:
    t = _public(importlib.import_module(f"utils.{concept}.torch_impl"))
    k = _public(importlib.import_module(f"utils.{concept}.keras_impl"))
    assert list(t) == list(k), f"utils.{concept}: torch names {list(t)} != keras names {list(k)}"
    for name in t:
        assert inspect.isclass(t[name]) == inspect.isclass(k[name]), f"{concept}.{name}: class in one twin only"
        assert _signature(t[name]) == _signature(k[name]), (
            f"{concept}.{name}: torch {_signature(t[name])} != keras {_signature(k[name])}"
        )
        if inspect.isclass(t[name]):
            assert _call_signature(t[name]) == _call_signature(k[name]), (
                f"{concept}.{name}.forward/call: torch {_call_signature(t[name])} != keras {_call_signature(k[name])}"
            )
        assert (t[name].__doc__ or "").strip(), f"{concept}.{name} (torch) has no docstring"
        assert (k[name].__doc__ or "").strip(), f"{concept}.{name} (keras) has no docstring"
        if not inspect.isclass(t[name]):
            assert "Shapes:" in t[name].__doc__, f"{concept}.{name}: docstring needs a 'Shapes:' line"


def _defined_in_order(module) -> list[str]:
    """The public names a module defines itself (not re-exports), in the order of its source."""
    own = []
    for name in module.__all__:
        obj = getattr(module, name)
        if (inspect.isclass(obj) or inspect.isfunction(obj)) and obj.__module__ == module.__name__:
            own.append((inspect.getsourcelines(obj)[1], name))
    return [name for _, name in sorted(own)]


@pytest.mark.parametrize("concept", CONCEPTS)
def test_twins_define_their_public_names_in_the_order_of_all(concept: str) -> None:
    """A reader can put the two files side by side: each defines its public names in
    its ``__all__`` order (and the twins' ``__all__`` are equal, tested above)."""
    for twin in ("torch_impl", "keras_impl"):
        module = importlib.import_module(f"utils.{concept}.{twin}")
        defined = _defined_in_order(module)
        assert defined, f"utils.{concept}.{twin} defines none of its public names"
        listed = [n for n in module.__all__ if n in defined]
        assert defined == listed, f"utils.{concept}.{twin}: defined in the order {defined}, __all__ says {listed}"


@pytest.mark.parametrize("concept", [c for c in CONCEPTS if (UTILS / c / "numpy_ref.py").exists()])
def test_numpy_reference_matches_twin_signatures(concept: str) -> None:
    ref = _public(importlib.import_module(f"utils.{concept}.numpy_ref"))
    t = _public(importlib.import_module(f"utils.{concept}.torch_impl"))
    missing = [n for n in ref if n not in t]
    assert not missing, f"utils.{concept}.numpy_ref has names the twins lack: {missing}"
    for name, fn in ref.items():
        assert _signature(fn) == _signature(t[name]), (
            f"{concept}.{name}: numpy {_signature(fn)} != torch {_signature(t[name])}"
        )


def test_utils_import_pulls_in_no_framework() -> None:
    import subprocess
    import sys

    code = (
        "import sys, utils, utils.runtime, utils.grading, utils.quiz, utils.plots, utils.widgets\n"
        "import utils.attention, utils.attention.numpy_ref\n"
        "bad = [m for m in ('torch', 'tensorflow', 'keras', 'jax') if m in sys.modules]\n"
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"importing utils pulled in frameworks: {out.stdout.strip()}"
