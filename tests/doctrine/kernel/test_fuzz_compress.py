"""Seeded fuzzing of compress calls: errors or warnings as the reference describes, never an
exception. Each case belongs to a category whose expected outcome is known from §5.5/§6.1."""

import json
import random

import pytest

from doctrine.kernel.compress_args import compress_tool_call
from doctrine.kernel.config import KernelConfig
from doctrine.kernel.messages import Message
from doctrine.kernel.state import CompressionState
from doctrine.kernel.turn import process_turn

CFG = KernelConfig.for_limit(200000, minCompressRange=1500, preserveRecentMessages=3,
                             preserveRecentTokens=300)
SEEDS = range(40)


def build_session(rnd: random.Random):
    """A 24-40 message session with tool pairs, reasoning and one compress call pair."""
    msgs = [Message("u0", "user", "text", "start " * 30)]
    i = 1
    n = rnd.randint(24, 40)
    while len(msgs) < n - 4:
        k = rnd.random()
        if k < 0.3:
            cid = f"k{i}"
            msgs.append(Message(f"c{i}", "assistant", "tool-call", '{"q":"%s"}' % ("z" * rnd.randint(5, 60)),
                                rnd.choice(["grep", "read", "bash", "edit"]), cid))
            msgs.append(Message(f"t{i}", "tool", "tool-result", "r" * rnd.randint(50, 3000),
                                msgs[-1].tool_name, cid))
        elif k < 0.4:
            msgs.append(Message(f"r{i}", "assistant", "reasoning", "th" * rnd.randint(5, 100)))
            msgs.append(Message(f"a{i}", "assistant", "text", "ans " * rnd.randint(5, 200)))
        elif k < 0.45 and not any(m.tool_name == "compress" for m in msgs):
            msgs.append(Message(f"pc{i}", "assistant", "tool-call", "{}" * 400, "compress", f"p{i}"))
            msgs.append(Message(f"pr{i}", "tool", "tool-result", "[Compressed]" * 50, "compress", f"p{i}"))
        else:
            msgs.append(Message(f"u{i}", "user", "text", "ask " * rnd.randint(5, 150)))
        i += 1
    for j in range(4):
        msgs.append(Message(f"z{j}", "user" if j % 2 == 0 else "assistant", "text", "tail " * 40))
    turn = process_turn(msgs, CompressionState.initial(), CFG, 5000)
    return msgs, turn.state


def ref_of(st, mid):
    return st.by_raw[mid]


def good_summary(rnd):
    return "Kept: path a.py:10, value 42, decision X because Y. " + "d" * rnd.randint(0, 400)


def args_for(ranges):
    return json.dumps({"content": [{"startId": a, "endId": b, "summary": s} for a, b, s in ranges]})


def big_span(msgs, st, rnd):
    """A start/end pair of refs outside the zone with at least 1500 chars between them."""
    older = msgs[:-8]
    for _ in range(50):
        a, b = sorted(rnd.sample(range(len(older)), 2))
        span = older[a:b + 1]
        if sum(len(m.text) for m in span) >= 1500 and all(m.tool_name != "compress" for m in span):
            return ref_of(st, older[a].id), ref_of(st, older[b].id)
    return None


CATEGORIES = ["bad_json", "unknown", "reversed", "protected", "zone", "short", "long", "small",
              "garbage"]


@pytest.mark.parametrize("seed", SEEDS)
def test_fuzzed_compress_calls(seed):
    rnd = random.Random(seed)
    msgs, st = build_session(rnd)
    before = st.to_acp_json()
    for cat in CATEGORIES:
        args, check = make_case(cat, msgs, st, rnd)
        if args is None:
            continue
        r = compress_tool_call(args, msgs, st, CFG, call_id="fz")
        assert st.to_acp_json() == before, cat  # input state never mutated
        assert all(isinstance(x, str) for x in r.errors + r.warnings)
        assert r.text.startswith("[Compressed " if r.blocks_created else "[Compression FAILED: ")
        if r.blocks_created == 0:  # nothing changed but the run id a non-gated call spends
            assert _without_run_id(r.state) == _without_run_id(st)
        check_invariants(r, msgs, st)
        check(r)


def _without_run_id(st):
    d = dict(st.to_acp_json())
    d.pop("nextRunId", None)
    return d


def check_invariants(r, msgs, st):
    new = r.state.blocks[len(st.blocks):]
    assert len(new) == r.blocks_created
    compress_ids = {m.id for m in msgs if m.tool_name == "compress"}
    for b in new:
        assert 50 <= len(b.summary.strip()) <= 20000 and b.active and b.tier in (1, 2, 3)
        assert set(b.direct_message_ids) <= set(b.effective_message_ids)
        assert not (set(b.effective_message_ids) & compress_ids)


def make_case(cat, msgs, st, rnd):
    if cat == "bad_json":
        good = args_for([("m00001", "m00005", good_summary(rnd))])
        cut = good[: rnd.randint(1, len(good) - 2)]
        return cut, lambda r: (r.blocks_created == 0 and len(r.errors) == 1
                               and "not valid JSON" in r.errors[0]) or pytest.fail(str(r.errors))
    if cat == "unknown":
        hi = len(st.by_ref) + rnd.randint(1, 500)
        args = args_for([(f"m{hi}", f"m{hi + rnd.randint(0, 9)}", good_summary(rnd))])
        # acp-kernel: the size gate's "none resolved" error, then each range's own error
        return args, lambda r: (r.blocks_created == 0 and len(r.errors) == 2
                                and "acp_status" in r.errors[0]
                                and "never assigned" in r.errors[1]) or pytest.fail(str(r.errors))
    if cat == "reversed":
        span = big_span(msgs, st, rnd)
        if span is None:
            return None, None
        s = good_summary(rnd)
        fwd = compress_tool_call(args_for([(span[0], span[1], s)]), msgs, st, CFG)

        def check(r):
            assert r.blocks_created == fwd.blocks_created == 1, (r.errors, fwd.errors)
            assert r.state.blocks[-1].effective_message_ids == fwd.state.blocks[-1].effective_message_ids
        return args_for([(span[1], span[0], s)]), check
    if cat == "protected":
        prot = [m for m in msgs if m.tool_name == "compress"]
        if not prot:
            return None, None
        a, b = ref_of(st, prot[0].id), ref_of(st, prot[-1].id)
        # 800 + 600 chars < 1500: the size gate fails first; with a lower gate, protection does
        return args_for([(a, b, good_summary(rnd))]), lambda r: (
            r.blocks_created == 0 and len(r.errors) == 1 and "too small" in r.errors[0]) or pytest.fail(str(r.errors))
    if cat == "zone":
        tail = msgs[-2:]
        a, b = ref_of(st, tail[0].id), ref_of(st, tail[1].id)
        cfg_small = KernelConfig.for_limit(200000, minCompressRange=0, preserveRecentMessages=3,
                                           preserveRecentTokens=300)
        r = compress_tool_call(args_for([(a, b, good_summary(rnd))]), msgs, st, cfg_small)
        assert r.blocks_created == 0 and "entirely in the recent protected zone" in r.errors[0]
        return None, None
    if cat in ("short", "long"):
        span = big_span(msgs, st, rnd)
        if span is None:
            return None, None
        summary = "s" * rnd.randint(0, 49) if cat == "short" else "l" * rnd.randint(20001, 30000)
        if cat == "short" and rnd.random() < 0.3:
            summary = " " * rnd.randint(0, 5)
        want = {"short": ("too short", "empty"), "long": ("too long",)}[cat]
        return args_for([(span[0], span[1], summary)]), lambda r: (
            r.blocks_created == 0 and len(r.errors) == 1 and any(w in r.errors[0] for w in want)
        ) or pytest.fail(str(r.errors))
    if cat == "small":
        small = [m for m in msgs[:-8] if 0 < len(m.text) < 1500 and m.tool_name != "compress"]
        if not small:
            return None, None
        ref = ref_of(st, rnd.choice(small).id)
        return args_for([(ref, ref, good_summary(rnd))]), lambda r: (
            r.blocks_created == 0 and r.errors and "too small" in r.errors[0]) or pytest.fail(str(r.errors))
    # garbage: random structures must never raise
    pool = ["m1", "M00002", "b1", "b99", "", " ", "m0", "m999999", "x", None, 5, [], {}, "m00003"]
    entries = [{rnd.choice(["startId", "startRef", "endId", "endRef", "messageId", "summary", "topic", "zz"]):
                rnd.choice(pool + [good_summary(rnd)]) for _ in range(rnd.randint(0, 5))}
               for _ in range(rnd.randint(0, 4))]
    args = rnd.choice([{"content": entries}, entries, json.dumps({"content": entries})[:-1],
                       {"content": json.dumps(entries)}, {"topic": 3, "content": entries}])
    return args, lambda r: None
