"""The ``oracle`` backend: the labeling function (hindsight) used as a policy.

It loads no model. The workload puts what hindsight says into ``Request.meta``: a held-out
row's target (``meta["target"]``) or the reply the labeler (or the workload's built-in
hindsight rule) chose for a decision point (``meta["oracle_reply"]``). A custom ``policy``
(``Request -> assistant message dict``) replaces that, which is how tests inject a stub.
The oracle gives the upper reference for decisions and runs whole workloads in seconds.

The same backend runs the lazy reference policies, by name: ``never_compress`` (a plain
reply to every decision) and ``first_range`` (compress the first range any nudge lists, with
a one-line summary). A sound scorer ranks the oracle near 1 and these well below it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from plumbing.chat_backend import Backend, Completion, Request, prompt_text
from plumbing.tool_format import format_assistant_text

Policy = Callable[[Request], dict[str, Any]]


def hint_policy(request: Request) -> dict[str, Any]:
    """Answer with the workload's hindsight hint; with none, a plain empty turn."""
    for key in ("oracle_reply", "target"):
        msg = request.meta.get(key)
        if isinstance(msg, dict):
            return msg
    return {"role": "assistant", "content": ""}


# ----------------------------------------------------------------- reference policies
# Known policies the scorer is checked with on every run: the oracle (the labels) must score
# near the top, these lazy ones must not.
_RANGE = re.compile(r"\b(m\d{5})\s*[–-]\s*(m\d{5})\b")
_BLOCK = re.compile(r"\b(b\d+)\b")
_LISTED_BLOCK = re.compile(r"^\s+(b\d+)\b", re.M)
_LISTED = re.compile(r"^\s+(m\d{5})(?:\s*[–-]\s*(m\d{5}))?\s+\d+ msgs?\b", re.M)


def _nudge_text(request: Request) -> str | None:
    """The trailing nudge of a request, if the last message is one (a user message that
    lists ranges or blocks to fold)."""
    last = request.messages[-1] if request.messages else {}
    text = last.get("content") or "" if last.get("role") == "user" else ""
    return text if text and (_RANGE.search(text) or "compress" in text.lower()) else None


def never_compress_policy(request: Request) -> dict[str, Any]:
    """Answer every decision with a plain reply: never compress, never act."""
    return {"role": "assistant", "content": "Continuing with the task."}


def first_range_policy(request: Request) -> dict[str, Any]:
    """Whenever a nudge is shown, compress the first range it lists with a one-line summary;
    otherwise a plain reply."""
    text = _nudge_text(request)
    if text is None:
        return never_compress_policy(request)
    # A listed range is a line of its own (doctrine-mode nudges also quote example ranges).
    m = _LISTED.search(text) or (None if _LISTED_BLOCK.search(text) else _RANGE.search(text))
    if m:
        start, end = m.group(1), m.group(2) or m.group(1)
    else:
        b = _LISTED_BLOCK.search(text) or _BLOCK.search(text)
        if not b:
            return never_compress_policy(request)
        start = end = b.group(1)
    args = {"topic": "first range", "content": [
        {"startId": start, "endId": end, "summary": f"Earlier work in {start}-{end}, folded without reading it."}]}
    call = {"id": "first_range_0", "type": "function",
            "function": {"name": "compress", "arguments": json.dumps(args)}}
    return {"role": "assistant", "content": "", "tool_calls": [call]}


POLICIES: dict[str, Policy] = {"oracle": hint_policy, "never_compress": never_compress_policy,
                               "first_range": first_range_policy}


class OracleBackend(Backend):
    name = "oracle"

    def __init__(self, policy: Policy | None = None, *, name: str = "oracle", **_: Any):
        self.policy = policy or POLICIES[name]
        self.name = name
        self.calls = 0

    def _complete(self, request: Request) -> Completion:
        self.calls += 1
        msg = dict(self.policy(request))
        msg.setdefault("role", "assistant")
        content = msg.get("content") or ""
        calls = list(msg.get("tool_calls") or [])
        raw = format_assistant_text(content, calls)
        out = {"role": "assistant", "content": content}
        if calls:
            out["tool_calls"] = calls
        return Completion(out, raw, calls, [],
                          self.count_tokens(prompt_text(request.messages, request.tools)),
                          self.count_tokens(raw))

    def describe(self) -> dict[str, Any]:
        return {"backend": self.name, "policy": getattr(self.policy, "__name__", "custom")}


def make_oracle(settings: dict[str, Any] | None = None, policy: Policy | None = None,
                name: str = "oracle") -> OracleBackend:
    """Factory used by ``BACKENDS`` (``name``: oracle, never_compress, first_range)."""
    return OracleBackend(policy=policy, name=name)
