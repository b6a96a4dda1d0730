"""plumbing.tool_format's strict mode: replies read as vLLM's hermes tool parser reads them."""

from __future__ import annotations

import json

import pytest

from plumbing.chat_backend import Completion, reparsed
from plumbing.tool_format import parse_assistant_text

GOOD = '<tool_call>\n{"name": "compress", "arguments": {"topic": "t", "content": []}}\n</tool_call>'


@pytest.mark.parametrize("text", [
    '<tool_call>\n{"name": "compress", "arguments": {"topic": "t", "content": [{"startId": "m1"}\n</tool_call>',
    '<tool_call>\n{"name": "compress", "parameters": {"topic": "t"}}\n</tool_call>',
    '<tool_call>\n{"name": "compress", "arguments": {"topic": "t"}} trailing\n</tool_call>',
    '<tool_call>\n["compress"]\n</tool_call>',
])
def test_broken_blocks_are_no_call_strictly(text):
    lenient, strict = parse_assistant_text(text), parse_assistant_text(text, strict=True)
    assert strict.tool_calls == [] and strict.content == text and strict.errors
    # the lenient parser recovers three of these; the strict one none
    assert lenient.tool_calls or lenient.errors


def test_one_bad_block_drops_every_call():
    text = "thinking\n" + GOOD + "\n<tool_call>\n{\"name\": \"read\", \"arguments\": {\"path\": \n</tool_call>"
    assert len(parse_assistant_text(text).tool_calls) == 1
    strict = parse_assistant_text(text, strict=True)
    assert strict.tool_calls == [] and strict.content == text


def test_valid_replies_parse_the_same():
    for text in (GOOD, "note\n" + GOOD, GOOD + "\n" + GOOD.replace("compress", "read"),
                 '<tool_call>\n{"name": "read", "arguments": {"path": "a.py"}}'):  # unterminated last block
        a, b = parse_assistant_text(text), parse_assistant_text(text, strict=True)
        assert b.ok and a.tool_calls == b.tool_calls and a.content == b.content, text
    assert parse_assistant_text("plain answer", strict=True).content == "plain answer"


def test_string_arguments_stay_a_string():
    text = '<tool_call>\n{"name": "compress", "arguments": "{\\"topic\\": \\"t\\"}"}\n</tool_call>'
    lenient, strict = parse_assistant_text(text), parse_assistant_text(text, strict=True)
    assert json.loads(lenient.tool_calls[0]["function"]["arguments"]) == {"topic": "t"}
    assert json.loads(strict.tool_calls[0]["function"]["arguments"]) == '{"topic": "t"}'  # not an object


def test_reparsed_completion_keeps_its_figures():
    bad = '<tool_call>\n{"name": "compress", "arguments": {"topic": \n</tool_call>'
    comp = Completion({"role": "assistant", "content": ""}, bad, [], [], 10, 5, 0.5)
    out = reparsed(comp, strict=True)
    assert out.tool_calls == [] and out.parse_errors and (out.prompt_tokens, out.completion_tokens) == (10, 5)
