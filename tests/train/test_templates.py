"""Loss masks: exactly the final assistant message's tokens carry labels, nothing else."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from plumbing.chat_templates import (
    SampleRejected,
    choose_template,
    has_generation_markers,
    tokenize_sample,
)
from plumbing.tool_format import format_assistant_text, parse_assistant_text

from .conftest import TOOLS, make_row


@pytest.fixture(scope="module")
def tok(embedded_model):
    from plumbing.models import load_tokenizer

    return load_tokenizer(embedded_model)


def target_text(tok, enc) -> str:
    return tok.decode([i for i, m in zip(enc["input_ids"], enc["assistant_masks"], strict=True) if m])


def expected_target(row: dict) -> str:
    last = row["messages"][-1]
    return format_assistant_text(last.get("content"), last.get("tool_calls")) + "<|im_end|>"


@pytest.mark.parametrize("kind", ["compress", "refusal", "ordinary"])
def test_project_template_masks_exactly_the_target(tok, kind):
    choice = choose_template(tok, "auto")
    assert choice.source == "project"  # SmolLM2's own template renders no tools
    row = make_row(3, kind)
    enc = tokenize_sample(tok, row["messages"], json.loads(row["tools"]), choice.template)
    assert target_text(tok, enc) == expected_target(row)
    # The mask is one contiguous span at the very end (the earlier assistant tool call,
    # the system prompt, user turns and tool results carry no label).
    mask = enc["assistant_masks"]
    first, n = mask.index(1), sum(mask)
    assert mask == [0] * first + [1] * n + [0] * (len(mask) - first - n)
    assert len(mask) - first - n <= 2  # only the turn's trailing newline follows the target
    assert sum(mask) == len(tok(expected_target(row), add_special_tokens=False)["input_ids"])
    full = tok.decode(enc["input_ids"])
    assert "pytest -q" in full and "<tools>" in full  # history and tools are in the prompt


def test_tool_call_text_form_matches_template_render(tok):
    choice = choose_template(tok, "project")
    row = make_row(5, "compress")
    text = tok.apply_chat_template(row["messages"], tools=TOOLS, chat_template=choice.template, tokenize=False)
    rendered = format_assistant_text(row["messages"][-1]["content"], row["messages"][-1]["tool_calls"])
    assert rendered in text
    parsed = parse_assistant_text(rendered)
    assert parsed.ok and parsed.tool_calls[0]["function"]["name"] == "compress"
    assert json.loads(parsed.tool_calls[0]["function"]["arguments"]) == json.loads(
        row["messages"][-1]["tool_calls"][0]["function"]["arguments"])


def test_native_qwen_template_via_trl_training_variant(tok):
    """A stock native tool template without markers (Qwen2.5's, which TRL ships) gets TRL's
    training variant, and the mask still covers exactly the target."""
    import trl

    stock = (Path(trl.__file__).parent / "chat_templates" / "qwen2_5.jinja").read_text()
    assert not has_generation_markers(stock)
    tok.chat_template = stock
    try:
        choice = choose_template(tok, "auto")
    finally:
        tok.chat_template = None
    assert choice.source == "native+trl-training"
    row = make_row(7, "compress")
    enc = tokenize_sample(tok, row["messages"], TOOLS, choice.template)
    got = target_text(tok, enc)
    # Qwen's template opens the reply after a newline and ends the turn with <|im_end|>\n.
    assert '<tool_call>\n{"name": "compress", "arguments": ' in got
    assert "pytest -q" not in got and "FAILED" not in got and "Fix the failing" not in got
    assert got.rstrip().endswith("<|im_end|>")


def test_stock_template_without_markers_fails_loudly(tok, tmp_path):
    stock = tmp_path / "stock.jinja"
    stock.write_text("{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + (m['content'] or '') + '<|im_end|>\\n' }}{% endfor %}")
    with pytest.raises(ValueError, match="no \\{% generation %\\} markers"):
        choose_template(tok, str(stock))
    # A tokenizer whose native template renders tools but has no markers and no TRL variant:
    tok.chat_template = stock.read_text() + "{# tools tool_call #}"
    try:
        with pytest.raises(ValueError, match="assistant-only loss would train on nothing"):
            choose_template(tok, "native")
    finally:
        tok.chat_template = None
    # And tokenising with a marker-less template is an empty-mask rejection, not silent training.
    row = make_row(1, "ordinary")
    with pytest.raises(SampleRejected) as err:
        tokenize_sample(tok, row["messages"], None, stock.read_text())
    assert err.value.reason == "empty_mask"


def test_rejections_are_reasoned(tok):
    choice = choose_template(tok, "project")
    row = make_row(2, "compress")
    with pytest.raises(SampleRejected) as err:
        tokenize_sample(tok, row["messages"][:-1], TOOLS, choice.template)
    assert err.value.reason == "no_target"
    with pytest.raises(SampleRejected) as err:
        tokenize_sample(tok, row["messages"], TOOLS, choice.template, max_length=32)
    assert err.value.reason == "too_long"


def test_parser_reports_malformed_calls():
    r = parse_assistant_text('ok\n<tool_call>\n{"name": "compress", "arguments": {"content": []}}\n</tool_call>\n<tool_call>{not json}</tool_call>')
    assert r.content == "ok" and len(r.tool_calls) == 1 and len(r.errors) == 1
    assert "not valid JSON" in r.errors[0]
    r = parse_assistant_text('<tool_call>{"name": "bash", "parameters": {"cmd": "ls"}}')  # unterminated, 'parameters'
    assert r.ok and json.loads(r.tool_calls[0]["function"]["arguments"]) == {"cmd": "ls"}
    r = parse_assistant_text('<tool_call>{"arguments": {}}</tool_call>')
    assert not r.ok and "string 'name'" in r.errors[0]
    assert parse_assistant_text("plain answer").tool_calls == []
