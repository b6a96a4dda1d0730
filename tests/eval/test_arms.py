"""Each arm's context policy on hand-made histories."""

from __future__ import annotations

import pytest

from doctrine.render.prompts import fill_disclosures
from eval.arms import (
    ARMS,
    CLEARED,
    SUMMARY_PREFIX,
    SUMMARY_PROMPT,
    ArmEnv,
    ArmState,
    micro_compact,
    protocol_safe_tail,
)
from eval.workloads.fixtures import demo_session
from plumbing.tokens import default_count_tokens

from .conftest import exchange_history, tool_protocol_ok


def env(window=100_000, **kw) -> tuple[ArmEnv, list]:
    asked = []

    def summarise(source, instruction):
        asked.append((source, instruction))
        return f"summary #{len(asked)}: the parser fails on a bad token; the fix is in mod_0.py."

    return ArmEnv.build(window, default_count_tokens, summarise, **kw), asked


@pytest.mark.parametrize("calls_per", [1, 3])
@pytest.mark.parametrize("n", [1, 2, 3, 5, 10, 20, 40])
def test_n_latest_never_cuts_a_tool_exchange(n, calls_per):
    e, _ = env()
    for seed in range(4):
        hist = exchange_history(25, calls_per=calls_per, seed=seed)
        view = ARMS["n_latest_10"].func(ArmState(history=hist), e, n=n)
        body = [m for m in view.messages if m["role"] != "system"]
        assert tool_protocol_ok(body)
        assert view.retained_messages <= n
        # The boundary only ever moves towards newer messages, and the kept part is a suffix.
        assert body == [{k: v for k, v in m.items() if k != "id"} for m in hist[len(hist) - len(body):]]
        assert view.retained_messages >= min(n, len(hist)) - (1 + 2 * calls_per)


def test_n_latest_keeps_the_question_outside_the_count():
    e, _ = env()
    hist = exchange_history(10) + [{"role": "user", "content": "What was in f2_0.py?", "id": "q"}]
    view = ARMS["n_latest_10"](ArmState(history=hist), e)
    assert view.messages[-1]["content"] == "What was in f2_0.py?"
    assert view.retained_messages <= 10
    assert len(view.messages) == view.retained_messages + 1
    assert view.retained_tokens == default_count_tokens(__import__("plumbing.chat_backend", fromlist=["x"]).prompt_text(view.messages, []))


def test_protocol_safe_tail_moves_past_split_groups():
    hist = exchange_history(3, calls_per=3)
    # A cut right after the first call message drops its orphaned results.
    first_call = next(i for i, m in enumerate(hist) if m.get("tool_calls"))
    start = protocol_safe_tail(hist, first_call + 1)
    assert hist[start]["role"] != "tool"
    assert start > first_call + 3


def test_full_and_sliding():
    e, _ = env(window=2000, sliding_fraction=0.5)
    hist = exchange_history(40, output_chars=200)
    full = ARMS["full"](ArmState(history=hist), e)
    assert full.retained_messages == len(hist)
    sl = ARMS["sliding"](ArmState(history=hist), e)
    assert sl.retained_tokens <= 1000 < full.retained_tokens
    assert tool_protocol_ok(sl.messages) and sl.retained_messages < len(hist)


def test_micro_compact_placeholders():
    hist = exchange_history(12, output_chars=800)
    out = micro_compact(hist, min_chars=500, keep=5)
    tool_idx = [i for i, m in enumerate(hist) if m["role"] == "tool"]
    last_user = max(i for i, m in enumerate(hist) if m["role"] == "user")
    keep = max(5, sum(1 for i in tool_idx if i > last_user))
    assert keep < len(tool_idx)
    for i in tool_idx[-keep:]:
        assert out[i]["content"] == hist[i]["content"]
    for i in tool_idx[:-keep]:
        assert out[i]["content"] == CLEARED
    assert hist[tool_idx[0]]["content"] != CLEARED  # input untouched
    # Short results are never cleared; this turn's results are all kept even beyond 5.
    short = micro_compact(exchange_history(12, output_chars=10), min_chars=500, keep=5)
    assert CLEARED not in [m["content"] for m in short]
    turn = [{"role": "user", "content": "go"}] + exchange_history(1, calls_per=8, output_chars=800)[1:]
    assert CLEARED not in [m.get("content") for m in micro_compact(turn, 500, 5)]


def test_auto_compact_triggers_at_threshold():
    hist = exchange_history(30, output_chars=400)
    size = ARMS["full"](ArmState(history=hist), env()[0]).retained_tokens
    # Window large enough that the context sits just under 80 %: no summary.
    e, asked = env(window=int(size / 0.79))
    st = ArmState(history=list(hist))
    v = ARMS["auto_compact"](st, e)
    assert not asked and st.summary is None and v.retained_tokens == size
    # Just over 80 %: one summary of everything before the last user message.
    e, asked = env(window=int(size / 0.81))
    st = ArmState(history=list(hist))
    v = ARMS["auto_compact"](st, e)
    assert len(asked) == 1 and st.summary.startswith("summary #1:")
    last_user = max(i for i, m in enumerate(hist) if m["role"] == "user")
    assert st.cut == last_user
    assert v.messages[0]["content"].startswith(SUMMARY_PREFIX)
    assert v.retained_tokens < size and v.events[0]["event"] == "auto_compact"
    assert asked[0][1] == SUMMARY_PROMPT


def test_summary_prompt_and_views_never_disclose_fill(doctrine):
    assert fill_disclosures(SUMMARY_PROMPT) == []
    from eval.backends.oracle import OracleBackend
    from eval.workloads.base import RunContext
    from eval.workloads.scripted import run_session

    ctx = RunContext(OracleBackend(), doctrine, window=4000, horizon=1)
    seen = []

    class Spy(OracleBackend):
        def _complete(self, request):
            seen.append(request)
            return super()._complete(request)

    ctx.backend = Spy()
    s = demo_session(0, steps=6, output_chars=2000)
    for arm in ARMS:
        run_session(s, arm, 0, ctx)
    assert seen
    for req in seen:
        for m in req.messages:
            assert fill_disclosures(m.get("content") or "") == [], m.get("content", "")[:200]


def test_deterministic_cadence(doctrine):
    e, asked = env(window=6000, doctrine=doctrine, deterministic_every=3)
    sess = demo_session(0, steps=10, output_chars=2400)
    st = ArmState()
    fired = []
    for i, m in enumerate(sess.messages[1:]):
        st.history.append({**m, "id": f"s{i + 1:05d}"})
        v = ARMS["deterministic"](st, e)
        if v.events:
            fired.append(st.calls)
    assert fired, "the engine never compressed"
    assert all(c % 3 == 0 for c in fired)
    assert st.compressions_succeeded == len(fired) == len(asked)
    assert not st.kernel_errors
    # The model sees the kernel's layout but neither the doctrine nor a compress tool.
    assert all(t["function"]["name"] != "compress" for t in v.tools)
    assert v.doctrine_tokens == 0


def test_kernel_arms_modes(doctrine):
    from doctrine.render.prompts import render_system_prompt
    from eval.workloads.fixtures import TASK_TOOLS

    e, _ = env(window=6000, doctrine=doctrine, task_tools=TASK_TOOLS)
    hist = exchange_history(5)
    d = ARMS["doctrine"](ArmState(history=list(hist)), e)
    s = ARMS["base_slim"](ArmState(history=list(hist)), e)
    assert d.messages[0]["content"] == render_system_prompt(doctrine, "doctrine")
    assert s.messages[0]["content"] == render_system_prompt(doctrine, "distilled")
    assert d.doctrine_tokens > s.doctrine_tokens > 0
    assert {t["function"]["name"] for t in s.tools} >= {"compress", "bash"}
