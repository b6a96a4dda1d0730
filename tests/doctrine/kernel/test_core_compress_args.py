"""The lenient parser of compress-tool arguments (§6.1) and compress_tool_call."""

import json

from doctrine.kernel.compress_args import compress_tool_call, parse_compress_args
from doctrine.kernel.config import KernelConfig
from doctrine.kernel.messages import Message
from doctrine.kernel.refs import assign_refs
from doctrine.kernel.state import CompressionState

SUM = "x" * 60


def test_canonical_and_lenient_shapes():
    canonical = {"topic": "top", "content": [{"startId": "m1", "endId": "m3", "summary": SUM}]}
    for args in (canonical, json.dumps(canonical),
                 {"topic": "top", "content": json.dumps(canonical["content"])},
                 {"topic": "top", "content": {"startRef": "m1", "endRef": "m3", "summary": SUM}},
                 {"topic": "top", "startId": "m1", "endId": "m3", "summary": SUM}):
        p = parse_compress_args(args)
        assert p.errors == [] and len(p.ranges) == 1
        r = p.ranges[0]
        assert (r.start_ref, r.end_ref, r.summary, r.topic) == ("m1", "m3", SUM, "top")


def test_message_id_entry_and_range_topic_wins():
    p = parse_compress_args({"topic": "top", "content": [{"messageId": "m7", "summary": SUM, "topic": "own"}],
                             "summaryMaxChars": 100})
    r = p.ranges[0]
    assert (r.start_ref, r.end_ref, r.topic, r.summary_max_chars) == ("m7", "m7", "own", 100)


def test_errors_never_raise():
    cases = ["{not json", "[1, 2", 42, None, {"content": "{bad"}, {"content": 5}, {"content": []},
             {"content": [1]}, {"content": [{"startId": "m1", "summary": SUM, "endId": 3}]},
             {"content": [{"startId": "m1", "endId": "m2"}]}, {"summaryMaxChars": "big", "content": []},
             {}, b"\xff\xfe"]
    for args in cases:
        p = parse_compress_args(args)
        assert p.errors and all(isinstance(e, str) for e in p.errors), args
    assert "not valid JSON" in parse_compress_args("{not json").errors[0]
    assert parse_compress_args({"content": []}).errors == ["No ranges provided."]


def test_compress_tool_call_end_to_end():
    msgs = [Message(f"m{i}", "user" if i % 2 else "assistant", "text", "w" * 2000) for i in range(6)]
    st = CompressionState.initial()
    cfg = KernelConfig.for_limit(200000, preserveRecentMessages=0, preserveRecentTokens=0)
    assign_refs(msgs, st, cfg)
    args = json.dumps({"content": [{"startId": "m00001", "endId": "m00003", "summary": SUM}]})
    r = compress_tool_call(args, msgs, st, cfg, call_id="k1")
    assert r.blocks_created == 1 and r.state.blocks[0].compress_call_id == "k1"
    assert r.text == "[Compressed m00001–m00003 → 1 block(s), ~1500 tokens saved.]"
    bad = compress_tool_call("{oops", msgs, st, cfg)
    assert bad.blocks_created == 0 and bad.text.startswith("[Compression FAILED: arguments are not valid JSON")
    assert bad.state.to_acp_json() == st.to_acp_json()
