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
