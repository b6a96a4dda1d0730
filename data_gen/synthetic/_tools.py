"""OpenHands-style task tools and a builder that writes a session message by message.

The builder is the only place that creates messages, steps and facts, so the invariants
the labeler relies on hold by construction: tool calls and results are paired by id and
in order, steps are contiguous, each fact's text is checked against its message when it
is declared, and :func:`link` fills ``Fact.used_at`` from ``Step.uses`` (one source of
truth, so the two always agree).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from doctrine.session import FACT_KINDS, Fact, Session, Step, message_text

__all__ = ["DEFAULT_SIZE", "TOOLS", "SYSTEM_PROMPT", "SessionBuilder", "SessionSize", "link", "session_id"]


@dataclass(frozen=True)
class SessionSize:
    """How big a generated session is.

    ``steps``: task steps (probe steps come on top: ``probes`` of them);
    ``tool_output_lines``: the (min, max) line count bulky tool outputs are drawn from
    (file views, test logs, greps; log triage scales it up). The default gives roughly
    8K to 60K tokens (chars / 4) per session.
    """

    steps: int = 12
    tool_output_lines: tuple[int, int] = (20, 120)
    probes: int = 2

    def __post_init__(self) -> None:
        lo_hi = tuple(self.tool_output_lines)
        if len(lo_hi) != 2 or not all(isinstance(v, int) for v in lo_hi) or not 1 <= lo_hi[0] <= lo_hi[1]:
            raise ValueError(f"tool_output_lines must be (min, max) with 1 <= min <= max, got {self.tool_output_lines!r}")
        object.__setattr__(self, "tool_output_lines", lo_hi)
        if not isinstance(self.steps, int) or self.steps < 3:
            raise ValueError(f"steps must be an integer >= 3, got {self.steps!r}")
        if not isinstance(self.probes, int) or self.probes < 0:
            raise ValueError(f"probes must be an integer >= 0, got {self.probes!r}")

    def probe_slots(self) -> list[int]:
        """After how many finished task steps each probe is asked (never after the last)."""
        return [min(self.steps - 1, max(1, round((j + 1) * self.steps / (self.probes + 1))))
                for j in range(self.probes)]


DEFAULT_SIZE = SessionSize()


def session_id(family: str, seed: int, size: SessionSize) -> str:
    """A stable id: family, seed and a digest of the size."""
    key = f"{family}:{seed}:{size.steps}:{size.tool_output_lines[0]}-{size.tool_output_lines[1]}:{size.probes}"
    return f"syn-{family}-{seed}-{hashlib.sha256(key.encode()).hexdigest()[:8]}"

SYSTEM_PROMPT = (
    "You are a coding agent working in a sandboxed repository under /workspace. Use the tools "
    "to inspect files, run commands and edit code. Work step by step, verify your changes, and "
    "call finish when the task is done."
)


def _tool(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "function", "function": {
        "name": name, "description": description,
        "parameters": {"type": "object", "properties": properties, "required": required}}}


TOOLS: list[dict[str, Any]] = [
    _tool("execute_bash", "Run a bash command in the sandbox and return its output and exit code.",
          {"command": {"type": "string", "description": "The command to run."},
           "is_input": {"type": "string", "enum": ["true", "false"],
                        "description": "Send the command as input to a running process."},
           "timeout": {"type": "number", "description": "Seconds to wait before returning."}},
          ["command"]),
    _tool("str_replace_editor", "View, create and edit files: view shows `cat -n` output, create writes a "
          "new file, str_replace swaps one unique occurrence, insert adds text after a line.",
          {"command": {"type": "string", "enum": ["view", "create", "str_replace", "insert", "undo_edit"]},
           "path": {"type": "string", "description": "Absolute path of a file or directory."},
           "file_text": {"type": "string"}, "old_str": {"type": "string"}, "new_str": {"type": "string"},
           "insert_line": {"type": "integer"},
           "view_range": {"type": "array", "items": {"type": "integer"}}},
          ["command", "path"]),
    _tool("think", "Write down reasoning; nothing is executed.",
          {"thought": {"type": "string"}}, ["thought"]),
    _tool("finish", "Signal that the task is complete, with a short final message.",
          {"message": {"type": "string"}}, ["message"]),
]

THINK_RESULT = "Your thought has been logged."
FINISH_RESULT = "Task finished."


@dataclass
class _Open:
    start: int
    kind: str
    uses: list[str] = field(default_factory=list)


class SessionBuilder:
    """Append-only writer of one session's messages, steps and facts."""

    def __init__(self, family: str, seed: int):
        self.family = family
        self.seed = seed
        self.messages: list[dict[str, Any]] = []
        self.steps: list[Step] = []
        self.facts: list[Fact] = []
        self.probes: list[dict[str, Any]] = []
        self._open: _Open | None = None
        self._calls = 0
        self._offers: list[tuple[str, str, str | None]] = []  # (fact id, question, answer)

    # ------------------------------------------------------------------ steps

    @property
    def step_index(self) -> int:
        return len(self.steps)

    def step(self, kind: str = "task") -> int:
        """Close the current step and open a new one at the next message."""
        first = self._open is None and not self.steps
        self._close()
        # the first step also holds what came before it (the system prompt)
        self._open = _Open(0 if first else len(self.messages), kind)
        return self.step_index

    def _close(self) -> None:
        if self._open is None:
            return
        if len(self.messages) == self._open.start:
            raise ValueError(f"{self.family}: step {self.step_index} has no messages")
        self.steps.append(Step(self.step_index, self._open.start, len(self.messages),
                               list(self._open.uses), self._open.kind))
        self._open = None

    def use(self, *fact_ids: str | None) -> None:
        """The current step depends on these facts (``None`` entries are skipped)."""
        if self._open is None:
            raise ValueError("use() outside a step")
        known = {f.id for f in self.facts}
        for fid in fact_ids:
            if fid is None:
                continue
            if fid not in known:
                raise KeyError(f"{self.family}: unknown fact {fid}")
            if fid not in self._open.uses:
                self._open.uses.append(fid)

    # ------------------------------------------------------------------ messages

    def _add(self, msg: dict[str, Any]) -> int:
        if self._open is None and self.messages:
            raise ValueError("messages after the first must belong to a step")
        self.messages.append(msg)
        return len(self.messages) - 1

    def system(self, text: str = SYSTEM_PROMPT) -> int:
        return self._add({"role": "system", "content": text})

    def user(self, text: str) -> int:
        return self._add({"role": "user", "content": text})

    def say(self, text: str) -> int:
        """An assistant message without tool calls."""
        return self._add({"role": "assistant", "content": text})

    def calls(self, calls: list[tuple[str, dict[str, Any], str]], text: str = "") -> tuple[int, list[int]]:
        """One assistant turn with parallel tool calls, then one result per call, in order.

        Returns (index of the assistant message, indices of the results).
        """
        tcs, results = [], []
        for name, args, output in calls:
            self._calls += 1
            cid = f"call_{self._calls:04d}"
            tcs.append({"id": cid, "type": "function",
                        "function": {"name": name, "arguments": json.dumps(args, ensure_ascii=False)}})
            results.append({"role": "tool", "tool_call_id": cid, "name": name, "content": output})
        a = self._add({"role": "assistant", "content": text, "tool_calls": tcs})
        return a, [self._add(r) for r in results]

    def call(self, name: str, args: dict[str, Any], output: str, text: str = "") -> int:
        """One tool call and its result; returns the result's index (``result - 1`` is the call)."""
        return self.calls([(name, args, output)], text)[1][0]

    def bash(self, command: str, output: str, text: str = "") -> int:
        return self.call("execute_bash", {"command": command}, output, text)

    def editor(self, args: dict[str, Any], output: str, text: str = "") -> int:
        return self.call("str_replace_editor", args, output, text)

    def think(self, thought: str) -> int:
        return self.call("think", {"thought": thought}, THINK_RESULT)

    def finish(self, message: str) -> int:
        return self.call("finish", {"message": message}, FINISH_RESULT)

    # ------------------------------------------------------------------ facts

    def fact(self, text: str, kind: str, message: int | None = None) -> str:
        """Declare that ``message`` (default: the last one) introduces ``text``; returns its id."""
        if kind not in FACT_KINDS:
            raise ValueError(f"unknown fact kind {kind!r}")
        idx = len(self.messages) - 1 if message is None else message
        if text not in message_text(self.messages[idx]):
            raise ValueError(f"{self.family}: fact {text[:60]!r} is not in message {idx}")
        fid = f"f{len(self.facts) + 1:03d}"
        self.facts.append(Fact(fid, text, kind, idx))
        return fid

    def text_of(self, fid: str) -> str:
        return next(f.text for f in self.facts if f.id == fid)

    def probe(self, question: str, fid: str, answer: str | None = None) -> int:
        """A probe step: the user asks, the assistant answers from memory with the fact text."""
        text = self.text_of(fid)
        answer = answer if answer is not None else f"From earlier in this session: {text}"
        if text not in answer:
            raise ValueError("a probe's answer must quote its fact")
        k = self.step("probe")
        self.user(question)
        self.say(answer)
        self.use(fid)
        self.probes.append({"step": k, "fact": fid, "question": question, "answer": text})
        return k

    def offer_probe(self, fid: str, question: str, answer: str | None = None) -> None:
        """Make ``fid`` a candidate for a later probe, asked with ``question``."""
        self._offers.append((fid, question, answer))

    def probes_due(self, size: SessionSize, tasks_done: int) -> None:
        """Ask the probes scheduled after ``tasks_done`` task steps.

        Probes alternate between the oldest offered fact (deep recall) and the newest one
        offered so far (recent recall); each fact is asked at most once. A slot with no
        fact left to ask is skipped.
        """
        for slot_no, slot in enumerate(size.probe_slots()):
            if slot != tasks_done:
                continue
            asked = {p["fact"] for p in self.probes}
            ready = [o for o in self._offers if o[0] not in asked]
            if ready:
                fid, question, answer = ready[0] if slot_no % 2 == 0 else ready[-1]
                self.probe(question, fid, answer)

    # ------------------------------------------------------------------ result

    def build(self, session_id: str, meta: dict[str, Any]) -> Session:
        self._close()
        s = Session(session_id=session_id, family=self.family, seed=self.seed,
                    messages=self.messages, steps=self.steps, facts=self.facts,
                    tools=json.loads(json.dumps(TOOLS)), meta={**meta, "probes": self.probes})
        link(s.steps, s.facts)
        return s.validate()


def link(steps: list[Step], facts: list[Fact]) -> None:
    """Make ``Fact.used_at`` exactly the steps whose ``uses`` name the fact (sorted, unique)."""
    for s in steps:
        s.uses = list(dict.fromkeys(s.uses))
    by_id = {f.id: f for f in facts}
    for f in facts:
        f.used_at = []
    for s in steps:
        for fid in s.uses:
            if fid in by_id:
                by_id[fid].used_at.append(s.index)
