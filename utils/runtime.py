"""Seeding, device choice and the run profile.

The run profile decides how big a lesson's data and training are:

* ``smoke``: tiny sizes, same code path; used by the tests.
* ``cpu``: the default; each lesson reaches its quality bar in minutes on 2 cores.
* ``gpu``: chosen automatically when a GPU is present (bigger data, more epochs).

``COURSE_PROFILE=smoke|cpu|gpu`` overrides the automatic choice.
``COURSE_THREADS=N`` caps the CPU threads of NumPy, torch and TensorFlow.

Nothing here imports torch or TensorFlow unless asked to.
"""
from __future__ import annotations

import os
import random
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

PROFILES = ("smoke", "cpu", "gpu")
FRAMEWORKS = ("pytorch", "tensorflow")
PROFILE_ENV = "COURSE_PROFILE"
THREADS_ENV = "COURSE_THREADS"
ONEDNN_ENV = "TF_ENABLE_ONEDNN_OPTS"
CACHE_ENV = "ATTENTION_COURSE_CACHE"


@dataclass(frozen=True)
class Profile:
    """The run profile of this session; ``pick`` chooses a size from it."""

    name: str

    def pick(self, *, smoke: Any, cpu: Any, gpu: Any | None = None) -> Any:
        """Return the value for this profile (``gpu`` defaults to ``cpu``).

        >>> Profile("smoke").pick(smoke=1, cpu=20)
        1
        """
        if self.name == "smoke":
            return smoke
        if self.name == "gpu" and gpu is not None:
            return gpu
        return cpu

    @property
    def is_smoke(self) -> bool:
        return self.name == "smoke"


def gpu_present() -> bool:
    """True when an NVIDIA GPU is visible, checked without importing a framework."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1"):
        return False
    return Path("/dev/nvidia0").exists() or shutil.which("nvidia-smi") is not None


def profile() -> Profile:
    """The run profile: ``$COURSE_PROFILE`` if set, else ``gpu`` or ``cpu``."""
    name = os.environ.get(PROFILE_ENV, "").strip().lower()
    if name:
        if name not in PROFILES:
            raise ValueError(
                f"{PROFILE_ENV}: expected one of {', '.join(PROFILES)}, got {name!r}"
            )
        return Profile(name)
    return Profile("gpu" if gpu_present() else "cpu")


def cache_dir() -> Path:
    """The one folder the course writes to (``$ATTENTION_COURSE_CACHE`` or ``~/.cache/attention-course``)."""
    root = os.environ.get(CACHE_ENV)
    path = Path(root).expanduser() if root else Path.home() / ".cache" / "attention-course"
    path.mkdir(parents=True, exist_ok=True)
    return path


def prepare_tensorflow_env(onednn: bool = False) -> None:
    """Set the variables TensorFlow reads at import, then import it without its start-up banner.

    Keras on the TF backend; ``TF_CPP_MIN_LOG_LEVEL=2`` quiets TensorFlow's own logging.
    ``onednn`` picks TensorFlow's oneDNN kernels for this process (read once, at the
    import; ``TF_ENABLE_ONEDNN_OPTS`` set by you wins). Measured in the cpu profile on
    2 cores, they help large matrix products and hurt many small ops: lesson 8's GPT
    trains in 131 s with them and 212 s without, while lesson 6 takes 314 s with them
    and 275 s without, lesson 3 86 s and 66 s. So they are off unless a lesson asks.
    The variable is set for the import only, so kernels and programs started later
    choose for themselves. oneDNN's import-time notice is written by C++ straight to
    file descriptor 2, which a notebook shows as red text: the import runs with that
    descriptor sent to a file, and whatever else was written there is passed on.
    """
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    threads = os.environ.get(THREADS_ENV)
    if threads:
        os.environ.setdefault("TF_NUM_INTRAOP_THREADS", threads)
        os.environ.setdefault("TF_NUM_INTEROP_THREADS", "1")
    if "tensorflow" in sys.modules:
        return
    chosen_by_user = ONEDNN_ENV in os.environ
    if not chosen_by_user:
        os.environ[ONEDNN_ENV] = "1" if onednn else "0"
    try:
        _import_tensorflow_quietly()
    finally:
        if not chosen_by_user:
            os.environ.pop(ONEDNN_ENV, None)


# What TensorFlow's C++ start-up writes to stderr at import whatever the log level: the
# oneDNN notice, the CPU-instructions notice and absl's line before its logging starts.
_BANNER = ("oneDNN custom operations are on", "absl::InitializeLog()", "cpu_feature_guard",
           "This TensorFlow binary is optimized", "To enable the following instructions",
           "rebuild TensorFlow with the appropriate compiler flags")


def _import_tensorflow_quietly() -> None:
    import tempfile

    try:
        sys.stderr.flush()
        caught = tempfile.TemporaryFile()
        saved = os.dup(2)
    except (OSError, ValueError):  # no file to catch the notices in, or no descriptor 2 to borrow: import as is
        import tensorflow  # noqa: F401

        return
    with caught:
        os.dup2(caught.fileno(), 2)
        try:
            import tensorflow  # noqa: F401
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            caught.seek(0)
            text = caught.read().decode("utf-8", "replace")
            kept = "".join(line for line in text.splitlines(keepends=True) if not any(b in line for b in _BANNER))
            if kept.strip():
                sys.stderr.write(kept)


def _check_framework(framework: str) -> str:
    if framework not in FRAMEWORKS:
        raise ValueError(f"framework: expected one of {FRAMEWORKS}, got {framework!r}")
    return framework


def seed_everything(seed: int = 0) -> None:
    """Seed Python, NumPy, and whichever of torch / Keras is already imported."""
    if not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed: expected a non-negative int, got {seed!r}")
    random.seed(seed)
    np.random.seed(seed)
    if "torch" in sys.modules:
        import torch

        torch.manual_seed(seed)
    if "keras" in sys.modules:
        import keras

        keras.utils.set_random_seed(seed)


def device(framework: str = "pytorch") -> str:
    """The device lessons put tensors on: ``"cuda"`` / ``"/GPU:0"`` when present, else CPU."""
    _check_framework(framework)
    if framework == "pytorch":
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    prepare_tensorflow_env()
    import tensorflow as tf

    return "/GPU:0" if tf.config.list_physical_devices("GPU") else "/CPU:0"


def _pin_threads(framework: str) -> None:
    threads = os.environ.get(THREADS_ENV)
    if not threads:
        return
    n = int(threads)
    if framework == "pytorch":
        import torch

        torch.set_num_threads(n)
        try:
            torch.set_num_interop_threads(1)
        except RuntimeError:  # already set once in this process
            pass


_current_framework: str | None = None


def current_framework() -> str | None:
    """The framework of the last ``setup`` call in this process (None before any)."""
    return _current_framework


def setup(framework: str, seed: int = 0, verbose: bool = True, onednn: bool = False) -> Profile:
    """One call at the top of every notebook: prepare, import and seed a framework.

    Returns the run profile. For TensorFlow this sets the quiet-logging
    variables before the first import, so the learner sees no log noise;
    ``onednn`` asks for TensorFlow's oneDNN kernels (see ``prepare_tensorflow_env``).
    """
    global _current_framework
    _check_framework(framework)
    _current_framework = framework
    if framework == "tensorflow":
        prepare_tensorflow_env(onednn)
        import keras  # noqa: F401  (imported so seed_everything seeds it)
    else:
        import torch  # noqa: F401
    _pin_threads(framework)
    seed_everything(seed)
    prof = profile()
    if verbose:
        print(f"framework={framework}  profile={prof.name}  device={device(framework)}  seed={seed}")
    return prof


RECORD_ENV = "COURSE_RECORD_FILE"


def record(name: str, value: float, tol: float = 1e-4) -> None:
    """Note a key result of a notebook so the twin notebooks can be compared.

    When ``$COURSE_RECORD_FILE`` is set (the tests set it), the value is added
    to that JSON file; the tests then check that the PyTorch and TensorFlow
    notebooks of a lesson recorded the same values within ``tol`` (absolute).
    Returns nothing, so a cell that ends with it shows no stray ``Out[n]`` number.
    """
    import json
    import math

    v = float(value)
    if not math.isfinite(v):
        raise ValueError(f"record {name!r}: expected a finite number, got {value!r}")
    path = os.environ.get(RECORD_ENV)
    if path:
        p = Path(path)
        data = json.loads(p.read_text()) if p.exists() else {}
        data[name] = {"value": v, "tol": float(tol), "profile": profile().name}
        tmp = p.with_suffix(p.suffix + ".tmp")
        tmp.write_text(json.dumps(data, indent=1))
        tmp.replace(p)  # never leave a half-written file
