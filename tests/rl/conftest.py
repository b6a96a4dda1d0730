"""The SFT data fixture the train tests build, for GRPO's prompts."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "train"))
from conftest import build_sft_data  # noqa: E402  (tests/train/conftest.py, the project-made SFT rows)


@pytest.fixture(scope="session")
def sft_data_dir(tmp_path_factory) -> Path:
    return build_sft_data(tmp_path_factory.mktemp("rl_data"))
