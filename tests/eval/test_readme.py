"""eval/README.md documents what the code has: the run and report commands with their flags,
every backend with its settings, every arm, the case layout (tests/foundation/test_docs.py checks it for process terms)."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "eval" / "README.md"


@pytest.fixture(scope="module")
def sections() -> dict[str, str]:
    text = README.read_text(encoding="utf-8")
    parts = re.split(r"^## ", text, flags=re.M)
    return {p.splitlines()[0].strip(): p for p in parts[1:]}


def test_the_promised_sections_are_there(sections):
    for title in ("Run", "Backends", "Arms", "Case layout", "Report"):
        assert title in sections, f"eval/README.md has no '## {title}' section"


def _flags(register) -> set[str]:
    p = argparse.ArgumentParser()
    register(p)
    return {s for a in p._actions for s in a.option_strings if s.startswith("--") and s != "--help"}


def test_run_and_report_document_every_flag(sections):
    from eval.cli import register_report, register_run

    for register, title in ((register_run, "Run"), (register_report, "Report")):
        for flag in _flags(register):
            assert flag in sections[title], f"{flag} of eval {title.lower()} is not in its section"


def test_every_backend_and_its_settings_are_documented(sections):
    from eval.backends import BACKENDS
    from eval.recipe import BACKEND_SETTINGS

    text = sections["Backends"]
    for name in BACKENDS:
        assert f"`{name}`" in text, name
        for key in BACKEND_SETTINGS[name].model_fields:
            row = next(line for line in text.splitlines() if line.startswith(f"| `{name}`"))
            assert f"`{key}`" in row, f"backend {name}: setting {key} is not in its row"


def test_every_arm_and_arm_setting_is_documented(sections):
    from eval.arms import ARM_INFO, ARMS
    from eval.recipe import ArmSettings

    text = sections["Arms"]
    rows = {line.split("|")[1].strip(): line for line in text.splitlines() if line.startswith("| `")}
    documented = {a for cell in rows for a in re.findall(r"`([a-z_0-9]+)`", cell)}
    assert set(ARMS) <= documented, set(ARMS) - documented
    for cell, line in rows.items():
        for arm in re.findall(r"`([a-z_0-9]+)`", cell):
            assert line.split("|")[2].strip() == ARM_INFO[arm].kind, arm
    for key in ArmSettings.model_fields:
        assert f"`{key}`" in text + sections["Run"], key


def test_case_layout_matches_the_harness(sections, tmp_path):
    from eval.harness import LOCK_FILE, RECIPE_FILE, case_path

    text = sections["Case layout"]
    for name in ("cases/<arm>/", "status.json", RECIPE_FILE, LOCK_FILE, "manifest.json"):
        assert name in text, name
    assert case_path(tmp_path, "doctrine", "held_out.row1.w4096", 0).name == "held_out.row1.w4096__s0.json"
    assert "<workload>.<case>.w<window>__s<seed>.json" in text

