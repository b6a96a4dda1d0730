"""The Python kernel reproduces acp-kernel v0.0.41 op for op (fixtures/acp_parity/README.md)."""

from __future__ import annotations

import gzip
import io
import json
from collections import Counter
from pathlib import Path

import pytest

from doctrine.kernel.replay import replay_lines

FIXTURES = Path(__file__).parent / "fixtures" / "acp_parity"
SCRIPTS = sorted(FIXTURES.glob("script_*[0-9].jsonl.gz"))


def _read(path: Path) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return f.read().splitlines()


def _expected(script: Path) -> list[dict]:
    return [json.loads(x) for x in _read(script.with_name(script.name.replace(".jsonl.gz", ".expected.jsonl.gz")))]


def _first_difference(got: dict, want: dict) -> str:
    keys = [k for k in want if got.get(k) != want[k]]
    k = keys[0]
    return f"{k}: python {json.dumps(got.get(k))[:300]} vs acp-kernel {json.dumps(want[k])[:300]}"


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name.split(".")[0])
def test_every_op_matches_acp_kernel(script: Path):
    out = io.StringIO()
    replay_lines(_read(script), out, structural=True)
    got = [json.loads(x) for x in out.getvalue().splitlines()]
    want = _expected(script)
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert g == w, f"op {i} ({w['op']}) differs: {_first_difference(g, w)}"


def test_the_suite_covers_what_the_kernel_decides():
    """At least 30 scripts and 1,000 ops, with every kind of decision and outcome in them."""
    seen: Counter = Counter()
    n_ops = 0
    on_view = 0
    for script in SCRIPTS:
        on_view += sum('"on": "view"' in line for line in _read(script))
        for r in _expected(script):
            n_ops += 1
            if r["op"] == "turn":
                if r["inject"]:
                    seen[f"tier{r['tier']}" + ("-emergency" if r["emergency"] else "-gentle")] += 1
                seen["protected-range"] += bool(r["protected"])
                seen["blocked-ref"] += bool(r["blocked"])
                seen["tier-targets"] += bool(r["tier_targets"])
            else:
                seen["compress-ok" if r["blocks_created"] else "compress-failed"] += 1
                seen["compress-warned"] += bool(r["blocks_created"] and r["warnings"])
                seen["nested"] += any(b["direct_blocks"] for b in r["blocks"])
                for k in r["errors"] + r["warnings"]:
                    seen[k] += 1
    assert len(SCRIPTS) >= 30 and n_ops >= 1000
    assert on_view > 0
    for kind in ("tier1-gentle", "tier1-emergency", "tier2-emergency", "tier3-emergency",
                 "protected-range", "blocked-ref", "tier-targets", "compress-ok", "compress-failed",
                 "compress-warned", "nested", "overlap", "protected_excluded", "protected_zone",
                 "snapped_block", "snapped_message", "already_compressed", "gate_consumed",
                 "too_small", "none_resolved", "unknown_ref", "invalid_ref", "no_new_messages",
                 "summary_empty", "summary_short", "summary_long"):
        assert seen[kind] > 0, f"no {kind} in the differential suite"
    assert not [k for k in seen if k.startswith("other:")], "an error or warning with no shared kind"
