"""acp_status report: overview, scopes, nudge line, and the no-fill-ratio rule."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from doctrine.kernel.messages import Message
from doctrine.kernel.readers import read_state_file
from doctrine.kernel.state import BLOCKED, Block, CompressionState
from doctrine.render.prompts import fill_disclosures
from doctrine.render.status import build_status_report, collect_visible, format_tokens
from plumbing.tokens import default_count_tokens as tok

FIX = Path(__file__).parent / "fixtures" / "states"
PI = next(FIX.glob("bc-pi/sessions/*/2025-11-30T14-*.acp.json"))
SHARE = re.compile(r"\(\d{1,3}%\)| \| \d{1,3}% of visible")


def _session():
    """12 messages; b1 (active) covers m2-m4, b0 (inactive) once covered m5."""
    texts = {
        "u1": ("user", "text", "Please profile the slow endpoint /api/orders and fix it.", None, None),
        "c1": ("assistant", "tool-call", '{"command":"py-spy top --pid 4121"}', "bash", "k1"),
        "r1": ("tool", "tool-result", "  %Own  Function\n 61.0%  serialize_order\n" * 30, None, "k1"),
        "a1": ("assistant", "text", "serialize_order dominates; it re-queries customers per row.", None, None),
        "c2": ("assistant", "tool-call", '{"path":"app/orders.py"}', "read", "k2"),
        "r2": ("tool", "tool-result", "def serialize_order(o):\n    c = Customer.get(o.cid)\n" * 40, "read", "k2"),
        "c3": ("assistant", "tool-call", '{"command":"pytest -q tests/test_orders.py"}', "bash", "k3"),
        "r3": ("tool", "tool-result", "14 passed in 2.01s", None, "k3"),
        "a2": ("assistant", "text", "Prefetching customers with one IN query cuts it to 40 ms.", None, None),
        "u2": ("user", "text", "Nice, ship it.", None, None),
        "cx": ("assistant", "tool-call", '{"topic":"x"}', "compress", "k9"),  # BLOCKED ref
        "nr": ("assistant", "text", "a message with no ref", None, None),
    }
    msgs = [Message(mid, role, ct, text, tn, tc) for mid, (role, ct, text, tn, tc) in texts.items()]
    by_raw = {m.id: f"m{i + 1:05d}" for i, m in enumerate(msgs[:10])}
    by_raw["cx"] = BLOCKED
    b1 = Block("b1", "r1", 1, "Profiled /api/orders: serialize_order 61% self time (N+1 Customer.get).",
               ["c1", "r1", "a1"], ["c1", "r1", "a1"], compressed_tokens=900, created_at=2,
               survived_count=3, topic="Profiling orders")
    b0 = Block("b0", "r0", 1, "old", ["c2"], ["c2"], compressed_tokens=10, created_at=1, active=False)
    st = CompressionState(blocks=[b0, b1], by_raw=by_raw,
                          by_ref={v: k for k, v in by_raw.items() if v != BLOCKED})
    return st, msgs


def test_visible_messages_skip_covered_blocked_and_unreferenced():
    st, msgs = _session()
    visible, summaries = collect_visible(msgs, st, tok)
    assert [v.ref for v in visible] == ["m00001", "m00005", "m00006", "m00007", "m00008",
                                        "m00009", "m00010"]
    assert summaries == tok(st.block("b1").summary)
    by_ref = {v.ref: v.tool for v in visible}
    # r2 names its tool; r3 does not and takes its call's name.
    assert by_ref["m00006"] == "read" and by_ref["m00008"] == "bash" and by_ref["m00001"] == "text"


def test_overview_breakdown_and_blocks():
    st, msgs = _session()
    report = build_status_report(st, msgs)
    lines = report.splitlines()
    assert lines[0] == "CONTEXT BREAKDOWN"
    tool = sum(tok(m.text) for m in msgs if m.id in ("c2", "r2", "c3", "r3"))
    text = sum(tok(m.text) for m in msgs if m.id in ("u1", "a2", "u2"))
    summ = tok(st.block("b1").summary)
    total = tool + text + summ
    pct = [round(100 * x / total) for x in (tool, text, summ)]
    assert lines[1] == (f"  {format_tokens(tool)} tool ({pct[0]}%) | {format_tokens(text)} text "
                        f"({pct[1]}%) | {summ} summaries ({pct[2]}%)")
    read_tokens = tok(msgs[4].text) + tok(msgs[5].text)
    assert lines[2].startswith(f"  Top tools: read ({round(100 * read_tokens / total)}%), bash (")
    assert "text (" not in lines[2]
    assert f"COMPRESSED BLOCKS — 1 active ({summ} summary, 900 original)" in report
    assert '  b1 (T1)  900→' + str(summ) + '  3 msgs  "Profiling orders"' in lines
    assert "Nudge:" not in report and "b0" not in report


def test_overview_without_blocks_and_block_order_and_limit():
    st, msgs = _session()
    empty = CompressionState(by_raw=st.by_raw)
    assert "COMPRESSED BLOCKS\n  No compressed blocks." in build_status_report(empty, msgs)
    blocks = [Block(f"b{i}", "r", 1 + (i == 3), "summary text " * i, [], [f"z{i}"],
                    compressed_tokens=tokens, created_at=i, topic=f"t{i}")
              for i, tokens in [(1, 500), (2, 3000), (3, 3000), (4, 80)]]
    st2 = CompressionState(blocks=blocks)
    report = build_status_report(st2, [], limit=2)
    rows = [ln.split()[0] for ln in report.splitlines() if re.match(r"  b\d ", ln)]
    assert rows == ["b3", "b2"]  # size desc, newer first on a tie; limit 2
    assert "  Tier usage: T1: " in report and " | T2: " in report
    assert "Tier usage" not in build_status_report(st, msgs)


def test_scope_compressed():
    st, msgs = _session()
    extra = Block("b2", "r2", 2, "tier two summary", [], ["u1"], ["b0"], compressed_tokens=120,
                  created_at=5, survived_count=9, generation="old", topic=None)
    st.blocks.append(extra)
    report = build_status_report(st, msgs, scope="compressed")
    lines = report.splitlines()
    assert lines[0] == f"COMPRESSED — 2 blocks | 1.0K original → {tok(st.block('b1').summary) + tok(extra.summary)} summary"
    assert lines[1].startswith("Tier usage: T1: ")
    assert any(re.fullmatch(r"  b2 \(T2\)  120→\d+  1 msgs  age=9 old nested=\[b0\]", ln) for ln in lines)
    assert '    "(no topic)"' in lines
    by_age = build_status_report(st, msgs, scope="compressed", sort="age").splitlines()
    by_time = build_status_report(st, msgs, scope="compressed", sort="time").splitlines()
    first = lambda ls: next(ln.split()[0] for ln in ls if ln.startswith("  b"))  # noqa: E731
    assert (first(by_age), first(by_time)) == ("b2", "b1")
    short = build_status_report(st, msgs, scope="compressed", limit=1)
    assert short.endswith("1 of 2 shown.")


def test_scope_uncompressed_ranges_and_messages():
    st, msgs = _session()
    ranges = build_status_report(st, msgs, scope="uncompressed")
    lines = ranges.splitlines()
    assert lines[0].endswith("| 7 visible messages")
    assert lines[2].startswith("  m00001  (1 msgs, ") and lines[2].endswith(" text")
    r2 = sum(tok(m.text) for m in msgs[4:10])
    assert lines[3] == (f"  m00005–m00010  (6 msgs, {format_tokens(r2)} ({round(r2 / 6)}/msg)) read")
    per_msg = build_status_report(st, msgs, scope="uncompressed", view="messages", tool="bash",
                                  sort="time")
    plines = per_msg.splitlines()
    bash = [m for m in msgs[6:8]]
    bt = sum(tok(m.text) for m in bash)
    all_visible = sum(tok(m.text) for m in msgs if m.id in ("u1", "c2", "r2", "c3", "r3", "a2", "u2"))
    assert plines[0] == (f"UNCOMPRESSED — bash: {bt} | 2 msgs | {round(100 * bt / all_visible)}% of visible")
    assert plines[1] == "Sorted by time"
    assert [ln.split()[0] for ln in plines[3:]] == ["m00007", "m00008"]
    by_size = build_status_report(st, msgs, scope="uncompressed", view="messages", limit=2)
    rows = [ln for ln in by_size.splitlines() if ln.startswith("  m")]
    assert rows[0].startswith("  m00006 ") and len(rows) == 2
    assert by_size.endswith("2 of 7 shown.")
    none = build_status_report(CompressionState(), [], scope="uncompressed")
    assert "(no uncompressed messages)" in none


@dataclass
class _Range:
    start_ref: str
    end_ref: str
    count: int
    tokens: int
    chars: int = 0
    tool_pct: int = 60
    text_pct: int = 40


@dataclass
class _Decision:
    should_inject: bool
    reason: str
    compressible_ranges: list = field(default_factory=list)
    protected_ranges: list = field(default_factory=list)


def test_nudge_line_and_ranges():
    st, msgs = _session()
    d = _Decision(True, "T1 pending 51200 >= threshold 50000",
                  [_Range("m00005", "m00008", 4, 3400), _Range("m00009", "m00009", 1, 150)])
    report = build_status_report(st, msgs, nudge=d)
    assert "\n\nNudge: ACTIVE — T1 pending 51200 >= threshold 50000\n\n" in report
    assert "Compressible ranges (1, oldest first):" in report
    assert "m00005–m00008  4 msgs  3.4K" in report and "m00009" not in report.split("Nudge")[1]
    idle = build_status_report(st, msgs, nudge={"shouldInject": False, "reason": "growth 10 < floor 22500",
                                                "compressibleRanges": []})
    assert idle.endswith("Nudge: idle — growth 10 < floor 22500")
    # Drill-down scopes never carry the nudge.
    assert "Nudge" not in build_status_report(st, msgs, scope="compressed", nudge=d)


def test_no_fill_ratio_reaches_the_model():
    st, msgs = _session()
    leaky = _Decision(False, "OVER-LIMIT (usage=0.81): nothing pending 78%")
    for report in (build_status_report(st, msgs, nudge=leaky),
                   build_status_report(st, msgs, scope="uncompressed", view="messages", tool="bash")):
        # Composition shares of the visible content are the only percentages.
        assert fill_disclosures(SHARE.sub("", report)) == []
    plain = build_status_report(st, msgs, nudge=leaky, shares=False)
    assert fill_disclosures(plain) == [] and "%" not in plain
    assert "Nudge: idle — OVER-LIMIT: nothing pending" in plain


def test_pi_fixture_overview():
    s = read_state_file(PI)
    report = build_status_report(s.state, s.messages)
    assert "COMPRESSED BLOCKS — 2 active" in report
    assert re.search(r'  b3 \(T2\)  \d+→\d+  18 msgs  "Ingest fixes \(dates, CSV\)"', report)
    # With every tool message folded, the visible content is text and summaries only.
    assert "0 tool (0%)" in report


def test_format_tokens_and_argument_checks():
    assert [format_tokens(n) for n in (0, -5, 999, 1000, 1250, 15300)] == [
        "0", "0", "999", "1.0K", "1.3K", "15.3K"]
    st, msgs = _session()
    for bad in ({"scope": "all"}, {"view": "tree"}, {"sort": "name"}):
        with pytest.raises(ValueError):
            build_status_report(st, msgs, **bad)
    custom = build_status_report(st, msgs, count_tokens=lambda t: 1000)
    assert "4.0K tool" in custom and "3.0K text" in custom


def test_with_the_kernels_own_turn():
    from doctrine.kernel.config import KernelConfig
    from doctrine.kernel.turn import process_turn

    s = read_state_file(next((FIX / "bc-proxy" / "anthropic").glob("*.json")))
    turn = process_turn(s.messages, s.state, KernelConfig.for_limit(200_000), token_count=170_000)
    report = build_status_report(turn.state, turn.messages, nudge=turn.nudge)
    verdict = "ACTIVE" if turn.nudge.should_inject else "idle"
    assert f"\n\nNudge: {verdict} — " in report
    assert "COMPRESSED BLOCKS — 2 active" in report
    assert fill_disclosures(SHARE.sub("", report)) == []
