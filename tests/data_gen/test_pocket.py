"""The pocket curriculum: small-step families, the pocket serving profile, the model-token bound."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from data_gen.synthetic import FAMILIES, POCKET_FAMILIES, SessionSize, generate
from doctrine.kernel.profile import resolve_profile
from doctrine.render.request import request_frame
from plumbing.tokens import default_count_tokens

ROOT = Path(__file__).resolve().parents[2]
SIZE = SessionSize(steps=8, tool_output_lines=(3, 8), probes=2)


def _tokens(m: dict) -> int:
    return default_count_tokens((m.get("content") or "") + json.dumps(m.get("tool_calls") or ""))


@pytest.mark.parametrize("family", sorted(POCKET_FAMILIES))
def test_pocket_sessions_are_small_steps_with_facts(family):
    a, b = generate(family, 5, SIZE), generate(family, 5, SIZE)
    assert a.to_json() == b.to_json() and a.to_json() != generate(family, 6, SIZE).to_json()
    steps = [sum(_tokens(m) for m in a.messages[s.start:s.end]) for s in a.steps]
    assert max(steps[1:]) <= 320, steps  # one short call per step (the opening holds the task)
    assert {f.kind for f in a.facts} >= {"user_intent", "exact_values", "error_strings", "signatures", "decisions"}
    assert any(f.used_at for f in a.facts)
    assert [t["function"]["name"] for t in a.tools] == ["execute_bash", "str_replace_editor", "finish"]
    assert family not in FAMILIES  # the size-band tests of the five big families do not apply


def test_the_pocket_profile_is_a_real_profile_with_compact_tools():
    from doctrine.spec import resolve_doctrine

    doctrine = resolve_doctrine("v1")
    p = resolve_profile(1280, "pocket")
    k = p.kernel
    assert k.nudge.max_context_limit_pct == 0.85 and k.preserve_recent_messages == 3
    assert k.compress.max_summary_length == 640 and k.compress.min_compress_range == round(0.03 * 1280 * 4)
    assert p.record()["preset"] == "pocket" and p.sha256 != resolve_profile(1280, "aggressive").sha256
    full = request_frame(resolve_profile(1280, "aggressive"), doctrine, task_tools=generate("pocket_api", 0, SIZE).tools)
    small = request_frame(p, doctrine, task_tools=generate("pocket_api", 0, SIZE).tools)
    assert [t["function"]["name"] for t in small.tools] == [t["function"]["name"] for t in full.tools]
    assert "description" not in json.dumps([t["function"]["parameters"] for t in small.tools])
    assert all(t["function"]["description"] for t in small.tools)
    assert small.fixed_tokens < full.fixed_tokens - 150


def test_a_pocket_build_keeps_every_row_under_the_model_bound(tmp_path):
    from data_gen.audit import read_rows
    from data_gen.build import build_curriculum
    from data_gen.lengths import length_table
    from data_gen.recipe import DataRecipe
    from plumbing.chat_templates import choose_template
    from plumbing.models import load_tokenizer
    from plumbing.recipe_loader import load_config

    recipe = load_config(ROOT / "configs" / "data" / "pocket.yaml", DataRecipe,
                         ["sources.synthetic.sessions_per_family=3", "replay.windows=[1280]"])
    out = build_curriculum(recipe, tmp_path / "data", log=lambda *a: None, progress=False)
    manifest = json.loads((out / "manifest.json").read_text())
    rows = read_rows(out)
    kinds = {r["meta"]["kind"] for r in rows}
    assert kinds & {"emergency", "tier2"}, kinds
    assert {r["meta"]["gate"] for r in rows} == {"pocket"}
    assert {p["preset"] for p in manifest["serving_profiles"]} == {"pocket"}
    tok = load_tokenizer(recipe.length_model)
    table = length_table(rows, tok, choose_template(tok).template)
    assert max(r["max"] for r in table) <= recipe.max_model_tokens
    assert manifest["counts"]["rejects"].get("too_long_model", 0) > 0  # the bound is what keeps it so
    # list_only nudges: the range and block lists without the example call a small model copies
    nudges = [m["content"] for r in rows for m in r["messages"][-2:-1]
              if m["role"] == "user" and m["content"].startswith("[ACP]")]
    assert nudges and not any("Example: compress(" in t for t in nudges)
    assert any("Compressible ranges (" in t for t in nudges)
    assert {p["nudge_style"] for p in manifest["serving_profiles"]} == {"list_only"}
    for r in rows:  # every fold the label writes is one the pocket kernel accepts
        for c in r["messages"][-1].get("tool_calls") or []:
            if c["function"]["name"] == "compress":
                for rng in json.loads(c["function"]["arguments"])["content"]:
                    assert len(rng["summary"]) <= resolve_profile(r["meta"]["window"], "pocket").kernel.compress.max_summary_length


def test_an_adapter_trained_under_pocket_is_served_the_compact_schemas():
    from doctrine.spec import resolve_doctrine
    from train.export import served_tools

    doc = resolve_doctrine("v1")
    pocket = [resolve_profile(w, "pocket").record() for w in (1280, 1408)]
    full = served_tools(doc, "distilled", [resolve_profile(4096, "aggressive").record()])
    small = served_tools(doc, "distilled", pocket)
    assert [t["function"]["name"] for t in small] == [t["function"]["name"] for t in full]
    assert "description" in json.dumps([t["function"]["parameters"] for t in full])
    assert "description" not in json.dumps([t["function"]["parameters"] for t in small])
    assert served_tools(doc, "distilled", []) == full  # no profile recorded: the doctrine's own


def test_the_demo_curriculum_is_the_pocket_one_at_a_smaller_size():
    from data_gen.recipe import DataRecipe
    from plumbing.recipe_loader import load_config

    demo = load_config(ROOT / "configs" / "data" / "demo.yaml", DataRecipe).model_dump()
    pocket = load_config(ROOT / "configs" / "data" / "pocket.yaml", DataRecipe).model_dump()
    assert demo["sources"]["synthetic"]["sessions_per_family"] < pocket["sources"]["synthetic"]["sessions_per_family"]
    for d in (demo, pocket):
        d["sources"]["synthetic"].pop("sessions_per_family")
    assert demo == pocket  # same profile, families, bounds, mix and held-out family
