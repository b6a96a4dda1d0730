"""The seeds' other context policies (eval/arms/policies/): one test per mechanism, then a run."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from eval.arms import ARM_INFO, ARMS, SUMMARY_PREFIX, ArmEnv, ArmState, View, apply_reply
from eval.arms.policies import compaction, lcm, retention
from eval.arms.policies.compaction import message_cut, message_tokens, retry_chains, step_cut
from plumbing.tokens import default_count_tokens

from .conftest import call, tool_protocol_ok

ROOT = Path(__file__).resolve().parents[2]
POLICY = ("compact_tail", "compact_step_cut", "compact_offload", "compact_retry_collapse", "compact_plus",
          "lcm", "full_retention_search")


def env(window=4000, **kw) -> ArmEnv:
    def summarise(source, instruction):
        return "the parser fails on a bad token"

    return ArmEnv.build(window, default_count_tokens, summarise, **kw)


def history(seed: int, steps: int = 40) -> list[dict]:
    """A random session: user turns, assistant steps with 1-3 calls (their results, of random
    sizes, right after), assistant texts; stable ids."""
    rng = random.Random(seed)
    msgs: list[dict] = [{"role": "user", "content": "Fix the parser."}]
    for k in range(steps):
        r = rng.random()
        if r < 0.15:
            msgs.append({"role": "user", "content": f"Now part {k}."})
        elif r < 0.3:
            msgs.append({"role": "assistant", "content": f"Looked at part {k}. " + "y" * rng.randint(0, 300)})
        else:
            n = rng.randint(1, 3)
            msgs.append({"role": "assistant", "content": "", "tool_calls": [call(f"c{k}_{j}", f"cat f{k}.py")
                                                                            for j in range(n)]})
            for j in range(n):
                msgs.append({"role": "tool", "tool_call_id": f"c{k}_{j}", "name": "bash",
                             "content": f"out {k}.{j} " + "x" * rng.randint(5, 1500)})
    return [{**m, "id": f"s{i:05d}"} for i, m in enumerate(msgs)]


def tokens(e: ArmEnv, msgs: list[dict]) -> int:
    return sum(message_tokens(e, m) for m in msgs)


# ----------------------------------------------------------------------------- retained tail


@pytest.mark.parametrize("share", [0.05, 0.2, 0.5])
def test_the_tail_keeps_exactly_its_share(share):
    for seed in range(30):
        e, hist = env(tail_share=share), history(seed)
        cut = message_cut(ArmState(history=hist), e)
        budget = int(share * e.window)
        kept = hist[cut:]
        assert kept, "the newest message always stays"
        if len(kept) > 1 or tokens(e, kept) <= budget:
            assert tokens(e, kept) <= budget
            assert cut == 0 or tokens(e, hist[cut - 1:]) > budget  # one more message would not fit


def test_compact_tail_shows_the_summary_then_its_tail_verbatim():
    e, hist = env(window=3000), history(1)
    st = ArmState(history=list(hist))
    view = ARMS["compact_tail"](st, e)
    assert view.events and st.summary is not None and st.cut > 0
    body = [m for m in view.messages if m["role"] != "system"]
    assert body[0]["content"].startswith(SUMMARY_PREFIX)
    shown_tail = body[-(len(hist) - st.cut):]
    assert tokens(e, hist[st.cut:]) <= int(e.compaction.tail_share * e.window) or len(hist) - st.cut == 1
    for m, orig in zip(shown_tail, hist[st.cut:], strict=True):
        if orig["role"] != "tool" or len(orig["content"]) <= e.compaction.micro_min_chars:  # micro-compaction still applies
            assert m["content"] == orig["content"]


# ----------------------------------------------------------------------------- step-aware cut


def test_a_step_aware_cut_never_splits_a_tool_exchange():
    splits = 0
    for seed in range(300):
        rng = random.Random(seed)
        e, hist = env(tail_share=rng.choice([0.02, 0.05, 0.1, 0.3])), history(seed, steps=rng.randint(3, 40))
        st = ArmState(history=hist)
        st.cut = step_cut(ArmState(history=hist), e) if rng.random() < 0.3 else 0  # also from an earlier cut
        cut = step_cut(st, e)
        assert tool_protocol_ok(hist[cut:]), seed
        assert cut == len(hist) or hist[cut]["role"] != "tool"
        splits += not tool_protocol_ok(hist[message_cut(ArmState(history=hist), e):])
    assert splits > 0  # the plain message cut does split exchanges: the property is not vacuous


@pytest.mark.parametrize("arm", ["compact_step_cut", "compact_plus", "full_retention_search", "lcm"])
def test_step_aware_views_keep_whole_exchanges(arm):
    for seed in range(20):
        st = ArmState(history=history(seed))
        view = ARMS[arm](st, env(window=2500))
        assert view.retained_messages < len(st.history) and tool_protocol_ok(view.messages), seed


# ----------------------------------------------------------------------------- offload


def test_an_offloaded_output_is_restored_byte_for_byte():
    e = env(window=100_000, micro_keep=1)
    odd = "línea 1\r\n\ttabs  and   spaces \u2028 {\"json\": [1, 2]}\n" * 40 + "no newline at the end"
    hist = [{"id": "u0", "role": "user", "content": "Run it."},
            {"id": "a1", "role": "assistant", "content": "", "tool_calls": [call("c1", "pytest")]},
            {"id": "t1", "role": "tool", "tool_call_id": "c1", "name": "bash", "content": odd},
            {"id": "a2", "role": "assistant", "content": "", "tool_calls": [call("c2", "ls")]},
            {"id": "t2", "role": "tool", "tool_call_id": "c2", "name": "bash", "content": "z" * 600},
            {"id": "u1", "role": "user", "content": "What failed?"}]  # the results are of an earlier turn now
    st = ArmState(history=list(hist))
    view = ARMS["compact_offload"](st, e)
    shown = next(m for m in view.messages if m.get("tool_call_id") == "c1")
    assert odd not in shown["content"] and "out-t1" in shown["content"]  # cleared, with its handle
    assert "read_tool_output" in {t["function"]["name"] for t in view.tools}
    reply = {"content": "", "tool_calls": [call("r1", "x") | {"function": {"name": "read_tool_output",
                                                                           "arguments": json.dumps({"handle": "out-t1"})}}]}
    out = apply_reply(st, e, view, reply)
    assert out["recovery"] == ["read_tool_output"] and out["recovered"] == 1 and out["refetched"] == 0
    assert st.history[-1]["role"] == "tool" and st.history[-1]["content"] == odd
    assert st.history[-1]["content"].encode() == odd.encode()
    again = apply_reply(st, e, view, reply)
    assert again["refetched"] == 1
    bad = apply_reply(st, e, view, {"tool_calls": [{"id": "r3", "function": {"name": "read_tool_output",
                                                                              "arguments": '{"handle": "out-zz"}'}}]})
    assert bad["recovered"] == 0 and "FAILED" in st.history[-1]["content"]


def test_outputs_a_summary_replaces_are_listed_and_readable():
    e = env(window=3000)
    hist = history(2)
    st = ArmState(history=list(hist))
    view = ARMS["compact_offload"](st, e)
    assert st.summary is not None
    listed = st.policy.get("listed") or []
    assert listed and "Saved tool outputs" in view.messages[0]["content"] + (view.messages[1]["content"] if
                                                                               len(view.messages) > 1 else "")
    h = listed[0]
    run = compaction.read_tool_output(st, e, {"handle": h})
    assert run.ok and run.text == hist[st.policy["outputs"][h]["index"]]["content"]


# ----------------------------------------------------------------------------- retry collapse


def _attempt(k: int, ok: bool, name: str = "bash") -> list[dict]:
    return [{"id": f"a{k}", "role": "assistant", "content": f"try {k}", "tool_calls": [
                {"id": f"c{k}", "type": "function", "function": {"name": name, "arguments": "{}"}}]},
            {"id": f"t{k}", "role": "tool", "tool_call_id": f"c{k}", "name": name,
             "content": f"{k} passed, 1 failed" if ok else f"ERROR: attempt {k} crashed"}]


def test_a_settled_retry_chain_collapses_and_an_active_one_stays_whole():
    e = env(window=100_000)
    settled = [{"id": "u", "role": "user", "content": "Run the tests."}] + _attempt(1, False) + _attempt(2, False) \
        + _attempt(3, False) + _attempt(4, True)
    active = _attempt(5, False) + _attempt(6, False)
    st = ArmState(history=settled + active)
    view = ARMS["compact_retry_collapse"](st, e)
    texts = [m.get("content") or "" for m in view.messages]
    assert not any("attempt 1 crashed" == t or t.startswith("ERROR: attempt 2") for t in texts)
    final = next(m for m in view.messages if m.get("tool_call_id") == "c4")
    assert final["content"].startswith("[retry note: 3 earlier bash attempts failed")
    assert final["content"].endswith("4 passed, 1 failed")
    assert [m.get("tool_call_id") for m in view.messages if m.get("role") == "tool"] == ["c4", "c5", "c6"]
    assert tool_protocol_ok(view.messages)
    parts = [(m, i) for i, m in enumerate(st.history)]
    assert retry_chains(parts, e) == [(1, 9, True), (9, 13, False)]
    # A different tool after the failures is not a retry of them: nothing collapses.
    other = [{"id": "u", "role": "user", "content": "Run."}] + _attempt(1, False) + _attempt(2, True, "grep")
    assert len(ARMS["compact_retry_collapse"](ArmState(history=other), e).messages) == len(other)


# ----------------------------------------------------------------------------- lcm


def _expand_all(st: ArmState, e: ArmEnv, node_id: str, seen: dict[str, str]) -> None:
    run = lcm.expand(st, e, {"id": node_id})
    assert run.ok, node_id
    node = st.policy["lcm"]["nodes"][node_id]
    if node["depth"] == 1:
        for i in node["children"]:
            m = st.history[i]
            assert lcm.render_message(st, i) in run.text  # verbatim, with its id
            seen[m["id"]] = m["content"]
    else:
        for child in node["children"]:
            assert f"[{child} · depth" in run.text  # the pointer is shown
            _expand_all(st, e, child, seen)


@pytest.mark.parametrize("seed", [0, 3, 7])
def test_lcm_reaches_every_original_message_from_its_summaries(seed):
    e = env(window=2000, lcm_fanout=2)
    hist = history(seed, steps=80)
    st = ArmState()
    for m in hist:  # grown message by message, as a session is
        st.history.append(m)
        view = ARMS["lcm"](st, e)
    lc = st.policy["lcm"]
    assert max(n["depth"] for n in lc["nodes"].values()) >= 2  # summaries of summaries
    assert view.retained_tokens <= e.window
    head = next(m for m in view.messages if m["role"] == "user" and m["content"].startswith(lcm.HEAD))
    seen: dict[str, str] = {}
    for nid in lc["active"]:
        assert f"[{nid} · depth" in head["content"]
        _expand_all(st, e, nid, seen)
    raw = {m["id"] for m in hist[lc["frontier"]:]}
    assert set(seen) | raw == {m["id"] for m in hist}
    assert all(seen[m["id"]] == m["content"] for m in hist if m["id"] in seen)
    assert st.compressions_succeeded == len(lc["nodes"])


def test_lcm_forced_fold_and_expand_through_apply_reply():
    from eval.arms import force_compaction

    e = env(window=20_000)  # the history (~8K tokens) is under the soft threshold: only a forced fold folds
    st = ArmState(history=history(4, steps=30))
    assert ARMS["lcm"](st, e).events == []
    assert force_compaction(st, e, "lcm") == "engine"
    assert st.policy["lcm"]["active"]
    view = ARMS["lcm"](st, e)
    nid = st.policy["lcm"]["active"][0]
    out = apply_reply(st, e, view, {"tool_calls": [{"id": "x", "function": {"name": "expand",
                                                                            "arguments": json.dumps({"id": nid})}}]})
    assert out["recovered"] == 1 and st.history[-1]["content"].startswith(f"[{nid} ")
    assert tool_protocol_ok(ARMS["lcm"](st, e).messages)


# ----------------------------------------------------------------------------- full retention


def test_full_retention_finds_a_fact_placed_anywhere_in_the_log():
    e = env(window=3000)
    fact = "the cache TTL is 4417 seconds"
    base = history(5, steps=60)
    for pos in range(1, len(base), 7):
        hist = [dict(m) for m in base]
        hist[pos] = {**hist[pos], "content": (hist[pos].get("content") or "") + f" Note: {fact}."}
        st = ArmState(history=hist)
        view = ARMS["full_retention_search"](st, e)
        assert view.retained_tokens <= e.window and tool_protocol_ok(view.messages)
        found = retention.search_history(st, e, {"query": "cache TTL seconds"})
        assert found.ok and hist[pos]["id"] in found.text, pos
        read = retention.read_history(st, e, {"id": hist[pos]["id"]})
        assert read.ok and fact in read.text


def test_full_retention_keeps_a_bounded_window_and_serves_its_tools():
    e = env(window=3000)
    st = ArmState(history=history(6, steps=60))
    view = ARMS["full_retention_search"](st, e)
    assert view.retained_messages < len(st.history) and "session log keeps all" in view.messages[0]["content"]
    names = {t["function"]["name"] for t in view.tools}
    assert {"search_history", "read_history"} <= names and ARM_INFO["full_retention_search"].tools
    out = apply_reply(st, e, view, {"tool_calls": [{"id": "q", "function": {"name": "read_history",
                                                                            "arguments": '{"id": "s00001"}'}}]})
    assert out == {**out, "recovery": ["read_history"], "recovered": 1, "refetched": 0}


def test_every_policy_arm_is_registered_with_typed_settings():
    from eval.arm_names import ARM_NAMES, DEFAULT_ARMS
    from eval.recipe import EvalRecipe

    assert set(POLICY) <= set(ARMS) and set(POLICY) <= set(ARM_NAMES) and not set(POLICY) & set(DEFAULT_ARMS)
    for arm in POLICY:
        view = ARMS[arm](ArmState(history=history(0, steps=5)), env())
        assert isinstance(view, View) and view.retained_tokens > 0
    with pytest.raises(ValueError, match="tail_share"):
        EvalRecipe.model_validate({"workloads": [{"name": "scripted"}], "arm_settings": {"tail_share": 2}})
    with pytest.raises(ValueError, match="lcm_summary"):
        EvalRecipe.model_validate({"workloads": [{"name": "scripted"}], "arm_settings": {"lcm_summary": "llm"}})


# ----------------------------------------------------------------------------- end to end


def test_policy_arms_run_through_python_m_eval_on_the_marathon_and_probes(tmp_path):
    from eval.__main__ import main
    from eval.harness import load_results
    from eval.metrics import aggregate
    from plumbing.runs import read_manifest

    arms = json.dumps(["full", *POLICY])
    for recipe in ("marathon_demo.yaml", "probes_demo.yaml"):
        out = tmp_path / recipe
        assert main(["run", str(ROOT / "configs/eval" / recipe), "--out", str(out), f"arms={arms}",
                     "arm_settings.tail_share=0.25", "concurrency=1"]) == 0
        rows = load_results(out)
        assert {r["arm"] for r in rows} == {"full", *POLICY}
        by_arm = {a: aggregate([r["metrics"] for r in rows if r["arm"] == a]) for a in ("full", *POLICY)}
        for arm in POLICY:
            m = by_arm[arm]
            assert {"recovery_calls", "recoveries", "recovery_refetches"} <= set(m), arm
            assert m["recoveries"] <= m["recovery_calls"]
            if recipe.startswith("marathon"):  # (a probe's view grows by what a recovery opened)
                assert m["peak_context"] < by_arm["full"]["peak_context"], arm
        # The lossless arms recovered with their tools (the oracle opens what its view lacks).
        assert by_arm["lcm"]["recoveries"] > 0
        if recipe.startswith("marathon"):
            assert by_arm["full_retention_search"]["recoveries"] > 0
        manifest = read_manifest(out)
        assert manifest["config"]["arm_settings"] == {"tail_share": 0.25}
        assert manifest["arm_settings"]["lcm_fanout"] == 4 and manifest["arm_settings"]["tail_share"] == 0.25
