"""Shared test set-up: quiet TensorFlow, few threads, a private course cache."""
from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("MPLBACKEND", "Agg")

import pytest  # noqa: E402


@pytest.fixture(autouse=True, scope="session")
def _course_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Everything the course writes during tests goes to a throw-away folder."""
    os.environ["ATTENTION_COURSE_CACHE"] = str(tmp_path_factory.mktemp("course_cache"))
