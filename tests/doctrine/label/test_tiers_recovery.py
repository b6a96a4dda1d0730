"""Tier-2/3 distillation and recovery on the hand-built session."""

from __future__ import annotations

import json
import re

from data_gen.replay import apply_action
from doctrine.conform import check_summary
from doctrine.label import Label, LabelConfig, label_decision
from doctrine.label.actions import call_message, compress_args
from doctrine.label.needed import session_msg_id

TIER_GATE = {"nudge": {"growth_floor": 2000, "growth_cap": 2000, "min_growth_floor": 0, "min_growth_ratio": 0.0,
                       "tier2_growth_multiplier": 0.01},
             "compress": {"min_compress_range": 100000}, "preserve_recent_messages": 1, "preserve_recent_tokens": 1}


def _args(label) -> dict:
    return json.loads(label.message["tool_calls"][0]["function"]["arguments"])


def _session_tail(session, start: int, end: int) -> list[dict]:
    out = []
    for i in range(start, end):
        d = dict(session.messages[i])
        d["id"] = session_msg_id(i)
        out.append(d)
    return out


def _two_blocks(session, doctrine, hand):
    """History and state after folding output B (horizon 1 keeps A), then output A."""
    hist = hand.history_for(session, 8)
    p = hand.point_at(session, 2, doctrine, history=hist)
    first = label_decision(p, doctrine=doctrine, horizon=1, seed=0)
    assert first.kind == "nudged_compress"
    state, _ = apply_action(p, first, hist, "a0001", LabelConfig(), "/tmp")
    p2 = hand.point_at(session, 2, doctrine, history=hist, state=state, action_index=1)
    second = label_decision(p2, doctrine=doctrine, horizon=0, seed=0)
    assert second.kind == "nudged_compress"
    state, _ = apply_action(p2, second, hist, "a0002", LabelConfig(), "/tmp")
    assert len(state.active_blocks()) >= 2
    return hist + _session_tail(session, 8, 11), state


def test_tier2_then_tier3(session, doctrine, hand):
    hist, state = _two_blocks(session, doctrine, hand)
    p = hand.point_at(session, 3, doctrine, history=hist, state=state, overrides=TIER_GATE)
    assert p.nudge_shown and p.nudge.tier == 2
    lab = label_decision(p, doctrine=doctrine, horizon=0, seed=0)
    assert lab.kind == "tier2"
    (rng,) = _args(lab)["content"]
    assert rng["startId"].startswith("b") and rng["endId"].startswith("b")
    sources = lab.ranges[0]["sources"]
    assert len(sources) >= 2
    for b in sources:
        assert re.search(rf"^[-*• ]*Source: {b} \(", rng["summary"], re.M), rng["summary"]
    assert lab.conformance["passed"]
    src = [{"id": b, "role": "assistant", "content_type": "text", "text": p.state.block(b).summary} for b in sources]
    assert check_summary(src, rng["summary"], tier=2, doctrine=doctrine).passed
    state2, _ = apply_action(p, lab, hist, "a0003", LabelConfig(), "/tmp")
    assert [b.tier for b in state2.active_blocks()] == [2]
    # The tier-2 block alone now outweighs everything else: a tier-3 nudge follows.
    p3 = hand.point_at(session, 3, doctrine, history=hist, state=state2, overrides=TIER_GATE, action_index=1)
    assert p3.nudge_shown and p3.nudge.tier == 3
    lab3 = label_decision(p3, doctrine=doctrine, horizon=0, seed=0)
    # One tier-2 block is nothing to condense (a digest folds at least two blocks): the
    # nudge gets a one-line decline in front of the task's own turn, never silence.
    assert lab3.kind == "refusal" and lab3.declined and lab3.action["type"] == "session"
    first_line = lab3.message["content"].split("\n")[0]
    assert first_line and len(first_line) < 120 and "block" in first_line


def _folded_log(session, doctrine, hand, summary: str):
    """History/state where output A (with F) is folded into b1 under ``summary``."""
    hist = hand.history_for(session, 8)
    p = hand.point_at(session, 2, doctrine, history=hist)
    args = compress_args("run log", [{"startId": "m00002", "endId": "m00004", "summary": summary, "topic": "run log"}])
    fake = Label("nudged_compress", call_message("", "call_fold", "compress", args), "test",
                 action={"type": "compress", "call_id": "call_fold", "args": args})
    state, _ = apply_action(p, fake, hist, "a0001", LabelConfig(), "/tmp")
    assert state.active_blocks()[0].block_id == "b1"
    return hist + _session_tail(session, 8, 11), state


def _recover(session, doctrine, hand, hist, state, seed):
    """Run the recovery loop at step 3 (which uses F) on the Pi host; the labels in order."""
    labels, rec = [], None
    hist = list(hist)  # the loop appends the tool calls and results
    cfg = LabelConfig(spontaneous_min_tokens=10**6, tools_host="pi")
    for k in range(4):
        p = hand.point_at(session, 3, doctrine, history=hist, state=state, overrides=hand.NUDGE_NEVER,
                          action_index=k, recovery=rec)
        lab = label_decision(p, doctrine=doctrine, horizon=0, seed=seed, config=cfg)
        labels.append(lab)
        if lab.action["type"] != "tool":
            return labels
        state, rec = apply_action(p, lab, hist, f"a01{k:02d}", cfg, "/tmp")
    return labels


def test_recovery_by_search_when_no_block_id_is_visible(session, doctrine, hand):
    hist, state = _folded_log(session, doctrine, hand, "Read the run log; the upload fails on a malformed header. "
                                                       "Exact line restorable from the original.")
    p = hand.point_at(session, 3, doctrine, history=hist, state=state, overrides=hand.NUDGE_NEVER)
    assert hand.F_TEXT not in p.visible_text
    labels = _recover(session, doctrine, hand, hist, state, seed=0)
    first = labels[0]
    assert first.kind == "recovery" and first.action["name"] == "search_context"
    assert first.action["recovery"]["hit_block"] == "b1"  # the right block
    final = labels[-1]
    assert final.kind == "recovery" and final.action["type"] == "session"
    assert hand.F_TEXT in final.message["content"]  # the exact restored text, quoted
    assert final.message["tool_calls"] == session.messages[p.visible]["tool_calls"]


def test_recovery_decompresses_a_visible_block(session, doctrine, hand):
    hist, state = _folded_log(session, doctrine, hand, "Read the run log (block b1); the upload fails on a malformed "
                                                       "header. Restore b1 for the exact line.")
    tools = set()
    for seed in range(8):
        labels = _recover(session, doctrine, hand, hist, state, seed)
        first = labels[0]
        assert first.kind == "recovery"
        tools.add(first.action["name"])
        if first.action["name"] == "decompress":
            assert first.action["args"]["blockId"] == "b1"
        final = labels[-1]
        assert final.action["type"] == "session" and hand.F_TEXT in final.message["content"]
    assert tools == {"decompress", "search_context"}  # the rule varies deterministically


def test_no_recovery_when_the_detail_is_visible(session, doctrine, hand):
    hist, state = _folded_log(session, doctrine, hand, f"Read the run log; the failure is {hand.F_TEXT} (kept verbatim).")
    p = hand.point_at(session, 3, doctrine, history=hist, state=state, overrides=hand.NUDGE_NEVER)
    lab = label_decision(p, doctrine=doctrine, horizon=0, seed=0, config=LabelConfig(spontaneous_min_tokens=10**6))
    assert lab.kind == "ordinary"


def test_recovery_on_the_proxy_host(session, doctrine, hand):
    hist, state = _folded_log(session, doctrine, hand, "Read the run log (block b1); the upload fails on a malformed "
                                                       "header. Restore b1 for the exact line.")
    cfg = LabelConfig(tools_host="proxy", spontaneous_min_tokens=10**6)
    hist = list(hist)
    rec = None
    for k in range(4):
        p = hand.point_at(session, 3, doctrine, history=hist, state=state, overrides=hand.NUDGE_NEVER,
                          action_index=k, recovery=rec)
        lab = label_decision(p, doctrine=doctrine, horizon=0, seed=1, config=cfg)
        if lab.action["type"] != "tool":
            break
        assert "inline" not in lab.action["args"]  # the proxy schema has no such argument
        state, rec = apply_action(p, lab, hist, f"a02{k:02d}", cfg, "/tmp")
        assert rec.result_text.startswith(("[Restored block b1", "Found", "[No blocks"))
    assert lab.kind == "recovery" and hand.F_TEXT in lab.message["content"]
