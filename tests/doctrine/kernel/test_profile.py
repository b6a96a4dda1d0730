"""The serving profile: one definition of each gate preset, hashed, printed by the CLI."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from doctrine.kernel.profile import (
    PRESETS,
    gate_overrides,
    profile_from_record,
    resolve_profile,
    unique_records,
)


def test_reference_preset_is_acp_kernel_defaults():
    k = resolve_profile(4096, "reference").kernel
    assert (k.nudge.growth_floor, k.nudge.growth_cap, k.nudge.min_growth_floor) == (50000, 50000, 20000)
    assert (k.compress.min_compress_range, k.preserve_recent_tokens, k.preserve_recent_messages) == (5000, 5000, 5)


def test_default_scales_the_reference_and_meets_it_at_200k():
    at_200k = resolve_profile(200_000, "default").kernel
    assert at_200k == resolve_profile(200_000, "reference").kernel
    assert resolve_profile(1_000_000, "default").kernel.nudge.growth_floor == 50000  # the cap holds above
    k = resolve_profile(4096, "default").kernel
    s = 4096 / 200_000
    assert k.nudge.growth_floor == k.nudge.growth_cap == round(50000 * s) == 1024
    assert k.nudge.min_growth_floor == round(20000 * s)
    assert k.compress.min_compress_range == round(5000 * s) and k.preserve_recent_tokens == round(5000 * s)


def test_aggressive_relaxes_every_gate():
    k = resolve_profile(8192, "aggressive").kernel
    g = round(0.02 * 8192)
    assert k.nudge.growth_floor == k.nudge.growth_cap == g and k.nudge.min_growth_floor == 0
    assert k.nudge.min_growth_ratio == 0.10
    assert k.compress.min_compress_range == round(0.06 * 8192 * 4)


def test_the_hash_changes_with_every_setting_and_only_then():
    base = resolve_profile(4096)
    assert base.sha256 == resolve_profile(4096).sha256
    others = [resolve_profile(8192), resolve_profile(4096, "aggressive"), resolve_profile(4096, host="pi"),
              resolve_profile(4096, prompt_mode="doctrine"), resolve_profile(4096, nudge_style="none"),
              resolve_profile(4096, kernel_overrides={"preserve_recent_messages": 3})]
    assert len({p.sha256 for p in others} | {base.sha256}) == len(others) + 1
    assert len(unique_records([base, resolve_profile(4096), others[0]])) == 2


def test_bad_settings_fail_with_their_name():
    for kw, word in (({"preset": "extreme"}, "preset"), ({"host": "ide"}, "host"),
                     ({"prompt_mode": "x"}, "prompt mode"), ({"nudge_style": "x"}, "nudge style"),
                     ({"kernel_overrides": {"nudge": {"growthFlor": 1}}}, "growthFlor")):
        with pytest.raises(ValueError, match=word):
            resolve_profile(4096, **kw)
    with pytest.raises(ValueError, match="window"):
        gate_overrides("default", 0)


def test_a_record_round_trips_and_a_stale_hash_is_caught():
    p = resolve_profile(4096, "aggressive", "pi", kernel_overrides={"preserve_recent_messages": 3})
    assert profile_from_record(p.record()).sha256 == p.sha256
    stale = dict(p.record(), sha256="0" * 64)
    with pytest.raises(ValueError, match="does not resolve the same"):
        profile_from_record(stale)


@pytest.mark.parametrize("preset", PRESETS)
def test_cli_prints_the_same_hash(preset):
    out = subprocess.run([sys.executable, "-m", "doctrine.kernel", "profile", "--window", "4096",
                          "--preset", preset, "--host", "pi"], capture_output=True, text=True, check=True)
    rec = json.loads(out.stdout)
    assert rec["sha256"] == resolve_profile(4096, preset, "pi").sha256
    assert rec["resolved"]["kernel"]["model_context_limit"] == 4096


def test_cli_rejects_a_bad_preset_in_one_line():
    out = subprocess.run([sys.executable, "-m", "doctrine.kernel", "profile", "--window", "4096",
                          "--preset", "bogus"], capture_output=True, text=True)
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "bogus" in out.stderr
