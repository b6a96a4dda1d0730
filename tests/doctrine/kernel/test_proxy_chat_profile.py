"""The ``proxy_chat`` serving profile rendered by the one renderer (``render_request``)
against the real proxy's recorded upstream requests.

A recorded session is replayed through ``resolve_profile(..., "proxy", "proxy_chat")`` and
``request_frame``/``render_request`` (what data generation and the eval call), not through
``render_proxy_chat`` directly, and each round-1 request is compared with the recording by
the structure ``test_proxy_chat`` compares (its helpers; the same named differences: TEXTS,
STATUS_LINE). The nudge is compared by kind: emergency voice, and the example's form
(``<ID>`` placeholders for tier 1, the first and last target blocks for tier 2).
"""

from __future__ import annotations

import pytest

from doctrine.kernel.chat import flatten
from doctrine.kernel.compress import apply_compression
from doctrine.kernel.profile import POCKET_PROXY_WINDOW, resolve_profile
from doctrine.kernel.proxy_chat import (
    SMALL_WINDOW_SETTINGS,
    SYSTEM_SEPARATOR,
    earlier_folds_dropped,
    effective_limit,
    proxy_config,
)
from doctrine.kernel.state import CompressionState
from doctrine.render.request import render_request, request_frame
from doctrine.spec import load_doctrine
from tests.doctrine.kernel.test_proxy_chat import _client, _comparable, _load, _ours, _without
from tools.proxy_record.fixtures import STATUS
from tools.proxy_record.session import TOOLS as CLIENT_TOOLS

DOCTRINE = load_doctrine("v1")


def test_proxy_preset_is_the_proxys_tuned_kernel():
    """The ``proxy`` preset at the effective limit is exactly the kernel the proxy runs with
    the recordings' settings; the pocket variant is the 3,072 recording's limit."""
    assert resolve_profile(7680, "proxy", "proxy_chat").kernel == proxy_config(8192, 512, SMALL_WINDOW_SETTINGS)
    assert POCKET_PROXY_WINDOW == effective_limit(3072, 512) == 2560
    p = resolve_profile(POCKET_PROXY_WINDOW, "proxy", "proxy_chat")
    assert p.kernel == proxy_config(3072, 512, SMALL_WINDOW_SETTINGS)
    assert p.to_dict()["host_variant"]["context_count"] == "previous-prompt"
    # the spec-written hosts keep their resolved values (and so their manifests' hashes)
    assert "system_in_view" not in resolve_profile(4096).to_dict()["host_variant"]
    small = {"preserveRecentTokens": 400, "minCompressRange": 600}
    assert resolve_profile(2560, "proxy_pocket", "proxy_chat").kernel == proxy_config(3072, 512, small)
    counted = resolve_profile(2560, "proxy_pocket", "proxy_chat", usage_counter="model:embedded:smollm2-135m-instruct")
    assert counted.sha256 != p.sha256 and counted.count_usage("def f(x):\n    return x") > 0
    with pytest.raises(ValueError, match="unknown usage counter"):
        resolve_profile(2560, "proxy", "proxy_chat", usage_counter="words")


@pytest.mark.parametrize("name", ["tuned-8k", "pocket-3k", "ignore-8k"])
def test_profile_render_matches_recording(name):
    recs = _load(f"{name}.jsonl.gz")
    clients = {c["turn"]: c for c in _load(f"{name}.client.jsonl.gz")}
    window = recs[0]["config"]["providers"]["<mock>"]["models"]["mock-coder"]["context"]
    ups = [r for r in recs if r["type"] == "upstream"]
    state, frame, compared, nudges = CompressionState.initial(), None, 0, 0
    for t in (r for r in recs if r["type"] == "turn"):
        c = clients[t["turn"]]
        msgs, _ = _client(c["messages"])
        if frame is None:
            profile = resolve_profile(effective_limit(window, c["max_tokens"]), "proxy", "proxy_chat")
            frame = request_frame(profile, DOCTRINE, base_prompt=msgs[0]["content"], task_tools=CLIENT_TOOLS)
        req = render_request(frame, flatten(msgs[1:]), state, token_count=t["proxy_decision"]["token_count"])
        mine = [u for u in ups if u["turn"] == t["turn"]]
        rec, where = mine[0], f"{name} turn {t['turn']}"
        assert req.view.decision.should_inject == t["proxy_decision"]["inject"], where
        assert [x["function"]["name"] for x in req.tools] == [x["name"] for x in rec["tools"]], where
        nudge_at = len(req.messages) - 1 if req.nudge_shown else None
        ours = [_ours(i, m, nudge_at) for i, m in enumerate(req.messages)]
        theirs = [_comparable(m) for m in rec["messages"]]
        assert len(ours) == len(theirs), (where, len(ours), len(theirs))
        for i, (a, b) in enumerate(zip(ours, theirs, strict=True)):
            if i == 0:  # TEXTS: the block is ours; the client's part and its tag must match
                assert a.get("client_system") == b.get("client_system"), where
                assert (a.get("ref"), a.get("tag_tokens")) == (b.get("ref"), b.get("tag_tokens")), where
                continue
            if i == nudge_at:
                rn = rec["messages"][i]["nudge"]
                form = rn["example"]["form"]
                text = req.nudge_text
                assert rn["kind"] in ("emergency", "tier2-emergency"), where
                if form == "placeholder":
                    assert '"startId": "<ID>"' in text, where
                    offered = [f"{r['start']}" for r in rn["ranges"] if not r["protected"]]
                    assert all(ref in text for ref in offered), where
                else:
                    ex = rn["example"]
                    assert f'"startId": "{ex["start"]}", "endId": "{ex["end"]}"' in text, where
                nudges += 1
                continue
            if STATUS in (req.messages[i].get("content") or ""):  # STATUS_LINE
                a, b = _without(a, "tag_tokens", "content"), _without(b, "tag_tokens", "content")
            assert a == b, (where, i, a, b)
        compared += 1
        state = req.view.state
        if len(mine) > 1:
            call = (mine[1]["messages"][-2].get("tool_calls") or [{}])[0]
            if call.get("name") == "compress" and "ranges" in call:
                ranges = [{"startId": a, "endId": b, "summary": "s" * 120, "topic": "t"} for a, b in call["ranges"]]
                view = [m for m in req.view.messages if m.role != "user" or m.text != req.nudge_text]
                state = apply_compression(ranges, view, state, frame.profile.kernel, compress_call_id="c").state
    assert compared == recs[0]["turns"] and nudges > 0


def test_earlier_folds_dropped_keeps_this_turns_rounds():
    chat = [{"role": "user", "content": "task"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "k1", "type": "function", "function": {"name": "compress", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "k1", "content": "folded"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "r1", "type": "function", "function": {"name": "read", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "r1", "name": "read", "content": "file"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "k2", "type": "function", "function": {"name": "compress", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "k2", "content": "folded again"}]
    kept = earlier_folds_dropped(flatten(chat))
    assert [m.tool_call_id for m in kept] == [None, "r1", "r1", "k2", "k2"]


def test_rendered_request_shape():
    profile = resolve_profile(POCKET_PROXY_WINDOW, "proxy", "proxy_chat")
    frame = request_frame(profile, DOCTRINE, base_prompt="You fix bugs.", task_tools=CLIENT_TOOLS)
    chat = [{"role": "user", "content": "fix it"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "r1", "type": "function", "function": {"name": "read", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "r1", "name": "read", "content": "x = 1"}]
    req = render_request(frame, flatten(chat), CompressionState.initial(), token_count=0)
    first = req.messages[0]["content"]
    assert ">m00001</acp>\nYou fix bugs." in first and first.endswith(SYSTEM_SEPARATOR + frame.system)
    assert "name" not in req.messages[-1] and req.messages[-1]["role"] == "tool"
    assert [t["function"]["name"] for t in req.tools][-4:] == ["compress", "decompress", "search_context",
                                                                "acp_status"]
    assert req.token_count == 0 and req.sent_tokens > frame.fixed_tokens
    # without a previous call's count the renderer estimates this request (a lone request)
    assert render_request(frame, flatten(chat), CompressionState.initial()).token_count > frame.fixed_tokens


def test_block_and_nudges_carry_the_exported_proxy_texts():
    """The proxy_chat frame renders the four texts the export writes into the proxy's config:
    philosophy and how-to in front of the block and in every nudge (the proxy's layout)."""
    from doctrine.render.proxy_texts import proxy_block, proxy_prompt_texts

    texts = proxy_prompt_texts(DOCTRINE, "distilled")
    frame = request_frame(resolve_profile(POCKET_PROXY_WINDOW, "proxy", "proxy_chat"), DOCTRINE)
    assert frame.system == proxy_block(DOCTRINE, "distilled")
    assert frame.system.startswith(texts["compressPhilosophy"] + "\n\n" + texts["howToCompressRules"])
    assert texts["tier2DistillRules"] not in frame.system
    recs = _load("pocket-3k.jsonl.gz")
    clients = {c["turn"]: c for c in _load("pocket-3k.client.jsonl.gz")}
    state, seen = CompressionState.initial(), 0
    frame = request_frame(resolve_profile(POCKET_PROXY_WINDOW, "proxy", "proxy_chat"), DOCTRINE,
                          base_prompt=clients[1]["messages"][0]["content"], task_tools=CLIENT_TOOLS)
    for t in (r for r in recs if r["type"] == "turn"):
        msgs, _ = _client(clients[t["turn"]]["messages"])
        req = render_request(frame, flatten(msgs[1:]), state, token_count=t["proxy_decision"]["token_count"])
        if req.nudge_shown:
            assert texts["compressPhilosophy"] in req.nudge_text and texts["howToCompressRules"] in req.nudge_text
            seen += 1
        state = req.view.state
    assert seen > 0


def test_model_usage_counter_counts_the_request_through_the_chat_template():
    """With ``usage_counter="model:SPEC"`` a request's size (the next call's fill) is its prompt
    tokens through the model's chat template, tool schemas included, as vLLM reports them."""
    from plumbing.chat_templates import chat_token_ids, choose_template
    from plumbing.models import load_tokenizer

    spec = "embedded:smollm2-135m-instruct"
    profile = resolve_profile(POCKET_PROXY_WINDOW, "proxy_pocket", "proxy_chat", usage_counter=f"model:{spec}")
    frame = request_frame(profile, DOCTRINE, base_prompt="You fix bugs.", task_tools=CLIENT_TOOLS)
    req = render_request(frame, flatten([{"role": "user", "content": "fix it"}]), CompressionState.initial(),
                         token_count=0)
    tok = load_tokenizer(spec)
    assert req.sent_tokens == len(chat_token_ids(tok, req.messages, req.tools, choose_template(tok).template))
    assert req.sent_tokens > frame.fixed_tokens  # the template's tool rendering is more than the JSON estimate
