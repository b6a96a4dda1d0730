"""Sync, survival, prune (with the orphan strips) and hide-compress-calls (§2.2, §2.3, §3)."""

import json

from doctrine.kernel.hide import hide_compress_calls
from doctrine.kernel.messages import Message
from doctrine.kernel.prune import SUMMARY_HEADER, prune, strip_orphans, summary_text
from doctrine.kernel.state import Block, CompressionState
from doctrine.kernel.sync import advance_survival, sync_blocks


def T(i, role="user", text="t"):
    return Message(i, role, "text", text)


def call(i, cid, tool="bash", text="{}"):
    return Message(i, "assistant", "tool-call", text, tool, cid)


def res(i, cid, tool="bash", text="out"):
    return Message(i, "tool", "tool-result", text, tool, cid)


def blk(bid, ids, tier=1, active=True, consumed=(), **kw):
    return Block(bid, "r1", tier, kw.pop("summary", f"summary of {bid}"), list(ids), list(ids),
                 list(consumed), active=active, **kw)


def test_sync_activates_by_presence_and_consumption():
    st = CompressionState(blocks=[blk("b1", ["a"]), blk("b2", ["gone"]), blk("b3", ["c"], active=False),
                                  blk("b4", ["x"], active=False), blk("b5", ["a", "c"], tier=2, consumed=["b1"])])
    sync_blocks([T("a"), T("c"), T("acp_summary_b4", "system")], st)
    assert [b.active for b in st.blocks] == [False, False, True, True, True]
    # b1 is consumed by b5 (inactive even though "a" is present); b2 vanished (fork);
    # b3 was deactivated by a host but its raw message is back; b4 survives via its summary


def test_sync_drops_snapshot_entries_of_absent_refs():
    st = CompressionState(by_raw={"a": "m00001", "b": "m00002"}, by_ref={"m00001": "a", "m00002": "b"},
                          token_snapshot={"m00001": 5, "m00002": 7, "m00003": 1})
    sync_blocks([T("a")], st)
    assert st.token_snapshot == {"m00001": 5}


def test_survival_counts_and_promotes():
    st = CompressionState(blocks=[blk("b1", ["a"]), blk("b2", ["b"], active=False)])
    for _ in range(5):
        advance_survival(st, 5)
    assert st.blocks[0].survived_count == 5 and st.blocks[0].generation == "old"
    assert st.blocks[1].survived_count == 0 and st.blocks[1].generation == "young"


def test_summary_text_format():
    assert summary_text(blk("b1", [], topic="db", summary="  body \n")) == f"{SUMMARY_HEADER} — db\nbody"
    assert summary_text(blk("b1", [], summary="   ")) == SUMMARY_HEADER


def test_prune_without_active_coverage_returns_messages_unchanged():
    msgs = [T("u"), call("c", "k1")]  # an orphan call would be stripped if prune rebuilt
    assert prune(msgs, CompressionState(blocks=[blk("b1", ["u"], active=False)])) == msgs


def test_prune_replaces_covered_keeps_first_user_and_anchors_summaries():
    msgs = [T("sys", "system"), T("u1"), T("a1", "assistant"), T("u2"), T("a2", "assistant"), T("u3")]
    st = CompressionState(blocks=[blk("b1", ["u1", "a1"]), blk("b2", ["u2", "a2"], topic="t2")])
    out = prune(msgs, st)
    assert [m.id for m in out] == ["sys", "acp_summary_b1", "u1", "acp_summary_b2", "u3"]
    s2 = out[3]
    assert s2.role == "system" and s2.content_type == "text" and s2.text.startswith(f"{SUMMARY_HEADER} — t2\n")


def test_prune_uses_an_existing_summary_as_anchor_and_drops_the_stale_copy():
    # a host that passes its pruned view back: the block's raw messages are gone
    msgs = [T("u0"), T("x", "assistant"), Message("acp_summary_b1", "system", "text", "old text"), T("u9")]
    st = CompressionState(blocks=[blk("b1", ["gone1"], summary="fresh")])
    out = prune(msgs, st)
    assert [m.id for m in out] == ["u0", "x", "acp_summary_b1", "u9"]
    assert out[2].text == f"{SUMMARY_HEADER}\nfresh"


def test_prune_anchor_falls_back_to_zero():
    st = CompressionState(blocks=[blk("b1", ["elsewhere"])])
    assert [m.id for m in prune([T("a"), T("b")], st)] == ["acp_summary_b1", "a", "b"]


def test_orphan_strips_in_order():
    msgs = [T("u"), call("c1", "k1"), Message("r0", "assistant", "reasoning", "x"),
            call("cmp", "k9", "compress"),  # compress calls survive without a result
            res("t2", "k2"), Message("r1", "assistant", "reasoning", "x"),
            Message("r2", "assistant", "reasoning", "y"), T("a", "assistant"),
            Message("r3", "assistant", "reasoning", "z"), T("u2"), Message("r4", "assistant", "reasoning", "w")]
    out = strip_orphans(msgs)
    assert [m.id for m in out] == ["u", "r0", "cmp", "r1", "r2", "a", "u2"]


def test_strip_orphans_drops_call_whose_result_was_covered():
    msgs = [T("u1"), call("c", "k1"), res("t", "k1"), T("u2")]
    st = CompressionState(blocks=[blk("b1", ["t"])])
    assert [m.id for m in prune(msgs, st)] == ["u1", "acp_summary_b1", "u2"]


def compress_call(i, cid, entries):
    return call(i, cid, "compress", json.dumps({"content": entries}))


def test_hide_keeps_live_calls_newest_two_orphans_and_their_results():
    msgs = [compress_call("c1", "k1", []), res("r1", "k1", "compress"),  # block consumed
            compress_call("c2", "k2", []), res("r2", "k2", "compress"),  # orphan (oldest)
            compress_call("c3", "k3", []), res("r3", "k3", "compress"),  # live block
            compress_call("c4", "k4", []), res("r4", "k4", "compress"),  # orphan
            call("c5", None, "compress"),                               # no id: hidden
            compress_call("c6", "k6", []), res("r6", "k6", "compress"),  # orphan (newest)
            T("u")]
    st = CompressionState(blocks=[blk("b1", ["x"], active=False, compress_call_id="k1"),
                                  blk("b2", ["y"], compress_call_id="k3")])
    out = hide_compress_calls(msgs, st)
    assert [m.id for m in out] == ["c3", "r3", "c4", "r4", "c6", "r6", "u"]


def test_hide_rewrites_a_partly_live_call():
    entries = [{"startId": "m00001", "endId": "m00002", "summary": "A"},
               {"startId": "m00003", "endId": "m00004", "summary": "B"},
               {"messageId": "m00009", "summary": "C"}]
    msgs = [compress_call("c", "k", entries), res("r", "k", "compress")]
    live = blk("b1", ["a"], compress_call_id="k", start_ref="m00003", end_ref="m00004")
    dead = blk("b2", ["b"], active=False, compress_call_id="k", start_ref="m00001", end_ref="m00002")
    out = hide_compress_calls(msgs, CompressionState(blocks=[dead, live]))
    assert json.loads(out[0].text)["content"] == [entries[1]]
    assert msgs[0].text == json.dumps({"content": entries})  # input untouched
    # all entries live: text unchanged; legacy blocks without refs: unchanged too
    both = CompressionState(blocks=[live, blk("b3", ["c"], compress_call_id="k", start_ref="m00009",
                                               end_ref="m00009"),
                                    blk("b4", ["d"], compress_call_id="k", start_ref="m00001", end_ref="m00002")])
    assert hide_compress_calls(msgs, both)[0].text == msgs[0].text
    legacy = CompressionState(blocks=[blk("b1", ["a"], compress_call_id="k")])
    assert hide_compress_calls(msgs, legacy)[0].text == msgs[0].text
