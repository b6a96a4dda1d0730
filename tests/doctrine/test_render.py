"""Renderers: skeleton, modes, range list formatting, tool schemas, and the no-fill-ratio rule."""

from __future__ import annotations

import json
import random

import pytest

from doctrine.render.prompts import (
    EXAMPLE_VIEWS,
    MODES,
    PARTS,
    BlockView,
    NudgeView,
    RangeView,
    fill_disclosures,
    format_breakdown,
    format_ranges,
    format_tokens,
    render_nudge,
    render_part,
    render_system_prompt,
    tool_schemas,
)
from doctrine.spec import DoctrineError, load_doctrine

DOC = load_doctrine("v1")


def _random_view(rng: random.Random) -> NudgeView:
    ranges, ref = [], rng.randint(1, 50)
    for _ in range(rng.randint(0, 6)):
        ref += rng.randint(0, 30)
        n = rng.randint(1, 40)
        tool = rng.randint(0, 100)
        ranges.append(RangeView(f"m{ref:05d}", f"m{ref + n - 1:05d}", n, rng.randint(0, 90000), tool_pct=tool,
                                text_pct=100 - tool, protected=rng.random() < 0.2,
                                tools=tuple(rng.sample(["compress", "bash", "read"], rng.randint(0, 2)))))
        ref += n
    blocks = [BlockView(f"b{i}", 1, rng.randint(1, 60), rng.randint(100, 90000), rng.randint(50, 3000), "topic")
              for i in range(1, rng.randint(1, 8))]
    breakdown = {k: rng.choice([0, rng.randint(1, 200000)]) for k in ("system", "tool", "summaries", "code", "text")}
    return NudgeView(rng.choice([1, 2, 3]), rng.choice(["gentle", "emergency"]), ranges, breakdown,
                     growth=rng.choice([0, rng.randint(1, 120000)]), target_blocks=blocks)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("part", PARTS)
def test_no_part_discloses_the_fill_ratio(mode, part):
    text = render_part(DOC, mode, part)
    assert text
    assert fill_disclosures(text) == []


def test_random_views_never_disclose_the_fill_ratio():
    rng = random.Random(1234)
    for _ in range(300):
        view = _random_view(rng)
        for mode in MODES:
            text = render_nudge(view, DOC, mode)
            assert fill_disclosures(text) == [], text


@pytest.mark.parametrize(
    "bad",
    ["Context is 82% full.", "context usage: 0.82", "only 12K tokens left", "150K / 200K", "50K of 200K tokens",
     "the window is nearly full", "Context limit reached", "you have 40 percent", "context window size is 8192"],
)
def test_fill_check_catches_ratio_phrases(bad):
    assert fill_disclosures(f"[ACP] {bad}")


def test_fill_check_allows_range_composition():
    assert fill_disclosures("  m00001–m00009  9 msgs  1.2K  [tool 80% | text 20%]") == []


def test_distilled_system_prompt_has_no_rule_text_and_is_small():
    full, slim = render_system_prompt(DOC, "doctrine"), render_system_prompt(DOC, "distilled")
    for name in DOC.load_bearing:
        for line in DOC.sections[name].splitlines():
            if len(line) > 12:
                assert line in full
                assert line not in slim, (name, line)
    assert len(slim) < 0.25 * len(full)
    for name in ("compress", "decompress", "search_context", "acp_status"):
        assert f"- {name}:" in slim


def test_system_prompt_layout_and_base_prompt():
    text = render_system_prompt(DOC, "doctrine", "Host prompt.\n")
    assert text.startswith("Host prompt.\n\n---\n\nCONTEXT MANAGEMENT")
    assert text.index("TOOLS") < text.index("PRINCIPLES") < text.index("WRITING A SUMMARY") < text.index("TIER-3")
    assert "mechanics" not in text.lower() and "NUDGE AND TOOL-TEXT" not in text
    assert "\n\n\n" not in text
    with pytest.raises(DoctrineError, match="unknown prompt mode"):
        render_system_prompt(DOC, "slim")


def test_doctrine_nudges_restate_the_rules_and_distilled_ones_do_not():
    phil = DOC.sections["philosophy"]
    for _part, view in EXAMPLE_VIEWS.items():
        full, slim = render_nudge(view, DOC, "doctrine"), render_nudge(view, DOC, "distilled")
        assert phil in full and phil not in slim
        assert DOC.sections["how-to-compress"] in full
        assert len(slim) < 0.3 * len(full)
    assert DOC.sections["tier2"] in render_nudge(EXAMPLE_VIEWS["nudge-tier2"], DOC)
    assert DOC.sections["tier3"] in render_nudge(EXAMPLE_VIEWS["nudge-tier3"], DOC)
    assert DOC.sections["tier2"] not in render_nudge(EXAMPLE_VIEWS["nudge-tier3"], DOC)


def test_distilled_nudge_carries_the_list_with_sizes():
    text = render_nudge(EXAMPLE_VIEWS["nudge-gentle"], DOC, "distilled")
    assert "Compressible ranges (3, oldest first):" in text
    assert "  m00031–m00058  28 msgs  22K  [tool 74% | text 26%]" in text
    assert "Context breakdown: 1.9K system | 41K tool | 2.6K summaries | 5.4K code | 8.3K text" in text
    assert "+27K since last nudge" in text


def test_nudge_style_none_and_bad_views():
    assert render_nudge(EXAMPLE_VIEWS["nudge-gentle"], DOC, "distilled", nudge_style="none") is None
    with pytest.raises(DoctrineError, match="nudge style"):
        render_nudge(EXAMPLE_VIEWS["nudge-gentle"], DOC, "distilled", nudge_style="quiet")
    with pytest.raises(DoctrineError, match="tier"):
        render_nudge(NudgeView(4, "gentle", [], {}), DOC)
    with pytest.raises(DoctrineError, match="voice"):
        render_nudge(NudgeView(1, "loud", [], {}), DOC)
    with pytest.raises(DoctrineError, match="breakdown"):
        render_nudge(NudgeView(1, "gentle", [], {"usage": 1}), DOC)


@pytest.mark.parametrize("n, text", [(0, "0"), (999, "999"), (1000, "1.0K"), (1250, "1.3K"), (1050, "1.1K"),
                                     (9999, "10.0K"), (10000, "10K"), (10499, "10K"), (10500, "11K"), (11500, "12K"), (250000, "250K")])
def test_format_tokens(n, text):
    assert format_tokens(n) == text


def test_ranges_sorted_and_touching_neighbours_merged():
    ranges = [
        RangeView("m00050", "m00059", 10, 4000, tool_pct=50, text_pct=50),
        RangeView("m00010", "m00019", 10, 1000, tool_pct=100, text_pct=0),
        RangeView("m00020", "m00029", 10, 3000, tool_pct=0, text_pct=100),
    ]
    assert format_ranges(ranges).splitlines() == [
        "Compressible ranges (2, oldest first):",
        "  m00010–m00029  20 msgs  4.0K  [tool 25% | text 75%]",
        "  m00050–m00059  10 msgs  4.0K  [tool 50% | text 50%]",
    ]


def test_protected_and_mixed_ranges():
    prot = RangeView("m00030", "m00031", 2, 800, protected=True, tools=("compress",))
    lone = RangeView("m00090", "m00090", 1, 250, protected=True)
    comp = RangeView("m00010", "m00029", 20, 5000, tool_pct=90, text_pct=10)
    lines = format_ranges([prot, lone, comp]).splitlines()
    assert lines[1] == "  m00010–m00031  22 msgs  5.8K  [5.0K compressible | 800 protected: compress]"
    assert lines[2] == "  m00090  1 msg  250  [PROTECTED: tools — not compressible]"
    assert format_ranges([]).startswith("[No specific ranges detected")
    odd = format_ranges([RangeView("x1", "x2", 2, 300)])
    assert "x1–x2  2 msgs  300" in odd


def test_breakdown_shows_only_nonzero_parts():
    assert format_breakdown({"system": 0, "tool": 1500, "text": 20}, growth=0) == "Context breakdown: 1.5K tool | 20 text"
    assert format_breakdown({}, growth=600) == "+600 since last nudge"


def test_tier_nudges():
    t2 = render_nudge(EXAMPLE_VIEWS["nudge-tier2"], DOC, "distilled")
    assert "[TIER 2 DISTILLATION TRIGGER]" in t2
    assert '  b2  35 msgs  27K→840  "ttl bug hunt"' in t2
    assert '"startId": "b1", "endId": "b4"' in t2
    view = NudgeView(3, "emergency", [], {}, target_blocks=[BlockView("b7", 2, 3, 9000, 700)])
    t3 = render_nudge(view, DOC, "distilled")
    assert "[EMERGENCY TIER 3 CONDENSATION TRIGGER]" in t3 and DOC.sections["nudge-emergency"] in t3


def test_emergency_nudge_has_example_and_order_line():
    text = render_nudge(EXAMPLE_VIEWS["nudge-emergency"], DOC, "distilled")
    assert text.startswith(DOC.sections["nudge-emergency"])
    assert '"startId": "m00004", "endId": "m00019"' in text
    assert DOC.sections["nudge-emergency-order"] in text
    assert text.index("Example:") < text.index("Compressible ranges")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", ["nudge-emergency", "nudge-tier2"])
def test_list_only_style_is_the_list_nudge_without_its_example_call(mode, name):
    with_example = render_nudge(EXAMPLE_VIEWS[name], DOC, mode, nudge_style="list")
    bare = render_nudge(EXAMPLE_VIEWS[name], DOC, mode, nudge_style="list_only")
    assert "Example: compress(" in with_example and "Example:" not in bare
    example_line = next(line for line in with_example.split("\n\n") if line.startswith("Example: compress("))
    assert bare == with_example.replace("\n\n" + example_line, "")
    gentle = EXAMPLE_VIEWS["nudge-gentle"]  # no example in either style
    assert render_nudge(gentle, DOC, mode, nudge_style="list_only") == render_nudge(gentle, DOC, mode)


@pytest.mark.parametrize("host", ["proxy", "pi"])
@pytest.mark.parametrize("mode", MODES)
def test_tool_schemas_shape(mode, host):
    tools = tool_schemas(DOC, mode, host)
    assert [t["function"]["name"] for t in tools] == ["compress", "decompress", "search_context", "acp_status"]
    for t in tools:
        assert t["type"] == "function" and set(t["function"]) == {"name", "description", "parameters"}
        assert t["function"]["parameters"]["type"] == "object"
        assert t["function"]["description"]
        if mode == "distilled":
            assert "\n" not in t["function"]["description"] and len(t["function"]["description"]) < 100
    by = {t["function"]["name"]: t["function"]["parameters"] for t in tools}
    assert by["compress"]["required"] == ["content"]
    item = by["compress"]["properties"]["content"]["items"]
    assert set(item["properties"]) == {"startId", "endId", "summary", "topic"}
    assert item["required"] == ["startId", "endId", "summary"]
    assert by["decompress"]["required"] == ["blockId"] and "toFile" in by["decompress"]["properties"]
    assert by["search_context"]["required"] == ["query"]
    assert by["search_context"]["properties"]["limit"]["default"] == (10 if host == "pi" else 5)
    assert ("summaryMaxChars" in by["compress"]["properties"]) == (host == "pi")
    json.dumps(tools)


def test_tool_schema_errors_and_isolation():
    with pytest.raises(DoctrineError, match="host variant"):
        tool_schemas(DOC, "doctrine", "codex")
    a = tool_schemas(DOC)
    a[0]["function"]["parameters"]["required"].append("x")
    assert tool_schemas(DOC)[0]["function"]["parameters"]["required"] == ["content"]


def test_minimal_version_renders(tmp_path):
    from pathlib import Path

    tiny = load_doctrine("tiny", root=Path(__file__).parent / "fixtures" / "versions")
    assert render_system_prompt(tiny, "distilled") == "- compress: Fold.\n- decompress\n- search_context\n- acp_status"
    assert render_nudge(EXAMPLE_VIEWS["nudge-gentle"], tiny, "doctrine").startswith("[tiny] Maintenance.\n\nRULES")
