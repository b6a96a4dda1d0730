"""``doctrine.kernel.proxy_chat`` against what the real billion-context proxy sent upstream.

The fixtures (``fixtures/proxy_record/``, recorded by hand with ``tools/proxy_record/run.sh``)
hold, per client turn, the client's request and the structure of every upstream request
the proxy made. Each recorded session is replayed here: the same client requests, the
proxy's own context counts, and the same compress calls. It goes through the project's
kernel and ``render_proxy_chat``, and each round-1 request is compared with the recording
message by message: role, ref, tag type and token figure, tool calls, content present,
``name`` on tool results. Also compared: the nudge decision (inject, tier), where the
nudge sits, the ranges it offers, the tool order, and whether each recorded compress was
applied or refused.

Differences tolerated, each named where it is allowed:

* TEXTS: the system block, tool descriptions and nudge wording are the doctrine's, not
  the proxy's. They are compared by position and presence, never by hash.
* STATUS_LINE: the proxy's status line that the client kept in an assistant message is
  stored as a same-length placeholder, so that message's tag token figure may differ.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from doctrine.kernel.config import KernelConfig
from doctrine.kernel.proxy_chat import (
    ACP_TOOL_ORDER,
    MAX_ROUNDS,
    PROXY_SETTINGS,
    SYSTEM_SEPARATOR,
    apply_proxy_compress,
    effective_limit,
    proxy_config,
    render_proxy_chat,
    rerequest_after_compress,
)
from doctrine.kernel.state import CompressionState
from tools.proxy_record.fixtures import STATUS, message_structure
from tools.proxy_record.session import TOOLS as CLIENT_TOOLS

FIX = Path(__file__).parent / "fixtures" / "proxy_record"
SESSIONS = ["session-8k", "tuned-8k", "ignore-8k", "gentle-8k", "fold-early-8k", "prompts-8k",
            "prompts-empty-8k", "pocket-3k", "retry-loop"]
OUR_BLOCK = "OUR-SYSTEM-BLOCK"
OUR_NUDGE = "OUR-NUDGE"
ACP_TOOLS = [{"type": "function", "function": {"name": n, "description": "ours", "parameters": {"type": "object"}}}
             for n in ACP_TOOL_ORDER]


def _load(name: str) -> list[dict]:
    with gzip.open(FIX / name, "rt", encoding="utf-8") as f:
        return [json.loads(x) for x in f if x.strip()]


def _client(msgs: list[dict]) -> tuple[list[dict], set[int]]:
    placeholders = {i for i, m in enumerate(msgs) if m.get("status_placeholder")}
    return [{k: v for k, v in m.items() if k != "status_placeholder"} for m in msgs], placeholders


def _ours(i: int, m: dict, nudge_at: int | None) -> dict:
    s = message_structure(i, m, {}, nudge_at)
    return {k: v for k, v in s.items() if k not in ("nudge", "appended", "result_kind")}


def _comparable(s: dict) -> dict:
    return {k: v for k, v in s.items() if k not in ("nudge", "appended", "result_kind")}


def replay(name: str):
    """Yield (turn, recorded round-1 record, our request, recorded turn record, placeholders)."""
    recs = _load(f"{name}.jsonl.gz")
    clients = {c["turn"]: c for c in _load(f"{name}.client.jsonl.gz")}
    header = recs[0]
    window = header["config"]["providers"]["<mock>"]["models"]["mock-coder"]["context"]
    state = CompressionState.initial()
    turns = [r for r in recs if r["type"] == "turn"]
    ups = [r for r in recs if r["type"] == "upstream"]
    for t in turns:
        c = clients[t["turn"]]
        settings = {k: v for k, v in header["config"].get("compress", {}).items() if k in PROXY_SETTINGS}
        cfg = proxy_config(window, c["max_tokens"], settings)  # prompt keys aside: TEXTS
        msgs, placeholders = _client(c["messages"])
        d = t["proxy_decision"]
        req = render_proxy_chat(msgs, CLIENT_TOOLS, state, cfg, d["token_count"], system_block=OUR_BLOCK,
                                acp_tools=ACP_TOOLS, nudge_text=lambda dec, offered: OUR_NUDGE)
        mine = [u for u in ups if u["turn"] == t["turn"]]
        yield t, mine, req, placeholders
        state = req.state
        if len(mine) > 1:
            last = mine[1]["messages"][-2]
            call = (last.get("tool_calls") or [{}])[0]
            if call.get("name") == "compress" and "ranges" in call:
                ranges = [{"startId": a, "endId": b, "summary": "s" * 120, "topic": "t"} for a, b in call["ranges"]]
                res = apply_proxy_compress(ranges, req, cfg, call_id="c")
                yield ("compress", mine[1]["messages"][-1]["result_kind"], res)
                our_call = {"id": "c", "type": "function",
                            "function": {"name": "compress", "arguments": json.dumps({"content": ranges})}}
                yield ("rerequest", mine[1], rerequest_after_compress(req, [(our_call, res.text)], OUR_BLOCK))
                state = res.state


@pytest.mark.parametrize("name", SESSIONS)
def test_replay_matches_recording(name):
    turns = 0
    for item in replay(name):
        if item[0] == "compress":
            _, kind, res = item
            assert (res.blocks_created > 0) == (kind == "compressed"), (name, kind, res.errors)
            continue
        if item[0] == "rerequest":
            _, rec2, ours2 = item
            a = [_comparable(message_structure(i, m, {}, None)) for i, m in enumerate(ours2)]
            b = [_comparable(m) for m in rec2["messages"]]
            where = f"{name} turn {rec2['turn']} round 2"
            assert len(a) == len(b), (where, len(a), len(b))
            assert a[0].get("client_system") == b[0].get("client_system"), where
            # TEXTS: the compress result is the kernel's wording on both sides, ours from the
            # project's kernel; compared by presence. The view before it must match exactly.
            status = {i for i, m in enumerate(ours2) if STATUS in (m.get("content") or "")}  # STATUS_LINE

            def norm(x: dict, status=status) -> dict:
                return _without(x, "content", "tag_tokens") if x["i"] in status else x
            # The view before the call must match exactly; the call's result is the kernel's
            # text on each side (TEXTS), compared by presence.
            assert [norm(x) for x in a[1:-1]] == [norm(x) for x in b[1:-1]], where
            assert a[-1]["role"] == b[-1]["role"] == "tool" and not a[-1]["has_name"] and not b[-1]["has_name"]
            continue
        t, mine, req, _ = item
        turns += 1
        rec = mine[0]
        d = t["proxy_decision"]
        where = f"{name} turn {t['turn']}"
        # the nudge decision
        assert req.decision.should_inject == d["inject"], where
        if d["inject"]:
            assert req.decision.tier == d["tier"], where
        # tools: the client's, then the proxy's four
        assert [x["function"]["name"] for x in req.tools] == [x["name"] for x in rec["tools"]], where
        # messages, one by one (a nudge is compared by position only: TEXTS)
        nudge_at = len(req.messages) - 1 if req.nudge_shown else None
        ours = [_ours(i, m, nudge_at) for i, m in enumerate(req.messages)]
        theirs = [_comparable(m) for m in rec["messages"]]
        assert len(ours) == len(theirs), (where, len(ours), len(theirs))
        rec_nudge = next((m["nudge"] for m in rec["messages"] if "nudge" in m), None)
        assert (rec_nudge is not None) == req.nudge_shown, where
        if rec_nudge is not None:
            assert rec["messages"][-1].get("nudge") is not None, where
            offered = [(r.start_ref, r.end_ref) for r in req.offered]
            recorded = [(r["start"], r["end"]) for r in rec_nudge["ranges"] if not r["protected"]]
            if not rec_nudge["target_blocks"]:
                assert offered == recorded, (where, offered, recorded)
            else:
                assert [b.block_id for b in req.decision.tier_target_blocks] == \
                       [b["block"] for b in rec_nudge["target_blocks"]], where
        for i, (a, b) in enumerate(zip(ours, theirs, strict=True)):
            if i == 0 and a["role"] == "system":
                # TEXTS: the appended block is ours; the client's part must match exactly
                assert ("client_system" in a) == ("client_system" in b), (where, a, b)
                if "client_system" in b:
                    assert a["client_system"] == b["client_system"], where
                    assert (a.get("ref"), a.get("tag_type"), a.get("tag_tokens")) == \
                           (b.get("ref"), b.get("tag_type"), b.get("tag_tokens")), where
                else:
                    assert a.get("ref") is None and b.get("ref") is None, where
                continue
            if i == nudge_at:
                continue
            if STATUS in (req.messages[i].get("content") or ""):  # STATUS_LINE
                assert b["role"] == "assistant" and b.get("content") is not None, where
                assert a["content"]["len"] == b["content"]["len"], where
                a, b = _without(a, "tag_tokens", "content"), _without(b, "tag_tokens", "content")
            assert a == b, (where, i, a, b)
    assert turns == _load(f"{name}.jsonl.gz")[0]["turns"] >= 1


def _without(d: dict, *keys: str) -> dict:
    return {k: v for k, v in d.items() if k not in keys}


def test_system_block_and_separator():
    """The client's system text, tagged m00001, then the separator, then the block; after a
    fold has covered m00001 the block alone, untagged."""
    req = render_proxy_chat([{"role": "system", "content": "sys"}, {"role": "user", "content": "task"}], [],
                            CompressionState.initial(), KernelConfig.for_limit(8000), 0,
                            system_block=OUR_BLOCK, acp_tools=ACP_TOOLS)
    first = req.messages[0]["content"]
    assert first.startswith('<acp tokens="') and ">m00001</acp>\nsys" in first
    assert first.endswith(SYSTEM_SEPARATOR + OUR_BLOCK)
    assert req.messages[1]["content"].endswith(">m00002</acp>\ntask")
    req = render_proxy_chat([{"role": "user", "content": "task"}], [], CompressionState.initial(),
                            KernelConfig.for_limit(8000), 0, system_block=OUR_BLOCK, acp_tools=ACP_TOOLS)
    assert req.messages[0] == {"role": "system", "content": OUR_BLOCK}


def test_rerequest_carries_the_call_only_there():
    msgs = [{"role": "system", "content": "sys"}, {"role": "user", "content": "task"}]
    req = render_proxy_chat(msgs, [], CompressionState.initial(), KernelConfig.for_limit(8000), 0,
                            system_block=OUR_BLOCK, acp_tools=ACP_TOOLS)
    call = {"id": "c1", "type": "function", "function": {"name": "compress", "arguments": "{}"}}
    out = rerequest_after_compress(req, [(call, "[result]")], OUR_BLOCK)
    assert out[-2]["tool_calls"] == [call] and out[-1] == {"role": "tool", "tool_call_id": "c1",
                                                             "content": "[result]"}
    assert len(rerequest_after_compress(req, [(call, "[r]")] * 3, OUR_BLOCK)) == len(out) + 4


def test_retry_loop_rounds_match_the_recording():
    """Every round of the recorded retry loop: the turn's view, then one failed call and its
    result per earlier round. The proxy stops after MAX_ROUNDS upstream requests."""
    recs = _load("retry-loop.jsonl.gz")
    ups = [r for r in recs if r["type"] == "upstream"]
    assert len(ups) == MAX_ROUNDS
    client = _load("retry-loop.client.jsonl.gz")[0]
    req = render_proxy_chat(client["messages"], CLIENT_TOOLS, CompressionState.initial(),
                            proxy_config(8192, client["max_tokens"]), 0, system_block=OUR_BLOCK,
                            acp_tools=ACP_TOOLS)
    broken = {"id": "c", "type": "function", "function": {"name": "compress", "arguments": '{"content": [{'}}
    for u in ups:
        ours = req.messages if u["round"] == 1 else rerequest_after_compress(
            req, [(broken, "[failed]")] * (u["round"] - 1), OUR_BLOCK)
        a = [_without(_comparable(message_structure(i, m, {}, None)), "content") for i, m in enumerate(ours)]
        b = [_without(_comparable(m), "content") for m in u["messages"]]
        assert len(a) == len(b), u["round"]
        assert a[1:] == b[1:], u["round"]  # message 0: the system block is ours (TEXTS)
        assert all(m.get("result_kind") == "failed" for m in u["messages"][2:] if m["role"] == "tool")


def test_effective_limit_and_acp_tool_order():
    assert effective_limit(8192, 512) == 7680
    assert effective_limit(8192, None) == 8192  # 8,192 reserved would leave nothing: not reserved
    assert effective_limit(200_000, None) == 200_000 - 8192
    with pytest.raises(ValueError, match="acp_tools must be"):
        render_proxy_chat([], [], CompressionState.initial(), KernelConfig.for_limit(8000), 0,
                          system_block="", acp_tools=list(reversed(ACP_TOOLS)))


def test_recorded_facts_behind_findings():
    """The facts tools/proxy_record/FINDINGS.md states, checked on the fixtures it cites."""
    tuned = _load("tuned-8k.jsonl.gz")
    turns = [r for r in tuned if r["type"] == "turn"]
    ups = [r for r in tuned if r["type"] == "upstream"]
    # context = the previous upstream call's prompt_tokens (0 on the first call)
    assert all(t["proxy_decision"]["token_count"] == t["prev_upstream_prompt_tokens"] for t in turns)
    assert turns[0]["proxy_decision"]["token_count"] == 0
    # tool-call turns reach the client with finish_reason "stop"
    tool_turns = [t for t in turns if t["client_reply"]["tool_calls"]]
    assert len(tool_turns) == 22 and {t["client_reply"]["finish_reason"] for t in tool_turns} == {"stop"}
    # no compress call survives into a later turn's first request; the re-request has it
    assert not any(c["name"] == "compress" for u in ups if u["round"] == 1
                   for m in u["messages"] for c in m.get("tool_calls", []))
    assert all(u["messages"][-2]["tool_calls"][0]["name"] == "compress" for u in ups if u["round"] == 2)
    # the first nudge offers the system message; after that fold the client's system text is gone
    first = next(u for u in ups if any("nudge" in m for m in u["messages"]))
    assert first["messages"][-1]["nudge"]["ranges"][0]["start"] == "m00001" and first["turn"] == 8
    assert all("client_system" not in u["messages"][0] for u in ups if u["turn"] > 8)
    # every pressure-band nudge uses the emergency wording with a placeholder example
    kinds = {m["nudge"]["kind"] for u in ups for m in u["messages"] if "nudge" in m}
    assert kinds == {"emergency", "tier2-emergency"}
    # the retry loop: one client call, ten upstream rounds, "length" to the client
    loop = _load("retry-loop.jsonl.gz")
    assert [u["round"] for u in loop if u["type"] == "upstream"] == list(range(1, 11))
    assert next(r for r in loop if r["type"] == "turn")["client_reply"]["finish_reason"] == "length"
    # defaults at 8K: never a nudge, the context past the limit
    plain = [r for r in _load("session-8k.jsonl.gz") if r["type"] == "turn"]
    assert not any(t["proxy_decision"]["inject"] for t in plain)
    assert plain[-1]["proxy_decision"]["token_count"] > plain[-1]["proxy_decision"]["limit"]


def _shape(x):
    if isinstance(x, dict):
        return {k: _shape(v) for k, v in x.items() if k != "description"}
    if isinstance(x, list):
        return [_shape(v) for v in x]
    return x


def test_project_tool_schemas_against_the_recorded_acp_tools():
    """The project's proxy-host tool schemas (doctrine.render.tools) have the recorded ACP
    tools' names, order and parameter shapes, except two named differences:

    * MIN_ITEMS: ours require ``content`` to hold at least one range (``minItems: 1``);
      the proxy states no minimum (it refuses an empty list when the call comes).
    * LIMIT_TYPE: ours type ``search_context.limit`` as an integer with default 5; the
      proxy as a number with no default (it floors it and uses 5 when absent).
    """
    from doctrine.render.tools import tool_schemas
    from doctrine.texts import load_doctrine

    ours = {t["function"]["name"]: _shape(t["function"]["parameters"])
            for t in tool_schemas(load_doctrine(), "distilled", "proxy")}
    rec = next(r for r in _load("tuned-8k.jsonl.gz") if r["type"] == "upstream")
    theirs = {t["name"]: _shape(t["parameters"]) for t in rec["tools"] if t["name"] in ACP_TOOL_ORDER}
    assert list(ours) == list(theirs) == list(ACP_TOOL_ORDER)
    assert ours["compress"]["properties"]["content"].pop("minItems") == 1  # MIN_ITEMS
    limit = ours["search_context"]["properties"]["limit"]
    assert (limit.pop("type"), limit.pop("default")) == ("integer", 5)  # LIMIT_TYPE
    assert theirs["search_context"]["properties"]["limit"].pop("type") == "number"
    assert ours == theirs


def test_proxy_config_maps_the_proxy_settings():
    cfg = proxy_config(8192, 512, {"maxContextLimit": "70%", "emergencyThresholdPercent": 0.9,
                                   "nudgeGrowthTokens": 500, "preserveRecentTokens": 800,
                                   "minCompressRange": 1000, "tiers": False})
    assert cfg.model_context_limit == 7680
    assert (cfg.nudge.max_context_limit_pct, cfg.nudge.emergency_threshold_pct, cfg.truncate.threshold) == \
        (0.7, 0.9, 0.9)
    assert (cfg.nudge.growth_floor, cfg.nudge.growth_cap, cfg.nudge.min_growth_floor) == (500, 500, 20000)
    assert (cfg.preserve_recent_tokens, cfg.compress.min_compress_range, cfg.tiers.enabled) == (800, 1000, False)
    assert proxy_config(10000, 1000, {"modelContextLimit": "50%"}).model_context_limit == 4000
    with pytest.raises(ValueError, match=r"not a setting of the proxy's compress block: \['growthFloor'\]"):
        proxy_config(8192, 512, {"growthFloor": 1})
