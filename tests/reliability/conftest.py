"""Fixtures of the hostile-input suite: ``hostile(mode, ...)`` starts a misbehaving
OpenAI-compatible server on 127.0.0.1 (tests/reliability/hostile_server.py) and stops it
after the test."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest


def _load_hostile_server():
    name = "reliability_hostile_server"
    if name not in sys.modules:  # importlib import mode: load the helper by path, once
        spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name("hostile_server.py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


@pytest.fixture(scope="module")
def sft_rows(tmp_path_factory) -> Path:
    """The training tests' few short rows (tests/train/conftest.py) in a data folder: quick
    steps of the tiny model on a busy CPU."""
    spec = importlib.util.spec_from_file_location("train_fixture_rows", Path(__file__).parents[1] / "train/conftest.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod.build_sft_data(tmp_path_factory.mktemp("rows") / "data", n_train=4, n_val=2)


@pytest.fixture
def hostile():
    servers = []

    def start(mode: str = "ok", **kwargs):
        srv = _load_hostile_server().HostileServer(mode, **kwargs)
        servers.append(srv)
        return srv

    yield start
    for srv in servers:
        srv.close()
