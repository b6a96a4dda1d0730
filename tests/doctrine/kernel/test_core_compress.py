"""apply_compression: every validation rule, error, warning and result text (§5.5, §6.1)."""

from doctrine.kernel.compress import CompressRange, apply_compression
from doctrine.kernel.config import KernelConfig
from doctrine.kernel.messages import Message
from doctrine.kernel.refs import assign_refs
from doctrine.kernel.state import CompressionState

SUM = "Summary: read config.py:12, timeout=30s chosen because the API is slow; tests pass."  # 84 chars
NOZONE = dict(preserveRecentMessages=0, preserveRecentTokens=0)


def cfg(**over):
    return KernelConfig.for_limit(200000, **{**NOZONE, "minCompressRange": 100, **over})


def T(i, role="user", n=400):
    return Message(i, role, "text", "w" * n)


def session(n=10, **over):
    """u0, a1, u2, a3, ... each 400 chars (100 tokens), refs m00001..m000nn."""
    msgs = [T(f"{'ua'[i % 2]}{i}", "user" if i % 2 == 0 else "assistant") for i in range(n)]
    st = CompressionState.initial()
    assign_refs(msgs, st, cfg(**over))
    return msgs, st


def rng(a, b, summary=SUM, **kw):
    return CompressRange(a, b, summary, **kw)


def run(ranges, msgs, st, **over):
    return apply_compression(ranges, msgs, st, cfg(**over), compress_call_id="call-1", clock_ms=lambda: 42)


def test_success_creates_block_and_reports():
    msgs, st = session()
    before = st.to_acp_json()
    r = run([rng("m00002", "m00004", topic="setup")], msgs, st)
    assert (r.blocks_created, r.tokens_compressed, r.errors, r.warnings) == (1, 300, [], [])
    assert r.text == "[Compressed m00002–m00004 → 1 block(s), ~300 tokens saved.]"
    b = r.state.blocks[0]
    assert (b.block_id, b.run_id, b.tier, b.topic, b.start_ref, b.end_ref, b.compress_call_id,
            b.created_at, b.active, b.survived_count, b.generation) == (
        "b1", "r1", 1, "setup", "m00002", "m00004", "call-1", 42, True, 0, "young")
    assert b.direct_message_ids == b.effective_message_ids == ["a1", "u2", "a3"]
    assert r.state.next_block_id == 2 and r.state.next_run_id == 2
    assert r.state.stats.compression_count == 1 and r.state.stats.tokens_compressed == 300
    assert st.to_acp_json() == before  # input state untouched


def test_success_resets_nudge_stamps():
    msgs, st = session()
    st.nudge.last_per_message_nudge_tokens, st.nudge.last_nudge_shown_tokens = 100, 200
    st.nudge.last_shown_by_tier = {1: 200}
    n = run([rng("m2", "m4")], msgs, st).state.nudge
    assert (n.last_per_message_nudge_tokens, n.last_nudge_shown_tokens, n.last_shown_by_tier) == (0, 0, {})


def test_multiple_ranges_share_a_run_and_summary_is_stored_untrimmed():
    msgs, st = session()
    r = run([rng("m1", "m2", summary="  " + SUM + "  "), rng("m5", "m6")], msgs, st)
    assert r.blocks_created == 2 and {b.run_id for b in r.state.blocks} == {"r1"}
    assert r.state.blocks[0].summary == "  " + SUM + "  "
    assert r.text.startswith("[Compressed m1–m2, m5–m6 → 2 block(s), ~400 tokens saved.")


def test_reversed_refs_are_swapped():
    msgs, st = session()
    r = run([rng("m00004", "m00002")], msgs, st)
    assert r.state.blocks[0].effective_message_ids == ["a1", "u2", "a3"]


def test_batch_gate_too_small_returns_original_state():
    msgs, st = session()
    r = run([rng("m1", "m1")], msgs, st, minCompressRange=5000)
    assert r.blocks_created == 0 and r.state.to_acp_json() == st.to_acp_json()
    assert r.errors == ["total compressible content too small (400 chars across 1 range(s), min 5000)"]
    assert r.text == "[Compression FAILED: " + r.errors[0] + "]"
    assert r.state.next_run_id == 1  # nothing allocated


def test_batch_gate_sums_ranges_and_is_skipped_when_off():
    msgs, st = session()
    assert run([rng("m1", "m3"), rng("m6", "m9")], msgs, st, minCompressRange=2800).blocks_created == 2
    assert run([rng("m1", "m1")], msgs, st, minCompressRange=0).blocks_created == 1


def test_batch_gate_all_unknown_variant():
    msgs, st = session()
    r = run([rng("m00090", "m00091"), rng("bogus", "m1")], msgs, st)
    # acp-kernel: the gate's error first, then each unresolved range's own error
    assert len(r.errors) == 3 and "acp_status" in r.errors[0]
    assert "never assigned" in r.errors[1] and "cannot parse" in r.errors[2]


def test_batch_gate_already_compressed_variant():
    msgs, st = session()
    st = run([rng("m1", "m4")], msgs, st).state
    view = [m for m in msgs if m.id not in {"u0", "a1", "u2", "a3"}]  # a pruned host view, no summary
    st.blocks[0].active = False  # block gone as well: refs are consumed, nothing to snap to
    r = run([rng("m2", "m3")], view, st, minCompressRange=5000)
    assert len(r.errors) == 1 and r.errors[0].startswith("some ranges were already compressed")


def test_unknown_and_invalid_refs_are_prefixed_errors():
    msgs, st = session()
    r = run([rng("m1", "m4"), rng("m00077", "m00078"), rng("x1", "m2"), rng("b9", "b9")], msgs, st)
    assert r.blocks_created == 1 and len(r.errors) == 3
    assert r.errors[0].startswith("range m00077..m00078: ") and "never assigned" in r.errors[0]
    assert r.errors[1].startswith("range x1..m2: ") and "cannot parse" in r.errors[1]
    assert r.errors[2].startswith("range b9..b9: ")
    assert "error: range m00077..m00078" in r.text  # partial success lists the errors


def test_summary_validation():
    msgs, st = session()
    for summary, needle in [("   ", "summary is empty"), ("x" * 49, "summary too short (49 chars, min 50)"),
                            ("x" * 20001, "summary too long (20001 chars, max 20000)")]:
        r = run([rng("m1", "m4", summary=summary)], msgs, st)
        assert r.blocks_created == 0 and len(r.errors) == 1 and needle in r.errors[0]
    assert run([rng("m1", "m4", summary="x" * 20000)], msgs, st).blocks_created == 1
    assert run([rng("m1", "m4", summary=" " * 5 + "x" * 50)], msgs, st).blocks_created == 1  # trimmed length
    r = run([rng("m1", "m4", summary="x" * 300, summary_max_chars=200)], msgs, st)
    assert "max 200" in r.errors[0]
    assert run([rng("m1", "m4", summary="x" * 30000, summary_max_chars=0)], msgs, st).blocks_created == 1


def test_overlapping_range_is_skipped_with_warning():
    msgs, st = session()
    r = run([rng("m3", "m5"), rng("m1", "m3"), rng("m6", "m7")], msgs, st)
    assert r.blocks_created == 2 and r.warnings == ["range m3..m5: overlaps an earlier range; skipped"]
    assert [b.start_ref for b in r.state.blocks] == ["m1", "m6"]


def test_recent_zone_is_removed_with_warning_or_error():
    msgs, st = session()
    over = dict(preserveRecentMessages=2, preserveRecentTokens=0)  # zone: last 2 + last user (u8)
    r = run([rng("m6", "m10")], msgs, st, **over)
    assert r.blocks_created == 1 and r.state.blocks[0].effective_message_ids == ["a5", "u6", "a7"]
    assert r.warnings == ["range m6..m10: m00009, m00010 in the recent protected zone left uncompressed"]
    r = run([rng("m1", "m3"), rng("m9", "m10")], msgs, st, **over)
    assert r.blocks_created == 1 and "entirely in the recent protected zone" in r.errors[0]


def test_hard_protected_messages_stay_out_of_blocks():
    msgs, st = session(4)
    extra = [Message("c", "assistant", "tool-call", "{}" * 100, "compress", "k0"),
             Message("t", "tool", "tool-result", "ok" * 100, None, "k0"),  # paired with the call
             T("u9")]
    msgs = msgs[:2] + extra + msgs[2:]
    assign_refs(msgs, st, cfg())
    r = run([rng("m1", "m7")], msgs, st)  # m7 = u9, placed before u2
    assert r.state.blocks[0].effective_message_ids == ["u0", "a1", "u9"]
    assert r.state.blocks[0].direct_message_ids == ["u0", "a1", "u9"]


def test_reasoning_and_tool_pair_widening():
    msgs = [T("u0"), Message("r1", "assistant", "reasoning", "think " * 20),
            Message("c1", "assistant", "tool-call", "{}" * 50, "grep", "k1"), T("a2", "assistant"),
            Message("t1", "tool", "tool-result", "hit " * 100, "grep", "k1"), T("u3"),
            Message("r4", "assistant", "reasoning", "more " * 20), T("a5", "assistant"), T("u6")]
    st = CompressionState.initial()
    assign_refs(msgs, st, cfg())
    # start at the call: its reasoning joins; the call's result (2 messages later) joins too
    r = run([rng("m3", "m3")], msgs, st, minCompressRange=0)
    assert r.state.blocks[0].effective_message_ids == ["r1", "c1", "a2", "t1"]
    # end on a reasoning run: extended to the assistant text that follows
    r = run([rng("m6", "m7")], msgs, st, minCompressRange=0)
    assert r.state.blocks[0].effective_message_ids == ["u3", "r4", "a5"]


def test_block_boundaries_make_higher_tiers():
    msgs, st = session(10)
    st = run([rng("m1", "m2"), rng("m3", "m4"), rng("m7", "m8")], msgs, st).state  # b1 b2 b3
    r = run([rng("b1", "b2", summary=SUM + " tier two")], msgs, st, minCompressRange=10**9)
    assert r.errors == [] and r.blocks_created == 1  # block boundary: batch gate skipped
    b4 = r.state.blocks[-1]
    assert (b4.block_id, b4.tier, b4.direct_block_ids) == ("b4", 2, ["b1", "b2"])
    assert b4.effective_message_ids == ["u0", "a1", "u2", "a3"] and b4.direct_message_ids == []
    assert b4.compressed_tokens == 2 * 21  # the consumed summaries, 84 chars = 21 tokens each
    assert [b.active for b in r.state.blocks] == [False, False, True, True]
    # raw messages between boundary blocks are absorbed as direct messages
    r2 = run([rng("b4", "b3", summary=SUM)], msgs, r.state)
    b5 = r2.state.blocks[-1]
    # nested: b4 (tier 2) and b3 (tier 1); target = min tier = 1 -> only b3 consumed, output tier 2
    assert (b5.tier, b5.direct_block_ids) == (2, ["b3"])
    assert b5.direct_message_ids == ["u4", "a5"]
    st3 = run([rng("b3", "b3", summary=SUM)], msgs, r.state).state
    st3 = run([rng("b4", "b5", summary=SUM)], msgs, st3).state
    assert st3.blocks[-1].tier == 3 and st3.blocks[-1].direct_block_ids == ["b4", "b5"]
    st4 = run([rng("b6", "b6", summary=SUM)], msgs, st3).state
    assert st4.blocks[-1].tier == 3  # capped at 3 (tier 3 over tier 3 is allowed)


def test_consumed_block_ref_snaps_to_its_heir():
    msgs, st = session(10)
    st = run([rng("m1", "m2"), rng("m3", "m4")], msgs, st).state
    st = run([rng("b1", "b2")], msgs, st).state  # b3 consumed b1, b2
    r = run([rng("b1", "b3")], msgs, st)
    assert r.blocks_created == 1 and any("b1 was folded into b3" in w for w in r.warnings)


def test_message_ref_inside_active_block_snaps_in_a_pruned_view():
    msgs, st = session(10)
    st = run([rng("m1", "m4")], msgs, st).state
    pruned = [Message("acp_summary_b1", "system", "text", "[Compressed conversation section]\n" + SUM)] + msgs[4:]
    # m2 was compressed by b1 itself: reported as already compressed, not snapped
    # (acp-kernel snaps only content a block inherited by consuming another block)
    r = run([rng("m2", "m6")], pruned, st)
    assert r.blocks_created == 0 and not any("already inside" in w for w in r.warnings)
    # once b1 is folded into a tier-2 block, its messages snap to that block
    st2 = run([rng("b1", "b1")], pruned, st).state
    heir = st2.blocks[-1]
    assert heir.direct_block_ids == ["b1"] and heir.tier == 2
    pruned2 = [Message(f"acp_summary_{heir.block_id}", "system", "text",
                       "[Compressed conversation section]\n" + SUM)] + msgs[4:]
    r = run([rng("m2", "m6")], pruned2, st2)
    assert any(f"already inside {heir.block_id}" in w for w in r.warnings)


def test_consumed_message_ref_is_a_warning():
    msgs, st = session(10)
    view = msgs[4:]  # the host dropped u0..a3 with no block covering them
    r = run([rng("m1", "m2"), rng("m6", "m8")], view, st)
    assert r.blocks_created == 1 and r.warnings[0].startswith("range m1..m2: already compressed")


def test_livelock_guard():
    msgs, st = session(10)
    st = run([rng("m3", "m4")], msgs, st).state
    # a message-boundary range whose only new content is already in b1
    r = run([rng("m3", "m4")], msgs, st)
    assert r.blocks_created == 0 and "use block boundaries (b1..b1)" in r.errors[0]


def test_empty_range_list():
    msgs, st = session()
    r = run([], msgs, st)  # acp-kernel: no error, no block (the host reports the failure)
    assert r.errors == [] and r.blocks_created == 0 and r.text.startswith("[Compression FAILED")


def test_plain_dict_ranges_are_accepted():
    msgs, st = session()
    r = apply_compression([{"startId": "m2", "endRef": "m4", "summary": SUM, "summaryMaxChars": "x"},
                           {"startRef": 5, "endRef": None, "summary": 7}, "junk"], msgs, st, cfg())
    assert r.blocks_created == 1 and r.state.blocks[0].effective_message_ids == ["a1", "u2", "a3"]
    assert len(r.errors) == 2 and not any("internal error" in e for e in r.errors)
