"""Soft zone, compressible groups, merge to threshold, viable ranges (§5.1-5.4)."""

from doctrine.kernel.config import KernelConfig
from doctrine.kernel.messages import Message
from doctrine.kernel.recommend import Range, merge_to_threshold, recommend, soft_zone, viable_ranges
from doctrine.kernel.refs import assign_refs
from doctrine.kernel.state import Block, CompressionState


def T(i, role="user", n=40):
    return Message(i, role, "text", "x" * n)


def tool(i, kind, cid, name="grep", n=40):
    role = "assistant" if kind == "tool-call" else "tool"
    return Message(i, role, kind, "y" * n, name, cid)


def reffed(msgs, cfg):
    st = CompressionState.initial()
    assign_refs(msgs, st, cfg)
    return st


def test_soft_zone_union_of_count_tokens_and_last_user():
    cfg = KernelConfig.for_limit(100000, preserveRecentMessages=2, preserveRecentTokens=25)
    msgs = [T("u1"), T("a1", "assistant"), T("u2"), T("a2", "assistant", 40), T("a3", "assistant", 8),
            tool("c", "tool-call", "k", "bash"), tool("t", "tool-result", "k", "bash")]
    st = reffed(msgs, cfg)
    # candidates skip bash (never-preserve); tokens: a3=2, a2=10, u2=10, a1=10
    # last 2 = a2, a3; token walk: a3 (2) a2 (12) u2 (22) a1 (32: crosses, included); last user u2
    assert soft_zone(msgs, st, cfg) == {"a3", "a2", "u2", "a1"}
    cfg0 = KernelConfig.for_limit(100000, preserveRecentMessages=0, preserveRecentTokens=0)
    assert soft_zone(msgs, st, cfg0) == set()  # no last-user rule when the count is 0


def test_soft_zone_skips_covered_and_summaries():
    cfg = KernelConfig.for_limit(100000, preserveRecentMessages=1, preserveRecentTokens=0)
    msgs = [T("u1"), T("u2"), Message("acp_summary_b1", "system", "text", "[Compressed conversation section]")]
    st = reffed(msgs, cfg)
    st.blocks.append(Block("b1", "r1", 1, "s", ["u2"], ["u2"]))
    assert soft_zone(msgs, st, cfg) == {"u1"}  # u2 is covered: not a candidate, not the last user


def test_groups_split_on_gaps_and_on_user_after_three():
    cfg = KernelConfig.for_limit(100000, preserveRecentMessages=0, preserveRecentTokens=0,
                                 minCompressRange=0)
    msgs = [T("u1"), tool("c1", "tool-call", "k1"), tool("t1", "tool-result", "k1"), T("a1", "assistant"),
            T("u2"), T("a2", "assistant"), T("u3"),
            tool("p1", "tool-call", "k2", "compress"), tool("p2", "tool-result", "k2", "compress"), T("u4")]
    st = reffed(msgs, cfg)
    rec = recommend(msgs, st, cfg)
    got = [(r.start_ref, r.end_ref, r.count, r.tokens, r.chars, r.tool_pct, r.text_pct) for r in rec.context_ranges]
    # u1 (0%), c1 -> round(100/2)=50, t1 -> round(200/3)=67, a1 -> round(201/4)=50;
    # u2 starts a new group (current has 4); a2; u3 joins (group has 2); compress -> protected;
    # u4 after the protected gap starts a group
    assert got == [("m00001", "m00004", 4, 40, 160, 50, 50), ("m00005", "m00007", 3, 30, 120, 0, 100),
                   ("m00010", "m00010", 1, 10, 40, 0, 100)]
    assert [(p.start_ref, p.end_ref, p.count, p.tokens, p.tools) for p in rec.protected_ranges] == [
        ("m00008", "m00009", 2, 20, ["compress"])]
    assert rec.recommended_ranges == rec.context_ranges  # minCompressRange 0: pass-through


def test_pairing_protects_results_and_blocked_refs_are_skipped():
    cfg = KernelConfig.for_limit(100000, preserveRecentMessages=0, preserveRecentTokens=0,
                                 protectedTools=["todo*"])
    msgs = [T("u1"), tool("c", "tool-call", "k", "todo_write"), Message("t", "tool", "tool-result", "z" * 40, None, "k"),
            T("u2")]
    st = reffed(msgs, cfg)
    rec = recommend(msgs, st, cfg)
    # c is BLOCKED (no ref): skipped; t has a ref but is paired with a protected call
    assert [(p.start_ref, p.count) for p in rec.protected_ranges] == [("m00002", 1)]
    assert [(r.start_ref, r.end_ref) for r in rec.context_ranges] == [("m00001", "m00001"), ("m00003", "m00003")]


def test_zero_token_groups_are_dropped():
    cfg = KernelConfig.for_limit(100000, preserveRecentMessages=0, preserveRecentTokens=0)
    msgs = [T("e", "assistant", 0)]
    assert recommend(msgs, reffed(msgs, cfg), cfg).context_ranges == []


def R(s, e, count, tokens, chars, tool):
    return Range(f"m{s:05d}", f"m{e:05d}", count, tokens, chars, tool, 100 - tool)


def test_merge_to_threshold_batches_and_weights_tool_pct():
    groups = [R(1, 2, 2, 100, 3000, 100), R(5, 7, 3, 300, 2500, 0), R(9, 9, 1, 50, 100, 100),
              R(12, 12, 1, 10, 40, 0)]
    out = merge_to_threshold(groups, 5000)
    assert [(r.start_ref, r.end_ref, r.count, r.tokens, r.chars, r.tool_pct) for r in out] == [
        ("m00001", "m00007", 5, 400, 5500, 40),   # (100*2 + 0*3) / 5
        ("m00009", "m00012", 2, 60, 140, 50),     # final batch below the threshold still emitted
    ]
    groups[1].dangerous = True
    assert merge_to_threshold(groups, 5000)[0].dangerous
    assert len(merge_to_threshold(groups, 0)) == 4


def test_viable_ranges_need_200_tokens():
    rs = [R(1, 1, 1, 199, 900, 0), R(2, 2, 1, 200, 900, 0)]
    assert [r.tokens for r in viable_ranges(rs)] == [200]
