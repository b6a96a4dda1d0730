"""Shared fixtures: an isolated model cache and the tiny test model.

The embedded model is converted once per test session into a cache shared across test
runs (``$DTW_CACHE_DIR`` if set, else the user cache dir), exactly as a user's first
``make test`` would do; the tiny model is built from its tokenizer into a temp dir.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# Tests never reach a hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def project_root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def embedded_model():
    """The resolved embedded model (converts the GGUF on the first call ever)."""
    from plumbing.models import ModelSpecError, resolve_model

    try:
        return resolve_model("embedded:smollm2-135m-instruct")
    except ModelSpecError as exc:  # the wheel is part of the test set-up: fail, don't skip
        pytest.fail(str(exc))


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory, embedded_model) -> Path:
    from plumbing.models import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model")
