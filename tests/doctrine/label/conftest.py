"""Hand-built sessions and decision points for the labeler tests.

``tiny_session`` is a five-step bug hunt with two bulky tool outputs:

* step 0: the task (m00001), ``cat logs/run.log`` (m00002, m00003 = output A, holds the
  error F), a remark (m00004);
* step 1: ``cat src/parser.py`` (m00005, m00006 = output B, holds the signature G), a remark;
* step 2: a small ``ls`` step; step 3 uses F; step 4 uses G.

So at the step-2 boundary, horizon 0 needs nothing, horizon 1 needs A's unit and horizon 2
needs A's and B's units: the three horizons give compress-both, compress-B, refusal.
"""

from __future__ import annotations

import json

import pytest

from doctrine.kernel.profile import resolve_profile
from doctrine.kernel.state import CompressionState
from doctrine.label.needed import session_msg_id
from doctrine.label.point import build_point
from doctrine.render.request import request_frame
from doctrine.session import Fact, Session, Step
from doctrine.spec import load_doctrine

F_TEXT = "ValueError: bad header at byte 17"
G_TEXT = "def parse_header(raw: bytes) -> Header:"


def _call(cid: str, cmd: str, text: str = "") -> dict:
    return {"role": "assistant", "content": text, "tool_calls": [
        {"id": cid, "type": "function", "function": {"name": "execute_bash", "arguments": json.dumps({"command": cmd})}}]}


def _result(cid: str, out: str) -> dict:
    return {"role": "tool", "tool_call_id": cid, "name": "execute_bash", "content": out}


def _log_lines(n: int) -> str:
    lines = [f"2026-01-0{1 + i % 9}T10:{i % 60:02d}:00 INFO worker-{i % 4} processed batch {1000 + i} in {20 + i % 7} ms"
             for i in range(n)]
    lines.insert(n // 2, F_TEXT)
    return "\n".join(lines)


def _source_lines(n: int) -> str:
    body = ["import struct", "", "", "class Header:", "    size: int", "", "", G_TEXT,
            "    magic = raw[:4]", "    return Header(len(raw))", ""]
    body += [f"def helper_{i}(value):\n    return value * {i} + {i % 5}" for i in range(n)]
    return "\n".join(f"{i + 1:6}\t{ln}" for i, ln in enumerate("\n".join(body).split("\n")))


def make_session() -> Session:
    m = [
        {"role": "system", "content": "You are a coding agent in /workspace."},
        {"role": "user", "content": "Fix the header parser so the upload works. Do not change the public API of src/parser.py."},
        _call("c1", "cat logs/run.log", "Reading the run log first."),
        _result("c1", _log_lines(70)),
        {"role": "assistant", "content": "The log shows where the upload fails."},
        _call("c2", "cat -n src/parser.py"),
        _result("c2", _source_lines(40)),
        {"role": "assistant", "content": "Read the parser module."},
        _call("c3", "ls"),
        _result("c3", "logs\nsrc\ntests"),
        {"role": "assistant", "content": "Layout checked."},
        _call("c4", "python -m pytest -q"),
        _result("c4", "1 failed, 3 passed in 0.12s"),
        {"role": "assistant", "content": f"Still failing with {F_TEXT} as in the log."},
        {"role": "assistant", "content": f"Editing the parser: {G_TEXT} stays as it is."},
        _call("c5", "python -m pytest -q"),
        _result("c5", "4 passed in 0.10s"),
        {"role": "assistant", "content": "All tests pass now."},
    ]
    steps = [Step(0, 0, 5), Step(1, 5, 8), Step(2, 8, 11), Step(3, 11, 14, uses=["f1"]), Step(4, 14, 18, uses=["f2"])]
    facts = [Fact("f1", F_TEXT, "error_strings", 3, [3]), Fact("f2", G_TEXT, "signatures", 6, [4])]
    return Session("hand-tiny", "hand", 0, m, steps, facts).validate()


# Every point gets a nudge (growth gate G = 1); a recent zone of one message.
NUDGE_ALWAYS = {"nudge": {"growth_floor": 1, "growth_cap": 1, "min_growth_floor": 0, "min_growth_ratio": 0.0},
                "compress": {"min_compress_range": 500}, "preserve_recent_messages": 1,
                "preserve_recent_tokens": 1}
NUDGE_NEVER = {"nudge": {"growth_floor": 10**9, "growth_cap": 10**9}, "compress": {"min_compress_range": 500},
               "preserve_recent_messages": 1, "preserve_recent_tokens": 1}


@pytest.fixture(scope="session")
def doctrine():
    return load_doctrine("v1")


@pytest.fixture()
def session() -> Session:
    return make_session()


def history_for(session: Session, visible: int) -> list[dict]:
    out = []
    for i in range(1, visible):
        d = {k: v for k, v in session.messages[i].items()}
        d["id"] = session_msg_id(i)
        out.append(d)
    return out


def point_at(session: Session, step: int, doctrine, *, window: int = 100_000, overrides=None,
             state: CompressionState | None = None, history: list[dict] | None = None, mode: str = "distilled",
             **kw):
    """A decision point at the boundary of ``step`` (before its first assistant message)."""
    st = session.steps[step]
    visible = next(i for i in range(st.start, st.end) if session.messages[i]["role"] == "assistant")
    hist = history if history is not None else history_for(session, visible)
    profile = resolve_profile(window, "reference", prompt_mode=mode,
                              kernel_overrides=overrides if overrides is not None else NUDGE_ALWAYS)
    frame = request_frame(profile, doctrine)
    return build_point(session, step, visible, hist, state or CompressionState.initial(), frame, **kw)


class Hand:
    """The helpers above, handed to tests as the ``hand`` fixture (importlib mode has no
    sibling imports)."""

    F_TEXT = F_TEXT
    G_TEXT = G_TEXT
    NUDGE_ALWAYS = NUDGE_ALWAYS
    NUDGE_NEVER = NUDGE_NEVER
    make_session = staticmethod(make_session)
    history_for = staticmethod(history_for)
    point_at = staticmethod(point_at)


@pytest.fixture()
def hand() -> type[Hand]:
    return Hand
