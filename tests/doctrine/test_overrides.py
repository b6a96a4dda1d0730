"""Layered overrides: surface sections freely, load-bearing ones only behind acknowledge_risk."""

from __future__ import annotations

import json

import pytest

from doctrine.render.prompts import EXAMPLE_VIEWS, render_nudge, render_system_prompt
from doctrine.spec import DoctrineError, load_doctrine, resolve_doctrine


def test_no_overrides_is_the_base():
    assert resolve_doctrine("v1") == load_doctrine("v1")


def test_surface_override_needs_no_flag_and_changes_the_hash():
    base = load_doctrine("v1")
    doc = resolve_doctrine("v1", overrides={"nudge-gentle": "[host] Tidy-up time.\r\n"})
    assert doc.sections["nudge-gentle"] == "[host] Tidy-up time."
    assert doc.sha256 != base.sha256 and doc.base_sha256 == base.sha256
    assert doc.overrides_applied == ["override:nudge-gentle"]
    assert render_nudge(EXAMPLE_VIEWS["nudge-gentle"], doc).startswith("[host] Tidy-up time.")
    stamp = doc.to_manifest()
    assert stamp["base"] == {"version": "v1", "sha256": base.sha256}
    assert stamp["overrides_applied"] == ["override:nudge-gentle"]


def test_identical_override_keeps_the_hash():
    base = load_doctrine("v1")
    doc = resolve_doctrine("v1", overrides={"intro": base.sections["intro"]})
    assert doc.sha256 == base.sha256 and doc.overrides_applied == ["override:intro"]


@pytest.mark.parametrize("names", [["philosophy"], ["tier2", "intro"], ["how-to-compress", "tier3"]])
def test_load_bearing_override_without_flag_names_the_sections(names):
    overrides = {n: "changed" for n in names}
    with pytest.raises(DoctrineError) as err:
        resolve_doctrine("v1", overrides=overrides)
    gated = [n for n in names if n in load_doctrine("v1").load_bearing]
    for n in gated:
        assert n in str(err.value)
    assert "intro" not in str(err.value)
    assert "acknowledge" in str(err.value)


def test_load_bearing_override_with_flag():
    doc = resolve_doctrine("v1", overrides={"tier3": "TIER 3\n- tiny"}, acknowledge_risk=True)
    assert doc.sections["tier3"] == "TIER 3\n- tiny"
    assert "- tiny" in render_system_prompt(doc)
    # the distilled variant is untouched: distilled mode still renders without the rule
    assert "- tiny" not in render_system_prompt(doc, "distilled")


def test_empty_override_removes_a_section_from_the_render():
    base = load_doctrine("v1")
    doc = resolve_doctrine("v1", overrides={"summaries": ""})
    text = render_system_prompt(doc)
    assert base.sections["summaries"].splitlines()[0] not in text
    assert "\n\n\n" not in text


def test_unknown_or_bad_override_is_an_error():
    with pytest.raises(DoctrineError, match="unknown section.*'philosphy'"):
        resolve_doctrine("v1", overrides={"philosphy": "x"}, acknowledge_risk=True)
    with pytest.raises(DoctrineError, match="must be text"):
        resolve_doctrine("v1", overrides={"intro": 3})


def test_layers_prompt_set_then_explicit_overrides(tmp_path):
    (tmp_path / "manifest.json").write_text(json.dumps({"acknowledgeRisk": True, "sections": {"intro": "intro.md"}}))
    (tmp_path / "intro.md").write_text("FROM SET")
    (tmp_path / "tier2.md").write_text("SET TIER2")  # no "prompts" key: default file names are used
    doc = resolve_doctrine("v1", prompt_set=tmp_path, overrides={"intro": "FROM OVERRIDE"}, acknowledge_risk=True)
    assert doc.sections["intro"] == "FROM OVERRIDE"
    assert doc.sections["tier2"] == "SET TIER2"
    name = tmp_path.name
    assert doc.overrides_applied == [f"prompt-set={name}:tier2", f"prompt-set={name}:intro", "override:intro"]
