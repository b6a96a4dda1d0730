"""The one backend interface: chat messages + tools in, a parsed assistant message out.

Every backend returns a :class:`Completion`: the assistant message in OpenAI chat format,
the raw text the model produced, the tool calls as parsed by ``plumbing.tool_format`` (or as
the server returned them), parse errors (a counted failure, never an exception), token
usage and latency. ``Request.use_adapter`` picks base or base + adapter per call, so one
loaded model serves the ``base_slim`` and ``distilled`` arms alike.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Backend", "BackendError", "Completion", "Request", "prompt_text", "reply_from_text"]


class BackendError(RuntimeError):
    """A backend that cannot start or answer at all (bad config, server down)."""


@dataclass
class Request:
    """One model call. ``meta`` carries workload hints only the oracle reads (hindsight)."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] = field(default_factory=list)
    use_adapter: bool = False
    max_tokens: int = 256
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class Completion:
    message: dict[str, Any]  # {"role": "assistant", "content": str, "tool_calls": [...]?}
    raw_text: str
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    parse_errors: list[str] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)


def reply_from_text(text: str, *, prompt_tokens: int, completion_tokens: int, latency_s: float,
                    id_prefix: str = "call", extra: dict[str, Any] | None = None,
                    strict: bool = False) -> Completion:
    """Parse generated text with the project's one tool-call parser into a Completion."""
    from plumbing.tool_format import parse_assistant_text

    parsed = parse_assistant_text(text, id_prefix=id_prefix, strict=strict)
    msg: dict[str, Any] = {"role": "assistant", "content": parsed.content}
    if parsed.tool_calls:
        msg["tool_calls"] = parsed.tool_calls
    return Completion(msg, text, parsed.tool_calls, list(parsed.errors), prompt_tokens,
                      completion_tokens, latency_s, dict(extra or {}))


def reparsed(comp: Completion, *, strict: bool) -> Completion:
    """``comp`` with its raw text parsed again (``strict``: as vLLM's hermes parser would,
    ``plumbing.tool_format``); tokens, latency and extras kept."""
    return reply_from_text(comp.raw_text, prompt_tokens=comp.prompt_tokens, completion_tokens=comp.completion_tokens,
                           latency_s=comp.latency_s, extra=comp.extra, strict=strict)


def prompt_text(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> str:
    """A plain rendering of a prompt, for token counting where no tokenizer is involved."""
    parts = [json.dumps(tools, ensure_ascii=False, sort_keys=True)] if tools else []
    for m in messages:
        parts.append(f"{m.get('role')}: {m.get('content') or ''}")
        for c in m.get("tool_calls") or []:
            fn = c.get("function") or {}
            parts.append(f"call {fn.get('name')}({fn.get('arguments')})")
    return "\n".join(parts)


class Backend:
    """Base class. Subclasses implement :meth:`_complete`; batching is optional."""

    name = "base"

    def complete(self, request: Request) -> Completion:
        """Answer one request; malformed model output shows up in ``parse_errors``."""
        t0 = time.perf_counter()
        out = self._complete(request)
        if not out.latency_s:
            out.latency_s = time.perf_counter() - t0
        return out

    def complete_batch(self, requests: list[Request]) -> list[Completion]:
        """Answer several independent requests (default: one by one)."""
        return [self.complete(r) for r in requests]

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` as this backend's model counts them (default: the kernel's estimate)."""
        from plumbing.tokens import default_count_tokens

        return default_count_tokens(text)

    def stats(self) -> dict[str, Any]:
        """Cumulative engine counters (prefix-cache hits/queries where the engine has them)."""
        return {}

    def describe(self) -> dict[str, Any]:
        """What a manifest records about this backend (never a key)."""
        return {"backend": self.name}

    def close(self) -> None:
        pass

    def _complete(self, request: Request) -> Completion:  # pragma: no cover - abstract
        raise NotImplementedError
