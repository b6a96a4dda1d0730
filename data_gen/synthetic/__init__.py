"""Seeded synthetic coding-agent sessions, one generator per workload family.

``generate(family, seed, size)`` returns a validated :class:`~doctrine.session.Session`
whose facts know, by construction, which message introduced them and which later steps
use them. Same (family, seed, size) gives a byte-identical ``to_json()`` in any process.

Every family is a key of ``ALL_FAMILIES``, the registry ``generate`` reads: the union of
``FAMILIES`` (the full-size families), ``POCKET_FAMILIES`` and ``PROCEDURAL_FAMILIES``; a
family added to one of them is known everywhere that names families. Each has its own
session shape:

- ``ts_repo``: a TypeScript library grown by create / test / refactor / rename / retune
  requests; renamed symbols make their old signature obsolete.
- ``py_bughunt``: failing pytest run, then traceback -> read -> edit -> rerun loops.
- ``dep_migration``: a 6-step plan stated once; later user turns only say "continue".
- ``log_triage``: huge log outputs with one or two needles; the first error is re-quoted
  in the final report.
- ``data_analysis``: CSV heads and pandas tables; a threshold chosen early is reused.
- ``pocket_api``, ``pocket_worker``, ``pocket_cli`` (``pocket.py``): one short call per
  step, sized for the ``pocket`` serving profile's ~2K-token decision points.
- ``proc_python``, ``proc_typescript``, ``proc_go``, ``proc_rust``, ``proc_ops``, ``proc_sql``,
  ``proc_k8s``, ``proc_git`` (``procedural.py``): pocket-sized sessions whose structure,
  start ids and values are drawn per seed from a step library, one ecosystem per family.

The Session Marathon is eval's workload and is deliberately not built here. Which family
is held out for evaluation is a data config choice, not a property of this package.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from doctrine.session import Session

from . import data_analysis, dep_migration, log_triage, pocket, procedural, py_bughunt, ts_repo
from ._tools import DEFAULT_SIZE, TOOLS, SessionSize

__all__ = ["ALL_FAMILIES", "FAMILIES", "POCKET_FAMILIES", "PROCEDURAL_FAMILIES", "TOOLS", "SessionSize", "approx_tokens", "generate", "shape_stats"]

FAMILIES: dict[str, Callable[[int, SessionSize], Session]] = {
    "ts_repo": ts_repo.generate,
    "py_bughunt": py_bughunt.generate,
    "dep_migration": dep_migration.generate,
    "log_triage": log_triage.generate,
    "data_analysis": data_analysis.generate,
}
# Small-step families for the pocket serving profile (data_gen/synthetic/pocket.py): a
# registry of their own, since their sessions are a tenth of the size band above.
POCKET_FAMILIES: dict[str, Callable[[int, SessionSize], Session]] = {
    name: pocket.generator(name) for name in pocket.FAMILIES}
# Procedural pocket sessions (procedural.py): one family per ecosystem, structure drawn per seed.
PROCEDURAL_FAMILIES: dict[str, Callable[[int, SessionSize], Session]] = {
    name: procedural.generator(name) for name in procedural.FAMILIES}
ALL_FAMILIES = {**FAMILIES, **POCKET_FAMILIES, **PROCEDURAL_FAMILIES}


def generate(family: str, seed: int, size: SessionSize = DEFAULT_SIZE) -> Session:
    """One validated session of ``family`` for ``seed`` (an int >= 0) at ``size``."""
    if family not in ALL_FAMILIES:
        raise ValueError(f"unknown synthetic family {family!r}; known: {', '.join(ALL_FAMILIES)}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    return ALL_FAMILIES[family](seed, size)


def _chars(m: dict) -> int:
    n = len(m.get("content") or "")
    for c in m.get("tool_calls") or []:
        n += len((c.get("function") or {}).get("arguments") or "")
    return n


def approx_tokens(session: Session) -> int:
    """Rough token count: characters of contents and tool-call arguments, divided by 4."""
    return sum(_chars(m) for m in session.messages) // 4


def shape_stats(session: Session) -> dict[str, float]:
    """Numbers that tell the families apart (and that the CLI summary prints).

    ``tool_share``: share of characters in tool results; ``user_turns``: user messages per
    task step; ``edit_share``: share of tool calls that edit a file in place; ``far_uses``: uses of a fact more than 3 steps after the step that
    introduced it; ``max_output_share``: the largest single tool result's share of all.
    """
    chars = [_chars(m) for m in session.messages]
    total = max(1, sum(chars))
    tool = [c for c, m in zip(chars, session.messages, strict=True) if m.get("role") == "tool"]
    tasks = sum(1 for s in session.steps if s.kind == "task")
    users = sum(1 for s in session.steps if s.kind == "task"
                for m in session.messages[s.start:s.end] if m.get("role") == "user")
    far = sum(1 for f in session.facts for u in f.used_at if u - session.step_of(f.message) > 3)
    calls = [c["function"] for m in session.messages for c in m.get("tool_calls") or []]
    edits = sum(1 for c in calls if c["name"] == "str_replace_editor" and _command(c) in ("str_replace", "insert"))
    return {
        "messages": len(session.messages), "steps": len(session.steps), "facts": len(session.facts),
        "tokens": approx_tokens(session), "tool_share": round(sum(tool) / total, 4),
        "user_turns": round(users / max(1, tasks), 4), "far_uses": far,
        "unused_facts": sum(1 for f in session.facts if not f.used_at),
        "max_output_share": round(max(tool, default=0) / total, 4),
        "edit_share": round(edits / max(1, len(calls)), 4),
    }


def _command(fn: dict) -> str:
    try:
        return str(json.loads(fn.get("arguments") or "{}").get("command", ""))
    except (ValueError, AttributeError):
        return ""
