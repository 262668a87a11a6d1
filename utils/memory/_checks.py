"""Argument checks shared by the memory twins (they read only ``.shape`` and ``.dtype``)."""
from __future__ import annotations

from typing import Any

from utils.checks import shape_of

__all__ = [
    "shape_of",
    "check_ids",
    "check_encoding",
    "check_hop",
    "check_model_weights",
    "check_content",
    "check_ntm",
    "check_dnc",
    "check_dnc_dicts",
    "DNC_STATE",
    "DNC_INTERFACE",
]


def check_ids(name: str, x: Any, rank: int, layout: str) -> tuple:
    """Integer word ids of a given rank."""
    shape = shape_of(x)
    if len(shape) != rank:
        raise ValueError(f"{name}: expected word ids {layout}, got shape {shape}")
    if "int" not in str(getattr(x, "dtype", "")):
        raise ValueError(f"{name}: expected integer word ids {layout}, got dtype {getattr(x, 'dtype', None)}")
    return shape


def check_encoding(words_shape: tuple, embedding: Any, encoding: Any) -> None:
    e = shape_of(embedding)
    if len(e) != 2:
        raise ValueError(f"embedding: expected (V, D), got shape {e}")
    if encoding is not None:
        p = shape_of(encoding)
        if p != (words_shape[-1], e[1]):
            raise ValueError(f"encoding: expected (J, D) = ({words_shape[-1]}, {e[1]}), got shape {p}")


def check_hop(u: Any, memory_in: Any, memory_out: Any, mask: Any) -> None:
    us, mi, mo = shape_of(u), shape_of(memory_in), shape_of(memory_out)
    if len(us) != 2:
        raise ValueError(f"u: expected the controller state (B, D), got shape {us}")
    if len(mi) != 3 or mi[0] != us[0] or mi[2] != us[1]:
        raise ValueError(f"memory_in: expected (B, M, D) = ({us[0]}, M, {us[1]}), got shape {mi}")
    if mo != mi:
        raise ValueError(f"memory_out: expected (B, M, D) = {mi} like memory_in, got shape {mo}")
    if mask is not None:
        ms = shape_of(mask)
        if ms != mi[:2]:
            raise ValueError(f"mask: expected a boolean keep-mask (B, M) = {mi[:2]}, got shape {ms}")
        if "bool" not in str(getattr(mask, "dtype", "")):
            raise ValueError(f"mask: expected a boolean keep-mask (True = may attend), got dtype {mask.dtype}")


def check_model_weights(stories: Any, queries: Any, embeddings: Any, temporal: Any) -> tuple:
    s = check_ids("stories", stories, 3, "(B, M, J)")
    q = check_ids("queries", queries, 2, "(B, J)")
    if q[0] != s[0]:
        raise ValueError(f"queries: expected (B, J) with B={s[0]} like stories {s}, got {q}")
    e = shape_of(embeddings)
    if len(e) != 3 or e[0] < 2:
        raise ValueError(f"embeddings: expected (K+1, V, D) with K >= 1 hops, got shape {e}")
    if temporal is not None:
        t = shape_of(temporal)
        if len(t) != 3 or t[0] != e[0] or t[2] != e[2] or (s[1] is not None and t[1] < s[1]):
            raise ValueError(
                f"temporal: expected (K+1, M, D) = ({e[0]}, >={s[1]}, {e[2]}) for stories {s}, got shape {t}"
            )
    return s, q, e


def check_content(memory: Any, key: Any, strength: Any) -> None:
    m, k = shape_of(memory), shape_of(key)
    if len(m) != 3:
        raise ValueError(f"memory: expected (B, M, W), got shape {m}")
    if k != (m[0], m[2]):
        raise ValueError(f"key: expected (B, W) = ({m[0]}, {m[2]}), got shape {k}")
    if hasattr(strength, "shape"):
        st = shape_of(strength)
        if st not in ((), (m[0],)):
            raise ValueError(f"strength: expected a number or (B,) = ({m[0]},), got shape {st}")
    elif not isinstance(strength, (int, float)):
        raise ValueError(f"strength: expected a number or (B,) array, got {type(strength).__name__}")


def check_ntm(content_weights: Any, previous_weights: Any, gate: Any, shift: Any, sharpening: Any) -> None:
    c, p = shape_of(content_weights), shape_of(previous_weights)
    if len(c) != 2 or p != c:
        raise ValueError(f"content_weights, previous_weights: expected two (B, M) arrays, got shapes {c} and {p}")
    for name, value, want in (("gate", gate, (c[0],)), ("shift", shift, (c[0], 3)), ("sharpening", sharpening, (c[0],))):
        if shape_of(value) != want:
            raise ValueError(f"{name}: expected shape {want}, got {shape_of(value)}")


# ----------------------------------------------------------------------------- DNC memory
# Shape letters (``utils/shapes.py``): B batch, M memory slots (rows), W row width, R read heads.

DNC_STATE = ("memory", "usage", "link", "precedence", "write_weights", "read_weights")
DNC_INTERFACE = (
    "write_key", "write_strength", "erase", "add", "free_gates",
    "allocation_gate", "write_gate", "read_keys", "read_strengths", "read_modes",
)


def check_dnc(**arrays: Any) -> None:
    """Check DNC arrays against one another by their layouts (letters B, M, W, R, and the 3 read modes).

    Each keyword is ``name=(array, "B M")``: the letters name the axes, and every
    letter must mean the same size in every argument of the call.
    """
    sizes: dict[str, int] = {}
    for name, (x, layout) in arrays.items():
        letters = layout.split()
        shape = shape_of(x)
        want = "(" + ", ".join(letters) + ")"
        if len(shape) != len(letters):
            raise ValueError(f"{name}: expected {want}, got shape {shape}")
        for letter, size in zip(letters, shape):
            if letter.isdigit():
                if size != int(letter):
                    raise ValueError(f"{name}: expected {want}, got shape {shape}")
                continue
            if size is None:
                continue
            if sizes.setdefault(letter, size) != size:
                known = ", ".join(f"{k}={v}" for k, v in sizes.items())
                raise ValueError(f"{name}: expected {want} with {known}, got shape {shape}")


def check_dnc_dicts(state: Any, interface: Any) -> None:
    """The state and interface dicts of ``dnc_step`` hold every key they need."""
    for what, value, keys in (("state", state, DNC_STATE), ("interface", interface, DNC_INTERFACE)):
        if not isinstance(value, dict):
            raise ValueError(f"{what}: expected a dict with keys {keys}, got {type(value).__name__}")
        missing = [k for k in keys if k not in value]
        if missing:
            raise ValueError(f"{what}: missing keys {missing} (expected {keys})")
