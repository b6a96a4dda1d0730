"""Shared pieces for the eval tests: the doctrine, hand-made chat histories, stub backends."""

from __future__ import annotations

import json

import pytest

from doctrine.spec import resolve_doctrine


@pytest.fixture(scope="session")
def doctrine():
    return resolve_doctrine("v1")


def call(cid: str, cmd: str) -> dict:
    return {"id": cid, "type": "function", "function": {"name": "bash", "arguments": json.dumps({"cmd": cmd})}}


def exchange_history(n_exchanges: int, calls_per: int = 1, output_chars: int = 40, seed: int = 0) -> list[dict]:
    """user, then per exchange: one assistant message with ``calls_per`` calls, their results,
    and sometimes an assistant text; ids are stable (``s00000``...)."""
    import random

    rng = random.Random(seed)
    msgs: list[dict] = [{"role": "user", "content": "Fix the parser."}]
    for k in range(n_exchanges):
        if rng.random() < 0.3:
            msgs.append({"role": "user", "content": f"Now look at part {k}."})
        cs = [call(f"c{k}_{j}", f"cat f{k}_{j}.py") for j in range(calls_per)]
        msgs.append({"role": "assistant", "content": "", "tool_calls": cs})
        for j in range(calls_per):
            msgs.append({"role": "tool", "tool_call_id": f"c{k}_{j}", "name": "bash",
                         "content": f"out {k}.{j} " + "x" * output_chars})
        if rng.random() < 0.5:
            msgs.append({"role": "assistant", "content": f"Read part {k}."})
    return [{**m, "id": f"s{i:05d}"} for i, m in enumerate(msgs)]


def tool_protocol_ok(messages: list[dict]) -> bool:
    """Every tool result has its call earlier in the list, and every call all its results."""
    calls: dict[str, bool] = {}
    for m in messages:
        for c in m.get("tool_calls") or []:
            calls[c["id"]] = False
        if m.get("role") == "tool":
            if m.get("tool_call_id") not in calls:
                return False
            calls[m["tool_call_id"]] = True
    return all(calls.values())
