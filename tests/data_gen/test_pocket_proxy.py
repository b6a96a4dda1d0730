"""configs/data/pocket_proxy.yaml: pocket sessions replayed under the ``proxy_chat`` profile.

A row shows the request the recorded proxy would send (system message = the client's prompt
tagged m00001, the doctrine block after ``---``; client tools before the compress tools;
nameless tool results; no earlier turn's compress call), and the replay's fill is the
previous decision's request size."""

from __future__ import annotations

import json
from pathlib import Path

from data_gen.recipe import DataRecipe
from data_gen.replay import ReplayStats, replay_session
from data_gen.synthetic import generate
from data_gen.synthetic._tools import SessionSize
from doctrine.kernel.profile import POCKET_PROXY_WINDOW
from doctrine.kernel.proxy_chat import ACP_TOOL_ORDER, SYSTEM_SEPARATOR
from plumbing.recipe_loader import load_config

RECIPE = Path(__file__).resolve().parents[2] / "configs" / "data" / "pocket_proxy.yaml"


def load_recipe(path: Path) -> DataRecipe:
    return load_config(path, DataRecipe)


def test_recipe_is_the_proxy_pocket_profile():
    r = load_recipe(RECIPE)
    assert r.replay.host == "proxy_chat" and r.replay.gates == ["proxy_pocket"]
    assert r.replay.windows == [POCKET_PROXY_WINDOW]
    assert RECIPE.read_text().startswith("# dtw data configs/data/pocket_proxy.yaml --out runs/pocket_proxy/data")


def test_rows_render_as_the_proxy_sends():
    r = load_recipe(RECIPE)
    syn = r.sources.synthetic
    session = generate("pocket_api", 27000, SessionSize(steps=syn.steps, tool_output_lines=tuple(syn.tool_output_lines)))
    stats = ReplayStats()
    rows = list(replay_session(session, window=POCKET_PROXY_WINDOW, gate="proxy_pocket", host="proxy_chat",
                               nudge_style=r.nudge_style, stats=stats, usage_counter=r.replay.usage_counter))
    kinds = [s.meta["kind"] for s in rows]
    assert "emergency" in kinds and "ordinary" in kinds, kinds
    base = session.messages[0]["content"]
    fills = [s.meta["token_count"] for s in rows]
    assert fills[0] == 0 and all(f > 0 for f in fills[1:])  # the previous call's size, 0 first
    for s in rows:
        first = s.messages[0]
        assert first["role"] == "system"
        assert SYSTEM_SEPARATOR in first["content"]
        if base in first["content"]:  # until a fold covers it, the client's prompt is m00001
            assert ">m00001</acp>\n" in first["content"].split(SYSTEM_SEPARATOR)[0]
        assert [t["function"]["name"] for t in s.tools][-4:] == list(ACP_TOOL_ORDER)
        assert all("name" not in m for m in s.messages if m["role"] == "tool")
        # no compress call from an earlier step in view (only this step's own rounds)
        calls = [c["function"]["name"] for m in s.messages[:-1] for c in (m.get("tool_calls") or [])]
        assert "compress" not in calls or s.meta["action_index"] > 0, json.dumps(calls)
    emergency = next(s for s in rows if s.meta["kind"] == "emergency")
    assert '"startId": "<ID>"' in emergency.messages[-2]["content"]  # the proxy's example form


def test_rows_rebuild_for_the_eval_and_the_label_applies():
    """The eval rebuilds a proxy_chat row's kernel turn from ``meta.kernel_input`` (the client's
    system message first) and the labelled compress applies to it."""
    from doctrine.kernel.compress import apply_compression
    from doctrine.label.actions import host_ranges
    from eval.workloads.held_out.workload import rebuild_row
    from plumbing.tool_format import arguments_object

    r = load_config(RECIPE, DataRecipe)
    syn = r.sources.synthetic
    session = generate("pocket_api", 27000, SessionSize(steps=syn.steps, tool_output_lines=tuple(syn.tool_output_lines)))
    rows = [s.to_dict() for s in replay_session(session, window=POCKET_PROXY_WINDOW, gate="proxy_pocket",
                                                host="proxy_chat", nudge_style=r.nudge_style,
                                                usage_counter=r.replay.usage_counter)]
    folds = [row for row in rows if row["meta"]["kind"] == "emergency"]
    assert folds and all(rebuild_row(row)[1] == "kernel" for row in rows)
    from doctrine.spec import load_doctrine
    from eval.workloads.nudges import rerender_context

    for row in rows:  # the eval sends the row's system message as it is (same prompt mode)
        out, notes = rerender_context(row["messages"][:-1], load_doctrine("v1"), "distilled", "distilled", row["meta"])
        assert notes["system"] == "kept" and out[0] == row["messages"][0]
    for row in folds:
        rebuilt, _ = rebuild_row(row)
        args = arguments_object(row["messages"][-1]["tool_calls"][0]["function"]["arguments"])
        res = apply_compression(host_ranges(args), rebuilt.compress_messages, rebuilt.state, rebuilt.profile.kernel)
        assert res.blocks_created > 0 and not res.errors, res.errors
