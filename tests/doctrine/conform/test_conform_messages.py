"""Normalising chat and flat kernel messages."""

from __future__ import annotations

import json

import pytest

from doctrine.conform import MessageFormatError, extract_keep_items, normalise_messages
from doctrine.conform.messages import normalise_ref, strip_acp_tags

CHAT = [
    {"id": "m00010", "role": "user", "content": "Fix the crash in app/io.py:12 please."},
    {"id": "m00011", "role": "assistant", "content": "Running the tests.",
     "tool_calls": [{"id": "c1", "type": "function",
                     "function": {"name": "execute_bash", "arguments": json.dumps({"command": "pytest -q"})}}]},
    {"role": "tool", "tool_call_id": "c1",
     "content": '<acp tokens="40" type="execute_bash">m00012</acp>\nE   KeyError: \'user_id\'\n1 failed, 2 passed in 0.30s'},
]

FLAT = [
    {"id": "m00010", "role": "user", "content_type": "text", "text": "Fix the crash in app/io.py:12 please."},
    {"id": "m00011", "role": "assistant", "content_type": "text", "text": "Running the tests."},
    {"id": "m00011b", "role": "assistant", "contentType": "tool-call", "toolName": "execute_bash",
     "toolCallId": "c1", "text": json.dumps({"command": "pytest -q"})},
    {"id": "m00012", "role": "tool", "content_type": "tool-result", "toolCallId": "c1",
     "text": "E   KeyError: 'user_id'\n1 failed, 2 passed in 0.30s"},
]


def test_chat_message_with_tool_calls_splits_like_the_kernel():
    msgs = normalise_messages(CHAT)
    assert [(m.role, m.kind) for m in msgs] == [
        ("user", "text"), ("assistant", "text"), ("assistant", "tool-call"), ("tool", "tool-result")]
    assert msgs[2].tool_name == "execute_bash" and msgs[2].arguments == {"command": "pytest -q"}
    # The result's tool name is recovered from its call, and its ref from the tag.
    assert msgs[3].tool_name == "execute_bash"
    assert msgs[3].ref == "m00012"
    assert "<acp" not in msgs[3].text and msgs[3].text.startswith("E   KeyError")


def test_flat_and_chat_forms_yield_the_same_items():
    a = extract_keep_items(CHAT)
    b = extract_keep_items(FLAT)
    texts = lambda items: {c: sorted(i.text for i in v) for c, v in items.items()}  # noqa: E731
    assert texts(a) == texts(b)
    assert [i.text for i in a["error_strings"]] == ["KeyError: 'user_id'"]
    assert a["paths_with_lines"][0].text == "app/io.py:12"


def test_content_parts_and_tags_anywhere():
    msgs = normalise_messages([{"role": "user", "content": [{"type": "text", "text": "hello"},
                                                            {"type": "image_url", "image_url": {"url": "x"}}]}])
    assert msgs[0].text == "hello"
    text, refs = strip_acp_tags('body\n\n<acp tokens="1.2K" type="bash">m00042</acp>')
    assert refs == ["m00042"] and "acp" not in text


@pytest.mark.parametrize("raw,want", [("m5", "m00005"), ("M00005", "m00005"), ("m0005", "m00005"), ("x5", None)])
def test_ref_normalisation_follows_the_kernel(raw, want):
    assert normalise_ref(raw) == want


def test_block_ids_are_recognised():
    msgs = normalise_messages([{"id": "acp_summary_b3", "role": "system", "content_type": "text", "text": "s"},
                               {"id": "b7", "role": "system", "content": "t"}])
    assert [m.block_id for m in msgs] == ["b3", "b7"]


@pytest.mark.parametrize("bad,where", [
    ("not a list", "list"),
    ([{"content": "no role"}], "message 0"),
    ([{"role": "user", "content": "ok"}, 5], "message 1"),
    ([{"role": "assistant", "content": None, "tool_calls": "x"}], "tool_calls"),
    ([{"role": "user", "content_type": "picture", "text": "x"}], "content_type"),
    ([{"role": "user", "content": 12}], "content"),
])
def test_bad_messages_raise_a_clear_error(bad, where):
    with pytest.raises(MessageFormatError, match=where):
        normalise_messages(bad)


def test_unparseable_tool_arguments_are_tolerated():
    msgs = normalise_messages([{"role": "assistant", "content": None, "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "execute_bash", "arguments": "{not json"}}]}])
    assert msgs[0].arguments == {} and msgs[0].text == "{not json"
