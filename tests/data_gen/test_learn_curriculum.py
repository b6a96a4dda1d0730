"""The wide curriculum (configs/data/learn.yaml) as the model sees it: every label is one it could have chosen.

Builds ``configs/data/learn.yaml`` once (about 20 s on 2 cores) and reads the rows back from
parquet, so what is checked is what training reads.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from data_gen.audit import (
    audit,
    compress_ranges,
    invisible_boundaries,
    nudge_of,
    read_rows,
    visible_refs,
)
from data_gen.build import build_curriculum
from data_gen.recipe import DataRecipe
from data_gen.summary_figures import exact_items, missing_items
from doctrine.label.sources import range_sources
from plumbing.recipe_loader import load_config

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def build(tmp_path_factory):
    """The built demo curriculum, and every compress range the labeler wrote while building
    it with the text the kernel folds for that range (its source)."""
    import data_gen.replay as replay

    real, ranges = replay.replay_session, []

    def recording(*args, **kwargs):
        for sample in real(*args, **kwargs):
            act = sample.label.action
            if act.get("type") == "compress":
                content = act["args"]["content"]
                for r, src in zip(content, range_sources(sample.point, content), strict=True):
                    ranges.append((sample.meta["kind"], sample.meta["session_id"], r, src))
            yield sample

    out = tmp_path_factory.mktemp("demo") / "data"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(replay, "replay_session", recording)
        build_curriculum(load_config(ROOT / "configs/data/learn.yaml", DataRecipe, []), out,
                         log=lambda *a: None, progress=False)
    return out, ranges


@pytest.fixture(scope="module")
def built(build):
    return build[0]


@pytest.fixture(scope="module")
def rows(built):
    return read_rows(built)


@pytest.mark.parametrize("kind", ["refusal", "tier2"])
def test_inspect_shows_samples_of_one_kind(built, capsys, kind):
    from data_gen.__main__ import main

    assert main(["inspect", str(built), "--kind", kind, "--n", "2", "--plain"]) == 0
    out = capsys.readouterr().out
    heads = [ln for ln in out.splitlines() if ln.startswith("===== sample")]
    assert len(heads) == 2 and all(f": {kind} (" in h for h in heads)
    assert out.count("--- TARGET assistant") == 2
    assert main(["inspect", str(built), "--kind", "nudge"]) == 2


def test_the_audit_sees_an_invisible_boundary():
    # The instrument first: a range ending on an untagged tool message is flagged.
    row = {"meta": {"kind": "nudged_compress"}, "messages": [
        {"role": "system", "content": "sys"},
        {"role": "assistant", "content": '<acp tokens="7" type="text">m00002</acp>\nA first look.'},
        {"role": "tool", "content": "output"},
        {"role": "user", "content": "[ACP] Context maintenance.\n  m00002–m00005  4 msgs  527"},
        {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "compress", "arguments":
            '{"topic": "t", "content": [{"startId": "m00002", "endId": "m00004", "summary": "s"}]}'}}]}]}
    assert visible_refs(row) == {"m00002", "m00005"}
    assert invisible_boundaries(row) == ["m00004"]


def test_no_range_boundary_outside_the_models_view(rows):
    compress = [r for r in rows if compress_ranges(r)]
    assert len(compress) > 50
    bad = [(r["meta"]["kind"], r["meta"]["session_id"], invisible_boundaries(r)) for r in compress
           if invisible_boundaries(r)]
    assert not bad, bad[:5]


def test_one_lesson_per_situation(rows):
    for r in rows:
        kind, nudge = r["meta"]["kind"], nudge_of(r)
        if "Compression required" in nudge:  # urgent: fold first, whatever else is going on
            assert compress_ranges(r), (kind, r["meta"]["session_id"], r["meta"]["step"])
        elif nudge and not compress_ranges(r):  # a nudge not acted on is declined, never ignored
            assert r["meta"]["declined"], (kind, r["meta"]["reason"])
            first = (r["messages"][-1]["content"] or "").split("\n")[0]
            assert 0 < len(first) < 200
        if kind == "ordinary":
            assert not nudge
    tiers = [r for r in rows if r["meta"]["kind"] in ("tier2", "tier3")]
    assert tiers and all(len(x["sources"]) >= 2 for r in tiers for x in r["meta"]["ranges"])


@pytest.mark.parametrize("which", ["all", "train"])
def test_the_mix_follows_the_recipe(rows, which):
    # The curriculum as a whole (eval splits capped, never repeated) and its train split.
    sel = [r for r in rows if which == "all" or r["meta"]["split"] == which]
    shares = audit(sel)["shares"]
    assert shares.get("nudged_compress", 0) + shares.get("refusal", 0) >= 0.2, shares
    assert shares.get("spontaneous_compress", 0) > 0, shares
    assert shares.get("emergency", 0) <= 0.25, shares
    train = [r for r in rows if r["meta"]["split"] == "train"]
    assert not {r["meta"]["family"] for r in train} & {"ts_repo", "data_analysis"}  # held out


def test_the_eval_splits_keep_every_kind_they_had(rows):
    # The held-out eval reads test/heldout per kind: capping leaves each kind some rows.
    for split in ("test", "heldout"):
        kinds = audit([r for r in rows if r["meta"]["split"] == split])["kinds"]
        assert {"emergency", "ordinary", "refusal", "nudged_compress", "tier2"} <= set(kinds), (split, kinds)
        assert kinds["emergency"] >= 10 and kinds["ordinary"] >= 10, (split, kinds)


def test_summary_lines_read_as_notes(rows):
    fig = audit(rows)
    assert fig["summary_lines"] > 500
    assert fig["bare_value_line_share"] < 0.02, fig
    assert fig["under_four_words_line_share"] < 0.25, fig
    assert fig["summaries_with_duplicate_lines"] == 0 and fig["unclosed_quote_lines"] == 0, fig
    assert fig["key_values"] > 50 and fig["altered_key_values"] == 0, fig
    # No remark on the agent's own context upkeep ("I'll fold it once they are done") is
    # copied into a summary as a task fact; no bare path:line with nothing said about it.
    assert fig["upkeep_remark_lines"] == 0 and fig["lone_location_lines"] == 0, fig


def test_a_range_topic_only_where_it_differs_from_the_calls(rows):
    fig = audit(rows)
    assert fig["range_topics_repeating_the_call"] == 0, fig
    assert fig["range_topics"] > 0  # multi-range calls still name each range


def test_the_audit_sees_upkeep_remarks_and_lone_locations():
    from data_gen.summary_figures import empty_promise, lone_location, upkeep_remark

    assert upkeep_remark("I'll fold it once they are done. The bug is at a.py:9.")
    assert upkeep_remark("Declining the fold for now: m00002–m00009 holds `x`, which the next steps rely on.")
    assert not upkeep_remark("The full output of `pytest` is folded here; restore m00020 if its raw text is needed.")
    assert lone_location("inkwell/sync.py:17") and lone_location("The location (from m00004): `inkwell/api.py:28`")
    assert not lone_location("`resp = requests.get(url, timeout=5)` at inkwell/api.py:28 (from m00004).")
    assert empty_promise("The exact error (from m00009)...") and empty_promise("Ran `x` (m00009): it failed with...")
    assert not empty_promise("Ran `x` (m00009): it failed with `ValueError: bad`...")


def test_every_exact_item_occurs_in_its_source(build):
    _, ranges = build
    assert len(ranges) > 200
    classes = {cls for _, _, r, _ in ranges for cls, _ in exact_items(r["summary"])}
    assert classes == {"paths_with_lines", "error_strings", "exact_values", "signatures"}, classes
    bad = [(kind, sid, r["startId"], r["endId"], missing_items(r["summary"], src)) for kind, sid, r, src in ranges
           if missing_items(r["summary"], src)]
    assert not bad, bad[:5]
