"""process_turn: stage order, no mutation of inputs, truncation, filters and config."""

import copy

import pytest

from doctrine.kernel.config import KernelConfig
from doctrine.kernel.filters import MessageFilter
from doctrine.kernel.messages import Message
from doctrine.kernel.state import Block, CompressionState
from doctrine.kernel.truncate import MARKER
from doctrine.kernel.turn import process_turn


def session():
    return [Message("u0", "user", "text", "please look " * 10),
            Message("c1", "assistant", "tool-call", '{"cmd":"cat big.log"}', "bash", "k1"),
            Message("t1", "tool", "tool-result", "L" * 24000, "bash", "k1"),
            Message("c2", "assistant", "tool-call", '{"cmd":"cat other.log"}', "bash", "k2"),
            Message("t2", "tool", "tool-result", "M" * 12000, "bash", "k2"),
            Message("a1", "assistant", "text", "done " * 20), Message("u1", "user", "text", "ok"),
            Message("a2", "assistant", "text", "fine"), Message("u2", "user", "text", "next"),
            Message("a3", "assistant", "text", "sure"), Message("u3", "user", "text", "go")]


def test_process_turn_never_mutates_inputs():
    msgs = session()
    st = CompressionState(blocks=[Block("b1", "r1", 1, "s" * 80, ["a1"], ["a1"], start_ref="m00006",
                                        end_ref="m00006")])
    st.nudge.last_per_message_nudge_tokens = 100
    msgs_before, st_before = copy.deepcopy(msgs), copy.deepcopy(st)
    cfg = KernelConfig.for_limit(10000)
    r = process_turn(msgs, st, cfg, 9800)  # emergency band: every stage does something
    assert msgs == msgs_before and st == st_before
    assert r.state is not st and r.state.blocks[0].survived_count == 1
    assert r.truncated  # the view changed...
    assert msgs[2].text == "L" * 24000  # ...but not the input


def test_emergency_truncation_largest_first_until_target():
    cfg = KernelConfig.for_limit(10000)  # threshold 0.95 -> target 0.9 * 0.95 * 10000 = 8550
    r = process_turn(session(), CompressionState.initial(), cfg, 9800, render_tags="none")
    assert [t.id for t in r.truncated] == ["t1"]  # saves ~4990 tokens: 9800 - 4990 <= 8550
    t1 = next(m for m in r.messages if m.id == "t1")
    assert t1.text.startswith("L" * 2000 + "\n\n" + MARKER + " — original ~6000 tokens]...\n\n")
    assert t1.text.endswith("L" * 2000) and len(t1.text) == 4000 + len(
        f"\n\n{MARKER} — original ~6000 tokens]...\n\n")
    r2 = process_turn(session(), CompressionState.initial(), cfg, 16000, render_tags="none")
    assert [t.id for t in r2.truncated] == ["t1", "t2"]
    r3 = process_turn(session(), CompressionState.initial(), cfg, 9499, render_tags="none")
    assert r3.truncated == []
    assert r.state.to_acp_json()["blocks"] == []  # state untouched by truncation


def test_truncation_spares_recent_messages_and_tags_keep_frozen_counts():
    cfg = KernelConfig.for_limit(10000, preserveRecentMessages=9)  # t1 (index 2) is in the last 9
    r = process_turn(session(), CompressionState.initial(), cfg, 9800, render_tags="none")
    assert r.truncated == []
    st = process_turn(session(), CompressionState.initial(), KernelConfig.for_limit(10000), 100).state
    r = process_turn(session(), st, KernelConfig.for_limit(10000), 9800)
    t1 = next(m for m in r.messages if m.id == "t1")
    assert t1.text.startswith('<acp tokens="6.0K" type="bash">m00003</acp>\n' + "L" * 2000 + "\n\n" + MARKER)


def test_pipeline_prunes_hides_and_tags_in_order():
    msgs = session() + [Message("p", "assistant", "tool-call", '{"content":[]}', "compress", "gone")]
    st = CompressionState(blocks=[Block("b1", "r1", 1, "kept facts", ["c1", "t1"], ["c1", "t1"],
                                        compress_call_id="gone", active=False),
                                  Block("b2", "r1", 1, "other facts", ["c2", "t2"], ["c2", "t2"])])
    r = process_turn(msgs, st, KernelConfig.for_limit(200000), 1000)
    ids = [m.id for m in r.messages]
    # b1 is re-activated by sync (its raw messages are present) and so is its call
    assert ids == ["u0", "acp_summary_b1", "acp_summary_b2", "a1", "u1", "a2", "u2", "a3", "u3", "p"]
    assert r.messages[1].text == "[Compressed conversation section]\nkept facts"
    assert r.messages[0].text.startswith('<acp tokens="30" type="text">m00001</acp>\n')
    st.blocks[0].direct_block_ids = []
    st.blocks[1].direct_block_ids = ["b1"]  # b1 consumed: its call is hidden
    r = process_turn(msgs, st, KernelConfig.for_limit(200000), 1000)
    assert "p" not in [m.id for m in r.messages] and "acp_summary_b1" not in [m.id for m in r.messages]


def test_filters_stage():
    def drop_ok(m, i, msgs):
        return "drop" if m.text == "ok" else None

    def last_sure(m, i, msgs):
        return "keep" if m.role == "assistant" and m.content_type == "text" else None

    cfg = KernelConfig.for_limit(200000, message_filters={"enabled": True},
                                 filters=[MessageFilter("drop-ok", drop_ok),
                                          MessageFilter("last", last_sure, keep_last_only=True)])
    r = process_turn(session(), CompressionState.initial(), cfg, 100, render_tags="none")
    texts = {m.id: m.text for m in r.messages}
    assert texts["u1"] == "" and texts["a3"] == "sure" and texts["a1"] == "" and texts["a2"] == ""
    off = KernelConfig.for_limit(200000, message_filters={"enabled": True, "filters": {"drop-ok": {"enabled": False}}},
                                 filters=[MessageFilter("drop-ok", drop_ok)])
    r = process_turn(session(), CompressionState.initial(), off, 100, render_tags="none")
    assert {m.id: m.text for m in r.messages}["u1"] == "ok"


def test_config_defaults_overrides_and_validation():
    c = KernelConfig.for_limit(200000)
    assert (c.nudge.max_context_limit_pct, c.nudge.growth_floor, c.nudge.growth_cap, c.nudge.min_growth_floor,
            c.nudge.min_growth_ratio, c.nudge.emergency_threshold_pct, c.nudge.tier2_growth_multiplier) == (
        0.75, 50000, 50000, 20000, 0.45, 0.95, 1.5)
    assert (c.compress.min_compress_range, c.compress.max_summary_length, c.compress.min_summary_length) == (
        5000, 20000, 50)
    assert (c.preserve_recent_messages, c.preserve_recent_tokens, c.promotion_threshold,
            c.truncate.threshold, c.protected_tools) == (5, 5000, 5, 0.95, ())
    assert c.validate() == []
    o = KernelConfig.for_limit(8000, nudge={"growthFloor": 1000}, minCompressRange=10,
                               preserve_recent_messages=2, truncate={"threshold": 0.9})
    assert (o.nudge.growth_floor, o.nudge.growth_cap, o.compress.min_compress_range,
            o.preserve_recent_messages, o.truncate.threshold) == (1000, 50000, 10, 2, 0.9)
    with pytest.raises(ValueError, match="growthFlor"):
        KernelConfig.for_limit(8000, growthFlor=1)
    with pytest.raises(ValueError):
        KernelConfig.for_limit(8000, nudge={"nope": 1})
    bad = KernelConfig.for_limit(8000, maxContextLimitPct=0.99, tier2Trigger=10, promotionThreshold=0,
                                 truncate={"threshold": 1.5})
    w = bad.validate()
    assert len(w) == 4 and any("tier3Trigger" in x for x in w)
    assert c.to_dict()["nudge"]["growth_floor"] == 50000
    r = process_turn([], CompressionState.initial(), bad, 0)
    assert r.config_warnings == w


def test_bad_strategy_is_rejected():
    with pytest.raises(ValueError):
        process_turn([], CompressionState.initial(), KernelConfig(), 0, render_tags="some")
