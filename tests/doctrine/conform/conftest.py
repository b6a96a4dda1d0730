"""Shared fixtures for the conformance checker tests (helpers are fixtures because the
suite runs with ``--import-mode=importlib``, where conftest is not importable)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def _load_source(name: str) -> list[dict]:
    path = FIXTURES / name / "source.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _load_summary(name: str, which: str = "good") -> str:
    return (FIXTURES / name / f"{which}.md").read_text(encoding="utf-8")


@pytest.fixture
def load_source():
    """``load_source(session) -> list[dict]``: a fixture session's source messages."""
    return _load_source


@pytest.fixture
def load_summary():
    """``load_summary(session, which="good") -> str``: one of its summaries."""
    return _load_summary


@pytest.fixture
def fixtures_dir() -> Path:
    return FIXTURES


@pytest.fixture(scope="session")
def v1():
    from doctrine.spec import load_doctrine

    return load_doctrine("v1")
