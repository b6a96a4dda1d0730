"""Inference backends behind one interface (``plumbing.chat_backend``).

``BACKENDS`` maps a name to a factory ``(settings: dict) -> Backend``. Factories import
their heavy dependencies (torch, transformers, vLLM) only when called.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from plumbing.chat_backend import Backend, BackendError, Completion, Request

__all__ = ["BACKENDS", "Backend", "BackendError", "Completion", "Request", "make_backend"]


def _hf(settings: dict[str, Any]) -> Backend:
    from eval.backends.hf import make_hf

    return make_hf(settings)


def _vllm(settings: dict[str, Any]) -> Backend:
    from eval.backends.vllm import make_vllm

    return make_vllm(settings)


def _openai(settings: dict[str, Any]) -> Backend:
    from plumbing.openai_backend import make_openai

    return make_openai(settings)


def _reference(name: str) -> Callable[[dict[str, Any]], Backend]:
    def make(settings: dict[str, Any]) -> Backend:
        from eval.backends.oracle import make_oracle

        return make_oracle(settings, name=name)

    return make


BACKENDS: dict[str, Callable[[dict[str, Any]], Backend]] = {
    "hf": _hf, "vllm": _vllm, "openai": _openai, "oracle": _reference("oracle"),
    "never_compress": _reference("never_compress"), "first_range": _reference("first_range"),
}


def make_backend(name: str, settings: dict[str, Any] | None = None) -> Backend:
    """Build a backend by name; unknown names raise BackendError listing the choices."""
    if name not in BACKENDS:
        raise BackendError(f"unknown backend {name!r}; expected one of {sorted(BACKENDS)}")
    return BACKENDS[name](dict(settings or {}))
