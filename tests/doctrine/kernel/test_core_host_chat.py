"""Host variants (render_for_model) and the OpenAI chat conversion."""

import hashlib

import pytest

from doctrine.kernel.chat import content_hash_id, flatten, to_chat
from doctrine.kernel.config import KernelConfig
from doctrine.kernel.host import HostConfig, render_for_model
from doctrine.kernel.messages import Message
from doctrine.kernel.state import Block, CompressionState

CHAT = [
    {"role": "system", "content": "You are a coding agent."},
    {"role": "user", "content": "Fix the bug."},
    {"role": "assistant", "content": "Looking.", "reasoning_content": "Read first.",
     "tool_calls": [{"id": "k1", "type": "function", "function": {"name": "read", "arguments": '{"p":"a.py"}'}},
                    {"id": "k2", "type": "function", "function": {"name": "bash", "arguments": '{"c":"ls"}'}}]},
    {"role": "tool", "tool_call_id": "k1", "content": "print(1)"},
    {"role": "tool", "tool_call_id": "k2", "name": "bash", "content": "a.py"},
    {"role": "user", "content": [{"type": "text", "text": "Fix the bug."}]},
]


def test_flatten_one_message_per_call_and_result_with_hash_ids():
    flat = flatten(CHAT)
    assert [(m.role, m.content_type, m.tool_name) for m in flat] == [
        ("system", "text", None), ("user", "text", None), ("assistant", "reasoning", None),
        ("assistant", "text", None), ("assistant", "tool-call", "read"), ("assistant", "tool-call", "bash"),
        ("tool", "tool-result", "read"), ("tool", "tool-result", "bash"), ("user", "text", None)]
    want = "h_" + hashlib.sha256(b"user|text|||Fix the bug.").hexdigest()[:16]
    assert flat[1].id == want and content_hash_id("user", "text", None, None, "Fix the bug.") == want
    assert flat[8].id == want + "_1"  # the duplicate identity gets a suffix
    assert flat[4].text == '{"p":"a.py"}' and flat[6].tool_call_id == "k1"
    assert len({m.id for m in flat}) == len(flat)


def test_flatten_uses_given_ids():
    flat = flatten([{"id": "e1", "role": "user", "content": "hi"},
                    {"id": "e2", "role": "assistant", "content": "",
                     "tool_calls": [{"id": "k1", "function": {"name": "read", "arguments": "{}"}},
                                    {"id": "k2", "function": {"name": "read", "arguments": "{}"}}]}])
    assert [m.id for m in flat] == ["e1", "e2", "e2#k2"]


def test_to_chat_regroups_and_round_trips():
    back = to_chat(flatten(CHAT))
    assert back[2] == {"role": "assistant", "content": "Looking.", "reasoning_content": "Read first.",
                       "tool_calls": [
                           {"id": "k1", "type": "function", "function": {"name": "read", "arguments": '{"p":"a.py"}'}},
                           {"id": "k2", "type": "function", "function": {"name": "bash", "arguments": '{"c":"ls"}'}}]}
    assert back[3] == {"role": "tool", "tool_call_id": "k1", "name": "read", "content": "print(1)"}
    assert back[5] == {"role": "user", "content": "Fix the bug."}
    assert len(back) == len(CHAT)


def test_flatten_rejects_unknown_roles():
    with pytest.raises(ValueError):
        flatten([{"role": "robot", "content": "x"}])


def test_host_config_validation_and_dict():
    assert HostConfig().to_dict() == {"summaries": "compress-call", "tags": "text-only", "nudge": "trailing-user"}
    with pytest.raises(ValueError):
        HostConfig(tags="some")
    with pytest.raises(ValueError):
        HostConfig.from_dict({"summaries": "compress-call", "extra": 1})


def _session():
    msgs = [Message("u0", "user", "text", "task " * 10),
            Message("c1", "assistant", "tool-call", "{}", "read", "k1"),
            Message("t1", "tool", "tool-result", "r" * 400, "read", "k1"),
            Message("p", "assistant", "tool-call", '{"content":[]}', "compress", "kp"),
            Message("pr", "tool", "tool-result", "[Compressed]", "compress", "kp"),
            Message("u1", "user", "text", "more")]
    st = CompressionState(blocks=[Block("b1", "r1", 1, "s" * 60, ["c1", "t1"], ["c1", "t1"], compress_call_id="kp")])
    return msgs, st


def test_render_for_model_proxy_variant():
    msgs, st = _session()
    seen = []
    v = render_for_model(msgs, st, KernelConfig.for_limit(1000), 800, HostConfig(),
                         nudge_text=lambda d: seen.append(d) or "please compress")
    ids = [m.id for m in v.messages]
    assert "acp_summary_b1" not in ids and ids[-1] == "acp_nudge"  # summaries via the retained call
    assert v.messages[-1].role == "user" and v.messages[-1].text == "please compress" and v.nudge_shown
    assert seen and seen[0].should_inject and seen[0].voice == "emergency"
    tagged = {m.id: m.text.startswith("<acp") for m in v.messages}
    assert tagged["u0"] and not tagged["p"] and not tagged["pr"]  # text-only tags


def test_render_for_model_kernel_message_variant_and_no_nudge():
    msgs, st = _session()
    v = render_for_model(msgs, st, KernelConfig.for_limit(1000), 800,
                         HostConfig(summaries="kernel-message", tags="all", nudge="none"),
                         nudge_text=lambda d: "x")
    ids = [m.id for m in v.messages]
    assert "acp_summary_b1" in ids and "acp_nudge" not in ids and not v.nudge_shown
    assert v.decision.should_inject  # decided, just not shown
    assert next(m for m in v.messages if m.id == "p").text.startswith('<acp tokens="4" type="compress">')
    v = render_for_model(msgs, st, KernelConfig.for_limit(1000), 800, HostConfig(), nudge_text=None)
    assert "acp_nudge" not in [m.id for m in v.messages]
