"""What the oracle backend answers: the labeling function when it is there, else a rule.

The scripted workload knows each session's future (``Session.facts``/``steps``), so it can
say what a perfect policy would do at a decision point. ``decision_reply`` prefers the
project's labeling function (``doctrine.label.label_decision``); when it skips or fails on
a point, a plain hindsight rule answers:
compress the kernel's viable ranges that hold no message needed within the horizon (the
summary quotes every fact the range introduced), decline when every range is still needed.
Probe answers quote the expected facts that are visible; summaries quote the facts present.
"""

from __future__ import annotations

import json
import re
from typing import Any

from doctrine.kernel.refs import lookup_ref
from doctrine.kernel.turn import process_turn
from doctrine.label import DecisionPoint, label_decision
from doctrine.label.needed import tool_units
from eval.arms import kernel_profile
from eval.judges import contains, visible_text

_SID = re.compile(r"^s(\d+)")


def session_index(flat_id: str) -> int | None:
    """Session message index of a flat message id ``s12`` / ``s12#call`` (None otherwise)."""
    m = _SID.match(flat_id or "")
    return int(m.group(1)) if m else None


def _range_indices(view: Any, kstate: Any, start_ref: str, end_ref: str) -> list[int]:
    ids = [m.id for m in view.flat or []]
    a, b = lookup_ref(start_ref, kstate), lookup_ref(end_ref, kstate)
    if a not in ids or b not in ids:
        return []
    out = [session_index(i) for i in ids[ids.index(a): ids.index(b) + 1]]
    return sorted({i for i in out if i is not None})


def rule_decision(session: Any, step: int, view: Any, kstate: Any, horizon: int) -> dict[str, Any]:
    """The built-in hindsight policy for a decision point (see module docstring)."""
    decision = view.decision
    if decision is None or not view.nudge_shown:
        return {"role": "assistant", "content": ""}
    needed = session.needed_messages(step, horizon)
    content = []
    for r in decision.compressible_ranges:
        idx = _range_indices(view, kstate, r.start_ref, r.end_ref)
        if not idx or needed.intersection(idx):
            continue
        facts = [f.text for f in session.facts if f.message in idx]
        body = "; ".join(facts) if facts else "no lasting facts"
        summary = f"Consumed work in {r.start_ref}-{r.end_ref} ({r.count} messages). Kept: {body}."
        content.append({"startId": r.start_ref, "endId": r.end_ref, "summary": summary})
    if not content:
        return {"role": "assistant", "content": "Not compressing now: those messages are still in use."}
    call = {"id": f"oracle_{step}", "type": "function", "function": {
        "name": "compress", "arguments": json.dumps({"topic": f"step {step}", "content": content})}}
    return {"role": "assistant", "content": "", "tool_calls": [call]}


def labeler_decision(session: Any, step: int, view: Any, kstate: Any, env: Any, horizon: int,
                     seed: int) -> dict[str, Any] | None:
    """``doctrine.label.label_decision`` at this point, or None when skipped or failing (the
    caller then counts a rule decision)."""
    if view.flat is None:
        return None
    try:
        prof = view.profile or kernel_profile(env, "distilled")
        kcfg = prof.kernel
        visible = 1 + max((i for i in map(session_index, (m.id for m in view.flat)) if i is not None), default=-1)
        if visible >= len(session.messages):
            return None
        kview = process_turn(view.flat, view.kernel_before, kcfg, view.token_count, render_tags="none",
                             count_tokens=prof.count_tokens).messages
        mv = view.model_view
        point = DecisionPoint(session=session, step=step, visible=visible, flat=view.flat,
                              state_before=view.kernel_before, view=mv, kernel_view=kview,
                              token_count=view.token_count, window=env.window, kconfig=kcfg, host=prof.host_config,
                              count_tokens=prof.count_tokens, units=tool_units(session.messages), profile=prof)
        label = label_decision(point, doctrine=env.kernel.doctrine, horizon=horizon, seed=seed)
        msg = getattr(label, "message", None)
        return msg if isinstance(msg, dict) else None
    except Exception:  # LabelSkipped, or a contract mismatch: fall back to the rule, counted
        return None


def decision_reply(session: Any, step: int, view: Any, kstate: Any, env: Any, horizon: int,
                   seed: int, counters: dict[str, int]) -> dict[str, Any]:
    msg = labeler_decision(session, step, view, kstate, env, horizon, seed)
    if msg is not None:
        counters["labeler"] = counters.get("labeler", 0) + 1
        return msg
    counters["rule"] = counters.get("rule", 0) + 1
    return rule_decision(session, step, view, kstate, horizon)


def probe_reply(expected: list[str], messages: list[dict[str, Any]]) -> dict[str, Any]:
    text = visible_text(messages)
    found = [f for f in expected if contains(text, f)]
    return {"role": "assistant", "content": "; ".join(found) if found else "I no longer have that detail."}


def summary_reply(session: Any, source: list[dict[str, Any]]) -> dict[str, Any]:
    text = visible_text(source)
    found = [f.text for f in session.facts if contains(text, f.text)]
    return {"role": "assistant", "content": "Earlier work. " + ("; ".join(found) if found else "Nothing to keep.")}
