"""Ref assignment, ref parsing and tag rendering (spec §1.2-1.3)."""

import pytest

from doctrine.kernel.config import KernelConfig
from doctrine.kernel.messages import Message
from doctrine.kernel.refs import (
    RefsExhausted,
    assign_refs,
    format_ref,
    lookup_ref,
    parse_block_ref,
    parse_message_ref,
)
from doctrine.kernel.state import BLOCKED, CompressionState
from doctrine.kernel.tags import format_tokens, render_tags, strip_own_tag, to_fixed

CFG = KernelConfig.for_limit(200000)


def txt(i, role="user", text="hello"):
    return Message(i, role, "text", text)


def test_refs_are_sequential_stable_and_cover_all_roles():
    st = CompressionState.initial()
    msgs = [Message("s", "system", "text", "sys"), txt("u"), Message("r", "assistant", "reasoning", "hm"),
            Message("c", "assistant", "tool-call", "{}", "bash", "c1"),
            Message("t", "tool", "tool-result", "out", "bash", "c1")]
    assign_refs(msgs, st, CFG)
    assert [st.by_raw[m.id] for m in msgs] == ["m00001", "m00002", "m00003", "m00004", "m00005"]
    assert st.by_ref["m00003"] == "r"
    # a later turn without some messages: refs stay, new ids continue above the maximum
    assign_refs([txt("u"), txt("new")], st, CFG)
    assert st.by_raw["new"] == "m00006" and st.by_raw["s"] == "m00001"


def test_cursor_starts_above_the_highest_used_ref_and_skips_taken_indices():
    st = CompressionState(by_raw={"a": "m00007"}, by_ref={"m00007": "a", "m00008": "ghost"})
    assign_refs([txt("a"), txt("b"), txt("c")], st, CFG)
    assert st.by_raw["b"] == "m00009" and st.by_raw["c"] == "m00010"


def test_messages_without_id_are_skipped():
    st = CompressionState.initial()
    assign_refs([Message("", "user", "text", "x"), txt("a")], st, CFG)
    assert st.by_raw == {"a": "m00001"}


def test_refs_exhausted_raises():
    st = CompressionState(by_raw={"a": "m99999"}, by_ref={"m99999": "a"})
    with pytest.raises(RefsExhausted):
        assign_refs([txt("b")], st, CFG)


def test_blocked_only_under_protection_config():
    msgs = [Message("c", "assistant", "tool-call", "{}", "compress", "k1"),
            Message("t", "tool", "tool-result", "ok", "compress", "k1"),
            Message("tc", "assistant", "tool-call", "{}", "todo_write", "k2"),
            Message("tr", "tool", "tool-result", "done", None, "k2"),  # only toolCallId
            txt("u")]
    st = CompressionState.initial()
    assign_refs(msgs, st, CFG)  # default: protectedTools [] -> compress gets normal refs
    assert st.by_raw["c"] == "m00001" and BLOCKED not in st.by_raw.values()
    st2 = CompressionState.initial()
    assign_refs(msgs, st2, KernelConfig.for_limit(200000, protectedTools=["todo*"]))
    assert st2.by_raw["c"] == BLOCKED and st2.by_raw["t"] == BLOCKED and st2.by_raw["tc"] == BLOCKED
    assert st2.by_raw["tr"] == "m00001"  # the check looks at toolName only
    assert st2.by_raw["u"] == "m00002"
    assert BLOCKED not in st2.by_ref
    st3 = CompressionState.initial()
    assign_refs(msgs, st3, KernelConfig(is_tool_protected=lambda name, text: name == "never"))
    assert st3.by_raw["c"] == BLOCKED and st3.by_raw["tc"] == "m00001"


@pytest.mark.parametrize("text,idx", [("m5", 5), ("M00005", 5), (" m0005 ", 5), ("m12345", 12345),
                                      ("m00000", 0), ("m123456", None), ("x5", None), ("m", None),
                                      ("b5", None), ("", None)])
def test_parse_message_ref(text, idx):
    assert parse_message_ref(text) == idx


def test_parse_block_ref_and_lookup():
    assert parse_block_ref("b7") == "b7" and parse_block_ref(" B07 ") == "b7"
    assert parse_block_ref("m7") is None and parse_block_ref("b") is None
    st = CompressionState(by_raw={"a": "m00005"}, by_ref={"m00005": "a"})
    assert lookup_ref("m5", st) == "a" and lookup_ref("M00005", st) == "a"
    assert lookup_ref("m6", st) is None and lookup_ref("junk", st) is None
    assert format_ref(42) == "m00042"


@pytest.mark.parametrize("t,s", [(0, "0"), (999, "999"), (1000, "1.0K"), (1050, "1.1K"),
                                 (1250, "1.3K"), (1049, "1.0K"), (9999, "10.0K"), (10000, "10K"),
                                 (10499, "10K"), (10500, "11K"), (123456, "123K")])
def test_format_tokens(t, s):
    assert format_tokens(t) == s


def test_to_fixed_uses_the_exact_binary_value():
    assert to_fixed(1.005, 2) == "1.00"  # 1.005 is 1.00499999... in binary
    assert to_fixed(1.25, 1) == "1.3"  # exact tie goes to the larger neighbour


def _rendered(strategy="all"):
    st = CompressionState.initial()
    msgs = [txt("u", text="hello world!"), Message("r", "assistant", "reasoning", "think"),
            Message("c", "assistant", "tool-call", '{"a":1}', "bash", "c1"),
            Message("t", "tool", "tool-result", "x" * 4000, None, "c1"), txt("e", "assistant", "")]
    assign_refs(msgs, st, CFG)
    return msgs, st, render_tags(msgs, st, strategy)


def test_tag_format_types_and_empty_text():
    msgs, st, out = _rendered()
    assert out[0].text == '<acp tokens="3" type="text">m00001</acp>\nhello world!'
    assert out[1].text.startswith('<acp tokens="2" type="reasoning">m00002</acp>\n')
    assert out[2].text.startswith('<acp tokens="2" type="bash">m00003</acp>\n{"a":1}')
    assert out[3].text.startswith('<acp tokens="1.0K" type="tool">m00004</acp>\n')  # no toolName
    assert out[4].text == '<acp tokens="0" type="text">m00005</acp>\n'
    assert msgs[0].text == "hello world!"  # inputs untouched
    assert st.token_snapshot == {"m00001": 3, "m00002": 2, "m00003": 2, "m00004": 1000, "m00005": 0}


def test_rendering_is_idempotent_and_snapshots_are_frozen():
    msgs, st, out = _rendered()
    again = render_tags(out, st, "all")
    assert [m.text for m in again] == [m.text for m in out]
    # the text changes later (e.g. truncation): the tag keeps its first-render figure
    changed = [out[0].with_text(out[0].text + " and much more text " * 50)] + out[1:]
    assert render_tags(changed, st, "all")[0].text.startswith('<acp tokens="3" type="text">m00001</acp>\n')


def test_strip_own_tag_leaves_other_refs_alone():
    assert strip_own_tag('<acp tokens="3" type="text">m00002</acp>\nx', "m00001").startswith("<acp")
    assert strip_own_tag('<acp tokens="3" type="text">m00001</acp>\nx', "m00001") == "x"


def test_strategies():
    _, _, text_only = _rendered("text-only")
    tagged = [m.text.startswith("<acp") for m in text_only]
    assert tagged == [True, False, False, False, True]
    _, st, none = _rendered("none")
    assert not any(m.text.startswith("<acp") for m in none) and st.token_snapshot == {}
    with pytest.raises(ValueError):
        _rendered("bogus")


def test_blocked_and_unreffed_messages_are_never_tagged():
    st = CompressionState(by_raw={"c": BLOCKED})
    out = render_tags([Message("c", "assistant", "tool-call", "{}", "compress", "k"),
                       Message("acp_summary_b1", "system", "text", "[Compressed conversation section]")], st)
    assert [m.text for m in out] == ["{}", "[Compressed conversation section]"]


def test_reserved_ids_never_get_refs():
    st = CompressionState.initial()
    assign_refs([Message("acp_summary_b1", "system", "text", "[Compressed conversation section]"),
                 Message("acp_nudge", "user", "text", "compress please"), txt("u")], st, CFG)
    assert st.by_raw == {"u": "m00001"}
