"""The ``oracle`` backend: the labeling function (hindsight) used as a policy.

It loads no model. The workload puts what hindsight says into ``Request.meta``: a held-out
row's target (``meta["target"]``) or the reply the labeler (or the workload's built-in
hindsight rule) chose for a decision point (``meta["oracle_reply"]``). A custom ``policy``
(``Request -> assistant message dict``) replaces that, which is how tests inject a stub.
The oracle gives the upper reference for decisions and runs whole workloads in seconds.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from eval.backends.base import Backend, Completion, Request, prompt_text

Policy = Callable[[Request], dict[str, Any]]


def hint_policy(request: Request) -> dict[str, Any]:
    """Answer with the workload's hindsight hint; with none, a plain empty turn."""
    for key in ("oracle_reply", "target"):
        msg = request.meta.get(key)
        if isinstance(msg, dict):
            return msg
    return {"role": "assistant", "content": ""}


class OracleBackend(Backend):
    name = "oracle"

    def __init__(self, policy: Policy | None = None, **_: Any):
        self.policy = policy or hint_policy
        self.calls = 0

    def _complete(self, request: Request) -> Completion:
        from train.tool_format import format_assistant_text

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


def make_oracle(settings: dict[str, Any] | None = None, policy: Policy | None = None) -> OracleBackend:
    """Factory used by ``BACKENDS``."""
    return OracleBackend(policy=policy)
