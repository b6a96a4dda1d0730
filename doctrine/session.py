"""A session with hindsight: messages plus which facts each later step uses.

Every session source (synthetic families, recorded trajectories, logged decisions) turns
its input into this one shape, and the labeling function reads only this shape:

- ``messages``: OpenAI chat format (``role``, ``content`` string, ``tool_calls`` with JSON
  string ``arguments``, ``tool_call_id``, ``name``), the agent's own task tools only (no
  compress calls: those are what the curriculum teaches);
- ``steps``: the task steps, each a half-open message range ``[start, end)``; a step
  starts at a user message or at the assistant turn that begins a new piece of work;
- ``facts``: exact strings a message introduces (a path with a line number, an error
  string, a value, a decision with its rationale, a signature, the user's constraint...),
  each with the index of the message that introduces it and the steps that use it later.

"Still needed by the current step" is decided from this: message ``i`` is needed at step
``s`` with horizon ``h`` iff a fact introduced in ``i`` is used by a step in ``(s, s + h]``
(or by ``s`` itself). Synthetic sources know their facts by construction; recorded sources
derive them from later references to the same paths, symbols, error strings and values.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from doctrine.conform.items import CLASSES

__all__ = ["Fact", "Session", "SessionError", "Step", "message_text", "string_values"]

# Fact kinds: the KEEP-verbatim classes of the conformance checker, except message refs
# (a session's facts are strings its messages introduce, never kernel refs).
FACT_KINDS = tuple(c for c in CLASSES if c != "message_refs")


class SessionError(ValueError):
    """A session that breaks the shape above; the message names the session and field."""


@dataclass
class Fact:
    id: str
    text: str  # the exact string, as it appears in messages[message].content or its tool-call args
    kind: str  # one of FACT_KINDS
    message: int  # index of the message that introduces it
    used_at: list[int] = field(default_factory=list)  # indices of the steps that use it


@dataclass
class Step:
    index: int
    start: int  # first message index of the step
    end: int  # one past its last message
    uses: list[str] = field(default_factory=list)  # ids of the facts the step uses
    kind: str = "task"  # "task" | "probe" (a question answered from memory)


@dataclass
class Session:
    session_id: str
    family: str  # workload family ("ts_repo", "py_bughunt", ...) or source ("swe_rebench", ...)
    seed: int
    messages: list[dict[str, Any]]
    steps: list[Step]
    facts: list[Fact]
    tools: list[dict[str, Any]] = field(default_factory=list)  # the task tools' OpenAI schemas
    source: str = "synthetic"  # "synthetic" | "swe_rebench" | "logged" | "teacher"
    license: str = "project"  # licence of the underlying data (e.g. "CC-BY-4.0")
    meta: dict[str, Any] = field(default_factory=dict)

    # ------------------------------------------------------------------ hindsight

    def step_of(self, message_index: int) -> int:
        """The step that contains ``message_index`` (the last step for trailing messages)."""
        for step in self.steps:
            if step.start <= message_index < step.end:
                return step.index
        raise SessionError(f"{self.session_id}: message {message_index} is in no step")

    def needed_messages(self, step: int, horizon: int) -> set[int]:
        """Messages that introduce a fact used by a step in ``[step, step + horizon]``."""
        window = set(range(step, step + horizon + 1))
        return {f.message for f in self.facts if window.intersection(f.used_at)}

    def truncated(self, n_steps: int) -> Session:
        """The first ``n_steps`` steps as a session of their own (facts and uses cut to match).

        Step-keyed entries of ``meta`` (dicts whose keys are step numbers) are cut too.
        """
        if n_steps >= len(self.steps):
            return self
        steps = [Step(s.index, s.start, s.end, list(s.uses), s.kind) for s in self.steps[:n_steps]]
        end = steps[-1].end
        facts = [Fact(f.id, f.text, f.kind, f.message, [u for u in f.used_at if u < n_steps])
                 for f in self.facts if f.message < end]
        kept = {f.id for f in facts}
        for st in steps:
            st.uses = [u for u in st.uses if u in kept]
        meta = {}
        for k, v in self.meta.items():
            if isinstance(v, dict) and v and all(str(x).isdigit() for x in v):
                v = {x: y for x, y in v.items() if int(x) < n_steps}
            meta[k] = v
        return Session(self.session_id, self.family, self.seed, self.messages[:end], steps, facts,
                       list(self.tools), self.source, self.license, meta)

    # ------------------------------------------------------------------ io

    def validate(self) -> Session:
        n = len(self.messages)
        sid = self.session_id
        if not self.steps:
            raise SessionError(f"{sid}: no steps")
        prev_end = None
        for k, s in enumerate(self.steps):
            if s.index != k:
                raise SessionError(f"{sid}: steps[{k}].index is {s.index}, expected {k}")
            if not 0 <= s.start < s.end <= n:
                raise SessionError(f"{sid}: steps[{k}] range [{s.start}, {s.end}) outside 0..{n}")
            if prev_end is not None and s.start != prev_end:
                raise SessionError(f"{sid}: steps[{k}] starts at {s.start}, previous ended at {prev_end}")
            prev_end = s.end
        ids = set()
        for f in self.facts:
            if f.kind not in FACT_KINDS:
                raise SessionError(f"{sid}: fact {f.id} has unknown kind {f.kind!r}")
            if not 0 <= f.message < n:
                raise SessionError(f"{sid}: fact {f.id} points at message {f.message} of {n}")
            if f.text not in message_text(self.messages[f.message]):
                raise SessionError(f"{sid}: fact {f.id} text {f.text[:40]!r} is not in message {f.message}")
            if any(not 0 <= u < len(self.steps) for u in f.used_at):
                raise SessionError(f"{sid}: fact {f.id} used at a step that does not exist")
            ids.add(f.id)
        for s in self.steps:
            missing = set(s.uses) - ids
            if missing:
                raise SessionError(f"{sid}: step {s.index} uses unknown facts {sorted(missing)}")
        for f in self.facts:
            users = sorted(s.index for s in self.steps if f.id in s.uses)
            if users != sorted(set(f.used_at)):
                raise SessionError(f"{sid}: fact {f.id} used_at {f.used_at} disagrees with steps' uses {users}")
        return self

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, sort_keys=True)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Session:
        try:
            return cls(
                session_id=d["session_id"], family=d["family"], seed=int(d["seed"]),
                messages=list(d["messages"]),
                steps=[Step(**s) for s in d["steps"]],
                facts=[Fact(**f) for f in d["facts"]],
                tools=list(d.get("tools", [])), source=d.get("source", "synthetic"),
                license=d.get("license", "project"), meta=dict(d.get("meta", {})),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise SessionError(f"{d.get('session_id', '<session>')}: bad session record ({exc})") from None


def string_values(obj: Any) -> list[str]:
    """Every string inside a JSON value (dict values and list items, depth first)."""
    out, stack = [], [obj]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            out.append(v)
        elif isinstance(v, dict):
            stack.extend(reversed(list(v.values())))
        elif isinstance(v, list):
            stack.extend(reversed(v))
    return out


def message_text(m: dict[str, Any]) -> str:
    """A message's searchable text: content, raw tool-call arguments and their decoded strings
    (facts are written unescaped, while arguments are JSON strings)."""
    parts = [m.get("content") or ""]
    for c in m.get("tool_calls") or []:
        raw = (c.get("function") or {}).get("arguments") or ""
        parts.append(raw)
        try:
            parts.extend(string_values(json.loads(raw)))
        except ValueError:
            continue
    return "\n".join(parts)
